/* SPDX-License-Identifier: MIT */
/* One run, step by step: build a sealed box, verify it, feed it the program, watch the
 * two clocks, collect what the engine and the box's init observed, remove the box and
 * confirm it is gone. Everything a receipt says is gathered here. */
#ifndef PYBOX_RUN_H
#define PYBOX_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "box.h"
#include "error.h"
#include "files.h"
#include "policy.h"
#include "state.h"
#include "stream.h"
#include "uid.h"
#include "watch.h"

#define PYBOX_UNKNOWN_MAX 16

typedef enum {
    PYBOX_END_NONE = 0,        /* no run (refused or failed before start) */
    PYBOX_END_TARGET_EXIT,     /* the program ended by itself */
    PYBOX_END_SUPERVISOR_KILL, /* the host's deadline stopped it */
    PYBOX_END_BOX_TIMER_KILL,  /* the box's own timer stopped it */
    PYBOX_END_UNEXPLAINED,     /* the box ended without its init's record */
    PYBOX_END_EXTERNAL_STOP,   /* something outside PyBox stopped the box (e.g. the engine shutting down) */
    PYBOX_END_PYBOX_ERROR,     /* PyBox failed; see error */
    PYBOX_END_CANCELLED,       /* the caller cancelled the run; the box was removed */
    PYBOX_END_SESSION_CALL,    /* a session's call ended and its interpreter still runs: the box is kept */
    PYBOX_END_SESSION_CLOSED,  /* a session's end was asked and its init ended it */
} pybox_end_t;

/* Steps of a run, in order, as given to the request's hook. */
#define PYBOX_STEP_NOTED "noted"       /* the run note is written; nothing exists yet */
#define PYBOX_STEP_CREATED "created"   /* the box exists, not verified */
#define PYBOX_STEP_STARTED "started"   /* the box runs */
#define PYBOX_STEP_RUNNING "running"   /* the whole program reached the box */
#define PYBOX_STEP_ENDED "ended"       /* the program's end is seen; the box is held for the final reading */
#define PYBOX_STEP_REMOVING "removing" /* about to remove the box */

/* How a box met its program (docs/receipt.md, seen.start). */
typedef enum {
    PYBOX_START_COLD = 0, /* the interpreter started once the program came (pybox exec; no warm box) */
    PYBOX_START_WARM,     /* made ahead: its interpreter started, the image's preload imported, before the program */
    PYBOX_START_SESSION,  /* a session's box: one interpreter for every call */
} pybox_start_t;

typedef struct pybox_start_info {
    pybox_start_t kind;
    char why_cold[200]; /* a cold start: why (no warm box was ready, pybox exec, ...) */
    /* warm and session: the box made before its program */
    char made_at[40];                                         /* when it was made (UTC) */
    double create_ms, verify_ms, attach_ms, start_ms, arm_ms; /* its own phases, before the program */
    double ready_ms;            /* from its start to its init's ready record, as PyBox saw it */
    double waited_ms;           /* from the ready record to the program's arrival */
    pybox_ready_record_t ready; /* init's ready record and the bootstrap's report */
    /* The bootstrap's report, read (said before any program existed, by PyBox's bootstrap
     * running the image's own modules) */
    bool report_read;
    char preload[512], imported[512]; /* module names, comma-separated */
    char failed[1024];                /* "" when none failed */
    double preload_ms;
    int64_t preload_output_bytes;
    /* the kernel's counters of the box's cgroup at the program's arrival */
    pybox_reading_t at_arrival;
    bool at_arrival_taken;
    /* session: which session and which of its calls (0: the session's own receipt) */
    char session_id[33];
    unsigned call;
    bool session_goes_on;                           /* the interpreter still runs after this call */
    char call_report[2 * PYBOX_GUEST_SAID_MAX + 1]; /* the interpreter's report of the call (untrusted), escaped */
    int64_t call_init_ms;                           /* init's count from the call's arrival to its end (-1: none) */
    int64_t call_asked_ms; /* a call whose deadline was cut to what was left of its session's lifetime: the
                            * deadline it would have had (0: not cut) */
} pybox_start_info_t;

typedef struct pybox_run_request {
    const char *program;
    size_t program_len;
    const char *image_name;            /* for the receipt */
    const pybox_pin_t *pin;            /* the image's pin, for the receipt (may be NULL) */
    pybox_policy_t policy;             /* limits and image set by the caller; names and labels by the run */
    const pybox_state_t *state;        /* the installation: run notes, housekeeping */
    const pybox_inputs_t *inputs;      /* files for /box/in, or NULL */
    const pybox_output_spec_t *output; /* where /box/out goes, or NULL */
    int64_t expiry_s;                  /* leftovers may be removed this long after creation (0: default) */
    bool housekeeping;                 /* remove this installation's expired leftovers first */
    const pybox_uid_range_t *uids;     /* where the program's user is leased from (NULL: the machine's) */
    /* When cancellable: a descriptor that becomes readable when another thread cancels
     * this run (it is polled, never read). The program is stopped, the box removed, and
     * the run reports PYBOX_END_CANCELLED. */
    bool cancellable;
    int cancel_fd;
    /* When PyBox itself started on this run (pybox_now_s()), so that the run's total
     * counts what came before it (engine open, image checks); 0: the run's own start. */
    double started_s;
    /* Called at each step with the run's id (tests use it to stop a run at a chosen
     * moment). */
    void (*hook)(const char *step, const char *run_id, void *arg);
    /* Called after each reading of the box's cgroup while the program runs (none when the
     * cgroup was not found), with the time since the box started running and the reading
     * (the MCP server's progress). Only reads; never changes the run. */
    void (*tick)(double elapsed_ms, const pybox_reading_t *r, void *arg);
    void *hook_arg; /* given to hook and tick */
    /* A cold start's reason, for the receipt (NULL: "no warm box was asked for"). */
    const char *why_cold;
} pybox_run_request_t;

typedef struct pybox_timings {
    double before_ms;       /* from PyBox's start to the run's (engine open, image checks) */
    double housekeeping_ms; /* removing this installation's expired leftovers */
    double create_ms, verify_ms, files_in_ms, attach_ms, start_ms, arm_ms, run_ms, files_out_ms, collect_ms, remove_ms,
        total_ms;         /* total: from PyBox's start to the receipt */
    double final_read_ms; /* the final reading of the box's cgroup (within run) */
} pybox_timings_t;

typedef struct pybox_run_result {
    /* asked */
    char run_id[33];
    char box_name[PYBOX_NAME_MAX];
    char started_wall[40];
    pybox_policy_t policy;
    char image_name[PYBOX_NAME_MAX];
    pybox_pin_t pin; /* the image as pinned (name empty when unknown) */
    char program_sha256[65];
    size_t program_bytes;
    char policy_sha256[65]; /* of the exact specification the backend made the box from */
    /* seen */
    char box_id[PYBOX_ID_MAX];
    char backend[16];         /* the backend's name ("docker") */
    char engine[320];         /* the backend's own description, with its version */
    pybox_cgroup_host_t host; /* the host it ran on: kernel, cgroup version and manager */
    bool created, verified, started;
    int checked;                /* settings compared in the read-back */
    pybox_done_record_t record; /* the box init's account (authenticated by the secret) */
    pybox_start_info_t start;   /* cold or warm, and what was ready before the program */
    bool have_exit;
    pybox_box_end_t exit; /* the backend's account of the box's end */
    bool deadline_fired;  /* the host's deadline passed while the program ran */
    bool box_killed;      /* the host had to kill the box through the engine */
    bool input_complete;  /* the whole program reached the box's stdin */
    int interrupted;      /* PyBox itself got this signal during the run */
    int housekept;        /* leftovers removed before the run; -1 if housekeeping failed */
    bool note_closed;     /* the run note was removed after the box was confirmed gone */
    bool removed, gone;
    pybox_box_after_t after; /* what outlived the box's last process (backends that look) */
    pybox_timings_t t;
    /* the kernel's account, read from the box's cgroup on the host */
    pybox_watch_t watch;   /* samples live here */
    bool watched;          /* the cgroup was found */
    char watch_error[256]; /* why not, when not */
    pybox_reading_t final; /* taken while the box was held after the program ended */
    bool final_taken;
    /* files */
    const pybox_inputs_t *inputs;
    bool output_asked;
    pybox_outputs_t outputs;
    /* what the run concludes about memory (docs/receipt.md) */
    const char *oom_finding;
    /* said (untrusted) */
    pybox_sink_t out, err;
    pybox_said_t said_out, said_err;
    /* unknown */
    char *unknown[PYBOX_UNKNOWN_MAX];
    int n_unknown;
    /* verdict */
    pybox_end_t end;
    int exit_code; /* PyBox's own exit code */
    pybox_error_t error;
} pybox_run_result_t;

/* Set by the front-end's signal handler (SIGINT, SIGTERM, SIGHUP): the run stops the
 * program, removes the box and reports a PyBox error naming the signal. */
extern volatile sig_atomic_t pybox_interrupt_signal;

/* Run the program. Always fills *res (also on failure, as far as the run got), and
 * always removes a box it created. Returns 0 when the run produced a verdict about the
 * program, -1 when PyBox failed (res->error, exit code 125). */
int pybox_run(pybox_backend_t *be, const pybox_run_request_t *req, pybox_run_result_t *res);
void pybox_run_result_free(pybox_run_result_t *res);

const char *pybox_end_word(pybox_end_t end);
/* Whether the run's receipt carries PyBox's error (a failure, an outside stop, a cancel,
 * or an error beside the program's end): when it does, res->error's message is never
 * empty (pybox_flow_finish sees to it). */
bool pybox_run_has_error(const pybox_run_result_t *res);

#endif
