/* SPDX-License-Identifier: MIT */
/* Boxes made before their program (see ahead.h). */
#include "ahead.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "run_flow.h"
#include "util.h"

struct pybox_ahead {
    pybox_run_state_t r;     /* r.req and r.res point below */
    pybox_run_request_t req; /* the box's own (its policy), then the program's */
    pybox_run_result_t res;  /* what is known of the box so far */
    pybox_ready_record_t ready;
    double t_ready;
};

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
    free(a);
}

int pybox_ahead_open(pybox_backend_t *be, const pybox_run_request_t *req, pybox_ahead_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (req->policy.box_wait_ms <= 0 || req->policy.box_life_ms != 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "a warm box needs a wait and no session life");
    pybox_ahead_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a warm box");
    a->req = *req;
    a->req.program = NULL;
    a->req.program_len = 0;
    a->req.inputs = NULL;
    a->req.output = NULL;
    a->req.cancellable = false;
    a->req.cancel_fd = -1;
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
        drop(a);
        return -1;
    }
    /* What comes from here on is the program's: the report and the record are the box's. */
    pybox_sink_free(&a->res.out);
    pybox_sink_init(&a->res.out, PYBOX_OUTPUT_CAP);
    a->t_ready = pybox_now_s();
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

int pybox_ahead_run(pybox_ahead_t *a, const pybox_run_request_t *req, pybox_run_result_t *res)
{
    pybox_run_state_t *r = &a->r;
    pybox_run_result_t *box = &a->res;
    double t0 = pybox_now_s();
    /* The program's own request, on the box made for the image's policy: its deadline may
     * be shorter than the box's, never longer (the box's timer is in its verified argv). */
    int64_t timeout = req->policy.timeout_ms > 0 && req->policy.timeout_ms < box->policy.timeout_ms
                          ? req->policy.timeout_ms
                          : box->policy.timeout_ms;
    pybox_policy_t policy = box->policy;
    a->req.program = req->program;
    a->req.program_len = req->program_len;
    a->req.inputs = req->inputs;
    a->req.output = req->output;
    a->req.cancellable = req->cancellable;
    a->req.cancel_fd = req->cancel_fd;
    a->req.hook = req->hook;
    a->req.hook_arg = req->hook_arg;
    a->req.started_s = req->started_s;
    r->feed.req = &a->req;
    r->origin = req->started_s > 0 && req->started_s <= t0 ? req->started_s : t0;
    box->policy = policy;
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
    if (rc == 0 && req->inputs != NULL) {
        double t = pybox_now_s();
        rc = r->box->ops->put_files(r->box, req->inputs->tar.data ? req->inputs->tar.data : "", req->inputs->tar.len,
                                    &box->error);
        box->t.files_in_ms = pybox_flow_since(t);
    }
    if (rc == 0) {
        /* The program arrives now: the deadline, its time and the kernel's counters count
         * from here; the box's whole counts are kept beside them. */
        r->feed.t_start = pybox_now_s();
        st->waited_ms = (r->feed.t_start - a->t_ready) * 1000.0;
        if (box->watched) {
            int64_t now = pybox_now_ms();
            pybox_watch_sample(&box->watch, now, &st->at_arrival);
            st->at_arrival_taken = st->at_arrival.valid != 0;
            pybox_watch_restart(&box->watch, now);
        }
        r->feed.phase = PYBOX_PH_RUNNING;
        r->feed.deadline = (int64_t)(r->feed.t_start * 1000.0) + timeout;
        rc = pybox_flow_io(r);
        if (rc == 0)
            rc = pybox_flow_wait(r);
    }
    rc = pybox_flow_finish(r, rc);
    *res = a->res; /* the sinks, the samples and the notes move with it */
    free(a);
    return rc;
}
