/* SPDX-License-Identifier: MIT */
/* Unit tests for receipts: the JSON form, the fenced terminal form, refusals (receipt.h). */
#include <check.h>
#include <cjson/cJSON.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "../guest/proto.h"
#include "../pybox/bounds.h"
#include "../pybox/buf.h"
#include "../pybox/cgroup.h"
#include "../pybox/escape.h"
#include "../pybox/files.h"
#include "../pybox/receipt.h"
#include "../pybox/run.h"
#include "../pybox/stream.h"
#include "../pybox/util.h"
#include "suites.h"

/* ---- a synthetic run ---- */

static void set_str(char *dst, size_t size, const char *src)
{
    ck_assert_int_eq(pybox_strlcpy(dst, src, size), 0);
}

/* A finished run as pybox_run() leaves it: the program wrote out/err (out followed by the
 * init's done record, found and stripped the way the run flow does it). */
static void make_result(pybox_run_result_t *r, pybox_end_t end, const char *out, size_t out_len, const char *err,
                        size_t err_len)
{
    memset(r, 0, sizeof *r);
    set_str(r->run_id, sizeof r->run_id, "0123456789abcdef0123456789abcdef");
    set_str(r->box_name, sizeof r->box_name, "pybox-0123456789abcdef0123456789abcdef");
    set_str(r->started_wall, sizeof r->started_wall, "2026-01-02T03:04:05.678Z");
    pybox_policy_defaults(&r->policy);
    set_str(r->policy.image_id, sizeof r->policy.image_id,
            "sha256:7588a45de040c00cb94096221b510e8808062e8084d7c43fce079d2751ad8434");
    set_str(r->image_name, sizeof r->image_name, "stdlib");
    pybox_sha256_hex("print(1)\n", 9, r->program_sha256);
    r->program_bytes = 9;
    pybox_sha256_hex("policy", 6, r->policy_sha256);
    set_str(r->box_id, sizeof r->box_id, "08e304e9b9ce733e8d31601fc4d09b850616bafb579e49f90cc92b0c371f396b");
    set_str(r->engine, sizeof r->engine, "docker 20.10.24 (API 1.41)");
    r->created = r->verified = r->started = r->removed = r->gone = true;
    r->checked = 57;
    r->input_complete = true;
    r->t.create_ms = 11.04;
    r->t.total_ms = 250.06;

    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    pybox_error_t e = {0};
    ck_assert_int_eq(pybox_random_hex(PYBOX_GUEST_SECRET_HEX / 2, secret, &e), 0);
    char rec[PYBOX_GUEST_RECORD_MAX + 1];
    int code = end == PYBOX_END_TARGET_EXIT ? 3 : 137;
    ck_assert_int_eq(
        pybox_fmt(rec, sizeof rec,
                  "%s%s exit=%d signal=%d timer=0 stopped=%d program_ms=42 reaped=0 term=0 calls=1 end=%s\n",
                  PYBOX_GUEST_DONE, secret, code, code == 137 ? 9 : 0, end == PYBOX_END_SUPERVISOR_KILL ? 1 : 0,
                  end == PYBOX_END_SUPERVISOR_KILL ? "stopped" : "program"),
        0);

    pybox_sink_init(&r->out, PYBOX_OUTPUT_CAP);
    pybox_sink_init(&r->err, PYBOX_OUTPUT_CAP);
    /* in uneven pieces, as the stream delivers it */
    for (size_t off = 0; off < out_len; off += 1000)
        ck_assert_int_eq(pybox_sink_add(&r->out, out + off, out_len - off < 1000 ? out_len - off : 1000), 0);
    ck_assert_int_eq(pybox_sink_add(&r->err, err, err_len), 0);
    bool with_record = end == PYBOX_END_TARGET_EXIT || end == PYBOX_END_SUPERVISOR_KILL;
    if (with_record) {
        ck_assert_int_eq(pybox_sink_add(&r->out, rec, strlen(rec)), 0);
        ck_assert_int_eq(pybox_done_record_find(&r->out, secret, &r->record, &e), 1);
    }
    pybox_sink_said(&r->out, r->record.seen ? r->record.length : 0, &r->said_out);
    pybox_sink_said(&r->err, 0, &r->said_err);

    r->have_exit = end != PYBOX_END_PYBOX_ERROR;
    r->exit.exit_code = code;
    set_str(r->exit.started_at, sizeof r->exit.started_at, "2026-01-02T03:04:05.700Z");
    set_str(r->exit.finished_at, sizeof r->exit.finished_at, "2026-01-02T03:04:05.742Z");
    r->end = end;
    switch (end) {
    case PYBOX_END_TARGET_EXIT:
        r->exit_code = code;
        break;
    case PYBOX_END_SUPERVISOR_KILL:
        r->exit_code = 124;
        r->deadline_fired = true;
        break;
    default:
        r->exit_code = 125;
        break;
    }
}

static void add_unknown(pybox_run_result_t *r, const char *text)
{
    ck_assert_int_lt(r->n_unknown, PYBOX_UNKNOWN_MAX);
    r->unknown[r->n_unknown] = strdup(text);
    ck_assert_ptr_nonnull(r->unknown[r->n_unknown]);
    r->n_unknown++;
}

/* The JSON receipt as a consumer sees it: printed, then parsed again. */
static cJSON *receipt_roundtrip(const pybox_run_result_t *r)
{
    cJSON *j = pybox_receipt_json(r);
    ck_assert_ptr_nonnull(j);
    char why[512];
    ck_assert_msg(pybox_receipt_conforms(j, why, sizeof why) == 0, "the receipt does not conform: %s", why);
    char *text = cJSON_PrintUnformatted(j);
    ck_assert_ptr_nonnull(text);
    ck_assert(pybox_utf8_valid(text, strlen(text)));
    cJSON_Delete(j);
    cJSON *back = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(back);
    return back;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(v != NULL, "the receipt has no %s", key);
    return v;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsString(v), "%s is not a string", key);
    return v->valuestring;
}

static double get_num(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    return v->valuedouble;
}

static char *b64(const void *data, size_t len)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_base64(&b, data, len), 0);
    return pybox_buf_steal(&b);
}

/* ---- JSON ---- */

START_TEST(json_shape)
{
    const char out[] = "hello\nworld\n";
    const char err[] = "a warning\n";
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, sizeof out - 1, err, sizeof err - 1);
    add_unknown(&r, "peak memory not established");
    cJSON *j = receipt_roundtrip(&r);

    ck_assert_str_eq(get_str(j, "schema"), "pybox.receipt/2");
    ck_assert_str_eq(get_str(j, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_str_eq(get_str(j, "run_id"), r.run_id);
    ck_assert_double_eq(get_num(j, "exit_code"), 3);

    const cJSON *asked = get(j, "asked");
    ck_assert(cJSON_IsObject(asked));
    ck_assert_str_eq(get_str(get(asked, "program"), "sha256"), r.program_sha256);
    ck_assert_double_eq(get_num(get(asked, "program"), "bytes"), 9);
    ck_assert_str_eq(get_str(get(asked, "image"), "id"), r.policy.image_id);
    ck_assert_double_eq(get_num(get(asked, "limits"), "memory_bytes"), (double)PYBOX_DEFAULT_MEMORY);
    ck_assert_double_eq(get_num(get(asked, "limits"), "swap_bytes"), 0);
    ck_assert_double_eq(get_num(get(asked, "limits"), "timeout_s"), 2.0);
    ck_assert_str_eq(get_str(get(asked, "policy"), "seccomp_sha256"), pybox_policy_seccomp_sha256());

    const cJSON *seen = get(j, "seen");
    ck_assert(cJSON_IsObject(seen));
    ck_assert_double_eq(get_num(get(seen, "backend_record"), "exit_code"), 3);
    ck_assert(cJSON_IsFalse(get(get(seen, "backend_record"), "oom_killed")));
    ck_assert_double_eq(get_num(get(seen, "init_record"), "exit_code"), 3);
    ck_assert_double_eq(get_num(get(seen, "init_record"), "program_ms"), 42);
    ck_assert_str_eq(get_str(seen, "clock"), "none");
    ck_assert(cJSON_IsTrue(get(get(seen, "box"), "confirmed_gone")));
    ck_assert_double_eq(get_num(get(seen, "box"), "settings_checked"), 57);

    const cJSON *said = get(j, "said");
    ck_assert_ptr_nonnull(strstr(get_str(said, "trust"), "untrusted"));
    const cJSON *so = get(said, "stdout");
    ck_assert_str_eq(get_str(so, "text"), "hello\nworld\n"); /* the done record is not the program's */
    ck_assert(cJSON_IsTrue(get(so, "utf8_valid")));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(so, "base64"));
    ck_assert(cJSON_IsFalse(get(so, "truncated")));
    ck_assert_double_eq(get_num(so, "total_bytes"), sizeof out - 1);
    ck_assert_double_eq(get_num(so, "kept_bytes"), sizeof out - 1);
    char d[65];
    pybox_sha256_hex(out, sizeof out - 1, d);
    ck_assert_str_eq(get_str(so, "sha256"), d);
    const cJSON *se = get(said, "stderr");
    ck_assert_str_eq(get_str(se, "text"), "a warning\n");
    pybox_sha256_hex(err, sizeof err - 1, d);
    ck_assert_str_eq(get_str(se, "sha256"), d);

    const cJSON *unknown = get(j, "unknown");
    ck_assert(cJSON_IsArray(unknown));
    ck_assert_int_eq(cJSON_GetArraySize(unknown), 1);
    ck_assert_str_eq(cJSON_GetArrayItem(unknown, 0)->valuestring, "peak memory not established");

    /* only a PyBox failure carries an error */
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "error"));
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

/* The host a run was on: its kernel, its cgroup hierarchy and whether systemd manages
 * it, in both forms; a host with neither hierarchy says null, never a version it lacks. */
START_TEST(host_said)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    set_str(r.host.kernel, sizeof r.host.kernel, "6.1.0-27-amd64");
    r.host.version = PYBOX_CG_V2;
    r.host.systemd = true;
    cJSON *j = receipt_roundtrip(&r);
    const cJSON *h = get(get(j, "seen"), "host");
    ck_assert_str_eq(get_str(h, "kernel"), "6.1.0-27-amd64");
    ck_assert_str_eq(get_str(h, "cgroup"), "v2");
    ck_assert_str_eq(get_str(h, "cgroup_manager"), "systemd");
    cJSON_Delete(j);
    pybox_buf_t o;
    pybox_buf_init(&o, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 100, &o), 0);
    ck_assert_msg(strstr(o.data, "  host       Linux 6.1.0-27-amd64, cgroup v2, managed by systemd\n") != NULL, "%s",
                  o.data);
    pybox_buf_free(&o);
    r.host.version = PYBOX_CG_V1;
    r.host.systemd = false;
    j = receipt_roundtrip(&r);
    h = get(get(j, "seen"), "host");
    ck_assert_str_eq(get_str(h, "cgroup"), "v1");
    ck_assert_str_eq(get_str(h, "cgroup_manager"), "none");
    cJSON_Delete(j);
    r.host.version = PYBOX_CG_NONE;
    j = receipt_roundtrip(&r);
    ck_assert(cJSON_IsNull(get(get(get(j, "seen"), "host"), "cgroup")));
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

/* The host as PyBox reads it: a unified root is v2, a memory controller's folder v1, the
 * mark sd_booted(3) looks for says systemd (fixture trees). */
START_TEST(host_read)
{
    pybox_cgroup_host_t h;
    pybox_cgroup_host(PYBOX_FIXTURES "/cgroup/v2-systemd", PYBOX_FIXTURES "/cgroup/v2-systemd/system.slice", &h);
    ck_assert_int_eq(h.version, PYBOX_CG_V2);
    ck_assert(h.systemd);
    ck_assert_int_gt((int)strlen(h.kernel), 0);
    pybox_cgroup_host(PYBOX_FIXTURES "/cgroup/v1", PYBOX_FIXTURES "/no-such-folder", &h);
    ck_assert_int_eq(h.version, PYBOX_CG_V1);
    ck_assert(!h.systemd);
    pybox_cgroup_host(PYBOX_FIXTURES "/cgroup/proc", PYBOX_FIXTURES "/no-such-folder", &h);
    ck_assert_int_eq(h.version, PYBOX_CG_NONE);
}
END_TEST

START_TEST(json_deadline)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_SUPERVISOR_KILL, "tick\n", 5, "", 0);
    cJSON *j = receipt_roundtrip(&r);
    ck_assert_str_eq(get_str(j, "status"), "SUPERVISOR_KILL_OBSERVED");
    ck_assert_double_eq(get_num(j, "exit_code"), 124);
    ck_assert_str_eq(get_str(get(j, "seen"), "clock"), "host_deadline");
    ck_assert(cJSON_IsTrue(get(get(j, "seen"), "host_deadline_passed")));
    const cJSON *se = get(get(j, "said"), "stderr");
    ck_assert_str_eq(get_str(se, "text"), "");
    ck_assert_double_eq(get_num(se, "total_bytes"), 0);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "error"));
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

START_TEST(json_invalid_utf8)
{
    const char out[] = "ok \xff\xfe then \xc0\xaf and \xe2\x9c\x93\n";
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, sizeof out - 1, "", 0);
    cJSON *j = receipt_roundtrip(&r);
    const cJSON *so = get(get(j, "said"), "stdout");
    ck_assert(cJSON_IsFalse(get(so, "utf8_valid")));
    const char *text = get_str(so, "text");
    ck_assert(pybox_utf8_valid(text, strlen(text)));
    ck_assert_str_eq(text, "ok \xef\xbf\xbd\xef\xbf\xbd then \xef\xbf\xbd\xef\xbf\xbd and \xe2\x9c\x93\n");
    /* the exact bytes are there too */
    char *want = b64(out, sizeof out - 1);
    ck_assert_str_eq(get_str(so, "base64"), want);
    free(want);
    char d[65];
    pybox_sha256_hex(out, sizeof out - 1, d);
    ck_assert_str_eq(get_str(so, "sha256"), d);
    /* stderr was fine: no base64 there */
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(get(get(j, "said"), "stderr"), "base64"));
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

/* What PyBox writes itself can quote bytes from outside: a note cut in the middle of a
 * character, an output folder named by the operator in Latin-1. The receipt is still valid
 * UTF-8 (an MCP client may drop a session over one bad byte); the terminal form escapes. */
START_TEST(json_notes_and_folder_always_utf8)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    add_unknown(&r, "no output folder was created: 'aaa\xc3' and 'AAA\xc3' differ only by case");
    r.output_asked = true;
    pybox_outputs_init(&r.outputs);
    r.outputs.status = PYBOX_OUT_DELIVERED;
    set_str(r.outputs.dir, sizeof r.outputs.dir, "/srv/r\xe9sultats");
    cJSON *j = receipt_roundtrip(&r); /* fails unless the printed receipt is UTF-8 */
    const cJSON *unk = get(j, "unknown");
    const char *note = cJSON_GetArrayItem(unk, 0)->valuestring;
    ck_assert_str_eq(note, "no output folder was created: 'aaa\xef\xbf\xbd' and 'AAA\xef\xbf\xbd' differ only by case");
    ck_assert_str_eq(get_str(get(get(j, "seen"), "files"), "folder"), "/srv/r\xef\xbf\xbdsultats");
    cJSON_Delete(j);
    pybox_buf_t text;
    pybox_buf_init(&text, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 200, &text), 0);
    ck_assert_ptr_nonnull(strstr(text.data, "'aaa\\xc3' and"));
    pybox_buf_free(&text);
    pybox_run_result_free(&r);
}
END_TEST

/* A session call's report (its value, its exception) is the program's to forge: under
 * SAID, fenced and escaped like its streams. */
START_TEST(text_session_report_fenced)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    set_str(r.start.call_report, sizeof r.start.call_report, "{\"value\":\"3\"}\x1b[2J");
    pybox_buf_t text;
    pybox_buf_init(&text, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 200, &text), 0);
    ck_assert_ptr_null(strchr(text.data, 0x1b));
    const char *said = strstr(text.data, "SAID"), *unknown = strstr(text.data, "UNKNOWN");
    const char *report = strstr(text.data, "  | {\"value\":\"3\"}\\x1b[2J");
    ck_assert_msg(said != NULL && report != NULL && unknown != NULL && said < report && report < unknown, "%s",
                  text.data);
    pybox_buf_free(&text);
    pybox_run_result_free(&r);
}
END_TEST

/* What the engine says of itself, and why the kernel's counters were not read, come from
 * outside PyBox too: escaped on the terminal like everything else that does. */
START_TEST(text_engine_words_escaped)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    set_str(r.engine, sizeof r.engine, "Docker/99 \x1b[2J\x1b]0;owned\x07 (API 1.41)");
    set_str(r.watch_error, sizeof r.watch_error, "cgroup \x1b[31mnot found\r");
    pybox_buf_t text;
    pybox_buf_init(&text, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 200, &text), 0);
    ck_assert_ptr_null(strchr(text.data, 0x1b));
    ck_assert_ptr_null(strchr(text.data, '\r'));
    ck_assert_ptr_nonnull(strstr(text.data, "Docker/99 \\x1b[2J"));
    ck_assert_ptr_nonnull(strstr(text.data, "cgroup \\x1b[31mnot found\\r"));
    pybox_buf_free(&text);
    pybox_run_result_free(&r);
}
END_TEST

START_TEST(json_nul_bytes_not_lost)
{
    /* a NUL cannot live in a JSON string as cJSON holds it: the text must not silently
     * stop there, and the exact bytes must be recoverable */
    const char out[] = "before\0after\n";
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, sizeof out - 1, "", 0);
    cJSON *j = receipt_roundtrip(&r);
    const cJSON *so = get(get(j, "said"), "stdout");
    const char *text = get_str(so, "text");
    ck_assert_str_eq(text, "before\xef\xbf\xbd"
                           "after\n");
    char *want = b64(out, sizeof out - 1);
    ck_assert_str_eq(get_str(so, "base64"), want);
    free(want);
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

START_TEST(json_truncated)
{
    size_t n = PYBOX_OUTPUT_CAP + 5000;
    char *out = malloc(n);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++)
        out[i] = i % 80 == 79 ? '\n' : (char)('a' + i % 26);
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, n, "", 0);
    cJSON *j = receipt_roundtrip(&r);
    const cJSON *so = get(get(j, "said"), "stdout");
    ck_assert(cJSON_IsTrue(get(so, "truncated")));
    ck_assert_double_eq(get_num(so, "total_bytes"), (double)n);
    ck_assert_double_eq(get_num(so, "kept_bytes"), PYBOX_OUTPUT_CAP);
    ck_assert_uint_eq(strlen(get_str(so, "text")), PYBOX_OUTPUT_CAP);
    char d[65];
    pybox_sha256_hex(out, PYBOX_OUTPUT_CAP, d);
    ck_assert_str_eq(get_str(so, "sha256"), d);
    cJSON_Delete(j);
    pybox_run_result_free(&r);
    free(out);
}
END_TEST

START_TEST(json_pybox_error)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_PYBOX_ERROR, "", 0, "", 0);
    pybox_error_set(&r.error, PYBOX_ERR_POLICY, 0, "the box differs: HostConfig.Memory \xff\xfe");
    cJSON *j = receipt_roundtrip(&r);
    ck_assert_str_eq(get_str(j, "status"), "PYBOX_ERROR");
    ck_assert_double_eq(get_num(j, "exit_code"), 125);
    const cJSON *e = get(j, "error");
    ck_assert(cJSON_IsObject(e));
    ck_assert_str_eq(get_str(e, "kind"), "policy");
    const char *msg = get_str(e, "message");
    ck_assert(pybox_utf8_valid(msg, strlen(msg)));
    ck_assert_ptr_nonnull(strstr(msg, "HostConfig.Memory"));
    ck_assert(cJSON_IsNull(get(get(j, "seen"), "backend_record")));
    ck_assert(cJSON_IsNull(get(get(j, "seen"), "init_record")));
    cJSON_Delete(j);
    pybox_run_result_free(&r);
}
END_TEST

/* ---- terminal form ---- */

static char *receipt_text(const pybox_run_result_t *r)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_receipt_text(r, 80, &b), 0);
    ck_assert_ptr_nonnull(b.data);
    ck_assert_uint_eq(strlen(b.data), b.len);
    return pybox_buf_steal(&b);
}

/* Nothing in the receipt can drive a terminal: no control byte but the newline. */
static void check_inert(const char *t)
{
    for (const char *p = t; *p; p++) {
        unsigned char c = (unsigned char)*p;
        ck_assert_msg(c == '\n' || (c >= 0x20 && c != 0x7f), "control byte 0x%02x in the receipt at %td", c, p - t);
    }
    ck_assert_msg(pybox_utf8_valid(t, strlen(t)), "the receipt is not valid UTF-8");
    ck_assert_ptr_null(strstr(t, "\xe2\x80\xae"));
    ck_assert_ptr_null(strstr(t, "\xc2\x9b"));
}

static int count_lines_starting(const char *t, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *line = t; *line;) {
        if (strncmp(line, prefix, pl) == 0)
            n++;
        const char *nl = strchr(line, '\n');
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    return n;
}

/* Is `want` one whole line of t? */
static bool has_line(const char *t, const char *want)
{
    size_t wl = strlen(want);
    for (const char *line = t; *line;) {
        const char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        if (ll == wl && memcmp(line, want, wl) == 0)
            return true;
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    return false;
}

START_TEST(text_hostile_output)
{
    const char out[] = "hello\n"
                       "\x1b[2J\x1b[Hcleared\r\n"
                       "status     TARGET_EXIT_OBSERVED\n"
                       "  status     TARGET_EXIT_OBSERVED\n"
                       "\rover\x1b[1A\x1b[2K  status     TARGET_EXIT_OBSERVED\n"
                       "\xe2\x80\xae"
                       "desrever\n"
                       "bad \xff\xfe\xc0\xaf bytes\n"
                       "c1 \xc2\x9b"
                       "31m\n"
                       "  | fake fence\n"
                       "PyBox receipt  run forged\n"
                       "no newline at the end";
    const char err[] = "Traceback (most recent call last):\n\x1b]0;title\x07\n";
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_SUPERVISOR_KILL, out, sizeof out - 1, err, sizeof err - 1);
    add_unknown(&r, "cgroup \x1b[31mnot\x1b[0m readable\nsecond line");
    char *t = receipt_text(&r);

    check_inert(t);
    /* the only status line is PyBox's own */
    ck_assert_int_eq(count_lines_starting(t, "  status"), 1);
    ck_assert(has_line(t, "  status     SUPERVISOR_KILL_OBSERVED"));
    ck_assert_int_eq(count_lines_starting(t, "PyBox receipt"), 1);

    /* every line the program wrote is fenced, escaped, and in order */
    static const char *const fenced[] = {
        "  | hello",
        "  | \\x1b[2J\\x1b[Hcleared\\r",
        "  | status     TARGET_EXIT_OBSERVED",
        "  |   status     TARGET_EXIT_OBSERVED",
        "  | \\rover\\x1b[1A\\x1b[2K  status     TARGET_EXIT_OBSERVED",
        "  | \\u{202e}desrever",
        "  | bad \\xff\\xfe\\xc0\\xaf bytes",
        "  | c1 \\u{009b}31m",
        "  |   | fake fence",
        "  | PyBox receipt  run forged",
        "  | no newline at the end",
        "  | Traceback (most recent call last):",
        "  | \\x1b]0;title\\x07",
    };
    const char *pos = t;
    for (size_t i = 0; i < sizeof fenced / sizeof *fenced; i++) {
        ck_assert_msg(has_line(t, fenced[i]), "missing line: %s\n---\n%s", fenced[i], t);
        const char *at = strstr(pos, fenced[i]);
        ck_assert_msg(at != NULL, "out of order: %s", fenced[i]);
        pos = at + strlen(fenced[i]);
    }
    ck_assert_int_eq(count_lines_starting(t, PYBOX_RECEIPT_FENCE), (int)(sizeof fenced / sizeof *fenced));

    /* program text appears nowhere outside the fence */
    for (const char *line = t; *line;) {
        const char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, PYBOX_RECEIPT_FENCE, strlen(PYBOX_RECEIPT_FENCE)) != 0) {
            char *copy = strndup(line, ll);
            ck_assert_ptr_nonnull(copy);
            ck_assert_msg(strstr(copy, "TARGET_EXIT") == NULL && strstr(copy, "desrever") == NULL &&
                              strstr(copy, "forged") == NULL && strstr(copy, "Traceback") == NULL,
                          "program text outside the fence: %s", copy);
            free(copy);
        }
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    /* an unknown note is one escaped line */
    ck_assert(has_line(t, "  - cgroup \\x1b[31mnot\\x1b[0m readable\\nsecond line"));
    /* the done record never shows up as output */
    ck_assert_ptr_null(strstr(t, "pybox-done"));
    free(t);
    pybox_run_result_free(&r);
}
END_TEST

START_TEST(text_truncated)
{
    size_t n = PYBOX_OUTPUT_CAP * 2;
    char *out = malloc(n);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++)
        out[i] = i % 100 == 99 ? '\n' : 'x';
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, n, "", 0);
    char *t = receipt_text(&r);
    check_inert(t);
    ck_assert_ptr_nonnull(strstr(t, "TRUNCATED"));
    char total[32];
    ck_assert_int_eq(pybox_fmt(total, sizeof total, "%zu bytes", n), 0);
    ck_assert_ptr_nonnull(strstr(t, total));
    /* what was kept is shown, and no more */
    ck_assert_int_eq(count_lines_starting(t, PYBOX_RECEIPT_FENCE), (PYBOX_OUTPUT_CAP + 99) / 100);
    free(t);
    pybox_run_result_free(&r);
    free(out);

    /* a short output is not said to be truncated */
    make_result(&r, PYBOX_END_TARGET_EXIT, "short\n", 6, "", 0);
    t = receipt_text(&r);
    ck_assert_ptr_null(strstr(t, "TRUNCATED"));
    ck_assert(has_line(t, "  | short"));
    ck_assert(has_line(t, "  status     TARGET_EXIT_OBSERVED"));
    free(t);
    pybox_run_result_free(&r);
}
END_TEST

/* Display cells of a receipt line, non-ASCII counted as two (as the cutter does). */
static size_t line_cells(const char *line, size_t len)
{
    size_t cells = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)line[i] & 0xc0) != 0x80)
            cells += (unsigned char)line[i] < 0x80 ? 1 : 2;
    return cells;
}

START_TEST(text_long_lines_cut_and_fenced)
{
    /* A program line longer than the terminal, with wide characters and a forged
     * receipt line placed where a terminal would wrap it to column 0. */
    char out[700];
    size_t n = 0;
    memset(out, ' ', 76);
    n = 76;
    const char *forged = "  status     SUPERVISOR_KILL_OBSERVED";
    memcpy(out + n, forged, strlen(forged));
    n += strlen(forged);
    for (int i = 0; i < 60; i++) {
        memcpy(out + n, "\xe6\x97\xa5", 3); /* a wide character */
        n += 3;
    }
    out[n++] = '\n';
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, out, n, "", 0);
    for (int columns = 24; columns <= 120; columns += 48) {
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        ck_assert_int_eq(pybox_receipt_text(&r, columns, &b), 0);
        const char *said = strstr(b.data, "SAID");
        ck_assert_ptr_nonnull(said);
        const char *end = strstr(said, "UNKNOWN");
        ck_assert_ptr_nonnull(end);
        int pieces = 0;
        for (const char *line = strchr(said, '\n') + 1; line < end;) {
            const char *nl = strchr(line, '\n');
            if (strncmp(line, "  |", 3) == 0) {
                pieces++;
                ck_assert_msg(line_cells(line, (size_t)(nl - line)) <= (size_t)columns,
                              "a fenced line is wider than %d columns", columns);
            }
            line = nl + 1;
        }
        ck_assert_int_ge(pieces, 2);
        /* The forged line never starts a line of its own. */
        ck_assert(!has_line(b.data, forged));
        ck_assert_int_eq(count_lines_starting(b.data, "  status"), 1);
        pybox_buf_free(&b);
    }
    pybox_run_result_free(&r);
}
END_TEST

/* ---- text the program or the caller chose, outside SAID ---- */

/* Columns a terminal gives text (wcwidth in C.UTF-8; what it does not know counts 1). */
static size_t term_width(const char *s, size_t len, size_t *bytes_of_first)
{
    static locale_t utf8;
    if (utf8 == (locale_t)0) {
        utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        ck_assert(utf8 != (locale_t)0);
    }
    locale_t old = uselocale(utf8);
    size_t cols = 0, i = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    while (i < len) {
        wchar_t wc;
        size_t n = mbrtowc(&wc, s + i, len - i, &st);
        if (n == (size_t)-1 || n == (size_t)-2 || n == 0) {
            n = 1;
            memset(&st, 0, sizeof st);
            wc = L'?';
        }
        int w = wcwidth(wc);
        cols += w < 0 ? 1 : (size_t)w;
        if (bytes_of_first != NULL) {
            *bytes_of_first = n;
            break;
        }
        i += n;
    }
    uselocale(old);
    return cols;
}

static bool starts(const char *s, size_t len, const char *prefix)
{
    size_t pl = strlen(prefix);
    return len >= pl && memcmp(s, prefix, pl) == 0;
}

/* The receipt as a terminal `columns` wide shows it: every line, and every row a line
 * wraps into. No row starts (after spaces) with a forged receipt line; a line that holds
 * text the program or the caller chose (marked by ZQ or FORGED, or fenced) is no wider
 * than the terminal, counted both as a terminal does and as the receipt does (every
 * non-ASCII character as two). Returns a description of the first problem, or NULL. */
static const char *forged_row(const char *t, int columns, char *why, size_t whylen)
{
    for (const char *line = t; *line;) {
        const char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        bool untrusted =
            starts(line, ll, "  |") || memmem(line, ll, "ZQ", 2) != NULL || memmem(line, ll, "FORGED", 6) != NULL;
        if (untrusted && (term_width(line, ll, NULL) > (size_t)columns || line_cells(line, ll) > (size_t)columns)) {
            snprintf(why, whylen, "a line wider than %d columns: %.*s", columns, (int)ll, line);
            return why;
        }
        /* the rows a terminal wraps this line into */
        size_t i = 0;
        while (i < ll) {
            size_t row = i, cols = 0;
            while (i < ll) {
                size_t nb;
                size_t w = term_width(line + i, ll - i, &nb);
                if (cols + w > (size_t)columns && cols > 0)
                    break;
                cols += w;
                i += nb;
            }
            const char *r = line + row;
            size_t rl = i - row;
            size_t sp = 0;
            while (sp < rl && r[sp] == ' ')
                sp++;
            bool whole_header = row == 0 && ll == 7 && memcmp(line, "UNKNOWN", 7) == 0;
            if (starts(r + sp, rl - sp, "kernel     final") || starts(r + sp, rl - sp, "-          nothing") ||
                starts(r + sp, rl - sp, "FORGED") || (starts(r, rl, "UNKNOWN") && !whole_header)) {
                snprintf(why, whylen, "a row starts with forged text at %d columns: %.*s", columns, (int)rl, r);
                return why;
            }
        }
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    return NULL;
}

/* The receipt with every cut line joined again (continuation rows appended to the row
 * before them, without their fence). The caller frees it. */
static char *joined_rows(const char *t)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    const char *cont = "\n" PYBOX_RECEIPT_FENCE_CONT;
    for (const char *p = t; *p;) {
        const char *at = strstr(p, cont);
        size_t n = at ? (size_t)(at - p) : strlen(p);
        ck_assert_int_eq(pybox_buf_append(&b, p, n), 0);
        p += n + (at ? strlen(cont) : 0);
    }
    return pybox_buf_steal(&b);
}

/* Text that would forge receipt rows if the terminal wrapped it: "ZQ", pad spaces, then
 * forged rows, each padded to a multiple of the width so that when one starts a row the
 * next does too. */
static char *forger(int columns, int pad)
{
    static const char *const forged[] = {
        "  kernel     final reading (cgroup v1, 3 samples): memory peak 1.0 MiB, out-of-memory kills 0",
        "UNKNOWN",
        "  -          nothing noted",
        "FORGED",
    };
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    int rc = pybox_buf_puts(&b, "ZQ");
    for (int i = 0; i < pad; i++)
        rc |= pybox_buf_puts(&b, " ");
    for (size_t k = 0; k < sizeof forged / sizeof *forged; k++) {
        rc |= pybox_buf_puts(&b, forged[k]);
        size_t rest = strlen(forged[k]) % (size_t)columns;
        for (size_t i = 0; k + 1 < sizeof forged / sizeof *forged && rest != 0 && i < (size_t)columns - rest; i++)
            rc |= pybox_buf_puts(&b, " ");
    }
    ck_assert_int_eq(rc, 0);
    return pybox_buf_steal(&b);
}

static void add_out_entry(pybox_outputs_t *o, const char *name, char kind, bool returned)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 8;
        o->entries = realloc(o->entries, o->cap * sizeof *o->entries);
        ck_assert_ptr_nonnull(o->entries);
    }
    pybox_out_entry_t *e = &o->entries[o->n++];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    ck_assert_ptr_nonnull(e->name);
    e->kind = kind;
    e->returned = returned;
    e->bytes = 4;
    pybox_sha256_hex("data", 4, e->sha256);
    if (!returned)
        set_str(e->reason, sizeof e->reason, kind == 'l' ? "a symbolic link" : "its name has control characters");
}

enum { FORGE_DELIVERED, FORGE_REFUSED, FORGE_ERROR, FORGE_KINDS };

/* A run whose every name, path, reason, note and message is the forger's text h. */
static void forged_result(pybox_run_result_t *r, pybox_inputs_t *in, int kind, const char *h)
{
    make_result(r, kind == FORGE_ERROR ? PYBOX_END_PYBOX_ERROR : PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    pybox_inputs_init(in);
    in->files = calloc(2, sizeof *in->files);
    ck_assert_ptr_nonnull(in->files);
    in->n = 2;
    set_str(in->files[0].name, sizeof in->files[0].name, h);
    set_str(in->files[1].name, sizeof in->files[1].name, "in\xe2\x81\xaa.csv");
    for (size_t i = 0; i < in->n; i++)
        pybox_sha256_hex("in", 2, in->files[i].sha256);
    r->inputs = in;
    r->output_asked = true;
    pybox_outputs_init(&r->outputs);
    pybox_outputs_t *o = &r->outputs;
    o->status = kind == FORGE_REFUSED ? PYBOX_OUT_REFUSED : PYBOX_OUT_DELIVERED;
    ck_assert_int_eq(pybox_fmt(o->dir, sizeof o->dir, "/tmp/%s", h), 0);
    if (kind == FORGE_REFUSED) /* as files.c quotes a name: its first 100 bytes */
        snprintf(o->reason, sizeof o->reason, "'%.100s' is named twice in the archive", h);
    add_out_entry(o, "report.csv", 'f', kind != FORGE_REFUSED);
    add_out_entry(o, h, 'f', kind != FORGE_REFUSED);
    add_out_entry(o, h, 'l', false);
    add_out_entry(o, "report\xe2\x81\xaa.csv", 'f', false);
    add_unknown(r, h);
    pybox_buf_t note;
    pybox_buf_init(&note, 0);
    ck_assert_int_eq(pybox_buf_printf(&note, "no output folder was created: '%s' is named twice", h), 0);
    add_unknown(r, note.data);
    pybox_buf_free(&note);
    if (kind == FORGE_ERROR)
        pybox_error_set(&r->error, PYBOX_ERR_SYSTEM, 28, "writing %s/out: No space left on device", h);
}

/* Names and notes padded to the terminal's wrap point, followed by text that looks like
 * receipt lines: whatever the width and the padding, no terminal row starts with it, and
 * every line that holds it fits the terminal. */
START_TEST(text_forged_rows)
{
    static const int widths[] = {24, 80, 200, 12};
    char why[1024];
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        int columns = widths[w];
        for (int kind = 0; kind < FORGE_KINDS; kind++) {
            for (int pad = 0; pad < columns; pad++) {
                char *h = forger(columns, pad);
                pybox_run_result_t r;
                pybox_inputs_t in;
                forged_result(&r, &in, kind, h);
                pybox_buf_t b;
                pybox_buf_init(&b, 0);
                ck_assert_int_eq(pybox_receipt_text(&r, columns, &b), 0);
                const char *bad = forged_row(b.data, columns, why, sizeof why);
                if (bad != NULL)
                    ck_abort_msg("kind %d, pad %d: %s\n---\n%s", kind, pad, bad, b.data);
                if (pad == 0) {
                    check_inert(b.data);
                    /* everything is still there, and what is invisible is shown escaped */
                    ck_assert_int_eq(count_lines_starting(b.data, "UNKNOWN"), 1);
                    ck_assert_ptr_null(strstr(b.data, "\xe2\x81\xaa"));
                    char *whole = joined_rows(b.data);
                    if (kind != FORGE_REFUSED)
                        ck_assert_ptr_nonnull(strstr(whole, "- report\\u{206a}.csv  not brought back"));
                    ck_assert_ptr_nonnull(strstr(whole, "/box/in/in\\u{206a}.csv  0 bytes"));
                    ck_assert_ptr_nonnull(strstr(whole, "\n  - no output folder was created: 'ZQ  kernel"));
                    if (kind == FORGE_ERROR)
                        ck_assert_ptr_nonnull(strstr(whole, "PyBox failed: writing ZQ  kernel"));
                    free(whole);
                }
                pybox_buf_free(&b);
                pybox_inputs_free(&in);
                r.inputs = NULL;
                pybox_run_result_free(&r);
                free(h);
            }
        }
    }
}
END_TEST

/* A line holding a name is cut into rows with the fence, and nothing of it is lost. */
START_TEST(text_name_rows_fenced)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "", 0, "", 0);
    r.output_asked = true;
    pybox_outputs_init(&r.outputs);
    r.outputs.status = PYBOX_OUT_DELIVERED;
    set_str(r.outputs.dir, sizeof r.outputs.dir, "/tmp/res");
    char name[200];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    add_out_entry(&r.outputs, name, 'f', true);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 40, &b), 0);
    /* the first row is PyBox's, the rest are continuations behind the fence; joined
     * again they are the whole line */
    const char *row = strstr(b.data, "\n             + nnn");
    ck_assert_ptr_nonnull(row);
    row++;
    pybox_buf_t joined;
    pybox_buf_init(&joined, 0);
    int rows = 0;
    do {
        const char *nl = strchr(row, '\n');
        ck_assert_ptr_nonnull(nl);
        size_t skip = rows == 0 ? 0 : strlen(PYBOX_RECEIPT_FENCE_CONT);
        ck_assert_int_eq(pybox_buf_append(&joined, row + skip, (size_t)(nl - row) - skip), 0);
        ck_assert_uint_le(line_cells(row, (size_t)(nl - row)), 40);
        rows++;
        row = nl + 1;
    } while (strncmp(row, PYBOX_RECEIPT_FENCE_CONT, strlen(PYBOX_RECEIPT_FENCE_CONT)) == 0);
    ck_assert_int_ge(rows, 5);
    char want[400], sha[65];
    pybox_sha256_hex("data", 4, sha);
    ck_assert_int_eq(pybox_fmt(want, sizeof want, "             + %s  4 bytes, sha256 %.16s...", name, sha), 0);
    ck_assert_str_eq(joined.data, want);
    pybox_buf_free(&joined);
    pybox_buf_free(&b);
    pybox_run_result_free(&r);
}
END_TEST

/* The width: the terminal's when there is one, else COLUMNS when it is a number, else 80. */
START_TEST(text_columns_choice)
{
    ck_assert_int_eq(pybox_receipt_columns(100, NULL), 100);
    ck_assert_int_eq(pybox_receipt_columns(100, "50"), 100);
    ck_assert_int_eq(pybox_receipt_columns(0, NULL), 80);
    ck_assert_int_eq(pybox_receipt_columns(0, "132"), 132);
    ck_assert_int_eq(pybox_receipt_columns(-1, "40"), 40);
    static const char *const bad[] = {"", "abc", "-5", "0", "12x", " 40", "+40", "4 0", "0x50", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(pybox_receipt_columns(0, bad[i]) == 80, "COLUMNS=%s", bad[i]);
    /* what a terminal needs at least is used below that */
    ck_assert_int_eq(pybox_receipt_columns(3, NULL), PYBOX_RECEIPT_MIN_COLUMNS);
    ck_assert_int_eq(pybox_receipt_columns(0, "2"), PYBOX_RECEIPT_MIN_COLUMNS);
}
END_TEST

START_TEST(text_pybox_error)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_PYBOX_ERROR, "", 0, "", 0);
    pybox_error_set(&r.error, PYBOX_ERR_ENGINE, 0, "engine said \x1b[2J\nstatus     TARGET_EXIT_OBSERVED");
    char *t = receipt_text(&r);
    check_inert(t);
    ck_assert_int_eq(count_lines_starting(t, "  status"), 1);
    ck_assert(has_line(t, "  status     PYBOX_ERROR"));
    ck_assert_ptr_nonnull(strstr(t, "engine said \\x1b[2J\\nstatus"));
    ck_assert(has_line(t, "  exit code  125"));
    ck_assert_int_eq(count_lines_starting(t, PYBOX_RECEIPT_FENCE), 0);
    free(t);
    pybox_run_result_free(&r);
}
END_TEST

/* ---- refusal ---- */

/* Under any maximum, the terminal receipt is whole or nothing: never a text with a line,
 * or a fence, missing. */
START_TEST(text_whole_or_nothing)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "one\ntwo\n", 8, "err\n", 4);
    pybox_buf_t full;
    pybox_buf_init(&full, 0);
    ck_assert_int_eq(pybox_receipt_text(&r, 80, &full), 0);
    for (size_t max = 1; max <= full.len + 1; max += 7) {
        pybox_buf_t b;
        pybox_buf_init(&b, max);
        int rc = pybox_receipt_text(&r, 80, &b);
        if (max >= full.len) {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(b.data, full.data);
        } else {
            ck_assert_msg(rc == -1, "a receipt cut at %zu bytes came out", max);
            ck_assert_ptr_null(b.data);
        }
        pybox_buf_free(&b);
    }
    pybox_buf_free(&full);
    pybox_run_result_free(&r);
}
END_TEST

/* The definition catches what a writer could get wrong. */
START_TEST(schema_catches_changes)
{
    pybox_run_result_t r;
    make_result(&r, PYBOX_END_TARGET_EXIT, "x\n", 2, "", 0);
    cJSON *j = pybox_receipt_json(&r);
    char why[512];
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), 0);
    cJSON *seen = cJSON_GetObjectItemCaseSensitive(j, "seen");
    cJSON_AddStringToObject(seen, "surprise", "x");
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "receipt.seen.surprise"));
    cJSON_DeleteItemFromObjectCaseSensitive(seen, "surprise");
    cJSON_ReplaceItemInObjectCaseSensitive(j, "exit_code", cJSON_CreateString("0"));
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "receipt.exit_code"));
    cJSON_ReplaceItemInObjectCaseSensitive(j, "exit_code", cJSON_CreateNumber(0.5));
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), -1);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "exit_code", cJSON_CreateNumber(0));
    cJSON_ReplaceItemInObjectCaseSensitive(j, "status", cJSON_CreateString("ALL_FINE"));
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), -1);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "status", cJSON_CreateString("TARGET_EXIT_OBSERVED"));
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "said"), "stdout");
    ck_assert_int_eq(pybox_receipt_conforms(j, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "receipt.said.stdout: missing"));
    cJSON_Delete(j);
    /* the schema a client gets names every member the writer writes */
    cJSON *sch = pybox_receipt_schema(true);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(sch, "$schema")->valuestring,
                     "https://json-schema.org/draft/2020-12/schema");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sch, "oneOf")), 2);
    cJSON_Delete(sch);
    pybox_run_result_free(&r);
}
END_TEST

START_TEST(refusal_shape)
{
    pybox_error_t err = {0};
    pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "--timeout abc: give seconds \xff");
    cJSON *j = pybox_receipt_refusal(&err);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(get_str(j, "schema"), "pybox.receipt/2");
    ck_assert_str_eq(get_str(j, "status"), "REFUSED");
    ck_assert_double_eq(get_num(j, "exit_code"), 125);
    ck_assert(cJSON_IsFalse(get(j, "box_built")));
    char why[512];
    ck_assert_msg(pybox_receipt_conforms(j, why, sizeof why) == 0, "%s", why);
    const cJSON *e = get(j, "error");
    ck_assert_str_eq(get_str(e, "kind"), "refused");
    const char *msg = get_str(e, "message");
    ck_assert(pybox_utf8_valid(msg, strlen(msg)));
    ck_assert_ptr_nonnull(strstr(msg, "--timeout abc"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "said"));
    cJSON_Delete(j);

    /* a failure that is not a refusal says so */
    pybox_error_clear(&err);
    pybox_error_set(&err, PYBOX_ERR_ENGINE, 111, "connect(/var/run/docker.sock)");
    j = pybox_receipt_refusal(&err);
    ck_assert_str_eq(get_str(j, "status"), "PYBOX_ERROR");
    ck_assert_double_eq(get_num(j, "exit_code"), 125);
    ck_assert_str_eq(get_str(get(j, "error"), "kind"), "engine");
    ck_assert(cJSON_IsFalse(get(j, "box_built")));
    cJSON_Delete(j);
}
END_TEST

/* The receipt with every SGR sequence ("\x1b[...m") taken out. */
static char *strip_sgr(const char *t)
{
    char *out = malloc(strlen(t) + 1), *w = out;
    ck_assert_ptr_nonnull(out);
    for (const char *p = t; *p;) {
        if (p[0] == '\x1b' && p[1] == '[') {
            const char *q = p + 2;
            while ((*q >= '0' && *q <= '9') || *q == ';')
                q++;
            ck_assert_msg(*q == 'm', "an escape sequence that is not a colour at %td", p - t);
            p = q + 1;
            continue;
        }
        *w++ = *p++;
    }
    *w = '\0';
    return out;
}

static char *styled(const pybox_run_result_t *r, bool color)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    const pybox_receipt_style_t st = {.columns = 80, .color = color};
    ck_assert_int_eq(pybox_receipt_text_styled(r, &st, &b), 0);
    return pybox_buf_steal(&b);
}

/* In colour, the status word and the headings are coloured, and nothing else changes: the
 * receipt without its colour is the plain one, byte for byte, and the program's text (an
 * escape sequence of its own among it) is escaped and fenced exactly as without colour. */
START_TEST(text_colour)
{
    static const struct {
        pybox_end_t end;
        const char *sgr;
    } ends[] = {{PYBOX_END_TARGET_EXIT, "\x1b[1;32mTARGET_EXIT_OBSERVED\x1b[0m"},
                {PYBOX_END_SUPERVISOR_KILL, "\x1b[1;33mSUPERVISOR_KILL_OBSERVED\x1b[0m"},
                {PYBOX_END_BOX_TIMER_KILL, "\x1b[1;33mBOX_TIMER_KILL_OBSERVED\x1b[0m"},
                {PYBOX_END_PYBOX_ERROR, "\x1b[1;31mPYBOX_ERROR\x1b[0m"},
                {PYBOX_END_UNEXPLAINED, "\x1b[1;31mBOX_END_UNEXPLAINED\x1b[0m"}};
    const char out[] = "SEEN\n\x1b[32mTARGET_EXIT_OBSERVED\x1b[0m\n  status     forged\n";
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        pybox_run_result_t r;
        make_result(&r, ends[i].end, out, sizeof out - 1, "err\n", 4);
        char *plain = styled(&r, false), *colour = styled(&r, true);
        /* without colour: exactly today's receipt, with no escape byte */
        char *old = receipt_text(&r);
        ck_assert_str_eq(plain, old);
        check_inert(plain);
        /* in colour: the status word coloured, each heading bold */
        ck_assert_msg(strstr(colour, ends[i].sgr) != NULL, "no %s in:\n%s", ends[i].sgr, colour);
        ck_assert(has_line(colour, "\x1b[1mASKED\x1b[0m"));
        ck_assert(has_line(colour, "\x1b[1mSEEN\x1b[0m"));
        ck_assert(has_line(colour, "\x1b[1mUNKNOWN\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(colour, "\n\x1b[1mSAID (untrusted"));
        /* and nothing else: colour taken out, the plain receipt */
        char *back = strip_sgr(colour);
        ck_assert_str_eq(back, plain);
        /* the program's lines: the same bytes, escaped, no escape byte among them */
        const char *said = strstr(colour, "SAID (untrusted");
        ck_assert_ptr_nonnull(said);
        said = strchr(said, '\n') + 1;
        const char *end = strstr(said, "\n\x1b[1mUNKNOWN");
        ck_assert_ptr_nonnull(end);
        for (const char *p = said; p < end; p++)
            ck_assert_msg(*p != '\x1b', "an escape byte in the program's lines");
        ck_assert_ptr_nonnull(strstr(said, "  | \\x1b[32mTARGET_EXIT_OBSERVED\\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(plain, "  | \\x1b[32mTARGET_EXIT_OBSERVED\\x1b[0m"));
        free(back);
        free(old);
        free(plain);
        free(colour);
        pybox_run_result_free(&r);
    }
}
END_TEST

Suite *suite_receipt(void)
{
    Suite *s = suite_create("receipt");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, json_shape);
    tcase_add_test(tc, host_said);
    tcase_add_test(tc, host_read);
    tcase_add_test(tc, json_deadline);
    tcase_add_test(tc, json_invalid_utf8);
    tcase_add_test(tc, json_nul_bytes_not_lost);
    tcase_add_test(tc, json_notes_and_folder_always_utf8);
    tcase_add_test(tc, text_session_report_fenced);
    tcase_add_test(tc, text_engine_words_escaped);
    tcase_add_test(tc, json_truncated);
    tcase_add_test(tc, json_pybox_error);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    tc = tcase_create("text");
    tcase_add_test(tc, text_hostile_output);
    tcase_add_test(tc, text_truncated);
    tcase_add_test(tc, text_long_lines_cut_and_fenced);
    tcase_add_test(tc, text_pybox_error);
    tcase_add_test(tc, text_whole_or_nothing);
    tcase_add_test(tc, schema_catches_changes);
    tcase_add_test(tc, text_forged_rows);
    tcase_add_test(tc, text_name_rows_fenced);
    tcase_add_test(tc, text_columns_choice);
    tcase_add_test(tc, text_colour);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    tc = tcase_create("refusal");
    tcase_add_test(tc, refusal_shape);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
