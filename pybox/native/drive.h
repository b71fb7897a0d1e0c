/* SPDX-License-Identifier: MIT */
/* The smallest guest-protocol driver for a native box: hello and program in, stdout and
 * stderr out, the done record found at the end of stdout (stream.c), a callback while the
 * box holds, then release and reap. For the try tool, the tests and measurements; the run
 * flow's adapter has its own. Contract: docs/guest-protocol.md. */
#ifndef PYBOX_NATIVE_DRIVE_H
#define PYBOX_NATIVE_DRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../stream.h"
#include "sandbox.h"

typedef struct pybox_native_run {
    pybox_sink_t out; /* the box's stdout (the record, if seen, at its end) */
    pybox_sink_t err;
    pybox_done_record_t rec; /* rec.seen when init's record with this run's secret came */
    pybox_native_end_t end;  /* from waitid() of init */
    bool stopped;            /* the deadline passed: 'S' was sent */
    bool killed;             /* the box had to be killed */
} pybox_native_run_t;

/* Called once while the box holds (after the record, before release). */
typedef void (*pybox_native_held_cb)(pybox_native_box_t *b, void *arg);

/* Run program (len bytes) in a created box. deadline_ms: then 'S'; 1 s later a kill.
 * r is initialised here; the caller frees it with pybox_native_run_free. */
int pybox_native_drive(pybox_native_box_t *b, const char *program, size_t len, int64_t deadline_ms,
                       pybox_native_held_cb held, void *arg, pybox_native_run_t *r, pybox_error_t *err);
void pybox_native_run_free(pybox_native_run_t *r);

#endif
