/* SPDX-License-Identifier: MIT */
/* The read-back check against the real engine or the kernel: a box that differs from the
 * policy in a single setting is never started, and is removed. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
/* What each backend's verify names for that setting: the engine's read-back field, the
 * kernel file or /proc line of the native box. */
static const char *const fields[] = {"HostConfig.Memory", "HostConfig.PidsLimit", "HostConfig.ReadonlyRootfs",
                                     "Config.User", "HostConfig.CapDrop"};
static const char *const native_fields[] = {"memory.", "pids.max", "kernel rw,", "--program-uid=1000", "CapBnd"};

START_TEST(tampered_box_never_starts)
{
    pybox_run_result_t res;
    ck_assert_int_eq(run_with(tampers[_i], &res), -1);
    ck_assert_int_eq(res.error.kind, PYBOX_ERR_POLICY);
    const char *field = itest_native() ? native_fields[_i] : fields[_i];
    if (itest_native() && strcmp(tampers[_i], "user") == 0 && geteuid() != 0)
        field = "uid_map: spec 0 "; /* rootless: another id of the user's range, mapped as such */
    ck_assert_msg(strstr(res.error.msg, field) != NULL, "the error does not name %s: %s", field, res.error.msg);
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
    TCase *tc = itest_tcase(s, "read-back", 60, ITEST_TESTS(honest_policy_runs));
    tcase_add_loop_test(tc, tampered_box_never_starts, 0, (int)(sizeof tampers / sizeof *tampers));
    return s;
}
