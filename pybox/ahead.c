/* SPDX-License-Identifier: MIT */
/* Boxes made before their program (see ahead.h). */
#include "ahead.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "files.h"
#include "limits.h"
#include "run_flow.h"
#include "util.h"

struct pybox_ahead {
    pybox_run_state_t r;     /* r.req and r.res point below */
    pybox_run_request_t req; /* the box's own (its policy), then the program's */
    pybox_run_result_t res;  /* what is known of the box so far */
    pybox_ready_record_t ready;
    double t_ready;
    unsigned calls; /* a session: the calls it was handed */
    double t_last;  /* a session: when its last call ended (or it was ready) */
    char session_id[33];
    /* a session: the names its calls put in /box/in (and which call put each), and their
     * bytes: /box/in lasts for the session, so a name is never given twice */
    char (*in_names)[NAME_MAX + 1];
    unsigned *in_call;
    size_t n_in;
    int64_t in_total;
};

static void ahead_free(pybox_ahead_t *a)
{
    free(a->in_names);
    free(a->in_call);
    free(a);
}

/* A comma-separated list of the module names in a JSON array (each checked as one). */
static void names_of(const cJSON *a, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    const cJSON *x;
    cJSON_ArrayForEach (x, a) {
        if (!cJSON_IsString(x))
            continue;
        const char *n = x->valuestring;
        if (n[0] == '\0' || strlen(n) > 200 ||
            strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != strlen(n))
            n = "(not a module name)";
        int w = snprintf(out + used, len - used, "%s%s", used ? "," : "", n);
        if (w < 0 || (size_t)w >= len - used) {
            out[used] = '\0';
            return;
        }
        used += (size_t)w;
    }
}

bool pybox_ahead_read_report(const char *report, size_t len, pybox_start_info_t *start)
{
    cJSON *j = cJSON_ParseWithLength(report, len);
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(j, "preload");
    const cJSON *imp = cJSON_GetObjectItemCaseSensitive(j, "imported");
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(j, "failed");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "ms");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "output_bytes");
    bool ok = cJSON_IsObject(j) && cJSON_IsArray(pre) && cJSON_IsArray(imp) &&
              (cJSON_IsNull(failed) || cJSON_IsString(failed)) && cJSON_IsNumber(ms) && cJSON_IsNumber(out);
    if (ok) {
        names_of(pre, start->preload, sizeof start->preload);
        names_of(imp, start->imported, sizeof start->imported);
        start->failed[0] = '\0';
        if (cJSON_IsString(failed)) {
            pybox_escape_short(start->failed, sizeof start->failed, failed->valuestring, 900);
            if (start->failed[0] == '\0')
                pybox_strlcpy(start->failed, "(said, without a reason)", sizeof start->failed);
        }
        start->preload_ms = ms->valuedouble >= 0 && ms->valuedouble < 1e9 ? ms->valuedouble : -1;
        start->preload_output_bytes = out->valuedouble >= 0 && out->valuedouble < 1e15 ? (int64_t)out->valuedouble : -1;
    }
    start->report_read = ok;
    cJSON_Delete(j);
    return ok;
}

/* Everything made for the box goes, and the note with it. */
static void drop(pybox_ahead_t *a)
{
    pybox_run_state_t *r = &a->r;
    r->res->interrupted = 0;
    (void)pybox_flow_finish(r, -1);
    pybox_run_result_free(&a->res);
    ahead_free(a);
}

int pybox_ahead_open(pybox_backend_t *be, const pybox_run_request_t *req, pybox_ahead_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (req->policy.box_wait_ms <= 0 || req->policy.box_life_ms < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "a box made ahead needs a wait");
    pybox_ahead_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a warm box");
    a->req = *req;
    a->req.program = NULL;
    a->req.program_len = 0;
    a->req.inputs = NULL;
    a->req.output = NULL;
    /* req's cancel (when it has one) stops the making and the readying: a box nobody
     * will get is removed at once, not after its preload. */
    a->r = (pybox_run_state_t){.be = be, .req = &a->req, .res = &a->res};
    pybox_run_state_t *r = &a->r;
    int rc = pybox_flow_begin(r);
    if (rc == 0) {
        pybox_flow_housekeep(r);
        rc = pybox_flow_note(r);
    }
    if (rc == 0)
        rc = pybox_flow_build(r, false);
    if (rc == 0) {
        pybox_wall_iso(a->res.start.made_at, sizeof a->res.start.made_at);
        pybox_flow_watch(r);
        r->feed.t_start = pybox_now_s();
        r->feed.phase = PYBOX_PH_READYING;
        r->feed.deadline = pybox_now_ms() + PYBOX_READY_MAX_MS;
        r->feed.ready = &a->ready;
        rc = pybox_flow_io(r);
        if (rc == 0 && !a->ready.seen)
            rc = pybox_error_set(
                &a->res.error, PYBOX_ERR_PROTOCOL, 0, "the box ended before its interpreter was ready%s%s",
                a->res.record.seen ? ": its init says " : "", a->res.record.seen ? a->res.record.end : "");
    }
    if (rc == 0) {
        pybox_start_info_t *st = &a->res.start;
        st->ready = a->ready;
        st->ready_ms = pybox_flow_since(r->feed.t_start);
        if (!pybox_ahead_read_report(a->ready.report, (size_t)a->ready.said, st))
            rc = pybox_error_set(&a->res.error, PYBOX_ERR_PROTOCOL, 0,
                                 "the box's bootstrap gave no report of its preload that PyBox could read");
        else if (st->failed[0] != '\0')
            rc = pybox_error_set(&a->res.error, PYBOX_ERR_STATE, 0, "the image's preload failed: %s", st->failed);
    }
    if (rc < 0) {
        *err = a->res.error;
        if (a->res.interrupted == -1 && err->msg[0] == '\0')
            pybox_error_set(err, PYBOX_ERR_SYSTEM, ECANCELED, "cancelled while the box was made");
        drop(a);
        return -1;
    }
    /* A call's cancel is its own, given with it. */
    a->req.cancellable = false;
    a->req.cancel_fd = -1;
    /* What comes from here on is the program's: the report and the record are the box's. */
    pybox_sink_free(&a->res.out);
    pybox_sink_init(&a->res.out, PYBOX_OUTPUT_CAP);
    a->t_ready = a->t_last = pybox_now_s();
    *out = a;
    return 0;
}

bool pybox_ahead_usable(pybox_ahead_t *a, int64_t max_wait_ms, char *why, size_t len)
{
    double waited = pybox_flow_since(a->t_ready);
    if (waited > (double)max_wait_ms) {
        snprintf(why, len, "it waited %.0f ms, longer than the %lld ms a box may wait", waited, (long long)max_wait_ms);
        return false;
    }
    int ended = pybox_flow_peek(&a->r);
    /* Its init's done record says it ended, though the box (held) goes on. */
    if (ended == 0 &&
        (a->res.record.seen || pybox_done_record_find(&a->res.out, a->r.secret, &a->res.record, NULL) == 1))
        ended = 1;
    if (ended != 0) {
        snprintf(why, len, "%s", ended < 0 ? a->res.error.msg : "it ended while it waited");
        if (a->res.record.seen || pybox_done_record_find(&a->res.out, a->r.secret, &a->res.record, NULL) == 1)
            snprintf(why, len, "it ended while it waited (its init says: %s, exit %d)", a->res.record.end,
                     a->res.record.exit_code);
        return false;
    }
    if (a->res.out.total > 0 || a->res.err.total > 0) {
        snprintf(why, len, "it wrote %llu bytes while it waited, with no program",
                 (unsigned long long)(a->res.out.total + a->res.err.total));
        return false;
    }
    return true;
}

const pybox_policy_t *pybox_ahead_policy(const pybox_ahead_t *a)
{
    return &a->res.policy;
}

double pybox_ahead_ready_at(const pybox_ahead_t *a)
{
    return a->t_ready;
}

void pybox_ahead_discard(pybox_ahead_t *a)
{
    if (a != NULL)
        drop(a);
}

/* A run's or a call's request taken on the box made ahead (its program, cancellation,
 * hook and start); t0 is now. Returns its deadline: the program's own request, on the box
 * made for the image's policy, may be shorter than the box's, never longer (the box's
 * timer is in its verified argv). */
static int64_t take_request(pybox_ahead_t *a, const pybox_run_request_t *req, double t0)
{
    const pybox_run_result_t *box = &a->res;
    a->req.program = req->program;
    a->req.program_len = req->program_len;
    a->req.inputs = req->inputs;
    a->req.output = req->output;
    a->req.cancellable = req->cancellable;
    a->req.cancel_fd = req->cancel_fd;
    a->req.hook = req->hook;
    a->req.hook_arg = req->hook_arg;
    a->req.started_s = req->started_s;
    a->r.feed.req = &a->req;
    a->r.origin = req->started_s > 0 && req->started_s <= t0 ? req->started_s : t0;
    return req->policy.timeout_ms > 0 && req->policy.timeout_ms < box->policy.timeout_ms ? req->policy.timeout_ms
                                                                                         : box->policy.timeout_ms;
}

/* The program has arrived in the box (it waited since `since`): the deadline, its time
 * and the kernel's counters count from now; the box's whole counts are kept beside them.
 * Then its input and output until the phase ends. */
static int arrive(pybox_ahead_t *a, double since, pybox_phase_t phase, int64_t timeout)
{
    pybox_run_state_t *r = &a->r;
    pybox_run_result_t *box = &a->res;
    pybox_start_info_t *st = &box->start;
    r->feed.t_start = pybox_now_s();
    st->waited_ms = (r->feed.t_start - since) * 1000.0;
    if (box->watched) {
        int64_t now = pybox_now_ms();
        pybox_watch_sample(&box->watch, now, &st->at_arrival);
        st->at_arrival_taken = st->at_arrival.valid != 0;
        pybox_watch_restart(&box->watch, now);
    }
    r->feed.phase = phase;
    r->feed.deadline = (int64_t)(r->feed.t_start * 1000.0) + timeout;
    return pybox_flow_io(r);
}

int pybox_ahead_run(pybox_ahead_t *a, const pybox_run_request_t *req, pybox_run_result_t *res)
{
    pybox_run_state_t *r = &a->r;
    pybox_run_result_t *box = &a->res;
    double t0 = pybox_now_s();
    int64_t timeout = take_request(a, req, t0);
    box->policy.timeout_ms = timeout;
    box->inputs = req->inputs;
    box->output_asked = req->output != NULL;
    pybox_wall_iso(box->started_wall, sizeof box->started_wall);
    /* The box's own phases were before the program: said apart, not as this run's. */
    pybox_start_info_t *st = &box->start;
    st->create_ms = box->t.create_ms;
    st->verify_ms = box->t.verify_ms;
    st->attach_ms = box->t.attach_ms;
    st->start_ms = box->t.start_ms;
    st->arm_ms = box->t.arm_ms;
    memset(&box->t, 0, sizeof box->t);
    box->t.before_ms = (t0 - r->origin) * 1000.0;
    int rc = pybox_flow_queue_program(r);
    if (rc == 0)
        rc = pybox_flow_put_inputs(r, req->inputs);
    if (rc == 0)
        rc = arrive(a, a->t_ready, PYBOX_PH_RUNNING, timeout);
    if (rc == 0)
        rc = pybox_flow_wait(r);
    rc = pybox_flow_finish(r, rc);
    *res = a->res; /* the sinks, the samples and the notes move with it */
    ahead_free(a);
    return rc;
}

/* ---- sessions ---- */

const pybox_run_result_t *pybox_ahead_seen(const pybox_ahead_t *a)
{
    return &a->res;
}

void pybox_ahead_set_session(pybox_ahead_t *a, const char *session_id)
{
    pybox_strlcpy(a->session_id, session_id, sizeof a->session_id);
    pybox_strlcpy(a->res.start.session_id, session_id, sizeof a->res.start.session_id);
}

unsigned pybox_ahead_calls(const pybox_ahead_t *a)
{
    return a->calls;
}

double pybox_ahead_idle_since(const pybox_ahead_t *a)
{
    return a->t_last;
}

int pybox_ahead_inputs_check(const pybox_ahead_t *a, const pybox_inputs_t *in, pybox_error_t *err)
{
    if (in == NULL)
        return 0;
    for (size_t i = 0; i < in->n_tops; i++)
        for (size_t j = 0; j < a->n_in; j++)
            if (strcmp(in->tops[i], a->in_names[j]) == 0) {
                char shown[256];
                pybox_escape_short(shown, sizeof shown, in->tops[i], 200);
                return pybox_error_set(err, PYBOX_ERR_USAGE, EEXIST,
                                       "%s/%s is there already: call %u of this session put it there, and a "
                                       "session's %s lasts for the session; give the new one another name",
                                       PYBOX_BOX_IN, shown, a->in_call[j], PYBOX_BOX_IN);
            }
    if (a->in_total + in->total > PYBOX_INPUT_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EFBIG,
                               "the session's inputs would be %lld bytes, more than the %lld a session's %s takes "
                               "(its earlier calls put %lld bytes there)",
                               (long long)(a->in_total + in->total), (long long)PYBOX_INPUT_MAX, PYBOX_BOX_IN,
                               (long long)a->in_total);
    return 0;
}

/* A call's inputs into /box/in, their names and bytes noted for the session. */
static int put_inputs(pybox_ahead_t *a, const pybox_inputs_t *in, unsigned k)
{
    pybox_run_result_t *box = &a->res;
    if (pybox_ahead_inputs_check(a, in, &box->error) < 0)
        return -1;
    char(*names)[NAME_MAX + 1] = realloc(a->in_names, (a->n_in + in->n_tops) * sizeof *names);
    if (names != NULL)
        a->in_names = names;
    unsigned *calls = realloc(a->in_call, (a->n_in + in->n_tops) * sizeof *calls);
    if (calls != NULL)
        a->in_call = calls;
    if (names == NULL || calls == NULL)
        return pybox_error_set(&box->error, PYBOX_ERR_SYSTEM, ENOMEM, "the session's inputs");
    if (pybox_flow_put_inputs(&a->r, in) < 0)
        return -1;
    for (size_t i = 0; i < in->n_tops; i++) {
        memcpy(a->in_names[a->n_in], in->tops[i], sizeof *names);
        a->in_call[a->n_in++] = k;
    }
    a->in_total += in->total;
    return 0;
}

/* The call's own result from what the box holds: the box's identity and policy, the
 * call's streams (taken from the box, whose sinks start afresh for the next call), its
 * readings (at its start and end, and the samples while it ran). */
static void call_result(pybox_ahead_t *a, const pybox_run_request_t *req, const pybox_call_record_t *rec,
                        int64_t timeout, double t0, pybox_run_result_t *res)
{
    pybox_run_result_t *box = &a->res;
    memset(res, 0, sizeof *res);
    pybox_watch_init(&res->watch);
    pybox_outputs_init(&res->outputs);
    memcpy(res->run_id, box->run_id, sizeof res->run_id);
    memcpy(res->box_name, box->box_name, sizeof res->box_name);
    pybox_wall_iso(res->started_wall, sizeof res->started_wall);
    res->policy = box->policy;
    res->policy.timeout_ms = timeout;
    memcpy(res->image_name, box->image_name, sizeof res->image_name);
    res->pin = box->pin;
    pybox_sha256_hex(req->program, req->program_len, res->program_sha256);
    res->program_bytes = req->program_len;
    memcpy(res->policy_sha256, box->policy_sha256, sizeof res->policy_sha256);
    memcpy(res->box_id, box->box_id, sizeof res->box_id);
    memcpy(res->backend, box->backend, sizeof res->backend);
    memcpy(res->engine, box->engine, sizeof res->engine);
    res->host = box->host;
    res->created = box->created;
    res->verified = box->verified;
    res->started = box->started;
    res->checked = box->checked;
    res->start = box->start;
    res->input_complete = box->input_complete;
    res->deadline_fired = false;
    res->watched = box->watched;
    memcpy(res->watch_error, box->watch_error, sizeof res->watch_error);
    if (box->watched) {
        /* The call's own samples; the box's watcher starts afresh for the next call. */
        res->watch.version = box->watch.version;
        memcpy(res->watch.where, box->watch.where, sizeof res->watch.where);
        res->watch.armed_at_ms = box->watch.armed_at_ms;
        res->watch.arm_ms = box->watch.arm_ms;
        res->watch.interval_ms = box->watch.interval_ms;
        if (box->watch.n_samples > 0) {
            res->watch.samples = malloc(box->watch.n_samples * sizeof *res->watch.samples);
            if (res->watch.samples != NULL) {
                memcpy(res->watch.samples, box->watch.samples, box->watch.n_samples * sizeof *res->watch.samples);
                res->watch.n_samples = box->watch.n_samples;
            }
        }
        double t = pybox_now_s();
        pybox_watch_sample(&box->watch, pybox_now_ms(), &res->final);
        res->t.final_read_ms = pybox_flow_since(t);
        res->final_taken = res->final.vanished == 0;
        res->watch.last = res->final;
        res->watch.have_last = true;
    }
    /* The call's streams: what came before its report and record (stdout), all of its
     * stderr (init wrote it before the record). */
    res->out = box->out;
    res->err = box->err;
    pybox_sink_init(&box->out, PYBOX_OUTPUT_CAP);
    pybox_sink_init(&box->err, PYBOX_OUTPUT_CAP);
    pybox_sink_said_program(&res->out, rec, NULL, &res->said_out);
    pybox_sink_said(&res->err, 0, &res->said_err);
    /* Its files: what it put in /box/in, and /box/out as it stood at its end. */
    res->inputs = req->inputs;
    res->output_asked = req->output != NULL;
    res->outputs = box->outputs;
    pybox_outputs_init(&box->outputs);
    res->start.call = rec->call;
    res->start.session_goes_on = true;
    res->start.call_init_ms = rec->call_ms;
    pybox_escape_short(res->start.call_report, sizeof res->start.call_report, rec->report, PYBOX_GUEST_SAID_MAX);
    /* What could not be established during the call is the call's. */
    for (int i = 0; i < box->n_unknown; i++)
        res->unknown[i] = box->unknown[i];
    res->n_unknown = box->n_unknown;
    box->n_unknown = 0;
    res->t.before_ms = box->t.before_ms;
    res->t.files_in_ms = box->t.files_in_ms;
    res->t.files_out_ms = box->t.files_out_ms;
    res->t.run_ms = pybox_flow_since(a->r.feed.t_start);
    res->t.total_ms = pybox_flow_since(t0);
    res->end = PYBOX_END_SESSION_CALL;
    res->exit_code = 0;
}

int pybox_ahead_call(pybox_ahead_t *a, const pybox_run_request_t *req, pybox_run_result_t *res, bool *ended)
{
    pybox_run_state_t *r = &a->r;
    pybox_run_result_t *box = &a->res;
    *ended = false;
    double t0 = pybox_now_s();
    int64_t timeout = take_request(a, req, t0);
    unsigned k = ++a->calls;
    memset(&box->t, 0, sizeof box->t);
    box->t.before_ms = (t0 - r->origin) * 1000.0;
    box->input_complete = false;
    box->inputs = req->inputs;
    box->output_asked = req->output != NULL;
    pybox_outputs_free(&box->outputs);
    pybox_outputs_init(&box->outputs);
    /* Its files first, then the call, with its own timer for the init (the box's own
     * clock is the most). */
    int rc = req->inputs != NULL ? put_inputs(a, req->inputs, k) : 0;
    if (rc == 0 && (pybox_buf_printf(&r->feed.q, "%c%zu %lld\n", PYBOX_GUEST_CTL_CALL, req->program_len,
                                     (long long)pybox_limit_box_timer_ms(timeout)) < 0 ||
                    pybox_buf_append(&r->feed.q, req->program, req->program_len) < 0))
        rc = pybox_error_set(&box->error, PYBOX_ERR_SYSTEM, ENOMEM, "the call's input (%zu bytes)", req->program_len);
    r->feed.input_len = r->feed.q.len;
    pybox_call_record_t rec;
    memset(&rec, 0, sizeof rec);
    pybox_start_info_t *st = &box->start;
    if (rc == 0) {
        st->call = k;
        r->feed.call = &rec;
        rc = arrive(a, a->t_last, PYBOX_PH_CALLING, timeout);
    }
    /* Init reads a call's whole program before it may say the call is done: a record
     * that comes sooner means init and PyBox no longer agree on where the call's bytes
     * end, and what is left of them must never be read as the next call's. */
    if (rc == 0 && r->feed.early && rec.seen && rec.alive && !box->record.seen && !box->input_complete)
        rc = pybox_error_set(&box->error, PYBOX_ERR_PROTOCOL, 0,
                             "the box's init said call %u was done before the %zu bytes of its program were all "
                             "handed over: the session is ended",
                             k, req->program_len);
    if (rc == 0 && r->feed.early && rec.seen && rec.alive && !box->record.seen) {
        /* /box/out as it stands now, the interpreter waiting for the next call. */
        int frc = req->output != NULL ? pybox_flow_take_output(r) : 0;
        call_result(a, req, &rec, timeout, t0, res);
        if (frc < 0)
            res->error = box->error;
        pybox_error_clear(&box->error);
        box->inputs = NULL;
        box->output_asked = false;
        a->req.inputs = NULL;
        a->req.output = NULL;
        r->feed.call = NULL; /* rec is this call's alone */
        a->t_last = pybox_now_s();
        return frc;
    }
    /* The session ended with this call (its deadline, its interpreter's end, an
     * out-of-memory kill, a failure): the call's result is the box's whole end. */
    if (rc == 0)
        rc = pybox_flow_wait(r);
    /* The call record came after the flow stopped looking for it (a deadline had passed,
     * or it came with the done record): it is just before the done record, and it is
     * init's, never what the program said (pybox_flow_finish cuts it out). */
    if (!rec.seen && box->record.seen) {
        pybox_error_t cerr = {0};
        if (pybox_call_record_find(&box->out, r->secret, &rec, &cerr) < 0)
            pybox_flow_unknown(box, "the call's record: %s", cerr.msg);
    }
    r->feed.call = &rec;
    box->policy.timeout_ms = timeout;
    st->call = k;
    st->session_goes_on = false;
    st->call_init_ms = rec.seen ? rec.call_ms : -1;
    if (rec.seen)
        pybox_escape_short(st->call_report, sizeof st->call_report, rec.report, PYBOX_GUEST_SAID_MAX);
    pybox_sha256_hex(req->program, req->program_len, box->program_sha256);
    box->program_bytes = req->program_len;
    rc = pybox_flow_finish(r, rc);
    *res = a->res;
    ahead_free(a);
    *ended = true;
    return rc;
}

int pybox_ahead_close(pybox_ahead_t *a, pybox_run_result_t *res)
{
    pybox_run_state_t *r = &a->r;
    pybox_run_result_t *box = &a->res;
    double t0 = pybox_now_s();
    r->origin = t0;
    a->req.cancellable = false;
    a->req.cancel_fd = -1;
    a->req.hook = NULL;
    r->feed.req = &a->req;
    memset(&box->t, 0, sizeof box->t);
    box->start.call = 0;
    box->start.session_goes_on = false;
    box->start.call_init_ms = -1;
    box->start.call_report[0] = '\0';
    if (box->watched) {
        /* The session's whole: its readings from the box's start. */
        int64_t now = pybox_now_ms();
        pybox_watch_restart(&box->watch, now);
        box->start.at_arrival_taken = false;
    }
    /* End the session: the init kills every process, writes its done record and holds. */
    pybox_flow_command(r, PYBOX_GUEST_CTL_END, PYBOX_GUEST_SIG_STOP);
    r->feed.t_start = pybox_now_s();
    r->feed.phase = PYBOX_PH_CLOSING;
    r->feed.deadline = pybox_now_ms() + PYBOX_STOP_GRACE_MS;
    int rc = pybox_flow_io(r);
    if (rc == 0)
        rc = pybox_flow_wait(r);
    rc = pybox_flow_finish(r, rc);
    *res = a->res;
    ahead_free(a);
    return rc;
}
