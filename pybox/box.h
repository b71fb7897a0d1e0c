/* SPDX-License-Identifier: MIT */
/* The box interface: everything the run flow, the watcher, leftover removal and image
 * management need from whatever builds boxes. Nothing outside a backend's own folder
 * knows which backend built a box. A backend is a folder (pybox/<name>/) and one line in
 * the registry (backend.c). Contract: docs/box-interface.md.
 *
 * Ownership: a backend is opened by pybox_backend_open and freed by pybox_backend_close;
 * a box is made by create and freed by its free operation (after remove). Strings a
 * backend or box hands out live as long as it does. */
#ifndef PYBOX_BOX_H
#define PYBOX_BOX_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "buf.h"
#include "cgroup.h"
#include "error.h"
#include "policy.h"
#include "state.h"

typedef struct pybox_box pybox_box_t;
typedef struct pybox_backend pybox_backend_t;

/* How the box ended, as the backend observed it (an engine's record, the kernel's
 * waitpid), never as the program said. */
typedef struct pybox_box_end {
    int exit_code;   /* the box's PID 1: its exit status, or 128+n when killed by signal n */
    int signal;      /* n when the backend knows PID 1 was killed by signal n, else 0 */
    bool oom_killed; /* something in the box was OOM-killed (not necessarily the program) */
    char started_at[40];
    char finished_at[40];
    char error[256]; /* the backend's own error for the box, if any */
} pybox_box_end_t;

/* What outlived the box's last process, as the backend saw it while removing the box.
 * A process can leave descriptors in flight in unix sockets that no process can receive
 * from any more; the kernel keeps what they refer to until its collector of such cycles
 * runs (docs/native.md). */
#define PYBOX_HELD_STDIN 0x1u    /* the read end of the box's stdin */
#define PYBOX_HELD_STDOUT 0x2u   /* the write end of its stdout */
#define PYBOX_HELD_STDERR 0x4u   /* the write end of its stderr */
#define PYBOX_HELD_MOUNT_NS 0x8u /* its mount namespace, with its mounts */
typedef struct pybox_box_after {
    bool looked;         /* the backend looked, once the kernel showed the box's end */
    unsigned held;       /* PYBOX_HELD_* found after the box's end */
    unsigned still;      /* of those, still there after the collector (or without it) */
    bool mount_ns_known; /* whether the kernel could say if the mount namespace was there */
    int collector;       /* 1: a pass of the kernel's collector was seen after the box's end;
                            0: none within its bound; -1: not run (relaxed for a test) */
    double collect_ms;
} pybox_box_after_t;
/* The receipt's word for each PYBOX_HELD_* bit, by bit position, NULL-ended; and the
 * bits set as prose for a person ("its stdout's write end, its mount namespace"). */
extern const char *const pybox_held_words[];
void pybox_held_text(unsigned bits, char *out, size_t len);

/* Something an installation left behind, found by its installation id. */
typedef struct pybox_leftover {
    char kind[12];             /* "box", "volume", "cgroup", "staging", ... (the backend's word) */
    char id[PYBOX_ID_MAX];     /* what the backend removes it by */
    char name[PYBOX_NAME_MAX]; /* a human name, when it has one */
    char run_id[33];           /* the run it belongs to ("" if unknown) */
    int64_t expires;           /* wall-clock seconds after which it may go; -1 if unknown */
    bool running;              /* it still runs (never removed) */
    int order;                 /* removed in ascending order (a box before its volumes) */
    bool asked_only;           /* slow to remove (an image folder): by `pybox cleanup` only, never by
                                  a run's housekeeping */
    char state[24];
} pybox_leftover_t;

/* Callback for what a box says: stream 1 (stdout) or 2 (stderr). */
typedef int (*pybox_output_cb)(void *arg, int stream, const char *data, size_t len);

typedef struct pybox_box_ops {
    /* Read the box back from the backend's own source of truth and compare it with the
     * policy, setting by setting (PYBOX_ERR_POLICY listing every difference). */
    int (*verify)(pybox_box_t *b, const pybox_policy_t *p, int *checked, pybox_error_t *err);
    /* Unpack a tar into /box/in (after verify, before start). */
    int (*put_files)(pybox_box_t *b, const void *tar, size_t len, pybox_error_t *err);
    /* A tar of /box/out while the box is held, at most max bytes (EFBIG above). */
    int (*get_files)(pybox_box_t *b, size_t max, pybox_buf_t *out, pybox_error_t *err);
    /* Connect to the box's stdin, stdout and stderr before it starts. */
    int (*open_io)(pybox_box_t *b, pybox_error_t *err);
    int (*start)(pybox_box_t *b, pybox_error_t *err);
    /* What to poll now (asked before every poll): *in_fd for room on the box's stdin
     * (POLLOUT; -1 once closed), out_fds[0..*n_out) for what it says (POLLIN; a stream
     * that ended is left out); one descriptor may serve both (a multiplexed socket). */
    void (*io_fds)(const pybox_box_t *b, int *in_fd, int out_fds[2], int *n_out);
    /* Non-blocking; -1 with errno EAGAIN when full, another errno when the box no longer
     * reads its stdin. */
    ssize_t (*io_write)(pybox_box_t *b, const void *data, size_t len, pybox_error_t *err);
    int (*io_close_write)(pybox_box_t *b, pybox_error_t *err);
    /* Read what is ready and hand it over per stream. Returns 0 (more may come), 1 (the
     * box's output ended: the box has ended; with an end_fd, also once the box has
     * ended and all its streams held was read, whether or not they reached their end) or
     * -1. */
    int (*io_read)(pybox_box_t *b, pybox_output_cb cb, void *arg, pybox_error_t *err);
    /* Optional (NULL: the end of the box's output is its end, as an engine's stream): a
     * descriptor that becomes readable (POLLIN) once the box's PID 1 has ended, polled
     * with the streams; then io_read ends them. A stream's end can come much later than
     * the box's: a process may leave the write end of its stdout in flight in a unix
     * socket that nothing can receive from, which the kernel keeps until its collector of
     * such cycles runs. */
    int (*end_fd)(const pybox_box_t *b);
    /* Send a signal to the box's PID 1 from outside the box (it sees a sender outside).
     * Returns 0 when sent, 1 when the box no longer runs. */
    int (*signal)(pybox_box_t *b, int sig, pybox_error_t *err);
    /* Wait (bounded) until the box has ended and read the backend's record of it. */
    int (*wait)(pybox_box_t *b, int64_t timeout_ms, pybox_box_end_t *out, pybox_error_t *err);
    /* Whether the box still runs now (a box that stopped never runs again). */
    int (*running)(pybox_box_t *b, bool *running, pybox_error_t *err);
    /* Where the box's cgroup is, once it runs. */
    int (*cgroup)(pybox_box_t *b, pybox_cgroup_loc_t *loc, pybox_error_t *err);
    /* Optional (NULL: nothing to do): the box's init has reported the program's end and
     * holds the box, just before it is released. A backend takes here its own record of
     * what can only be read while the box exists (its cgroup may be removed by others the
     * moment it empties). */
    void (*held)(pybox_box_t *b);
    /* Remove the box and everything made for it, then look again: *gone only when the
     * backend confirms nothing of it is left. */
    int (*remove)(pybox_box_t *b, bool *gone, pybox_error_t *err);
    /* Optional (NULL: the backend has no such view): what outlived the box's end, as
     * remove saw it (zeroed when it did not look). */
    void (*after_end)(const pybox_box_t *b, pybox_box_after_t *out);
    void (*free)(pybox_box_t *b);
} pybox_box_ops_t;

struct pybox_box {
    const pybox_box_ops_t *ops;
    /* Set by the backend's create, strings of the box's own (valid until free): its id and
     * name in the backend, and the SHA-256 (hex) of the exact specification the backend
     * made it from (the create body it sent, the spec it applied). */
    const char *id, *name, *spec_sha256;
};

/* Images as a backend holds them: made from the root filesystem tar that a recipe built
 * (pybox/image/), identified by what the backend pins (an engine's image ID, a tree
 * digest). */
typedef enum {
    PYBOX_IMAGE_REMOVED = 0,  /* gone now */
    PYBOX_IMAGE_WAS_GONE,     /* the backend no longer had it */
    PYBOX_IMAGE_KEPT_NAMED,   /* kept: other names use it */
    PYBOX_IMAGE_KEPT_UNKNOWN, /* kept as far as known: its names could not be read */
    PYBOX_IMAGE_KEPT_IN_USE,  /* kept: the backend refused (a box uses it); why says so */
} pybox_image_removal_t;

typedef struct pybox_image_ops {
    /* Take in an image from a tar of its root filesystem (guest init and manifest
     * included), for pin (its name and recipe_sha256 are set); *id gets what to pin. */
    int (*import)(pybox_backend_t *be, int tar_fd, const pybox_pin_t *pin, char *id, size_t id_len, pybox_error_t *err);
    /* Confirm the pinned image exists exactly as pinned (a usage error saying how to
     * rebuild it when not). */
    int (*resolve)(pybox_backend_t *be, const pybox_pin_t *pin, pybox_error_t *err);
    /* What is wrong with an image that resolves ("" when nothing): its name missing, its
     * manifest not naming the pinned recipe. install_id labels anything made to look. */
    int (*check)(pybox_backend_t *be, const char *install_id, const pybox_pin_t *pin, char *problem, size_t len,
                 pybox_error_t *err);
    /* Remove a pinned image, never forced. */
    int (*remove)(pybox_backend_t *be, const pybox_pin_t *pin, pybox_image_removal_t *what, char *why, size_t len,
                  pybox_error_t *err);
} pybox_image_ops_t;

/* What the evidence campaign (campaign/) asks of a backend beyond runs, so that it never
 * speaks to what holds the boxes itself. */
struct cJSON;
typedef struct pybox_campaign_ops {
    /* The socket of what holds the boxes (the engine-socket relaxation), NULL if none. */
    const char *(*socket)(pybox_backend_t *be);
    /* What holds the boxes, as it describes itself (a JSON value for the records' host),
     * NULL if it cannot say. */
    struct cJSON *(*version)(pybox_backend_t *be);
    /* The network-namespace fixture: a box of the installation with no network, listening
     * on its loopback's port and answering with answer; netns gets what a policy's
     * relax_netns names it by. */
    int (*listener)(pybox_backend_t *be, const pybox_state_t *st, const char *answer, int port, char *netns, size_t len,
                    pybox_error_t *err);
    /* Everything of the installation removed, forced (what still runs too); returns how
     * many things there were. */
    int (*sweep)(pybox_backend_t *be, const char *install_id);
    /* Box id (of run) after its PyBox was killed by sig at `since` (seconds since the
     * epoch): its end as the backend saw it, into obs, and the box removed. */
    void (*killed_end)(pybox_backend_t *be, const char *id, const char *run, int sig, long since, struct cJSON *obs);
    /* Box id's record as what holds it keeps it (after waiting for its end, bounded, when
     * asked): {"id", "status", "exit_code", "oom_killed", "started_at", "finished_at", "ran_s",
     * "pid", "args", "labels"}. */
    int (*record)(pybox_backend_t *be, const char *id, bool wait, struct cJSON **out, pybox_error_t *err);
    /* What holds the boxes as a whole, not one installation's part of it (an engine set up
     * from nothing, or one that must be left untouched): {"version", "api_version",
     * "storage_driver", "root_dir", "containers": [ids], "images": [ids]}. */
    int (*whole)(pybox_backend_t *be, struct cJSON **out, pybox_error_t *err);
} pybox_campaign_ops_t;

typedef struct pybox_backend_ops {
    const char *name;      /* as --backend and config.json's "backend" name it */
    const char *holder;    /* what holds its boxes and images, in messages ("the engine") */
    const char *importing; /* the progress line of an image import ("importing into the engine:") */
    /* Where the installation's state folder keeps what is the backend's: its image pins
     * (a file), and the folder of its images an installation that borrows them links to,
     * with the name of that link there (pybox_state_borrow_images; NULL: none). */
    const char *pins_file;
    const char *lent_images, *borrowed_images;
    /* Open the backend for an installation (NULL for commands that need none). */
    int (*open)(const pybox_state_t *st, pybox_backend_t **out, pybox_error_t *err);
    void (*close)(pybox_backend_t *be);
    /* Its name and version, for the receipt (e.g. "Docker/20.10.24 (API 1.41)"). */
    const char *(*describe)(const pybox_backend_t *be);
    /* Build a box from the policy; nothing of the program runs yet. */
    int (*create)(pybox_backend_t *be, const pybox_policy_t *p, pybox_box_t **out, pybox_error_t *err);
    /* Everything of the installation install_id; *out malloc'd. */
    int (*list_leftovers)(pybox_backend_t *be, const char *install_id, pybox_leftover_t **out, size_t *n,
                          pybox_error_t *err);
    /* Remove one if it no longer runs; *gone when the backend no longer has it. */
    int (*remove_leftover)(pybox_backend_t *be, const pybox_leftover_t *l, bool *gone, pybox_error_t *err);
    /* Where the box of a run of this installation has its cgroup while it runs, found by
     * the run id alone (docs/cgroups.md): what tests and the campaign ask rather than spell
     * a backend's layout. Fails when the backend cannot tell (no such box). */
    int (*run_cgroup)(pybox_backend_t *be, const char *run_id, pybox_cgroup_loc_t *loc, pybox_error_t *err);
    /* Remove what the backend keeps for an installation beside its boxes, once none is
     * left (the native backend's cgroup parents; nothing under systemd); what still holds
     * a box stays. */
    int (*forget)(pybox_backend_t *be, const char *install_id, pybox_error_t *err);
    /* Optional (NULL: it keeps nothing beside its boxes): what forget would remove that
     * exists now, as the host names it (a cgroup parent's path), at most max. */
    int (*kept)(pybox_backend_t *be, const char *install_id, char (*out)[PATH_MAX], size_t max, size_t *n,
                pybox_error_t *err);
    /* What a box's making or ending changed between two times (seconds since the epoch),
     * as the backend can tell: what holds its boxes keeps a log of them (docker: the
     * engine's events for the installation's label), else the folders a box is made in,
     * whose change time the kernel keeps (native). Each an object {"action", "kind", "id",
     * "run_id", "time"} added to the array into (tests and drivers ask this through
     * pybox-campaign inspect rather than keep a client of their own). */
    int (*events)(pybox_backend_t *be, const char *install_id, double since, double until, struct cJSON *into,
                  pybox_error_t *err);
    const pybox_image_ops_t *images;
    const pybox_campaign_ops_t *campaign; /* NULL: the campaign reads the kernel itself */
} pybox_backend_ops_t;

struct pybox_backend {
    const pybox_backend_ops_t *ops;
};

/* The registry (backend.c): the backend of that name, or NULL. */
const pybox_backend_ops_t *pybox_backend_find(const char *name);
/* The i-th backend of the registry (from 0), NULL past the last. */
const pybox_backend_ops_t *pybox_backend_nth(size_t i);
/* The names of all backends, comma-separated (for messages). */
void pybox_backend_names(char *out, size_t len);
/* The backend an installation uses unless asked otherwise (--backend, PYBOX_BACKEND,
 * config.json's "backend"): native, which needs no daemon and is the fastest
 * (README, "Backends"); its refusal names the other, which needs a Docker engine. */
#define PYBOX_DEFAULT_BACKEND "native"
#define PYBOX_OTHER_BACKEND "docker"
/* Open a backend by name (NULL: the default); an unknown name is a usage error listing
 * the known ones. */
int pybox_backend_open(const char *name, const pybox_state_t *st, pybox_backend_t **out, pybox_error_t *err);
/* The backend a run uses: asked (--backend), else the environment's PYBOX_BACKEND, else
 * config.json's "backend", else the default. */
const char *pybox_backend_choose(const pybox_config_t *c, const char *asked);
/* The same for an installation, as pybox_backend_choose: name, else PYBOX_BACKEND, else
 * its config.json's "backend", else the default. */
int pybox_backend_open_for(const pybox_state_t *st, const char *name, pybox_backend_t **out, pybox_error_t *err);
void pybox_backend_close(pybox_backend_t *be);
void pybox_backend_closep(pybox_backend_t **be);

#endif
