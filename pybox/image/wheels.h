/* SPDX-License-Identifier: MIT */
/* Custom images from a uv lock file and a folder of wheels, offline: every package of the
 * lock must have one of its wheels in the folder with exactly the lock's SHA-256, and the
 * wheels are laid out in the image the way an installer would, by unpacking them: no
 * package code runs while the image is built. */
#ifndef PYBOX_WHEELS_H
#define PYBOX_WHEELS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../archive_api.h"
#include "../error.h"
#include "../log.h"

typedef struct pybox_wheel {
    char name[128];
    char version[64];
    char file[256];  /* the wheel's file name in the folder */
    char sha256[65]; /* checked against the lock */
    int64_t bytes;
} pybox_wheel_t;

typedef struct pybox_lock {
    pybox_wheel_t *wheels;
    size_t n;
} pybox_lock_t;

/* Read the lock, find each package's wheel in wheels_dir and check its SHA-256. Refused
 * (PYBOX_ERR_USAGE) on a wheel whose hash is not the lock's, a package without a wheel
 * (it would have to be built, running its code), or a lock this reader does not take. */
int pybox_lock_check(const char *lock_path, const char *wheels_dir, pybox_lock_t *lock, pybox_error_t *err);
/* The same from the lock's text (lock_path names it in errors). */
int pybox_lock_check_text(const char *text, size_t len, const char *lock_path, const char *wheels_dir,
                          pybox_lock_t *lock, pybox_error_t *err);
void pybox_lock_free(pybox_lock_t *lock);

/* Write the wheels' files into the image archive w: modules under site (e.g.
 * "./usr/local/lib/python3.11/dist-packages"), scripts under bin, root-owned. Each wheel
 * is hashed again as it is read. Links, special files and unsafe names are refused. */
typedef bool (*pybox_path_exists_fn)(const char *path, void *arg);
/* exists tells which paths ("./usr/local", no trailing slash) the image already has:
 * their folders are not written again, and a wheel may not replace a file of them. */
int pybox_wheels_unpack(struct archive *w, const pybox_lock_t *lock, const char *wheels_dir, const char *site,
                        const char *bin, pybox_path_exists_fn exists, void *arg, const pybox_out_t *progress,
                        pybox_error_t *err);

/* One entry of an image's tar, root's with time 0: a folder or a file's header of size
 * bytes, followed by those bytes when data is not NULL (else the caller writes them). */
int pybox_image_tar_entry(struct archive *w, const char *path, mode_t type, mode_t perm, int64_t size,
                          const void *data);

#endif
