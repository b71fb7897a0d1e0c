/* SPDX-License-Identifier: MIT */
/* Unit tests for the output stream: frame demultiplexing, capped sinks, the done record (stream.h). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../guest/proto.h"
#include "../pybox/bounds.h"
#include "../pybox/buf.h"
#include "../pybox/docker/docker.h"
#include "../pybox/stream.h"
#include "../pybox/util.h"
#include "suites.h"

/* ---- helpers ---- */

typedef struct {
    pybox_buf_t out, err;
    int calls;
    int fail_at; /* 0: never; n: the n-th call fails */
    pybox_error_t *errp;
} collect_t;

static void collect_init(collect_t *c)
{
    memset(c, 0, sizeof *c);
    pybox_buf_init(&c->out, 0);
    pybox_buf_init(&c->err, 0);
}

static void collect_free(collect_t *c)
{
    pybox_buf_free(&c->out);
    pybox_buf_free(&c->err);
}

static int collect_cb(void *arg, int stream, const char *data, size_t len)
{
    collect_t *c = arg;
    c->calls++;
    if (c->fail_at != 0 && c->calls == c->fail_at)
        return pybox_error_set(c->errp, PYBOX_ERR_SYSTEM, 0, "collector gave up");
    ck_assert_msg(stream == 1 || stream == 2, "callback got stream %d", stream);
    ck_assert_uint_gt(len, 0);
    return pybox_buf_append(stream == 1 ? &c->out : &c->err, data, len);
}

/* Append one engine frame: [type, 0, 0, 0, len u32 BE] payload. */
static void frame(pybox_buf_t *b, unsigned char type, const char *payload, size_t len)
{
    unsigned char h[8] = {type,
                          0,
                          0,
                          0,
                          (unsigned char)(len >> 24),
                          (unsigned char)(len >> 16),
                          (unsigned char)(len >> 8),
                          (unsigned char)len};
    ck_assert_int_eq(pybox_buf_append(b, h, 8), 0);
    ck_assert_int_eq(pybox_buf_append(b, payload, len), 0);
}

static void frame_s(pybox_buf_t *b, unsigned char type, const char *payload)
{
    frame(b, type, payload, strlen(payload));
}

/* A stream of several frames of both kinds, zero-length ones included. */
static void sample_stream(pybox_buf_t *b)
{
    pybox_buf_init(b, 0);
    frame_s(b, 1, "hello ");
    frame_s(b, 2, "warn: x\n");
    frame_s(b, 1, "");
    frame_s(b, 1, "world\n");
    frame(b, 2, "\0\xff", 2);
    frame_s(b, 2, "");
    frame_s(b, 1, "end");
}

static void check_sample(const collect_t *c, const pybox_demux_t *d)
{
    ck_assert_uint_eq(c->out.len, 15);
    ck_assert_int_eq(memcmp(c->out.data, "hello world\nend", 15), 0);
    ck_assert_uint_eq(c->err.len, 10);
    ck_assert_int_eq(memcmp(c->err.data, "warn: x\n\0\xff", 10), 0);
    ck_assert_uint_eq(d->frames, 7);
    ck_assert(pybox_demux_clean_end(d));
}

/* Feed the stream in chunks of the given sizes (cycled). */
static void feed_chunked(const pybox_buf_t *in, const size_t *sizes, size_t nsizes, collect_t *c, pybox_demux_t *d)
{
    pybox_error_t err = {0};
    size_t off = 0, k = 0;
    while (off < in->len) {
        size_t n = sizes[k++ % nsizes];
        if (n > in->len - off)
            n = in->len - off;
        ck_assert_int_eq(pybox_demux_feed(d, in->data + off, n, collect_cb, c, &err), 0);
        off += n;
    }
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
}

/* ---- demux ---- */

START_TEST(demux_whole)
{
    pybox_buf_t in;
    sample_stream(&in);
    collect_t c;
    collect_init(&c);
    pybox_demux_t d;
    pybox_demux_init(&d);
    ck_assert(pybox_demux_clean_end(&d));
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_demux_feed(&d, in.data, in.len, collect_cb, &c, &err), 0);
    check_sample(&c, &d);
    /* feeding nothing changes nothing */
    ck_assert_int_eq(pybox_demux_feed(&d, in.data, 0, collect_cb, &c, &err), 0);
    check_sample(&c, &d);
    collect_free(&c);
    pybox_buf_free(&in);
}
END_TEST

START_TEST(demux_byte_by_byte)
{
    pybox_buf_t in;
    sample_stream(&in);
    collect_t c;
    collect_init(&c);
    pybox_demux_t d;
    pybox_demux_init(&d);
    const size_t one = 1;
    feed_chunked(&in, &one, 1, &c, &d);
    check_sample(&c, &d);
    collect_free(&c);
    pybox_buf_free(&in);
}
END_TEST

START_TEST(demux_split_headers)
{
    pybox_buf_t in;
    sample_stream(&in);
    /* chunk sizes that cut headers at every offset */
    static const size_t sizes[][3] = {{3, 5, 7}, {2, 9, 4}, {7, 1, 8}, {5, 11, 6}, {13, 13, 13}, {4, 4, 4}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        collect_t c;
        collect_init(&c);
        pybox_demux_t d;
        pybox_demux_init(&d);
        feed_chunked(&in, sizes[i], 3, &c, &d);
        check_sample(&c, &d);
        collect_free(&c);
    }
    pybox_buf_free(&in);
}
END_TEST

START_TEST(demux_zero_length_frames)
{
    pybox_buf_t in;
    pybox_buf_init(&in, 0);
    for (int i = 0; i < 5; i++)
        frame_s(&in, (unsigned char)(1 + i % 2), "");
    collect_t c;
    collect_init(&c);
    pybox_demux_t d;
    pybox_demux_init(&d);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_demux_feed(&d, in.data, in.len, collect_cb, &c, &err), 0);
    ck_assert_int_eq(c.calls, 0);
    ck_assert_uint_eq(d.frames, 5);
    ck_assert(pybox_demux_clean_end(&d));
    collect_free(&c);
    pybox_buf_free(&in);
}
END_TEST

static void expect_protocol_error(const unsigned char hdr[8], const char *what)
{
    /* after a good frame, so the bad header is not the first thing seen */
    pybox_buf_t in;
    pybox_buf_init(&in, 0);
    frame_s(&in, 1, "ok");
    ck_assert_int_eq(pybox_buf_append(&in, hdr, 8), 0);
    ck_assert_int_eq(pybox_buf_append(&in, "payload", 7), 0);
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        collect_t c;
        collect_init(&c);
        pybox_demux_t d;
        pybox_demux_init(&d);
        pybox_error_t err = {0};
        int rc = 0;
        if (bytewise) {
            for (size_t i = 0; i < in.len && rc == 0; i++)
                rc = pybox_demux_feed(&d, in.data + i, 1, collect_cb, &c, &err);
        } else {
            rc = pybox_demux_feed(&d, in.data, in.len, collect_cb, &c, &err);
        }
        ck_assert_msg(rc < 0, "%s accepted", what);
        ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
        ck_assert_str_eq(c.out.data, "ok"); /* nothing from the bad frame was delivered */
        ck_assert_uint_eq(c.err.len, 0);
        collect_free(&c);
    }
    pybox_buf_free(&in);
}

START_TEST(demux_bad_frames)
{
    const unsigned char type0[8] = {0, 0, 0, 0, 0, 0, 0, 7};
    const unsigned char type3[8] = {3, 0, 0, 0, 0, 0, 0, 7};
    const unsigned char type255[8] = {255, 0, 0, 0, 0, 0, 0, 7};
    const unsigned char pad1[8] = {1, 1, 0, 0, 0, 0, 0, 7};
    const unsigned char pad2[8] = {2, 0, 1, 0, 0, 0, 0, 7};
    const unsigned char pad3[8] = {1, 0, 0, 0x80, 0, 0, 0, 7};
    uint32_t big = (uint32_t)PYBOX_FRAME_MAX + 1;
    const unsigned char toolong[8] = {1,
                                      0,
                                      0,
                                      0,
                                      (unsigned char)(big >> 24),
                                      (unsigned char)(big >> 16),
                                      (unsigned char)(big >> 8),
                                      (unsigned char)big};
    const unsigned char maxlen[8] = {2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    expect_protocol_error(type0, "type 0");
    expect_protocol_error(type3, "type 3");
    expect_protocol_error(type255, "type 255");
    expect_protocol_error(pad1, "padding byte 1");
    expect_protocol_error(pad2, "padding byte 2");
    expect_protocol_error(pad3, "padding byte 3");
    expect_protocol_error(toolong, "length PYBOX_FRAME_MAX + 1");
    expect_protocol_error(maxlen, "length 2^32 - 1");
}
END_TEST

START_TEST(demux_frame_max_accepted)
{
    uint32_t max = (uint32_t)PYBOX_FRAME_MAX;
    const unsigned char hdr[8] = {1,
                                  0,
                                  0,
                                  0,
                                  (unsigned char)(max >> 24),
                                  (unsigned char)(max >> 16),
                                  (unsigned char)(max >> 8),
                                  (unsigned char)max};
    collect_t c;
    collect_init(&c);
    pybox_demux_t d;
    pybox_demux_init(&d);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_demux_feed(&d, (const char *)hdr, 8, collect_cb, &c, &err), 0);
    ck_assert_uint_eq(d.remaining, max);
    ck_assert(!pybox_demux_clean_end(&d));
    collect_free(&c);
}
END_TEST

START_TEST(demux_clean_end)
{
    pybox_buf_t in;
    pybox_buf_init(&in, 0);
    frame_s(&in, 1, "abcdef");
    collect_t c;
    collect_init(&c);
    pybox_error_t err = {0};
    /* every cut inside the frame is an unclean end; only the whole frame is clean */
    for (size_t cut = 0; cut <= in.len; cut++) {
        pybox_demux_t d;
        pybox_demux_init(&d);
        ck_assert_int_eq(pybox_demux_feed(&d, in.data, cut, collect_cb, &c, &err), 0);
        bool clean = pybox_demux_clean_end(&d);
        ck_assert_msg(clean == (cut == 0 || cut == in.len), "cut at %zu: clean_end %d", cut, clean);
    }
    collect_free(&c);
    pybox_buf_free(&in);
}
END_TEST

START_TEST(demux_callback_stops)
{
    pybox_buf_t in;
    pybox_buf_init(&in, 0);
    frame_s(&in, 1, "one");
    frame_s(&in, 2, "two");
    frame_s(&in, 1, "three");
    collect_t c;
    collect_init(&c);
    pybox_error_t err = {0};
    c.fail_at = 2;
    c.errp = &err;
    pybox_demux_t d;
    pybox_demux_init(&d);
    ck_assert_int_eq(pybox_demux_feed(&d, in.data, in.len, collect_cb, &c, &err), -1);
    ck_assert_int_eq(c.calls, 2); /* stopped at the failing call: "three" never delivered */
    ck_assert_str_eq(c.out.data, "one");
    ck_assert_uint_eq(c.err.len, 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
    ck_assert_str_eq(err.msg, "collector gave up");
    collect_free(&c);
    pybox_buf_free(&in);
}
END_TEST

/* ---- sinks ---- */

START_TEST(sink_cap_and_total)
{
    pybox_sink_t s;
    pybox_sink_init(&s, 10);
    ck_assert_int_eq(pybox_sink_add(&s, "0123456789", 10), 0);
    pybox_said_t said;
    pybox_sink_said(&s, 0, &said);
    ck_assert_uint_eq(said.kept, 10);
    ck_assert(!said.truncated);
    ck_assert_uint_eq(said.total, 10);
    ck_assert_int_eq(memcmp(said.data, "0123456789", 10), 0);

    ck_assert_int_eq(pybox_sink_add(&s, "abcdefghijklmno", 15), 0);
    pybox_sink_said(&s, 0, &said);
    ck_assert_uint_eq(said.kept, 10);
    ck_assert(said.truncated);
    ck_assert_uint_eq(said.total, 25);
    ck_assert_int_eq(memcmp(said.data, "0123456789", 10), 0);

    /* a lot more: counted, never kept past cap + tail */
    char big[5000];
    memset(big, 'z', sizeof big);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(pybox_sink_add(&s, big, sizeof big), 0);
    ck_assert_uint_eq(s.total, 25 + 100 * 5000);
    ck_assert_uint_eq(s.head.len, 10 + PYBOX_SINK_TAIL);
    pybox_sink_said(&s, 0, &said);
    ck_assert_uint_eq(said.kept, 10);
    ck_assert(said.truncated);
    ck_assert_uint_eq(said.total, 25 + 100 * 5000);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(sink_empty)
{
    pybox_sink_t s;
    pybox_sink_init(&s, PYBOX_OUTPUT_CAP);
    pybox_said_t said;
    pybox_sink_said(&s, 0, &said);
    ck_assert_ptr_nonnull(said.data);
    ck_assert_uint_eq(said.kept, 0);
    ck_assert_uint_eq(said.total, 0);
    ck_assert(!said.truncated);
    ck_assert_uint_eq(s.tail_len, 0);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(sink_tail_follows)
{
    /* adds of many sizes around the tail size; after each, the tail is the last bytes */
    static const size_t sizes[] = {1,   7,   255, 1, 256, 3,    257, 1000, 2, 2,   100,
                                   156, 155, 1,   0, 512, 4096, 5,   250,  6, 300, 1};
    pybox_sink_t s;
    pybox_sink_init(&s, 64);
    pybox_buf_t all;
    pybox_buf_init(&all, 0);
    unsigned seed = 1;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            char chunk[4096];
            for (size_t k = 0; k < sizes[i]; k++) {
                seed = seed * 1103515245u + 12345u;
                chunk[k] = (char)(seed >> 16);
            }
            ck_assert_int_eq(pybox_sink_add(&s, chunk, sizes[i]), 0);
            ck_assert_int_eq(pybox_buf_append(&all, chunk, sizes[i]), 0);
            size_t want = all.len < PYBOX_SINK_TAIL ? all.len : PYBOX_SINK_TAIL;
            ck_assert_uint_eq(s.tail_len, want);
            ck_assert_msg(memcmp(s.tail, all.data + all.len - want, want) == 0, "tail wrong after add %zu", i);
            ck_assert_uint_eq(s.total, all.len);
        }
    }
    /* the head holds the first cap + tail bytes */
    ck_assert_uint_eq(s.head.len, 64 + PYBOX_SINK_TAIL);
    ck_assert_int_eq(memcmp(s.head.data, all.data, s.head.len), 0);
    pybox_buf_free(&all);
    pybox_sink_free(&s);
}
END_TEST

/* ---- the done record ---- */

static void make_secret(char secret[PYBOX_GUEST_SECRET_HEX + 1])
{
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_random_hex(PYBOX_GUEST_SECRET_HEX / 2, secret, &err), 0);
}

/* A record as the guest init writes it, with the given fields text. */
static size_t record(char *out, size_t len, const char *secret, const char *fields)
{
    ck_assert_int_eq(pybox_fmt(out, len, "%s%s %s\n", PYBOX_GUEST_DONE, secret, fields), 0);
    return strlen(out);
}

static const char good_fields[] =
    "exit=3 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program";

static int find_in(const char *data, size_t len, const char *secret, pybox_done_record_t *rec, pybox_error_t *err)
{
    pybox_sink_t s;
    pybox_sink_init(&s, PYBOX_OUTPUT_CAP);
    ck_assert_int_eq(pybox_sink_add(&s, data, len), 0);
    memset(rec, 0, sizeof *rec);
    int r = pybox_done_record_find(&s, secret, rec, err);
    pybox_sink_free(&s);
    return r;
}

/* The bytes of one stream, as init would write them, into a sink. */
static void sink_of(pybox_sink_t *s, const char *const *parts)
{
    pybox_sink_init(s, PYBOX_OUTPUT_CAP);
    for (const char *const *p = parts; *p != NULL; p++)
        ck_assert_int_eq(pybox_sink_add(s, *p, strlen(*p)), 0);
}

START_TEST(ready_record_with_its_report)
{
    char secret[65], rec[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    const char report[] =
        "{\"preload\":[\"numpy\"],\"imported\":[\"numpy\"],\"failed\":null,\"ms\":3,\"output_bytes\":0}";
    ck_assert_int_eq(
        pybox_fmt(rec, sizeof rec, "%s%s ready_ms=812 said=%zu\n", PYBOX_GUEST_READY, secret, sizeof report - 1), 0);
    const char *parts[] = {report, rec, NULL};
    pybox_sink_t s;
    sink_of(&s, parts);
    pybox_ready_record_t r;
    memset(&r, 0, sizeof r);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_ready_record_find(&s, secret, &r, &err), 1);
    ck_assert_int_eq(r.ready_ms, 812);
    ck_assert_uint_eq(r.said, sizeof report - 1);
    ck_assert_str_eq(r.report, report);
    ck_assert_uint_eq(r.length, strlen(rec));
    /* another secret, or bytes after it: not the record */
    char other[65];
    make_secret(other);
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(pybox_ready_record_find(&s, other, &r, &err), 0);
    ck_assert_int_eq(pybox_sink_add(&s, "x\n", 2), 0);
    ck_assert_int_eq(pybox_ready_record_find(&s, secret, &r, &err), 0);
    pybox_sink_free(&s);
    /* a report said longer than what came before it is a broken record */
    ck_assert_int_eq(pybox_fmt(rec, sizeof rec, "%s%s ready_ms=1 said=2000\n", PYBOX_GUEST_READY, secret), 0);
    const char *short_parts[] = {"{}", rec, NULL};
    sink_of(&s, short_parts);
    ck_assert_int_eq(pybox_ready_record_find(&s, secret, &r, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(call_record_alone_and_before_done)
{
    char secret[65], call[PYBOX_GUEST_RECORD_MAX + 1], done[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    const char report[] = "{\"call\":2,\"exception\":null,\"value\":\"3\"}";
    ck_assert_int_eq(pybox_fmt(call, sizeof call, "%s%s call=2 out=6 err=4 said=%zu call_ms=9 alive=1\n",
                               PYBOX_GUEST_CALL, secret, sizeof report - 1),
                     0);
    const char *parts[] = {"hello\n", report, call, NULL};
    pybox_sink_t s;
    sink_of(&s, parts);
    pybox_call_record_t c;
    memset(&c, 0, sizeof c);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_call_record_find(&s, secret, &c, &err), 1);
    ck_assert_uint_eq(c.call, 2);
    ck_assert_uint_eq(c.out, 6);
    ck_assert_uint_eq(c.err, 4);
    ck_assert(c.alive);
    ck_assert_uint_eq(c.after, 0);
    ck_assert_str_eq(c.report, report);
    pybox_said_t said;
    pybox_sink_said(&s, c.said + c.length, &said);
    ck_assert_uint_eq(said.total, 6);
    ck_assert_int_eq(memcmp(said.data, "hello\n", 6), 0);
    pybox_sink_free(&s);
    /* the call that ended its session: the done record follows its call record */
    ck_assert_int_eq(
        pybox_fmt(call, sizeof call, "%s%s call=3 out=0 err=0 said=0 call_ms=2000 alive=0\n", PYBOX_GUEST_CALL, secret),
        0);
    ck_assert_int_eq(pybox_fmt(done, sizeof done,
                               "%s%s exit=137 signal=9 timer=0 stopped=1 program_ms=5000 reaped=0 term=0 calls=3 "
                               "end=stopped\n",
                               PYBOX_GUEST_DONE, secret),
                     0);
    const char *ended[] = {call, done, NULL};
    sink_of(&s, ended);
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(pybox_call_record_find(&s, secret, &c, &err), 1);
    ck_assert(!c.alive);
    ck_assert_uint_eq(c.after, strlen(done));
    pybox_done_record_t d;
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(pybox_done_record_find(&s, secret, &d, &err), 1);
    ck_assert_uint_eq(d.calls, 3);
    ck_assert_str_eq(d.end, "stopped");
    pybox_sink_free(&s);
    /* a count above any that fits is refused as such, never overflowed on the way */
    ck_assert_int_eq(
        pybox_fmt(call, sizeof call,
                  "%s%s call=1 out=0 err=11111111111111111111111111111111111110 said=0 call_ms=4 alive=1\n",
                  PYBOX_GUEST_CALL, secret),
        0);
    const char *huge[] = {call, NULL};
    sink_of(&s, huge);
    memset(&c, 0, sizeof c);
    ck_assert_int_ne(pybox_call_record_find(&s, secret, &c, &err), 1);
    pybox_sink_free(&s);
}
END_TEST

/* A call that ended its session: what the program printed, then init's report, call
 * record and done record. Only the program's bytes are what it said, whether the call
 * record was seen (at the call's end) or not (the flow had stopped looking for it). */
START_TEST(said_program_without_init_records)
{
    char secret[65], call[PYBOX_GUEST_RECORD_MAX + 1], done[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    const char report[] = "{\"call\":1}";
    ck_assert_int_eq(pybox_fmt(call, sizeof call, "%s%s call=1 out=2 err=0 said=%zu call_ms=2000 alive=0\n",
                               PYBOX_GUEST_CALL, secret, sizeof report - 1),
                     0);
    ck_assert_int_eq(pybox_fmt(done, sizeof done,
                               "%s%s exit=137 signal=9 timer=0 stopped=1 program_ms=2003 reaped=0 term=0 calls=1 "
                               "end=stopped\n",
                               PYBOX_GUEST_DONE, secret),
                     0);
    const char *parts[] = {"a\n", report, call, done, NULL};
    pybox_sink_t s;
    sink_of(&s, parts);
    pybox_error_t err = {0};
    pybox_call_record_t c;
    memset(&c, 0, sizeof c);
    pybox_done_record_t d;
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(pybox_done_record_find(&s, secret, &d, &err), 1);
    ck_assert_int_eq(pybox_call_record_find(&s, secret, &c, &err), 1);
    pybox_said_t said;
    pybox_sink_said_program(&s, &c, &d, &said);
    ck_assert_uint_eq(said.total, 2);
    ck_assert_uint_eq(said.kept, 2);
    ck_assert_int_eq(memcmp(said.data, "a\n", 2), 0);
    /* without the call record, only the done record is init's: the rest is shown */
    pybox_sink_said_program(&s, NULL, &d, &said);
    ck_assert_uint_eq(said.total, 2 + strlen(report) + strlen(call));
    /* a call that goes on: its report and record, nothing after them */
    pybox_sink_free(&s);
    const char *alive[] = {"a\n", report, call, NULL};
    sink_of(&s, alive);
    pybox_sink_said_program(&s, &c, NULL, &said);
    ck_assert_uint_eq(said.total, 2);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(call_record_forged_by_the_program)
{
    /* A program that prints a call record, even one with the right shape, does not end
     * its call: it cannot know the secret. */
    char secret[65], forged_secret[65], line[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    make_secret(forged_secret);
    ck_assert_int_eq(pybox_fmt(line, sizeof line, "%s%s call=1 out=0 err=0 said=0 call_ms=1 alive=1\n",
                               PYBOX_GUEST_CALL, forged_secret),
                     0);
    const char *parts[] = {"x\n", line, NULL};
    pybox_sink_t s;
    sink_of(&s, parts);
    pybox_call_record_t c;
    memset(&c, 0, sizeof c);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_call_record_find(&s, secret, &c, &err), 0);
    ck_assert(!c.seen);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(record_found)
{
    char secret[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    size_t rlen = record(rec_text, sizeof rec_text, secret, good_fields);
    pybox_sink_t s;
    pybox_sink_init(&s, PYBOX_OUTPUT_CAP);
    const char prog[] = "program output\nlast line without newline";
    ck_assert_int_eq(pybox_sink_add(&s, prog, sizeof prog - 1), 0);
    ck_assert_int_eq(pybox_sink_add(&s, rec_text, rlen), 0);
    pybox_done_record_t rec;
    memset(&rec, 0, sizeof rec);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_done_record_find(&s, secret, &rec, &err), 1);
    ck_assert(rec.seen);
    ck_assert_int_eq(rec.exit_code, 3);
    ck_assert_int_eq(rec.signal, 0);
    ck_assert(!rec.timer);
    ck_assert(rec.stopped);
    ck_assert_int_eq(rec.program_ms, 1234);
    ck_assert_uint_eq(rec.reaped, 2);
    ck_assert_uint_eq(rec.length, rlen);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);

    pybox_said_t said;
    pybox_sink_said(&s, rec.length, &said);
    ck_assert_uint_eq(said.kept, sizeof prog - 1);
    ck_assert_uint_eq(said.total, sizeof prog - 1);
    ck_assert(!said.truncated);
    ck_assert_int_eq(memcmp(said.data, prog, said.kept), 0);
    pybox_sink_free(&s);

    /* the record alone, and limits at their edges */
    rlen = record(
        rec_text, sizeof rec_text, secret,
        "exit=255 signal=128 timer=1 stopped=0 program_ms=86400000 reaped=1073741824 term=64 calls=1 end=program");
    ck_assert_int_eq(find_in(rec_text, rlen, secret, &rec, &err), 1);
    ck_assert_int_eq(rec.exit_code, 255);
    ck_assert_int_eq(rec.signal, 128);
    ck_assert(rec.timer);
    ck_assert(!rec.stopped);
    ck_assert_int_eq(rec.program_ms, 86400000);
    ck_assert_uint_eq(rec.reaped, 1073741824u);
}
END_TEST

START_TEST(record_split_across_adds)
{
    char secret[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    size_t rlen = record(rec_text, sizeof rec_text, secret, good_fields);
    static const size_t steps[] = {1, 2, 3, 5, 7, 16, 64};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        pybox_sink_t s;
        pybox_sink_init(&s, 100);
        /* lots of program output first, lines included, so the record arrives in a full tail */
        for (int i = 0; i < 50; i++)
            ck_assert_int_eq(pybox_sink_add(&s, "some program line\n", 18), 0);
        pybox_done_record_t rec;
        memset(&rec, 0, sizeof rec);
        pybox_error_t err = {0};
        for (size_t off = 0; off < rlen; off += steps[k]) {
            size_t n = rlen - off < steps[k] ? rlen - off : steps[k];
            ck_assert_int_eq(pybox_sink_add(&s, rec_text + off, n), 0);
            int want = off + n == rlen ? 1 : 0;
            ck_assert_msg(pybox_done_record_find(&s, secret, &rec, &err) == want, "step %zu at %zu", steps[k], off + n);
        }
        ck_assert(rec.seen);
        ck_assert_int_eq(rec.exit_code, 3);
        ck_assert_uint_eq(rec.length, rlen);
        pybox_said_t said;
        pybox_sink_said(&s, rec.length, &said);
        ck_assert_uint_eq(said.total, 50 * 18);
        ck_assert_uint_eq(said.kept, 100);
        ck_assert(said.truncated);
        ck_assert_int_eq(memcmp(said.data, "some program line\nsome", 22), 0);
        pybox_sink_free(&s);
    }
}
END_TEST

START_TEST(record_other_secret)
{
    char secret[65], other[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    pybox_done_record_t rec;
    pybox_error_t err = {0};

    /* a different secret */
    make_secret(other);
    size_t rlen = record(rec_text, sizeof rec_text, other, good_fields);
    ck_assert_int_eq(find_in(rec_text, rlen, secret, &rec, &err), 0);
    ck_assert(!rec.seen);

    /* one hex digit changed */
    memcpy(other, secret, sizeof other);
    other[40] = other[40] == 'a' ? 'b' : 'a';
    rlen = record(rec_text, sizeof rec_text, other, good_fields);
    ck_assert_int_eq(find_in(rec_text, rlen, secret, &rec, &err), 0);

    /* the secret cut short, or with a digit too many */
    memcpy(other, secret, sizeof other);
    other[63] = '\0';
    rlen = record(rec_text, sizeof rec_text, other, good_fields);
    ck_assert_int_eq(find_in(rec_text, rlen, secret, &rec, &err), 0);
    char longer[67];
    ck_assert_int_eq(pybox_fmt(longer, sizeof longer, "%s0", secret), 0);
    rlen = record(rec_text, sizeof rec_text, longer, good_fields);
    ck_assert_int_eq(find_in(rec_text, rlen, secret, &rec, &err), 0);

    /* no record at all, only lines */
    ck_assert_int_eq(find_in("just output\n", 12, secret, &rec, &err), 0);
    ck_assert(!rec.seen);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
}
END_TEST

START_TEST(record_not_at_end)
{
    char secret[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    size_t rlen = record(rec_text, sizeof rec_text, secret, good_fields);
    pybox_done_record_t rec;
    pybox_error_t err = {0};
    char buf[2 * PYBOX_GUEST_RECORD_MAX];

    /* bytes after the record */
    memcpy(buf, rec_text, rlen);
    memcpy(buf + rlen, "x", 1);
    ck_assert_int_eq(find_in(buf, rlen + 1, secret, &rec, &err), 0);
    memcpy(buf + rlen, "more\n", 5);
    ck_assert_int_eq(find_in(buf, rlen + 5, secret, &rec, &err), 0);
    ck_assert(!rec.seen);
    memcpy(buf + rlen, "\n", 1);
    ck_assert_int_eq(find_in(buf, rlen + 1, secret, &rec, &err), 0);
    ck_assert(!rec.seen);
    memcpy(buf + rlen, "\0\n", 2); /* a NUL does not end the record early */
    ck_assert_int_eq(find_in(buf, rlen + 2, secret, &rec, &err), 0);
    ck_assert(!rec.seen);

    /* no trailing newline */
    ck_assert_int_eq(find_in(rec_text, rlen - 1, secret, &rec, &err), 0);
    ck_assert(!rec.seen);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
}
END_TEST

START_TEST(record_malformed)
{
    static const char *const bad[] = {
        "exit=3 signal=0 timer=0 stopped=1 program_ms=1234", /* a field missing */
        "exit=3 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program x=1", /* one too many */
        "signal=0 exit=3 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program",     /* out of order */
        "exit= signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program",      /* empty value */
        "exit=-1 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program",    /* sign */
        "exit=3x signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program", /* trailing garbage */
        "exit=3  signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program", /* double space */
        "exit=3 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program ", /* trailing space */
        "exit=3 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program\r", /* CR before the
                                                                                                      newline */
        "EXIT=3 signal=0 timer=0 stopped=1 program_ms=1234 reaped=2 term=0 calls=1 end=program",   /* wrong name */
        "",                                                                                        /* nothing */
        /* values out of range */
        "exit=256 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program",
        "exit=0 signal=129 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program",
        "exit=0 signal=0 timer=2 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program",
        "exit=0 signal=0 timer=0 stopped=2 program_ms=1 reaped=0 term=0 calls=1 end=program",
        "exit=0 signal=0 timer=0 stopped=0 program_ms=86400001 reaped=0 term=0 calls=1 end=program",
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=1073741825 term=0 calls=1 end=program",
        "exit=99999999999999999999999 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program",
        /* the fields of protocol 4 */
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0",                    /* v3's record */
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=",       /* no word */
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=Closed", /* not lowercase */
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program1",
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=abcdefghijklmnop", /* too long */
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=-1 end=program",
        "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 end=program calls=1",
    };
    char secret[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t rlen = record(rec_text, sizeof rec_text, secret, bad[i]);
        pybox_done_record_t rec;
        pybox_error_t err = {0};
        ck_assert_msg(find_in(rec_text, rlen, secret, &rec, &err) == -1, "accepted: '%s'", bad[i]);
        ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
        ck_assert(!rec.seen);
    }
}
END_TEST

START_TEST(record_forged_then_real)
{
    char secret[65], forged_secret[65];
    make_secret(secret);
    make_secret(forged_secret);
    char forged[PYBOX_GUEST_RECORD_MAX + 1], real[PYBOX_GUEST_RECORD_MAX + 1];
    size_t flen = record(forged, sizeof forged, forged_secret,
                         "exit=0 signal=0 timer=0 stopped=0 program_ms=1 reaped=0 term=0 calls=1 end=program");
    size_t rlen = record(real, sizeof real, secret,
                         "exit=137 signal=9 timer=1 stopped=0 program_ms=3000 reaped=4 term=0 calls=1 end=program");
    pybox_sink_t s;
    pybox_sink_init(&s, PYBOX_OUTPUT_CAP);
    ck_assert_int_eq(pybox_sink_add(&s, "hi\n", 3), 0);
    ck_assert_int_eq(pybox_sink_add(&s, forged, flen), 0);
    pybox_done_record_t rec;
    memset(&rec, 0, sizeof rec);
    pybox_error_t err = {0};
    /* the program's forgery alone is not the record */
    ck_assert_int_eq(pybox_done_record_find(&s, secret, &rec, &err), 0);
    /* also a forgery that reuses the marker with a malformed tail, right before the record */
    ck_assert_int_eq(pybox_sink_add(&s, PYBOX_GUEST_DONE "zz exit=1\n", sizeof PYBOX_GUEST_DONE - 1 + 10), 0);
    ck_assert_int_eq(pybox_sink_add(&s, real, rlen), 0);
    ck_assert_int_eq(pybox_done_record_find(&s, secret, &rec, &err), 1);
    ck_assert_int_eq(rec.exit_code, 137);
    ck_assert_int_eq(rec.signal, 9);
    ck_assert(rec.timer);
    ck_assert_int_eq(rec.program_ms, 3000);
    ck_assert_uint_eq(rec.reaped, 4);
    ck_assert_uint_eq(rec.length, rlen);
    /* the forgeries are the program's output, kept as such */
    pybox_said_t said;
    pybox_sink_said(&s, rec.length, &said);
    ck_assert_uint_eq(said.total, 3 + flen + sizeof PYBOX_GUEST_DONE - 1 + 10);
    ck_assert_uint_eq(said.kept, said.total);
    ck_assert_int_eq(memcmp(said.data + 3, forged, flen), 0);
    pybox_sink_free(&s);
}
END_TEST

START_TEST(said_strips_record)
{
    char secret[65], rec_text[PYBOX_GUEST_RECORD_MAX + 1];
    make_secret(secret);
    size_t rlen = record(rec_text, sizeof rec_text, secret, good_fields);
    static const size_t prog_sizes[] = {0, 1, 99, 100, 101, 356, 1000, 200000};
    for (size_t i = 0; i < sizeof prog_sizes / sizeof *prog_sizes; i++) {
        size_t n = prog_sizes[i];
        pybox_sink_t s;
        pybox_sink_init(&s, 100);
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(pybox_sink_add(&s, k % 10 == 9 ? "\n" : "p", 1), 0);
        ck_assert_int_eq(pybox_sink_add(&s, rec_text, rlen), 0);
        pybox_done_record_t rec;
        memset(&rec, 0, sizeof rec);
        pybox_error_t err = {0};
        ck_assert_int_eq(pybox_done_record_find(&s, secret, &rec, &err), 1);
        pybox_said_t said;
        pybox_sink_said(&s, rec.length, &said);
        ck_assert_uint_eq(said.total, n);
        ck_assert_uint_eq(said.kept, n < 100 ? n : 100);
        ck_assert_uint_le(said.kept, s.cap);
        ck_assert(said.truncated == (n > 100));
        /* none of the record is left in what the program said */
        ck_assert_ptr_null(memchr(said.data, '\x1e', said.kept));
        for (size_t k = 0; k < said.kept; k++)
            ck_assert_int_eq(said.data[k], k % 10 == 9 ? '\n' : 'p');
        pybox_sink_free(&s);
    }
}
END_TEST

START_TEST(said_record_longer_than_total)
{
    /* a record length larger than what was seen cannot underflow */
    pybox_sink_t s;
    pybox_sink_init(&s, 10);
    ck_assert_int_eq(pybox_sink_add(&s, "abc", 3), 0);
    pybox_said_t said;
    pybox_sink_said(&s, 50, &said);
    ck_assert_uint_eq(said.total, 0);
    ck_assert_uint_eq(said.kept, 0);
    ck_assert(!said.truncated);
    pybox_sink_free(&s);
}
END_TEST

Suite *suite_stream(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("demux");
    tcase_add_test(tc, demux_whole);
    tcase_add_test(tc, demux_byte_by_byte);
    tcase_add_test(tc, demux_split_headers);
    tcase_add_test(tc, demux_zero_length_frames);
    tcase_add_test(tc, demux_bad_frames);
    tcase_add_test(tc, demux_frame_max_accepted);
    tcase_add_test(tc, demux_clean_end);
    tcase_add_test(tc, demux_callback_stops);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("sink");
    tcase_add_test(tc, sink_cap_and_total);
    tcase_add_test(tc, sink_empty);
    tcase_add_test(tc, sink_tail_follows);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("record");
    tcase_add_test(tc, ready_record_with_its_report);
    tcase_add_test(tc, call_record_alone_and_before_done);
    tcase_add_test(tc, said_program_without_init_records);
    tcase_add_test(tc, call_record_forged_by_the_program);
    tcase_add_test(tc, record_found);
    tcase_add_test(tc, record_split_across_adds);
    tcase_add_test(tc, record_other_secret);
    tcase_add_test(tc, record_not_at_end);
    tcase_add_test(tc, record_malformed);
    tcase_add_test(tc, record_forged_then_real);
    tcase_add_test(tc, said_strips_record);
    tcase_add_test(tc, said_record_longer_than_total);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);
    return s;
}
