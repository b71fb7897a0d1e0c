/* SPDX-License-Identifier: MIT */
/* What the evidence campaign asks of the engine beyond runs (box.h, pybox_campaign_ops_t):
 * its socket and version, the network-namespace fixture's box, the engine's own account
 * of a box whose PyBox was killed, and the forced removal of the campaign's leftovers. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../box.h"
#include "../util.h"
#include "docker.h"
#include "engine.h"

static const char *jstr(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The same, "" when it is not there (for what inspect shows). */
static const char *jstr0(const cJSON *j, const char *key)
{
    return jstr(j, key) ? jstr(j, key) : "";
}

/* A request whose answer only matters by its status (or its JSON, when asked for). */
static long call(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, cJSON **reply)
{
    long status = 0;
    cJSON *r = NULL;
    pybox_error_t err = {0};
    if (pybox_engine_call(e, method, path, body, &status, &r, &err) < 0)
        status = 0;
    if (reply != NULL)
        *reply = r;
    else
        cJSON_Delete(r);
    return status;
}

/* Whether the engine still has box id, after removing it (forced: it may still run). */
static bool remove_box(pybox_engine_t *e, const char *id)
{
    char path[200];
    if (pybox_fmt(path, sizeof path, "/containers/%s?force=1&v=1", id) < 0)
        return false;
    call(e, "DELETE", path, NULL, NULL);
    if (pybox_fmt(path, sizeof path, "/containers/%s/json", id) < 0)
        return false;
    return call(e, "GET", path, NULL, NULL) == 404;
}

static const char *c_socket(pybox_backend_t *be)
{
    return pybox_engine_socket(pybox_docker_engine(be));
}

static cJSON *c_version(pybox_backend_t *be)
{
    cJSON *ver = NULL;
    call(pybox_docker_engine(be), "GET", "/version", NULL, &ver);
    return ver;
}

static int c_listener(pybox_backend_t *be, const pybox_state_t *st, const char *answer, int port, char *netns,
                      size_t len, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    pybox_pin_t pin;
    if (pybox_pin_get(st, pybox_docker_backend_ops.name, "stdlib", &pin, err) != 1)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "the stdlib image is not pinned");
    char run[33];
    pybox_random_hex(16, run, NULL);
    char body[2048];
    if (pybox_fmt(body, sizeof body,
                  "{\"Image\":\"%s\",\"User\":\"65534\",\"Entrypoint\":[\"/usr/bin/python3\",\"-c\","
                  "\"import socket\\ns = socket.socket()\\ns.bind(('127.0.0.1', %d))\\ns.listen()\\n"
                  "while True:\\n    c, _ = s.accept()\\n    c.sendall(b'%s')\\n    c.close()\\n\"],"
                  "\"Labels\":{\"%s\":\"%s\",\"%s\":\"listener-%s\",\"%s\":\"%lld\"},"
                  "\"HostConfig\":{\"NetworkMode\":\"none\",\"ReadonlyRootfs\":true,\"CapDrop\":[\"ALL\"],"
                  "\"SecurityOpt\":[\"no-new-privileges\"]}}",
                  pin.id, port, answer, PYBOX_LABEL_INSTALL, st->install_id, PYBOX_LABEL_RUN, run, PYBOX_LABEL_EXPIRES,
                  (long long)time(NULL) + 3600) < 0) /* housekeeping of the campaign's runs leaves it */
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "the listener's create body would be cut");
    cJSON *b = cJSON_Parse(body);
    cJSON *reply = NULL;
    long status = call(e, "POST", "/containers/create", b, &reply);
    cJSON_Delete(b);
    if (status != 201 || jstr(reply, "Id") == NULL || strlen(jstr(reply, "Id")) >= len) {
        cJSON_Delete(reply);
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "creating the listener: HTTP %ld", status);
    }
    snprintf(netns, len, "%s", jstr(reply, "Id"));
    cJSON_Delete(reply);
    char path[200];
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/start", netns);
    if ((status = call(e, "POST", path, NULL, NULL)) != 204)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "starting the listener: HTTP %ld", status);
    return 0;
}

static int c_sweep(pybox_backend_t *be, const char *install_id)
{
    pybox_leftover_t *v = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    if (be->ops->list_leftovers(be, install_id, &v, &n, &err) < 0)
        return 0;
    pybox_engine_t *e = pybox_docker_engine(be);
    for (size_t i = 0; i < n; i++) {
        char path[400];
        if (strcmp(v[i].kind, "box") == 0)
            remove_box(e, v[i].id);
        else if (pybox_fmt(path, sizeof path, "/volumes/%s?force=1", v[i].id) == 0)
            call(e, "DELETE", path, NULL, NULL);
    }
    free(v);
    return (int)n;
}

/* Seconds since the epoch of an RFC 3339 time from the engine. */
static double rfc3339(const char *s)
{
    struct tm tm = {0};
    double frac = 0;
    if (s == NULL)
        return 0;
    /* YYYY-MM-DDTHH:MM:SS, each field digits only */
    int *fields[] = {&tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec};
    const char seps[] = "--T::";
    const char *q = s;
    for (int i = 0; i < 6; i++) {
        char *end;
        errno = 0;
        long v = strtol(q, &end, 10);
        if (errno != 0 || end == q || v < 0 || v > 9999 || (i < 5 && *end != seps[i]))
            return 0;
        *fields[i] = (int)v;
        q = end + (i < 5 ? 1 : 0);
    }
    const char *dot = strchr(s, '.');
    if (dot)
        frac = strtod(dot, NULL);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + frac;
}

/* The engine's event log between two times (seconds since the epoch, to the nanosecond
 * as the engine takes them) for filter (a JSON filter, unescaped): each event given to
 * each(ev, arg); -1 (err set) when the engine gave none. */
static int engine_events(pybox_engine_t *e, const char *filter, double since, double until,
                         void (*each)(const cJSON *ev, void *arg), void *arg, pybox_error_t *err)
{
    char path[1024];
    char *esc = pybox_engine_escape(e, filter);
    if (esc == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "escaping a filter");
    int cut = pybox_fmt(path, sizeof path, "/events?since=%.9f&until=%.9f&filters=%s", since, until, esc);
    free(esc);
    if (cut < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "an engine request path would be cut");
    pybox_buf_t raw;
    pybox_buf_init(&raw, 0);
    long status = 0;
    if (pybox_engine_call_raw(e, "GET", path, NULL, &status, &raw, err) < 0) {
        pybox_buf_free(&raw);
        return -1;
    }
    if (status != 200) {
        pybox_buf_free(&raw);
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "the engine did not give its events (HTTP %ld)", status);
    }
    const char *p = raw.data, *end = raw.data + raw.len;
    while (p != NULL && p < end) {
        const char *next = NULL;
        cJSON *ev = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &next, 0);
        if (ev == NULL)
            break;
        each(ev, arg);
        cJSON_Delete(ev);
        p = next;
        while (p < end && (*p == '\n' || *p == '\r'))
            p++;
    }
    pybox_buf_free(&raw);
    return 0;
}

typedef struct {
    cJSON *actions;
    int kills, stops, dies;
} stop_count_t;

static void count_stop(const cJSON *ev, void *arg)
{
    stop_count_t *c = arg;
    const char *a = jstr(ev, "Action");
    if (a == NULL)
        return;
    cJSON_AddItemToArray(c->actions, cJSON_CreateString(a));
    c->kills += strcmp(a, "kill") == 0;
    c->stops += strcmp(a, "stop") == 0;
    c->dies += strcmp(a, "die") == 0;
}

/* Who stopped the box: the engine's own event log for it since `since`. */
static void events(pybox_engine_t *e, const char *id, long since, cJSON *obs)
{
    char filter[200];
    stop_count_t c = {.actions = cJSON_AddArrayToObject(obs, "engine_events")};
    pybox_error_t err = {0};
    if (pybox_fmt(filter, sizeof filter, "{\"container\":[\"%s\"]}", id) == 0)
        engine_events(e, filter, (double)since, (double)time(NULL) + 1, count_stop, &c, &err);
    cJSON_AddNumberToObject(obs, "kill_or_stop_events", c.kills + c.stops);
    cJSON_AddNumberToObject(obs, "die_events", c.dies);
}

/* One event as pybox-campaign inspect shows it. */
static void add_event(const cJSON *ev, void *arg)
{
    const cJSON *actor = cJSON_GetObjectItemCaseSensitive(ev, "Actor");
    const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(actor, "Attributes");
    const cJSON *nano = cJSON_GetObjectItemCaseSensitive(ev, "timeNano");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(ev, "time");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", jstr0(ev, "Action"));
    cJSON_AddStringToObject(o, "kind", strcmp(jstr0(ev, "Type"), "volume") == 0 ? "volume" : "box");
    cJSON_AddStringToObject(o, "id", jstr0(actor, "ID"));
    cJSON_AddStringToObject(o, "run_id", jstr0(attrs, PYBOX_LABEL_RUN));
    cJSON_AddNumberToObject(o, "time",
                            cJSON_IsNumber(nano)   ? nano->valuedouble / 1e9
                            : cJSON_IsNumber(secs) ? secs->valuedouble
                                                   : 0);
    cJSON_AddItemToArray(arg, o);
}

int pybox_docker_events(pybox_backend_t *be, const char *install_id, double since, double until, cJSON *into,
                        pybox_error_t *err)
{
    char filter[160];
    if (pybox_fmt(filter, sizeof filter, "{\"label\":[\"%s=%s\"]}", PYBOX_LABEL_INSTALL, install_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "not an installation id");
    return engine_events(pybox_docker_engine(be), filter, since, until, add_event, into, err);
}

static void c_killed_end(pybox_backend_t *be, const char *id, const char *run, int sig, long since, cJSON *obs)
{
    (void)run;
    pybox_engine_t *e = pybox_docker_engine(be);
    char path[200];
    if (sig != SIGKILL) {
        /* PyBox was asked to stop: the box must already be gone. */
        if (pybox_fmt(path, sizeof path, "/containers/%s/json", id) == 0)
            cJSON_AddBoolToObject(obs, "box_gone", call(e, "GET", path, NULL, NULL) == 404);
        remove_box(e, id);
        return;
    }
    cJSON *ins = NULL;
    if (pybox_fmt(path, sizeof path, "/containers/%s/wait", id) == 0)
        call(e, "POST", path, NULL, NULL);
    if (pybox_fmt(path, sizeof path, "/containers/%s/json", id) == 0)
        call(e, "GET", path, NULL, &ins);
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(ins, "State");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(state, "ExitCode");
    cJSON_AddNumberToObject(obs, "box_exit_code", cJSON_IsNumber(code) ? code->valuedouble : -1);
    cJSON_AddBoolToObject(obs, "engine_oom", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(state, "OOMKilled")));
    cJSON_AddNumberToObject(obs, "box_ran_s", rfc3339(jstr(state, "FinishedAt")) - rfc3339(jstr(state, "StartedAt")));
    cJSON_AddItemToObject(obs, "box_init_args", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ins, "Args"), 1));
    cJSON_Delete(ins);
    events(e, id, since, obs);
    /* The leftover is this campaign's: removed here, as cleanup would after expiry. */
    cJSON_AddBoolToObject(obs, "leftover_removed", remove_box(e, id));
}

static int c_record(pybox_backend_t *be, const char *id, bool wait, cJSON **out, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    char path[200];
    *out = NULL;
    if (!pybox_docker_valid_id(id))
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "not a box id: \"%s\"", id);
    long status = 0;
    cJSON *ins = NULL;
    /* An end waited for within the engine's longest call (a box's own timer ends it). */
    if (wait) {
        cJSON *reply = NULL;
        if (pybox_fmt(path, sizeof path, "/containers/%s/wait", id) < 0 ||
            pybox_engine_call_timeout(e, "POST", path, NULL, 60000, &status, &reply, err) < 0)
            return -1;
        int rc = status == 200 ? 0 : pybox_engine_fail(err, "waiting for the box", status, reply);
        cJSON_Delete(reply);
        if (rc < 0)
            return -1;
    }
    if (pybox_fmt(path, sizeof path, "/containers/%s/json", id) < 0 ||
        pybox_engine_get_200(e, path, "the box's record", &ins, err) < 0)
        return -1;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(ins, "State");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(state, "ExitCode");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(state, "Pid");
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(ins, "Config");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", jstr(ins, "Id") ? jstr(ins, "Id") : id);
    cJSON_AddStringToObject(r, "status", jstr0(state, "Status"));
    cJSON_AddNumberToObject(r, "exit_code", cJSON_IsNumber(code) ? code->valuedouble : -1);
    cJSON_AddBoolToObject(r, "oom_killed", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(state, "OOMKilled")));
    cJSON_AddStringToObject(r, "started_at", jstr0(state, "StartedAt"));
    cJSON_AddStringToObject(r, "finished_at", jstr0(state, "FinishedAt"));
    double started = rfc3339(jstr(state, "StartedAt")), finished = rfc3339(jstr(state, "FinishedAt"));
    cJSON_AddNumberToObject(r, "ran_s", started > 0 && finished >= started ? finished - started : 0);
    cJSON_AddNumberToObject(r, "pid", cJSON_IsNumber(pid) ? pid->valuedouble : 0);
    cJSON *args = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ins, "Args"), 1);
    cJSON_AddItemToObject(r, "args", args ? args : cJSON_CreateArray());
    cJSON *labels = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(config, "Labels"), 1);
    cJSON_AddItemToObject(r, "labels", labels ? labels : cJSON_CreateObject());
    cJSON_Delete(ins);
    *out = r;
    return 0;
}

/* The ids of a list the engine gives ("Id" of each). */
static cJSON *ids_of(pybox_engine_t *e, const char *path, const char *what, pybox_error_t *err)
{
    cJSON *list = NULL;
    if (pybox_engine_get_200(e, path, what, &list, err) < 0)
        return NULL;
    cJSON *ids = cJSON_CreateArray();
    const cJSON *x;
    cJSON_ArrayForEach (x, list)
        if (jstr(x, "Id") != NULL)
            cJSON_AddItemToArray(ids, cJSON_CreateString(jstr(x, "Id")));
    cJSON_Delete(list);
    return ids;
}

static int c_whole(pybox_backend_t *be, cJSON **out, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    cJSON *info = NULL;
    *out = NULL;
    if (pybox_engine_get_200(e, "/info", "the engine's facts", &info, err) < 0)
        return -1;
    cJSON *ver = c_version(be);
    if (ver == NULL) {
        cJSON_Delete(info);
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "the engine gave no version");
    }
    cJSON *w = cJSON_CreateObject();
    cJSON_AddStringToObject(w, "version", jstr0(ver, "Version"));
    cJSON_AddStringToObject(w, "api_version", jstr0(ver, "ApiVersion"));
    cJSON_AddStringToObject(w, "storage_driver", jstr0(info, "Driver"));
    cJSON_AddStringToObject(w, "root_dir", jstr0(info, "DockerRootDir"));
    cJSON_Delete(ver);
    cJSON_Delete(info);
    cJSON *c = ids_of(e, "/containers/json?all=1", "the engine's containers", err);
    cJSON *i = c ? ids_of(e, "/images/json?all=1", "the engine's images", err) : NULL;
    if (c == NULL || i == NULL) {
        cJSON_Delete(c);
        cJSON_Delete(w);
        return -1;
    }
    cJSON_AddItemToObject(w, "containers", c);
    cJSON_AddItemToObject(w, "images", i);
    *out = w;
    return 0;
}

const pybox_campaign_ops_t pybox_docker_campaign_ops = {
    .socket = c_socket,
    .version = c_version,
    .listener = c_listener,
    .sweep = c_sweep,
    .killed_end = c_killed_end,
    .record = c_record,
    .whole = c_whole,
};
