/* SPDX-License-Identifier: MIT */
/* Sessions from the command line (pybox session open | list | close, pybox exec
 * --session): state kept across calls of one session, each call's receipt naming its
 * session and call, the session's own receipt at its close, nothing left; refusals before
 * any box; only the user who opened a session may use it, shown both ways (the socket's
 * mode and the holder's peer check, each removed in turn). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

#define OTHER_UID 54321

/* `pybox session open ARGS...`: the id it printed (33 bytes). */
static void open_session(const char *const *extra, const char *const *env, bool test_build, char id[33])
{
    const char *args[16] = {"session", "open"};
    int n = 2;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        args[n++] = extra[i];
    itest_run_t r;
    if (test_build)
        itest_pybox_test("", 0, args, env, &r);
    else
        itest_pybox("", 0, args, env, &r);
    ck_assert_msg(r.status == 0, "session open: exit %d: %.*s", r.status, (int)r.err_len, r.err);
    ck_assert_msg(r.out_len == 33 && r.out[32] == '\n', "session open printed: %.*s", (int)r.out_len, r.out);
    memcpy(id, r.out, 32);
    id[32] = '\0';
    itest_run_free(&r);
}

static void exec_in(const char *id, const char *program, bool json, itest_run_t *r)
{
    const char *args[] = {"exec", "--session", id, json ? "--json" : "--color", json ? NULL : "never", NULL};
    itest_pybox(program, strlen(program), args, NULL, r);
}

static void close_session(const char *id, itest_run_t *r)
{
    const char *args[] = {"session", "close", id, "--json", NULL};
    itest_pybox("", 0, args, NULL, r);
}

START_TEST(state_across_calls_receipts_and_nothing_left)
{
    char id[33];
    const char *extra[] = {"--timeout", "20", "--ttl", "120", NULL};
    open_session(extra, NULL, false, id);
    itest_run_t r;
    exec_in(id, "x = 41\nprint('made')\n", true, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "call 1: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "SESSION_CALL_ENDED");
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "made\n");
    ck_assert_str_eq(itest_str(r.receipt, "seen.start.session.id"), id);
    ck_assert_str_eq(itest_str(r.receipt, "seen.start.session.state"), "none: the session's first call");
    itest_run_free(&r);
    /* the terminal receipt names the session, the call and whose state it saw */
    exec_in(id, "print(x + 1)\n", false, &r);
    ck_assert_msg(r.status == 0, "call 2: exit %d: %s", r.status, r.err);
    char want[128];
    snprintf(want, sizeof want, "session %s, call 2: state from calls 1..1 of this session", id);
    ck_assert_msg(itest_contains(r.out, r.out_len, want), "no '%s' in: %.*s", want, (int)r.out_len, r.out);
    ck_assert_msg(itest_contains(r.out, r.out_len, "42"), "%.*s", (int)r.out_len, r.out);
    itest_run_free(&r);
    /* listed, with its holder alive */
    const char *list[] = {"session", "list", "--json", NULL};
    itest_pybox("", 0, list, NULL, &r);
    ck_assert_msg(r.status == 0 && cJSON_GetArraySize(r.receipt) == 1, "list: %.*s", (int)r.out_len, r.out);
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(r.receipt, 0), "id"), id);
    ck_assert_int_eq(itest_bool(cJSON_GetArrayItem(r.receipt, 0), "holder_alive"), 1);
    ck_assert_int_eq((int)itest_num(cJSON_GetArrayItem(r.receipt, 0), "calls"), 2);
    itest_run_free(&r);
    /* a timeout above the session's is refused, and the session goes on */
    const char *longer[] = {"exec", "--session", id, "--timeout", "21", NULL};
    itest_pybox("print(1)\n", 9, longer, NULL, &r);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, "above the 20 s of this session"), "%s", r.err);
    itest_run_free(&r);
    close_session(id, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "close: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "SESSION_CLOSED_OBSERVED");
    ck_assert_int_eq((int)itest_num(r.receipt, "seen.init_record.calls"), 2);
    ck_assert_int_eq(itest_bool(r.receipt, "seen.box.confirmed_gone"), 1);
    itest_run_free(&r);
    /* gone: a call on it is refused, the list is empty, nothing of it is left */
    exec_in(id, "print(x)\n", false, &r);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, "no live session"), "%s", r.err);
    itest_run_free(&r);
    itest_pybox("", 0, list, NULL, &r);
    ck_assert_msg(cJSON_GetArraySize(r.receipt) == 0, "%.*s", (int)r.out_len, r.out);
    itest_run_free(&r);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

START_TEST(refused_before_any_box)
{
    static const struct {
        const char *args[8];
        const char *expect;
    } cases[] = {
        {{"session", "open", "--ttl", "0", NULL}, "--ttl 0: give seconds from 1 to 86400"},
        {{"session", "open", "--idle", "1", NULL}, "--idle 1: give seconds from 5 to 86400"},
        {{"session", "open", "--image", "no-such-image", NULL}, "no-such-image"},
        {{"session", "open", "--memory", "1", NULL}, "--memory 1"},
        {{"exec", "--session", "../x", NULL}, "--session ../x: give the id"},
        {{"exec", "--session", "0123456789abcdef0123456789abcdef", "--image", "stdlib", NULL},
         "--image: not taken with --session"},
        {{"exec", "--session", "0123456789abcdef0123456789abcdef", NULL},
         "no live session 0123456789abcdef0123456789abcdef"},
        {{"session", "close", "zz", NULL}, "give the id `pybox session open` printed"},
        {{"session", "frobnicate", NULL}, "unknown session command"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        itest_run_t r;
        itest_pybox("print(1)\n", 9, cases[i].args, NULL, &r);
        ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, cases[i].expect), "%s: exit %d, stderr: %.*s",
                      cases[i].expect, r.status, (int)r.err_len, r.err);
        itest_run_free(&r);
    }
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

/* The data image's session: a DataFrame one call made is read by the next, and the close
 * gives the session's receipt with both calls counted; nothing is left. */
START_TEST(data_image_dataframe_across_calls)
{
    char id[33];
    const char *extra[] = {"--image", "data", "--timeout", "120", "--ttl", "600", NULL};
    open_session(extra, NULL, false, id);
    itest_run_t r;
    exec_in(id, "import pandas\nx = pandas.DataFrame({'a': range(1234)})\nprint('made')\n", true, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "call 1: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "made\n");
    itest_run_free(&r);
    exec_in(id, "print(len(x))\n", true, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "call 2: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "1234\n");
    ck_assert_str_eq(itest_str(r.receipt, "seen.start.session.state"), "state from calls 1..1 of this session");
    itest_run_free(&r);
    close_session(id, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "close: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "SESSION_CLOSED_OBSERVED");
    ck_assert_int_eq((int)itest_num(r.receipt, "seen.init_record.calls"), 2);
    itest_run_free(&r);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

/* The idle limit ends a session its calls left alone, long before its lifetime: a call
 * keeps it, then with none the holder ends it (its list entry gone), not before. */
START_TEST(idle_limit_ends_it)
{
    char id[33];
    const char *extra[] = {"--ttl", "600", "--idle", "5", NULL};
    open_session(extra, NULL, false, id);
    itest_run_t r;
    exec_in(id, "x = 1\n", true, &r);
    ck_assert_msg(r.status == 0, "call: exit %d: %s", r.status, r.err);
    itest_run_free(&r);
    double called = itest_wall();
    const char *list[] = {"session", "list", "--json", NULL};
    int listed = 1;
    while (listed == 1 && itest_wall() - called < 60) {
        itest_pybox("", 0, list, NULL, &r);
        ck_assert_int_eq(r.status, 0);
        listed = cJSON_GetArraySize(r.receipt);
        if (listed == 1)
            ck_assert_int_eq((int)itest_num(cJSON_GetArrayItem(r.receipt, 0), "idle_s"), 5);
        itest_run_free(&r);
        if (listed == 1)
            usleep(200000); /* the holder's own clock decides; this only looks */
    }
    double gone = itest_wall() - called;
    ck_assert_msg(listed == 0, "still listed after %.1f s", gone);
    ck_assert_msg(gone >= 4.5, "ended %.1f s after its last call, before its idle limit of 5 s", gone);
    exec_in(id, "print(x)\n", false, &r);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, "no live session"), "%s", r.err);
    itest_run_free(&r);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

/* A caller that drips its request a byte at a time does not hold the holder: it is cut
 * off at the holder's deadline for a request, and the close that waited behind it is
 * served while the dripping caller still has bytes to send. */
START_TEST(a_slow_caller_does_not_hold_the_holder)
{
    char id[33];
    const char *extra[] = {"--ttl", "120", NULL};
    open_session(extra, NULL, false, id);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_int_eq(pybox_fmt(sa.sun_path, sizeof sa.sun_path, "%s/sessions/%s.sock", itest_state()->dir, id), 0);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t drip = fork();
    ck_assert_int_ge(drip, 0);
    if (drip == 0) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || send(fd, "{", 1, MSG_NOSIGNAL) != 1)
            _exit(2);
        (void)!write(go[1], "c", 1);   /* connected and sending: the close may come */
        for (int i = 0; i < 60; i++) { /* 30 s of a byte every half second */
            usleep(500000);
            if (send(fd, " ", 1, MSG_NOSIGNAL) != 1)
                _exit(0); /* cut off */
        }
        _exit(1);
    }
    close(go[1]);
    char c;
    ck_assert_int_eq(read(go[0], &c, 1), 1);
    close(go[0]);
    itest_run_t r;
    close_session(id, &r);
    ck_assert_msg(r.status == 0, "close: exit %d: %s", r.status, r.err);
    itest_run_free(&r);
    int st;
    pid_t done = waitpid(drip, &st, WNOHANG);
    if (done == 0) {
        kill(drip, SIGKILL);
        ck_assert_int_eq(waitpid(drip, &st, 0), drip);
    }
    ck_assert_msg(done == 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
                  "the close was served only after the dripping caller had sent everything");
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

/* `pybox exec --session id` as another user (OTHER_UID), program on stdin. */
static void exec_as_other(const char *id, itest_run_t *r)
{
    memset(r, 0, sizeof *r);
    int in[2], err[2], out[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (setgroups(0, NULL) < 0 || setgid(OTHER_UID) < 0 || setuid(OTHER_UID) < 0)
            _exit(126);
        execl(itest_test_bin(), itest_test_bin(), "exec", "--session", id, "--json", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    ck_assert_int_eq(write(in[1], "print('in')\n", 12), 12);
    close(in[1]);
    bool over = false;
    pybox_error_t e = {0};
    ck_assert_int_eq(pybox_read_bounded(out[0], 1 << 20, &r->out, &r->out_len, &over, &e), 0);
    ck_assert_int_eq(pybox_read_bounded(err[0], 1 << 20, &r->err, &r->err_len, &over, &e), 0);
    close(out[0]);
    close(err[0]);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->receipt = cJSON_ParseWithLength(r->out ? r->out : "", r->out_len);
}

START_TEST(only_the_user_who_opened_it)
{
    /* The other user may reach the sessions' folder (searched, not read) for this test
     * only: what keeps it out is then the socket's mode and the holder's peer check. */
    char home[PATH_MAX], dir[PATH_MAX], sock[PATH_MAX];
    pybox_strlcpy(home, itest_state()->dir, sizeof home);
    struct stat hs;
    ck_assert_int_eq(stat(home, &hs), 0);
    char id[33];
    const char *extra[] = {"--ttl", "120", NULL};
    open_session(extra, NULL, false, id);
    ck_assert_int_eq(pybox_fmt(dir, sizeof dir, "%s/sessions", home), 0);
    ck_assert_int_eq(pybox_fmt(sock, sizeof sock, "%s/%s.sock", dir, id), 0);
    struct stat ss;
    ck_assert_int_eq(stat(sock, &ss), 0);
    ck_assert_msg((ss.st_mode & 0777) == 0600, "the socket is %o", (unsigned)(ss.st_mode & 0777));
    itest_run_t r;
    if (geteuid() != 0) {
        /* An ordinary user cannot become another to knock: the socket's mode is all that
         * is shown here; the holder's peer check is shown as root. */
        close_session(id, &r);
        ck_assert_int_eq(r.status, 0);
        itest_run_free(&r);
        return;
    }
    ck_assert_int_eq(chmod(home, 0711), 0);
    ck_assert_int_eq(chmod(dir, 0711), 0);
    exec_as_other(id, &r);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, "is not yours"), "exit %d: %.*s", r.status,
                  (int)r.err_len, r.err);
    itest_run_free(&r);
    /* the socket's mode removed: the holder's peer check refuses */
    ck_assert_int_eq(chmod(sock, 0666), 0);
    exec_as_other(id, &r);
    char want[128];
    snprintf(want, sizeof want, "this session belongs to uid %u, who opened it; uid %u may not use it",
             (unsigned)getuid(), OTHER_UID);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, want), "exit %d: %.*s", r.status, (int)r.err_len,
                  r.err);
    itest_run_free(&r);
    close_session(id, &r);
    ck_assert_int_eq(r.status, 0);
    itest_run_free(&r);
    /* both removed (a holder of the test build told to let anyone in, its socket opened
     * up): the other user's program runs in the session, which is what they keep out */
    const char *any[] = {"PYBOX_TEST_SESSION_ANY_PEER=1", NULL};
    open_session(extra, any, true, id);
    ck_assert_int_eq(pybox_fmt(sock, sizeof sock, "%s/%s.sock", dir, id), 0);
    ck_assert_int_eq(chmod(sock, 0666), 0);
    ck_assert_int_eq(chmod(home, 0711), 0); /* a session open makes it its owner's alone again */
    exec_as_other(id, &r);
    ck_assert_msg(r.status == 0 && r.receipt != NULL, "exit %d: %.*s", r.status, (int)r.err_len, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "in\n");
    itest_run_free(&r);
    close_session(id, &r);
    ck_assert_int_eq(r.status, 0);
    itest_run_free(&r);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_int_eq(chmod(home, hs.st_mode & 07777), 0);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}
END_TEST

/* The holder SIGKILLed: list says so, cleanup removes its files at once, and the box's
 * own timer ends the box at its lifetime (and cleanup removes it then). */
START_TEST(holder_killed_cleanup_removes_it)
{
    char id[33];
    const char *extra[] = {"--ttl", "2", NULL};
    open_session(extra, NULL, false, id);
    char note[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(note, sizeof note, "%s/sessions/%s.json", itest_state()->dir, id), 0);
    FILE *f = fopen(note, "re");
    ck_assert_ptr_nonnull(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *j = cJSON_Parse(text);
    pid_t holder = (pid_t)itest_num(j, "holder_pid");
    cJSON_Delete(j);
    ck_assert_int_gt(holder, 1);
    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    itest_run_t r;
    const char *list[] = {"session", "list", "--json", NULL};
    int alive = 1;
    for (int i = 0; i < 100 && alive == 1; i++) {
        itest_pybox("", 0, list, NULL, &r);
        alive = itest_bool(cJSON_GetArrayItem(r.receipt, 0), "holder_alive");
        itest_run_free(&r);
        if (alive == 1)
            usleep(50000); /* the kernel releases a killed process's lock as it reaps it */
    }
    ck_assert_int_eq(alive, 0);
    exec_in(id, "print(1)\n", false, &r);
    ck_assert_msg(r.status == 125 && itest_contains(r.err, r.err_len, "has no holder any more"), "%s", r.err);
    itest_run_free(&r);
    /* the box ends by its own timer (its lifetime and a margin), then cleanup removes it */
    const char *cleanup[] = {"cleanup", NULL};
    int left = -1;
    for (int i = 0; i < 60 && left != 0; i++) {
        itest_pybox("", 0, cleanup, NULL, &r);
        itest_run_free(&r);
        left = itest_install_left(itest_state()->install_id, itest_state()->dir);
        if (left != 0)
            sleep(1);
    }
    ck_assert_int_eq(left, 0);
    itest_pybox("", 0, list, NULL, &r);
    ck_assert_msg(cJSON_GetArraySize(r.receipt) == 0, "%.*s", (int)r.out_len, r.out);
    itest_run_free(&r);
}
END_TEST

Suite *itest_suite_session(void)
{
    Suite *s = suite_create("session");
    itest_tcase(s, "session", 300,
                ITEST_TESTS(state_across_calls_receipts_and_nothing_left, data_image_dataframe_across_calls,
                            idle_limit_ends_it, a_slow_caller_does_not_hold_the_holder, refused_before_any_box,
                            only_the_user_who_opened_it, holder_killed_cleanup_removes_it));
    return s;
}
