/* SPDX-License-Identifier: MIT */
/* What the native sandbox's own files share: the box and the plan it was made from. */
#ifndef PYBOX_NATIVE_INTERNAL_H
#define PYBOX_NATIVE_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "../../guest/proto.h"
#include "sandbox.h"

/* Capability bits of the box's init (and of the relaxations). */

/* Every rlimit a box's init is given, by resource number (RLIMIT_CPU ... RLIMIT_RTTIME):
 * nothing of PyBox's own process is left to chance. */
#define PYBOX_NATIVE_RLIMITS 16
/* Every process of a box is the first the kernel's OOM killer takes when the host runs out
 * of memory (raising it needs no privilege, whatever PyBox's own value). */
#define PYBOX_NATIVE_OOM_SCORE_ADJ 1000
#define PYBOX_NATIVE_OOM_SCORE_ADJ_TEXT "1000"
/* The file mode creation mask init and the program start with, the engine's: what the
 * program makes is not writable by every user. */
#define PYBOX_NATIVE_UMASK 022

/* The paths of policy.c, made natively: masked (a file gets /dev/null bound over it, a
 * folder an empty read-only tmpfs) and read-only (bound onto itself, read-only). Only
 * those this kernel has are mounted. */
#define PYBOX_NATIVE_PROC_MASK_MAX 16

struct pybox_native_box {
    pid_t pid;
    int pidfd;
    int in_w, out_r, err_r;
    bool reaped;
    pybox_native_end_t end;
    pybox_native_cgroup_t cg;
    bool cg_made;
    int64_t held_oom_kills; /* read while held (pybox_native_held); -1 none */
    pybox_native_times_t times;
    char staging[PATH_MAX]; /* <staging>/<name>: ours, removed with the box */
    bool staging_made;
    char in_dir[PATH_MAX]; /* bound at /box/in ("" none) */
    bool own_in;           /* in_dir is <staging>/<name>/in */
    uint32_t program_uid;
    bool rootless; /* in a user namespace of its own, run by an ordinary user (rootless.h) */
    int userns_fd; /* rootless: that namespace, held until the box is freed (-1: none) */
    uint64_t caps; /* init's capabilities (permitted, effective, bounding) */
    struct rlimit rlimits[PYBOX_NATIVE_RLIMITS]; /* soft = hard, as given to init */
    /* What verify compares init with. */
    char argv[PYBOX_GUEST_ARGC][PYBOX_GUEST_ARG_MAX];
    /* The masked and read-only /proc paths this kernel has. */
    const char *proc_files[PYBOX_NATIVE_PROC_MASK_MAX];
    size_t n_proc_files;
    const char *proc_dirs[PYBOX_NATIVE_PROC_MASK_MAX];
    size_t n_proc_dirs;
    const char *proc_ro[PYBOX_NATIVE_PROC_MASK_MAX];
    size_t n_proc_ro;
    char filter_sha256[65];
    /* After the box's end. */
    uint64_t mntns_id; /* its mount namespace (0: this kernel cannot say) */
    bool collect;      /* have the kernel's collector run (a test may relax it) */
    pybox_native_after_t after;
};

/* The uid the program runs as: spec->uid, or what a relaxation says. */
uint32_t pybox_native_program_uid(const pybox_native_spec_t *s);
/* init's capabilities for a spec (the three, the engine's defaults, plus relax_cap). */
int pybox_native_caps(const pybox_native_spec_t *s, uint64_t *caps, pybox_error_t *err);
/* A capability by name ("CAP_NET_RAW"), from libcap's table (caps.c); -1 unknown, or
 * libcap (Debian's libcap2) cannot be opened. */
int pybox_native_cap_number(const char *name);
/* The rlimits of a box (soft = hard): the spec's nofile, fsize and sigpending, core 0,
 * nice and rtprio 0 (no raising of its priority, no realtime scheduling, which a CPU quota
 * does not bound), stack and memlock at most 8 MiB, msgqueue at most 819200 bytes (the
 * kernel's defaults), every other one PyBox's own hard limit (never raised: that would
 * take CAP_SYS_RESOURCE). */
void pybox_native_rlimits(const pybox_native_spec_t *s, struct rlimit out[PYBOX_NATIVE_RLIMITS]);
/* How /proc/<pid>/limits names a resource ("Max open files") and how C does ("RLIMIT_NOFILE"). */
const char *pybox_native_rlimit_line(int resource);
const char *pybox_native_rlimit_name(int resource);

/* Remove a folder tree without following any link (openat/unlinkat). 0 when gone. */
int pybox_native_rm_tree(const char *path, pybox_error_t *err);

#endif
