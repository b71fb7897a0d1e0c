/* SPDX-License-Identifier: MIT */
/* The integration test runner (needs a running engine and a set-up installation:
 * `make check` does both first). */
#include <check.h>
#include <stdlib.h>

#include "suites.h"

int main(void)
{
    SRunner *sr = srunner_create(itest_suite_exec());
    srunner_add_suite(sr, itest_suite_refuse());
    srunner_add_suite(sr, itest_suite_isolation());
    srunner_add_suite(sr, itest_suite_verify());
    srunner_add_suite(sr, itest_suite_crash());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
