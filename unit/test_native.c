/* SPDX-License-Identifier: MIT */
/* Unit tests of the native sandbox core: the seccomp compiler, the parsers of the
 * kernel's texts, the cgroup file logic on fixture trees (v1 and v2), the verifier's
 * comparisons and the spec's checks. The real-kernel tests are tests/test_native.c. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/native/parse.h"
#include "../pybox/native/seccomp.h"
#include "../pybox/policy.h"
#include "suites.h"

/* ---- the seccomp compiler ---- */

static int count_names(void)
{
    const char *src = pybox_policy_seccomp();
    cJSON *j = cJSON_Parse(src);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItem(j, "syscalls"))
        n += cJSON_GetArraySize(cJSON_GetObjectItem(e, "names"));
    cJSON_Delete(j);
    return n;
}

START_TEST(seccomp_profile_compiles_whole)
{
    pybox_error_t err = {0};
    const pybox_native_filter_t *f = pybox_native_filter_default(&err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    /* Every name of every entry became a rule: none was unknown or dropped. */
    ck_assert_int_eq(f->rules, count_names());
    ck_assert_int_gt(f->len, 10);
    ck_assert_int_eq(strlen(f->sha256), 64);
}
END_TEST

START_TEST(seccomp_digest_is_stable)
{
    pybox_error_t err = {0};
    const char *src = pybox_policy_seccomp();
    pybox_native_filter_t a, b;
    ck_assert_int_eq(pybox_native_filter_compile(src, strlen(src), &a, &err), 0);
    ck_assert_int_eq(pybox_native_filter_compile(src, strlen(src), &b, &err), 0);
    ck_assert_str_eq(a.sha256, b.sha256);
    ck_assert_int_eq(a.len, b.len);
    ck_assert_mem_eq(a.insns, b.insns, a.len * sizeof *a.insns);
    const pybox_native_filter_t *d = pybox_native_filter_default(&err);
    ck_assert_str_eq(d->sha256, a.sha256);
    /* One rule less is another program. */
    const char *other = "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\"},"
                        "{\"architecture\":\"SCMP_ARCH_AARCH64\"}],\"syscalls\":[{\"names\":[\"read\"],"
                        "\"action\":\"SCMP_ACT_ALLOW\"}]}";
    pybox_native_filter_t c;
    ck_assert_int_eq(pybox_native_filter_compile(other, strlen(other), &c, &err), 0);
    ck_assert_str_ne(c.sha256, a.sha256);
    pybox_native_filter_free(&a);
    pybox_native_filter_free(&b);
    pybox_native_filter_free(&c);
}
END_TEST

static void refused(const char *json, const char *needle)
{
    pybox_error_t err = {0};
    pybox_native_filter_t f;
    ck_assert_int_eq(pybox_native_filter_compile(json, strlen(json), &f, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in '%s'", needle, err.msg);
}

#define ARCHES "\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\"},{\"architecture\":\"SCMP_ARCH_AARCH64\"}]"

START_TEST(seccomp_unknown_names_reported)
{
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"read\",\"no_such_call\","
            "\"write\",\"another_fake\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
            "no_such_call, another_fake");
}
END_TEST

START_TEST(seccomp_strict_form)
{
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"read\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}}]}",
            "unknown key in a syscalls entry: includes");
    refused("{\"defaultAction\":\"SCMP_ACT_TRACE\"," ARCHES ",\"syscalls\":[]}", "unknown action SCMP_ACT_TRACE");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"socket\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_SOMETIMES\"}]}]}",
            "unknown operator SCMP_CMP_SOMETIMES");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"socket\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":7,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}",
            "index is not 0..5");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_PPC\"}],"
            "\"syscalls\":[]}",
            "architecture is not in its archMap");
    refused("[1]", "not a JSON object");
}
END_TEST

/* Run fn in a child with no_new_privs and PyBox's filter loaded; its exit code. */
static int filtered(int (*fn)(void))
{
    pybox_error_t err = {0};
    const pybox_native_filter_t *f = pybox_native_filter_default(&err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || pybox_native_filter_load(f) < 0)
            _exit(99);
        _exit(fn());
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Each check returns its number when the filter did not do what the profile says. */
static int profile_in_force(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); /* arg 0 == 1: allowed */
    if (fd < 0)
        return 1;
    close(fd);
    errno = 0;
    if (socket(AF_NETLINK, SOCK_RAW, 0) >= 0 || errno != EPERM) /* arg 0 == 16: not listed */
        return 2;
    errno = 0;
    struct clone_args ca = {.flags = 0, .exit_signal = SIGCHLD};
    if (syscall(SYS_clone3, &ca, sizeof ca) >= 0 || errno != ENOSYS) /* its own errnoRet */
        return 3;
    errno = 0;
    if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) /* not listed */
        return 4;
    errno = 0;
    /* clone with a namespace flag: the masked comparison refuses it. */
    if (syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) >= 0 || errno != EPERM)
        return 5;
    if (personality(0xffffffff) < 0) /* query: allowed */
        return 6;
    errno = 0;
    if (personality(PER_LINUX32) >= 0 || errno != EPERM)
        return 7;
    pid_t child = fork(); /* clone without namespace flags: allowed */
    if (child < 0)
        return 8;
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    return 0;
}

START_TEST(seccomp_filter_in_force)
{
    ck_assert_int_eq(filtered(profile_in_force), 0);
}
END_TEST

/* ---- parsers ---- */

static const char status_fixture[] = "Name:\tpybox-init\n"
                                     "Umask:\t0022\n"
                                     "State:\tS (sleeping)\n"
                                     "Uid:\t0\t0\t0\t0\n"
                                     "Gid:\t0\t0\t0\t0\n"
                                     "Groups:\t \n"
                                     "CapInh:\t0000000000000000\n"
                                     "CapPrm:\t00000000000000e0\n"
                                     "CapEff:\t00000000000000e0\n"
                                     "CapBnd:\t00000000000000e0\n"
                                     "CapAmb:\t0000000000000000\n"
                                     "NoNewPrivs:\t1\n"
                                     "Seccomp:\t2\n"
                                     "Seccomp_filters:\t1\n"
                                     "Speculation_Store_Bypass:\tthread vulnerable\n";

START_TEST(parse_status)
{
    pybox_np_status_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_status_parse(status_fixture, strlen(status_fixture), &st, &err), 0);
    ck_assert_uint_eq(st.have, 0x7ffu);
    ck_assert_int_eq(st.uid[0], 0);
    ck_assert_int_eq(st.ngroups, 0);
    ck_assert_uint_eq(st.cap_eff, 0xe0);
    ck_assert_uint_eq(st.cap_bnd, 0xe0);
    ck_assert_uint_eq(st.cap_inh, 0);
    ck_assert_int_eq(st.no_new_privs, 1);
    ck_assert_int_eq(st.seccomp, 2);
    ck_assert_int_eq(st.seccomp_filters, 1);
    const char prog[] = "Uid:\t200001\t200001\t200001\t200001\nGroups:\t5 7\nCapEff:\t000001ffffffffff\n";
    ck_assert_int_eq(pybox_np_status_parse(prog, strlen(prog), &st, &err), 0);
    ck_assert_int_eq(st.uid[3], 200001);
    ck_assert_int_eq(st.ngroups, 2);
    ck_assert_uint_eq(st.cap_eff, 0x1ffffffffffULL);
    ck_assert_uint_eq(st.have, PYBOX_NP_ST_UID | PYBOX_NP_ST_GROUPS | PYBOX_NP_ST_CAPEFF);
    /* Malformed: refused, never guessed. */
    const char *bad[] = {"Uid:\t0\t0\t0\n", "CapEff:\t0000000000000000000\n", "CapEff:\tzz\n",
                         "Seccomp:\t2x\n",  "Uid:\t0 0 0 0\nUid:\t0 0 0 0\n", "NoNewPrivs:\t99999999999\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_t e = {0};
        ck_assert_msg(pybox_np_status_parse(bad[i], strlen(bad[i]), &st, &e) == -1, "accepted %s", bad[i]);
        ck_assert_int_eq(e.kind, PYBOX_ERR_PROTOCOL);
    }
}
END_TEST

static const char mountinfo_fixture[] =
    "412 380 254:1 /var/tmp/root / ro,nosuid,nodev,relatime - ext4 /dev/vda1 rw,errors=remount-ro\n"
    "413 412 0:61 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "414 412 0:62 / /dev ro,nosuid,noexec,relatime - tmpfs tmpfs ro,size=64k,nr_inodes=16,mode=755\n"
    "415 414 0:63 / /dev/shm rw,nosuid,nodev,noexec,relatime shared:7 - tmpfs tmpfs rw,size=16384k,mode=1777\n"
    "416 412 0:64 / /box/in\\040x ro,nosuid,nodev,noexec,relatime master:3 - ext4 /dev/vda1 rw\n";

START_TEST(parse_mountinfo)
{
    pybox_np_mount_t *m = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_mountinfo_parse(mountinfo_fixture, strlen(mountinfo_fixture), 16, &m, &n, &err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(m[0].id, 412);
    ck_assert_int_eq(m[0].parent, 380);
    ck_assert_uint_eq(m[0].major, 254);
    ck_assert_str_eq(m[0].root, "/var/tmp/root");
    ck_assert_str_eq(m[0].point, "/");
    ck_assert_uint_eq(m[0].flags, PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV);
    ck_assert_str_eq(m[0].fstype, "ext4");
    ck_assert(!m[0].propagates);
    ck_assert_uint_eq(m[1].flags, PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC);
    ck_assert_uint_eq(m[2].flags, PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NOEXEC);
    ck_assert(m[3].propagates);
    ck_assert(m[4].propagates);
    ck_assert_str_eq(m[4].point, "/box/in x");
    char v[32];
    ck_assert_int_eq(pybox_np_option(m[3].super, "size", v, sizeof v), 1);
    ck_assert_str_eq(v, "16384k");
    ck_assert_int_eq(pybox_np_option(m[3].super, "mode", v, sizeof v), 1);
    ck_assert_str_eq(v, "1777");
    ck_assert_int_eq(pybox_np_option(m[3].super, "uid", v, sizeof v), 0);
    ck_assert_int_eq(pybox_np_option(m[3].super, "rw", v, sizeof v), 1);
    ck_assert_int_eq(pybox_np_option("size=1234567890", "size", v, 4), -1);
    free(m);
    /* More mounts than allowed, and broken lines. */
    ck_assert_int_eq(pybox_np_mountinfo_parse(mountinfo_fixture, strlen(mountinfo_fixture), 4, &m, &n, &err), -1);
    const char *bad[] = {
        "1 2 3:4 / / rw - ext4 /dev/x rw",        /* no newline is fine, but: */
        "1 2 3:4 / / rw ext4 /dev/x rw\n",        /* no separator */
        "1 2 3 / / rw - ext4 /dev/x rw\n",        /* no minor */
        "1 2 3:4 /a\\09 / rw - ext4 /dev/x rw\n", /* a bad escape */
        "1 2 3:4 / / ro,rw - ext4 /dev/x rw\n",   /* ro and rw */
        "1 2 3:4 / / nosuid - ext4 /dev/x rw\n",  /* neither */
        "1 2 3:4 / / rw - ext4 /dev/x\n",         /* no super options */
        "x 2 3:4 / / rw - ext4 /dev/x rw\n",
    };
    pybox_error_t e0 = {0};
    ck_assert_int_eq(pybox_np_mountinfo_parse(bad[0], strlen(bad[0]), 4, &m, &n, &e0), 0);
    ck_assert_uint_eq(n, 1);
    free(m);
    for (size_t i = 1; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_t e = {0};
        ck_assert_msg(pybox_np_mountinfo_parse(bad[i], strlen(bad[i]), 4, &m, &n, &e) == -1, "accepted %s", bad[i]);
        ck_assert_ptr_null(m);
    }
}
END_TEST

static const char limits_fixture[] = "Limit                     Soft Limit           Hard Limit           Units     \n"
                                     "Max cpu time              unlimited            unlimited            seconds   \n"
                                     "Max file size             67108864             67108864             bytes     \n"
                                     "Max core file size        0                    0                    bytes     \n"
                                     "Max open files            256                  256                  files     \n"
                                     "Max pending signals       1024                 1024                 signals   \n"
                                     "Max nice priority         0                    0                    \n";

START_TEST(parse_limits)
{
    int64_t s, h;
    pybox_error_t err = {0};
    size_t n = strlen(limits_fixture);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max open files", &s, &h, &err), 0);
    ck_assert_int_eq(s, 256);
    ck_assert_int_eq(h, 256);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max file size", &s, &h, &err), 0);
    ck_assert_int_eq(s, 67108864);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max cpu time", &s, &h, &err), 0);
    ck_assert_int_eq(s, -1);
    ck_assert_int_eq(h, -1);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max nice priority", &s, &h, &err), 0);
    ck_assert_int_eq(h, 0);
    pybox_error_t e1 = {0};
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max open", &s, &h, &e1), -1);
    ck_assert_ptr_nonnull(strstr(e1.msg, "no line for Max open"));
    const char bad[] = "Max open files            25x                  256                  files\n";
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_limit_parse(bad, strlen(bad), "Max open files", &s, &h, &e2), -1);
}
END_TEST

START_TEST(parse_cgroup_membership)
{
    const char v1[] = "9:name=systemd:/\n8:pids:/pybox-x/abc\n4:memory:/pybox-x/abc\n2:cpu,cpuacct:/pybox-x/abc\n"
                      "0::/\n";
    char p[256];
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "memory", p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/pybox-x/abc");
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "cpuacct", p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/pybox-x/abc");
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), NULL, p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/");
    pybox_error_t e = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "cpus", p, sizeof p, &e), -1);
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse("4:memory\n", 9, "memory", p, sizeof p, &e2), -1);
    ck_assert_int_eq(e2.kind, PYBOX_ERR_PROTOCOL);
}
END_TEST

START_TEST(parse_idmap)
{
    pybox_error_t err = {0};
    const char id[] = "         0          0 4294967295\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(id, strlen(id), &err), 1);
    const char other[] = "         0     100000      65536\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(other, strlen(other), &err), 0);
    const char two[] = "0 0 4294967295\n0 0 1\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(two, strlen(two), &err), 0);
    ck_assert_int_eq(pybox_np_idmap_is_identity("", 0, &err), 0);
    ck_assert_int_eq(pybox_np_idmap_is_identity("0 0\n", 4, &err), -1);
}
END_TEST

START_TEST(parse_cgroup_files)
{
    int64_t v, q, per;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_cg_number("134217728\n", 10, &v, &err), 0);
    ck_assert_int_eq(v, 134217728);
    ck_assert_int_eq(pybox_np_cg_number("max\n", 4, &v, &err), 0);
    ck_assert_int_eq(v, -1);
    pybox_error_t e1 = {0};
    ck_assert_int_eq(pybox_np_cg_number("-1\n", 3, &v, &e1), -1);
    pybox_error_t e1b = {0};
    ck_assert_int_eq(pybox_np_cg_number("", 0, &v, &e1b), -1);
    const char oom[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    ck_assert_int_eq(pybox_np_cg_keyed(oom, strlen(oom), "oom_kill", &v, &err), 0);
    ck_assert_int_eq(v, 3);
    const char ev[] = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "oom", &v, &err), 0);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "max", &v, &err), 0);
    ck_assert_int_eq(v, 12);
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "oom_kil", &v, &e2), -1);
    ck_assert_int_eq(pybox_np_cg_cpu_max("50000 100000\n", 13, &q, &per, &err), 0);
    ck_assert_int_eq(q, 50000);
    ck_assert_int_eq(per, 100000);
    ck_assert_int_eq(pybox_np_cg_cpu_max("max 100000\n", 11, &q, &per, &err), 0);
    ck_assert_int_eq(q, -1);
    pybox_error_t e3 = {0};
    ck_assert_int_eq(pybox_np_cg_cpu_max("50000\n", 6, &q, &per, &e3), -1);
}
END_TEST

Suite *suite_native(void)
{
    Suite *s = suite_create("native");
    TCase *tc = tcase_create("seccomp");
    tcase_add_test(tc, seccomp_profile_compiles_whole);
    tcase_add_test(tc, seccomp_digest_is_stable);
    tcase_add_test(tc, seccomp_unknown_names_reported);
    tcase_add_test(tc, seccomp_strict_form);
    tcase_add_test(tc, seccomp_filter_in_force);
    suite_add_tcase(s, tc);
    tc = tcase_create("parse");
    tcase_add_test(tc, parse_status);
    tcase_add_test(tc, parse_mountinfo);
    tcase_add_test(tc, parse_limits);
    tcase_add_test(tc, parse_cgroup_membership);
    tcase_add_test(tc, parse_idmap);
    tcase_add_test(tc, parse_cgroup_files);
    suite_add_tcase(s, tc);
    return s;
}
