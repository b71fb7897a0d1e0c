/* SPDX-License-Identifier: MIT */
/* The error type: fill once, prefix context, name kinds. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int pybox_error_set(pybox_error_t *err, pybox_error_kind_t kind, int errnum, const char *fmt, ...)
{
    if (err == NULL || err->kind != PYBOX_ERR_NONE)
        return -1;
    err->kind = kind;
    err->errnum = errnum;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        err->msg[0] = '\0';
    if (errnum != 0) {
        size_t len = strlen(err->msg);
        if (len < sizeof err->msg) {
            char text[128];
            snprintf(err->msg + len, sizeof err->msg - len, ": %s", pybox_strerror(errnum, text, sizeof text));
        }
    }
    return -1;
}

void pybox_error_prefix(pybox_error_t *err, const char *fmt, ...)
{
    if (err == NULL || err->kind == PYBOX_ERR_NONE)
        return;
    char head[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t hl = (size_t)n < sizeof head ? (size_t)n : sizeof head - 1;
    size_t shift = hl + 2;
    if (shift >= sizeof err->msg)
        return;
    size_t old = strnlen(err->msg, sizeof err->msg - 1);
    if (old > sizeof err->msg - 1 - shift)
        old = sizeof err->msg - 1 - shift;
    memmove(err->msg + shift, err->msg, old);
    memcpy(err->msg, head, hl);
    err->msg[hl] = ':';
    err->msg[hl + 1] = ' ';
    err->msg[shift + old] = '\0';
}

void pybox_error_ensure(pybox_error_t *err, pybox_error_kind_t kind, const char *fmt, ...)
{
    if (err == NULL || err->msg[0] != '\0')
        return;
    if (err->kind == PYBOX_ERR_NONE) {
        err->kind = kind;
        err->errnum = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0 || err->msg[0] == '\0')
        snprintf(err->msg, sizeof err->msg, "PyBox failed without saying why");
}

void pybox_error_clear(pybox_error_t *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

const char *pybox_error_kind_name(pybox_error_kind_t kind)
{
    static const char *const names[] = {
        [PYBOX_ERR_NONE] = "none",     [PYBOX_ERR_USAGE] = "refused", [PYBOX_ERR_SYSTEM] = "system",
        [PYBOX_ERR_ENGINE] = "engine", [PYBOX_ERR_POLICY] = "policy", [PYBOX_ERR_PROTOCOL] = "protocol",
        [PYBOX_ERR_STATE] = "state",
    };
    return (unsigned)kind < sizeof names / sizeof *names && names[kind] != NULL ? names[kind] : "unknown";
}

const char *pybox_strerror(int errnum, char *buf, size_t len)
{
    /* GNU strerror_r: returns the text, in buf or static and unchanging */
    const char *t = strerror_r(errnum, buf, len);
    if (t != buf && len > 0)
        snprintf(buf, len, "%s", t ? t : "unknown error");
    return buf;
}
