/* SPDX-License-Identifier: MIT */
/* pybox exec: one program run in a fresh, sealed box, and its receipt. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "../bounds.h"
#include "../escape.h"
#include "../hooks.h"
#include "../limits.h"
#include "../prepare.h"
#include "../receipt.h"
#include "../run.h"
#include "../sign.h"
#include "../util.h"
#include "chart.h"
#include "cli.h"
#include "parse.h"

static const struct option options[] = {PYBOX_CLI_VALUE("timeout", 't'), PYBOX_CLI_VALUE("memory", 'm'),
                                        PYBOX_CLI_VALUE("pids", 'p'),    PYBOX_CLI_VALUE("cpus", 'c'),
                                        PYBOX_CLI_VALUE("image", 'i'),   PYBOX_CLI_VALUE("input", 'I'),
                                        PYBOX_CLI_VALUE("output", 'O'),  PYBOX_CLI_VALUE("backend", 'b'),
                                        PYBOX_CLI_FLAG("json", 'j'),     PYBOX_CLI_VALUE("chart", 'G'),
                                        PYBOX_CLI_VALUE("color", 'C'),   PYBOX_CLI_VALUE("session", 'S'),
                                        PYBOX_CLI_FLAG("help", 'h'),     PYBOX_CLI_END};

static void shown(char *out, size_t len, const char *arg)
{
    pybox_escape_short(out, len, arg, 64);
}

int pybox_cli_limit(pybox_limit_id_t id, const char *value, int64_t *out, const char *example, pybox_error_t *err)
{
    if (pybox_limit_parse(id, value, out) == 0)
        return 0;
    char v[128], what[160];
    shown(v, sizeof v, value);
    snprintf(what, sizeof what, "--%s %s", pybox_limit(id)->name, v);
    return pybox_limit_refuse(id, what, example, err);
}

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    pybox_exec_opts_t *o = ctx;
    char arg[128];
    switch (val) {
    case 't':
        o->timeout_given = true;
        return pybox_cli_limit(PYBOX_LIMIT_TIMEOUT, value, &o->timeout_ms, ", e.g. --timeout 2.5", err);
    case 'm':
        return pybox_cli_limit(PYBOX_LIMIT_MEMORY, value, &o->memory_bytes, ", e.g. --memory 512 (MiB), 512m or 1g",
                               err);
    case 'p':
        return pybox_cli_limit(PYBOX_LIMIT_PIDS, value, &o->pids, "", err);
    case 'c':
        return pybox_cli_limit(PYBOX_LIMIT_CPUS, value, &o->nano_cpus, ", e.g. --cpus 0.5", err);
    case 'j':
        o->json = true;
        return 0;
    case 'I':
        if (o->n_inputs == sizeof o->inputs / sizeof *o->inputs)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--input: at most %zu inputs (give a folder instead)",
                                   sizeof o->inputs / sizeof *o->inputs);
        o->inputs[o->n_inputs++] = value;
        return 0;
    case 'O':
        if (o->output != NULL)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output: give it once");
        o->output = value;
        return 0;
    case 'G':
        if (o->chart != NULL)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart: give it once");
        o->chart = value;
        return 0;
    case 'i':
        o->image = value;
        o->image_given = true;
        return 0;
    case 'S':
        if (!pybox_cli_session_id_valid(value)) {
            shown(arg, sizeof arg, value);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--session %s: give the id `pybox session open` printed (32 lowercase hex digits)",
                                   arg);
        }
        o->session = value;
        return 0;
    case 'b':
        o->backend = value;
        return 0;
    case 'C':
        if (strcmp(value, "auto") == 0)
            o->color = PYBOX_COLOR_AUTO;
        else if (strcmp(value, "always") == 0)
            o->color = PYBOX_COLOR_ALWAYS;
        else if (strcmp(value, "never") == 0)
            o->color = PYBOX_COLOR_NEVER;
        else {
            shown(arg, sizeof arg, value);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--color %s: give auto, always or never", arg);
        }
        return 0;
    }
    return 0; /* --help: given before parsing (main) */
}

int pybox_cli_parse_exec(int argc, char **argv, pybox_exec_opts_t *o, pybox_error_t *err)
{
    *o = (pybox_exec_opts_t){.timeout_ms = pybox_limit(PYBOX_LIMIT_TIMEOUT)->dflt, .image = "stdlib"};
    int first = pybox_cli_args("exec", argc, argv, o, err);
    if (first < 0)
        return -1;
    if (o->session != NULL) {
        /* A session's box has its image and limits from session open; its files are its
         * own (docs/sessions.md). */
        const char *not_taken = o->image_given    ? "--image"
                                : o->memory_bytes ? "--memory"
                                : o->pids         ? "--pids"
                                : o->nano_cpus    ? "--cpus"
                                : o->backend      ? "--backend"
                                : o->n_inputs     ? "--input"
                                : o->output       ? "--output"
                                : o->chart        ? "--chart"
                                                  : NULL;
        if (not_taken != NULL)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "%s: not taken with --session (a session's image, limits and backend are those "
                                   "`pybox session open` gave it)",
                                   not_taken);
    }
    if (first < argc) {
        char arg[128];
        shown(arg, sizeof arg, argv[first]);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "the program is read from standard input only (pybox exec < program.py); "
                               "unexpected argument '%s'",
                               arg);
    }
    return 0;
}

static void on_signal(int sig)
{
    pybox_interrupt_signal = sig;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns and the run reacts */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The program, whole, from stdin (never a terminal). */
static int read_program(char **prog, size_t *len, pybox_error_t *err)
{
    if (isatty(STDIN_FILENO))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "standard input is a terminal: give the program on it (pybox exec < program.py)");
    bool over = false;
    if (pybox_read_bounded(STDIN_FILENO, PYBOX_PROGRAM_MAX, prog, len, &over, err) < 0 ||
        pybox_cli_check_program(*prog, *len, over, err) < 0)
        return -1;
    return 0;
}

/* The chart (when asked), the receipt on stdout, and PyBox's own failure on stderr. The
 * JSON receipt is signed with the installation's key (st); the terminal one cannot be.
 * Returns the exit code. */
static int print_run(const pybox_run_result_t *res, int rc, bool json, pybox_color_t color, const pybox_state_t *st,
                     const pybox_cli_chart_dest_t *chart)
{
    pybox_error_t cerr = {0};
    int chart_rc = 0;
    /* the receipt's JSON, made once for the chart and --json alike */
    cJSON *j = chart != NULL || json ? pybox_receipt_json(res) : NULL;
    if (chart != NULL)
        chart_rc = j != NULL ? pybox_cli_chart_write(chart, j, &cerr)
                             : pybox_error_set(&cerr, PYBOX_ERR_SYSTEM, ENOMEM, "the chart: no receipt to draw");
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    if (json) {
        pybox_sign_installation(j, st); /* never in colour */
        pybox_cli_json_line(&out, j);   /* which frees it */
    } else {
        cJSON_Delete(j);
        struct winsize ws;
        bool terminal = isatty(STDOUT_FILENO);
        int tty = terminal && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
        const pybox_receipt_style_t style = {
            .columns = pybox_receipt_columns(tty, getenv("COLUMNS")),
            .color = pybox_cli_use_color(color, terminal, getenv("NO_COLOR"), getenv("TERM")),
        };
        pybox_receipt_text_styled(res, &style, &out);
    }
    int code = res->exit_code;
    if (out.data == NULL || pybox_write_all(STDOUT_FILENO, out.data, out.len) < 0) {
        char etext[128];
        fprintf(stderr, "pybox: error: the receipt could not be written: %s\n",
                pybox_strerror(errno, etext, sizeof etext));
        code = PYBOX_EXIT_FAILED;
    }
    pybox_buf_free(&out);
    if (chart_rc < 0) {
        pybox_cli_say_error(cerr.msg);
        code = PYBOX_EXIT_FAILED;
    }
    if (rc < 0) {
        pybox_cli_say_error(res->error.msg);
        if (res->created && !res->gone) {
            char when[32];
            time_t ex = (time_t)res->policy.expires;
            struct tm tm;
            gmtime_r(&ex, &tm);
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
            fprintf(stderr,
                    "pybox: the box %s may still exist; it ends by its own timer, and the next run or "
                    "`pybox cleanup` removes it after %s (its run note is kept until then)\n",
                    res->box_name, when);
        }
    }
    return code;
}

/* The test hook (docs/cleanup.md): PyBox ends itself, as hard as it can be ended, at one
 * step of the run. It only ever kills this process; the box's seal, its verification,
 * its own timer and its expiry do not depend on PyBox staying alive, which is what the
 * hook is there to show. */
static void kill_at(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    if (strcmp(step, (const char *)arg) == 0)
        raise(SIGKILL);
}

static int run(int argc, char **argv)
{
    /* libcrypto made ready on a thread of its own while the options, the program and the
     * state are read and the uid leased: the program's digest, early in the run, is its
     * first use. */
    _cleanup_(pybox_warmup_join) pybox_warmup_t crypto = {0};
    pybox_warmup_start(&crypto, pybox_crypto_warm);
    pybox_error_t err = {0};
    pybox_exec_opts_t o;
    bool json = false;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0)
            json = true;
    if (pybox_cli_parse_exec(argc, argv, &o, &err) < 0)
        return pybox_cli_fail(&err, json);
    _cleanup_(pybox_cli_chart_close) pybox_cli_chart_dest_t chart = {.dirfd = -1};
    if (o.chart != NULL && pybox_cli_chart_path_check(o.chart, &chart, &err) < 0)
        return pybox_cli_fail(&err, o.json);
    const char *kill_step = NULL;
    if (pybox_cli_kill_step(pybox_hook(PYBOX_HOOK_KILL_AT), &kill_step, &err) < 0)
        return pybox_cli_fail(&err, o.json);
    _cleanup_free_ char *prog = NULL;
    size_t len = 0;
    if (read_program(&prog, &len, &err) < 0)
        return pybox_cli_fail(&err, o.json);
    if (o.session != NULL)
        return pybox_cli_session_exec(&o, prog, len);
    pybox_request_t rq = {
        .program = prog,
        .program_len = len,
        .image = o.image,
        .backend = o.backend,
        .timeout_ms = o.timeout_given ? o.timeout_ms : 0,
        .memory_bytes = o.memory_bytes,
        .pids = o.pids,
        .nano_cpus = o.nano_cpus,
        .inputs = o.inputs,
        .n_inputs = o.n_inputs,
        .output = o.output,
        .started_s = pybox_cli_started_s,
        .hook = kill_step != NULL ? kill_at : NULL,
        .hook_arg = (void *)kill_step,
        .why_cold = "pybox exec: one process per run, no server keeps a box warm",
    };
    _cleanup_(pybox_ready_free) pybox_ready_t rd;
    pybox_ready_init(&rd);
    if (pybox_prepare(&rq, &rd, &err) < 0)
        return pybox_cli_fail(&err, o.json);
    catch_signals();
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    int rc = pybox_ready_run(&rd, &res);
    return print_run(&res, rc, o.json, o.color, &rd.st, o.chart != NULL ? &chart : NULL);
}

const pybox_cli_command_t pybox_cli_exec = {"exec", options, true, take, 0, -1, NULL, run};
