/* SPDX-License-Identifier: MIT */
/* Where a box's cgroup is on the host, on cgroup v1 (a folder per controller) and v2
 * (one folder), and how to find it from what the kernel says of a process. Backends
 * locate their boxes' cgroups with these; the watcher reads them (watch.h). */
#ifndef PYBOX_CGROUP_H
#define PYBOX_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

enum { PYBOX_CG_MEMORY = 0, PYBOX_CG_PIDS, PYBOX_CG_CPUACCT, PYBOX_CG_CPU, PYBOX_CG_CONTROLLERS };

typedef enum {
    PYBOX_CG_NONE = 0,
    PYBOX_CG_V1 = 1,
    PYBOX_CG_V2 = 2,
} pybox_cg_version_t;

typedef struct pybox_cgroup_loc {
    pybox_cg_version_t version;
    char dir[PYBOX_CG_CONTROLLERS][PATH_MAX]; /* v1: per controller ("" if not found); v2: dir[0] */
} pybox_cgroup_loc_t;

/* The host boxes run on, as receipts say it (seen.host; docs/cgroups.md). */
typedef struct pybox_cgroup_host {
    char kernel[65];            /* uname(2)'s release */
    pybox_cg_version_t version; /* v2: the root is the unified hierarchy; v1: it holds a memory controller's
                                   folder (also a hybrid host's); NONE: neither */
    bool systemd;               /* systemd is the init, and manages the cgroup tree */
} pybox_cgroup_host_t;

/* Read it: the cgroup root root (NULL: pybox_cgroup_root()), systemd when the folder
 * sd_mark is there (NULL: /run/systemd/system, as sd_booted(3) asks). */
void pybox_cgroup_host(const char *root, const char *sd_mark, pybox_cgroup_host_t *h);
/* "v1", "v2" or NULL; "systemd" or "none". */
const char *pybox_cgroup_version_word(pybox_cg_version_t v);
const char *pybox_cgroup_manager_word(const pybox_cgroup_host_t *h);

/* The cgroup root: /sys/fs/cgroup, or in the test build the hook PYBOX_HOOK_CGROUP_ROOT
 * (hooks.h) when it is an absolute path. */
const char *pybox_cgroup_root(void);

/* Whether root is a cgroup v2 (unified) mount: it has cgroup.controllers. */
bool pybox_cgroup_unified(const char *root);

/* A v1 controller's mount folder under root: controllers may be mounted alone ("cpuacct")
 * or together ("cpu,cpuacct"). 0 when found; 1 when none is, out then root/ctrl; -1 when
 * it does not fit. */
int pybox_cgroup_v1_mount(const char *root, const char *ctrl, char *out, size_t len);

/* A v1 controller's folder for a cgroup path (path starts with "/"): controllers may be
 * mounted alone ("cpuacct") or together ("cpu,cpuacct"). 0 when the folder exists. */
int pybox_cgroup_v1_dir(const char *root, const char *ctrl, const char *path, char *out, size_t len);

/* Fill a v1 location from a cgroup path (every controller's folder that exists); 0 when
 * at least the memory controller's does. */
int pybox_cgroup_v1_at(const char *root, const char *path, pybox_cgroup_loc_t *loc);

/* The cgroups the kernel lists for a process (<proc_root>/<pid>/cgroup), under root.
 * Paths that climb out of the root are ignored. 0 when found. */
int pybox_cgroup_of_pid(const char *root, const char *proc_root, pid_t pid, pybox_cgroup_loc_t *loc,
                        pybox_error_t *err);
/* The same from that file's text. A line longer than PATH_MAX or holding a NUL is
 * ignored. */
int pybox_cgroup_of_text(const char *root, const char *text, size_t len, pybox_cgroup_loc_t *loc, pybox_error_t *err);
/* The most of /proc/<pid>/cgroup read (more is ignored). */
#define PYBOX_CGROUP_TEXT_MAX (64 * 1024)

#endif
