/* SPDX-License-Identifier: MIT */
/* The guest protocol: what the host and the guest init (PID 1 in the box) agree on.
 * Contract: docs/guest-protocol.md. Shared by guest/init.c and the host's run flow. */
#ifndef PYBOX_GUEST_PROTO_H
#define PYBOX_GUEST_PROTO_H

#include <signal.h>

/* The protocol's version: in the hello, the done record, and every image's manifest
 * and pin, so a host and an image that disagree are refused before a run. */
#define PYBOX_GUEST_PROTOCOL 3

/* Who runs what: the box starts as root with only CAP_KILL, CAP_SETGID and CAP_SETUID
 * (and no-new-privileges). Init switches the program to the run's own user (uid and gid
 * U, leased on the host for this box alone) before exec, which leaves the program no
 * capability at all, and keeps only CAP_KILL for itself: so the program, running as
 * another user, cannot signal, renice, pin, limit or trace init.
 *
 * Where the init lives in every PyBox image, and how it is called:
 *   /pybox/init --timer-ms=N --program-uid=U
 * N is the box's own clock, U the program's uid and gid; both are verified by the host in
 * the read-back before start. U = 0 (testing only, a relaxed policy verified like any
 * argument) leaves the program root with the box's capabilities, so a test can show what
 * the switch to U prevents. */
#define PYBOX_GUEST_INIT_PATH "/pybox/init"
#define PYBOX_GUEST_TIMER_FLAG "--timer-ms="
#define PYBOX_GUEST_TIMER_MAX_MS (24LL * 3600 * 1000)
#define PYBOX_GUEST_UID_FLAG "--program-uid="
#define PYBOX_GUEST_UID_MAX 2147483646LL

/* The program: run from the box's standard input, never from a file or a command line.
 * -I isolates from the environment and user site; -u keeps output flowing so that what
 * a killed program said before it died is still seen. */
#define PYBOX_GUEST_PYTHON "/usr/bin/python3"

/* The box's stdin, all of it from the host:
 *   "PYBOX3 <64 lowercase hex digits> <program length>\n"   read by init, never by the program
 *   <program length bytes>                                   copied by init to the program
 *   control bytes                                            read by init:
 *       'S' stop the program now and hold (the host's deadline)
 *       'R' release a held box: exit with the program's status
 * End of file on stdin (the host went away) ends the control channel, not the box: the
 * box's timer still ends it. The program's own stdin is a pipe that ends after the
 * program, so it never sees the secret or the control bytes. */
#define PYBOX_GUEST_HELLO "PYBOX3 "
#define PYBOX_GUEST_SECRET_HEX 64
#define PYBOX_GUEST_HELLO_MAX 96
#define PYBOX_GUEST_PROGRAM_MAX (64LL * 1024 * 1024)
#define PYBOX_GUEST_CTL_STOP 'S'
#define PYBOX_GUEST_CTL_RELEASE 'R'

/* The done record: the last bytes init writes on the box's stdout after every other
 * process in the box is gone, so nothing can follow it:
 *   "\x1epybox-done v3 <secret> exit=E signal=S timer=T stopped=X program_ms=M reaped=R term=N\n"
 * term: the termination signal sent from outside the box (the engine's stop), 0 if none.
 * Only init knows the secret, so the program cannot forge it. */
#define PYBOX_GUEST_DONE "\x1epybox-done v3 "
#define PYBOX_GUEST_RECORD_MAX 256

/* The same commands as signals from outside the box (the engine's kill; si_pid == 0
 * inside the box), for when the control channel is gone. The same signals sent from
 * inside the box are ignored. */
#define PYBOX_GUEST_SIG_RELEASE SIGUSR1 /* held box: exit with the program's status */
#define PYBOX_GUEST_SIG_STOP SIGUSR2    /* host deadline: kill the program, then hold */

/* init's own failures (the program never ran). */
#define PYBOX_GUEST_EXIT_USAGE 120    /* bad argv */
#define PYBOX_GUEST_EXIT_PROTOCOL 121 /* no valid hello on stdin */
#define PYBOX_GUEST_EXIT_PIPE 123     /* could not make the program's stdin */
#define PYBOX_GUEST_EXIT_PRIVS 119    /* could not switch the program to its user */
#define PYBOX_GUEST_EXIT_FORK 122     /* could not start the program */
#define PYBOX_GUEST_EXIT_TIMER 137    /* the box timer ended a running program */

#endif
