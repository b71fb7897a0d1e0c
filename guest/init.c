/* SPDX-License-Identifier: MIT */
/* pybox-init: the static PID 1 of every box: timer, reaper, hold-at-exit, done record.
 *
 * It trusts nothing the program does. It runs as root with nothing but CAP_KILL, while
 * the program runs as another user with no capability, so the program can neither
 * signal, renice, pin, rlimit nor trace it; it is also not dumpable. The few signals it
 * acts on are blocked and read from a signalfd, and obeyed only when sent from outside
 * the box (si_pid == 0 as seen from inside the PID namespace); every other signal keeps
 * its default action, which the kernel never delivers to a namespace's PID 1 from
 * inside, so nothing can pile up in its queue. The program's stdin is a pipe fed by
 * init, so the secret and the host's control bytes never reach it.
 * Contract: docs/guest-protocol.md. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

extern char **environ;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

/* Strict decimal: digits only, 1..max. */
static int parse_num(const char *p, const char *end, int64_t max, int64_t *out)
{
    if (p == end)
        return -1;
    int64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int parse_flag(const char *arg, const char *flag, int64_t max, int64_t *out)
{
    size_t flen = strlen(flag);
    if (strncmp(arg, flag, flen) != 0)
        return -1;
    return parse_num(arg + flen, arg + strlen(arg), max, out);
}

/* Read the hello line byte by byte so not one byte after it is consumed. Gives up at
 * the deadline: with no host, the box still ends. */
static int read_hello(char *secret, int64_t *program_len, int64_t deadline)
{
    char line[PYBOX_GUEST_HELLO_MAX];
    size_t got = 0;
    while (got < sizeof line) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        ssize_t r = read(STDIN_FILENO, line + got, 1);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return -1;
        if (line[got++] == '\n')
            break;
    }
    size_t hlen = strlen(PYBOX_GUEST_HELLO);
    if (got < hlen + PYBOX_GUEST_SECRET_HEX + 3 || line[got - 1] != '\n' ||
        memcmp(line, PYBOX_GUEST_HELLO, hlen) != 0 || line[hlen + PYBOX_GUEST_SECRET_HEX] != ' ')
        return -1;
    for (size_t i = 0; i < PYBOX_GUEST_SECRET_HEX; i++) {
        char c = line[hlen + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
    }
    const char *len_start = line + hlen + PYBOX_GUEST_SECRET_HEX + 1;
    if (parse_num(len_start, line + got - 1, PYBOX_GUEST_PROGRAM_MAX, program_len) < 0)
        return -1;
    memcpy(secret, line + hlen, PYBOX_GUEST_SECRET_HEX);
    secret[PYBOX_GUEST_SECRET_HEX] = '\0';
    explicit_bzero(line, sizeof line);
    return 0;
}

static pid_t program_pid = -1;
static int program_done = 0;
static int program_status = 0;
static unsigned reaped_others = 0;

static void note_reaped(pid_t pid, int status)
{
    if (pid == program_pid && !program_done) {
        program_done = 1;
        program_status = status;
    } else {
        reaped_others++;
    }
}

static void reap_nohang(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        note_reaped(pid, status);
    }
}

/* Kill every process in the box but this one and reap them all. kill(-1) from PID 1
 * reaches every process of the namespace; a fork racing it is caught by the next round,
 * and orphans are reparented here, so waiting until ECHILD means all are gone. */
static void kill_all_and_reap(void)
{
    for (;;) {
        int k = kill(-1, SIGKILL);
        int kerr = errno;
        for (;;) {
            int status;
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0) {
                if (errno == EINTR)
                    continue;
                break;
            }
            note_reaped(pid, status);
        }
        if (k < 0 && kerr == ESRCH)
            return;
    }
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}

/* Write all of buf to stdout before the deadline. The program may have left the pipe
 * full with nobody reading: never block past the timer. */
static void write_record(const char *buf, size_t len, int64_t deadline)
{
    int fl = fcntl(STDOUT_FILENO, F_GETFL);
    if (fl >= 0)
        (void)fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDOUT_FILENO, buf + off, len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return;
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return;
        struct pollfd pfd = {.fd = STDOUT_FILENO, .events = POLLOUT};
        (void)poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
    }
}

/* Set this process's capabilities (no libcap: a static binary calls capset itself). */
static int set_caps(uint64_t caps)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    d[0].effective = d[0].permitted = (uint32_t)caps;
    d[1].effective = d[1].permitted = (uint32_t)(caps >> 32);
    return (int)syscall(SYS_capset, &h, d);
}

static int caps_are_empty(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return 0;
    for (int i = 0; i < 2; i++)
        if (d[i].effective || d[i].permitted || d[i].inheritable)
            return 0;
    return 1;
}

static void child_exec(int stdin_pipe, uid_t uid)
{
    sigset_t none;
    sigemptyset(&none);
    if (dup2(stdin_pipe, STDIN_FILENO) < 0)
        _exit(PYBOX_GUEST_EXIT_PIPE);
    /* The program's own user: changing from root clears every capability. Check that it
     * did, and that there is no way back. */
    gid_t gid = (gid_t)uid;
    if (uid == 0) {
        /* A relaxed test box only: the program keeps root and the box's capabilities. */
    } else if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0 || getuid() != uid || geteuid() != uid ||
               getgid() != gid || getegid() != gid || setuid(0) == 0 || !caps_are_empty()) {
        say("pybox-init: cannot switch the program to uid %u: %s\n", (unsigned)uid, strerror(errno));
        _exit(PYBOX_GUEST_EXIT_PRIVS);
    }
    /* The program leads its own session and process group; the box's PID 1 stays
     * outside of it. */
    if (setsid() < 0)
        _exit(PYBOX_GUEST_EXIT_FORK);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* argv[0] absolute: Python derives sys.executable from it, and a name would be looked
     * up on PATH, where a package's script could stand in for python3. */
    char *const args[] = {PYBOX_GUEST_PYTHON, "-I", "-u", "-", NULL};
    execve(PYBOX_GUEST_PYTHON, args, environ);
    say("pybox-init: cannot start %s: %s\n", PYBOX_GUEST_PYTHON, strerror(errno));
    _exit(127);
}

int main(int argc, char **argv)
{
    int64_t t0 = now_ms();
    int64_t timer_ms, uid;
    if (argc != 3 || parse_flag(argv[1], PYBOX_GUEST_TIMER_FLAG, PYBOX_GUEST_TIMER_MAX_MS, &timer_ms) < 0 ||
        timer_ms <= 0 || parse_flag(argv[2], PYBOX_GUEST_UID_FLAG, PYBOX_GUEST_UID_MAX, &uid) < 0) {
        say("pybox-init: usage: %s %sMILLISECONDS %sUID\n", PYBOX_GUEST_INIT_PATH, PYBOX_GUEST_TIMER_FLAG,
            PYBOX_GUEST_UID_FLAG);
        return PYBOX_GUEST_EXIT_USAGE;
    }
    int64_t deadline = t0 + timer_ms;

    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN); /* writes to a closed pipe fail with EPIPE instead */
    sigset_t all;
    sigemptyset(&all);
    int wanted[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, PYBOX_GUEST_SIG_RELEASE, PYBOX_GUEST_SIG_STOP};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
        sigaddset(&all, wanted[i]);
    sigprocmask(SIG_BLOCK, &all, NULL);
    int sfd = signalfd(-1, &all, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        say("pybox-init: signalfd: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_FORK;
    }

    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    int64_t program_left;
    if (read_hello(secret, &program_left, deadline) < 0) {
        say("pybox-init: no valid hello on stdin (protocol %d)\n", PYBOX_GUEST_PROTOCOL);
        return PYBOX_GUEST_EXIT_PROTOCOL;
    }
    /* The host starts its deadline when the box runs, just before the hello: counting the
     * box's timer from the hello keeps it a full margin behind the host's deadline. A
     * hello that never comes ends the box at the first deadline above. */
    deadline = now_ms() + timer_ms;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        say("pybox-init: pipe: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_PIPE;
    }
    program_pid = fork();
    if (program_pid < 0) {
        say("pybox-init: fork: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_FORK;
    }
    if (program_pid == 0) {
        explicit_bzero(secret, sizeof secret);
        child_exec(pipefd[0], (uid_t)uid);
    }
    int64_t t_program = now_ms();
    close(pipefd[0]);
    /* Init keeps only what it needs to end the program's processes. */
    if (set_caps(1ULL << CAP_KILL) < 0)
        say("pybox-init: capset: %s\n", strerror(errno));
    int to_program = pipefd[1];
    (void)fcntl(to_program, F_SETFL, O_NONBLOCK);
    (void)fcntl(STDIN_FILENO, F_SETFL, O_NONBLOCK);
    if (program_left == 0) {
        close(to_program);
        to_program = -1;
    }

    char buf[65536];
    size_t buf_len = 0, buf_off = 0;
    int ctl_open = 1, timer_fired = 0, stopped = 0, terminate = 0, holding = 0;
    for (;;) {
        if (program_done && !holding) {
            int64_t program_ms = now_ms() - t_program;
            kill_all_and_reap();
            char rec[PYBOX_GUEST_RECORD_MAX];
            int n = snprintf(rec, sizeof rec,
                             "%s%s exit=%d signal=%d timer=%d stopped=%d program_ms=%lld reaped=%u term=%d\n",
                             PYBOX_GUEST_DONE, secret, exit_code_of(program_status),
                             WIFSIGNALED(program_status) ? WTERMSIG(program_status) : 0, timer_fired, stopped,
                             (long long)program_ms, reaped_others, terminate);
            if (n > 0 && (size_t)n < sizeof rec)
                write_record(rec, (size_t)n, deadline);
            explicit_bzero(secret, sizeof secret);
            holding = 1;
            if (timer_fired)
                return PYBOX_GUEST_EXIT_TIMER;
            if (terminate)
                return exit_code_of(program_status);
        }

        int64_t left = deadline - now_ms();
        if (left <= 0) {
            if (holding)
                return exit_code_of(program_status);
            timer_fired = 1;
            kill_all_and_reap();
            continue;
        }
        /* Read stdin only when there is room for program bytes, or for control bytes. */
        int want_in = ctl_open && (program_left == 0 || (to_program >= 0 && buf_len == 0));
        struct pollfd p[3] = {
            {.fd = sfd, .events = POLLIN},
            {.fd = want_in ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = (to_program >= 0 && buf_len > buf_off) ? to_program : -1, .events = POLLOUT},
        };
        int pr = poll(p, 3, (int)(left > 60000 ? 60000 : left));
        if (pr < 0 && errno != EINTR)
            continue;
        if (pr <= 0)
            continue;

        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            /* Only the six signals above can be pending, at most once each. */
            for (int drained = 0; drained < 16 && read(sfd, &si, sizeof si) == (ssize_t)sizeof si; drained++) {
                int sig = (int)si.ssi_signo;
                if (sig == SIGCHLD) {
                    reap_nohang();
                    continue;
                }
                /* Obey only the outside world: the engine's kill arrives with pid 0. */
                if (si.ssi_code != SI_USER || si.ssi_pid != 0)
                    continue;
                if (sig == PYBOX_GUEST_SIG_RELEASE) {
                    if (holding)
                        return exit_code_of(program_status);
                } else if (sig == PYBOX_GUEST_SIG_STOP) {
                    if (!program_done) {
                        stopped = 1;
                        kill_all_and_reap();
                    }
                } else if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
                    if (holding)
                        return exit_code_of(program_status);
                    if (terminate == 0)
                        terminate = sig;
                    (void)kill(-program_pid, sig);
                }
            }
        }

        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            size_t room = sizeof buf;
            if (program_left > 0 && (int64_t)room > program_left)
                room = (size_t)program_left;
            ssize_t r = read(STDIN_FILENO, buf, program_left > 0 ? room : sizeof buf);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                /* The host is gone (or never sent the whole program): no more commands. */
                ctl_open = 0;
                if (to_program >= 0 && buf_len == buf_off) {
                    close(to_program);
                    to_program = -1;
                }
            } else if (r > 0 && program_left > 0) {
                program_left -= r;
                buf_len = (size_t)r;
                buf_off = 0;
            } else if (r > 0) {
                for (ssize_t i = 0; i < r; i++) {
                    if (buf[i] == PYBOX_GUEST_CTL_RELEASE && holding)
                        return exit_code_of(program_status);
                    if (buf[i] == PYBOX_GUEST_CTL_STOP && !program_done) {
                        stopped = 1;
                        kill_all_and_reap();
                    }
                }
            }
        }

        if (to_program >= 0 && buf_len > buf_off && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(to_program, buf + buf_off, buf_len - buf_off);
            if (w > 0)
                buf_off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                buf_off = buf_len; /* the program stopped reading: drop the rest */
            if (buf_off == buf_len) {
                buf_len = buf_off = 0;
                if (program_left == 0 || !ctl_open) {
                    close(to_program);
                    to_program = -1;
                }
            }
        } else if (to_program >= 0 && program_left == 0 && buf_len == 0) {
            close(to_program);
            to_program = -1;
        }
    }
}
