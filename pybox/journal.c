/* SPDX-License-Identifier: MIT */
/* Run notes (see note.h). */
#include "journal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static bool run_id_valid(const char *id)
{
    return strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32;
}

static int notes_dir(const pybox_state_t *st, char *out, size_t len, pybox_error_t *err)
{
    if (pybox_state_path(st, PYBOX_JOURNAL_DIR, out, len, err) < 0)
        return -1;
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", out);
    return 0;
}

void pybox_journal_init(pybox_journal_t *n)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
}

/* A note: a run's (box_name), or a scratch folder's (scratch). */
static int note_open(const pybox_state_t *st, const char *run_id, const char *box_name, const char *scratch,
                     int64_t expires, pybox_journal_t *n, pybox_error_t *err)
{
    char dir[PATH_MAX], tmp[PATH_MAX];
    pybox_journal_init(n);
    if (!run_id_valid(run_id))
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "run id");
    if (notes_dir(st, dir, sizeof dir, err) < 0)
        return -1;
    if (pybox_fmt(n->path, sizeof n->path, "%s/%s.json", dir, run_id) < 0 ||
        pybox_fmt(tmp, sizeof tmp, "%s/.%s.tmp", dir, run_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "run note path");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", tmp);
    /* Locked before it has its name: no one can see the note unlocked while we live. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "flock(%s)", tmp);
    }
    char when[40];
    pybox_wall_iso(when, sizeof when);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "run_id", run_id);
    if (box_name != NULL)
        cJSON_AddStringToObject(j, "box_name", box_name);
    if (scratch != NULL)
        cJSON_AddStringToObject(j, "scratch", scratch);
    cJSON_AddStringToObject(j, "install_id", st->install_id);
    cJSON_AddNumberToObject(j, "pid", (double)getpid());
    cJSON_AddStringToObject(j, "noted_at", when);
    cJSON_AddNumberToObject(j, "expires", (double)expires);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    int rc = text != NULL && pybox_write_all(fd, text, strlen(text)) == 0 && pybox_write_all(fd, "\n", 1) == 0 ? 0 : -1;
    int e = errno;
    free(text);
    if (rc < 0 || rename(tmp, n->path) < 0) {
        if (rc == 0)
            e = errno;
        close(fd);
        unlink(tmp);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "writing the run note %s", n->path);
    }
    n->fd = fd;
    n->expires = expires;
    snprintf(n->run_id, sizeof n->run_id, "%s", run_id);
    return 0;
}

int pybox_journal_open(const pybox_state_t *st, const char *run_id, const char *box_name, int64_t expires,
                       pybox_journal_t *n, pybox_error_t *err)
{
    return note_open(st, run_id, box_name, NULL, expires, n, err);
}

/* ---- an MCP call's scratch folder ---- */

#define SCRATCH_SUFFIX ".scratch"

static int scratch_name(const char *run_id, char *out, size_t len)
{
    return run_id_valid(run_id) ? pybox_fmt(out, len, "%s" SCRATCH_SUFFIX, run_id) : -1;
}

int pybox_journal_scratch_open(const pybox_state_t *st, int64_t expires, pybox_journal_t *n, char *dir, size_t len,
                               pybox_error_t *err)
{
    char id[33], notes[PATH_MAX], name[64];
    pybox_journal_init(n);
    if (pybox_random_hex(16, id, err) < 0 || notes_dir(st, notes, sizeof notes, err) < 0)
        return -1;
    if (scratch_name(id, name, sizeof name) < 0 || pybox_fmt(dir, len, "%s/%s", notes, name) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "scratch folder path");
    /* The note first, locked: from here on a trail leads to the folder. */
    if (note_open(st, id, NULL, dir, expires, n, err) < 0)
        return -1;
    if (mkdir(dir, 0700) < 0) {
        int e = errno;
        pybox_error_t ignored = {0};
        pybox_journal_close(n, &ignored);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "mkdir(%s)", dir);
    }
    return 0;
}

/* Remove the scratch folder of run_id, by descriptors, following no links. */
static int scratch_rm(const pybox_state_t *st, const char *run_id, bool dry_run, char *path, size_t len)
{
    char notes[PATH_MAX], name[64];
    if (scratch_name(run_id, name, sizeof name) < 0 || notes_dir(st, notes, sizeof notes, NULL) < 0 ||
        pybox_fmt(path, len, "%s/%s", notes, name) < 0)
        return 0;
    int dfd = open(notes, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    struct stat sb;
    int found = fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (found && !dry_run)
        pybox_remove_tree_at(dfd, name);
    close(dfd);
    return found;
}

void pybox_journal_scratch_close(const pybox_state_t *st, pybox_journal_t *n)
{
    char path[PATH_MAX];
    if (n->fd < 0)
        return;
    scratch_rm(st, n->run_id, false, path, sizeof path);
    pybox_error_t ignored = {0};
    pybox_journal_close(n, &ignored);
}

int pybox_journal_scratch_remove(const pybox_state_t *st, const char *run_id, bool dry_run, char *path, size_t len)
{
    return scratch_rm(st, run_id, dry_run, path, len);
}

int pybox_journal_close(pybox_journal_t *n, pybox_error_t *err)
{
    if (n->fd < 0)
        return 0;
    int rc = 0;
    if (unlink(n->path) < 0 && errno != ENOENT)
        rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "unlink(%s)", n->path);
    close(n->fd);
    n->fd = -1;
    return rc;
}

void pybox_journal_abandon(pybox_journal_t *n)
{
    if (n->fd >= 0)
        close(n->fd); /* the note stays, now unlocked: cleanup takes it from here */
    n->fd = -1;
}

int pybox_journal_note_parse(const char *text, size_t len, const char *run_id, int64_t *expires)
{
    cJSON *j = cJSON_ParseWithLength(text, len);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "expires");
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run_id");
    int rc = -1;
    int64_t e = 0;
    /* an expiry no int64_t holds is no expiry: the note is torn */
    if (cJSON_IsNumber(exp) && cJSON_IsString(run) && strcmp(run->valuestring, run_id) == 0 &&
        pybox_double_to_i64(exp->valuedouble, &e)) {
        *expires = e;
        rc = 0;
    }
    cJSON_Delete(j);
    return rc;
}

static int read_note(int fd, pybox_journal_info_t *info)
{
    char buf[2048];
    ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
    if (r <= 0)
        return -1;
    buf[r] = '\0';
    return pybox_journal_note_parse(buf, (size_t)r, info->run_id, &info->expires);
}

int pybox_journal_list(const pybox_state_t *st, pybox_journal_info_t **out, size_t *count, pybox_error_t *err)
{
    char dir[PATH_MAX];
    *out = NULL;
    *count = 0;
    if (notes_dir(st, dir, sizeof dir, err) < 0)
        return -1;
    DIR *d = opendir(dir);
    if (d == NULL)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "opendir(%s)", dir);
    size_t cap = 16, n = 0;
    pybox_journal_info_t *v = calloc(cap, sizeof *v);
    struct dirent *de;
    while (v != NULL && (de = readdir(d)) != NULL) {
        /* "<run>.json", or ".<run>.tmp" left by a run that died while writing it */
        const char *name = de->d_name;
        char run[33];
        if (strlen(name) == 37 && strcmp(name + 32, ".json") == 0)
            memcpy(run, name, 32);
        else if (strlen(name) == 37 && name[0] == '.' && strcmp(name + 33, ".tmp") == 0)
            memcpy(run, name + 1, 32);
        else
            continue;
        run[32] = '\0';
        if (!run_id_valid(run))
            continue;
        if (n == cap) {
            pybox_journal_info_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (nv == NULL)
                break;
            v = nv;
            cap *= 2;
        }
        pybox_journal_info_t *info = &v[n];
        memset(info, 0, sizeof *info);
        memcpy(info->run_id, run, 33);
        /* Never wait on what is not a regular file (a FIFO planted there): it is torn. */
        int fd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0 && errno == ENOENT)
            continue; /* gone since the listing: a note given its name, or closed; no leftover */
        struct stat rs;
        if (fd < 0 || fstat(fd, &rs) < 0 || !S_ISREG(rs.st_mode)) {
            if (fd >= 0)
                close(fd);
            info->torn = true;
            n++;
            continue;
        }
        /* A note being written is locked right after it is created; in that instant it
         * is unlocked, so a fresh temporary note always counts as live, and is never
         * locked here (a shared lock taken in that instant would refuse its writer's). */
        if (name[0] == '.' && (int64_t)rs.st_mtime > pybox_wall_s() - 60)
            info->live = true;
        else
            info->live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        info->torn = name[0] == '.' || read_note(fd, info) < 0;
        close(fd);
        n++;
    }
    closedir(d);
    if (v == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing run notes");
    *out = v;
    *count = n;
    return 0;
}

static int note_paths(const pybox_state_t *st, const char *run_id, char *path, char *tmp, pybox_error_t *err)
{
    char dir[PATH_MAX];
    if (!run_id_valid(run_id))
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "run id");
    if (notes_dir(st, dir, sizeof dir, err) < 0)
        return -1;
    if (pybox_fmt(path, PATH_MAX, "%s/%s.json", dir, run_id) < 0 ||
        pybox_fmt(tmp, PATH_MAX, "%s/.%s.tmp", dir, run_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "run note path");
    return 0;
}

int pybox_journal_claim(const pybox_state_t *st, const char *run_id, int *fd, pybox_error_t *err)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    *fd = -1;
    if (note_paths(st, run_id, path, tmp, err) < 0)
        return -1;
    const char *which = path;
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (f < 0 && errno == ENOENT) {
        which = tmp;
        f = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat sb;
        if (f >= 0 && fstat(f, &sb) == 0 && (int64_t)sb.st_mtime > pybox_wall_s() - 60) {
            close(f); /* being written right now (see pybox_journal_list) */
            return 0;
        }
    }
    if (f < 0) {
        if (errno == ENOENT)
            return 2; /* no note at all: nothing to claim, nothing live */
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", which);
    }
    struct stat fs;
    if (fstat(f, &fs) < 0 || !S_ISREG(fs.st_mode)) {
        /* not a note at all: nothing locks it; take it as a dead run's */
        *fd = f;
        return 1;
    }
    if (flock(f, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(f);
        if (e == EWOULDBLOCK)
            return 0; /* a live run holds it */
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "flock(%s)", which);
    }
    *fd = f;
    return 1;
}

static int out_path(const pybox_state_t *st, const char *run_id, char *out, size_t len)
{
    char dir[PATH_MAX];
    if (!run_id_valid(run_id) || notes_dir(st, dir, sizeof dir, NULL) < 0)
        return -1;
    return pybox_fmt(out, len, "%s/%s.out", dir, run_id);
}

int pybox_journal_output_begin(const pybox_state_t *st, const char *run_id, const char *tmp_path, pybox_error_t *err)
{
    char p[PATH_MAX];
    if (out_path(st, run_id, p, sizeof p) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "output note");
    return pybox_write_file_atomic(p, tmp_path, strlen(tmp_path), 0600, err);
}

void pybox_journal_output_end(const pybox_state_t *st, const char *run_id)
{
    char p[PATH_MAX];
    if (out_path(st, run_id, p, sizeof p) == 0)
        unlink(p);
}

int pybox_journal_output_of(const pybox_state_t *st, const char *run_id, char *path, size_t len)
{
    char p[PATH_MAX];
    if (out_path(st, run_id, p, sizeof p) < 0)
        return 0;
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, path, len - 1);
    close(fd);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    return 1;
}

void pybox_journal_remove_claimed(const pybox_state_t *st, const char *run_id, int fd)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (note_paths(st, run_id, path, tmp, NULL) == 0) {
        unlink(path);
        unlink(tmp);
    }
    if (fd >= 0)
        close(fd);
}
