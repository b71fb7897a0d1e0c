/* SPDX-License-Identifier: MIT */
/* If PyBox is killed mid-run, the box's own timer still ends it, with nobody calling stop;
 * `pybox cleanup` removes what is left after its expiry. On either backend. */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/util.h"
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
        long status;
        cJSON *reply = itest_engine_call(e, "POST", path, &status);
        ck_assert_int_eq(status, 200);
        ck_assert_int_eq((int)itest_num(reply, "StatusCode"), 137);
        cJSON_Delete(reply);

        snprintf(path, sizeof path, "/containers/%s/json", id);
        reply = itest_engine_call(e, "GET", path, &status);
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

/* The one box of this installation that is not in before (ids), or NULL. */
static cJSON *new_box(pybox_engine_t *e, const cJSON *before)
{
    cJSON *list = NULL;
    itest_list(e, "pybox.install", itest_state()->install_id, &list);
    cJSON *found = NULL;
    const cJSON *b;
    cJSON_ArrayForEach (b, list) {
        bool old = false;
        const cJSON *o;
        cJSON_ArrayForEach (o, before)
            old = old || strcmp(itest_str(o, "Id"), itest_str(b, "Id")) == 0;
        if (!old) {
            ck_assert_msg(found == NULL, "more than one new box");
            found = cJSON_Duplicate(b, 1);
        }
    }
    cJSON_Delete(list);
    return found;
}

/* The run note of this installation that is not in before (names of runs/), or "". */
static void new_note(char **before, size_t n_before, char *run_id, size_t len)
{
    run_id[0] = '\0';
    char dir[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(dir, sizeof dir, "%s/runs", itest_state()->dir), 0);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n != 32 + 5 || strcmp(de->d_name + 32, ".json") != 0)
            continue;
        bool old = false;
        for (size_t i = 0; i < n_before; i++)
            old = old || strcmp(before[i], de->d_name) == 0;
        if (!old) {
            ck_assert_msg(run_id[0] == '\0', "more than one new run");
            snprintf(run_id, len, "%.32s", de->d_name);
        }
    }
    closedir(d);
}

static size_t notes_now(char ***out)
{
    char dir[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(dir, sizeof dir, "%s/runs", itest_state()->dir), 0);
    *out = NULL;
    size_t n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        *out = realloc(*out, (n + 1) * sizeof **out);
        ck_assert_ptr_nonnull(*out);
        (*out)[n++] = strdup(de->d_name);
    }
    closedir(d);
    return n;
}

/* Natively: PyBox killed at the phase leaves its run note and what it made for cleanup
 * (the caller then sees the box end by itself, its init's timer at the latest, and
 * cleanup after the expiry leave nothing of the run). */
static void hook_kills_natively(const char *phase, const char *program, char *run_id, size_t run_id_len)
{
    char **before = NULL;
    size_t n_before = notes_now(&before);
    char env_kill[64];
    snprintf(env_kill, sizeof env_kill, "PYBOX_TEST_KILL_AT=%s", phase);
    const char *env[] = {env_kill, NULL};
    const char *args[] = {"exec", "--json", "--timeout", "1", NULL};
    itest_run_t r;
    itest_pybox_test(program, strlen(program), args, env, &r);
    ck_assert_msg(r.status == 128 + SIGKILL, "%s: pybox exited %d: %s", phase, r.status, r.err);
    ck_assert_msg(r.out_len == 0, "%s: a receipt was printed", phase);
    itest_run_free(&r);
    new_note(before, n_before, run_id, run_id_len);
    for (size_t i = 0; i < n_before; i++)
        free(before[i]);
    free(before);
    ck_assert_msg(run_id[0] != '\0', "%s: no run note left", phase);
    ck_assert_msg(itest_run_left(run_id) > 0, "%s: the killed run left nothing for cleanup", phase);
}

/* PYBOX_TEST_KILL_AT makes pybox exec SIGKILL itself at the named phase: the box is
 * left as that phase leaves it, and a box that ran ends by itself (no kill, no stop). */
START_TEST(test_hook_kills_pybox_at_each_phase)
{
    static const struct {
        const char *phase, *program, *state;
        int exit_code; /* of the box, once it ended by itself */
    } cases[] = {
        {"create", "import time\ntime.sleep(8)\n", "created", -1},
        {"start", "import time\ntime.sleep(8)\n", "exited", 121}, /* init: no hello came */
        {"run", "import time\ntime.sleep(8)\n", "exited", 137},   /* init: its timer */
        {"collect", "print('done')\n", "exited", 0},              /* held, then its timer */
    };
    if (itest_native()) {
        /* all four killed first, then their ends and one expiry waited for together */
        char runs[4][40];
        for (size_t i = 0; i < 4; i++)
            hook_kills_natively(cases[i].phase, cases[i].program, runs[i], sizeof runs[i]);
        for (size_t i = 0; i < 4; i++)
            ck_assert_msg(itest_box_wait_ended(runs[i], 10) == 0, "%s: the box still runs 10 s after PyBox was killed",
                          cases[i].phase);
        for (size_t i = 0; i < 4; i++)
            cleanup_until_gone(runs[i]);
        return;
    }
    pybox_engine_t *e = itest_engine();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *before = NULL;
        itest_list(e, "pybox.install", itest_state()->install_id, &before);
        char env_kill[64];
        snprintf(env_kill, sizeof env_kill, "PYBOX_TEST_KILL_AT=%s", cases[i].phase);
        const char *env[] = {env_kill, NULL};
        const char *args[] = {"exec", "--json", "--timeout", "1", NULL};
        double since = itest_wall();
        itest_run_t r;
        itest_pybox_test(cases[i].program, strlen(cases[i].program), args, env, &r);
        ck_assert_msg(r.status == 128 + SIGKILL, "%s: pybox exited %d: %s", cases[i].phase, r.status, r.err);
        ck_assert_msg(r.out_len == 0, "%s: a receipt was printed", cases[i].phase);
        itest_run_free(&r);
        cJSON *box = new_box(e, before);
        cJSON_Delete(before);
        ck_assert_msg(box != NULL, "%s: no box left", cases[i].phase);
        char id[80], run_id[40], path[200];
        snprintf(id, sizeof id, "%s", itest_str(box, "Id"));
        const cJSON *labels = itest_get(box, "Labels");
        const cJSON *rl = cJSON_GetObjectItemCaseSensitive(labels, "pybox.run");
        ck_assert(cJSON_IsString(rl));
        snprintf(run_id, sizeof run_id, "%s", rl->valuestring);
        cJSON_Delete(box);
        long status = 0;
        cJSON *reply = NULL;
        pybox_error_t err = {0};
        if (cases[i].exit_code >= 0) {
            snprintf(path, sizeof path, "/containers/%s/wait", id);
            ck_assert_msg(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
            ck_assert_int_eq(status, 200);
            cJSON_Delete(reply);
        }
        snprintf(path, sizeof path, "/containers/%s/json", id);
        ck_assert(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err) == 0);
        ck_assert_msg(strcmp(itest_str(reply, "State.Status"), cases[i].state) == 0, "%s: the box is %s",
                      cases[i].phase, itest_str(reply, "State.Status"));
        if (cases[i].exit_code >= 0)
            ck_assert_msg((int)itest_num(reply, "State.ExitCode") == cases[i].exit_code, "%s: the box exited %d",
                          cases[i].phase, (int)itest_num(reply, "State.ExitCode"));
        cJSON_Delete(reply);
        cJSON *events = itest_events(e, id, (long)since - 1, (long)time(NULL) + 1);
        const cJSON *ev;
        cJSON_ArrayForEach (ev, events) {
            const char *action = itest_str(ev, "Action");
            ck_assert_msg(strcmp(action, "kill") != 0 && strcmp(action, "stop") != 0, "%s: someone sent %s",
                          cases[i].phase, action);
        }
        cJSON_Delete(events);
        /* The run's note is left for cleanup. */
        char note[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(note, sizeof note, "%s/runs/%s.json", itest_state()->dir, run_id), 0);
        ck_assert_msg(access(note, F_OK) == 0, "%s: no run note left", cases[i].phase);
        ck_assert_int_eq(itest_remove_run(e, run_id), 1);
        unlink(note);
    }
    pybox_engine_free(e);
}
END_TEST

/* Any other value is refused before anything is made. */
START_TEST(test_hook_unknown_phase_refused)
{
    const char *env[] = {"PYBOX_TEST_KILL_AT=verify", NULL};
    const char *args[] = {"exec", "--json", NULL};
    int before = itest_install_left(itest_state()->install_id, itest_state()->dir);
    itest_run_t r;
    itest_pybox_test("print(1)\n", 9, args, env, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "PYBOX_TEST_KILL_AT"), "%s", r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, "create, start, run or collect"), "%s", r.err);
    itest_run_free(&r);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), before);
}
END_TEST

Suite *itest_suite_crash(void)
{
    Suite *s = suite_create("crash");
    itest_tcase(s, "pybox killed", 60,
                ITEST_TESTS(box_timer_ends_the_box_after_pybox_is_killed, test_hook_kills_pybox_at_each_phase,
                            test_hook_unknown_phase_refused));
    return s;
}
