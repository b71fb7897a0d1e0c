/* SPDX-License-Identifier: MIT */
/* Per-box users: two live boxes never share a host uid, so one box that holds every
 * per-user kernel quota it can reach leaves another box's ordinary operations working;
 * with only that protection removed (both boxes as one shared uid) it breaks them. */
#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/hooks.h"
#include "../pybox/native/rootless.h"
#include "../pybox/policy.h"
#include "../pybox/run.h"
#include "../pybox/uid.h"
#include "../pybox/util.h"
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
    ck_assert_msg(said && strstr(said, "BLOCKED: every operation worked"), "the victim box (%s, exit %d): %s",
                  itest_str(v.receipt, "status"), v.status, said);
    double vuid = itest_num(v.receipt, "asked.policy.program_uid");

    /* The holder is stopped from outside; PyBox removes its box. */
    ck_assert_int_eq(kill(job.pid, SIGTERM), 0);
    itest_run_t h;
    itest_finish(&job, &h);
    ck_assert_msg(h.receipt != NULL, "no receipt of the holder: %s", h.err);
    const char *hsaid = itest_str(h.receipt, "said.stdout.text");
    /* all of the host's per-user instances (128), or a rootless box's share of its user's */
    char held[64];
    snprintf(held, sizeof held, "'inotify_instances': %d", geteuid() == 0 ? 128 : PYBOX_ROOTLESS_INOTIFY_INSTANCES);
    ck_assert_msg(hsaid && strstr(hsaid, held), "the holder did not hold %s: %s", held, hsaid);
    double huid = itest_num(h.receipt, "asked.policy.program_uid");
    ck_assert_msg(vuid != huid, "both boxes ran as uid %.0f", vuid);
    pybox_uid_range_t rg;
    char leases[PATH_MAX];
    pybox_error_t rerr = {0};
    ck_assert_msg(pybox_uid_machine(&rg, leases, sizeof leases, &rerr) == 0, "%s", rerr.msg);
    ck_assert(vuid >= rg.base && vuid < (double)rg.base + rg.count);
    ck_assert(huid >= rg.base && huid < (double)rg.base + rg.count);
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
    ck_assert_msg(strstr(said, "ESCAPED: the other box's quota broke"), "the victim (end %d, exit %d: %s): %s",
                  (int)res.end, res.exit_code, res.error.msg, said);
    /* Each quota the holder took is one the victim then lacked. */
    ck_assert_msg(strstr(said, "\"inotify_init\": \"FAILED"), "%s", said);
    ck_assert_msg(strstr(said, "\"mq_open\": \"FAILED"), "%s", said);
    /* Rootless, the relaxation takes away each box's share of the user's quotas; their
     * ids stay their own (per-uid counts: descriptors in flight, pending signals). */
    bool rootless = geteuid() != 0;
    ck_assert_msg(rootless || strstr(said, "\"pass_fd\": \"FAILED"), "%s", said);
    ck_assert_msg(rootless || strstr(said, "\"sigqueue\": \"FAILED"), "%s", said);
    if (!rootless)
        ck_assert_uint_eq(pybox_policy_program_uid(&res.policy), PYBOX_SHARED_UID);
    pybox_run_result_free(&res);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    if (!rootless)
        ck_assert_uint_eq(pybox_policy_program_uid(&h.res.policy), PYBOX_SHARED_UID);
    pybox_run_result_free(&h.res);
}
END_TEST

/* ---- the machine's folder of leases ---- */

/* A uid of the range, from its top down, that no lease file names and the host does not
 * use: the test's own. */
static pybox_uid_range_t machine(char *dir, size_t len)
{
    pybox_uid_range_t r;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_uid_machine(&r, dir, len, &err) == 0, "%s", err.msg);
    return r;
}

static unsigned free_uid(unsigned below)
{
    char dir[PATH_MAX];
    pybox_uid_range_t rg = machine(dir, sizeof dir);
    for (unsigned u = below - 1; u > rg.base; u--) {
        char path[PATH_MAX + 16];
        ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", rg.dir, u), 0);
        struct stat sb;
        if (lstat(path, &sb) < 0 && getpwuid(u) == NULL && getgrgid(u) == NULL)
            return u;
    }
    ck_abort_msg("no uid of the range is free");
    return 0;
}

static void lease_file(unsigned uid, const char *text, char *path, size_t len)
{
    char dir[PATH_MAX];
    pybox_uid_range_t rg = machine(dir, sizeof dir);
    ck_assert_int_eq(pybox_fmt(path, len, "%s/%u", rg.dir, uid), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    ck_assert_msg(fd >= 0, "%s", path);
    ck_assert_int_eq(pybox_write_all(fd, text, strlen(text)), 0);
    close(fd);
}

/* Expired leases that no live run holds are swept by pybox cleanup and by every run's
 * housekeeping (18 once sat in /run/pybox/uids for good); a held one (its lock taken,
 * as a live run's is) and one not expired (a box that may still live) stay. */
START_TEST(expired_leases_are_swept_held_ones_stay)
{
    /* a run first: the machine's folder exists, whatever ran before */
    itest_run_t r;
    itest_exec("print(1)\n", NULL, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    itest_run_free(&r);
    long now = (long)itest_wall();
    char expired[64], held[64], kept[64], text[96];
    char dir[PATH_MAX];
    pybox_uid_range_t rg = machine(dir, sizeof dir);
    unsigned u1 = free_uid(rg.base + rg.count), u2 = free_uid(u1), u3 = free_uid(u2);
    snprintf(text, sizeof text, "%032d %ld\n", 1, now - 60);
    lease_file(u1, text, expired, sizeof expired);
    lease_file(u2, text, held, sizeof held);
    snprintf(text, sizeof text, "%032d %ld\n", 3, now + 3600);
    lease_file(u3, text, kept, sizeof kept);
    int hfd = open(held, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(hfd, 0);
    ck_assert_int_eq(flock(hfd, LOCK_EX | LOCK_NB), 0);

    const char *args[] = {"cleanup", "--json", NULL};
    itest_pybox("", 0, args, NULL, &r);
    ck_assert_msg(r.status == 0 && r.receipt, "pybox cleanup: exit %d: %s", r.status, r.err);
    ck_assert_msg(itest_num(r.receipt, "leases_removed") >= 1, "%s", r.out);
    itest_run_free(&r);
    ck_assert_msg(access(expired, F_OK) < 0, "an expired lease no run held is still there: %s", expired);
    ck_assert_msg(access(held, F_OK) == 0, "a held lease was removed");
    ck_assert_msg(access(kept, F_OK) == 0, "a lease not expired was removed");

    /* a run's own housekeeping does the same */
    snprintf(text, sizeof text, "%032d %ld\n", 2, now - 60);
    lease_file(u1, text, expired, sizeof expired);
    itest_exec("print(2)\n", NULL, &r);
    ck_assert_int_eq(r.status, 0);
    itest_run_free(&r);
    ck_assert_msg(access(expired, F_OK) < 0, "the run's housekeeping left an expired lease: %s", expired);
    ck_assert(access(held, F_OK) == 0 && access(kept, F_OK) == 0);

    ck_assert_int_eq(unlink(held), 0); /* while still locked, as a release does */
    close(hfd);
    ck_assert_int_eq(unlink(kept), 0);
}
END_TEST

/* The run folder (/run/pybox; the test build's hook points it elsewhere) is checked
 * each time: one that others may write, another user's, or a link is refused before any
 * box, saying which and why; a good one is used, its leases' folder made 0700. */
START_TEST(a_run_folder_of_the_wrong_owner_or_mode_is_refused)
{
    if (itest_needs_root("a_run_folder_of_the_wrong_owner_or_mode_is_refused"))
        return;
    char tmp[] = "/tmp/pybox-itest-run-XXXXXX", run[64], uids[80], entry[128];
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    ck_assert_int_eq(pybox_fmt(run, sizeof run, "%s/run", tmp), 0);
    ck_assert_int_eq(pybox_fmt(uids, sizeof uids, "%s/%s", run, PYBOX_UID_LEASES_IN), 0);
    ck_assert_int_eq(pybox_fmt(entry, sizeof entry, "%s=%s", pybox_hook_name(PYBOX_HOOK_RUN_DIR), run), 0);
    const char *env[] = {entry, NULL};
    const char *args[] = {"exec", "--json", NULL};
    static const struct {
        mode_t mode;
        uid_t owner;
        bool link;
        const char *says;
    } bad[] = {{0777, 0, false, "mode 0777"},
               {0757, 0, false, "mode 0757"},
               {0700, 65534, false, "owner 65534"},
               {0700, 0, true, "symbolic link"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char real[80];
        ck_assert_int_eq(pybox_fmt(real, sizeof real, "%s/real", tmp), 0);
        ck_assert_int_eq(mkdir(bad[i].link ? real : run, bad[i].mode), 0);
        ck_assert_int_eq(chmod(bad[i].link ? real : run, bad[i].mode), 0); /* whatever the umask */
        if (bad[i].link)
            ck_assert_int_eq(symlink(real, run), 0);
        else
            ck_assert_int_eq(chown(run, bad[i].owner, bad[i].owner), 0);
        int before = itest_install_left(itest_state()->install_id, itest_state()->dir);
        itest_run_t r;
        itest_pybox_test("print(1)\n", 9, args, env, &r);
        ck_assert_msg(r.status == 125, "%s: exit %d: %s", bad[i].says, r.status, r.err);
        ck_assert_msg(itest_contains(r.err, r.err_len, run) && itest_contains(r.err, r.err_len, bad[i].says), "%s: %s",
                      bad[i].says, r.err);
        ck_assert_str_eq(itest_str(r.receipt, "status"), "PYBOX_ERROR");
        ck_assert_int_eq(itest_bool(r.receipt, "seen.box.created"), 0);
        ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), before);
        itest_run_free(&r);
        ck_assert_msg(access(uids, F_OK) < 0, "%s: a folder of leases was made", bad[i].says);
        if (bad[i].link) {
            ck_assert_int_eq(unlink(run), 0);
            ck_assert_int_eq(rmdir(real), 0);
        } else {
            ck_assert_int_eq(rmdir(run), 0);
        }
    }
    /* a good one: used, and its leases' folder is 0700 and the run's lease released */
    ck_assert_int_eq(mkdir(run, 0700), 0);
    itest_run_t r;
    itest_pybox_test("print(1)\n", 9, args, env, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    itest_run_free(&r);
    struct stat sb;
    ck_assert_int_eq(stat(uids, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0700);
    ck_assert_int_eq(rmdir(uids), 0); /* empty: the lease went with the box */
    ck_assert_int_eq(rmdir(run), 0);
    ck_assert_int_eq(rmdir(tmp), 0);
}
END_TEST

Suite *itest_suite_uids(void)
{
    Suite *s = suite_create("uids");
    itest_tcase(
        s, "per-box users", 180,
        ITEST_TESTS(a_box_holding_every_quota_leaves_another_box_working, with_one_shared_uid_a_box_breaks_another));
    itest_tcase(
        s, "the machine's folder", 60,
        ITEST_TESTS(expired_leases_are_swept_held_ones_stay, a_run_folder_of_the_wrong_owner_or_mode_is_refused));
    return s;
}
