/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a hard maximum. The owner frees it with pybox_buf_free. */
#ifndef PYBOX_BUF_H
#define PYBOX_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pybox_buf {
    char *data; /* always NUL-terminated when non-NULL (not counted in len) */
    size_t len;
    size_t cap;
    size_t max; /* 0: no maximum beyond memory */
} pybox_buf_t;

void pybox_buf_init(pybox_buf_t *b, size_t max);
void pybox_buf_free(pybox_buf_t *b);
/* Append; returns -1 (and appends nothing) if the maximum would be passed or memory ran out. */
int pybox_buf_append(pybox_buf_t *b, const void *data, size_t len);
int pybox_buf_puts(pybox_buf_t *b, const char *s);
int pybox_buf_printf(pybox_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the data over to the caller (who frees it); the buffer is left empty. */
char *pybox_buf_steal(pybox_buf_t *b);

#endif
