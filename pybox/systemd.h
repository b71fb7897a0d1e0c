/* SPDX-License-Identifier: MIT */
/* Asking systemd for a cgroup of one's own: a transient scope with Delegate=yes, which
 * systemd makes (enabling the controllers up its chain itself) and removes once nothing
 * runs in it, and whose subtree is then the caller's to manage (crun and runc do the same
 * on systemd hosts). Spoken over D-Bus with libsystemd's sd-bus, which is opened when first
 * needed (it links seven libraries that no other run needs). The manager is the system's
 * (root) or, later, a user's own (systemd --user): the same calls on another bus.
 * Contract: docs/cgroups.md. Ownership: pybox_sd_open gives a connection the caller closes
 * with pybox_sd_close. */
#ifndef PYBOX_SYSTEMD_H
#define PYBOX_SYSTEMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Where systemd says it is the init: the folder sd_booted(3) looks for. */
#define PYBOX_SD_BOOTED_MARK "/run/systemd/system"

/* The slice every box's scope goes in, and the most time a scope's job may take. */
#define PYBOX_SD_SLICE "pybox.slice"
#define PYBOX_SD_JOB_TIMEOUT_MS 10000

typedef enum {
    PYBOX_SD_SYSTEM = 0, /* the system's manager: /run/systemd/private, else the system bus */
    PYBOX_SD_USER = 1,   /* the caller's own: $XDG_RUNTIME_DIR/systemd/private, else the user bus */
} pybox_sd_manager_t;

typedef struct pybox_sd pybox_sd_t;

/* Whether systemd is the init: mark (NULL: PYBOX_SD_BOOTED_MARK) is a folder. */
bool pybox_sd_booted(const char *mark);

/* Connect to a manager. Refused (PYBOX_ERR_SYSTEM) with the library's or the socket's
 * reason. */
int pybox_sd_open(pybox_sd_manager_t which, pybox_sd_t **out, pybox_error_t *err);
void pybox_sd_close(pybox_sd_t *sd);

/* A transient scope: unit "<name>.scope", in slice, with Delegate=yes, holding pid, the
 * unit collected even when it failed, and an OOM kill inside it left to the caller (the
 * scope is not stopped for it). */
typedef struct pybox_sd_scope {
    const char *unit;        /* "pybox-<install>-<run>.scope" */
    const char *slice;       /* PYBOX_SD_SLICE */
    const char *description; /* what `systemctl status` shows */
    pid_t pid;
} pybox_sd_scope_t;

/* Ask for the scope (StartTransientUnit) without waiting: the caller may go on with the
 * rest of its set-up, then wait. */
int pybox_sd_scope_request(pybox_sd_t *sd, const pybox_sd_scope_t *s, pybox_error_t *err);
/* Wait, for at most timeout_ms, until systemd has answered and the scope's job has
 * ended; 0 only when it ended "done" (the process is in the scope's cgroup then). */
int pybox_sd_scope_wait(pybox_sd_t *sd, int64_t timeout_ms, pybox_error_t *err);

/* A unit name of [A-Za-z0-9:_.\-] ending in suffix, at most 255 bytes. */
bool pybox_sd_unit_name_ok(const char *name, const char *suffix);

#endif
