/* SPDX-License-Identifier: MIT */
/* A native box's cgroup: a leaf per box, placed as the host allows (docs/cgroups.md): on
 * cgroup v1 under the installation's parent in each controller's hierarchy (memory with
 * swap accounting, pids, cpu, cpuacct); on v2 without systemd under the installation's
 * parent, the controllers enabled from the root down; on v2 under systemd inside a
 * transient scope of its own that systemd delegates (systemd.h). Limits are written, then
 * read back and compared; the leaf is removed after the box. Works on any folder tree laid
 * out like the kernel's (tests use fixture trees). Contract: docs/native.md. */
#ifndef PYBOX_NATIVE_CGROUP_H
#define PYBOX_NATIVE_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../error.h"

/* How this host takes a box's cgroup. */
typedef struct pybox_native_cg_host {
    char root[PATH_MAX]; /* the cgroup root: /sys/fs/cgroup, or a fixture tree */
    int version;         /* 1 or 2 */
    bool systemd;        /* v2 with systemd as the init: a scope per box, asked of systemd */
    char manager[96];    /* under systemd, whose: "" the system's (root), else the folder of the running
                            user's own manager (rootless.h), under which its scopes are */
} pybox_native_cg_host_t;

/* The leaf's name inside a box's scope (v2 under systemd): the scope is systemd's, the
 * leaf PyBox's (no process may sit in a cgroup whose controllers are enabled below it). */
#define PYBOX_NATIVE_CG_SCOPE_LEAF "box"

/* The box's cgroup folders. v1: one per controller; v2: unified only. */
typedef struct pybox_native_cgroup {
    int version; /* 1 or 2 */
    char memory[PATH_MAX];
    char pids[PATH_MAX];
    char cpu[PATH_MAX];
    char cpuacct[PATH_MAX]; /* v1: may equal cpu when mounted together */
    char unified[PATH_MAX]; /* v2 */
    char rel[PATH_MAX];     /* the leaf as /proc/<pid>/cgroup names it: "/<parent>/<name>", or
                               "/pybox.slice/<parent>-<name>.scope/box" */
    bool systemd;           /* in a scope of systemd's: */
    char scope[PATH_MAX];   /* its folder (the leaf's parent) */
    char unit[128];         /* its unit: "<parent>-<name>.scope" */
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
/* The same, and whether systemd is the init (the folder sd_mark is there; NULL: the real
 * mark, systemd.h), which counts on v2 only. */
int pybox_native_cg_host(const char *root, const char *sd_mark, pybox_native_cg_host_t *h, pybox_error_t *err);

/* The name an installation's cgroups go by: "pybox-<install id>" (its parent folder, or
 * what its boxes' scopes' names start with). */
#define PYBOX_NATIVE_CG_PARENT_MAX 48
int pybox_native_cg_parent(const char *install_id, char out[PYBOX_NATIVE_CG_PARENT_MAX], pybox_error_t *err);

/* Where box run_id of installation install_id has (or would have) its cgroup on this
 * host: the cgroup root pybox_cgroup_root(), systemd as the host has it. What tests and
 * tools ask instead of spelling the layout again. */
int pybox_native_box_cgroup(const char *install_id, const char *run_id, pybox_native_cgroup_t *out, pybox_error_t *err);

/* The one definition of where box `name` (its run id) of the installation whose cgroups
 * are named `parent` ("pybox-<install id>") has its cgroup on host h (nothing is made):
 *   v1                  <root>/<controller>/<parent>/<name>
 *   v2 without systemd  <root>/<parent>/<name>
 *   v2 under systemd    <root>/pybox.slice/<parent>-<name>.scope/box */
int pybox_native_cg_paths(const pybox_native_cg_host_t *h, const char *parent, const char *name,
                          pybox_native_cgroup_t *out, pybox_error_t *err);

/* The limits that a spec's memory, pids and CPUs (1e-9 CPUs; 0: none) give. */
void pybox_native_cg_want(int64_t memory_bytes, int64_t pids, int64_t nano_cpus, pybox_native_cg_limits_t *out);

/* The folders that hold the installation's leaves on host h, each once ("" for the
 * rest): its parent in each v1 hierarchy, or on v2; under systemd, the slice its boxes'
 * scopes are in (systemd's, shared by every installation: never removed by PyBox). */
int pybox_native_cg_holders(const pybox_native_cg_host_t *h, const char *parent, char dirs[5][PATH_MAX],
                            pybox_error_t *err);

/* Not under systemd: make the parent (once; v2: the controllers enabled in every folder
 * from the root down to it) and the leaf (refused if it already exists), write the limits,
 * read them back and compare. On failure the leaf is removed. */
int pybox_native_cg_make(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *want, pybox_error_t *err);

/* Under systemd, once pid is in the box's scope: the scope must have the memory, pids
 * and cpu controllers; make the leaf (*made then), move pid into it, enable the
 * controllers in the scope (now empty), write the limits, read them back and compare.
 * On failure the leaf is left for pybox_native_cg_remove (pid may be in it). */
int pybox_native_cg_adopt(const pybox_native_cgroup_t *cg, pid_t pid, const pybox_native_cg_limits_t *want, bool *made,
                          pybox_error_t *err);

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
