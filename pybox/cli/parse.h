/* SPDX-License-Identifier: MIT */
/* Command-line parsing for the front-ends, kept apart from main() so it is unit-tested.
 * Bad arguments are refused (PYBOX_ERR_USAGE) before anything else happens. */
#ifndef PYBOX_CLI_PARSE_H
#define PYBOX_CLI_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "../state.h"

typedef struct pybox_exec_opts {
    int64_t timeout_ms;
    bool json;
    const char *image;
    int64_t memory_bytes; /* 0: the image's default */
    int64_t pids;         /* 0: default */
    int64_t nano_cpus;    /* 0: default */
    bool timeout_given;
    const char *inputs[64]; /* --input, in order */
    size_t n_inputs;
    const char *output;  /* --output, or NULL */
    const char *backend; /* --backend, or NULL */
} pybox_exec_opts_t;

/* argv[0] is "exec". */
int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err);

/* Check the program read from stdin: not empty, not over the limit (over says the input
 * went past PYBOX_PROGRAM_MAX). */
int pybox_cli_check_program(const char *prog, size_t len, bool over, pybox_error_t *err);

/* The test hook PYBOX_TEST_KILL_AT (docs/cleanup.md): NULL or "" is no hook (*step NULL);
 * create, start, run and collect name the run's step at which pybox exec SIGKILLs
 * itself; any other value is refused. */
#define PYBOX_TEST_KILL_ENV "PYBOX_TEST_KILL_AT"
int pybox_cli_kill_step(const char *value, const char **step, pybox_error_t *err);

#endif
