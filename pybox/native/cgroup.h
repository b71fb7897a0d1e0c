/* SPDX-License-Identifier: MIT */
/* A native box's cgroup: a leaf per box under the installation's parent, on cgroup v1
 * (one folder per controller: memory with swap accounting, pids, cpu, cpuacct) or v2
 * (one folder, controllers enabled in the parent). Limits are written, then read back and
 * compared; the leaf is removed after the box. Works on any folder tree laid out like the
 * kernel's (tests use fixture trees). Contract: docs/native.md. */
#ifndef PYBOX_NATIVE_CGROUP_H
#define PYBOX_NATIVE_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../error.h"

/* The box's cgroup folders. v1: one per controller; v2: unified only. */
typedef struct pybox_native_cgroup {
    int version; /* 1 or 2 */
    char memory[PATH_MAX];
    char pids[PATH_MAX];
    char cpu[PATH_MAX];
    char cpuacct[PATH_MAX]; /* v1: may equal cpu when mounted together */
    char unified[PATH_MAX]; /* v2 */
} pybox_native_cgroup_t;

/* The limits as written (and as read back). -1: no limit. */
typedef struct pybox_native_cg_limits {
    int64_t memory_bytes; /* memory and memory+swap (v1) / memory.max, swap 0 (v2) */
    int64_t tcp_bytes;    /* v1 only: memory.kmem.tcp.limit_in_bytes, the kernel's TCP buffers, which v1
                             keeps apart from memory and bounds only when set (v2 counts them in
                             memory.max); the memory limit again */
    int64_t pids;
    int64_t cpu_quota_us; /* per period */
    int64_t cpu_period_us;
} pybox_native_cg_limits_t;

#define PYBOX_NATIVE_CPU_PERIOD_US 100000

/* Which hierarchy root holds: 2 when root/cgroup.controllers lists memory, pids and cpu;
 * 1 when root has memory (with memory.memsw.*), pids and cpu folders; else an error. */
int pybox_native_cg_detect(const char *root, int *version, pybox_error_t *err);

/* The folders of parent/name under root (nothing is made). */
int pybox_native_cg_paths(const char *root, int version, const char *parent, const char *name,
                          pybox_native_cgroup_t *out, pybox_error_t *err);

/* The limits that a spec's memory, pids and CPUs (1e-9 CPUs; 0: none) give. */
void pybox_native_cg_want(int64_t memory_bytes, int64_t pids, int64_t nano_cpus, pybox_native_cg_limits_t *out);

/* Make the parent (once; v2: its controllers enabled) and the leaf (refused if it already
 * exists), write the limits, read them back and compare. On failure the leaf is removed. */
int pybox_native_cg_make(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *want, pybox_error_t *err);

/* Read the limits back; compare with want: every difference listed (PYBOX_ERR_POLICY).
 * *checked is increased by the settings compared. */
int pybox_native_cg_read(const pybox_native_cgroup_t *cg, pybox_native_cg_limits_t *got, pybox_error_t *err);
int pybox_native_cg_check(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *want, int *checked,
                          pybox_error_t *err);

/* Put a process into the leaf (every controller's cgroup.procs). */
int pybox_native_cg_attach(const pybox_native_cgroup_t *cg, pid_t pid, pybox_error_t *err);

/* OOM kills counted in the leaf (v1 memory.oom_control, v2 memory.events). */
int pybox_native_cg_oom_kills(const pybox_native_cgroup_t *cg, int64_t *kills, pybox_error_t *err);

/* Whether the kernel still counts a process in the leaf: v2 its cgroup.events says
 * "populated 1"; v1 (no cgroup.events outside the unified mount) a controller's
 * cgroup.procs lists one. */
int pybox_native_cg_populated(const pybox_native_cgroup_t *cg, bool *populated, pybox_error_t *err);
/* Wait (at most timeout_ms) until the leaf is not populated: *empty when it is not. A
 * process that is ending still counts until the kernel has released it. */
int pybox_native_cg_wait_empty(const pybox_native_cgroup_t *cg, int64_t timeout_ms, bool *empty, pybox_error_t *err);

/* Remove the leaf's folders, retrying while the kernel still lists tasks in them, for
 * at most timeout_ms. *gone when none is left. */
int pybox_native_cg_remove(const pybox_native_cgroup_t *cg, int64_t timeout_ms, bool *gone, pybox_error_t *err);

/* Read a small file whole (at most 4095 bytes) into buf, NUL-terminated. */
int pybox_native_read_small(const char *path, char *buf, size_t len, size_t *got, pybox_error_t *err);

#endif
