/* SPDX-License-Identifier: MIT */
/* Command-line parsing (see parse.h). */
#include "parse.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../bounds.h"
#include "../buf.h"
#include "../escape.h"
#include "../run.h"
#include "../util.h"

static void shown(char *out, size_t len, const char *arg)
{
    pybox_escape_short(out, len, arg, 64);
}

int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err)
{
    static const struct option longs[] = {
        {"timeout", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
        {"image", required_argument, NULL, 'i'},   {"memory", required_argument, NULL, 'm'},
        {"pids", required_argument, NULL, 'p'},    {"cpus", required_argument, NULL, 'c'},
        {"input", required_argument, NULL, 'I'},   {"output", required_argument, NULL, 'O'},
        {"backend", required_argument, NULL, 'b'}, {NULL, 0, NULL, 0},
    };
    o->timeout_ms = PYBOX_DEFAULT_TIMEOUT_MS;
    o->json = false;
    o->image = "stdlib";
    o->memory_bytes = 0;
    o->pids = 0;
    o->nano_cpus = 0;
    o->timeout_given = false;
    o->n_inputs = 0;
    o->output = NULL;
    o->backend = NULL;
    optind = 0; /* GNU: full re-initialisation, so parsing can run more than once */
    opterr = 0;
    char arg[128];
    for (;;) {
        int c = getopt_long(argc, argv, "+", longs, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 't': {
            int64_t ms;
            if (pybox_parse_seconds_ms(optarg, &ms) < 0 || ms < PYBOX_TIMEOUT_MIN_MS || ms > PYBOX_TIMEOUT_MAX_MS) {
                shown(arg, sizeof arg, optarg);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--timeout %s: give seconds from %.1f to %lld, with at most 3 decimals, "
                                       "e.g. --timeout 2.5",
                                       arg, PYBOX_TIMEOUT_MIN_MS / 1000.0, (long long)(PYBOX_TIMEOUT_MAX_MS / 1000));
            }
            o->timeout_ms = ms;
            o->timeout_given = true;
            break;
        }
        case 'm': {
            int64_t b;
            if (pybox_parse_size(optarg, &b) < 0 || b < PYBOX_MEMORY_MIN) {
                shown(arg, sizeof arg, optarg);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--memory %s: give a size of at least %lld MiB, e.g. --memory 512 (MiB), "
                                       "512m or 1g",
                                       arg, PYBOX_MEMORY_MIN / (1024 * 1024));
            }
            o->memory_bytes = b;
            break;
        }
        case 'p': {
            uint64_t n;
            if (pybox_parse_u64(optarg, &n) < 0 || n < PYBOX_PIDS_MIN || n > 1000000) {
                shown(arg, sizeof arg, optarg);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--pids %s: give a whole number of at least %d", arg,
                                       PYBOX_PIDS_MIN);
            }
            o->pids = (int64_t)n;
            break;
        }
        case 'c': {
            int64_t milli;
            if (pybox_parse_seconds_ms(optarg, &milli) < 0 || milli * 1000000 < PYBOX_NANO_CPUS_MIN ||
                milli > 1024 * 1000) {
                shown(arg, sizeof arg, optarg);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--cpus %s: give a number of CPUs from 0.01, e.g. --cpus 0.5", arg);
            }
            o->nano_cpus = milli * 1000000;
            break;
        }
        case 'j':
            o->json = true;
            break;
        case 'I':
            if (o->n_inputs == sizeof o->inputs / sizeof *o->inputs)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--input: at most %zu inputs (give a folder instead)",
                                       sizeof o->inputs / sizeof *o->inputs);
            o->inputs[o->n_inputs++] = optarg;
            break;
        case 'O':
            if (o->output != NULL)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output: give it once");
            o->output = optarg;
            break;
        case 'i':
            o->image = optarg;
            break;
        case 'b':
            o->backend = optarg;
            break;
        default:
            shown(arg, sizeof arg, optind > 0 && optind <= argc ? argv[optind - 1] : "?");
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: unknown option or missing value (see pybox help exec)",
                                   arg);
        }
    }
    if (optind < argc) {
        shown(arg, sizeof arg, argv[optind]);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "the program is read from standard input only (pybox exec < program.py); "
                               "unexpected argument '%s'",
                               arg);
    }
    return 0;
}

int pybox_cli_kill_step(const char *value, const char **step, pybox_error_t *err)
{
    static const struct {
        const char *phase, *step;
    } phases[] = {
        {"create", PYBOX_STEP_CREATED},
        {"start", PYBOX_STEP_STARTED},
        {"run", PYBOX_STEP_RUNNING},
        {"collect", PYBOX_STEP_ENDED},
    };
    *step = NULL;
    if (value == NULL || value[0] == '\0')
        return 0;
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++) {
        if (strcmp(value, phases[i].phase) == 0) {
            *step = phases[i].step;
            return 0;
        }
    }
    char arg[128];
    shown(arg, sizeof arg, value);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                           "%s=%s: a test hook; give create, start, run or collect (or leave it unset)",
                           PYBOX_TEST_KILL_ENV, arg);
}

int pybox_cli_check_program(const char *prog, size_t len, bool over, pybox_error_t *err)
{
    if (over)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "the program is larger than %d bytes: refused",
                               PYBOX_PROGRAM_MAX);
    size_t i = 0;
    while (i < len && (prog[i] == ' ' || prog[i] == '\t' || prog[i] == '\n' || prog[i] == '\r'))
        i++;
    if (i == len)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "the program is empty: give it on standard input (pybox exec < program.py)");
    return 0;
}
