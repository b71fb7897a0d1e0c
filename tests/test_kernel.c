/* SPDX-License-Identifier: MIT */
/* Kernel readings: memory, OOM kills, processes, refused forks, CPU and throttling,
 * read from the box's cgroup by the watcher, and which clock fired. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/docker/docker.h"
#include "../pybox/native/cgroup.h"
#include "../pybox/watch.h"
#include "itest.h"
#include "suites.h"

static bool unknown_mentions(const cJSON *j, const char *what)
{
    const cJSON *u;
    cJSON_ArrayForEach (u, itest_get(j, "unknown")) {
        if (cJSON_IsString(u) && strstr(u->valuestring, what))
            return true;
    }
    return false;
}

START_TEST(oom_child_killed_parent_exits)
{
    itest_run_t r;
    /* The deadline is not what is tested here: room for a slow machine (an emulated guest
     * fills 160 MiB at half a CPU in more than the default 2 s). */
    const char *args[] = {"--timeout", "20", NULL};
    const cJSON *j = itest_exec_ended(
        "import os\npid = os.fork()\nif pid == 0:\n    x = b'x' * (160 * 1024 * 1024)\n    os._exit(0)\n"
        "_, st = os.waitpid(pid, 0)\nprint(-os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st))\n",
        args, 0, &r);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "-9\n");
    ck_assert_int_eq(itest_bool(j, "seen.oom.backend_flag"), 1);
    ck_assert_int_eq((int)itest_num(j, "seen.oom.kernel_oom_kills"), 1);
    ck_assert_int_eq((int)itest_num(j, "seen.kernel.final.oom_kills"), 1);
    ck_assert_int_eq(itest_bool(j, "seen.kernel.final.taken"), 1);
    ck_assert_str_eq(itest_str(j, "seen.oom.finding"), "other_process_killed");
    ck_assert(unknown_mentions(j, "went on and ended by itself"));
    /* The peak reached the limit: the kernel's own peak file says so. */
    ck_assert_int_ge((long)itest_num(j, "seen.kernel.final.memory_peak_bytes"), 120L * 1024 * 1024);
    itest_run_free(&r);
}
END_TEST

START_TEST(pids_limit_peak_and_refusals)
{
    itest_run_t r;
    const char *args[] = {"--timeout", "5", NULL};
    itest_exec("import os, time\nkids = []\nrefused = 0\nfor i in range(36):\n    try:\n        pid = os.fork()\n"
               "    except OSError:\n        refused += 1\n        continue\n    if pid == 0:\n        time.sleep(3)\n"
               "        os._exit(0)\n    kids.append(pid)\nprint(len(kids), refused)\n",
               args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    int started, refused;
    ck_assert_int_eq(sscanf(itest_str(j, "said.stdout.text"), "%d %d", &started, &refused), 2);
    ck_assert_int_eq(started + refused, 36);
    ck_assert_int_eq((int)itest_num(j, "asked.limits.pids"), 32);
    /* The box's init and Python take two of the 32. */
    ck_assert_int_eq(started, 30);
    ck_assert_int_eq((int)itest_num(j, "seen.kernel.final.pids_peak"), 32);
    ck_assert_int_ge((int)itest_num(j, "seen.kernel.final.pids_refused"), refused);
    ck_assert_int_eq((int)itest_num(j, "seen.init_record.other_processes_reaped"), 30);
    itest_run_free(&r);
}
END_TEST

START_TEST(cpu_time_and_throttling)
{
    itest_run_t r;
    const char *args[] = {"--timeout", "5", NULL};
    itest_exec("import time\nwhile time.process_time() < 0.6:\n    pass\n", args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    ck_assert_double_eq_tol(itest_num(j, "asked.limits.cpus"), 0.5, 1e-9);
    double cpu = itest_num(j, "seen.kernel.final.cpu_ns") / 1e9;
    /* A busy loop until the program has had 0.6 s of CPU, at half a CPU: the box's CPU
     * time is at least that, and never more than the quota (50 ms) in each 100 ms period
     * the box ran, give or take a scheduler tick. Counted in CPU time and per period, it
     * holds on a loaded or slow machine too (an emulated guest, other work beside), where
     * a loop of one second of wall-clock time may get less than half a CPU. */
    double periods = itest_num(j, "seen.kernel.final.cpu_periods");
    ck_assert_msg(periods >= 8 && cpu >= 0.6 && cpu <= 1.25 * periods * 0.05,
                  "CPU time %.3f s over %.0f periods at 0.5 CPU", cpu, periods);
    ck_assert_int_gt((int)itest_num(j, "seen.kernel.final.cpu_throttled_periods"), 0);
    ck_assert_int_gt((long)itest_num(j, "seen.kernel.final.cpu_throttled_ns"), 0);
    itest_run_free(&r);
}
END_TEST

/* The kernel's own peak file for a box, read by the test itself where the box's backend
 * says its cgroup is: the native backend's placement, or the engine's box's PID 1 and the
 * kernel's word for where that is (found once, while the box runs). */
static long peak_file(const char *id)
{
    static char path[PATH_MAX + 64], for_id[65];
    if (strcmp(for_id, id) != 0) {
        path[0] = '\0';
        pybox_error_t err = {0};
        if (itest_native()) {
            pybox_native_cgroup_t cg;
            if (pybox_native_box_cgroup(itest_state()->install_id, id, &cg, &err) < 0)
                return -1;
            snprintf(path, sizeof path, "%s/%s", cg.version == 2 ? cg.unified : cg.memory,
                     cg.version == 2 ? "memory.peak" : "memory.max_usage_in_bytes");
        } else {
            char q[128];
            snprintf(q, sizeof q, "/containers/%s/json", id);
            pybox_engine_t *e = itest_engine();
            long status = 0;
            cJSON *reply = NULL;
            pid_t pid = 0;
            if (pybox_engine_call(e, "GET", q, NULL, &status, &reply, &err) == 0 && status == 200) {
                const cJSON *p =
                    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "State"), "Pid");
                pid = cJSON_IsNumber(p) ? (pid_t)p->valuedouble : 0;
            }
            cJSON_Delete(reply);
            pybox_engine_free(e);
            pybox_cgroup_loc_t loc;
            if (pybox_docker_cgroup(pybox_cgroup_root(), "/proc", id, pid, &loc, &err) < 0)
                return -1;
            snprintf(path, sizeof path, "%s/%s", loc.version == PYBOX_CG_V2 ? loc.dir[0] : loc.dir[PYBOX_CG_MEMORY],
                     loc.version == PYBOX_CG_V2 ? "memory.peak" : "memory.max_usage_in_bytes");
        }
        snprintf(for_id, sizeof for_id, "%s", id);
    }
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

START_TEST(large_array_fits_and_peak_is_the_kernels)
{
    double since = itest_wall();
    const char *args[] = {"exec", "--json", "--memory", "512", "--timeout", "15", NULL};
    const char *prog = "x = b'x' * (300 * 1024 * 1024)\nprint(len(x))\n";
    itest_job_t job;
    itest_start(prog, strlen(prog), args, NULL, &job);
    char id[65];
    ck_assert_msg(itest_box_wait_running(since, id, NULL, 30) == 0, "the box never started");
    /* Follow the kernel's peak file until the box's cgroup is gone; the last value read
     * is what the kernel said at the end. */
    long last = -1, v;
    while ((v = peak_file(id)) >= 0 || last < 0) {
        if (v >= 0)
            last = v;
        if (itest_wall() - since > 30)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000}; /* polling the kernel's file, gently */
        nanosleep(&ts, NULL);
    }
    itest_run_t r;
    itest_finish(&job, &r);
    ck_assert_ptr_nonnull(r.receipt);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "314572800\n");
    ck_assert_int_eq((long)itest_num(j, "asked.limits.memory_bytes"), 512L * 1024 * 1024);
    ck_assert_int_eq(itest_bool(j, "seen.kernel.final.taken"), 1);
    double peak = itest_num(j, "seen.kernel.final.memory_peak_bytes");
    ck_assert_msg(peak >= 300.0 * 1024 * 1024, "peak %.0f below the array's size", peak);
    ck_assert_msg(last > 0, "the test could not read the kernel's peak file");
    ck_assert_msg(fabs(peak - (double)last) <= 0.05 * (double)last, "receipt peak %.0f, kernel's file said %ld", peak,
                  last);
    ck_assert_int_eq(itest_bool(j, "seen.oom.backend_flag"), 0);
    itest_run_free(&r);
}
END_TEST

START_TEST(exit_just_before_the_deadline)
{
    itest_run_t r;
    /* It exits 1.6 s after its own start (the kernel's, from /proc), 0.4 s before the 2 s
     * deadline, however long Python took to start (long on an emulated guest). */
    const cJSON *j = itest_exec_ended(
        "import os, time\n"
        "start = int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK')\n"
        "up = float(open('/proc/uptime').read().split()[0])\n"
        "time.sleep(max(0.0, 1.6 - (up - start)))\nraise SystemExit(3)\n",
        (const char *[]){"--timeout", "2", NULL}, 3, &r);
    ck_assert_str_eq(itest_str(j, "seen.clock"), "none");
    ck_assert_int_eq(itest_bool(j, "seen.host_deadline_passed"), 0);
    ck_assert_int_eq(itest_bool(j, "seen.init_record.stopped_on_request"), 0);
    ck_assert_int_eq(itest_bool(j, "seen.kernel.final.taken"), 1);
    itest_run_free(&r);
}
END_TEST

START_TEST(killed_without_evidence_is_not_explained)
{
    itest_run_t r;
    itest_exec("import os\nos.kill(os.getpid(), 9)\n", NULL, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 137);
    ck_assert_int_eq(itest_bool(j, "seen.oom.backend_flag"), 0);
    ck_assert_int_eq((int)itest_num(j, "seen.oom.kernel_oom_kills"), 0);
    ck_assert(unknown_mentions(j, "cause not established"));
    itest_run_free(&r);
}
END_TEST

START_TEST(long_sleep_ends_by_itself_with_samples)
{
    itest_run_t r;
    const char *args[] = {"--timeout", "15", NULL};
    const cJSON *j = itest_exec_ended("import time\ntime.sleep(12)\nprint('awake')\n", args, 0, &r);
    double ms = itest_num(j, "seen.init_record.program_ms");
    /* its sleep, and its start (Python's, long on an emulated guest) within the deadline */
    ck_assert_msg(ms >= 12000 && ms < 15000, "program ran %.0f ms", ms);
    int n = (int)itest_num(j, "seen.kernel.samples.count");
    ck_assert_msg(n >= 24, "only %d samples in 12 s", n);
    const cJSON *rows = itest_get(j, "seen.kernel.samples.rows");
    ck_assert_int_eq(cJSON_GetArraySize(rows), n);
    double prev = -1;
    const cJSON *row;
    cJSON_ArrayForEach (row, rows) {
        ck_assert_int_eq(cJSON_GetArraySize(row), 4);
        double t = cJSON_GetArrayItem(row, 0)->valuedouble;
        ck_assert(t > prev);
        prev = t;
        ck_assert_int_gt(cJSON_GetArrayItem(row, 1)->valuedouble, 0); /* memory in use */
    }
    ck_assert_msg(prev >= 11000, "the samples stop at %.0f ms", prev);
    itest_run_free(&r);
}
END_TEST

START_TEST(long_sleep_is_stopped_at_the_deadline)
{
    itest_run_t r;
    const cJSON *j = itest_exec_past_deadline("import time\ntime.sleep(60)\n", "30", &r);
    double ms = itest_num(j, "seen.init_record.program_ms");
    ck_assert_msg(ms >= 29900 && ms < 32000, "stopped after %.0f ms under a 30 s deadline", ms);
    ck_assert_int_eq(itest_bool(j, "seen.kernel.final.taken"), 1);
    ck_assert_int_eq(itest_bool(j, "seen.box.confirmed_gone"), 1);
    itest_run_free(&r);
}
END_TEST

Suite *itest_suite_kernel(void)
{
    Suite *s = suite_create("kernel");
    itest_tcase(s, "readings", 120,
                ITEST_TESTS(oom_child_killed_parent_exits, pids_limit_peak_and_refusals, cpu_time_and_throttling,
                            large_array_fits_and_peak_is_the_kernels, exit_just_before_the_deadline,
                            killed_without_evidence_is_not_explained, long_sleep_ends_by_itself_with_samples,
                            long_sleep_is_stopped_at_the_deadline));
    return s;
}
