/* SPDX-License-Identifier: MIT */
/* pybox-campaign: runs the declarative cases in campaign/cases, keeps a replay record of
 * each attempt, and renders and checks the evidence pages. Contract: docs/campaign.md.
 *   pybox-campaign run --pybox BIN --out DIR --limits FILE [--fast] CASE.json...
 *   pybox-campaign pages DIR LIMITS.md
 *   pybox-campaign check DIR LIMITS.md */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/ahead.h"
#include "../pybox/bounds.h"
#include "../pybox/box.h"
#include "../pybox/buf.h"
#include "../pybox/cgroup.h"
#include "../pybox/escape.h"
#include "../pybox/image/image.h"
#include "../pybox/key.h"
#include "../pybox/policy.h"
#include "../pybox/prepare.h"
#include "../pybox/receipt.h"
#include "../pybox/run.h"
#include "../pybox/sign.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "../pybox/version.h"
#include "evidence.h"
#include "inspect.h"

typedef struct {
    const char *bin;          /* the pybox binary */
    const char *out;          /* the evidence folder */
    char home[PATH_MAX];      /* the campaign's own installation */
    char main_home[PATH_MAX]; /* the main installation's folder (only ever read, by drivers) */
    char tmp[PATH_MAX];       /* scratch, removed at the end */
    bool tmp_made;            /* tmp exists: removed also when the set-up fails */
    pybox_state_t st;
    pybox_backend_t *engine; /* the backend whose boxes an engine holds (its socket, its fixtures) */
    char id[33];             /* this campaign */
    cJSON *host;
    char canary[33];
    char listener[80];       /* a box listening on its loopback (network-namespace fixture) */
    char listener_ns[32];    /* the native listener's namespace, "pid:<n>" */
    char host_dir[PATH_MAX]; /* a host folder holding the canary (host-folder fixture) */
    char env_entry[64];
    int scratch_n;
    const char *backend; /* the backend of the case being run (every run of it) */
    char backends[4][16];
    int nbackends;
    pid_t native_listener; /* a process of the campaign's in a network namespace of its own */
    double time_scale;     /* every deadline the campaign gives, times this (run --time-scale) */
} camp_t;

/* A deadline of the campaign's, in seconds, on this machine: a slower one (a guest under
 * software emulation) is given --time-scale, and each case's deadlines and waits, named or
 * the default, grow by it; the records say so (host.time_scale). */
static double scaled(const camp_t *c, double seconds)
{
    return seconds * c->time_scale;
}

/* The port the network-namespace fixture listens on, in its own namespace. */
#define LISTENER_PORT 7777

/* What the case's backend does for the campaign itself (the registry's description of
 * it); NULL for one whose boxes the campaign reads from the kernel (pybox_campaign_ops_t). */
static const pybox_campaign_ops_t *case_ops(const camp_t *c)
{
    const pybox_backend_ops_t *ops = c->backend != NULL ? pybox_backend_find(c->backend) : NULL;
    return ops != NULL ? ops->campaign : NULL;
}

/* ---- the engine, through the backend that has one ---- */

/* The first backend of the registry whose boxes an engine holds, open: the campaign's
 * records name that engine, and its socket is a relaxation of every backend. */
static int open_engine(camp_t *c, pybox_error_t *err)
{
    const pybox_backend_ops_t *ops;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL; i++)
        if (ops->campaign != NULL)
            return ops->open(&c->st, &c->engine, err);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "no backend holds its boxes in an engine");
}

static const char *engine_socket(const camp_t *c)
{
    const char *s = c->engine ? c->engine->ops->campaign->socket(c->engine) : NULL;
    return s ? s : "";
}

/* SIGINT, SIGTERM or SIGHUP: the run in progress is stopped (the library's runs through
 * pybox_interrupt_signal, children through their process group), no further case starts,
 * and the campaign's boxes, volumes and scratch folder are removed as at the end. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
    pybox_interrupt_signal = sig;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("campaign: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *jstr(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *j, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* {{canary}}, {{tmp}} and {{engine_socket}} in a case's strings. */
static char *subst(const camp_t *c, const char *scratch, const char *s)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    while (*s) {
        const char *open = strstr(s, "{{");
        if (open == NULL) {
            pybox_buf_adds(&b, s);
            break;
        }
        pybox_buf_add(&b, s, (size_t)(open - s));
        const char *close = strstr(open, "}}");
        if (close == NULL) {
            pybox_buf_adds(&b, open);
            break;
        }
        size_t n = (size_t)(close - open - 2);
        if (n == 6 && strncmp(open + 2, "canary", 6) == 0)
            pybox_buf_adds(&b, c->canary);
        else if (n == 3 && strncmp(open + 2, "tmp", 3) == 0)
            pybox_buf_adds(&b, scratch);
        else if (n == 7 && strncmp(open + 2, "bin_dir", 7) == 0)
            pybox_buf_add(&b, c->bin, (size_t)(strrchr(c->bin, '/') - c->bin));
        else if (n == 13 && strncmp(open + 2, "engine_socket", 13) == 0)
            pybox_buf_adds(&b, engine_socket(c));
        else
            pybox_buf_add(&b, open, n + 4);
        s = close + 2;
    }
    if (b.data == NULL)
        return strdup("");
    return b.data;
}

/* A copy of j with every string templated. */
static cJSON *subst_json(const camp_t *c, const char *scratch, const cJSON *j)
{
    cJSON *d = cJSON_Duplicate(j, 1);
    cJSON *stack[64];
    int sp = 0;
    if (d)
        stack[sp++] = d;
    while (sp > 0) {
        cJSON *x = stack[--sp];
        if (cJSON_IsString(x)) {
            char *t = subst(c, scratch, x->valuestring);
            cJSON_SetValuestring(x, t);
            free(t);
        }
        for (cJSON *ch = x->child; ch && sp < 64; ch = ch->next)
            stack[sp++] = ch;
    }
    return d;
}

/* ---- child processes ---- */

typedef struct {
    int exit_code; /* 128+N when killed by signal N; -1 when it could not run */
    double wall_s;
    pybox_buf_t out, err;
    bool timed_out;
} proc_t;

static void proc_free(proc_t *p)
{
    pybox_buf_free(&p->out);
    pybox_buf_free(&p->err);
}

/* Run argv with input on stdin and extra environment entries; capture both outputs
 * (each bounded); kill it after timeout_s. */
static void proc_run(const char *const *argv, const char *const *env, const char *input, size_t input_len,
                     double timeout_s, proc_t *p)
{
    memset(p, 0, sizeof *p);
    pybox_buf_init(&p->out, 64 * 1024 * 1024);
    pybox_buf_init(&p->err, 4 * 1024 * 1024);
    p->exit_code = -1;
    int in[2], o[2], e[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0)
        return;
    double t0 = pybox_now_s();
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid == 0) {
        /* Its own process group, so a driver's own children end with it. */
        setpgid(0, 0);
        dup2(in[0], 0);
        dup2(o[1], 1);
        dup2(e[1], 2);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(o[1]);
    close(e[1]);
    (void)fcntl(in[1], F_SETFL, O_NONBLOCK);
    size_t off = 0;
    int fds[3] = {o[0], e[0], input_len ? in[1] : -1};
    if (input_len == 0)
        close(in[1]);
    pybox_buf_t *sink[2] = {&p->out, &p->err};
    double termed_at = 0;
    while (fds[0] >= 0 || fds[1] >= 0) {
        double left = timeout_s - (pybox_now_s() - t0);
        /* Out of time, or the campaign is interrupted: SIGTERM to the group (a driver's
         * trap cleans up), SIGKILL 15 s later. */
        if ((left <= 0 || interrupted) && !p->timed_out) {
            p->timed_out = true;
            termed_at = pybox_now_s();
            kill(-pid, SIGTERM);
        } else if (p->timed_out && termed_at > 0 && pybox_now_s() - termed_at > 15) {
            kill(-pid, SIGKILL);
            termed_at = 0;
        }
        struct pollfd pf[3];
        for (int i = 0; i < 3; i++)
            pf[i] = (struct pollfd){.fd = fds[i], .events = (short)(i < 2 ? POLLIN : POLLOUT)};
        int pr = poll(pf, 3, p->timed_out || left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i] < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t n = read(fds[i], buf, sizeof buf);
            if (n > 0) {
                pybox_buf_add(sink[i], buf, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
        if (fds[2] >= 0 && (pf[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = write(fds[2], input + off, input_len - off);
            if (n > 0)
                off += (size_t)n;
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || off == input_len) {
                close(fds[2]);
                fds[2] = -1;
            }
        }
    }
    if (fds[2] >= 0)
        close(fds[2]);
    int st = 0;
    waitpid(pid, &st, 0);
    p->wall_s = pybox_now_s() - t0;
    p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The network-namespace fixture: a box with no network at all, listening on its own
 * loopback and answering with the canary. */
static int listener(camp_t *c, pybox_error_t *err)
{
    if (c->listener[0])
        return 0;
    if (c->engine == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "no backend of the campaign holds boxes in an engine");
    return c->engine->ops->campaign->listener(c->engine, &c->st, c->canary, LISTENER_PORT, c->listener,
                                              sizeof c->listener, err);
}

/* ---- the native backend's boxes, as the kernel shows them ---- */

/* The installation's staging folder. */
static void native_staging(const camp_t *c, char staging[PATH_MAX])
{
    if (pybox_fmt(staging, PATH_MAX, "%s/native/staging", c->home) < 0)
        staging[0] = '\0';
}

/* A backend of the campaign's installation, asked through the box interface: its boxes'
 * cgroups wherever this host places them (docs/cgroups.md). */
static pybox_backend_t *backend_of(const camp_t *c, const char *name)
{
    const pybox_backend_ops_t *ops = pybox_backend_find(name);
    pybox_backend_t *be = NULL;
    pybox_error_t err = {0};
    if (ops == NULL || ops->open(&c->st, &be, &err) < 0)
        return NULL;
    return be;
}

/* The campaign's boxes a backend still has, as its own leftovers listing finds them (the
 * network-namespace fixture's box left out). *out is malloc'd. */
static size_t boxes_of(const camp_t *c, const char *name, pybox_leftover_t **out)
{
    *out = NULL;
    pybox_backend_t *be = backend_of(c, name);
    size_t n = 0;
    pybox_error_t err = {0};
    if (be != NULL && be->ops->list_leftovers(be, c->st.install_id, out, &n, &err) < 0)
        n = 0;
    pybox_backend_close(be);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp((*out)[i].kind, "box") == 0 && strcmp((*out)[i].id, c->listener) != 0)
            (*out)[k++] = (*out)[i];
    return k;
}

/* The processes of a run's box (host pids, from its cgroup where its backend places it),
 * at most max. */
static int box_pids(const camp_t *c, const char *name, const char *run, pid_t *pids, int max)
{
    char path[PATH_MAX + 64];
    pybox_cgroup_loc_t loc;
    pybox_error_t err = {0};
    pybox_backend_t *be = backend_of(c, name);
    int rc = be != NULL ? be->ops->run_cgroup(be, run, &loc, &err) : -1;
    pybox_backend_close(be);
    if (rc < 0 || pybox_fmt(path, sizeof path, "%s/cgroup.procs", loc.dir[PYBOX_CG_MEMORY]) < 0)
        return 0;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    int n = 0;
    char line[32];
    while (n < max && fgets(line, sizeof line, f) != NULL) {
        uint64_t v;
        line[strcspn(line, "\n")] = '\0';
        if (pybox_parse_u64(line, &v) == 0 && v > 0)
            pids[n++] = (pid_t)v;
    }
    fclose(f);
    return n;
}

/* The first box of the case's backend that runs something: id gets its id in the backend,
 * run its run id. */
static bool running_box(camp_t *c, char *id, char *run, size_t len)
{
    pybox_leftover_t *v = NULL;
    size_t n = boxes_of(c, c->backend, &v);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) {
        pid_t pid;
        if (v[i].run_id[0] && box_pids(c, c->backend, v[i].run_id, &pid, 1) == 1) {
            snprintf(id, len, "%s", v[i].id);
            snprintf(run, len, "%s", v[i].run_id);
            found = true;
        }
    }
    free(v);
    return found;
}

/* Whether a run's box (on the case's backend) runs a process whose command line holds
 * marker, as the kernel shows it. */
static bool box_shows(const camp_t *c, const char *run, const char *marker)
{
    pid_t pids[256];
    int n = box_pids(c, c->backend, run, pids, 256);
    for (int i = 0; i < n; i++) {
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pids[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        for (ssize_t k = 0; k < r; k++)
            if (cmd[k] == '\0')
                cmd[k] = ' ';
        cmd[r > 0 ? r : 0] = '\0';
        if (strstr(cmd, marker) != NULL)
            return true;
    }
    return false;
}

/* The campaign's boxes a backend still has (by its leftovers listing). */
static int boxes_left_on(const camp_t *c, const char *name)
{
    pybox_leftover_t *v = NULL;
    size_t n = boxes_of(c, name, &v);
    free(v);
    return (int)n;
}

/* The campaign's leftovers on a backend whose boxes it reads from the kernel (no
 * campaign operations) removed, as `pybox cleanup` would after their expiry: what still
 * runs in them killed first (they are the campaign's own boxes). */
static int kernel_sweep_on(camp_t *c, const pybox_backend_ops_t *ops)
{
    const char *name = ops->name;
    int left = boxes_left_on(c, name);
    pybox_backend_t *be = NULL;
    pybox_error_t err = {0};
    if (ops->open(&c->st, &be, &err) < 0) {
        say("%s leftovers: %s", name, err.msg);
        return left;
    }
    pybox_leftover_t *v = NULL;
    size_t n = 0;
    if ((left > 0 || c->native_listener > 0) && ops->list_leftovers(be, c->st.install_id, &v, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++) {
            pid_t pids[256];
            int np = box_pids(c, name, v[i].run_id, pids, 256);
            for (int k = 0; k < np; k++)
                kill(pids[k], SIGKILL);
            pybox_leftover_t l = v[i];
            l.expires = 1; /* the campaign's own: removed now, as if long expired */
            bool gone = false;
            if (ops->remove_leftover(be, &l, &gone, &err) < 0 || !gone)
                say("%s leftover %s: not removed: %s", name, v[i].run_id, err.msg);
        }
        free(v);
    }
    /* The installation's cgroup parents, whatever was left: the campaign's alone (none
     * under systemd, whose scopes go with their boxes). */
    if (ops->forget != NULL && ops->forget(be, c->st.install_id, &err) < 0)
        say("%s cgroup parents: %s", name, err.msg);
    pybox_backend_close(be);
    return left;
}

/* The same on every such backend of the registry. */
static int kernel_sweep(camp_t *c)
{
    const pybox_backend_ops_t *ops;
    int left = 0;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL; i++)
        if (ops->campaign == NULL)
            left += kernel_sweep_on(c, ops);
    return left;
}

/* The native network-namespace fixture: a process of the campaign in a network
 * namespace of its own, loopback up, answering on 127.0.0.1:LISTENER_PORT with the canary. */
static int native_listener(camp_t *c, pybox_error_t *err)
{
    if (c->native_listener > 0)
        return 0;
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "pipe2");
    pid_t pid = fork();
    if (pid < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fork");
    if (pid == 0) {
        close(ready[0]);
        int sk = -1, ls = -1;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, "lo", 3);
        ifr.ifr_flags = IFF_UP | IFF_RUNNING;
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(LISTENER_PORT)};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (unshare(CLONE_NEWNET) < 0 || (sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
            ioctl(sk, SIOCSIFFLAGS, &ifr) < 0 || (ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
            bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 16) < 0 || write(ready[1], "r", 1) != 1)
            _exit(1);
        for (;;) {
            int cl = accept(ls, NULL, NULL);
            if (cl < 0)
                continue;
            if (pybox_write_all(cl, c->canary, strlen(c->canary)) < 0) {
                /* the client left: nothing to answer */
            }
            close(cl);
        }
    }
    close(ready[1]);
    char b;
    ssize_t r = read(ready[0], &b, 1);
    close(ready[0]);
    if (r != 1) {
        waitpid(pid, NULL, 0);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "the native listener did not start");
    }
    c->native_listener = pid;
    snprintf(c->listener_ns, sizeof c->listener_ns, "pid:%d", (int)pid);
    return 0;
}

/* ---- boxes of the campaign, whichever backend made them ---- */

static int boxes_left(camp_t *c)
{
    return boxes_left_on(c, c->backend);
}

/* ---- one run of a case ---- */

static int read_text(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    bool over = false;
    pybox_error_t err = {0};
    int rc = pybox_read_bounded(fd, PYBOX_GUEST_PROGRAM_MAX, out, len, &over, &err);
    close(fd);
    return rc < 0 || over ? -1 : 0;
}

/* Relaxations by name into a policy. Returns -1 with err for an unknown one. */
static int relax(camp_t *c, pybox_policy_t *p, const char *name, pybox_error_t *err)
{
    unsigned bit = pybox_policy_relax_bit(name);
    if (bit) {
        p->relax |= bit;
    } else if (strcmp(name, "network-namespace") == 0) {
        if (case_ops(c) == NULL) {
            if (native_listener(c, err) < 0)
                return -1;
            p->relax_netns = c->listener_ns;
        } else {
            if (listener(c, err) < 0)
                return -1;
            p->relax_netns = c->listener;
        }
    } else if (strcmp(name, "host-folder") == 0) {
        p->relax_bind = c->host_dir;
    } else if (strcmp(name, "environment") == 0) {
        p->relax_env = c->env_entry;
    } else if (strcmp(name, "engine-socket") == 0) {
        p->relax_socket = engine_socket(c);
    } else if (strncmp(name, "cap:", 4) == 0) {
        p->relax_cap = name + 4;
    } else if (strncmp(name, "unmask:", 7) == 0 && pybox_policy_is_masked_path(name + 7)) {
        p->relax_unmask = name + 7;
    } else {
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown relaxation \"%s\"", name);
    }
    return 0;
}

static void list_names(pybox_buf_t *b, const cJSON *a)
{
    const cJSON *x;
    cJSON_ArrayForEach (x, a) {
        if (!cJSON_IsString(x))
            continue;
        if (b->len)
            pybox_buf_adds(b, ", ");
        pybox_buf_adds(b, x->valuestring);
    }
}

static const char *program_of(const cJSON *spec, const cJSON *cs)
{
    const char *p = jstr(spec, "program");
    return p ? p : jstr(cs, "program");
}

/* A library run, prepared by the core as pybox exec would be: the case's image and
 * limits; then its relaxations (the case's base and the run's own) on the prepared
 * policy. The relaxations are noted in rec; -1 with rec's "error" set. */
static int lib_prepare(camp_t *c, const cJSON *cs, const cJSON *spec, const char *scratch, const char *program,
                       pybox_ready_t *rd, cJSON *rec)
{
    pybox_error_t err = {0};
    const cJSON *lists[2] = {cJSON_GetObjectItemCaseSensitive(cs, "base"),
                             cJSON_GetObjectItemCaseSensitive(spec, "relax")};
    /* Relaxations that act while the run is prepared (the output folder's owner rule)
     * go in with the request; every one goes on the policy below. */
    unsigned early = 0;
    for (int k = 0; k < 2; k++) {
        const cJSON *x;
        cJSON_ArrayForEach (x, lists[k])
            early |= cJSON_IsString(x) ? pybox_policy_relax_bit(x->valuestring) & PYBOX_RELAX_OUTPUT_OWNER : 0;
    }
    _cleanup_free_ char *output = jstr(spec, "output") && scratch ? subst(c, scratch, jstr(spec, "output")) : NULL;
    const char *image = jstr(spec, "image") ? jstr(spec, "image") : jstr(cs, "image") ? jstr(cs, "image") : "stdlib";
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(cs, "limits");
    pybox_request_t rq = {
        .program = program,
        .program_len = strlen(program),
        .image = image,
        .backend = c->backend,
        .memory_bytes = (int64_t)(jnum(lim, "memory_mib", (double)PYBOX_DEFAULT_MEMORY / 1048576) * 1048576),
        .pids = (int64_t)jnum(lim, "pids", PYBOX_DEFAULT_PIDS),
        .nano_cpus = (int64_t)(jnum(lim, "cpus", (double)PYBOX_DEFAULT_NANO_CPUS / 1e9) * 1e9),
        .timeout_ms = (int64_t)(scaled(c, jnum(lim, "timeout_s", PYBOX_DEFAULT_TIMEOUT_MS / 1000.0)) * 1000),
        .output = output,
        .relax = early,
    };
    if (pybox_prepare(&rq, rd, &err) < 0) {
        cJSON_AddStringToObject(rec, "error", err.msg);
        return -1;
    }
    pybox_buf_t removed;
    pybox_buf_init(&removed, 0);
    for (int k = 0; k < 2; k++) {
        const cJSON *x;
        cJSON_ArrayForEach (x, lists[k]) {
            if (!cJSON_IsString(x) || relax(c, &rd->run.policy, x->valuestring, &err) < 0) {
                cJSON_AddStringToObject(rec, "error", err.msg[0] ? err.msg : "a relaxation is not a string");
                pybox_buf_free(&removed);
                return -1;
            }
        }
    }
    list_names(&removed, lists[1]);
    char relaxed[256];
    pybox_policy_relaxed(&rd->run.policy, relaxed, sizeof relaxed);
    cJSON_AddStringToObject(rec, "relaxed", relaxed);
    cJSON_AddStringToObject(rec, "removed", removed.data ? removed.data : "");
    pybox_buf_free(&removed);
    return 0;
}

static void library_run(camp_t *c, const cJSON *cs, const cJSON *spec, const char *scratch, const char *program,
                        cJSON *rec)
{
    pybox_ready_t rd;
    pybox_ready_init(&rd);
    if (lib_prepare(c, cs, spec, scratch, program, &rd, rec) == 0) {
        pybox_run_result_t res;
        double t0 = pybox_now_s();
        pybox_ready_run(&rd, &res);
        cJSON_AddNumberToObject(rec, "wall_s", pybox_now_s() - t0);
        cJSON_AddNumberToObject(rec, "exit_code", res.exit_code);
        cJSON *r = pybox_receipt_json(&res);
        pybox_sign_installation(r, &c->st); /* as pybox exec signs its own */
        cJSON_AddItemToObject(rec, "receipt", r);
        pybox_run_result_free(&res);
    }
    pybox_ready_free(&rd);
}

/* ---- the same run inside a session ---- */

/* What a session's first call leaves behind before the run's program runs as its second. */
#define SESSION_FIRST_CALL "campaign_state = [1, 2, 3]\n"

/* A library run inside a session (docs/sessions.md): a session's box made with the run's
 * image, limits and relaxations, a first call that leaves state in its interpreter, then
 * the run's program as the session's second call, whose receipt the run's expectations
 * read; then the session is closed and its own receipt kept beside (session_receipt). */
static void session_run(camp_t *c, const cJSON *cs, const cJSON *spec, const char *scratch, const char *program,
                        cJSON *rec)
{
    pybox_ready_t rd;
    pybox_ready_init(&rd);
    if (lib_prepare(c, cs, spec, scratch, program, &rd, rec) < 0) {
        pybox_ready_free(&rd);
        return;
    }
    pybox_error_t err = {0};
    /* The box's own clocks: room for both calls and the close. */
    int64_t life = 2 * rd.run.policy.timeout_ms + (int64_t)(scaled(c, 30) * 1000);
    rd.run.policy.box_wait_ms = life;
    rd.run.policy.box_life_ms = life;
    double t0 = pybox_now_s();
    pybox_ahead_t *box = NULL;
    char id[33];
    if (pybox_random_hex(16, id, &err) < 0 || pybox_ahead_open(rd.be, &rd.run, &box, &err) < 0) {
        cJSON_AddStringToObject(rec, "error", err.msg);
        pybox_ready_free(&rd);
        return;
    }
    pybox_ahead_set_session(box, id);
    pybox_run_request_t first = rd.run;
    first.program = SESSION_FIRST_CALL;
    first.program_len = strlen(SESSION_FIRST_CALL);
    first.output = NULL;
    first.inputs = NULL;
    pybox_run_result_t res;
    bool ended = false;
    pybox_ahead_call(box, &first, &res, &ended);
    cJSON *fr = pybox_receipt_json(&res);
    pybox_sign_installation(fr, &c->st);
    cJSON_AddItemToObject(rec, "first_receipt", fr);
    pybox_run_result_free(&res);
    if (ended) {
        cJSON_AddStringToObject(rec, "error", "the session's first call ended it (first_receipt says how)");
        pybox_ready_free(&rd);
        return;
    }
    /* the call's own verdict is its receipt's, which the expectations read */
    pybox_ahead_call(box, &rd.run, &res, &ended);
    cJSON_AddNumberToObject(rec, "wall_s", pybox_now_s() - t0);
    cJSON_AddNumberToObject(rec, "exit_code", res.exit_code);
    cJSON *r = pybox_receipt_json(&res);
    pybox_sign_installation(r, &c->st);
    cJSON_AddItemToObject(rec, "receipt", r);
    pybox_run_result_free(&res);
    if (!ended) {
        pybox_ahead_close(box, &res);
        cJSON *sr = pybox_receipt_json(&res);
        pybox_sign_installation(sr, &c->st);
        cJSON_AddItemToObject(rec, "session_receipt", sr);
        pybox_run_result_free(&res);
    }
    pybox_ready_free(&rd);
}

/* The runs a case has: its own, and for a restriction check whose runs all go through
 * the library, each again inside a session ("<name> in a session"), with the same
 * expectations and that it was the session's second call, unless the case says why not
 * ("session_not": its reason). */
static cJSON *runs_planned(const cJSON *cs)
{
    cJSON *plan = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cs, "runs"), 1);
    if (plan == NULL)
        return cJSON_CreateArray();
    const char *kind = jstr(cs, "kind");
    if (kind == NULL || strcmp(kind, "restriction") != 0 || jstr(cs, "session_not") != NULL)
        return plan;
    const cJSON *spec;
    cJSON_ArrayForEach (spec, plan)
        if (jstr(spec, "via") == NULL || strcmp(jstr(spec, "via"), "library") != 0)
            return plan;
    int n = cJSON_GetArraySize(plan);
    for (int i = 0; i < n; i++) {
        spec = cJSON_GetArrayItem(plan, i);
        cJSON *s = cJSON_Duplicate(spec, 1);
        char name[128];
        snprintf(name, sizeof name, "%s in a session", jstr(spec, "name") ? jstr(spec, "name") : "run");
        cJSON_ReplaceItemInObjectCaseSensitive(s, "name", cJSON_CreateString(name));
        cJSON_ReplaceItemInObjectCaseSensitive(s, "via", cJSON_CreateString("session"));
        cJSON *ex = cJSON_GetObjectItemCaseSensitive(s, "expect");
        if (!cJSON_IsArray(ex))
            ex = cJSON_AddArrayToObject(s, "expect");
        cJSON *call = cJSON_CreateObject();
        cJSON_AddStringToObject(call, "path", "receipt.seen.start.session.call");
        cJSON_AddStringToObject(call, "op", "eq");
        cJSON_AddNumberToObject(call, "value", 2);
        cJSON_AddItemToArray(ex, call);
        cJSON *own = cJSON_GetObjectItemCaseSensitive(s, "expect_by_backend");
        cJSON *b;
        cJSON_ArrayForEach (b, own)
            if (cJSON_IsArray(b))
                cJSON_AddItemToArray(b, cJSON_Duplicate(call, 1));
        cJSON_AddItemToArray(plan, s);
    }
    return plan;
}

/* ---- two boxes at once: one holds, the other is measured ---- */

typedef struct {
    pybox_ready_t rd;
    pybox_run_result_t res;
} holder_t;

static void *hold_main(void *arg)
{
    holder_t *h = arg;
    pybox_ready_run(&h->rd, &h->res);
    return NULL;
}

/* The holder (`hold_file`) runs through the library in a box of its own, with the same
 * relaxations as the measured run; once its process list shows `hold_marker` (it holds
 * what it came to hold), the run's own program runs in a second box beside it. Then the
 * holder is cancelled. Its receipt goes into the record too (`hold_receipt`), and
 * `observed.uids_differ` says whether the two programs ran as different users. */
static void pair_run(camp_t *c, const cJSON *cs, const cJSON *spec, const char *program, cJSON *rec)
{
    cJSON *obs = cJSON_AddObjectToObject(rec, "observed");
    const char *hf = jstr(spec, "hold_file"), *marker = jstr(spec, "hold_marker");
    char *hold = NULL;
    size_t hlen = 0;
    if (hf == NULL || marker == NULL || read_text(hf, &hold, &hlen) < 0) {
        cJSON_AddStringToObject(rec, "error", "a pair run needs a readable hold_file and a hold_marker");
        free(hold);
        return;
    }
    cJSON_AddStringToObject(rec, "hold_program", hold);
    static holder_t h;
    memset(&h, 0, sizeof h);
    pybox_ready_init(&h.rd);
    cJSON *ignore = cJSON_CreateObject();
    int cancel[2] = {-1, -1};
    int lr = lib_prepare(c, cs, spec, NULL, hold, &h.rd, ignore);
    cJSON_Delete(ignore);
    if (lr < 0 || pipe2(cancel, O_CLOEXEC) < 0) {
        cJSON_AddStringToObject(rec, "error", "the holding box could not be prepared");
        pybox_ready_free(&h.rd);
        free(hold);
        if (cancel[0] >= 0) {
            close(cancel[0]);
            close(cancel[1]);
        }
        return;
    }
    pybox_policy_set_timeout(&h.rd.run.policy, (int64_t)(scaled(c, jnum(spec, "hold_timeout_s", 60)) * 1000));
    h.rd.run.cancellable = true;
    h.rd.run.cancel_fd = cancel[0];
    double t0 = pybox_now_s();
    pthread_t t;
    if (pthread_create(&t, NULL, hold_main, &h) != 0) {
        cJSON_AddStringToObject(rec, "error", "the holding box's thread could not start");
        pybox_ready_free(&h.rd);
        free(hold);
        close(cancel[0]);
        close(cancel[1]);
        return;
    }
    /* Polled, as the engine has no event for "a process started in a box". */
    char id[PYBOX_ID_MAX] = "", run[PYBOX_ID_MAX] = "";
    bool held = false;
    while (!held && !interrupted && pybox_now_s() - t0 < scaled(c, 60)) {
        if (!id[0] && !running_box(c, id, run, sizeof id))
            id[0] = '\0';
        held = id[0] && box_shows(c, run, marker);
        if (!held) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cJSON_AddBoolToObject(obs, "held", held);
    cJSON_AddNumberToObject(obs, "held_after_s", pybox_now_s() - t0);
    if (held)
        library_run(c, cs, spec, NULL, program, rec);
    else
        cJSON_AddStringToObject(rec, "error", "the holding box never showed its marker");
    if (pybox_write_all(cancel[1], "x", 1) < 0) {
        char etext[128];
        say("pair run: the holding box could not be cancelled: %s", pybox_strerror(errno, etext, sizeof etext));
    }
    pthread_join(t, NULL);
    pybox_ready_free(&h.rd);
    close(cancel[0]);
    close(cancel[1]);
    cJSON *hr = pybox_receipt_json(&h.res);
    pybox_sign_installation(hr, &c->st);
    unsigned huid = pybox_policy_program_uid(&h.res.policy);
    pybox_run_result_free(&h.res);
    const cJSON *vuid = ev_path(rec, "receipt.asked.policy.program_uid");
    cJSON_AddNumberToObject(obs, "hold_uid", huid);
    cJSON_AddBoolToObject(obs, "uids_differ", cJSON_IsNumber(vuid) && (unsigned)vuid->valuedouble != huid);
    cJSON_AddItemToObject(rec, "hold_receipt", hr);
    free(hold);
}

/* The SHA-256 (hex) of a regular file's bytes, or "" when it cannot be read. */
static void file_sha256(const char *path, char out[65])
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char *data = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    if (pybox_read_bounded(fd, 64 * 1024 * 1024, &data, &len, &over, &err) == 0 && !over)
        pybox_sha256_hex(data, len, out);
    free(data);
    close(fd);
}

/* The output folder as it is after the run (and after the run's "after" steps): its
 * entries, and whether every file the receipt lists as returned is there with the
 * SHA-256 the receipt gives (out_as_listed; true when it lists none). */
static void list_out(const char *dir, const cJSON *receipt, cJSON *observed)
{
    cJSON *files = cJSON_AddArrayToObject(observed, "out_files");
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
            continue;
        char p[PATH_MAX];
        struct stat sb;
        if (pybox_fmt(p, sizeof p, "%s/%s", dir, de->d_name) < 0 || lstat(p, &sb) < 0)
            continue;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", de->d_name);
        cJSON_AddNumberToObject(f, "bytes", (double)sb.st_size);
        cJSON_AddNumberToObject(f, "mode", sb.st_mode & 07777);
        cJSON_AddItemToArray(files, f);
        n++;
    }
    if (d)
        closedir(d);
    cJSON_AddNumberToObject(observed, "out_count", n);
    cJSON_AddBoolToObject(observed, "out_exists", d != NULL);
    struct stat sb;
    if (lstat(dir, &sb) == 0)
        cJSON_AddNumberToObject(observed, "out_mode", sb.st_mode & 07777);
    int listed = 0;
    bool same = true;
    const cJSON *x;
    cJSON_ArrayForEach (x, ev_path(receipt, "seen.files.returned")) {
        const char *name = jstr(x, "name"), *sha = jstr(x, "sha256");
        char p[PATH_MAX], got[65];
        listed++;
        if (name == NULL || sha == NULL || pybox_fmt(p, sizeof p, "%s/%s", dir, name) < 0) {
            same = false;
            continue;
        }
        file_sha256(p, got);
        same = same && strcmp(got, sha) == 0;
    }
    cJSON_AddNumberToObject(observed, "out_listed", listed);
    cJSON_AddBoolToObject(observed, "out_as_listed", same);
}

/* A command a case writes as a JSON array of strings, as an argv (NULL-ended, at most
 * ARGV_MAX words: what is past them, or not a string, is left out). Returns argc. */
#define ARGV_MAX 31
static int argv_of(const cJSON *words, const char **argv)
{
    int argc = 0;
    const cJSON *a;
    cJSON_ArrayForEach (a, words)
        if (cJSON_IsString(a) && argc < ARGV_MAX)
            argv[argc++] = a->valuestring;
    argv[argc] = NULL;
    return argc;
}

/* A run's "before" or "after" steps (each an argv, templates filled; the campaign runs
 * them as root, and a step becomes another user with setpriv): each one's exit code and
 * output into observed.<key>, the outputs joined in observed.<key>_stdout. */
static void steps(camp_t *c, const cJSON *spec, const char *scratch, const char *key, cJSON *rec)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(spec, key);
    if (list == NULL)
        return;
    cJSON *obs = cJSON_GetObjectItemCaseSensitive(rec, "observed");
    if (obs == NULL)
        obs = cJSON_AddObjectToObject(rec, "observed");
    cJSON *done = cJSON_AddArrayToObject(obs, key);
    pybox_buf_t all;
    pybox_buf_init(&all, 0);
    const cJSON *step;
    cJSON_ArrayForEach (step, list) {
        cJSON *argv_j = subst_json(c, scratch, step);
        const char *argv[ARGV_MAX + 1];
        int argc = argv_of(argv_j, argv);
        proc_t p;
        if (argc > 0)
            proc_run(argv, NULL, NULL, 0, 60, &p);
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "argv", argv_j);
        cJSON_AddNumberToObject(d, "exit_code", argc > 0 ? p.exit_code : -1);
        cJSON_AddStringToObject(d, "stdout", argc > 0 && p.out.data ? p.out.data : "");
        cJSON_AddStringToObject(d, "stderr", argc > 0 && p.err.data ? p.err.data : "");
        cJSON_AddItemToArray(done, d);
        if (argc > 0 && p.out.data)
            pybox_buf_adds(&all, p.out.data);
        if (argc > 0)
            proc_free(&p);
        else
            cJSON_AddStringToObject(rec, "error", "a step is not an argv");
    }
    char name[32];
    snprintf(name, sizeof name, "%s_stdout", key);
    cJSON_AddStringToObject(obs, name, all.data ? all.data : "");
    pybox_buf_free(&all);
}

/* UTF-8 text of characters below U+0100 as Latin-1 bytes; -1 when it has others. */
static int to_latin1(const char *utf8, char *out, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; utf8[i] != '\0';) {
        unsigned cp;
        size_t n = pybox_utf8_seq((const unsigned char *)utf8 + i, strlen(utf8 + i), &cp);
        if (n == 0 || cp > 0xff || o + 1 >= len)
            return -1;
        out[o++] = (char)cp;
        i += n;
    }
    out[o] = '\0';
    return 0;
}

static void exec_run(camp_t *c, const cJSON *spec, const char *program, const char *scratch, cJSON *rec)
{
    const char *argv[64] = {c->bin, "exec", "--json"};
    int argc = 3;
    cJSON *args = subst_json(c, scratch, cJSON_GetObjectItemCaseSensitive(spec, "args"));
    const cJSON *a;
    /* The run's deadline, named or PyBox's default, grown by the campaign's time scale. */
    char deadline[32] = "";
    bool named = false;
    const char *prev = "";
    cJSON_ArrayForEach (a, args) {
        if (!cJSON_IsString(a) || argc >= 60)
            continue;
        const char *v = a->valuestring;
        if (strcmp(prev, "--timeout") == 0 && !named) {
            named = true;
            if (c->time_scale != 1) {
                snprintf(deadline, sizeof deadline, "%g", scaled(c, strtod(v, NULL)));
                v = deadline;
            }
        }
        argv[argc++] = v;
        prev = a->valuestring;
    }
    if (!named && c->time_scale != 1) {
        snprintf(deadline, sizeof deadline, "%g", scaled(c, PYBOX_DEFAULT_TIMEOUT_MS / 1000.0));
        argv[argc++] = "--timeout";
        argv[argc++] = deadline;
    }
    argv[argc] = NULL;
    cJSON_AddItemToObject(rec, "argv", cJSON_Duplicate(args, 1));
    /* Input files the run needs, written into its scratch folder first. */
    const cJSON *f;
    cJSON_ArrayForEach (f, cJSON_GetObjectItemCaseSensitive(spec, "files")) {
        const char *name = jstr(f, "name"), *content = jstr(f, "content");
        char p[PATH_MAX], latin1[NAME_MAX * 4];
        /* A name that is not UTF-8 cannot be written in JSON: "name_encoding": "latin-1"
         * writes each character of the name (all below U+0100) as one byte. */
        const char *enc = jstr(f, "name_encoding");
        if (name && enc && (strcmp(enc, "latin-1") != 0 || to_latin1(name, latin1, sizeof latin1) < 0)) {
            if (!cJSON_HasObjectItem(rec, "error"))
                cJSON_AddStringToObject(rec, "error",
                                        "a file's name_encoding is not latin-1 or its name does not fit it");
            continue;
        }
        if (name && enc)
            name = latin1;
        if (!name || !content || pybox_fmt(p, sizeof p, "%s/%s", scratch, name) < 0)
            continue;
        char *dirpart = strdup(p);
        char *slash = strrchr(dirpart, '/');
        if (slash) {
            *slash = '\0';
            char mk[PATH_MAX + 16];
            snprintf(mk, sizeof mk, "%s", dirpart);
            for (char *q = mk + strlen(scratch) + 1; *q; q++)
                if (*q == '/') {
                    *q = '\0';
                    mkdir(mk, 0755);
                    *q = '/';
                }
            mkdir(mk, 0755);
        }
        free(dirpart);
        size_t rep = (size_t)jnum(f, "repeat", 1);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        for (size_t i = 0; fd >= 0 && i < rep; i++)
            pybox_write_all(fd, content, strlen(content));
        if (fd >= 0)
            close(fd);
    }
    proc_t p;
    proc_run(argv, NULL, program, strlen(program), scaled(c, jnum(spec, "timeout_s", 120)), &p);
    cJSON_AddNumberToObject(rec, "wall_s", p.wall_s);
    cJSON_AddNumberToObject(rec, "exit_code", p.exit_code);
    cJSON *r = p.out.len ? cJSON_ParseWithLength(p.out.data, p.out.len) : NULL;
    if (r)
        cJSON_AddItemToObject(rec, "receipt", r);
    else
        cJSON_AddStringToObject(rec, "stdout", p.out.data ? p.out.data : "");
    cJSON_AddStringToObject(rec, "stderr", p.err.data ? p.err.data : "");
    cJSON *obs = cJSON_GetObjectItemCaseSensitive(rec, "observed");
    if (obs == NULL)
        obs = cJSON_AddObjectToObject(rec, "observed");
    cJSON_AddNumberToObject(obs, "boxes_left", boxes_left(c));
    cJSON_Delete(args);
    proc_free(&p);
}

/* After pybox was signalled, a native box's end as the kernel tells it. The campaign is
 * its children's subreaper (setup), so the init of a box whose PyBox was killed becomes
 * the campaign's child: waitid says how it ended, by itself (the box timer) or killed by
 * a signal from outside, which an engine's event log would otherwise say. */
static void native_crash_end(camp_t *c, const char *run, int sig, cJSON *obs)
{
    char staging[PATH_MAX], leaf[PATH_MAX + 40];
    native_staging(c, staging);
    if (sig != SIGKILL) {
        /* PyBox was asked to stop: the box must already be gone. */
        cJSON_AddBoolToObject(obs, "box_gone", boxes_left_on(c, c->backend) == 0);
        return;
    }
    pid_t init = 0;
    box_pids(c, c->backend, run, &init, 1); /* the box's PID 1 is the first the cgroup lists */
    struct statx sx;
    double born = 0;
    if (pybox_fmt(leaf, sizeof leaf, "%s/%s", staging, run) == 0 && statx(AT_FDCWD, leaf, 0, STATX_BTIME, &sx) == 0 &&
        (sx.stx_mask & STATX_BTIME))
        born = (double)sx.stx_btime.tv_sec + (double)sx.stx_btime.tv_nsec / 1e9;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    bool reaped = false;
    double t0 = pybox_now_s();
    /* Bounded: the box timer ends it within seconds. */
    while (init > 0 && !reaped && pybox_now_s() - t0 < scaled(c, 30)) {
        if (waitid(P_PID, (id_t)init, &si, WEXITED | WNOHANG) == 0 && si.si_pid == init)
            reaped = true;
        else if (errno == ECHILD && si.si_pid == 0 && kill(init, 0) < 0)
            break;
        else {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double ended = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    cJSON_AddBoolToObject(obs, "box_init_reaped", reaped);
    if (reaped) {
        bool exited = si.si_code == CLD_EXITED;
        cJSON_AddNumberToObject(obs, "box_exit_code", exited ? si.si_status : 128 + si.si_status);
        cJSON_AddBoolToObject(obs, "box_ended_by_itself", exited);
        cJSON_AddNumberToObject(obs, "kill_or_stop_events", exited ? 0 : 1);
    }
    if (born > 0)
        cJSON_AddNumberToObject(obs, "box_ran_s", ended - born);
    /* The leftover is this campaign's: removed here, as cleanup would after expiry. */
    kernel_sweep_on(c, pybox_backend_find(c->backend));
    cJSON_AddBoolToObject(obs, "leftover_removed", boxes_left_on(c, c->backend) == 0);
}

/* pybox exec started, then signalled (SIGKILL unless the case says otherwise) while the
 * program runs: what PyBox said, if anything, and what the engine saw. */
static void crash_run(camp_t *c, const cJSON *spec, const char *program, cJSON *rec)
{
    cJSON *obs = cJSON_AddObjectToObject(rec, "observed");
    int sig = (int)jnum(spec, "signal", SIGKILL);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        return;
    double t0 = pybox_now_s();
    long since = (long)time(NULL) - 1;
    pid_t pid = fork();
    if (pid < 0) {
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        cJSON_AddStringToObject(rec, "error", "fork failed");
        return;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        execl(c->bin, c->bin, "exec", "--json", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    pybox_write_all(in[1], program, strlen(program));
    close(in[1]);
    /* The box running, then the program in it: polled, as the engine has no event for
     * "a process started in a box". */
    char id[PYBOX_ID_MAX] = "", run[PYBOX_ID_MAX] = "";
    bool program_seen = false;
    while (pybox_now_s() - t0 < scaled(c, 30) && !program_seen) {
        if (!id[0] && !running_box(c, id, run, sizeof id))
            id[0] = '\0';
        program_seen = id[0] && box_shows(c, run, "python3");
        if (!program_seen) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cJSON_AddBoolToObject(obs, "program_seen_running", program_seen);
    double signalled_at = pybox_now_s();
    kill(pid, sig);
    pybox_buf_t said;
    pybox_buf_init(&said, 16 * 1024 * 1024);
    char buf[65536];
    ssize_t n;
    while ((n = read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            pybox_buf_add(&said, buf, (size_t)n);
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    cJSON_AddNumberToObject(obs, "signal", sig);
    cJSON_AddNumberToObject(obs, "pybox_signalled_after_s", signalled_at - t0);
    cJSON_AddNumberToObject(obs, "pybox_exit_s", pybox_now_s() - signalled_at);
    cJSON_AddNumberToObject(rec, "exit_code", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    cJSON *r = said.len ? cJSON_ParseWithLength(said.data, said.len) : NULL;
    if (r)
        cJSON_AddItemToObject(rec, "receipt", r);
    pybox_buf_free(&said);
    if (!id[0]) {
        cJSON_AddStringToObject(rec, "error", "the box never ran");
        return;
    }
    if (case_ops(c) == NULL)
        native_crash_end(c, run, sig, obs);
    else
        case_ops(c)->killed_end(c->engine, id, run, sig, since, obs);
    cJSON_AddNumberToObject(rec, "wall_s", pybox_now_s() - t0);
}

static void driver_run(camp_t *c, const cJSON *spec, const char *scratch, cJSON *rec)
{
    cJSON *cmd = subst_json(c, scratch, cJSON_GetObjectItemCaseSensitive(spec, "driver"));
    const char *argv[ARGV_MAX + 1];
    int argc = argv_of(cmd, argv);
    /* As the case wrote it: the record says what ran without this machine's paths. */
    cJSON_AddItemToObject(rec, "driver", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(spec, "driver"), 1));
    char e1[PATH_MAX + 16], e2[PATH_MAX + 32], e3[PATH_MAX + 32];
    snprintf(e1, sizeof e1, "PYBOX_BIN=%s", c->bin);
    snprintf(e2, sizeof e2, "PYBOX_CAMPAIGN_TMP=%s", scratch);
    snprintf(e3, sizeof e3, "PYBOX_MAIN_HOME=%s", c->main_home);
    /* this very tool, for a driver's pybox-campaign inspect */
    char self[PATH_MAX] = "", e4[PATH_MAX + 32];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    snprintf(e4, sizeof e4, "PYBOX_CAMPAIGN_BIN=%s", self);
    const char *env[] = {e1, e2, e3, e4, NULL};
    proc_t p;
    if (argc == 0) {
        cJSON_AddStringToObject(rec, "error", "the case names no driver");
        cJSON_Delete(cmd);
        return;
    }
    proc_run(argv, env, "", 0, scaled(c, jnum(spec, "timeout_s", 900)), &p);
    cJSON_AddNumberToObject(rec, "wall_s", p.wall_s);
    cJSON_AddNumberToObject(rec, "exit_code", p.exit_code);
    cJSON *obs = p.out.len ? cJSON_ParseWithLength(p.out.data, p.out.len) : NULL;
    if (obs == NULL || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(obs, "checks"))) {
        cJSON_Delete(obs);
        char msg[512];
        snprintf(msg, sizeof msg, "the driver %s (exit %d) printed no result%s", argv[0], p.exit_code,
                 p.timed_out ? "; it ran out of time" : "");
        cJSON_AddStringToObject(rec, "error", msg);
    } else {
        cJSON_AddItemToObject(rec, "observed", obs);
    }
    /* The end of the driver's log, for a failed attempt's reader. */
    const char *log = p.err.data ? p.err.data : "";
    size_t l = strlen(log);
    cJSON_AddStringToObject(rec, "stderr_tail", l > 4000 ? log + l - 4000 : log);
    proc_free(&p);
    cJSON_Delete(cmd);
}

/* ---- expectations ---- */

static bool expect_one(const cJSON *run, const cJSON *x, cJSON *out)
{
    const char *path = jstr(x, "path"), *op = jstr(x, "op");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(x, "value");
    const cJSON *got = path ? ev_path(run, path) : NULL;
    bool ok = false;
    if (path == NULL || op == NULL) {
        ok = false;
    } else if (strcmp(op, "eq") == 0) {
        ok = got && want && cJSON_Compare(got, want, 1);
    } else if (strcmp(op, "ne") == 0) {
        ok = got && want && !cJSON_Compare(got, want, 1);
    } else if (strcmp(op, "contains") == 0 || strcmp(op, "lacks") == 0) {
        bool has = cJSON_IsString(got) && cJSON_IsString(want) && strstr(got->valuestring, want->valuestring);
        ok = cJSON_IsString(got) && (strcmp(op, "contains") == 0 ? has : !has);
    } else if (strcmp(op, "absent") == 0) {
        ok = got == NULL;
    } else if (cJSON_IsNumber(got) && cJSON_IsNumber(want)) {
        double g = got->valuedouble, w = want->valuedouble;
        ok = strcmp(op, "gt") == 0   ? g > w
             : strcmp(op, "ge") == 0 ? g >= w
             : strcmp(op, "lt") == 0 ? g < w
             : strcmp(op, "le") == 0 ? g <= w
                                     : false;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "path", path ? path : "");
    cJSON_AddStringToObject(r, "op", op ? op : "");
    cJSON_AddItemToObject(r, "want", want ? cJSON_Duplicate(want, 1) : cJSON_CreateNull());
    /* Long values (program output) are kept short here: the whole is in the run. */
    if (cJSON_IsString(got) && strlen(got->valuestring) > 300) {
        char cut[304];
        snprintf(cut, sizeof cut, "%.300s", got->valuestring);
        cJSON_AddStringToObject(r, "got", cut);
    } else {
        cJSON_AddItemToObject(r, "got", got ? cJSON_Duplicate(got, 1) : cJSON_CreateNull());
    }
    cJSON_AddBoolToObject(r, "ok", ok);
    cJSON_AddItemToArray(out, r);
    return ok;
}

/* ---- a case ---- */

/* The campaign is its children's subreaper: what a killed child left (a native box's
 * init, a driver's orphans) becomes its child. Between cases nothing of the campaign
 * runs but the native listener, so every other ended child is reaped here. */
static void reap_orphans(camp_t *c)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            return;
        if (si.si_pid == c->native_listener)
            return; /* it never ends by itself; killed and reaped at the end */
        waitpid(si.si_pid, NULL, 0);
    }
}

static void make_scratch(camp_t *c, const char *case_id, const char *name, int pass, char *out, size_t len)
{
    char safe[64];
    snprintf(safe, sizeof safe, "%s", case_id);
    for (char *q = safe; *q; q++)
        if (*q == '/')
            *q = '-';
    if (pybox_fmt(out, len, "%s/%03d-%s-%.32s-%d", c->tmp, ++c->scratch_n, safe, name, pass) < 0 ||
        mkdir(out, 0755) < 0) {
        char etext[128];
        say("scratch folder %s: %s", out, pybox_strerror(errno, etext, sizeof etext));
    }
}

static bool run_case(camp_t *c, const char *file, cJSON *cs, char *record_name)
{
    char started[40];
    pybox_wall_iso(started, sizeof started);
    const char *id = jstr(cs, "id");
    /* The program text goes into the record with the case. */
    const char *pf = jstr(cs, "program_file");
    if (pf != NULL && jstr(cs, "program") == NULL) {
        char *text = NULL;
        size_t len = 0;
        if (read_text(pf, &text, &len) == 0) {
            cJSON_AddStringToObject(cs, "program", text);
            free(text);
        }
    }
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "schema", EV_SCHEMA);
    cJSON_AddStringToObject(rec, "campaign", c->id);
    cJSON_AddStringToObject(rec, "case_file", file);
    cJSON_AddItemToObject(rec, "case", cJSON_Duplicate(cs, 1));
    cJSON_AddStringToObject(rec, "started", started);
    cJSON_AddStringToObject(rec, "backend", c->backend);
    cJSON_AddItemToObject(rec, "host", cJSON_Duplicate(c->host, 1));
    cJSON *runs = cJSON_AddArrayToObject(rec, "runs");
    bool ok = true;
    const char *err = NULL;
    if (pf != NULL && jstr(cs, "program") == NULL)
        err = "the case's program_file cannot be read";
    const cJSON *spec;
    int nruns = 0;
    cJSON *plan = runs_planned(cs);
    cJSON_ArrayForEach (spec, plan) {
        const char *name = jstr(spec, "name") ? jstr(spec, "name") : "run";
        const char *via = jstr(spec, "via") ? jstr(spec, "via") : "exec";
        int passes = (int)jnum(spec, "passes", jnum(cs, "passes", 1));
        for (int pass = 1; pass <= passes && err == NULL; pass++) {
            char scratch[PATH_MAX];
            make_scratch(c, id, name, pass, scratch, sizeof scratch);
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "name", name);
            cJSON_AddNumberToObject(r, "pass", pass);
            cJSON_AddStringToObject(r, "via", via);
            const char *prog0 = program_of(spec, cs);
            char *program = prog0 ? subst(c, scratch, prog0) : strdup("");
            char when[40];
            pybox_wall_iso(when, sizeof when);
            cJSON_AddStringToObject(r, "at", when);
            steps(c, spec, scratch, "before", r);
            if (strcmp(via, "library") == 0)
                library_run(c, cs, spec, scratch, program, r);
            else if (strcmp(via, "session") == 0)
                session_run(c, cs, spec, scratch, program, r);
            else if (strcmp(via, "exec") == 0)
                exec_run(c, spec, program, scratch, r);
            else if (strcmp(via, "crash") == 0)
                crash_run(c, spec, program, r);
            else if (strcmp(via, "driver") == 0)
                driver_run(c, spec, scratch, r);
            else if (strcmp(via, "pair") == 0)
                pair_run(c, cs, spec, program, r);
            else
                cJSON_AddStringToObject(r, "error", "unknown via");
            free(program);
            steps(c, spec, scratch, "after", r);
            if (jstr(spec, "out_dir") != NULL) {
                char *o = subst(c, scratch, jstr(spec, "out_dir"));
                cJSON *obs = cJSON_GetObjectItemCaseSensitive(r, "observed");
                list_out(o, cJSON_GetObjectItemCaseSensitive(r, "receipt"),
                         obs ? obs : cJSON_AddObjectToObject(r, "observed"));
                free(o);
            }
            bool rok = cJSON_GetObjectItemCaseSensitive(r, "error") == NULL;
            cJSON *ex = cJSON_AddArrayToObject(r, "expect");
            /* A backend observes some things its own way (an engine's event log, the
             * kernel's waitid): a run may say what to expect of each. */
            const cJSON *own = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(spec, "expect_by_backend"), c->backend);
            cJSON *want = subst_json(c, scratch, own ? own : cJSON_GetObjectItemCaseSensitive(spec, "expect"));
            const cJSON *x;
            cJSON_ArrayForEach (x, want)
                rok = expect_one(r, x, ex) && rok;
            cJSON_Delete(want);
            const cJSON *chk;
            cJSON_ArrayForEach (chk, ev_path(r, "observed.checks"))
                rok = rok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(chk, "ok"));
            cJSON_AddBoolToObject(r, "ok", rok);
            ok = ok && rok;
            cJSON_AddItemToArray(runs, r);
            nruns++;
        }
    }
    cJSON_Delete(plan);
    if (nruns == 0 && err == NULL)
        err = "the case has no runs";
    /* Passes of the same run must agree on the verdict fields. */
    cJSON *agree = cJSON_AddArrayToObject(rec, "agree");
    const cJSON *path;
    const cJSON *agree_own =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "agree_by_backend"), c->backend);
    const cJSON *agree_list = agree_own ? agree_own : cJSON_GetObjectItemCaseSensitive(cs, "agree");
    cJSON_ArrayForEach (path, agree_list) {
        if (!cJSON_IsString(path))
            continue;
        cJSON_ArrayForEach (spec, cJSON_GetObjectItemCaseSensitive(cs, "runs")) {
            const char *name = jstr(spec, "name") ? jstr(spec, "name") : "run";
            cJSON *vals = cJSON_CreateArray();
            const cJSON *r;
            bool same = true;
            const cJSON *first = NULL;
            int k = 0;
            cJSON_ArrayForEach (r, runs) {
                if (strcmp(jstr(r, "name"), name) != 0)
                    continue;
                const cJSON *v = ev_path(r, path->valuestring);
                cJSON_AddItemToArray(vals, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
                if (k++ == 0)
                    first = v;
                else
                    same = same && v && first && cJSON_Compare(v, first, 1);
            }
            same = same && first != NULL;
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "run", name);
            cJSON_AddStringToObject(a, "path", path->valuestring);
            cJSON_AddItemToObject(a, "values", vals);
            cJSON_AddBoolToObject(a, "ok", same);
            cJSON_AddItemToArray(agree, a);
            ok = ok && same;
        }
    }
    if (err)
        cJSON_AddStringToObject(rec, "error", err);
    ok = ok && err == NULL;
    reap_orphans(c);
    char finished[40];
    pybox_wall_iso(finished, sizeof finished);
    cJSON_AddStringToObject(rec, "finished", finished);
    cJSON_AddStringToObject(rec, "verdict", ok ? "pass" : "fail");
    pybox_error_t e = {0};
    if (ev_record_store(c->out, rec, record_name, &e) < 0) {
        say("%s: the record cannot be written: %s", id, e.msg);
        ok = false;
    }
    cJSON_Delete(rec);
    return ok;
}

/* ---- set-up ---- */

/* The campaign runs as an installation of its own (its own id, labels and run notes),
 * borrowing the main installation's images (state.h). */
static int setup(camp_t *c)
{
    pybox_error_t err = {0};
    pybox_state_t main_st;
    if (pybox_state_open(&main_st, false, &err) < 0) {
        say("no PyBox installation to take the image pins from: %s (run make setup)", err.msg);
        return -1;
    }
    snprintf(c->main_home, sizeof c->main_home, "%s", main_st.dir);
    snprintf(c->tmp, sizeof c->tmp, "/tmp/pybox-campaign-XXXXXX");
    char why[128];
    if (mkdtemp(c->tmp) == NULL) {
        say("a scratch folder in /tmp: %s", pybox_strerror(errno, why, sizeof why));
        return -1;
    }
    c->tmp_made = true;
    if (chmod(c->tmp, 0755) < 0 || pybox_fmt(c->home, sizeof c->home, "%s/home", c->tmp) < 0 ||
        mkdir(c->home, 0700) < 0) {
        say("the campaign's installation folder in %s: %s", c->tmp, pybox_strerror(errno, why, sizeof why));
        return -1;
    }
    setenv("PYBOX_HOME", c->home, 1);
    if (pybox_state_open(&c->st, true, &err) < 0 || pybox_state_borrow_images(&main_st, &c->st, &err) < 0 ||
        open_engine(c, &err) < 0) {
        say("%s", err.msg);
        return -1;
    }
    pybox_random_hex(8, c->id, NULL);
    pybox_random_hex(16, c->canary, NULL);
    snprintf(c->env_entry, sizeof c->env_entry, "PYBOX_CANARY=%s", c->canary);
    if (pybox_fmt(c->host_dir, sizeof c->host_dir, "%s/host-folder", c->tmp) < 0 || mkdir(c->host_dir, 0755) < 0) {
        say("the host folder in %s: %s", c->tmp, pybox_strerror(errno, why, sizeof why));
        return -1;
    }
    char canary_path[PATH_MAX];
    if (pybox_fmt(canary_path, sizeof canary_path, "%s/canary.txt", c->host_dir) < 0 ||
        pybox_write_file_atomic(canary_path, c->canary, strlen(c->canary), 0644, &err) < 0) {
        say("the host folder's canary: %s", err.msg[0] ? err.msg : "its path is too long");
        return -1;
    }

    c->host = cJSON_CreateObject();
    struct utsname u;
    uname(&u);
    cJSON_AddStringToObject(c->host, "kernel", u.release);
    if (c->time_scale != 1)
        cJSON_AddNumberToObject(c->host, "time_scale", c->time_scale);
    cJSON_AddStringToObject(c->host, "machine", u.machine);
    cJSON_AddNumberToObject(c->host, "cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    long mem_pages = sysconf(_SC_PHYS_PAGES);
    cJSON_AddNumberToObject(c->host, "memory_mib", (double)mem_pages * (double)sysconf(_SC_PAGESIZE) / 1048576.0);
    pybox_cgroup_host_t ch;
    pybox_cgroup_host(NULL, NULL, &ch);
    const char *cgv = pybox_cgroup_version_word(ch.version);
    cJSON_AddStringToObject(c->host, "cgroup", cgv ? cgv : "none");
    cJSON_AddStringToObject(c->host, "cgroup_manager", pybox_cgroup_manager_word(&ch));
    /* Run by an ordinary user: the native backend's boxes are rootless (docs/rootless.md),
     * the pages give them columns of their own. */
    cJSON_AddBoolToObject(c->host, "rootless", geteuid() != 0);
    cJSON_AddStringToObject(c->host, "engine", c->engine->ops->describe(c->engine));
    cJSON *ver = c->engine->ops->campaign->version(c->engine);
    cJSON_AddItemToObject(c->host, "engine_version", ver ? ver : cJSON_CreateNull());
    cJSON_AddStringToObject(c->host, "pybox_version", PYBOX_VERSION);
    cJSON_AddStringToObject(c->host, "installation", c->st.install_id);
    /* The receipts of its runs are signed by the campaign's installation: its public key
     * goes into every record, and the evidence check verifies every receipt with it. */
    pybox_key_t *key = NULL;
    pybox_buf_t pem;
    pybox_buf_init(&pem, 0);
    if (pybox_key_load(&c->st, true, &key, &err) < 0 || pybox_key_public_pem(key, &pem, &err) < 0) {
        say("the campaign's receipt key: %s", err.msg);
        pybox_key_free(key);
        pybox_buf_free(&pem);
        return -1;
    }
    cJSON_AddStringToObject(c->host, "receipt_key", pem.data);
    cJSON_AddStringToObject(c->host, "receipt_key_id", pybox_key_id(key));
    pybox_key_free(key);
    pybox_buf_free(&pem);
    /* The backends the campaign runs on: those asked for, else every one present (it
     * opens and has the stdlib image pinned), each with its own description. */
    cJSON *bk = cJSON_AddObjectToObject(c->host, "backends");
    const pybox_backend_ops_t *ops;
    int asked = c->nbackends;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL; i++) {
        bool want = asked == 0;
        for (int k = 0; k < asked; k++)
            want = want || strcmp(c->backends[k], ops->name) == 0;
        if (!want)
            continue;
        pybox_backend_t *be = NULL;
        pybox_pin_t pin;
        pybox_error_t berr = {0};
        bool ok = ops->open(&c->st, &be, &berr) == 0 && pybox_pin_get(&c->st, ops->name, "stdlib", &pin, &berr) == 1;
        if (ok)
            cJSON_AddStringToObject(bk, ops->name, ops->describe(be));
        pybox_backend_close(be);
        if (!ok) {
            if (asked > 0) {
                say("backend %s: %s", ops->name, berr.msg[0] ? berr.msg : "the stdlib image is not pinned");
                return -1;
            }
            say("backend %s not present here (%s): its cases are not run", ops->name,
                berr.msg[0] ? berr.msg : "the stdlib image is not pinned");
        }
    }
    c->nbackends = 0;
    const cJSON *b;
    cJSON_ArrayForEach (b, bk)
        if (c->nbackends < 4)
            snprintf(c->backends[c->nbackends++], sizeof c->backends[0], "%s", b->string);
    if (c->nbackends == 0) {
        say("no backend to run the campaign on");
        return -1;
    }
    /* A native box whose PyBox is killed becomes the campaign's child (native_crash_end). */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        say("prctl(PR_SET_CHILD_SUBREAPER) failed");
        return -1;
    }
    return 0;
}

static char *slurp_or_die(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (read_text(path, &text, &len) < 0) {
        say("%s: cannot be read", path);
        exit(2);
    }
    return text;
}

static int usage(void)
{
    fprintf(stderr, "usage: pybox-campaign run --pybox BIN --out DIR --limits FILE [--fast] [--backend NAME]\n"
                    "           [--time-scale K] CASE.json...\n"
                    "       pybox-campaign pages DIR LIMITS.md\n"
                    "       pybox-campaign check DIR LIMITS.md\n"
                    "       pybox-campaign inspect --home DIR [--backend NAME]... --json\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "pages") == 0 || strcmp(argv[1], "check") == 0) {
        if (argc != 4)
            return usage();
        char *limits = slurp_or_die(argv[3]);
        int bad =
            strcmp(argv[1], "pages") == 0 ? ev_write_pages(argv[2], limits, stderr) : ev_check(argv[2], limits, stderr);
        free(limits);
        if (bad != 0) {
            say("%s: %d problem(s)", argv[2], bad < 0 ? 1 : bad);
            return 1;
        }
        if (strcmp(argv[1], "check") == 0)
            say("%s: every record matches its SHA-256 and every page is what the records render to", argv[2]);
        return 0;
    }
    if (strcmp(argv[1], "inspect") == 0)
        return camp_inspect_main(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") != 0)
        return usage();
    camp_t c = {.time_scale = 1};
    const char *limits_path = NULL;
    bool fast = false;
    int i = 2;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--fast") == 0)
            fast = true;
        else if (strcmp(argv[i], "--pybox") == 0 && i + 1 < argc)
            c.bin = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            c.out = argv[++i];
        else if (strcmp(argv[i], "--limits") == 0 && i + 1 < argc)
            limits_path = argv[++i];
        else if (strcmp(argv[i], "--time-scale") == 0 && i + 1 < argc) {
            char *end = NULL;
            c.time_scale = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(c.time_scale >= 1 && c.time_scale <= 100)) {
                say("--time-scale: '%s' is not a number from 1 to 100", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            /* repeatable, or comma-separated: the backends to run every case on */
            char *list = argv[++i], *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
                if (pybox_backend_find(t) == NULL || c.nbackends == 4) {
                    char known[128];
                    pybox_backend_names(known, sizeof known);
                    say("--backend: unknown backend '%s' (known: %s)", t, known);
                    return 2;
                }
                snprintf(c.backends[c.nbackends++], sizeof c.backends[0], "%s", t);
            }
        } else
            return usage();
    }
    if (c.bin == NULL || c.out == NULL || limits_path == NULL || i == argc)
        return usage();
    if (c.bin[0] != '/') {
        say("--pybox must be an absolute path");
        return 2;
    }
    char *limits = slurp_or_die(limits_path);
    /* Every case is read before anything runs: a bad one refuses the campaign. */
    int ncases = argc - i;
    cJSON **cases = calloc((size_t)ncases, sizeof *cases);
    for (int k = 0; k < ncases; k++) {
        char *text = slurp_or_die(argv[i + k]);
        cases[k] = cJSON_Parse(text);
        free(text);
        const char *id = jstr(cases[k], "id"), *kind = jstr(cases[k], "kind");
        if (!id || !kind || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cases[k], "runs"))) {
            say("%s: a case needs an id, a kind and runs", argv[i + k]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (setup(&c) < 0) {
        /* a refused campaign leaves nothing: nothing of its installation is outside tmp
         * before its first case (no box, no cgroup, no lease) */
        if (c.tmp_made)
            (void)pybox_remove_tree_at(AT_FDCWD, c.tmp);
        return 1;
    }
    say("campaign %s as installation %s; records in %s/%s", c.id, c.st.install_id, c.out, EV_RECORDS);
    int passed = 0, failed = 0;
    pybox_buf_t failures; /* "kind/id on backend (record)" of each failed case, said last */
    pybox_buf_init(&failures, 1 << 16);
    double t0 = pybox_now_s();
    for (int k = 0; k < ncases; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(cases[k], "fast");
        if (fast && !cJSON_IsTrue(f))
            continue;
        if (interrupted) {
            say("interrupted by signal %d: no further case", (int)interrupted);
            failed++;
            break;
        }
        /* Every case on every backend it applies to ("backends" in the case: only those). */
        const cJSON *only = cJSON_GetObjectItemCaseSensitive(cases[k], "backends");
        for (int b = 0; b < c.nbackends && !interrupted; b++) {
            bool applies = !cJSON_IsArray(only);
            const cJSON *x;
            cJSON_ArrayForEach (x, only)
                applies = applies || (cJSON_IsString(x) && strcmp(x->valuestring, c.backends[b]) == 0);
            if (!applies)
                continue;
            c.backend = c.backends[b];
            /* pybox, its drivers and the library all take the backend from here */
            setenv("PYBOX_BACKEND", c.backend, 1);
            double t1 = pybox_now_s();
            char name[80] = "";
            bool ok = run_case(&c, argv[i + k], cases[k], name);
            ok ? passed++ : failed++;
            if (!ok)
                pybox_buf_addf(&failures, "%s%s/%s on %s (%s/%s)", failures.len ? "; " : "", jstr(cases[k], "kind"),
                               jstr(cases[k], "id"), c.backend, EV_RECORDS, name);
            fprintf(stderr, "campaign: [%s] %s/%s on %s  %.1f s  %s/%s\n", ok ? "pass" : "FAIL", jstr(cases[k], "kind"),
                    jstr(cases[k], "id"), c.backend, pybox_now_s() - t1, EV_RECORDS, name);
        }
    }
    int swept = c.engine->ops->campaign->sweep(c.engine, c.st.install_id);
    swept += kernel_sweep(&c);
    if (c.native_listener > 0) {
        kill(c.native_listener, SIGKILL);
        waitpid(c.native_listener, NULL, 0);
    }
    int bad = ev_write_pages(c.out, limits, stderr);
    say("%d passed, %d failed in %.0f s; %d leftover item(s) of the campaign removed; pages %s", passed, failed,
        pybox_now_s() - t0, swept, bad == 0 ? "written" : "NOT written cleanly");
    if (failures.len > 0) /* last, where a log's tail shows it */
        say("FAILED: %s", failures.data);
    pybox_buf_free(&failures);
    (void)pybox_remove_tree_at(AT_FDCWD, c.tmp); /* never into a mount under it */
    for (int k = 0; k < ncases; k++)
        cJSON_Delete(cases[k]);
    free(cases);
    free(limits);
    cJSON_Delete(c.host);
    pybox_backend_close(c.engine);
    return failed == 0 && bad == 0 ? 0 : 1;
}
