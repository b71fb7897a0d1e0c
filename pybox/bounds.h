/* SPDX-License-Identifier: MIT */
/* Every hard maximum and default in one place. Anything that comes from outside
 * (the program, engine replies, stream frames, arguments) is bounded by one of these. */
#ifndef PYBOX_BOUNDS_H
#define PYBOX_BOUNDS_H

/* The program on stdin. */
#define PYBOX_PROGRAM_MAX (1024 * 1024)

/* What the program said: kept per stream; the rest is counted, not kept. */
#define PYBOX_OUTPUT_CAP 65536

/* Engine replies (JSON) and the engine's error messages. */
#define PYBOX_ENGINE_REPLY_MAX (8 * 1024 * 1024)
#define PYBOX_DOCKER_ENGINE_HEADER_MAX 16384
/* The longest one call of a backend may take (the engine's requests are such calls). */
#define PYBOX_BACKEND_CALL_MAX_MS 60000
#define PYBOX_ENGINE_TIMEOUT_MS PYBOX_BACKEND_CALL_MAX_MS
#define PYBOX_ENGINE_CONNECT_TIMEOUT_MS 5000
/* The first contact with the engine (connect and GET /_ping, at open): its own bound,
 * which the environment variable may set, in seconds (docs/cleanup.md). */
#define PYBOX_ENGINE_CONTACT_ENV "PYBOX_ENGINE_CONTACT_TIMEOUT_S"
#define PYBOX_ENGINE_CONTACT_TIMEOUT_MS 5000
#define PYBOX_ENGINE_CONTACT_MIN_MS 100
#define PYBOX_ENGINE_CONTACT_MAX_MS 300000
/* One stream frame as the engine sends it; larger declared lengths are a protocol error. */
#define PYBOX_FRAME_MAX (16 * 1024 * 1024)

/* Defaults of the sealed box (docs/policy.md), and the installation's ceilings. */
#define PYBOX_DEFAULT_MEMORY (128LL * 1024 * 1024)
#define PYBOX_DEFAULT_PIDS 32
#define PYBOX_DEFAULT_NANO_CPUS 500000000LL
#define PYBOX_DEFAULT_TIMEOUT_MS 2000
#define PYBOX_TIMEOUT_MIN_MS 100
#define PYBOX_TIMEOUT_MAX_MS (3600LL * 1000)
/* The box's own timer runs this much longer than the host's deadline. */
#define PYBOX_BOX_TIMER_MARGIN_MS 1000
/* After the host asks the box to stop the program, how long before it kills the box. */
#define PYBOX_STOP_GRACE_MS 1000
/* After release, how long the box may take to end before it is killed. */
#define PYBOX_RELEASE_GRACE_MS 2000
/* A box made before its program (a warm box, a session's): how long its interpreter may
 * take to start and import the image's preload before the box is given up; and, after a
 * session's call record, how long what init relayed of the call's stderr may take to
 * come. */
#define PYBOX_READY_MAX_MS 60000
#define PYBOX_CALL_TAIL_MS 1000
/* After a native box's end: how long a pass of the kernel's collector of descriptors in
 * flight may take to be seen (since Linux 6.10 it runs on a kernel work queue: a few ms,
 * tens on a loaded host), and how long the box's cgroup may still count its ending
 * processes once its init was reaped. */
#define PYBOX_COLLECT_MS 2000
#define PYBOX_NATIVE_EMPTY_MS 2000
/* What a caller may ask for (--memory, --pids, --cpus), before the installation's
 * ceilings, which config.json may set up to these maxima too (limits.c reads them). */
#define PYBOX_MEMORY_MIN (32LL * 1024 * 1024)
#define PYBOX_MEMORY_MAX (1LL << 40)
#define PYBOX_PIDS_MIN 8           /* the box's init, Python, and the runtime's own set-up processes */
#define PYBOX_PIDS_MAX (1LL << 22) /* the kernel's own most (PID_MAX_LIMIT) */
#define PYBOX_NANO_CPUS_MIN 10000000LL
#define PYBOX_NANO_CPUS_MAX (1024LL * 1000000000)
/* The installation's ceilings unless its config.json says otherwise. */
#define PYBOX_CEILING_MEMORY (4096LL * 1024 * 1024)
#define PYBOX_CEILING_PIDS 1024
/* Leftovers of a run may be removed this long after the box was created, and never
 * before its own timer can have fired plus this margin. */
#define PYBOX_EXPIRY_S 120
#define PYBOX_EXPIRY_MAX_S (7LL * 24 * 3600)
#define PYBOX_EXPIRY_MARGIN_S 10
#define PYBOX_TMP_BYTES (16LL * 1024 * 1024)
#define PYBOX_SHM_BYTES (16LL * 1024 * 1024)
#define PYBOX_NOFILE 256
/* Signals queued to the box's user at once (RLIMIT_SIGPENDING, per user: a box's own). */
#define PYBOX_SIGPENDING 1024
#define PYBOX_FSIZE_BYTES (64LL * 1024 * 1024)

/* Files in (all inputs together) and out (docs/files.md). */
#define PYBOX_INPUT_MAX (8LL * 1024 * 1024)
#define PYBOX_OUT_FILES_MAX 64
#define PYBOX_OUT_FILE_MAX (8LL * 1024 * 1024)
#define PYBOX_OUT_TOTAL_MAX (32LL * 1024 * 1024)
#define PYBOX_OUT_DEPTH_MAX 16
#define PYBOX_OUT_DIRS_MAX 256
/* The program's output folder in the box: a tmpfs volume of this size at most (never
 * more than the box's memory, which it counts against). */
#define PYBOX_OUT_VOLUME_MAX (64LL * 1024 * 1024)

/* Names and ids. */
#define PYBOX_ID_MAX 128
#define PYBOX_NAME_MAX 64

#endif
