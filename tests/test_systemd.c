/* SPDX-License-Identifier: MIT */
/* Native boxes on a cgroup v2 host under systemd (docs/cgroups.md): each box in a scope of
 * its own that systemd delegates, in both states a host is in (no user logged in: systemd
 * has enabled only memory and pids at the root; a user's manager running: cpu too), with
 * PyBox started from a service unit, from systemd-run and from a login shell. Runs only
 * on such a host (tests/main.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/cgroup.h"
#include "../pybox/native/cgroup.h"
#include "../pybox/systemd.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* The pybox under test, by its absolute path: systemd-run and su start it elsewhere. */
static const char *bin(void)
{
    static char abs[PATH_MAX];
    const char *b = getenv("PYBOX_BIN");
    if (realpath(b != NULL ? b : PYBOX_SOURCE "/build/pybox", abs) == NULL)
        ck_abort_msg("no pybox at %s", b != NULL ? b : PYBOX_SOURCE "/build/pybox");
    return abs;
}

/* Run argv, its output to the test's own; its exit status. */
static int run(const char *const argv[])
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 0);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A whole small file (at most 4095 bytes), or "" when it cannot be read. */
static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
}

static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

static bool root_has_cpu(void)
{
    char buf[512];
    slurp("/sys/fs/cgroup/cgroup.subtree_control", buf, sizeof buf);
    return has_word(buf, "cpu");
}

/* Wait (bounded, 20 s: systemd applies its cgroup changes in its own time) until the
 * root's cgroup.subtree_control does (want) or does not have cpu. */
static bool root_cpu_becomes(bool want)
{
    for (int i = 0; i < 400; i++) {
        if (root_has_cpu() == want)
            return true;
        struct timespec ts = {0, 50 * 1000 * 1000}; /* systemd's own pace: there is no event to wait on */
        nanosleep(&ts, NULL);
    }
    return false;
}

typedef struct via {
    char dir[64];
    cJSON *receipt;
    int status;
    char where[512]; /* PyBox's own cgroup, as it started */
} via_t;

/* pybox exec --json on the native backend with program on stdin, in the tests'
 * installation, started through how (NULL: this process's child; "service": a transient
 * service of systemd's; "scope": systemd-run --scope; "login": su -l, a login session). */
static void exec_via(const char *how, const char *program, const char *const *extra, via_t *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->dir, sizeof v->dir, "/tmp/pybox-systemd-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(v->dir));
    ck_assert_int_eq(chmod(v->dir, 0755), 0);
    char prog[128], out[128], where[128];
    snprintf(prog, sizeof prog, "%s/prog.py", v->dir);
    snprintf(out, sizeof out, "%s/receipt.json", v->dir);
    snprintf(where, sizeof where, "%s/where", v->dir);
    FILE *f = fopen(prog, "we");
    ck_assert_ptr_nonnull(f);
    fputs(program, f);
    ck_assert_int_eq(fclose(f), 0);
    char args[256] = "";
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        size_t n = strlen(args);
        snprintf(args + n, sizeof args - n, " '%s'", extra[i]);
    }
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd,
             "cat /proc/self/cgroup >'%s' && exec env PYBOX_HOME='%s' PYBOX_BACKEND=native '%s' exec --json%s <'%s' "
             ">'%s'",
             where, itest_state()->dir, bin(), args, prog, out);
    if (how == NULL) {
        const char *argv[] = {"sh", "-c", cmd, NULL};
        v->status = run(argv);
    } else if (strcmp(how, "service") == 0) {
        const char *argv[] = {"systemd-run", "--wait", "--quiet", "--collect", "--service-type=exec",
                              "sh",          "-c",     cmd,       NULL};
        v->status = run(argv);
        /* systemd-run says the service's failure, not the command's status: the receipt
         * has it */
    } else if (strcmp(how, "scope") == 0) {
        const char *argv[] = {"systemd-run", "--scope", "--quiet", "--collect", "sh", "-c", cmd, NULL};
        v->status = run(argv);
    } else {
        const char *argv[] = {"su", "-l", "root", "-c", cmd, NULL};
        v->status = run(argv);
    }
    slurp(where, v->where, sizeof v->where);
    int fd = open(out, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "no receipt from pybox started %s (status %d)", how ? how : "here", v->status);
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 8 << 20, &text, &len, &over, &err), 0);
    close(fd);
    v->receipt = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_msg(v->receipt != NULL, "pybox started %s gave no JSON receipt (status %d)", how ? how : "here",
                  v->status);
}

static void via_free(via_t *v)
{
    cJSON_Delete(v->receipt);
    const char *rm[] = {"rm", "-rf", "--one-file-system", v->dir, NULL};
    (void)run(rm);
}

/* Whether systemd still knows the unit (LoadState other than not-found). */
static bool unit_known(const char *unit)
{
    char out[128];
    snprintf(out, sizeof out, "/tmp/pybox-systemd-unit-%d", (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof cmd, "systemctl show -P LoadState '%s' >'%s'", unit, out);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    ck_assert_int_eq(run(argv), 0);
    char buf[64];
    slurp(out, buf, sizeof buf);
    unlink(out);
    return strncmp(buf, "not-found", 9) != 0;
}

/* A box of this run: placed in its own scope in pybox.slice, with PyBox's leaf inside it,
 * its limits verified, and after the run nothing of it left: the leaf, the scope and its
 * unit gone, and no folder of PyBox's beside systemd's slices. */
static void placed_in_its_scope(const via_t *v)
{
    const cJSON *j = v->receipt;
    ck_assert_str_eq(itest_str(j, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_str_eq(itest_str(j, "seen.host.cgroup"), "v2");
    ck_assert_str_eq(itest_str(j, "seen.host.cgroup_manager"), "systemd");
    ck_assert_int_ge((int)itest_num(j, "seen.box.settings_checked"), 100);
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    pybox_native_cgroup_t cg;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_native_box_cgroup(itest_state()->install_id, itest_str(j, "run_id"), &cg, &err), 0);
    ck_assert(cg.systemd);
    ck_assert_str_eq(itest_str(j, "seen.kernel.cgroup.path"), cg.unified);
    /* the unit is named for the installation and the run (docs/cgroups.md) */
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    ck_assert_int_eq(pybox_native_cg_parent(itest_state()->install_id, parent, &err), 0);
    ck_assert_msg(strncmp(cg.unit, parent, strlen(parent)) == 0 && strstr(cg.unit, itest_str(j, "run_id")) != NULL,
                  "unit %s", cg.unit);
    ck_assert_msg(access(cg.unified, F_OK) < 0, "%s is left", cg.unified);
    /* systemd removes the emptied scope and unloads its unit, in its own time */
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = access(cg.scope, F_OK) < 0 && !unit_known(cg.unit);
        if (!gone) {
            struct timespec ts = {0, 50 * 1000 * 1000}; /* systemd's own pace */
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_msg(gone, "the scope %s is still there", cg.unit);
    /* and no parent where a host without systemd would have it */
    pybox_native_cg_host_t plain;
    ck_assert_int_eq(pybox_native_cg_host(pybox_cgroup_root(), "/nonexistent", &plain, &err), 0);
    char beside[5][PATH_MAX];
    ck_assert_int_eq(pybox_native_cg_holders(&plain, parent, beside, &err), 0);
    ck_assert_str_ne(beside[4], "");
    ck_assert_msg(access(beside[4], F_OK) < 0, "%s was made beside systemd's slices", beside[4]);
}

START_TEST(a_scope_per_box)
{
    via_t v;
    exec_via(NULL, "print('hello')\n", NULL, &v);
    ck_assert_int_eq(v.status, 0);
    ck_assert_str_eq(itest_str(v.receipt, "said.stdout.text"), "hello\n");
    placed_in_its_scope(&v);
    via_free(&v);
}
END_TEST

static const char cpu_loop[] = "import time\nt = time.time()\nwhile time.time() - t < 1:\n    pass\nprint('done')\n";

/* Half a CPU, throttled: the cpu controller is the box's own, whatever the root had. At
 * most the quota (50 ms) in each 100 ms period the box ran, give or take a scheduler
 * tick: counted per period, the check holds on a slow machine too. */
static void cpu_bounded(const via_t *v)
{
    const cJSON *j = v->receipt;
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "done\n");
    double cpu = itest_num(j, "seen.kernel.final.cpu_ns") / 1e9;
    double periods = itest_num(j, "seen.kernel.final.cpu_periods");
    ck_assert_msg(periods >= 8 && cpu > 0.35 && cpu <= 1.25 * periods * 0.05,
                  "CPU time %.3f s over %.0f periods at 0.5 CPU", cpu, periods);
    ck_assert_int_gt((int)itest_num(j, "seen.kernel.final.cpu_throttled_periods"), 0);
}

/* When the root keeps cpu: which of systemd's units are there to want it, in the test's
 * output: the slices and scopes, the root's subtree_control and the child folders with cpu.max. */
static void who_wants_cpu(void)
{
    const char *units[] = {"systemctl", "list-units", "--all", "--no-pager", "--no-legend", "--type=slice,scope", NULL};
    (void)run(units);
    const char *dirs[] = {"sh", "-c", "cat /sys/fs/cgroup/cgroup.subtree_control; ls -d /sys/fs/cgroup/*/cpu.max",
                          NULL};
    (void)run(dirs);
}

/* Back to the state right after boot, with nobody logged in: no user manager, no PyBox
 * slice, and systemd's own account of what each cgroup needs worked out again (a reload:
 * once a box ran, systemd was seen to keep cpuset, cpu and io enabled at the root after
 * both stopped, docs/cgroups.md). Then systemd has enabled memory and pids at the root,
 * not cpu. */
static void as_after_boot(void)
{
    const char *stop[] = {"systemctl", "stop", "user@0.service", PYBOX_SD_SLICE, NULL};
    ck_assert_int_eq(run(stop), 0);
    /* systemd works out again what each cgroup needs on a reload (it does not always on
     * a unit's stop) */
    const char *reload[] = {"systemctl", "daemon-reload", NULL};
    ck_assert_int_eq(run(reload), 0);
    bool dropped = root_cpu_becomes(false);
    if (!dropped)
        who_wants_cpu();
    ck_assert_msg(dropped, "the root's subtree_control keeps cpu with no user manager and no PyBox slice: something "
                           "else asked systemd for it");
}

/* Right after boot, with no cpu at the root: PyBox gets cpu for its boxes by systemd's
 * delegation alone, never by writing the root itself: once its slice stops, the root is as
 * it was. */
START_TEST(no_cpu_at_the_root)
{
    as_after_boot();
    via_t v;
    const char *args[] = {"--timeout", "20", NULL};
    exec_via(NULL, cpu_loop, args, &v);
    ck_assert_int_eq(v.status, 0);
    cpu_bounded(&v);
    placed_in_its_scope(&v);
    via_free(&v);
    as_after_boot();
}
END_TEST

/* With a user's manager running (a login, or linger), systemd has enabled cpu at the root
 * for it: the same box, the same bounds. */
START_TEST(a_user_manager_running)
{
    const char *start[] = {"systemctl", "start", "user@0.service", NULL};
    ck_assert_int_eq(run(start), 0);
    ck_assert_msg(root_cpu_becomes(true), "a user manager runs and the root has no cpu");
    via_t v;
    const char *args[] = {"--timeout", "20", NULL};
    exec_via(NULL, cpu_loop, args, &v);
    const char *stop[] = {"systemctl", "stop", "user@0.service", NULL};
    ck_assert_int_eq(run(stop), 0);
    ck_assert_int_eq(v.status, 0);
    cpu_bounded(&v);
    placed_in_its_scope(&v);
    via_free(&v);
}
END_TEST

START_TEST(started_from_a_service_unit)
{
    via_t v;
    exec_via("service", "print('hello')\n", NULL, &v);
    ck_assert_msg(strstr(v.where, "0::/system.slice/run-") != NULL && strstr(v.where, ".service") != NULL,
                  "pybox ran in %s, not a service", v.where);
    placed_in_its_scope(&v);
    via_free(&v);
}
END_TEST

START_TEST(started_from_systemd_run_scope)
{
    via_t v;
    exec_via("scope", "print('hello')\n", NULL, &v);
    ck_assert_int_eq(v.status, 0);
    ck_assert_msg(strstr(v.where, "0::/system.slice/run-") != NULL && strstr(v.where, ".scope") != NULL,
                  "pybox ran in %s, not a scope of systemd-run's", v.where);
    placed_in_its_scope(&v);
    via_free(&v);
}
END_TEST

START_TEST(started_from_a_login_shell)
{
    via_t v;
    exec_via("login", "print('hello')\n", NULL, &v);
    ck_assert_int_eq(v.status, 0);
    ck_assert_msg(strstr(v.where, "0::/user.slice/user-0.slice/session-") != NULL,
                  "pybox ran in %s, not a login session", v.where);
    placed_in_its_scope(&v);
    via_free(&v);
    const char *stop[] = {"systemctl", "stop", "user@0.service", NULL};
    (void)run(stop); /* the login started root's manager: back to the state after boot */
}
END_TEST

Suite *itest_suite_systemd(void)
{
    Suite *s = suite_create("systemd");
    TCase *tc = tcase_create("scopes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_scope_per_box);
    tcase_add_test(tc, no_cpu_at_the_root);
    tcase_add_test(tc, a_user_manager_running);
    tcase_add_test(tc, started_from_a_service_unit);
    tcase_add_test(tc, started_from_systemd_run_scope);
    tcase_add_test(tc, started_from_a_login_shell);
    suite_add_tcase(s, tc);
    return s;
}
