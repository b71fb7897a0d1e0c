/* SPDX-License-Identifier: MIT */
/* The guest protocol: what the host and the guest init (PID 1 in the box) agree on.
 * Contract: docs/guest-protocol.md. Shared by guest/init.c and the host's run flow. */
#ifndef PYBOX_GUEST_PROTO_H
#define PYBOX_GUEST_PROTO_H

#include <signal.h>
#include <stdio.h>

/* The protocol's version: in the hello, the records, and every image's manifest and
 * pin, so a host and an image that disagree are refused before a run. */
#define PYBOX_GUEST_PROTOCOL 4

/* Who runs what: the box starts as root with only CAP_KILL, CAP_SETGID and CAP_SETUID
 * (and no-new-privileges). Init switches the interpreter to the run's own user (uid and
 * gid U, leased on the host for this box alone) before exec, which leaves it no
 * capability at all, and keeps only CAP_KILL for itself: so the program, running as
 * another user, cannot signal, renice, pin, limit or trace init.
 *
 * Where the init lives in every PyBox image, and how it is called:
 *   /pybox/init --timer-ms=N --program-uid=U --wait-ms=W --life-ms=L
 * N is the program's clock (a session's: the most any call may have), U the program's
 * uid and gid, W how long the box waits for a program (a session: for its next call; 0:
 * the program comes with the hello, a cold box), L a session's whole life from the hello
 * (0: not a session). All four are verified by the host in the read-back before start.
 * U = 0 (testing only, a relaxed policy verified like any argument) leaves the program
 * root with the box's capabilities, so a test can show what the switch to U prevents. */
#define PYBOX_GUEST_INIT_PATH "/pybox/init"
#define PYBOX_GUEST_TIMER_FLAG "--timer-ms="
#define PYBOX_GUEST_TIMER_MAX_MS (24LL * 3600 * 1000)
#define PYBOX_GUEST_UID_FLAG "--program-uid="
#define PYBOX_GUEST_UID_MAX 2147483646LL
#define PYBOX_GUEST_WAIT_FLAG "--wait-ms="
#define PYBOX_GUEST_LIFE_FLAG "--life-ms="
#define PYBOX_GUEST_ARGC 5
#define PYBOX_GUEST_ARG_MAX 64

/* The init's argv for these clocks and this user, as the backends give it and check it. */
static inline void pybox_guest_argv(char out[PYBOX_GUEST_ARGC][PYBOX_GUEST_ARG_MAX], long long timer_ms, unsigned uid,
                                    long long wait_ms, long long life_ms)
{
    snprintf(out[0], PYBOX_GUEST_ARG_MAX, "%s", PYBOX_GUEST_INIT_PATH);
    snprintf(out[1], PYBOX_GUEST_ARG_MAX, "%s%lld", PYBOX_GUEST_TIMER_FLAG, timer_ms);
    snprintf(out[2], PYBOX_GUEST_ARG_MAX, "%s%u", PYBOX_GUEST_UID_FLAG, uid);
    snprintf(out[3], PYBOX_GUEST_ARG_MAX, "%s%lld", PYBOX_GUEST_WAIT_FLAG, wait_ms);
    snprintf(out[4], PYBOX_GUEST_ARG_MAX, "%s%lld", PYBOX_GUEST_LIFE_FLAG, life_ms);
}

/* The interpreter: /usr/bin/python3, never looked up on PATH. A cold box runs the program
 * from its stdin (-I isolates from the environment and user site; -u keeps output flowing
 * so that what a killed program said before it died is still seen). A warm box and a
 * session run PyBox's bootstrap from the image (/pybox/bootstrap.py, read-only), which
 * imports the image's preload (/pybox/preload, one module a line) before the program
 * arrives, then takes the program on a channel init holds. */
#define PYBOX_GUEST_PYTHON "/usr/bin/python3"
#define PYBOX_GUEST_BOOTSTRAP "/pybox/bootstrap.py"
#define PYBOX_GUEST_PRELOAD "/pybox/preload"
/* The bootstrap's channel to init: descriptor 3 of the interpreter, one end of a unix
 * SOCK_SEQPACKET pair. */
#define PYBOX_GUEST_CHANNEL_FD 3

/* The box's stdin, all of it from the host:
 *   "PYBOX4 <64 lowercase hex digits>\n"     the hello: read by init, never by the program
 *   commands, read by init:
 *     "P<length>\n" <length bytes>          the program (cold and warm boxes; once)
 *     "C<length> <timer ms>\n" <bytes>      a session's next call and its own timer (at
 *                                           most N), while no call runs
 *     'S'  stop now (the host's deadline): kill every process of the box, then hold
 *     'E'  end the session: kill every process, then hold
 *     'R'  release a held box: exit with the program's status
 * End of file on stdin (the host went away) ends the control channel, not the box: the
 * box's clocks still end it. The program's own stdin is a pipe that ends after the
 * program, so it never sees the secret or the commands. */
#define PYBOX_GUEST_HELLO "PYBOX4 "
#define PYBOX_GUEST_SECRET_HEX 64
#define PYBOX_GUEST_HELLO_MAX 96
#define PYBOX_GUEST_PROGRAM_MAX (64LL * 1024 * 1024)
#define PYBOX_GUEST_CMD_MAX 48 /* a command's header line, its newline included */
/* A cold box's program of this many bytes or more is run by PyBox's runner
 * (guest/main.py, as the interpreter's -c), which reads it whole; a smaller one by
 * `python3 -I -u -`, which reads it a byte per system call but starts 0.7 ms sooner
 * (it needs no compile()). Init reads the program's header before it starts Python. */
#define PYBOX_GUEST_WHOLE_MIN 8192
#define PYBOX_GUEST_CTL_PROGRAM 'P'
#define PYBOX_GUEST_CTL_CALL 'C'
#define PYBOX_GUEST_CTL_STOP 'S'
#define PYBOX_GUEST_CTL_END 'E'
#define PYBOX_GUEST_CTL_RELEASE 'R'

/* The records init writes on the box's stdout, each one line tagged with the secret. Only
 * init knows the secret, so the program cannot forge one; and each comes where nothing of
 * the program can follow it until the host asks for more.
 *
 * ready (warm boxes and sessions, once): the interpreter is started and its preload done,
 * as the bootstrap said before any program existed; its report (said bytes, JSON) comes
 * just before the record:
 *   <said bytes>"\x1epybox-ready v4 <secret> ready_ms=T said=L\n"
 * call (sessions, after each call): the call's stdout bytes came before it, then the
 * interpreter's report of the call (L bytes, untrusted: agent code ran in that process);
 * out and err count what init relayed for the call on each stream; alive says whether the
 * interpreter still runs and the session goes on (0: the done record follows):
 *   <said bytes>"\x1epybox-call v4 <secret> call=K out=N err=M said=L call_ms=T alive=A\n"
 * done (once, last): every other process in the box is gone:
 *   "\x1epybox-done v4 <secret> exit=E signal=S timer=T stopped=X program_ms=M reaped=R
 *    term=N calls=K end=WORD\n"
 * term: the termination signal sent from outside the box (the engine's stop), 0 if none.
 * end: program (it ended by itself), timer, stopped, term, closed (the session's end was
 * asked), idle (no call came in time), life (the session's life ran out), waited (a warm
 * box's program never came), lost (the bootstrap's channel closed). */
#define PYBOX_GUEST_READY "\x1epybox-ready v4 "
#define PYBOX_GUEST_CALL "\x1epybox-call v4 "
#define PYBOX_GUEST_DONE "\x1epybox-done v4 "
#define PYBOX_GUEST_RECORD_MAX 256
/* The bootstrap's report of its preload or of a call: init passes at most this much. */
#define PYBOX_GUEST_SAID_MAX 2048

/* The same commands as signals from outside the box (the engine's kill; si_pid == 0
 * inside the box), for when the control channel is gone. The same signals sent from
 * inside the box are ignored. */
#define PYBOX_GUEST_SIG_RELEASE SIGUSR1 /* held box: exit with the program's status */
#define PYBOX_GUEST_SIG_STOP SIGUSR2    /* host deadline: kill the program, then hold */

/* init's own failures (the program never ran). */
#define PYBOX_GUEST_EXIT_USAGE 120    /* bad argv */
#define PYBOX_GUEST_EXIT_PROTOCOL 121 /* no valid hello on stdin, or a command out of place */
#define PYBOX_GUEST_EXIT_PIPE 123     /* could not make the program's stdin */
#define PYBOX_GUEST_EXIT_PRIVS 119    /* could not switch the program to its user */
#define PYBOX_GUEST_EXIT_FORK 122     /* could not start the program */
#define PYBOX_GUEST_EXIT_WAITED 118   /* a warm box's program never came */
#define PYBOX_GUEST_EXIT_TIMER 137    /* the box timer ended a running program */

#endif
