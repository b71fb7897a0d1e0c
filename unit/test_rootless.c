/* SPDX-License-Identifier: MIT */
/* Unit tests for what a rootless native box needs of the host: fixture trees of a host
 * that gives everything, each with one thing taken away. */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/native/internal.h"
#include "../pybox/native/native.h"
#include "../pybox/native/rootless.h"
#include "../pybox/policy.h"
#include "../pybox/uid.h"
#include "../pybox/util.h"
#include "suites.h"

#define UID 4242u
static char root[64];

static void put(const char *rel, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s%s", root, rel), 0);
    char failed[PATH_MAX];
    char *slash = strrchr(path, '/');
    *slash = '\0';
    ck_assert_int_eq(pybox_mkdir_parents(path, 0755, failed, sizeof failed), 0);
    *slash = '/';
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pybox_write_all(fd, text, strlen(text)), 0);
    close(fd);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static void gone(const char *rel)
{
    char path[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s%s", root, rel), 0);
    ck_assert_int_eq(unlink(path), 0);
}

static void mkdirs(const char *rel)
{
    char path[PATH_MAX], failed[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s%s", root, rel), 0);
    ck_assert_int_eq(pybox_mkdir_parents(path, 0755, failed, sizeof failed), 0);
}

#define MANAGER "/sys/fs/cgroup/user.slice/user-4242.slice/user@4242.service"

/* A Debian 12 host as shipped with uidmap installed and a user made by useradd. The
 * helpers must be root's: the unit tests run as root. */
static void setup(void)
{
    char tmpl[] = "/tmp/pybox-rootless-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    pybox_strlcpy(root, tmpl, sizeof root);
    put("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n", 0444);
    put(MANAGER "/cgroup.controllers", "cpu memory pids\n", 0444);
    mkdirs("/run/systemd/system");
    put("/proc/sys/user/max_user_namespaces", "63434\n", 0644);
    put("/usr/bin/newuidmap", "#!/bin/true\n", 04755);
    put("/usr/bin/newgidmap", "#!/bin/true\n", 04755);
    put("/etc/subuid", "someone:100000:65536\ntester:165536:65536\n", 0644);
    put("/etc/subgid", "someone:100000:65536\ntester:165536:65536\n", 0644);
    setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
    unsetenv("DBUS_SESSION_BUS_ADDRESS");
}

static void teardown(void)
{
    unit_rm_tree(root);
}

static int probe(pybox_rootless_t *r, pybox_error_t *err)
{
    pybox_rootless_host_t h = {.root = root, .uid = UID, .gid = UID, .user = "tester"};
    return pybox_rootless_probe(&h, r, err);
}

/* Refused with exactly one reason holding each of the words. */
static void refused(const char *a, const char *b)
{
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_int_eq(probe(&r, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "(1) ") != NULL && strstr(err.msg, "(2) ") == NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, a) != NULL, "%s: no \"%s\"", err.msg, a);
    ck_assert_msg(strstr(err.msg, b) != NULL, "%s: no \"%s\"", err.msg, b);
    ck_assert_msg(strstr(err.msg, "fix: ") != NULL, "%s", err.msg);
}

START_TEST(everything_given)
{
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.subuid_start, 165536);
    ck_assert_uint_eq(r.subuid_count, 65536);
    ck_assert_uint_eq(r.subgid_start, 165536);
    ck_assert_str_eq(r.user, "tester");
    ck_assert_ptr_nonnull(strstr(r.manager_cgroup, "user@4242.service"));
    /* boxes take the upper half: a rootless container's ordinary ids are the lower */
    uid_t ub;
    gid_t gb;
    uint32_t n;
    pybox_rootless_box_ids(&r, &ub, &gb, &n);
    ck_assert_uint_eq(ub, 165536 + 32768);
    ck_assert_uint_eq(gb, 165536 + 32768);
    ck_assert_uint_eq(n, 32768);
}
END_TEST

START_TEST(cgroup_v1)
{
    gone("/sys/fs/cgroup/cgroup.controllers");
    refused("cgroup v1", "systemd.unified_cgroup_hierarchy=1");
}
END_TEST

START_TEST(v2_without_systemd)
{
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/run/systemd/system", root), 0);
    ck_assert_int_eq(rmdir(p), 0);
    refused("cgroup v2 without systemd", "run pybox as root");
}
END_TEST

START_TEST(no_user_manager)
{
    gone(MANAGER "/cgroup.controllers");
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s" MANAGER, root), 0);
    ck_assert_int_eq(rmdir(p), 0);
    refused("no systemd --user runs for uid 4242", "loginctl enable-linger tester");
}
END_TEST

START_TEST(cpu_not_delegated)
{
    put(MANAGER "/cgroup.controllers", "memory pids\n", 0444);
    refused("not delegated the cpu controller (it has \"memory pids\")", "Delegate=cpu cpuset io memory pids");
    put(MANAGER "/cgroup.controllers", "pids\n", 0444);
    refused("not delegated the memory cpu controllers", PYBOX_DELEGATE_DROPIN);
}
END_TEST

START_TEST(no_bus)
{
    unsetenv("XDG_RUNTIME_DIR");
    refused("neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set and /run/user/4242 is not the user's",
            "a login session");
    setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/4242/bus", 1);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
}
END_TEST

/* An MCP client starts its servers without XDG_RUNTIME_DIR: the user's runtime folder is
 * still found where logind makes it, when it is the user's alone. */
START_TEST(runtime_folder_without_its_variable)
{
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("DBUS_SESSION_BUS_ADDRESS");
    char p[PATH_MAX], buf[PATH_MAX];
    mkdirs("/run/user/4242");
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/run/user/4242", root), 0);
    ck_assert_int_eq(chown(p, 4242, 4242), 0);
    ck_assert_int_eq(chmod(p, 0700), 0);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(pybox_runtime_dir_of(root, 4242, buf, sizeof buf), "/run/user/4242");
    /* another's folder, or one others may enter, is not the user's */
    ck_assert_int_eq(chmod(p, 0755), 0);
    refused("/run/user/4242 is not the user's", "a login session");
    ck_assert_ptr_null(pybox_runtime_dir_of(root, 4242, buf, sizeof buf));
    ck_assert_int_eq(chmod(p, 0700), 0);
    ck_assert_int_eq(chown(p, 4243, 4243), 0);
    ck_assert_ptr_null(pybox_runtime_dir_of(root, 4242, buf, sizeof buf));
    /* the variable, when set, is taken as it is */
    setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
    ck_assert_str_eq(pybox_runtime_dir_of(root, 4242, buf, sizeof buf), "/run/user/4242");
    setenv("XDG_RUNTIME_DIR", "relative", 1);
    ck_assert_ptr_null(pybox_runtime_dir_of(root, 4242, buf, sizeof buf));
}
END_TEST

START_TEST(userns_clone_off)
{
    put("/proc/sys/kernel/unprivileged_userns_clone", "0\n", 0644);
    refused("kernel.unprivileged_userns_clone = 0", "sysctl -w kernel.unprivileged_userns_clone=1");
    put("/proc/sys/kernel/unprivileged_userns_clone", "1\n", 0644);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(max_user_namespaces_zero)
{
    put("/proc/sys/user/max_user_namespaces", "0\n", 0644);
    refused("user.max_user_namespaces = 0", "sysctl -w user.max_user_namespaces=");
}
END_TEST

START_TEST(apparmor_restricts)
{
    put("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1\n", 0644);
    put("/proc/self/attr/apparmor/current", "unconfined\n", 0644);
    refused("kernel.apparmor_restrict_unprivileged_userns", "apparmor_parser -r /etc/apparmor.d/pybox");
    /* confined by PyBox's profile, which allows them: nothing to refuse */
    put("/proc/self/attr/apparmor/current", "pybox (unconfined)\n", 0644);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
    /* the restriction off: nothing either, whatever the label */
    put("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "0\n", 0644);
    put("/proc/self/attr/apparmor/current", "unconfined\n", 0644);
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(newuidmap_missing)
{
    gone("/usr/bin/newuidmap");
    refused(PYBOX_NEWUIDMAP " is not installed", "apt-get install uidmap");
}
END_TEST

START_TEST(newgidmap_not_setuid)
{
    put("/usr/bin/newgidmap", "#!/bin/true\n", 0755);
    refused(PYBOX_NEWGIDMAP " is neither set-user-ID root", "apt-get install uidmap");
    /* one others may change is no helper of PyBox's */
    put("/usr/bin/newgidmap", "#!/bin/true\n", 04777);
    refused(PYBOX_NEWGIDMAP " is not a root-owned executable", "apt-get install uidmap");
}
END_TEST

START_TEST(no_subuid_range)
{
    put("/etc/subuid", "someone:100000:65536\n# tester:1:2\ntester:5:0\n", 0644);
    refused("/etc/subuid has no range for tester", "usermod --add-subuids 100000-165535 tester");
}
END_TEST

START_TEST(no_subgid_range)
{
    put("/etc/subgid", "someone:100000:65536\n", 0644);
    refused("/etc/subgid has no range for tester", "usermod --add-subgids");
}
END_TEST

START_TEST(shared_range)
{
    /* another user's range reaching into this one's: their boxes could share an id */
    put("/etc/subuid", "someone:100000:65537\ntester:165536:65536\n", 0644);
    refused("/etc/subuid gives ids of tester's range to someone too", "usermod --del-subuids");
    put("/etc/subuid", "someone:100000:65536\ntester:165536:65536\nother:231071:10\n", 0644);
    refused("/etc/subuid gives ids of tester's range to other too", "--add-subuids");
    /* touching is not sharing */
    put("/etc/subuid", "someone:100000:65536\ntester:165536:65536\nother:231072:10\n", 0644);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(subuid_by_number)
{
    put("/etc/subuid", "4242:300000:1000\n", 0644);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_msg(probe(&r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.subuid_start, 300000);
    ck_assert_uint_eq(r.subuid_count, 1000);
    /* the smaller range bounds both */
    uid_t ub;
    gid_t gb;
    uint32_t n;
    pybox_rootless_box_ids(&r, &ub, &gb, &n);
    ck_assert_uint_eq(ub, 300500);
    ck_assert_uint_eq(gb, 165536 + 500);
    ck_assert_uint_eq(n, 500);
}
END_TEST

START_TEST(every_reason_at_once)
{
    gone("/sys/fs/cgroup/cgroup.controllers");
    gone("/usr/bin/newuidmap");
    put("/etc/subuid", "", 0644);
    pybox_rootless_t r;
    pybox_error_t err = {0};
    ck_assert_int_eq(probe(&r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "(1) cgroup v1"));
    ck_assert_ptr_nonnull(strstr(err.msg, "(2) " PYBOX_NEWUIDMAP));
    ck_assert_ptr_nonnull(strstr(err.msg, "(3) /etc/subuid has no range"));
    ck_assert_ptr_null(strstr(err.msg, "(4)"));
    ck_assert_ptr_nonnull(strstr(err.msg, "as uid 4242 (tester)"));
}
END_TEST

START_TEST(subid_lines)
{
    char owner[16];
    uint64_t s, n;
    ck_assert_int_eq(pybox_subid_line("tester:100000:65536\n", owner, sizeof owner, &s, &n), 0);
    ck_assert_str_eq(owner, "tester");
    ck_assert_uint_eq(s, 100000);
    ck_assert_uint_eq(n, 65536);
    ck_assert_int_eq(pybox_subid_line("tester:100000:65536", owner, sizeof owner, &s, &n), 0);
    const char *bad[] = {"tester:100000:0",
                         ":1:2",
                         "tester:-1:2",
                         "tester:1:-2",
                         "tester:1:2x",
                         "tester:1",
                         "tester::2",
                         "# comment",
                         "tester:4294967295:2",
                         "tester:1:+2",
                         "averyveryverylongname:1:2",
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(pybox_subid_line(bad[i], owner, sizeof owner, &s, &n) == -1, "%s", bad[i]);
    ck_assert_int_eq(pybox_subid_line("tester:4294967295:1", owner, sizeof owner, &s, &n), 0);
}
END_TEST

/* A rootless box's share of the user's message queue bytes, which every box of the user
 * and the user's own processes count against (rootless.h); the relaxation takes it away. */
START_TEST(msgqueue_share)
{
    pybox_native_spec_t s;
    memset(&s, 0, sizeof s);
    pybox_native_spec_defaults(&s);
    struct rlimit rl[PYBOX_NATIVE_RLIMITS], own;
    ck_assert_int_eq(getrlimit(RLIMIT_MSGQUEUE, &own), 0);
    pybox_native_rlimits(&s, rl);
    rlim_t as_root = rl[RLIMIT_MSGQUEUE].rlim_max;
    s.rootless = true;
    pybox_native_rlimits(&s, rl);
    ck_assert_uint_le(rl[RLIMIT_MSGQUEUE].rlim_max, PYBOX_ROOTLESS_MSGQUEUE_BYTES);
    ck_assert_uint_eq(rl[RLIMIT_MSGQUEUE].rlim_cur, rl[RLIMIT_MSGQUEUE].rlim_max);
    if (own.rlim_max > PYBOX_ROOTLESS_MSGQUEUE_BYTES)
        ck_assert_uint_lt(rl[RLIMIT_MSGQUEUE].rlim_max, as_root);
    s.relax = PYBOX_RELAX_SHARED_UID;
    pybox_native_rlimits(&s, rl);
    ck_assert_uint_eq(rl[RLIMIT_MSGQUEUE].rlim_max, as_root);
}
END_TEST

Suite *suite_rootless(void)
{
    Suite *s = suite_create("rootless");
    TCase *tc = tcase_create("probe");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, everything_given);
    tcase_add_test(tc, cgroup_v1);
    tcase_add_test(tc, v2_without_systemd);
    tcase_add_test(tc, no_user_manager);
    tcase_add_test(tc, cpu_not_delegated);
    tcase_add_test(tc, no_bus);
    tcase_add_test(tc, runtime_folder_without_its_variable);
    tcase_add_test(tc, userns_clone_off);
    tcase_add_test(tc, max_user_namespaces_zero);
    tcase_add_test(tc, apparmor_restricts);
    tcase_add_test(tc, newuidmap_missing);
    tcase_add_test(tc, newgidmap_not_setuid);
    tcase_add_test(tc, no_subuid_range);
    tcase_add_test(tc, no_subgid_range);
    tcase_add_test(tc, subuid_by_number);
    tcase_add_test(tc, shared_range);
    tcase_add_test(tc, msgqueue_share);
    tcase_add_test(tc, every_reason_at_once);
    tcase_add_test(tc, subid_lines);
    suite_add_tcase(s, tc);
    return s;
}
