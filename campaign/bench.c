/* SPDX-License-Identifier: MIT */
/* pybox-bench: median complete run of a trivial program through `pybox exec`, and in
 * the same session through `docker run --rm -i` with the same limits, alternating, plus
 * PyBox's phase medians from its receipts.
 *   pybox-bench PYBOX_BINARY [RUNS]      a Markdown report
 *   pybox-bench --json [RUNS]            a campaign driver's result (PYBOX_BIN from the
 *                                        environment; docs/campaign.md) */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/bounds.h"
#include "../pybox/buf.h"
#include "../pybox/docker/engine.h"
#include "../pybox/image/image.h"
#include "../pybox/policy.h"
#include "../pybox/state.h"
#include "../pybox/util.h"

static const char program[] = "print('hello')\n";

/* Run argv with program on stdin; stdout captured into out (may be NULL). Returns the
 * exit code and the wall time in *secs. */
static int run(const char *const argv[], pybox_buf_t *out, double *secs)
{
    int in[2], o[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0)
        return -1;
    double t0 = pybox_now_s();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(o[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(o[1]);
    if (pybox_write_all(in[1], program, sizeof program - 1) < 0)
        perror("write");
    close(in[1]);
    char buf[65536];
    ssize_t n;
    while ((n = read(o[0], buf, sizeof buf)) > 0)
        if (out)
            pybox_buf_add(out, buf, (size_t)n);
    close(o[0]);
    int st;
    waitpid(pid, &st, 0);
    *secs = pybox_now_s() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *const phases[] = {"create", "verify", "attach", "start", "arm", "run", "collect", "remove", "total"};
#define NPHASES 9

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pybox-bench PYBOX_BINARY [RUNS] | pybox-bench --json [RUNS]\n");
        return 2;
    }
    bool json = strcmp(argv[1], "--json") == 0;
    if (json) {
        argv[1] = getenv("PYBOX_BIN");
        if (argv[1] == NULL) {
            fprintf(stderr, "pybox-bench: --json takes the binary from PYBOX_BIN\n");
            return 2;
        }
    }
    int runs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 20;
    if (runs < 1 || runs > 1000)
        runs = 20;
    pybox_error_t err = {0};
    pybox_state_t st;
    pybox_backend_t *be = NULL;
    pybox_pin_t pin;
    if (pybox_state_open(&st, false, &err) < 0 || pybox_backend_open("docker", &st, &be, &err) < 0 ||
        pybox_image_resolve(&st, be, "stdlib", &pin, &err) < 0) {
        fprintf(stderr, "pybox-bench: %s\n", err.msg);
        return 1;
    }
    /* docker run gets the same seccomp profile, from a private temporary file. */
    char sc_path[] = "/tmp/pybox-bench-seccomp-XXXXXX";
    int sfd = mkstemp(sc_path);
    const char *sc = pybox_policy_seccomp();
    if (sfd < 0 || pybox_write_all(sfd, sc, strlen(sc)) < 0) {
        perror("seccomp profile");
        return 1;
    }
    close(sfd);
    char secopt[128], mem[32], pids[32], cpus[32], tmpfs[96], nofile[48], fsize[48];
    snprintf(secopt, sizeof secopt, "seccomp=%s", sc_path);
    snprintf(mem, sizeof mem, "%lldb", (long long)PYBOX_DEFAULT_MEMORY);
    snprintf(pids, sizeof pids, "%d", PYBOX_DEFAULT_PIDS);
    snprintf(cpus, sizeof cpus, "%.1f", PYBOX_DEFAULT_NANO_CPUS / 1e9);
    snprintf(tmpfs, sizeof tmpfs, "/tmp:rw,noexec,nosuid,nodev,size=%lld", (long long)PYBOX_TMP_BYTES);
    snprintf(nofile, sizeof nofile, "nofile=%d:%d", PYBOX_NOFILE, PYBOX_NOFILE);
    snprintf(fsize, sizeof fsize, "fsize=%lld:%lld", (long long)PYBOX_FSIZE_BYTES, (long long)PYBOX_FSIZE_BYTES);
    const char *const docker[] = {"docker",
                                  "run",
                                  "--rm",
                                  "-i",
                                  "--network",
                                  "none",
                                  "--read-only",
                                  "--user",
                                  "65534:65534",
                                  "--memory",
                                  mem,
                                  "--memory-swap",
                                  mem,
                                  "--pids-limit",
                                  pids,
                                  "--cpus",
                                  cpus,
                                  "--cap-drop",
                                  "ALL",
                                  "--security-opt",
                                  "no-new-privileges",
                                  "--security-opt",
                                  secopt,
                                  "--tmpfs",
                                  tmpfs,
                                  "--ulimit",
                                  nofile,
                                  "--ulimit",
                                  fsize,
                                  "--log-driver",
                                  "none",
                                  "--entrypoint",
                                  "/usr/bin/python3",
                                  pin.id,
                                  "-I",
                                  "-",
                                  NULL};
    const char *const pybox[] = {argv[1], "exec", "--json", NULL};
    const char *const pybox_data[] = {argv[1], "exec", "--json", "--image", "data", NULL};
    pybox_pin_t data_pin;
    pybox_error_t derr = {0};
    bool have_data = pybox_image_resolve(&st, be, "data", &data_pin, &derr) == 0;

    double *tp = calloc((size_t)runs, sizeof *tp), *td = calloc((size_t)runs, sizeof *td);
    double *tdata = calloc((size_t)runs, sizeof *tdata);
    double *ph[NPHASES];
    for (int k = 0; k < NPHASES; k++)
        ph[k] = calloc((size_t)runs, sizeof(double));
    /* One warm-up of each, not counted. */
    double w;
    run(pybox, NULL, &w);
    run(docker, NULL, &w);
    if (have_data)
        run(pybox_data, NULL, &w);
    for (int i = 0; i < runs; i++) {
        pybox_buf_t out;
        pybox_buf_init(&out, 0);
        int rc = run(pybox, &out, &tp[i]);
        cJSON *r = out.data ? cJSON_ParseWithLength(out.data, out.len) : NULL;
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "seen"), "timings_ms");
        for (int k = 0; k < NPHASES; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(tm, phases[k]);
            ph[k][i] = cJSON_IsNumber(v) ? v->valuedouble : 0;
        }
        cJSON_Delete(r);
        pybox_buf_free(&out);
        if (rc != 0) {
            fprintf(stderr, "pybox-bench: pybox exec exited %d\n", rc);
            return 1;
        }
        rc = run(docker, NULL, &td[i]);
        if (rc != 0) {
            fprintf(stderr, "pybox-bench: docker run exited %d\n", rc);
            return 1;
        }
        if (have_data && (rc = run(pybox_data, NULL, &tdata[i])) != 0) {
            fprintf(stderr, "pybox-bench: pybox exec --image data exited %d\n", rc);
            return 1;
        }
    }
    unlink(sc_path);
    double mp = median(tp, runs), md = median(td, runs);
    double mdata = have_data ? median(tdata, runs) : 0;
    if (json) {
        cJSON *r = cJSON_CreateObject();
        cJSON *o = cJSON_AddObjectToObject(r, "observed");
        cJSON_AddNumberToObject(o, "runs_each", runs);
        cJSON_AddStringToObject(o, "program", program);
        cJSON_AddStringToObject(o, "engine", be->ops->describe(be));
        cJSON_AddNumberToObject(o, "pybox_stdlib_median_s", mp);
        cJSON_AddNumberToObject(o, "pybox_stdlib_fastest_s", tp[0]);
        cJSON_AddNumberToObject(o, "pybox_stdlib_slowest_s", tp[runs - 1]);
        cJSON_AddNumberToObject(o, "docker_run_median_s", md);
        cJSON_AddNumberToObject(o, "docker_run_fastest_s", td[0]);
        cJSON_AddNumberToObject(o, "docker_run_slowest_s", td[runs - 1]);
        if (have_data)
            cJSON_AddNumberToObject(o, "pybox_data_median_s", mdata);
        cJSON_AddNumberToObject(o, "ratio_pybox_to_docker_run", mp / md);
        cJSON *phm = cJSON_AddObjectToObject(o, "phase_medians_ms");
        for (int k = 0; k < NPHASES; k++)
            cJSON_AddNumberToObject(phm, phases[k], median(ph[k], runs));
        cJSON *checks = cJSON_AddArrayToObject(r, "checks");
        char detail[256];
        cJSON *c1 = cJSON_CreateObject();
        cJSON_AddStringToObject(c1, "name", "pybox exec (stdlib) beside docker run --rm -i");
        cJSON_AddBoolToObject(c1, "ok", mp <= md);
        snprintf(detail, sizeof detail, "median %.3f s vs %.3f s (ratio %.2f) over %d runs each", mp, md, mp / md,
                 runs);
        cJSON_AddStringToObject(c1, "detail", detail);
        cJSON_AddItemToArray(checks, c1);
        cJSON *c2 = cJSON_CreateObject();
        cJSON_AddStringToObject(c2, "name", "pybox exec --image data");
        cJSON_AddBoolToObject(c2, "ok", have_data);
        if (have_data)
            snprintf(detail, sizeof detail, "median %.3f s over %d runs", mdata, runs);
        else
            snprintf(detail, sizeof detail, "the data image is not built");
        cJSON_AddStringToObject(c2, "detail", detail);
        cJSON_AddItemToArray(checks, c2);
        cJSON *c3 = cJSON_CreateObject();
        cJSON_AddStringToObject(c3, "name", "phase medians (ms)");
        cJSON_AddBoolToObject(c3, "ok", 1);
        pybox_buf_t pb;
        pybox_buf_init(&pb, 0);
        for (int k = 0; k < NPHASES; k++)
            pybox_buf_addf(&pb, "%s%s %.1f", k ? ", " : "", phases[k], median(ph[k], runs));
        cJSON_AddStringToObject(c3, "detail", pb.data);
        pybox_buf_free(&pb);
        cJSON_AddItemToArray(checks, c3);
        char *text = cJSON_PrintUnformatted(r);
        puts(text);
        free(text);
        cJSON_Delete(r);
    } else {
        char when[40];
        pybox_wall_iso(when, sizeof when);
        printf("# PyBox benchmark, %s\n\n", when);
        printf("%d complete runs of print('hello') each, alternating (stdlib, docker run, data), after one warm-up "
               "each; %s.\n\n",
               runs, be->ops->describe(be));
        printf("| path | median (s) | fastest (s) | slowest (s) |\n|---|---|---|---|\n");
        printf("| pybox exec (stdlib) | %.3f | %.3f | %.3f |\n", mp, tp[0], tp[runs - 1]);
        printf("| docker run --rm -i, same limits | %.3f | %.3f | %.3f |\n", md, td[0], td[runs - 1]);
        if (have_data) {
            printf("| pybox exec --image data | %.3f | %.3f | %.3f |\n", mdata, tdata[0], tdata[runs - 1]);
        } else {
            printf("| pybox exec --image data | not built | | |\n");
        }
        printf("\n");
        printf("Ratio pybox / docker run: %.2f (target: at most 1.00)\n\n", mp / md);
        printf("PyBox phase medians (ms, from its receipts):\n\n| phase | median |\n|---|---|\n");
        for (int k = 0; k < NPHASES; k++)
            printf("| %s | %.1f |\n", phases[k], median(ph[k], runs));
    }
    pybox_backend_close(be);
    for (int k = 0; k < NPHASES; k++)
        free(ph[k]);
    free(tp);
    free(td);
    free(tdata);
    return json || mp <= md ? 0 : 3;
}
