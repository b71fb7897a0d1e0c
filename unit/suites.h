/* SPDX-License-Identifier: MIT */
/* The unit test suites, one per module (unit/test_<module>.c). */
#ifndef PYBOX_UNIT_SUITES_H
#define PYBOX_UNIT_SUITES_H

#include <check.h>

/* Remove a test's folder and everything in it, depth first, following no link ("" is
 * nothing). */
void unit_rm_tree(const char *dir);

Suite *suite_util(void);
Suite *suite_escape(void);
Suite *suite_stream(void);
Suite *suite_policy(void);
Suite *suite_receipt(void);
Suite *suite_cli(void);
Suite *suite_engine(void);
Suite *suite_state(void);
Suite *suite_watch(void);
Suite *suite_files(void);
Suite *suite_toml(void);
Suite *suite_wheels(void);
Suite *suite_mcp(void);
Suite *suite_mcp_access(void);
Suite *suite_evidence(void);
Suite *suite_uid(void);
Suite *suite_run(void);
Suite *suite_native(void);
Suite *suite_jcs(void);
Suite *suite_sign(void);
Suite *suite_chart(void);
Suite *suite_site(void);
Suite *suite_image(void);
Suite *suite_rootless(void);

#endif
