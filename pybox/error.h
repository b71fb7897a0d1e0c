/* SPDX-License-Identifier: MIT */
/* One error type for the whole core library. Contract (docs/errors.md):
 * a failing function returns a negative value and fills *err (if err is not NULL) with
 * a kind, an errno (0 when none applies) and a message that names the call and its
 * (escaped) argument. Only the front-ends print errors (pybox/cli/front.c, pybox mcp's answers). A filled error is
 * never overwritten: the first, most specific failure is the one reported. */
#ifndef PYBOX_ERROR_H
#define PYBOX_ERROR_H

#include <stddef.h>

typedef enum {
    PYBOX_ERR_NONE = 0,
    PYBOX_ERR_USAGE,    /* the request was refused before any box was built */
    PYBOX_ERR_SYSTEM,   /* a host call failed (errno set) */
    PYBOX_ERR_ENGINE,   /* the engine could not be reached or answered with an error */
    PYBOX_ERR_POLICY,   /* the box read back differs from the policy */
    PYBOX_ERR_PROTOCOL, /* something from outside broke its format (engine, guest) */
    PYBOX_ERR_STATE,    /* the installation's state is missing or unusable */
} pybox_error_kind_t;

#define PYBOX_ERROR_MSG_MAX 2048

/* PyBox's own exit codes beside the program's (docs/receipt.md): a deadline stopped the
 * program (like timeout(1)); PyBox refused or failed (like docker run). */
#define PYBOX_EXIT_DEADLINE 124
#define PYBOX_EXIT_FAILED 125

typedef struct pybox_error {
    pybox_error_kind_t kind;
    int errnum;
    char msg[PYBOX_ERROR_MSG_MAX];
} pybox_error_t;

/* Fill err (first failure wins) and return -1. */
int pybox_error_set(pybox_error_t *err, pybox_error_kind_t kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefix context to an error that is already filled ("while creating the box: ..."). */
void pybox_error_prefix(pybox_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void pybox_error_clear(pybox_error_t *err);

/* An error that must say something: one whose message is empty (a callee failed without
 * filling it, against the contract above) is given this one, and kind when it has none.
 * A message already there is kept. */
void pybox_error_ensure(pybox_error_t *err, pybox_error_kind_t kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *pybox_error_kind_name(pybox_error_kind_t kind);

/* The text of an errno value, thread-safe (strerror is not): into buf, returned. */
const char *pybox_strerror(int errnum, char *buf, size_t len);

#endif
