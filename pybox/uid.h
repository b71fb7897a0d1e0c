/* SPDX-License-Identifier: MIT */
/* Per-box users: every box's program runs as a host uid (and gid) of its own, leased from
 * a range reserved for PyBox, so that per-user kernel quotas (descriptors in flight,
 * message queues, inotify instances, pending signals, processes) are never shared between
 * two live boxes of any installation on the machine, nor with the host's users.
 * Contract: docs/policy.md ("The program's user"). */
#ifndef PYBOX_UID_H
#define PYBOX_UID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* The range reserved for boxes, and the machine-wide run folder (on a tmpfs that a reboot
 * clears along with every box) whose folder PYBOX_UID_LEASES_IN holds the leases, one
 * file per uid. Both folders are root's (the running user's) and no one else's: checked
 * each time they are opened. */
#define PYBOX_UID_BASE 200000u
#define PYBOX_UID_COUNT 65536u
#define PYBOX_RUN_DIR "/run/pybox"
#define PYBOX_UID_LEASES_IN "uids"

/* A lease: the file is locked while this process holds it; its content says which run
 * has it and until when. */
typedef struct pybox_uid_lease {
    uid_t uid; /* also the gid */
    int fd;    /* -1 when nothing is held */
    char dir[128];
} pybox_uid_lease_t;

#define PYBOX_UID_LEASE_INIT                                                                                           \
    {                                                                                                                  \
        .uid = 0, .fd = -1, .dir = ""                                                                                  \
    }

/* A folder of leases and the range it hands out; runs use the machine's (tests, their
 * own). The folder's parent is made for it, as the run folder is for the machine's. */
typedef struct pybox_uid_range {
    const char *dir;
    uid_t base;
    uint32_t count;
    bool own; /* the running user's own subordinate range: only the host's users and groups are
                 left out (no other subordinate range can overlap it) */
} pybox_uid_range_t;

/* The machine's range: PYBOX_UID_BASE, PYBOX_UID_COUNT and the leases in
 * PYBOX_RUN_DIR/PYBOX_UID_LEASES_IN, or in the test build under the run folder the hook
 * PYBOX_HOOK_RUN_DIR names (hooks.h). r->dir points into buf. For an ordinary user (no
 * root), their own: the boxes' half of their subordinate range (pybox_uid_user_range),
 * the leases in $XDG_RUNTIME_DIR/pybox/uids (their own tmpfs, cleared with their last
 * session or a reboot, as their boxes are). */
int pybox_uid_machine(pybox_uid_range_t *r, char *buf, size_t len, pybox_error_t *err);

/* Lease a uid for a run: one that no live lease holds (another process's lock, or a
 * lease whose expiry has not passed), that no host user or group has, and that lies in no
 * subordinate range of /etc/subuid or /etc/subgid. expires is the wall-clock second after
 * which the run's box is certainly gone (its leftovers' expiry). */
int pybox_uid_lease_take(const char *run_id, int64_t expires, pybox_uid_lease_t *out, pybox_error_t *err);

/* The same in another folder and range (tests). */
int pybox_uid_lease_take_in(const char *dir, uid_t base, uint32_t count, const char *run_id, int64_t expires,
                            pybox_uid_lease_t *out, pybox_error_t *err);

/* Push the lease's expiry to expires (never earlier), e.g. once the box's start is near:
 * a box lives at most twice its timer from its start, however long the run took before. */
int pybox_uid_lease_renew(pybox_uid_lease_t *l, const char *run_id, int64_t expires, pybox_error_t *err);

/* The box is confirmed gone: the uid is free again at once. */
void pybox_uid_lease_release(pybox_uid_lease_t *l);

/* The box may still exist: keep the lease until its expiry, let go of the lock. */
void pybox_uid_lease_keep(pybox_uid_lease_t *l);

/* Remove a range's free lease files: those whose expiry has passed (or that are empty)
 * and that no live run holds (locked). A file whose name is not a uid of the range, that
 * is not a regular file or whose text is not a lease is left alone. No folder: nothing to
 * do. *removed: how many were removed (dry_run: would be, and none is). Machine-wide and
 * for every installation: a free lease is free for all of them. */
int pybox_uid_lease_sweep_in(const pybox_uid_range_t *r, bool dry_run, int *removed, pybox_error_t *err);

/* A lease file as it is now, for those who look (pybox-campaign inspect): its uid, the
 * run it names and its expiry (an empty file: "" and 0; text that is no lease: -1), and
 * whether a live run holds it (locked). */
typedef struct pybox_uid_lease_info {
    uid_t uid;
    char run_id[33];
    int64_t expires;
    bool locked;
} pybox_uid_lease_info_t;
/* The lease files of a range; *out malloc'd. No folder: none. */
int pybox_uid_lease_list_in(const pybox_uid_range_t *r, pybox_uid_lease_info_t **out, size_t *n, pybox_error_t *err);
/* The running user's first range (by name or uid) in a subordinate id file (root:
 * /etc/subuid or /etc/subgid): 1 found, 0 not. */
int pybox_subid_find(const char *file, const char *user, uid_t uid, uint64_t *start, uint64_t *count);

/* Whether another owner's range in that file overlaps [start, start + count): 1 with
 * its owner in other, 0 not. Two users sharing ids would share their boxes' ids. */
int pybox_subid_overlap(const char *file, const char *user, uid_t uid, uint64_t start, uint64_t count, char *other,
                        size_t other_len);

/* The ids a user's boxes lease from: the upper half of the user's subordinate ranges
 * (rootless containers of the same user map their ordinary ids from the start of the
 * range), at most PYBOX_UID_COUNT; *uid_base with *count uids, and a box's gid is its uid
 * - uid_base + gid_base. */
void pybox_uid_user_half(uint64_t uid_start, uint64_t uid_count, uint64_t gid_start, uint64_t gid_count,
                         uid_t *uid_base, gid_t *gid_base, uint32_t *count);

/* The running ordinary user's range and its gid base, from /etc/subuid and /etc/subgid;
 * refused when they have none. */
int pybox_uid_user_range(pybox_uid_range_t *r, gid_t *gid_base, char *buf, size_t len, pybox_error_t *err);

/* One line of /etc/subuid or /etc/subgid, "owner:start:count" (owner a user's name or
 * uid): 0 with its parts (a range of at least one id, all within 32 bits), -1 for
 * anything else (a comment, a malformed or empty range, an owner longer than owner_len). */
int pybox_subid_line(const char *line, char *owner, size_t owner_len, uint64_t *start, uint64_t *count);

#endif
