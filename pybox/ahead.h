/* SPDX-License-Identifier: MIT */
/* Boxes made before their program: made, verified and started like any box, their
 * interpreter started by PyBox's bootstrap and the image's preload imported, then waiting
 * (bounded by the box's own clock) until a program comes. A warm box serves exactly one
 * program and is then removed as a run's box is; nothing of it serves anything else.
 * Contract: docs/guest-protocol.md, docs/receipt.md (seen.start).
 *
 * Ownership: pybox_ahead_open gives a box the caller hands to exactly one of
 * pybox_ahead_run or pybox_ahead_discard, which free it. One thread at a time. */
#ifndef PYBOX_AHEAD_H
#define PYBOX_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "box.h"
#include "error.h"
#include "run.h"

typedef struct pybox_ahead pybox_ahead_t;

/* Make a warm box for req: its policy (limits, image; box_wait_ms > 0, box_life_ms 0),
 * state, image name and pin; no program, no files. Waits until the box's init says the
 * interpreter is ready (PYBOX_READY_MAX_MS), or req's cancel (when cancellable) comes.
 * Returns 0 with *out; -1 with err when the box could not be made ready (a preload that
 * failed says so), having removed all of it. */
int pybox_ahead_open(pybox_backend_t *be, const pybox_run_request_t *req, pybox_ahead_t **out, pybox_error_t *err);

/* Whether the box still waits as it should: it has not ended nor said anything since it
 * was ready, and has waited at most max_wait_ms. Else why says what. */
bool pybox_ahead_usable(pybox_ahead_t *a, int64_t max_wait_ms, char *why, size_t len);

/* The policy the box was made with; when it was ready (pybox_now_s). */
const pybox_policy_t *pybox_ahead_policy(const pybox_ahead_t *a);
double pybox_ahead_ready_at(const pybox_ahead_t *a);

/* Its one program: req's program, inputs, output, controls and deadline (at most the
 * box's: req->policy.timeout_ms, 0 for the box's own). The rest is a run's, as
 * pybox_run's result and return value say; the deadline, the program's CPU and memory
 * count from its arrival, beside the box's whole (res->start). Frees a. */
int pybox_ahead_run(pybox_ahead_t *a, const pybox_run_request_t *req, pybox_run_result_t *res);

/* Remove a box that will not get a program. Frees a. */
void pybox_ahead_discard(pybox_ahead_t *a);

/* ---- sessions: a box made with box_life_ms > 0, one interpreter for every call ----
 * One thread at a time per session; a session serves one call at a time. */

/* What is known of the box so far (its id, when it was made, its preload). */
const pybox_run_result_t *pybox_ahead_seen(const pybox_ahead_t *a);
/* Name the session (its id, for the receipts). */
void pybox_ahead_set_session(pybox_ahead_t *a, const char *session_id);
/* The calls it was handed; when its last call ended (or it was ready), pybox_now_s. */
unsigned pybox_ahead_calls(const pybox_ahead_t *a);
double pybox_ahead_idle_since(const pybox_ahead_t *a);

/* One call: req's program, run in the session's globals, under its own deadline (at most
 * the box's: req->policy.timeout_ms, 0 for the box's own), cancellable. Fills res with the
 * call's own result: its streams, its readings (at its start and end), what the
 * interpreter reported of it (untrusted). Its inputs (req->inputs) join /box/in, kept
 * with those of the earlier calls; its output (req->output) is /box/out as it stands at
 * the call's end, the earlier calls' files with its own. When the call ended the session (its deadline,
 * the interpreter's end or crash, an out-of-memory kill, a failure, a cancel) *ended is
 * true, res is the box's whole end as pybox_run's would be (the box removed), and a is
 * freed. Returns as pybox_run does. */
int pybox_ahead_call(pybox_ahead_t *a, const pybox_run_request_t *req, pybox_run_result_t *res, bool *ended);

/* Whether req's inputs may join the session's /box/in, which lasts for the session: none
 * of their names is there already, and the session's inputs stay within PYBOX_INPUT_MAX.
 * A caller refuses a call with err before handing it over; the call checks again. */
int pybox_ahead_inputs_check(const pybox_ahead_t *a, const pybox_inputs_t *in, pybox_error_t *err);

/* End the session: every process killed, the box removed; res is the session's own
 * result (its box, its totals, how it ended). Frees a. */
int pybox_ahead_close(pybox_ahead_t *a, pybox_run_result_t *res);

/* The bootstrap's report of its preload (JSON) into start's fields; false when it is not
 * such a report. */
bool pybox_ahead_read_report(const char *report, size_t len, pybox_start_info_t *start);

#endif
