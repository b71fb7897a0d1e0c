/* SPDX-License-Identifier: MIT */
/* Unit tests for command-line parsing and the program check (cli.h). */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/bounds.h"
#include "../pybox/cli/cli.h"
#include "../pybox/cli/help.h"
#include "../pybox/cli/parse.h"
#include "../pybox/limits.h"
#include "../pybox/mcp/config.h"
#include "../pybox/mcp/server.h"
#include "../pybox/prepare.h"
#include "../pybox/run.h"
#include "suites.h"

/* Parse "exec" followed by the given arguments (NULL-terminated list). getopt may permute
 * or keep pointers into argv, so the strings live in a writable array for the call. */
static int parse(pybox_exec_opts_t *o, pybox_error_t *err, const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = strdup("exec");
    for (const char *const *a = args; *a != NULL; a++) {
        ck_assert_int_lt(argc, 15);
        argv[argc++] = strdup(*a);
    }
    argv[argc] = NULL;
    memset(o, 0x5a, sizeof *o);
    pybox_error_clear(err);
    int rc = pybox_cli_parse_exec(argc, argv, o, err);
    /* options that keep a pointer (--image) point into argv: copy before freeing */
    static char image[64];
    if (rc == 0 && o->image != NULL) {
        ck_assert_uint_lt(strlen(o->image), sizeof image);
        memcpy(image, o->image, strlen(o->image) + 1);
        o->image = image;
    }
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ARGS ((const char *const[]){NULL})

START_TEST(defaults)
{
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, NO_ARGS), 0);
    ck_assert_int_eq(o.timeout_ms, PYBOX_DEFAULT_TIMEOUT_MS);
    ck_assert(!o.json);
    ck_assert_str_eq(o.image, "stdlib");
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
}
END_TEST

START_TEST(timeout_accepted)
{
    static const struct {
        const char *arg;
        int64_t ms;
    } ok[] = {{"0.4", 400}, {"2.5", 2500}, {"3600", 3600000}, {"0.1", 100}, {"1", 1000}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        pybox_exec_opts_t o;
        pybox_error_t err;
        ck_assert_msg(parse(&o, &err, ARGS("--timeout", ok[i].arg)) == 0, "--timeout %s: %s", ok[i].arg, err.msg);
        ck_assert_int_eq(o.timeout_ms, ok[i].ms);
    }
    /* the --opt=value form too */
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("--timeout=2.5")), 0);
    ck_assert_int_eq(o.timeout_ms, 2500);
}
END_TEST

START_TEST(timeout_refused)
{
    static const char *const bad[] = {"0", "0.05", "0.099", "3601", "3600.001", "abc", "", "-1", "1e3", "2s", "1.2345"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_exec_opts_t o;
        pybox_error_t err;
        ck_assert_msg(parse(&o, &err, ARGS("--timeout", bad[i])) == -1, "--timeout '%s' accepted", bad[i]);
        ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(err.msg, "--timeout"));
    }
    /* a value refused for its digits says so */
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("--timeout", "3599.0001")), -1);
    ck_assert_msg(strstr(err.msg, "at most 3 decimals") != NULL, "the reason is not named: %s", err.msg);
    /* missing value */
    ck_assert_int_eq(parse(&o, &err, ARGS("--timeout")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "--timeout"));
}
END_TEST

START_TEST(json_and_image)
{
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("--json")), 0);
    ck_assert(o.json);
    ck_assert_int_eq(o.timeout_ms, PYBOX_DEFAULT_TIMEOUT_MS);

    ck_assert_int_eq(parse(&o, &err, ARGS("--image", "x")), 0);
    ck_assert_str_eq(o.image, "x");
    ck_assert(!o.json);

    ck_assert_int_eq(parse(&o, &err, ARGS("--json", "--image=data", "--timeout", "0.4")), 0);
    ck_assert(o.json);
    ck_assert_str_eq(o.image, "data");
    ck_assert_int_eq(o.timeout_ms, 400);

    ck_assert_int_eq(parse(&o, &err, ARGS("--image")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);

    /* --json takes no value */
    ck_assert_int_eq(parse(&o, &err, ARGS("--json=yes")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
}
END_TEST

START_TEST(unknown_option)
{
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("--foo")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "--foo"));

    ck_assert_int_eq(parse(&o, &err, ARGS("-x")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);

    /* the refusal names the option, the command and the help to read */
    ck_assert_int_eq(parse(&o, &err, ARGS("--foo")), -1);
    ck_assert_str_eq(err.msg, "unknown option '--foo' for `pybox exec` (see `pybox help exec`)");
    ck_assert_int_eq(parse(&o, &err, ARGS("--foo=1")), -1);
    ck_assert_str_eq(err.msg, "unknown option '--foo' for `pybox exec` (see `pybox help exec`)");
    ck_assert_int_eq(parse(&o, &err, ARGS("-c", "print(1)")), -1);
    ck_assert_str_eq(err.msg, "unknown option '-c' for `pybox exec` (see `pybox help exec`)");
    /* a known option without its value, or with one it does not take, is not unknown */
    ck_assert_int_eq(parse(&o, &err, ARGS("--json", "--memory")), -1);
    ck_assert_str_eq(err.msg, "--memory needs a value (see `pybox help exec`)");
    ck_assert_int_eq(parse(&o, &err, ARGS("--json=yes")), -1);
    ck_assert_str_eq(err.msg, "--json takes no value (see `pybox help exec`)");

    /* an escape sequence in an argument is shown escaped */
    ck_assert_int_eq(parse(&o, &err, ARGS("--\x1b[2J")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_null(strchr(err.msg, '\x1b'));
}
END_TEST

START_TEST(positional_refused)
{
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("prog.py")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "standard input"));
    ck_assert_ptr_nonnull(strstr(err.msg, "prog.py"));

    /* after options, too: no permutation sneaks it past */
    ck_assert_int_eq(parse(&o, &err, ARGS("--json", "prog.py")), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "standard input"));
    ck_assert_int_eq(parse(&o, &err, ARGS("prog.py", "--json")), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "standard input"));

    /* "--" ends the options, and what follows is still an argument: refused */
    ck_assert_int_eq(parse(&o, &err, ARGS("--", "prog.py")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "standard input"));
    ck_assert_int_eq(parse(&o, &err, ARGS("--", "--json")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);

    /* "--" alone is harmless */
    ck_assert_int_eq(parse(&o, &err, ARGS("--json", "--")), 0);
    ck_assert(o.json);
}
END_TEST

START_TEST(parse_twice)
{
    /* getopt keeps state between calls; each parse must start afresh */
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, ARGS("--timeout", "2.5", "--json")), 0);
    ck_assert_int_eq(o.timeout_ms, 2500);
    ck_assert(o.json);
    ck_assert_int_eq(parse(&o, &err, ARGS("--timeout", "0.4")), 0);
    ck_assert_int_eq(o.timeout_ms, 400);
    ck_assert(!o.json);
    ck_assert_int_eq(parse(&o, &err, ARGS("--foo")), -1);
    ck_assert_int_eq(parse(&o, &err, ARGS("--json")), 0);
    ck_assert(o.json);
    ck_assert_int_eq(o.timeout_ms, PYBOX_DEFAULT_TIMEOUT_MS);
    ck_assert_int_eq(parse(&o, &err, ARGS("--json", "--timeout")), -1);
    ck_assert_int_eq(parse(&o, &err, NO_ARGS), 0);
    ck_assert(!o.json);
}
END_TEST

START_TEST(check_program)
{
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_cli_check_program("print(1)\n", 9, false, &err), 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
    ck_assert_int_eq(pybox_cli_check_program("  x = 1", 7, false, &err), 0);

    ck_assert_int_eq(pybox_cli_check_program("", 0, false, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty"));

    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_cli_check_program(" \t\r\n\n  ", 7, false, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);

    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_cli_check_program("print(1)\n", 9, true, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "larger"));
}
END_TEST

START_TEST(kill_step)
{
    pybox_error_t err = {0};
    const char *step = "x";
    ck_assert_int_eq(pybox_cli_kill_step(NULL, &step, &err), 0);
    ck_assert_ptr_null(step);
    ck_assert_int_eq(pybox_cli_kill_step("", &step, &err), 0);
    ck_assert_ptr_null(step);
    ck_assert_int_eq(pybox_cli_kill_step("create", &step, &err), 0);
    ck_assert_str_eq(step, PYBOX_STEP_CREATED);
    ck_assert_int_eq(pybox_cli_kill_step("start", &step, &err), 0);
    ck_assert_str_eq(step, PYBOX_STEP_STARTED);
    ck_assert_int_eq(pybox_cli_kill_step("run", &step, &err), 0);
    ck_assert_str_eq(step, PYBOX_STEP_RUNNING);
    ck_assert_int_eq(pybox_cli_kill_step("collect", &step, &err), 0);
    ck_assert_str_eq(step, PYBOX_STEP_ENDED);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
    static const char *const bad[] = {"noted", "Create", "create ", "removing", "1", "\x1b[2J"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_clear(&err);
        ck_assert_int_eq(pybox_cli_kill_step(bad[i], &step, &err), -1);
        ck_assert_ptr_null(step);
        ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(err.msg, "PYBOX_TEST_KILL_AT="));
        ck_assert_ptr_null(strchr(err.msg, '\x1b'));
    }
}
END_TEST

/* A value above a ceiling is shown with enough digits to differ from the ceiling, and
 * the ceiling with all of its own. */
static void ceiling_says(const pybox_limits_t *o, const pybox_config_t *c, const char *asked, const char *ceil)
{
    pybox_error_t err;
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_limits_check(o, c, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, asked) != NULL, "\"%s\" not in: %s", asked, err.msg);
    ck_assert_msg(strstr(err.msg, ceil) != NULL, "\"%s\" not in: %s", ceil, err.msg);
}

START_TEST(ceiling_digits)
{
    const pybox_config_t base = {.limit = {[PYBOX_LIMIT_MEMORY] = 4096LL << 20,
                                           [PYBOX_LIMIT_PIDS] = 1024,
                                           [PYBOX_LIMIT_CPUS] = 4000000000LL,
                                           [PYBOX_LIMIT_TIMEOUT] = 3600000},
                                 .source = "config.json of the installation"};
    const pybox_limits_t within = {.v = {[PYBOX_LIMIT_MEMORY] = 128LL << 20,
                                         [PYBOX_LIMIT_PIDS] = 32,
                                         [PYBOX_LIMIT_CPUS] = 500000000LL,
                                         [PYBOX_LIMIT_TIMEOUT] = 2000}};
    pybox_config_t c = base;
    pybox_limits_t o = within;
    o.v[PYBOX_LIMIT_TIMEOUT] = 3600001;
    ceiling_says(&o, &c, "timeout 3600.001 s (asked)", "ceiling of 3600 s");
    c.limit[PYBOX_LIMIT_TIMEOUT] = 10500;
    o.v[PYBOX_LIMIT_TIMEOUT] = 10501;
    ceiling_says(&o, &c, "timeout 10.501 s", "ceiling of 10.5 s");
    c = base;
    o = within;
    c.limit[PYBOX_LIMIT_CPUS] = 1000000000LL;
    o.v[PYBOX_LIMIT_CPUS] = 1001000000LL;
    ceiling_says(&o, &c, "cpus 1.001 (asked)", "ceiling of 1 (set by");
    c.limit[PYBOX_LIMIT_CPUS] = 1000000500LL; /* a ceiling from config.json need not be whole milli-CPUs */
    ceiling_says(&o, &c, "cpus 1.001 (asked)", "ceiling of 1.0000005 (set by");
    c = base;
    o = within;
    c.limit[PYBOX_LIMIT_MEMORY] = 102912LL * 1024; /* 100.5 MiB */
    o.v[PYBOX_LIMIT_MEMORY] = 102913LL * 1024;
    ceiling_says(&o, &c, "memory 102913 KiB (asked)", "ceiling of 102912 KiB");
    c.limit[PYBOX_LIMIT_MEMORY] = (100LL << 20) + 1;
    o.v[PYBOX_LIMIT_MEMORY] = 101LL << 20;
    ceiling_says(&o, &c, "memory 101 MiB (asked)", "ceiling of 104857601 bytes");
    c = base;
    o = within;
    o.v[PYBOX_LIMIT_MEMORY] = 8192LL << 20;
    ceiling_says(&o, &c, "memory 8192 MiB (asked)", "ceiling of 4096 MiB");
}
END_TEST

/* The help of a command, as text (the caller frees). */
static char *help_text(const char *command)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(pybox_help(f, command), 0);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

/* A line of text that lists "--name" (after spaces, as a whole word): the lines the
 * bash completion reads a command's options from. */
static bool names_option(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *q = p + strspn(p, " ");
        if (q > p && strncmp(q, "--", 2) == 0 && strncmp(q + 2, name, n) == 0 &&
            !(q[2 + n] == '-' || (q[2 + n] >= 'a' && q[2 + n] <= 'z')))
            return true;
    }
    return false;
}

static const char *const commands[] = {"exec", "mcp",   "image build", "image",        "cleanup",       "verify",
                                       "key",  "chart", "session",     "session open", "session close", "session list"};

START_TEST(help_lists_every_option)
{
    /* every option a parser takes is in its command's help, with what it wants */
    for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
        const struct option *o = pybox_cli_options(commands[c]);
        ck_assert_ptr_nonnull(o);
        char *text = help_text(strncmp(commands[c], "image", 5) == 0     ? "image"
                               : strncmp(commands[c], "session", 7) == 0 ? "session"
                                                                         : commands[c]);
        for (; o->name != NULL; o++)
            ck_assert_msg(names_option(text, o->name), "`pybox help` of %s does not name --%s", commands[c], o->name);
        free(text);
    }
    ck_assert_ptr_null(pybox_cli_options("frob"));
    /* the main help names every command */
    char *text = help_text(NULL);
    for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
        char word[32];
        snprintf(word, sizeof word, "\n  %.16s ", commands[c]);
        if (strchr(commands[c], ' ') == NULL)
            ck_assert_msg(strstr(text, word) != NULL, "pybox help does not list %s", commands[c]);
    }
    free(text);
}
END_TEST

START_TEST(options_looked_up)
{
    ck_assert_str_eq(pybox_cli_option("mcp", "--max-timeout")->name, "max-timeout");
    ck_assert_str_eq(pybox_cli_option("mcp", "--max-timeout=3")->name, "max-timeout");
    ck_assert_ptr_null(pybox_cli_option("mcp", "--max"));
    ck_assert_ptr_null(pybox_cli_option("mcp", "max-timeout"));
    ck_assert_ptr_null(pybox_cli_option("cleanup", "--dry-runs"));
    ck_assert_int_eq(pybox_cli_option("cleanup", "--dry-run")->has_arg, no_argument);
    pybox_error_t err;
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_cli_unknown("image build", "--frc=1", &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_str_eq(err.msg, "unknown option '--frc' for `pybox image build` (see `pybox help image`)");
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_cli_value("mcp", "--images", true, &err), -1);
    ck_assert_str_eq(err.msg, "--images needs a value (see `pybox help mcp`)");
}
END_TEST

/* ---- the parsers are the table's ---- */

static const char *const every_command[] = {"exec",     "mcp",     "image build",  "image list",    "image verify",
                                            "image rm", "image",   "cleanup",      "verify",        "key",
                                            "chart",    "session", "session open", "session close", "session list"};

typedef struct {
    int val;
    char value[64];
    int taken;
} took_t;

static int took(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)err;
    took_t *t = ctx;
    t->val = val;
    snprintf(t->value, sizeof t->value, "%s", value != NULL ? value : "(none)");
    t->taken++;
    return 0;
}

/* Walk "word" and up to two arguments over command's options. */
static int walk(const char *command, const char *a1, const char *a2, took_t *t, pybox_error_t *err)
{
    char w[] = "word", b1[64], b2[64];
    char *argv[] = {w, b1, b2, NULL};
    snprintf(b1, sizeof b1, "%s", a1);
    snprintf(b2, sizeof b2, "%s", a2 != NULL ? a2 : "");
    memset(t, 0, sizeof *t);
    pybox_error_clear(err);
    return pybox_cli_walk(command, a2 != NULL ? 3 : 2, argv, took, t, err);
}

START_TEST(every_command_walks_its_table)
{
    for (size_t c = 0; c < sizeof every_command / sizeof *every_command; c++) {
        const char *name = every_command[c];
        const pybox_cli_command_t *cmd = pybox_cli_command(name);
        ck_assert_msg(cmd != NULL && cmd->run != NULL, "no command %s", name);
        took_t t;
        pybox_error_t err;
        char want[200];
        const char *help = strncmp(name, "image", 5) == 0     ? "image"
                           : strncmp(name, "session", 7) == 0 ? "session"
                                                              : name;
        /* an option the table lacks */
        ck_assert_int_eq(walk(name, "--no-such-option", NULL, &t, &err), -1);
        snprintf(want, sizeof want, "unknown option '--no-such-option' for `pybox %s` (see `pybox help %s`)", name,
                 help);
        ck_assert_str_eq(err.msg, want);
        ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
        ck_assert_int_eq(t.taken, 0);
        for (const struct option *o = cmd->options; o->name != NULL; o++) {
            char opt[64], with[80];
            snprintf(opt, sizeof opt, "--%s", o->name);
            snprintf(with, sizeof with, "--%s=v", o->name);
            ck_assert_int_ne(o->val, 0); /* getopt tells a flag given a value by it */
            for (const struct option *p = cmd->options; p < o; p++)
                ck_assert_int_ne(p->val, o->val);
            if (o->has_arg == required_argument) {
                ck_assert_int_eq(walk(name, opt, NULL, &t, &err), -1);
                snprintf(want, sizeof want, "%s needs a value (see `pybox help %s`)", opt, help);
                ck_assert_str_eq(err.msg, want);
                ck_assert_int_eq(walk(name, with, NULL, &t, &err), 2);
                ck_assert_int_eq(t.taken, 1);
                ck_assert_int_eq(t.val, o->val);
                ck_assert_str_eq(t.value, "v");
                ck_assert_int_eq(walk(name, opt, "w", &t, &err), 3);
                ck_assert_str_eq(t.value, "w");
            } else {
                ck_assert_int_eq(walk(name, with, NULL, &t, &err), -1);
                snprintf(want, sizeof want, "%s takes no value (see `pybox help %s`)", opt, help);
                ck_assert_str_eq(err.msg, want);
                ck_assert_int_eq(walk(name, opt, NULL, &t, &err), 2);
                ck_assert_int_eq(t.val, o->val);
            }
        }
        /* an argument is left for the command, after the options */
        ck_assert_int_eq(walk(name, "arg", NULL, &t, &err), 1);
        ck_assert_int_eq(t.taken, 0);
    }
    ck_assert_ptr_null(pybox_cli_command("frob"));
}
END_TEST

START_TEST(every_command_has_help)
{
    char w[] = "word", h[] = "--help", x[] = "x", s[] = "-h";
    char *with_help[] = {w, x, h, NULL}, *short_help[] = {w, s, NULL}, *none[] = {w, x, NULL};
    ck_assert(pybox_cli_wants_help(3, with_help));
    ck_assert(pybox_cli_wants_help(2, short_help));
    ck_assert(!pybox_cli_wants_help(2, none));
    for (size_t c = 0; c < sizeof every_command / sizeof *every_command; c++) {
        if (strchr(every_command[c], ' ') != NULL)
            continue; /* a subcommand's help is its command's */
        char *text = help_text(every_command[c]);
        ck_assert_msg(strstr(text, "usage: pybox ") == text, "no usage for %s", every_command[c]);
        free(text);
    }
}
END_TEST

/* ---- the limits' table (limits.h) ---- */

START_TEST(limits_parse_their_range)
{
    for (int id = 0; id < PYBOX_LIMIT_COUNT; id++) {
        const pybox_limit_t *l = pybox_limit(id);
        char text[PYBOX_NUM_MAX];
        int64_t v = -1;
        /* the minimum and the maximum as the help says them read back */
        if (l->kind == PYBOX_LIMIT_SIZE)
            snprintf(text, sizeof text, "%lldm", (long long)(l->min >> 20));
        else
            pybox_limit_fmt(id, l->min, text);
        ck_assert_msg(pybox_limit_parse(id, text, &v) == 0 && v == l->min, "%s: %s", l->name, text);
        ck_assert(l->min <= l->dflt && l->dflt <= l->max);
        ck_assert(l->ceiling <= l->max);
        ck_assert_ptr_nonnull(l->config_key);
        for (int j = 0; j < id; j++)
            ck_assert_str_ne(pybox_limit(j)->config_key, l->config_key);
        ck_assert_int_eq(pybox_limit(id)->config_unit > 0, 1);
    }
    int64_t v = 0;
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_TIMEOUT, "0.099", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_TIMEOUT, "3600.001", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_TIMEOUT, "3600", &v), 0);
    ck_assert_int_eq(v, 3600000);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_MEMORY, "31", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_MEMORY, "1025g", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_MEMORY, "1024g", &v), 0);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_PIDS, "7", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_PIDS, "4194305", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_PIDS, "18446744073709551615", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_CPUS, "0.009", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_CPUS, "1024.001", &v), -1);
    ck_assert_int_eq(pybox_limit_parse(PYBOX_LIMIT_CPUS, "0.5", &v), 0);
    ck_assert_int_eq(v, 500000000);
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_limit_refuse(PYBOX_LIMIT_TIMEOUT, "--max-timeout", "", &err), -1);
    ck_assert_str_eq(err.msg, "--max-timeout: give seconds from 0.1 to 3600, with at most 3 decimals");
    /* the box's own timer runs a full margin behind */
    ck_assert_int_eq(pybox_limit_box_timer_ms(2000), 2000 + PYBOX_BOX_TIMER_MARGIN_MS);
}
END_TEST

START_TEST(color_option)
{
    pybox_exec_opts_t o;
    pybox_error_t err;
    ck_assert_int_eq(parse(&o, &err, NO_ARGS), 0);
    ck_assert_int_eq(o.color, PYBOX_COLOR_AUTO);
    ck_assert_int_eq(parse(&o, &err, ARGS("--color=always")), 0);
    ck_assert_int_eq(o.color, PYBOX_COLOR_ALWAYS);
    ck_assert_int_eq(parse(&o, &err, ARGS("--color", "never")), 0);
    ck_assert_int_eq(o.color, PYBOX_COLOR_NEVER);
    ck_assert_int_eq(parse(&o, &err, ARGS("--color=never", "--color=auto")), 0);
    ck_assert_int_eq(o.color, PYBOX_COLOR_AUTO);
    ck_assert_int_eq(parse(&o, &err, ARGS("--color=yes")), -1);
    ck_assert_str_eq(err.msg, "--color yes: give auto, always or never");
    ck_assert_int_eq(parse(&o, &err, ARGS("--color")), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
}
END_TEST

START_TEST(color_choice)
{
    /* auto: a terminal only, and not with NO_COLOR set and not empty, or a dumb one */
    ck_assert(pybox_cli_use_color(PYBOX_COLOR_AUTO, true, NULL, "xterm"));
    ck_assert(pybox_cli_use_color(PYBOX_COLOR_AUTO, true, NULL, NULL));
    ck_assert(!pybox_cli_use_color(PYBOX_COLOR_AUTO, false, NULL, "xterm"));
    ck_assert(!pybox_cli_use_color(PYBOX_COLOR_AUTO, true, "1", "xterm"));
    ck_assert(!pybox_cli_use_color(PYBOX_COLOR_AUTO, true, "0", "xterm")); /* any value */
    ck_assert(pybox_cli_use_color(PYBOX_COLOR_AUTO, true, "", "xterm"));   /* empty is unset */
    ck_assert(!pybox_cli_use_color(PYBOX_COLOR_AUTO, true, NULL, "dumb"));
    /* always: even in a pipe, even with NO_COLOR (the option is explicit) */
    ck_assert(pybox_cli_use_color(PYBOX_COLOR_ALWAYS, false, "1", "dumb"));
    /* never: never */
    ck_assert(!pybox_cli_use_color(PYBOX_COLOR_NEVER, true, NULL, "xterm"));
}
END_TEST

/* ---- a request to a session's holder ---- */

static int session_req(const char *line, pybox_cli_session_request_t *rq)
{
    return pybox_cli_session_request_parse(line, strlen(line), rq);
}

START_TEST(session_request_taken)
{
    pybox_cli_session_request_t rq;
    ck_assert_int_eq(session_req("{\"op\":\"call\",\"json\":true,\"columns\":120,\"color\":false,\"timeout_ms\":0,"
                                 "\"program_bytes\":13}",
                                 &rq),
                     0);
    ck_assert_int_eq(rq.op, PYBOX_CLI_SESSION_CALL);
    ck_assert_int_eq(rq.program_bytes, 13);
    ck_assert_int_eq(rq.timeout_ms, 0);
    ck_assert_int_eq(rq.columns, 120);
    ck_assert(rq.json && !rq.color);
    ck_assert_int_eq(session_req("{\"op\":\"close\",\"columns\":0,\"color\":true}", &rq), 0);
    ck_assert_int_eq(rq.op, PYBOX_CLI_SESSION_CLOSE);
    ck_assert_int_eq(rq.columns, 80); /* none given: the default */
    ck_assert(rq.color && !rq.json);
}
END_TEST

START_TEST(session_request_refused)
{
    static const char *const bad[] = {
        "{\"op\":\"call\",\"timeout_ms\":0,\"program_bytes\":0}",       /* an empty program */
        "{\"op\":\"call\",\"timeout_ms\":0,\"program_bytes\":1048577}", /* over PYBOX_PROGRAM_MAX */
        "{\"op\":\"call\",\"timeout_ms\":1.5,\"program_bytes\":1}",
        "{\"op\":\"call\",\"timeout_ms\":-1,\"program_bytes\":1}",
        "{\"op\":\"call\",\"program_bytes\":1}",
        "{\"op\":\"Call\",\"timeout_ms\":0,\"program_bytes\":1}",
        "{\"op\":[\"close\"]}",
        "[\"close\"]",
        "{\"op\":\"close\"",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_cli_session_request_t rq;
        ck_assert_msg(session_req(bad[i], &rq) == -1, "taken: %s", bad[i]);
        ck_assert_int_eq(rq.op, PYBOX_CLI_SESSION_REFUSED);
        ck_assert_ptr_nonnull(rq.why);
    }
    /* the longest line is taken, one byte more is not */
    char line[PYBOX_CLI_SESSION_HEAD_MAX + 2];
    const char *head = "{\"op\":\"close\",\"pad\":\"";
    size_t hl = strlen(head);
    memcpy(line, head, hl);
    memset(line + hl, 'x', PYBOX_CLI_SESSION_HEAD_MAX - hl - 2);
    memcpy(line + PYBOX_CLI_SESSION_HEAD_MAX - 2, "\"}", 3);
    pybox_cli_session_request_t rq;
    ck_assert_int_eq(pybox_cli_session_request_parse(line, PYBOX_CLI_SESSION_HEAD_MAX, &rq), 0);
    memcpy(line + PYBOX_CLI_SESSION_HEAD_MAX - 2, "x\"}", 4);
    ck_assert_int_eq(pybox_cli_session_request_parse(line, PYBOX_CLI_SESSION_HEAD_MAX + 1, &rq), -1);
}
END_TEST

/* ---- the man pages say what the code does ---- */

/* A man page of the source tree, whole (the caller frees). */
static char *man_page(const char *name)
{
    char path[512];
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", PYBOX_MAN_DIR, name), (int)sizeof path);
    FILE *f = fopen(path, "re");
    ck_assert_msg(f != NULL, "no %s", path);
    char *text = malloc(1 << 20);
    ck_assert_ptr_nonnull(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    ck_assert(feof(f));
    fclose(f);
    text[n] = '\0';
    return text;
}

/* mdoc's ".Fl -name" for the option, as a whole word. */
static bool man_names_option(const char *page, const char *name)
{
    char want[64];
    snprintf(want, sizeof want, "Fl -%s", name);
    size_t n = strlen(want);
    for (const char *p = page; (p = strstr(p, want)) != NULL; p += n)
        if (!(p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z')))
            return true;
    return false;
}

START_TEST(man_pages_list_every_option)
{
    static const struct {
        const char *command, *page;
    } where[] = {{"exec", "pybox-exec.1"},     {"mcp", "pybox-mcp.1"},     {"image build", "pybox.1"},
                 {"image", "pybox.1"},         {"cleanup", "pybox.1"},     {"verify", "pybox.1"},
                 {"key", "pybox.1"},           {"chart", "pybox.1"},       {"session open", "pybox.1"},
                 {"session close", "pybox.1"}, {"session list", "pybox.1"}};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        char *page = man_page(where[i].page);
        const struct option *opts = pybox_cli_options(where[i].command);
        ck_assert_msg(opts != NULL, "no options of %s", where[i].command);
        for (const struct option *o = opts; o->name != NULL; o++)
            ck_assert_msg(man_names_option(page, o->name), "%s does not give --%s of %s", where[i].page, o->name,
                          where[i].command);
        free(page);
    }
    /* pybox(1) names every command */
    char *page = man_page("pybox.1");
    static const char *const cmds[] = {"exec",     "mcp",     "image build",  "image list",    "image verify",
                                       "image rm", "cleanup", "verify",       "key",           "receipt-schema",
                                       "help",     "version", "session open", "session close", "session list"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char want[64];
        snprintf(want, sizeof want, ".It Cm %s", cmds[i]);
        ck_assert_msg(strstr(page, want) != NULL, "pybox.1 has no \"%s\"", want);
    }
    free(page);
}
END_TEST

/* Each of these texts, made from bounds.h, is in the page. */
static void page_says(const char *name, const char *const *texts)
{
    char *page = man_page(name);
    /* the page's text with its line breaks as spaces, as it reads */
    for (char *p = page; *p; p++)
        if (*p == '\n')
            *p = ' ';
    for (const char *const *t = texts; *t != NULL; t++)
        ck_assert_msg(strstr(page, *t) != NULL, "%s does not say \"%s\"", name, *t);
    free(page);
}

START_TEST(man_pages_give_defaults_and_ceilings)
{
    char b[16][96];
    int n = 0;
    /* the limits as their table says them (limits.h) */
    const pybox_limit_t *tm = pybox_limit(PYBOX_LIMIT_TIMEOUT), *mem = pybox_limit(PYBOX_LIMIT_MEMORY),
                        *pids = pybox_limit(PYBOX_LIMIT_PIDS), *cpus = pybox_limit(PYBOX_LIMIT_CPUS);
    snprintf(b[n++], sizeof *b, "default %g, or the image's", (double)tm->dflt / 1000.0);
    snprintf(b[n++], sizeof *b, "from %g to %lld, at most 3 decimals", (double)tm->min / 1000.0,
             (long long)(tm->max / 1000));
    snprintf(b[n++], sizeof *b, "The box's own timer is %g s longer", PYBOX_BOX_TIMER_MARGIN_MS / 1000.0);
    snprintf(b[n++], sizeof *b, "at least %lld MiB (default %lld MiB, or the image's", (long long)(mem->min >> 20),
             (long long)(mem->dflt >> 20));
    snprintf(b[n++], sizeof *b, "%s , default %lld MiB", mem->config_key, (long long)(mem->ceiling >> 20));
    snprintf(b[n++], sizeof *b, "at least %lld (default %lld, or the image's", (long long)pids->min,
             (long long)pids->dflt);
    snprintf(b[n++], sizeof *b, "%s , default %lld", pids->config_key, (long long)pids->ceiling);
    snprintf(b[n++], sizeof *b, "at least %g (default %g, or the image's", (double)cpus->min / 1e9,
             (double)cpus->dflt / 1e9);
    snprintf(b[n++], sizeof *b, "%s , default %lld", tm->config_key, (long long)(tm->ceiling / 1000));
    snprintf(b[n++], sizeof *b, "%lld MiB in all (default: none)", PYBOX_INPUT_MAX >> 20);
    snprintf(b[n++], sizeof *b, "at most %d files, %lld MiB each and %lld MiB in all", PYBOX_OUT_FILES_MAX,
             PYBOX_OUT_FILE_MAX >> 20, PYBOX_OUT_TOTAL_MAX >> 20);
    snprintf(b[n++], sizeof *b, "at most %d MiB", PYBOX_PROGRAM_MAX >> 20);
    const char *exec_says[17];
    for (int i = 0; i < n; i++)
        exec_says[i] = b[i];
    exec_says[n] = NULL;
    page_says("pybox-exec.1", exec_says);

    char m[4][96];
    snprintf(m[0], sizeof *m, "at most %d)", PYBOX_MCP_IMAGES_MAX);
    snprintf(m[1], sizeof *m, "At most %d calls run at once", PYBOX_MCP_CALLS_MAX);
    snprintf(m[2], sizeof *m, "at least %lld MiB (default %lldM", (long long)(mem->min >> 20),
             (long long)(PYBOX_MCP_MAX_MEMORY >> 20));
    snprintf(m[3], sizeof *m, "from %g to %lld, at most 3 decimals (default %g", (double)tm->min / 1000.0,
             (long long)(tm->max / 1000), PYBOX_MCP_MAX_TIMEOUT_MS / 1000.0);
    page_says("pybox-mcp.1", (const char *const[]){m[0], m[1], m[2], m[3], NULL});

    char c[3][96];
    snprintf(c[0], sizeof *c, "%s (default %lld)", mem->config_key, (long long)(mem->ceiling >> 20));
    snprintf(c[1], sizeof *c, "%s (default %lld)", pids->config_key, (long long)pids->ceiling);
    snprintf(c[2], sizeof *c, "leftover_expiry_s (default %d)", PYBOX_EXPIRY_S);
    page_says("pybox.1",
              (const char *const[]){c[0], c[1], c[2], "else .Cm " PYBOX_DEFAULT_BACKEND, ".It Ev PYBOX_BACKEND", NULL});
}
END_TEST

START_TEST(receipt_page_gives_every_status_and_exit_code)
{
    char *page = man_page("pybox-receipt.5");
    int words = 0;
    for (int e = 0; e < 64 && strcmp(pybox_end_word((pybox_end_t)e), "?") != 0; e++, words++) {
        char want[64];
        snprintf(want, sizeof want, ".It Sy %s\n", pybox_end_word((pybox_end_t)e));
        ck_assert_msg(strstr(page, want) != NULL, "pybox-receipt.5 does not give %s", pybox_end_word((pybox_end_t)e));
    }
    ck_assert_int_ge(words, 8);
    ck_assert_ptr_nonnull(strstr(page, ".It Sy REFUSED\n"));
    char code[16];
    snprintf(code, sizeof code, ".It %d\n", PYBOX_EXIT_DEADLINE);
    ck_assert_ptr_nonnull(strstr(page, code));
    snprintf(code, sizeof code, ".It %d\n", PYBOX_EXIT_FAILED);
    ck_assert_ptr_nonnull(strstr(page, code));
    free(page);
    /* and the exit codes in pybox-exec(1) */
    page = man_page("pybox-exec.1");
    snprintf(code, sizeof code, ".It %d\n", PYBOX_EXIT_DEADLINE);
    ck_assert_ptr_nonnull(strstr(page, code));
    snprintf(code, sizeof code, ".It %d\n", PYBOX_EXIT_FAILED);
    ck_assert_ptr_nonnull(strstr(page, code));
    free(page);
}
END_TEST

Suite *suite_cli(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("exec");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, timeout_accepted);
    tcase_add_test(tc, timeout_refused);
    tcase_add_test(tc, json_and_image);
    tcase_add_test(tc, unknown_option);
    tcase_add_test(tc, positional_refused);
    tcase_add_test(tc, parse_twice);
    tcase_add_test(tc, check_program);
    tcase_add_test(tc, ceiling_digits);
    tcase_add_test(tc, kill_step);
    tcase_add_test(tc, help_lists_every_option);
    tcase_add_test(tc, options_looked_up);
    tcase_add_test(tc, every_command_walks_its_table);
    tcase_add_test(tc, every_command_has_help);
    tcase_add_test(tc, limits_parse_their_range);
    tcase_add_test(tc, color_option);
    tcase_add_test(tc, color_choice);
    tcase_add_test(tc, session_request_taken);
    tcase_add_test(tc, session_request_refused);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    tc = tcase_create("man");
    tcase_add_test(tc, man_pages_list_every_option);
    tcase_add_test(tc, man_pages_give_defaults_and_ceilings);
    tcase_add_test(tc, receipt_page_gives_every_status_and_exit_code);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
