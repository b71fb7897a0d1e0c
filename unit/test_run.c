/* SPDX-License-Identifier: MIT */
/* The run flow over a scripted backend: every phase's failure, every status word, the
 * memory findings, the clocks, files out, cancellation, interruption and timings, in
 * milliseconds and with no engine. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/bounds.h"
#include "../pybox/journal.h"
#include "../pybox/leftovers.h"
#include "../pybox/receipt.h"
#include "../pybox/run.h"
#include "../pybox/util.h"
#include "scripted.h"
#include "suites.h"

static pybox_run_result_t res;

static void request(pybox_run_request_t *req, int64_t timeout_ms)
{
    memset(req, 0, sizeof *req);
    req->program = "print('hi')\n";
    req->program_len = strlen(req->program);
    req->image_name = "stdlib";
    pybox_policy_defaults(&req->policy);
    snprintf(req->policy.image_id, sizeof req->policy.image_id, "sha256:%064d", 0);
    snprintf(req->policy.install_id, sizeof req->policy.install_id, "00112233445566778899aabbccddeeff");
    req->policy.timeout_ms = timeout_ms;
    req->policy.box_timer_ms = timeout_ms + PYBOX_BOX_TIMER_MARGIN_MS;
    /* No lease: the scripted box has no host user to give. */
    req->policy.relax = PYBOX_RELAX_SHARED_UID;
    req->cancel_fd = -1;
}

/* Every run's receipt conforms to the receipt's one definition. */
static int run(script_t *s, pybox_run_request_t *req)
{
    pybox_backend_t *be;
    scripted_backend(&be, s);
    int rc = pybox_run(be, req, &res);
    cJSON *j = pybox_receipt_json(&res);
    ck_assert_ptr_nonnull(j);
    char why[512];
    ck_assert_msg(pybox_receipt_conforms(j, why, sizeof why) == 0, "%s: %s", pybox_end_word(res.end), why);
    cJSON_Delete(j);
    return rc;
}

static bool has_unknown(const char *part)
{
    for (int i = 0; i < res.n_unknown; i++)
        if (strstr(res.unknown[i], part) != NULL)
            return true;
    return false;
}

static void teardown(void)
{
    pybox_run_result_free(&res);
    pybox_interrupt_signal = 0;
}

START_TEST(clean_exit)
{
    script_t s;
    script_init(&s);
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
    ck_assert_str_eq(pybox_end_word(res.end), "TARGET_EXIT_OBSERVED");
    ck_assert_int_eq(res.exit_code, 0);
    ck_assert(res.record.seen && res.verified && res.started && res.removed && res.gone);
    ck_assert_int_eq(res.said_out.kept, 3);
    ck_assert_int_eq(memcmp(res.said_out.data, "hi\n", 3), 0);
    ck_assert(s.program_complete);
    ck_assert_int_eq(s.releases, 1);
    ck_assert_int_eq(s.stops, 0);
    ck_assert_int_eq(s.removed, 1);
}
END_TEST

START_TEST(program_exit_code_is_kept)
{
    script_t s;
    script_init(&s);
    s.exit_code = 3;
    s.err = "Traceback\n";
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
    ck_assert_int_eq(res.exit_code, 3);
    ck_assert_int_eq(res.said_err.kept, 10);
}
END_TEST

/* Every phase that can fail: PyBox's error (125), the box removed when it was made, and
 * the program never started when the failure came before the start. */
START_TEST(each_phase_failure_is_pybox_s)
{
    static const struct {
        script_fail_t fail;
        bool created, started;
        const char *word;
    } cases[] = {
        {SCRIPT_FAIL_CREATE, false, false, "create"}, {SCRIPT_FAIL_VERIFY, true, false, "differs"},
        {SCRIPT_FAIL_PUT_FILES, true, false, "put"},  {SCRIPT_FAIL_OPEN_IO, true, false, "attach"},
        {SCRIPT_FAIL_START, true, false, "start"},    {SCRIPT_FAIL_IO, true, true, "stream broke"},
        {SCRIPT_FAIL_WAIT, true, true, "wait"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        script_t s;
        script_init(&s);
        s.fail = cases[i].fail;
        pybox_run_request_t req;
        request(&req, 2000);
        pybox_inputs_t in;
        pybox_inputs_init(&in);
        if (cases[i].fail == SCRIPT_FAIL_PUT_FILES)
            req.inputs = &in;
        ck_assert_int_eq(run(&s, &req), -1);
        ck_assert_msg(res.end == PYBOX_END_PYBOX_ERROR, "%s: %s", cases[i].word, pybox_end_word(res.end));
        ck_assert_int_eq(res.exit_code, 125);
        ck_assert_msg(strstr(res.error.msg, cases[i].word) != NULL, "%s: %s", cases[i].word, res.error.msg);
        ck_assert_int_eq(res.created, cases[i].created);
        ck_assert_int_eq(res.started, cases[i].started);
        ck_assert_int_eq(s.removed, cases[i].created ? 1 : 0);
        ck_assert_int_eq(s.started, cases[i].started ? 1 : 0);
        pybox_inputs_free(&in);
        pybox_run_result_free(&res);
    }
}
END_TEST

/* A step that fails without filling the error (a backend breaking error.h's contract)
 * still gives a run whose error says something: where the run was, never an empty
 * PYBOX_ERROR, in the result and in the receipt. The same for a box whose removal was not
 * confirmed with no reason given. */
START_TEST(a_failure_without_a_reason_still_says_where)
{
    static const struct {
        script_fail_t fail;
        bool not_gone;
        const char *where;
    } cases[] = {
        {SCRIPT_FAIL_CREATE, false, "before the box was made"},
        {SCRIPT_FAIL_VERIFY, false, "before it was verified"},
        {SCRIPT_FAIL_PUT_FILES, false, "before it started"},
        {SCRIPT_FAIL_OPEN_IO, false, "before it started"},
        {SCRIPT_FAIL_START, false, "before it started"},
        {SCRIPT_FAIL_IO, false, "while the box ran"},
        {SCRIPT_FAIL_WAIT, false, "before the backend's record of the box's end"},
        {SCRIPT_OK, true, "did not confirm the box removed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        script_t s;
        script_init(&s);
        s.fail = cases[i].fail;
        s.not_gone = cases[i].not_gone;
        s.silent = true;
        pybox_run_request_t req;
        request(&req, 2000);
        pybox_inputs_t in;
        pybox_inputs_init(&in);
        if (cases[i].fail == SCRIPT_FAIL_PUT_FILES)
            req.inputs = &in;
        ck_assert_int_eq(run(&s, &req), -1);
        ck_assert_msg(res.end == PYBOX_END_PYBOX_ERROR, "%zu: %s", i, pybox_end_word(res.end));
        ck_assert_msg(res.error.kind != PYBOX_ERR_NONE, "%zu: no kind", i);
        ck_assert_msg(strstr(res.error.msg, cases[i].where) != NULL, "%zu: \"%s\"", i, res.error.msg);
        cJSON *j = pybox_receipt_json(&res);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        ck_assert_msg(cJSON_IsString(m) && m->valuestring[0] != '\0', "%zu: the receipt's error says nothing", i);
        cJSON_Delete(j);
        pybox_inputs_free(&in);
        pybox_run_result_free(&res);
    }
}
END_TEST

/* ---- the program's user ---- */

static struct {
    char dir[64];
    long long expires; /* the run's lease, as it stood once the box was started */
    int64_t started;   /* the wall clock then */
} lease_seen;

static void lease_at_start(const char *step, const char *run_id, void *arg)
{
    (void)arg;
    if (strcmp(step, PYBOX_STEP_STARTED) != 0)
        return;
    lease_seen.started = pybox_wall_s();
    DIR *d = opendir(lease_seen.dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[PATH_MAX], text[128] = "";
        if (de->d_name[0] == '.' || pybox_fmt(p, sizeof p, "%s/%s", lease_seen.dir, de->d_name) < 0)
            continue;
        FILE *f = fopen(p, "re");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        if (strncmp(text, run_id, 32) == 0)
            lease_seen.expires = strtoll(text + 33, NULL, 10);
    }
    closedir(d);
}

/* A box lives at most twice its timer from its start (the timer runs until the hello,
 * then again): its user's lease must last that long from the start, however slow the
 * engine was before it, so that a pybox killed then leaves no uid free for another box
 * while this one may still run. */
START_TEST(lease_lasts_from_the_box_start)
{
    char tmpl[] = "/tmp/pybox-runuid-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    ck_assert_int_eq(pybox_fmt(lease_seen.dir, sizeof lease_seen.dir, "%s/uids", tmpl), 0);
    lease_seen.expires = -1;
    pybox_uid_range_t range = {.dir = lease_seen.dir, .base = 3000000000u, .count = 4};
    script_t s;
    script_init(&s);
    s.create_ms = 1100; /* a slow engine: the box starts a second after the run began */
    pybox_run_request_t req;
    request(&req, 3600 * 1000);
    req.policy.relax = 0; /* a user of its own, leased from the test's folder */
    req.uids = &range;
    req.hook = lease_at_start;
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_uint_ge(res.policy.program_uid, range.base);
    int64_t life = 2 * ((req.policy.box_timer_ms + 999) / 1000) + PYBOX_EXPIRY_MARGIN_S;
    ck_assert_msg(lease_seen.expires >= lease_seen.started + life,
                  "the lease expires at %lld, before the box started at %lld can have ended (%lld)", lease_seen.expires,
                  (long long)lease_seen.started, (long long)(lease_seen.started + life));
    unit_rm_tree(tmpl);
}
END_TEST

START_TEST(host_deadline_stops_the_program)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    pybox_run_request_t req;
    request(&req, 150);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(pybox_end_word(res.end), "SUPERVISOR_KILL_OBSERVED");
    ck_assert_int_eq(res.exit_code, 124);
    ck_assert(res.deadline_fired && res.record.stopped && !res.box_killed);
    ck_assert_int_eq(s.stops, 1);
    ck_assert_int_eq(s.kills, 0);
}
END_TEST

START_TEST(a_box_that_ignores_the_stop_is_killed)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    s.ignore_stop = true;
    pybox_run_request_t req;
    request(&req, 100);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.end, PYBOX_END_SUPERVISOR_KILL);
    ck_assert_int_eq(res.exit_code, 124);
    ck_assert(res.box_killed && !res.record.seen);
    ck_assert_int_eq(s.kills, 1);
    ck_assert(has_unknown("did not stop the program when asked"));
}
END_TEST

START_TEST(box_timer)
{
    script_t s;
    script_init(&s);
    s.timer = true;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(pybox_end_word(res.end), "BOX_TIMER_KILL_OBSERVED");
    ck_assert_int_eq(res.exit_code, 124);
}
END_TEST

START_TEST(no_record_is_unexplained)
{
    script_t s;
    script_init(&s);
    s.no_record = true;
    s.engine_exit = 1;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(pybox_end_word(res.end), "BOX_END_UNEXPLAINED");
    ck_assert_int_eq(res.exit_code, 1);
    ck_assert(has_unknown("without its init's record"));
}
END_TEST

START_TEST(a_stop_from_outside_is_reported)
{
    script_t s;
    script_init(&s);
    s.term = SIGTERM;
    s.signal = SIGTERM;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), -1);
    ck_assert_str_eq(pybox_end_word(res.end), "EXTERNAL_STOP_OBSERVED");
    ck_assert_int_eq(res.exit_code, 125);
}
END_TEST

START_TEST(exit_codes_that_disagree_are_noted)
{
    script_t s;
    script_init(&s);
    s.exit_code = 2;
    s.engine_exit = 5;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.exit_code, 5); /* the engine's */
    ck_assert(has_unknown("the box's init saw exit 2, the backend recorded 5"));
}
END_TEST

/* The backend's record of the box's end is outside data: an exit status no process can
 * have (256 here, which a shell would read as 0, success) is not passed on as PyBox's own
 * exit code. */
START_TEST(an_impossible_exit_status_is_not_passed_on)
{
    static const int bad[] = {256, 257, 1000, 65536};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        script_t s;
        script_init(&s);
        s.exit_code = 1; /* the program failed */
        s.engine_exit = bad[i];
        pybox_run_request_t req;
        request(&req, 2000);
        run(&s, &req);
        ck_assert_msg(res.exit_code >= 0 && res.exit_code <= 255 && res.exit_code != 0,
                      "engine exit %d became PyBox's exit %d", bad[i], res.exit_code);
        ck_assert_int_eq(res.exit_code, 125);
        ck_assert_int_eq(res.end, PYBOX_END_PYBOX_ERROR);
        ck_assert_msg(strstr(res.error.msg, "no process") != NULL, "%s", res.error.msg);
        pybox_run_result_free(&res);
    }
}
END_TEST

START_TEST(memory_findings)
{
    /* The program killed by signal 9 with the engine's OOM flag. */
    script_t s;
    script_init(&s);
    s.signal = SIGKILL;
    s.engine_oom = true;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(res.oom_finding, "program_killed");
    ck_assert(has_unknown("the kernel's counter could not be read"));
    pybox_run_result_free(&res);
    /* Another process killed while the program went on. */
    script_init(&s);
    s.engine_oom = true;
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(res.oom_finding, "other_process_killed");
    pybox_run_result_free(&res);
    /* A kill without any OOM evidence or deadline: the cause is not established. */
    script_init(&s);
    s.signal = SIGKILL;
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(res.oom_finding, "kernel_not_read");
    ck_assert(has_unknown("cause not established"));
}
END_TEST

START_TEST(a_box_not_confirmed_gone_fails_the_run)
{
    script_t s;
    script_init(&s);
    s.not_gone = true;
    pybox_run_request_t req;
    request(&req, 2000);
    ck_assert_int_eq(run(&s, &req), -1);
    ck_assert_int_eq(res.exit_code, 125);
    ck_assert(!res.gone);
    ck_assert(has_unknown("could not be confirmed removed"));
}
END_TEST

START_TEST(cancelled_before_start)
{
    script_t s;
    script_init(&s);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    pybox_run_request_t req;
    request(&req, 2000);
    req.cancellable = true;
    req.cancel_fd = p[0];
    ck_assert_int_eq(run(&s, &req), -1);
    ck_assert_str_eq(pybox_end_word(res.end), "CANCELLED");
    ck_assert_int_eq(s.started, 0);
    ck_assert_int_eq(s.removed, 1);
    close(p[0]);
    close(p[1]);
}
END_TEST

static void hook_cancel(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    if (strcmp(step, PYBOX_STEP_RUNNING) == 0)
        ck_assert_int_eq(write(*(int *)arg, "x", 1), 1);
}

START_TEST(cancelled_while_running)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pybox_run_request_t req;
    request(&req, 60000);
    req.cancellable = true;
    req.cancel_fd = p[0];
    req.hook = hook_cancel;
    req.hook_arg = &p[1];
    ck_assert_int_eq(run(&s, &req), -1);
    ck_assert_int_eq(res.end, PYBOX_END_CANCELLED);
    ck_assert_int_eq(s.stops, 1);
    ck_assert(res.gone);
    close(p[0]);
    close(p[1]);
}
END_TEST

static void hook_interrupt(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    (void)arg;
    if (strcmp(step, PYBOX_STEP_RUNNING) == 0)
        pybox_interrupt_signal = SIGTERM;
}

START_TEST(interrupted_while_running)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    pybox_run_request_t req;
    request(&req, 60000);
    req.hook = hook_interrupt;
    ck_assert_int_eq(run(&s, &req), -1);
    ck_assert_int_eq(res.end, PYBOX_END_PYBOX_ERROR);
    ck_assert_ptr_nonnull(strstr(res.error.msg, "interrupted by signal 15"));
    ck_assert(!res.deadline_fired);
    ck_assert(res.gone);
}
END_TEST

/* The tick hook sees each reading of the box's cgroup while the program runs, in order. */
typedef struct {
    int n;
    double last_ms;
    bool ordered, readings;
} ticks_t;

static void count_tick(double elapsed_ms, const pybox_reading_t *r, void *arg)
{
    ticks_t *t = arg;
    t->ordered &= elapsed_ms >= t->last_ms;
    t->readings &= (r->valid & PYBOX_RD_MEM_NOW) && r->mem_now == 4268032;
    t->last_ms = elapsed_ms;
    t->n++;
}

START_TEST(ticks_while_the_program_runs)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    snprintf(s.cgroup_v2, sizeof s.cgroup_v2, "%s",
             PYBOX_FIXTURES "/cgroup/v2-systemd/system.slice/"
                            "docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope");
    pybox_run_request_t req;
    request(&req, 300);
    ticks_t t = {.ordered = true, .readings = true};
    req.tick = count_tick;
    req.hook_arg = &t;
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_str_eq(pybox_end_word(res.end), "SUPERVISOR_KILL_OBSERVED");
    ck_assert(res.watched);
    ck_assert_msg(t.n >= 2, "%d ticks in a 300 ms run sampled every %d ms or more", t.n, PYBOX_WATCH_INTERVAL_MS);
    ck_assert(t.ordered && t.readings);
    ck_assert(t.last_ms <= 300 + PYBOX_WATCH_INTERVAL_MS * 4);
}
END_TEST

START_TEST(the_total_counts_from_pybox_s_start)
{
    script_t s;
    script_init(&s);
    pybox_run_request_t req;
    request(&req, 2000);
    req.started_s = pybox_now_s() - 3.0; /* e.g. an engine that took 3 s to answer */
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_msg(res.t.before_ms >= 3000, "before %.1f ms", res.t.before_ms);
    ck_assert_msg(res.t.total_ms >= 3000, "total %.1f ms", res.t.total_ms);
    ck_assert(res.t.total_ms >= res.t.before_ms + res.t.create_ms + res.t.remove_ms);
}
END_TEST

/* ---- files out ---- */

static char out_root[64];

static void make_tar(pybox_buf_t *b, const char *name, const char *content)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    size_t used = 0;
    static char mem[16384];
    ck_assert_int_eq(archive_write_open_memory(a, mem, sizeof mem, &used), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "out/");
    archive_entry_set_filetype(e, AE_IFDIR);
    archive_entry_set_perm(e, 0700);
    ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
    archive_entry_clear(e);
    char path[128];
    snprintf(path, sizeof path, "out/%s", name);
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    archive_entry_set_size(e, (la_int64_t)strlen(content));
    ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_data(a, content, strlen(content)), (la_ssize_t)strlen(content));
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    pybox_buf_init(b, 0);
    ck_assert_int_eq(pybox_buf_append(b, mem, used), 0);
}

static void out_setup(void)
{
    snprintf(out_root, sizeof out_root, "/tmp/pybox-run-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(out_root));
}

static void out_teardown(void)
{
    teardown();
    unit_rm_tree(out_root);
}

static void files_run(script_t *s, bool *delivered, bool *folder_exists)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/result", out_root);
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_output_check(dir, &spec, &err) == 0, "%s", err.msg);
    pybox_run_request_t req;
    request(&req, 2000);
    req.output = &spec;
    run(s, &req);
    pybox_output_close(&spec);
    *delivered = res.outputs.status == PYBOX_OUT_DELIVERED;
    struct stat sb;
    *folder_exists = stat(dir, &sb) == 0;
}

START_TEST(files_taken_while_held_are_delivered)
{
    pybox_buf_t tar;
    make_tar(&tar, "a.txt", "hello");
    script_t s;
    script_init(&s);
    s.out_tar = tar.data;
    s.out_tar_len = tar.len;
    bool delivered, exists;
    files_run(&s, &delivered, &exists);
    ck_assert(delivered && exists);
    ck_assert_int_eq(res.outputs.returned_files, 1);
    pybox_buf_free(&tar);
}
END_TEST

START_TEST(a_copy_after_the_box_stopped_is_not_a_delivery)
{
    /* Once the box stopped, the engine copies a fresh, empty folder: that is not the
     * program's output, and no empty folder may be delivered for it. */
    pybox_buf_t tar;
    make_tar(&tar, "a.txt", "hello");
    script_t s;
    script_init(&s);
    s.out_tar = tar.data;
    s.out_tar_len = tar.len;
    s.stopped_before_copy = true;
    bool delivered, exists;
    files_run(&s, &delivered, &exists);
    ck_assert(!delivered && !exists);
    ck_assert_int_eq(res.outputs.status, PYBOX_OUT_NOT_RECEIVED);
    ck_assert_ptr_nonnull(strstr(res.outputs.reason, "stopped before its output folder was copied"));
    pybox_run_result_free(&res);
    /* Not known whether it still ran: not a delivery either. */
    script_init(&s);
    s.out_tar = tar.data;
    s.out_tar_len = tar.len;
    s.running_unknown = true;
    files_run(&s, &delivered, &exists);
    ck_assert(!delivered && !exists);
    ck_assert_ptr_nonnull(strstr(res.outputs.reason, "is not known"));
    pybox_buf_free(&tar);
}
END_TEST

/* The box's stream cut inside a frame (the engine dying mid-write) is the backend's
 * protocol error, not the engine's: the box's end was not seen all the same, and
 * nothing may be said as if it had been. */
START_TEST(a_stream_cut_mid_run_is_said_plainly)
{
    script_t s;
    script_init(&s);
    s.fail = SCRIPT_FAIL_IO;
    s.fail_kind = PYBOX_ERR_PROTOCOL;
    s.not_gone = true;
    bool delivered, exists;
    files_run(&s, &delivered, &exists);
    ck_assert(!delivered && !exists);
    ck_assert_int_eq(res.exit_code, 125);
    ck_assert_ptr_null(strstr(res.outputs.reason, "the box ended"));
    ck_assert(has_unknown("whether the box has ended is not known"));
    for (int i = 0; i < res.n_unknown; i++)
        ck_assert_msg(strstr(res.unknown[i], "the box ended") == NULL, "claimed: %s", res.unknown[i]);
}
END_TEST

START_TEST(an_engine_lost_mid_run_is_said_plainly)
{
    script_t s;
    script_init(&s);
    s.fail = SCRIPT_FAIL_IO;
    s.not_gone = true;
    bool delivered, exists;
    files_run(&s, &delivered, &exists);
    ck_assert(!delivered && !exists);
    ck_assert_int_eq(res.exit_code, 125);
    ck_assert_ptr_nonnull(strstr(res.outputs.reason, "the script failed")); /* the backend's holder */
    ck_assert_ptr_null(strstr(res.outputs.reason, "the box ended"));
    ck_assert(has_unknown("whether the box has ended is not known"));
    for (int i = 0; i < res.n_unknown; i++)
        ck_assert_msg(strstr(res.unknown[i], "the box ended") == NULL, "claimed: %s", res.unknown[i]);
}
END_TEST

/* A stream that ended is not polled again: a pipe at its end is always ready, and a
 * run that kept polling it would spin until the box ended (here: a program that never
 * ends, stopped at a 300 ms deadline). */
START_TEST(an_ended_stream_is_not_polled_again)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    s.ended_stream = true;
    pybox_run_request_t req;
    request(&req, 300);
    run(&s, &req);
    ck_assert_int_eq(res.end, PYBOX_END_SUPERVISOR_KILL);
    ck_assert_msg(s.io_reads < 50, "the box's streams were read %d times in 300 ms", s.io_reads);
}
END_TEST

/* The box's stdin is polled only while something waits to be written: once every
 * process of a box has ended, a pipe's write end with no reader is always "ready"
 * (POLLERR), and a run that kept polling it spun until the box's output ended (here: a
 * program that never ends, stopped at a 300 ms deadline). */
START_TEST(a_stdin_with_nothing_to_write_is_not_polled)
{
    script_t s;
    script_init(&s);
    s.hangs = true;
    s.stdin_apart = true;
    pybox_run_request_t req;
    request(&req, 300);
    run(&s, &req);
    ck_assert_int_eq(res.end, PYBOX_END_SUPERVISOR_KILL);
    ck_assert_msg(s.io_polls < 50, "the box's streams were polled %d times in 300 ms", s.io_polls);
}
END_TEST

/* The box's end, when its backend has a descriptor for it, ends the run: a native box's
 * pipes can stay open long after its last process ended (their write ends held by
 * descriptors in flight in unix sockets), and a run that waited for their end went on
 * past the release's grace, killed the box and failed after 30 s more, although the
 * init's record had been read. */
START_TEST(the_box_s_end_ends_the_run_whatever_its_streams)
{
    script_t s;
    script_init(&s);
    s.end_apart = true;
    pybox_run_request_t req;
    request(&req, 5000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
    ck_assert_int_eq(res.exit_code, 0);
    ck_assert(!res.box_killed);
    ck_assert_int_eq(s.kills, 0);
    ck_assert_int_eq(s.releases, 1);
    ck_assert(res.gone);
}
END_TEST

static const char *receipt_text(void)
{
    static pybox_buf_t o;
    pybox_buf_free(&o);
    pybox_buf_init(&o, 0);
    ck_assert_int_eq(pybox_receipt_text(&res, 100, &o), 0);
    return o.data;
}

static int after_end_words(const char *member, const char *word)
{
    cJSON *j = pybox_receipt_json(&res);
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "seen"), "box"), "after_end");
    int found = a == NULL ? -1 : 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItem(a, member))
        found |= cJSON_IsString(e) && strcmp(e->valuestring, word) == 0;
    cJSON_Delete(j);
    return found;
}

/* A kill that finds the box already ended is no kill: an engine's stream may outlive the
 * box (its pipes held open by descriptors in flight), PyBox asks for a kill after the
 * release's grace, and the engine answers that the box no longer runs. The receipt said
 * PyBox had killed a box that had ended by itself. */
START_TEST(a_kill_that_finds_the_box_ended_is_not_a_kill)
{
    script_t s;
    script_init(&s);
    s.stream_outlives_box = true;
    pybox_run_request_t req;
    request(&req, 5000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
    ck_assert_int_eq(res.exit_code, 0);
    ck_assert(!res.box_killed);
    ck_assert_int_eq(s.kills, 0);
}
END_TEST

/* What outlived the box's last process (descriptors in flight, the program's doing) is
 * named in SEEN when the kernel's collector released it, and under UNKNOWN when it did
 * not or was not run; it is never the engine's failure nor PyBox's, and the program's own
 * end and exit stand. */
START_TEST(what_outlived_the_box_is_named_not_blamed)
{
    const unsigned all = PYBOX_HELD_STDOUT | PYBOX_HELD_STDERR | PYBOX_HELD_MOUNT_NS;
    static const struct {
        unsigned still;
        int collector;
        const char *seen, *unknown;
    } cases[] = {
        {0, 1, "released by the kernel's collector, run by PyBox", NULL},
        {PYBOX_HELD_STDOUT, 1, "STILL HELD after the kernel's collector: its stdout's write end",
         "descriptors in flight in unix sockets (the program's doing) still held its stdout's write end"},
        {all, -1, "NOT released: the kernel's collector was not run (relaxed)",
         "PyBox did not run the collector (relaxed for a test)"},
        {all, 0, "STILL HELD", "no pass of the collector was seen in time"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        script_t s;
        script_init(&s);
        s.after = (pybox_box_after_t){.looked = true,
                                      .held = all,
                                      .still = cases[i].still,
                                      .mount_ns_known = true,
                                      .collector = cases[i].collector};
        pybox_run_request_t req;
        request(&req, 5000);
        ck_assert_int_eq(run(&s, &req), 0);
        ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
        ck_assert_int_eq(res.exit_code, 0);
        ck_assert(res.gone);
        const char *text = receipt_text();
        ck_assert_msg(strstr(text, "its stdout's write end, its stderr's write end, its mount namespace") != NULL, "%s",
                      text);
        ck_assert_msg(strstr(text, cases[i].seen) != NULL, "case %zu lacks '%s': %s", i, cases[i].seen, text);
        ck_assert_msg(strstr(text, "engine") == NULL && strstr(text, "PyBox failed") == NULL, "%s", text);
        ck_assert_int_eq(after_end_words("held", "mount_namespace"), 1);
        ck_assert_int_eq(after_end_words("still_held", "stdout"), cases[i].still != 0);
        if (cases[i].unknown == NULL)
            ck_assert(!has_unknown("in flight") && !has_unknown("collector"));
        else
            ck_assert_msg(has_unknown(cases[i].unknown), "case %zu: no note '%s'", i, cases[i].unknown);
        pybox_run_result_free(&res);
    }
    /* Nothing held, no pass seen: that the program left nothing is not established. */
    script_t s;
    script_init(&s);
    s.after = (pybox_box_after_t){.looked = true, .collector = 0};
    pybox_run_request_t req;
    request(&req, 5000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert(has_unknown("no pass of the kernel's collector of descriptors in flight was seen"));
    ck_assert_int_eq(after_end_words("held", "stdout"), 0);
    ck_assert_ptr_null(strstr(receipt_text(), "held by descriptors in flight"));
    pybox_run_result_free(&res);
    /* A backend that does not look says nothing of it. */
    script_init(&s);
    request(&req, 5000);
    ck_assert_int_eq(run(&s, &req), 0);
    ck_assert_int_eq(after_end_words("held", "stdout"), -1);
    ck_assert(!has_unknown("in flight") && !has_unknown("collector"));
}
END_TEST

/* What is slow to remove (a native image folder) waits for `pybox cleanup`: a run's own
 * housekeeping never spends a run's time on it; an expired box goes either way, and so
 * does an expired uid lease that no run holds (in the range the cleanup is given). */
START_TEST(housekeeping_leaves_what_is_slow_to_cleanup)
{
    char home[] = "/tmp/pybox-unit-left-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(home));
    setenv("PYBOX_HOME", home, 1);
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
    char uids[PATH_MAX], lease[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(uids, sizeof uids, "%s/uids", home), 0);
    pybox_uid_range_t range = {.dir = uids, .base = 3000000000u, .count = 4};
    pybox_uid_lease_t l;
    ck_assert_int_eq(pybox_uid_lease_take_in(uids, range.base, range.count, "r", 1, &l, &err), 0);
    ck_assert_int_eq(pybox_fmt(lease, sizeof lease, "%s/%u", uids, (unsigned)l.uid), 0);
    pybox_uid_lease_keep(&l); /* expired since 1970, and its run gone */
    pybox_leftover_t left[2];
    memset(left, 0, sizeof left);
    snprintf(left[0].kind, sizeof left[0].kind, "box");
    snprintf(left[0].id, sizeof left[0].id, "box1");
    left[0].expires = 1;
    snprintf(left[1].kind, sizeof left[1].kind, "image");
    snprintf(left[1].id, sizeof left[1].id, "tree");
    left[1].expires = 1;
    left[1].order = 1;
    left[1].asked_only = true;
    script_t s;
    script_init(&s);
    s.leftovers = left;
    s.n_leftovers = 2;
    pybox_backend_t *be = NULL;
    scripted_backend(&be, &s);
    pybox_leftovers_report_t rep;
    ck_assert_int_eq(pybox_leftovers_clean_in(&st, be, &range, true, true, &rep, &err), 0);
    ck_assert_int_eq(rep.leases_removed, 1); /* a dry run: would be */
    ck_assert_int_eq(access(lease, F_OK), 0);
    pybox_leftovers_report_free(&rep);
    ck_assert_int_eq(pybox_leftovers_clean_in(&st, be, &range, false, true, &rep, &err), 0);
    ck_assert_int_eq(s.leftovers_removed, 1); /* the box, not the image folder */
    ck_assert_int_eq(rep.removed, 1);
    ck_assert_int_eq(rep.leases_removed, 1);
    ck_assert_int_eq(access(lease, F_OK), -1);
    cJSON *j = pybox_leftovers_report_json(&rep);
    ck_assert_int_eq((int)cJSON_GetObjectItemCaseSensitive(j, "leases_removed")->valuedouble, 1);
    cJSON_Delete(j);
    pybox_leftovers_report_free(&rep);
    /* a folder of leases that others can change: reported, the rest still done */
    ck_assert_int_eq(chmod(uids, 0777), 0);
    ck_assert_int_eq(pybox_leftovers_clean_in(&st, be, &range, false, false, &rep, &err), 0);
    ck_assert_int_eq(s.leftovers_removed, 3); /* asked for: both */
    ck_assert_int_eq(rep.n, 3);
    ck_assert_str_eq(rep.entries[2].what, "leases");
    ck_assert(!rep.entries[2].removed);
    ck_assert_ptr_nonnull(strstr(rep.entries[2].reason, "not a folder that only"));
    pybox_leftovers_report_free(&rep);
    unsetenv("PYBOX_HOME");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", home);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static bool present(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* An MCP call's scratch folder under its own note: kept while the note is held (the
 * server lives); once nothing holds it (the server was killed) housekeeping removes the
 * folder at once, never through a link in it, and the note once it has expired; a dry
 * run only reports it. A note the listing took for dead but which cannot be claimed when
 * its turn comes (here, another lister's shared lock on it) keeps its folder: the claim
 * comes before anything the note names is touched. A note that is a link is never
 * claimed: said, and its folder kept. */
START_TEST(dead_mcp_scratch_is_cleaned)
{
    char home[] = "/tmp/pybox-unit-scratch-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(home));
    setenv("PYBOX_HOME", home, 1);
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
    enum { LIVE, DEAD, DEAD_UNEXPIRED, BUSY, LINKED, N };
    pybox_journal_t note[N];
    char dir[N][PATH_MAX], file[PATH_MAX + 16], outside[PATH_MAX + 16];
    const int64_t expires[N] = {1, 1, pybox_wall_s() + 3600, 1, 1};
    snprintf(outside, sizeof outside, "%s/outside", home);
    FILE *f = fopen(outside, "we");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(pybox_journal_scratch_open(&st, expires[i], &note[i], dir[i], sizeof dir[i], &err) == 0, "%s",
                      err.msg);
        ck_assert_int_eq(pybox_fmt(file, sizeof file, "%s/input.txt", dir[i]), 0);
        f = fopen(file, "we");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        ck_assert_int_eq(pybox_fmt(file, sizeof file, "%s/link", dir[i]), 0);
        ck_assert_int_eq(symlink(home, file), 0);
    }
    /* The note names its folder. */
    char notep[PATH_MAX + 64], text[2048] = "";
    snprintf(notep, sizeof notep, "%s/runs/%s.json", home, note[DEAD].run_id);
    f = fopen(notep, "re");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(text, 1, sizeof text - 1, f), 0);
    fclose(f);
    ck_assert_msg(strstr(text, dir[DEAD]) != NULL && strstr(text, "\"scratch\"") != NULL, "%s", text);
    /* SIGKILL, as far as the notes go: the lock goes, the note and the folder stay. */
    pybox_journal_abandon(&note[DEAD]);
    pybox_journal_abandon(&note[DEAD_UNEXPIRED]);
    pybox_journal_abandon(&note[BUSY]);
    char busyp[PATH_MAX + 64];
    snprintf(busyp, sizeof busyp, "%s/runs/%s.json", home, note[BUSY].run_id);
    int busy = open(busyp, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(busy, 0);
    ck_assert_int_eq(flock(busy, LOCK_SH), 0);
    pybox_journal_abandon(&note[LINKED]);
    char linkedp[PATH_MAX + 64];
    snprintf(linkedp, sizeof linkedp, "%s/runs/%s.json", home, note[LINKED].run_id);
    ck_assert_int_eq(unlink(linkedp), 0);
    ck_assert_int_eq(symlink(outside, linkedp), 0);

    script_t s;
    script_init(&s);
    pybox_backend_t *be = NULL;
    scripted_backend(&be, &s);
    pybox_leftovers_report_t rep;
    ck_assert_int_eq(pybox_leftovers_clean(&st, be, true, false, &rep, &err), 0);
    int said = 0;
    for (size_t i = 0; i < rep.n; i++)
        said += strcmp(rep.entries[i].what, "scratch") == 0;
    ck_assert_int_eq(said, 2);
    pybox_leftovers_report_free(&rep);
    for (int i = 0; i < N; i++)
        ck_assert_msg(present(dir[i]), "a dry run removed %s", dir[i]);

    ck_assert_int_eq(pybox_leftovers_clean(&st, be, false, true, &rep, &err), 0);
    bool linked_said = false;
    for (size_t i = 0; i < rep.n; i++)
        linked_said = linked_said || (strcmp(rep.entries[i].run_id, note[LINKED].run_id) == 0 &&
                                      !rep.entries[i].removed && strstr(rep.entries[i].reason, "could not be claimed"));
    pybox_leftovers_report_free(&rep);
    ck_assert_msg(linked_said, "a note that is a link was not said");
    ck_assert_msg(present(dir[LINKED]), "the scratch of a note that is a link was removed");
    ck_assert_msg(present(dir[LIVE]), "the scratch of a live call was removed");
    ck_assert_msg(present(dir[BUSY]), "the scratch of a note that could not be claimed was removed");
    ck_assert(present(notep) == false);
    ck_assert(!present(dir[DEAD]));
    ck_assert(!present(dir[DEAD_UNEXPIRED]));
    snprintf(notep, sizeof notep, "%s/runs/%s.json", home, note[DEAD_UNEXPIRED].run_id);
    ck_assert_msg(present(notep), "an unexpired note went");
    snprintf(notep, sizeof notep, "%s/runs/%s.json", home, note[LIVE].run_id);
    ck_assert(present(notep));
    ck_assert_msg(present(outside) && present(home), "a link in a scratch folder was followed");
    /* Claimable once the other lock is gone: then it goes, with its note. */
    close(busy);
    ck_assert_int_eq(pybox_leftovers_clean(&st, be, false, true, &rep, &err), 0);
    pybox_leftovers_report_free(&rep);
    ck_assert(!present(dir[BUSY]));
    ck_assert(!present(busyp));

    /* The call's own end takes both. */
    pybox_journal_scratch_close(&st, &note[LIVE]);
    ck_assert(!present(dir[LIVE]));
    ck_assert(!present(notep));
    unsetenv("PYBOX_HOME");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", home);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_run(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("flow");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, clean_exit);
    tcase_add_test(tc, program_exit_code_is_kept);
    tcase_add_test(tc, each_phase_failure_is_pybox_s);
    tcase_add_test(tc, a_failure_without_a_reason_still_says_where);
    tcase_add_test(tc, host_deadline_stops_the_program);
    tcase_add_test(tc, ticks_while_the_program_runs);
    tcase_add_test(tc, a_box_that_ignores_the_stop_is_killed);
    tcase_add_test(tc, box_timer);
    tcase_add_test(tc, no_record_is_unexplained);
    tcase_add_test(tc, a_stop_from_outside_is_reported);
    tcase_add_test(tc, exit_codes_that_disagree_are_noted);
    tcase_add_test(tc, memory_findings);
    tcase_add_test(tc, an_impossible_exit_status_is_not_passed_on);
    tcase_add_test(tc, a_box_not_confirmed_gone_fails_the_run);
    tcase_add_test(tc, cancelled_before_start);
    tcase_add_test(tc, cancelled_while_running);
    tcase_add_test(tc, interrupted_while_running);
    tcase_add_test(tc, the_total_counts_from_pybox_s_start);
    tcase_add_test(tc, housekeeping_leaves_what_is_slow_to_cleanup);
    tcase_add_test(tc, dead_mcp_scratch_is_cleaned);
    tcase_add_test(tc, an_ended_stream_is_not_polled_again);
    tcase_add_test(tc, a_stdin_with_nothing_to_write_is_not_polled);
    tcase_add_test(tc, the_box_s_end_ends_the_run_whatever_its_streams);
    tcase_add_test(tc, what_outlived_the_box_is_named_not_blamed);
    tcase_add_test(tc, a_kill_that_finds_the_box_ended_is_not_a_kill);
    tcase_add_test(tc, lease_lasts_from_the_box_start);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("files out");
    tcase_add_checked_fixture(tf, out_setup, out_teardown);
    tcase_add_test(tf, files_taken_while_held_are_delivered);
    tcase_add_test(tf, a_copy_after_the_box_stopped_is_not_a_delivery);
    tcase_add_test(tf, an_engine_lost_mid_run_is_said_plainly);
    tcase_add_test(tf, a_stream_cut_mid_run_is_said_plainly);
    suite_add_tcase(s, tf);
    return s;
}
