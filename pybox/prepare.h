/* SPDX-License-Identifier: MIT */
/* One run prepared from what a front-end asks: the installation opened, the image's own
 * defaults applied, every ceiling checked (naming where it is set), the inputs packed and
 * the output folder checked, the backend opened, the image resolved, the policy filled and
 * the box timer derived. Everything refused here is refused before any box exists.
 * pybox exec, pybox mcp, the campaign and the tests all go through it. */
#ifndef PYBOX_PREPARE_H
#define PYBOX_PREPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "box.h"
#include "error.h"
#include "files.h"
#include "run.h"
#include "state.h"

typedef struct pybox_request {
    const char *program; /* whole, program_len bytes (checked by the front-end) */
    size_t program_len;
    const char *image;   /* NULL or "": "stdlib" */
    const char *backend; /* NULL or "": config.json's "backend", else PYBOX_DEFAULT_BACKEND */
    /* What the caller asked; 0 where it asked nothing (the image's default, then PyBox's). */
    int64_t timeout_ms, memory_bytes, pids, nano_cpus;
    /* Image defaults above these are lowered to them (a server's own ceilings; 0: none). */
    int64_t cap_timeout_ms, cap_memory_bytes;
    const char *const *inputs; /* files and folders for /box/in */
    size_t n_inputs;
    const char *output; /* the folder /box/out goes to, or NULL */
    /* Testing only, never from a command line or MCP: relaxations (PYBOX_RELAX_*) that act
     * while the run is prepared (PYBOX_RELAX_OUTPUT_OWNER), put in the policy too, so the
     * receipt says so. */
    unsigned relax;
    /* Run controls, passed on (run.h). */
    double started_s;
    bool cancellable;
    int cancel_fd;
    void (*hook)(const char *step, const char *run_id, void *arg);
    void (*tick)(double elapsed_ms, const pybox_reading_t *r, void *arg);
    void *hook_arg;
    const char *why_cold; /* for the receipt: why the program starts cold (run.h) */
} pybox_request_t;

/* Where a preparation failed, for front-ends that word the refusal their own way. */
typedef enum {
    PYBOX_PREP_OK = 0,
    PYBOX_PREP_LIMITS, /* the installation, the image's defaults, a ceiling */
    PYBOX_PREP_INPUTS, /* reading or packing an input */
    PYBOX_PREP_OUTPUT, /* the output folder */
    PYBOX_PREP_BACKEND,
    PYBOX_PREP_IMAGE,
} pybox_prep_step_t;

/* A prepared run; it owns everything it opened. */
typedef struct pybox_ready {
    pybox_state_t st;
    pybox_config_t config;
    pybox_pin_t pin;
    pybox_inputs_t inputs;
    pybox_output_spec_t output;
    pybox_backend_t *be;
    char image[PYBOX_NAME_MAX];
    char backend[32];
    unsigned from_image;      /* bit 1 << pybox_limit_id_t: that limit is the image's default */
    pybox_prep_step_t failed; /* where pybox_prepare failed */
    pybox_run_request_t run;  /* what pybox_run gets; tests may adjust its policy */
} pybox_ready_t;

void pybox_ready_init(pybox_ready_t *rd);
/* rd: initialised with pybox_ready_init; freed with pybox_ready_free either way. */
int pybox_prepare(const pybox_request_t *rq, pybox_ready_t *rd, pybox_error_t *err);
/* Only the files of a request (its inputs packed, its output folder checked), for a
 * program that goes to a box made before it (ahead.h): rd gets them (rd->failed says
 * where it failed); nothing else is opened. */
int pybox_prepare_files(const pybox_request_t *rq, pybox_ready_t *rd, pybox_error_t *err);
/* Run it (pybox_run); the result says which backend ran it. */
int pybox_ready_run(pybox_ready_t *rd, pybox_run_result_t *res);
void pybox_ready_free(pybox_ready_t *rd);

/* The limits a request ends up with, before any ceiling: what was asked, else the
 * image's default (lowered to the caps), else PyBox's own. */
typedef struct pybox_limits {
    int64_t v[PYBOX_LIMIT_RUN]; /* by pybox_limit_id_t */
    unsigned from_image;        /* bit 1 << id: the image's default */
} pybox_limits_t;
void pybox_limits_resolve(const pybox_request_t *rq, const pybox_pin_t *pin, pybox_limits_t *out);
/* Refuse a limit above the installation's ceiling, naming the ceiling and where it is
 * set. */
int pybox_limits_check(const pybox_limits_t *l, const pybox_config_t *c, pybox_error_t *err);

#endif
