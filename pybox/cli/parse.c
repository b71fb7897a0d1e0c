/* SPDX-License-Identifier: MIT */
/* The command table, the option walker and their refusals (see cli.h, parse.h). */
#include "parse.h"

#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../bounds.h"
#include "../buf.h"
#include "../escape.h"
#include "../hooks.h"
#include "../run.h"
#include "../util.h"

static void shown(char *out, size_t len, const char *arg)
{
    pybox_escape_short(out, len, arg, 64);
}

/* Every command, in the order the help gives them. */
static const pybox_cli_command_t *const commands[] = {
    &pybox_cli_exec,          &pybox_cli_mcp,          &pybox_cli_image_build, &pybox_cli_image_list,
    &pybox_cli_image_verify,  &pybox_cli_image_rm,     &pybox_cli_image,       &pybox_cli_cleanup,
    &pybox_cli_verify,        &pybox_cli_key,          &pybox_cli_chart,       &pybox_cli_session_open,
    &pybox_cli_session_close, &pybox_cli_session_list, &pybox_cli_session,
};

const pybox_cli_command_t *pybox_cli_command(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

const struct option *pybox_cli_options(const char *command)
{
    const pybox_cli_command_t *c = pybox_cli_command(command);
    return c != NULL ? c->options : NULL;
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

int pybox_cli_args(const char *command, int argc, char **argv, void *ctx, pybox_error_t *err)
{
    const pybox_cli_command_t *c = pybox_cli_command(command);
    int first = pybox_cli_walk(command, argc, argv, c->take, ctx, err);
    if (first >= 0 && c->max_args >= 0 && (argc - first < c->min_args || argc - first > c->max_args))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s", c->usage);
    return first;
}

bool pybox_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

int pybox_cli_walk(const char *command, int argc, char **argv, pybox_cli_take_fn take, void *ctx, pybox_error_t *err)
{
    const pybox_cli_command_t *c = pybox_cli_command(command);
    optind = 0; /* GNU: full re-initialisation, so parsing can run more than once */
    opterr = 0;
    for (;;) {
        /* "+": options stop at the first argument; ":": a missing value is told apart */
        int v = getopt_long(argc, argv, c->in_order ? "+:" : ":", c->options, NULL);
        if (v == -1)
            return optind;
        if (v != ':' && v != '?') {
            if (take(ctx, v, optarg, err) < 0)
                return -1;
            continue;
        }
        /* getopt says ':' for a missing value, '?' for the rest: with optopt 0 an unknown
         * long option; else the short option, or the long one given a value */
        const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        char s1[3] = {'-', (char)optopt, '\0'};
        if (v == ':')
            return pybox_cli_value(command, a, true, err);
        if (optopt != 0 && strncmp(a, "--", 2) == 0)
            return pybox_cli_value(command, a, false, err);
        return pybox_cli_unknown(command, optopt != 0 ? s1 : a, err);
    }
}

/* The help that lists a command's options: "image build" is in `pybox help image`. */
static const char *help_of(const char *command)
{
    return strncmp(command, "image", 5) == 0 ? "image" : strncmp(command, "session", 7) == 0 ? "session" : command;
}

/* The option's name as given, without a value given with it, escaped. */
static void option_name(char out[128], const char *arg)
{
    char name[80];
    size_t n = strcspn(arg, "=");
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, arg, n);
    name[n] = '\0';
    shown(out, 128, name);
}

int pybox_cli_unknown(const char *command, const char *arg, pybox_error_t *err)
{
    char a[128];
    option_name(a, arg);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown option '%s' for `pybox %s` (see `pybox help %s`)", a,
                           command, help_of(command));
}

int pybox_cli_value(const char *command, const char *arg, bool needs, pybox_error_t *err)
{
    char a[128];
    option_name(a, arg);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s %s (see `pybox help %s`)", a,
                           needs ? "needs a value" : "takes no value", help_of(command));
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
                           pybox_hook_name(PYBOX_HOOK_KILL_AT), arg);
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
