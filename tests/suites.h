/* SPDX-License-Identifier: MIT */
/* Integration suites: each runs the real pybox against the real engine. */
#ifndef PYBOX_ITEST_SUITES_H
#define PYBOX_ITEST_SUITES_H

#include <check.h>

Suite *itest_suite_exec(void);
Suite *itest_suite_inflight(void);
Suite *itest_suite_refuse(void);
Suite *itest_suite_isolation(void);
Suite *itest_suite_verify(void);
Suite *itest_suite_crash(void);
Suite *itest_suite_kernel(void);
Suite *itest_suite_lifecycle(void);
Suite *itest_suite_files(void);
Suite *itest_suite_images(void);
Suite *itest_suite_mcp(void);
Suite *itest_suite_session(void);
Suite *itest_suite_uids(void);
Suite *itest_suite_native(void);
Suite *itest_suite_sign(void);
Suite *itest_suite_chart(void);
Suite *itest_suite_engine_down(void);
Suite *itest_suite_systemd(void);
Suite *itest_suite_rootless(void);

#endif
