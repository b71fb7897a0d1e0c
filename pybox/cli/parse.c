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

/* The options of every command (parse.h). Only exec's go through getopt_long; the others
 * are looked up by name, so their `--name value` and `--name=value` forms are alike. */
static const struct option exec_longs[] = {
    {"timeout", required_argument, NULL, 't'},
    {"memory", required_argument, NULL, 'm'},
    {"pids", required_argument, NULL, 'p'},
    {"cpus", required_argument, NULL, 'c'},
    {"image", required_argument, NULL, 'i'},
    {"input", required_argument, NULL, 'I'},
    {"output", required_argument, NULL, 'O'},
    {"backend", required_argument, NULL, 'b'},
    {"json", no_argument, NULL, 'j'},
    {"chart", required_argument, NULL, 'G'},
    {"color", required_argument, NULL, 'C'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
static const struct option mcp_longs[] = {
    {"images", required_argument, NULL, 0},
    {"max-timeout", required_argument, NULL, 0},
    {"max-memory", required_argument, NULL, 0},
    {"files-root", required_argument, NULL, 0},
    {"output-root", required_argument, NULL, 0},
    {"output-root-max", required_argument, NULL, 0},
    {"output-root-age", required_argument, NULL, 0},
    {"backend", required_argument, NULL, 0},
    {"listen", required_argument, NULL, 0},
    {"listen-public", no_argument, NULL, 0},
    {"token-file", required_argument, NULL, 0},
    {"socket-group", required_argument, NULL, 0},
    {"allow-origins", required_argument, NULL, 0},
    {"max-connections", required_argument, NULL, 0},
    {"max-sessions", required_argument, NULL, 0},
    {"max-calls", required_argument, NULL, 0},
    {"session-idle", required_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};
static const struct option image_build_longs[] = {
    {"force", no_argument, NULL, 0},
    {"lock", required_argument, NULL, 0},
    {"wheels", required_argument, NULL, 0},
    {"debian", required_argument, NULL, 0},
    {"backend", required_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};
static const struct option image_longs[] = {
    {"backend", required_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};
static const struct option cleanup_longs[] = {
    {"dry-run", no_argument, NULL, 0},
    {"json", no_argument, NULL, 0},
    {"backend", required_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};

static const struct option verify_longs[] = {
    {"key", required_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};
static const struct option key_longs[] = {
    {"init", no_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};

const struct option *pybox_cli_options(const char *command)
{
    static const struct {
        const char *command;
        const struct option *longs;
    } all[] = {{"exec", exec_longs},   {"mcp", mcp_longs},         {"image build", image_build_longs},
               {"image", image_longs}, {"cleanup", cleanup_longs}, {"verify", verify_longs},
               {"key", key_longs}};
    for (size_t i = 0; command != NULL && i < sizeof all / sizeof *all; i++)
        if (strcmp(all[i].command, command) == 0)
            return all[i].longs;
    return NULL;
}

const struct option *pybox_cli_option(const char *command, const char *arg)
{
    const struct option *o = pybox_cli_options(command);
    if (o == NULL || strncmp(arg, "--", 2) != 0)
        return NULL;
    size_t n = strcspn(arg + 2, "=");
    for (; o->name != NULL; o++)
        if (strlen(o->name) == n && strncmp(o->name, arg + 2, n) == 0)
            return o;
    return NULL;
}

/* The help that lists a command's options: "image build" is in `pybox help image`. */
static const char *help_of(const char *command)
{
    return strncmp(command, "image", 5) == 0 ? "image" : command;
}

int pybox_cli_unknown(const char *command, const char *arg, pybox_error_t *err)
{
    char a[128];
    /* the option's name, not a value given with it */
    char name[80];
    size_t n = strcspn(arg, "=");
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, arg, n);
    name[n] = '\0';
    shown(a, sizeof a, name);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown option '%s' for `pybox %s` (see `pybox help %s`)", a,
                           command, help_of(command));
}

int pybox_cli_value(const char *command, const char *arg, bool needs, pybox_error_t *err)
{
    char a[128], name[80];
    size_t n = strcspn(arg, "=");
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, arg, n);
    name[n] = '\0';
    shown(a, sizeof a, name);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s %s (see `pybox help %s`)", a,
                           needs ? "needs a value" : "takes no value", help_of(command));
}

int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err)
{
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
    o->chart = NULL;
    o->color = PYBOX_COLOR_AUTO;
    optind = 0; /* GNU: full re-initialisation, so parsing can run more than once */
    opterr = 0;
    char arg[128];
    for (;;) {
        /* "+": options stop at the first argument; ":": a missing value is told apart */
        int c = getopt_long(argc, argv, "+:", exec_longs, NULL);
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
        case 'G':
            if (o->chart != NULL)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart: give it once");
            o->chart = optarg;
            break;
        case 'i':
            o->image = optarg;
            break;
        case 'b':
            o->backend = optarg;
            break;
        case 'C':
            if (strcmp(optarg, "auto") == 0) {
                o->color = PYBOX_COLOR_AUTO;
            } else if (strcmp(optarg, "always") == 0) {
                o->color = PYBOX_COLOR_ALWAYS;
            } else if (strcmp(optarg, "never") == 0) {
                o->color = PYBOX_COLOR_NEVER;
            } else {
                shown(arg, sizeof arg, optarg);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--color %s: give auto, always or never", arg);
            }
            break;
        case 'h':
            break; /* main() gives the help before parsing */
        default: {
            /* getopt says ':' for a missing value, '?' for the rest: with optopt 0 an
             * unknown long option; else the short option, or the long one given a value */
            const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            char s1[3] = {'-', (char)optopt, '\0'};
            if (c == ':')
                return pybox_cli_value("exec", a, true, err);
            if (optopt != 0 && strncmp(a, "--", 2) == 0)
                return pybox_cli_value("exec", a, false, err);
            return pybox_cli_unknown("exec", optopt != 0 ? s1 : a, err);
        }
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

bool pybox_cli_use_color(pybox_color_t when, bool terminal, const char *no_color, const char *term)
{
    if (when != PYBOX_COLOR_AUTO)
        return when == PYBOX_COLOR_ALWAYS;
    if (no_color != NULL && no_color[0] != '\0')
        return false;
    return terminal && !(term != NULL && strcmp(term, "dumb") == 0);
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
