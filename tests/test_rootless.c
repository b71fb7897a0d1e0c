/* SPDX-License-Identifier: MIT */
/* The native backend as an ordinary user, on this host for real: pybox started as a uid
 * that has no name, no subordinate range and no login (the tests run as root and drop to
 * it), so whatever else the host gives, a rootless box must be refused before anything
 * is made, with each reason the host's own files show and its fix, exit 125. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/cgroup.h"
#include "../pybox/native/rootless.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* A uid and gid no one on a test host has. */
#define NOBODY_ID 3999999u

static char home[64];

static void setup(void)
{
    char tmpl[] = "/tmp/pybox-rootless-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    pybox_strlcpy(home, tmpl, sizeof home);
    ck_assert_int_eq(chown(home, NOBODY_ID, NOBODY_ID), 0);
}

static void teardown(void)
{
    itest_remove_home(home);
}

/* pybox ARGS as NOBODY_ID with HOME, nothing else of the tests' environment; stdin the
 * program. Its exit status; its stdout and stderr in out and errs. */
static int as_user(const char *program, const char *const *args, char *out, size_t out_len, char *errs, size_t errs_len)
{
    int in[2], o[2], e[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(o, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(e, O_CLOEXEC), 0);
    const char *bin = getenv("PYBOX_BIN");
    ck_assert_ptr_nonnull(bin);
    char h[96];
    ck_assert_int_eq(pybox_fmt(h, sizeof h, "HOME=%s", home), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char *argv[16] = {(char *)"pybox"};
        for (size_t i = 0; args[i] != NULL && i < 14; i++)
            argv[i + 1] = (char *)args[i];
        char *env[] = {h, (char *)"PATH=/usr/bin:/bin", NULL};
        if (dup2(in[0], 0) < 0 || dup2(o[1], 1) < 0 || dup2(e[1], 2) < 0 || setgroups(0, NULL) < 0 ||
            setresgid(NOBODY_ID, NOBODY_ID, NOBODY_ID) < 0 || setresuid(NOBODY_ID, NOBODY_ID, NOBODY_ID) < 0)
            _exit(126);
        execve(bin, argv, env);
        _exit(127);
    }
    close(in[0]);
    close(o[1]);
    close(e[1]);
    ck_assert_int_eq(pybox_write_all(in[1], program, strlen(program)), 0);
    close(in[1]);
    size_t got[2] = {0, 0};
    char *bufs[2] = {out, errs};
    size_t lens[2] = {out_len - 1, errs_len - 1};
    int fds[2] = {o[0], e[0]};
    for (int open_fds = 2; open_fds > 0;) {
        struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        ck_assert_int_ge(poll(p, 2, 60000), 1);
        for (int i = 0; i < 2; i++) {
            if (fds[i] < 0 || p[i].revents == 0)
                continue;
            char sink[4096];
            size_t room = lens[i] - got[i];
            ssize_t n = read(fds[i], room > 0 ? bufs[i] + got[i] : sink, room > 0 ? room : sizeof sink);
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
                p[i].fd = -1;
                open_fds--;
            } else if (room > 0) {
                got[i] += (size_t)n;
            }
        }
    }
    out[got[0]] = '\0';
    errs[got[1]] = '\0';
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The reasons this host's own files give: each must be in the refusal. */
static void expect_reasons(const char *errs)
{
    ck_assert_msg(strstr(errs, "pybox: refused: the native backend as uid 3999999 runs rootless") != NULL, "%s", errs);
    pybox_cgroup_host_t host;
    pybox_cgroup_host(NULL, NULL, &host);
    if (host.version != PYBOX_CG_V2)
        ck_assert_msg(strstr(errs, "(1) cgroup v1") != NULL && strstr(errs, "systemd.unified_cgroup_hierarchy=1"), "%s",
                      errs);
    else if (host.systemd)
        ck_assert_msg(strstr(errs, "no systemd --user runs for uid 3999999") != NULL, "%s", errs);
    struct stat sb;
    if (stat(PYBOX_NEWUIDMAP, &sb) < 0)
        ck_assert_msg(strstr(errs, PYBOX_NEWUIDMAP " is not installed") && strstr(errs, "apt-get install uidmap"), "%s",
                      errs);
    else
        ck_assert_msg(strstr(errs, PYBOX_NEWUIDMAP) == NULL, "%s", errs);
    ck_assert_msg(strstr(errs, "/etc/subuid has no range for uid 3999999") != NULL, "%s", errs);
    ck_assert_msg(strstr(errs, "/etc/subgid has no range for uid 3999999") != NULL, "%s", errs);
}

/* Nothing of a box: no staging folder, no cgroup of the user's installation. */
static void nothing_made(void)
{
    char staging[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(staging, sizeof staging, "%s/.local/state/pybox/native/staging", home), 0);
    DIR *d = opendir(staging);
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            ck_assert_msg(de->d_name[0] == '.', "a box's staging folder: %s", de->d_name);
        closedir(d);
    }
}

START_TEST(image_build_refused)
{
    char out[4096], errs[8192];
    const char *args[] = {"image", "build", "stdlib", "--backend", "native", NULL};
    int rc = as_user("", args, out, sizeof out, errs, sizeof errs);
    ck_assert_int_eq(rc, 125);
    expect_reasons(errs);
    ck_assert_str_eq(out, "");
    nothing_made();
}
END_TEST

START_TEST(exec_refused)
{
    char out[4096], errs[8192];
    /* the user's installation is made by their first image build, refused or not */
    const char *build[] = {"image", "build", "stdlib", "--backend", "native", NULL};
    ck_assert_int_eq(as_user("", build, out, sizeof out, errs, sizeof errs), 125);
    const char *args[] = {"exec", "--backend", "native", NULL};
    int rc = as_user("print(1)\n", args, out, sizeof out, errs, sizeof errs);
    ck_assert_int_eq(rc, 125);
    expect_reasons(errs);
    nothing_made();
}
END_TEST

Suite *itest_suite_rootless(void)
{
    Suite *s = suite_create("rootless");
    TCase *tc = tcase_create("refused");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, image_build_refused);
    tcase_add_test(tc, exec_refused);
    suite_add_tcase(s, tc);
    return s;
}
