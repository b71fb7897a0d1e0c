/* SPDX-License-Identifier: MIT */
/* Images: built from a recipe under images/ with Debian's packages, the guest init and a
 * manifest added, taken in by a backend (box.h, pybox_image_ops_t), and pinned by what the
 * backend identifies it by. A run uses the pinned image only; a pin whose image is gone is
 * refused, never re-pinned. */
#ifndef PYBOX_IMAGE_H
#define PYBOX_IMAGE_H

#include <stdbool.h>
#include <stdio.h>

#include "../box.h"
#include "../error.h"
#include "../log.h"
#include "../state.h"

typedef struct pybox_image_paths {
    char recipes[PATH_MAX]; /* the images/ folder: <name>/packages and build-rootfs.sh */
    char init[PATH_MAX];    /* the static guest init binary */
} pybox_image_paths_t;

/* Where an installed PyBox keeps them, under its prefix (make install: <prefix>/bin/pybox). */
#define PYBOX_SHARE_IMAGES "share/pybox/images"
#define PYBOX_LIBEXEC "libexec/pybox"

/* Where an image build finds the recipes (the folder of build-rootfs.sh) and the guest
 * init, from the folder of the running pybox (exe_dir): under an installed prefix
 * (<prefix>/bin -> <prefix>/share/pybox/images, <prefix>/libexec/pybox/pybox-init), else
 * in the build folder (<tree>/build -> <tree>/images, <tree>/build/pybox-init); each the
 * first that is there. images_env and init_env (PYBOX_IMAGES, PYBOX_INIT) name them
 * instead when not NULL or empty. Neither there: an error naming where it looked. */
int pybox_image_paths_find(const char *exe_dir, const char *images_env, const char *init_env,
                           pybox_image_paths_t *paths, pybox_error_t *err);
/* The same for the running binary and its environment. */
int pybox_image_paths_default(pybox_image_paths_t *paths, pybox_error_t *err);

/* The pinned image for name, confirmed to exist in the engine under that exact ID. */
/* An image's preload list (its recipe's `preload`, /pybox/preload in the image): one
 * module name a line, '#' comments, blank lines; at most PYBOX_IMAGE_PRELOAD_MAX bytes.
 * 0 when text is such a list, else -1 with why (the first line that is not). */
#define PYBOX_IMAGE_PRELOAD_MAX 8192
int pybox_image_preload_check(const char *text, size_t len, char *why, size_t why_len);

int pybox_image_resolve(const pybox_state_t *st, pybox_backend_t *be, const char *name, pybox_pin_t *pin,
                        pybox_error_t *err);

/* Build (or confirm up to date) and pin. Progress lines go to progress (may be NULL).
 * *built tells whether anything was built. rootfs (NULL: built from Debian's packages,
 * or taken from the installation's cache) names a root filesystem tar as
 * images/build-rootfs.sh writes it, with its package list beside it (FILE.packages):
 * the image is made from it with no network and no root. */
int pybox_image_build(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths, const char *name,
                      bool force, const char *rootfs, const pybox_out_t *progress, bool *built, pybox_error_t *err);

/* Make a custom recipe in the state directory, then build it: from a uv lock file and a
 * folder of wheels (checked against the lock before anything is made), or from a list of
 * Debian packages (comma-separated). Exactly one of lock or debian is given; wheels goes
 * with lock. Built-in names (stdlib, data) are refused. */
int pybox_image_build_custom(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths,
                             const char *name, const char *lock, const char *wheels, const char *debian,
                             const pybox_out_t *progress, pybox_error_t *err);

/* Forget the pin and remove the image from the engine (never forced: an image a box
 * still uses stays, and the answer says so). */
int pybox_image_remove(const pybox_state_t *st, pybox_backend_t *be, const char *name, const pybox_out_t *report,
                       pybox_error_t *err);

/* Check every pin: the engine has the image under the pinned ID, its name points to it,
 * the manifest inside it names the pinned recipe fingerprint, and the recipe on disk (when
 * there is one) still has that fingerprint. Writes one line per image to report; returns
 * the number of images that failed (-1 on error). */
int pybox_image_verify(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths,
                       const pybox_out_t *report, pybox_error_t *err);

#endif
