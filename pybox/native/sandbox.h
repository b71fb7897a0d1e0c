/* SPDX-License-Identifier: MIT */
/* The native sandbox: boxes made by PyBox itself, with no daemon: new mount, PID,
 * network, IPC, UTS and cgroup namespaces, pivot_root into a read-only root filesystem
 * folder, a fresh /proc with the policy's masked paths, a minimal /dev, bounded tmpfs
 * /tmp, /dev/shm and /box/out, /box/in bound read-only, a cgroup per box with limits
 * read back, an empty ambient set, a bounding set of the init's three capabilities,
 * no_new_privs, PyBox's seccomp profile, rlimits, and the same guest init as PID 1.
 * Self-contained: it knows nothing of the run flow, receipts or the engine.
 * Contract: docs/native.md. Ownership: pybox_native_create gives a box the caller frees
 * with pybox_native_free (after pybox_native_remove). */
#ifndef PYBOX_NATIVE_SANDBOX_H
#define PYBOX_NATIVE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../buf.h"
#include "../error.h"
#include "cgroup.h"

typedef struct pybox_native_spec {
    const char *rootfs;                      /* absolute path of a root filesystem folder (never written); it holds
                                                /pybox/init, /proc, /dev, /tmp, and /box/in, /box/out when used */
    const char *in_dir;                      /* host folder bound read-only at /box/in; NULL: see mount_in */
    bool mount_in;                           /* with in_dir NULL: a staging folder bound at /box/in, filled by
                                                pybox_native_put_files */
    int64_t out_bytes;                       /* /box/out tmpfs of this size, mode 0700, owned by uid (0: none) */
    int64_t tmp_bytes;                       /* noexec,nosuid,nodev tmpfs /tmp (mode 1777) */
    int64_t shm_bytes;                       /* the same at /dev/shm */
    uint32_t uid;                            /* the program's uid = gid (init's --program-uid), unless relaxed */
    int64_t timer_ms;                        /* init's --timer-ms */
    int64_t wait_ms, life_ms;                /* init's --wait-ms and --life-ms (0: a cold box) */
    int64_t memory_bytes, pids, nano_cpus;   /* cgroup limits (memory: swap equal, i.e. none) */
    int64_t nofile, fsize_bytes, sigpending; /* rlimits (soft = hard) */
    int64_t core_bytes;                      /* the core rlimit */
    const char *cgroup_root;                 /* "/sys/fs/cgroup" (tests pass a fixture tree) */
    const char *cgroup_parent;               /* the installation's cgroups' name, "pybox-<install id>": its parent
                                                folder, or what its boxes' scopes' names start with (cgroup.h) */
    const char *name;                        /* this box's leaf: the run id, [0-9a-f]{32} */
    const char *staging;                     /* the installation's staging folder; the box's is <staging>/<name> */
    const char *filters;                     /* the installation's compiled seccomp profile's folder (NULL: none) */
    int64_t expires;                         /* wall-clock second after which leftovers may be removed */
    const char *const *env;                  /* init's environment, NULL-terminated (PATH, LANG, HOME) */
    const char *hostname;                    /* the box's (policy.h) */
    const char *const *init_caps;            /* init's capabilities by name, NULL-terminated (policy.h) */
    /* An ordinary user's box (rootless.h): a user namespace of its own, mapped by newuidmap
     * and newgidmap, whose root is the user (user_uid, user_gid: the owner of the root
     * filesystem folder) and where the program's uid (uid, from the user's subordinate
     * range) is itself and its gid (= uid inside) is box_gid outside; the box's scope
     * comes from the user's own systemd. false: PyBox runs as root, in its own user
     * namespace. */
    bool rootless;
    uint32_t user_uid, user_gid, box_gid;
    /* Testing only, never from a command line: one protection removed on purpose, each
     * made natively and expected by the verifier (the PYBOX_RELAX_* bits of policy.h). */
    unsigned relax;
    const char *relax_bind;   /* a host folder bound read-only at /host (the root has /host) */
    const char *relax_env;    /* one more environment entry */
    pid_t relax_netns_pid;    /* join the network namespace of this native box's init (0: own) */
    const char *relax_cap;    /* one more capability, e.g. "CAP_NET_RAW" */
    const char *relax_socket; /* a host socket bound at /run/docker.sock (on a tmpfs /run) */
    const char *relax_unmask; /* one of the policy's masked paths left unmasked */
} pybox_native_spec_t;

typedef struct pybox_native_box pybox_native_box_t;

/* How the box ended: from waitid() of its init and from its cgroup, never from the
 * program's words. */
typedef struct pybox_native_end {
    bool exited;       /* init ended by itself: exit_code valid */
    int exit_code;     /* init's exit status */
    int signal;        /* the signal that ended init, 0 if none */
    int64_t oom_kills; /* the cgroup's OOM kills; -1 unknown */
    bool timed_out;    /* the bounded wait ran out: the box still runs */
} pybox_native_end_t;

/* Check a spec without making anything (PYBOX_ERR_USAGE with the first problem). */
int pybox_native_spec_check(const pybox_native_spec_t *s, pybox_error_t *err);

/* Everything up to a box whose init (/pybox/init, PID 1 of its namespaces) runs and
 * waits for its hello on stdin: staging and expiry written, cgroup made, limits written
 * and read back, the process cloned into its namespaces and the cgroup (under systemd:
 * into the box's scope and then PyBox's leaf, while it makes its mounts), root pivoted,
 * mounts made, rlimits, capabilities, no_new_privs and the seccomp filter in place,
 * init exec'd (confirmed by the end of a close-on-exec pipe). The program cannot have
 * started: init starts it only after its hello. Safe in a multi-threaded process. */
int pybox_native_create(const pybox_native_spec_t *s, pybox_native_box_t **out, pybox_error_t *err);

/* The kernel's view of the box, read from /proc/<init>/ and the cgroup files, compared
 * with the spec; every difference listed (PYBOX_ERR_POLICY); *checked = settings compared. */
int pybox_native_verify(pybox_native_box_t *b, const pybox_native_spec_t *s, int *checked, pybox_error_t *err);

/* Where create's time went under systemd (0 elsewhere): opening libsystemd (once per
 * process) and connecting to the manager; the scope's job, from the request to its end;
 * the leaf made in the scope, the process moved in and the limits written and read back. */
typedef struct pybox_native_times {
    double sd_connect_ms, sd_scope_ms, sd_leaf_ms;
} pybox_native_times_t;
void pybox_native_times(const pybox_native_box_t *b, pybox_native_times_t *out);

pid_t pybox_native_pid(const pybox_native_box_t *b);
/* init's pidfd: readable (POLLIN) once init has ended; -1 when there is none. */
int pybox_native_pidfd(const pybox_native_box_t *b);
int pybox_native_stdin(const pybox_native_box_t *b);  /* write end, O_NONBLOCK|O_CLOEXEC */
int pybox_native_stdout(const pybox_native_box_t *b); /* read end, O_NONBLOCK|O_CLOEXEC */
int pybox_native_stderr(const pybox_native_box_t *b); /* read end, O_NONBLOCK|O_CLOEXEC */
/* Close the box's stdin (its init sees end of file). */
void pybox_native_close_stdin(pybox_native_box_t *b);

/* A signal to init from outside its PID namespace (init sees si_pid 0). 1: it had
 * ended already. */
int pybox_native_signal(pybox_native_box_t *b, int sig, pybox_error_t *err);

/* While init holds the box: note the cgroup's OOM kills now, for the end to give when
 * the cgroup is gone by the time init is reaped (under systemd the scope, the leaf with
 * it, is removed the moment it empties). */
void pybox_native_held(pybox_native_box_t *b);

/* Reap init within timeout_ms (end->timed_out if it still runs), then read the cgroup's
 * OOM kills (those noted while held when the cgroup is gone). Once reaped, later calls
 * give the same end. */
int pybox_native_wait(pybox_native_box_t *b, int64_t timeout_ms, pybox_native_end_t *end, pybox_error_t *err);
bool pybox_native_running(pybox_native_box_t *b);
/* Whether the kernel says init has ended (a failure to ask is not an end). */
bool pybox_native_ended(pybox_native_box_t *b);

/* The box's cgroup folders. */
int pybox_native_cgroup(const pybox_native_box_t *b, pybox_native_cgroup_t *out);

/* Unpack a tar (the input packer's: regular files and folders, names relative to
 * /box/in) into the staging folder bound at /box/in; after create, before the hello.
 * Refused for any other kind of entry, an absolute name, "..", or a name seen twice. */
int pybox_native_put_files(pybox_native_box_t *b, const void *tar, size_t len, pybox_error_t *err);

/* A tar of /box/out (entries "out/..."), read through /proc/<init>/root while the box is
 * held, never following a link the program made; at most max bytes (EFBIG above). */
int pybox_native_get_files(pybox_native_box_t *b, size_t max, pybox_buf_t *out, pybox_error_t *err);

/* Kill what is left, reap, remove the cgroup leaf and the staging folder; *gone only
 * when all of it is gone. */
int pybox_native_remove(pybox_native_box_t *b, bool *gone, pybox_error_t *err);
void pybox_native_free(pybox_native_box_t *b);

/* ---- what can outlive a box's last process ---- */

/* A process can send a descriptor through a unix socket (SCM_RIGHTS), then that socket
 * through another, and end: the descriptors are in flight in queues no process can read
 * any more, and the kernel keeps what they refer to (a pipe's write end, a file, a
 * memfd's memory, a namespace with its mounts) outside any live limit until its
 * collector of such cycles runs. Only the release or the send of a unix socket has it
 * run, anyone's, anywhere on the host. */

/* What a box's removal saw of that, after its end (docs/native.md). */
#define PYBOX_NATIVE_HELD_STDIN 0x1u    /* the read end of the box's stdin */
#define PYBOX_NATIVE_HELD_STDOUT 0x2u   /* the write end of its stdout */
#define PYBOX_NATIVE_HELD_STDERR 0x4u   /* of its stderr */
#define PYBOX_NATIVE_HELD_MOUNT_NS 0x8u /* its mount namespace, with every mount of the box */
typedef struct pybox_native_after {
    bool looked;         /* the box had ended (init reaped, its cgroup empty) and was looked at */
    unsigned held;       /* PYBOX_NATIVE_HELD_* still there after the box's end */
    unsigned still;      /* of those, still there after the collector ran (or when it did not) */
    bool mount_ns_known; /* this kernel can say whether the box's mount namespace exists (6.10+) */
    int collector;       /* 1: a pass of the kernel's collector ended after the box's end; 0: none was
                            seen within PYBOX_COLLECT_MS; -1: not run (relaxed for a test) */
    double collect_ms;   /* from the collector's start, once the box's end was read, to its pass seen (the box's removal
                            runs in between) */
} pybox_native_after_t;

/* After pybox_native_remove: what it saw (zeroed when it did not look). */
void pybox_native_after(const pybox_native_box_t *b, pybox_native_after_t *out);

/* Have the kernel's collector run, and see a pass: a marker of PyBox's own (two unix
 * sockets, each in flight in the other's queue and closed, with a datagram of a third
 * socket of PyBox's beside them), then a unix socket closed. A pass that ends the marker
 * began after it was made, and collected every cycle nothing referred to then; the files
 * it held are closed moments after, by a kernel work queue. */
typedef struct pybox_native_collect {
    int end_r; /* the third socket: writable (POLLOUT) once a pass freed its datagram */
    int64_t started_ms;
} pybox_native_collect_t;
int pybox_native_collect_start(pybox_native_collect_t *c, pybox_error_t *err);
/* Wait until deadline_ms (monotonic) for the marker's end (*done), closing a unix socket
 * again from time to time; then pybox_native_collect_end, done or not. */
int pybox_native_collect_wait(pybox_native_collect_t *c, int64_t deadline_ms, bool *done, pybox_error_t *err);
void pybox_native_collect_end(pybox_native_collect_t *c);
/* All three, at most timeout_ms. */
int pybox_native_collect(int64_t timeout_ms, bool *done, pybox_error_t *err);

/* The mount namespace id of a process (Linux 6.10+; 0 when the kernel cannot say), and
 * whether a mount namespace of that id exists (listmount): 1 yes, 0 no, -1 not known. */
uint64_t pybox_native_mntns_id(pid_t pid);
int pybox_native_mntns_exists(uint64_t id);

/* ---- leftovers of an installation ---- */

typedef struct pybox_native_leftover {
    char run_id[33];
    int64_t expires; /* from the staging folder's expiry file; 0 when there is none */
    bool cgroup;     /* a leaf of that name under the installation's parent */
    bool staging;    /* a staging folder of that name */
} pybox_native_leftover_t;

/* Every leaf under the parent (under systemd: every scope "<parent>-<run id>.scope" that
 * holds PyBox's leaf) and every staging folder whose name is a run id (nothing else is
 * ever listed or touched), on host h. *out is malloc'd. */
int pybox_native_leftovers(const pybox_native_cg_host_t *h, const char *cgroup_parent, const char *staging,
                           pybox_native_leftover_t **out, size_t *n, pybox_error_t *err);
/* Remove one whose expiry has passed (now, wall-clock seconds): the cgroup leaf first
 * (refused by the kernel while a process is in it; a scope is systemd's to remove), then
 * the staging folder. *gone when neither is left; an unexpired one is left alone (*gone
 * false, no error). */
int pybox_native_leftover_remove(const pybox_native_cg_host_t *h, const char *cgroup_parent, const char *staging,
                                 const pybox_native_leftover_t *l, int64_t now, bool *gone, pybox_error_t *err);

/* A run id: exactly 32 lowercase hex digits. */
bool pybox_native_is_run_id(const char *s);

#endif
