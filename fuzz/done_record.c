/* SPDX-License-Identifier: MIT */
/* Fuzz target: the program's stdout as the sink keeps it, and the guest init's records
 * looked for at its very end: the done record, a warm box's ready record and a session's
 * call record, each with the report before it. The first byte chooses the sink's cap and
 * how the rest is cut into reads. A record is found only whole, only last (a call record:
 * or just before the done record), only with this run's secret (the dictionary has it),
 * its report within the bytes before it; and what the program said is the rest (init's
 * call report and record cut out with the done record, pybox_sink_said_program). */
#include <stdio.h>
#include <string.h>

#include "../guest/proto.h"
#include "../pybox/bounds.h"
#include "../pybox/stream.h"
#include "common.h"

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const size_t caps[] = {0, 1, 16, 300, PYBOX_OUTPUT_CAP};
    size_t cap = caps[data[0] % 5];
    unsigned step = 1 + (data[0] >> 3);
    const char *p = (const char *)data + 1;
    size_t len = size - 1;
    pybox_sink_t s;
    pybox_sink_init(&s, cap);
    for (size_t off = 0; off < len;) {
        size_t n = len - off < step ? len - off : step;
        FUZZ_CHECK(pybox_sink_add(&s, p + off, n) == 0, "the sink refused %zu bytes", n);
        off += n;
    }
    FUZZ_CHECK(s.total == len, "the sink counted %llu of %zu bytes", (unsigned long long)s.total, len);
    pybox_done_record_t rec;
    memset(&rec, 0, sizeof rec);
    pybox_error_t err = {0};
    int found = pybox_done_record_find(&s, SECRET, &rec, &err);
    FUZZ_CHECK(found >= -1 && found <= 1, "found %d", found);
    uint64_t record_len = 0;
    if (found == 1) {
        FUZZ_CHECK(rec.seen && rec.length > 0 && rec.length <= PYBOX_GUEST_RECORD_MAX && rec.length <= len,
                   "a record of %llu bytes in %zu", (unsigned long long)rec.length, len);
        const char *at = p + len - rec.length;
        FUZZ_CHECK(memcmp(at, PYBOX_GUEST_DONE SECRET " ", strlen(PYBOX_GUEST_DONE SECRET " ")) == 0,
                   "the record found does not start with the marker");
        FUZZ_CHECK(p[len - 1] == '\n' && memchr(at, '\n', rec.length) == at + rec.length - 1,
                   "the record is not the last line");
        FUZZ_CHECK(rec.exit_code >= 0 && rec.exit_code <= 255 && rec.signal >= 0 && rec.signal <= 128 &&
                       rec.term >= 0 && rec.term <= 64,
                   "a record out of range");
        record_len = rec.length;
    }
    pybox_ready_record_t ready;
    memset(&ready, 0, sizeof ready);
    int got = pybox_ready_record_find(&s, SECRET, &ready, &err);
    FUZZ_CHECK(got >= -1 && got <= 1, "ready found %d", got);
    if (got == 1) {
        FUZZ_CHECK(ready.said <= PYBOX_GUEST_SAID_MAX && ready.said + ready.length <= len,
                   "a ready record of %llu bytes after %llu said, in %zu", (unsigned long long)ready.length,
                   (unsigned long long)ready.said, len);
        FUZZ_CHECK(memcmp(ready.report, p + len - ready.length - ready.said, (size_t)ready.said) == 0,
                   "the ready report is not the bytes before the record");
        FUZZ_CHECK(memcmp(p + len - ready.length, PYBOX_GUEST_READY SECRET " ", strlen(PYBOX_GUEST_READY SECRET " ")) ==
                       0,
                   "the ready record found does not start with its marker");
    }
    pybox_call_record_t call;
    memset(&call, 0, sizeof call);
    got = pybox_call_record_find(&s, SECRET, &call, &err);
    FUZZ_CHECK(got >= -1 && got <= 1, "call found %d", got);
    if (got == 1) {
        uint64_t tail = call.length + call.after;
        FUZZ_CHECK(call.said <= PYBOX_GUEST_SAID_MAX && call.said + tail <= len && call.after <= PYBOX_GUEST_RECORD_MAX,
                   "a call record of %llu bytes", (unsigned long long)call.length);
        FUZZ_CHECK(call.after == 0 || found == 1, "a call record before a done record that is not one");
        FUZZ_CHECK(memcmp(call.report, p + len - tail - call.said, (size_t)call.said) == 0,
                   "the call report is not the bytes before the record");
        FUZZ_CHECK(memcmp(p + len - tail, PYBOX_GUEST_CALL SECRET " ", strlen(PYBOX_GUEST_CALL SECRET " ")) == 0,
                   "the call record found does not start with its marker");
    }
    /* What the program said after a session call that ended its session: without init's
     * call report and record and its done record, whichever were found. */
    pybox_said_t program;
    pybox_sink_said_program(&s, got == 1 ? &call : NULL, found == 1 ? &rec : NULL, &program);
    if (got == 1 && (found == 1) == (call.after > 0)) {
        uint64_t init = call.said + call.length + call.after;
        FUZZ_CHECK(program.total == len - init, "the program said %llu of %zu bytes, init %llu",
                   (unsigned long long)program.total, len, (unsigned long long)init);
        FUZZ_CHECK(program.kept == 0 || memcmp(program.data, p, program.kept) == 0,
                   "what the program said is not what came first");
    }
    pybox_said_t said;
    pybox_sink_said(&s, record_len, &said);
    FUZZ_CHECK(said.total == len - record_len, "said %llu", (unsigned long long)said.total);
    FUZZ_CHECK(said.kept <= cap && said.kept <= said.total, "kept %zu of cap %zu", said.kept, cap);
    FUZZ_CHECK(said.truncated == (said.total > cap), "truncation misreported");
    FUZZ_CHECK(said.kept == 0 || memcmp(said.data, p, said.kept) == 0, "what was kept is not what came first");
    pybox_sink_free(&s);
    return 0;
}
