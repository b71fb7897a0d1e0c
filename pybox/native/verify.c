/* SPDX-License-Identifier: MIT */
/* Verification of a native box by the kernel itself: what /proc/<init>/ and the cgroup
 * files say, compared with the spec, before the program can start (see sandbox.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../guest/proto.h"
#include "../buf.h"
#include "../escape.h"
#include "../files.h"
#include "../policy.h"
#include "../util.h"
#include "internal.h"
#include "parse.h"
#include "rootless.h"
#include "verify.h"

#define PROC_TEXT_MAX (256 * 1024)
#define MOUNTS_MAX 64

void pybox_nv_init(pybox_nv_t *v)
{
    memset(v, 0, sizeof *v);
    pybox_buf_init(&v->diffs, 8192);
}

void pybox_nv_free(pybox_nv_t *v)
{
    pybox_buf_free(&v->diffs);
}

void pybox_nv_differ(pybox_nv_t *v, const char *where, const char *want, const char *got)
{
    v->count++;
    if (v->count > 16)
        return;
    char w[200], g[200];
    pybox_escape_short(w, sizeof w, want, 120);
    pybox_escape_short(g, sizeof g, got, 120);
    pybox_buf_addf(&v->diffs, "%s%s: spec %s, kernel %s", v->count > 1 ? "; " : "", where, w, g);
}

void pybox_nv_expect_int(pybox_nv_t *v, const char *where, int64_t want, int64_t got)
{
    v->checked++;
    if (want != got) {
        char w[32], g[32];
        snprintf(w, sizeof w, "%lld", (long long)want);
        snprintf(g, sizeof g, "%lld", (long long)got);
        pybox_nv_differ(v, where, w, g);
    }
}

static void expect_hex(pybox_nv_t *v, const char *where, uint64_t want, uint64_t got)
{
    v->checked++;
    if (want != got) {
        char w[32], g[32];
        snprintf(w, sizeof w, "%016llx", (unsigned long long)want);
        snprintf(g, sizeof g, "%016llx", (unsigned long long)got);
        pybox_nv_differ(v, where, w, g);
    }
}

void pybox_nv_expect_str(pybox_nv_t *v, const char *where, const char *want, const char *got)
{
    v->checked++;
    if (got == NULL || strcmp(want, got) != 0)
        pybox_nv_differ(v, where, want, got ? got : "(absent)");
}

/* ---- /proc texts ---- */

static int read_proc(pid_t pid, const char *file, char **text, size_t *len, pybox_error_t *err)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, file);
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", p);
    bool over = false;
    if (pybox_read_bounded(fd, PROC_TEXT_MAX, text, len, &over, err) < 0)
        return -1;
    if (over) {
        free(*text);
        *text = NULL;
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "%s: longer than %d bytes", p, PROC_TEXT_MAX);
    }
    return 0;
}

void pybox_nv_status(pybox_nv_t *v, const pybox_np_status_t *st, uint32_t uid, uint32_t gid, uint64_t caps, bool nnp,
                     bool seccomp)
{
    static const char *const idn[] = {"real", "effective", "saved", "filesystem"};
    for (int i = 0; i < 4; i++) {
        char w[48];
        snprintf(w, sizeof w, "init's %s uid", idn[i]);
        pybox_nv_expect_int(v, w, uid, (st->have & PYBOX_NP_ST_UID) ? st->uid[i] : -1);
        snprintf(w, sizeof w, "init's %s gid", idn[i]);
        pybox_nv_expect_int(v, w, gid, (st->have & PYBOX_NP_ST_GID) ? st->gid[i] : -1);
    }
    pybox_nv_expect_int(v, "init's supplementary groups", 0, (st->have & PYBOX_NP_ST_GROUPS) ? st->ngroups : -1);
    const unsigned need = PYBOX_NP_ST_CAPINH | PYBOX_NP_ST_CAPPRM | PYBOX_NP_ST_CAPEFF | PYBOX_NP_ST_CAPBND |
                          PYBOX_NP_ST_CAPAMB | PYBOX_NP_ST_NNP | PYBOX_NP_ST_SECCOMP | PYBOX_NP_ST_FILTERS |
                          PYBOX_NP_ST_UMASK;
    v->checked++;
    if ((st->have & need) != need)
        pybox_nv_differ(v, "status lines", "all present", "some missing");
    expect_hex(v, "CapEff", caps, st->cap_eff);
    expect_hex(v, "CapPrm", caps, st->cap_prm);
    expect_hex(v, "CapBnd", caps, st->cap_bnd);
    expect_hex(v, "CapInh", 0, st->cap_inh);
    expect_hex(v, "CapAmb", 0, st->cap_amb);
    pybox_nv_expect_int(v, "NoNewPrivs", nnp ? 1 : 0, st->no_new_privs);
    pybox_nv_expect_int(v, "Seccomp", seccomp ? 2 : 0, st->seccomp);
    pybox_nv_expect_int(v, "Seccomp_filters", seccomp ? 1 : 0, st->seccomp_filters);
    /* init's, which the program inherits */
    pybox_nv_expect_int(v, "umask", PYBOX_NATIVE_UMASK, (st->have & PYBOX_NP_ST_UMASK) ? st->umask : -1);
}

static void check_status(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    _cleanup_free_ char *t = NULL;
    size_t n;
    pybox_np_status_t st;
    if (read_proc(b->pid, "status", &t, &n, err) < 0 || pybox_np_status_parse(t, n, &st, err) < 0)
        return;
    uint64_t caps;
    if (pybox_native_caps(s, &caps, err) < 0)
        return;
    pybox_nv_status(v, &st, s->rootless ? s->user_uid : 0, s->rootless ? s->user_gid : 0, caps,
                    !(s->relax & PYBOX_RELAX_NEW_PRIVS), !(s->relax & PYBOX_RELAX_SECCOMP));
}

void pybox_nv_environ(pybox_nv_t *v, const char *text, size_t len, const char *const *env, const char *extra)
{
    pybox_buf_t want, got;
    pybox_buf_init(&want, 0);
    pybox_buf_init(&got, 0);
    for (const char *const *e = env; e != NULL && *e != NULL; e++)
        pybox_buf_addf(&want, "%s%s", want.len ? " " : "", *e);
    if (extra != NULL)
        pybox_buf_addf(&want, "%s%s", want.len ? " " : "", extra);
    for (size_t i = 0; i < len; i += strnlen(text + i, len - i) + 1)
        pybox_buf_addf(&got, "%s%.*s", got.len ? " " : "", (int)strnlen(text + i, len - i), text + i);
    v->checked++;
    if (!pybox_buf_ok(&want) || !pybox_buf_ok(&got) ||
        strcmp(want.data ? want.data : "", got.data ? got.data : "") != 0)
        pybox_nv_differ(v, "environment", want.data ? want.data : "", got.data ? got.data : "");
    pybox_buf_free(&want);
    pybox_buf_free(&got);
}

static void check_environ(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    _cleanup_free_ char *t = NULL;
    size_t n;
    if (read_proc(b->pid, "environ", &t, &n, err) == 0)
        pybox_nv_environ(v, t, n, s->env, s->relax_env);
}

/* The box's hostname, as its UTS namespace holds it: read by a thread of its own that
 * joins that namespace (setns acts on the calling thread alone) and ends with it. */
typedef struct {
    int fd;
    char name[sizeof((struct utsname *)0)->nodename + 1];
    int e;
} uts_read_t;

static void *read_uts(void *arg)
{
    uts_read_t *r = arg;
    struct utsname u;
    if (setns(r->fd, CLONE_NEWUTS) < 0 || uname(&u) < 0)
        r->e = errno;
    else
        snprintf(r->name, sizeof r->name, "%s", u.nodename);
    return NULL;
}

/* Rootless: joining the box's UTS namespace takes CAP_SYS_ADMIN in PyBox's own user
 * namespace too, which an ordinary user has not; a child joins the box's user namespace
 * first (the user owns it: every capability there) and reads it, its answer on a pipe. */
static int read_uts_rootless(pid_t pid, char *out, size_t len)
{
    char un[64], uts[64];
    snprintf(un, sizeof un, "/proc/%d/ns/user", (int)pid);
    snprintf(uts, sizeof uts, "/proc/%d/ns/uts", (int)pid);
    int ufd = open(un, O_RDONLY | O_CLOEXEC), tfd = open(uts, O_RDONLY | O_CLOEXEC), p[2] = {-1, -1};
    int e = ufd < 0 || tfd < 0 ? errno : pipe2(p, O_CLOEXEC) < 0 ? errno : 0;
    pid_t c = e == 0 ? fork() : -1;
    if (e == 0 && c < 0)
        e = errno;
    if (c == 0) {
        struct utsname u;
        char answer[sizeof u.nodename + 64], inst[24] = "", watches[24] = "";
        int r = setns(ufd, CLONE_NEWUSER) < 0 || setns(tfd, CLONE_NEWUTS) < 0 || uname(&u) < 0 ? errno : 0;
        /* and the namespace's own limits, as the box's processes are held to them */
        size_t k = 0;
        pybox_error_t ignored = {0};
        if (r == 0) {
            (void)pybox_native_read_small("/proc/sys/user/max_inotify_instances", inst, sizeof inst, &k, &ignored);
            inst[strcspn(inst, "\n")] = '\0';
            (void)pybox_native_read_small("/proc/sys/user/max_inotify_watches", watches, sizeof watches, &k, &ignored);
            watches[strcspn(watches, "\n")] = '\0';
        }
        size_t n = r == 0 ? (size_t)snprintf(answer, sizeof answer, "%s\n%s\n%s", u.nodename, inst, watches) : 0;
        _exit(r == 0 && pybox_write_all(p[1], answer, n) == 0 ? 0 : (r & 0x7f) ? (r & 0x7f) : 1);
    }
    if (ufd >= 0)
        close(ufd);
    if (tfd >= 0)
        close(tfd);
    if (c > 0) {
        close(p[1]);
        p[1] = -1;
        size_t n = 0;
        ssize_t r;
        while (n + 1 < len && ((r = read(p[0], out + n, len - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
            n += r > 0 ? (size_t)r : 0;
        out[n] = '\0';
        int st = 0;
        while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
        }
        e = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
    }
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
    return e;
}

static void check_hostname(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    if (s->rootless) {
        char name[sizeof((struct utsname *)0)->nodename + 64];
        int e = read_uts_rootless(b->pid, name, sizeof name);
        if (e != 0) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "reading the box's hostname (in its user namespace)");
            return;
        }
        char *inst = strchr(name, '\n');
        char *watches = inst ? strchr(inst + 1, '\n') : NULL;
        if (inst == NULL || watches == NULL) {
            pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "reading the box's hostname and limits: malformed answer");
            return;
        }
        *inst++ = '\0';
        *watches++ = '\0';
        pybox_nv_expect_str(v, "hostname", s->hostname, name);
        /* its share of the user's quotas (rootless.h), unless a test relaxed it */
        if (!(s->relax & PYBOX_RELAX_SHARED_UID)) {
            char want[24];
            snprintf(want, sizeof want, "%d", PYBOX_ROOTLESS_INOTIFY_INSTANCES);
            pybox_nv_expect_str(v, "user namespace's max_inotify_instances", want, inst);
            snprintf(want, sizeof want, "%d", PYBOX_ROOTLESS_INOTIFY_WATCHES);
            pybox_nv_expect_str(v, "user namespace's max_inotify_watches", want, watches);
        }
        return;
    }
    char ns[64];
    snprintf(ns, sizeof ns, "/proc/%d/ns/uts", (int)b->pid);
    uts_read_t r = {.fd = open(ns, O_RDONLY | O_CLOEXEC)};
    pthread_t t;
    int rc = r.fd < 0 ? errno : pthread_create(&t, NULL, read_uts, &r);
    if (rc == 0)
        pthread_join(t, NULL);
    if (r.fd >= 0)
        close(r.fd);
    if (rc != 0 || r.e != 0) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, rc != 0 ? rc : r.e, "reading the box's hostname (%s)", ns);
        return;
    }
    pybox_nv_expect_str(v, "hostname", s->hostname, r.name);
}

static void check_namespaces(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s)
{
    static const char *const ns[] = {"mnt", "pid", "net", "ipc", "uts", "cgroup", "user"};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        char p[64], q[64], mine[64] = "", theirs[64] = "", where[48];
        snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)b->pid, ns[i]);
        snprintf(q, sizeof q, "/proc/self/ns/%s", ns[i]);
        bool joined = strcmp(ns[i], "net") == 0 && s->relax_netns_pid > 0;
        if (joined)
            snprintf(q, sizeof q, "/proc/%d/ns/net", (int)s->relax_netns_pid);
        ssize_t a = readlink(p, theirs, sizeof theirs - 1);
        ssize_t c = readlink(q, mine, sizeof mine - 1);
        snprintf(where, sizeof where, "%s namespace", ns[i]);
        v->checked++;
        if (a <= 0 || c <= 0) {
            pybox_nv_differ(v, where, "readable", "unreadable");
            continue;
        }
        bool same = strcmp(theirs, mine) == 0;
        bool want_same = (strcmp(ns[i], "user") == 0 && !s->rootless) || joined;
        if (same != want_same)
            pybox_nv_differ(v, where, want_same ? mine : "its own", theirs);
    }
}

/* Root: the initial namespace's identity. Rootless: the box's root is the user, the
 * program's id its own from the user's subordinate range, and nothing else. */
static void check_idmaps(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    static const char *const maps[] = {"uid_map", "gid_map"};
    uint32_t prog = pybox_native_program_uid(s);
    for (int i = 0; i < 2; i++) {
        _cleanup_free_ char *t = NULL;
        size_t n;
        if (read_proc(b->pid, maps[i], &t, &n, err) < 0)
            return;
        const int64_t want[2][3] = {{0, i == 0 ? s->user_uid : s->user_gid, 1}, {prog, i == 0 ? prog : s->box_gid, 1}};
        int id =
            s->rootless ? pybox_np_idmap_is(t, n, want, prog == 0 ? 1 : 2, err) : pybox_np_idmap_is_identity(t, n, err);
        char shown[96];
        if (s->rootless)
            snprintf(shown, sizeof shown, "0 %lld 1 and %lld %lld 1", (long long)want[0][1], (long long)want[1][0],
                     (long long)want[1][1]);
        else
            snprintf(shown, sizeof shown, "0 0 4294967295");
        v->checked++;
        if (id != 1)
            pybox_nv_differ(v, maps[i], shown, t);
    }
}

static void check_limits(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    _cleanup_free_ char *t = NULL;
    size_t n;
    if (read_proc(b->pid, "limits", &t, &n, err) < 0)
        return;
    /* Every limit: the spec's, and what the box was given of the rest (sandbox.c), so that
     * none is PyBox's own by inheritance. */
    struct rlimit want[PYBOX_NATIVE_RLIMITS];
    memcpy(want, b->rlimits, sizeof want);
    want[RLIMIT_NOFILE].rlim_cur = want[RLIMIT_NOFILE].rlim_max = (rlim_t)s->nofile;
    want[RLIMIT_FSIZE].rlim_cur = want[RLIMIT_FSIZE].rlim_max = (rlim_t)s->fsize_bytes;
    want[RLIMIT_SIGPENDING].rlim_cur = want[RLIMIT_SIGPENDING].rlim_max = (rlim_t)s->sigpending;
    want[RLIMIT_CORE].rlim_cur = want[RLIMIT_CORE].rlim_max = (rlim_t)s->core_bytes;
    for (int r = 0; r < PYBOX_NATIVE_RLIMITS; r++) {
        int64_t soft = -2, hard = -2;
        const char *name = pybox_native_rlimit_line(r);
        if (pybox_np_limit_parse(t, n, name, &soft, &hard, err) < 0)
            return;
        char w[64];
        snprintf(w, sizeof w, "%s (soft)", name);
        pybox_nv_expect_int(v, w, want[r].rlim_cur == RLIM_INFINITY ? -1 : (int64_t)want[r].rlim_cur, soft);
        snprintf(w, sizeof w, "%s (hard)", name);
        pybox_nv_expect_int(v, w, want[r].rlim_max == RLIM_INFINITY ? -1 : (int64_t)want[r].rlim_max, hard);
    }
}

/* Nothing of PyBox's own process beyond the limits: the default scheduling policy, nice
 * value and I/O priority, no personality flag, and the box's OOM score adjustment. */
static void check_process(pybox_nv_t *v, pybox_native_box_t *b, pybox_error_t *err)
{
    _cleanup_free_ char *st = NULL, *oom = NULL, *pers = NULL;
    size_t n;
    int64_t nice = -99, policy = -1, adj = -1;
    uint64_t persona = 1;
    if (read_proc(b->pid, "stat", &st, &n, err) < 0 || pybox_np_stat_parse(st, n, &nice, &policy, err) < 0 ||
        read_proc(b->pid, "oom_score_adj", &oom, &n, err) < 0 || pybox_np_signed(oom, n, &adj, err) < 0 ||
        read_proc(b->pid, "personality", &pers, &n, err) < 0 || pybox_np_hex(pers, n, &persona, err) < 0)
        return;
    pybox_nv_expect_int(v, "scheduling policy", 0 /* SCHED_OTHER */, policy);
    pybox_nv_expect_int(v, "nice value", 0, nice);
    pybox_nv_expect_int(v, "oom_score_adj", PYBOX_NATIVE_OOM_SCORE_ADJ, adj);
    pybox_nv_expect_int(v, "personality", 0, (int64_t)persona);
    /* IOPRIO_WHO_PROCESS; the default reads as "none" or, on kernels that say what it
     * comes to, best-effort level 4 (that of nice 0). */
    long io = syscall(SYS_ioprio_get, 1, (int)b->pid);
    v->checked++;
    if (io != 0 && io != ((2 << 13) | 4)) {
        char got[32];
        snprintf(got, sizeof got, "%ld", io);
        pybox_nv_differ(v, "I/O priority", "the default", got);
    }
}

static void check_exe(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    char p[64], link[PATH_MAX] = "";
    snprintf(p, sizeof p, "/proc/%d/exe", (int)b->pid);
    ssize_t n = readlink(p, link, sizeof link - 1);
    pybox_nv_expect_str(v, "exe", PYBOX_GUEST_INIT_PATH, n > 0 ? link : "(unreadable)");
    if (!(s->relax & PYBOX_RELAX_WRITABLE_ROOT)) {
        /* The very file of the spec's root filesystem, not one of the same name. */
        char want[PATH_MAX];
        struct stat a, c;
        v->checked++;
        if (pybox_fmt(want, sizeof want, "%s%s", s->rootfs, PYBOX_GUEST_INIT_PATH) < 0 || stat(want, &a) < 0 ||
            stat(p, &c) < 0 || a.st_dev != c.st_dev || a.st_ino != c.st_ino)
            pybox_nv_differ(v, "exe file", "the root filesystem's " PYBOX_GUEST_INIT_PATH, "another file");
    }
    _cleanup_free_ char *t = NULL;
    size_t len;
    if (read_proc(b->pid, "cmdline", &t, &len, err) < 0)
        return;
    char want[PYBOX_GUEST_ARGC * PYBOX_GUEST_ARG_MAX], args[PYBOX_GUEST_ARGC][PYBOX_GUEST_ARG_MAX];
    pybox_guest_argv(args, s->timer_ms, pybox_native_program_uid(s), s->wait_ms, s->life_ms);
    int wl = 0;
    for (int i = 0; i < PYBOX_GUEST_ARGC; i++) {
        size_t al = strlen(args[i]) + 1; /* with its NUL, as /proc/<pid>/cmdline has it */
        memcpy(want + wl, args[i], al);
        wl += (int)al;
    }
    v->checked++;
    if (wl < 0 || (size_t)wl != len || memcmp(want, t, len) != 0) {
        for (size_t i = 0; i < len; i++)
            if (t[i] == '\0')
                t[i] = ' ';
        for (int i = 0; i < wl; i++)
            if (want[i] == '\0')
                want[i] = ' ';
        pybox_nv_differ(v, "cmdline", want, t);
    }
}

static void check_network(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    if (s->relax_netns_pid > 0)
        return;
    _cleanup_free_ char *t = NULL;
    size_t n;
    if (read_proc(b->pid, "net/dev", &t, &n, err) < 0)
        return;
    /* Two header lines, then one line per interface: "  lo: ...". */
    int ifaces = 0;
    bool lo = false;
    char *save = NULL;
    int line = 0;
    for (char *l = strtok_r(t, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save), line++) {
        if (line < 2)
            continue;
        char *c = strchr(l, ':');
        if (c == NULL)
            continue;
        *c = '\0';
        while (*l == ' ')
            l++;
        ifaces++;
        lo |= strcmp(l, "lo") == 0;
    }
    pybox_nv_expect_str(v, "network interfaces", "lo", ifaces == 1 && lo ? "lo" : "others");
}

static void check_cgroups(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    pybox_native_cg_limits_t want;
    pybox_native_cg_want((s->relax & PYBOX_RELAX_MEMORY) ? 0 : s->memory_bytes,
                         (s->relax & PYBOX_RELAX_PIDS) ? 0 : s->pids, s->nano_cpus, &want);
    pybox_error_t cerr = {0};
    if (pybox_native_cg_check(&b->cg, &want, &v->checked, &cerr) < 0) {
        v->count++;
        if (cerr.kind != PYBOX_ERR_POLICY && cerr.kind != PYBOX_ERR_NONE) {
            pybox_buf_addf(&v->diffs, "%scgroup files: %s", v->count > 1 ? "; " : "", cerr.msg);
        } else {
            pybox_buf_addf(&v->diffs, "%s%s", v->count > 1 ? "; " : "", cerr.msg);
        }
    }
    _cleanup_free_ char *t = NULL;
    size_t n;
    if (read_proc(b->pid, "cgroup", &t, &n, err) < 0)
        return;
    char path[PATH_MAX], where[64];
    const char *wantp = b->cg.rel; /* where cgroup.h placed the leaf on this host */
    const char *v1[] = {"memory", "pids", "cpu", "cpuacct"};
    const char *const *ctrl = b->cg.version == 2 ? (const char *const[]){NULL} : v1;
    size_t nc = b->cg.version == 2 ? 1 : 4;
    for (size_t i = 0; i < nc; i++) {
        pybox_error_t perr = {0};
        snprintf(where, sizeof where, "cgroup of init (%s)", ctrl[i] ? ctrl[i] : "unified");
        if (pybox_np_cgroup_parse(t, n, ctrl[i], path, sizeof path, &perr) < 0)
            pybox_strlcpy(path, "(none)", sizeof path);
        pybox_nv_expect_str(v, where, wantp, path);
    }
}

/* ---- mounts ---- */

/* The size a tmpfs shows: whole pages, in KiB. */
static void tmpfs_size(int64_t bytes, char *out, size_t len)
{
    snprintf(out, len, "%lldk", (long long)((bytes + 4095) / 4096 * 4));
}

static bool opt_is(const char *super, const char *name, const char *want, bool absent_ok)
{
    char v[64];
    int r = pybox_np_option(super, name, v, sizeof v);
    if (r == 0)
        return absent_ok;
    return r == 1 && strcmp(v, want) == 0;
}

/* The folder a bind shows as its root: the host path relative to its file system. The
 * path must end with it, and the device must be the folder's. */
static bool bind_matches(const pybox_np_mount_t *m, const char *host)
{
    struct stat sb;
    char real[PATH_MAX];
    if (stat(host, &sb) < 0 || realpath(host, real) == NULL)
        return false;
    if (major(sb.st_dev) != m->major || minor(sb.st_dev) != m->minor)
        return false;
    size_t rl = strlen(real), ml = strlen(m->root);
    if (strcmp(m->root, "/") == 0)
        return true; /* the folder is its file system's root */
    return rl >= ml && strcmp(real + rl - ml, m->root) == 0 &&
           (rl == ml || real[rl - ml - 1] == '/' || real[rl - ml] == '/');
}

static void flag_text(unsigned f, char *out, size_t len)
{
    snprintf(out, len, "%s%s%s%s", f & PYBOX_NP_MNT_RO ? "ro" : "rw", f & PYBOX_NP_MNT_NOSUID ? ",nosuid" : "",
             f & PYBOX_NP_MNT_NODEV ? ",nodev" : "", f & PYBOX_NP_MNT_NOEXEC ? ",noexec" : "");
}

void pybox_nv_mounts(pybox_nv_t *v, const pybox_np_mount_t *m, size_t n, want_mount_t *w, size_t nw)
{
    /* The box's /dev/null: a node of its /dev, or (rootless) a bind of the host's. */
    unsigned dev_major = 0, dev_minor = 0;
    bool have_dev = false, null_bound = false;
    const char *null_root = "/null";
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].point, "/dev/null") == 0 && !null_bound) {
            dev_major = m[i].major;
            dev_minor = m[i].minor;
            null_root = m[i].root;
            have_dev = null_bound = true;
        } else if (strcmp(m[i].point, "/dev") == 0 && strcmp(m[i].fstype, "tmpfs") == 0 && !null_bound) {
            dev_major = m[i].major;
            dev_minor = m[i].minor;
            have_dev = true;
        }
    v->checked++;
    for (size_t i = 0; i < n; i++) {
        char where[224];
        snprintf(where, sizeof where, "mount %.200s", m[i].point);
        want_mount_t *x = NULL;
        for (size_t k = 0; k < nw && x == NULL; k++)
            if (strcmp(w[k].point, m[i].point) == 0 && !w[k].seen)
                x = &w[k];
        if (x == NULL) {
            char got[256];
            snprintf(got, sizeof got, "%s of %.200s", m[i].fstype, m[i].root);
            pybox_nv_differ(v, where, "absent", got);
            continue;
        }
        x->seen = true;
        v->checked++;
        if (m[i].propagates)
            pybox_nv_differ(v, where, "private", "propagates");
        char wf[48], gf[48];
        flag_text(x->flags, wf, sizeof wf);
        flag_text(m[i].flags, gf, sizeof gf);
        pybox_nv_expect_str(v, where, wf, gf);
        if (x->fstype != NULL) {
            char fw[240];
            snprintf(fw, sizeof fw, "%s type", where);
            pybox_nv_expect_str(v, fw, x->fstype, m[i].fstype);
        }
        const struct {
            const char *name, *want;
        } opts[] = {{"size", x->size}, {"mode", x->mode}, {"uid", x->uid}, {"gid", x->gid}};
        for (size_t k = 0; k < 4; k++) {
            if (opts[k].want == NULL)
                continue;
            /* tmpfs leaves out mode 1777 and uid/gid 0, its defaults. */
            bool absent_ok = strcmp(opts[k].want, "1777") == 0 || strcmp(opts[k].want, "0") == 0;
            char ow[240], gv[64] = "(absent)";
            snprintf(ow, sizeof ow, "%s %s", where, opts[k].name);
            v->checked++;
            if (!opt_is(m[i].super, opts[k].name, opts[k].want, absent_ok)) {
                (void)pybox_np_option(m[i].super, opts[k].name, gv, sizeof gv);
                pybox_nv_differ(v, ow, opts[k].want, gv);
            }
        }
        if (x->bind_of != NULL) {
            v->checked++;
            if (!bind_matches(&m[i], x->bind_of))
                pybox_nv_differ(v, where, x->bind_of, m[i].root);
        }
        if (x->from_dev) {
            v->checked++;
            if (!have_dev || m[i].major != dev_major || m[i].minor != dev_minor || strcmp(m[i].root, null_root) != 0)
                pybox_nv_differ(v, where, "the box's /dev/null", m[i].root);
        }
    }
    for (size_t k = 0; k < nw; k++)
        if (!w[k].seen) {
            char where[224];
            snprintf(where, sizeof where, "mount %.200s", w[k].point);
            pybox_nv_differ(v, where, "present", "absent");
        }
}

#define RO PYBOX_NP_MNT_RO
#define NOSUID PYBOX_NP_MNT_NOSUID
#define NODEV PYBOX_NP_MNT_NODEV
#define NOEXEC PYBOX_NP_MNT_NOEXEC

static void check_mounts(pybox_nv_t *v, pybox_native_box_t *b, const pybox_native_spec_t *s, pybox_error_t *err)
{
    _cleanup_free_ char *t = NULL;
    size_t n;
    if (read_proc(b->pid, "mountinfo", &t, &n, err) < 0)
        return;
    _cleanup_free_ pybox_np_mount_t *m = NULL;
    size_t nm;
    if (pybox_np_mountinfo_parse(t, n, MOUNTS_MAX, &m, &nm, err) < 0)
        return;
    want_mount_t w[MOUNTS_MAX];
    size_t nw = 0;
    char shm[32], tmp[32], out[32], uid[16];
    tmpfs_size(s->shm_bytes, shm, sizeof shm);
    tmpfs_size(s->tmp_bytes, tmp, sizeof tmp);
    tmpfs_size(s->out_bytes, out, sizeof out);
    snprintf(uid, sizeof uid, "%u", pybox_native_program_uid(s));
    char box_gid[16];
    snprintf(box_gid, sizeof box_gid, "%u", s->box_gid);
    int root_suid = (s->relax & PYBOX_RELAX_NEW_PRIVS) ? 0 : NOSUID; /* sandbox.c: refused twice */
    if (s->relax & PYBOX_RELAX_WRITABLE_ROOT)
        w[nw++] = (want_mount_t){.point = "/", .fstype = "overlay", .flags = root_suid | NODEV};
    else
        w[nw++] = (want_mount_t){.point = "/", .flags = RO | root_suid | NODEV, .bind_of = s->rootfs};
    w[nw++] = (want_mount_t){.point = "/proc", .fstype = "proc", .flags = NOSUID | NODEV | NOEXEC};
    w[nw++] =
        (want_mount_t){.point = "/dev", .fstype = "tmpfs", .flags = RO | NOSUID | NOEXEC, .size = "64k", .mode = "755"};
    w[nw++] = (want_mount_t){
        .point = "/dev/shm", .fstype = "tmpfs", .flags = NOSUID | NODEV | NOEXEC, .size = shm, .mode = "1777"};
    /* Rootless: the host's nodes bound, writable, never set-user-ID nor executable. */
    static const char *const nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
    for (size_t i = 0; s->rootless && i < sizeof nodes / sizeof *nodes; i++)
        w[nw++] = (want_mount_t){.point = nodes[i], .flags = NOSUID | NOEXEC, .bind_of = nodes[i]};
    /* /dev/null, bound from the read-only /dev, keeps /dev's flags (rootless: made so). */
    for (size_t i = 0; i < b->n_proc_files; i++)
        w[nw++] = (want_mount_t){.point = b->proc_files[i], .flags = RO | NOSUID | NOEXEC, .from_dev = true};
    for (size_t i = 0; i < b->n_proc_dirs; i++)
        w[nw++] = (want_mount_t){
            .point = b->proc_dirs[i], .fstype = "tmpfs", .flags = RO | NOSUID | NODEV | NOEXEC, .size = "4k"};
    for (size_t i = 0; i < b->n_proc_ro; i++)
        w[nw++] = (want_mount_t){.point = b->proc_ro[i], .fstype = "proc", .flags = RO | NOSUID | NODEV | NOEXEC};
    w[nw++] = (want_mount_t){
        .point = "/tmp", .fstype = "tmpfs", .flags = NOSUID | NODEV | NOEXEC, .size = tmp, .mode = "1777"};
    if (s->in_dir != NULL || s->mount_in)
        w[nw++] = (want_mount_t){.point = PYBOX_BOX_IN,
                                 .flags = RO | NOSUID | NODEV | NOEXEC,
                                 .bind_of = b->in_dir[0] ? b->in_dir : "(none)"};
    if (s->out_bytes > 0)
        w[nw++] = (want_mount_t){.point = PYBOX_BOX_OUT,
                                 .fstype = "tmpfs",
                                 .flags = NOSUID | NODEV | NOEXEC,
                                 .size = out,
                                 .mode = "700",
                                 .uid = uid,
                                 .gid = s->rootless ? box_gid : uid};
    if (s->relax_bind != NULL)
        w[nw++] = (want_mount_t){.point = "/host", .flags = RO | NOSUID | NODEV, .bind_of = s->relax_bind};
    if (s->relax_socket != NULL) {
        w[nw++] = (want_mount_t){.point = "/run", .fstype = "tmpfs", .flags = NOSUID | NODEV};
        w[nw++] = (want_mount_t){
            .point = PYBOX_RELAX_SOCKET_AT, .flags = NOSUID | NODEV | NOEXEC, .bind_of = s->relax_socket};
    }
    pybox_nv_mounts(v, m, nm, w, nw);
}

int pybox_native_verify(pybox_native_box_t *b, const pybox_native_spec_t *s, int *checked, pybox_error_t *err)
{
    if (checked != NULL)
        *checked = 0;
    if (b->pid <= 0 || b->reaped || !pybox_native_running(b))
        return pybox_error_set(err, PYBOX_ERR_POLICY, 0, "native box: its init is not running");
    pybox_nv_t v;
    pybox_nv_init(&v);
    pybox_error_t rerr = {0};
    check_status(&v, b, s, &rerr);
    check_environ(&v, b, s, &rerr);
    check_hostname(&v, b, s, &rerr);
    check_namespaces(&v, b, s);
    check_idmaps(&v, b, s, &rerr);
    check_limits(&v, b, s, &rerr);
    check_process(&v, b, &rerr);
    check_exe(&v, b, s, &rerr);
    check_network(&v, b, s, &rerr);
    check_mounts(&v, b, s, &rerr);
    check_cgroups(&v, b, s, &rerr);
    /* Read after everything else: a box that ended in between proves nothing. */
    if (!pybox_native_running(b)) {
        pybox_nv_free(&v);
        return pybox_error_set(err, PYBOX_ERR_POLICY, 0, "native box: its init ended during verification");
    }
    if (checked != NULL)
        *checked = v.checked;
    int rc = 0;
    if (rerr.kind != PYBOX_ERR_NONE) {
        rc = pybox_error_set(err, PYBOX_ERR_POLICY, rerr.errnum, "native box: the kernel's view could not be read: %s",
                             rerr.msg);
    } else if (v.count > 0) {
        rc = pybox_error_set(err, PYBOX_ERR_POLICY, 0,
                             "native box: the box differs from the spec in %d of %d settings: %s%s", v.count, v.checked,
                             pybox_buf_ok(&v.diffs) ? (v.diffs.data ? v.diffs.data : "")
                                                    : "(out of memory: the differences could not be listed)",
                             v.count > 16 ? "; ..." : "");
    }
    pybox_nv_free(&v);
    return rc;
}
