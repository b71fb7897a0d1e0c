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

/* Who stopped the box: the engine's own event log for it since `since`. */
static void events(pybox_engine_t *e, const char *id, long since, cJSON *obs)
{
    char filter[200], path[600];
    snprintf(filter, sizeof filter, "{\"container\":[\"%s\"]}", id);
    char *esc = pybox_engine_escape(e, filter);
    int cut = pybox_fmt(path, sizeof path, "/events?since=%ld&until=%ld&filters=%s", since, (long)time(NULL) + 1,
                        esc ? esc : "");
    free(esc);
    pybox_buf_t raw;
    pybox_buf_init(&raw, 0);
    int kills = 0, stops = 0, dies = 0;
    cJSON *actions = cJSON_AddArrayToObject(obs, "engine_events");
    long status = 0;
    pybox_error_t err = {0};
    if (cut == 0 && pybox_engine_call_raw(e, "GET", path, NULL, &status, &raw, &err) == 0 && raw.data) {
        const char *p = raw.data, *end = raw.data + raw.len;
        while (p < end) {
            const char *next = NULL;
            cJSON *ev = cJSON_ParseWithOpts(p, &next, 0);
            if (ev == NULL)
                break;
            const char *a = jstr(ev, "Action");
            if (a) {
                cJSON_AddItemToArray(actions, cJSON_CreateString(a));
                kills += strcmp(a, "kill") == 0;
                stops += strcmp(a, "stop") == 0;
                dies += strcmp(a, "die") == 0;
            }
            cJSON_Delete(ev);
            p = next;
            while (p < end && (*p == '\n' || *p == '\r'))
                p++;
        }
    }
    pybox_buf_free(&raw);
    cJSON_AddNumberToObject(obs, "kill_or_stop_events", kills + stops);
    cJSON_AddNumberToObject(obs, "die_events", dies);
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

const pybox_campaign_ops_t pybox_docker_campaign_ops = {
    .socket = c_socket,
    .version = c_version,
    .listener = c_listener,
    .sweep = c_sweep,
    .killed_end = c_killed_end,
};
