/* SPDX-License-Identifier: MIT */
/* Per-box users: two live boxes never share a host uid, so one box that holds every
 * per-user kernel quota it can reach leaves another box's ordinary operations working;
 * with only that protection removed (both boxes as one shared uid) it breaks them. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/policy.h"
#include "../pybox/run.h"
#include "../pybox/uid.h"
#include "itest.h"
#include "suites.h"

static char *probe(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/campaign/probes/%s", PYBOX_SOURCE, name);
    FILE *f = fopen(path, "re");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char text[3][16384];
    static int slot;
    char *t = text[slot++ % 3];
    size_t n = fread(t, 1, sizeof text[0] - 1, f);
    t[n] = '\0';
    fclose(f);
    return t;
}

/* The holder is running and holds its quotas: its marker child is in the box. */
static void wait_held(double since, char *id)
{
    ck_assert_msg(itest_box_wait_running(since, id, "quota-held", 60) == 0, "the box never held its quotas");
}

START_TEST(a_box_holding_every_quota_leaves_another_box_working)
{
    double since = itest_wall();
    const char *hargs[] = {"exec", "--json", "--timeout", "60", NULL};
    const char *hold = probe("quota_hold.py");
    itest_job_t job;
    itest_start(hold, strlen(hold), hargs, NULL, &job);
    char id[65];
    wait_held(since, id);

    const char *vargs[] = {"--timeout", "20", NULL};
    itest_run_t v;
    itest_exec(probe("quota_victim.py"), vargs, &v);
    ck_assert_msg(v.receipt != NULL, "no receipt: %s", v.err);
    const char *said = itest_str(v.receipt, "said.stdout.text");
    ck_assert_msg(said && strstr(said, "BLOCKED: every operation worked"), "the victim box: %s", said);
    double vuid = itest_num(v.receipt, "asked.policy.program_uid");

    /* The holder is stopped from outside; PyBox removes its box. */
    ck_assert_int_eq(kill(job.pid, SIGTERM), 0);
    itest_run_t h;
    itest_finish(&job, &h);
    ck_assert_msg(h.receipt != NULL, "no receipt of the holder: %s", h.err);
    const char *hsaid = itest_str(h.receipt, "said.stdout.text");
    ck_assert_msg(hsaid && strstr(hsaid, "'inotify_instances': 128"), "the holder did not hold: %s", hsaid);
    double huid = itest_num(h.receipt, "asked.policy.program_uid");
    ck_assert_msg(vuid != huid, "both boxes ran as uid %.0f", vuid);
    ck_assert(vuid >= PYBOX_UID_BASE && vuid < PYBOX_UID_BASE + PYBOX_UID_COUNT);
    ck_assert(huid >= PYBOX_UID_BASE && huid < PYBOX_UID_BASE + PYBOX_UID_COUNT);
    ck_assert_int_eq(itest_bool(h.receipt, "seen.box.confirmed_gone"), 1);
    itest_run_free(&v);
    itest_run_free(&h);
}
END_TEST

static void shared_uid(pybox_policy_t *p, void *arg)
{
    int64_t timeout = *(int64_t *)arg;
    p->relax |= PYBOX_RELAX_SHARED_UID;
    p->timeout_ms = timeout;
    p->box_timer_ms = timeout + PYBOX_BOX_TIMER_MARGIN_MS;
}

typedef struct {
    pybox_run_result_t res;
} holder_t;

static void *run_holder(void *arg)
{
    holder_t *h = arg;
    int64_t timeout = 15000;
    itest_lib_run(probe("quota_hold.py"), shared_uid, &timeout, &h->res);
    return NULL;
}

START_TEST(with_one_shared_uid_a_box_breaks_another)
{
    double since = itest_wall();
    static holder_t h;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_holder, &h), 0);
    char id[65];
    wait_held(since, id);
    pybox_run_result_t res;
    int64_t timeout = 10000;
    ck_assert_int_eq(itest_lib_run(probe("quota_victim.py"), shared_uid, &timeout, &res), 0);
    const char *said = itest_said(&res);
    ck_assert_msg(strstr(said, "ESCAPED: the other box's quota broke"), "the victim: %s", said);
    /* Each quota the holder took is one the victim then lacked. */
    ck_assert_msg(strstr(said, "\"inotify_init\": \"FAILED"), "%s", said);
    ck_assert_msg(strstr(said, "\"mq_open\": \"FAILED"), "%s", said);
    ck_assert_msg(strstr(said, "\"pass_fd\": \"FAILED"), "%s", said);
    ck_assert_msg(strstr(said, "\"sigqueue\": \"FAILED"), "%s", said);
    ck_assert_uint_eq(pybox_policy_program_uid(&res.policy), PYBOX_SHARED_UID);
    pybox_run_result_free(&res);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(pybox_policy_program_uid(&h.res.policy), PYBOX_SHARED_UID);
    pybox_run_result_free(&h.res);
}
END_TEST

Suite *itest_suite_uids(void)
{
    Suite *s = suite_create("uids");
    itest_tcase(
        s, "per-box users", 180,
        ITEST_TESTS(a_box_holding_every_quota_leaves_another_box_working, with_one_shared_uid_a_box_breaks_another));
    return s;
}
