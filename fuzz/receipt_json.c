/* SPDX-License-Identifier: MIT */
/* Fuzz target, a property: receipts of a run whose program wrote the fuzzer's bytes. The
 * input is cut at "\0--\0" into stdout, stderr, the names of files the box left in
 * /box/out, and an UNKNOWN note; the first byte picks how the run ended and the
 * terminal's width. The JSON receipt must conform to its definition
 * (pybox_receipt_conforms), print as valid UTF-8 and parse back with the same said text;
 * the terminal receipt must be valid UTF-8 with no control character but newlines, no
 * C1 control and no bidirectional control, whatever the bytes. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../guest/proto.h"
#include "../pybox/bounds.h"
#include "../pybox/escape.h"
#include "../pybox/receipt.h"
#include "../pybox/run.h"
#include "../pybox/util.h"
#include "common.h"

#define SEP "\0--\0"
#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void result_of(pybox_run_result_t *r, unsigned pick, const uint8_t *const part[4], const size_t len[4], size_t n)
{
    memset(r, 0, sizeof *r);
    pybox_watch_init(&r->watch);
    snprintf(r->run_id, sizeof r->run_id, "0123456789abcdef0123456789abcdef");
    snprintf(r->box_name, sizeof r->box_name, "pybox-0123456789abcdef0123456789abcdef");
    snprintf(r->started_wall, sizeof r->started_wall, "2026-01-02T03:04:05.678Z");
    pybox_policy_defaults(&r->policy);
    snprintf(r->policy.image_id, sizeof r->policy.image_id,
             "sha256:7588a45de040c00cb94096221b510e8808062e8084d7c43fce079d2751ad8434");
    snprintf(r->image_name, sizeof r->image_name, "stdlib");
    pybox_sha256_hex("print(1)\n", 9, r->program_sha256);
    r->program_bytes = 9;
    pybox_sha256_hex("policy", 6, r->policy_sha256);
    snprintf(r->box_id, sizeof r->box_id, "08e304e9b9ce733e8d31601fc4d09b850616bafb579e49f90cc92b0c371f396b");
    snprintf(r->backend, sizeof r->backend, "docker");
    snprintf(r->engine, sizeof r->engine, "docker 20.10.24 (API 1.41)");
    r->created = r->verified = r->started = r->removed = r->gone = r->input_complete = true;
    r->checked = 57;
    static const pybox_end_t ends[] = {PYBOX_END_TARGET_EXIT, PYBOX_END_SUPERVISOR_KILL, PYBOX_END_BOX_TIMER_KILL,
                                       PYBOX_END_UNEXPLAINED, PYBOX_END_PYBOX_ERROR};
    r->end = ends[pick % 5];
    pybox_sink_init(&r->out, PYBOX_OUTPUT_CAP);
    pybox_sink_init(&r->err, PYBOX_OUTPUT_CAP);
    if (n > 0 && pybox_sink_add(&r->out, (const char *)part[0], len[0]) < 0)
        abort();
    if (n > 1 && pybox_sink_add(&r->err, (const char *)part[1], len[1]) < 0)
        abort();
    pybox_error_t e = {0};
    /* the record the program may have forged with the run's own secret is found as the
     * run flow finds it */
    if (pybox_done_record_find(&r->out, SECRET, &r->record, &e) != 1)
        memset(&r->record, 0, sizeof r->record);
    pybox_sink_said(&r->out, r->record.seen ? r->record.length : 0, &r->said_out);
    pybox_sink_said(&r->err, 0, &r->said_err);
    r->have_exit = r->end != PYBOX_END_PYBOX_ERROR;
    r->exit.exit_code = r->end == PYBOX_END_TARGET_EXIT ? 3 : 137;
    snprintf(r->exit.started_at, sizeof r->exit.started_at, "2026-01-02T03:04:05.700Z");
    snprintf(r->exit.finished_at, sizeof r->exit.finished_at, "2026-01-02T03:04:05.742Z");
    r->exit_code = r->end == PYBOX_END_TARGET_EXIT ? 3 : r->end == PYBOX_END_PYBOX_ERROR ? 125 : 124;
    r->deadline_fired = r->end == PYBOX_END_SUPERVISOR_KILL;
    if (r->end == PYBOX_END_PYBOX_ERROR)
        pybox_error_set(&r->error, PYBOX_ERR_ENGINE, 0, "the engine said: %.*s", (int)(n > 3 ? len[3] : 0),
                        n > 3 ? (const char *)part[3] : "");
    /* names the box chose, one per line: listed as not brought back, with a reason */
    if (n > 2) {
        r->output_asked = true;
        r->outputs.status = PYBOX_OUT_REFUSED;
        snprintf(r->outputs.reason, sizeof r->outputs.reason, "the whole transfer was refused");
        const char *p = (const char *)part[2], *end = p + len[2];
        while (p < end && r->outputs.n < 8) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (r->outputs.n == r->outputs.cap) {
                r->outputs.cap = 8;
                r->outputs.entries = calloc(8, sizeof *r->outputs.entries);
                if (r->outputs.entries == NULL)
                    abort();
            }
            pybox_out_entry_t *x = &r->outputs.entries[r->outputs.n++];
            x->name = strndup(p, k); /* a NUL ends a name, as in an archive */
            if (x->name == NULL)
                abort();
            x->kind = 'f';
            snprintf(x->reason, sizeof x->reason, "it is nested too deep");
            r->outputs.not_returned++;
            p += k + (nl ? 1 : 0);
        }
    }
    if (n > 3) {
        r->unknown[0] = strndup((const char *)part[3], len[3]);
        r->n_unknown = r->unknown[0] ? 1 : 0;
    }
}

static void check_terminal(const char *t, size_t len)
{
    FUZZ_CHECK(pybox_utf8_valid(t, len), "the terminal receipt is not UTF-8");
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t k = pybox_utf8_seq((const unsigned char *)t + i, len - i, &cp);
        FUZZ_CHECK(cp == '\n' || (cp >= 0x20 && cp != 0x7f), "a raw control 0x%02x in the terminal receipt", cp);
        FUZZ_CHECK(!(cp >= 0x80 && cp <= 0x9f), "a C1 control U+%04X in the terminal receipt", cp);
        FUZZ_CHECK(!(cp >= 0x202a && cp <= 0x202e) && !(cp >= 0x2066 && cp <= 0x2069) && cp != 0x200e && cp != 0x200f &&
                       cp != 0x061c,
                   "a bidirectional control U+%04X in the terminal receipt", cp);
        i += k;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *part[4];
    size_t len[4];
    size_t n = fuzz_split(data + 1, size - 1, SEP, part, len, 4);
    pybox_run_result_t r;
    result_of(&r, data[0], part, len, n);

    cJSON *j = pybox_receipt_json(&r);
    FUZZ_CHECK(j != NULL, "no JSON receipt");
    char why[512];
    FUZZ_CHECK(pybox_receipt_conforms(j, why, sizeof why) == 0, "the receipt does not conform: %s", why);
    char *text = cJSON_PrintUnformatted(j);
    FUZZ_CHECK(text != NULL, "the receipt does not print");
    FUZZ_CHECK(pybox_utf8_valid(text, strlen(text)), "the printed receipt is not UTF-8");
    cJSON *back = cJSON_Parse(text);
    FUZZ_CHECK(back != NULL, "the printed receipt does not parse back");
    FUZZ_CHECK(cJSON_Compare(j, back, 1), "the receipt parsed back is not the same");
    const cJSON *said = cJSON_GetObjectItemCaseSensitive(back, "said");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(said, "stdout");
    const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(so, "base64");
    const cJSON *kept = cJSON_GetObjectItemCaseSensitive(so, "kept_bytes");
    FUZZ_CHECK(cJSON_IsNumber(kept) && (size_t)kept->valuedouble == r.said_out.kept, "kept_bytes misreported");
    /* the exact bytes are there: as text when they are UTF-8 without NUL, else in base64 */
    bool plain =
        pybox_utf8_valid(r.said_out.data, r.said_out.kept) && memchr(r.said_out.data, '\0', r.said_out.kept) == NULL;
    FUZZ_CHECK(plain == (b64 == NULL), "base64 given %s", b64 ? "for plain text" : "missing");
    if (plain) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(so, "text");
        FUZZ_CHECK(cJSON_IsString(t) && strlen(t->valuestring) == r.said_out.kept &&
                       memcmp(t->valuestring, r.said_out.data, r.said_out.kept) == 0,
                   "the text is not what the program wrote");
    }
    cJSON_Delete(back);
    free(text);
    cJSON_Delete(j);

    static const int widths[] = {0, 8, 20, 80, 132};
    pybox_buf_t t;
    pybox_buf_init(&t, 0);
    FUZZ_CHECK(pybox_receipt_text(&r, widths[(data[0] >> 3) % 5], &t) == 0 && pybox_buf_ok(&t), "no terminal receipt");
    check_terminal(t.data, t.len);
    pybox_buf_free(&t);
    pybox_run_result_free(&r);
    return 0;
}
