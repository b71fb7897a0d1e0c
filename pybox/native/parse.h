/* SPDX-License-Identifier: MIT */
/* Pure parsers of what the kernel says about a native box: /proc/<pid>/status, mountinfo,
 * limits, cgroup, uid_map/gid_map, and the cgroup files (one number, "max", key-value
 * lines, cpu.max). Each takes (text, length) and nothing else, so it can be tested with
 * fixture texts and fuzzed; none allocates except pybox_np_mountinfo_parse (the caller
 * frees *out). Malformed input is refused (-1 with err), never guessed at. */
#ifndef PYBOX_NATIVE_PARSE_H
#define PYBOX_NATIVE_PARSE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../error.h"

/* ---- /proc/<pid>/status ---- */

enum {
    PYBOX_NP_ST_UID = 1 << 0,
    PYBOX_NP_ST_GID = 1 << 1,
    PYBOX_NP_ST_CAPINH = 1 << 2,
    PYBOX_NP_ST_CAPPRM = 1 << 3,
    PYBOX_NP_ST_CAPEFF = 1 << 4,
    PYBOX_NP_ST_CAPBND = 1 << 5,
    PYBOX_NP_ST_CAPAMB = 1 << 6,
    PYBOX_NP_ST_NNP = 1 << 7,
    PYBOX_NP_ST_SECCOMP = 1 << 8,
    PYBOX_NP_ST_FILTERS = 1 << 9,
    PYBOX_NP_ST_GROUPS = 1 << 10,
    PYBOX_NP_ST_UMASK = 1 << 11,
};

typedef struct pybox_np_status {
    unsigned have;  /* PYBOX_NP_ST_* bits of the lines found */
    int64_t uid[4]; /* real, effective, saved, filesystem */
    int64_t gid[4];
    int ngroups; /* supplementary groups listed */
    uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
    int no_new_privs;
    int seccomp;         /* 0 none, 1 strict, 2 filter */
    int seccomp_filters; /* filters attached */
    int64_t umask;       /* the file mode creation mask */
} pybox_np_status_t;

int pybox_np_status_parse(const char *text, size_t len, pybox_np_status_t *out, pybox_error_t *err);

/* ---- /proc/<pid>/mountinfo ---- */

#define PYBOX_NP_MNT_RO 0x01u
#define PYBOX_NP_MNT_NOSUID 0x02u
#define PYBOX_NP_MNT_NODEV 0x04u
#define PYBOX_NP_MNT_NOEXEC 0x08u

typedef struct pybox_np_mount {
    int id, parent;
    unsigned major, minor;
    char root[PATH_MAX];  /* the mounted folder within its filesystem (unescaped) */
    char point[PATH_MAX]; /* where, relative to the process's root (unescaped) */
    unsigned flags;       /* PYBOX_NP_MNT_* from the per-mount options */
    bool propagates;      /* shared: or master: among the optional fields */
    char fstype[32];
    char source[PATH_MAX];
    char super[512]; /* the superblock's options */
} pybox_np_mount_t;

/* Every line; at most max mounts (more is an error). *out is malloc'd. */
int pybox_np_mountinfo_parse(const char *text, size_t len, size_t max, pybox_np_mount_t **out, size_t *n,
                             pybox_error_t *err);
/* The value of one option in a comma-separated list ("size" in "rw,size=16384k"):
 * 1 and copied when there, 0 when not, -1 when it does not fit. A bare option ("ro")
 * matches with an empty value. */
int pybox_np_option(const char *opts, const char *name, char *value, size_t len);

/* ---- /proc/<pid>/limits ---- */

/* The soft and hard values of one limit by its name as the kernel writes it ("Max open
 * files"); -1 is "unlimited". */
int pybox_np_limit_parse(const char *text, size_t len, const char *name, int64_t *soft, int64_t *hard,
                         pybox_error_t *err);

/* ---- /proc/<pid>/stat and one-value files ---- */

/* /proc/<pid>/stat: the nice value (field 19) and the scheduling policy (field 41),
 * counted after the last ')' (the command name between parentheses may hold anything). */
int pybox_np_stat_parse(const char *text, size_t len, int64_t *nice, int64_t *policy, pybox_error_t *err);
/* One decimal, maybe negative, optionally newline-terminated (/proc/<pid>/oom_score_adj). */
int pybox_np_signed(const char *text, size_t len, int64_t *out, pybox_error_t *err);
/* One hexadecimal number, optionally newline-terminated (/proc/<pid>/personality). */
int pybox_np_hex(const char *text, size_t len, uint64_t *out, pybox_error_t *err);

/* ---- /proc/<pid>/cgroup ---- */

/* The path of one v1 controller ("memory"; a line listing it among others counts), or
 * with controller NULL the v2 line ("0::"). */
int pybox_np_cgroup_parse(const char *text, size_t len, const char *controller, char *path, size_t plen,
                          pybox_error_t *err);

/* ---- /proc/<pid>/uid_map, gid_map ---- */

/* True (1) when the map is exactly the initial namespace's "0 0 4294967295", 0 when it
 * is anything else well-formed, -1 when malformed. */
int pybox_np_idmap_is_identity(const char *text, size_t len, pybox_error_t *err);
/* The same for a map of exactly these n lines ("inside outside count"), in any order. */
#define PYBOX_NP_IDMAP_MAX 4
int pybox_np_idmap_is(const char *text, size_t len, const int64_t (*want)[3], size_t n, pybox_error_t *err);

/* ---- cgroup files ---- */

/* One number (optionally newline-terminated); "max" gives -1. */
int pybox_np_cg_number(const char *text, size_t len, int64_t *out, pybox_error_t *err);
/* "key value" lines (memory.events, memory.oom_control, pids.events): the value of key. */
int pybox_np_cg_keyed(const char *text, size_t len, const char *key, int64_t *out, pybox_error_t *err);
/* cgroup.procs: one process id (above 0) per line; *count of them (an empty file: 0). */
int pybox_np_cg_procs(const char *text, size_t len, int64_t *count, pybox_error_t *err);
/* cpu.max: "<quota|max> <period>"; quota -1 for max. */
int pybox_np_cg_cpu_max(const char *text, size_t len, int64_t *quota, int64_t *period, pybox_error_t *err);

#endif
