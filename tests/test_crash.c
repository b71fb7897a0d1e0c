/* SPDX-License-Identifier: MIT */
/* If PyBox is killed mid-run, the box's own timer still ends it, with nobody calling stop;
 * `pybox cleanup` removes what is left after its expiry. On either backend. */
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

/* `pybox cleanup` until nothing of the run is left (its expiry is a wall-clock rule: the
 * box's timer plus the tests' one-second margin), bounded. */
static void cleanup_until_gone(const char *run_id)
{
    double end = itest_wall() + 20;
    while (itest_run_left(run_id) > 0 && itest_wall() < end) {
        const char *args[] = {"cleanup", NULL};
        itest_run_t r;
        itest_pybox("", 0, args, NULL, &r);
        ck_assert_msg(r.status == 0, "pybox cleanup: exit %d: %s", r.status, r.err ? r.err : "");
        itest_run_free(&r);
        if (itest_run_left(run_id) == 0)
            break;
        struct timespec ts = {0, 250 * 1000 * 1000}; /* waiting for the expiry to pass */
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(itest_run_left(run_id), 0);
}

START_TEST(box_timer_ends_the_box_after_pybox_is_killed)
{
    double since = itest_wall();
    const char *args[] = {"exec", "--json", NULL}; /* default deadline 2 s, box timer 3 s */
    pid_t pid = itest_spawn("import time\ntime.sleep(8)\n", args);
    char id[65];
    /* Wait until the program itself runs (the box's process list shows python3), so
     * PyBox is killed mid-run and not before it handed the program over. */
    ck_assert_msg(itest_box_wait_running(since, id, "python3", 30) == 0, "the program never ran");
    double running = itest_wall();
    /* Now kill PyBox as hard as possible. */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));

    char run_id[65];
    if (itest_native()) {
        /* Nobody is left to stop it: the box's init ends it at its own timer (3 s from
         * its start), long before the program's 8 s sleep would. */
        ck_assert_msg(itest_box_wait_ended(id, 10) == 0, "the box still runs 10 s after PyBox was killed");
        double ended = itest_wall() - since;
        ck_assert_msg(ended < 6.0, "the box ended %.2f s after the run began; its timer is 3 s", ended);
        ck_assert_msg(itest_wall() - running < 5.0, "the box ran on for %.2f s", itest_wall() - running);
        snprintf(run_id, sizeof run_id, "%s", id);
    } else {
        pybox_engine_t *e = itest_engine();
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
        pybox_engine_free(e);
    }
    /* What the killed PyBox left is this installation's to remove, after its expiry. */
    ck_assert_int_eq(itest_run_left(run_id), 1);
    cleanup_until_gone(run_id);
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
