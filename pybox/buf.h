/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a hard maximum, always. The first append that fails (the
 * maximum passed, memory gone) sticks: the buffer frees what it held, and every later
 * append fails too, so a text built of many appends is whole or nothing, never one with
 * a piece (a fence) missing. Appends that return a result must have it checked; the
 * pybox_buf_add* forms return nothing, for builders that check pybox_buf_ok once at the
 * end. The owner frees the buffer with pybox_buf_free. */
#ifndef PYBOX_BUF_H
#define PYBOX_BUF_H

#include <stdbool.h>
#include <stddef.h>

/* The maximum of a buffer initialised with 0. */
#define PYBOX_BUF_DEFAULT_MAX (64u * 1024 * 1024)

typedef struct pybox_buf {
    char *data; /* always NUL-terminated when non-NULL (not counted in len) */
    size_t len;
    size_t cap;
    size_t max;
    bool failed; /* an append failed: data is gone and stays gone */
} pybox_buf_t;

/* max 0: PYBOX_BUF_DEFAULT_MAX. */
void pybox_buf_init(pybox_buf_t *b, size_t max);
void pybox_buf_free(pybox_buf_t *b);
/* Append; -1 when the maximum would be passed or memory ran out (then the buffer is
 * failed: emptied, freed, and every later append fails). */
int pybox_buf_append(pybox_buf_t *b, const void *data, size_t len) __attribute__((warn_unused_result));
int pybox_buf_puts(pybox_buf_t *b, const char *s) __attribute__((warn_unused_result));
int pybox_buf_printf(pybox_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3), warn_unused_result));
/* The same, for builders: a failure sticks, checked once with pybox_buf_ok. */
void pybox_buf_add(pybox_buf_t *b, const void *data, size_t len);
void pybox_buf_adds(pybox_buf_t *b, const char *s);
void pybox_buf_addf(pybox_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* No append has failed. */
bool pybox_buf_ok(const pybox_buf_t *b);
/* Fail the buffer on purpose (a piece made elsewhere for it failed): it sticks. */
void pybox_buf_fail(pybox_buf_t *b);
/* Hand the data over to the caller (who frees it); the buffer is left empty. NULL when
 * the buffer failed. */
char *pybox_buf_steal(pybox_buf_t *b);

#endif
