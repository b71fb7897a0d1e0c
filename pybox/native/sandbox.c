/* SPDX-License-Identifier: MIT */
/* The native sandbox: making, signalling, reaping and removing a box (see sandbox.h). */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../guest/proto.h"
#include "../bounds.h"
#include "../escape.h"
#include "../files.h"
#include "../policy.h"
#include "../systemd.h"
#include "../util.h"
#include "internal.h"
#include "parse.h"
#include "rootless.h"
#include "seccomp.h"

#define NUMBER_TEXT_(n) #n
#define NUMBER_TEXT(n) NUMBER_TEXT_(n)

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* ---- the spec ---- */

bool pybox_native_is_run_id(const char *s)
{
    if (s == NULL || strlen(s) != 32)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

uint32_t pybox_native_program_uid(const pybox_native_spec_t *s)
{
    if (s->relax & PYBOX_RELAX_PROGRAM_ROOT)
        return 0;
    if (s->relax & PYBOX_RELAX_SHARED_UID) /* rootless: the user's quotas are shared anyway (rootless.h) */
        return s->rootless ? s->uid : PYBOX_SHARED_UID;
    return s->uid;
}

int pybox_native_caps(const pybox_native_spec_t *s, uint64_t *caps, pybox_error_t *err)
{
    uint64_t c = 0;
    for (const char *const *name = s->init_caps; name != NULL && *name != NULL; name++) {
        int n = pybox_native_cap_number(*name);
        if (n < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "native box: an init capability is not one libcap (libcap.so.2) knows: %.40s",
                                   *name);
        c |= 1ULL << n;
    }
    if (s->relax & PYBOX_RELAX_ENGINE_CAPS) {
        /* The engine's default set, which a box gets when nothing is dropped. */
        static const char *const engine[] = {
            "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
            "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
            "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
            "CAP_KILL",    "CAP_AUDIT_WRITE"};
        for (size_t i = 0; i < sizeof engine / sizeof *engine; i++) {
            int n = pybox_native_cap_number(engine[i]);
            if (n < 0)
                return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "%s: not known to libcap (libcap.so.2)", engine[i]);
            c |= 1ULL << n;
        }
    }
    if (s->relax_cap != NULL) {
        int n = pybox_native_cap_number(s->relax_cap);
        if (n < 0) {
            char shown[64];
            pybox_escape_short(shown, sizeof shown, s->relax_cap, 40);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "relax_cap %s is not a capability", shown);
        }
        c |= 1ULL << n;
    }
    *caps = c;
    return 0;
}

static const struct {
    const char *name, *line;
} rlimit_names[PYBOX_NATIVE_RLIMITS] = {
    [RLIMIT_CPU] = {"RLIMIT_CPU", "Max cpu time"},
    [RLIMIT_FSIZE] = {"RLIMIT_FSIZE", "Max file size"},
    [RLIMIT_DATA] = {"RLIMIT_DATA", "Max data size"},
    [RLIMIT_STACK] = {"RLIMIT_STACK", "Max stack size"},
    [RLIMIT_CORE] = {"RLIMIT_CORE", "Max core file size"},
    [RLIMIT_RSS] = {"RLIMIT_RSS", "Max resident set"},
    [RLIMIT_NPROC] = {"RLIMIT_NPROC", "Max processes"},
    [RLIMIT_NOFILE] = {"RLIMIT_NOFILE", "Max open files"},
    [RLIMIT_MEMLOCK] = {"RLIMIT_MEMLOCK", "Max locked memory"},
    [RLIMIT_AS] = {"RLIMIT_AS", "Max address space"},
    [RLIMIT_LOCKS] = {"RLIMIT_LOCKS", "Max file locks"},
    [RLIMIT_SIGPENDING] = {"RLIMIT_SIGPENDING", "Max pending signals"},
    [RLIMIT_MSGQUEUE] = {"RLIMIT_MSGQUEUE", "Max msgqueue size"},
    [RLIMIT_NICE] = {"RLIMIT_NICE", "Max nice priority"},
    [RLIMIT_RTPRIO] = {"RLIMIT_RTPRIO", "Max realtime priority"},
    [RLIMIT_RTTIME] = {"RLIMIT_RTTIME", "Max realtime timeout"},
};

const char *pybox_native_rlimit_line(int resource)
{
    return resource >= 0 && resource < PYBOX_NATIVE_RLIMITS ? rlimit_names[resource].line : "?";
}

const char *pybox_native_rlimit_name(int resource)
{
    return resource >= 0 && resource < PYBOX_NATIVE_RLIMITS ? rlimit_names[resource].name : "?";
}

void pybox_native_rlimits(const pybox_native_spec_t *s, struct rlimit out[PYBOX_NATIVE_RLIMITS])
{
    for (int r = 0; r < PYBOX_NATIVE_RLIMITS; r++) {
        /* What PyBox's own process has is the most a box can get without CAP_SYS_RESOURCE,
         * and the least a box that has not got it inherits (a soft limit the program could
         * raise to it). */
        struct rlimit own = {RLIM_INFINITY, RLIM_INFINITY};
        (void)getrlimit(r, &own);
        rlim_t v = own.rlim_max;
        rlim_t ceiling = RLIM_INFINITY;
        if (r == RLIMIT_STACK || r == RLIMIT_MEMLOCK)
            ceiling = 8ULL << 20;
        else if (r == RLIMIT_MSGQUEUE)
            ceiling = s->rootless && !(s->relax & PYBOX_RELAX_SHARED_UID) ? PYBOX_ROOTLESS_MSGQUEUE_BYTES : 819200;
        else if (r == RLIMIT_NICE || r == RLIMIT_RTPRIO || r == RLIMIT_CORE)
            ceiling = 0;
        if (ceiling != RLIM_INFINITY && (v == RLIM_INFINITY || v > ceiling))
            v = ceiling;
        if (r == RLIMIT_NOFILE)
            v = (rlim_t)s->nofile;
        else if (r == RLIMIT_FSIZE)
            v = (rlim_t)s->fsize_bytes;
        else if (r == RLIMIT_SIGPENDING)
            v = (rlim_t)s->sigpending;
        else if (r == RLIMIT_CORE)
            v = (rlim_t)s->core_bytes;
        out[r] = (struct rlimit){v, v};
    }
}

static int usage(pybox_error_t *err, const char *what, const char *value)
{
    char shown[PATH_MAX];
    pybox_escape_short(shown, sizeof shown, value ? value : "(none)", 200);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: %s: %s", what, shown);
}

static int range(pybox_error_t *err, const char *what, int64_t v, int64_t lo, int64_t hi)
{
    if (v >= lo && v <= hi)
        return 0;
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: %s %lld is out of range (%lld to %lld)", what,
                           (long long)v, (long long)lo, (long long)hi);
}

static bool is_dir_at(const char *base, const char *rel)
{
    char p[PATH_MAX];
    struct stat sb;
    return pybox_fmt(p, sizeof p, "%s%s", base, rel) == 0 && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* An absolute path without "." or ".." parts or doubled slashes: what is checked is
 * what is mounted. */
static bool clean_abs(const char *p)
{
    if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX - 64)
        return false;
    for (const char *q = p; *q; q++) {
        if (q[0] == '/' && (q[1] == '/' || (q[1] == '.' && (q[2] == '/' || q[2] == '\0')) ||
                            (q[1] == '.' && q[2] == '.' && (q[3] == '/' || q[3] == '\0'))))
            return false;
    }
    return true;
}

/* A relative cgroup path: parts of [A-Za-z0-9_.-], none "." or "..". */
static bool clean_rel(const char *p)
{
    if (p == NULL || p[0] == '\0' || p[0] == '/' || strlen(p) > 200)
        return false;
    for (const char *q = p; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-' ||
              *q == '_' || *q == '.' || *q == '/'))
            return false;
    return strstr(p, "//") == NULL && strstr(p, "/./") == NULL && strstr(p, "/../") == NULL &&
           strncmp(p, "./", 2) != 0 && strncmp(p, "../", 3) != 0 && strcmp(p, ".") != 0 && strcmp(p, "..") != 0 &&
           p[strlen(p) - 1] != '/';
}

int pybox_native_spec_check(const pybox_native_spec_t *s, pybox_error_t *err)
{
    if (!clean_abs(s->rootfs))
        return usage(err, "the root filesystem is not a clean absolute path", s->rootfs);
    struct stat sb;
    char init[PATH_MAX];
    if (stat(s->rootfs, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return usage(err, "the root filesystem is not a folder", s->rootfs);
    if (pybox_fmt(init, sizeof init, "%s%s", s->rootfs, PYBOX_GUEST_INIT_PATH) < 0 || lstat(init, &sb) < 0 ||
        !S_ISREG(sb.st_mode) || (sb.st_mode & 0111) == 0)
        return usage(err, "the root filesystem has no executable " PYBOX_GUEST_INIT_PATH, s->rootfs);
    static const char *const dirs[] = {"/proc", "/dev", "/tmp"};
    for (size_t i = 0; i < 3; i++)
        if (!is_dir_at(s->rootfs, dirs[i]))
            return usage(err, "the root filesystem has no mount point folder", dirs[i]);
    if ((s->in_dir != NULL || s->mount_in) && !is_dir_at(s->rootfs, PYBOX_BOX_IN))
        return usage(err, "the root filesystem has no mount point folder", PYBOX_BOX_IN);
    if (s->out_bytes > 0 && !is_dir_at(s->rootfs, PYBOX_BOX_OUT))
        return usage(err, "the root filesystem has no mount point folder", PYBOX_BOX_OUT);
    if (s->in_dir != NULL && (!clean_abs(s->in_dir) || stat(s->in_dir, &sb) < 0 || !S_ISDIR(sb.st_mode)))
        return usage(err, "the inputs folder is not a clean absolute path of a folder", s->in_dir);
    if (s->relax_bind != NULL && (!clean_abs(s->relax_bind) || !is_dir_at(s->rootfs, "/host")))
        return usage(err, "relax_bind needs a clean absolute path and /host in the root filesystem", s->relax_bind);
    if (s->relax_socket != NULL && (!clean_abs(s->relax_socket) || stat(s->relax_socket, &sb) < 0 ||
                                    !S_ISSOCK(sb.st_mode) || !is_dir_at(s->rootfs, "/run")))
        return usage(err, "relax_socket needs a socket and /run in the root filesystem", s->relax_socket);
    if (!pybox_native_is_run_id(s->name))
        return usage(err, "the box's name is not a run id (32 lowercase hex digits)", s->name);
    if (!clean_abs(s->cgroup_root))
        return usage(err, "the cgroup root is not a clean absolute path", s->cgroup_root);
    if (!clean_rel(s->cgroup_parent))
        return usage(err, "the cgroup parent is not a clean relative path", s->cgroup_parent);
    if (!clean_abs(s->staging) || stat(s->staging, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return usage(err, "the staging folder is not a clean absolute path of a folder", s->staging);
    if (range(err, "timer_ms", s->timer_ms, 1, PYBOX_GUEST_TIMER_MAX_MS) < 0 ||
        range(err, "wait_ms", s->wait_ms, 0, PYBOX_GUEST_TIMER_MAX_MS) < 0 ||
        range(err, "life_ms", s->life_ms, 0, PYBOX_GUEST_TIMER_MAX_MS) < 0 || (s->life_ms > 0 && s->wait_ms == 0) ||
        /* a relaxed box runs as root or the shared uid: its own is not used then */
        ((s->relax & (PYBOX_RELAX_PROGRAM_ROOT | PYBOX_RELAX_SHARED_UID)) == 0 &&
         range(err, "uid", s->uid, 1, PYBOX_GUEST_UID_MAX) < 0) ||
        range(err, "tmp_bytes", s->tmp_bytes, 4096, 1LL << 40) < 0 ||
        range(err, "shm_bytes", s->shm_bytes, 4096, 1LL << 40) < 0 ||
        range(err, "out_bytes", s->out_bytes, 0, PYBOX_OUT_VOLUME_MAX) < 0 ||
        range(err, "nofile", s->nofile, 16, 1 << 20) < 0 ||
        range(err, "fsize_bytes", s->fsize_bytes, 4096, 1LL << 50) < 0 ||
        range(err, "sigpending", s->sigpending, 0, 1 << 20) < 0 ||
        range(err, "core_bytes", s->core_bytes, 0, 1LL << 40) < 0 ||
        range(err, "nano_cpus", s->nano_cpus, PYBOX_NANO_CPUS_MIN, PYBOX_NANO_CPUS_MAX) < 0 ||
        range(err, "expires", s->expires, 1, INT64_MAX / 2) < 0)
        return -1;
    if (!(s->relax & PYBOX_RELAX_MEMORY) &&
        range(err, "memory_bytes", s->memory_bytes, PYBOX_MEMORY_MIN, PYBOX_MEMORY_MAX) < 0)
        return -1;
    if (!(s->relax & PYBOX_RELAX_PIDS) && range(err, "pids", s->pids, PYBOX_PIDS_MIN, PYBOX_PIDS_MAX) < 0)
        return -1;
    if (s->out_bytes > 0 && s->memory_bytes > 0 && !(s->relax & PYBOX_RELAX_MEMORY) && s->out_bytes > s->memory_bytes)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: out_bytes is larger than the memory limit");
    size_t nenv = 0;
    for (const char *const *e = s->env; e != NULL && *e != NULL; e++, nenv++)
        if (strchr(*e, '=') == NULL || strlen(*e) > 4096)
            return usage(err, "an environment entry is not NAME=value", *e);
    if (s->env == NULL || nenv > 64)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: the environment is missing or too long");
    if (s->relax_env != NULL && strchr(s->relax_env, '=') == NULL)
        return usage(err, "relax_env is not NAME=value", s->relax_env);
    if (s->relax_unmask != NULL && !pybox_policy_is_masked_path(s->relax_unmask))
        return usage(err, "relax_unmask is not one of the policy's masked paths", s->relax_unmask);
    if (s->hostname == NULL || s->hostname[0] == '\0' || strlen(s->hostname) > 64 || s->init_caps == NULL)
        return usage(err, "the hostname (1 to 64 bytes) and the init's capabilities are the policy's to give",
                     s->hostname);
    uint64_t caps;
    if (pybox_native_caps(s, &caps, err) < 0)
        return -1;
    return 0;
}

/* ---- the plan: every path, string and program the child needs, made before clone ---- */

enum op_kind { OP_MOUNT, OP_MKNOD, OP_SYMLINK, OP_MKDIR, OP_CREATE };

typedef struct op {
    enum op_kind kind;
    const char *src;  /* mount source, symlink target */
    const char *dst;  /* absolute host path under the new root (before pivot) */
    const char *type; /* file system */
    unsigned long flags;
    const char *data;
    mode_t mode;
    dev_t dev;
    const char *what; /* for the error message */
} op_t;

#define OPS_MAX 64
#define STR_MAX 16384

typedef struct plan {
    op_t ops[OPS_MAX];
    size_t n_ops;
    char strings[STR_MAX]; /* every path and option text the ops point into */
    size_t str_used;
    const char *new_root;
    const struct pybox_native_filter *filter; /* NULL: no filter (relaxed) */
    bool no_new_privs;
    uint64_t caps;
    int last_cap;
    bool setns_net;
    const char *hostname;
    int netns_fd;
    bool unshare_cgroup; /* v1: a cgroup namespace made after the move into the leaf */
    /* v1 (or v2 without CLONE_INTO_CGROUP): the files the child writes "0" into to move
     * itself into the leaf. Its own single thread by "tasks" (v1) takes no global lock,
     * where a pid written by the parent waits for an RCU grace period (0 to 16 ms). */
    const char *attach[4];
    size_t n_attach;
    /* v2 under systemd: the child makes its mounts and the rest of its set-up while systemd
     * puts it in its scope and PyBox moves it into its leaf with the limits in place, then
     * waits for a byte on go_r before its cgroup namespace, its privileges dropped and the
     * exec; the end of the pipe without a byte (PyBox gone or failing) ends it. go_w is the
     * parent's end, closed in the child. */
    int go_r, go_w;
    /* Rootless: the child waits for a byte on map_r before anything else, until its uid
     * and gid maps are written (by newuidmap and newgidmap, run by the parent). */
    int map_r, map_w;
    bool userns_caps; /* rootless: the box's share of the user's quotas (rootless.h) */
    struct rlimit rl[PYBOX_NATIVE_RLIMITS];
    char *argv[PYBOX_GUEST_ARGC + 1];
    char *envp[72];
} plan_t;

static const char *str(plan_t *p, pybox_error_t *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const char *str(plan_t *p, pybox_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = STR_MAX - p->str_used;
    int n = vsnprintf(p->strings + p->str_used, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "native box: the mount plan is too long");
        return NULL;
    }
    const char *s = p->strings + p->str_used;
    p->str_used += (size_t)n + 1;
    return s;
}

static int add(plan_t *p, op_t o, pybox_error_t *err)
{
    if (o.dst == NULL)
        return -1;
    if (p->n_ops >= OPS_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: more than %d mount steps", OPS_MAX);
    p->ops[p->n_ops++] = o;
    return 0;
}

#define NOSUID_NODEV_NOEXEC (MS_NOSUID | MS_NODEV | MS_NOEXEC)

static int add_mount(plan_t *p, const char *src, const char *dst, const char *type, unsigned long flags,
                     const char *data, const char *what, pybox_error_t *err)
{
    return add(
        p, (op_t){.kind = OP_MOUNT, .src = src, .dst = dst, .type = type, .flags = flags, .data = data, .what = what},
        err);
}

/* A read-only bind: the bind, then its per-mount flags (a bind takes none of them). */
static int add_ro_bind(plan_t *p, const char *src, const char *dst, unsigned long extra, const char *what,
                       pybox_error_t *err)
{
    if (add_mount(p, src, dst, NULL, MS_BIND, NULL, what, err) < 0)
        return -1;
    return add_mount(p, NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | extra, NULL, what, err);
}

/* The policy's masked and read-only paths (pybox/policy.c), the same for every
 * backend; those under /sys need nothing here: a native box has no /sys at all. */
#define proc_masked pybox_policy_masked_paths
#define proc_readonly pybox_policy_readonly_paths

/* Which of the policy's /proc paths this kernel has (the box's /proc is the same kernel's),
 * but those a test relaxed: all of them, or the one relax_unmask names. */
static void proc_paths(pybox_native_box_t *b, const pybox_native_spec_t *s)
{
    b->n_proc_files = b->n_proc_dirs = b->n_proc_ro = 0;
    if (s->relax & PYBOX_RELAX_SYSTEM_PATHS)
        return;
    struct stat sb;
    for (size_t i = 0; proc_masked[i] != NULL; i++) {
        if (strncmp(proc_masked[i], "/proc/", 6) != 0 || lstat(proc_masked[i], &sb) < 0 ||
            (s->relax_unmask != NULL && strcmp(s->relax_unmask, proc_masked[i]) == 0))
            continue;
        if (S_ISDIR(sb.st_mode))
            b->proc_dirs[b->n_proc_dirs++] = proc_masked[i];
        else
            b->proc_files[b->n_proc_files++] = proc_masked[i];
    }
    for (size_t i = 0; proc_readonly[i] != NULL; i++)
        if (strncmp(proc_readonly[i], "/proc/", 6) == 0 && lstat(proc_readonly[i], &sb) == 0)
            b->proc_ro[b->n_proc_ro++] = proc_readonly[i];
}

/* The /dev tmpfs: small, and read-only once its nodes are made. */
#define DEV_OPTS "mode=755,size=64k,nr_inodes=64"
#define MASK_OPTS "mode=555,size=4k,nr_inodes=4"

static int plan_mounts(plan_t *p, const pybox_native_spec_t *s, pybox_native_box_t *b, pybox_error_t *err)
{
    const char *R = s->rootfs;
    /* New privileges are refused twice natively: no_new_privs, and a root without
     * set-user-ID; the relaxation that removes the protection removes both, so a test
     * can see a set-user-ID program gain root. */
    unsigned long root_suid = (s->relax & PYBOX_RELAX_NEW_PRIVS) ? 0 : MS_NOSUID;
    const char *root_target = R;
    if (s->relax & PYBOX_RELAX_WRITABLE_ROOT) {
        /* Writable, yet the image folder is never written: an overlay whose upper layer
         * lives in the box's staging and goes with it. */
        root_target = str(p, err, "%s/root", b->staging);
        const char *opts = str(p, err, "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", R, b->staging, b->staging);
        if (root_target == NULL || opts == NULL ||
            add_mount(p, "overlay", root_target, "overlay", root_suid | MS_NODEV, opts, "the root overlay", err) < 0)
            return -1;
    } else {
        if (add_ro_bind(p, R, root_target, root_suid | MS_NODEV, "the root filesystem", err) < 0)
            return -1;
    }
    p->new_root = root_target;
    const char *rt = root_target;
#define AT(rel) str(p, err, "%s%s", rt, rel)
    if (add_mount(p, "proc", AT("/proc"), "proc", NOSUID_NODEV_NOEXEC, NULL, "/proc", err) < 0 ||
        add_mount(p, "tmpfs", AT("/dev"), "tmpfs", MS_NOSUID | MS_NOEXEC, DEV_OPTS, "/dev", err) < 0)
        return -1;
    static const struct {
        const char *name;
        unsigned maj, min;
    } nodes[] = {
        {"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7}, {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}};
    /* A user namespace may make no device node: the host's are bound instead (rootless). */
    for (size_t i = 0; s->rootless && i < sizeof nodes / sizeof *nodes; i++)
        if (add(p, (op_t){.kind = OP_CREATE, .dst = AT(nodes[i].name), .mode = 0666, .what = nodes[i].name}, err) < 0 ||
            add_mount(p, nodes[i].name, AT(nodes[i].name), NULL, MS_BIND, NULL, nodes[i].name, err) < 0 ||
            add_mount(p, NULL, AT(nodes[i].name), NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL,
                      nodes[i].name, err) < 0)
            return -1;
    for (size_t i = 0; !s->rootless && i < sizeof nodes / sizeof *nodes; i++)
        if (add(p,
                (op_t){.kind = OP_MKNOD,
                       .dst = AT(nodes[i].name),
                       .mode = S_IFCHR | 0666,
                       .dev = makedev(nodes[i].maj, nodes[i].min),
                       .what = nodes[i].name},
                err) < 0)
            return -1;
    static const struct {
        const char *name, *target;
    } links[] = {{"/dev/fd", "/proc/self/fd"},
                 {"/dev/stdin", "/proc/self/fd/0"},
                 {"/dev/stdout", "/proc/self/fd/1"},
                 {"/dev/stderr", "/proc/self/fd/2"}};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++)
        if (add(p, (op_t){.kind = OP_SYMLINK, .src = links[i].target, .dst = AT(links[i].name), .what = links[i].name},
                err) < 0)
            return -1;
    const char *shm_opts = str(p, err, "mode=1777,size=%lld", (long long)s->shm_bytes);
    if (add(p, (op_t){.kind = OP_MKDIR, .dst = AT("/dev/shm"), .mode = 01777, .what = "/dev/shm"}, err) < 0 ||
        add_mount(p, "tmpfs", AT("/dev/shm"), "tmpfs", NOSUID_NODEV_NOEXEC, shm_opts, "/dev/shm", err) < 0 ||
        add_mount(p, NULL, AT("/dev"), NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL, "/dev",
                  err) < 0)
        return -1;
    const char *devnull = AT("/dev/null");
    /* Rootless, the box's /dev/null is a bind of the host's, writable: each mask made
     * read-only itself, as a bind of the read-only /dev is. */
    for (size_t i = 0; i < b->n_proc_files; i++)
        if (s->rootless
                ? add_ro_bind(p, devnull, AT(b->proc_files[i]), MS_NOSUID | MS_NOEXEC, b->proc_files[i], err) < 0
                : add_mount(p, devnull, AT(b->proc_files[i]), NULL, MS_BIND, NULL, b->proc_files[i], err) < 0)
            return -1;
    for (size_t i = 0; i < b->n_proc_dirs; i++)
        if (add_mount(p, "tmpfs", AT(b->proc_dirs[i]), "tmpfs", MS_RDONLY | NOSUID_NODEV_NOEXEC, MASK_OPTS,
                      b->proc_dirs[i], err) < 0)
            return -1;
    for (size_t i = 0; i < b->n_proc_ro; i++) {
        const char *d = AT(b->proc_ro[i]);
        if (add_ro_bind(p, d, d, NOSUID_NODEV_NOEXEC, b->proc_ro[i], err) < 0)
            return -1;
    }
    const char *tmp_opts = str(p, err, "mode=1777,size=%lld", (long long)s->tmp_bytes);
    if (add_mount(p, "tmpfs", AT("/tmp"), "tmpfs", NOSUID_NODEV_NOEXEC, tmp_opts, "/tmp", err) < 0)
        return -1;
    if (b->in_dir[0] != '\0' &&
        add_ro_bind(p, str(p, err, "%s", b->in_dir), AT(PYBOX_BOX_IN), NOSUID_NODEV_NOEXEC, PYBOX_BOX_IN, err) < 0)
        return -1;
    if (s->out_bytes > 0) {
        const char *o =
            str(p, err, "mode=700,uid=%u,gid=%u,size=%lld", b->program_uid, b->program_uid, (long long)s->out_bytes);
        if (add_mount(p, "tmpfs", AT(PYBOX_BOX_OUT), "tmpfs", NOSUID_NODEV_NOEXEC, o, PYBOX_BOX_OUT, err) < 0)
            return -1;
    }
    if (s->relax_bind != NULL &&
        add_ro_bind(p, str(p, err, "%s", s->relax_bind), AT("/host"), MS_NOSUID | MS_NODEV, "/host", err) < 0)
        return -1;
    if (s->relax_socket != NULL) {
        if (add_mount(p, "tmpfs", AT("/run"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64k", "/run", err) < 0 ||
            add(p, (op_t){.kind = OP_CREATE, .dst = AT(PYBOX_RELAX_SOCKET_AT), .mode = 0600, .what = "the socket"},
                err) < 0 ||
            add_mount(p, str(p, err, "%s", s->relax_socket), AT(PYBOX_RELAX_SOCKET_AT), NULL, MS_BIND, NULL,
                      PYBOX_RELAX_SOCKET_AT, err) < 0 ||
            /* its flags said, not taken from the host's mount (a systemd host's /run is
             * nosuid,nodev,noexec; these machines' is not) */
            add_mount(p, NULL, AT(PYBOX_RELAX_SOCKET_AT), NULL, MS_REMOUNT | MS_BIND | NOSUID_NODEV_NOEXEC, NULL,
                      PYBOX_RELAX_SOCKET_AT, err) < 0)
            return -1;
    }
#undef AT
    return 0;
}

static int read_last_cap(pybox_error_t *err)
{
    static int cached = -1;
    if (__atomic_load_n(&cached, __ATOMIC_RELAXED) >= 0)
        return cached;
    char buf[16];
    size_t n;
    int64_t v = -1;
    if (pybox_native_read_small("/proc/sys/kernel/cap_last_cap", buf, sizeof buf, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = (v < 0 ? 0 : v * 10) + (buf[i] - '0');
    if (v < 0 || v > 63)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "/proc/sys/kernel/cap_last_cap: malformed");
    __atomic_store_n(&cached, (int)v, __ATOMIC_RELAXED);
    return (int)v;
}

static int plan_make(plan_t *p, const pybox_native_spec_t *s, pybox_native_box_t *b, pybox_error_t *err)
{
    memset(p, 0, sizeof *p);
    p->netns_fd = -1;
    proc_paths(b, s);
    p->go_r = p->go_w = -1;
    p->map_r = p->map_w = -1;
    if (plan_mounts(p, s, b, err) < 0)
        return -1;
    if (!(s->relax & PYBOX_RELAX_SECCOMP)) {
        p->filter = pybox_native_filter_default(s->filters, err);
        if (p->filter == NULL)
            return -1;
        memcpy(b->filter_sha256, p->filter->sha256, sizeof b->filter_sha256);
    }
    p->no_new_privs = !(s->relax & PYBOX_RELAX_NEW_PRIVS);
    p->caps = b->caps;
    p->hostname = str(p, err, "%s", s->hostname);
    if (p->hostname == NULL)
        return -1;
    if ((p->last_cap = read_last_cap(err)) < 0)
        return -1;
    pybox_native_rlimits(s, b->rlimits);
    memcpy(p->rl, b->rlimits, sizeof p->rl);
    for (int i = 0; i < PYBOX_GUEST_ARGC; i++)
        p->argv[i] = b->argv[i];
    size_t ne = 0;
    for (const char *const *e = s->env; *e != NULL; e++)
        p->envp[ne++] = (char *)*e;
    if (s->relax_env != NULL)
        p->envp[ne++] = (char *)s->relax_env;
    p->envp[ne] = NULL;
    return 0;
}

/* ---- the child: raw system calls only, from clone to exec ---- */

typedef struct report {
    int step; /* op index, or one of the negative steps below */
    int errnum;
    int detail; /* STEP_RLIMIT: the resource */
} report_t;

enum {
    STEP_CGROUPNS = -2,
    STEP_PRIVATE = -3,
    STEP_PIVOT = -4,
    STEP_HOSTNAME = -5,
    STEP_LOOPBACK = -6,
    STEP_RLIMIT = -7,
    STEP_CAPS = -8,
    STEP_NNP = -9,
    STEP_SECCOMP = -10,
    STEP_EXEC = -11,
    STEP_STDIO = -12,
    STEP_NETNS = -13,
    STEP_SESSION = -14,
    STEP_ATTACH = -15,
    STEP_SCHED = -16,
    STEP_OOM = -17,
    STEP_KEYRING = -18,
    STEP_USERNS_LIMITS = -19,
};

static const char *step_name(int step)
{
    switch (step) {
    case STEP_CGROUPNS:
        return "unshare(CLONE_NEWCGROUP)";
    case STEP_PRIVATE:
        return "making every mount private";
    case STEP_PIVOT:
        return "pivot_root into the root filesystem";
    case STEP_HOSTNAME:
        return "sethostname";
    case STEP_LOOPBACK:
        return "bringing the loopback interface up";
    case STEP_RLIMIT:
        return "setrlimit";
    case STEP_CAPS:
        return "dropping capabilities";
    case STEP_NNP:
        return "prctl(PR_SET_NO_NEW_PRIVS)";
    case STEP_SECCOMP:
        return "loading the seccomp filter";
    case STEP_EXEC:
        return "execve(" PYBOX_GUEST_INIT_PATH ")";
    case STEP_STDIO:
        return "setting up the box's stdin, stdout and stderr";
    case STEP_NETNS:
        return "joining the network namespace";
    case STEP_SESSION:
        return "setsid";
    case STEP_ATTACH:
        return "moving into the box's cgroup";
    case STEP_SCHED:
        return "the default scheduling, nice value, I/O priority and personality";
    case STEP_OOM:
        return "writing /proc/self/oom_score_adj";
    case STEP_USERNS_LIMITS:
        return "the user namespace's limits (/proc/sys/user)";
    case STEP_KEYRING:
        return "keyctl(KEYCTL_JOIN_SESSION_KEYRING)";
    default:
        return "?";
    }
}

static _Noreturn void child_fail_at(int fd, int step, int detail, int e)
{
    report_t r = {.step = step, .errnum = e, .detail = detail};
    ssize_t w = write(fd, &r, sizeof r);
    (void)w;
    _exit(127);
}

static _Noreturn void child_fail(int fd, int step, int e)
{
    child_fail_at(fd, step, 0, e);
}

/* The child waits for its parent's one byte on fd (a step the parent does for it is
 * done), then closes fd; without that byte the parent has failed, and so does the child. */
static void await_parent(int fd)
{
    char go;
    ssize_t r;
    do
        r = read(fd, &go, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1)
        _exit(127);
    close(fd);
}

static int do_op(const op_t *o)
{
    switch (o->kind) {
    case OP_MOUNT:
        return mount(o->src, o->dst, o->type, o->flags, o->data);
    case OP_MKNOD:
        return mknod(o->dst, o->mode, o->dev);
    case OP_SYMLINK:
        return symlink(o->src, o->dst);
    case OP_MKDIR:
        return mkdir(o->dst, o->mode);
    case OP_CREATE: {
        int fd = open(o->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, o->mode);
        if (fd < 0)
            return -1;
        close(fd);
        return 0;
    }
    }
    errno = EINVAL;
    return -1;
}

static int caps_set(uint64_t caps)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    d[0].effective = d[0].permitted = (uint32_t)caps;
    d[1].effective = d[1].permitted = (uint32_t)(caps >> 32);
    return (int)syscall(SYS_capset, &h, d);
}

static _Noreturn void child(const plan_t *p, int report_w, int in_r, int out_w, int err_w)
{
    /* Nothing of PyBox's own scheduling stays with the box: a realtime policy is not bound
     * by the CPU quota (and a v1 cpu controller refuses the move into the leaf), a nice
     * value or I/O class is PyBox's, not the box's, and a personality may turn address
     * randomization off. Before the move: the leaf takes no realtime task. */
    struct sched_param sp = {.sched_priority = 0};
    if (syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &sp) < 0 || syscall(SYS_setpriority, PRIO_PROCESS, 0, 0) < 0 ||
        syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, 0 /* IOPRIO_CLASS_NONE: from the nice value */) < 0 ||
        syscall(SYS_personality, 0 /* PER_LINUX */) < 0)
        child_fail(report_w, STEP_SCHED, errno);
    if (p->go_r >= 0)
        close(p->go_w);
    /* Rootless: nothing below works until this user namespace's ids are mapped. */
    if (p->map_r >= 0) {
        close(p->map_w);
        await_parent(p->map_r);
        /* Its user namespace's own limits: written here, read by the writer's namespace. */
        static const struct {
            const char *file, *value;
        } caps[] = {{"/proc/sys/user/max_inotify_instances", NUMBER_TEXT(PYBOX_ROOTLESS_INOTIFY_INSTANCES)},
                    {"/proc/sys/user/max_inotify_watches", NUMBER_TEXT(PYBOX_ROOTLESS_INOTIFY_WATCHES)}};
        for (size_t i = 0; p->userns_caps && i < sizeof caps / sizeof *caps; i++) {
            int fd = open(caps[i].file, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, caps[i].value, strlen(caps[i].value)) < 0)
                child_fail(report_w, STEP_USERNS_LIMITS, errno);
            close(fd);
        }
    }
    /* Into the leaf first, before anything is charged to PyBox's own cgroup. */
    for (size_t i = 0; i < p->n_attach; i++) {
        int fd = open(p->attach[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            child_fail(report_w, STEP_ATTACH, errno);
        close(fd);
    }
    if (p->unshare_cgroup && p->go_r < 0 && unshare(CLONE_NEWCGROUP) < 0)
        child_fail(report_w, STEP_CGROUPNS, errno);
    if (setsid() < 0)
        child_fail(report_w, STEP_SESSION, errno);
    /* A clean slate of signals: nothing PyBox blocked or ignored reaches init. */
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        (void)sigaction(sig, &sa, NULL);
    }
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        child_fail(report_w, STEP_STDIO, errno);
    umask(0);
    if (p->setns_net && p->netns_fd >= 0 && setns(p->netns_fd, CLONE_NEWNET) < 0)
        child_fail(report_w, STEP_NETNS, errno);
    /* Nothing mounted here may reach the host's mount namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        child_fail(report_w, STEP_PRIVATE, errno);
    for (size_t i = 0; i < p->n_ops; i++)
        if (do_op(&p->ops[i]) < 0)
            child_fail(report_w, (int)i, errno);
    /* The nodes and folders above have their modes exactly; what the box makes, the usual. */
    umask(PYBOX_NATIVE_UMASK);
    /* The old root is stacked under the new one and detached: no host path stays. */
    if (chdir(p->new_root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
        chdir("/") < 0 || chdir("/tmp") < 0)
        child_fail(report_w, STEP_PIVOT, errno);
    /* Inherited by every process of the box; raising it needs no privilege. */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom < 0 || write(oom, PYBOX_NATIVE_OOM_SCORE_ADJ_TEXT, sizeof PYBOX_NATIVE_OOM_SCORE_ADJ_TEXT - 1) < 0)
        child_fail(report_w, STEP_OOM, errno);
    close(oom);
    if (!p->setns_net) {
        if (sethostname(p->hostname, strlen(p->hostname)) < 0 || setdomainname("", 0) < 0)
            child_fail(report_w, STEP_HOSTNAME, errno);
        /* Like the engine's "none" network: loopback only, and up. */
        int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, "lo", 3);
        ifr.ifr_flags = IFF_UP | IFF_RUNNING;
        if (sk < 0 || ioctl(sk, SIOCSIFFLAGS, &ifr) < 0)
            child_fail(report_w, STEP_LOOPBACK, errno);
        close(sk);
    } else if (sethostname(p->hostname, strlen(p->hostname)) < 0) {
        child_fail(report_w, STEP_HOSTNAME, errno);
    }
    /* A new, empty session keyring: the one inherited is PyBox's, and a process possesses
     * every key of its session keyring whatever its uid, so the keys of PyBox's callers
     * would have been the program's with only the seccomp filter between. */
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
        child_fail(report_w, STEP_KEYRING, errno);
    /* v2 under systemd: the set-up above ran while systemd made the box's scope; now
     * PyBox has moved this process into its leaf, with the limits in place, and the cgroup
     * namespace is rooted there. Nothing of the program's can run before. */
    if (p->go_r >= 0) {
        await_parent(p->go_r);
        if (unshare(CLONE_NEWCGROUP) < 0)
            child_fail(report_w, STEP_CGROUPNS, errno);
    }
    /* No supplementary group of PyBox's stays with init. */
    if (syscall(SYS_setgroups, 0, NULL) < 0) /* raw: glibc would wait for threads the child does not have */
        child_fail(report_w, STEP_CAPS, errno);
    /* Every limit, soft = hard: none is PyBox's by inheritance, none can be raised. */
    for (int r = 0; r < PYBOX_NATIVE_RLIMITS; r++)
        if (setrlimit(r, &p->rl[r]) < 0)
            child_fail_at(report_w, STEP_RLIMIT, r, errno);
    /* Only init's own capabilities stay in the bounding set: as root, execve gives init
     * the bounding set (the inheritable set is empty), so init gets exactly these; the
     * program, switched to its own uid, gets none. */
    for (int c = 0; c <= p->last_cap; c++)
        if (!(p->caps & (1ULL << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
            child_fail(report_w, STEP_CAPS, errno);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        child_fail(report_w, STEP_CAPS, errno);
    if (p->no_new_privs) {
        if (caps_set(p->caps) < 0)
            child_fail(report_w, STEP_CAPS, errno);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            child_fail(report_w, STEP_NNP, errno);
        if (p->filter != NULL) {
            int rc = pybox_native_filter_load(p->filter);
            if (rc < 0)
                child_fail(report_w, STEP_SECCOMP, -rc);
        }
    } else {
        /* Without no_new_privs, loading a filter takes CAP_SYS_ADMIN: load it first. */
        if (p->filter != NULL) {
            int rc = pybox_native_filter_load(p->filter);
            if (rc < 0)
                child_fail(report_w, STEP_SECCOMP, -rc);
        }
        if (caps_set(p->caps) < 0)
            child_fail(report_w, STEP_CAPS, errno);
    }
    /* Every descriptor but 0, 1, 2 closes at exec, the report pipe with them. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        child_fail(report_w, STEP_STDIO, errno);
    execve(PYBOX_GUEST_INIT_PATH, p->argv, p->envp);
    child_fail(report_w, STEP_EXEC, errno);
}

/* ---- the parent ---- */

static int sys_fail(pybox_error_t *err, int e, const char *call, const char *path)
{
    char shown[PATH_MAX];
    pybox_escape_short(shown, sizeof shown, path ? path : "", 300);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "%s(%s)", call, shown);
}

/* A pipe whose ends are above 2 (so dup2 onto 0..2 always makes a copy without
 * close-on-exec), both close-on-exec here. */
static int pipe_high(int fds[2], pybox_error_t *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sys_fail(err, errno, "pipe2", "");
    for (int i = 0; i < 2; i++) {
        fds[i] = p[i];
        if (p[i] <= 2) {
            fds[i] = fcntl(p[i], F_DUPFD_CLOEXEC, 3);
            int e = errno;
            close(p[i]);
            if (fds[i] < 0) {
                if (i == 1)
                    close(fds[0]);
                else
                    close(p[1]);
                return sys_fail(err, e, "fcntl", "F_DUPFD_CLOEXEC");
            }
        }
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* The expiry is the name of an empty file, "expires-<seconds>": made in one step, read
 * from the folder's listing, and it takes no room of the state folder's (a full one
 * still records it when it can record the run note). */
static int write_expiry(const char *dir, int64_t expires, pybox_error_t *err)
{
    char p[PATH_MAX];
    if (pybox_fmt(p, sizeof p, "%s/expires-%lld", dir, (long long)expires) < 0)
        return sys_fail(err, ENAMETOOLONG, "open", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sys_fail(err, errno, "open", p);
    close(fd);
    return 0;
}

/* A folder of mode 0755 whatever PyBox's umask: one of 077 (a hardened root's shell)
 * would make the inputs' folder root's alone, unreadable by the program. */
static int mkdir_0755(const char *p)
{
    if (mkdir(p, 0755) < 0)
        return -1;
    return chmod(p, 0755);
}

/* <staging>/<name>, appearing whole: made under a dot name with its expiry file (and the
 * folders the box needs), then renamed, so a sweep never sees one without its expiry. */
static int make_staging(const pybox_native_spec_t *s, pybox_native_box_t *b, pybox_error_t *err)
{
    char tmp[PATH_MAX];
    if (pybox_fmt(b->staging, sizeof b->staging, "%s/%s", s->staging, s->name) < 0 ||
        pybox_fmt(tmp, sizeof tmp, "%s/.%s.new", s->staging, s->name) < 0)
        return sys_fail(err, ENAMETOOLONG, "mkdir", s->staging);
    if (mkdir(tmp, 0700) < 0)
        return sys_fail(err, errno, "mkdir", tmp);
    int rc = write_expiry(tmp, s->expires, err);
    static const char *const sub_in[] = {"in"};
    static const char *const sub_root[] = {"root", "upper", "work"};
    char p[PATH_MAX];
    if (rc == 0 && s->in_dir == NULL && s->mount_in) {
        /* Root-owned and not writable by the program; only PyBox fills it. */
        if (pybox_fmt(p, sizeof p, "%s/%s", tmp, sub_in[0]) < 0 || mkdir_0755(p) < 0)
            rc = sys_fail(err, errno, "mkdir", p);
    }
    for (size_t i = 0; rc == 0 && (s->relax & PYBOX_RELAX_WRITABLE_ROOT) && i < 3; i++)
        if (pybox_fmt(p, sizeof p, "%s/%s", tmp, sub_root[i]) < 0 || mkdir_0755(p) < 0)
            rc = sys_fail(err, errno, "mkdir", p);
    /* The staging folder itself must be traversable for the bind of in/. */
    if (rc == 0 && chmod(tmp, 0711) < 0)
        rc = sys_fail(err, errno, "chmod", tmp);
    if (rc == 0 && rename(tmp, b->staging) < 0)
        rc = sys_fail(err, errno == ENOTEMPTY ? EEXIST : errno, "rename", b->staging);
    if (rc < 0) {
        pybox_error_t ignored = {0};
        (void)pybox_native_rm_tree(tmp, &ignored);
        return -1;
    }
    b->staging_made = true;
    if (s->in_dir != NULL) {
        if (pybox_strlcpy(b->in_dir, s->in_dir, sizeof b->in_dir) < 0)
            return sys_fail(err, ENAMETOOLONG, "bind", s->in_dir);
    } else if (s->mount_in) {
        if (pybox_fmt(b->in_dir, sizeof b->in_dir, "%s/in", b->staging) < 0)
            return sys_fail(err, ENAMETOOLONG, "bind", b->staging);
        b->own_in = true;
    }
    return 0;
}

/* The child's start report: 0 at its end without a word (exec'd, or the child died on
 * the way), -1 with the step that failed. */
static int read_report(const plan_t *p, int fd, pybox_error_t *err)
{
    report_t r;
    ssize_t got;
    do
        got = read(fd, &r, sizeof r);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof r && r.step == STEP_RLIMIT) {
        int res = r.detail >= 0 && r.detail < PYBOX_NATIVE_RLIMITS ? r.detail : 0;
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, r.errnum, "native box: setrlimit(%s, %llu)%s",
                               pybox_native_rlimit_name(res), (unsigned long long)p->rl[res].rlim_max,
                               r.errnum == EPERM ? ": above PyBox's own hard limit (raising it takes CAP_SYS_RESOURCE)"
                                                 : "");
    }
    if (got == (ssize_t)sizeof r) {
        const char *what = r.step >= 0 && (size_t)r.step < p->n_ops ? p->ops[r.step].what : step_name(r.step);
        const char *kind =
            r.step >= 0 && (size_t)r.step < p->n_ops ? (p->ops[r.step].kind == OP_MOUNT ? "mount" : "making") : "";
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, r.errnum, "native box: %s%s%s", kind, kind[0] ? " " : "", what);
    }
    if (got != 0)
        return sys_fail(err, got < 0 ? errno : EPROTO, "read", "the box's start report");
    return 0;
}

/* v2 under systemd: systemd puts the box's parked first process in the box's own scope
 * (Delegate=yes), which the kernel then names as its cgroup; PyBox makes its leaf in the
 * scope, moves the process in and writes the limits (cgroup.h). */
static int into_scope(pybox_native_box_t *b, pybox_sd_t *sd, const pybox_native_cg_limits_t *want, pybox_error_t *err)
{
    char desc[160];
    snprintf(desc, sizeof desc, "PyBox box %s", b->cg.unit);
    pybox_sd_scope_t sc = {.unit = b->cg.unit, .slice = PYBOX_SD_SLICE, .description = desc, .pid = b->pid};
    double t0 = pybox_now_s();
    int rc =
        pybox_sd_scope_request(sd, &sc, err) < 0 || pybox_sd_scope_wait(sd, PYBOX_SD_JOB_TIMEOUT_MS, err) < 0 ? -1 : 0;
    double t1 = pybox_now_s();
    b->times.sd_scope_ms = (t1 - t0) * 1000.0;
    if (rc < 0) {
        pybox_error_prefix(err, "cgroup v2 under systemd: PyBox asks systemd for each box's cgroup and makes "
                                "none where systemd does not expect one");
        return -1;
    }
    /* The kernel's word for where the process is, not a guess from the unit's name. */
    char p[64], text[4096], where[PATH_MAX], want_scope[PATH_MAX];
    size_t n;
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)b->pid);
    if (pybox_native_read_small(p, text, sizeof text, &n, err) < 0 ||
        pybox_np_cgroup_parse(text, n, NULL, where, sizeof where, err) < 0)
        return -1;
    size_t rl = strlen(b->cg.rel), ll = strlen("/" PYBOX_NATIVE_CG_SCOPE_LEAF);
    if (rl <= ll || rl - ll >= sizeof want_scope)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    memcpy(want_scope, b->cg.rel, rl - ll);
    want_scope[rl - ll] = '\0';
    if (strcmp(where, want_scope) != 0) {
        char shown[PATH_MAX];
        pybox_escape_short(shown, sizeof shown, where, 300);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0,
                               "cgroup v2 under systemd: the box's first process is in %s, not in its scope %s", shown,
                               want_scope);
    }
    bool made = false;
    rc = pybox_native_cg_adopt(&b->cg, b->pid, want, &made, err);
    b->cg_made = made;
    b->times.sd_leaf_ms = (pybox_now_s() - t1) * 1000.0;
    return rc;
}

/* Rootless: one of shadow's set-user-ID helpers (newuidmap or newgidmap) writes the
 * child's map: its root the user, the program's id its own from the user's subordinate
 * range (the helper checks both against /etc/subuid or /etc/subgid). Run by its fixed
 * path, with no environment, its words kept for the error. */
static int write_map(const char *helper, pid_t pid, uint32_t user_id, uint32_t inner, uint32_t outer,
                     pybox_error_t *err)
{
    char a[5][16];
    snprintf(a[0], sizeof a[0], "%d", (int)pid);
    snprintf(a[1], sizeof a[1], "%u", user_id);
    snprintf(a[2], sizeof a[2], "%u", inner);
    snprintf(a[3], sizeof a[3], "%u", outer);
    snprintf(a[4], sizeof a[4], "%s", "1");
    char *argv[] = {(char *)helper, a[0], (char *)"0", a[1], a[4], inner ? a[2] : NULL, a[3], a[4], NULL};
    char *envp[] = {NULL};
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 1);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
    pid_t h;
    int rc = posix_spawn(&h, helper, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(ep[1]);
    if (rc != 0) {
        close(ep[0]);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, rc, "rootless box: running %s", helper);
    }
    char said[512];
    size_t n = pybox_read_message(ep[0], said, sizeof said);
    close(ep[0]);
    while (n > 0 && said[n - 1] == '\n')
        said[--n] = '\0';
    int st = 0;
    while (waitpid(h, &st, 0) < 0)
        if (errno != EINTR)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "waitpid(%s)", helper);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char shown[600];
        pybox_escape_short(shown, sizeof shown, said, 400);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "rootless box: %s %s 0 %s 1 %s %s 1 failed (%s %d): %s",
                               helper, a[0], a[1], a[2], a[3], WIFEXITED(st) ? "exit" : "signal",
                               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), shown[0] ? shown : "it said nothing");
    }
    return 0;
}

static pid_t clone_box(uint64_t flags, int cgroup_fd, int *pidfd)
{
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = flags | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)pidfd;
    ca.exit_signal = SIGCHLD;
    if (cgroup_fd >= 0) {
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)cgroup_fd;
    }
    return (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
}

/* A process that ignores SIGCHLD (or asks for SA_NOCLDWAIT), as it may have inherited
 * from its own parent across exec, has the kernel reap its children the moment they
 * end: the box's end would be lost, and its pid free for another process while PyBox
 * still reads /proc/<pid>. (An exit signal of 0 would not help: exec gives the box's
 * init SIGCHLD again.) The default action of SIGCHLD is to ignore it too, without the
 * reaping; a handler of the caller's own is left alone. */
static int keep_children(pybox_error_t *err)
{
    struct sigaction sa;
    if (sigaction(SIGCHLD, NULL, &sa) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "sigaction(SIGCHLD)");
    if (sa.sa_handler != SIG_IGN && !(sa.sa_flags & SA_NOCLDWAIT))
        return 0;
    if (sa.sa_handler == SIG_IGN)
        sa.sa_handler = SIG_DFL;
    sa.sa_flags &= ~SA_NOCLDWAIT;
    if (sigaction(SIGCHLD, &sa, NULL) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "sigaction(SIGCHLD, SIG_DFL)");
    return 0;
}

int pybox_native_create(const pybox_native_spec_t *s, pybox_native_box_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (pybox_native_spec_check(s, err) < 0 || keep_children(err) < 0)
        return -1;
    pybox_native_box_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    b->pid = -1;
    b->pidfd = b->in_w = b->out_r = b->err_r = b->userns_fd = -1;
    b->program_uid = pybox_native_program_uid(s);
    b->rootless = s->rootless;
    b->end.oom_kills = -1;
    b->collect = (s->relax & PYBOX_RELAX_IN_FLIGHT) == 0;
    b->held_oom_kills = -1;
    pybox_guest_argv(b->argv, s->timer_ms, b->program_uid, s->wait_ms, s->life_ms);
    plan_t *p = NULL;
    int rep[2] = {-1, -1}, in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
    int cgfd = -1, go[2] = {-1, -1}, map[2] = {-1, -1};
    pybox_sd_t *sd = NULL;
    if (pybox_native_caps(s, &b->caps, err) < 0)
        goto fail;
    p = malloc(sizeof *p);
    if (p == NULL) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "malloc(plan)");
        goto fail;
    }
    /* Leftovers are found by the staging folder first: it exists before the cgroup does. */
    if (make_staging(s, b, err) < 0)
        goto fail;
    if (plan_make(p, s, b, err) < 0)
        goto fail;
    pybox_native_cg_host_t host;
    pybox_native_cg_limits_t want;
    pybox_native_cg_want((s->relax & PYBOX_RELAX_MEMORY) ? 0 : s->memory_bytes,
                         (s->relax & PYBOX_RELAX_PIDS) ? 0 : s->pids, s->nano_cpus, &want);
    if (pybox_native_cg_host(s->cgroup_root, NULL, &host, err) < 0 ||
        pybox_native_cg_paths(&host, s->cgroup_parent, s->name, &b->cg, err) < 0)
        goto fail;
    if (s->rootless && (!host.systemd || host.manager[0] == '\0')) {
        pybox_error_set(err, PYBOX_ERR_USAGE, 0, "rootless box: only a user's own systemd gives it a cgroup");
        goto fail;
    }
    if (s->rootless) {
        if (pipe_high(map, err) < 0)
            goto fail;
        p->map_r = map[0];
        p->map_w = map[1];
        p->userns_caps = !(s->relax & PYBOX_RELAX_SHARED_UID);
    }
    if (host.systemd) {
        /* The scope is asked for once the box's first process exists; the connection is
         * made first, so a host where it cannot be had refuses before anything runs. */
        double t = pybox_now_s();
        int rc = pybox_sd_open(host.manager[0] ? PYBOX_SD_USER : PYBOX_SD_SYSTEM, &sd, err);
        b->times.sd_connect_ms = (pybox_now_s() - t) * 1000.0;
        if (rc < 0) {
            pybox_error_prefix(err, "cgroup v2 under systemd: PyBox asks systemd for each box's cgroup and makes "
                                    "none where systemd does not expect one");
            goto fail;
        }
        if (pipe_high(go, err) < 0)
            goto fail;
        p->go_r = go[0];
        p->go_w = go[1];
        p->unshare_cgroup = true;
    } else {
        if (pybox_native_cg_make(&b->cg, &want, err) < 0)
            goto fail;
        b->cg_made = true;
    }
    if (s->relax_netns_pid > 0) {
        char ns[64];
        snprintf(ns, sizeof ns, "/proc/%d/ns/net", (int)s->relax_netns_pid);
        p->netns_fd = open(ns, O_RDONLY | O_CLOEXEC);
        if (p->netns_fd < 0) {
            sys_fail(err, errno, "open", ns);
            goto fail;
        }
        p->setns_net = true;
        /* Rootless, the box's own user namespace gives it no right over another's network
         * namespace: it may only stay in PyBox's own (made without one of its own). */
        struct stat there, here;
        if (s->rootless) {
            if (fstat(p->netns_fd, &there) < 0 || stat("/proc/self/ns/net", &here) < 0 || there.st_ino != here.st_ino ||
                there.st_dev != here.st_dev) {
                pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                "rootless box: a relaxed box may share only PyBox's own network namespace");
                goto fail;
            }
            close_fd(&p->netns_fd);
        }
    }
    if (pipe_high(rep, err) < 0 || pipe_high(in_p, err) < 0 || pipe_high(out_p, err) < 0 || pipe_high(err_p, err) < 0)
        goto fail;
    uint64_t flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (p->setns_net ? 0 : CLONE_NEWNET) |
                     (s->rootless ? CLONE_NEWUSER : 0);
    if (host.version == 2 && !host.systemd) {
        cgfd = open(b->cg.unified, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cgfd < 0) {
            sys_fail(err, errno, "open", b->cg.unified);
            goto fail;
        }
    }
    /* v2: born in the leaf, with its cgroup namespace rooted there. v1 (or a v2 folder
     * that takes no CLONE_INTO_CGROUP): moved in by the parent, then the namespace. v2
     * under systemd: parked until it is in its leaf (below), then the namespace. */
    pid_t pid = -1;
    if (cgfd >= 0)
        pid = clone_box(flags | CLONE_NEWCGROUP, cgfd, &b->pidfd);
    if (pid < 0 && !host.systemd) {
        p->unshare_cgroup = true;
        const char *d[4] = {b->cg.memory, b->cg.pids, b->cg.cpu, b->cg.cpuacct};
        size_t nd = 4;
        if (host.version == 2) {
            d[0] = b->cg.unified;
            nd = 1;
        } else if (strcmp(b->cg.cpu, b->cg.cpuacct) == 0) {
            nd = 3;
        }
        for (size_t i = 0; i < nd; i++)
            if ((p->attach[p->n_attach++] = str(p, err, "%s/%s", d[i], host.version == 2 ? "cgroup.procs" : "tasks")) ==
                NULL)
                goto fail;
    }
    if (pid < 0)
        pid = clone_box(flags, -1, &b->pidfd);
    if (pid < 0) {
        sys_fail(err, errno, "clone3", "the box's namespaces");
        goto fail;
    }
    if (pid == 0) {
        child(p, rep[1], in_p[0], out_p[1], err_p[1]);
    }
    b->pid = pid;
    close_fd(&rep[1]);
    close_fd(&in_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[1]);
    if (s->rootless) {
        close_fd(&map[0]);
        if (write_map(PYBOX_NEWUIDMAP, pid, s->user_uid, b->program_uid, b->program_uid, err) < 0 ||
            write_map(PYBOX_NEWGIDMAP, pid, s->user_gid, b->program_uid, s->box_gid, err) < 0)
            goto fail; /* (a program relaxed to root is the box's root: one line each) */
        (void)pybox_write_some(map[1], "m", 1);
        close_fd(&map[1]);
        /* Held for the removal: what the program left in the staging folder (a writable
         * root's upper layer) is its uid's, which the user may remove only from there. */
        char ns[64];
        snprintf(ns, sizeof ns, "/proc/%d/ns/user", (int)pid);
        b->userns_fd = open(ns, O_RDONLY | O_CLOEXEC);
        if (b->userns_fd < 0) {
            sys_fail(err, errno, "open", ns);
            goto fail;
        }
    }
    if (host.systemd) {
        close_fd(&go[0]);
        if (into_scope(b, sd, &want, err) < 0) {
            /* A child that failed its set-up meanwhile is the first cause: said so. */
            struct pollfd pf = {.fd = rep[0], .events = POLLIN};
            pybox_error_t cerr = {0};
            if (poll(&pf, 1, 0) == 1 && read_report(p, rep[0], &cerr) < 0 && err != NULL) {
                *err = cerr;
            }
            goto fail;
        }
        (void)pybox_write_some(go[1], "g", 1);
        close_fd(&go[1]);
        pybox_sd_close(sd);
        sd = NULL;
    }
    if (read_report(p, rep[0], err) < 0)
        goto fail;
    /* End of the report without a word: exec'd, unless the child died on the way. */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PIDFD, (id_t)b->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "native box: the box's init ended before it ran (status %d)",
                        si.si_status);
        goto fail;
    }
    close_fd(&rep[0]);
    /* What lets the box's mount namespace be looked up after its end, when nothing of it
     * should be left (init waits for its hello: nothing of the program runs yet). */
    b->mntns_id = pybox_native_mntns_id(pid);
    b->in_w = in_p[1];
    b->out_r = out_p[0];
    b->err_r = err_p[0];
    (void)fcntl(b->in_w, F_SETFL, O_NONBLOCK);
    (void)fcntl(b->out_r, F_SETFL, O_NONBLOCK);
    (void)fcntl(b->err_r, F_SETFL, O_NONBLOCK);
    close_fd(&cgfd);
    close_fd(&p->netns_fd);
    free(p);
    *out = b;
    return 0;

fail:
    pybox_sd_close(sd);
    for (int i = 0; i < 2; i++) {
        close_fd(&go[i]);
        close_fd(&map[i]);
        close_fd(&rep[i]);
        close_fd(&in_p[i]);
        close_fd(&out_p[i]);
        close_fd(&err_p[i]);
    }
    close_fd(&cgfd);
    if (p != NULL)
        close_fd(&p->netns_fd);
    free(p);
    bool gone;
    pybox_error_t ignored = {0};
    (void)pybox_native_remove(b, &gone, &ignored);
    pybox_native_free(b);
    return -1;
}

/* ---- the running box ---- */

void pybox_native_times(const pybox_native_box_t *b, pybox_native_times_t *out)
{
    *out = b->times;
}

pid_t pybox_native_pid(const pybox_native_box_t *b)
{
    return b->pid;
}

int pybox_native_pidfd(const pybox_native_box_t *b)
{
    return b->pidfd;
}

int pybox_native_stdin(const pybox_native_box_t *b)
{
    return b->in_w;
}

int pybox_native_stdout(const pybox_native_box_t *b)
{
    return b->out_r;
}

int pybox_native_stderr(const pybox_native_box_t *b)
{
    return b->err_r;
}

void pybox_native_close_stdin(pybox_native_box_t *b)
{
    close_fd(&b->in_w);
}

int pybox_native_cgroup(const pybox_native_box_t *b, pybox_native_cgroup_t *out)
{
    *out = b->cg;
    return b->cg_made ? 0 : -1;
}

int pybox_native_signal(pybox_native_box_t *b, int sig, pybox_error_t *err)
{
    if (b->reaped || b->pidfd < 0)
        return 1;
    /* Through the pidfd: never a recycled pid. From this (the parent) PID namespace the
     * box's init sees the sender as pid 0. */
    if (syscall(SYS_pidfd_send_signal, b->pidfd, sig, NULL, 0) < 0) {
        if (errno == ESRCH)
            return 1;
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "pidfd_send_signal(%d)", sig);
    }
    return 0;
}

static void record_end(pybox_native_box_t *b, const siginfo_t *si)
{
    b->reaped = true;
    b->end.timed_out = false;
    if (si->si_code == CLD_EXITED) {
        b->end.exited = true;
        b->end.exit_code = si->si_status;
    } else {
        b->end.exited = false;
        b->end.signal = si->si_status;
        b->end.exit_code = 128 + si->si_status;
    }
    int64_t k;
    pybox_error_t ignored = {0};
    if (b->cg_made && pybox_native_cg_oom_kills(&b->cg, &k, &ignored) == 0)
        b->end.oom_kills = k;
    else
        b->end.oom_kills = b->held_oom_kills;
}

void pybox_native_held(pybox_native_box_t *b)
{
    int64_t k;
    pybox_error_t ignored = {0};
    if (b->cg_made && !b->reaped && pybox_native_cg_oom_kills(&b->cg, &k, &ignored) == 0)
        b->held_oom_kills = k;
}

int pybox_native_wait(pybox_native_box_t *b, int64_t timeout_ms, pybox_native_end_t *end, pybox_error_t *err)
{
    if (!b->reaped) {
        if (b->pidfd < 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, 0, "native box: no process to wait for");
        int64_t deadline = pybox_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        for (;;) {
            int64_t left = deadline - pybox_now_ms();
            struct pollfd pfd = {.fd = b->pidfd, .events = POLLIN};
            int pr = poll(&pfd, 1, left > 0 ? (int)(left > 60000 ? 60000 : left) : 0);
            if (pr < 0 && errno != EINTR)
                return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "poll(pidfd)");
            if (pr > 0)
                break;
            if (left <= 0) {
                *end = b->end;
                end->timed_out = true;
                return 0;
            }
        }
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PIDFD, (id_t)b->pidfd, &si, WEXITED) < 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "waitid(P_PIDFD)");
        record_end(b, &si);
    }
    *end = b->end;
    return 0;
}

bool pybox_native_running(pybox_native_box_t *b)
{
    if (b->reaped || b->pidfd < 0)
        return false;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PIDFD, (id_t)b->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return false;
    return si.si_pid == 0;
}

bool pybox_native_ended(pybox_native_box_t *b)
{
    if (b->reaped)
        return true;
    if (b->pidfd < 0)
        return false;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PIDFD, (id_t)b->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0;
}

/* What is held of the box now: its pipes' other ends (a pipe's reader sees POLLHUP once
 * no writer is left, its writer POLLERR once no reader is), its mount namespace. */
static unsigned held_now(const pybox_native_box_t *b, bool *ns_known)
{
    unsigned held = 0;
    struct pollfd p[3] = {{.fd = b->in_w, .events = 0}, {.fd = b->out_r, .events = 0}, {.fd = b->err_r, .events = 0}};
    static const unsigned bit[3] = {PYBOX_NATIVE_HELD_STDIN, PYBOX_NATIVE_HELD_STDOUT, PYBOX_NATIVE_HELD_STDERR};
    if (poll(p, 3, 0) >= 0)
        for (int i = 0; i < 3; i++)
            if (p[i].fd >= 0 && !(p[i].revents & (i == 0 ? POLLERR : POLLHUP)))
                held |= bit[i];
    int ns = pybox_native_mntns_exists(b->mntns_id);
    *ns_known = ns >= 0;
    if (ns == 1)
        held |= PYBOX_NATIVE_HELD_MOUNT_NS;
    return held;
}

/* Once the collector's pass was seen: what it freed goes as the kernel releases it,
 * moments after (its files are closed by a kernel work queue); at most this long. */
#define SETTLE_MS 200

static void settle(pybox_native_box_t *b)
{
    pybox_native_after_t *a = &b->after;
    bool known;
    int64_t deadline = pybox_now_ms() + SETTLE_MS;
    long pause_us = 100;
    while ((a->still = held_now(b, &known) & a->held) != 0 && pybox_now_ms() < deadline) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = pause_us * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 10000)
            pause_us *= 2;
    }
}

/* Rootless: the staging folder removed by a child in the box's user namespace, where the
 * user has every capability over the box's ids (the program's files of a writable root
 * are its uid's, in folders the user could not change from outside). */
static int rm_tree_in_userns(int userns_fd, const char *path, pybox_error_t *err)
{
    pid_t c = fork();
    if (c < 0)
        return sys_fail(err, errno, "fork", "removing the box's staging folder");
    if (c == 0) {
        if (setns(userns_fd, CLONE_NEWUSER) < 0)
            _exit(0x7f & errno);
        _exit(pybox_remove_tree_at(AT_FDCWD, path) == 0 ? 0 : (0x7f & errno) ? (0x7f & errno) : EIO);
    }
    int st = 0;
    while (waitpid(c, &st, 0) < 0)
        if (errno != EINTR)
            return sys_fail(err, errno, "waitpid", "removing the box's staging folder");
    int e = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
    return e == 0 ? 0 : sys_fail(err, e, "removing (in the box's user namespace)", path);
}

int pybox_native_remove(pybox_native_box_t *b, bool *gone, pybox_error_t *err)
{
    *gone = false;
    int rc = 0;
    if (!b->reaped && b->pidfd >= 0) {
        /* Init is PID 1 of its namespace: when it dies the kernel kills the rest. */
        pybox_error_t ignored = {0};
        (void)pybox_native_signal(b, SIGKILL, &ignored);
        pybox_native_end_t end;
        if (pybox_native_wait(b, 5000, &end, err) < 0 || end.timed_out)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "native box: its init did not end after SIGKILL");
    }
    /* The kernel's end of the box: init reaped (PID 1 of its namespace, whose end is every
     * process's end), then its cgroup counting no process. */
    bool empty = !b->cg_made;
    if (b->cg_made && rc == 0) {
        if (pybox_native_cg_wait_empty(&b->cg, PYBOX_NATIVE_EMPTY_MS, &empty, err) < 0)
            rc = -1;
        else if (!empty)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, EBUSY,
                                 "native box: its cgroup still counts a process %d ms after its init was reaped",
                                 PYBOX_NATIVE_EMPTY_MS);
    }
    /* What outlived it, then the kernel's collector: started before the leaf and the
     * staging folder are removed, its pass seen after (a few ms on a kernel work queue). */
    pybox_native_collect_t col = {.end_r = -1};
    bool collecting = false;
    if (rc == 0 && b->reaped && !b->after.looked) {
        pybox_native_after_t *a = &b->after;
        a->looked = true;
        a->held = held_now(b, &a->mount_ns_known);
        a->still = a->held;
        a->collector = -1;
        if (b->collect) {
            pybox_error_t cerr = {0};
            collecting = pybox_native_collect_start(&col, &cerr) == 0;
            a->collector = 0;
        }
    }
    bool cg_gone = !b->cg_made;
    if (b->cg_made && rc == 0) {
        if (pybox_native_cg_remove(&b->cg, 2000, &cg_gone, err) < 0)
            rc = -1;
        if (cg_gone)
            b->cg_made = false;
    }
    bool st_gone = !b->staging_made;
    if (b->staging_made && rc == 0) {
        if ((b->userns_fd >= 0 ? rm_tree_in_userns(b->userns_fd, b->staging, err)
                               : pybox_native_rm_tree(b->staging, err)) < 0) {
            rc = -1;
        } else {
            st_gone = true;
            b->staging_made = false;
        }
    }
    if (collecting) {
        bool done = false;
        pybox_error_t cerr = {0};
        (void)pybox_native_collect_wait(&col, col.started_ms + PYBOX_COLLECT_MS, &done, &cerr);
        b->after.collect_ms = (double)(pybox_now_ms() - col.started_ms);
        b->after.collector = done ? 1 : 0;
        if (done)
            settle(b);
    }
    pybox_native_collect_end(&col);
    *gone = rc == 0 && (b->reaped || b->pid < 0) && empty && cg_gone && st_gone;
    return rc;
}

void pybox_native_after(const pybox_native_box_t *b, pybox_native_after_t *out)
{
    *out = b->after;
}

void pybox_native_free(pybox_native_box_t *b)
{
    if (b == NULL)
        return;
    close_fd(&b->pidfd);
    close_fd(&b->userns_fd);
    close_fd(&b->in_w);
    close_fd(&b->out_r);
    close_fd(&b->err_r);
    free(b);
}

int pybox_native_rm_tree(const char *path, pybox_error_t *err)
{
    return pybox_remove_tree_at(AT_FDCWD, path) == 0 ? 0 : sys_fail(err, errno, "removing", path);
}
