/* SPDX-License-Identifier: MIT */
/* The MCP server on stdio (pybox_mcp_serve, server.h): one message per line. Threads:
 * the reader (pybox_mcp_serve's own) reads stdin and hands each line to the session; a
 * worker per tools/call runs the tool (server.c); one writer owns stdout. Senders never
 * write: they queue whole lines, so a client that stops reading stalls nobody but the
 * writer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../buf.h"
#include "../util.h"
#include "server.h"

/* One message waiting for stdout: its line, newline included. */
typedef struct out_msg {
    struct out_msg *next;
    size_t len;
    char data[];
} out_msg_t;

typedef struct server {
    pybox_mcp_sink_t sink; /* every line's answers go to stdout: the queue */
    int out_fd;
    const pybox_mcp_config_t *cfg;
    /* stdout: the writer thread alone writes it, taking lines from the queue in order.
     * Everything below is under q_mu. */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv; /* the writer waits here for lines; shutdown waits here for the writer */
    out_msg_t *q_head, *q_tail;
    size_t q_bytes;    /* queued bytes not written yet (the line being written included) */
    bool q_closing;    /* no more lines will come: write what is queued, then end */
    bool q_dead;       /* nothing more is queued or written (a write failed, the client is gone, or time ran out) */
    bool gone;         /* the queue's bound was passed: the client is not reading */
    bool aborted;      /* abort_pipe was written */
    bool w_done;       /* the writer has ended */
    int abort_pipe[2]; /* written once: wakes the writer's poll and the reader's */
    pthread_t writer;
} server_t;

/* With q_mu held: wake the writer and the reader, once. */
static void abort_locked(server_t *s)
{
    pthread_cond_broadcast(&s->q_cv);
    if (s->aborted)
        return;
    s->aborted = true;
    (void)pybox_write_all(s->abort_pipe[1], "x", 1); /* a wake-up: the pipe's reader only polls it */
}

/* With q_mu held: free the lines not taken by the writer yet. */
static void drop_queue_locked(server_t *s)
{
    while (s->q_head != NULL) {
        out_msg_t *m = s->q_head;
        s->q_head = m->next;
        s->q_bytes -= m->len;
        free(m);
    }
    s->q_tail = NULL;
}

static size_t queue_max(const server_t *s)
{
    return s->cfg->out_queue_max ? s->cfg->out_queue_max : (size_t)PYBOX_MCP_OUT_QUEUE_MAX;
}

/* The sink's send: the message becomes one line (the core's JSON has every control
 * character escaped, so nothing inside, the program's text included, can end it early),
 * queued for the writer, never written here, so no sender waits for the client. Returns
 * whether it was queued. A line that would take the queue past its bound (queue_max)
 * means the client is not reading: the server stops (see pybox_mcp_serve). */
static bool queue_line(pybox_mcp_sink_t *k, const char *text, size_t len, bool reply)
{
    (void)reply;
    server_t *s = (server_t *)k;
    out_msg_t *m = malloc(sizeof *m + len + 1);
    if (m == NULL) {
        pybox_mcp_log("no memory for a message to stdout");
        return false;
    }
    memcpy(m->data, text, len);
    m->data[len] = '\n';
    m->len = len + 1;
    m->next = NULL;
    bool queued = false, now_gone = false;
    size_t waiting = 0;
    pthread_mutex_lock(&s->q_mu);
    if (s->q_dead) {
        /* dropped: stdout failed, or the server is stopping without it */
    } else if (s->q_bytes + m->len > queue_max(s)) {
        waiting = s->q_bytes;
        s->gone = now_gone = true;
        s->q_dead = true;
        drop_queue_locked(s);
        abort_locked(s);
    } else {
        if (s->q_tail != NULL)
            s->q_tail->next = m;
        else
            s->q_head = m;
        s->q_tail = m;
        s->q_bytes += m->len;
        pthread_cond_broadcast(&s->q_cv);
        queued = true;
        m = NULL;
    }
    pthread_mutex_unlock(&s->q_mu);
    if (now_gone)
        pybox_mcp_log("the client is not reading stdout (%zu bytes waiting, and a message of %zu more would pass the "
                      "bound of %d MiB): stopping; every run in progress is cancelled and its box removed",
                      waiting, m->len, (int)(queue_max(s) >> 20));
    free(m);
    return queued;
}

/* Write one line, at most PIPE_BUF bytes at a time and only once poll says stdout takes
 * more, so the write itself does not block on a client that stopped reading (a pipe or
 * socket with room takes that much); the wait is in poll, which abort_pipe ends. Returns
 * false when stdout failed or the writer was told to stop. */
static bool write_line(server_t *s, const char *p, size_t len)
{
    while (len > 0) {
        struct pollfd ps[2] = {{.fd = s->out_fd, .events = POLLOUT}, {.fd = s->abort_pipe[0], .events = POLLIN}};
        if (poll(ps, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            {
                char etext[128];
                pybox_mcp_log("poll on stdout: %s", pybox_strerror(errno, etext, sizeof etext));
            }
            return false;
        }
        if (ps[1].revents != 0)
            return false;
        if (ps[0].revents == 0)
            continue;
        ssize_t w = write(s->out_fd, p, len < PIPE_BUF ? len : PIPE_BUF);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            {
                char etext[128];
                pybox_mcp_log("writing to stdout: %s (messages from now on are dropped)",
                              pybox_strerror(errno, etext, sizeof etext));
            }
            return false;
        }
        p += w;
        len -= (size_t)w;
        pthread_mutex_lock(&s->q_mu);
        s->q_bytes -= (size_t)w;
        pthread_mutex_unlock(&s->q_mu);
    }
    return true;
}

/* The writer: lines in the order they were queued, one whole line after another, until
 * the queue is closed and empty, or dead. */
static void *writer_main(void *arg)
{
    server_t *s = arg;
    pthread_mutex_lock(&s->q_mu);
    for (;;) {
        while (s->q_head == NULL && !s->q_closing && !s->q_dead)
            pthread_cond_wait(&s->q_cv, &s->q_mu);
        if (s->q_dead || s->q_head == NULL)
            break;
        out_msg_t *m = s->q_head;
        s->q_head = m->next;
        if (s->q_head == NULL)
            s->q_tail = NULL;
        pthread_mutex_unlock(&s->q_mu);
        bool ok = write_line(s, m->data, m->len);
        free(m);
        pthread_mutex_lock(&s->q_mu);
        if (!ok)
            s->q_dead = true;
    }
    drop_queue_locked(s);
    s->w_done = true;
    pthread_cond_broadcast(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
    return NULL;
}

/* Whether the client was found not reading (the reader then stops taking requests). */
static bool client_gone(server_t *s)
{
    pthread_mutex_lock(&s->q_mu);
    bool gone = s->gone;
    pthread_mutex_unlock(&s->q_mu);
    return gone;
}

/* The writer's end, after every worker is reaped: up to PYBOX_MCP_FLUSH_MS for it to write
 * what is queued (none when the client is gone), then it is stopped. Returns whether
 * every queued line was written (or stdout had already failed). */
static bool finish_writer(server_t *s)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += PYBOX_MCP_FLUSH_MS / 1000;
    until.tv_nsec += (long)(PYBOX_MCP_FLUSH_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->q_mu);
    s->q_closing = true;
    pthread_cond_broadcast(&s->q_cv);
    while (!s->w_done && !s->gone) {
        if (pthread_cond_timedwait(&s->q_cv, &s->q_mu, &until) == ETIMEDOUT)
            break;
    }
    bool flushed = s->w_done;
    size_t left = s->q_bytes;
    bool gone = s->gone;
    if (!flushed) {
        s->q_dead = true;
        abort_locked(s);
    }
    pthread_mutex_unlock(&s->q_mu);
    if (!flushed && !gone)
        pybox_mcp_log("the client did not read stdout within %d s: exiting without the last %zu bytes",
                      PYBOX_MCP_FLUSH_MS / 1000, left);
    pthread_join(s->writer, NULL);
    return flushed;
}

int pybox_mcp_serve(int in_fd, int out_fd, int stop_fd, const pybox_mcp_config_t *cfg, const pybox_mcp_tool_t *tools,
                    size_t n_tools, void *arg)
{
    server_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -1;
    s->sink.send = queue_line;
    s->out_fd = out_fd;
    s->cfg = cfg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->q_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->q_mu, NULL);
    pybox_mcp_session_t *session = pybox_mcp_session_new(cfg, tools, n_tools, arg, NULL);
    bool piped = session != NULL && pipe2(s->abort_pipe, O_CLOEXEC) == 0;
    if (!piped || pthread_create(&s->writer, NULL, writer_main, s) != 0) {
        pybox_mcp_log("could not start the writer for stdout");
        if (piped) {
            close(s->abort_pipe[0]);
            close(s->abort_pipe[1]);
        }
        pybox_mcp_session_free(session);
        pthread_cond_destroy(&s->q_cv);
        pthread_mutex_destroy(&s->q_mu);
        free(s);
        return -1;
    }
    pybox_buf_t line;
    pybox_buf_init(&line, 0);
    bool skipping = false; /* inside a line that is too long: dropped up to its newline */
    char chunk[65536];
    for (;;) {
        /* stop_fd < 0 is ignored by poll */
        struct pollfd ps[3] = {{.fd = in_fd, .events = POLLIN},
                               {.fd = stop_fd, .events = POLLIN},
                               {.fd = s->abort_pipe[0], .events = POLLIN}};
        if (poll(ps, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            {
                char etext[128];
                pybox_mcp_log("poll: %s", pybox_strerror(errno, etext, sizeof etext));
            }
            break;
        }
        if (ps[2].revents != 0)
            break; /* the client is not reading: said where it was found */
        if (stop_fd >= 0 && ps[1].revents != 0) {
            pybox_mcp_log("stopping: every run in progress is cancelled and its box removed");
            break;
        }
        ssize_t r = read(in_fd, chunk, sizeof chunk);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0) {
            char etext[128];
            pybox_mcp_log("reading stdin: %s", pybox_strerror(errno, etext, sizeof etext));
        }
        if (r <= 0)
            break;
        size_t off = 0;
        while (off < (size_t)r && !client_gone(s)) {
            char *nl = memchr(chunk + off, '\n', (size_t)r - off);
            size_t n = nl ? (size_t)(nl - (chunk + off)) : (size_t)r - off;
            if (!skipping && line.len + n > PYBOX_MCP_LINE_MAX) {
                skipping = true;
                pybox_buf_free(&line);
                pybox_buf_init(&line, 0);
            }
            if (!skipping && pybox_buf_append(&line, chunk + off, n) < 0)
                skipping = true; /* out of memory for it: refused like one too large */
            off += n;
            if (nl == NULL)
                break;
            off++; /* the newline */
            if (skipping) {
                pybox_mcp_too_large(&s->sink, !pybox_buf_ok(&line));
                skipping = false;
            } else if (line.len > 0) {
                pybox_mcp_handled_t h; /* every answer is on its way to stdout already */
                pybox_mcp_session_handle(session, line.data, line.len, 0, &s->sink,
                                         &h); /* blank lines are ignored there */
            }
            pybox_buf_free(&line);
            pybox_buf_init(&line, 0);
        }
    }
    pybox_buf_free(&line);
    /* stdin closed (or a stop, or the client is not reading): every call in flight is
     * stopped, its box removed, then exit. When the client is gone, nothing can reach it:
     * the calls are cancelled as by the client (no result, kept files removed). */
    bool gone = client_gone(s);
    pybox_mcp_session_cancel(session, NULL, gone);
    pybox_mcp_session_reap(session, true);
    pybox_mcp_session_free(session);
    bool flushed = finish_writer(s);
    gone = client_gone(s); /* also when found while the calls ended */
    close(s->abort_pipe[0]);
    close(s->abort_pipe[1]);
    pthread_cond_destroy(&s->q_cv);
    pthread_mutex_destroy(&s->q_mu);
    free(s);
    return gone || !flushed ? -1 : 0;
}
