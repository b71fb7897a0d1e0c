/* SPDX-License-Identifier: MIT */
/* Bad input is refused with a clear error and exit 125, before any box is built. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pty.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/hooks.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* What the tests' installation holds on the backend in use (boxes and volumes of the
 * engine, or native leaves and staging folders). */
static int boxes_of_this_install(void)
{
    return itest_install_left(itest_state()->install_id, itest_state()->dir);
}

static void refused(const char *program, size_t len, const char *const *args, const char *expect)
{
    int before = boxes_of_this_install();
    itest_run_t r;
    itest_pybox(program, len, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "pybox: refused: "), "no refusal on stderr: %s", r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, expect), "stderr lacks '%s': %s", expect, r.err);
    ck_assert_int_eq(boxes_of_this_install(), before);
    itest_run_free(&r);
}

START_TEST(empty_program)
{
    const char *args[] = {"exec", NULL};
    refused("", 0, args, "the program is empty");
    refused("  \n\t\n", 5, args, "the program is empty");
}
END_TEST

START_TEST(oversized_program)
{
    size_t len = 1024 * 1024 + 1;
    char *big = malloc(len);
    memset(big, '#', len);
    const char *args[] = {"exec", NULL};
    refused(big, len, args, "larger than 1048576 bytes");
    free(big);
}
END_TEST

START_TEST(program_given_another_way)
{
    const char *a1[] = {"exec", "program.py", NULL};
    refused("print(1)\n", 9, a1, "standard input only");
    const char *a2[] = {"exec", "-c", "print(1)", NULL};
    refused("print(1)\n", 9, a2, "unknown option");
    const char *a3[] = {"exec", "--", "print(1)", NULL};
    refused("print(1)\n", 9, a3, "standard input only");
}
END_TEST

START_TEST(bad_options)
{
    const char *a1[] = {"exec", "--timeout", "0", NULL};
    refused("print(1)\n", 9, a1, "--timeout 0");
    const char *a2[] = {"exec", "--timeout", "1e3", NULL};
    refused("print(1)\n", 9, a2, "--timeout 1e3");
    const char *a3[] = {"exec", "--memory-hog", NULL};
    refused("print(1)\n", 9, a3, "unknown option");
    const char *a4[] = {"exec", "--image", "nosuchimage", NULL};
    refused("print(1)\n", 9, a4, "unknown image 'nosuchimage'");
}
END_TEST

START_TEST(json_refusal_is_json)
{
    itest_run_t r;
    const char *args[] = {"exec", "--json", NULL};
    itest_pybox("", 0, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_ptr_nonnull(r.receipt);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
    ck_assert_int_eq((int)itest_num(r.receipt, "exit_code"), 125);
    ck_assert_int_eq(itest_bool(r.receipt, "box_built"), 0);
    ck_assert_str_eq(itest_str(r.receipt, "error.kind"), "refused");
    itest_run_free(&r);
}
END_TEST

START_TEST(terminal_stdin)
{
    int before = boxes_of_this_install();
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *bin = getenv("PYBOX_BIN");
        execl(bin ? bin : "build/pybox", "pybox", "exec", (char *)NULL);
        _exit(127);
    }
    char buf[4096];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(master, buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(master);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 125);
    ck_assert_ptr_nonnull(strstr(buf, "standard input is a terminal"));
    ck_assert_int_eq(boxes_of_this_install(), before);
}
END_TEST

/* The installed build has no test hook (pybox/hooks.h): every command refuses each hook
 * before anything is made, where the test build takes it (the cgroup root's here, the
 * others' in the crash and uids suites). The name the cgroup root's hook had when every
 * build read it is nobody's now: the installed pybox runs and watches a box as ever. */
START_TEST(installed_build_has_no_test_hook)
{
    char empty[] = "/tmp/pybox-itest-hook-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(empty));
    const char *values[PYBOX_HOOKS] = {[PYBOX_HOOK_KILL_AT] = "run",
                                       [PYBOX_HOOK_CGROUP_ROOT] = empty,
                                       [PYBOX_HOOK_RUN_DIR] = empty,
                                       [PYBOX_HOOK_SESSION_ANY_PEER] = "1"};
    const char *exec_args[] = {"exec", "--json", NULL}, *cleanup_args[] = {"cleanup", NULL},
               *mcp_args[] = {"mcp", NULL}, *image_args[] = {"image", "ls", NULL};
    const char *const *commands[] = {exec_args, cleanup_args, mcp_args, image_args};
    for (int h = 0; h < PYBOX_HOOKS; h++) {
        char entry[128];
        ck_assert_int_eq(pybox_fmt(entry, sizeof entry, "%s=%s", pybox_hook_name(h), values[h]), 0);
        const char *env[] = {entry, NULL};
        for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
            int before = boxes_of_this_install();
            itest_run_t r;
            itest_pybox("print(1)\n", 9, commands[c], env, &r);
            ck_assert_msg(r.status == 125, "%s, pybox %s: exit %d: %s", entry, commands[c][0], r.status, r.err);
            ck_assert_msg(itest_contains(r.err, r.err_len, "pybox: refused: ") &&
                              itest_contains(r.err, r.err_len, pybox_hook_name(h)) &&
                              itest_contains(r.err, r.err_len, "test hook"),
                          "%s, pybox %s: %s", entry, commands[c][0], r.err);
            if (c == 0)
                ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
            ck_assert_int_eq(boxes_of_this_install(), before);
            itest_run_free(&r);
        }
    }
    /* The test build takes the cgroup root it is given: a run there finds no cgroup. */
    char entry[128];
    ck_assert_int_eq(pybox_fmt(entry, sizeof entry, "%s=%s", pybox_hook_name(PYBOX_HOOK_CGROUP_ROOT), empty), 0);
    const char *test_env[] = {entry, NULL};
    itest_run_t r;
    itest_pybox_test("print(1)\n", 9, exec_args, test_env, &r);
    ck_assert_msg(itest_contains(r.out, r.out_len, empty), "the test build did not use %s: %s", empty, r.out);
    itest_run_free(&r);
    /* The installed build with the hook's old name: the machine's cgroups, watched. */
    char old[128];
    ck_assert_int_eq(pybox_fmt(old, sizeof old, "PYBOX_CGROUP_ROOT=%s", empty), 0);
    const char *old_env[] = {old, NULL};
    itest_pybox("print(1)\n", 9, exec_args, old_env, &r);
    ck_assert_msg(r.status == 0 && r.receipt, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_msg(!itest_contains(r.out, r.out_len, empty), "the installed build used %s: %s", empty, r.out);
    ck_assert_msg(itest_num(r.receipt, "seen.kernel.final.memory_peak_bytes") > 0, "no kernel reading: %s", r.out);
    itest_run_free(&r);
    ck_assert_int_eq(rmdir(empty), 0);
}
END_TEST

/* An engine socket that takes the connection and never answers: PyBox gives up at its
 * first-contact bound (5 s by default), says the engine does not answer, and names the
 * socket. This test case's own timeout (30 s, well under the minute a long request gets)
 * is the kill timer. */
START_TEST(engine_never_answers)
{
    char dir[64], sock[128], host[160];
    snprintf(dir, sizeof dir, "/tmp/pybox-hung-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/engine.sock", dir);
    snprintf(host, sizeof host, "DOCKER_HOST=unix://%s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 8) == 0);
    const char *args[] = {"exec", "--json", NULL};
    const char *env_default[] = {host, NULL};
    const char *env_set[] = {host, "PYBOX_ENGINE_CONTACT_TIMEOUT_S=0.5", NULL};
    const char *const *envs[] = {env_default, env_set};
    for (int i = 0; i < 2; i++) {
        itest_run_t r;
        itest_pybox("print(1)\n", 9, args, envs[i], &r);
        ck_assert_int_eq(r.status, 125);
        ck_assert_msg(r.receipt != NULL, "no JSON receipt: %s", r.err);
        const char *msg = itest_str(r.receipt, "error.message");
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, "does not answer") != NULL && strstr(msg, sock) != NULL, "%s", msg);
        ck_assert_msg(strstr(msg, i == 0 ? "within 5.0 s" : "within 0.5 s") != NULL, "%s", msg);
        ck_assert_int_eq(itest_bool(r.receipt, "box_built"), 0);
        itest_run_free(&r);
    }
    close(fd);
    unlink(sock);
    rmdir(dir);
}
END_TEST

/* The campaign's scratch folders in /tmp (pybox-campaign-*): how many there are. */
static int campaign_scratch(void)
{
    DIR *d = opendir("/tmp");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "pybox-campaign-", 15) == 0;
    closedir(d);
    return n;
}

/* A campaign refused at its set-up (here no engine answers) leaves nothing: not its
 * scratch folder, with the installation it had begun in it, nor a page or a record in
 * its --out folder. */
START_TEST(campaign_refused_leaves_nothing)
{
    char out[] = "/tmp/pybox-itest-campaign-out-XXXXXX", limits[PATH_MAX], kase[PATH_MAX];
    ck_assert_ptr_nonnull(mkdtemp(out));
    ck_assert_int_eq(pybox_fmt(limits, sizeof limits, "%s/campaign/limits.md", PYBOX_SOURCE), 0);
    ck_assert_int_eq(pybox_fmt(kase, sizeof kase, "%s/campaign/cases/receipt-clean-exit.json", PYBOX_SOURCE), 0);
    const char *pybox = getenv("PYBOX_BIN");
    ck_assert_msg(pybox != NULL && pybox[0] == '/', "PYBOX_BIN: the campaign takes an absolute path");
    const char *args[] = {"run", "--pybox", pybox, "--out", out, "--limits", limits, kase, NULL};
    const char *env[] = {"DOCKER_HOST=unix:///nonexistent-pybox-itest/engine.sock", NULL};
    int before = campaign_scratch();
    itest_run_t r;
    itest_run_bin(itest_campaign_bin(), "", 0, args, env, &r);
    bool out_empty = rmdir(out) == 0;
    if (!out_empty)
        (void)pybox_remove_tree_at(AT_FDCWD, out);
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, "no container engine"), "%s", r.err);
    ck_assert_msg(campaign_scratch() == before, "a refused campaign left its scratch folder in /tmp: %s", r.err);
    ck_assert_msg(out_empty, "a refused campaign wrote into its --out folder");
    itest_run_free(&r);
}
END_TEST

/* A state directory on a read-only file system: refused before anything is made, and
 * the error says it is the state directory (not only which of its files failed). Its
 * tmpfs is in a mount namespace of this test's own. */
START_TEST(read_only_state_dir)
{
    if (itest_needs_root("read_only_state_dir"))
        return;
    char src[64], id[33], work[64] = "/tmp/pybox-rostate-XXXXXX", state[PATH_MAX];
    ck_assert_int_eq(itest_new_home(src, sizeof src, id), 0);
    ck_assert_ptr_nonnull(mkdtemp(work));
    ck_assert_int_eq(pybox_fmt(state, sizeof state, "%s/state", work), 0);
    itest_small_state(src, state);
    itest_remove_home(src);
    char runs[PATH_MAX + 8];
    snprintf(runs, sizeof runs, "%s/runs", state);
    ck_assert_int_eq(mkdir(runs, 0700), 0);
    ck_assert_int_eq(mount(NULL, state, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL), 0);

    char env_home[PATH_MAX + 16];
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", state);
    const char *env[] = {env_home, NULL};
    const char *args[] = {"exec", "--json", NULL};
    itest_run_t r;
    itest_pybox("print(1)\n", 9, args, env, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(r.receipt != NULL, "no JSON receipt: %s", r.err);
    const char *msg = itest_str(r.receipt, "error.message");
    ck_assert_msg(msg != NULL && strstr(msg, "the state directory") != NULL && strstr(msg, state) != NULL &&
                      strstr(msg, "Read-only file system") != NULL,
                  "%s", msg ? msg : "(no error)");
    ck_assert_int_ne(itest_bool(r.receipt, "seen.box.created"), 1);
    itest_run_free(&r);
    ck_assert_int_eq(itest_install_left(id, state), 0);
    ck_assert_int_eq(umount2(state, MNT_DETACH), 0);
    rmdir(state);
    rmdir(work);
}
END_TEST

Suite *itest_suite_refuse(void)
{
    Suite *s = suite_create("refuse");
    itest_tcase(s, "before any box", 60,
                ITEST_TESTS(empty_program, oversized_program, program_given_another_way, bad_options,
                            json_refusal_is_json, terminal_stdin, installed_build_has_no_test_hook));
    itest_tcase(s, "state directory", 60, ITEST_TESTS(read_only_state_dir));
    if (!itest_native()) { /* the engine's own failure: the docker backend only */
        itest_tcase(s, "engine never answers", 30, ITEST_TESTS(engine_never_answers));
        itest_tcase(s, "campaign refused", 60, ITEST_TESTS(campaign_refused_leaves_nothing));
    }
    return s;
}
