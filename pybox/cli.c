/* SPDX-License-Identifier: MIT */
/* Command-line parsing (see cli.h). */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "escape.h"
#include "limits.h"
#include "util.h"

static void shown(char *out, size_t len, const char *arg)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    size_t n = strlen(arg);
    pybox_escape_terminal(&b, arg, n > 64 ? 64 : n, false);
    snprintf(out, len, "%s%s", b.data ? b.data : "", n > 64 ? "..." : "");
    pybox_buf_free(&b);
}

int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err)
{
    static const struct option longs[] = {
        {"timeout", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"image", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    o->timeout_ms = PYBOX_DEFAULT_TIMEOUT_MS;
    o->json = false;
    o->image = "stdlib";
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
                                       "--timeout %s: give seconds from %.1f to %lld, e.g. --timeout 2.5", arg,
                                       PYBOX_TIMEOUT_MIN_MS / 1000.0, (long long)(PYBOX_TIMEOUT_MAX_MS / 1000));
            }
            o->timeout_ms = ms;
            break;
        }
        case 'j':
            o->json = true;
            break;
        case 'i':
            o->image = optarg;
            break;
        default:
            shown(arg, sizeof arg, optind > 0 && optind <= argc ? argv[optind - 1] : "?");
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: unknown option or missing value (see pybox help)",
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
