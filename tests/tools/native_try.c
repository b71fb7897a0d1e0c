/* SPDX-License-Identifier: MIT */
/* native-try: run the Python program on stdin in a native box through the library, print
 * what it said and the end; or measure (--runs N --jobs J: N runs per job, J at once).
 * A developer's tool for the native sandbox (docs/native.md), not a front-end. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../pybox/bounds.h"
#include "../../pybox/native/drive.h"
#include "../../pybox/native/native.h"
#include "../../pybox/native/sandbox.h"
#include "../../pybox/util.h"
#include "../native_spec.h"

static const char *rootfs, *staging = "/var/tmp/pybox-native-staging", *parent = "pybox-native-try";
static char *program;
static size_t program_len;
static int runs = 1, jobs = 1, do_verify = 1, quiet, times;
static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL};

typedef struct job {
    double *ms;
    int failed;
    uint32_t uid;
} job_t;

static void spec_for(pybox_native_spec_t *s, char *name, uint32_t uid)
{
    native_spec_at(s, rootfs, parent, staging, name, uid, env);
    s->out_bytes = 16LL << 20;
    s->timer_ms = 10000;
}

static int one(uint32_t uid, int show)
{
    char name[33];
    pybox_error_t err = {0};
    if (pybox_random_hex(16, name, &err) < 0)
        return -1;
    pybox_native_spec_t s;
    spec_for(&s, name, uid);
    pybox_native_box_t *b = NULL;
    double t0 = pybox_now_s();
    if (pybox_native_create(&s, &b, &err) < 0) {
        fprintf(stderr, "native-try: %s\n", err.msg);
        return -1;
    }
    int checked = 0, rc = 0;
    if (do_verify && pybox_native_verify(b, &s, &checked, &err) < 0) {
        fprintf(stderr, "native-try: %s\n", err.msg);
        rc = -1;
    }
    double t1 = pybox_now_s();
    pybox_native_run_t r;
    if (rc == 0 && pybox_native_drive(b, program, program_len, 5000, NULL, NULL, &r, &err) < 0) {
        fprintf(stderr, "native-try: %s\n", err.msg);
        rc = -1;
    } else if (rc == 0) {
        pybox_said_t said;
        pybox_sink_said(&r.out, r.rec.seen ? r.rec.length : 0, &said);
        if (show) {
            fwrite(said.data, 1, said.kept, stdout);
            pybox_said_t e;
            pybox_sink_said(&r.err, 0, &e);
            fwrite(e.data, 1, e.kept, stderr);
            fprintf(stderr, "native-try: record %s exit=%d, init %s %d, oom_kills %lld, %d settings verified\n",
                    r.rec.seen ? "seen" : "missing", r.rec.exit_code, r.end.exited ? "exit" : "signal",
                    r.end.exited ? r.end.exit_code : r.end.signal, (long long)r.end.oom_kills, checked);
        }
        if (!r.rec.seen || r.end.exit_code != 0)
            rc = -1;
        pybox_native_run_free(&r);
    }
    double t2 = pybox_now_s();
    bool gone = false;
    pybox_error_t rerr = {0};
    if (pybox_native_remove(b, &gone, &rerr) < 0 || !gone) {
        fprintf(stderr, "native-try: remove: %s\n", rerr.msg);
        rc = -1;
    }
    if (times) {
        pybox_native_times_t nt;
        pybox_native_times(b, &nt);
        fprintf(stderr,
                "native-try: create+verify %.2f ms (systemd: connect %.2f, scope %.2f, leaf %.2f), run %.2f ms, "
                "remove %.2f ms\n",
                (t1 - t0) * 1000, nt.sd_connect_ms, nt.sd_scope_ms, nt.sd_leaf_ms, (t2 - t1) * 1000,
                (pybox_now_s() - t2) * 1000);
    }
    pybox_native_free(b);
    return rc;
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    for (int i = 0; i < runs; i++) {
        double t = pybox_now_s();
        if (one(j->uid, 0) < 0)
            j->failed++;
        j->ms[i] = (pybox_now_s() - t) * 1000;
    }
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            jobs = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--staging") == 0 && i + 1 < argc)
            staging = argv[++i];
        else if (strcmp(argv[i], "--no-verify") == 0)
            do_verify = 0;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--times") == 0)
            times = 1;
        else if (argv[i][0] == '/')
            rootfs = argv[i];
        else {
            fprintf(stderr, "usage: native-try ROOTFS [--runs N] [--jobs J] [--no-verify] [--staging DIR] < prog.py\n");
            return 2;
        }
    }
    if (rootfs == NULL || runs < 1 || jobs < 1 || jobs > 64) {
        fprintf(stderr, "usage: native-try ROOTFS [--runs N] [--jobs J] [--no-verify] [--staging DIR] < prog.py\n");
        return 2;
    }
    bool over = false;
    pybox_error_t err = {0};
    if (pybox_read_bounded(0, PYBOX_PROGRAM_MAX, &program, &program_len, &over, &err) < 0 || over) {
        fprintf(stderr, "native-try: the program on stdin: %s\n", over ? "too long" : err.msg);
        return 2;
    }
    (void)mkdir(staging, 0711);
    if (runs == 1 && jobs == 1)
        return one(200000 + (uint32_t)getpid() % 60000, !quiet) == 0 ? 0 : 1;
    pthread_t th[64];
    job_t j[64];
    double t0 = pybox_now_s();
    for (int i = 0; i < jobs; i++) {
        j[i] = (job_t){.ms = calloc((size_t)runs, sizeof(double)), .uid = 200000 + (uint32_t)i};
        pthread_create(&th[i], NULL, job_main, &j[i]);
    }
    int failed = 0;
    double *all = calloc((size_t)(runs * jobs), sizeof(double));
    for (int i = 0; i < jobs; i++) {
        pthread_join(th[i], NULL);
        failed += j[i].failed;
        memcpy(all + i * runs, j[i].ms, (size_t)runs * sizeof(double));
        free(j[i].ms);
    }
    double wall = pybox_now_s() - t0;
    qsort(all, (size_t)(runs * jobs), sizeof(double), cmp_d);
    printf("runs %d jobs %d failed %d median_ms %.2f min_ms %.2f max_ms %.2f runs_per_s %.1f\n", runs * jobs, jobs,
           failed, all[runs * jobs / 2], all[0], all[runs * jobs - 1], runs * jobs / wall);
    free(all);
    free(program);
    return failed ? 1 : 0;
}
