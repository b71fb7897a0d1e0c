/* SPDX-License-Identifier: MIT */
/* The run journal: a small private entry per run in the state directory (a run note),
 * written before anything is created and removed only after the run's box is confirmed
 * gone, so a run that dies at any moment leaves a trail. The running pybox holds an
 * exclusive lock on its note for its whole life; the kernel drops the lock when the
 * process dies, which is how cleanup tells a live run from a dead one. Contract:
 * docs/cleanup.md. */
#ifndef PYBOX_JOURNAL_H
#define PYBOX_JOURNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "state.h"

typedef struct pybox_journal {
    int fd; /* locked; -1 when closed */
    char path[PATH_MAX];
    char run_id[33];
    int64_t expires;
} pybox_journal_t;

#define PYBOX_JOURNAL_DIR "runs"

void pybox_journal_init(pybox_journal_t *n);
/* Write the note (atomically: it appears whole and already locked). A note that is torn
 * anyway (a foreign write, a full disk) is still handled by cleanup: the file's name
 * alone names the run, and the boxes are found by their labels. */
int pybox_journal_open(const pybox_state_t *st, const char *run_id, const char *box_name, int64_t expires,
                       pybox_journal_t *n, pybox_error_t *err);
/* The box is confirmed gone: remove the note and drop the lock. */
int pybox_journal_close(pybox_journal_t *n, pybox_error_t *err);
/* Leave the note in place (the box could not be confirmed gone) and drop the lock. */
void pybox_journal_abandon(pybox_journal_t *n);

/* While a run writes its output folder: remember the hidden folder it writes into, so a
 * run killed in the middle leaves a trail to it ("runs/<run>.out"); forget it when done. */
int pybox_journal_output_begin(const pybox_state_t *st, const char *run_id, const char *tmp_path, pybox_error_t *err);
void pybox_journal_output_end(const pybox_state_t *st, const char *run_id);
/* The folder a dead run was writing, if it left one: 1 and path filled, 0 if none. */
int pybox_journal_output_of(const pybox_state_t *st, const char *run_id, char *path, size_t len);

/* An MCP call's scratch folder (the agent's inline inputs, and the returned files when
 * the server keeps none): runs/<id>.scratch in the state directory, under a note of its
 * own ("<id>.json", a fresh id, locked for the call's whole life, the folder named in it
 * as "scratch"), made before the folder is, so a server killed at any moment leaves a
 * trail to it. It outlives the call's run, whose note goes once the box is gone. dir gets
 * the folder's path. */
int pybox_journal_scratch_open(const pybox_state_t *st, int64_t expires, pybox_journal_t *n, char *dir, size_t len,
                               pybox_error_t *err);
/* The call is over: its folder goes, then its note. */
void pybox_journal_scratch_close(const pybox_state_t *st, pybox_journal_t *n);
/* The scratch folder of run_id's note, if there is one: 1 (removed, or in a dry run only
 * found) with its path in path, 0 if none. For cleanup, once the note is dead. */
int pybox_journal_scratch_remove(const pybox_state_t *st, const char *run_id, bool dry_run, char *path, size_t len);

/* What cleanup learns of a note. */
typedef struct pybox_journal_info {
    char run_id[33];
    bool live; /* a running pybox still holds it */
    bool torn; /* its content could not be read */
    int64_t expires;
} pybox_journal_info_t;

/* What a note's text says: 0 with its expiry when it is the note of run_id, else -1. */
int pybox_journal_note_parse(const char *text, size_t len, const char *run_id, int64_t *expires);

/* The notes of this installation; *out malloc'd. */
int pybox_journal_list(const pybox_state_t *st, pybox_journal_info_t **out, size_t *n, pybox_error_t *err);

/* Try to take a dead run's note for removal. Returns 1 with *fd locked (hand it to
 * pybox_journal_remove_claimed), 0 if a live run holds it, 2 if there is no note, -1 on
 * error. */
int pybox_journal_claim(const pybox_state_t *st, const char *run_id, int *fd, pybox_error_t *err);
/* Remove a claimed note. */
void pybox_journal_remove_claimed(const pybox_state_t *st, const char *run_id, int fd);

#endif
