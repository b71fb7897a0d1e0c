/* SPDX-License-Identifier: MIT */
/* Command-line parsing for the front-ends, kept apart from main() so it is unit-tested.
 * Bad arguments are refused (PYBOX_ERR_USAGE) before anything else happens. */
#ifndef PYBOX_CLI_PARSE_H
#define PYBOX_CLI_PARSE_H

#include <getopt.h>
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

/* The options each command takes ("exec", "mcp", "cleanup", "image build", and "image"
 * for list, verify and rm), "{NULL}"-terminated, in the order the help gives them: what
 * the parsers accept, so the help and the man pages can be checked against them. NULL
 * for another command. */
const struct option *pybox_cli_options(const char *command);

/* The option of command that arg ("--name" or "--name=value") names, or NULL. */
const struct option *pybox_cli_option(const char *command, const char *arg);

/* Refuse arg, an option command does not take: "unknown option '--foo' for `pybox exec`
 * (see `pybox help exec`)". Returns -1. */
int pybox_cli_unknown(const char *command, const char *arg, pybox_error_t *err);
/* Refuse an option given without the value it needs (or, when it takes none, with one). */
int pybox_cli_value(const char *command, const char *arg, bool needs, pybox_error_t *err);

/* argv[0] is "exec". */
int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err);

/* Check the program read from stdin: not empty, not over the limit (over says the input
 * went past PYBOX_PROGRAM_MAX). */
int pybox_cli_check_program(const char *prog, size_t len, bool over, pybox_error_t *err);

#endif
