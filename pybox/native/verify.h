/* SPDX-License-Identifier: MIT */
/* The verifier's comparisons, apart from the reading of /proc, so that each can be
 * shown to fail on a fixture (unit/test_native.c). */
#ifndef PYBOX_NATIVE_VERIFY_H
#define PYBOX_NATIVE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "../buf.h"
#include "parse.h"

/* Differences found so far, and settings compared. */
typedef struct pybox_nv {
    pybox_buf_t diffs;
    int count;
    int checked;
} pybox_nv_t;

void pybox_nv_init(pybox_nv_t *v);
void pybox_nv_free(pybox_nv_t *v);
void pybox_nv_differ(pybox_nv_t *v, const char *where, const char *want, const char *got);
void pybox_nv_expect_int(pybox_nv_t *v, const char *where, int64_t want, int64_t got);
void pybox_nv_expect_str(pybox_nv_t *v, const char *where, const char *want, const char *got);

/* init's status: uid/gid 0, no groups, exactly these capabilities (permitted, effective,
 * bounding), none inheritable or ambient, no_new_privs and a seccomp filter as asked. */
/* init's uid and gid as PyBox sees them: 0 (root) or, rootless, the user's own. */
void pybox_nv_status(pybox_nv_t *v, const pybox_np_status_t *st, uint32_t uid, uint32_t gid, uint64_t caps, bool nnp,
                     bool seccomp);

/* init's environment as /proc/<pid>/environ gives it (NUL-separated): exactly env
 * (NULL-ended) and then extra (NULL: none), in that order. */
void pybox_nv_environ(pybox_nv_t *v, const char *text, size_t len, const char *const *env, const char *extra);

/* One expected mount. */
typedef struct want_mount {
    const char *point;
    const char *fstype; /* NULL: the root filesystem's or the bound folder's */
    unsigned flags;
    const char *size, *mode, *uid, *gid; /* tmpfs options, NULL: not compared */
    const char *bind_of;                 /* a host folder bound here: same device, same folder */
    bool from_dev;                       /* /dev/null of the box's own /dev */
    bool seen;
} want_mount_t;

/* Exactly the expected mounts, each with its flags, type, tmpfs options and origin. */
void pybox_nv_mounts(pybox_nv_t *v, const pybox_np_mount_t *m, size_t n, want_mount_t *w, size_t nw);

#endif
