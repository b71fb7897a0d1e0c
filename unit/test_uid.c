/* SPDX-License-Identifier: MIT */
/* Unit tests for per-box users: leases in a folder of the test's own. */
#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/hooks.h"
#include "../pybox/uid.h"
#include "../pybox/util.h"
#include "suites.h"

/* A range no host user has. */
#define BASE 3000000000u

static char dir[64];

static void setup(void)
{
    char tmpl[] = "/tmp/pybox-uid-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    ck_assert_int_eq(pybox_fmt(dir, sizeof dir, "%s/uids", tmpl), 0);
}

static void teardown(void)
{
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        unit_rm_tree(dir);
    }
}

static void write_lease(uid_t uid, const char *text)
{
    char path[128];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, (unsigned)uid), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pybox_write_all(fd, text, strlen(text)), 0);
    close(fd);
}

static void read_lease(uid_t uid, char *out, size_t len)
{
    char path[128];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, (unsigned)uid), 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, out, len - 1);
    ck_assert_int_ge(n, 0);
    out[n] = '\0';
    close(fd);
}

START_TEST(live_leases_never_share_a_uid)
{
    pybox_error_t err = {0};
    pybox_uid_lease_t l[4];
    int64_t exp = pybox_wall_s() + 100;
    for (int i = 0; i < 4; i++)
        ck_assert_msg(pybox_uid_lease_take_in(dir, BASE, 4, "run", exp, &l[i], &err) == 0, "%s", err.msg);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_ge(l[i].uid, BASE);
        ck_assert_uint_lt(l[i].uid, BASE + 4);
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne(l[i].uid, l[j].uid);
    }
    /* The range is full while all four live. */
    pybox_uid_lease_t more;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 4, "run", exp, &more, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "no free per-box user"));
    /* A released one is free at once, and is the one leased next. */
    uid_t freed = l[2].uid;
    pybox_uid_lease_release(&l[2]);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 4, "next", exp, &more, &err), 0);
    ck_assert_uint_eq(more.uid, freed);
    char text[128];
    read_lease(freed, text, sizeof text);
    char want[64];
    snprintf(want, sizeof want, "next %lld\n", (long long)exp);
    ck_assert_str_eq(text, want);
    pybox_uid_lease_release(&more);
    for (int i = 0; i < 4; i++)
        pybox_uid_lease_release(&l[i]);
    /* Released leases leave nothing behind. */
    char path[128];
    for (uid_t u = BASE; u < BASE + 4; u++) {
        ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, (unsigned)u), 0);
        ck_assert_int_eq(access(path, F_OK), -1);
    }
}
END_TEST

START_TEST(a_kept_lease_holds_until_its_expiry)
{
    /* A run that could not confirm its box gone keeps the uid though its process is
     * gone (no lock): until the expiry passes, nobody else gets it. */
    pybox_error_t err = {0};
    pybox_uid_lease_t a, b;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", pybox_wall_s() + 100, &a, &err), 0);
    pybox_uid_lease_keep(&a);
    ck_assert_int_eq(a.fd, -1);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "b", pybox_wall_s() + 100, &b, &err), -1);
    /* Once expired, it is free again. */
    write_lease(BASE, "a 1000\n");
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "b", pybox_wall_s() + 100, &b, &err), 0);
    ck_assert_uint_eq(b.uid, BASE);
    pybox_uid_lease_release(&b);
}
END_TEST

/* A renewal pushes the expiry out, never in, and the lease stays held throughout. */
START_TEST(renewal_only_extends)
{
    pybox_error_t err = {0};
    pybox_uid_lease_t l;
    int64_t exp = pybox_wall_s() + 100;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "r1", exp, &l, &err), 0);
    ck_assert_int_eq(pybox_uid_lease_renew(&l, "r1", exp + 5000, &err), 0);
    char text[128], want[64];
    read_lease(BASE, text, sizeof text);
    snprintf(want, sizeof want, "r1 %lld\n", (long long)(exp + 5000));
    ck_assert_str_eq(text, want);
    ck_assert_int_eq(pybox_uid_lease_renew(&l, "r1", exp, &err), 0);
    read_lease(BASE, text, sizeof text);
    ck_assert_str_eq(text, want);
    pybox_uid_lease_t other;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "r2", exp, &other, &err), -1);
    pybox_uid_lease_release(&l);
}
END_TEST

START_TEST(unreadable_leases_are_left_alone)
{
    pybox_error_t err = {0};
    pybox_uid_lease_t l;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), 0); /* makes the folder */
    pybox_uid_lease_release(&l);
    const char *bad[] = {"garbage", "a -5\n", "a 12x\n", "a\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_lease(BASE, bad[i]);
        pybox_error_clear(&err);
        ck_assert_msg(pybox_uid_lease_take_in(dir, BASE, 1, "b", 1, &l, &err) == -1, "%s was taken", bad[i]);
    }
}
END_TEST

START_TEST(host_users_are_never_leased)
{
    /* uid 0 (root) and the first system uids exist on every host: a range of them only
     * has nothing to lease. */
    pybox_error_t err = {0};
    pybox_uid_lease_t l;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, 1, 1, "a", 1, &l, &err), -1); /* uid 1: daemon */
    ck_assert_ptr_nonnull(strstr(err.msg, "no free per-box user"));
    /* and the refusal says so: no live box holds it */
    ck_assert_msg(strstr(err.msg, "held by live boxes") == NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "all 1 uids from 1 are ones the host uses") != NULL, "%s", err.msg);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, 0, 4, "a", 1, &l, &err), -1);
    /* one held by a live run, one the host uses (65534, nobody, next to a uid no one has) */
    if (getpwuid(65534) != NULL && getpwuid(65533) == NULL && getgrgid(65533) == NULL) {
        pybox_uid_lease_t held;
        pybox_error_clear(&err);
        ck_assert_int_eq(pybox_uid_lease_take_in(dir, 65533, 2, "h", pybox_wall_s() + 100, &held, &err), 0);
        ck_assert_uint_eq(held.uid, 65533);
        ck_assert_int_eq(pybox_uid_lease_take_in(dir, 65533, 2, "a", 1, &l, &err), -1);
        ck_assert_msg(strstr(err.msg, "1 are held by live boxes") != NULL &&
                          strstr(err.msg, "1 are ones the host uses") != NULL,
                      "%s", err.msg);
        pybox_uid_lease_release(&held);
    }
}
END_TEST

START_TEST(a_folder_others_can_change_is_refused)
{
    pybox_error_t err = {0};
    pybox_uid_lease_t l;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), 0);
    pybox_uid_lease_release(&l);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a folder that only"));
}
END_TEST

/* The folder above the leases (the run folder, /run/pybox for the machine's) is checked
 * each time as the leases' own is: a folder of this user's that nobody else may change,
 * never a link; one that others may only read is closed to them. */
START_TEST(a_run_folder_others_can_change_is_refused)
{
    char run[64];
    ck_assert_int_eq(pybox_fmt(run, sizeof run, "%s", dir), 0);
    *strrchr(run, '/') = '\0';
    pybox_error_t err = {0};
    pybox_uid_lease_t l;
    ck_assert_int_eq(chmod(run, 0777), 0);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), -1);
    ck_assert_msg(strstr(err.msg, run) != NULL && strstr(err.msg, "not a folder that only") != NULL &&
                      strstr(err.msg, "mode 0777") != NULL,
                  "%s", err.msg);
    ck_assert_int_eq(access(dir, F_OK), -1); /* nothing made in it */
    ck_assert_int_eq(chmod(run, 0700), 0);
    if (geteuid() == 0) { /* another user's: only root can make one */
        ck_assert_int_eq(chown(run, 65534, 65534), 0);
        pybox_error_clear(&err);
        ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), -1);
        ck_assert_msg(strstr(err.msg, "owner 65534") != NULL, "%s", err.msg);
        ck_assert_int_eq(chown(run, geteuid(), getegid()), 0);
    }
    /* 0755, as older versions made /run/pybox: taken, and closed to others */
    ck_assert_int_eq(chmod(run, 0755), 0);
    pybox_error_clear(&err);
    ck_assert_msg(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err) == 0, "%s", err.msg);
    pybox_uid_lease_release(&l);
    struct stat sb;
    ck_assert_int_eq(stat(run, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0700);
    ck_assert_int_eq(stat(dir, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0700);
    /* a link in its place, even to a good folder */
    char moved[80], elsewhere[80];
    ck_assert_int_eq(pybox_fmt(moved, sizeof moved, "%s.real", run), 0);
    ck_assert_int_eq(rename(run, moved), 0);
    ck_assert_int_eq(symlink(moved, run), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), -1);
    ck_assert_msg(strstr(err.msg, "symbolic link") != NULL, "%s", err.msg);
    ck_assert_int_eq(unlink(run), 0);
    ck_assert_int_eq(rename(moved, run), 0);
    /* the leases' folder a link */
    ck_assert_int_eq(pybox_fmt(elsewhere, sizeof elsewhere, "%s/elsewhere", run), 0);
    ck_assert_int_eq(rename(dir, elsewhere), 0);
    ck_assert_int_eq(symlink(elsewhere, dir), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "a", 1, &l, &err), -1);
    ck_assert_msg(strstr(err.msg, "symbolic link") != NULL, "%s", err.msg);
    ck_assert_int_eq(unlink(dir), 0);
    ck_assert_int_eq(rename(elsewhere, dir), 0);
}
END_TEST

/* The machine's folder of leases: /run/pybox/uids, or under the test build's run folder. */
START_TEST(machine_range_and_its_hook)
{
    const char *hook = pybox_hook_name(PYBOX_HOOK_RUN_DIR);
    unsetenv(hook);
    pybox_uid_range_t r;
    char buf[PATH_MAX];
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_uid_machine(&r, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(r.dir, "/run/pybox/uids");
    ck_assert_uint_eq(r.base, PYBOX_UID_BASE);
    ck_assert_uint_eq(r.count, PYBOX_UID_COUNT);
    ck_assert_int_eq(setenv(hook, "/tmp/elsewhere", 1), 0);
    ck_assert_int_eq(pybox_uid_machine(&r, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(r.dir, "/tmp/elsewhere/uids");
    ck_assert_int_eq(setenv(hook, "relative", 1), 0); /* not taken */
    ck_assert_int_eq(pybox_uid_machine(&r, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(r.dir, "/run/pybox/uids");
    unsetenv(hook);
}
END_TEST

/* Housekeeping's sweep: a lease file goes once it is free (expired or empty) and no live
 * run holds its lock; nothing else goes. */
START_TEST(sweep_removes_free_leases_only)
{
    pybox_uid_range_t r = {.dir = dir, .base = BASE, .count = 16};
    pybox_error_t err = {0};
    int removed = -1;
    /* no folder yet: nothing to do, and nothing made */
    ck_assert_int_eq(pybox_uid_lease_sweep_in(&r, false, &removed, &err), 0);
    ck_assert_int_eq(removed, 0);
    ck_assert_int_eq(access(dir, F_OK), -1);
    pybox_uid_lease_t live;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "live", pybox_wall_s() + 100, &live, &err), 0);
    write_lease(BASE + 1, "expired 1000\n");     /* free: goes */
    write_lease(BASE + 2, "");                   /* free (emptied): goes */
    write_lease(BASE + 3, "held 1000\n");        /* expired, but a live run holds its lock */
    write_lease(BASE + 4, "kept 99999999999\n"); /* a box that may still live */
    write_lease(BASE + 5, "garbage");            /* not a lease */
    write_lease(BASE + 16, "outside 1000\n");    /* not of this range */
    char path[128], target[128];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, BASE + 6), 0);
    ck_assert_int_eq(pybox_fmt(target, sizeof target, "%s/%u", dir, BASE + 1), 0);
    ck_assert_int_eq(symlink(target, path), 0); /* a link: never followed, left */
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/0%u", dir, BASE + 7), 0);
    int odd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600); /* not a uid's name */
    ck_assert_int_ge(odd, 0);
    ck_assert_int_eq(pybox_write_all(odd, "x 1\n", 4), 0);
    close(odd);
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, BASE + 3), 0);
    int held = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(held, 0);
    ck_assert_int_eq(flock(held, LOCK_EX | LOCK_NB), 0);
    /* a dry run counts and removes nothing */
    ck_assert_msg(pybox_uid_lease_sweep_in(&r, true, &removed, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, BASE + 1), 0);
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_msg(pybox_uid_lease_sweep_in(&r, false, &removed, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(removed, 2);
    static const struct {
        unsigned off;
        bool there;
    } want[] = {{0, true}, {1, false}, {2, false}, {3, true}, {4, true}, {5, true}, {16, true}, {6, true}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%u", dir, BASE + want[i].off), 0);
        struct stat sb;
        ck_assert_msg((lstat(path, &sb) == 0) == want[i].there, "lease %u: %s", want[i].off,
                      want[i].there ? "removed" : "left");
    }
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/0%u", dir, BASE + 7), 0);
    ck_assert_int_eq(access(path, F_OK), 0);
    /* the live run's lease is still its own: renewing it works, taking it does not */
    ck_assert_int_eq(pybox_uid_lease_renew(&live, "live", pybox_wall_s() + 200, &err), 0);
    pybox_uid_lease_t other;
    ck_assert_int_eq(pybox_uid_lease_take_in(dir, BASE, 1, "other", 1, &other, &err), -1);
    pybox_uid_lease_release(&live);
    /* once its holder lets go, the expired one goes too */
    close(held);
    pybox_error_clear(&err);
    ck_assert_msg(pybox_uid_lease_sweep_in(&r, false, &removed, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(removed, 1);
    /* a folder others can change is refused, not swept */
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(pybox_uid_lease_sweep_in(&r, false, &removed, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a folder that only"));
}
END_TEST

Suite *suite_uid(void)
{
    Suite *s = suite_create("uid");
    TCase *tc = tcase_create("leases");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, live_leases_never_share_a_uid);
    tcase_add_test(tc, a_run_folder_others_can_change_is_refused);
    tcase_add_test(tc, machine_range_and_its_hook);
    tcase_add_test(tc, sweep_removes_free_leases_only);
    tcase_add_test(tc, a_kept_lease_holds_until_its_expiry);
    tcase_add_test(tc, unreadable_leases_are_left_alone);
    tcase_add_test(tc, renewal_only_extends);
    tcase_add_test(tc, host_users_are_never_leased);
    tcase_add_test(tc, a_folder_others_can_change_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
