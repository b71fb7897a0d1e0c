/* SPDX-License-Identifier: MIT */
/* The attach stream's frames split into stdout and stderr (docker.h). */
#include <stdio.h>
#include <string.h>

#include "../bounds.h"
#include "docker.h"

void pybox_demux_init(pybox_demux_t *d)
{
    memset(d, 0, sizeof *d);
}

int pybox_demux_feed(pybox_demux_t *d, const char *data, size_t len, pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    size_t i = 0;
    while (i < len) {
        if (d->remaining == 0 && d->hdr_len < 8) {
            size_t n = 8 - d->hdr_len;
            if (n > len - i)
                n = len - i;
            memcpy(d->hdr + d->hdr_len, data + i, n);
            d->hdr_len += n;
            i += n;
            if (d->hdr_len < 8)
                break;
            if ((d->hdr[0] != 1 && d->hdr[0] != 2) || d->hdr[1] || d->hdr[2] || d->hdr[3])
                return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0,
                                       "the engine's output stream has a frame of unknown type %u",
                                       (unsigned)d->hdr[0]);
            uint32_t flen =
                ((uint32_t)d->hdr[4] << 24) | ((uint32_t)d->hdr[5] << 16) | ((uint32_t)d->hdr[6] << 8) | d->hdr[7];
            if (flen > PYBOX_FRAME_MAX)
                return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0,
                                       "the engine's output stream declares a frame of %u bytes", flen);
            d->stream = d->hdr[0];
            d->remaining = flen;
            d->frames++;
            if (flen == 0)
                d->hdr_len = 0;
            continue;
        }
        size_t n = d->remaining;
        if (n > len - i)
            n = len - i;
        if (cb(arg, d->stream, data + i, n) < 0)
            return -1;
        d->remaining -= (uint32_t)n;
        i += n;
        if (d->remaining == 0)
            d->hdr_len = 0;
    }
    return 0;
}

bool pybox_demux_clean_end(const pybox_demux_t *d)
{
    return d->hdr_len == 0 && d->remaining == 0;
}
