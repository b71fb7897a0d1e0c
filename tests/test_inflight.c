/* SPDX-License-Identifier: MIT */
/* What a program leaves in flight: descriptors sent through unix sockets (SCM_RIGHTS)
 * that no process can receive any more, which the kernel keeps until its collector of
 * such cycles runs. The box's end is its last process's, whatever they hold. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "itest.h"
#include "suites.h"

/* The program's own sockets in a cycle nothing else refers to: two socket pairs, the
 * descriptors given in flight through the first, then each socket of both pairs through
 * the other, as the red team's program did. PRELUDE defines send(); the program then
 * names what goes in flight. */
#define PRELUDE                                                                                                        \
    "import array, os, socket\n"                                                                                       \
    "def send(s, fds):\n"                                                                                              \
    "    s.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds))])\n"                         \
    "def cycle(fds):\n"                                                                                                \
    "    a, b = socket.socketpair()\n"                                                                                 \
    "    c, d = socket.socketpair()\n"                                                                                 \
    "    send(a, fds)\n"                                                                                               \
    "    send(c, [a.fileno(), b.fileno()])\n"                                                                          \
    "    send(a, [c.fileno(), d.fileno()])\n"

/* stdout and stderr's write ends in flight: the box's pipes outlive its last process.
 * The run ends at the box's end (its init reaped), with what the program said and its
 * own exit, on both backends; before, a native run waited for the pipes' end, killed
 * the box and failed after 32 s, blaming the engine. */
START_TEST(output_held_in_flight_ends_with_the_box)
{
    itest_run_t r;
    itest_exec(PRELUDE "cycle([1, 2])\nprint('bye', flush=True)\n", (const char *[]){"--timeout", "10", NULL}, &r);
    const cJSON *j = r.receipt;
    ck_assert_msg(j != NULL, "no receipt: %.*s", (int)r.err_len, r.err);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, itest_str(j, "error.message"));
    ck_assert_str_eq(itest_str(j, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_int_eq((int)itest_num(j, "seen.backend_record.exit_code"), 0);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.exit_code"), 0);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "bye\n");
    ck_assert_int_eq(itest_bool(j, "seen.box_killed_through_backend"), 0);
    ck_assert_ptr_null(itest_get(j, "error"));
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    ck_assert_int_eq(itest_run_left(itest_str(j, "run_id")), 0);
    itest_run_free(&r);
}
END_TEST

Suite *itest_suite_inflight(void)
{
    Suite *s = suite_create("inflight");
    TCase *t = tcase_create("in flight");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, output_held_in_flight_ends_with_the_box);
    suite_add_tcase(s, t);
    return s;
}
