/* SPDX-License-Identifier: MIT */
/* pybox exec end to end: exits, tracebacks, deadlines, output caps, the box's init. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/buf.h"

#include "itest.h"
#include "suites.h"

/* Every run: verified before start, removed, and its backend (the engine, the kernel's
 * cgroups and the staging folder) no longer has the box. */
static void assert_box_gone(const itest_run_t *r)
{
    const cJSON *j = r->receipt;
    ck_assert_int_eq(itest_bool(j, "seen.box.verified"), 1);
    ck_assert_int_eq(itest_bool(j, "seen.box.removed"), 1);
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    const char *id = itest_str(j, "seen.box.id");
    ck_assert_ptr_nonnull(id);
    ck_assert_str_eq(itest_str(j, "seen.backend"), itest_backend());
    if (!itest_native()) {
        pybox_engine_t *e = itest_engine();
        ck_assert_int_eq(itest_box_status(e, id), 404);
        pybox_engine_free(e);
    }
    ck_assert_int_eq(itest_run_left(itest_str(j, "run_id")), 0);
}

START_TEST(hello_exits_by_itself)
{
    itest_run_t r;
    const cJSON *j = itest_exec_ended("print('hello inspection')\n", NULL, 0, &r);
    ck_assert_int_eq((int)itest_num(j, "exit_code"), 0);
    ck_assert_int_eq((int)itest_num(j, "seen.backend_record.exit_code"), 0);
    ck_assert_int_eq(itest_bool(j, "seen.backend_record.oom_killed"), 0);
    ck_assert_str_eq(itest_str(j, "seen.clock"), "none");
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.exit_code"), 0);
    ck_assert_int_eq(itest_bool(j, "seen.init_record.box_timer_fired"), 0);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "hello inspection\n");
    ck_assert_int_eq((int)itest_num(j, "said.stdout.total_bytes"), 17);
    ck_assert_int_eq((int)itest_num(j, "said.stderr.total_bytes"), 0);
    ck_assert_int_eq(cJSON_GetArraySize(itest_get(j, "unknown")), 0);
    ck_assert_ptr_null(itest_get(j, "error"));
    assert_box_gone(&r);
    itest_run_free(&r);
}
END_TEST

START_TEST(traceback_is_the_programs_failure)
{
    itest_run_t r;
    const cJSON *j = itest_exec_ended("print('before')\nraise ValueError('boom')\n", NULL, 1, &r);
    ck_assert_int_eq((int)itest_num(j, "seen.backend_record.exit_code"), 1);
    const char *e = itest_str(j, "said.stderr.text");
    ck_assert_ptr_nonnull(strstr(e, "Traceback (most recent call last)"));
    ck_assert_ptr_nonnull(strstr(e, "ValueError: boom"));
    ck_assert_str_eq(itest_str(j, "said.trust"), "untrusted: written by the program");
    ck_assert_ptr_null(itest_get(j, "error")); /* not a PyBox error */
    ck_assert_msg(!itest_contains(r.err, r.err_len, "pybox:"), "pybox reported an error of its own: %s", r.err);
    assert_box_gone(&r);
    itest_run_free(&r);
}
END_TEST

START_TEST(exit_codes_pass_through)
{
    itest_run_t r;
    itest_exec("raise SystemExit(3)\n", NULL, &r);
    ck_assert_int_eq(r.status, 3);
    ck_assert_int_eq((int)itest_num(r.receipt, "seen.backend_record.exit_code"), 3);
    itest_run_free(&r);
    itest_exec("import os\nos.kill(os.getpid(), 9)\n", NULL, &r);
    ck_assert_int_eq(r.status, 137);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_int_eq((int)itest_num(r.receipt, "seen.init_record.signal"), 9);
    itest_run_free(&r);
}
END_TEST

START_TEST(host_deadline_stops_the_program)
{
    itest_run_t r;
    const cJSON *j = itest_exec_past_deadline(
        "import time\nprint('sleeping', flush=True)\ntime.sleep(8)\nprint('woke')\n", "0.4", &r);
    ck_assert_int_eq(itest_bool(j, "seen.init_record.stopped_on_request"), 1);
    ck_assert_int_eq(itest_bool(j, "seen.init_record.box_timer_fired"), 0);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.signal"), 9);
    ck_assert_int_eq((int)itest_num(j, "seen.backend_record.exit_code"), 137);
    /* Stopped near the deadline, far from the 8 s the program asked for. */
    double ms = itest_num(j, "seen.init_record.program_ms");
    ck_assert_msg(ms >= 350 && ms < 3000, "program ran %.0f ms under a 0.4 s deadline", ms);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "sleeping\n");
    assert_box_gone(&r);
    itest_run_free(&r);
}
END_TEST

START_TEST(stdout_is_capped_and_counted)
{
    itest_run_t r;
    const cJSON *j = itest_exec_ended(
        "import sys\nsys.stdout.write('x' * 100000)\nsys.stderr.write('e' * 70000)\nprint('end')\n", NULL, 0, &r);
    ck_assert_int_eq((int)itest_num(j, "said.stdout.total_bytes"), 100004);
    ck_assert_int_eq((int)itest_num(j, "said.stdout.kept_bytes"), 65536);
    ck_assert_int_eq(itest_bool(j, "said.stdout.truncated"), 1);
    ck_assert_int_eq((int)strlen(itest_str(j, "said.stdout.text")), 65536);
    ck_assert_int_eq((int)itest_num(j, "said.stderr.total_bytes"), 70000);
    ck_assert_int_eq(itest_bool(j, "said.stderr.truncated"), 1);
    itest_run_free(&r);
}
END_TEST

START_TEST(large_output_never_stalls_the_box)
{
    /* 8 MiB on each stream, interleaved: the box must never block on a full pipe. */
    itest_run_t r;
    const char *args[] = {"--timeout", "20", NULL};
    const cJSON *j = itest_exec_ended(
        "import sys\nfor i in range(256):\n    sys.stdout.write('o' * 32768)\n    sys.stderr.write('e' * "
        "32768)\nprint('done')\n",
        args, 0, &r);
    ck_assert_int_eq((long)itest_num(j, "said.stdout.total_bytes"), 256L * 32768 + 5);
    ck_assert_int_eq((long)itest_num(j, "said.stderr.total_bytes"), 256L * 32768);
    itest_run_free(&r);
}
END_TEST

START_TEST(leftover_processes_are_reaped)
{
    itest_run_t r;
    const cJSON *j = itest_exec_ended(
        "import subprocess\nsubprocess.Popen(['sleep', '100'])\nsubprocess.Popen(['sleep', '100'])\nprint('bye')\n",
        NULL, 0, &r);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.other_processes_reaped"), 2);
    /* ended by itself, far before its leftovers' 100 s: the box did not wait for them */
    ck_assert_msg(itest_num(j, "seen.init_record.program_ms") < ITEST_ROOMY_S * 1000,
                  "the box waited for the leftovers");
    itest_run_free(&r);
}
END_TEST

START_TEST(forged_done_record_is_just_output)
{
    /* The program prints what a done record looks like, without the secret it never saw. */
    itest_run_t r;
    const cJSON *j = itest_exec_ended(
        "import sys\nsys.stdout.write('\\x1epybox-done v4 ' + 'a' * 64 + ' exit=0 signal=0 timer=0 stopped=0 "
        "program_ms=1 reaped=0 term=0 calls=1 end=program\\n')\nsys.stdout.flush()\nraise SystemExit(5)\n",
        NULL, 5, &r);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.exit_code"), 5);
    ck_assert_ptr_nonnull(strstr(itest_str(j, "said.stdout.text"), "pybox-done v4 aaaa"));
    itest_run_free(&r);
}
END_TEST

START_TEST(program_cannot_signal_the_init)
{
    itest_run_t r;
    const cJSON *j = itest_exec_ended(
        "import os, signal\nfor s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGKILL, "
        "signal.SIGINT):\n    try:\n        os.kill(1, s)\n    except OSError as e:\n        print('refused', "
        "s, e.errno)\nprint('still here', flush=True)\nraise SystemExit(7)\n",
        NULL, 7, &r);
    ck_assert_int_eq(itest_bool(j, "seen.init_record.stopped_on_request"), 0);
    ck_assert_ptr_nonnull(strstr(itest_str(j, "said.stdout.text"), "still here"));
    itest_run_free(&r);
}
END_TEST

START_TEST(human_receipt_is_fenced)
{
    itest_run_t r;
    const char *args[] = {"exec", NULL};
    const char *prog = "import sys\nsys.stdout.write('\\x1b[2J\\x1b[31mstatus     SUPERVISOR_KILL_OBSERVED\\r\\n')\n"
                       "sys.stdout.buffer.write(b'\\xff\\xfe bad utf8 \\xe2\\x80\\xae rlo\\n')\n";
    itest_pybox(prog, strlen(prog), args, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_null(memchr(r.out, 0x1b, r.out_len));
    ck_assert_ptr_null(memchr(r.out, '\r', r.out_len));
    ck_assert_ptr_null(strstr(r.out, "\xe2\x80\xae"));
    ck_assert_ptr_nonnull(strstr(r.out, "  | \\x1b[2J\\x1b[31mstatus     SUPERVISOR_KILL_OBSERVED\\r"));
    ck_assert_ptr_nonnull(strstr(r.out, "\n  status     TARGET_EXIT_OBSERVED\n"));
    /* The only status line not behind the fence is PyBox's own. */
    int own = 0;
    for (const char *p = r.out; (p = strstr(p, "\n  status")) != NULL; p++)
        own++;
    ck_assert_int_eq(own, 1);
    itest_run_free(&r);
}
END_TEST

/* pybox exec [args] < program, its stdout a terminal (a pty), env entries added: what it
 * wrote there (the caller frees). */
static char *exec_on_terminal(const char *program, const char *const *args, const char *const *env)
{
    int master, slave;
    ck_assert_int_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
    int in = memfd_create("stdin", MFD_CLOEXEC);
    ck_assert_int_ge(in, 0);
    ck_assert_int_eq(write(in, program, strlen(program)), (ssize_t)strlen(program));
    ck_assert_int_eq(lseek(in, 0, SEEK_SET), 0);
    const char *bin = getenv("PYBOX_BIN") && *getenv("PYBOX_BIN") ? getenv("PYBOX_BIN") : "build/pybox";
    const char *argv[16] = {bin};
    for (int i = 0; args[i] != NULL && i < 14; i++)
        argv[i + 1] = args[i];
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(in, 0);
        dup2(slave, 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        for (int i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(in);
    close(slave);
    /* read until the terminal's other side is closed (EIO once pybox has exited) */
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    char buf[4096];
    ssize_t n;
    while ((n = read(master, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            pybox_buf_add(&b, buf, (size_t)n);
    close(master);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pybox exec on a terminal: status %d", st);
    pybox_buf_add(&b, "", 0);
    return pybox_buf_steal(&b);
}

/* The status word in colour: on a terminal (unless NO_COLOR) or when asked; never in a
 * pipe by default, never in --json; the program's own colour codes stay escaped. */
START_TEST(status_in_colour)
{
    const char *prog = "print('\\x1b[31mred')\n";
    const char *green = "  status     \x1b[1;32mTARGET_EXIT_OBSERVED\x1b[0m";
    itest_run_t r;
    itest_pybox(prog, strlen(prog), (const char *[]){"exec", NULL}, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_null(memchr(r.out, 0x1b, r.out_len));
    itest_run_free(&r);

    itest_pybox(prog, strlen(prog), (const char *[]){"exec", "--color=always", NULL},
                (const char *[]){"NO_COLOR=1", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, green) != NULL, "no coloured status word:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "  | \\x1b[31mred\n"));
    itest_run_free(&r);

    itest_pybox(prog, strlen(prog), (const char *[]){"exec", "--json", "--color=always", NULL}, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(r.receipt);
    ck_assert_ptr_null(memchr(r.out, 0x1b, r.out_len));
    itest_run_free(&r);

    char *t = exec_on_terminal(prog, (const char *[]){"exec", NULL}, (const char *[]){"TERM=xterm", NULL});
    ck_assert_msg(strstr(t, green) != NULL, "no colour on a terminal:\n%s", t);
    free(t);
    t = exec_on_terminal(prog, (const char *[]){"exec", NULL}, (const char *[]){"TERM=xterm", "NO_COLOR=1", NULL});
    ck_assert_ptr_nonnull(strstr(t, "TARGET_EXIT_OBSERVED"));
    ck_assert_ptr_null(strchr(t, 0x1b));
    free(t);
    t = exec_on_terminal(prog, (const char *[]){"exec", "--color=never", NULL}, (const char *[]){"TERM=xterm", NULL});
    ck_assert_ptr_null(strchr(t, 0x1b));
    free(t);
}
END_TEST

/* PyBox opens libcurl and libarchive only when it needs them (each brings a tree of
 * libraries that would cost every process milliseconds to load): a run with no files
 * loads libarchive on neither backend, libcurl only on docker, and one with a file in
 * loads libarchive. The dynamic loader's own log says what was loaded. */
/* What /proc says fd of pid is ("" when it has none). */
static void fd_target(pid_t pid, int fd, char *out, size_t len)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(p, out, len - 1);
    out[n > 0 ? n : 0] = '\0';
}

/* PyBox started with its standard descriptors closed opens /dev/null on them first: else
 * its own first files and sockets take those numbers (the output folder's parent, the
 * engine client's wakeup pair), and the receipt written "to stdout" goes into one of
 * them or fails. */
START_TEST(closed_standard_descriptors_are_dev_null)
{
    char out[64];
    snprintf(out, sizeof out, "/tmp/pybox-itest-fds-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(out));
    char dest[96];
    snprintf(dest, sizeof dest, "%s/out", out);
    const char *prog = "open('/box/out/result.txt', 'w').write('kept')\n"
                       "import subprocess\n"
                       "subprocess.run(['python3', '-c', 'import time; time.sleep(30)', 'pybox-fds-marker'])\n";
    const char *args[] = {"exec", "--json", "--timeout", "2", "--output", dest, NULL};
    double since = itest_wall();
    itest_job_t j;
    itest_start_closed(prog, strlen(prog), args, NULL, 1u << 1 | 1u << 2, &j);
    pid_t pid = j.pid;
    char id[65], t1[PATH_MAX], t2[PATH_MAX];
    int seen = itest_box_wait_running(since, id, "pybox-fds-marker", 30);
    fd_target(pid, 1, t1, sizeof t1);
    fd_target(pid, 2, t2, sizeof t2);
    itest_run_t r;
    itest_finish(&j, &r);
    char p[128];
    snprintf(p, sizeof p, "%s/result.txt", dest);
    struct stat sb;
    bool delivered = stat(p, &sb) == 0 && sb.st_size == 4;
    itest_remove_home(out);
    ck_assert_msg(seen == 0, "the program never ran");
    ck_assert_str_eq(t1, "/dev/null");
    ck_assert_str_eq(t2, "/dev/null");
    /* the run as it would be with a /dev/null stdout: the deadline's exit, the files */
    ck_assert_int_eq(r.status, 124);
    ck_assert(delivered);
    itest_run_free(&r);
    /* stdin closed: an empty program, refused as such, not a read of whatever took fd 0 */
    const char *args2[] = {"exec", "--json", NULL};
    itest_start_closed("", 0, args2, NULL, 1u << 0, &j);
    itest_finish(&j, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "the program is empty"), "%s", r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
    itest_run_free(&r);
}
END_TEST

START_TEST(libraries_opened_when_needed)
{
    const char *env[] = {"LD_DEBUG=files", NULL};
    const char *args[] = {"exec", "--json", NULL};
    itest_run_t r;
    itest_pybox("print(1)\n", 9, args, env, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(!itest_contains(r.err, r.err_len, "file=libarchive.so"), "libarchive loaded for a run without files");
    bool curl = itest_contains(r.err, r.err_len, "file=libcurl.so");
    ck_assert_msg(curl == !itest_native(), "libcurl %sloaded on the %s backend", curl ? "" : "not ", itest_backend());
    itest_run_free(&r);

    char dir[] = "/tmp/pybox-itest-lazy-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char file[sizeof dir + 8];
    snprintf(file, sizeof file, "%s/in.txt", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("seen\n", f);
    fclose(f);
    const char *args_in[] = {"exec", "--json", "--input", file, NULL};
    const char *prog = "print(open('/box/in/in.txt').read().strip())\n";
    itest_pybox(prog, strlen(prog), args_in, env, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, "file=libarchive.so"), "libarchive never loaded for a file in");
    ck_assert_msg(itest_contains(r.out, r.out_len, "seen"), "%.*s", (int)r.out_len, r.out);
    itest_run_free(&r);
    unlink(file);
    rmdir(dir);
}
END_TEST

Suite *itest_suite_exec(void)
{
    Suite *s = suite_create("exec");
    itest_tcase(s, "runs", 120,
                ITEST_TESTS(hello_exits_by_itself, traceback_is_the_programs_failure, exit_codes_pass_through,
                            host_deadline_stops_the_program, stdout_is_capped_and_counted,
                            large_output_never_stalls_the_box, leftover_processes_are_reaped,
                            forged_done_record_is_just_output, program_cannot_signal_the_init, human_receipt_is_fenced,
                            status_in_colour, libraries_opened_when_needed, closed_standard_descriptors_are_dev_null));
    return s;
}
