/* SPDX-License-Identifier: MIT */
/* The unit test runner: every suite under one Check runner, in fork mode (a crash in
 * one test fails that test, not the run), each test with a timeout. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "../pybox/util.h"
#include "suites.h"

void unit_rm_tree(const char *dir)
{
    if (dir[0] != '\0')
        (void)pybox_remove_tree_at(AT_FDCWD, dir);
}

int main(void)
{
    SRunner *sr = srunner_create(suite_util());
    srunner_add_suite(sr, suite_escape());
    srunner_add_suite(sr, suite_stream());
    srunner_add_suite(sr, suite_policy());
    srunner_add_suite(sr, suite_receipt());
    srunner_add_suite(sr, suite_cli());
    srunner_add_suite(sr, suite_engine());
    srunner_add_suite(sr, suite_state());
    srunner_add_suite(sr, suite_watch());
    srunner_add_suite(sr, suite_files());
    srunner_add_suite(sr, suite_toml());
    srunner_add_suite(sr, suite_wheels());
    srunner_add_suite(sr, suite_mcp());
    srunner_add_suite(sr, suite_mcp_access());
    srunner_add_suite(sr, suite_evidence());
    srunner_add_suite(sr, suite_uid());
    srunner_add_suite(sr, suite_run());
    srunner_add_suite(sr, suite_native());
    srunner_add_suite(sr, suite_jcs());
    srunner_add_suite(sr, suite_sign());
    srunner_add_suite(sr, suite_chart());
    srunner_add_suite(sr, suite_site());
    srunner_add_suite(sr, suite_image());
    srunner_add_suite(sr, suite_rootless());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
