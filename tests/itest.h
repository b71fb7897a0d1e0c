/* SPDX-License-Identifier: MIT */
/* Integration test helpers: run the real pybox binary against the real engine, read
 * its JSON receipt, and ask the engine directly what exists. */
#ifndef PYBOX_ITEST_H
#define PYBOX_ITEST_H

#include <check.h>
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../pybox/docker/engine.h"
#include "../pybox/state.h"

typedef struct itest_run {
    int status; /* pybox's exit code, or 128+signal */
    char *out;  /* stdout */
    size_t out_len;
    char *err; /* stderr */
    size_t err_len;
    cJSON *receipt; /* stdout parsed, when it is JSON */
} itest_run_t;

/* A pybox started in the background. */
typedef struct itest_job {
    pid_t pid;
    int out_fd, err_fd;
} itest_job_t;
void itest_start(const char *program, size_t len, const char *const *args, const char *const *env, itest_job_t *j);
/* The same with some of pybox's standard descriptors closed (bit n: descriptor n); what
 * it would have written there reads back empty. */
void itest_start_closed(const char *program, size_t len, const char *const *args, const char *const *env,
                        unsigned closed, itest_job_t *j);
void itest_finish(itest_job_t *j, itest_run_t *r);

/* Run `pybox <args...>` with program on stdin (len bytes), extra environment entries
 * ("NAME=value", NULL-terminated, may be NULL). Waits for it to end. */
void itest_pybox(const char *program, size_t len, const char *const *args, const char *const *env, itest_run_t *r);
/* itest_pybox that must end with status 0; what it wrote is not kept. */
void itest_pybox_ok(const char *program, size_t len, const char *const *args, const char *const *env);
/* The same with the test build, pybox-test (pybox/hooks.h), for a test that needs a
 * test hook: PYBOX_TEST_BIN, else pybox-test beside PYBOX_BIN. */
void itest_pybox_test(const char *program, size_t len, const char *const *args, const char *const *env, itest_run_t *r);
const char *itest_test_bin(void);
/* The campaign's tool: PYBOX_CAMPAIGN_BIN, else pybox-campaign beside the pybox tested. */
const char *itest_campaign_bin(void);
/* Any program, run as itest_pybox runs pybox (argv[0] bin, then args). */
void itest_run_bin(const char *bin, const char *program, size_t len, const char *const *args, const char *const *env,
                   itest_run_t *r);
/* Shorthand: pybox exec --json [extra args] < program, with --timeout ITEST_ROOMY_S
 * unless extra names a deadline. */
void itest_exec(const char *program, const char *const *extra, itest_run_t *r);
/* itest_exec of a program that ends by itself: asserts PyBox's exit status and the
 * receipt's TARGET_EXIT_OBSERVED, and returns the receipt. */
const cJSON *itest_exec_ended(const char *program, const char *const *extra, int status, itest_run_t *r);
/* itest_exec with --timeout timeout_s of a program that outlives it: asserts PyBox stopped
 * it at the host's deadline (status 124) and returns the receipt. */
const cJSON *itest_exec_past_deadline(const char *program, const char *timeout_s, itest_run_t *r);
void itest_run_free(itest_run_t *r);

/* A test that makes the host's state itself (a mount namespace of its own, another
 * user) needs root: run by an ordinary user (rootless), it says so on stdout and is not
 * run (true). */
bool itest_needs_root(const char *test);

/* Start pybox in the background with program on stdin; returns its pid. */
pid_t itest_spawn(const char *program, const char *const *args);

/* JSON lookups by dotted path ("said.stdout.text"); missing -> NULL / NAN / -1. */
const cJSON *itest_get(const cJSON *j, const char *path);
const char *itest_str(const cJSON *j, const char *path);
double itest_num(const cJSON *j, const char *path);
int itest_bool(const cJSON *j, const char *path);

/* A new installation for tests: a temporary state directory (home, >= 64 bytes) with a
 * fresh id (id, 33 bytes), the image pins of the installation PYBOX_HOME names now (or
 * the default one), and a short leftover expiry. Does not change PYBOX_HOME. */
int itest_new_home(char *home, size_t len, char *id);
/* Remove such a directory. */
void itest_remove_home(const char *home);

/* The engine and this installation. */
pybox_engine_t *itest_engine(void);
const pybox_state_t *itest_state(void);
/* HTTP status of GET /containers/<id>/json (200 exists, 404 gone). */
long itest_box_status(pybox_engine_t *e, const char *id);
/* A call to the engine with no body that must be answered (any status, in *status): its
 * reply (the caller frees it). */
cJSON *itest_engine_call(pybox_engine_t *e, const char *method, const char *path, long *status);
/* Containers of this installation (all states) carrying label=value; returns count and
 * optionally the parsed list (caller frees). */
int itest_list(pybox_engine_t *e, const char *label, const char *value, cJSON **list);
/* Remove containers (and their volumes) with pybox.run=run_id. Returns how many. */
int itest_remove_run(pybox_engine_t *e, const char *run_id);
/* Block until the engine reports a container of this installation started after since
 * (unix time, sub-second); fills id (65 bytes). Uses the engine's event stream, bounded. */
int itest_wait_start(double since, char *id, double timeout_s);
/* Wall-clock time with sub-second precision. */
double itest_wall(void);
/* Poll the engine's process list of a running box (bounded) until a process whose
 * command line contains what appears. */
int itest_wait_process(pybox_engine_t *e, const char *id, const char *what, double timeout_s);
/* The engine's events for one container between since and until (unix seconds). */
cJSON *itest_events(pybox_engine_t *e, const char *id, long since, long until);

/* The backend the tests run on: PYBOX_BACKEND (as pybox itself reads it), else docker.
 * The same suites run on each (make check runs them twice). */
const char *itest_backend(void);
bool itest_native(void);
/* What the backend still holds of a run of the tests' installation, asked of the engine
 * (its containers) or the kernel (the native box's cgroup leaves and staging folder). */
int itest_run_left(const char *run_id);
/* The same for a whole installation (its id and state folder). */
int itest_install_left(const char *install_id, const char *home);
/* Remove the native cgroup leaves and parent of an installation; how many leaves were left. */
int itest_native_sweep(const char *install_id);
/* The native backend's cgroup parents of an installation of the tests' own (made at its
 * first box, named after its id), removed once empty. itest_remove_home does it for the
 * home it removes. */
/* The folders named after an installation that hold its native boxes' cgroup leaves,
 * as the backend places them on this host (none under systemd); -1 when the host has no
 * hierarchy the backend knows. */
int itest_native_parents(const char *install_id, char out[5][PATH_MAX]);
void itest_forget_native_parents(const char *install_id);
/* Wait (bounded) for a box of the tests' installation made after since to run a process
 * whose command line holds what (NULL: any); id gets the box's id (65 bytes). */
int itest_box_wait_running(double since, char *id, const char *what, double timeout_s);
/* Signal a running box's PID 1 from outside, as its backend would (the engine's kill, or
 * the host's kill of the native box's init): sig is "SIGTERM", "SIGKILL", ... */
void itest_box_signal(const char *id, const char *sig);
/* Wait (bounded) until that box no longer runs anything. */
int itest_box_wait_ended(const char *id, double timeout_s);

/* A deadline with room for Python's start on a slow machine (an emulated guest: about a
 * second of CPU at half a CPU), for the cases that are not about the deadline. */
#define ITEST_ROOMY_S 10
#define ITEST_WORD_(x) #x
#define ITEST_WORD(x) ITEST_WORD_(x)
#define ITEST_ROOMY_TIMEOUT_S ITEST_WORD(ITEST_ROOMY_S) /* as --timeout takes it */

/* Run a program through the library, in the tests' installation, after adjust (may be
 * NULL) changed the policy; the box must be gone afterwards. Returns pybox_run's value. */
struct pybox_policy;
struct pybox_run_result;
int itest_lib_run(const char *program, void (*adjust)(struct pybox_policy *p, void *arg), void *arg,
                  struct pybox_run_result *res);
/* The pinned image name of the tests' installation, confirmed in the engine. */
int itest_resolve(const char *name, pybox_pin_t *pin, pybox_error_t *err);
/* The program's stdout of a library run, NUL-terminated (static storage). */
const char *itest_said(const struct pybox_run_result *res);

bool itest_contains(const char *hay, size_t len, const char *needle);

/* A test case of suite s with its timeout in seconds and its tests (ITEST_TESTS(a, b,
 * ...)), added to s. */
TCase *itest_tcase(Suite *s, const char *name, int timeout_s, const TTest *const *tests, size_t n);
/* A checked fixture for a test case that itest_tcase made, and for its cases tagged
 * timing, which it put in a test case of their own. */
void itest_fixture(TCase *tc, void (*setup)(void), void (*teardown)(void));
#define ITEST_TESTS(...)                                                                                               \
    ((const TTest *const[]){__VA_ARGS__}), (sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *))

/* name copied from from_dir into to_dir (where it must not be yet). */
void itest_copy_into(const char *from_dir, const char *to_dir, const char *name);
/* A state folder made at state on a small tmpfs (256 KiB) in a mount namespace of the
 * test's own, holding the installation src's id, image pins and configuration. */
void itest_small_state(const char *src, const char *state);

#endif
