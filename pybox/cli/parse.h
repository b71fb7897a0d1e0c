/* SPDX-License-Identifier: MIT */
/* Command-line parsing for the front-ends, kept apart from main() so it is unit-tested:
 * the commands' options (the table of cli.h) looked up, their refusals, exec's options.
 * Bad arguments are refused (PYBOX_ERR_USAGE) before anything else happens. */
#ifndef PYBOX_CLI_PARSE_H
#define PYBOX_CLI_PARSE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "../state.h"

/* --color: when the terminal receipt is drawn in colour. */
typedef enum pybox_color {
    PYBOX_COLOR_AUTO, /* on a terminal, unless NO_COLOR is set and not empty or TERM is dumb */
    PYBOX_COLOR_ALWAYS,
    PYBOX_COLOR_NEVER,
} pybox_color_t;

typedef struct pybox_exec_opts {
    int64_t timeout_ms;
    bool json;
    const char *image;
    bool image_given;
    int64_t memory_bytes; /* 0: the image's default */
    int64_t pids;         /* 0: default */
    int64_t nano_cpus;    /* 0: default */
    bool timeout_given;
    const char *inputs[64]; /* --input, in order */
    size_t n_inputs;
    const char *output;  /* --output, or NULL */
    const char *backend; /* --backend, or NULL */
    const char *chart;   /* --chart, or NULL */
    pybox_color_t color; /* --color */
    const char *session; /* --session, or NULL */
} pybox_exec_opts_t;

/* Whether to colour: `when`, for an output that is a terminal or not, with the values of
 * NO_COLOR and TERM (NULL when unset). An explicit --color=always wins over NO_COLOR, as
 * no-color.org asks of a command-line option; auto never colours a pipe or a file. */
bool pybox_cli_use_color(pybox_color_t when, bool terminal, const char *no_color, const char *term);

/* The options a command of the table takes (cli.h: "exec", "image build" ...),
 * {NULL}-terminated, in the order the help gives them: what the option walker accepts,
 * so the help and the man pages are checked against them. NULL for another command. */
const struct option *pybox_cli_options(const char *command);

/* The option of command that arg ("--name" or "--name=value") names, or NULL. */
const struct option *pybox_cli_option(const char *command, const char *arg);

/* Refuse arg, an option command does not take: "unknown option '--foo' for `pybox exec`
 * (see `pybox help exec`)". Returns -1. */
int pybox_cli_unknown(const char *command, const char *arg, pybox_error_t *err);
/* Refuse an option given without the value it needs (or, when it takes none, with one). */
int pybox_cli_value(const char *command, const char *arg, bool needs, pybox_error_t *err);

/* argv[0] is "exec" (pybox/cli/exec.c). */
int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err);

/* pybox exec --session: the program run as the session's next call, its receipt printed
 * (pybox/cli/session.c); the exit code. */
int pybox_cli_session_exec(const pybox_exec_opts_t *o, const char *prog, size_t len);

/* Check the program read from stdin: not empty, not over the limit (over says the input
 * went past PYBOX_PROGRAM_MAX). */
int pybox_cli_check_program(const char *prog, size_t len, bool over, pybox_error_t *err);

/* The test hook PYBOX_HOOK_KILL_AT's value (hooks.h, docs/cleanup.md): NULL or "" is no
 * hook (*step NULL); create, start, run and collect name the run's step at which pybox
 * exec SIGKILLs itself; any other value is refused. */
int pybox_cli_kill_step(const char *value, const char **step, pybox_error_t *err);

#endif
