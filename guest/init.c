/* SPDX-License-Identifier: MIT */
/* pybox-init: the static PID 1 of every box: timer, reaper, hold-at-exit, the records.
 *
 * It trusts nothing the program does. It runs as root with nothing but CAP_KILL, while
 * the interpreter runs as another user with no capability, so the program can neither
 * signal, renice, pin, rlimit nor trace it; it is also not dumpable. The few signals it
 * acts on are blocked and read from a signalfd, and obeyed only when sent from outside
 * the box (si_pid == 0 as seen from inside the PID namespace); every other signal keeps
 * its default action, which the kernel never delivers to a namespace's PID 1 from
 * inside, so nothing can pile up in its queue. The interpreter's stdin is a pipe fed by
 * init, so the secret and the host's commands never reach it.
 *
 * Three kinds of box, one way of starting the interpreter: a cold box starts
 * `python3 -I -u -` (or, for a large program, PyBox's runner, which reads it whole) and
 * feeds it the program that came with the hello; a warm box starts
 * PyBox's bootstrap, which imports the image's preload and says so on its channel
 * (descriptor 3), then feeds it the program when the host sends one; a session starts
 * the bootstrap and hands it each call on that channel with fresh pipes of its own for
 * the call's program, stdout and stderr, which init relays and counts: what one call
 * printed can never be taken for another's, whatever the program does.
 * Contract: docs/guest-protocol.md. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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

/* Strict decimal: digits only, at most max. */
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

/* Read one line from stdin byte by byte, so not one byte after it is consumed. Gives up
 * at the deadline: with no host, the box still ends. Returns its length (its newline
 * included), or -1. */
static ssize_t read_line(char *line, size_t max, int64_t deadline)
{
    size_t got = 0;
    while (got < max) {
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
            return (ssize_t)got;
    }
    return -1;
}

static int read_hello(char *secret, int64_t deadline)
{
    char line[PYBOX_GUEST_HELLO_MAX];
    ssize_t n = read_line(line, sizeof line, deadline);
    size_t got = n < 0 ? 0 : (size_t)n;
    size_t hlen = strlen(PYBOX_GUEST_HELLO);
    bool ok = got == hlen + PYBOX_GUEST_SECRET_HEX + 1 && memcmp(line, PYBOX_GUEST_HELLO, hlen) == 0;
    for (size_t i = 0; ok && i < PYBOX_GUEST_SECRET_HEX; i++) {
        char c = line[hlen + i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    }
    if (!ok) {
        explicit_bzero(line, sizeof line); /* whatever came, nothing of it stays */
        return -1;
    }
    memcpy(secret, line + hlen, PYBOX_GUEST_SECRET_HEX);
    secret[PYBOX_GUEST_SECRET_HEX] = '\0';
    explicit_bzero(line, sizeof line);
    return 0;
}

/* ---- processes ---- */

static pid_t program_pid = -1; /* the interpreter */
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

/* Write all of buf to fd before the deadline, a pipe's atomic amount at a time once poll
 * says there is room: the reader (the host) may stop reading, and the interpreter may
 * share the descriptor (so it is never made non-blocking under it): never block past the
 * deadline. Returns 0 when all was written. */
static int write_all_fd(int fd, const char *buf, size_t len, int64_t deadline)
{
    size_t off = 0;
    while (off < len) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        if (pfd.revents & (POLLERR | POLLNVAL))
            return -1;
        size_t n = len - off < PIPE_BUF ? len - off : PIPE_BUF;
        ssize_t w = write(fd, buf + off, n);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
    }
    return 0;
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

typedef enum { MODE_COLD, MODE_WARM, MODE_SESSION } box_mode_t;

/* The runner of a large cold program and of a warm box's (guest/main.py, linked in by
 * main_blob.S). */
extern const char pybox_guest_main_src[];

/* The interpreter's descriptors: 0 its stdin, 1 and 2 its stdout and stderr (-1: keep
 * the box's), 3 the bootstrap's channel (-1: none). Every other descriptor of init is
 * close-on-exec. A cold box's program is read whole by PyBox's runner when read_whole. */
static void child_exec(int fd0, int fd1, int fd2, int chan, uid_t uid, box_mode_t mode, bool read_whole)
{
    sigset_t none;
    sigemptyset(&none);
    /* Moved above the standard numbers first, so no dup2 below overwrites a source; the
     * moved copies close at exec (the dup2 copies do not), so the program holds only its
     * own descriptors. */
    int src[4] = {fd0, fd1, fd2, chan};
    for (int i = 0; i < 4; i++) {
        if (src[i] >= 0 && src[i] < 10 && src[i] != i) {
            int moved = fcntl(src[i], F_DUPFD_CLOEXEC, 10);
            if (moved < 0)
                _exit(PYBOX_GUEST_EXIT_PIPE);
            src[i] = moved;
        }
    }
    for (int i = 0; i < 4; i++) {
        if (src[i] >= 0 && src[i] != i && dup2(src[i], i) < 0)
            _exit(PYBOX_GUEST_EXIT_PIPE);
        if (src[i] == i)
            (void)fcntl(i, F_SETFD, 0);
    }
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
    /* The interpreter leads its own session and process group; the box's PID 1 stays
     * outside of it. */
    if (setsid() < 0)
        _exit(PYBOX_GUEST_EXIT_FORK);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* argv[0] absolute: Python derives sys.executable from it, and a name would be looked
     * up on PATH, where a package's script could stand in for python3. */
    char *const cold[] = {PYBOX_GUEST_PYTHON, "-I", "-u", "-", NULL};
    char *const whole[] = {PYBOX_GUEST_PYTHON, "-I", "-u", "-c", (char *)pybox_guest_main_src, NULL};
    char *const warm[] = {PYBOX_GUEST_PYTHON,           "-I", "-u", PYBOX_GUEST_BOOTSTRAP, "warm",
                          (char *)pybox_guest_main_src, NULL};
    char *const session[] = {PYBOX_GUEST_PYTHON, "-I", "-u", PYBOX_GUEST_BOOTSTRAP, "session", NULL};
    execve(PYBOX_GUEST_PYTHON,
           mode == MODE_COLD   ? (read_whole ? whole : cold)
           : mode == MODE_WARM ? warm
                               : session,
           environ);
    say("pybox-init: cannot start %s: %s\n", PYBOX_GUEST_PYTHON, strerror(errno));
    _exit(127);
}

/* ---- the state of the box ---- */

typedef enum { PH_PRELOAD, PH_WAIT, PH_RUN, PH_CALL, PH_HOLD } phase_t;

/* One of a call's output streams, relayed to the box's own: counted, and never read
 * further than the box's stream takes. */
typedef struct {
    int fd;  /* the call's pipe (read end); -1 once closed */
    int dst; /* STDOUT_FILENO or STDERR_FILENO */
    char buf[16384];
    size_t len, off;
    uint64_t count;
} relay_t;

static struct {
    box_mode_t mode;
    phase_t phase;
    char secret[PYBOX_GUEST_SECRET_HEX + 1];
    int64_t timer_ms, wait_ms, life_ms;
    int64_t t_hello, t_fork, t_program; /* when the hello came, the interpreter started, the program came */
    int64_t run_end;                    /* the program's timer (cold, warm) */
    int64_t idle_end, life_end;         /* a warm box's wait or a session's idle limit; a session's life */
    int64_t call_end, hold_end;
    int chan;       /* init's end of the bootstrap's channel; -1 when none */
    int prog_stdin; /* the interpreter's stdin (cold, warm): write end; -1 once closed */
    /* The host's commands on stdin. */
    bool ctl_open;
    char hdr[PYBOX_GUEST_CMD_MAX];
    size_t hdr_len;
    bool in_hdr;
    int64_t body_left;
    int body_fd; /* where body bytes go */
    char buf[65536];
    size_t buf_len, buf_off;
    bool program_given;
    /* A session's call. */
    unsigned calls;
    int64_t t_call;
    int call_in; /* write end of the call's program pipe */
    relay_t out, err;
    /* How the box ends. */
    int timer_fired, stopped, terminate, holding;
    const char *end_word; /* set when the box's end is its own (closed, idle, life, waited, lost) */
} B;

/* The end of the box: kill everything, reap it. */
static void end_with(const char *word)
{
    if (B.end_word == NULL)
        B.end_word = word;
    kill_all_and_reap();
}

static void stop_now(void)
{
    if (program_done || B.phase == PH_HOLD)
        return;
    B.stopped = 1;
    kill_all_and_reap();
}

/* The interpreter's fresh pipes for a call. Returns -1 (and leaves nothing open) when
 * they cannot be made. */
static int start_call(int64_t len, int64_t timer)
{
    int in_p[2], out_p[2], err_p[2];
    if (pipe2(in_p, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(out_p, O_CLOEXEC) < 0) {
        close(in_p[0]);
        close(in_p[1]);
        return -1;
    }
    if (pipe2(err_p, O_CLOEXEC) < 0) {
        close(in_p[0]);
        close(in_p[1]);
        close(out_p[0]);
        close(out_p[1]);
        return -1;
    }
    B.calls++;
    char msg[32];
    int n = snprintf(msg, sizeof msg, "call %u", B.calls);
    int fds[3] = {in_p[0], out_p[1], err_p[1]};
    char cbuf[CMSG_SPACE(sizeof fds)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {.iov_base = msg, .iov_len = (size_t)n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t s = sendmsg(B.chan, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(in_p[0]);
    close(out_p[1]);
    close(err_p[1]);
    if (s != n) {
        close(in_p[1]);
        close(out_p[0]);
        close(err_p[0]);
        return -1;
    }
    (void)fcntl(in_p[1], F_SETFL, O_NONBLOCK);
    (void)fcntl(out_p[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(err_p[0], F_SETFL, O_NONBLOCK);
    B.call_in = in_p[1];
    B.out = (relay_t){.fd = out_p[0], .dst = STDOUT_FILENO};
    B.err = (relay_t){.fd = err_p[0], .dst = STDERR_FILENO};
    B.t_call = now_ms();
    int64_t t = timer < B.timer_ms ? timer : B.timer_ms;
    B.call_end = B.t_call + t;
    B.phase = PH_CALL;
    B.body_fd = B.call_in;
    B.body_left = len;
    if (len == 0) {
        close(B.call_in);
        B.call_in = B.body_fd = -1;
    }
    return 0;
}

/* Move what a call's stream holds to the box's stream, reading at most budget more
 * bytes: what was said before the call's end is the call's. */
static void relay_drain(relay_t *r, int64_t deadline, size_t budget)
{
    for (;;) {
        if (r->len > r->off) {
            if (write_all_fd(r->dst, r->buf + r->off, r->len - r->off, deadline) < 0) {
                r->len = r->off = 0;
                return;
            }
            r->len = r->off = 0;
        }
        if (r->fd < 0 || budget == 0)
            return;
        ssize_t got = read(r->fd, r->buf, sizeof r->buf < budget ? sizeof r->buf : budget);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return;
        r->len = (size_t)got;
        r->count += (uint64_t)got;
        budget -= (size_t)got;
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A call is over: what its streams hold is relayed, they are closed (a writer left in
 * the box gets EPIPE from now on), then the interpreter's report and the call record.
 * alive: the interpreter said it is done with the call and still runs. */
static void finish_call(const char *said, size_t said_len, int alive)
{
    int64_t deadline = B.phase == PH_CALL && B.call_end < B.life_end ? B.call_end : B.life_end;
    if (deadline < now_ms() + 1000)
        deadline = now_ms() + 1000;
    relay_drain(&B.out, deadline, 1u << 20);
    relay_drain(&B.err, deadline, 1u << 20);
    close_fd(&B.out.fd);
    close_fd(&B.err.fd);
    close_fd(&B.call_in);
    /* What is left of the call's program is still the host's to send and init's to read
     * as the body it is, never as commands: it is discarded as it comes (body_fd -1). */
    B.body_fd = -1;
    B.buf_len = B.buf_off = 0;
    char rec[PYBOX_GUEST_RECORD_MAX];
    int n = snprintf(rec, sizeof rec, "%s%s call=%u out=%llu err=%llu said=%zu call_ms=%lld alive=%d\n",
                     PYBOX_GUEST_CALL, B.secret, B.calls, (unsigned long long)B.out.count,
                     (unsigned long long)B.err.count, said_len, (long long)(now_ms() - B.t_call), alive);
    if (said_len > 0)
        (void)write_all_fd(STDOUT_FILENO, said, said_len, deadline);
    if (n > 0 && (size_t)n < sizeof rec)
        (void)write_all_fd(STDOUT_FILENO, rec, (size_t)n, deadline);
    B.phase = PH_WAIT;
    int64_t now = now_ms();
    B.idle_end = now + B.wait_ms;
}

/* The bootstrap's channel has something: its readiness, or the end of a call. Anything
 * else, or anything out of place, is dropped; descriptors sent along are closed by the
 * kernel (no room is given for them). */
static void channel_in(void)
{
    char msg[PYBOX_GUEST_SAID_MAX + 32];
    ssize_t r = recv(B.chan, msg, sizeof msg, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        /* The interpreter closed its end: a session can take no more calls. */
        close_fd(&B.chan);
        if (B.mode == MODE_SESSION && !program_done)
            end_with("lost");
        return;
    }
    size_t len = (size_t)r > PYBOX_GUEST_SAID_MAX + 31 ? PYBOX_GUEST_SAID_MAX + 31 : (size_t)r;
    if (B.phase == PH_PRELOAD && len >= 6 && memcmp(msg, "ready ", 6) == 0) {
        size_t said = len - 6 > PYBOX_GUEST_SAID_MAX ? PYBOX_GUEST_SAID_MAX : len - 6;
        char rec[PYBOX_GUEST_RECORD_MAX];
        int n = snprintf(rec, sizeof rec, "%s%s ready_ms=%lld said=%zu\n", PYBOX_GUEST_READY, B.secret,
                         (long long)(now_ms() - B.t_fork), said);
        int64_t deadline = B.idle_end < B.life_end ? B.idle_end : B.life_end;
        if (said > 0)
            (void)write_all_fd(STDOUT_FILENO, msg + 6, said, deadline);
        if (n > 0 && (size_t)n < sizeof rec)
            (void)write_all_fd(STDOUT_FILENO, rec, (size_t)n, deadline);
        B.phase = PH_WAIT;
        if (B.mode == MODE_WARM)
            close_fd(&B.chan); /* the program never gets to talk to init */
        return;
    }
    /* The bootstrap reads a call's whole program before it runs it: a done while init
     * still passes the program on (its pipe open) is not the bootstrap's but something the
     * session's processes wrote on the channel, and it is dropped. Taken, it would have
     * ended the call with the rest of its program still to come. */
    if (B.phase == PH_CALL && B.call_in < 0) {
        char want[32];
        int wn = snprintf(want, sizeof want, "done %u ", B.calls);
        if (wn > 0 && len >= (size_t)wn && memcmp(msg, want, (size_t)wn) == 0) {
            size_t said = len - (size_t)wn > PYBOX_GUEST_SAID_MAX ? PYBOX_GUEST_SAID_MAX : len - (size_t)wn;
            finish_call(msg + wn, said, 1);
        }
    }
}

/* The program's header (P) is read: its bytes go to the interpreter's stdin. A warm
 * box's program clock starts here. */
static int take_program(int64_t len)
{
    if (B.mode == MODE_SESSION || B.program_given || B.phase != PH_WAIT)
        return -1;
    B.program_given = true;
    B.t_program = now_ms();
    if (B.mode == MODE_WARM)
        B.run_end = B.t_program + B.timer_ms; /* counted from the program's arrival */
    B.phase = PH_RUN;
    B.body_fd = B.prog_stdin;
    B.body_left = len;
    if (len == 0)
        close_fd(&B.prog_stdin);
    return 0;
}

/* A command's header is complete (its newline read): P or C. Returns -1 when it is out
 * of place or malformed: the host and this init disagree, and the box ends. */
static int command(void)
{
    char kind = B.hdr[0];
    const char *p = B.hdr + 1, *end = B.hdr + B.hdr_len - 1; /* without the newline */
    if (kind == PYBOX_GUEST_CTL_PROGRAM) {
        int64_t len;
        if (B.mode != MODE_WARM || parse_num(p, end, PYBOX_GUEST_PROGRAM_MAX, &len) < 0)
            return -1; /* a cold box's came before its interpreter started */
        return take_program(len);
    }
    if (kind == PYBOX_GUEST_CTL_CALL) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        int64_t len, timer;
        if (B.mode != MODE_SESSION || B.phase != PH_WAIT || sp == NULL || B.chan < 0 ||
            parse_num(p, sp, PYBOX_GUEST_PROGRAM_MAX, &len) < 0 ||
            parse_num(sp + 1, end, PYBOX_GUEST_TIMER_MAX_MS, &timer) < 0 || timer <= 0)
            return -1;
        if (start_call(len, timer) < 0)
            end_with("lost");
        return 0;
    }
    return -1;
}

/* Bytes from the host: a body's bytes, or commands. Returns -1 on a protocol error. */
static int stdin_in(void)
{
    if (B.body_left > 0) {
        size_t room = sizeof B.buf;
        if ((int64_t)room > B.body_left)
            room = (size_t)B.body_left;
        ssize_t r = read(STDIN_FILENO, B.buf, room);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (r <= 0) {
            /* The host is gone (or never sent the whole body): no more commands. */
            B.ctl_open = false;
            B.body_left = 0;
            if (B.buf_len == B.buf_off) {
                if (B.body_fd == B.prog_stdin)
                    close_fd(&B.prog_stdin);
                else if (B.body_fd == B.call_in)
                    close_fd(&B.call_in);
                B.body_fd = -1;
            }
            return 0;
        }
        B.body_left -= r;
        if (B.body_fd < 0)
            return 0; /* the rest of a body whose call has ended: read and dropped */
        B.buf_len = (size_t)r;
        B.buf_off = 0;
        return 0;
    }
    char c;
    ssize_t r = read(STDIN_FILENO, &c, 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (r <= 0) {
        B.ctl_open = false;
        return 0;
    }
    if (B.in_hdr) {
        if (B.hdr_len + 1 >= sizeof B.hdr)
            return -1;
        B.hdr[B.hdr_len++] = c;
        if (c != '\n')
            return 0;
        B.in_hdr = false;
        return command();
    }
    switch (c) {
    case PYBOX_GUEST_CTL_PROGRAM:
    case PYBOX_GUEST_CTL_CALL:
        B.in_hdr = true;
        B.hdr[0] = c;
        B.hdr_len = 1;
        return 0;
    case PYBOX_GUEST_CTL_RELEASE:
        if (B.holding)
            exit(B.mode == MODE_SESSION && B.end_word != NULL ? 0 : exit_code_of(program_status));
        return 0;
    case PYBOX_GUEST_CTL_STOP:
        stop_now();
        return 0;
    case PYBOX_GUEST_CTL_END:
        if (B.mode == MODE_SESSION && B.phase != PH_CALL && !program_done)
            end_with("closed");
        else if (B.mode == MODE_SESSION)
            stop_now();
        return 0;
    }
    return 0; /* anything else is not a command */
}

/* The body's bytes go to the interpreter's stdin (cold, warm) or the call's program pipe. */
static void body_out(void)
{
    if (B.body_fd < 0 || B.buf_len == B.buf_off)
        return;
    ssize_t w = write(B.body_fd, B.buf + B.buf_off, B.buf_len - B.buf_off);
    if (w > 0)
        B.buf_off += (size_t)w;
    else if (w < 0 && errno != EAGAIN && errno != EINTR)
        B.buf_off = B.buf_len; /* the program stopped reading: drop the rest */
    if (B.buf_off == B.buf_len) {
        B.buf_len = B.buf_off = 0;
        if (B.body_left == 0 || !B.ctl_open) {
            if (B.body_fd == B.prog_stdin)
                close_fd(&B.prog_stdin);
            else if (B.body_fd == B.call_in)
                close_fd(&B.call_in);
            B.body_fd = -1;
        }
    }
}

/* The interpreter has ended (by itself, or killed by init). The done record is the last
 * thing on stdout; then the box holds until released, unless its own clock ended it. */
static int end_box(void)
{
    if (B.phase == PH_CALL) {
        kill_all_and_reap(); /* nothing else may hold the call's pipes */
        finish_call(NULL, 0, 0);
    }
    int64_t program_ms = now_ms() - (B.mode == MODE_SESSION || B.t_program == 0 ? B.t_fork : B.t_program);
    kill_all_and_reap();
    const char *word = B.timer_fired ? "timer"
                       : B.stopped   ? "stopped"
                       : B.terminate ? "term"
                       : B.end_word  ? B.end_word
                                     : "program";
    if (B.mode == MODE_WARM && !B.program_given && B.end_word != NULL)
        word = "waited";
    char rec[PYBOX_GUEST_RECORD_MAX];
    int n = snprintf(rec, sizeof rec,
                     "%s%s exit=%d signal=%d timer=%d stopped=%d program_ms=%lld reaped=%u term=%d calls=%u end=%s\n",
                     PYBOX_GUEST_DONE, B.secret, exit_code_of(program_status),
                     WIFSIGNALED(program_status) ? WTERMSIG(program_status) : 0, B.timer_fired, B.stopped,
                     (long long)program_ms, reaped_others, B.terminate,
                     B.mode == MODE_SESSION ? B.calls : (B.program_given ? 1u : 0u), word);
    /* Nothing in the box shares stdout any more: never block on it past the clocks. */
    int fl = fcntl(STDOUT_FILENO, F_GETFL);
    if (fl >= 0)
        (void)fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK);
    int64_t now = now_ms();
    B.hold_end = B.mode == MODE_SESSION || !B.program_given ? now + B.timer_ms : B.run_end;
    if (B.hold_end < now + 1000)
        B.hold_end = now + 1000;
    if (n > 0 && (size_t)n < sizeof rec)
        (void)write_all_fd(STDOUT_FILENO, rec, (size_t)n, B.hold_end);
    explicit_bzero(B.secret, sizeof B.secret);
    B.holding = 1;
    B.phase = PH_HOLD;
    if (B.timer_fired || strcmp(word, "life") == 0)
        return PYBOX_GUEST_EXIT_TIMER;
    if (strcmp(word, "waited") == 0)
        return PYBOX_GUEST_EXIT_WAITED;
    if (B.terminate)
        return exit_code_of(program_status);
    return -1;
}

/* What the box waits for now, and until when. */
static int64_t deadline_now(void)
{
    switch (B.phase) {
    case PH_PRELOAD:
    case PH_WAIT:
        if (B.mode == MODE_COLD)
            return B.run_end;
        return B.idle_end < B.life_end ? B.idle_end : B.life_end;
    case PH_RUN:
        return B.run_end;
    case PH_CALL:
        return B.call_end < B.life_end ? B.call_end : B.life_end;
    case PH_HOLD:
        return B.hold_end;
    }
    return B.run_end;
}

static void deadline_passed(int64_t now)
{
    switch (B.phase) {
    case PH_PRELOAD:
    case PH_WAIT:
        if (B.mode == MODE_COLD) {
            B.timer_fired = 1;
            kill_all_and_reap();
        } else if (B.mode == MODE_WARM) {
            end_with("waited");
        } else {
            end_with(now >= B.life_end ? "life" : "idle");
        }
        return;
    case PH_RUN:
        B.timer_fired = 1;
        kill_all_and_reap();
        return;
    case PH_CALL:
        if (now >= B.life_end && B.life_end <= B.call_end)
            end_with("life");
        else {
            B.timer_fired = 1;
            kill_all_and_reap();
        }
        return;
    case PH_HOLD:
        exit(B.mode == MODE_SESSION && B.end_word != NULL ? 0 : exit_code_of(program_status));
    }
}

/* A signal from outside the box, as the engine sends it. */
static void signal_in(const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;
    if (sig == PYBOX_GUEST_SIG_RELEASE) {
        if (B.holding)
            exit(B.mode == MODE_SESSION && B.end_word != NULL ? 0 : exit_code_of(program_status));
    } else if (sig == PYBOX_GUEST_SIG_STOP) {
        stop_now();
    } else if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
        if (B.holding)
            exit(exit_code_of(program_status));
        if (B.terminate == 0)
            B.terminate = sig;
        (void)kill(-program_pid, sig);
    }
}

int main(int argc, char **argv)
{
    int64_t t0 = now_ms();
    int64_t uid;
    if (argc != PYBOX_GUEST_ARGC ||
        parse_flag(argv[1], PYBOX_GUEST_TIMER_FLAG, PYBOX_GUEST_TIMER_MAX_MS, &B.timer_ms) < 0 || B.timer_ms <= 0 ||
        parse_flag(argv[2], PYBOX_GUEST_UID_FLAG, PYBOX_GUEST_UID_MAX, &uid) < 0 ||
        parse_flag(argv[3], PYBOX_GUEST_WAIT_FLAG, PYBOX_GUEST_TIMER_MAX_MS, &B.wait_ms) < 0 ||
        parse_flag(argv[4], PYBOX_GUEST_LIFE_FLAG, PYBOX_GUEST_TIMER_MAX_MS, &B.life_ms) < 0 ||
        (B.life_ms > 0 && B.wait_ms == 0)) {
        say("pybox-init: usage: %s %sMILLISECONDS %sUID %sMILLISECONDS %sMILLISECONDS\n", PYBOX_GUEST_INIT_PATH,
            PYBOX_GUEST_TIMER_FLAG, PYBOX_GUEST_UID_FLAG, PYBOX_GUEST_WAIT_FLAG, PYBOX_GUEST_LIFE_FLAG);
        return PYBOX_GUEST_EXIT_USAGE;
    }
    B.mode = B.wait_ms == 0 ? MODE_COLD : B.life_ms == 0 ? MODE_WARM : MODE_SESSION;
    B.chan = B.prog_stdin = B.call_in = B.body_fd = -1;
    B.out.fd = B.err.fd = -1;
    B.ctl_open = true;

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

    if (read_hello(B.secret, t0 + B.timer_ms) < 0) {
        say("pybox-init: no valid hello on stdin (protocol %d)\n", PYBOX_GUEST_PROTOCOL);
        return PYBOX_GUEST_EXIT_PROTOCOL;
    }
    /* The host starts its clock when the box runs, just before the hello: counting the
     * box's clocks from the hello keeps them a full margin behind the host's. A hello that
     * never comes ends the box at the first deadline above. */
    B.t_hello = now_ms();
    /* A cold box's program comes with the hello: its length chooses how Python reads it. */
    int64_t cold_len = -1;
    if (B.mode == MODE_COLD) {
        char hdr[PYBOX_GUEST_CMD_MAX];
        ssize_t n = read_line(hdr, sizeof hdr, t0 + B.timer_ms);
        if (n < 2 || hdr[0] != PYBOX_GUEST_CTL_PROGRAM ||
            parse_num(hdr + 1, hdr + n - 1, PYBOX_GUEST_PROGRAM_MAX, &cold_len) < 0) {
            say("pybox-init: no valid program header after the hello\n");
            return PYBOX_GUEST_EXIT_PROTOCOL;
        }
    }
    B.run_end = B.t_hello + B.timer_ms;
    B.idle_end = B.t_hello + B.wait_ms;
    B.life_end = B.mode == MODE_SESSION ? B.t_hello + B.life_ms : INT64_MAX;

    /* The interpreter's descriptors (child_exec): cold and warm boxes give it a pipe as
     * stdin and share the box's stdout and stderr; a session gives it /dev/null for all
     * three and a fresh set of pipes per call. */
    int pipefd[2] = {-1, -1}, chan[2] = {-1, -1}, null_fd = -1;
    if (B.mode != MODE_SESSION && pipe2(pipefd, O_CLOEXEC) < 0) {
        say("pybox-init: pipe: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_PIPE;
    }
    if (B.mode != MODE_COLD && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0) {
        say("pybox-init: socketpair: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_PIPE;
    }
    if (B.mode == MODE_SESSION && (null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
        say("pybox-init: /dev/null: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_PIPE;
    }
    B.t_fork = now_ms();
    program_pid = fork();
    if (program_pid < 0) {
        say("pybox-init: fork: %s\n", strerror(errno));
        return PYBOX_GUEST_EXIT_FORK;
    }
    if (program_pid == 0) {
        explicit_bzero(B.secret, sizeof B.secret);
        if (B.mode == MODE_SESSION)
            child_exec(null_fd, null_fd, null_fd, chan[1], (uid_t)uid, B.mode, false);
        child_exec(pipefd[0], -1, -1, chan[1], (uid_t)uid, B.mode, cold_len >= PYBOX_GUEST_WHOLE_MIN);
    }
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (chan[1] >= 0)
        close(chan[1]);
    if (null_fd >= 0)
        close(null_fd);
    B.prog_stdin = pipefd[1];
    B.chan = chan[0];
    B.phase = B.mode == MODE_COLD ? PH_WAIT : PH_PRELOAD;
    if (B.mode == MODE_COLD)
        (void)take_program(cold_len);
    /* Init keeps only what it needs to end the program's processes. */
    if (set_caps(1ULL << CAP_KILL) < 0)
        say("pybox-init: capset: %s\n", strerror(errno));
    if (B.prog_stdin >= 0)
        (void)fcntl(B.prog_stdin, F_SETFL, O_NONBLOCK);
    (void)fcntl(STDIN_FILENO, F_SETFL, O_NONBLOCK);

    for (;;) {
        if (program_done && !B.holding) {
            int rc = end_box();
            if (rc >= 0)
                return rc;
        }
        int64_t now = now_ms();
        int64_t deadline = deadline_now();
        if (now >= deadline) {
            deadline_passed(now);
            continue;
        }
        int64_t left = deadline - now;
        /* Stdin: never during the preload (the host sends nothing then); a body's bytes only
         * when the last ones were passed on. */
        bool want_in =
            B.ctl_open && B.phase != PH_PRELOAD && (B.body_left == 0 || B.body_fd < 0 || B.buf_len == B.buf_off);
        bool calling = B.phase == PH_CALL;
        struct pollfd p[8] = {
            {.fd = sfd, .events = POLLIN},
            {.fd = want_in ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = (B.body_fd >= 0 && B.buf_len > B.buf_off) ? B.body_fd : -1, .events = POLLOUT},
            {.fd = B.chan, .events = POLLIN},
            {.fd = calling && B.out.len == 0 ? B.out.fd : -1, .events = POLLIN},
            {.fd = calling && B.err.len == 0 ? B.err.fd : -1, .events = POLLIN},
            {.fd = calling && B.out.len > B.out.off ? STDOUT_FILENO : -1, .events = POLLOUT},
            {.fd = calling && B.err.len > B.err.off ? STDERR_FILENO : -1, .events = POLLOUT},
        };
        int pr = poll(p, 8, (int)(left > 60000 ? 60000 : left));
        if (pr <= 0)
            continue;

        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            /* Only the six signals above can be pending, at most once each. */
            for (int drained = 0; drained < 16 && read(sfd, &si, sizeof si) == (ssize_t)sizeof si; drained++) {
                if (si.ssi_signo == SIGCHLD) {
                    reap_nohang();
                    continue;
                }
                /* Obey only the outside world: the engine's kill arrives with pid 0. */
                if (si.ssi_code == SI_USER && si.ssi_pid == 0)
                    signal_in(&si);
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (stdin_in() < 0) {
                say("pybox-init: a command out of place on stdin (protocol %d)\n", PYBOX_GUEST_PROTOCOL);
                kill_all_and_reap();
                return PYBOX_GUEST_EXIT_PROTOCOL;
            }
        }
        if (p[2].revents & (POLLOUT | POLLERR | POLLHUP))
            body_out();
        else if (B.body_fd >= 0 && B.body_left == 0 && B.buf_len == B.buf_off) {
            if (B.body_fd == B.prog_stdin)
                close_fd(&B.prog_stdin);
            else if (B.body_fd == B.call_in)
                close_fd(&B.call_in);
            B.body_fd = -1;
        }
        if (B.chan >= 0 && (p[3].revents & (POLLIN | POLLHUP | POLLERR)))
            channel_in();
        /* A call's output, passed on as the box's stream takes it. */
        relay_t *rl[2] = {&B.out, &B.err};
        for (int i = 0; i < 2 && B.phase == PH_CALL; i++) {
            relay_t *r = rl[i];
            if (r->fd >= 0 && r->len == 0 && (p[4 + i].revents & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t got = read(r->fd, r->buf, sizeof r->buf);
                if (got > 0) {
                    r->len = (size_t)got;
                    r->off = 0;
                    r->count += (uint64_t)got;
                } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                    close_fd(&r->fd);
                }
            }
            if (r->len > r->off && (p[6 + i].revents & (POLLOUT | POLLERR | POLLHUP))) {
                size_t n = r->len - r->off < PIPE_BUF ? r->len - r->off : PIPE_BUF;
                ssize_t w = write(r->dst, r->buf + r->off, n);
                if (w > 0)
                    r->off += (size_t)w;
                else if (w < 0 && errno != EAGAIN && errno != EINTR)
                    r->off = r->len; /* the host no longer reads: dropped, still counted */
                if (r->off == r->len)
                    r->len = r->off = 0;
            }
        }
    }
}
