/* SPDX-License-Identifier: MIT */
/* What native boxes of an installation left behind: cgroup leaves under its parent (under
 * systemd: in their scopes) and staging folders, found by run-id names only, removed
 * after their expiry (see sandbox.h). Every mount of a box lives in its own mount
 * namespace, which ends with the box's last process unless a descriptor left in flight
 * in a unix socket holds it (a handle of the namespace, a file of one of its mounts): the
 * kernel's collector ends those, and the removal of a leftover box has it run, as its box
 * ended with no PyBox to see it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bounds.h"
#include "../util.h"
#include "cgroup.h"
#include "internal.h"
#include "parse.h"

#define LEFTOVERS_MAX 100000

typedef struct list {
    pybox_native_leftover_t *v;
    size_t n, cap;
} list_t;

static pybox_native_leftover_t *find_or_add(list_t *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].run_id, id) == 0)
            return &l->v[i];
    if (l->n >= LEFTOVERS_MAX)
        return NULL;
    if (pybox_grow(&l->v, &l->cap, l->n, sizeof *l->v, 16) < 0)
        return NULL;
    pybox_native_leftover_t *e = &l->v[l->n++];
    memset(e, 0, sizeof *e);
    memcpy(e->run_id, id, 33);
    return e;
}

/* "<id>" or ".<id>.new" (a staging folder caught half made): the id, or NULL. */
static const char *id_of(const char *name, char id[33])
{
    if (pybox_native_is_run_id(name)) {
        memcpy(id, name, 33);
        return id;
    }
    size_t n = strlen(name);
    if (n == 37 && name[0] == '.' && strcmp(name + 33, ".new") == 0) {
        memcpy(id, name + 1, 32);
        id[32] = '\0';
        return pybox_native_is_run_id(id) ? id : NULL;
    }
    return NULL;
}

/* The expiry a staging folder holds: the name of its file "expires-<seconds>" (the latest
 * if, against the rules, there were several); 0 when there is none. */
static int64_t read_expiry(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int64_t best = 0;
    struct dirent *e;
    pybox_error_t ignored = {0};
    while ((e = readdir(d)) != NULL) {
        int64_t v;
        if (strncmp(e->d_name, "expires-", 8) != 0 ||
            pybox_np_cg_number(e->d_name + 8, strlen(e->d_name + 8), &v, &ignored) < 0 || v < 0)
            continue;
        if (v > best)
            best = v;
    }
    closedir(d);
    return best;
}

/* A scope's name "<parent>-<id>.scope" (v2 under systemd): the id, or NULL. */
static const char *id_of_scope(const char *name, const char *parent, char id[33])
{
    size_t pl = strlen(parent), n = strlen(name);
    if (n != pl + 1 + 32 + 6 || strncmp(name, parent, pl) != 0 || name[pl] != '-' ||
        strcmp(name + n - 6, ".scope") != 0)
        return NULL;
    memcpy(id, name + pl + 1, 32);
    id[32] = '\0';
    return pybox_native_is_run_id(id) ? id : NULL;
}

/* kind: 's' staging folders, 'c' leaves under the parent, 'u' scopes of the parent's boxes
 * (those with PyBox's leaf still in them: the scope itself is systemd's, which removes it
 * once nothing runs in it). */
static int scan(const char *dir, char kind, const char *parent, list_t *l, pybox_error_t *err)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "opendir(%s)", dir);
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        char id[33];
        if (e->d_type != DT_DIR || (kind == 'u' ? id_of_scope(e->d_name, parent, id) : id_of(e->d_name, id)) == NULL)
            continue;
        char p[PATH_MAX];
        if (kind == 'u') {
            struct stat sb;
            if (pybox_fmt(p, sizeof p, "%s/%s/%s", dir, e->d_name, PYBOX_NATIVE_CG_SCOPE_LEAF) < 0 || stat(p, &sb) < 0)
                continue;
        }
        pybox_native_leftover_t *x = find_or_add(l, id);
        if (x == NULL) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing leftovers");
            break;
        }
        if (kind == 's') {
            x->staging = true;
            if (pybox_fmt(p, sizeof p, "%s/%s", dir, e->d_name) == 0) {
                int64_t ex = read_expiry(p);
                if (ex > x->expires)
                    x->expires = ex;
            }
        } else {
            x->cgroup = true;
        }
    }
    closedir(d);
    return rc;
}

int pybox_native_leftovers(const pybox_native_cg_host_t *h, const char *cgroup_parent, const char *staging,
                           pybox_native_leftover_t **out, size_t *n, pybox_error_t *err)
{
    *out = NULL;
    *n = 0;
    list_t l = {0};
    char dirs[5][PATH_MAX];
    if (pybox_native_cg_holders(h, cgroup_parent, dirs, err) < 0)
        return -1;
    for (size_t i = 0; i < 5; i++)
        if (dirs[i][0] != '\0' && scan(dirs[i], h->systemd ? 'u' : 'c', cgroup_parent, &l, err) < 0) {
            free(l.v);
            return -1;
        }
    if (scan(staging, 's', NULL, &l, err) < 0) {
        free(l.v);
        return -1;
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

int pybox_native_leftover_remove(const pybox_native_cg_host_t *h, const char *cgroup_parent, const char *staging,
                                 const pybox_native_leftover_t *l, int64_t now, bool *gone, pybox_error_t *err)
{
    *gone = false;
    if (!pybox_native_is_run_id(l->run_id))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native leftover: not a run id");
    /* A staging folder without a readable expiry is in the making (or broken): only its
     * own creator removes it. A cgroup leaf without staging is past its box (staging goes
     * last), and the kernel refuses its removal while any process is in it. */
    if (l->staging && (l->expires == 0 || now <= l->expires))
        return 0;
    pybox_native_cgroup_t cg;
    if (pybox_native_cg_paths(h, cgroup_parent, l->run_id, &cg, err) < 0)
        return -1;
    bool cg_gone = false;
    pybox_error_t cerr = {0};
    if (pybox_native_cg_remove(&cg, 0, &cg_gone, &cerr) < 0) {
        if (cerr.errnum == EBUSY)
            return 0; /* a box still runs in it: its own timer ends it, then a later sweep */
        if (err != NULL && err->kind == PYBOX_ERR_NONE)
            *err = cerr;
        return -1;
    }
    char p[PATH_MAX], q[PATH_MAX];
    if (pybox_fmt(p, sizeof p, "%s/%s", staging, l->run_id) < 0 ||
        pybox_fmt(q, sizeof q, "%s/.%s.new", staging, l->run_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "staging path");
    if (pybox_native_rm_tree(p, err) < 0 || pybox_native_rm_tree(q, err) < 0)
        return -1;
    if (l->cgroup) {
        bool done;
        pybox_error_t ignored = {0};
        (void)pybox_native_collect(PYBOX_COLLECT_MS, &done, &ignored);
    }
    *gone = cg_gone;
    return 0;
}
