/* SPDX-License-Identifier: MIT */
/* Native boxes for an ordinary user (no root): what the host must give, and the user's
 * own ids for boxes. A box then gets a user namespace of its own, its ids mapped with
 * newuidmap and newgidmap from the user's subordinate ranges, and its cgroup from the
 * user's own systemd. Whatever of that the host lacks is refused before any box, each
 * reason with the one command or file that fixes it: PyBox never runs a box with less.
 * Contract: docs/rootless.md. */
#ifndef PYBOX_NATIVE_ROOTLESS_H
#define PYBOX_NATIVE_ROOTLESS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../error.h"

/* Where shadow's uidmap package puts the two helpers (set-user-ID root): PyBox runs these
 * and no other, whatever PATH says. */
#define PYBOX_NEWUIDMAP "/usr/bin/newuidmap"
#define PYBOX_NEWGIDMAP "/usr/bin/newgidmap"

/* The controllers a box's limits need, and the cgroup systemd gives a user's manager. */
#define PYBOX_ROOTLESS_CONTROLLERS "memory pids cpu"
#define PYBOX_USER_MANAGER_CGROUP "user.slice/user-%u.slice/user@%u.service"

/* The drop-in that delegates the controllers to every user's manager. */
#define PYBOX_DELEGATE_DROPIN "/etc/systemd/system/user@.service.d/delegate.conf"

/* A rootless box's share of the user's own kernel quotas. The kernel counts what a
 * process in a user namespace takes against every namespace up to the user's own (its
 * counts are hierarchical), so the boxes of one user share that user's inotify instances
 * and watches and message queue bytes with each other and with the user's own
 * processes: each box gets a part, so that one box cannot take them all (set in the
 * box's user namespace, /proc/sys/user, and as its RLIMIT_MSGQUEUE). The test-only
 * relaxation shared-uid removes them. */
#define PYBOX_ROOTLESS_INOTIFY_INSTANCES 16
#define PYBOX_ROOTLESS_INOTIFY_WATCHES 8192
#define PYBOX_ROOTLESS_MSGQUEUE_BYTES 102400

/* Who runs PyBox, and what the host gives them. */
typedef struct pybox_rootless {
    uid_t uid;
    gid_t gid;
    char user[64];                       /* the user's name ("" when the uid has none) */
    uint64_t subuid_start, subuid_count; /* the user's first range in /etc/subuid */
    uint64_t subgid_start, subgid_count; /* and in /etc/subgid */
    char manager_cgroup[PATH_MAX];       /* the user's manager's delegated cgroup */
} pybox_rootless_t;

/* What the host is made of, for the probe: every file under root ("" for this host; a
 * unit test's fixture tree otherwise), the cgroup tree at cgroup_root (NULL: root's
 * /sys/fs/cgroup, or pybox_cgroup_root() for this host). */
typedef struct pybox_rootless_host {
    const char *root;
    const char *cgroup_root;
    uid_t uid;
    gid_t gid;
    const char *user; /* NULL: looked up from uid */
} pybox_rootless_host_t;

/* Check everything a rootless box needs: cgroup v2 under systemd with the user's own
 * manager given memory, pids and cpu, a way to reach that manager (DBUS_SESSION_BUS_ADDRESS
 * or XDG_RUNTIME_DIR), unprivileged user namespaces allowed (the sysctls, AppArmor's
 * restriction, and on this host one made for real), newuidmap and newgidmap installed
 * set-user-ID root, and a subordinate uid and gid range for the user. Every missing
 * thing is named, with its fix, in one error (PYBOX_ERR_USAGE), before any box. */
int pybox_rootless_probe(const pybox_rootless_host_t *h, pybox_rootless_t *out, pybox_error_t *err);

/* The ids a user's boxes lease from: the upper half of the user's ranges (rootless
 * containers of the same user map their ordinary ids from the start of the range), at
 * most 65536; *uid_base with *count uids, and the gid of uid u is u - uid_base + gid_base. */
void pybox_rootless_box_ids(const pybox_rootless_t *r, uid_t *uid_base, gid_t *gid_base, uint32_t *count);

#endif
