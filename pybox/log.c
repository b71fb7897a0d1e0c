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

void pybox_log(const char *fmt, ...)
{
    if (handler == NULL)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    handler(handler_arg, line);
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
    if (o == NULL || o->fn == NULL)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= 0)
        o->fn(o->arg, line);
}

void pybox_out_file(void *file, const char *line)
{
    FILE *f = file;
    fputs(line, f);
    fputc('\n', f);
    fflush(f);
}
