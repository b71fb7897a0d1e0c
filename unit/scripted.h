/* SPDX-License-Identifier: MIT */
/* A scripted backend for unit tests of the run flow: a box that plays the guest init's
 * part of the protocol (hello, program, done record, hold, release, stop) in memory, with
 * a failure or an oddity chosen per phase. No engine, no kernel, no container. */
#ifndef PYBOX_UNIT_SCRIPTED_H
#define PYBOX_UNIT_SCRIPTED_H

#include <stdbool.h>
#include <stddef.h>

#include "../pybox/box.h"

typedef enum {
    SCRIPT_OK = 0,
    SCRIPT_FAIL_CREATE,
    SCRIPT_FAIL_VERIFY,
    SCRIPT_FAIL_PUT_FILES,
    SCRIPT_FAIL_OPEN_IO,
    SCRIPT_FAIL_START,
    SCRIPT_FAIL_IO,   /* the stream breaks (the engine's kind of error) after the program arrived */
    SCRIPT_FAIL_WAIT, /* the engine cannot say how the box ended */
} script_fail_t;

typedef struct script {
    /* What goes wrong, and how the engine reports it. */
    script_fail_t fail;
    pybox_error_kind_t fail_kind; /* PYBOX_ERR_ENGINE unless set */
    bool not_gone;                /* remove works but the box is still found afterwards */
    bool silent;                  /* a failure (or a box not gone) says nothing: the error is left empty */
    int create_ms;                /* a slow engine: create takes this long */
    /* The program, as the box's init would see it. */
    const char *out;  /* what it writes on stdout */
    const char *err;  /* on stderr */
    int exit_code;    /* how it ends by itself */
    int signal;       /* killed by this signal instead (exit 128+signal) */
    bool hangs;       /* never ends by itself: only a stop ends it */
    bool ignore_stop; /* the init never honours a stop: only a kill of the box ends it */
    bool timer;       /* the box's own timer ends the program */
    int term;         /* a termination signal from outside reached the init */
    bool no_record;   /* the box ends without the init's record */
    unsigned reaped;  /* other processes reaped at the end */
    bool engine_oom;  /* the engine's record says something was OOM-killed */
    int engine_exit;  /* the engine's exit code; -1: the init's */
    /* Files: the archive of /box/out, and whether the box still runs after the copy. */
    const void *out_tar;
    size_t out_tar_len;
    bool stopped_before_copy;
    bool running_unknown;
    /* A cgroup v2 folder (a fixture tree) the box says it has ("": none). */
    char cgroup_v2[256];
    /* A second output stream that is at its end from the start (as a native box's stderr
     * after its init closed it), and how often the run read what the box says. */
    bool ended_stream;
    int io_reads;
    /* The box's stdin apart from its output (as a native box's pipes), with no reader
     * left (as once every process of a box has ended), and how often the run asked
     * what to poll. */
    bool stdin_apart;
    int io_polls;
    /* The box's end shown by a descriptor of its own (end_fd), and its stream never
     * ending by itself (as a native box's pipes held open by descriptors in flight). */
    bool end_apart;
    /* The box ends at its release, but its stream goes on until a kill is asked, which
     * then finds the box gone (as an engine whose stream waits for pipes held open). */
    bool stream_outlives_box;
    /* What the backend says outlived the box's end (after_end). */
    pybox_box_after_t after;
    /* Leftovers the backend lists, and how many were removed. */
    const pybox_leftover_t *leftovers;
    size_t n_leftovers;
    int leftovers_removed;
    /* What the run did to the box, for the test to check. */
    int created, verified, started, removed;
    int stops, releases, kills; /* by control byte or signal */
    size_t program_bytes;       /* program bytes that reached the box */
    bool program_complete;
} script_t;

/* A backend over a script (not owned; it must outlive the run). The backend itself is
 * static: one per thread. */
void scripted_backend(pybox_backend_t **be, script_t *s);
/* A script with everything working: the program prints "hi" and exits 0. */
void script_init(script_t *s);

#endif
