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

/* One "name=digits" field, followed by exactly one space, or by the newline when last. */
static int parse_field(const char **p, const char *name, int64_t max, bool last, int64_t *out)
{
    size_t n = strlen(name);
    if (strncmp(*p, name, n) != 0 || (*p)[n] != '=')
        return -1;
    const char *q = *p + n + 1;
    int64_t v = 0;
    int digits = 0;
    while (*q >= '0' && *q <= '9') {
        v = v * 10 + (*q - '0');
        if (v > max)
            return -1;
        q++;
        digits++;
    }
    if (digits == 0 || *q != (last ? '\n' : ' '))
        return -1;
    *out = v;
    *p = last ? q : q + 1;
    return 0;
}

int pybox_done_record_find(const pybox_sink_t *out, const char *secret, pybox_done_record_t *rec, pybox_error_t *err)
{
    if (out->tail_len == 0 || out->tail[out->tail_len - 1] != '\n')
        return 0;
    char marker[sizeof(PYBOX_GUEST_DONE) + PYBOX_GUEST_SECRET_HEX + 2];
    int mlen = snprintf(marker, sizeof marker, "%s%s ", PYBOX_GUEST_DONE, secret);
    if (mlen <= 0 || (size_t)mlen >= sizeof marker)
        return 0;
    /* The record is the last line: search backwards for the marker. */
    const char *found = NULL;
    for (size_t i = out->tail_len; i-- > 0;) {
        if (out->tail_len - i >= (size_t)mlen && memcmp(out->tail + i, marker, (size_t)mlen) == 0) {
            found = out->tail + i;
            break;
        }
    }
    if (found == NULL)
        return 0;
    char line[PYBOX_GUEST_RECORD_MAX + 1];
    size_t len = (size_t)(out->tail + out->tail_len - found);
    memcpy(line, found, len);
    line[len] = '\0';
    const char *p = line + mlen;
    int64_t v[7];
    static const char *const names[] = {"exit", "signal", "timer", "stopped", "program_ms", "reaped", "term"};
    static const int64_t maxes[] = {255, 128, 1, 1, PYBOX_GUEST_TIMER_MAX_MS, 1 << 30, 64};
    for (int i = 0; i < 7; i++) {
        if (parse_field(&p, names[i], maxes[i], i == 6, &v[i]) < 0)
            return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the guest init's done record is malformed");
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
    rec->length = len;
    return 1;
}
