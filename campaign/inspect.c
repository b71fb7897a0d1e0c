/* SPDX-License-Identifier: MIT */
/* pybox-campaign inspect: an installation's boxes, volumes, cgroups, staging folders, notes
 * and the machine's uid leases, straight from the backends (through the box interface),
 * the kernel and the state folder, so that tests and drivers in any language ask one tool
 * rather than keep their own engine client or copy of a backend's layout. */
#include "inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/box.h"
#include "../pybox/cgroup.h"
#include "../pybox/journal.h"
#include "../pybox/uid.h"
#include "../pybox/util.h"

#define INSPECT_BACKENDS_MAX 8
#define INSPECT_KEPT_MAX 8
#define INSPECT_PROCS_MAX 4096

/* The pids in a cgroup folder (cgroup.procs), added to procs once each. */
static void add_procs(const char *dir, cJSON *procs)
{
    char path[PATH_MAX + 16];
    if (pybox_fmt(path, sizeof path, "%s/cgroup.procs", dir) < 0)
        return;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    char line[32];
    while (cJSON_GetArraySize(procs) < INSPECT_PROCS_MAX && fgets(line, sizeof line, f) != NULL) {
        uint64_t v;
        line[strcspn(line, "\n")] = '\0';
        if (pybox_parse_u64(line, &v) < 0 || v == 0 || v > INT32_MAX)
            continue;
        bool seen = false;
        const cJSON *x;
        cJSON_ArrayForEach (x, procs)
            seen = seen || x->valuedouble == (double)v;
        if (!seen)
            cJSON_AddItemToArray(procs, cJSON_CreateNumber((double)v));
    }
    fclose(f);
}

/* A box's cgroup folders that exist now, as its backend places them by its run id, and
 * the processes in them. */
static void box_cgroup(pybox_backend_t *be, const char *run_id, cJSON *item)
{
    cJSON *dirs = cJSON_AddArrayToObject(item, "cgroup");
    cJSON *procs = cJSON_AddArrayToObject(item, "procs");
    pybox_cgroup_loc_t loc;
    pybox_error_t ignored = {0};
    if (run_id[0] == '\0' || be->ops->run_cgroup == NULL || be->ops->run_cgroup(be, run_id, &loc, &ignored) < 0)
        return; /* a box that does not run has no cgroup to show (docker: none without its PID 1) */
    for (int i = 0; i < PYBOX_CG_CONTROLLERS; i++) {
        struct stat sb;
        bool again = false;
        for (int k = 0; k < i; k++)
            again = again || strcmp(loc.dir[k], loc.dir[i]) == 0;
        if (loc.dir[i][0] == '\0' || again || stat(loc.dir[i], &sb) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        cJSON_AddItemToArray(dirs, cJSON_CreateString(loc.dir[i]));
        add_procs(loc.dir[i], procs);
    }
}

static cJSON *leftover_json(pybox_backend_t *be, const pybox_leftover_t *l)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", l->kind);
    cJSON_AddStringToObject(o, "id", l->id);
    cJSON_AddStringToObject(o, "name", l->name);
    cJSON_AddStringToObject(o, "run_id", l->run_id);
    cJSON_AddNumberToObject(o, "expires", (double)l->expires);
    cJSON_AddBoolToObject(o, "running", l->running);
    cJSON_AddStringToObject(o, "state", l->state);
    if (strcmp(l->kind, "box") == 0)
        box_cgroup(be, l->run_id, o);
    return o;
}

/* Everything of the installation on one backend removed: forced where the backend can
 * (the campaign's sweep), else each leftover that no longer runs; then what the backend
 * keeps beside its boxes. What could not go is listed after. */
static int remove_all(pybox_backend_t *be, const pybox_state_t *st, pybox_error_t *err)
{
    const pybox_backend_ops_t *ops = be->ops;
    if (ops->campaign != NULL && ops->campaign->sweep != NULL)
        ops->campaign->sweep(be, st->install_id);
    pybox_leftover_t *v = NULL;
    size_t n = 0;
    if (ops->list_leftovers(be, st->install_id, &v, &n, err) < 0)
        return -1;
    for (int order = 0; order < 4; order++)
        for (size_t i = 0; i < n; i++) {
            bool gone = false;
            pybox_error_t ignored = {0};
            if (v[i].order == order && !v[i].running)
                ops->remove_leftover(be, &v[i], &gone, &ignored);
        }
    free(v);
    pybox_error_t ignored = {0};
    if (ops->forget != NULL)
        ops->forget(be, st->install_id, &ignored);
    return 0;
}

/* One backend's part; -1 when it answered nothing (err set). */
static int backend_part(const pybox_backend_ops_t *ops, const pybox_state_t *st, const camp_inspect_opts_t *o,
                        cJSON *into, pybox_error_t *err)
{
    pybox_backend_t *be = NULL;
    if (ops->open(st, &be, err) < 0)
        return -1;
    cJSON_AddStringToObject(into, "describe", ops->describe(be));
    if (o->remove && remove_all(be, st, err) < 0) {
        pybox_backend_close(be);
        return -1;
    }
    if (o->events) {
        cJSON *ev = cJSON_AddArrayToObject(into, "events");
        if (ops->events != NULL && ops->events(be, st->install_id, o->since, o->until, ev, err) < 0) {
            pybox_backend_close(be);
            return -1;
        }
    }
    pybox_leftover_t *v = NULL;
    size_t n = 0;
    if (ops->list_leftovers(be, st->install_id, &v, &n, err) < 0) {
        pybox_backend_close(be);
        return -1;
    }
    cJSON *items = cJSON_AddArrayToObject(into, "items");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(items, leftover_json(be, &v[i]));
    free(v);
    cJSON *kept = cJSON_AddArrayToObject(into, "kept");
    if (ops->kept != NULL) {
        static char paths[INSPECT_KEPT_MAX][PATH_MAX];
        size_t nk = 0;
        if (ops->kept(be, st->install_id, paths, INSPECT_KEPT_MAX, &nk, err) < 0) {
            pybox_backend_close(be);
            return -1;
        }
        for (size_t i = 0; i < nk; i++)
            cJSON_AddItemToArray(kept, cJSON_CreateString(paths[i]));
    }
    pybox_backend_close(be);
    return 0;
}

static int notes_part(const pybox_state_t *st, cJSON *top, pybox_error_t *err)
{
    pybox_journal_info_t *v = NULL;
    size_t n = 0;
    if (pybox_journal_list(st, &v, &n, err) < 0)
        return -1;
    cJSON *notes = cJSON_AddArrayToObject(top, "notes");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "run_id", v[i].run_id);
        cJSON_AddNumberToObject(o, "expires", (double)v[i].expires);
        cJSON_AddBoolToObject(o, "live", v[i].live);
        cJSON_AddBoolToObject(o, "torn", v[i].torn);
        cJSON_AddItemToArray(notes, o);
    }
    free(v);
    return 0;
}

static int leases_part(cJSON *top, pybox_error_t *err)
{
    pybox_uid_range_t r;
    char buf[PATH_MAX];
    pybox_uid_lease_info_t *v = NULL;
    size_t n = 0;
    if (pybox_uid_machine(&r, buf, sizeof buf, err) < 0 || pybox_uid_lease_list_in(&r, &v, &n, err) < 0)
        return -1;
    cJSON *leases = cJSON_AddArrayToObject(top, "leases");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "uid", (double)v[i].uid);
        cJSON_AddStringToObject(o, "run_id", v[i].run_id);
        cJSON_AddNumberToObject(o, "expires", (double)v[i].expires);
        cJSON_AddBoolToObject(o, "locked", v[i].locked);
        cJSON_AddItemToArray(leases, o);
    }
    free(v);
    return 0;
}

int camp_inspect(const pybox_state_t *st, const camp_inspect_opts_t *o, cJSON **out, pybox_error_t *err)
{
    const char *const *backends = o->backends;
    *out = NULL;
    cJSON *top = cJSON_CreateObject();
    cJSON_AddStringToObject(top, "installation", st->install_id);
    cJSON *bk = cJSON_AddObjectToObject(top, "backends");
    for (size_t i = 0;; i++) {
        if (backends != NULL && backends[i] == NULL)
            break;
        const pybox_backend_ops_t *ops = backends ? pybox_backend_find(backends[i]) : pybox_backend_nth(i);
        if (ops == NULL && backends == NULL)
            break;
        if (ops == NULL) {
            char known[128];
            pybox_backend_names(known, sizeof known);
            cJSON_Delete(top);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown backend \"%s\" (known: %s)", backends[i], known);
        }
        cJSON *part = cJSON_AddObjectToObject(bk, ops->name);
        pybox_error_t berr = {0};
        if (backend_part(ops, st, o, part, &berr) < 0) {
            if (backends != NULL) {
                cJSON_Delete(top);
                return pybox_error_set(err, berr.kind, berr.errnum, "backend %s: %s", ops->name, berr.msg);
            }
            cJSON_AddStringToObject(part, "error", berr.msg);
        }
    }
    if (notes_part(st, top, err) < 0 || leases_part(top, err) < 0) {
        cJSON_Delete(top);
        return -1;
    }
    *out = top;
    return 0;
}

/* The backend named, opened, when it has the campaign's record (or, not record, its whole
 * holder); lacks says what it has not. */
static int open_for(const pybox_state_t *st, const char *backend, bool record, const char *lacks, pybox_backend_t **be,
                    pybox_error_t *err)
{
    const pybox_backend_ops_t *ops = pybox_backend_find(backend);
    if (ops == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown backend \"%s\"", backend);
    const pybox_campaign_ops_t *c = ops->campaign;
    if (c == NULL || (record ? c->record == NULL : c->whole == NULL))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "the %s backend: %s", backend, lacks);
    return ops->open(st, be, err);
}

/* *out = {key: v}, or -1 when rc says the op failed. */
static int wrapped(int rc, const char *key, cJSON *v, cJSON **out)
{
    if (rc < 0)
        return -1;
    *out = cJSON_CreateObject();
    cJSON_AddItemToObject(*out, key, v);
    return 0;
}

int camp_inspect_box(const pybox_state_t *st, const char *backend, const char *id, bool wait, cJSON **out,
                     pybox_error_t *err)
{
    pybox_backend_t *be = NULL;
    cJSON *rec = NULL;
    *out = NULL;
    if (open_for(st, backend, true, "it keeps no record of a box", &be, err) < 0)
        return -1;
    int rc = be->ops->campaign->record(be, id, wait, &rec, err);
    pybox_backend_close(be);
    return wrapped(rc, "box", rec, out);
}

int camp_inspect_holder(const pybox_state_t *st, const char *backend, cJSON **out, pybox_error_t *err)
{
    pybox_backend_t *be = NULL;
    cJSON *w = NULL;
    *out = NULL;
    if (open_for(st, backend, false, "nothing holds its boxes but the kernel", &be, err) < 0)
        return -1;
    int rc = be->ops->campaign->whole(be, &w, err);
    pybox_backend_close(be);
    return wrapped(rc, "holder", w, out);
}

static int usage(void)
{
    fprintf(stderr, "usage: pybox-campaign inspect --home DIR [--backend NAME]... [--since SECONDS --until SECONDS] "
                    "[--remove] --json\n"
                    "       pybox-campaign inspect --home DIR --backend NAME --box ID [--wait] --json\n"
                    "       pybox-campaign inspect --home DIR --backend NAME --holder --json\n");
    return 2;
}

/* Seconds since the epoch, as a JSON number or a decimal: -1 when it is not one. */
static double seconds(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && v >= 0 && v < 1e11 ? v : -1;
}

int camp_inspect_main(int argc, char **argv)
{
    const char *home = NULL, *names[INSPECT_BACKENDS_MAX + 1] = {0}, *box = NULL;
    size_t nb = 0;
    bool json = false, wait = false, holder = false;
    camp_inspect_opts_t o = {.since = -1, .until = -1};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--remove") == 0)
            o.remove = true;
        else if (strcmp(argv[i], "--wait") == 0)
            wait = true;
        else if (strcmp(argv[i], "--holder") == 0)
            holder = true;
        else if (strcmp(argv[i], "--home") == 0 && i + 1 < argc)
            home = argv[++i];
        else if (strcmp(argv[i], "--box") == 0 && i + 1 < argc)
            box = argv[++i];
        else if (strcmp(argv[i], "--since") == 0 && i + 1 < argc && (o.since = seconds(argv[++i])) >= 0)
            o.events = true;
        else if (strcmp(argv[i], "--until") == 0 && i + 1 < argc && (o.until = seconds(argv[++i])) >= 0)
            o.events = true;
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc && nb < INSPECT_BACKENDS_MAX)
            names[nb++] = argv[++i];
        else
            return usage();
    }
    /* JSON is the only form: the flag says so, should another come. */
    if (home == NULL || !json || (o.events && (o.since < 0 || o.until < o.since)) ||
        ((box != NULL || holder) && (nb != 1 || o.events || o.remove)) || (wait && box == NULL) ||
        (holder && box != NULL))
        return usage();
    o.backends = nb ? names : NULL;
    setenv("PYBOX_HOME", home, 1);
    pybox_state_t st;
    pybox_error_t err = {0};
    cJSON *j = NULL;
    if (pybox_state_open(&st, false, &err) < 0 || (holder        ? camp_inspect_holder(&st, names[0], &j, &err)
                                                   : box != NULL ? camp_inspect_box(&st, names[0], box, wait, &j, &err)
                                                                 : camp_inspect(&st, &o, &j, &err)) < 0) {
        fprintf(stderr, "pybox-campaign inspect: %s\n", err.msg);
        return 1;
    }
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (text == NULL) {
        fprintf(stderr, "pybox-campaign inspect: out of memory\n");
        return 1;
    }
    int rc = printf("%s\n", text) < 0 || fflush(stdout) != 0 ? 1 : 0;
    free(text);
    return rc;
}
