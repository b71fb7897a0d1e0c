/* SPDX-License-Identifier: MIT */
/* Integration test helpers (see itest.h). */
#include "itest.h"

#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/box.h"
#include "../pybox/buf.h"
#include "../pybox/cgroup.h"
#include "../pybox/image/image.h"
#include "../pybox/native/cgroup.h"
#include "../pybox/native/native.h"
#include "../pybox/native/sandbox.h"
#include "../pybox/prepare.h"
#include "../pybox/run.h"
#include "../pybox/util.h"

extern char **environ;

static const char *pybox_bin(void)
{
    const char *b = getenv("PYBOX_BIN");
    return b && *b ? b : "build/pybox";
}

/* The program the environment variable var names, else the one called name beside the
 * pybox under test, as make builds them. */
static const char *tool_bin(const char *var, const char *name, char bin[PATH_MAX])
{
    const char *b = getenv(var);
    if (b && *b)
        return b;
    const char *main_bin = pybox_bin();
    const char *slash = strrchr(main_bin, '/');
    int dir_len = slash ? (int)(slash - main_bin) + 1 : 0;
    ck_assert_int_eq(pybox_fmt(bin, PATH_MAX, "%.*s%s", dir_len, main_bin, name), 0);
    return bin;
}

const char *itest_test_bin(void)
{
    static char bin[PATH_MAX];
    return tool_bin("PYBOX_TEST_BIN", "pybox-test", bin);
}

const char *itest_campaign_bin(void)
{
    static char bin[PATH_MAX];
    return tool_bin("PYBOX_CAMPAIGN_BIN", "pybox-campaign", bin);
}

static int memfd_with(const char *name, const void *data, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    if (len > 0)
        ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

static char *slurp_fd(int fd, size_t *len)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        pybox_buf_add(&b, buf, (size_t)n);
    pybox_buf_add(&b, "", 0);
    *len = b.len;
    return pybox_buf_steal(&b);
}

static void start_bin(const char *bin, const char *program, size_t len, const char *const *args, const char *const *env,
                      unsigned closed, itest_job_t *j)
{
    /* stdin, stdout and stderr are memory files: no pipe can fill up, nothing to pump. */
    memset(j, 0, sizeof *j);
    int in = memfd_with("stdin", program, len);
    j->out_fd = memfd_with("stdout", NULL, 0);
    j->err_fd = memfd_with("stderr", NULL, 0);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    for (int i = 0; args && args[i] && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    j->pid = fork();
    ck_assert_int_ge(j->pid, 0);
    if (j->pid == 0) {
        dup2(in, 0);
        dup2(j->out_fd, 1);
        dup2(j->err_fd, 2);
        for (int fd = 0; fd <= 2; fd++)
            if (closed & (1u << fd))
                close(fd);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in);
}

void itest_start_closed(const char *program, size_t len, const char *const *args, const char *const *env,
                        unsigned closed, itest_job_t *j)
{
    start_bin(pybox_bin(), program, len, args, env, closed, j);
}

void itest_start(const char *program, size_t len, const char *const *args, const char *const *env, itest_job_t *j)
{
    start_bin(pybox_bin(), program, len, args, env, 0, j);
}

void itest_finish(itest_job_t *j, itest_run_t *r)
{
    memset(r, 0, sizeof *r);
    int st;
    ck_assert_int_eq(waitpid(j->pid, &st, 0), j->pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = slurp_fd(j->out_fd, &r->out_len);
    r->err = slurp_fd(j->err_fd, &r->err_len);
    close(j->out_fd);
    close(j->err_fd);
    r->receipt = cJSON_ParseWithLength(r->out, r->out_len);
}

void itest_pybox(const char *program, size_t len, const char *const *args, const char *const *env, itest_run_t *r)
{
    itest_job_t j;
    itest_start(program, len, args, env, &j);
    itest_finish(&j, r);
}

void itest_pybox_ok(const char *program, size_t len, const char *const *args, const char *const *env)
{
    itest_run_t r;
    itest_pybox(program, len, args, env, &r);
    ck_assert_int_eq(r.status, 0);
    itest_run_free(&r);
}

const cJSON *itest_exec_ended(const char *program, const char *const *extra, int status, itest_run_t *r)
{
    itest_exec(program, extra, r);
    ck_assert_msg(r->status == status, "exit %d, not %d: %s", r->status, status, r->err);
    ck_assert_str_eq(itest_str(r->receipt, "status"), "TARGET_EXIT_OBSERVED");
    return r->receipt;
}

const cJSON *itest_exec_past_deadline(const char *program, const char *timeout_s, itest_run_t *r)
{
    const char *args[] = {"--timeout", timeout_s, NULL};
    itest_exec(program, args, r);
    const cJSON *j = r->receipt;
    ck_assert_int_eq(r->status, 124);
    ck_assert_str_eq(itest_str(j, "status"), "SUPERVISOR_KILL_OBSERVED");
    ck_assert_str_eq(itest_str(j, "seen.clock"), "host_deadline");
    return j;
}

void itest_pybox_test(const char *program, size_t len, const char *const *args, const char *const *env, itest_run_t *r)
{
    itest_run_bin(itest_test_bin(), program, len, args, env, r);
}

void itest_run_bin(const char *bin, const char *program, size_t len, const char *const *args, const char *const *env,
                   itest_run_t *r)
{
    itest_job_t j;
    start_bin(bin, program, len, args, env, 0, &j);
    itest_finish(&j, r);
}

void itest_exec(const char *program, const char *const *extra, itest_run_t *r)
{
    const char *args[26] = {"exec", "--json"};
    int n = 2;
    bool deadline = false;
    for (int i = 0; extra && extra[i] && n < 23; i++) {
        deadline |= strcmp(extra[i], "--timeout") == 0;
        args[n++] = extra[i];
    }
    /* A case about the deadline names one; the others get room for a slow start. */
    if (!deadline) {
        args[n++] = "--timeout";
        args[n++] = ITEST_ROOMY_TIMEOUT_S;
    }
    args[n] = NULL;
    itest_pybox(program, strlen(program), args, NULL, r);
    ck_assert_msg(r->receipt != NULL, "no JSON receipt (exit %d): %s", r->status, r->err);
}

void itest_run_free(itest_run_t *r)
{
    free(r->out);
    free(r->err);
    cJSON_Delete(r->receipt);
    memset(r, 0, sizeof *r);
}

pid_t itest_spawn(const char *program, const char *const *args)
{
    int in[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = pybox_bin();
    for (int i = 0; args && args[i] && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(in[0], 0);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    size_t len = strlen(program);
    ck_assert_int_eq(write(in[1], program, len), (ssize_t)len);
    close(in[1]);
    return pid;
}

const cJSON *itest_get(const cJSON *j, const char *path)
{
    char key[128];
    const char *p = path;
    while (j != NULL && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        j = cJSON_GetObjectItemCaseSensitive(j, key);
        p += n + (dot ? 1 : 0);
    }
    return j;
}

const char *itest_str(const cJSON *j, const char *path)
{
    const cJSON *v = itest_get(j, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

double itest_num(const cJSON *j, const char *path)
{
    const cJSON *v = itest_get(j, path);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

int itest_bool(const cJSON *j, const char *path)
{
    const cJSON *v = itest_get(j, path);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

pybox_engine_t *itest_engine(void)
{
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_open(NULL, &e, &err) == 0, "engine: %s", err.msg);
    return e;
}

const pybox_state_t *itest_state(void)
{
    static pybox_state_t st;
    static int done;
    if (!done) {
        pybox_error_t err = {0};
        ck_assert_msg(pybox_state_open(&st, false, &err) == 0, "state: %s", err.msg);
        done = 1;
    }
    return &st;
}

cJSON *itest_engine_call(pybox_engine_t *e, const char *method, const char *path, long *status)
{
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    *status = 0;
    ck_assert_msg(pybox_engine_call(e, method, path, NULL, status, &reply, &err) == 0, "%s %s: %s", method, path,
                  err.msg);
    return reply;
}

/* The engine's boxes, all, that a label filter (JSON) finds. */
static cJSON *boxes_by(pybox_engine_t *e, const char *filter)
{
    char *esc = pybox_engine_escape(e, filter);
    char path[1024];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "/containers/json?all=1&filters=%s", esc ? esc : ""), 0);
    free(esc);
    long status;
    cJSON *reply = itest_engine_call(e, "GET", path, &status);
    ck_assert_int_eq(status, 200);
    return reply;
}

long itest_box_status(pybox_engine_t *e, const char *id)
{
    char path[200];
    snprintf(path, sizeof path, "/containers/%s/json", id);
    long status;
    cJSON_Delete(itest_engine_call(e, "GET", path, &status));
    return status;
}

int itest_list(pybox_engine_t *e, const char *label, const char *value, cJSON **list)
{
    char filter[512];
    snprintf(filter, sizeof filter, "{\"label\":[\"pybox.install=%s\",\"%s=%s\"]}", itest_state()->install_id, label,
             value);
    cJSON *reply = boxes_by(e, filter);
    int n = cJSON_GetArraySize(reply);
    if (list)
        *list = reply;
    else
        cJSON_Delete(reply);
    return n;
}

int itest_remove_run(pybox_engine_t *e, const char *run_id)
{
    cJSON *list = NULL;
    int n = itest_list(e, "pybox.run", run_id, &list);
    const cJSON *c;
    cJSON_ArrayForEach (c, list) {
        const char *id = itest_str(c, "Id");
        char path[200];
        snprintf(path, sizeof path, "/containers/%s?force=1&v=1", id);
        long status = 0;
        cJSON *reply = NULL;
        pybox_error_t err = {0};
        pybox_engine_call(e, "DELETE", path, NULL, &status, &reply, &err);
        cJSON_Delete(reply);
    }
    cJSON_Delete(list);
    return n;
}

typedef struct {
    pybox_buf_t line;
    int done;
} event_wait_t;

static size_t on_event(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    event_wait_t *w = userdata;
    size_t n = size * nmemb;
    pybox_buf_add(&w->line, ptr, n);
    if (w->line.data && memchr(w->line.data, '\n', w->line.len)) {
        w->done = 1;
        return 0; /* one event is all we wait for: stop the stream */
    }
    return n;
}

int itest_wait_start(double since, char *id, double timeout_s)
{
    pybox_engine_t *e = itest_engine();
    char filter[512];
    snprintf(filter, sizeof filter, "{\"type\":[\"container\"],\"event\":[\"start\"],\"label\":[\"pybox.install=%s\"]}",
             itest_state()->install_id);
    char *esc = pybox_engine_escape(e, filter);
    char url[1024];
    snprintf(url, sizeof url, "http://localhost/v1.41/events?since=%.6f&filters=%s", since, esc);
    free(esc);
    const char *host = getenv("DOCKER_HOST");
    const char *sock = host && strncmp(host, "unix://", 7) == 0 ? host + 7 : "/var/run/docker.sock";
    CURL *c = curl_easy_init();
    event_wait_t w = {.done = 0};
    pybox_buf_init(&w.line, 65536);
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_event);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    pybox_engine_free(e);
    int rc = -1;
    if (w.done) {
        cJSON *ev = cJSON_ParseWithLength(w.line.data, (size_t)(strchr(w.line.data, '\n') - w.line.data));
        const char *i = itest_str(ev, "id");
        if (i) {
            snprintf(id, 65, "%s", i);
            rc = 0;
        }
        cJSON_Delete(ev);
    }
    pybox_buf_free(&w.line);
    return rc;
}

cJSON *itest_events(pybox_engine_t *e, const char *id, long since, long until)
{
    char filter[256];
    snprintf(filter, sizeof filter, "{\"container\":[\"%s\"]}", id);
    char *esc = pybox_engine_escape(e, filter);
    char path[1024];
    snprintf(path, sizeof path, "/events?since=%ld&until=%ld&filters=%s", since, until, esc);
    free(esc);
    pybox_buf_t raw;
    pybox_buf_init(&raw, 0);
    long status = 0;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call_raw(e, "GET", path, NULL, &status, &raw, &err) == 0, "%s", err.msg);
    cJSON *list = cJSON_CreateArray();
    const char *p = raw.data ? raw.data : "";
    const char *end = p + raw.len;
    while (p < end) {
        const char *next = NULL;
        cJSON *ev = cJSON_ParseWithOpts(p, &next, 0);
        if (ev == NULL)
            break;
        cJSON_AddItemToArray(list, ev);
        p = next;
        while (p < end && (*p == '\n' || *p == '\r'))
            p++;
    }
    pybox_buf_free(&raw);
    return list;
}

bool itest_contains(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0 || hay == NULL)
        return n == 0;
    return memmem(hay, len, needle, n) != NULL;
}

double itest_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int itest_wait_process(pybox_engine_t *e, const char *id, const char *what, double timeout_s)
{
    char path[200];
    snprintf(path, sizeof path, "/containers/%s/top?ps_args=-eo%%20pid,args", id);
    double end = itest_wall() + timeout_s;
    while (itest_wall() < end) {
        long status = 0;
        cJSON *reply = NULL;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
        char *text = reply ? cJSON_PrintUnformatted(itest_get(reply, "Processes")) : NULL;
        int found = status == 200 && text && strstr(text, what);
        free(text);
        cJSON_Delete(reply);
        if (found)
            return 0;
        if (status != 200)
            return -1;
        /* Polling the engine's view of the box: there is no event for "a process started". */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int itest_new_home(char *home, size_t len, char *id)
{
    pybox_error_t err = {0};
    pybox_state_t from, to;
    if (pybox_state_open(&from, false, &err) < 0) {
        fprintf(stderr, "itest: %s\n", err.msg);
        return -1;
    }
    snprintf(home, len, "/tmp/pybox-itest-XXXXXX");
    if (mkdtemp(home) == NULL)
        return -1;
    char *saved = getenv("PYBOX_HOME") ? strdup(getenv("PYBOX_HOME")) : NULL;
    setenv("PYBOX_HOME", home, 1);
    int rc = pybox_state_open(&to, true, &err);
    if (saved) {
        setenv("PYBOX_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("PYBOX_HOME");
    }
    if (rc < 0) {
        fprintf(stderr, "itest: %s\n", err.msg);
        return -1;
    }
    snprintf(id, 33, "%s", to.install_id);
    if (pybox_state_borrow_images(&from, &to, &err) < 0) {
        fprintf(stderr, "itest: %s\n", err.msg);
        return -1;
    }
    char dst[PATH_MAX];
    /* Leftovers of test runs expire as early as the rules allow (the box's timer plus
     * the margin), so cleanup can be tested without waiting two minutes. */
    if (pybox_fmt(dst, sizeof dst, "%s/config.json", home) < 0)
        return -1;
    FILE *out = fopen(dst, "we");
    if (out == NULL)
        return -1;
    fputs("{\"leftover_expiry_s\": 1}\n", out);
    return fclose(out) == 0 ? 0 : -1;
}

void itest_remove_home(const char *home)
{
    /* The installation's id, read before its folder goes: the native backend's cgroup
     * parents named after it (made at its first box) go too, once empty. */
    char path[PATH_MAX], id[40] = "";
    (void)pybox_fmt(path, sizeof path, "%s/install-id", home);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        ssize_t n = read(fd, id, sizeof id - 1);
        close(fd);
        id[n > 0 ? n : 0] = '\0';
        id[strcspn(id, "\n")] = '\0';
    }
    (void)pybox_remove_tree_at(AT_FDCWD, home);
    itest_forget_native_parents(id);
}

void itest_forget_native_parents(const char *install_id)
{
    if (strlen(install_id) != 32 || strspn(install_id, "0123456789abcdef") != 32)
        return;
    char parents[5][PATH_MAX];
    int np = itest_native_parents(install_id, parents);
    for (int i = 0; i < np; i++)
        rmdir(parents[i]); /* only when empty: a leaf left is a test's failure of its own */
}

int itest_lib_run(const char *program, void (*adjust)(struct pybox_policy *p, void *arg), void *arg,
                  struct pybox_run_result *res)
{
    /* The tests' installation is the one PYBOX_HOME names (tests/main.c). */
    pybox_request_t rq = {.program = program, .program_len = strlen(program), .image = "stdlib"};
    pybox_ready_t rd;
    pybox_ready_init(&rd);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_prepare(&rq, &rd, &err) == 0, "%s", err.msg);
    /* These runs test what a box refuses, never its deadline: room for a slow start,
     * unless the adjustment sets a deadline of its own. */
    pybox_policy_set_timeout(&rd.run.policy, ITEST_ROOMY_S * 1000);
    if (adjust != NULL)
        adjust(&rd.run.policy, arg);
    int rc = pybox_ready_run(&rd, res);
    pybox_ready_free(&rd);
    ck_assert_int_eq(itest_run_left(res->run_id), 0);
    return rc;
}

int itest_resolve(const char *name, pybox_pin_t *pin, pybox_error_t *err)
{
    pybox_backend_t *be = NULL;
    if (pybox_backend_open(itest_backend(), itest_state(), &be, err) < 0)
        return -1;
    int rc = pybox_image_resolve(itest_state(), be, name, pin, err);
    pybox_backend_close(be);
    return rc;
}

const char *itest_said(const struct pybox_run_result *res)
{
    static char text[65537];
    size_t n = res->said_out.kept < sizeof text - 1 ? res->said_out.kept : sizeof text - 1;
    memcpy(text, res->said_out.data, n);
    text[n] = '\0';
    return text;
}

/* ---- the backend the tests run on ---- */

const char *itest_backend(void)
{
    const char *b = getenv("PYBOX_BACKEND");
    return b != NULL && b[0] != '\0' ? b : "docker";
}

bool itest_native(void)
{
    return strcmp(itest_backend(), "native") == 0;
}

/* How this host takes a native box's cgroup: the backend's own answer (cgroup.h). */
static int native_host(pybox_native_cg_host_t *h)
{
    pybox_error_t err = {0};
    return pybox_native_cg_host(pybox_cgroup_root(), NULL, h, &err);
}

/* The folders named after an installation that hold its boxes' leaves, in each hierarchy
 * (none under systemd: its boxes' scopes are systemd's, in a slice every installation
 * shares). */
int itest_native_parents(const char *install_id, char out[5][PATH_MAX])
{
    pybox_native_cg_host_t h;
    char parent[PYBOX_NATIVE_CG_PARENT_MAX], dirs[5][PATH_MAX];
    pybox_error_t err = {0};
    if (native_host(&h) < 0 || pybox_native_cg_parent(install_id, parent, &err) < 0 ||
        pybox_native_cg_holders(&h, parent, dirs, &err) < 0)
        return -1;
    if (h.systemd)
        return 0;
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (dirs[i][0] != '\0')
            pybox_strlcpy(out[n++], dirs[i], PATH_MAX);
    return n;
}

/* Run ids the installation's cgroup leaves and staging folder still have, counted once
 * each, as the backend's own leftovers listing finds them; only run when given. */
static int native_left(const char *install_id, const char *home, const char *run)
{
    pybox_native_cg_host_t h;
    ck_assert_msg(native_host(&h) == 0, "no cgroup hierarchy the native backend knows");
    char parent[PYBOX_NATIVE_CG_PARENT_MAX], staging[PATH_MAX];
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_native_cg_parent(install_id, parent, &err), 0);
    (void)pybox_fmt(staging, sizeof staging, "%s/" PYBOX_NATIVE_STAGING, home);
    pybox_native_leftover_t *l = NULL;
    size_t nl = 0;
    ck_assert_msg(pybox_native_leftovers(&h, parent, staging, &l, &nl, &err) == 0, "%s", err.msg);
    int n = 0;
    for (size_t i = 0; i < nl; i++)
        if (run == NULL || strcmp(l[i].run_id, run) == 0)
            n++;
    free(l);
    return n;
}

/* The cgroup.procs of a native box of the tests' installation (v1: the memory
 * controller's), where the backend says its cgroup is (box.h's run_cgroup). */
static void native_procs_path(const char *run, char *out, size_t len)
{
    pybox_backend_t *be = NULL;
    pybox_cgroup_loc_t loc;
    pybox_error_t err = {0};
    out[0] = '\0';
    if (pybox_backend_open("native", itest_state(), &be, &err) == 0 && be->ops->run_cgroup(be, run, &loc, &err) == 0)
        (void)pybox_fmt(out, len, "%s/cgroup.procs", loc.dir[PYBOX_CG_MEMORY]);
    pybox_backend_close(be);
}

bool itest_needs_root(const char *test)
{
    if (geteuid() == 0)
        return false;
    printf("%s: makes a mount namespace or another user of its own, which needs root: not run as uid %u\n", test,
           (unsigned)geteuid());
    return true;
}

int itest_run_left(const char *run_id)
{
    if (itest_native())
        return native_left(itest_state()->install_id, itest_state()->dir, run_id);
    pybox_engine_t *e = itest_engine();
    int n = itest_list(e, "pybox.run", run_id, NULL);
    pybox_engine_free(e);
    return n;
}

int itest_install_left(const char *install_id, const char *home)
{
    if (itest_native())
        return native_left(install_id, home, NULL);
    pybox_engine_t *e = itest_engine();
    char filter[256];
    snprintf(filter, sizeof filter, "{\"label\":[\"pybox.install=%s\"]}", install_id);
    cJSON *reply = boxes_by(e, filter);
    int n = cJSON_GetArraySize(reply);
    cJSON_Delete(reply);
    pybox_engine_free(e);
    return n;
}

int itest_native_sweep(const char *install_id)
{
    pybox_native_cg_host_t h;
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    pybox_error_t err = {0};
    if (native_host(&h) < 0 || pybox_native_cg_parent(install_id, parent, &err) < 0)
        return 0;
    /* Its leaves, wherever the host placed them (found with no staging folder: the
     * installation's folder may be gone by now). */
    char none[] = "/nonexistent-staging";
    pybox_native_leftover_t *l = NULL;
    size_t nl = 0;
    int left = 0;
    if (pybox_native_leftovers(&h, parent, none, &l, &nl, &err) == 0) {
        for (size_t i = 0; i < nl; i++) {
            pybox_native_cgroup_t cg;
            bool gone = false;
            pybox_error_t rerr = {0};
            if (!l[i].cgroup || pybox_native_cg_paths(&h, parent, l[i].run_id, &cg, &rerr) < 0)
                continue;
            left++;
            if (pybox_native_cg_remove(&cg, 2000, &gone, &rerr) < 0)
                fprintf(stderr, "itest: could not remove the leaf of %s: %s\n", l[i].run_id, rerr.msg);
        }
        free(l);
    }
    char parents[5][PATH_MAX];
    int np = itest_native_parents(install_id, parents);
    for (int i = 0; i < np; i++)
        rmdir(parents[i]); /* ours alone: the installation's parent */
    return left;
}

/* A native box of the tests' installation: its staging folder appears at create, its
 * cgroup's processes are the kernel's list of what runs in it. */
static bool native_procs_hold(const char *run, const char *what)
{
    char procs[PATH_MAX + 64];
    native_procs_path(run, procs, sizeof procs);
    FILE *f = procs[0] ? fopen(procs, "re") : NULL;
    if (f == NULL)
        return false;
    bool found = false;
    long pid;
    while (!found && fscanf(f, "%ld", &pid) == 1) {
        if (what == NULL) {
            found = true;
            break;
        }
        char path[64], cmd[4096];
        (void)pybox_fmt(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        for (ssize_t k = 0; k < r; k++)
            if (cmd[k] == '\0')
                cmd[k] = ' ';
        cmd[r > 0 ? r : 0] = '\0';
        found = strstr(cmd, what) != NULL;
    }
    fclose(f);
    return found;
}

int itest_box_wait_running(double since, char *id, const char *what, double timeout_s)
{
    if (!itest_native()) {
        if (itest_wait_start(since, id, timeout_s) < 0)
            return -1;
        if (what == NULL)
            return 0;
        pybox_engine_t *e = itest_engine();
        int rc = itest_wait_process(e, id, what, timeout_s);
        pybox_engine_free(e);
        return rc;
    }
    char staging[PATH_MAX];
    (void)pybox_fmt(staging, sizeof staging, "%s/" PYBOX_NATIVE_STAGING, itest_state()->dir);
    double end = itest_wall() + timeout_s;
    while (itest_wall() < end) {
        DIR *d = opendir(staging);
        struct dirent *de;
        while (d != NULL && (de = readdir(d)) != NULL) {
            if (strlen(de->d_name) != 32 || strspn(de->d_name, "0123456789abcdef") != 32)
                continue;
            char path[PATH_MAX + 40];
            struct stat sb;
            (void)pybox_fmt(path, sizeof path, "%s/%s", staging, de->d_name);
            if (stat(path, &sb) == 0 && (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec / 1e9 >= since - 1 &&
                native_procs_hold(de->d_name, what)) {
                snprintf(id, 65, "%s", de->d_name);
                closedir(d);
                return 0;
            }
        }
        if (d != NULL)
            closedir(d);
        /* Polling the kernel's view: there is no event for "a process started". */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int itest_box_wait_ended(const char *id, double timeout_s)
{
    if (!itest_native()) {
        pybox_engine_t *e = itest_engine();
        char path[200];
        (void)pybox_fmt(path, sizeof path, "/containers/%s/wait?condition=not-running", id);
        long status = 0;
        cJSON *reply = NULL;
        pybox_error_t err = {0};
        (void)timeout_s; /* the engine's own wait blocks until then */
        int rc = pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0 && status == 200 ? 0 : -1;
        cJSON_Delete(reply);
        pybox_engine_free(e);
        return rc;
    }
    double end = itest_wall() + timeout_s;
    while (itest_wall() < end) {
        if (!native_procs_hold(id, NULL))
            return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

void itest_box_signal(const char *id, const char *sig)
{
    if (!itest_native()) {
        pybox_engine_t *e = itest_engine();
        char path[200];
        snprintf(path, sizeof path, "/containers/%s/kill?signal=%s", id, sig);
        long status = 0;
        cJSON *reply = NULL;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
        cJSON_Delete(reply);
        ck_assert_int_eq(status, 204);
        pybox_engine_free(e);
        return;
    }
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGINT", SIGINT}, {"SIGHUP", SIGHUP}};
    int signo = 0;
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (strcmp(sigs[i].name, sig) == 0)
            signo = sigs[i].sig;
    ck_assert_msg(signo != 0, "unknown signal %s", sig);
    /* the box's PID 1: the first process its cgroup lists */
    char procs[PATH_MAX + 64];
    native_procs_path(id, procs, sizeof procs);
    FILE *f = procs[0] ? fopen(procs, "re") : NULL;
    ck_assert_msg(f != NULL, "no cgroup for the box %s", id);
    long pid = 0;
    ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
    fclose(f);
    ck_assert_int_eq(kill((pid_t)pid, signo), 0);
}

/* Cases whose bounds are wall-clock times that a machine too slow for them cannot meet:
 * Python must start and reach a line within a sub-second deadline, start twice within
 * the default 2 s at half a CPU, import pandas within the data image's deadline, or, over
 * HTTP, a server and its clients (and nginx's) keep their own deadlines. They
 * go into a test case of their own tagged "timing", which CK_EXCLUDE_TAGS=timing leaves
 * out (make vm-check does, under software emulation, and says so). Everywhere else they
 * run. */
static const char *const timing_cases[] = {
    "host_deadline_stops_the_program",          /* prints within a 0.4 s deadline */
    "closed_standard_descriptors_are_dev_null", /* Python starts Python within 2 s */
    "data_image_pandas_and_a_chart",            /* pandas and matplotlib within the data image's 10 s */
    "http_hostile",      /* slow heads, floods and their deadlines against a server on that machine */
    "http_behind_nginx", /* TLS handshakes and nginx's own deadlines beside the server's */
};

static bool timing_case(const char *name)
{
    for (size_t i = 0; i < sizeof timing_cases / sizeof *timing_cases; i++)
        if (strcmp(name, timing_cases[i]) == 0)
            return true;
    return false;
}

/* Each test case's timing sibling (at most one), so that a fixture reaches both. */
static struct {
    TCase *tc, *timing;
} siblings[64];
static size_t n_siblings;

void itest_fixture(TCase *tc, void (*setup)(void), void (*teardown)(void))
{
    tcase_add_checked_fixture(tc, setup, teardown);
    for (size_t i = 0; i < n_siblings; i++)
        if (siblings[i].tc == tc)
            tcase_add_checked_fixture(siblings[i].timing, setup, teardown);
}

TCase *itest_tcase(Suite *s, const char *name, int timeout_s, const TTest *const *tests, size_t n)
{
    TCase *tc = tcase_create(name), *timing = NULL;
    tcase_set_timeout(tc, timeout_s);
    for (size_t i = 0; i < n; i++) {
        if (!timing_case(tests[i]->name)) {
            tcase_add_test(tc, tests[i]);
            continue;
        }
        if (timing == NULL) {
            char *tname = NULL; /* Check keeps the name's pointer: never freed */
            if (asprintf(&tname, "%s (timing)", name) < 0)
                abort();
            timing = tcase_create(tname);
            tcase_set_timeout(timing, timeout_s);
            tcase_set_tags(timing, "timing");
            suite_add_tcase(s, timing);
        }
        tcase_add_test(timing, tests[i]);
    }
    if (timing != NULL) {
        if (n_siblings == sizeof siblings / sizeof *siblings)
            abort();
        siblings[n_siblings].tc = tc;
        siblings[n_siblings++].timing = timing;
    }
    suite_add_tcase(s, tc);
    return tc;
}

void itest_copy_into(const char *from_dir, const char *to_dir, const char *name)
{
    char a[PATH_MAX], b[PATH_MAX], buf[8192];
    ck_assert_int_eq(pybox_fmt(a, sizeof a, "%s/%s", from_dir, name), 0);
    ck_assert_int_eq(pybox_fmt(b, sizeof b, "%s/%s", to_dir, name), 0);
    FILE *in = fopen(a, "re"), *out = fopen(b, "wxe");
    ck_assert_msg(in != NULL && out != NULL, "copying %s into %s", a, to_dir);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
}

void itest_small_state(const char *src, const char *state)
{
    ck_assert_int_eq(mkdir(state, 0700), 0);
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount("tmpfs", state, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0700"), 0);
    static const char *const kept[] = {"install-id", "images.json", "config.json"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        itest_copy_into(src, state, kept[i]);
}
