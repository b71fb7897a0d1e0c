/* SPDX-License-Identifier: MIT */
/* The scripted backend (see scripted.h). */
#include "scripted.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../guest/proto.h"
#include "../pybox/buf.h"
#include "../pybox/util.h"

typedef struct {
    pybox_box_t base;
    script_t *s;
    int wake[2];     /* [0] readable while something is waiting to be read */
    pybox_buf_t in;  /* everything written to the box's stdin */
    pybox_buf_t out; /* frames waiting: [stream byte][data...] as separate chunks */
    size_t program_len;
    size_t body_at; /* where the program starts in `in` */
    size_t ctl_at;  /* control bytes read up to here */
    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    bool have_hello, ended_program, recorded, holding, ended;
    bool box_gone; /* ended, its stream not (script: stream_outlives_box) */
    int status_exit, status_signal;
    bool stopped;
    pybox_buf_t q1, q2; /* stdout and stderr waiting */
    int ended_stream;   /* a second stream, at its end from the start (script: ended_stream) */
    int stdin_apart;    /* the box's stdin, a pipe whose reader is gone (script: stdin_apart) */
    int end_pipe[2];    /* [0] readable once the box has ended (script: end_apart) */
    bool ended_stream_seen;
} sbox_t;

static const pybox_box_ops_t scripted_ops;

/* The backend: its script. */
typedef struct {
    pybox_backend_t base;
    script_t *s;
} sbackend_t;

static int fail(const script_t *s, pybox_error_t *err, const char *what)
{
    if (s->silent)
        return -1; /* against error.h's contract: what the run must survive */
    return pybox_error_set(err, s->fail_kind ? s->fail_kind : PYBOX_ERR_ENGINE, EIO, "scripted failure: %s", what);
}

static void wake(sbox_t *b)
{
    char c = 1;
    if (write(b->wake[1], &c, 1) < 0) {
        /* a full pipe already wakes the reader */
    }
}

/* The box has ended: said on its stream, or only by its end descriptor. */
static void box_ends(sbox_t *b)
{
    b->ended = true;
    if (b->end_pipe[1] < 0) {
        wake(b);
        return;
    }
    char c = 1;
    if (write(b->end_pipe[1], &c, 1) < 0) {
        /* already readable */
    }
}

static void record(sbox_t *b)
{
    if (b->recorded)
        return;
    b->recorded = true;
    b->holding = true;
    if (b->s->no_record) {
        box_ends(b); /* gone without a word */
        return;
    }
    int code = b->status_signal ? 128 + b->status_signal : b->status_exit;
    const char *end = b->s->timer ? "timer" : b->stopped ? "stopped" : b->s->term ? "term" : "program";
    pybox_buf_addf(&b->q1,
                   "%s%s exit=%d signal=%d timer=%d stopped=%d program_ms=%d reaped=%u term=%d calls=1 end=%s\n",
                   PYBOX_GUEST_DONE, b->secret, code, b->status_signal, b->s->timer ? 1 : 0, b->stopped ? 1 : 0, 5,
                   b->s->reaped, b->s->term, end);
    wake(b);
}

/* The program ends as the script says. */
static void program_ends(sbox_t *b)
{
    if (b->ended_program)
        return;
    b->ended_program = true;
    if (b->s->out)
        pybox_buf_adds(&b->q1, b->s->out);
    if (b->s->err)
        pybox_buf_adds(&b->q2, b->s->err);
    b->status_exit = b->s->exit_code;
    b->status_signal = b->s->signal;
    if (b->s->timer) {
        b->status_exit = 137;
        b->status_signal = SIGKILL;
    }
    record(b);
}

static void stop(sbox_t *b)
{
    b->s->stops++;
    if (b->s->ignore_stop || b->ended_program)
        return;
    b->ended_program = true;
    b->stopped = true;
    b->status_exit = 137;
    b->status_signal = SIGKILL;
    record(b);
}

static void release(sbox_t *b)
{
    b->s->releases++;
    if (b->holding && b->s->stream_outlives_box)
        b->box_gone = true;
    else if (b->holding)
        box_ends(b);
}

static int s_create(pybox_backend_t *be, const pybox_policy_t *p, pybox_box_t **out, pybox_error_t *err)
{
    (void)p;
    script_t *s = ((sbackend_t *)be)->s;
    if (s->fail == SCRIPT_FAIL_CREATE)
        return fail(s, err, "create");
    if (s->create_ms > 0) { /* an engine this slow: time passing is what is tested */
        struct timespec ts = {s->create_ms / 1000, (long)(s->create_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
    sbox_t *b = calloc(1, sizeof *b);
    /* A socket, like the engine's stream: writable for the box's stdin, readable when
     * the box has something to say. */
    if (b == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, b->wake) < 0) {
        free(b);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "scripted box");
    }
    b->base.ops = &scripted_ops;
    b->base.id = "5c41p7ed0000000000000000000000000000000000000000000000000000beef";
    b->base.name = "scripted-box";
    b->base.spec_sha256 = "5c41p7ed5c41p7ed5c41p7ed5c41p7ed5c41p7ed5c41p7ed5c41p7ed5c41p7ed";
    b->s = s;
    b->ended_stream = -1;
    b->stdin_apart = -1;
    b->end_pipe[0] = b->end_pipe[1] = -1;
    if (s->end_apart && pipe2(b->end_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        b->end_pipe[0] = b->end_pipe[1] = -1;
    if (s->stdin_apart) {
        int p2[2];
        if (pipe2(p2, O_CLOEXEC | O_NONBLOCK) == 0) {
            close(p2[0]); /* no reader: poll says POLLERR at once, every time */
            b->stdin_apart = p2[1];
        }
    }
    if (s->ended_stream) {
        int p2[2];
        if (pipe2(p2, O_CLOEXEC | O_NONBLOCK) == 0) {
            close(p2[1]); /* at its end: poll says POLLHUP at once, every time */
            b->ended_stream = p2[0];
        }
    }
    pybox_buf_init(&b->in, 0);
    pybox_buf_init(&b->q1, 0);
    pybox_buf_init(&b->q2, 0);
    s->created++;
    *out = &b->base;
    return 0;
}

static int s_verify(pybox_box_t *base, const pybox_policy_t *p, int *checked, pybox_error_t *err)
{
    (void)p;
    sbox_t *b = (sbox_t *)base;
    *checked = 7;
    if (b->s->fail == SCRIPT_FAIL_VERIFY && b->s->silent)
        return -1;
    if (b->s->fail == SCRIPT_FAIL_VERIFY)
        return pybox_error_set(err, PYBOX_ERR_POLICY, 0, "the box differs from the policy in 1 of 7 settings");
    b->s->verified++;
    return 0;
}

static int s_put_files(pybox_box_t *base, const void *tar, size_t len, pybox_error_t *err)
{
    (void)tar;
    (void)len;
    sbox_t *b = (sbox_t *)base;
    return b->s->fail == SCRIPT_FAIL_PUT_FILES ? fail(b->s, err, "put files") : 0;
}

static int s_get_files(pybox_box_t *base, size_t max, pybox_buf_t *out, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    if (b->s->out_tar_len > max)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, EFBIG, "too large");
    if (b->s->stopped_before_copy) {
        /* what the engine then copies: a fresh, empty folder */
        static const char empty[1024] = {0};
        return pybox_buf_append(out, empty, sizeof empty);
    }
    return pybox_buf_append(out, b->s->out_tar ? b->s->out_tar : "", b->s->out_tar_len);
}

static int s_open_io(pybox_box_t *base, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    return b->s->fail == SCRIPT_FAIL_OPEN_IO ? fail(b->s, err, "attach") : 0;
}

static int s_start(pybox_box_t *base, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    if (b->s->fail == SCRIPT_FAIL_START)
        return fail(b->s, err, "start");
    b->s->started++;
    return 0;
}

static void s_io_fds(const pybox_box_t *base, int *in_fd, int out_fds[2], int *n_out)
{
    const sbox_t *b = (const sbox_t *)base;
    int fd = b->wake[0];
    b->s->io_polls++;
    *in_fd = b->stdin_apart >= 0 ? b->stdin_apart : fd;
    out_fds[0] = fd;
    out_fds[1] = -1;
    *n_out = 1;
    if (b->ended_stream >= 0 && !b->ended_stream_seen)
        out_fds[(*n_out)++] = b->ended_stream;
}

/* The init's side of the box's stdin: hello, the program's command and bytes, control
 * bytes. */
static void take_input(sbox_t *b)
{
    if (!b->have_hello) {
        const char *nl = memchr(b->in.data, '\n', b->in.len);
        if (nl == NULL)
            return;
        size_t hl = strlen(PYBOX_GUEST_HELLO);
        if (b->in.len < hl + PYBOX_GUEST_SECRET_HEX || memcmp(b->in.data, PYBOX_GUEST_HELLO, hl) != 0)
            return;
        const char *p = nl + 1;
        const char *nl2 = memchr(p, '\n', b->in.len - (size_t)(p - b->in.data));
        if (nl2 == NULL || *p != PYBOX_GUEST_CTL_PROGRAM)
            return;
        memcpy(b->secret, b->in.data + hl, PYBOX_GUEST_SECRET_HEX);
        b->program_len = strtoul(p + 1, NULL, 10);
        b->body_at = (size_t)(nl2 - b->in.data) + 1;
        b->ctl_at = b->body_at + b->program_len;
        b->have_hello = true;
    }
    size_t got = b->in.len - b->body_at;
    b->s->program_bytes = got < b->program_len ? got : b->program_len;
    if (got < b->program_len)
        return;
    if (!b->s->program_complete) {
        b->s->program_complete = true;
        if (b->s->fail == SCRIPT_FAIL_IO)
            wake(b); /* the break shows at the next read */
        else if (!b->s->hangs)
            program_ends(b);
    }
    for (; b->ctl_at < b->in.len; b->ctl_at++) {
        char c = b->in.data[b->ctl_at];
        if (c == PYBOX_GUEST_CTL_STOP)
            stop(b);
        else if (c == PYBOX_GUEST_CTL_RELEASE)
            release(b);
    }
}

static ssize_t s_io_write(pybox_box_t *base, const void *data, size_t len, pybox_error_t *err)
{
    (void)err;
    sbox_t *b = (sbox_t *)base;
    if (b->ended) {
        errno = EPIPE;
        return -1;
    }
    if (pybox_buf_append(&b->in, data, len) < 0) {
        errno = ENOMEM;
        return -1;
    }
    take_input(b);
    return (ssize_t)len;
}

static int s_io_close_write(pybox_box_t *base, pybox_error_t *err)
{
    (void)base;
    (void)err;
    return 0;
}

static int s_io_read(pybox_box_t *base, pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    char drain[64];
    b->s->io_reads++;
    while (read(b->wake[0], drain, sizeof drain) > 0) {
    }
    if (b->ended_stream >= 0 && !b->ended_stream_seen && read(b->ended_stream, drain, sizeof drain) == 0)
        b->ended_stream_seen = true; /* its end read: no longer one of the streams (it stays open) */
    if (b->s->fail == SCRIPT_FAIL_IO && b->s->program_complete)
        return fail(b->s, err, "the engine's stream broke");
    if (b->q2.len > 0) {
        if (cb(arg, 2, b->q2.data, b->q2.len) < 0)
            return -1;
        b->q2.len = 0;
    }
    if (b->q1.len > 0) {
        if (cb(arg, 1, b->q1.data, b->q1.len) < 0)
            return -1;
        b->q1.len = 0;
    }
    return b->ended ? 1 : 0;
}

static int s_end_fd(const pybox_box_t *base)
{
    return ((const sbox_t *)base)->end_pipe[0];
}

static int s_signal(pybox_box_t *base, int sig, pybox_error_t *err)
{
    (void)err;
    sbox_t *b = (sbox_t *)base;
    if (sig == PYBOX_GUEST_SIG_STOP) {
        stop(b);
    } else if (sig == PYBOX_GUEST_SIG_RELEASE) {
        release(b);
    } else if (sig == SIGKILL && b->box_gone) {
        box_ends(b); /* nothing left to kill; its stream ends by itself */
        return 1;
    } else if (sig == SIGKILL) {
        b->s->kills++;
        /* everything in the box dies: no record if there was none */
        if (!b->ended_program) {
            b->status_exit = 137;
            b->status_signal = SIGKILL;
        }
        box_ends(b);
    }
    return 0;
}

static int s_wait(pybox_box_t *base, int64_t timeout_ms, pybox_box_end_t *out, pybox_error_t *err)
{
    (void)timeout_ms;
    sbox_t *b = (sbox_t *)base;
    if (b->s->fail == SCRIPT_FAIL_WAIT)
        return fail(b->s, err, "wait");
    memset(out, 0, sizeof *out);
    out->exit_code = b->s->engine_exit >= 0 ? b->s->engine_exit
                     : b->status_signal     ? 128 + b->status_signal
                                            : b->status_exit;
    out->oom_killed = b->s->engine_oom;
    snprintf(out->started_at, sizeof out->started_at, "2026-12-01T00:00:00Z");
    snprintf(out->finished_at, sizeof out->finished_at, "2026-12-01T00:00:01Z");
    return 0;
}

static int s_remove(pybox_box_t *base, bool *gone, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    b->s->removed++;
    *gone = !b->s->not_gone;
    if (!*gone && b->s->silent)
        return 0;
    if (!*gone)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "the box is still there");
    return 0;
}

static void s_after_end(const pybox_box_t *base, pybox_box_after_t *out)
{
    *out = ((const sbox_t *)base)->s->after;
}

static int s_running(pybox_box_t *base, bool *running, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    if (b->s->running_unknown)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, EIO, "no answer");
    *running = !b->s->stopped_before_copy && !b->ended && !b->box_gone;
    return 0;
}

static int s_cgroup(pybox_box_t *base, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    sbox_t *b = (sbox_t *)base;
    memset(loc, 0, sizeof *loc);
    if (b->s->cgroup_v2[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "the scripted box has no cgroup");
    loc->version = PYBOX_CG_V2;
    snprintf(loc->dir[0], sizeof loc->dir[0], "%s", b->s->cgroup_v2);
    return 0;
}

static void s_free(pybox_box_t *base)
{
    sbox_t *b = (sbox_t *)base;
    close(b->wake[0]);
    close(b->wake[1]);
    if (b->ended_stream >= 0)
        close(b->ended_stream);
    if (b->stdin_apart >= 0)
        close(b->stdin_apart);
    for (int i = 0; i < 2; i++)
        if (b->end_pipe[i] >= 0)
            close(b->end_pipe[i]);
    pybox_buf_free(&b->in);
    pybox_buf_free(&b->q1);
    pybox_buf_free(&b->q2);
    free(b);
}

static const pybox_box_ops_t scripted_ops = {
    .verify = s_verify,
    .put_files = s_put_files,
    .get_files = s_get_files,
    .open_io = s_open_io,
    .start = s_start,
    .io_fds = s_io_fds,
    .io_write = s_io_write,
    .io_close_write = s_io_close_write,
    .io_read = s_io_read,
    .end_fd = s_end_fd,
    .signal = s_signal,
    .wait = s_wait,
    .running = s_running,
    .cgroup = s_cgroup,
    .remove = s_remove,
    .after_end = s_after_end,
    .free = s_free,
};

static const char *s_describe(const pybox_backend_t *be)
{
    (void)be;
    return "scripted backend";
}

static int s_list(pybox_backend_t *be, const char *install_id, pybox_leftover_t **out, size_t *n, pybox_error_t *err)
{
    (void)install_id;
    script_t *s = ((sbackend_t *)be)->s;
    *out = NULL;
    *n = 0;
    if (s == NULL || s->n_leftovers == 0)
        return 0;
    *out = calloc(s->n_leftovers, sizeof **out);
    if (*out == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "leftovers");
    memcpy(*out, s->leftovers, s->n_leftovers * sizeof **out);
    *n = s->n_leftovers;
    return 0;
}

static int s_remove_leftover(pybox_backend_t *be, const pybox_leftover_t *l, bool *gone, pybox_error_t *err)
{
    (void)l;
    (void)err;
    ((sbackend_t *)be)->s->leftovers_removed++;
    *gone = true;
    return 0;
}

static const pybox_backend_ops_t scripted_backend_ops = {
    .name = "scripted",
    .holder = "the script",
    .importing = "importing into the script:",
    .describe = s_describe,
    .create = s_create,
    .list_leftovers = s_list,
    .remove_leftover = s_remove_leftover,
};

void scripted_backend(pybox_backend_t **be, script_t *s)
{
    static __thread sbackend_t one;
    one.base.ops = &scripted_backend_ops;
    one.s = s;
    *be = &one.base;
}

void script_init(script_t *s)
{
    memset(s, 0, sizeof *s);
    s->out = "hi\n";
    s->engine_exit = -1;
}
