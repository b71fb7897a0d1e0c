/* SPDX-License-Identifier: MIT */
/* The command line's commands, in one table ({name, options, run}), and the one option
 * walker every command's options go through (getopt_long): --help, unknown options,
 * missing values and values given to a flag are handled here once, so the help, the man
 * pages and the parsers read the same table (unit/test_cli.c holds them to it). */
#ifndef PYBOX_CLI_CLI_H
#define PYBOX_CLI_CLI_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdbool.h>

#include "../buf.h"
#include "../error.h"
#include "../limits.h"
#include "../state.h"

/* One option taken: its val, its value (NULL for a flag). Returns 0, or -1 with err. */
typedef int (*pybox_cli_take_fn)(void *ctx, int val, const char *value, pybox_error_t *err);

typedef struct pybox_cli_command {
    const char *name;                  /* "exec"; a subcommand's "image build" */
    const struct option *options;      /* {NULL}-ended, each with a val of its own (never 0), in the help's order */
    bool in_order;                     /* options end at the first argument (exec), else they may follow it */
    pybox_cli_take_fn take;            /* each option given (pybox_cli_args) */
    int min_args, max_args;            /* the arguments after the options (a subcommand's word counts); max -1: any */
    const char *usage;                 /* the refusal of another count */
    int (*run)(int argc, char **argv); /* argv[0] is the command's first word; returns the exit code */
} pybox_cli_command_t;

/* A command by name ("exec", "image build"), or NULL. */
const pybox_cli_command_t *pybox_cli_command(const char *name);

/* Walk argv (argv[0] the command's word) over command's options, calling take for each
 * in order; refuses an option the command does not take, one without the value it needs
 * and a flag given a value. Returns the index of the first argument that is not an
 * option (argv is reordered so that they all come last), or -1 with err. */
int pybox_cli_walk(const char *command, int argc, char **argv, pybox_cli_take_fn take, void *ctx, pybox_error_t *err);

/* The same with the command's own take, then its arguments counted: the index of the
 * first, or -1 with err (the command's usage when their count is not its own). */
int pybox_cli_args(const char *command, int argc, char **argv, void *ctx, pybox_error_t *err);

/* Whether argv asks for the help (--help or -h anywhere): every command gives it so. */
bool pybox_cli_wants_help(int argc, char **argv);

/* PyBox's own failure on stderr, escaped ("pybox: refused: ..." or "pybox: error: ...");
 * with json, a signed refusal receipt on stdout too. Returns 125. */
int pybox_cli_fail(const pybox_error_t *err, bool json);
/* The same for an error made here: kind, errno (0: none) and the message. Returns 125. */
int pybox_cli_failf(pybox_error_kind_t kind, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failure said after a result was printed: "pybox: error: <msg>" on stderr, escaped. */
void pybox_cli_say_error(const char *msg);
/* Append j as one line of compact JSON, as safe on a terminal as the terminal receipt
 * (escape.h: the same JSON value, so its signature holds), and free it. */
void pybox_cli_json_line(pybox_buf_t *out, cJSON *j);

/* An option's value for a limit (limits.h): taken, or refused as "--name VALUE: how". */
int pybox_cli_limit(pybox_limit_id_t id, const char *value, int64_t *out, const char *example, pybox_error_t *err);

/* A session's box's own clocks end it this long after its holder would (its lifetime). */
#define PYBOX_CLI_SESSION_MARGIN_MS (10LL * 1000)

/* Whether id has the form of a session's id (32 lowercase hex digits). */
bool pybox_cli_session_id_valid(const char *id);
/* The longest first line of a request to a session's holder or of its reply. */
#define PYBOX_CLI_SESSION_HEAD_MAX 4096
/* A request to a session's holder, its first line (docs/sessions.md): a call with its
 * program's length and timeout, or the close, and how the receipt is to be shown. */
typedef enum { PYBOX_CLI_SESSION_REFUSED, PYBOX_CLI_SESSION_CALL, PYBOX_CLI_SESSION_CLOSE } pybox_cli_session_op_t;
typedef struct {
    pybox_cli_session_op_t op;
    int64_t program_bytes; /* a call's: 1 to PYBOX_PROGRAM_MAX */
    int64_t timeout_ms;    /* a call's: 0 (the session's) to the timeout's ceiling */
    int columns;           /* 1 to 10000 */
    bool json, color;
    const char *why; /* a refusal's reason, a static string */
} pybox_cli_session_request_t;
/* The line (without its newline) read as a request: 0, or -1 with rq->why. */
int pybox_cli_session_request_parse(const char *line, size_t len, pybox_cli_session_request_t *rq);
/* pybox cleanup's share of sessions: the files of those whose holder is gone (their
 * lock free) removed (with dry_run only counted) into *removed. -1 when the folder could
 * not be read. */
int pybox_cli_session_sweep(const pybox_state_t *st, bool dry_run, int *removed);

/* When this process started (main sets it): every phase of a run counts from here. */
extern double pybox_cli_started_s;

/* An option that takes a value, a flag, the end of a table (cli.h's entries). */
#define PYBOX_CLI_VALUE(name, c)                                                                                       \
    {                                                                                                                  \
        name, required_argument, NULL, c                                                                               \
    }
#define PYBOX_CLI_FLAG(name, c)                                                                                        \
    {                                                                                                                  \
        name, no_argument, NULL, c                                                                                     \
    }
#define PYBOX_CLI_END                                                                                                  \
    {                                                                                                                  \
        NULL, 0, NULL, 0                                                                                               \
    }

/* The commands (each in its own file, pybox/cli/<command>.c). */
extern const pybox_cli_command_t pybox_cli_exec, pybox_cli_mcp, pybox_cli_image, pybox_cli_image_build,
    pybox_cli_image_list, pybox_cli_image_verify, pybox_cli_image_rm, pybox_cli_cleanup, pybox_cli_verify,
    pybox_cli_key, pybox_cli_chart, pybox_cli_session, pybox_cli_session_open, pybox_cli_session_close,
    pybox_cli_session_list;

#endif
