/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a hard maximum (see buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pybox_buf_init(pybox_buf_t *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void pybox_buf_free(pybox_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int reserve(pybox_buf_t *b, size_t extra)
{
    if (extra > (size_t)-1 - b->len - 1)
        return -1;
    size_t need = b->len + extra;
    if (b->max != 0 && need > b->max)
        return -1;
    if (need + 1 <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need + 1)
        ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (nd == NULL)
        return -1;
    b->data = nd;
    b->cap = ncap;
    return 0;
}

int pybox_buf_append(pybox_buf_t *b, const void *data, size_t len)
{
    if (reserve(b, len) < 0)
        return -1;
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int pybox_buf_puts(pybox_buf_t *b, const char *s)
{
    return pybox_buf_append(b, s, strlen(s));
}

int pybox_buf_printf(pybox_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

char *pybox_buf_steal(pybox_buf_t *b)
{
    if (b->data == NULL) {
        if (reserve(b, 0) < 0)
            return NULL;
        b->data[0] = '\0'; /* reserve() only allocates: an empty buffer hands over "" */
    }
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}
