/* SPDX-License-Identifier: MIT */
/* Files in and out of a box. In: the operator's files and folders, checked before any
 * box is built, packed with libarchive into a read-only copy at /box/in (root-owned,
 * 0444 files, 0555 folders). Out: what the program left in /box/out, taken as hostile
 * input: only regular files and folders come back, under strict limits, names checked,
 * into an output folder that appears whole or not at all. Contract: docs/files.md. */
#ifndef PYBOX_FILES_H
#define PYBOX_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"

#define PYBOX_BOX_IN "/box/in"
#define PYBOX_BOX_OUT "/box/out"

/* ---- in ---- */

typedef struct pybox_input_file {
    char name[PATH_MAX]; /* relative to /box/in */
    int64_t bytes;
    char sha256[65];
} pybox_input_file_t;

typedef struct pybox_inputs {
    pybox_input_file_t *files; /* regular files only, in archive order */
    size_t n, cap;
    int64_t total;
    pybox_buf_t tar;            /* the archive for /box/in */
    char (*tops)[NAME_MAX + 1]; /* the names each input has in /box/in, one per path given */
    size_t n_tops;
} pybox_inputs_t;

void pybox_inputs_init(pybox_inputs_t *in);
/* Check and pack the inputs, names as UTF-8 whatever the locale (safe in any thread).
 * Refused (PYBOX_ERR_USAGE) when a path is missing, is not a regular file or folder, holds
 * anything else (a link, a device, a FIFO, a socket), when a name is not valid UTF-8,
 * when two inputs have the same name, or when their total passes max_total. */
int pybox_inputs_prepare(const char *const *paths, size_t n, int64_t max_total, pybox_inputs_t *in, pybox_error_t *err);
void pybox_inputs_free(pybox_inputs_t *in);
/* For _cleanup_: frees what pybox_inputs_init or _prepare left. */
void pybox_inputs_freep(pybox_inputs_t *in);

/* ---- out ---- */

/* What is delivered can be written by its owner only: files 0644, folders 0755, and an
 * existing (empty) output folder keeps its mode less these bits (group and others'
 * write, set-user-ID, set-group-ID, sticky). */
#define PYBOX_OUT_MODE_KEEP 0755

typedef struct pybox_output_spec {
    char dir[PATH_MAX];    /* absolute */
    char parent[PATH_MAX]; /* where the folder appears */
    char base[NAME_MAX + 1];
    bool existed;       /* it existed (empty) before the run */
    mode_t mode;        /* its mode then, kept less what PYBOX_OUT_MODE_KEEP leaves out */
    int parent_fd;      /* the parent as checked (O_PATH): delivery goes there, not to a name */
    bool owner_relaxed; /* testing only (PYBOX_RELAX_OUTPUT_OWNER): the owner rule and the mode
                           mask left out, to show the escape they prevent */
} pybox_output_spec_t;

/* A folder PyBox writes into, opened (O_PATH) into *fd and held: what is written there
 * goes through that descriptor, never through the name again. Refused (PYBOX_ERR_USAGE,
 * each message starting with what, e.g. "--output out: its parent folder") when it does
 * not exist, cannot be written, or can be rearranged by another user: owned by another
 * user than this one or root, or writable by others without the sticky bit (as /tmp
 * has); hint ends that refusal. */
int pybox_folder_hold(const char *path, const char *what, const char *hint, int *fd, pybox_error_t *err);

/* Refused (PYBOX_ERR_USAGE) when the path is a file, a folder that is not empty or is
 * owned by another user than this one (it would be delivered into with its owner's
 * mode: a folder another local user made could be theirs to change afterwards), or its
 * parent folder fails pybox_folder_hold. Holds the parent open until pybox_output_close. */
int pybox_output_check(const char *dir, pybox_output_spec_t *spec, pybox_error_t *err);
/* The same, with relax: PYBOX_RELAX_OUTPUT_OWNER (policy.h) for a test, or 0. */
int pybox_output_check_relaxed(const char *dir, unsigned relax, pybox_output_spec_t *spec, pybox_error_t *err);
void pybox_output_close(pybox_output_spec_t *spec);

typedef struct pybox_ingest_limits {
    int max_files;     /* files brought back */
    int64_t max_file;  /* bytes of one file */
    int64_t max_total; /* bytes in all */
    int max_depth;     /* parts of a name (a file in 15 folders has 16) */
    int max_dirs;      /* folders brought back */
} pybox_ingest_limits_t;

void pybox_ingest_limits_default(pybox_ingest_limits_t *l);

typedef enum {
    PYBOX_OUT_NOT_ASKED = 0,
    PYBOX_OUT_DELIVERED,    /* the output folder was created with what came back (maybe nothing) */
    PYBOX_OUT_REFUSED,      /* nothing came back: the whole transfer was refused (reason) */
    PYBOX_OUT_NOT_RECEIVED, /* no archive came from the box (reason) */
} pybox_out_status_t;

typedef struct pybox_out_entry {
    char *name; /* as the box named it, in Unicode NFC (raw bytes, NUL-free; escape before showing) */
    char kind;  /* 'f' file, 'd' folder, 'l' symbolic link, 'h' hard link, 'o' other */
    int64_t bytes;
    char sha256[65]; /* returned files */
    bool returned;
    char reason[96]; /* why not, when not */
} pybox_out_entry_t;

typedef struct pybox_outputs {
    pybox_out_status_t status;
    char reason[256];
    char dir[PATH_MAX];
    pybox_out_entry_t *entries;
    size_t n, cap;
    int returned_files;
    int64_t returned_bytes;
    int not_returned;
    bool xattr_failed; /* the run could not be recorded in the files' attributes */
} pybox_outputs_t;

void pybox_outputs_init(pybox_outputs_t *o);
void pybox_outputs_free(pybox_outputs_t *o);

/* Take the archive of /box/out (entries named "out/..."). A refusal or an archive that
 * cannot be read is a verdict in *o (status, reason), not a failure; -1 only when the
 * host could not write (e.g. a full disk), and then nothing is left half-written. */
int pybox_outputs_ingest(const void *tar, size_t len, const pybox_output_spec_t *spec, const char *run_id,
                         const pybox_ingest_limits_t *lim, pybox_outputs_t *o, pybox_error_t *err);

/* The hidden folder an output of this run is written into, before it is moved in place
 * (".pybox-out-<run>.tmp" next to the output folder). */
int pybox_output_tmp_path(const pybox_output_spec_t *spec, const char *run_id, char *out, size_t len);
/* Remove such a folder left by a run that died while writing it: only a folder of that
 * exact name, owned by this user; returns 1 if removed. */
int pybox_output_tmp_remove(const char *path, const char *run_id);

#endif
