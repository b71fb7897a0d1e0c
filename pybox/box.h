/* SPDX-License-Identifier: MIT */
/* The box interface: everything the run flow needs from whatever builds boxes. The run
 * flow, receipts and front-ends know only this; the Docker Engine API is the first
 * implementation (box_docker.c). Contract: docs/box-interface.md. */
#ifndef PYBOX_BOX_H
#define PYBOX_BOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"
#include "policy.h"
#include "stream.h"

typedef struct pybox_box pybox_box_t;
typedef struct pybox_backend pybox_backend_t;

/* How the box ended, as the engine recorded it (never as the program said). */
typedef struct pybox_box_exit {
    int exit_code;
    bool oom_killed; /* something in the box was OOM-killed (not necessarily the program) */
    char started_at[40];
    char finished_at[40];
    char error[256]; /* the engine's own error for the box, if any */
} pybox_box_exit_t;

/* Something this installation left in the engine, found by its labels. */
typedef struct pybox_leftover {
    char kind;                 /* 'b' box, 'v' volume */
    char id[PYBOX_ID_MAX];     /* the box's id, or the volume's name */
    char name[PYBOX_NAME_MAX]; /* the box's name (boxes only) */
    char run_id[33];           /* its pybox.run label ("" if missing or malformed) */
    int64_t expires;           /* its pybox.expires label; -1 if missing or malformed */
    bool running;              /* a box that is running (or paused, restarting) */
    char state[24];
} pybox_leftover_t;

/* Signals: 0 = sent, 1 = the box was not running any more. */
typedef struct pybox_box_ops {
    const char *name;
    /* Build a box from the policy; nothing runs yet. */
    int (*create)(pybox_backend_t *be, const pybox_policy_t *p, pybox_box_t **out, pybox_error_t *err);
    /* Read the box back and compare it with the policy (PYBOX_ERR_POLICY on a difference). */
    int (*verify)(pybox_box_t *b, const pybox_policy_t *p, int *checked, pybox_error_t *err);
    /* Unpack a tar into a folder of the box (before it starts). */
    int (*put_files)(pybox_box_t *b, const char *dir, const void *tar, size_t len, pybox_error_t *err);
    /* A tar of a folder of the box (while it is held), at most max bytes. */
    int (*get_files)(pybox_box_t *b, const char *dir, size_t max, pybox_buf_t *out, pybox_error_t *err);
    /* Connect to the box's stdin/stdout/stderr before it starts. */
    int (*open_io)(pybox_box_t *b, pybox_error_t *err);
    int (*start)(pybox_box_t *b, pybox_error_t *err);
    /* The descriptor to poll for I/O readiness. */
    int (*io_fd)(const pybox_box_t *b);
    /* Non-blocking; -1 with errno EAGAIN when full. */
    ssize_t (*io_write)(pybox_box_t *b, const void *data, size_t len, pybox_error_t *err);
    int (*io_close_write)(pybox_box_t *b, pybox_error_t *err);
    /* Read what is ready and hand it over per stream (1 stdout, 2 stderr).
     * Returns 0 (more may come), 1 (the box's output ended) or -1. */
    int (*io_read)(pybox_box_t *b, pybox_demux_cb cb, void *arg, pybox_error_t *err);
    /* Send a signal to the box's PID 1 from outside the box. */
    int (*signal)(pybox_box_t *b, int sig, pybox_error_t *err);
    /* Wait until the box has ended (bounded), then read the engine's record of it. */
    int (*wait)(pybox_box_t *b, int64_t timeout_ms, pybox_box_exit_t *out, pybox_error_t *err);
    /* Remove the box and its volumes, then look it up again: *gone only when the
     * engine says it no longer exists. */
    int (*remove)(pybox_box_t *b, bool *gone, pybox_error_t *err);
    /* Whether the box still runs now (a box that stopped never runs again). */
    int (*running)(pybox_box_t *b, bool *running, pybox_error_t *err);
    /* The box's PID 1 as the host sees it (for locating its cgroup); 0 if unknown. */
    int (*host_pid)(pybox_box_t *b, pid_t *pid, pybox_error_t *err);
    const char *(*id)(const pybox_box_t *b);
    void (*free)(pybox_box_t *b);
} pybox_box_ops_t;

/* Operations on what an installation left behind. */
typedef struct pybox_backend_ops {
    /* Everything (boxes and volumes) labelled pybox.install=install_id; *out malloc'd. */
    int (*list_leftovers)(pybox_backend_t *be, const char *install_id, pybox_leftover_t **out, size_t *n,
                          pybox_error_t *err);
    /* Remove one if it is not running (the engine refuses a running box or a volume in
     * use: *gone stays false); *gone when the engine no longer has it. */
    int (*remove_leftover)(pybox_backend_t *be, const pybox_leftover_t *l, bool *gone, pybox_error_t *err);
} pybox_backend_ops_t;

struct pybox_backend {
    const pybox_box_ops_t *ops;
    const pybox_backend_ops_t *bops;
    void *impl;
};

struct pybox_box {
    const pybox_box_ops_t *ops;
};

/* The Docker Engine API backend over an open engine (not owned). */
struct pybox_engine;
void pybox_docker_backend(pybox_backend_t *be, struct pybox_engine *engine);

#endif
