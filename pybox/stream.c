/* SPDX-License-Identifier: MIT */
/* Capped output and the done record (see stream.h). */
#include "stream.h"

#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "util.h"

void pybox_sink_init(pybox_sink_t *s, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->cap = cap;
    pybox_buf_init(&s->head, cap + PYBOX_SINK_TAIL);
}

void pybox_sink_free(pybox_sink_t *s)
{
    pybox_buf_free(&s->head);
}

int pybox_sink_add(pybox_sink_t *s, const char *data, size_t len)
{
    s->total += len;
    size_t room = s->head.max - s->head.len;
    size_t take = len < room ? len : room;
    if (take > 0 && pybox_buf_append(&s->head, data, take) < 0)
        return -1;
    if (len >= PYBOX_SINK_TAIL) {
        memcpy(s->tail, data + len - PYBOX_SINK_TAIL, PYBOX_SINK_TAIL);
        s->tail_len = PYBOX_SINK_TAIL;
    } else {
        size_t keep = s->tail_len + len > PYBOX_SINK_TAIL ? PYBOX_SINK_TAIL - len : s->tail_len;
        memmove(s->tail, s->tail + s->tail_len - keep, keep);
        memcpy(s->tail + keep, data, len);
        s->tail_len = keep + len;
    }
    return 0;
}

void pybox_sink_said(const pybox_sink_t *s, uint64_t record_len, pybox_said_t *out)
{
    uint64_t total = s->total >= record_len ? s->total - record_len : 0;
    out->total = total;
    out->truncated = total > s->cap;
    out->kept = (size_t)(total > s->cap ? s->cap : total);
    if (out->kept > s->head.len) /* cannot happen: head holds cap + tail bytes */
        out->kept = s->head.len;
    out->data = s->head.data ? s->head.data : "";
}

/* One "name=digits" field (or "name=word" of lowercase letters when words is set),
 * followed by exactly one space, or by the newline when last. */
static int parse_field(const char **p, const char *name, int64_t max, bool last, int64_t *out, char *word,
                       size_t word_len)
{
    size_t n = strlen(name);
    if (strncmp(*p, name, n) != 0 || (*p)[n] != '=')
        return -1;
    const char *q = *p + n + 1;
    int64_t v = 0;
    size_t digits = 0;
    if (word != NULL) {
        while (*q >= 'a' && *q <= 'z') {
            if (digits + 1 >= word_len)
                return -1;
            word[digits++] = *q++;
        }
        word[digits] = '\0';
    } else {
        while (*q >= '0' && *q <= '9') {
            int d = *q - '0';
            if (v > max / 10 || (v == max / 10 && d > max % 10)) /* above max: refused before any overflow */
                return -1;
            v = v * 10 + d;
            q++;
            digits++;
        }
    }
    if (digits == 0 || *q != (last ? '\n' : ' '))
        return -1;
    *out = v;
    *p = last ? q : q + 1;
    return 0;
}

/* A record's line: its text (NUL-ended), the bytes past its marker, its length. */
typedef struct {
    char text[PYBOX_GUEST_RECORD_MAX + 1];
    const char *fields;
    size_t len;
} rec_line_t;

/* The line of a record of this kind (prefix, then the secret) that ends exactly at
 * `end` bytes into the sink's tail (its newline the last byte before it): 1 with it in l,
 * or 0. */
static int record_line(const pybox_sink_t *out, size_t end, const char *prefix, const char *secret, rec_line_t *l)
{
    if (end == 0 || out->tail[end - 1] != '\n')
        return 0;
    char marker[32 + PYBOX_GUEST_SECRET_HEX + 2];
    int mlen = snprintf(marker, sizeof marker, "%s%s ", prefix, secret);
    if (mlen <= 0 || (size_t)mlen >= sizeof marker)
        return 0;
    /* The record is the last line before end: the marker, nearest first, with no newline
     * between it and end but the last. */
    size_t lo = end > PYBOX_GUEST_RECORD_MAX ? end - PYBOX_GUEST_RECORD_MAX : 0;
    for (size_t i = end - 1; i-- > lo;) {
        if (out->tail[i] == '\n' && i != end - 1)
            return 0;
        if (end - i >= (size_t)mlen && memcmp(out->tail + i, marker, (size_t)mlen) == 0) {
            l->len = end - i;
            memcpy(l->text, out->tail + i, l->len);
            l->text[l->len] = '\0';
            l->fields = l->text + mlen;
            return 1;
        }
    }
    return 0;
}

static int malformed(pybox_error_t *err, const char *what)
{
    return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the guest init's %s record is malformed", what);
}

/* The done record's fields from p (past its marker); its line is len bytes. */
static int done_fields(const char *p, const char *line, size_t len, pybox_done_record_t *rec, pybox_error_t *err)
{
    int64_t v[9];
    static const char *const names[] = {"exit",   "signal", "timer", "stopped", "program_ms",
                                        "reaped", "term",   "calls", "end"};
    static const int64_t maxes[] = {255, 128, 1, 1, PYBOX_GUEST_TIMER_MAX_MS, 1 << 30, 64, 1 << 30, 0};
    char word[sizeof rec->end];
    for (int i = 0; i < 9; i++) {
        if (parse_field(&p, names[i], maxes[i], i == 8, &v[i], i == 8 ? word : NULL, sizeof word) < 0)
            return malformed(err, "done");
    }
    /* A whole record with more bytes after it is not the record at the very end. */
    if (p + 1 != line + len)
        return 0;
    rec->seen = true;
    rec->exit_code = (int)v[0];
    rec->signal = (int)v[1];
    rec->timer = v[2] != 0;
    rec->stopped = v[3] != 0;
    rec->program_ms = v[4];
    rec->reaped = (unsigned)v[5];
    rec->term = (int)v[6];
    rec->calls = (unsigned)v[7];
    memcpy(rec->end, word, sizeof rec->end);
    rec->length = len;
    return 1;
}

int pybox_done_record_find(const pybox_sink_t *out, const char *secret, pybox_done_record_t *rec, pybox_error_t *err)
{
    rec_line_t l;
    if (!record_line(out, out->tail_len, PYBOX_GUEST_DONE, secret, &l))
        return 0;
    return done_fields(l.fields, l.text, l.len, rec, err);
}

/* The said bytes just before a record whose line starts `before` bytes into the tail. */
static int said_copy(const pybox_sink_t *out, size_t before, uint64_t said, char *dst, pybox_error_t *err,
                     const char *what)
{
    if (said > PYBOX_GUEST_SAID_MAX || said > before || said > out->total)
        return malformed(err, what);
    memcpy(dst, out->tail + before - said, (size_t)said);
    dst[said] = '\0';
    return 0;
}

int pybox_ready_record_find(const pybox_sink_t *out, const char *secret, pybox_ready_record_t *rec, pybox_error_t *err)
{
    rec_line_t l;
    if (!record_line(out, out->tail_len, PYBOX_GUEST_READY, secret, &l))
        return 0;
    const char *p = l.fields, *line = l.text;
    size_t len = l.len;
    int64_t ms, said;
    if (parse_field(&p, "ready_ms", PYBOX_GUEST_TIMER_MAX_MS, false, &ms, NULL, 0) < 0 ||
        parse_field(&p, "said", PYBOX_GUEST_SAID_MAX, true, &said, NULL, 0) < 0)
        return malformed(err, "ready");
    if (p + 1 != line + len)
        return 0;
    if (said_copy(out, out->tail_len - len, (uint64_t)said, rec->report, err, "ready") < 0)
        return -1;
    rec->seen = true;
    rec->ready_ms = ms;
    rec->said = (uint64_t)said;
    rec->length = len;
    return 1;
}

int pybox_call_record_find(const pybox_sink_t *out, const char *secret, pybox_call_record_t *rec, pybox_error_t *err)
{
    rec_line_t l;
    size_t end = out->tail_len, after = 0;
    /* When the call ended the session, the done record follows its call record: a line
     * that the done record's own reader takes, never one that only looks like it. */
    pybox_done_record_t done;
    pybox_error_t derr = {0};
    if (pybox_done_record_find(out, secret, &done, &derr) == 1) {
        after = (size_t)done.length;
        end -= after;
    }
    if (!record_line(out, end, PYBOX_GUEST_CALL, secret, &l))
        return 0;
    const char *p = l.fields, *line = l.text;
    size_t len = l.len;
    int64_t v[6];
    static const char *const names[] = {"call", "out", "err", "said", "call_ms", "alive"};
    static const int64_t maxes[] = {
        1 << 30, INT64_MAX / 2, INT64_MAX / 2, PYBOX_GUEST_SAID_MAX, PYBOX_GUEST_TIMER_MAX_MS, 1};
    for (int i = 0; i < 6; i++) {
        if (parse_field(&p, names[i], maxes[i], i == 5, &v[i], NULL, 0) < 0)
            return malformed(err, "call");
    }
    if (p + 1 != line + len)
        return 0;
    if (said_copy(out, end - len, (uint64_t)v[3], rec->report, err, "call") < 0)
        return -1;
    rec->seen = true;
    rec->call = (unsigned)v[0];
    rec->out = (uint64_t)v[1];
    rec->err = (uint64_t)v[2];
    rec->said = (uint64_t)v[3];
    rec->call_ms = v[4];
    rec->alive = v[5] != 0;
    rec->length = len;
    rec->after = after;
    return 1;
}

void pybox_sink_said_program(const pybox_sink_t *out, const pybox_call_record_t *call, const pybox_done_record_t *done,
                             pybox_said_t *said)
{
    uint64_t init = done != NULL && done->seen ? done->length : 0;
    if (call != NULL && call->seen)
        init += call->said + call->length;
    pybox_sink_said(out, init, said);
}
