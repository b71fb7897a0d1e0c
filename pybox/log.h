/* SPDX-License-Identifier: MIT */
/* The library never prints: what it has to say outside a result (a note while serving, a
 * step of an image build) goes to the handler the front-end installed, or nowhere.
 * Thread-safe: a line is handed over whole. */
#ifndef PYBOX_LOG_H
#define PYBOX_LOG_H

/* line: one line without its newline, already escaped where it quotes outside text. */
typedef void (*pybox_log_fn)(void *arg, const char *line);

/* Install the handler (NULL: none). Set it before any thread that logs starts. */
void pybox_log_set(pybox_log_fn fn, void *arg);

void pybox_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A handler that writes "prefix: line\n" to stderr in one write. */
void pybox_log_stderr(void *prefix, const char *line);

/* Where a long operation reports its lines as it goes (an image build's steps, a check
 * of every image): a handler of the caller's (NULL pointer or fn: nowhere). */
typedef struct pybox_out {
    pybox_log_fn fn;
    void *arg;
} pybox_out_t;
void pybox_out_line(const pybox_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A handler that writes the line and a newline to a FILE * (arg): for front-ends. */
void pybox_out_file(void *file, const char *line);

#endif
