/* SPDX-License-Identifier: MIT */
/* Cleanup of this installation's leftovers: expired, stopped boxes, their volumes, and
 * the run notes that pointed at them, and nothing else: not another installation's, not
 * an unexpired one, not a running one, not one whose run is still live. Then the
 * machine's free uid leases (expired, held by no live run: uid.h), which are nobody's.
 * Run before each `pybox exec` and by `pybox cleanup`. Contract: docs/cleanup.md. */
#ifndef PYBOX_LEFTOVERS_H
#define PYBOX_LEFTOVERS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "box.h"
#include "buf.h"
#include "error.h"
#include "state.h"
#include "uid.h"

typedef struct pybox_leftovers_entry {
    char what[8]; /* "box", "volume", "note" */
    char name[PYBOX_ID_MAX];
    char run_id[33];
    bool removed; /* removed (or, in a dry run, would be) */
    char reason[160];
} pybox_leftovers_entry_t;

typedef struct pybox_leftovers_report {
    bool dry_run;
    int64_t at; /* wall-clock seconds the decisions were made against */
    pybox_leftovers_entry_t *entries;
    size_t n, cap;
    int removed, kept;
    int leases_removed; /* free uid leases removed (or, in a dry run, that would be); not in removed */
} pybox_leftovers_report_t;

/* housekeeping: a run's own, before its box: what is slow to remove is left to `pybox
 * cleanup`. The leases swept are the machine's; _in: those of uids (NULL: the machine's).
 * A folder of leases that cannot be swept is reported (a "leases" entry, kept), not
 * failed: the installation's own cleanup is done either way. */
int pybox_leftovers_clean(const pybox_state_t *st, pybox_backend_t *be, bool dry_run, bool housekeeping,
                          pybox_leftovers_report_t *rep, pybox_error_t *err);
int pybox_leftovers_clean_in(const pybox_state_t *st, pybox_backend_t *be, const pybox_uid_range_t *uids, bool dry_run,
                             bool housekeeping, pybox_leftovers_report_t *rep, pybox_error_t *err);
void pybox_leftovers_report_free(pybox_leftovers_report_t *rep);
cJSON *pybox_leftovers_report_json(const pybox_leftovers_report_t *rep);
int pybox_leftovers_report_text(const pybox_leftovers_report_t *rep, pybox_buf_t *out);

#endif
