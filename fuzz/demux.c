/* SPDX-License-Identifier: MIT */
/* Fuzz target: the attach stream's frames split into stdout and stderr. The first byte
 * chooses how the rest is cut into reads; the same bytes fed whole and in pieces must give
 * the same streams and the same verdict, and every piece handed on is non-empty and of
 * stream 1 or 2. */
#include <stdlib.h>
#include <string.h>

#include "../pybox/buf.h"
#include "../pybox/docker/docker.h"
#include "common.h"

typedef struct {
    pybox_buf_t s[2];
} streams_t;

static int collect(void *arg, int stream, const char *data, size_t len)
{
    streams_t *c = arg;
    FUZZ_CHECK(stream == 1 || stream == 2, "a piece of stream %d", stream);
    FUZZ_CHECK(len > 0, "an empty piece");
    return pybox_buf_append(&c->s[stream - 1], data, len);
}

static int run(const uint8_t *data, size_t size, unsigned step, streams_t *c, pybox_demux_t *d)
{
    pybox_buf_init(&c->s[0], 0);
    pybox_buf_init(&c->s[1], 0);
    pybox_demux_init(d);
    pybox_error_t err = {0};
    size_t off = 0;
    unsigned k = 0;
    while (off < size) {
        size_t n = step == 0 ? size - off : 1 + (k++ * 7 + step) % (step * 3 + 1);
        if (n > size - off)
            n = size - off;
        if (pybox_demux_feed(d, (const char *)data + off, n, collect, c, &err) < 0)
            return -1;
        off += n;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned step = data[0];
    streams_t whole, cut;
    pybox_demux_t dw, dc;
    int rw = run(data + 1, size - 1, 0, &whole, &dw);
    int rc = run(data + 1, size - 1, step ? step : 1, &cut, &dc);
    FUZZ_CHECK(rw == rc, "whole %d, in pieces %d", rw, rc);
    if (rw == 0) {
        for (int i = 0; i < 2; i++)
            FUZZ_CHECK(whole.s[i].len == cut.s[i].len &&
                           (whole.s[i].len == 0 || memcmp(whole.s[i].data, cut.s[i].data, whole.s[i].len) == 0),
                       "stream %d differs when cut", i + 1);
        FUZZ_CHECK(pybox_demux_clean_end(&dw) == pybox_demux_clean_end(&dc), "the end differs when cut");
        FUZZ_CHECK(dw.frames == dc.frames, "%llu frames whole, %llu cut", (unsigned long long)dw.frames,
                   (unsigned long long)dc.frames);
        FUZZ_CHECK(whole.s[0].len + whole.s[1].len + 8 * dw.frames <= size - 1, "more payload than bytes");
    }
    for (int i = 0; i < 2; i++) {
        pybox_buf_free(&whole.s[i]);
        pybox_buf_free(&cut.s[i]);
    }
    return 0;
}
