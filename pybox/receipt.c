/* SPDX-License-Identifier: MIT */
/* Receipts in JSON and for the terminal (see receipt.h and docs/receipt.md). */
#include "receipt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../guest/proto.h"
#include "escape.h"
#include "util.h"
#include "version.h"

/* What a session's call had of /box/in and /box/out, both kept for the session. */
#define SESSION_FILES                                                                                                  \
    "/box/in and /box/out last for the session; this call's inputs joined those of the earlier calls in "              \
    "/box/in, and the files returned are /box/out as it stood at this call's end, the earlier calls' files "           \
    "with its own"

static const char *clock_name(const pybox_run_result_t *res)
{
    if (res->record.seen && res->record.stopped)
        return "host_deadline";
    if (res->record.seen && res->record.timer)
        return "box_timer";
    if (res->end == PYBOX_END_SUPERVISOR_KILL)
        return "host_deadline";
    return "none";
}

/* A piece of text made for the receipt, or "" with *ok false when it could not be made. */
static const char *got_text(const char *s, bool *ok)
{
    if (s == NULL)
        *ok = false;
    return s ? s : "";
}

static cJSON *said_json(const pybox_said_t *s, bool *ok)
{
    cJSON *o = cJSON_CreateObject();
    char digest[65];
    pybox_sha256_hex(s->data, s->kept, digest);
    cJSON_AddNumberToObject(o, "total_bytes", (double)s->total);
    cJSON_AddNumberToObject(o, "kept_bytes", (double)s->kept);
    cJSON_AddBoolToObject(o, "truncated", s->truncated);
    cJSON_AddStringToObject(o, "sha256", digest);
    bool valid = pybox_utf8_valid(s->data, s->kept);
    cJSON_AddBoolToObject(o, "utf8_valid", valid);
    /* A NUL would end the JSON string early (cJSON strings are C strings): it becomes
     * U+FFFD like an invalid byte, so nothing after it is lost from the text. */
    bool has_nul = memchr(s->data, '\0', s->kept) != NULL;
    pybox_buf_t t;
    pybox_buf_init(&t, 0);
    for (size_t i = 0;;) {
        const char *z = memchr(s->data + i, '\0', s->kept - i);
        size_t n = z ? (size_t)(z - (s->data + i)) : s->kept - i;
        pybox_utf8_sanitize(&t, s->data + i, n, NULL);
        if (z == NULL)
            break;
        pybox_buf_add(&t, "\xef\xbf\xbd", 3);
        i += n + 1;
    }
    if (!pybox_buf_ok(&t))
        *ok = false;
    cJSON_AddStringToObject(o, "text", got_text(t.data ? t.data : pybox_buf_ok(&t) ? "" : NULL, ok));
    pybox_buf_free(&t);
    if (!valid || has_nul) {
        /* The text above has U+FFFD where bytes were not UTF-8 or were NUL; the exact bytes: */
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        pybox_base64(&b, s->data, s->kept);
        cJSON_AddStringToObject(o, "base64", got_text(pybox_buf_ok(&b) ? (b.data ? b.data : "") : NULL, ok));
        pybox_buf_free(&b);
    }
    return o;
}

static double ms1(double v);
static double ms2(double v);

static void num_or_null(cJSON *o, const char *key, const pybox_reading_t *r, unsigned bit, int64_t v)
{
    if (r != NULL && (r->valid & bit))
        cJSON_AddNumberToObject(o, key, (double)v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *reading_json(const pybox_reading_t *r, bool taken, int64_t pids_sampled_max)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "taken", taken);
    num_or_null(o, "memory_peak_bytes", r, PYBOX_RD_MEM_PEAK, r ? r->mem_peak : 0);
    num_or_null(o, "memory_bytes", r, PYBOX_RD_MEM_NOW, r ? r->mem_now : 0);
    num_or_null(o, "oom_kills", r, PYBOX_RD_OOM_KILLS, r ? r->oom_kills : 0);
    if (r != NULL && (r->valid & PYBOX_RD_PIDS_PEAK)) {
        cJSON_AddNumberToObject(o, "pids_peak", (double)r->pids_peak);
        cJSON_AddStringToObject(o, "pids_peak_source", "kernel");
    } else if (pids_sampled_max >= 0) {
        cJSON_AddNumberToObject(o, "pids_peak", (double)pids_sampled_max);
        cJSON_AddStringToObject(o, "pids_peak_source", "samples");
    } else {
        cJSON_AddNullToObject(o, "pids_peak");
    }
    num_or_null(o, "pids_refused", r, PYBOX_RD_PIDS_REFUSED, r ? r->pids_refused : 0);
    num_or_null(o, "cpu_ns", r, PYBOX_RD_CPU, r ? r->cpu_ns : 0);
    num_or_null(o, "cpu_periods", r, PYBOX_RD_THROTTLE, r ? r->periods : 0);
    num_or_null(o, "cpu_throttled_periods", r, PYBOX_RD_THROTTLE, r ? r->throttled : 0);
    num_or_null(o, "cpu_throttled_ns", r, PYBOX_RD_THROTTLE, r ? r->throttled_ns : 0);
    return o;
}

#define LISTED_MAX 100

static char *escaped(const char *s)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, s, strlen(s), false);
    return pybox_buf_steal(&b);
}

static const char *out_status(pybox_out_status_t s)
{
    switch (s) {
    case PYBOX_OUT_NOT_ASKED:
        return "not_asked";
    case PYBOX_OUT_DELIVERED:
        return "delivered";
    case PYBOX_OUT_REFUSED:
        return "refused";
    case PYBOX_OUT_NOT_RECEIVED:
        return "not_received";
    }
    return "?";
}

static cJSON *inputs_json(const pybox_inputs_t *in, bool *ok)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; in != NULL && i < in->n; i++) {
        cJSON *f = cJSON_CreateObject();
        char *name = escaped(in->files[i].name);
        cJSON_AddStringToObject(f, "name", got_text(name, ok));
        free(name);
        cJSON_AddNumberToObject(f, "bytes", (double)in->files[i].bytes);
        cJSON_AddStringToObject(f, "sha256", in->files[i].sha256);
        cJSON_AddItemToArray(a, f);
    }
    return a;
}

static cJSON *files_json(const pybox_run_result_t *res, bool *ok)
{
    const pybox_outputs_t *o = &res->outputs;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "status", res->output_asked ? out_status(o->status) : "not_asked");
    if (!res->output_asked)
        return f;
    if (o->status == PYBOX_OUT_DELIVERED)
        cJSON_AddStringToObject(f, "folder", o->dir);
    if (o->reason[0]) {
        char *r = escaped(o->reason);
        cJSON_AddStringToObject(f, "reason", got_text(r, ok));
        free(r);
    }
    cJSON_AddNumberToObject(f, "returned_files", o->returned_files);
    cJSON_AddNumberToObject(f, "returned_bytes", (double)o->returned_bytes);
    cJSON_AddNumberToObject(f, "not_returned", o->not_returned);
    cJSON *ret = cJSON_AddArrayToObject(f, "returned");
    cJSON *not = cJSON_AddArrayToObject(f, "not_returned_entries");
    int listed = 0;
    for (size_t i = 0; i < o->n; i++) {
        const pybox_out_entry_t *e = &o->entries[i];
        if (e->returned && e->kind != 'f')
            continue; /* folders that came back are implied by their files */
        if (!e->returned && listed++ >= LISTED_MAX)
            continue;
        cJSON *x = cJSON_CreateObject();
        char *name = escaped(e->name);
        cJSON_AddStringToObject(x, "name", got_text(name, ok));
        free(name);
        if (e->returned) {
            cJSON_AddNumberToObject(x, "bytes", (double)e->bytes);
            cJSON_AddStringToObject(x, "sha256", e->sha256);
            cJSON_AddItemToArray(ret, x);
        } else {
            static const char *const kinds[] = {"file", "folder", "symbolic link", "hard link", "other"};
            int k = e->kind == 'f' ? 0 : e->kind == 'd' ? 1 : e->kind == 'l' ? 2 : e->kind == 'h' ? 3 : 4;
            cJSON_AddStringToObject(x, "kind", kinds[k]);
            cJSON_AddStringToObject(x, "reason", e->reason);
            cJSON_AddItemToArray(not, x);
        }
    }
    if (listed > LISTED_MAX)
        cJSON_AddNumberToObject(f, "not_returned_unlisted", listed - LISTED_MAX);
    return f;
}

static cJSON *kernel_json(const pybox_run_result_t *res)
{
    const pybox_watch_t *w = &res->watch;
    cJSON *k = cJSON_CreateObject();
    if (!res->watched) {
        cJSON_AddNullToObject(k, "cgroup");
        cJSON_AddStringToObject(k, "not_read", res->started ? res->watch_error : "the box never started");
        return k;
    }
    cJSON *cg = cJSON_AddObjectToObject(k, "cgroup");
    cJSON_AddStringToObject(cg, "version", w->version == PYBOX_CG_V2 ? "v2" : "v1");
    cJSON_AddStringToObject(cg, "path", w->where);
    cJSON_AddNumberToObject(k, "armed_ms", ms1(res->t.arm_ms));
    if (res->final_taken)
        cJSON_AddNumberToObject(k, "final_read_ms", ms2(res->t.final_read_ms));
    if (res->final_taken)
        cJSON_AddItemToObject(k, "final", reading_json(&res->final, true, w->pids_seen_max));
    else
        cJSON_AddItemToObject(k, "final", reading_json(w->have_last ? &w->last : NULL, false, w->pids_seen_max));
    cJSON *s = cJSON_AddObjectToObject(k, "samples");
    cJSON_AddNumberToObject(s, "count", (double)w->n_samples);
    cJSON_AddNumberToObject(s, "interval_ms", w->interval_ms);
    const char *cols[] = {"t_ms", "memory_bytes", "pids", "cpu_ns"};
    cJSON_AddItemToObject(s, "columns", cJSON_CreateStringArray(cols, 4));
    cJSON *rows = cJSON_AddArrayToObject(s, "rows");
    for (size_t i = 0; i < w->n_samples; i++) {
        const pybox_sample_t *x = &w->samples[i];
        double v[4] = {x->t_ms, (double)x->mem, x->pids, (double)x->cpu_ns};
        cJSON *row = cJSON_CreateArray();
        for (int c = 0; c < 4; c++)
            cJSON_AddItemToArray(row, v[c] < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(v[c]));
        cJSON_AddItemToArray(rows, row);
    }
    return k;
}

/* seen.start: cold, or what was ready before the program and what counts from its
 * arrival (docs/receipt.md). */
static const char *start_word(pybox_start_t k)
{
    return k == PYBOX_START_WARM ? "warm" : k == PYBOX_START_SESSION ? "session" : "cold";
}

/* A comma-separated list of names as a JSON array. */
static cJSON *names_json(const char *list)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, ",");
        char name[256];
        if (n > 0 && n < sizeof name) {
            memcpy(name, p, n);
            name[n] = '\0';
            cJSON_AddItemToArray(a, cJSON_CreateString(name));
        }
        p += n + (p[n] == ',');
    }
    return a;
}

static cJSON *start_json(const pybox_run_result_t *res, bool *ok)
{
    const pybox_start_info_t *st = &res->start;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", start_word(st->kind));
    if (st->kind == PYBOX_START_COLD) {
        char *why = escaped(st->why_cold);
        cJSON_AddStringToObject(o, "why_cold", got_text(why, ok));
        free(why);
        return o;
    }
    cJSON_AddStringToObject(o, "box_made_at", st->made_at);
    cJSON *bt = cJSON_AddObjectToObject(o, "box_timings_ms");
    cJSON_AddNumberToObject(bt, "create", ms1(st->create_ms));
    cJSON_AddNumberToObject(bt, "verify", ms1(st->verify_ms));
    cJSON_AddNumberToObject(bt, "attach", ms1(st->attach_ms));
    cJSON_AddNumberToObject(bt, "start", ms1(st->start_ms));
    cJSON_AddNumberToObject(bt, "arm", ms1(st->arm_ms));
    cJSON_AddNumberToObject(bt, "ready", ms1(st->ready_ms));
    cJSON_AddNumberToObject(o, "waited_ms", ms1(st->waited_ms));
    cJSON_AddNumberToObject(o, "init_ready_ms", (double)st->ready.ready_ms);
    cJSON *pre = cJSON_AddObjectToObject(o, "preload");
    cJSON_AddStringToObject(pre, "said_by",
                            "PyBox's bootstrap in the box, before any program existed (the image's own modules ran "
                            "in it)");
    cJSON_AddItemToObject(pre, "modules", names_json(st->preload));
    cJSON_AddItemToObject(pre, "imported", names_json(st->imported));
    if (st->failed[0])
        cJSON_AddStringToObject(pre, "failed", st->failed);
    else
        cJSON_AddNullToObject(pre, "failed");
    cJSON_AddNumberToObject(pre, "ms", st->preload_ms);
    cJSON_AddNumberToObject(pre, "output_bytes", (double)st->preload_output_bytes);
    if (st->kind == PYBOX_START_SESSION) {
        cJSON *se = cJSON_AddObjectToObject(o, "session");
        cJSON_AddStringToObject(se, "id", st->session_id);
        cJSON_AddNumberToObject(se, "call", st->call);
        char state[96];
        if (st->call == 0)
            snprintf(state, sizeof state, "the session's own receipt: every call it was handed");
        else if (st->call == 1)
            snprintf(state, sizeof state, "none: the session's first call");
        else
            snprintf(state, sizeof state, "state from calls 1..%u of this session", st->call - 1);
        cJSON_AddStringToObject(se, "state", state);
        cJSON_AddBoolToObject(se, "goes_on", st->session_goes_on);
        if (st->call > 0 && st->call_init_ms >= 0)
            cJSON_AddNumberToObject(se, "init_call_ms", (double)st->call_init_ms);
        if (st->call > 0)
            cJSON_AddStringToObject(se, "files", SESSION_FILES);
        if (st->call > 0 && st->call_asked_ms > 0)
            cJSON_AddNumberToObject(se, "lifetime_cut_timeout_ms", (double)st->call_asked_ms);
    }
    const pybox_watch_t *w = &res->watch;
    if (!st->at_arrival_taken) {
        cJSON_AddNullToObject(o, "at_arrival");
        return o;
    }
    const pybox_reading_t *a = &st->at_arrival;
    cJSON_AddItemToObject(o, "at_arrival", reading_json(a, true, -1));
    /* What the program itself used: the kernel's counters at the end less those at its
     * arrival; its memory peak only when the box's peak rose after it came. */
    const pybox_reading_t *f = res->final_taken ? &res->final : (w->have_last ? &w->last : NULL);
    cJSON *since = cJSON_AddObjectToObject(o, "since_arrival");
    bool both_cpu = f != NULL && (f->valid & a->valid & PYBOX_RD_CPU);
    num_or_null(since, "cpu_ns", both_cpu ? f : NULL, PYBOX_RD_CPU, both_cpu ? f->cpu_ns - a->cpu_ns : 0);
    bool both_oom = f != NULL && (f->valid & a->valid & PYBOX_RD_OOM_KILLS);
    num_or_null(since, "oom_kills", both_oom ? f : NULL, PYBOX_RD_OOM_KILLS,
                both_oom ? f->oom_kills - a->oom_kills : 0);
    bool both_ref = f != NULL && (f->valid & a->valid & PYBOX_RD_PIDS_REFUSED);
    num_or_null(since, "pids_refused", both_ref ? f : NULL, PYBOX_RD_PIDS_REFUSED,
                both_ref ? f->pids_refused - a->pids_refused : 0);
    bool peaks = f != NULL && (f->valid & a->valid & PYBOX_RD_MEM_PEAK);
    if (peaks && f->mem_peak > a->mem_peak)
        cJSON_AddNumberToObject(since, "memory_peak_bytes", (double)f->mem_peak);
    else
        cJSON_AddNullToObject(since, "memory_peak_bytes");
    return o;
}

static double ms1(double v)
{
    return (double)(long long)(v * 10.0 + 0.5) / 10.0;
}

static double ms2(double v)
{
    return (double)(long long)(v * 100.0 + 0.5) / 100.0;
}

cJSON *pybox_receipt_json(const pybox_run_result_t *res)
{
    const pybox_policy_t *p = &res->policy;
    bool ok = true; /* every piece of text was made: a receipt is whole or not at all */
    cJSON *r = cJSON_CreateObject();
    if (r == NULL)
        return NULL;
    cJSON_AddStringToObject(r, "schema", PYBOX_RECEIPT_SCHEMA);
    cJSON_AddStringToObject(r, "pybox_version", PYBOX_VERSION_SAID);
    cJSON_AddStringToObject(r, "run_id", res->run_id);
    cJSON_AddStringToObject(r, "status", pybox_end_word(res->end));
    cJSON_AddNumberToObject(r, "exit_code", res->exit_code);

    cJSON *asked = cJSON_AddObjectToObject(r, "asked");
    cJSON_AddStringToObject(asked, "at", res->started_wall);
    cJSON *prog = cJSON_AddObjectToObject(asked, "program");
    cJSON_AddNumberToObject(prog, "bytes", (double)res->program_bytes);
    cJSON_AddStringToObject(prog, "sha256", res->program_sha256);
    cJSON *img = cJSON_AddObjectToObject(asked, "image");
    cJSON_AddStringToObject(img, "name", res->image_name);
    cJSON_AddStringToObject(img, "id", p->image_id);
    if (res->pin.name[0]) {
        cJSON_AddStringToObject(img, "recipe_sha256", res->pin.recipe_sha256);
        cJSON_AddStringToObject(img, "built_at", res->pin.built_at);
        cJSON_AddStringToObject(img, "python3_package", res->pin.python);
        cJSON_AddStringToObject(img, "manifest", "/pybox/manifest.json in the image");
    }
    cJSON *lim = cJSON_AddObjectToObject(asked, "limits");
    /* A test box relaxed to no limit says so: null, not the value it did not get. */
    if (p->relax & PYBOX_RELAX_MEMORY)
        cJSON_AddNullToObject(lim, "memory_bytes");
    else
        cJSON_AddNumberToObject(lim, "memory_bytes", (double)p->memory_bytes);
    cJSON_AddNumberToObject(lim, "swap_bytes", 0);
    if (p->relax & PYBOX_RELAX_PIDS)
        cJSON_AddNullToObject(lim, "pids");
    else
        cJSON_AddNumberToObject(lim, "pids", (double)p->pids);
    cJSON_AddNumberToObject(lim, "cpus", (double)p->nano_cpus / 1e9);
    cJSON_AddNumberToObject(lim, "timeout_s", (double)p->timeout_ms / 1000.0);
    cJSON_AddNumberToObject(lim, "box_timer_s", (double)p->box_timer_ms / 1000.0);
    cJSON_AddNumberToObject(lim, "tmp_bytes", (double)p->tmp_bytes);
    cJSON_AddNumberToObject(lim, "open_files", (double)p->nofile);
    cJSON_AddNumberToObject(lim, "file_size_bytes", (double)p->fsize_bytes);
    cJSON_AddItemToObject(asked, "inputs", inputs_json(res->inputs, &ok));
    if (res->inputs != NULL)
        cJSON_AddNumberToObject(asked, "inputs_bytes", (double)res->inputs->total);
    cJSON *pol = cJSON_AddObjectToObject(asked, "policy");
    cJSON_AddStringToObject(pol, "sha256", res->policy_sha256);
    cJSON_AddStringToObject(pol, "seccomp_sha256", pybox_policy_seccomp_sha256());
    /* What a relaxed test box had instead is said here too, not only in the list. */
    bool root = (p->relax & PYBOX_RELAX_PROGRAM_ROOT) != 0;
    unsigned uid = pybox_policy_program_uid(p);
    char user[32];
    snprintf(user, sizeof user, "%u:%u", uid, uid);
    cJSON_AddStringToObject(pol, "user", user);
    cJSON_AddNumberToObject(pol, "program_uid", uid);
    cJSON_AddBoolToObject(pol, "user_of_its_own", !root && (p->relax & PYBOX_RELAX_SHARED_UID) == 0);
    cJSON_AddStringToObject(pol, "init_user", "0:0 with CAP_KILL only");
    cJSON_AddStringToObject(pol, "network", p->relax_netns ? "another box's network namespace" : "none");
    cJSON_AddBoolToObject(pol, "read_only_root", (p->relax & PYBOX_RELAX_WRITABLE_ROOT) == 0);
    cJSON_AddStringToObject(pol, "capabilities",
                            !root ? "none"
                            : (p->relax & PYBOX_RELAX_ENGINE_CAPS)
                                ? "the engine's defaults"
                                : "CAP_KILL, CAP_SETGID, CAP_SETUID and any relaxed one");
    cJSON_AddBoolToObject(pol, "no_new_privileges", (p->relax & PYBOX_RELAX_NEW_PRIVS) == 0);
    if (p->relax & PYBOX_RELAX_SECCOMP)
        cJSON_AddStringToObject(pol, "seccomp", "unconfined");
    cJSON_AddBoolToObject(pol, "host_mounts", p->relax_bind != NULL || p->relax_socket != NULL);
    char relaxed[256];
    pybox_policy_relaxed(p, relaxed, sizeof relaxed);
    if (relaxed[0])
        cJSON_AddStringToObject(pol, "RELAXED_FOR_A_TEST", relaxed);

    cJSON *seen = cJSON_AddObjectToObject(r, "seen");
    cJSON_AddStringToObject(seen, "backend", res->backend);
    cJSON_AddStringToObject(seen, "backend_description", res->engine);
    cJSON *host = cJSON_AddObjectToObject(seen, "host");
    cJSON_AddStringToObject(host, "kernel", res->host.kernel);
    const char *cgv = pybox_cgroup_version_word(res->host.version);
    if (cgv != NULL)
        cJSON_AddStringToObject(host, "cgroup", cgv);
    else
        cJSON_AddNullToObject(host, "cgroup");
    cJSON_AddStringToObject(host, "cgroup_manager", pybox_cgroup_manager_word(&res->host));
    cJSON *box = cJSON_AddObjectToObject(seen, "box");
    cJSON_AddStringToObject(box, "id", res->box_id);
    cJSON_AddStringToObject(box, "name", res->box_name);
    cJSON_AddBoolToObject(box, "created", res->created);
    cJSON_AddBoolToObject(box, "verified", res->verified);
    cJSON_AddNumberToObject(box, "settings_checked", res->checked);
    cJSON_AddBoolToObject(box, "started", res->started);
    cJSON_AddBoolToObject(box, "removed", res->removed);
    cJSON_AddBoolToObject(box, "confirmed_gone", res->gone);
    if (res->after.looked) {
        const pybox_box_after_t *a = &res->after;
        cJSON *ae = cJSON_AddObjectToObject(box, "after_end");
        cJSON *held = cJSON_AddArrayToObject(ae, "held");
        cJSON *still = cJSON_AddArrayToObject(ae, "still_held");
        for (size_t i = 0; pybox_held_words[i] != NULL; i++) {
            if (a->held & (1u << i))
                cJSON_AddItemToArray(held, cJSON_CreateString(pybox_held_words[i]));
            if (a->still & (1u << i))
                cJSON_AddItemToArray(still, cJSON_CreateString(pybox_held_words[i]));
        }
        cJSON_AddStringToObject(ae, "collector",
                                a->collector > 0 ? "ran" : (a->collector == 0 ? "not_seen" : "not_run"));
        cJSON_AddNumberToObject(ae, "collector_ms", ms1(a->collect_ms));
        cJSON_AddBoolToObject(ae, "mount_namespace_checked", a->mount_ns_known);
    }
    if (res->have_exit) {
        cJSON *ex = cJSON_AddObjectToObject(seen, "backend_record");
        cJSON_AddNumberToObject(ex, "exit_code", res->exit.exit_code);
        cJSON_AddBoolToObject(ex, "oom_killed", res->exit.oom_killed);
        cJSON_AddStringToObject(ex, "started_at", res->exit.started_at);
        cJSON_AddStringToObject(ex, "finished_at", res->exit.finished_at);
        if (res->exit.error[0])
            cJSON_AddStringToObject(ex, "error", res->exit.error);
    } else {
        cJSON_AddNullToObject(seen, "backend_record");
    }
    if (res->record.seen) {
        const pybox_done_record_t *d = &res->record;
        cJSON *ir = cJSON_AddObjectToObject(seen, "init_record");
        cJSON_AddNumberToObject(ir, "exit_code", d->exit_code);
        cJSON_AddNumberToObject(ir, "signal", d->signal);
        cJSON_AddBoolToObject(ir, "box_timer_fired", d->timer);
        cJSON_AddBoolToObject(ir, "stopped_on_request", d->stopped);
        cJSON_AddNumberToObject(ir, "program_ms", (double)d->program_ms);
        cJSON_AddNumberToObject(ir, "other_processes_reaped", d->reaped);
        cJSON_AddNumberToObject(ir, "stopped_from_outside_by_signal", d->term);
        if (res->start.kind != PYBOX_START_COLD) {
            cJSON_AddStringToObject(ir, "end", d->end);
            cJSON_AddNumberToObject(ir, "calls", d->calls);
        }
    } else {
        cJSON_AddNullToObject(seen, "init_record");
    }
    cJSON_AddItemToObject(seen, "start", start_json(res, &ok));
    cJSON_AddItemToObject(seen, "kernel", kernel_json(res));
    cJSON_AddItemToObject(seen, "files", files_json(res, &ok));
    cJSON *oom = cJSON_AddObjectToObject(seen, "oom");
    if (res->have_exit)
        cJSON_AddBoolToObject(oom, "backend_flag", res->exit.oom_killed);
    else
        cJSON_AddNullToObject(oom, "backend_flag");
    const pybox_reading_t *kr = res->final_taken ? &res->final : (res->watch.have_last ? &res->watch.last : NULL);
    num_or_null(oom, "kernel_oom_kills", kr, PYBOX_RD_OOM_KILLS, kr ? kr->oom_kills : 0);
    cJSON_AddStringToObject(oom, "finding", res->oom_finding ? res->oom_finding : "none");
    cJSON_AddStringToObject(seen, "clock", clock_name(res));
    cJSON_AddBoolToObject(seen, "host_deadline_passed", res->deadline_fired);
    cJSON_AddBoolToObject(seen, "box_killed_through_backend", res->box_killed);
    cJSON_AddBoolToObject(seen, "program_input_complete", res->input_complete);
    cJSON *tm = cJSON_AddObjectToObject(seen, "timings_ms");
    const pybox_timings_t *t = &res->t;
    const struct {
        const char *phase;
        double ms;
    } phases[] = {{"before", t->before_ms},     {"housekeeping", t->housekeeping_ms},
                  {"create", t->create_ms},     {"verify", t->verify_ms},
                  {"files_in", t->files_in_ms}, {"attach", t->attach_ms},
                  {"start", t->start_ms},       {"arm", t->arm_ms},
                  {"run", t->run_ms},           {"files_out", t->files_out_ms},
                  {"collect", t->collect_ms},   {"remove", t->remove_ms},
                  {"total", t->total_ms}};
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++)
        cJSON_AddNumberToObject(tm, phases[i].phase, ms1(phases[i].ms));

    cJSON *said = cJSON_AddObjectToObject(r, "said");
    cJSON_AddStringToObject(said, "trust", "untrusted: written by the program");
    cJSON_AddItemToObject(said, "stdout", said_json(&res->said_out, &ok));
    cJSON_AddItemToObject(said, "stderr", said_json(&res->said_err, &ok));
    if (res->start.kind == PYBOX_START_SESSION && res->start.call > 0)
        /* The session's interpreter ran the agent's code: its report of the call (the
         * exception, the last expression's value) is the program's word, escaped. */
        cJSON_AddStringToObject(said, "session_report", res->start.call_report);

    cJSON *unk = cJSON_AddArrayToObject(r, "unknown");
    for (int i = 0; i < res->n_unknown; i++)
        cJSON_AddItemToArray(unk, cJSON_CreateString(res->unknown[i]));

    if (pybox_run_has_error(res)) {
        cJSON *e = cJSON_AddObjectToObject(r, "error");
        cJSON_AddStringToObject(e, "kind", pybox_error_kind_name(res->error.kind));
        cJSON_AddStringToObject(e, "message", res->error.msg);
    }
    if (!ok || !pybox_json_utf8(r)) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

cJSON *pybox_receipt_refusal(const pybox_error_t *err)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "schema", PYBOX_RECEIPT_SCHEMA);
    cJSON_AddStringToObject(r, "pybox_version", PYBOX_VERSION_SAID);
    cJSON_AddStringToObject(r, "status", err->kind == PYBOX_ERR_USAGE ? "REFUSED" : "PYBOX_ERROR");
    cJSON_AddNumberToObject(r, "exit_code", 125);
    cJSON *e = cJSON_AddObjectToObject(r, "error");
    cJSON_AddStringToObject(e, "kind", pybox_error_kind_name(err->kind));
    cJSON_AddStringToObject(e, "message", err->msg);
    cJSON_AddBoolToObject(r, "box_built", 0);
    if (!pybox_json_utf8(r)) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* ---- terminal form ---- */

/* A piece of escaped text for a line, or "" and the receipt failed when it could not be
 * made: a receipt is whole or not at all. */
static const char *need(pybox_buf_t *o, const char *s)
{
    if (s == NULL)
        pybox_buf_fail(o);
    return s ? s : "";
}

static void size_text(char *buf, size_t len, int64_t bytes)
{
    if (bytes % (1024 * 1024) == 0 && bytes >= 1024 * 1024)
        snprintf(buf, len, "%lld MiB", (long long)(bytes / (1024 * 1024)));
    else
        snprintf(buf, len, "%lld bytes", (long long)bytes);
}

/* Cells a character of escaped text takes on a terminal, counting every non-ASCII
 * character as two (marks and zero-width ones too): never less than a terminal gives it,
 * so a cut always comes early enough. Its length via *bytes, whether it is a combining
 * mark via *mark. */
static size_t cells_of(const unsigned char *p, size_t n, size_t *bytes, bool *mark)
{
    unsigned cp = p[0];
    size_t len = pybox_utf8_seq(p, n, &cp);
    if (len == 0)
        len = 1; /* cannot happen: the text was escaped */
    *bytes = len;
    *mark = cp >= 0x80 && pybox_escape_is_mark(cp);
    return p[0] < 0x80 ? 1 : 2;
}

/* One line of escaped text cut into rows that fit the terminal: the first after
 * `fence` ("" for a line that starts with PyBox's own label), every later one after the
 * continuation fence, so no row begins with the text itself. A cut never comes just
 * before a combining mark, unless its character and marks fill a whole row. */
static void fenced_rows(pybox_buf_t *o, const char *fence, const char *text, size_t len, int columns)
{
    size_t i = 0;
    bool first = true;
    do {
        const char *f = first ? fence : PYBOX_RECEIPT_FENCE_CONT;
        size_t width = (size_t)columns - strlen(f);
        size_t start = i, cells = 0, last_cut = i;
        while (i < len) {
            size_t nb;
            bool mark;
            size_t c = cells_of((const unsigned char *)text + i, len - i, &nb, &mark);
            if (cells + c > width) {
                if (mark && last_cut > start)
                    i = last_cut; /* keep the mark with its character */
                break;
            }
            if (!mark)
                last_cut = i;
            cells += c;
            i += nb;
        }
        pybox_buf_adds(o, f);
        pybox_buf_add(o, text + start, i - start);
        pybox_buf_adds(o, "\n");
        first = false;
    } while (i < len);
}

/* A receipt line (no newline) that holds text the program or the caller chose, already
 * escaped: cut to fit, as above. */
static void chosen_line(pybox_buf_t *o, int columns, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void chosen_line(pybox_buf_t *o, int columns, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n < 0 ? NULL : malloc((size_t)n + 1);
    if (text == NULL) {
        pybox_buf_fail(o); /* a receipt is whole or not at all */
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    fenced_rows(o, "", text, (size_t)n, columns);
    free(text);
}

static void said_text(pybox_buf_t *o, const char *name, const pybox_said_t *s, int columns)
{
    char digest[65];
    pybox_sha256_hex(s->data, s->kept, digest);
    if (s->total == 0) {
        pybox_buf_addf(o, "  %-10s nothing\n", name);
        return;
    }
    if (s->truncated)
        pybox_buf_addf(o, "  %-10s %llu bytes, first %zu kept (TRUNCATED), sha256 %.16s... of what was kept\n", name,
                       (unsigned long long)s->total, s->kept, digest);
    else
        pybox_buf_addf(o, "  %-10s %llu bytes, sha256 %.16s...\n", name, (unsigned long long)s->total, digest);
    /* One fenced line per program line; control characters, escape sequences and
     * invalid UTF-8 shown escaped, so no program line can pass for a receipt line. */
    size_t i = 0;
    while (i < s->kept) {
        const char *nl = memchr(s->data + i, '\n', s->kept - i);
        size_t n = nl ? (size_t)(nl - (s->data + i)) : s->kept - i;
        pybox_buf_t line;
        pybox_buf_init(&line, 0);
        pybox_escape_terminal(&line, s->data + i, n, false);
        if (!pybox_buf_ok(&line))
            pybox_buf_fail(o);
        fenced_rows(o, PYBOX_RECEIPT_FENCE, line.data ? line.data : "", line.len, columns);
        pybox_buf_free(&line);
        i += n + (nl ? 1 : 0);
    }
    if (s->kept > 0 && s->data[s->kept - 1] != '\n')
        pybox_buf_addf(o, "  %-10s (no newline at the end%s)\n", "", s->truncated ? "; cut here" : "");
}

static void mib(char *buf, size_t len, const pybox_reading_t *r, unsigned bit, int64_t v)
{
    if (r != NULL && (r->valid & bit))
        snprintf(buf, len, "%.1f MiB", (double)v / (1024.0 * 1024.0));
    else
        snprintf(buf, len, "unknown");
}

static void count(char *buf, size_t len, const pybox_reading_t *r, unsigned bit, int64_t v)
{
    if (r != NULL && (r->valid & bit))
        snprintf(buf, len, "%lld", (long long)v);
    else
        snprintf(buf, len, "unknown");
}

/* What outlived the box's last process, when anything did or the collector could not
 * be seen (the rest goes under UNKNOWN). */
static void after_end_text(pybox_buf_t *o, const pybox_box_after_t *a)
{
    if (!a->looked || a->held == 0)
        return;
    char held[512], still[512];
    pybox_held_text(a->held, held, sizeof held);
    pybox_held_text(a->still, still, sizeof still);
    pybox_buf_addf(o, "  %-10s after its last process, held by descriptors in flight:\n", "");
    pybox_buf_addf(o, "  %-10s   %s\n", "", held);
    if (a->still == 0)
        pybox_buf_addf(o, "  %-10s released by the kernel's collector, run by PyBox (%.0f ms)\n", "", a->collect_ms);
    else if (a->collector < 0)
        pybox_buf_addf(o, "  %-10s NOT released: the kernel's collector was not run (relaxed)\n", "");
    else
        pybox_buf_addf(o, "  %-10s STILL HELD after the kernel's collector: %s\n", "", still);
}

static void files_text(pybox_buf_t *o, const pybox_run_result_t *res, int columns)
{
    const pybox_outputs_t *out = &res->outputs;
    if (!res->output_asked)
        return;
    if (out->status == PYBOX_OUT_DELIVERED) {
        char *dir = escaped(out->dir);
        pybox_buf_addf(o, "  %-10s %d file%s (%lld bytes) brought back, %d not brought back, into\n", "files out",
                       out->returned_files, out->returned_files == 1 ? "" : "s", (long long)out->returned_bytes,
                       out->not_returned);
        chosen_line(o, columns, "  %-10s %s", "", need(o, dir));
        free(dir);
    } else {
        char *why = escaped(out->reason);
        chosen_line(o, columns, "  %-10s NOTHING brought back, no output folder created: %s", "files out",
                    need(o, why));
        free(why);
    }
    int listed = 0;
    for (size_t i = 0; i < out->n; i++) {
        const pybox_out_entry_t *e = &out->entries[i];
        if (e->returned && e->kind != 'f')
            continue;
        if (!e->returned && listed++ >= LISTED_MAX)
            continue;
        char *name = escaped(e->name);
        if (e->returned)
            chosen_line(o, columns, "  %-10s + %s  %lld bytes, sha256 %.16s...", "", need(o, name), (long long)e->bytes,
                        e->sha256);
        else
            chosen_line(o, columns, "  %-10s - %s  not brought back: %s", "", need(o, name), e->reason);
        free(name);
    }
    if (listed > LISTED_MAX)
        pybox_buf_addf(o, "  %-10s   and %d more not brought back\n", "", listed - LISTED_MAX);
}

static void kernel_text(pybox_buf_t *o, const pybox_run_result_t *res, int columns)
{
    const pybox_watch_t *w = &res->watch;
    if (!res->watched) {
        /* why: the host's words, which may quote what the engine said */
        char *why = escaped(res->started ? res->watch_error : "never started");
        chosen_line(o, columns, "  %-10s not read (%s)", "kernel", need(o, why));
        free(why);
        return;
    }
    const pybox_reading_t *r = res->final_taken ? &res->final : (w->have_last ? &w->last : NULL);
    char peak[32], oomk[32], pp[32], refused[32], thr[32];
    mib(peak, sizeof peak, r, PYBOX_RD_MEM_PEAK, r ? r->mem_peak : 0);
    count(oomk, sizeof oomk, r, PYBOX_RD_OOM_KILLS, r ? r->oom_kills : 0);
    if (r && (r->valid & PYBOX_RD_PIDS_PEAK))
        snprintf(pp, sizeof pp, "%lld", (long long)r->pids_peak);
    else if (w->pids_seen_max >= 0)
        snprintf(pp, sizeof pp, "%lld (sampled)", (long long)w->pids_seen_max);
    else
        snprintf(pp, sizeof pp, "unknown");
    count(refused, sizeof refused, r, PYBOX_RD_PIDS_REFUSED, r ? r->pids_refused : 0);
    count(thr, sizeof thr, r, PYBOX_RD_THROTTLE, r ? r->throttled : 0);
    pybox_buf_addf(o, "  %-10s %s reading (cgroup %s, %zu samples):\n", "kernel",
                   res->final_taken ? "final" : "LAST (not final)", w->version == PYBOX_CG_V2 ? "v2" : "v1",
                   w->n_samples);
    pybox_buf_addf(o, "  %-10s memory peak %s, out-of-memory kills %s\n", "", peak, oomk);
    if (r && (r->valid & PYBOX_RD_CPU))
        pybox_buf_addf(o, "  %-10s processes peak %s, forks refused %s; CPU %.3f s, throttled periods %s\n", "", pp,
                       refused, (double)r->cpu_ns / 1e9, thr);
    else
        pybox_buf_addf(o, "  %-10s processes peak %s, forks refused %s; CPU unknown\n", "", pp, refused);
}

/* Colour (SGR sequences) only around PyBox's own fixed words, never around text anyone
 * else chose, so the fences, the cuts and the escaping are the same either way. */
#define SGR_RESET "\x1b[0m"
#define SGR_BOLD "\x1b[1m"

/* The status word's colour: green for an end the program made itself, yellow for a
 * clock that stopped it, red for the rest. */
bool pybox_receipt_lifetime_cut(const pybox_run_result_t *res, char *line, size_t len)
{
    const pybox_start_info_t *st = &res->start;
    if (st->kind != PYBOX_START_SESSION || st->call == 0 || st->call_asked_ms <= 0)
        return false;
    snprintf(line, len, "its deadline: %.3g s, what was left of the session's lifetime (ttl_s), not %.3g s",
             (double)res->policy.timeout_ms / 1000.0, (double)st->call_asked_ms / 1000.0);
    return true;
}

static void start_text(pybox_buf_t *o, const pybox_run_result_t *res, int columns)
{
    const pybox_start_info_t *st = &res->start;
    if (st->kind == PYBOX_START_COLD) {
        char *why = escaped(st->why_cold);
        chosen_line(o, columns, "  %-10s cold: %s", "start", need(o, why));
        free(why);
        return;
    }
    pybox_buf_addf(o, "  %-10s %s: box made and verified %s, ready after %.0f ms, waited %.0f ms\n", "start",
                   start_word(st->kind), st->made_at, st->ready_ms, st->waited_ms);
    char *imported = escaped(st->imported[0] ? st->imported : "nothing");
    chosen_line(o, columns, "  %-10s preload (said by PyBox's bootstrap before the program): %s, %.0f ms", "",
                need(o, imported), st->preload_ms);
    free(imported);
    if (st->at_arrival_taken && (st->at_arrival.valid & PYBOX_RD_CPU) && (st->at_arrival.valid & PYBOX_RD_MEM_NOW))
        pybox_buf_addf(o, "  %-10s at the program's arrival: memory %.1f MiB, CPU %.3f s (counted apart)\n", "",
                       (double)st->at_arrival.mem_now / 1048576.0, (double)st->at_arrival.cpu_ns / 1e9);
    if (st->kind == PYBOX_START_SESSION && st->call > 1)
        pybox_buf_addf(o, "  %-10s session %s, call %u: state from calls 1..%u of this session\n", "", st->session_id,
                       st->call, st->call - 1);
    else if (st->kind == PYBOX_START_SESSION && st->call == 1)
        pybox_buf_addf(o, "  %-10s session %s, call 1: the session's first call, no state before it\n", "",
                       st->session_id);
    if (st->kind == PYBOX_START_SESSION && st->call > 0 && (res->inputs != NULL || res->output_asked))
        pybox_buf_addf(o, "  %-10s files: %s\n", "", SESSION_FILES);
    char cut[160];
    if (pybox_receipt_lifetime_cut(res, cut, sizeof cut))
        pybox_buf_addf(o, "  %-10s %s\n", "", cut);
    if (st->kind == PYBOX_START_SESSION && st->call == 0)
        pybox_buf_addf(o, "  %-10s session %s: the session's own receipt\n", "", st->session_id);
}

static const char *status_sgr(pybox_end_t end)
{
    switch (end) {
    case PYBOX_END_TARGET_EXIT:
    case PYBOX_END_SESSION_CALL:
    case PYBOX_END_SESSION_CLOSED:
        return "\x1b[1;32m";
    case PYBOX_END_SUPERVISOR_KILL:
    case PYBOX_END_BOX_TIMER_KILL:
        return "\x1b[1;33m";
    default:
        return "\x1b[1;31m";
    }
}

/* A section heading, bold in colour. */
static void heading(pybox_buf_t *o, bool color, const char *text)
{
    pybox_buf_addf(o, "%s%s%s\n", color ? SGR_BOLD : "", text, color ? SGR_RESET : "");
}

int pybox_receipt_text(const pybox_run_result_t *res, int columns, pybox_buf_t *o)
{
    const pybox_receipt_style_t plain = {.columns = columns, .color = false};
    return pybox_receipt_text_styled(res, &plain, o);
}

int pybox_receipt_text_styled(const pybox_run_result_t *res, const pybox_receipt_style_t *style, pybox_buf_t *o)
{
    int columns = style->columns;
    bool color = style->color;
    if (columns < PYBOX_RECEIPT_MIN_COLUMNS)
        columns = columns <= 0 ? 80 : PYBOX_RECEIPT_MIN_COLUMNS;
    const pybox_policy_t *p = &res->policy;
    const pybox_done_record_t *d = &res->record;
    char mem[32], pids[32];
    size_text(mem, sizeof mem, p->memory_bytes);
    snprintf(pids, sizeof pids, "%lld", (long long)p->pids);
    if (p->relax & PYBOX_RELAX_MEMORY) /* a relaxed test box: no limit, said so */
        snprintf(mem, sizeof mem, "none (relaxed)");
    if (p->relax & PYBOX_RELAX_PIDS)
        snprintf(pids, sizeof pids, "unlimited (relaxed)");

    pybox_buf_addf(o, "PyBox receipt  run %s  %s\n", res->run_id, res->started_wall);
    pybox_buf_addf(o, "  %-10s %s%s%s\n", "status", color ? status_sgr(res->end) : "", pybox_end_word(res->end),
                   color ? SGR_RESET : "");
    switch (res->end) {
    case PYBOX_END_TARGET_EXIT:
        if (d->signal)
            pybox_buf_addf(o, "  %-10s the program ended by itself, killed by signal %d (exit %d)\n", "", d->signal,
                           res->exit.exit_code);
        else
            pybox_buf_addf(o, "  %-10s the program exited by itself with code %d\n", "", res->exit.exit_code);
        break;
    case PYBOX_END_SUPERVISOR_KILL:
        pybox_buf_addf(o, "  %-10s PyBox's deadline (%.3g s%s) stopped the program\n", "",
                       (double)p->timeout_ms / 1000.0,
                       res->start.call_asked_ms > 0 ? ": the end of the session's lifetime" : "");
        break;
    case PYBOX_END_BOX_TIMER_KILL:
        pybox_buf_addf(o, "  %-10s the box's own timer (%.3g s) stopped the program\n", "",
                       (double)p->box_timer_ms / 1000.0);
        break;
    case PYBOX_END_UNEXPLAINED:
        pybox_buf_addf(o, "  %-10s the box ended without its init's record\n", "");
        break;
    case PYBOX_END_EXTERNAL_STOP:
        pybox_buf_addf(o, "  %-10s the box was stopped from outside PyBox (signal %d)\n", "", res->record.term);
        break;
    case PYBOX_END_SESSION_CLOSED:
        pybox_buf_addf(o, "  %-10s session %s was closed on request after %u call%s; its box's init ended it\n", "",
                       res->start.session_id, d->calls, d->calls == 1 ? "" : "s");
        break;
    case PYBOX_END_SESSION_CALL:
        pybox_buf_addf(o, "  %-10s call %u of session %s ended; its interpreter still runs and the box is kept\n", "",
                       res->start.call, res->start.session_id);
        break;
    case PYBOX_END_CANCELLED:
    case PYBOX_END_PYBOX_ERROR:
    case PYBOX_END_NONE: {
        char *msg = escaped(res->error.msg);
        chosen_line(o, columns, "  %-10s PyBox failed: %s", "", need(o, msg));
        free(msg);
        break;
    }
    }
    pybox_buf_addf(o, "  %-10s %d\n", "exit code", res->exit_code);

    heading(o, color, "ASKED");
    pybox_buf_addf(o, "  %-10s %zu bytes on stdin, sha256 %.16s...\n", "program", res->program_bytes,
                   res->program_sha256);
    /* the name the caller chose on a line of its own; the ID (PyBox's) below it */
    char *image = escaped(res->image_name);
    chosen_line(o, columns, "  %-10s %s", "image", need(o, image));
    free(image);
    pybox_buf_addf(o, "  %-10s %.23s...\n", "", p->image_id);
    for (size_t i = 0; res->inputs != NULL && i < res->inputs->n; i++) {
        char *name = escaped(res->inputs->files[i].name);
        chosen_line(o, columns, "  %-10s %s/%s  %lld bytes, sha256 %.16s... (read-only)", i == 0 ? "files in" : "",
                    PYBOX_BOX_IN, need(o, name), (long long)res->inputs->files[i].bytes, res->inputs->files[i].sha256);
        free(name);
    }
    pybox_buf_addf(o, "  %-10s memory %s (no swap), %s processes, %.3g CPU,\n", "limits", mem, pids,
                   (double)p->nano_cpus / 1e9);
    pybox_buf_addf(o, "  %-10s deadline %.3g s (box timer %.3g s)\n", "", (double)p->timeout_ms / 1000.0,
                   (double)p->box_timer_ms / 1000.0);
    char relaxed[256];
    pybox_policy_relaxed(p, relaxed, sizeof relaxed);
    if (relaxed[0]) {
        pybox_buf_addf(o, "  %-10s RELAXED FOR A TEST: %s (see asked.policy in the JSON receipt)\n", "box", relaxed);
        pybox_buf_addf(o, "  %-10s policy %.16s...\n", "", res->policy_sha256);
    } else {
        pybox_buf_addf(o, "  %-10s program as user %u (its own) with no capabilities,\n", "box",
                       pybox_policy_program_uid(p));
        pybox_buf_addf(o, "  %-10s init as root with CAP_KILL only; read-only root, no network,\n", "");
        pybox_buf_addf(o, "  %-10s no host mounts, no new privileges, seccomp %.16s...,\n", "",
                       pybox_policy_seccomp_sha256());
        pybox_buf_addf(o, "  %-10s policy %.16s...\n", "", res->policy_sha256);
    }

    heading(o, color, "SEEN");
    if (res->have_exit)
        pybox_buf_addf(o, "  %-10s exit %d, out-of-memory kill: %s\n", "backend", res->exit.exit_code,
                       res->exit.oom_killed ? "YES" : "no");
    else
        pybox_buf_addf(o, "  %-10s no record of the box's end\n", "backend");
    /* the backend's own words about itself */
    char *engine = escaped(res->engine[0] ? res->engine : "-");
    char *backend = escaped(res->backend[0] ? res->backend : "-");
    chosen_line(o, columns, "  %-10s (%s, %s)", "", need(o, backend), need(o, engine));
    free(backend);
    free(engine);
    char *kernel = escaped(res->host.kernel[0] ? res->host.kernel : "unknown");
    const char *cgv = pybox_cgroup_version_word(res->host.version);
    chosen_line(o, columns, "  %-10s Linux %s, cgroup %s, %s", "host", need(o, kernel), cgv ? cgv : "unknown",
                res->host.systemd ? "managed by systemd" : "no cgroup manager");
    free(kernel);
    if (d->seen) {
        pybox_buf_addf(o, "  %-10s program ended after %lld ms: ", "box init", (long long)d->program_ms);
        if (d->signal)
            pybox_buf_addf(o, "killed by signal %d", d->signal);
        else
            pybox_buf_addf(o, "exit %d", d->exit_code);
        pybox_buf_addf(o, "; %u other process%s reaped\n", d->reaped, d->reaped == 1 ? "" : "es");
    } else {
        pybox_buf_addf(o, "  %-10s no record\n", "box init");
    }
    start_text(o, res, columns);
    kernel_text(o, res, columns);
    files_text(o, res, columns);
    pybox_buf_addf(o, "  %-10s PyBox deadline: %s; box timer: %s\n", "clocks",
                   d->stopped ? "FIRED, program stopped" : (res->deadline_fired ? "passed" : "not reached"),
                   d->timer ? "FIRED" : "not fired");
    pybox_buf_addf(o, "  %-10s %s%.12s, %d settings verified before start%s,\n", "box",
                   res->created ? "created " : "not created", res->created ? res->box_id : "", res->checked,
                   res->verified ? "" : " (FAILED)");
    pybox_buf_addf(o, "  %-10s %s, %s\n", "", res->removed ? "removed" : "NOT removed",
                   res->gone ? "confirmed gone" : "NOT confirmed gone");
    after_end_text(o, &res->after);
    pybox_buf_addf(o, "  %-10s before %.0f ms, housekeeping %.0f, create %.0f, verify %.0f,\n", "timings",
                   res->t.before_ms, res->t.housekeeping_ms, res->t.create_ms, res->t.verify_ms);
    pybox_buf_addf(o, "  %-10s attach %.0f, start %.0f, arm %.1f, run %.0f, collect %.0f,\n", "", res->t.attach_ms,
                   res->t.start_ms, res->t.arm_ms, res->t.run_ms, res->t.collect_ms);
    pybox_buf_addf(o, "  %-10s remove %.0f, total %.0f\n", "", res->t.remove_ms, res->t.total_ms);
    if (res->inputs != NULL || res->output_asked)
        pybox_buf_addf(o, "  %-10s files in %.0f ms, files out %.0f ms\n", "", res->t.files_in_ms, res->t.files_out_ms);

    heading(o, color, "SAID (untrusted: written by the program, escaped; each line starts \"  |\")");
    said_text(o, "stdout", &res->said_out, columns);
    said_text(o, "stderr", &res->said_err, columns);
    if (res->start.call_report[0] != '\0') {
        /* The session's interpreter runs in the program's process: its report of the
         * call (the last expression's repr, the exception) is the program's to forge. */
        pybox_buf_addf(o, "  %-10s the session's interpreter's report of the call (its value, its exception)\n",
                       "report");
        pybox_buf_t line;
        pybox_buf_init(&line, 0);
        pybox_escape_terminal(&line, res->start.call_report, strlen(res->start.call_report), false);
        if (!pybox_buf_ok(&line))
            pybox_buf_fail(o);
        fenced_rows(o, PYBOX_RECEIPT_FENCE, line.data ? line.data : "", line.len, columns);
        pybox_buf_free(&line);
    }

    heading(o, color, "UNKNOWN");
    if (res->n_unknown == 0)
        pybox_buf_addf(o, "  %-10s nothing noted\n", "-");
    for (int i = 0; i < res->n_unknown; i++) {
        char *note = escaped(res->unknown[i]);
        chosen_line(o, columns, "  - %s", need(o, note));
        free(note);
    }
    return pybox_buf_ok(o) && o->data ? 0 : -1;
}

int pybox_receipt_columns(int terminal, const char *columns_env)
{
    int columns = 80;
    if (terminal > 0) {
        columns = terminal;
    } else if (columns_env != NULL && columns_env[0] >= '0' && columns_env[0] <= '9') {
        char *end;
        errno = 0;
        long v = strtol(columns_env, &end, 10);
        if (*end == '\0' && errno == 0 && v >= 1 && v <= PYBOX_RECEIPT_MAX_COLUMNS)
            columns = (int)v;
    }
    return columns < PYBOX_RECEIPT_MIN_COLUMNS ? PYBOX_RECEIPT_MIN_COLUMNS : columns;
}
