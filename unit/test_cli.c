/* SPDX-License-Identifier: MIT */
/* Unit tests for command-line parsing and the program check (cli.h). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/bounds.h"
#include "../pybox/cli/parse.h"
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
    const pybox_config_t base = {.memory_bytes = 4096LL << 20,
                                 .pids = 1024,
                                 .nano_cpus = 4000000000LL,
                                 .timeout_ms = 3600000,
                                 .source = "config.json of the installation"};
    const pybox_limits_t within = {
        .memory_bytes = 128LL << 20, .pids = 32, .nano_cpus = 500000000LL, .timeout_ms = 2000};
    pybox_config_t c = base;
    pybox_limits_t o = within;
    o.timeout_ms = 3600001;
    ceiling_says(&o, &c, "timeout 3600.001 s (asked)", "ceiling of 3600 s");
    c.timeout_ms = 10500;
    o.timeout_ms = 10501;
    ceiling_says(&o, &c, "timeout 10.501 s", "ceiling of 10.5 s");
    c = base;
    o = within;
    c.nano_cpus = 1000000000LL;
    o.nano_cpus = 1001000000LL;
    ceiling_says(&o, &c, "cpus 1.001 (asked)", "ceiling of 1 (set by");
    c.nano_cpus = 1000000500LL; /* a ceiling from config.json need not be whole milli-CPUs */
    ceiling_says(&o, &c, "cpus 1.001 (asked)", "ceiling of 1.0000005 (set by");
    c = base;
    o = within;
    c.memory_bytes = 102912LL * 1024; /* 100.5 MiB */
    o.memory_bytes = 102913LL * 1024;
    ceiling_says(&o, &c, "memory 102913 KiB (asked)", "ceiling of 102912 KiB");
    c.memory_bytes = (100LL << 20) + 1;
    o.memory_bytes = 101LL << 20;
    ceiling_says(&o, &c, "memory 101 MiB (asked)", "ceiling of 104857601 bytes");
    c = base;
    o = within;
    o.memory_bytes = 8192LL << 20;
    ceiling_says(&o, &c, "memory 8192 MiB (asked)", "ceiling of 4096 MiB");
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
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
