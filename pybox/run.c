/* SPDX-License-Identifier: MIT */
/* One run, step by step (see run.h and docs/receipt.md). */
#include "run.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../guest/proto.h"
#include "bounds.h"
#include "escape.h"
#include "journal.h"
#include "leftovers.h"
#include "run_flow.h"
#include "uid.h"
#include "util.h"

const char *pybox_end_word(pybox_end_t end)
{
    static const char *const words[] = {
        [PYBOX_END_NONE] = "NOT_RUN",
        [PYBOX_END_TARGET_EXIT] = "TARGET_EXIT_OBSERVED",
        [PYBOX_END_SUPERVISOR_KILL] = "SUPERVISOR_KILL_OBSERVED",
        [PYBOX_END_BOX_TIMER_KILL] = "BOX_TIMER_KILL_OBSERVED",
        [PYBOX_END_UNEXPLAINED] = "BOX_END_UNEXPLAINED",
        [PYBOX_END_EXTERNAL_STOP] = "EXTERNAL_STOP_OBSERVED",
        [PYBOX_END_PYBOX_ERROR] = "PYBOX_ERROR",
        [PYBOX_END_CANCELLED] = "CANCELLED",
        [PYBOX_END_SESSION_CALL] = "SESSION_CALL_ENDED",
        [PYBOX_END_SESSION_CLOSED] = "SESSION_CLOSED_OBSERVED",
    };
    return (unsigned)end < sizeof words / sizeof *words && words[end] != NULL ? words[end] : "?";
}

bool pybox_run_has_error(const pybox_run_result_t *res)
{
    return res->end == PYBOX_END_PYBOX_ERROR || res->end == PYBOX_END_EXTERNAL_STOP ||
           res->end == PYBOX_END_CANCELLED || res->error.kind != PYBOX_ERR_NONE;
}

volatile sig_atomic_t pybox_interrupt_signal;

void pybox_flow_unknown(pybox_run_result_t *res, const char *fmt, ...)
{
    if (res->n_unknown >= PYBOX_UNKNOWN_MAX)
        return;
    /* whole: a note is never cut (a cut could fall inside a character it quotes) */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    res->unknown[res->n_unknown++] = s;
}

static void step(const pybox_run_request_t *req, const pybox_run_result_t *res, const char *name)
{
    if (req->hook != NULL)
        req->hook(name, res->run_id, req->hook_arg);
}

double pybox_flow_since(double t)
{
    return (pybox_now_s() - t) * 1000.0;
}

static int on_output(void *arg, int stream, const char *data, size_t len)
{
    pybox_run_result_t *res = arg;
    return pybox_sink_add(stream == 1 ? &res->out : &res->err, data, len);
}

typedef pybox_feed_t feed_t;
#define PH_READYING PYBOX_PH_READYING
#define PH_RUNNING PYBOX_PH_RUNNING
#define PH_CALLING PYBOX_PH_CALLING
#define PH_CALL_TAIL PYBOX_PH_CALL_TAIL
#define PH_CLOSING PYBOX_PH_CLOSING
#define PH_STOPPING PYBOX_PH_STOPPING
#define PH_RELEASING PYBOX_PH_RELEASING
#define PH_KILLED PYBOX_PH_KILLED

/* Tell the box's init: through its stdin when that still works, else by a signal
 * from outside the box through the backend. Returns -1 on a PyBox failure. */
static int command(feed_t *f, char ctl, int sig, pybox_run_result_t *res)
{
    if (f->off == f->q.len && f->q.len > 0) {
        /* All sent: start the queue over (a session's queue would otherwise grow). */
        explicit_bzero(f->q.data, f->q.len);
        f->q.len = 0;
        f->off = 0;
        f->input_len = 0;
    }
    if (!f->broken && pybox_buf_append(&f->q, &ctl, 1) == 0)
        return 0;
    /* When this fails too, the deadline that follows kills the box through the backend. */
    pybox_error_t serr = {0};
    if (f->box->ops->signal(f->box, sig, &serr) < 0)
        pybox_flow_unknown(res, "signal %d to the box's init failed: %s", sig, serr.msg);
    return 0;
}

/* While the box is held: copy /box/out (a tmpfs volume that is gone once the box ends). */
static void take_files(feed_t *f, pybox_run_result_t *res)
{
    double t = pybox_now_s();
    size_t max = (size_t)(res->policy.out_bytes + res->policy.out_bytes / 4 + 1024 * 1024);
    pybox_error_t ferr = {0};
    bool running = false;
    if (f->box->ops->get_files(f->box, max, &f->out_tar, &ferr) < 0) {
        res->outputs.status = PYBOX_OUT_NOT_RECEIVED;
        pybox_strlcpy(res->outputs.reason,
                      ferr.errnum == EFBIG ? "the box's archive of its output folder is larger than the limit"
                                           : ferr.msg,
                      sizeof res->outputs.reason);
    } else if (f->box->ops->running(f->box, &running, &ferr) < 0 || !running) {
        /* The folder lives only while the box runs: once it stopped, a copy reads a fresh,
         * empty one. Only a copy the box outlived is the program's output. */
        res->outputs.status = PYBOX_OUT_NOT_RECEIVED;
        snprintf(res->outputs.reason, sizeof res->outputs.reason, "%s",
                 ferr.msg[0] ? "whether the box was still held when its output folder was copied is not "
                               "known"
                             : "the box stopped before its output folder was copied whole");
        pybox_buf_free(&f->out_tar);
        pybox_buf_init(&f->out_tar, 0);
    } else {
        f->have_out = true;
    }
    res->t.files_out_ms = pybox_flow_since(t);
}

static bool cancelled(const pybox_run_request_t *req)
{
    if (!req->cancellable)
        return false;
    struct pollfd p = {.fd = req->cancel_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* A clock ran out: the host's deadline (ask the box's init to stop the program and
 * hold, so the end can still be observed), then the grace periods (kill the box through
 * the backend, which may be slow to do it under load). Returns -1 on a PyBox failure. */
static int clock_ran_out(feed_t *f, pybox_run_result_t *res, int64_t now)
{
    switch (f->phase) {
    case PH_READYING:
        return pybox_error_set(&res->error, PYBOX_ERR_PROTOCOL, ETIMEDOUT,
                               "the box's interpreter did not say it was ready within %d s", PYBOX_READY_MAX_MS / 1000);
    case PH_CALL_TAIL:
        /* The call's stderr did not all come: what came is the call's, and the flow goes on. */
        pybox_flow_unknown(res, "the call's stderr: %llu of the %llu bytes the box's init relayed came in time",
                           (unsigned long long)res->err.total, (unsigned long long)f->call_err);
        f->early = true;
        return 0;
    case PH_RUNNING:
    case PH_CALLING:
        res->deadline_fired = !res->interrupted;
        if (command(f, PYBOX_GUEST_CTL_STOP, PYBOX_GUEST_SIG_STOP, res) < 0)
            return -1;
        f->phase = PH_STOPPING;
        f->deadline = now + PYBOX_STOP_GRACE_MS;
        return 0;
    case PH_CLOSING:
    case PH_STOPPING:
    case PH_RELEASING: {
        /* A box that had ended already (its output held open after its end) was not
         * killed: the backend says so (1). */
        pybox_error_t kerr = {0};
        int kr = f->box->ops->signal(f->box, SIGKILL, &kerr);
        if (kr < 0)
            pybox_flow_unknown(res, "the backend's kill of the box failed at first: %s", kerr.msg);
        res->box_killed = res->box_killed || kr != 1;
        f->phase = PH_KILLED;
        f->deadline = now + 30000;
        return 0;
    }
    case PH_KILLED:
        return pybox_error_set(&res->error, PYBOX_ERR_ENGINE, ETIMEDOUT,
                               "the box's output did not end after it was killed");
    }
    return 0;
}

/* The init's record is in: every process of the program has ended and the box is held.
 * This is where the final reading and the files are taken; then the box is released. */
static int program_ended(feed_t *f, pybox_run_result_t *res)
{
    res->t.run_ms = pybox_flow_since(f->t_start);
    step(f->req, res, PYBOX_STEP_ENDED);
    if (res->watched) {
        /* Every process has ended but the box and its cgroup still exist, so peaks and
         * counts are complete. */
        double t = pybox_now_s();
        pybox_watch_sample(&res->watch, pybox_now_ms(), &res->final);
        res->t.final_read_ms = pybox_flow_since(t);
        res->final_taken = res->final.vanished == 0;
    }
    if (f->phase == PH_KILLED)
        return 0;
    if (res->output_asked)
        take_files(f, res);
    if (f->box->ops->held != NULL)
        f->box->ops->held(f->box);
    if (command(f, PYBOX_GUEST_CTL_RELEASE, PYBOX_GUEST_SIG_RELEASE, res) < 0)
        return -1;
    f->phase = PH_RELEASING;
    f->deadline = pybox_now_ms() + PYBOX_RELEASE_GRACE_MS;
    return 0;
}

/* Write what is waiting for the box's stdin. */
static void feed_some(feed_t *f, pybox_run_result_t *res)
{
    ssize_t w = f->box->ops->io_write(f->box, f->q.data + f->off, f->q.len - f->off, NULL);
    if (w > 0)
        f->off += (size_t)w;
    else if (w < 0 && errno != EAGAIN)
        f->broken = true; /* the box no longer reads; commands go by signal */
    if (f->off >= f->input_len && !res->input_complete) {
        res->input_complete = true;
        step(f->req, res, PYBOX_STEP_RUNNING);
    }
}

/* Read what the box said. Returns 1 when its output ended, 0 for more, -1 on failure. */
static int read_some(feed_t *f, pybox_run_result_t *res)
{
    int r = f->box->ops->io_read(f->box, on_output, res, &res->error);
    if (r < 0)
        return -1;
    if (f->phase == PH_READYING && !f->ready->seen) {
        int found = pybox_ready_record_find(&res->out, f->secret, f->ready, &res->error);
        if (found < 0)
            return -1;
        if (found == 1) {
            f->early = true;
            return 0;
        }
    }
    if (f->phase == PH_CALLING && !f->call->seen) {
        int found = pybox_call_record_find(&res->out, f->secret, f->call, &res->error);
        if (found < 0)
            return -1;
        if (found == 1 && f->call->alive) {
            /* Init relayed the call's stderr before its record: it is here, or on its way. */
            res->t.run_ms = pybox_flow_since(f->t_start);
            f->call_err = f->call->err;
            f->phase = PH_CALL_TAIL;
            f->deadline = pybox_now_ms() + PYBOX_CALL_TAIL_MS;
        }
    }
    if (f->phase == PH_CALL_TAIL && res->err.total >= f->call_err) {
        f->early = true;
        return 0;
    }
    if (!res->record.seen) {
        int found = pybox_done_record_find(&res->out, f->secret, &res->record, &res->error);
        if (found < 0 || (found == 1 && program_ended(f, res) < 0))
            return -1;
    }
    if (r == 1 && !res->record.seen)
        res->t.run_ms = pybox_flow_since(f->t_start);
    return r;
}

/* Feed the program, read everything the box says, and drive the two clocks until the
 * box's output ends. Returns -1 on a PyBox failure (res->error). */
static int io_loop(feed_t *f, pybox_run_result_t *res)
{
    f->early = false;
    int in_fd, out_fds[2], n_out;
    /* Bytes may already be waiting in the backend's own buffer (they came with the
     * attach answer) where poll() cannot see them: read once before polling. */
    bool read_first = true;
    for (;;) {
        /* Asked again each time: a stream that ended is no longer to be polled (a pipe at
         * its end is always "ready", and polling it would spin). */
        f->box->ops->io_fds(f->box, &in_fd, out_fds, &n_out);
        int64_t now = pybox_now_ms();
        int stop_sig = pybox_interrupt_signal ? pybox_interrupt_signal : (cancelled(f->req) ? -1 : 0);
        if (stop_sig != 0 && !res->interrupted) {
            res->interrupted = stop_sig;
            if (f->phase == PH_READYING)
                return pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, EINTR, "stopped before the box was ready");
            if (f->phase == PH_RUNNING || f->phase == PH_CALLING || f->phase == PH_CALL_TAIL) {
                f->phase = PH_RUNNING;
                f->deadline = now; /* stop the program as at a deadline, then remove the box */
            }
        }
        if (now >= f->deadline) {
            if (clock_ran_out(f, res, now) < 0)
                return -1;
            if (f->early)
                return 0;
            continue;
        }
        /* [0..n_out) what the box says, then its stdin when it is another descriptor,
         * then the box's end when the backend has a descriptor for it, then the cancel
         * descriptor (watched until the cancel is noted: it stays readable). */
        struct pollfd ps[5];
        nfds_t n = 0;
        bool want_out = !f->broken && f->off < f->q.len;
        int in_at = -1;
        for (int i = 0; i < n_out; i++) {
            ps[n] = (struct pollfd){.fd = out_fds[i], .events = POLLIN};
            if (out_fds[i] == in_fd) {
                in_at = (int)n;
                if (want_out)
                    ps[n].events |= POLLOUT;
            }
            n++;
        }
        /* The stdin alone only while something waits for it: a pipe with no reader left
         * (every process of the box ended) is always "ready" (POLLERR), even for no event. */
        if (in_at < 0 && in_fd >= 0 && want_out) {
            in_at = (int)n;
            ps[n++] = (struct pollfd){.fd = in_fd, .events = POLLOUT};
        }
        int end_at = -1;
        int end_fd = f->box->ops->end_fd != NULL ? f->box->ops->end_fd(f->box) : -1;
        if (end_fd >= 0) {
            end_at = (int)n;
            ps[n++] = (struct pollfd){.fd = end_fd, .events = POLLIN};
        }
        if (f->req->cancellable && !res->interrupted)
            ps[n++] = (struct pollfd){.fd = f->req->cancel_fd, .events = POLLIN};
        int64_t wait = f->deadline - now;
        if (res->watched && !res->record.seen) {
            size_t before = res->watch.n_samples;
            int64_t next = pybox_watch_tick(&res->watch, now);
            if (next < wait)
                wait = next;
            if (f->req->tick != NULL && res->watch.n_samples != before && res->watch.have_last)
                f->req->tick(pybox_flow_since(f->t_start), &res->watch.last, f->req->hook_arg);
        }
        int pr;
        if (read_first) {
            read_first = false;
            pr = 1;
            for (nfds_t i = 0; i < n; i++)
                ps[i].revents = 0;
            ps[0].revents = POLLIN;
        } else {
            pr = poll(ps, n, (int)(wait > 60000 ? 60000 : wait));
        }
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, errno, "poll on the box's streams");
        }
        if (pr == 0)
            continue;
        if (want_out && in_at >= 0 && (ps[in_at].revents & (POLLOUT | POLLERR | POLLHUP)))
            feed_some(f, res);
        bool readable = false;
        for (int i = 0; i < n_out; i++)
            readable |= (ps[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        /* The box has ended: what its streams hold is all it said (io_read ends them). */
        if (end_at >= 0)
            readable |= (ps[end_at].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        if (readable) {
            int r = read_some(f, res);
            if (r != 0)
                return r < 0 ? -1 : 0;
            if (f->early)
                return 0;
        }
    }
}

/* Out of memory, with care: the backend's flag (an engine's record, the kernel's account
 * of the box's init) and the kernel's counter side by side, and only what they establish. */
static void memory_findings(pybox_run_result_t *res)
{
    const pybox_done_record_t *rec = &res->record;
    const pybox_reading_t *k = res->final_taken ? &res->final : (res->watch.have_last ? &res->watch.last : NULL);
    bool kernel_known = k != NULL && (k->valid & PYBOX_RD_OOM_KILLS);
    int64_t kills = kernel_known ? k->oom_kills : 0;
    bool backend_oom = res->have_exit && res->exit.oom_killed;
    /* The init's own account when there is one; else the backend's (some backends know
     * only the status, 128+n for signal n). */
    bool box_sigkill = res->exit.signal == SIGKILL || (res->exit.signal == 0 && res->exit.exit_code == 128 + SIGKILL);
    bool program_sigkill = rec->seen ? rec->signal == SIGKILL : box_sigkill;
    res->oom_finding = "none";
    if (!backend_oom && kills == 0) {
        if (!kernel_known)
            res->oom_finding = "kernel_not_read";
        if (box_sigkill && !rec->timer && !rec->stopped && !res->deadline_fired)
            pybox_flow_unknown(res,
                               "exit 137 (killed) without out-of-memory evidence and without a deadline: cause not "
                               "established");
        return;
    }
    if (!kernel_known)
        pybox_flow_unknown(res, "the backend reports an out-of-memory kill; the kernel's counter could not be read");
    if (program_sigkill && !rec->stopped && !rec->timer) {
        res->oom_finding = "program_killed";
        pybox_flow_unknown(res,
                           "the program was killed (signal 9) and the box ran out of memory (backend: %s, kernel: %lld "
                           "kill%s); that the kernel chose the program itself is not established",
                           backend_oom ? "yes" : "no", (long long)kills, kills == 1 ? "" : "s");
    } else if (rec->seen && !program_sigkill) {
        res->oom_finding = "other_process_killed";
        pybox_flow_unknown(res,
                           "a process in the box was killed for lack of memory (kernel: %lld kill%s) while the program "
                           "went on and ended by itself (%s %d); which process it was is not established",
                           (long long)kills, kills == 1 ? "" : "s", rec->signal ? "signal" : "exit",
                           rec->signal ? rec->signal : rec->exit_code);
    } else {
        res->oom_finding = "oom_in_box";
        pybox_flow_unknown(
            res,
            "the box ran out of memory (backend: %s, kernel: %lld kill%s); which process was killed is not "
            "established",
            backend_oom ? "yes" : "no", (long long)kills, kills == 1 ? "" : "s");
    }
}

static void judge(pybox_run_result_t *res)
{
    const pybox_done_record_t *rec = &res->record;
    if (!res->have_exit) {
        res->end = PYBOX_END_PYBOX_ERROR;
        res->exit_code = 125;
        pybox_error_set(&res->error, PYBOX_ERR_ENGINE, 0, "the backend gave no record of the box's end");
        return;
    }
    if (rec->seen && rec->term != 0 && !rec->stopped && !rec->timer) {
        /* Not the program's doing, not PyBox's: report it as a failure of the run. */
        res->end = PYBOX_END_EXTERNAL_STOP;
        res->exit_code = 125;
        pybox_error_set(&res->error, PYBOX_ERR_ENGINE, 0,
                        "the box was stopped from outside PyBox (signal %d to its init, e.g. the engine shutting "
                        "down); the program's own end was not reached",
                        rec->term);
    } else if (rec->seen && !rec->stopped && !rec->timer && strcmp(rec->end, "closed") == 0) {
        /* A session's end, asked by PyBox: its init killed what ran and said so. */
        res->end = PYBOX_END_SESSION_CLOSED;
        res->exit_code = 0;
    } else if (rec->seen && rec->stopped) {
        res->end = PYBOX_END_SUPERVISOR_KILL;
        res->exit_code = 124;
    } else if (rec->seen && rec->timer) {
        res->end = PYBOX_END_BOX_TIMER_KILL;
        res->exit_code = 124;
    } else if (rec->seen) {
        res->end = PYBOX_END_TARGET_EXIT;
        res->exit_code = res->exit.exit_code;
        if (res->deadline_fired)
            pybox_flow_unknown(res, "the program ended by itself as PyBox's deadline passed; "
                                    "which came first is not established");
    } else if (res->deadline_fired && res->box_killed) {
        res->end = PYBOX_END_SUPERVISOR_KILL;
        res->exit_code = 124;
        pybox_flow_unknown(res, "the box did not stop the program when asked; PyBox killed the box, so the "
                                "program's own end was not observed");
    } else {
        res->end = PYBOX_END_UNEXPLAINED;
        res->exit_code = res->exit.exit_code;
        pybox_flow_unknown(res, "the box ended without its init's record: how the program ended is not established");
    }
    if (rec->seen && rec->exit_code != res->exit.exit_code)
        pybox_flow_unknown(res, "the box's init saw exit %d, the backend recorded %d (the backend's is reported)",
                           rec->exit_code, res->exit.exit_code);
    memory_findings(res);
}

typedef pybox_run_state_t run_t;

int64_t pybox_flow_box_life_s(const pybox_policy_t *p)
{
    /* The init's clocks (guest/proto.h): its timer until the hello, then a cold box's
     * timer again, a warm box's wait and then the program's timer, a session's life and
     * then its hold (at most a call's timer). */
    int64_t ms =
        p->box_timer_ms + (p->box_life_ms > 0 ? p->box_life_ms + p->box_timer_ms : p->box_wait_ms + p->box_timer_ms);
    return (ms + 999) / 1000 + PYBOX_EXPIRY_MARGIN_S;
}

/* The box's identity, its clocks and expiry, the program's own user, the hello. */
int pybox_flow_begin(run_t *r)
{
    const pybox_run_request_t *req = r->req;
    pybox_run_result_t *res = r->res;
    memset(res, 0, sizeof *res);
    pybox_watch_init(&res->watch);
    pybox_sink_init(&res->out, PYBOX_OUTPUT_CAP);
    pybox_sink_init(&res->err, PYBOX_OUTPUT_CAP);
    pybox_outputs_init(&res->outputs);
    pybox_buf_init(&r->feed.q, 0);
    pybox_buf_init(&r->feed.out_tar, 0);
    r->feed.req = req;
    r->lease = (pybox_uid_lease_t)PYBOX_UID_LEASE_INIT;
    pybox_journal_init(&r->note);
    double t0 = pybox_now_s();
    r->origin = req->started_s > 0 && req->started_s <= t0 ? req->started_s : t0;
    res->t.before_ms = (t0 - r->origin) * 1000.0;
    res->policy = req->policy;
    res->end = PYBOX_END_NONE;
    res->exit_code = 125;
    pybox_wall_iso(res->started_wall, sizeof res->started_wall);
    pybox_cgroup_host(NULL, NULL, &res->host);
    snprintf(res->image_name, sizeof res->image_name, "%s", req->image_name ? req->image_name : "");
    if (req->pin != NULL)
        res->pin = *req->pin;
    snprintf(res->backend, sizeof res->backend, "%s", r->be->ops->name);
    snprintf(res->engine, sizeof res->engine, "%s", r->be->ops->describe(r->be));
    res->inputs = req->inputs;
    res->output_asked = req->output != NULL;
    pybox_policy_t *p = &res->policy;
    res->start.kind = p->box_wait_ms == 0   ? PYBOX_START_COLD
                      : p->box_life_ms == 0 ? PYBOX_START_WARM
                                            : PYBOX_START_SESSION;
    if (res->start.kind == PYBOX_START_COLD)
        pybox_strlcpy(res->start.why_cold, req->why_cold ? req->why_cold : "no warm box was asked for",
                      sizeof res->start.why_cold);
    if (pybox_random_hex(16, res->run_id, &res->error) < 0 ||
        pybox_random_hex(PYBOX_GUEST_SECRET_HEX / 2, r->secret, &res->error) < 0)
        return -1;
    if (res->start.kind == PYBOX_START_COLD) {
        p->mount_in = req->inputs != NULL;
        p->mount_out = req->output != NULL;
    } else {
        /* Made before its files are known: /box/in (filled when the program comes) and
         * /box/out are always there. */
        p->mount_in = p->mount_out = true;
    }
    p->out_bytes = p->memory_bytes < PYBOX_OUT_VOLUME_MAX ? p->memory_bytes : PYBOX_OUT_VOLUME_MAX;
    snprintf(p->run_id, sizeof p->run_id, "%s", res->run_id);
    /* Leftovers may be removed after this; never before the box's own clocks fired. */
    int64_t life_s = req->expiry_s > 0 ? req->expiry_s : PYBOX_EXPIRY_S;
    int64_t min_life = pybox_flow_box_life_s(p);
    p->expires = pybox_wall_s() + (life_s > min_life ? life_s : min_life);
    /* The program's own user, leased until the box is confirmed gone (or, should this
     * process die first, until the box's expiry, when it has certainly ended). */
    /* (An ordinary user's box always has one: its ids are mapped from the user's range,
     * and the shared-uid relaxation takes away its share of the user's quotas instead.) */
    if ((p->relax & PYBOX_RELAX_PROGRAM_ROOT) == 0 && ((p->relax & PYBOX_RELAX_SHARED_UID) == 0 || geteuid() != 0)) {
        const pybox_uid_range_t *u = req->uids;
        if ((u != NULL
                 ? pybox_uid_lease_take_in(u->dir, u->base, u->count, res->run_id, p->expires, &r->lease, &res->error)
                 : pybox_uid_lease_take(res->run_id, p->expires, &r->lease, &res->error)) < 0)
            return -1;
        p->program_uid = (uint32_t)r->lease.uid;
    }
    /* The box's stdin: the hello line for init; the program and commands follow. */
    if (pybox_buf_printf(&r->feed.q, "%s%s\n", PYBOX_GUEST_HELLO, r->secret) < 0)
        return pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, ENOMEM, "the box's input");
    r->feed.input_len = r->feed.q.len;
    r->feed.secret = r->secret;
    return 0;
}

int pybox_flow_queue_program(run_t *r)
{
    const pybox_run_request_t *req = r->req;
    pybox_run_result_t *res = r->res;
    pybox_sha256_hex(req->program, req->program_len, res->program_sha256);
    res->program_bytes = req->program_len;
    if (pybox_buf_printf(&r->feed.q, "%c%zu\n", PYBOX_GUEST_CTL_PROGRAM, req->program_len) < 0 ||
        pybox_buf_append(&r->feed.q, req->program, req->program_len) < 0)
        return pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, ENOMEM, "the box's input (%zu bytes)", req->program_len);
    r->feed.input_len = r->feed.q.len;
    return 0;
}

/* This installation's expired leftovers go first. A failure does not stop the run; it
 * is reported. */
void pybox_flow_housekeep(run_t *r)
{
    if (!r->req->housekeeping || r->req->state == NULL)
        return;
    double t = pybox_now_s();
    pybox_leftovers_report_t rep;
    pybox_error_t herr = {0};
    if (pybox_leftovers_clean_in(r->req->state, r->be, r->req->uids, false, true, &rep, &herr) == 0) {
        r->res->housekept = rep.removed;
    } else {
        r->res->housekept = -1;
        pybox_flow_unknown(r->res, "housekeeping before the run failed: %s", herr.msg);
    }
    pybox_leftovers_report_free(&rep);
    r->res->t.housekeeping_ms = pybox_flow_since(t);
}

/* The note comes before anything exists, so a crash from here on leaves a trail. */
int pybox_flow_note(run_t *r)
{
    if (r->req->state == NULL)
        return 0;
    return pybox_journal_open(r->req->state, r->res->run_id, r->be->ops->name, r->res->policy.expires, &r->note,
                              &r->res->error);
}

/* A step of the box's, timed into *ms. */
static int timed(pybox_box_t *box, int (*op)(pybox_box_t *, pybox_error_t *), double *ms, pybox_error_t *err)
{
    double t = pybox_now_s();
    int rc = op(box, err);
    *ms = pybox_flow_since(t);
    return rc;
}

int pybox_flow_put_inputs(run_t *r, const pybox_inputs_t *in)
{
    if (in == NULL)
        return 0;
    double t = pybox_now_s();
    int rc = r->box->ops->put_files(r->box, in->tar.data ? in->tar.data : "", in->tar.len, &r->res->error);
    r->res->t.files_in_ms = pybox_flow_since(t);
    return rc;
}

/* The box: made, verified, given its files and streams, started. A cancel before the
 * start means the program never runs. */
int pybox_flow_build(run_t *r, bool files)
{
    pybox_run_result_t *res = r->res;
    const pybox_run_request_t *req = r->req;
    double t = pybox_now_s();
    int rc = r->be->ops->create(r->be, &res->policy, &r->box, &res->error);
    res->t.create_ms = pybox_flow_since(t);
    if (rc < 0)
        return -1;
    pybox_box_t *box = r->box;
    res->created = true;
    snprintf(res->box_id, sizeof res->box_id, "%s", box->id);
    snprintf(res->box_name, sizeof res->box_name, "%s", box->name);
    snprintf(res->policy_sha256, sizeof res->policy_sha256, "%s", box->spec_sha256);
    step(req, res, PYBOX_STEP_CREATED);

    t = pybox_now_s();
    rc = box->ops->verify(box, &res->policy, &res->checked, &res->error);
    res->t.verify_ms = pybox_flow_since(t);
    if (rc < 0)
        return -1;
    res->verified = true;
    if (files && pybox_flow_put_inputs(r, req->inputs) < 0)
        return -1;
    if (timed(box, box->ops->open_io, &res->t.attach_ms, &res->error) < 0)
        return -1;
    if (cancelled(req)) {
        res->interrupted = -1;
        return -1;
    }
    /* The box lives at most twice its timer from its start, whenever that is: its user
     * stays leased that long from here (the start call's own bound included), however slow
     * the backend was so far. The lease is so written twice, and must be: taken (above)
     * with the run's expiry, it marks the uid held from before the box exists; only here
     * is the box's start, from which its life counts, known. */
    if (pybox_uid_lease_renew(&r->lease, res->run_id,
                              pybox_wall_s() + (PYBOX_BACKEND_CALL_MAX_MS + 999) / 1000 +
                                  pybox_flow_box_life_s(&res->policy),
                              &res->error) < 0)
        return -1;
    if (timed(box, box->ops->start, &res->t.start_ms, &res->error) < 0)
        return -1;
    res->started = true;
    step(req, res, PYBOX_STEP_STARTED);
    return 0;
}

/* The watcher: the box's cgroup exists from its start on. */
void pybox_flow_watch(run_t *r)
{
    pybox_run_result_t *res = r->res;
    double t = pybox_now_s();
    pybox_cgroup_loc_t loc;
    pybox_error_t werr = {0};
    res->watched = r->box->ops->cgroup(r->box, &loc, &werr) == 0 && pybox_watch_arm(&res->watch, &loc, &werr) == 0;
    if (!res->watched)
        pybox_strlcpy(res->watch_error, werr.msg, sizeof res->watch_error);
    res->t.arm_ms = pybox_flow_since(t);
}

int pybox_flow_io(run_t *r)
{
    r->feed.box = r->box;
    return io_loop(&r->feed, r->res);
}

int pybox_flow_peek(run_t *r)
{
    pybox_box_t *box = r->box;
    int in_fd, out_fds[2], n_out;
    box->ops->io_fds(box, &in_fd, out_fds, &n_out);
    struct pollfd ps[3];
    nfds_t n = 0;
    for (int i = 0; i < n_out; i++)
        ps[n++] = (struct pollfd){.fd = out_fds[i], .events = POLLIN};
    int end_fd = box->ops->end_fd != NULL ? box->ops->end_fd(box) : -1;
    if (end_fd >= 0)
        ps[n++] = (struct pollfd){.fd = end_fd, .events = POLLIN};
    if (n == 0)
        return 1; /* no stream left: the box has ended */
    int pr;
    do
        pr = poll(ps, n, 0);
    while (pr < 0 && errno == EINTR);
    if (pr <= 0)
        return 0;
    int rc = box->ops->io_read(box, on_output, r->res, &r->res->error);
    if (rc < 0)
        return -1;
    return rc == 1 || (end_fd >= 0 && (ps[n - 1].revents & (POLLIN | POLLHUP | POLLERR))) ? 1 : 0;
}

void pybox_flow_command(run_t *r, char ctl, int sig)
{
    (void)command(&r->feed, ctl, sig, r->res);
}

/* The backend's record of the box's end. Collecting counts from the program's end (the
 * done record) to that record. */
int pybox_flow_wait(run_t *r)
{
    pybox_run_result_t *res = r->res;
    int rc = r->box->ops->wait(r->box, 10000, &res->exit, &res->error);
    res->t.collect_ms = pybox_flow_since(r->feed.t_start) - res->t.run_ms - res->t.files_out_ms;
    if (rc < 0)
        return -1;
    /* The backend's record is outside data, and its exit status becomes PyBox's own: one
     * that no process can end with (256 would reach a shell as 0) is not a record. */
    if (res->exit.exit_code < 0 || res->exit.exit_code > 255)
        return pybox_error_set(&res->error, PYBOX_ERR_PROTOCOL, 0,
                               "the backend's record of the box's end says exit %d, which no process ends with",
                               res->exit.exit_code);
    res->have_exit = true;
    return 0;
}

/* The program runs under the two clocks; then the backend's record of the box's end. */
static int run_box(run_t *r)
{
    pybox_run_result_t *res = r->res;
    r->feed.t_start = pybox_now_s();
    r->feed.phase = PH_RUNNING;
    r->feed.deadline = (int64_t)(r->feed.t_start * 1000.0) + res->policy.timeout_ms;
    if (pybox_flow_io(r) < 0)
        return -1;
    return pybox_flow_wait(r);
}

/* Remove the box and confirm it is gone; a box not confirmed gone fails the run. */
static int remove_box(run_t *r, int rc)
{
    pybox_run_result_t *res = r->res;
    if (r->box == NULL)
        return rc;
    pybox_error_t rerr = {0};
    step(r->req, res, PYBOX_STEP_REMOVING);
    double t = pybox_now_s();
    if (r->box->ops->remove(r->box, &res->gone, &rerr) == 0)
        res->removed = true;
    res->t.remove_ms = pybox_flow_since(t);
    if (r->box->ops->after_end != NULL)
        r->box->ops->after_end(r->box, &res->after);
    if (!res->gone) {
        pybox_error_ensure(&rerr, PYBOX_ERR_ENGINE, "%s did not confirm the box removed and gave no reason",
                           r->be->ops->holder);
        pybox_flow_unknown(res, "the box %.12s could not be confirmed removed: %s", res->box_id, rerr.msg);
        if (rc == 0) {
            res->error = rerr;
            rc = -1;
        }
    }
    r->box->ops->free(r->box);
    r->box = NULL;
    return rc;
}

/* Files out: taken while the box was held; written now, with the box gone. The note
 * says where they are being written until they are in place, so a run killed in the
 * middle leaves a trail to the hidden folder for cleanup. Without that trail (a full
 * state directory) nothing is written: a folder no one could find again is worse than
 * none. */
static int files_out(run_t *r, int rc, bool backend_lost)
{
    pybox_run_result_t *res = r->res;
    const pybox_run_request_t *req = r->req;
    if (req->output == NULL)
        return rc;
    if (r->feed.have_out) {
        pybox_ingest_limits_t lim;
        pybox_ingest_limits_default(&lim);
        char tmp[PATH_MAX];
        pybox_error_t oerr = {0};
        bool trail = false;
        if (req->state != NULL) {
            if (pybox_output_tmp_path(req->output, res->run_id, tmp, sizeof tmp) < 0)
                pybox_error_set(&oerr, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "the hidden output folder's path is too long");
            else
                trail = pybox_journal_output_begin(req->state, res->run_id, tmp, &oerr) == 0;
        }
        if (req->state != NULL && !trail) {
            res->outputs.status = PYBOX_OUT_REFUSED;
            snprintf(res->outputs.reason, sizeof res->outputs.reason,
                     "the output was not written: its trail could not be recorded: %.*s",
                     (int)pybox_utf8_cut(oerr.msg, strlen(oerr.msg), 190), oerr.msg);
            if (rc == 0) {
                pybox_error_set(&res->error, PYBOX_ERR_STATE, 0,
                                "the output was not written: its trail could not be recorded: %s", oerr.msg);
                rc = -1;
            }
        } else {
            double t = pybox_now_s();
            if (pybox_outputs_ingest(r->feed.out_tar.data, r->feed.out_tar.len, req->output, res->run_id, &lim,
                                     &res->outputs, &res->error) < 0)
                rc = -1;
            res->t.files_out_ms += pybox_flow_since(t);
            if (trail) /* whatever happened, this process saw it through */
                pybox_journal_output_end(req->state, res->run_id);
        }
    } else if (res->outputs.status == PYBOX_OUT_NOT_ASKED) {
        res->outputs.status = PYBOX_OUT_NOT_RECEIVED;
        if (backend_lost)
            snprintf(res->outputs.reason, sizeof res->outputs.reason,
                     "%s failed before the output folder could be copied", r->be->ops->holder);
        else
            snprintf(res->outputs.reason, sizeof res->outputs.reason,
                     "the box ended before its output folder could be copied");
    }
    if (res->outputs.status != PYBOX_OUT_DELIVERED)
        pybox_flow_unknown(res, "no output folder was created: %s", res->outputs.reason);
    if (res->outputs.xattr_failed)
        pybox_flow_unknown(res, "the returned files could not be marked with the run's id (no user extended attributes "
                                "on this filesystem)");
    return rc;
}

int pybox_flow_take_output(run_t *r)
{
    take_files(&r->feed, r->res);
    int rc = files_out(r, 0, false);
    pybox_buf_free(&r->feed.out_tar);
    pybox_buf_init(&r->feed.out_tar, 0);
    r->feed.have_out = false;
    return rc;
}

/* The note closes, and the user is given back, only once nothing of the run is left;
 * otherwise both stay for cleanup (the lease until its expiry). */
static void close_note(run_t *r, bool created)
{
    pybox_run_result_t *res = r->res;
    if (!created || res->gone) {
        pybox_error_t nerr = {0};
        res->note_closed = pybox_journal_close(&r->note, &nerr) == 0;
        if (!res->note_closed)
            pybox_flow_unknown(res, "the run note could not be removed: %s", nerr.msg);
        pybox_uid_lease_release(&r->lease);
    } else {
        pybox_journal_abandon(&r->note);
        pybox_uid_lease_keep(&r->lease);
    }
}

/* What could not be established, said once the run is over. */
static void note_unknowns(run_t *r, bool backend_lost)
{
    pybox_run_result_t *res = r->res;
    const pybox_policy_t *p = &res->policy;
    if (res->started && !res->watched)
        pybox_flow_unknown(res, "the kernel's counters were not read: %s", res->watch_error);
    if (res->started && res->pin.custom)
        pybox_flow_unknown(res,
                           "the image '%s' is a custom one: its packages can run code when Python starts (.pth files, "
                           "sitecustomize), before the program, as part of the run",
                           res->pin.name);
    if (backend_lost && !res->gone)
        pybox_flow_unknown(
            res,
            "%s failed during the run: whether the box has ended is not known (its own timer ends it at the "
            "latest %.3g s after it started)",
            r->be->ops->holder, (double)p->box_timer_ms / 1000.0);
    const pybox_box_after_t *a = &res->after;
    char held[512];
    pybox_held_text(a->still, held, sizeof held);
    if (a->looked && a->still != 0)
        pybox_flow_unknown(
            res,
            "after the box's last process ended, descriptors in flight in unix sockets (the program's doing) still "
            "held %s%s: what they hold outlives the box, outside its limits, until the kernel's collector of such "
            "descriptors runs",
            held,
            a->collector < 0    ? "; PyBox did not run the collector (relaxed for a test)"
            : a->collector == 0 ? "; no pass of the collector was seen in time"
                                : "");
    else if (a->looked && a->collector == 0)
        pybox_flow_unknown(
            res,
            "no pass of the kernel's collector of descriptors in flight was seen within %d ms of the box's end: "
            "whether the program left memory, files or namespaces held in flight is not established",
            PYBOX_COLLECT_MS);
    else if (a->looked && a->collector < 0)
        pybox_flow_unknown(
            res, "the kernel's collector of descriptors in flight was not run after the box's end (relaxed for a "
                 "test): whether the program left memory, files or namespaces held in flight is not established");
    if (res->watched && !res->final_taken && backend_lost)
        pybox_flow_unknown(res,
                           "no final kernel reading: %s failed before the program's end was seen; the last sample is "
                           "reported",
                           r->be->ops->holder);
    else if (res->watched && !res->final_taken)
        pybox_flow_unknown(
            res, "no final kernel reading: the box ended before it could be held; the last sample is reported");
}

/* The verdict: PyBox's failure, a cancel, an interruption, or what the program did. */
static int verdict(run_t *r, int rc)
{
    pybox_run_result_t *res = r->res;
    if (res->interrupted == -1) {
        pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, 0,
                        "the run was cancelled: the program was stopped and its box %s",
                        res->gone ? "removed" : "NOT confirmed removed");
        res->end = PYBOX_END_CANCELLED;
        res->exit_code = 125;
        return -1;
    }
    if (rc < 0 && res->started && res->error.kind == PYBOX_ERR_ENGINE)
        pybox_error_prefix(&res->error, "%s failed during the run", r->be->ops->holder);
    if (rc < 0) {
        res->end = PYBOX_END_PYBOX_ERROR;
        res->exit_code = 125;
        return -1;
    }
    if (res->interrupted) {
        pybox_error_set(&res->error, PYBOX_ERR_SYSTEM, 0,
                        "PyBox was interrupted by signal %d: the program was stopped and its box %s", res->interrupted,
                        res->gone ? "removed" : "NOT confirmed removed");
        res->end = PYBOX_END_PYBOX_ERROR;
        res->exit_code = 125;
        return -1;
    }
    judge(res);
    return res->end == PYBOX_END_PYBOX_ERROR || res->end == PYBOX_END_EXTERNAL_STOP ? -1 : 0;
}

static int finish(run_t *r, int rc)
{
    pybox_run_result_t *res = r->res;
    /* The run failed while the box ran, before the box's end was seen (the engine gone,
     * its stream cut inside a frame, a host call failing): whether the box has ended is
     * not known, and nothing may be said as if it had. */
    bool backend_lost = rc < 0 && res->started && !res->record.seen && !res->have_exit;
    explicit_bzero(r->secret, sizeof r->secret);
    if (r->feed.q.data != NULL)
        explicit_bzero(r->feed.q.data, r->feed.q.len);
    pybox_buf_free(&r->feed.q);
    bool created = res->created;
    rc = remove_box(r, rc);
    rc = files_out(r, rc, backend_lost);
    close_note(r, created);
    pybox_buf_free(&r->feed.out_tar);
    note_unknowns(r, backend_lost);
    pybox_sink_said_program(&res->out, r->feed.call, &res->record, &res->said_out);
    pybox_sink_said(&res->err, 0, &res->said_err);
    res->t.total_ms = pybox_flow_since(r->origin);
    if (rc < 0 && res->end == PYBOX_END_NONE && !res->created && res->interrupted != -1) {
        res->end = PYBOX_END_PYBOX_ERROR;
        res->exit_code = 125;
        return -1;
    }
    return verdict(r, rc);
}

/* A failed run always says why. A step that failed without filling the error (against
 * error.h's contract: a backend's, the host's, PyBox's own) would leave the receipt
 * PYBOX_ERROR with an empty message, indistinguishable from any other; what the run had
 * reached is said instead, so that the failure can at least be placed. */
static void say_failure(const run_t *r)
{
    pybox_run_result_t *res = r->res;
    if (!pybox_run_has_error(res) || res->error.msg[0] != '\0')
        return;
    const char *where = !res->created                          ? "before the box was made"
                        : !res->verified                       ? "after the box was made, before it was verified"
                        : !res->started                        ? "after the box was verified, before it started"
                        : !res->record.seen && !res->have_exit ? "while the box ran, before its end was seen"
                        : !res->have_exit ? "after the program's end, before the backend's record of the box's end"
                        : !res->gone      ? "while the box was removed"
                                          : "after the box was removed";
    pybox_error_ensure(&res->error, PYBOX_ERR_SYSTEM,
                       "PyBox failed %s (%s, %s box) and the failing step gave no reason: a fault of PyBox", where,
                       r->be->ops->name,
                       res->start.kind == PYBOX_START_COLD   ? "cold"
                       : res->start.kind == PYBOX_START_WARM ? "warm"
                                                             : "session");
}

int pybox_flow_finish(run_t *r, int rc)
{
    rc = finish(r, rc);
    say_failure(r);
    return rc;
}

int pybox_run(pybox_backend_t *be, const pybox_run_request_t *req, pybox_run_result_t *res)
{
    run_t r = {.be = be, .req = req, .res = res};
    pybox_run_request_t cold = *req;
    cold.policy.box_wait_ms = cold.policy.box_life_ms = 0;
    r.req = &cold;
    r.feed.req = &cold;
    int rc = pybox_flow_begin(&r);
    if (rc == 0)
        rc = pybox_flow_queue_program(&r);
    if (rc == 0) {
        pybox_flow_housekeep(&r);
        rc = pybox_flow_note(&r);
    }
    if (rc == 0) {
        step(&cold, res, PYBOX_STEP_NOTED);
        rc = pybox_flow_build(&r, true);
        if (rc == 0) {
            pybox_flow_watch(&r);
            rc = run_box(&r);
        }
    }
    return pybox_flow_finish(&r, rc);
}

void pybox_run_result_free(pybox_run_result_t *res)
{
    pybox_watch_free(&res->watch);
    pybox_outputs_free(&res->outputs);
    pybox_sink_free(&res->out);
    pybox_sink_free(&res->err);
    for (int i = 0; i < res->n_unknown; i++)
        free(res->unknown[i]);
    res->n_unknown = 0;
}
