/* SPDX-License-Identifier: MIT */
/* If PyBox is killed mid-run, the box's own timer still ends it, with nobody calling stop. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "suites.h"

/* Seconds between two of the engine's RFC 3339 timestamps (same day is enough here). */
static double span(const char *a, const char *b)
{
    int h1, m1, h2, m2;
    double s1, s2;
    ck_assert_int_eq(sscanf(strchr(a, 'T') + 1, "%d:%d:%lf", &h1, &m1, &s1), 3);
    ck_assert_int_eq(sscanf(strchr(b, 'T') + 1, "%d:%d:%lf", &h2, &m2, &s2), 3);
    return (h2 - h1) * 3600.0 + (m2 - m1) * 60.0 + (s2 - s1);
}

START_TEST(box_timer_ends_the_box_after_pybox_is_killed)
{
    double since = itest_wall();
    const char *args[] = {"exec", "--json", NULL}; /* default deadline 2 s, box timer 3 s */
    pid_t pid = itest_spawn("import time\ntime.sleep(8)\n", args);
    char id[65];
    ck_assert_msg(itest_wait_start(since, id, 30) == 0, "the box never started");
    /* Wait until the program itself runs (the box's process list shows python3), so
     * PyBox is killed mid-run and not before it handed the program over. */
    pybox_engine_t *e = itest_engine();
    ck_assert_msg(itest_wait_process(e, id, "python3", 30) == 0, "the program never ran");
    /* Now kill PyBox as hard as possible. */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));

    char path[200];
    snprintf(path, sizeof path, "/containers/%s/wait", id);
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq((int)itest_num(reply, "StatusCode"), 137);
    cJSON_Delete(reply);

    snprintf(path, sizeof path, "/containers/%s/json", id);
    ck_assert(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err) == 0);
    double ran = span(itest_str(reply, "State.StartedAt"), itest_str(reply, "State.FinishedAt"));
    ck_assert_msg(ran > 2.5 && ran < 5.0, "the box ran %.2f s; its timer is 3 s", ran);
    char run_id[64];
    const cJSON *labels = itest_get(reply, "Config.Labels");
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(labels, "pybox.run");
    ck_assert(cJSON_IsString(rl));
    snprintf(run_id, sizeof run_id, "%s", rl->valuestring);
    cJSON_Delete(reply);

    /* Nobody sent a kill or a stop: the engine's own event log says so. */
    cJSON *events = itest_events(e, id, (long)since - 1, (long)time(NULL) + 1);
    const cJSON *ev;
    int died = 0;
    cJSON_ArrayForEach (ev, events) {
        const char *action = itest_str(ev, "Action");
        ck_assert_ptr_nonnull(action);
        ck_assert_msg(strcmp(action, "kill") != 0 && strcmp(action, "stop") != 0, "someone sent %s", action);
        died += strcmp(action, "die") == 0;
    }
    ck_assert_int_eq(died, 1);
    cJSON_Delete(events);

    ck_assert_int_eq(itest_remove_run(e, run_id), 1);
    ck_assert_int_eq(itest_box_status(e, id), 404);
    pybox_engine_free(e);
}
END_TEST

Suite *itest_suite_crash(void)
{
    Suite *s = suite_create("crash");
    TCase *tc = tcase_create("pybox killed");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, box_timer_ends_the_box_after_pybox_is_killed);
    suite_add_tcase(s, tc);
    return s;
}
