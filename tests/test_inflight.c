/* SPDX-License-Identifier: MIT */
/* What a program leaves in flight: descriptors sent through unix sockets (SCM_RIGHTS)
 * that no process can receive any more, which the kernel keeps until its collector of
 * such cycles runs. The box's end is its last process's, whatever they hold. */
#include <check.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/cgroup.h"
#include "../pybox/native/cgroup.h"
#include "../pybox/native/sandbox.h"
#include "../pybox/run.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* The program's own sockets in a cycle nothing else refers to: two socket pairs, the
 * descriptors given in flight through the first, then each socket of both pairs through
 * the other, as the red team's program did. PRELUDE defines send(); the program then
 * names what goes in flight. */
#define PRELUDE                                                                                                        \
    "import array, os, socket\n"                                                                                       \
    "def send(s, fds):\n"                                                                                              \
    "    s.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds))])\n"                         \
    "def cycle(fds):\n"                                                                                                \
    "    a, b = socket.socketpair()\n"                                                                                 \
    "    c, d = socket.socketpair()\n"                                                                                 \
    "    send(a, fds)\n"                                                                                               \
    "    send(c, [a.fileno(), b.fileno()])\n"                                                                          \
    "    send(a, [c.fileno(), d.fileno()])\n"

/* stdout and stderr's write ends in flight: the box's pipes outlive its last process.
 * The run ends at the box's end (its init reaped), with what the program said and its
 * own exit, on both backends; before, a native run waited for the pipes' end, killed
 * the box and failed after 32 s, blaming the engine. */
/* The native backend looked after the box's end: the kernel's collector ran and
 * nothing was still held after it. What it saw held is among what the program left in
 * flight (any process of the host that closes a unix socket has the collector run, so
 * it may have found less, or nothing). */
static void assert_released(const cJSON *j, const char *const *may_be_held)
{
    if (!itest_native()) {
        ck_assert_ptr_null(itest_get(j, "seen.box.after_end")); /* the engine's: not looked at */
        return;
    }
    ck_assert_str_eq(itest_str(j, "seen.box.after_end.collector"), "ran");
    const cJSON *e;
    cJSON_ArrayForEach (e, itest_get(j, "seen.box.after_end.held")) {
        bool expected = false;
        for (size_t i = 0; may_be_held[i] != NULL; i++)
            expected |= strcmp(e->valuestring, may_be_held[i]) == 0;
        ck_assert_msg(expected, "%s seen held after the box's end", e->valuestring);
    }
    ck_assert_int_eq(cJSON_GetArraySize(itest_get(j, "seen.box.after_end.still_held")), 0);
}

START_TEST(output_held_in_flight_ends_with_the_box)
{
    itest_run_t r;
    itest_exec(PRELUDE "cycle([1, 2])\nprint('bye', flush=True)\n", (const char *[]){"--timeout", "10", NULL}, &r);
    const cJSON *j = r.receipt;
    ck_assert_msg(j != NULL, "no receipt: %.*s", (int)r.err_len, r.err);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, itest_str(j, "error.message"));
    ck_assert_str_eq(itest_str(j, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_int_eq((int)itest_num(j, "seen.backend_record.exit_code"), 0);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.exit_code"), 0);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "bye\n");
    ck_assert_int_eq(itest_bool(j, "seen.box_killed_through_backend"), 0);
    ck_assert_ptr_null(itest_get(j, "error"));
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    ck_assert_int_eq(itest_run_left(itest_str(j, "run_id")), 0);
    assert_released(j, (const char *[]){"stdout", "stderr", NULL});
    ck_assert_int_eq(cJSON_GetArraySize(itest_get(j, "unknown")), 0);
    itest_run_free(&r);
}
END_TEST

/* The shared memory charged to the installation's boxes, those removed included (a
 * cgroup removed with pages still charged stays counted in its parent): v1 total_shmem,
 * v2 shmem of the installation's parent. -1 when there is no such folder. */
static int64_t install_shmem(void)
{
    char p[PATH_MAX + 16], buf[8192];
    /* The installation's parent as the backend places it: where its memory is counted. */
    pybox_native_cg_host_t h;
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    pybox_native_cgroup_t cg;
    pybox_error_t err = {0};
    if (pybox_native_cg_host(pybox_cgroup_root(), NULL, &h, &err) < 0 ||
        pybox_native_cg_parent(itest_state()->install_id, parent, &err) < 0 ||
        pybox_native_cg_paths(&h, parent, "x", &cg, &err) < 0 || cg.systemd)
        return -1;
    bool v2 = cg.version == 2;
    char *leaf = v2 ? cg.unified : cg.memory;
    char *slash = strrchr(leaf, '/');
    if (slash == NULL || pybox_fmt(p, sizeof p, "%.*s/memory.stat", (int)(slash - leaf), leaf) < 0)
        return -1;
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *key = v2 ? "\nshmem " : "\ntotal_shmem ";
    const char *at = strstr(buf, key);
    if (at == NULL && strncmp(buf, key + 1, strlen(key) - 1) == 0)
        at = buf - 1;
    return at == NULL ? -1 : strtoll(at + strlen(key), NULL, 10);
}

/* Wait (at most 2 s) for the installation's shared memory to fall below limit: what the
 * collector freed, the kernel's work queue closes moments after. */
static int64_t shmem_below(int64_t limit)
{
    int64_t v = install_shmem();
    for (int i = 0; i < 200 && v >= limit; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        v = install_shmem();
    }
    return v;
}

#define MEMFD_MIB 32
#define MEMFD_PROGRAM                                                                                                  \
    PRELUDE "m = os.memfd_create('kept')\n"                                                                            \
            "os.write(m, b'\\1' * (32 << 20))\n"                                                                       \
            "t = os.open('/tmp', os.O_RDWR | os.O_TMPFILE, 0o600)\n"                                                   \
            "os.write(t, b'\\2' * (8 << 20))\n"                                                                        \
            "cycle([m, t, os.open('/proc/self/ns/mnt', os.O_RDONLY), os.open('/proc/self/ns/ipc', os.O_RDONLY)])\n"    \
            "print('bye', flush=True)\n"

/* A memfd of 32 MiB, an 8 MiB file of the box's /tmp and handles of its mount and IPC
 * namespaces in flight: the box's mount namespace (and with it its tmpfs mounts) outlives
 * its last process, and so do the memfd's pages, outside any live limit. Natively the
 * kernel's collector, run after the box's end, releases all of it: the namespace is seen
 * gone and the installation's shared memory comes back. */
START_TEST(memory_and_namespaces_held_in_flight_are_released)
{
    itest_run_t r;
    itest_exec(MEMFD_PROGRAM, (const char *[]){"--timeout", "10", NULL}, &r);
    const cJSON *j = r.receipt;
    ck_assert_msg(j != NULL, "no receipt: %.*s", (int)r.err_len, r.err);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, itest_str(j, "error.message"));
    ck_assert_str_eq(itest_str(j, "status"), "TARGET_EXIT_OBSERVED");
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "bye\n");
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    if (itest_native()) {
        assert_released(j, (const char *[]){"mount_namespace", NULL});
        int64_t left = shmem_below(1 << 20);
        ck_assert_msg(left >= 0 && left < (1 << 20), "the installation still holds %lld bytes of shared memory",
                      (long long)left);
    }
    itest_run_free(&r);
}
END_TEST

static void relax_collection(struct pybox_policy *p, void *arg)
{
    (void)arg;
    p->relax |= PYBOX_RELAX_IN_FLIGHT;
}

/* Both ways: the same program with only the collector's run removed (a test's
 * relaxation) leaves the box's pipes, mount namespace and memory held after the run,
 * and says so under UNKNOWN; the verdict is still the program's own. Any process of the
 * host that closes a unix socket has the kernel's collector run, and may do so between
 * the box's end and the removal's look: up to five runs, until one shows the escape.
 * After each, the test has the kernel collect, and everything comes back. */
START_TEST(without_the_collector_what_was_held_stays)
{
    if (!itest_native())
        return; /* the engine's boxes: nothing of PyBox's runs after their end */
    bool seen = false;
    for (int attempt = 0; attempt < 5 && !seen; attempt++) {
        pybox_run_result_t res;
        int rc = itest_lib_run(MEMFD_PROGRAM "cycle([1, 2])\n", relax_collection, NULL, &res);
        int64_t held = install_shmem();
        ck_assert_msg(rc == 0, "%s", res.error.msg);
        ck_assert_int_eq(res.end, PYBOX_END_TARGET_EXIT);
        ck_assert_int_eq(res.exit_code, 0);
        ck_assert(res.gone);
        ck_assert(res.after.looked);
        ck_assert_int_eq(res.after.collector, -1);
        ck_assert_int_eq(res.after.still, res.after.held); /* nothing released it but luck */
        bool noted = false;
        for (int i = 0; i < res.n_unknown; i++)
            noted |= strstr(res.unknown[i], "(relaxed for a test)") != NULL;
        ck_assert(noted);
        if ((res.after.still & PYBOX_HELD_STDOUT) && held >= (int64_t)MEMFD_MIB << 20) {
            seen = true;
            bool said = false;
            for (int i = 0; i < res.n_unknown; i++)
                said |= strstr(res.unknown[i], "still held its stdout's write end") != NULL;
            ck_assert(said);
        }
        pybox_run_result_free(&res);
        bool done = false;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_native_collect(PYBOX_COLLECT_MS, &done, &err) == 0 && done, "%s", err.msg);
        int64_t left = shmem_below(1 << 20);
        ck_assert_msg(left < (1 << 20), "%lld bytes of shared memory after the collector", (long long)left);
    }
    ck_assert_msg(seen, "in five runs without the collector, nothing was seen held after the box's end");
}
END_TEST

Suite *itest_suite_inflight(void)
{
    Suite *s = suite_create("inflight");
    itest_tcase(s, "in flight", 120,
                ITEST_TESTS(output_held_in_flight_ends_with_the_box, memory_and_namespaces_held_in_flight_are_released,
                            without_the_collector_what_was_held_stays));
    return s;
}
