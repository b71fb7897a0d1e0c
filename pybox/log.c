/* SPDX-License-Identifier: MIT */
/* The log handler (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static pybox_log_fn handler;
static void *handler_arg;

void pybox_log_set(pybox_log_fn fn, void *arg)
{
    handler = fn;
    handler_arg = arg;
}

/* One line to a handler, if there is one: the library's log and a caller's progress. */
static void vline(pybox_log_fn fn, void *arg, const char *fmt, va_list ap)
{
    char line[2048];
    if (fn != NULL && vsnprintf(line, sizeof line, fmt, ap) >= 0)
        fn(arg, line);
}

void pybox_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(handler, handler_arg, fmt, ap);
    va_end(ap);
}

void pybox_log_stderr(void *prefix, const char *line)
{
    char buf[1200];
    int n = snprintf(buf, sizeof buf, "%s: %s\n", prefix ? (const char *)prefix : "pybox", line);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (len > 0 && buf[len - 1] != '\n')
        buf[len - 1] = '\n';
    (void)pybox_write_all(STDERR_FILENO, buf, len);
}

void pybox_out_line(const pybox_out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(o != NULL ? o->fn : NULL, o != NULL ? o->arg : NULL, fmt, ap);
    va_end(ap);
}

void pybox_out_file(void *file, const char *line)
{
    FILE *f = file;
    fputs(line, f);
    fputc('\n', f);
    fflush(f);
}
