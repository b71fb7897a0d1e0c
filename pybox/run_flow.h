/* SPDX-License-Identifier: MIT */
/* The run flow's steps as run.c has them, for the flows that reuse them: a box made
 * before its program (ahead.c: a warm box, a session's box). Not a public interface:
 * pybox_run (run.h) and pybox_ahead_* (ahead.h) are. */
#ifndef PYBOX_RUN_FLOW_H
#define PYBOX_RUN_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "../guest/proto.h"
#include "buf.h"
#include "journal.h"
#include "run.h"
#include "uid.h"

/* Where the box's streams are in the flow. */
typedef enum {
    PYBOX_PH_READYING,  /* made ahead: until its init's ready record */
    PYBOX_PH_RUNNING,   /* the program runs under the host's deadline */
    PYBOX_PH_CALLING,   /* a session's call runs under its own deadline */
    PYBOX_PH_CALL_TAIL, /* the call record is in: what the call wrote on stderr still comes */
    PYBOX_PH_CLOSING,   /* a session's end was asked: until the done record */
    PYBOX_PH_STOPPING,  /* a deadline passed: the init was asked to stop */
    PYBOX_PH_RELEASING, /* the done record is in: the held box was released */
    PYBOX_PH_KILLED,    /* the box was killed through the backend */
} pybox_phase_t;

typedef struct pybox_feed {
    const pybox_run_request_t *req;
    pybox_box_t *box;
    pybox_buf_t q; /* bytes for the box's stdin: hello, program, calls, commands */
    size_t off;
    bool broken;         /* the box's stdin no longer takes bytes */
    pybox_buf_t out_tar; /* the archive of /box/out, taken while the box was held */
    bool have_out;
    size_t input_len; /* what must reach the box before the program (or call) counts as handed over */
    const char *secret;
    double t_start; /* the program (or call) handed over: its deadline and time count from here */
    pybox_phase_t phase;
    int64_t deadline;
    bool early;                  /* the flow stopped before the box's end: ready, or a call done */
    pybox_ready_record_t *ready; /* PYBOX_PH_READYING: the record goes here */
    pybox_call_record_t *call;   /* PYBOX_PH_CALLING: the record goes here */
    uint64_t call_err;           /* PYBOX_PH_CALL_TAIL: the call's stderr bytes, as init counted them */
} pybox_feed_t;

/* Everything of one box that its phases share. */
typedef struct pybox_run_state {
    pybox_backend_t *be;
    const pybox_run_request_t *req;
    pybox_run_result_t *res;
    pybox_box_t *box;
    pybox_feed_t feed;
    pybox_uid_lease_t lease;
    pybox_journal_t note;
    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    double origin; /* PyBox's own start (or the call's): every phase counts from here */
} pybox_run_state_t;

/* The box's identity, clocks, expiry, the program's own user; the hello queued. The
 * policy's box_wait_ms and box_life_ms say what kind of box it is. */
int pybox_flow_begin(pybox_run_state_t *r);
/* The program (P, a cold or warm box) queued for the box's stdin. */
int pybox_flow_queue_program(pybox_run_state_t *r);
/* This installation's expired leftovers, then the note, before anything exists. */
void pybox_flow_housekeep(pybox_run_state_t *r);
int pybox_flow_note(pybox_run_state_t *r);
/* The inputs (none: nothing to do) into the box's /box/in, timed. */
int pybox_flow_put_inputs(pybox_run_state_t *r, const pybox_inputs_t *in);
/* Made, verified, given its streams, started (no files: they come with the program). */
int pybox_flow_build(pybox_run_state_t *r, bool files);
void pybox_flow_watch(pybox_run_state_t *r);
/* The streams under the feed's phase and deadline (set by the caller) until the box's
 * output ends or the flow stops early (feed.early). -1 on a PyBox failure. */
int pybox_flow_io(pybox_run_state_t *r);
/* What the box's streams hold now, read without waiting: 1 when the box has ended, 0
 * when it goes on, -1 on a failure. */
int pybox_flow_peek(pybox_run_state_t *r);
/* The backend's record of the box's end, once its output ended. */
int pybox_flow_wait(pybox_run_state_t *r);
/* The end of a run: remove the box and confirm it is gone, the files out, the note
 * closed, what is not known said, the verdict. Returns pybox_run's value. */
int pybox_flow_finish(pybox_run_state_t *r, int rc);
/* A session's call has ended and its box goes on: /box/out copied and delivered to the
 * request's output now, as a run's end does. Returns -1 when the host could not write it. */
int pybox_flow_take_output(pybox_run_state_t *r);
/* Ask the box's init something: by stdin, else by the signal. */
void pybox_flow_command(pybox_run_state_t *r, char ctl, int sig);
/* Add a line to what could not be established. */
void pybox_flow_unknown(pybox_run_result_t *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Milliseconds since t (pybox_now_s). */
double pybox_flow_since(double t);
/* The longest a box of this policy lives from its start (whole seconds, with the margin
 * of expiries). */
int64_t pybox_flow_box_life_s(const pybox_policy_t *p);

#endif
