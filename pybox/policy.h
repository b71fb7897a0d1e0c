/* SPDX-License-Identifier: MIT */
/* The sealed-box policy, engine-neutral: the one place that says what a box is allowed
 * (image, limits, the program's user, mounts, masked paths, rlimits, the seccomp
 * profile) and which test-only relaxations a box has. Each backend makes its box from it
 * and checks what it made against it (pybox/<backend>/). Contract: docs/policy.md. */
#ifndef PYBOX_POLICY_H
#define PYBOX_POLICY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "bounds.h"
#include "error.h"

/* The box starts as root with CAP_KILL, CAP_SETGID and CAP_SETUID only, for the guest
 * init to switch the program to the run's own user (program_uid, guest/proto.h). */
#define PYBOX_BOX_INIT_USER "0:0"
/* The one user every box shared before boxes had users of their own: a relaxed test box
 * only (PYBOX_RELAX_SHARED_UID), to show what per-box users prevent. */
#define PYBOX_SHARED_UID 65534u
#define PYBOX_LABEL_INSTALL "pybox.install"
#define PYBOX_LABEL_RUN "pybox.run"
#define PYBOX_LABEL_EXPIRES "pybox.expires"

typedef struct pybox_policy {
    char image_id[PYBOX_ID_MAX]; /* the image as the backend pinned it (e.g. "sha256:<64 hex>") */
    char install_id[PYBOX_ID_MAX];
    char run_id[PYBOX_ID_MAX];
    int64_t expires;      /* wall-clock seconds; after it, leftovers may be removed */
    uint32_t program_uid; /* the program's uid and gid: leased for this box alone (uid.h) */
    int64_t memory_bytes; /* memory limit; swap limit equal, i.e. no swap */
    int64_t pids;         /* process limit */
    int64_t nano_cpus;    /* CPU limit in 1e-9 CPUs */
    int64_t timeout_ms;   /* the host's deadline */
    int64_t box_timer_ms; /* the guest init's own timer (deadline + margin) */
    /* A box made before its program (guest/proto.h): how long it waits for the program
     * (a session: for its next call), and a session's whole life; 0 and 0: a cold box. */
    int64_t box_wait_ms;
    int64_t box_life_ms;
    int64_t tmp_bytes;   /* size of the noexec tmpfs /tmp */
    int64_t shm_bytes;   /* size of /dev/shm */
    int64_t nofile;      /* open files */
    int64_t fsize_bytes; /* largest file the program may write */
    int64_t core_bytes;  /* core dumps (0: none) */
    int64_t sigpending;  /* signals queued to the box's user at once (its own, uid.h) */
    /* What the box's init starts with, each backend's to set and check: its environment
     * (NULL-ended; the backend adds HOSTNAME=<hostname> as an engine does), the box's
     * hostname, and the capabilities the init keeps to start the program as its own user
     * and to end it (NULL-ended names, as the kernel spells them). */
    const char *const *env;
    const char *hostname;
    const char *const *init_caps;
    /* Files: a disk volume at /box/in for the inputs (root-owned, read-only by mode),
     * and a tmpfs volume of out_bytes at /box/out for what the program leaves. */
    bool mount_in;
    bool mount_out;
    int64_t out_bytes;
    /* Testing only, never from a command line: one protection removed on purpose, in
     * both the body and what the verifier expects, so a test can show that it sees the
     * escape that protection prevents. Receipts of such runs say so. */
    const char *relax_bind;   /* a host folder mounted read-only at /host */
    const char *relax_env;    /* one more environment entry, NAME=value */
    const char *relax_netns;  /* join this container's network namespace */
    unsigned relax;           /* PYBOX_RELAX_* bits */
    const char *relax_cap;    /* one more capability granted, e.g. "CAP_NET_RAW" */
    const char *relax_socket; /* a host socket (the engine's) bound at PYBOX_RELAX_SOCKET_AT */
    const char *relax_unmask; /* one of pybox_policy_masked_paths left unmasked (only that one) */
    /* Testing only: when set, the create body deviates from the policy in this one
     * setting, so the verifier can be shown to catch it against a real engine. */
    const char *tamper;
} pybox_policy_t;

/* Relaxations by bit (testing only, see above). */
#define PYBOX_RELAX_PROGRAM_ROOT 0x01u  /* the program stays root (init's --program-uid=0) */
#define PYBOX_RELAX_WRITABLE_ROOT 0x02u /* ReadonlyRootfs false */
#define PYBOX_RELAX_ENGINE_CAPS 0x04u   /* the engine's default capabilities, none dropped */
#define PYBOX_RELAX_NEW_PRIVS 0x08u     /* no "no-new-privileges": setuid files work */
#define PYBOX_RELAX_SECCOMP 0x10u       /* seccomp=unconfined */
#define PYBOX_RELAX_PIDS 0x20u          /* no process limit */
#define PYBOX_RELAX_MEMORY 0x40u        /* no memory limit */
#define PYBOX_RELAX_SYSTEM_PATHS 0x80u  /* nothing of /proc and /sys masked or read-only */
#define PYBOX_RELAX_SHARED_UID 0x100u   /* the program runs as PYBOX_SHARED_UID, like every such box */
#define PYBOX_RELAX_OUTPUT_OWNER 0x200u /* --output takes another user's folder and keeps its mode (files.h) */
#define PYBOX_RELAX_IN_FLIGHT 0x400u    /* native: no run of the kernel's collector after the box's end */
#define PYBOX_RELAX_APPARMOR 0x800u     /* docker: no AppArmor profile from the engine (natively none is applied) */
#define PYBOX_RELAX_REUSED_BOX 0x1000u  /* a warm box serves the next call too (the MCP server's pool, pool.h) */
#define PYBOX_RELAX_SOCKET_AT "/run/docker.sock"

/* The uid (and gid) the program runs as: program_uid, or what a relaxation says. */
unsigned pybox_policy_program_uid(const pybox_policy_t *p);

/* Defaults for everything but image, names and labels. */
void pybox_policy_defaults(pybox_policy_t *p);
/* The limits of the box's processes (setrlimit) the policy sets, by the engine's names
 * ("nofile", "fsize", "core", "sigpending"); a native box fixes every other one too
 * (docs/native.md). */
#define PYBOX_POLICY_RLIMITS 4
typedef struct pybox_policy_rlimit {
    const char *name; /* the engine's ulimit name */
    int resource;     /* RLIMIT_* */
    int64_t value;    /* soft and hard alike */
} pybox_policy_rlimit_t;
void pybox_policy_rlimits(const pybox_policy_t *p, pybox_policy_rlimit_t out[PYBOX_POLICY_RLIMITS]);

/* The host's deadline, and the box's own timer derived from it (limits.h). */
void pybox_policy_set_timeout(pybox_policy_t *p, int64_t timeout_ms);

/* The seccomp profile PyBox owns, compact JSON (static storage), and its SHA-256. */
const char *pybox_policy_seccomp(void);
const char *pybox_policy_seccomp_sha256(void);

/* The relaxations of a policy as a comma-separated list ("" when none). The names are
 * those pybox_policy_relax_parse takes. */
void pybox_policy_relaxed(const pybox_policy_t *p, char *out, size_t len);

/* One relaxation bit by name ("program-root", "writable-root", "engine-caps",
 * "new-privileges", "seccomp", "pids", "memory", "system-paths", "shared-uid",
 * "output-owner", "in-flight-collection", "apparmor", "reused-box"); 0 if unknown. */
unsigned pybox_policy_relax_bit(const char *name);

/* Whether a relaxation bit is set. */
bool pybox_policy_relaxed_in(const pybox_policy_t *p, unsigned bit);

/* Paths every backend hides (masked) or makes read-only inside the box, NULL-ended.
 * Stated here rather than left to an engine's defaults, which differ between engines and
 * versions. */
extern const char *const pybox_policy_masked_paths[];
extern const char *const pybox_policy_readonly_paths[];

/* Whether path is one of pybox_policy_masked_paths (what relax_unmask may name). */
bool pybox_policy_is_masked_path(const char *path);

/* Whether a box of this policy has the masked path path masked: not when every system
 * path is relaxed, nor the one path relax_unmask names. */
bool pybox_policy_masks(const pybox_policy_t *p, const char *path);

#endif
