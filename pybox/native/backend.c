/* SPDX-License-Identifier: MIT */
/* The native backend: the box interface (box.h) over the native sandbox (sandbox.h).
 * A box is made whole at create (its init runs and waits for its hello), so verify reads
 * the kernel's view before the program can start; start has nothing left to do. The box's
 * streams are three pipes. Images are root filesystem folders (image.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../guest/proto.h"
#include "../bounds.h"
#include "../box.h"
#include "../buf.h"
#include "../cgroup.h"
#include "../escape.h"
#include "../util.h"
#include "native.h"
#include "rootless.h"
#include "sandbox.h"

typedef struct native_box {
    pybox_box_t base;
    pybox_native_box_t *nb;
    pybox_native_spec_t spec; /* its strings live below */
    char rootfs[PATH_MAX];
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    char name[33];
    char env_entry[256];
    char env_host[80];
    const char *env[12];
    char box_name[PYBOX_NAME_MAX];
    char spec_sha256[65];
    bool out_eof, err_eof;
    unsigned held_at_end; /* PYBOX_HELD_* of a pipe not at its end when the box's end was seen */
} native_box_t;

static const pybox_box_ops_t native_box_ops;

static native_backend_t *nbe(pybox_backend_t *be)
{
    return (native_backend_t *)be;
}

/* ---- the spec from the policy ---- */

/* The SHA-256 of the spec as one canonical line of text: every setting the box was made
 * from, so two boxes with the same digest were made alike. */
static void spec_digest(const pybox_native_spec_t *s, char out[65])
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_addf(&b,
                   "native/1 rootfs=%s in=%d out=%lld tmp=%lld shm=%lld uid=%u timer=%lld memory=%lld pids=%lld "
                   "cpus=%lld nofile=%lld fsize=%lld sigpending=%lld parent=%s name=%s relax=%u",
                   s->rootfs, s->mount_in ? 1 : 0, (long long)s->out_bytes, (long long)s->tmp_bytes,
                   (long long)s->shm_bytes, (unsigned)s->uid, (long long)s->timer_ms, (long long)s->memory_bytes,
                   (long long)s->pids, (long long)s->nano_cpus, (long long)s->nofile, (long long)s->fsize_bytes,
                   (long long)s->sigpending, s->cgroup_parent, s->name, s->relax);
    for (size_t i = 0; s->env[i] != NULL; i++)
        pybox_buf_addf(&b, " env=%s", s->env[i]);
    pybox_buf_addf(&b, " bind=%s cap=%s socket=%s netns=%d seccomp=%s", s->relax_bind ? s->relax_bind : "",
                   s->relax_cap ? s->relax_cap : "", s->relax_socket ? s->relax_socket : "", (int)s->relax_netns_pid,
                   pybox_policy_seccomp_sha256());
    if (s->relax_unmask != NULL) /* only then: the digest of every other spec stays as it was */
        pybox_buf_addf(&b, " unmask=%s", s->relax_unmask);
    if (s->wait_ms > 0) /* a box made before its program (the same: a cold box's stays as it was) */
        pybox_buf_addf(&b, " wait=%lld life=%lld", (long long)s->wait_ms, (long long)s->life_ms);
    if (s->rootless) /* the same */
        pybox_buf_addf(&b, " rootless=%u:%u:%u", s->user_uid, s->user_gid, s->box_gid);
    if (pybox_buf_ok(&b))
        pybox_sha256_hex(b.data, b.len, out);
    else
        out[0] = '\0';
    pybox_buf_free(&b);
}

void pybox_native_spec_defaults(pybox_native_spec_t *s)
{
    pybox_policy_t p;
    pybox_policy_defaults(&p);
    s->tmp_bytes = p.tmp_bytes;
    s->shm_bytes = p.shm_bytes;
    s->timer_ms = p.box_timer_ms;
    s->memory_bytes = p.memory_bytes;
    s->pids = p.pids;
    s->nano_cpus = p.nano_cpus;
    s->nofile = p.nofile;
    s->fsize_bytes = p.fsize_bytes;
    s->sigpending = p.sigpending;
    s->core_bytes = p.core_bytes;
    s->hostname = p.hostname; /* static, as the policy's are */
    s->init_caps = p.init_caps;
}

static int make_spec(native_backend_t *be, const pybox_policy_t *p, native_box_t *b, pybox_error_t *err)
{
    pybox_native_spec_t *s = &b->spec;
    memset(s, 0, sizeof *s);
    if (pybox_native_image_root(be, p->image_id, b->rootfs, sizeof b->rootfs, err) < 0)
        return -1;
    if (pybox_native_cg_parent(p->install_id, b->parent, err) < 0 ||
        pybox_strlcpy(b->name, p->run_id, sizeof b->name) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the box's names");
    s->rootfs = b->rootfs;
    s->in_dir = NULL;
    s->mount_in = p->mount_in;
    s->out_bytes = p->mount_out ? p->out_bytes : 0;
    s->tmp_bytes = p->tmp_bytes;
    s->shm_bytes = p->shm_bytes;
    s->uid = p->program_uid; /* the run's own; a relaxation (program root, a shared uid) is the sandbox's */
    if (be->rootless) {
        /* its uid leased from the user's range (uid.h), its gid the same place in theirs */
        s->rootless = true;
        s->user_uid = be->user_uid;
        s->user_gid = be->user_gid;
        s->box_gid = p->program_uid - be->box_uid_base + be->box_gid_base;
    }
    s->timer_ms = p->box_timer_ms;
    s->wait_ms = p->box_wait_ms;
    s->life_ms = p->box_life_ms;
    s->memory_bytes = (p->relax & PYBOX_RELAX_MEMORY) ? 0 : p->memory_bytes;
    s->pids = (p->relax & PYBOX_RELAX_PIDS) ? 0 : p->pids;
    s->nano_cpus = p->nano_cpus;
    s->nofile = p->nofile;
    s->fsize_bytes = p->fsize_bytes;
    s->sigpending = p->sigpending;
    s->core_bytes = p->core_bytes;
    s->hostname = p->hostname;
    s->init_caps = p->init_caps;
    s->cgroup_root = pybox_cgroup_root();
    s->cgroup_parent = b->parent;
    s->name = b->name;
    s->staging = be->staging;
    s->filters = be->filters;
    s->expires = p->expires;
    size_t n = 0;
    for (const char *const *e = p->env; e != NULL && *e != NULL && n + 3 < sizeof b->env / sizeof *b->env; e++)
        b->env[n++] = *e;
    /* as an engine sets it for a box of that name */
    if (pybox_fmt(b->env_host, sizeof b->env_host, "HOSTNAME=%s", p->hostname) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the box's hostname");
    b->env[n++] = b->env_host;
    if (p->relax_env != NULL) {
        if (pybox_strlcpy(b->env_entry, p->relax_env, sizeof b->env_entry) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "a relaxed environment entry");
        b->env[n++] = b->env_entry;
    }
    b->env[n] = NULL;
    s->env = b->env;
    s->relax = p->relax;
    s->relax_bind = p->relax_bind;
    s->relax_env = NULL; /* already in env */
    s->relax_cap = p->relax_cap;
    s->relax_socket = p->relax_socket;
    s->relax_unmask = p->relax_unmask;
    if (p->relax_netns != NULL && pybox_native_netns_pid(be, p->relax_netns, &s->relax_netns_pid, err) < 0)
        return -1;
    return 0;
}

/* ---- boxes ---- */

static int n_create(pybox_backend_t *base, const pybox_policy_t *p, pybox_box_t **out, pybox_error_t *err)
{
    native_backend_t *be = nbe(base);
    native_box_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    b->base.ops = &native_box_ops;
    if (make_spec(be, p, b, err) < 0) {
        free(b);
        return -1;
    }
    spec_digest(&b->spec, b->spec_sha256);
    snprintf(b->box_name, sizeof b->box_name, "pybox-%s", b->name);
    b->base.id = b->name;
    b->base.name = b->box_name;
    b->base.spec_sha256 = b->spec_sha256;
    /* Testing only (policy.h): the box is made from a spec that differs from the policy in
     * one setting, and verify, which compares the kernel's view with the policy's spec,
     * must refuse it. */
    pybox_native_spec_t applied = b->spec;
    if (p->tamper != NULL) {
        if (strcmp(p->tamper, "memory") == 0)
            applied.memory_bytes *= 2;
        else if (strcmp(p->tamper, "pids") == 0)
            applied.pids += 1;
        else if (strcmp(p->tamper, "readonly") == 0)
            applied.relax |= PYBOX_RELAX_WRITABLE_ROOT;
        else if (strcmp(p->tamper, "user") == 0)
            applied.uid = be->rootless ? applied.uid + 1 : 1000; /* rootless: still of the user's range */
        else if (strcmp(p->tamper, "capdrop") == 0)
            applied.relax_cap = "CAP_SYS_ADMIN";
    }
    if (pybox_native_create(&applied, &b->nb, err) < 0) {
        free(b);
        return -1;
    }
    *out = &b->base;
    return 0;
}

static int n_verify(pybox_box_t *base, const pybox_policy_t *p, int *checked, pybox_error_t *err)
{
    (void)p; /* the spec was made from it; the kernel's view is compared with the spec */
    native_box_t *b = (native_box_t *)base;
    return pybox_native_verify(b->nb, &b->spec, checked, err);
}

static int n_put_files(pybox_box_t *base, const void *tar, size_t len, pybox_error_t *err)
{
    return pybox_native_put_files(((native_box_t *)base)->nb, tar, len, err);
}

static int n_get_files(pybox_box_t *base, size_t max, pybox_buf_t *out, pybox_error_t *err)
{
    pybox_buf_init(out, max);
    return pybox_native_get_files(((native_box_t *)base)->nb, max, out, err);
}

static int n_open_io(pybox_box_t *base, pybox_error_t *err)
{
    (void)base;
    (void)err;
    return 0; /* the pipes were made with the box */
}

static int n_start(pybox_box_t *base, pybox_error_t *err)
{
    native_box_t *b = (native_box_t *)base;
    /* The init runs and waits for its hello: nothing to start, only to confirm. */
    if (!pybox_native_running(b->nb))
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ESRCH, "the box's init ended before its start");
    return 0;
}

static void n_io_fds(const pybox_box_t *base, int *in_fd, int out_fds[2], int *n_out)
{
    const native_box_t *b = (const native_box_t *)base;
    *in_fd = pybox_native_stdin(b->nb);
    *n_out = 0;
    if (!b->out_eof)
        out_fds[(*n_out)++] = pybox_native_stdout(b->nb);
    if (!b->err_eof)
        out_fds[(*n_out)++] = pybox_native_stderr(b->nb);
}

static ssize_t n_io_write(pybox_box_t *base, const void *data, size_t len, pybox_error_t *err)
{
    (void)err;
    native_box_t *b = (native_box_t *)base;
    int fd = pybox_native_stdin(b->nb);
    if (fd < 0) {
        errno = EPIPE;
        return -1;
    }
    return pybox_write_some(fd, data, len);
}

static int n_io_close_write(pybox_box_t *base, pybox_error_t *err)
{
    (void)err;
    pybox_native_close_stdin(((native_box_t *)base)->nb);
    return 0;
}

/* Drain one pipe: 1 at its end, 0 when nothing more is ready, -1 on failure. At most
 * rounds reads of 64 KiB, so one busy stream cannot keep the run from the others. */
static int drain(int fd, int stream, int rounds_max, pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    char chunk[65536];
    for (int rounds = 0; rounds < rounds_max; rounds++) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return 0;
        if (r < 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "reading the box's %s",
                                   stream == 1 ? "stdout" : "stderr");
        if (r == 0)
            return 1;
        if (cb(arg, stream, chunk, (size_t)r) < 0)
            return -1;
    }
    return 0;
}

/* Whole pipes: a pipe holds at most 1 MiB unless root raised the host's pipe-max-size,
 * and once the box has ended nothing writes to it any more. */
#define DRAIN_ENDED_ROUNDS 1024

/* Drain one of the box's output streams unless it has ended; once the box has ended, the
 * stream is over whether or not its pipe was, and held records a pipe still open. */
static int drain_stream(native_box_t *b, int fd, int stream, bool *eof, unsigned held, bool ended, int rounds,
                        pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    if (*eof)
        return 0;
    int r = drain(fd, stream, rounds, cb, arg, err);
    if (r < 0)
        return -1;
    *eof = r == 1 || ended;
    if (ended && r != 1)
        b->held_at_end |= held;
    return 0;
}

static int n_io_read(pybox_box_t *base, pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    native_box_t *b = (native_box_t *)base;
    /* Asked before reading: once init has ended, so has every process of the box (init is
     * its PID namespace's PID 1), no process can write to its pipes any more, and what
     * they hold is all the box said. Their end may come later, or never without the
     * kernel's collector: a descriptor in flight in a unix socket holds a write end. */
    bool ended = pybox_native_ended(b->nb);
    int rounds = ended ? DRAIN_ENDED_ROUNDS : 16;
    /* stderr first, as the engine's stream is read: the record ends stdout */
    if (drain_stream(b, pybox_native_stderr(b->nb), 2, &b->err_eof, PYBOX_HELD_STDERR, ended, rounds, cb, arg, err) <
            0 ||
        drain_stream(b, pybox_native_stdout(b->nb), 1, &b->out_eof, PYBOX_HELD_STDOUT, ended, rounds, cb, arg, err) < 0)
        return -1;
    return b->out_eof && b->err_eof ? 1 : 0;
}

static int n_end_fd(const pybox_box_t *base)
{
    return pybox_native_pidfd(((const native_box_t *)base)->nb);
}

static int n_signal(pybox_box_t *base, int sig, pybox_error_t *err)
{
    return pybox_native_signal(((native_box_t *)base)->nb, sig, err);
}

static int n_wait(pybox_box_t *base, int64_t timeout_ms, pybox_box_end_t *out, pybox_error_t *err)
{
    native_box_t *b = (native_box_t *)base;
    pybox_native_end_t end;
    if (pybox_native_wait(b->nb, timeout_ms, &end, err) < 0)
        return -1;
    if (end.timed_out)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ETIMEDOUT, "the box %s did not end", b->name);
    memset(out, 0, sizeof *out);
    /* The kernel's own account: waitid() of the box's init. */
    out->signal = end.exited ? 0 : end.signal;
    out->exit_code = end.exited ? end.exit_code : 128 + end.signal;
    out->oom_killed = end.oom_kills > 0;
    return 0;
}

static int n_running(pybox_box_t *base, bool *running, pybox_error_t *err)
{
    (void)err;
    *running = pybox_native_running(((native_box_t *)base)->nb);
    return 0;
}

/* The watcher's location of a box's cgroup folders. */
static int native_loc(const pybox_native_cgroup_t *cg, pybox_cgroup_loc_t *loc)
{
    memset(loc, 0, sizeof *loc);
    if (cg->version == 2) {
        loc->version = PYBOX_CG_V2;
        pybox_strlcpy(loc->dir[0], cg->unified, PATH_MAX);
    } else {
        loc->version = PYBOX_CG_V1;
        pybox_strlcpy(loc->dir[PYBOX_CG_MEMORY], cg->memory, PATH_MAX);
        pybox_strlcpy(loc->dir[PYBOX_CG_PIDS], cg->pids, PATH_MAX);
        pybox_strlcpy(loc->dir[PYBOX_CG_CPUACCT], cg->cpuacct, PATH_MAX);
        pybox_strlcpy(loc->dir[PYBOX_CG_CPU], cg->cpu, PATH_MAX);
    }
    return 0;
}

static int n_cgroup(pybox_box_t *base, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    native_box_t *b = (native_box_t *)base;
    pybox_native_cgroup_t cg;
    memset(loc, 0, sizeof *loc);
    if (pybox_native_cgroup(b->nb, &cg) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "the box's cgroup is not known");
    return native_loc(&cg, loc);
}

static void n_held(pybox_box_t *base)
{
    pybox_native_held(((native_box_t *)base)->nb);
}

static int n_remove(pybox_box_t *base, bool *gone, pybox_error_t *err)
{
    return pybox_native_remove(((native_box_t *)base)->nb, gone, err);
}

static void n_after_end(const pybox_box_t *base, pybox_box_after_t *out)
{
    const native_box_t *b = (const native_box_t *)base;
    pybox_native_after_t a;
    pybox_native_after(b->nb, &a);
    static const struct {
        unsigned native, box;
    } bits[] = {{PYBOX_NATIVE_HELD_STDIN, PYBOX_HELD_STDIN},
                {PYBOX_NATIVE_HELD_STDOUT, PYBOX_HELD_STDOUT},
                {PYBOX_NATIVE_HELD_STDERR, PYBOX_HELD_STDERR},
                {PYBOX_NATIVE_HELD_MOUNT_NS, PYBOX_HELD_MOUNT_NS}};
    memset(out, 0, sizeof *out);
    out->looked = a.looked;
    for (size_t i = 0; i < sizeof bits / sizeof *bits; i++) {
        if (a.held & bits[i].native)
            out->held |= bits[i].box;
        if (a.still & bits[i].native)
            out->still |= bits[i].box;
    }
    /* Seen the moment the box's end was (the removal looks a little later, when another
     * process's close of a unix socket may have had the collector release them). */
    if (a.looked)
        out->held |= b->held_at_end;
    out->mount_ns_known = a.mount_ns_known;
    out->collector = a.collector;
    out->collect_ms = a.collect_ms;
}

static void n_free(pybox_box_t *base)
{
    native_box_t *b = (native_box_t *)base;
    if (b == NULL)
        return;
    pybox_native_free(b->nb);
    free(b);
}

static const pybox_box_ops_t native_box_ops = {
    .verify = n_verify,
    .put_files = n_put_files,
    .get_files = n_get_files,
    .open_io = n_open_io,
    .start = n_start,
    .io_fds = n_io_fds,
    .io_write = n_io_write,
    .io_close_write = n_io_close_write,
    .io_read = n_io_read,
    .end_fd = n_end_fd,
    .signal = n_signal,
    .wait = n_wait,
    .running = n_running,
    .cgroup = n_cgroup,
    .held = n_held,
    .remove = n_remove,
    .after_end = n_after_end,
    .free = n_free,
};

/* ---- leftovers: each run's cgroup leaf and staging folder, as one ---- */

static int n_list_leftovers(pybox_backend_t *base, const char *install_id, pybox_leftover_t **out, size_t *n,
                            pybox_error_t *err)
{
    native_backend_t *be = nbe(base);
    *out = NULL;
    *n = 0;
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    if (pybox_native_cg_parent(install_id, parent, err) < 0)
        return -1;
    pybox_native_leftover_t *nl = NULL;
    size_t nn = 0;
    if (pybox_native_leftovers(&be->cg_host, parent, be->staging, &nl, &nn, err) < 0)
        return -1;
    /* And the image folders no pin of this installation names (left by a rebuild while a
     * box was there, or by an import cut short). */
    char(*images)[72] = NULL;
    int64_t *image_mtime = NULL;
    size_t ni = 0;
    if (native_unpinned_images(be, &images, &image_mtime, &ni, err) < 0) {
        free(nl);
        return -1;
    }
    pybox_leftover_t *v = calloc(nn + ni + 1, sizeof *v);
    if (v == NULL) {
        free(nl);
        free(images);
        free(image_mtime);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing leftovers");
    }
    for (size_t i = 0; i < ni; i++) {
        pybox_leftover_t *l = &v[nn + i];
        snprintf(l->kind, sizeof l->kind, "image");
        snprintf(l->id, sizeof l->id, "%s", images[i]);
        snprintf(l->name, sizeof l->name, "root filesystem folder %.16s", images[i]);
        /* a build renames its folder into place just before it pins it: ten minutes */
        l->expires = image_mtime[i] + 600;
        l->order = 1;         /* after the boxes */
        l->asked_only = true; /* a whole tree: never in a run's way */
        snprintf(l->state, sizeof l->state, "not pinned");
    }
    free(images);
    free(image_mtime);
    for (size_t i = 0; i < nn; i++) {
        pybox_leftover_t *l = &v[i];
        snprintf(l->kind, sizeof l->kind, "box");
        snprintf(l->id, sizeof l->id, "%s", nl[i].run_id);
        snprintf(l->name, sizeof l->name, "pybox-%s", nl[i].run_id);
        memcpy(l->run_id, nl[i].run_id, sizeof l->run_id);
        l->expires = nl[i].expires > 0 ? nl[i].expires : -1;
        l->running = false; /* the kernel refuses to remove a cgroup with a process in it */
        snprintf(l->state, sizeof l->state, "%s%s", nl[i].cgroup ? "cgroup" : "",
                 nl[i].staging ? (nl[i].cgroup ? "+staging" : "staging") : "");
    }
    free(nl);
    *out = v;
    *n = nn + ni;
    return 0;
}

static int n_remove_leftover(pybox_backend_t *base, const pybox_leftover_t *l, bool *gone, pybox_error_t *err)
{
    native_backend_t *be = nbe(base);
    *gone = false;
    if (strcmp(l->kind, "image") == 0)
        return native_remove_unpinned(be, l->id, gone, err);
    pybox_native_leftover_t nl;
    memset(&nl, 0, sizeof nl);
    memcpy(nl.run_id, l->run_id, sizeof nl.run_id);
    nl.expires = l->expires;
    nl.cgroup = strstr(l->state, "cgroup") != NULL;
    nl.staging = strstr(l->state, "staging") != NULL;
    /* leftovers.c decided it has expired; the sandbox checks again against now */
    return pybox_native_leftover_remove(&be->cg_host, be->cg_parent, be->staging, &nl, pybox_wall_s(), gone, err);
}

static int n_run_cgroup(pybox_backend_t *base, const char *run_id, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    native_backend_t *be = nbe(base);
    memset(loc, 0, sizeof *loc);
    pybox_native_cgroup_t cg;
    if (!pybox_native_is_run_id(run_id))
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "not a run id");
    if (pybox_native_cg_paths(&be->cg_host, be->cg_parent, run_id, &cg, err) < 0)
        return -1;
    return native_loc(&cg, loc);
}

/* The installation's cgroup parents, one per hierarchy ("" for none); none under systemd,
 * where each box's scope is systemd's, gone with the box. */
static int n_parents(const native_backend_t *be, const char *install_id, char dirs[5][PATH_MAX], pybox_error_t *err)
{
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    memset(dirs, 0, 5 * sizeof dirs[0]);
    if (be->cg_host.systemd)
        return 0;
    if (pybox_native_cg_parent(install_id, parent, err) < 0 ||
        pybox_native_cg_holders(&be->cg_host, parent, dirs, err) < 0)
        return -1;
    return 0;
}

static int n_kept(pybox_backend_t *base, const char *install_id, char (*out)[PATH_MAX], size_t max, size_t *n,
                  pybox_error_t *err)
{
    char dirs[5][PATH_MAX];
    *n = 0;
    if (n_parents(nbe(base), install_id, dirs, err) < 0)
        return -1;
    for (size_t i = 0; i < 5 && *n < max; i++) {
        struct stat sb;
        if (dirs[i][0] != '\0' && stat(dirs[i], &sb) == 0)
            memcpy(out[(*n)++], dirs[i], PATH_MAX);
    }
    return 0;
}

/* No log of boxes is kept: a box made (or removed) changes the folders it is made in (the
 * installation's cgroup parents, its staging folder), whose change time the kernel keeps. */
static int n_events(pybox_backend_t *base, const char *install_id, double since, double until, cJSON *into,
                    pybox_error_t *err)
{
    native_backend_t *be = nbe(base);
    char dirs[6][PATH_MAX];
    if (n_parents(be, install_id, dirs, err) < 0)
        return -1;
    memcpy(dirs[5], be->staging, sizeof dirs[5]);
    for (size_t i = 0; i < 6; i++) {
        struct stat sb;
        if (dirs[i][0] == '\0' || stat(dirs[i], &sb) < 0)
            continue;
        double t = (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec / 1e9;
        if (t < since || t > until)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "action", "changed");
        cJSON_AddStringToObject(o, "kind", "folder");
        cJSON_AddStringToObject(o, "id", dirs[i]);
        cJSON_AddStringToObject(o, "run_id", "");
        cJSON_AddNumberToObject(o, "time", t);
        cJSON_AddItemToArray(into, o);
    }
    return 0;
}

static int n_forget(pybox_backend_t *base, const char *install_id, pybox_error_t *err)
{
    char dirs[5][PATH_MAX];
    if (n_parents(nbe(base), install_id, dirs, err) < 0)
        return -1;
    for (size_t i = 0; i < 5; i++)
        if (dirs[i][0] != '\0' && rmdir(dirs[i]) < 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "rmdir(%s)", dirs[i]);
    return 0;
}

/* ---- the backend ---- */

static int n_open(const pybox_state_t *st, pybox_backend_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (st == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "the native backend needs an installation");
    /* An ordinary user's boxes need what rootless.h lists: all of it, or no box. */
    pybox_rootless_t rl;
    pybox_rootless_host_t rh = {.root = "", .uid = geteuid(), .gid = getegid()};
    if (geteuid() != 0 && pybox_rootless_probe(&rh, &rl, err) < 0)
        return -1;
    native_backend_t *be = calloc(1, sizeof *be);
    if (be == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    be->base.ops = &pybox_native_backend_ops;
    be->st = *st;
    pybox_strlcpy(be->install_id, st->install_id, sizeof be->install_id);
    if (geteuid() != 0) {
        uint32_t count;
        be->rootless = true;
        be->user_uid = rl.uid;
        be->user_gid = rl.gid;
        pybox_rootless_box_ids(&rl, &be->box_uid_base, &be->box_gid_base, &count);
    }
    if (pybox_native_dirs(be, err) < 0) {
        free(be);
        return -1;
    }
    if (pybox_native_cg_parent(be->install_id, be->cg_parent, err) < 0 ||
        pybox_native_cg_host(pybox_cgroup_root(), NULL, &be->cg_host, err) < 0) {
        free(be);
        return -1;
    }
    pybox_cgroup_host_t host;
    pybox_cgroup_host(NULL, NULL, &host);
    if (be->rootless)
        snprintf(be->describe, sizeof be->describe,
                 "Linux %s, cgroup v%d (a scope per box from the user's systemd), no daemon, rootless: as user %s "
                 "(uid %u), the box's user from its subordinate range",
                 host.kernel, be->cg_host.version, rl.user[0] ? rl.user : "(no name)", (unsigned)rl.uid);
    else
        snprintf(be->describe, sizeof be->describe, "Linux %s, cgroup v%d%s, no daemon", host.kernel,
                 be->cg_host.version, be->cg_host.systemd ? " (a scope per box from systemd)" : "");
    *out = &be->base;
    return 0;
}

static void n_close(pybox_backend_t *base)
{
    free(base);
}

static const char *n_describe(const pybox_backend_t *base)
{
    return ((const native_backend_t *)base)->describe;
}

const pybox_backend_ops_t pybox_native_backend_ops = {
    .name = "native",
    .holder = "the native backend",
    .importing = "unpacking into a root filesystem folder:",
    .pins_file = "images-native.json",
    .lent_images = PYBOX_NATIVE_ROOTS,
    .borrowed_images = PYBOX_NATIVE_BORROWED,
    .open = n_open,
    .close = n_close,
    .describe = n_describe,
    .create = n_create,
    .list_leftovers = n_list_leftovers,
    .remove_leftover = n_remove_leftover,
    .run_cgroup = n_run_cgroup,
    .forget = n_forget,
    .kept = n_kept,
    .events = n_events,
    .images = &pybox_native_image_ops,
};
