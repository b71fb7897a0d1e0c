/* SPDX-License-Identifier: MIT */
/* The native backend's own parts, shared by its files and its unit tests: the backend's
 * folders, its images (root filesystem folders pinned by a digest of the whole tree), and
 * the network namespace a relaxed test box may join. Nothing outside pybox/native/ (and
 * tests) includes this. */
#ifndef PYBOX_NATIVE_H
#define PYBOX_NATIVE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../box.h"
#include "../error.h"
#include "../state.h"
#include "cgroup.h"

/* The backend's folders in an installation's state folder, the one definition of them:
 * each box's staging folder (by run id), the images' root filesystems (by digest), and the
 * link to another installation's roots that an installation borrowing them has (state.h),
 * and the seccomp profile as compiled for this host (seccomp.h). */
#define PYBOX_NATIVE_DIR "native"
#define PYBOX_NATIVE_STAGING PYBOX_NATIVE_DIR "/staging"
#define PYBOX_NATIVE_ROOTS PYBOX_NATIVE_DIR "/roots"
#define PYBOX_NATIVE_BORROWED PYBOX_NATIVE_DIR "/borrowed-roots"
#define PYBOX_NATIVE_FILTERS PYBOX_NATIVE_DIR "/filters"

typedef struct native_backend {
    pybox_backend_t base;
    pybox_state_t st;
    char install_id[33];
    char staging[PATH_MAX];              /* <state>/native/staging: each box's folder, by run id */
    char roots[PATH_MAX];                /* <state>/native/roots: the images' root filesystems, by digest */
    char filters[PATH_MAX];              /* <state>/native/filters: the compiled seccomp profile (seccomp.h) */
    char borrowed[PATH_MAX];             /* <state>/native/borrowed-roots: another installation's roots, linked
                                            (tests, the campaign; state.h), or "" */
    char cg_parent[48];                  /* the installation's cgroups' name (cgroup.h) */
    pybox_native_cg_host_t cg_host;      /* how this host takes a box's cgroup */
    bool rootless;                       /* run by an ordinary user (rootless.h): */
    uint32_t user_uid, user_gid;         /* who, the root of every box */
    uint32_t box_uid_base, box_gid_base; /* a box's gid is its uid - box_uid_base + box_gid_base */
    char describe[320];
} native_backend_t;

extern const pybox_backend_ops_t pybox_native_backend_ops;
extern const pybox_image_ops_t pybox_native_image_ops;

/* Make (or check) the backend's folders under the installation: root's, 0700. */
int pybox_native_dirs(native_backend_t *be, pybox_error_t *err);

/* The root filesystem folder of a pinned image id ("sha256:<64 hex>"), which must be
 * there. */
int pybox_native_image_root(native_backend_t *be, const char *id, char *out, size_t len, pybox_error_t *err);

/* The SHA-256 of a whole tree (every entry's path, type, mode, owner, size and content,
 * link target or device), following no link: what a native image is pinned by. */
int pybox_native_tree_sha256(const char *dir, char out[65], pybox_error_t *err);

/* The folders of the installation's own roots/ that no native pin names (digests, and
 * the .new-/.old- folders of imports and removals cut short), with their mtimes. */
int native_unpinned_images(native_backend_t *be, char (**names)[72], int64_t **mtimes, size_t *n, pybox_error_t *err);
/* Remove one of them, unless a box of the installation is there or a pin names it now. */
int native_remove_unpinned(native_backend_t *be, const char *name, bool *gone, pybox_error_t *err);

/* A spec's limits, rlimits, hostname and init capabilities as the default policy's
 * (pybox_policy_defaults): what a box made without the run flow (the tests, native-try)
 * starts from. */
struct pybox_native_spec;
void pybox_native_spec_defaults(struct pybox_native_spec *s);

/* A relaxed test box joins another process's network namespace: "pid:<n>". */
int pybox_native_netns_pid(native_backend_t *be, const char *what, pid_t *pid, pybox_error_t *err);

#endif
