/* SPDX-License-Identifier: MIT */
/* pybox-bench: PyBox's speed, measured side by side with public references in one
 * session, reported as ratios beside the goals (docs/bench.md).
 *   pybox-bench [--goals] PYBOX_BINARY [RUNS]   a Markdown report
 *   pybox-bench --json [--goals] [RUNS]         a campaign driver's result (PYBOX_BIN from
 *                                               the environment; docs/campaign.md)
 * Without --goals the figures are reported and not judged (a few runs on a busy machine
 * say little); with it each goal is said met or missed, and the Markdown report's exit
 * status is 3 when one is missed (the JSON's figures say which: a goal is a measurement,
 * never a check of a campaign case).
 * The references: bare bubblewrap (`bwrap --unshare-all`, Debian's, on the same root
 * filesystem; no cgroup, filter or receipt) and `docker run --rm -i` with PyBox's limits. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/bounds.h"
#include "../pybox/box.h"
#include "../pybox/buf.h"
#include "../pybox/image/image.h"
#include "../pybox/policy.h"
#include "../pybox/state.h"
#include "../pybox/util.h"

static const char hello[] = "print('hello')\n";
static const char data_import[] = "import numpy, pandas, matplotlib.pyplot\nprint('imported')\n";

/* ---- running things ---- */

/* Start argv with program on stdin, stdout to out_fd (or /dev/null). */
static pid_t spawn(const char *const argv[], const char *program, int out_fd)
{
    int in[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(in[0], 0);
        dup2(out_fd >= 0 ? out_fd : devnull, 1);
        dup2(devnull, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    if (pybox_write_all(in[1], program, strlen(program)) < 0)
        perror("pybox-bench: write");
    close(in[1]);
    return pid;
}

static int status_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One complete run, its stdout captured into out (may be NULL); the exit code, the wall
 * time in *secs, and in *cpu (may be NULL) the CPU time, user and system, of the run's
 * process and of those it waited for (wait4): whole only for a command that starts no
 * process it does not wait for. */
static int run_cpu(const char *const argv[], const char *program, pybox_buf_t *out, double *secs, double *cpu)
{
    int o[2];
    if (pipe2(o, O_CLOEXEC) < 0)
        return -1;
    double t0 = pybox_now_s();
    pid_t pid = spawn(argv, program, o[1]);
    close(o[1]);
    char buf[65536];
    ssize_t n;
    while ((n = read(o[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0 && out != NULL)
            pybox_buf_add(out, buf, (size_t)n); /* bounded: past it the receipt reads as not JSON */
    close(o[0]);
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid)
        return -1;
    *secs = pybox_now_s() - t0;
    if (cpu != NULL)
        *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    return status_code(st);
}

static int run(const char *const argv[], const char *program, pybox_buf_t *out, double *secs)
{
    return run_cpu(argv, program, out, secs, NULL);
}

/* The time every CPU of the machine has spent busy so far (user, nice, system, irq and
 * softirq: kernel workers included), in seconds from the kernel's ticks; < 0 unknown. */
static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (f == NULL)
        return -1;
    unsigned long long v[7] = {0};
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (got != 7 || hz <= 0)
        return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz; /* not idle (3), not iowait (4) */
}

/* total runs, at most width at once; returns the wall time, *failed the runs whose exit
 * code was not 0, *busy (may be NULL) the machine's busy CPU time meanwhile (< 0 unknown). */
static double at_once(const char *const argv[], const char *program, int total, int width, int *failed, double *busy)
{
    *failed = 0;
    int started = 0, running = 0;
    double b0 = machine_busy_s();
    double t0 = pybox_now_s();
    while (started < total || running > 0) {
        while (running < width && started < total) {
            if (spawn(argv, program, -1) < 0)
                (*failed)++;
            else
                running++;
            started++;
        }
        int st;
        pid_t p = wait(&st);
        if (p < 0)
            break;
        running--;
        if (status_code(st) != 0)
            (*failed)++;
    }
    double t = pybox_now_s() - t0, b1 = machine_busy_s();
    if (busy != NULL)
        *busy = b0 >= 0 && b1 >= b0 ? b1 - b0 : -1;
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorted in place). */
static double median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- what a receipt says ---- */

static double num_at(const cJSON *j, const char *a, const char *b, const char *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (c)
        v = cJSON_GetObjectItemCaseSensitive(v, c);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* A receipt of a clean run of print('hello'): exit 0, the words, the box gone. */
static bool receipt_ok(const cJSON *r, const char *want_stdout)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "said"), "stdout"), "text");
    const cJSON *gone = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "seen"), "box"), "confirmed_gone");
    return cJSON_IsString(st) && strcmp(st->valuestring, "TARGET_EXIT_OBSERVED") == 0 && cJSON_IsString(out) &&
           strcmp(out->valuestring, want_stdout) == 0 && cJSON_IsTrue(gone);
}

/* ---- one backend through pybox exec ---- */

static const char *const phases[] = {"create", "verify", "attach", "start", "arm", "run", "collect", "remove", "total"};
#define NPHASES 9

typedef struct {
    const char *name; /* docker, native */
    bool present;
    char why_not[256];
    const char *argv[8];
    const char *data_argv[10];
    double *wall, *ph[NPHASES], *final_read;
    double *outside; /* ms of a run's wall time outside its receipt's total */
    int n, bad;
    double *data_wall, *data_prog;
    int n_data, bad_data;
} lane_t;

static void lane_init(lane_t *l, const char *name, const char *bin, int runs)
{
    memset(l, 0, sizeof *l);
    l->name = name;
    const char *a[] = {bin, "exec", "--json", "--backend", name, NULL};
    const char *d[] = {bin, "exec", "--json", "--backend", name, "--image", "data", "--timeout", "20", NULL};
    memcpy(l->argv, a, sizeof a);
    memcpy(l->data_argv, d, sizeof d);
    l->wall = calloc((size_t)runs, sizeof(double));
    l->final_read = calloc((size_t)runs, sizeof(double));
    l->outside = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < NPHASES; k++)
        l->ph[k] = calloc((size_t)runs, sizeof(double));
    l->data_wall = calloc((size_t)runs, sizeof(double));
    l->data_prog = calloc((size_t)runs, sizeof(double));
}

static void lane_free(lane_t *l)
{
    free(l->wall);
    free(l->final_read);
    free(l->outside);
    for (int k = 0; k < NPHASES; k++)
        free(l->ph[k]);
    free(l->data_wall);
    free(l->data_prog);
}

/* One run of argv with program: its receipt when it ran clean and printed want (NULL
 * otherwise), *secs its wall time. */
static cJSON *run_receipt(const char *const argv[], const char *program, const char *want, double *secs)
{
    pybox_buf_t out;
    pybox_buf_init(&out, 16 * 1024 * 1024);
    *secs = 0;
    int rc = run(argv, program, &out, secs);
    cJSON *r = out.data ? cJSON_ParseWithLength(out.data, out.len) : NULL;
    pybox_buf_free(&out);
    if (rc != 0 || !receipt_ok(r, want)) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static void lane_once(lane_t *l)
{
    double secs;
    cJSON *r = run_receipt(l->argv, hello, "hello\n", &secs);
    const cJSON *kern = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "seen"), "kernel");
    double arm = num_at(r, "seen", "timings_ms", "arm"), fr = num_at(kern, "final_read_ms", NULL, NULL);
    /* A clean run's receipt carries the figures the goals judge; one without them is a
     * failed run, never a zero that would meet a goal unmeasured. */
    if (r == NULL || arm < 0 || fr < 0) {
        l->bad++;
    } else {
        int i = l->n++;
        l->wall[i] = secs;
        for (int k = 0; k < NPHASES; k++) {
            double v = num_at(r, "seen", "timings_ms", phases[k]);
            l->ph[k][i] = v < 0 ? 0 : v; /* a phase a backend does not have (attach, natively) */
        }
        l->final_read[i] = fr;
        l->outside[i] = secs * 1e3 - l->ph[NPHASES - 1][i];
    }
    cJSON_Delete(r);
}

static void lane_data_once(lane_t *l)
{
    double secs;
    cJSON *r = run_receipt(l->data_argv, data_import, "imported\n", &secs);
    double prog_ms = num_at(r, "seen", "init_record", "program_ms");
    if (r == NULL || prog_ms < 0) { /* no init record: not measured */
        l->bad_data++;
    } else {
        int i = l->n_data++;
        l->data_wall[i] = secs;
        l->data_prog[i] = prog_ms / 1000.0;
    }
    cJSON_Delete(r);
}

/* ---- files in and out (native) ---- */

/* 64 files of 100 KB into /box/out, writable with --output; without it, into /tmp (a
 * bounded tmpfs as /box/out is): the same writes, nothing to bring back. */
static const char outputs[] = "import os\n"
                              "d = '/tmp' if os.statvfs('/box/out').f_flag & os.ST_RDONLY else '/box/out'\n"
                              "for i in range(64):\n"
                              "    with open('%s/f%02d' % (d, i), 'wb') as f:\n"
                              "        f.write(b'x' * 100000)\n"
                              "print('hello')\n";

typedef struct {
    double *plain, *in, *no_out, *out, *large; /* wall seconds */
    char *large_program;                       /* print('hello'), then comments to PYBOX_PROGRAM_MAX bytes */
    int n, bad;
} files_lane_t;

/* The largest program PyBox takes: print('hello') and comment lines, NUL-terminated. */
static char *largest_program(void)
{
    char *p = malloc((size_t)PYBOX_PROGRAM_MAX + 1);
    if (p == NULL)
        return NULL;
    size_t n = strlen(hello);
    memcpy(p, hello, n);
    for (size_t i = n; i < (size_t)PYBOX_PROGRAM_MAX; i++)
        p[i] = (i - n) % 80 == 0 ? '#' : (i - n) % 80 == 79 ? '\n' : 'x';
    p[PYBOX_PROGRAM_MAX - 1] = '\n';
    p[PYBOX_PROGRAM_MAX] = '\0';
    return p;
}

/* One round: print('hello') without and with an input of PYBOX_INPUT_MAX bytes, and a
 * program writing 64 files of 100 KB without and with --output (a new folder, removed
 * after): what taking files in and out adds, each beside the same run without it; and
 * print('hello') as the largest program PyBox takes (what a program's size adds). */
static void files_once(files_lane_t *f, const char *bin, const char *dir, const char *input)
{
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s/out", dir);
    const char *const plain[] = {bin, "exec", "--json", "--backend", "native", NULL};
    const char *const in[] = {bin, "exec", "--json", "--backend", "native", "--input", input, NULL};
    const char *const with_out[] = {bin, "exec", "--json", "--backend", "native", "--output", out, NULL};
    double t[5];
    cJSON *r[5] = {run_receipt(plain, hello, "hello\n", &t[0]), run_receipt(in, hello, "hello\n", &t[1]),
                   run_receipt(plain, outputs, "hello\n", &t[2]), run_receipt(with_out, outputs, "hello\n", &t[3]),
                   run_receipt(plain, f->large_program, "hello\n", &t[4])};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        pybox_remove_tree_at(dfd, "out");
        close(dfd);
    }
    bool ok = true;
    for (int k = 0; k < 5; k++) {
        ok = ok && r[k] != NULL;
        cJSON_Delete(r[k]);
    }
    if (!ok) {
        f->bad++;
        return;
    }
    int i = f->n++;
    f->plain[i] = t[0];
    f->in[i] = t[1];
    f->no_out[i] = t[2];
    f->out[i] = t[3];
    f->large[i] = t[4];
}

/* The bench's folder and its input file: 0, or -1 (nothing left). */
static int files_setup(char dir[], size_t len, char *input, size_t ilen)
{
    snprintf(dir, len, "/tmp/pybox-bench-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(input, ilen, "%s/input.bin", dir);
    int fd = open(input, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    char *buf = calloc(1, (size_t)PYBOX_INPUT_MAX);
    bool ok = fd >= 0 && buf != NULL && pybox_write_all(fd, buf, (size_t)PYBOX_INPUT_MAX) == 0;
    free(buf);
    if (fd >= 0)
        close(fd);
    if (!ok) {
        unlink(input);
        rmdir(dir);
        return -1;
    }
    return 0;
}

static void files_teardown(const char *dir, const char *input)
{
    unlink(input);
    rmdir(dir);
}

/* The median of the pairwise differences b - a, in ms. */
static double added_ms(const double *a, const double *b, int n)
{
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    for (int i = 0; i < n; i++)
        d[i] = (b[i] - a[i]) * 1e3;
    double m = median(d, n);
    free(d);
    return m;
}

/* ---- the references ---- */

/* The native backend's root filesystem folder of a pinned image (or "" when none). */
static void native_root(const pybox_state_t *st, const char *image, char *out, size_t len)
{
    out[0] = '\0';
    pybox_pin_t pin;
    const pybox_backend_ops_t *ops = pybox_backend_find("native");
    if (ops == NULL || pybox_pin_get(st, ops->name, image, &pin, NULL) != 1 || strncmp(pin.id, "sha256:", 7) != 0)
        return;
    char p[PATH_MAX], real[PATH_MAX];
    /* where the backend keeps its images, or links to those it borrows (box.h) */
    const char *where[] = {ops->lent_images, ops->borrowed_images};
    for (int i = 0; i < 2; i++) {
        char rel[PATH_MAX];
        struct stat sb;
        if (where[i] == NULL || pybox_fmt(rel, sizeof rel, "%s/%s", where[i], pin.id + 7) < 0 ||
            pybox_state_path(st, rel, p, sizeof p, NULL) < 0 || stat(p, &sb) < 0 || realpath(p, real) == NULL)
            continue;
        pybox_strlcpy(out, real, len);
        return;
    }
}

static bool on_path(const char *cmd)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        struct stat sb;
        if (n > 0 && n < sizeof buf - 64) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, cmd);
            if (stat(buf, &sb) == 0 && (sb.st_mode & 0111))
                return true;
        }
        p += n + (p[n] == ':');
    }
    return false;
}

/* ---- the report ---- */

typedef struct {
    const char *name;
    bool judged, met;
    char detail[384];
} goal_t;

static void goal(goal_t *g, size_t *n, bool judged, const char *name, bool met, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void goal(goal_t *g, size_t *n, bool judged, const char *name, bool met, const char *fmt, ...)
{
    goal_t *x = &g[(*n)++];
    x->name = name;
    x->judged = judged;
    x->met = met;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->detail, sizeof x->detail, fmt, ap);
    va_end(ap);
}

/* ---- pybox mcp through the official SDK client (tests/mcp/bench-driver.mjs) ---- */

#define MCP_DRIVER "tests/mcp/bench-driver.mjs"

typedef struct {
    bool present;
    char why_not[256];
    cJSON *figures; /* {"<image>": {"cold_ms", "warm_ms", "warm_calls", "calls", "ratio", "failed"}} */
} mcp_lane_t;

/* A warm server's calls beside a cold server's, on the native backend when it is present
 * (the default backend otherwise), through Node and the SDK client the tests install. */
static void mcp_measure(mcp_lane_t *m, const char *bin, int runs, bool native)
{
    memset(m, 0, sizeof *m);
    struct stat sb;
    if (stat(MCP_DRIVER, &sb) < 0 || stat("tests/mcp/node_modules/@modelcontextprotocol/sdk", &sb) < 0 ||
        !on_path("node")) {
        snprintf(m->why_not, sizeof m->why_not, "the MCP clients are not installed (make mcp-clients) or no node");
        return;
    }
    if (native)
        setenv("PYBOX_BACKEND", "native", 1);
    char n[16];
    snprintf(n, sizeof n, "%d", runs);
    const char *const argv[] = {"node", MCP_DRIVER, bin, n, NULL};
    pybox_buf_t out;
    pybox_buf_init(&out, 1 << 20);
    double secs = 0;
    int rc = run(argv, "", &out, &secs);
    if (native)
        unsetenv("PYBOX_BACKEND");
    m->figures = rc == 0 ? cJSON_ParseWithLength(out.data ? out.data : "", out.len) : NULL;
    pybox_buf_free(&out);
    if (!cJSON_IsObject(m->figures)) {
        snprintf(m->why_not, sizeof m->why_not, "the SDK client's driver failed (exit %d)", rc);
        cJSON_Delete(m->figures);
        m->figures = NULL;
        return;
    }
    m->present = true;
}

/* One image's warm-to-cold goal. */
static void mcp_goal(goal_t *g, size_t *ng, bool judge, const mcp_lane_t *m, const char *image, const char *name,
                     double most)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(m->figures, image);
    double cold = num_at(x, "cold_ms", NULL, NULL), warm = num_at(x, "warm_ms", NULL, NULL);
    double wc = num_at(x, "warm_calls", NULL, NULL), calls = num_at(x, "calls", NULL, NULL);
    double failed = num_at(x, "failed", NULL, NULL);
    if (!m->present || cold <= 0 || warm <= 0) {
        goal(g, ng, false, name, false, "not measured: %s", m->present ? "no figures for the image" : m->why_not);
        return;
    }
    goal(g, ng, judge, name, warm <= most * cold && failed == 0,
         "median %.1f ms warm vs %.1f ms cold: %.3fx (%.0f of %.0f calls started warm, %.0f failed)", warm, cold,
         warm / cold, wc, calls, failed);
}

int main(int argc, char **argv)
{
    bool json = false, judge = false;
    const char *bin = NULL;
    int runs = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--goals") == 0)
            judge = true;
        else if (argv[i][0] == '/' || strchr(argv[i], '/') != NULL)
            bin = argv[i];
        else {
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*end != '\0' || v < 3 || v > 1000) {
                fprintf(stderr, "usage: pybox-bench [--goals] PYBOX_BINARY [RUNS] | pybox-bench --json [--goals] "
                                "[RUNS] (RUNS from 3 to 1000)\n");
                return 2;
            }
            runs = (int)v;
        }
    }
    if (bin == NULL)
        bin = getenv("PYBOX_BIN");
    if (bin == NULL) {
        fprintf(stderr, "pybox-bench: name the pybox binary (or set PYBOX_BIN)\n");
        return 2;
    }
    pybox_error_t err = {0};
    pybox_state_t st;
    if (pybox_state_open(&st, false, &err) < 0) {
        fprintf(stderr, "pybox-bench: %s\n", err.msg);
        return 1;
    }

    /* The lanes: each backend that opens and has the stdlib image pinned. */
    lane_t lanes[2];
    const char *names[2] = {"native", "docker"};
    char describe[2][160] = {"", ""};
    for (int b = 0; b < 2; b++) {
        lane_init(&lanes[b], names[b], bin, runs);
        pybox_backend_t *be = NULL;
        pybox_pin_t pin;
        pybox_error_t berr = {0};
        if (pybox_backend_open(names[b], &st, &be, &berr) == 0 &&
            pybox_image_resolve(&st, be, "stdlib", &pin, &berr) == 0) {
            lanes[b].present = true;
            snprintf(describe[b], sizeof describe[b], "%s", be->ops->describe(be));
        } else {
            pybox_strlcpy(lanes[b].why_not, berr.msg, sizeof lanes[b].why_not);
        }
        pybox_backend_close(be);
    }
    lane_t *nat = &lanes[0], *dock = &lanes[1];
    if (!nat->present && !dock->present) {
        fprintf(stderr, "pybox-bench: no backend to measure: native: %s; docker: %s\n", nat->why_not, dock->why_not);
        return 1;
    }

    /* bubblewrap on the native stdlib image's own folder (the same files, no cgroup). */
    char root[PATH_MAX];
    native_root(&st, "stdlib", root, sizeof root);
    bool have_bwrap = root[0] && on_path("bwrap");
    const char *const bwrap[] = {
        "bwrap",   "--unshare-all", "--die-with-parent", "--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
        "--tmpfs", "/tmp",          "/usr/bin/python3",  "-I",        "-",  NULL};
    /* docker run with the same limits and the same seccomp profile. */
    char sc_path[] = "/tmp/pybox-bench-seccomp-XXXXXX";
    bool have_docker_run = false;
    pybox_pin_t dpin;
    char secopt[128], mem[32], pids[32], cpus[32], tmpfs[96], nofile[48], fsize[48];
    if (dock->present && on_path("docker") && pybox_pin_get(&st, "docker", "stdlib", &dpin, NULL) == 1) {
        int sfd = mkstemp(sc_path);
        const char *sc = pybox_policy_seccomp();
        have_docker_run = sfd >= 0 && pybox_write_all(sfd, sc, strlen(sc)) == 0;
        if (sfd >= 0)
            close(sfd);
    }
    snprintf(secopt, sizeof secopt, "seccomp=%s", sc_path);
    snprintf(mem, sizeof mem, "%lldb", (long long)PYBOX_DEFAULT_MEMORY);
    snprintf(pids, sizeof pids, "%d", PYBOX_DEFAULT_PIDS);
    snprintf(cpus, sizeof cpus, "%.1f", PYBOX_DEFAULT_NANO_CPUS / 1e9);
    snprintf(tmpfs, sizeof tmpfs, "/tmp:rw,noexec,nosuid,nodev,size=%lld", (long long)PYBOX_TMP_BYTES);
    snprintf(nofile, sizeof nofile, "nofile=%d:%d", PYBOX_NOFILE, PYBOX_NOFILE);
    snprintf(fsize, sizeof fsize, "fsize=%lld:%lld", (long long)PYBOX_FSIZE_BYTES, (long long)PYBOX_FSIZE_BYTES);
    const char *const docker_run[] = {"docker",
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
                                      dpin.id,
                                      "-I",
                                      "-",
                                      NULL};

    /* 1. Complete runs, interleaved, after one warm-up of each. */
    double *tb = calloc((size_t)runs, sizeof *tb), *tdr = calloc((size_t)runs, sizeof *tdr);
    int nb = 0, ndr = 0, bad_ref = 0, bad_start = 0;
    double w;
    /* Process start and exit alone: `pybox --version` beside `bwrap --version`. */
    const char *const pybox_version[] = {bin, "--version", NULL};
    const char *const bwrap_version[] = {"bwrap", "--version", NULL};
    double *sw[2], *sc[2];
    int ns[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        sw[k] = calloc((size_t)runs, sizeof(double));
        sc[k] = calloc((size_t)runs, sizeof(double));
    }
    for (int b = 0; b < 2; b++)
        if (lanes[b].present)
            run(lanes[b].argv, hello, NULL, &w);
    if (have_bwrap)
        run(bwrap, hello, NULL, &w);
    if (have_docker_run)
        run(docker_run, hello, NULL, &w);
    for (int i = 0; i < runs; i++) {
        for (int b = 0; b < 2; b++)
            if (lanes[b].present)
                lane_once(&lanes[b]);
        if (have_bwrap)
            run(bwrap, hello, NULL, &tb[nb]) == 0 ? nb++ : bad_ref++;
        if (have_docker_run)
            run(docker_run, hello, NULL, &tdr[ndr]) == 0 ? ndr++ : bad_ref++;
        for (int k = 0; k < (have_bwrap ? 2 : 1); k++) {
            if (run_cpu(k == 0 ? pybox_version : bwrap_version, "", NULL, &sw[k][ns[k]], &sc[k][ns[k]]) == 0)
                ns[k]++;
            else if (k == 0)
                bad_start++;
            else
                bad_ref++;
        }
    }
    if (have_docker_run)
        unlink(sc_path);

    /* 2. At once: four over 64 runs, and 200 at sixteen (native; bubblewrap beside it). */
    int f4 = 0, f16 = 0, fb4 = 0;
    double w4 = 0, w16 = 0, wb4 = 0, busy4 = -1, busyb4 = -1;
    if (nat->present) {
        w4 = at_once(nat->argv, hello, 64, 4, &f4, &busy4);
        w16 = at_once(nat->argv, hello, 200, 16, &f16, NULL);
    }
    if (have_bwrap)
        wb4 = at_once(bwrap, hello, 64, 4, &fb4, &busyb4);

    /* 2b. Files in and out (native), interleaved run by run. */
    files_lane_t fl = {0};
    int files_runs = runs < 10 ? runs : 10;
    char fdir[64], finput[PATH_MAX];
    bool files_ready = nat->present && files_setup(fdir, sizeof fdir, finput, sizeof finput) == 0;
    if (files_ready) {
        fl.plain = calloc((size_t)files_runs, sizeof(double));
        fl.in = calloc((size_t)files_runs, sizeof(double));
        fl.no_out = calloc((size_t)files_runs, sizeof(double));
        fl.out = calloc((size_t)files_runs, sizeof(double));
        fl.large = calloc((size_t)files_runs, sizeof(double));
        fl.large_program = largest_program();
        for (int i = 0; fl.large != NULL && fl.large_program != NULL && i < files_runs; i++)
            files_once(&fl, bin, fdir, finput);
        files_teardown(fdir, finput);
    }

    /* 3. The data image: numpy, pandas and matplotlib imported, at half a CPU. */
    int data_runs = runs < 10 ? runs : 10;
    for (int i = 0; i < data_runs; i++)
        for (int b = 0; b < 2; b++)
            if (lanes[b].present)
                lane_data_once(&lanes[b]);

    /* 4. pybox mcp: a call on a server with a warm box beside the same on a cold one. */
    mcp_lane_t mcp;
    mcp_measure(&mcp, bin, runs, nat->present);

    /* The figures. */
    double mn = median(nat->wall, nat->n), md = median(dock->wall, dock->n);
    double mb = median(tb, nb), mdr = median(tdr, ndr);
    double arm = median(nat->ph[4], nat->n), fread_n = median(nat->final_read, nat->n);
    double fread_d = median(dock->final_read, dock->n);
    double data_n = median(nat->data_prog, nat->n_data), data_d = median(dock->data_prog, dock->n_data);
    double data_nw = median(nat->data_wall, nat->n_data), data_dw = median(dock->data_wall, dock->n_data);
    double rate4 = w4 > 0 ? 64 / w4 : 0, rateb4 = wb4 > 0 ? 64 / wb4 : 0;
    /* CPU a run while four ran at once (the machine's, kernel workers included), and what
     * it bounds: however many run at once, at most (CPUs online / CPU a run) a second. */
    double cpu_n = busy4 > 0 ? busy4 / 64 : 0, cpu_b = busyb4 > 0 ? busyb4 / 64 : 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    double bound_n = cpu_n > 0 && online > 0 ? (double)online / cpu_n : 0;
    double bound_b = cpu_b > 0 && online > 0 ? (double)online / cpu_b : 0;
    double start_w[2], start_c[2];
    for (int k = 0; k < 2; k++) {
        start_w[k] = median(sw[k], ns[k]);
        start_c[k] = median(sc[k], ns[k]);
    }

    goal_t g[16];
    size_t ng = 0;
    const char *g_bwrap = "native complete run <= 1.1x bare bwrap --unshare-all";
    if (nat->present && have_bwrap)
        goal(g, &ng, judge, g_bwrap, mn <= 1.1 * mb, "median %.1f ms vs %.1f ms: %.2fx", mn * 1e3, mb * 1e3, mn / mb);
    else
        goal(g, &ng, false, g_bwrap, false, "not measured: %s",
             !nat->present ? nat->why_not : "bubblewrap (bwrap) is not installed or no native stdlib image");
    if (nat->present && dock->present)
        goal(g, &ng, judge, "native complete run <= 0.2x the docker backend", mn <= 0.2 * md,
             "median %.1f ms vs %.1f ms: %.2fx", mn * 1e3, md * 1e3, mn / md);
    else
        goal(g, &ng, false, "native complete run <= 0.2x the docker backend", false, "not measured: %s",
             !nat->present ? nat->why_not : dock->why_not);
    if (nat->present) {
        double outside = median(nat->outside, nat->n);
        goal(g, &ng, judge, "a native run's time outside its receipt's total <= 2 ms", outside <= 2.0,
             "median %.1f ms (process start, signing, printing, exit)", outside);
        if (have_bwrap)
            goal(g, &ng, judge, "four at once over 64 runs >= 0.95x bubblewrap's runs/s",
                 rate4 >= 0.95 * rateb4 && f4 == 0 && fb4 == 0, "%.1f runs/s vs %.1f: %.2fx, %d failed", rate4, rateb4,
                 rateb4 > 0 ? rate4 / rateb4 : 0, f4);
        else
            goal(g, &ng, false, "four at once over 64 runs >= 0.95x bubblewrap's runs/s", false,
                 "not measured: bubblewrap (bwrap) is not installed (native %.1f runs/s, %d failed)", rate4, f4);
        goal(g, &ng, judge, "200 runs at 16 at once, 0 failures", f16 == 0, "%d failed, %.2f s (%.1f runs/s)", f16, w16,
             w16 > 0 ? 200 / w16 : 0);
        goal(g, &ng, judge, "watcher arming <= 1 ms", arm <= 1.0, "median %.2f ms", arm);
        goal(g, &ng, judge, "the final reading adds <= 2 ms", fread_n <= 2.0, "median %.2f ms (docker backend %.2f ms)",
             fread_n, fread_d);
        const char *g_in = "an 8 MiB input adds <= 30 ms to a native run";
        const char *g_out = "64 output files of 100 KB add <= 30 ms to a native run";
        if (fl.n > 0) {
            double ai = added_ms(fl.plain, fl.in, fl.n), ao = added_ms(fl.no_out, fl.out, fl.n);
            goal(g, &ng, judge, g_in, ai <= 30.0, "median %.1f ms over the same run without it (%d pairs)", ai, fl.n);
            goal(g, &ng, judge, g_out, ao <= 30.0, "median %.1f ms over the same program without --output (%d pairs)",
                 ao, fl.n);
        } else {
            goal(g, &ng, false, g_in, false, "not measured: %s",
                 files_ready ? "the runs failed" : "no folder for the input in /tmp");
            goal(g, &ng, false, g_out, false, "not measured: %s",
                 files_ready ? "the runs failed" : "no folder for the input in /tmp");
        }
    }
    mcp_goal(g, &ng, judge, &mcp, "stdlib", "pybox mcp print(1): a warm call <= 0.25x a cold server's (SDK client)",
             0.25);
    mcp_goal(g, &ng, judge, &mcp, "data",
             "pybox mcp data image import pandas: a warm call <= 0.05x a cold server's (SDK client)", 0.05);
    {
        const cJSON *se = cJSON_GetObjectItemCaseSensitive(mcp.figures, "session");
        double over = num_at(se, "print_overhead_ms", NULL, NULL), ratio = num_at(se, "df_ratio", NULL, NULL);
        double sfail = num_at(se, "failed", NULL, NULL);
        const char *n1 = "pybox mcp session: a print(1) call <= 2 ms beyond the program's own time (SDK client)";
        const char *n2 = "pybox mcp session: a call reading an earlier call's DataFrame <= 1.3x the line's own time";
        if (mcp.present && se != NULL && over > 0) {
            goal(g, &ng, judge, n1, over <= 2.0 && sfail == 0,
                 "median %.1f ms from request to response beyond the box init's count of the call, %.0f failed", over,
                 sfail);
            goal(g, &ng, judge, n2, ratio > 0 && ratio <= 1.3 && sfail == 0,
                 "median %.1f ms a call vs %.1f ms the groupby line itself in the session's interpreter: %.2fx",
                 num_at(se, "df_call_ms", NULL, NULL), num_at(se, "df_line_ms", NULL, NULL), ratio);
        } else {
            goal(g, &ng, false, n1, false, "not measured: %s",
                 mcp.present ? "the session's calls failed" : mcp.why_not);
            goal(g, &ng, false, n2, false, "not measured: %s",
                 mcp.present ? "the session's calls failed" : mcp.why_not);
        }
    }
    int missed = 0;
    for (size_t i = 0; i < ng; i++)
        missed += g[i].judged && !g[i].met;
    int failures = nat->bad + dock->bad + f4 + f16 + nat->bad_data + dock->bad_data + fl.bad + bad_start;

    if (json) {
        cJSON *r = cJSON_CreateObject();
        cJSON *o = cJSON_AddObjectToObject(r, "observed");
        cJSON_AddNumberToObject(o, "runs_each", runs);
        cJSON_AddStringToObject(o, "program", hello);
        cJSON_AddBoolToObject(o, "goals_judged", judge);
        for (int b = 0; b < 2; b++) {
            lane_t *l = &lanes[b];
            cJSON *x = cJSON_AddObjectToObject(o, l->name);
            cJSON_AddBoolToObject(x, "present", l->present);
            if (!l->present) {
                cJSON_AddStringToObject(x, "why_not", l->why_not);
                continue;
            }
            cJSON_AddStringToObject(x, "backend", describe[b]);
            cJSON_AddNumberToObject(x, "median_s", median(l->wall, l->n));
            cJSON_AddNumberToObject(x, "fastest_s", l->n ? l->wall[0] : 0);
            cJSON_AddNumberToObject(x, "slowest_s", l->n ? l->wall[l->n - 1] : 0);
            cJSON_AddNumberToObject(x, "failed", l->bad);
            cJSON *phm = cJSON_AddObjectToObject(x, "phase_medians_ms");
            for (int k = 0; k < NPHASES; k++)
                cJSON_AddNumberToObject(phm, phases[k], median(l->ph[k], l->n));
            cJSON_AddNumberToObject(x, "final_read_median_ms", median(l->final_read, l->n));
            cJSON_AddNumberToObject(x, "data_import_median_s", median(l->data_prog, l->n_data));
            cJSON_AddNumberToObject(x, "data_complete_median_s", median(l->data_wall, l->n_data));
        }
        if (have_bwrap)
            cJSON_AddNumberToObject(o, "bwrap_median_s", mb);
        if (have_docker_run)
            cJSON_AddNumberToObject(o, "docker_run_median_s", mdr);
        if (nat->present && have_bwrap)
            cJSON_AddNumberToObject(o, "ratio_native_to_bwrap", mn / mb);
        if (nat->present && dock->present)
            cJSON_AddNumberToObject(o, "ratio_native_to_docker_backend", mn / md);
        if (dock->present && have_docker_run)
            cJSON_AddNumberToObject(o, "ratio_docker_backend_to_docker_run", md / mdr);
        cJSON_AddNumberToObject(o, "native_four_at_once_runs_per_s", rate4);
        cJSON_AddNumberToObject(o, "bwrap_four_at_once_runs_per_s", rateb4);
        if (cpu_n > 0) {
            cJSON_AddNumberToObject(o, "native_four_at_once_cpu_per_run_ms", cpu_n * 1e3);
            cJSON_AddNumberToObject(o, "native_four_at_once_cpu_bound_runs_per_s", bound_n);
        }
        if (cpu_b > 0) {
            cJSON_AddNumberToObject(o, "bwrap_four_at_once_cpu_per_run_ms", cpu_b * 1e3);
            cJSON_AddNumberToObject(o, "bwrap_four_at_once_cpu_bound_runs_per_s", bound_b);
        }
        cJSON_AddNumberToObject(o, "cpus_online", (double)online);
        if (ns[0] > 0) {
            cJSON_AddNumberToObject(o, "pybox_version_median_ms", start_w[0] * 1e3);
            cJSON_AddNumberToObject(o, "pybox_version_cpu_median_ms", start_c[0] * 1e3);
        }
        if (ns[1] > 0) {
            cJSON_AddNumberToObject(o, "bwrap_version_median_ms", start_w[1] * 1e3);
            cJSON_AddNumberToObject(o, "bwrap_version_cpu_median_ms", start_c[1] * 1e3);
        }
        cJSON_AddNumberToObject(o, "native_200_at_16_failed", f16);
        cJSON_AddNumberToObject(o, "native_200_at_16_s", w16);
        if (nat->present)
            cJSON_AddNumberToObject(o, "native_outside_total_median_ms", median(nat->outside, nat->n));
        if (fl.n > 0) {
            cJSON_AddNumberToObject(o, "native_input_8mib_added_ms", added_ms(fl.plain, fl.in, fl.n));
            cJSON_AddNumberToObject(o, "native_64_outputs_added_ms", added_ms(fl.no_out, fl.out, fl.n));
            cJSON_AddNumberToObject(o, "native_largest_program_added_ms", added_ms(fl.plain, fl.large, fl.n));
        }
        if (mcp.present)
            cJSON_AddItemToObject(o, "mcp_warm_vs_cold", cJSON_Duplicate(mcp.figures, true));
        else
            cJSON_AddStringToObject(o, "mcp_warm_vs_cold_not_measured", mcp.why_not);
        cJSON *checks = cJSON_AddArrayToObject(r, "checks");
        cJSON *c0 = cJSON_CreateObject();
        cJSON_AddStringToObject(c0, "name", "every run completed with its receipt");
        cJSON_AddBoolToObject(c0, "ok", failures == 0 && bad_ref == 0);
        char d0[160];
        snprintf(d0, sizeof d0, "%d of PyBox's runs failed, %d of the references'", failures, bad_ref);
        cJSON_AddStringToObject(c0, "detail", d0);
        cJSON_AddItemToArray(checks, c0);
        /* The goals are figures, each said met or missed (or not judged), never a check
         * of the case: speed is a measurement on a shared machine, not a test. */
        cJSON *goals = cJSON_AddArrayToObject(o, "goals");
        cJSON *missed_names = cJSON_CreateArray();
        int judged_n = 0, met_n = 0;
        for (size_t i = 0; i < ng; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "goal", g[i].name);
            cJSON_AddStringToObject(x, "measured", g[i].detail);
            if (g[i].judged) {
                judged_n++;
                met_n += g[i].met;
                cJSON_AddBoolToObject(x, "met", g[i].met);
                if (!g[i].met)
                    cJSON_AddItemToArray(missed_names, cJSON_CreateString(g[i].name));
            } else {
                cJSON_AddNullToObject(x, "met");
            }
            cJSON_AddItemToArray(goals, x);
        }
        char metd[64];
        if (judge)
            snprintf(metd, sizeof metd, "%d of %d", met_n, judged_n);
        else
            snprintf(metd, sizeof metd, "not judged (a quick run)");
        cJSON_AddStringToObject(o, "goals_met", metd);
        cJSON_AddItemToObject(o, "goals_missed", missed_names);
        char *text = cJSON_PrintUnformatted(r);
        puts(text);
        free(text);
        cJSON_Delete(r);
    } else {
        char when[40];
        pybox_wall_iso(when, sizeof when);
        printf("# PyBox benchmark, %s\n\n", when);
        printf("%d complete runs of `print('hello')` each, interleaved, after one warm-up each", runs);
        for (int b = 0; b < 2; b++)
            if (lanes[b].present)
                printf("; %s: %s", lanes[b].name, describe[b]);
        printf(".\n\n| path | median (ms) | fastest (ms) | slowest (ms) |\n|---|---|---|---|\n");
        for (int b = 0; b < 2; b++) {
            lane_t *l = &lanes[b];
            if (l->present && l->n > 0)
                printf("| pybox exec --backend %s | %.1f | %.1f | %.1f |\n", l->name, median(l->wall, l->n) * 1e3,
                       l->wall[0] * 1e3, l->wall[l->n - 1] * 1e3);
            else
                printf("| pybox exec --backend %s | not measured: %s | | |\n", l->name,
                       l->present ? "every run failed" : l->why_not);
        }
        if (have_bwrap)
            printf("| bwrap --unshare-all, read-only root (reference) | %.1f | %.1f | %.1f |\n", mb * 1e3, tb[0] * 1e3,
                   tb[nb - 1] * 1e3);
        if (have_docker_run)
            printf("| docker run --rm -i, same limits (reference) | %.1f | %.1f | %.1f |\n", mdr * 1e3, tdr[0] * 1e3,
                   tdr[ndr - 1] * 1e3);
        printf("\nAt once (native): 64 runs four at a time %.1f runs/s (bwrap: %.1f runs/s); 200 runs sixteen at a "
               "time in %.2f s, %d failed.\n\n",
               rate4, rateb4, w16, f16);
        if (bound_n > 0 && bound_b > 0)
            printf("CPU a run, four at once (the machine's busy time over the 64 runs, kernel workers included, "
                   "from /proc/stat): native %.1f ms, bwrap %.1f ms. With %ld CPU%s online, no number at once can run "
                   "more than %ld / CPU a run: %.1f native runs/s, %.1f bwrap runs/s, a ratio of %.2fx. Four at "
                   "once reached %.0f%% of the bound natively, %.0f%% with bwrap.\n\n",
                   cpu_n * 1e3, cpu_b * 1e3, online, online == 1 ? "" : "s", online, bound_n, bound_b,
                   bound_n / bound_b, 100 * rate4 / bound_n, 100 * rateb4 / bound_b);
        if (ns[0] > 0 && ns[1] > 0)
            printf("Process start and exit alone, interleaved: `pybox --version` %.2f ms (CPU %.2f ms), `bwrap "
                   "--version` %.2f ms (CPU %.2f ms).\n\n",
                   start_w[0] * 1e3, start_c[0] * 1e3, start_w[1] * 1e3, start_c[1] * 1e3);
        else if (ns[0] > 0)
            printf("Process start and exit alone: `pybox --version` %.2f ms (CPU %.2f ms).\n\n", start_w[0] * 1e3,
                   start_c[0] * 1e3);
        if (fl.n > 0)
            printf("Program size (native): `print('hello')` as the largest program PyBox takes (%d bytes, the rest "
                   "comments) adds %.1f ms to the same run of the bare program (median of %d pairs).\n\n",
                   PYBOX_PROGRAM_MAX, added_ms(fl.plain, fl.large, fl.n), fl.n);
        if (nat->n_data > 0 || dock->n_data > 0)
            printf("Data image, `import numpy, pandas, matplotlib.pyplot` at 0.5 CPU: the program's own time %.3f s "
                   "native, %.3f s docker; complete runs %.3f s and %.3f s.\n\n",
                   data_n, data_d, data_nw, data_dw);
        if (mcp.present)
            printf("pybox mcp (%s backend), the official SDK client's request to its response, interleaved: a server "
                   "with --warm 1 beside one with --warm 0; the figures are in the goals below.\n\n",
                   nat->present ? "native" : "default");
        printf("| goal | measured | %s |\n|---|---|---|\n", judge ? "met" : "judged");
        for (size_t i = 0; i < ng; i++)
            printf("| %s | %s | %s |\n", g[i].name, g[i].detail,
                   !g[i].judged ? "not judged"
                   : g[i].met   ? "yes"
                                : "**NO**");
        printf("\nPhase medians (ms, from the receipts):\n\n| phase |");
        for (int b = 0; b < 2; b++)
            if (lanes[b].present)
                printf(" %s |", lanes[b].name);
        printf("\n|---|");
        for (int b = 0; b < 2; b++)
            if (lanes[b].present)
                printf("---|");
        printf("\n");
        for (int k = 0; k < NPHASES; k++) {
            printf("| %s |", phases[k]);
            for (int b = 0; b < 2; b++)
                if (lanes[b].present)
                    printf(" %.1f |", median(lanes[b].ph[k], lanes[b].n));
            printf("\n");
        }
        if (failures > 0 || bad_ref > 0)
            printf("\n%d of PyBox's runs and %d of the references' failed.\n", failures, bad_ref);
    }
    for (int b = 0; b < 2; b++)
        lane_free(&lanes[b]);
    cJSON_Delete(mcp.figures);
    free(fl.plain);
    free(fl.in);
    free(fl.no_out);
    free(fl.out);
    free(fl.large);
    free(fl.large_program);
    free(tb);
    free(tdr);
    for (int k = 0; k < 2; k++) {
        free(sw[k]);
        free(sc[k]);
    }
    if (failures > 0)
        return 1;
    return judge && missed > 0 && !json ? 3 : 0; /* the campaign reads met or missed from the figures */
}
