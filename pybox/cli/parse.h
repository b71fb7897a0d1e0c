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
    unsigned from_image; /* PYBOX_FROM_IMAGE_*: limits that came from the image's policy */
} pybox_exec_opts_t;

#define PYBOX_FROM_IMAGE_MEMORY 1u
#define PYBOX_FROM_IMAGE_PIDS 2u
#define PYBOX_FROM_IMAGE_CPUS 4u
#define PYBOX_FROM_IMAGE_TIMEOUT 8u

/* Fill the limits the caller did not give from the image's own defaults (its recipe's
 * policy), then PyBox's. */
void pybox_cli_apply_defaults(pybox_exec_opts_t *o, const pybox_pin_t *pin);

/* Refuse what is above a ceiling, naming the ceiling and where it is set. */
int pybox_cli_check_ceilings(const pybox_exec_opts_t *o, const pybox_config_t *c, pybox_error_t *err);

/* argv[0] is "exec". */
int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err);

/* Check the program read from stdin: not empty, not over the limit (over says the input
 * went past PYBOX_PROGRAM_MAX). */
int pybox_cli_check_program(const char *prog, size_t len, bool over, pybox_error_t *err);

#endif
