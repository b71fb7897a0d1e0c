/* SPDX-License-Identifier: MIT */
/* Integration test helpers (see itest.h). */
#include "itest.h"

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/image/image.h"
#include "../pybox/prepare.h"
#include "../pybox/run.h"
#include "../pybox/util.h"

extern char **environ;

static const char *pybox_bin(void)
{
    const char *b = getenv("PYBOX_BIN");
    return b && *b ? b : "build/pybox";
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

void itest_start(const char *program, size_t len, const char *const *args, const char *const *env, itest_job_t *j)
{
    /* stdin, stdout and stderr are memory files: no pipe can fill up, nothing to pump. */
    memset(j, 0, sizeof *j);
    int in = memfd_with("stdin", program, len);
    j->out_fd = memfd_with("stdout", NULL, 0);
    j->err_fd = memfd_with("stderr", NULL, 0);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = pybox_bin();
    for (int i = 0; args && args[i] && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    j->pid = fork();
    ck_assert_int_ge(j->pid, 0);
    if (j->pid == 0) {
        dup2(in, 0);
        dup2(j->out_fd, 1);
        dup2(j->err_fd, 2);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in);
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

void itest_exec(const char *program, const char *const *extra, itest_run_t *r)
{
    const char *args[24] = {"exec", "--json"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 23; i++)
        args[n++] = extra[i];
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

long itest_box_status(pybox_engine_t *e, const char *id)
{
    char path[200];
    snprintf(path, sizeof path, "/containers/%s/json", id);
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
    cJSON_Delete(reply);
    return status;
}

int itest_list(pybox_engine_t *e, const char *label, const char *value, cJSON **list)
{
    char filter[512];
    snprintf(filter, sizeof filter, "{\"label\":[\"pybox.install=%s\",\"%s=%s\"]}", itest_state()->install_id, label,
             value);
    char *esc = pybox_engine_escape(e, filter);
    char path[1024];
    snprintf(path, sizeof path, "/containers/json?all=1&filters=%s", esc);
    free(esc);
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(status, 200);
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
    char pins[PATH_MAX];
    if (pybox_state_path(&from, "images.json", pins, sizeof pins, &err) < 0)
        return -1;
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
    char dst[PATH_MAX];
    FILE *in = fopen(pins, "re");
    if (in == NULL || pybox_fmt(dst, sizeof dst, "%s/images.json", home) < 0) {
        fprintf(stderr, "itest: no image pins in %s\n", pins);
        if (in)
            fclose(in);
        return -1;
    }
    FILE *out = fopen(dst, "we");
    char buf[8192];
    size_t n;
    while (out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    if (out == NULL || fclose(out) != 0)
        return -1;
    /* Image builds share the installation's cache of root filesystems. */
    char cache_from[PATH_MAX], cache_to[PATH_MAX];
    if (pybox_state_path(&from, "cache", cache_from, sizeof cache_from, &err) == 0 &&
        pybox_fmt(cache_to, sizeof cache_to, "%s/cache", home) == 0 && symlink(cache_from, cache_to) < 0)
        fprintf(stderr, "itest: the image cache is not shared (%s)\n", strerror(errno));
    /* Leftovers of test runs expire as early as the rules allow (the box's timer plus
     * the margin), so cleanup can be tested without waiting two minutes. */
    if (pybox_fmt(dst, sizeof dst, "%s/config.json", home) < 0)
        return -1;
    out = fopen(dst, "we");
    if (out == NULL)
        return -1;
    fputs("{\"leftover_expiry_s\": 1}\n", out);
    return fclose(out) == 0 ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void itest_remove_home(const char *home)
{
    nftw(home, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
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
    if (adjust != NULL)
        adjust(&rd.run.policy, arg);
    int rc = pybox_ready_run(&rd, res);
    pybox_ready_free(&rd);
    pybox_engine_t *e = itest_engine();
    ck_assert_int_eq(itest_list(e, "pybox.run", res->run_id, NULL), 0);
    pybox_engine_free(e);
    return rc;
}

int itest_resolve(const char *name, pybox_pin_t *pin, pybox_error_t *err)
{
    pybox_backend_t *be = NULL;
    if (pybox_backend_open("docker", itest_state(), &be, err) < 0)
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
