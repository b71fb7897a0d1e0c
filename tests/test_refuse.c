/* SPDX-License-Identifier: MIT */
/* Bad input is refused with a clear error and exit 125, before any box is built. */
#include <check.h>
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "suites.h"

static int boxes_of_this_install(void)
{
    pybox_engine_t *e = itest_engine();
    int n = itest_list(e, "pybox.install", itest_state()->install_id, NULL);
    pybox_engine_free(e);
    return n;
}

static void refused(const char *program, size_t len, const char *const *args, const char *expect)
{
    int before = boxes_of_this_install();
    itest_run_t r;
    itest_pybox(program, len, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "pybox: refused: "), "no refusal on stderr: %s", r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, expect), "stderr lacks '%s': %s", expect, r.err);
    ck_assert_int_eq(boxes_of_this_install(), before);
    itest_run_free(&r);
}

START_TEST(empty_program)
{
    const char *args[] = {"exec", NULL};
    refused("", 0, args, "the program is empty");
    refused("  \n\t\n", 5, args, "the program is empty");
}
END_TEST

START_TEST(oversized_program)
{
    size_t len = 1024 * 1024 + 1;
    char *big = malloc(len);
    memset(big, '#', len);
    const char *args[] = {"exec", NULL};
    refused(big, len, args, "larger than 1048576 bytes");
    free(big);
}
END_TEST

START_TEST(program_given_another_way)
{
    const char *a1[] = {"exec", "program.py", NULL};
    refused("print(1)\n", 9, a1, "standard input only");
    const char *a2[] = {"exec", "-c", "print(1)", NULL};
    refused("print(1)\n", 9, a2, "unknown option");
    const char *a3[] = {"exec", "--", "print(1)", NULL};
    refused("print(1)\n", 9, a3, "standard input only");
}
END_TEST

START_TEST(bad_options)
{
    const char *a1[] = {"exec", "--timeout", "0", NULL};
    refused("print(1)\n", 9, a1, "--timeout 0");
    const char *a2[] = {"exec", "--timeout", "1e3", NULL};
    refused("print(1)\n", 9, a2, "--timeout 1e3");
    const char *a3[] = {"exec", "--memory-hog", NULL};
    refused("print(1)\n", 9, a3, "unknown option");
    const char *a4[] = {"exec", "--image", "nosuchimage", NULL};
    refused("print(1)\n", 9, a4, "unknown image 'nosuchimage'");
}
END_TEST

START_TEST(json_refusal_is_json)
{
    itest_run_t r;
    const char *args[] = {"exec", "--json", NULL};
    itest_pybox("", 0, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_ptr_nonnull(r.receipt);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
    ck_assert_int_eq((int)itest_num(r.receipt, "exit_code"), 125);
    ck_assert_int_eq(itest_bool(r.receipt, "box_built"), 0);
    ck_assert_str_eq(itest_str(r.receipt, "error.kind"), "refused");
    itest_run_free(&r);
}
END_TEST

START_TEST(terminal_stdin)
{
    int before = boxes_of_this_install();
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *bin = getenv("PYBOX_BIN");
        execl(bin ? bin : "build/pybox", "pybox", "exec", (char *)NULL);
        _exit(127);
    }
    char buf[4096];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(master, buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(master);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 125);
    ck_assert_ptr_nonnull(strstr(buf, "standard input is a terminal"));
    ck_assert_int_eq(boxes_of_this_install(), before);
}
END_TEST

Suite *itest_suite_refuse(void)
{
    Suite *s = suite_create("refuse");
    TCase *tc = tcase_create("before any box");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, empty_program);
    tcase_add_test(tc, oversized_program);
    tcase_add_test(tc, program_given_another_way);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, json_refusal_is_json);
    tcase_add_test(tc, terminal_stdin);
    suite_add_tcase(s, tc);
    return s;
}
