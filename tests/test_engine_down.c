/* SPDX-License-Identifier: MIT */
/* The engine stops in the middle of a run: PyBox says what happened (exit 125), and once
 * the engine is back, cleanup leaves nothing of the run behind. This suite stops and
 * restarts the engine, so it runs last. */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

static pid_t engine_pid(void)
{
    FILE *f = fopen("/var/run/docker.pid", "re");
    long pid = -1;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = -1;
        fclose(f);
    }
    return (pid_t)pid;
}

START_TEST(engine_stops_mid_run)
{
    pid_t dockerd = engine_pid();
    ck_assert_msg(dockerd > 0, "no engine pid file: this test stops and restarts an engine PyBox started");
    double since = itest_wall();
    const char *args[] = {"exec", "--json", "--timeout", "20", NULL};
    const char *prog = "import time\ntime.sleep(15)\n";
    itest_job_t job;
    itest_start(prog, strlen(prog), args, NULL, &job);
    char id[65];
    ck_assert(itest_wait_start(since, id, 30) == 0);
    pybox_engine_t *e = itest_engine();
    ck_assert(itest_wait_process(e, id, "python3", 30) == 0);
    pybox_engine_free(e);

    /* Stop the engine the way an operator would, and wait until it is gone. */
    ck_assert_int_eq(kill(dockerd, SIGTERM), 0);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", (int)dockerd);
    double until = itest_wall() + 90;
    while (access(proc, F_OK) == 0 && itest_wall() < until) {
        struct timespec ts = {0, 50 * 1000 * 1000}; /* polling for the engine's exit */
        nanosleep(&ts, NULL);
    }
    ck_assert_msg(access(proc, F_OK) != 0, "the engine did not stop");

    itest_run_t r;
    itest_finish(&job, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "stopped from outside PyBox") ||
                      itest_contains(r.err, r.err_len, "the engine failed during the run"),
                  "pybox did not say what happened: %s", r.err);
    ck_assert_ptr_nonnull(r.receipt);
    char run_id[33];
    snprintf(run_id, sizeof run_id, "%s", itest_str(r.receipt, "run_id"));
    ck_assert_int_eq((int)strlen(run_id), 32);
    itest_run_free(&r);

    /* The engine comes back; after expiry, cleanup leaves nothing of the run. */
    ck_assert_int_eq(system("scripts/engine-start.sh"), 0);
    e = itest_engine();
    cJSON *list = NULL;
    if (itest_list(e, "pybox.run", run_id, &list) == 1) {
        const cJSON *l =
            cJSON_GetObjectItemCaseSensitive(itest_get(cJSON_GetArrayItem(list, 0), "Labels"), "pybox.expires");
        long ex = strtol(l->valuestring, NULL, 10);
        while (itest_wall() < (double)ex + 1) {
            struct timespec ts = {0, 100 * 1000 * 1000}; /* waiting for the clock itself: expiry */
            nanosleep(&ts, NULL);
        }
    }
    cJSON_Delete(list);
    const char *cargs[] = {"cleanup", "--json", NULL};
    itest_pybox("", 0, cargs, NULL, &r);
    ck_assert_msg(r.status == 0, "cleanup: %s", r.err);
    itest_run_free(&r);
    ck_assert_int_eq(itest_list(e, "pybox.run", run_id, NULL), 0);
    char note[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(note, sizeof note, "%s/runs/%s.json", itest_state()->dir, run_id), 0);
    ck_assert_msg(access(note, F_OK) != 0, "the run note is still there");
    pybox_engine_free(e);
}
END_TEST

Suite *itest_suite_engine_down(void)
{
    Suite *s = suite_create("engine down");
    itest_tcase(s, "engine stops", 240, ITEST_TESTS(engine_stops_mid_run));
    return s;
}
