/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a hard maximum; failures stick (see buf.h). */
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
    b->max = max != 0 ? max : PYBOX_BUF_DEFAULT_MAX;
    b->failed = false;
}

void pybox_buf_free(pybox_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int fail(pybox_buf_t *b)
{
    pybox_buf_free(b);
    b->failed = true;
    return -1;
}

static int reserve(pybox_buf_t *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra > (size_t)-1 - b->len - 1)
        return fail(b);
    size_t need = b->len + extra;
    if (need > b->max)
        return fail(b);
    if (need + 1 <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need + 1)
        ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (nd == NULL)
        return fail(b);
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

static int vprintf_to(pybox_buf_t *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return fail(b);
    if (reserve(b, (size_t)n) < 0)
        return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int pybox_buf_printf(pybox_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vprintf_to(b, fmt, ap);
    va_end(ap);
    return rc;
}

void pybox_buf_add(pybox_buf_t *b, const void *data, size_t len)
{
    if (pybox_buf_append(b, data, len) < 0)
        return; /* sticks: pybox_buf_ok says so */
}

void pybox_buf_adds(pybox_buf_t *b, const char *s)
{
    pybox_buf_add(b, s, strlen(s));
}

void pybox_buf_addf(pybox_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vprintf_to(b, fmt, ap) < 0) {
        /* sticks: pybox_buf_ok says so */
    }
    va_end(ap);
}

bool pybox_buf_ok(const pybox_buf_t *b)
{
    return !b->failed;
}

void pybox_buf_fail(pybox_buf_t *b)
{
    fail(b);
}

char *pybox_buf_steal(pybox_buf_t *b)
{
    if (b->failed)
        return NULL;
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
