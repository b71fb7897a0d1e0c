/* SPDX-License-Identifier: MIT */
/* The Docker backend: the box interface over the Docker Engine API (see box.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bounds.h"
#include "../box.h"
#include "../files.h"
#include "../util.h"
#include "docker.h"
#include "engine.h"

typedef struct docker_backend {
    pybox_backend_t base;
    pybox_engine_t *engine;
    bool owns_engine;
    char describe[160];
} docker_backend_t;

typedef struct docker_box {
    pybox_box_t base;
    pybox_engine_t *engine;
    char id[PYBOX_ID_MAX];
    char name[PYBOX_NAME_MAX];
    char spec_sha256[65];
    pybox_engine_stream_t *io;
    pybox_demux_t demux;
} docker_box_t;

static const pybox_box_ops_t docker_ops;

pybox_engine_t *pybox_docker_engine(pybox_backend_t *be)
{
    return ((docker_backend_t *)be)->engine;
}

static int d_create(pybox_backend_t *be, const pybox_policy_t *p, pybox_box_t **out, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    cJSON *body = pybox_docker_body(p);
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    if (text == NULL) {
        cJSON_Delete(body);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "building the create body");
    }
    char name[PYBOX_NAME_MAX], digest[65];
    pybox_sha256_hex(text, strlen(text), digest);
    free(text);
    char path[256];
    if (pybox_fmt(name, sizeof name, "%s%s", PYBOX_DOCKER_NAME_PREFIX, p->run_id) < 0 ||
        pybox_fmt(path, sizeof path, "/containers/create?name=%s", name) < 0) {
        cJSON_Delete(body);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "the box's name");
    }
    static const long created[] = {201, 0};
    long status = 0;
    cJSON *reply = NULL;
    int rc = pybox_engine_call_ok(e, "POST", path, body, created, "POST /containers/create", &status, &reply, err);
    cJSON_Delete(body);
    if (rc < 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    if (!cJSON_IsString(id) || !pybox_docker_valid_id(id->valuestring)) {
        cJSON_Delete(reply);
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "POST /containers/create: no valid Id in the reply");
    }
    docker_box_t *b = calloc(1, sizeof *b);
    if (b == NULL) {
        cJSON_Delete(reply);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    }
    b->base.ops = &docker_ops;
    b->engine = e;
    pybox_strlcpy(b->id, id->valuestring, sizeof b->id);
    pybox_strlcpy(b->name, name, sizeof b->name);
    memcpy(b->spec_sha256, digest, sizeof b->spec_sha256);
    b->base.id = b->id;
    b->base.name = b->name;
    b->base.spec_sha256 = b->spec_sha256;
    pybox_demux_init(&b->demux);
    cJSON_Delete(reply);
    *out = &b->base;
    return 0;
}

static int inspect(docker_box_t *b, long *status, cJSON **reply, pybox_error_t *err)
{
    char path[160];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/json", b->id);
    return pybox_engine_call(b->engine, "GET", path, NULL, status, reply, err);
}

/* The engine's record of the box, which must exist: what names what it was for. */
static int inspect_200(docker_box_t *b, const char *what, cJSON **reply, pybox_error_t *err)
{
    char path[160];
    *reply = NULL;
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/json", b->id);
    return pybox_engine_get_200(b->engine, path, what, reply, err);
}

static int d_verify(pybox_box_t *base, const pybox_policy_t *p, int *checked, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    cJSON *reply = NULL;
    if (inspect_200(b, "reading the box back", &reply, err) < 0)
        return -1;
    int rc = pybox_docker_verify(p, reply, checked, err);
    cJSON_Delete(reply);
    return rc;
}

static int d_put_files(pybox_box_t *base, const void *tar, size_t len, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char path[300];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/archive?path=%s", b->id, PYBOX_BOX_IN);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_put(b->engine, path, tar, len, "application/x-tar", &status, &reply, err) < 0)
        return -1;
    int rc = 0;
    if (status != 200)
        rc = pybox_engine_fail(err, "copying the inputs into the box", status, reply);
    cJSON_Delete(reply);
    return rc;
}

static int d_get_files(pybox_box_t *base, size_t max, pybox_buf_t *out, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char path[300];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/archive?path=%s", b->id, PYBOX_BOX_OUT);
    long status = 0;
    pybox_buf_init(out, max);
    if (pybox_engine_call_raw(b->engine, "GET", path, NULL, &status, out, err) < 0)
        return -1;
    if (status != 200) {
        cJSON *j = cJSON_ParseWithLength(out->data ? out->data : "", out->len);
        pybox_engine_fail(err, "copying the files out of the box", status, j);
        cJSON_Delete(j);
        pybox_buf_free(out);
        return -1;
    }
    return 0;
}

static int d_open_io(pybox_box_t *base, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char path[200];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1", b->id);
    return pybox_engine_upgrade(b->engine, path, &b->io, err);
}

static int post_simple(docker_box_t *b, const char *path, long *status, pybox_error_t *err)
{
    cJSON *reply = NULL;
    if (pybox_engine_call(b->engine, "POST", path, NULL, status, &reply, err) < 0)
        return -1;
    if (*status >= 400 && *status != 409 && *status != 304) {
        pybox_engine_fail(err, path, *status, reply);
        cJSON_Delete(reply);
        return -1;
    }
    cJSON_Delete(reply);
    return 0;
}

static int d_start(pybox_box_t *base, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char path[160];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/start", b->id);
    static const long started[] = {204, 0};
    long status = 0;
    if (pybox_engine_call_ok(b->engine, "POST", path, NULL, started, "starting the box", &status, NULL, err) < 0)
        return -1;
    return 0;
}

/* One socket carries the box's stdin one way and its multiplexed output the other. */
static void d_io_fds(const pybox_box_t *base, int *in_fd, int out_fds[2], int *n_out)
{
    const docker_box_t *b = (const docker_box_t *)base;
    int fd = b->io ? pybox_engine_stream_fd(b->io) : -1;
    *in_fd = fd;
    out_fds[0] = fd;
    out_fds[1] = -1;
    *n_out = 1;
}

static ssize_t d_io_write(pybox_box_t *base, const void *data, size_t len, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    return pybox_engine_stream_write(b->io, data, len, err);
}

static int d_io_close_write(pybox_box_t *base, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    return pybox_engine_stream_close_write(b->io, err);
}

static int d_io_read(pybox_box_t *base, pybox_output_cb cb, void *arg, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char chunk[65536];
    for (int rounds = 0; rounds < 16; rounds++) {
        ssize_t r = pybox_engine_stream_read(b->io, chunk, sizeof chunk, err);
        if (r < 0)
            return errno == EAGAIN ? 0 : -1;
        if (r == 0) {
            if (!pybox_demux_clean_end(&b->demux))
                return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the box's output stream ended inside a frame");
            return 1;
        }
        if (pybox_demux_feed(&b->demux, chunk, (size_t)r, cb, arg, err) < 0)
            return -1;
    }
    return 0;
}

static int d_signal(pybox_box_t *base, int sig, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    char path[200];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/kill?signal=%d", b->id, sig);
    long status = 0;
    if (post_simple(b, path, &status, err) < 0)
        return -1;
    return status == 409 ? 1 : 0; /* 409: the box is not running */
}

static void copy_str(char *dst, size_t len, const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsString(v))
        snprintf(dst, len, "%s", v->valuestring);
    else
        dst[0] = '\0';
}

static int d_wait(pybox_box_t *base, int64_t timeout_ms, pybox_box_end_t *out, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    int64_t deadline = pybox_now_ms() + timeout_ms;
    for (;;) {
        cJSON *reply = NULL;
        if (inspect_200(b, "reading the box's end", &reply, err) < 0)
            return -1;
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(reply, "State");
        const cJSON *running = cJSON_GetObjectItemCaseSensitive(st, "Running");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "ExitCode");
        const cJSON *oom = cJSON_GetObjectItemCaseSensitive(st, "OOMKilled");
        if (cJSON_IsFalse(running) && cJSON_IsNumber(code)) {
            memset(out, 0, sizeof *out);
            out->exit_code = code->valueint;
            /* The engine records only the status: 128+n when PID 1 was killed by a signal,
             * which an exit status of the same number cannot be told apart from. */
            out->signal = 0;
            out->oom_killed = cJSON_IsTrue(oom);
            copy_str(out->started_at, sizeof out->started_at, st, "StartedAt");
            copy_str(out->finished_at, sizeof out->finished_at, st, "FinishedAt");
            copy_str(out->error, sizeof out->error, st, "Error");
            cJSON_Delete(reply);
            return 0;
        }
        cJSON_Delete(reply);
        if (pybox_now_ms() >= deadline)
            return pybox_error_set(err, PYBOX_ERR_ENGINE, ETIMEDOUT, "the box %.12s did not end", b->id);
        /* Block in the engine until the box is no longer running, within what is left. */
        char path[200];
        PYBOX_DOCKER_PATH(path, -1, "/containers/%s/wait?condition=not-running", b->id);
        cJSON *w = NULL;
        long status = 0;
        pybox_error_t werr = {0};
        int64_t left = deadline - pybox_now_ms();
        if (pybox_engine_call_timeout(b->engine, "POST", path, NULL, (long)(left > 1 ? left : 1), &status, &w, &werr) <
                0 &&
            werr.errnum != ETIMEDOUT) {
            *err = werr;
            return -1;
        }
        cJSON_Delete(w);
    }
}

static int d_remove(pybox_box_t *base, bool *gone, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    *gone = false;
    if (b->io) {
        pybox_engine_stream_free(b->io);
        b->io = NULL;
    }
    char path[200];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s?force=1&v=1", b->id);
    static const long removing[] = {204, 404, 409, 0};
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call_ok(b->engine, "DELETE", path, NULL, removing, "removing the box", &status, NULL, err) < 0)
        return -1;
    /* Confirm: the engine must no longer know the box. A 409 above means a removal is
     * already under way; look again until it is done (bounded). */
    int64_t deadline = pybox_now_ms() + 10000;
    for (;;) {
        if (inspect(b, &status, &reply, err) < 0)
            return -1;
        cJSON_Delete(reply);
        if (status == 404) {
            *gone = true;
            return 0;
        }
        if (pybox_now_ms() >= deadline)
            return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "the box %.12s still exists after removal", b->id);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polling the engine's state, not synchronising with it */
        if (pybox_engine_call(b->engine, "DELETE", path, NULL, &status, &reply, err) < 0)
            return -1;
        cJSON_Delete(reply);
    }
}

static int d_running(pybox_box_t *base, bool *running, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    cJSON *reply = NULL;
    *running = false;
    if (inspect_200(b, "reading whether the box runs", &reply, err) < 0)
        return -1;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "State"), "Running");
    int rc = 0;
    if (cJSON_IsBool(r))
        *running = cJSON_IsTrue(r);
    else
        rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the engine's record of the box has no State.Running");
    cJSON_Delete(reply);
    return rc;
}

/* The engine's answer: the box's PID 1 from its record (GET /containers/{ref}/json), then
 * where the kernel says that process is (docker.h). */
static int cgroup_of(pybox_engine_t *e, const char *ref, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    char path[160];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/json", ref);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call(e, "GET", path, NULL, &status, &reply, err) < 0)
        return -1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "State"), "Pid");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    pid_t pid = status == 200 && cJSON_IsNumber(p) && p->valuedouble > 0 && p->valuedouble < 1 << 30
                    ? (pid_t)p->valuedouble
                    : 0;
    char box_id[80] = "";
    if (status == 200 && cJSON_IsString(id))
        pybox_strlcpy(box_id, id->valuestring, sizeof box_id);
    cJSON_Delete(reply);
    if (status != 200)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, ENOENT, "the engine has no box %s (HTTP %ld)", ref, status);
    return pybox_docker_cgroup(pybox_cgroup_root(), "/proc", box_id, pid, loc, err);
}

static int d_cgroup(pybox_box_t *base, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    docker_box_t *b = (docker_box_t *)base;
    return cgroup_of(b->engine, b->id, loc, err);
}

static int d_run_cgroup(pybox_backend_t *be, const char *run_id, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    memset(loc, 0, sizeof *loc);
    if (strlen(run_id) != 32 || strspn(run_id, "0123456789abcdef") != 32)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "not a run id");
    char name[64];
    snprintf(name, sizeof name, "%s%s", PYBOX_DOCKER_NAME_PREFIX, run_id);
    return cgroup_of(pybox_docker_engine(be), name, loc, err);
}

static void d_free(pybox_box_t *base)
{
    docker_box_t *b = (docker_box_t *)base;
    if (b == NULL)
        return;
    pybox_engine_stream_free(b->io);
    free(b);
}

static const pybox_box_ops_t docker_ops = {
    .verify = d_verify,
    .put_files = d_put_files,
    .get_files = d_get_files,
    .open_io = d_open_io,
    .start = d_start,
    .io_fds = d_io_fds,
    .io_write = d_io_write,
    .io_close_write = d_io_close_write,
    .io_read = d_io_read,
    .signal = d_signal,
    .wait = d_wait,
    .running = d_running,
    .cgroup = d_cgroup,
    .remove = d_remove,
    .free = d_free,
};

/* ---- leftovers ---- */

static void leftover_labels(pybox_leftover_t *l, const cJSON *labels)
{
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(labels, PYBOX_LABEL_RUN);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(labels, PYBOX_LABEL_EXPIRES);
    if (cJSON_IsString(run) && strlen(run->valuestring) == 32 && strspn(run->valuestring, "0123456789abcdef") == 32)
        memcpy(l->run_id, run->valuestring, 33);
    uint64_t e;
    l->expires = cJSON_IsString(exp) && pybox_parse_u64(exp->valuestring, &e) == 0 && e < INT64_MAX ? (int64_t)e : -1;
}

static int list_json(pybox_engine_t *e, const char *what, const char *install_id, cJSON **out, pybox_error_t *err)
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"label\":[\"%s=%s\"]}", PYBOX_LABEL_INSTALL, install_id);
    char *esc = pybox_engine_escape(e, filter);
    if (esc == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "escaping a filter");
    char path[512];
    if (pybox_fmt(path, sizeof path, "/%s?%sfilters=%s", what, strcmp(what, "containers/json") == 0 ? "all=1&" : "",
                  esc) < 0) {
        free(esc);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "an engine request path would be cut");
    }
    free(esc);
    return pybox_engine_get_200(e, path, what, out, err);
}

static int d_list_leftovers(pybox_backend_t *be, const char *install_id, pybox_leftover_t **out, size_t *n,
                            pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    cJSON *boxes = NULL, *vols = NULL;
    *out = NULL;
    *n = 0;
    if (list_json(e, "containers/json", install_id, &boxes, err) < 0)
        return -1;
    if (list_json(e, "volumes", install_id, &vols, err) < 0) {
        cJSON_Delete(boxes);
        return -1;
    }
    const cJSON *vl = cJSON_GetObjectItemCaseSensitive(vols, "Volumes");
    size_t cap = (size_t)cJSON_GetArraySize(boxes) + (size_t)cJSON_GetArraySize(vl) + 1;
    pybox_leftover_t *v = calloc(cap, sizeof *v);
    if (v == NULL) {
        cJSON_Delete(boxes);
        cJSON_Delete(vols);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing leftovers");
    }
    size_t k = 0;
    const cJSON *c;
    cJSON_ArrayForEach (c, boxes) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "Id");
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(c, "State");
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(c, "Names");
        if (!cJSON_IsString(id) || !pybox_docker_valid_id(id->valuestring) || k >= cap)
            continue;
        pybox_leftover_t *l = &v[k++];
        snprintf(l->kind, sizeof l->kind, "box");
        l->order = 0;
        snprintf(l->id, sizeof l->id, "%s", id->valuestring);
        const cJSON *n0 = cJSON_GetArrayItem(names, 0);
        if (cJSON_IsString(n0))
            snprintf(l->name, sizeof l->name, "%s", n0->valuestring[0] == '/' ? n0->valuestring + 1 : n0->valuestring);
        snprintf(l->state, sizeof l->state, "%s", cJSON_IsString(state) ? state->valuestring : "unknown");
        /* Anything but a box that has ended (or never started) counts as running. */
        l->running =
            strcmp(l->state, "exited") != 0 && strcmp(l->state, "created") != 0 && strcmp(l->state, "dead") != 0;
        leftover_labels(l, cJSON_GetObjectItemCaseSensitive(c, "Labels"));
    }
    cJSON_ArrayForEach (c, vl) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "Name");
        if (!cJSON_IsString(name) || strlen(name->valuestring) >= sizeof v[0].id || k >= cap)
            continue;
        pybox_leftover_t *l = &v[k++];
        snprintf(l->kind, sizeof l->kind, "volume");
        l->order = 1; /* after the boxes that use them */
        snprintf(l->id, sizeof l->id, "%s", name->valuestring);
        snprintf(l->state, sizeof l->state, "volume");
        leftover_labels(l, cJSON_GetObjectItemCaseSensitive(c, "Labels"));
    }
    cJSON_Delete(boxes);
    cJSON_Delete(vols);
    *out = v;
    *n = k;
    return 0;
}

static int d_remove_leftover(pybox_backend_t *be, const pybox_leftover_t *l, bool *gone, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    *gone = false;
    char *esc = pybox_engine_escape(e, l->id);
    if (esc == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "escaping a name");
    char path[512], check[512];
    /* Never forced: the engine refuses to remove a running box or a volume in use. */
    if (strcmp(l->kind, "box") == 0) {
        if (pybox_fmt(path, sizeof path, "/containers/%s?v=1", esc) < 0) {
            free(esc);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "an engine request path would be cut");
        }
        snprintf(check, sizeof check, "/containers/%s/json", esc);
    } else {
        if (pybox_fmt(path, sizeof path, "/volumes/%s", esc) < 0) {
            free(esc);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "an engine request path would be cut");
        }
        snprintf(check, sizeof check, "/volumes/%s", esc);
    }
    free(esc);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call(e, "DELETE", path, NULL, &status, &reply, err) < 0)
        return -1;
    cJSON_Delete(reply);
    if (status == 409)
        return 0; /* running, or in use: kept */
    if (status != 204 && status != 404) {
        pybox_engine_fail(err, path, status, NULL);
        return -1;
    }
    if (pybox_engine_call(e, "GET", check, NULL, &status, &reply, err) < 0)
        return -1;
    cJSON_Delete(reply);
    *gone = status == 404;
    return 0;
}

/* ---- the backend ---- */

static int d_open(const pybox_state_t *st, pybox_backend_t **out, pybox_error_t *err)
{
    (void)st;
    *out = NULL;
    docker_backend_t *be = calloc(1, sizeof *be);
    if (be == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    if (pybox_engine_open(NULL, &be->engine, err) < 0) {
        free(be);
        return -1;
    }
    be->owns_engine = true;
    be->base.ops = &pybox_docker_backend_ops;
    snprintf(be->describe, sizeof be->describe, "%s", pybox_engine_version(be->engine));
    *out = &be->base;
    return 0;
}

int pybox_docker_backend_over(pybox_engine_t *e, pybox_backend_t **out, pybox_error_t *err)
{
    *out = NULL;
    docker_backend_t *be = calloc(1, sizeof *be);
    if (be == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    be->engine = e;
    be->base.ops = &pybox_docker_backend_ops;
    snprintf(be->describe, sizeof be->describe, "%s", pybox_engine_version(e));
    *out = &be->base;
    return 0;
}

static void d_close(pybox_backend_t *base)
{
    docker_backend_t *be = (docker_backend_t *)base;
    if (be->owns_engine)
        pybox_engine_free(be->engine);
    free(be);
}

static const char *d_describe(const pybox_backend_t *base)
{
    return ((const docker_backend_t *)base)->describe;
}

const pybox_backend_ops_t pybox_docker_backend_ops = {
    .name = "docker",
    .holder = "the engine",
    .importing = "importing into the engine:",
    .pins_file = "images.json", /* the first backend's, named before there were others */
    .open = d_open,
    .close = d_close,
    .describe = d_describe,
    .create = d_create,
    .list_leftovers = d_list_leftovers,
    .remove_leftover = d_remove_leftover,
    .run_cgroup = d_run_cgroup,
    .events = pybox_docker_events,
    .images = &pybox_docker_image_ops,
    .campaign = &pybox_docker_campaign_ops,
};
