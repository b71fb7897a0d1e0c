/* SPDX-License-Identifier: MIT */
/* The installation's private state directory: its identity, pinned images, caches.
 * Root: /var/lib/pybox; others: $XDG_STATE_HOME/pybox or ~/.local/state/pybox;
 * PYBOX_HOME overrides. Only its owner can read it. */
#ifndef PYBOX_STATE_H
#define PYBOX_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bounds.h"
#include "error.h"
#include "limits.h"

/* The image builds' cache in the state folder: the root filesystem tars by recipe
 * (base-<fingerprint>.tar) and, in debs/, the Debian packages every build shares
 * (images/build-rootfs.sh). */
#define PYBOX_STATE_CACHE "cache"
#define PYBOX_STATE_DEB_CACHE PYBOX_STATE_CACHE "/debs"

typedef struct pybox_state {
    char dir[PATH_MAX];
    char install_id[33];
} pybox_state_t;

/* Find (and with create, make) the state directory and the installation id. */
int pybox_state_open(pybox_state_t *st, bool create, pybox_error_t *err);

/* Only where the state directory is (its path; nothing opened, no owner checked): for a
 * client of a session's holder, which checks who its peer is itself (pybox/cli/session.c). */
int pybox_state_locate(pybox_state_t *st, pybox_error_t *err);

/* A path inside the state directory. */
int pybox_state_path(const pybox_state_t *st, const char *name, char *out, size_t len, pybox_error_t *err);

/* Write a file atomically (temporary file, fsync, rename) with the given mode. */
int pybox_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, pybox_error_t *err);

/* The installation's settings (config.json in the state directory, each key optional:
 * each limit's ceiling by its config_key, and the leftovers' expiry (limits.h), and
 * backend). */
typedef struct pybox_config {
    int64_t limit[PYBOX_LIMIT_COUNT]; /* by pybox_limit_id_t, in the limit's unit: a ceiling, or the expiry */
    char source[64];                  /* where the ceilings came from, for messages */
    char backend[32];                 /* "backend": the one runs use unless asked otherwise ("" if not set) */
} pybox_config_t;

int pybox_state_config(const pybox_state_t *st, pybox_config_t *c, pybox_error_t *err);
/* The same from config.json's text (path names it in errors). */
int pybox_config_parse(const char *text, size_t len, const char *path, pybox_config_t *c, pybox_error_t *err);

/* A pinned image. */
typedef struct pybox_pin {
    char name[PYBOX_NAME_MAX];
    char backend[16];       /* the backend that holds the image ("docker", "native") */
    char id[PYBOX_ID_MAX];  /* what that backend identifies it by ("sha256:...") */
    char recipe_sha256[65]; /* fingerprint of what it was built from */
    char built_at[40];
    int64_t size;
    int protocol; /* the guest protocol of the init inside it */
    /* Defaults of runs in this image, from its recipe's policy file (0: PyBox's own). */
    int64_t memory_bytes, pids, nano_cpus, timeout_ms;
    char python[48]; /* the python3 package's version, from the manifest */
    bool custom;     /* built from a custom recipe (a lock file, a package list) */
} pybox_pin_t;

/* Pins are per backend (each backend pins what it holds of an image; NULL: docker).
 * 1 and *out filled when name is pinned, 0 when it is not, -1 on error. */
int pybox_pin_get(const pybox_state_t *st, const char *backend, const char *name, pybox_pin_t *out, pybox_error_t *err);
/* pin->backend says whose. */
int pybox_pin_set(const pybox_state_t *st, const pybox_pin_t *pin, pybox_error_t *err);
/* Forget a pin: 1 if it was there, 0 if not, -1 on error. */
int pybox_pin_remove(const pybox_state_t *st, const char *backend, const char *name, pybox_error_t *err);
/* All pins of a backend; *out is malloc'd (caller frees), *n their number. */
/* An installation made for tests or the campaign borrows another's images: every
 * backend's pin file copied (images.json, images-<backend>.json), the root filesystem
 * cache and the native backend's root filesystem folders linked (native/borrowed-roots),
 * so nothing is built or unpacked twice. What the borrower builds stays its own; an image
 * it removes that it borrowed is unpinned there only, never removed from under the
 * installation it belongs to. */
int pybox_state_borrow_images(const pybox_state_t *from, const pybox_state_t *to, pybox_error_t *err);
int pybox_pin_list(const pybox_state_t *st, const char *backend, pybox_pin_t **out, size_t *n, pybox_error_t *err);
/* The same from a pin file's text (path names it in errors; backend as above). */
int pybox_pins_parse(const char *backend, const char *text, size_t len, const char *path, pybox_pin_t **out, size_t *n,
                     pybox_error_t *err);

/* A valid image or recipe name: [a-z0-9][a-z0-9_-]{0,31}. */
bool pybox_name_valid(const char *name);

#endif
