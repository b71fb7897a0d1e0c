/* SPDX-License-Identifier: MIT */
/* The read-back check against the real engine: a box that differs from the policy in a
 * single setting is never started, and is removed. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../pybox/image/image.h"
#include "../pybox/run.h"
#include "itest.h"
#include "suites.h"

static void set_tamper(pybox_policy_t *p, void *arg)
{
    p->tamper = arg;
}

static int run_with(const char *tamper, pybox_run_result_t *res)
{
    static const char prog[] = "print('started')\n";
    return itest_lib_run(prog, set_tamper, (void *)tamper, res);
}

START_TEST(honest_policy_runs)
{
    pybox_run_result_t res;
    ck_assert_int_eq(run_with(NULL, &res), 0);
    ck_assert(res.verified);
    ck_assert(res.started);
    ck_assert_int_gt(res.checked, 40);
    ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
    ck_assert_uint_eq(res.said_out.kept, 8);
    pybox_run_result_free(&res);
}
END_TEST

static const char *const tampers[] = {"memory", "pids", "readonly", "user", "capdrop"};
static const char *const fields[] = {"HostConfig.Memory", "HostConfig.PidsLimit", "HostConfig.ReadonlyRootfs",
                                     "Config.User", "HostConfig.CapDrop"};

START_TEST(tampered_box_never_starts)
{
    pybox_run_result_t res;
    ck_assert_int_eq(run_with(tampers[_i], &res), -1);
    ck_assert_int_eq(res.error.kind, PYBOX_ERR_POLICY);
    ck_assert_msg(strstr(res.error.msg, fields[_i]) != NULL, "the error does not name %s: %s", fields[_i],
                  res.error.msg);
    ck_assert(res.created);
    ck_assert(!res.verified);
    ck_assert(!res.started);
    ck_assert(res.removed);
    ck_assert(res.gone);
    ck_assert_uint_eq(res.said_out.total, 0);
    ck_assert_int_eq(res.end, PYBOX_END_PYBOX_ERROR);
    ck_assert_int_eq(res.exit_code, 125);
    pybox_run_result_free(&res);
}
END_TEST

Suite *itest_suite_verify(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("read-back");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, honest_policy_runs);
    tcase_add_loop_test(tc, tampered_box_never_starts, 0, (int)(sizeof tampers / sizeof *tampers));
    suite_add_tcase(s, tc);
    return s;
}
