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

/* The last bytes kept of a stream: enough for the records at its end and the report
 * that comes before one (guest/proto.h). */
#define PYBOX_SINK_TAIL (PYBOX_GUEST_SAID_MAX + 2 * PYBOX_GUEST_RECORD_MAX)

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
    unsigned calls;  /* programs or calls the box was handed */
    char end[12];    /* how the box ended, init's word (guest/proto.h: program, timer, closed ...) */
    uint64_t length; /* bytes of the record at the end of stdout */
} pybox_done_record_t;

/* Look for a complete done record carrying this secret at the very end of the stdout
 * sink. Returns 1 and fills rec if found, 0 if not (yet), -1 if one is there but is
 * malformed. */
int pybox_done_record_find(const pybox_sink_t *out, const char *secret, pybox_done_record_t *rec, pybox_error_t *err);

/* The ready record of a box made before its program: its interpreter started and its
 * preload done, with the bootstrap's report (said before any program existed) just
 * before it. */
typedef struct pybox_ready_record {
    bool seen;
    int64_t ready_ms;                      /* init's count from the interpreter's start to its report */
    uint64_t said;                         /* bytes of the report before the record */
    uint64_t length;                       /* bytes of the record */
    char report[PYBOX_GUEST_SAID_MAX + 1]; /* the report, NUL-ended (it may hold NULs: said counts) */
} pybox_ready_record_t;

/* A session's call record, with the interpreter's report of the call (untrusted) just
 * before it. */
typedef struct pybox_call_record {
    bool seen;
    unsigned call;
    uint64_t out, err; /* bytes init relayed for the call on each stream */
    uint64_t said;     /* bytes of the report before the record */
    int64_t call_ms;
    bool alive;      /* the interpreter still runs and the session goes on */
    uint64_t length; /* bytes of the record */
    uint64_t after;  /* bytes after it at the end of stdout (the done record, when not alive) */
    char report[PYBOX_GUEST_SAID_MAX + 1];
} pybox_call_record_t;

/* The ready record at the very end of stdout (1), none yet (0), or a malformed one (-1).
 * Its report is copied out of the sink's tail. */
int pybox_ready_record_find(const pybox_sink_t *out, const char *secret, pybox_ready_record_t *rec, pybox_error_t *err);
/* The call record at the very end of stdout, or just before a done record there (1),
 * none yet (0), or a malformed one (-1). */
int pybox_call_record_find(const pybox_sink_t *out, const char *secret, pybox_call_record_t *rec, pybox_error_t *err);
/* What the program said on stdout: the sink without the guest init's own lines at its
 * end, a session call's report and record (call, when seen) and the done record (done,
 * when seen), which init writes one after the other and nothing else between. Either
 * may be NULL. The one place a run's or a call's stdout is told from init's records. */
void pybox_sink_said_program(const pybox_sink_t *out, const pybox_call_record_t *call, const pybox_done_record_t *done,
                             pybox_said_t *said);

#endif
