/* SPDX-License-Identifier: MIT */
/* What the program said: stdout and stderr, each kept up to a cap with everything
 * counted, and the guest init's done record found at the very end of stdout. All of it
 * is untrusted bytes. */
#ifndef PYBOX_STREAM_H
#define PYBOX_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../guest/proto.h"
#include "buf.h"
#include "error.h"

/* ---- one output stream, capped ---- */

#define PYBOX_SINK_TAIL PYBOX_GUEST_RECORD_MAX

typedef struct pybox_sink {
    size_t cap;       /* bytes kept for the receipt */
    pybox_buf_t head; /* the first cap + PYBOX_SINK_TAIL bytes */
    char tail[PYBOX_SINK_TAIL];
    size_t tail_len; /* the last bytes seen, up to PYBOX_SINK_TAIL */
    uint64_t total;  /* every byte seen */
} pybox_sink_t;

void pybox_sink_init(pybox_sink_t *s, size_t cap);
void pybox_sink_free(pybox_sink_t *s);
int pybox_sink_add(pybox_sink_t *s, const char *data, size_t len);

/* The program's part after the record (if any) was removed: */
typedef struct pybox_said {
    const char *data; /* kept bytes (points into the sink) */
    size_t kept;
    uint64_t total; /* the program's bytes in all */
    bool truncated;
} pybox_said_t;

void pybox_sink_said(const pybox_sink_t *s, uint64_t record_len, pybox_said_t *out);

/* ---- the guest init's done record ---- */

typedef struct pybox_done_record {
    bool seen;
    int exit_code; /* as init saw it: status, or 128+signal */
    int signal;    /* signal that ended the program, 0 if none */
    bool timer;    /* the box's own timer ended the program */
    bool stopped;  /* the host asked the box to stop the program */
    int64_t program_ms;
    unsigned reaped; /* other processes killed and reaped at the end */
    int term;        /* termination signal from outside the box, forwarded to the program; 0 if none */
    uint64_t length; /* bytes of the record at the end of stdout */
} pybox_done_record_t;

/* Look for a complete done record carrying this secret at the very end of the stdout
 * sink. Returns 1 and fills rec if found, 0 if not (yet), -1 if one is there but is
 * malformed. */
int pybox_done_record_find(const pybox_sink_t *out, const char *secret, pybox_done_record_t *rec, pybox_error_t *err);

#endif
