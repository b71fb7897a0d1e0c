/* SPDX-License-Identifier: MIT */
/* The smallest guest-protocol driver for a native box (see drive.h). */
#include "drive.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../bounds.h"
#include "../util.h"

void pybox_native_run_free(pybox_native_run_t *r)
{
    pybox_sink_free(&r->out);
    pybox_sink_free(&r->err);
}

/* Read what is there; 1 at end of file, 0 otherwise. */
static int drain(int fd, pybox_sink_t *s)
{
    char buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            pybox_sink_add(s, buf, (size_t)n);
            continue;
        }
        if (n == 0)
            return 1;
        return errno == EAGAIN || errno == EINTR ? 0 : 1;
    }
}

int pybox_native_drive(pybox_native_box_t *b, const char *program, size_t len, int64_t deadline_ms,
                       pybox_native_held_cb held, void *arg, pybox_native_run_t *r, pybox_error_t *err)
{
    memset(r, 0, sizeof *r);
    pybox_sink_init(&r->out, PYBOX_OUTPUT_CAP);
    pybox_sink_init(&r->err, PYBOX_OUTPUT_CAP);
    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    if (pybox_random_hex(PYBOX_GUEST_SECRET_HEX / 2, secret, err) < 0)
        return -1;
    char hello[PYBOX_GUEST_HELLO_MAX];
    int hl = snprintf(hello, sizeof hello, "%s%s\n%c%zu\n", PYBOX_GUEST_HELLO, secret, PYBOX_GUEST_CTL_PROGRAM, len);
    pybox_buf_t in;
    pybox_buf_init(&in, 0);
    if (pybox_buf_append(&in, hello, (size_t)hl) < 0 || pybox_buf_append(&in, program, len) < 0) {
        pybox_buf_free(&in);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the program's bytes");
    }
    size_t off = 0;
    int64_t t0 = pybox_now_ms(), kill_at = -1;
    bool out_end = false, err_end = false, released = false;
    int infd = pybox_native_stdin(b);
    while (!(out_end && err_end)) {
        int64_t now = pybox_now_ms();
        if (!r->rec.seen && !r->stopped && now - t0 >= deadline_ms) {
            r->stopped = true;
            (void)pybox_native_signal(b, PYBOX_GUEST_SIG_STOP, err);
            kill_at = now + PYBOX_STOP_GRACE_MS;
        }
        if (kill_at >= 0 && now >= kill_at && !r->killed) {
            r->killed = true;
            (void)pybox_native_signal(b, SIGKILL, err);
        }
        struct pollfd p[4] = {
            {.fd = out_end ? -1 : pybox_native_stdout(b), .events = POLLIN},
            {.fd = err_end ? -1 : pybox_native_stderr(b), .events = POLLIN},
            {.fd = (infd >= 0 && off < in.len) ? infd : -1, .events = POLLOUT},
            {.fd = pybox_native_pidfd(b), .events = POLLIN},
        };
        int pr = poll(p, 4, 50);
        if (pr < 0 && errno != EINTR) {
            pybox_buf_free(&in);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "poll");
        }
        if (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t w = pybox_write_some(infd, in.data + off, in.len - off);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                off = in.len;
        }
        /* Asked before reading: once init has ended, what the pipes hold is all the box
         * said, whether or not they reach their end (a write end may be held in flight). */
        bool ended = (p[3].revents & POLLIN) && pybox_native_ended(b);
        if (p[0].revents || ended)
            out_end = drain(pybox_native_stdout(b), &r->out) == 1 || ended;
        if (p[1].revents || ended)
            err_end = drain(pybox_native_stderr(b), &r->err) == 1 || ended;
        if (!r->rec.seen) {
            pybox_error_t ignored = {0};
            if (pybox_done_record_find(&r->out, secret, &r->rec, &ignored) == 1) {
                r->rec.seen = true;
                pybox_native_held(b);
                if (held != NULL)
                    held(b, arg);
            }
        }
        if (r->rec.seen && !released && off == in.len) {
            released = true;
            ssize_t w = pybox_write_some(infd, "R", 1);
            (void)w;
            pybox_native_close_stdin(b);
            infd = -1;
            kill_at = pybox_now_ms() + PYBOX_RELEASE_GRACE_MS;
        }
    }
    pybox_buf_free(&in);
    return pybox_native_wait(b, PYBOX_RELEASE_GRACE_MS, &r->end, err);
}
