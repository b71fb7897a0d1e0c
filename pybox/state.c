/* SPDX-License-Identifier: MIT */
/* The installation's state directory (see state.h). */
#include "state.h"

#include "box.h"

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

bool pybox_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_'));
        if (!ok)
            return false;
    }
    return true;
}

static int mkdir_p(const char *path, mode_t mode, pybox_error_t *err)
{
    char failed[PATH_MAX];
    if (pybox_mkdir_parents(path, mode, failed, sizeof failed) == 0)
        return 0;
    return errno == ENAMETOOLONG && strlen(path) >= sizeof failed
               ? pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "state directory path")
               : pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", failed);
}

static int state_dir(char *out, size_t len, pybox_error_t *err)
{
    const char *home = getenv("PYBOX_HOME");
    int n;
    if (home != NULL && *home != '\0') {
        if (home[0] != '/')
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "PYBOX_HOME must be an absolute path");
        n = snprintf(out, len, "%s", home);
    } else if (geteuid() == 0) {
        n = snprintf(out, len, "/var/lib/pybox");
    } else {
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *h = getenv("HOME");
        if (xdg != NULL && xdg[0] == '/')
            n = snprintf(out, len, "%s/pybox", xdg);
        else if (h != NULL && h[0] == '/')
            n = snprintf(out, len, "%s/.local/state/pybox", h);
        else
            return pybox_error_set(err, PYBOX_ERR_STATE, 0, "no state directory: set PYBOX_HOME or HOME");
    }
    if (n < 0 || (size_t)n >= len)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "state directory path");
    return 0;
}

int pybox_state_locate(pybox_state_t *st, pybox_error_t *err)
{
    memset(st, 0, sizeof *st);
    return state_dir(st->dir, sizeof st->dir, err);
}

int pybox_state_path(const pybox_state_t *st, const char *name, char *out, size_t len, pybox_error_t *err)
{
    if (pybox_fmt(out, len, "%s/%s", st->dir, name) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "path in the state directory");
    return 0;
}

int pybox_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, pybox_error_t *err)
{
    char tmp[PATH_MAX];
    char rnd[17];
    if (pybox_random_hex(8, rnd, err) < 0)
        return -1;
    if (pybox_fmt(tmp, sizeof tmp, "%s.tmp-%s", path, rnd) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "%s", path);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", tmp);
    if (pybox_write_all(fd, data, len) < 0 || fsync(fd) < 0) {
        int e = errno;
        unlink(tmp);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "write(%s)", tmp);
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "rename(%s)", path);
    }
    return 0;
}

static int read_small(const char *path, char **out, size_t *len, pybox_error_t *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", path);
    }
    bool over = false;
    if (pybox_read_bounded(fd, 1024 * 1024, out, len, &over, err) < 0)
        return -1;
    if (over) {
        free(*out);
        *out = NULL;
        return pybox_error_set(err, PYBOX_ERR_STATE, EFBIG, "%s is larger than 1 MiB", path);
    }
    return 1;
}

/* The state file name (path: its path), whole, as read_small reads it. */
static int read_state(const pybox_state_t *st, const char *name, char path[PATH_MAX], char **text, size_t *len,
                      pybox_error_t *err)
{
    return pybox_state_path(st, name, path, PATH_MAX, err) < 0 ? -1 : read_small(path, text, len, err);
}

static int load_install_id(pybox_state_t *st, bool create, pybox_error_t *err)
{
    char path[PATH_MAX];
    for (int attempt = 0; attempt < 2; attempt++) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_state(st, "install-id", path, &text, &len, err);
        if (r < 0)
            return -1;
        if (r == 1) {
            while (len > 0 && text[len - 1] == '\n')
                text[--len] = '\0';
            if (len != 32 || strspn(text, "0123456789abcdef") != 32)
                return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is not a valid installation id", path);
            memcpy(st->install_id, text, 33);
            return 0;
        }
        if (!create)
            return pybox_error_set(err, PYBOX_ERR_STATE, 0,
                                   "PyBox is not set up in %s (no installation id): build its first image, which "
                                   "sets it up (pybox image build stdlib)",
                                   st->dir);
        /* Create it once: link() refuses to replace, so concurrent first runs agree. */
        char id[34];
        if (pybox_random_hex(16, id, err) < 0)
            return -1;
        id[32] = '\n';
        id[33] = '\0';
        char tmp[PATH_MAX];
        if (pybox_fmt(tmp, sizeof tmp, "%s.new-%.8s", path, id) < 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "%s", path);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", tmp);
        if (pybox_write_all(fd, id, 33) < 0 || fsync(fd) < 0) {
            int e = errno;
            unlink(tmp);
            return pybox_error_set(err, PYBOX_ERR_STATE, e, "write(%s)", tmp);
        }
        int lr = link(tmp, path);
        int le = errno;
        unlink(tmp);
        if (lr < 0 && le != EEXIST)
            return pybox_error_set(err, PYBOX_ERR_STATE, le, "link(%s)", path);
    }
    return pybox_error_set(err, PYBOX_ERR_STATE, 0, "cannot establish the installation id in %s", st->dir);
}

int pybox_state_open(pybox_state_t *st, bool create, pybox_error_t *err)
{
    memset(st, 0, sizeof *st);
    if (state_dir(st->dir, sizeof st->dir, err) < 0)
        return -1;
    if (create && mkdir_p(st->dir, 0700, err) < 0)
        return -1;
    struct stat sb;
    if (stat(st->dir, &sb) < 0) {
        if (errno == ENOENT)
            return pybox_error_set(err, PYBOX_ERR_STATE, 0,
                                   "PyBox is not set up: %s does not exist (build its first image, which sets it up: "
                                   "pybox image build stdlib)",
                                   st->dir);
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "stat(%s)", st->dir);
    }
    if (!S_ISDIR(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_STATE, ENOTDIR, "%s", st->dir);
    if (sb.st_uid != geteuid())
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s belongs to another user (uid %u)", st->dir,
                               (unsigned)sb.st_uid);
    if ((sb.st_mode & 077) != 0 && chmod(st->dir, 0700) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "chmod(%s, 0700)", st->dir);
    return load_install_id(st, create, err);
}

/* ---- pins (images.json) ---- */

static int lock_pins(const pybox_state_t *st, int how, pybox_error_t *err)
{
    char path[PATH_MAX];
    if (pybox_state_path(st, "images.lock", path, sizeof path, err) < 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    /* A reader of a state folder on a read-only mount, where no one can change the pins
     * and the lock file may not exist: the folder itself is locked in its stead. */
    if (fd < 0 && errno == EROFS && how == LOCK_SH)
        fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", path);
    while (flock(fd, how) < 0) {
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return pybox_error_set(err, PYBOX_ERR_STATE, e, "flock(%s)", path);
        }
    }
    return fd;
}

/* An image's defaults as the pins keep them. */
#define PIN_DEFAULTS(pin)                                                                                              \
    {                                                                                                                  \
        {"memory_bytes", &(pin)->memory_bytes}, {"pids", &(pin)->pids}, {"nano_cpus", &(pin)->nano_cpus},              \
            {"timeout_ms", &(pin)->timeout_ms},                                                                        \
    }
typedef struct {
    const char *key;
    int64_t *v;
} pin_default_t;

/* Each backend's pins in a file of its own, which the backend names (box.h). */
static int pins_name(const char *backend, char name[64], pybox_error_t *err)
{
    const pybox_backend_ops_t *ops =
        pybox_backend_find(backend == NULL || backend[0] == '\0' ? PYBOX_DEFAULT_BACKEND : backend);
    if (ops == NULL || ops->pins_file == NULL)
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "a backend's name");
    return pybox_strlcpy(name, ops->pins_file, 64) < 0 ? pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "a pins file")
                                                       : 0;
}

static int copy_small(const char *from, const char *to, pybox_error_t *err)
{
    char *text = NULL;
    size_t len = 0;
    if (read_small(from, &text, &len, err) < 0)
        return -1;
    int rc = pybox_write_file_atomic(to, text, len, 0600, err);
    free(text);
    return rc;
}

int pybox_state_borrow_images(const pybox_state_t *from, const pybox_state_t *to, pybox_error_t *err)
{
    int copied = 0;
    const pybox_backend_ops_t *ops;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL; i++) {
        char a[PATH_MAX], b[PATH_MAX];
        struct stat sb;
        if (pybox_state_path(from, ops->pins_file, a, sizeof a, err) < 0 ||
            pybox_state_path(to, ops->pins_file, b, sizeof b, err) < 0)
            return -1;
        if (stat(a, &sb) < 0)
            continue;
        if (copy_small(a, b, err) < 0)
            return -1;
        copied++;
    }
    if (copied == 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENOENT, "no image pins in %s (run make setup)", from->dir);
    /* the image cache, and each backend's image folders */
    const char *linked[8][2] = {{PYBOX_STATE_CACHE, PYBOX_STATE_CACHE}};
    size_t n_linked = 1;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL && n_linked < 8; i++)
        if (ops->lent_images != NULL) {
            linked[n_linked][0] = ops->lent_images;
            linked[n_linked++][1] = ops->borrowed_images;
        }
    for (size_t i = 0; i < n_linked; i++) {
        char a[PATH_MAX], b[PATH_MAX];
        struct stat sb;
        if (pybox_state_path(from, linked[i][0], a, sizeof a, err) < 0 ||
            pybox_state_path(to, linked[i][1], b, sizeof b, err) < 0)
            return -1;
        /* An installation that itself borrows lends what it borrowed. */
        char again[PATH_MAX], real[PATH_MAX];
        if (pybox_state_path(from, linked[i][1], again, sizeof again, err) < 0)
            return -1;
        if (strcmp(linked[i][0], linked[i][1]) != 0 && lstat(again, &sb) == 0 && S_ISLNK(sb.st_mode) &&
            realpath(again, real) != NULL)
            pybox_strlcpy(a, real, sizeof a);
        if (stat(a, &sb) < 0)
            continue; /* nothing of that kind there yet */
        char parent[PATH_MAX];
        pybox_strlcpy(parent, b, sizeof parent);
        char *slash = strrchr(parent, '/');
        if (slash != NULL && slash != parent) {
            *slash = '\0';
            if (mkdir(parent, 0700) < 0 && errno != EEXIST)
                return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", parent);
        }
        if (symlink(a, b) < 0 && errno != EEXIST)
            return pybox_error_set(err, PYBOX_ERR_STATE, errno, "symlink(%s)", b);
    }
    return 0;
}

static int parse_pins(const char *text, size_t len, const char *path, cJSON **out, pybox_error_t *err)
{
    *out = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is not a JSON object", path);
    }
    return 0;
}

static int load_pins(const pybox_state_t *st, const char *backend, cJSON **out, pybox_error_t *err)
{
    char path[PATH_MAX], name[64];
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = pins_name(backend, name, err) < 0 ? -1 : read_state(st, name, path, &text, &len, err);
    if (r < 0)
        return -1;
    if (r == 0) {
        *out = cJSON_CreateObject();
        return 0;
    }
    return parse_pins(text, len, path, out, err);
}

/* A number of a pin: taken when an int64_t holds it, else left 0 (unknown, or PyBox's own
 * default), never converted into whatever a machine makes of an out-of-range double. */
static void number(const cJSON *v, int64_t *out)
{
    int64_t x;
    if (pybox_double_to_i64(v->valuedouble, &x))
        *out = x;
}

static void pin_from_json(const char *backend, const char *name, const cJSON *o, pybox_pin_t *pin)
{
    memset(pin, 0, sizeof *pin);
    snprintf(pin->name, sizeof pin->name, "%s", name);
    snprintf(pin->backend, sizeof pin->backend, "%s", backend && backend[0] ? backend : PYBOX_DEFAULT_BACKEND);
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "id")))
        snprintf(pin->id, sizeof pin->id, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "recipe_sha256")))
        snprintf(pin->recipe_sha256, sizeof pin->recipe_sha256, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "built_at")))
        snprintf(pin->built_at, sizeof pin->built_at, "%s", v->valuestring);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "size")))
        number(v, &pin->size);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "guest_protocol")))
        pin->protocol = v->valueint;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "python3_package")))
        snprintf(pin->python, sizeof pin->python, "%s", v->valuestring);
    pin->custom = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "custom"));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "defaults");
    const pin_default_t dflt[] = PIN_DEFAULTS(pin);
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++)
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(d, dflt[i].key)))
            number(v, dflt[i].v);
}

/* The pins of a backend, locked (how: LOCK_SH to read, LOCK_EX to change them): the
 * lock's descriptor, which the caller closes, or -1. */
static int open_pins(const pybox_state_t *st, const char *backend, int how, cJSON **pins, pybox_error_t *err)
{
    int lfd = lock_pins(st, how, err);
    if (lfd >= 0 && load_pins(st, backend, pins, err) < 0) {
        close(lfd);
        return -1;
    }
    return lfd;
}

int pybox_pin_get(const pybox_state_t *st, const char *backend, const char *name, pybox_pin_t *out, pybox_error_t *err)
{
    cJSON *pins = NULL;
    _cleanup_close_ int lfd = open_pins(st, backend, LOCK_SH, &pins, err);
    if (lfd < 0)
        return -1;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(pins, name);
    int found = cJSON_IsObject(o);
    if (found)
        pin_from_json(backend, name, o, out);
    cJSON_Delete(pins);
    return found;
}

/* Every pin of the object pins, which stays the caller's. */
static int pins_of(const char *backend, const cJSON *pins, pybox_pin_t **out, size_t *n, pybox_error_t *err)
{
    size_t count = (size_t)cJSON_GetArraySize(pins);
    pybox_pin_t *v = calloc(count ? count : 1, sizeof *v);
    if (v == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    size_t i = 0;
    for (const cJSON *o = pins->child; o && i < count; o = o->next)
        if (cJSON_IsObject(o))
            pin_from_json(backend, o->string, o, &v[i++]);
    *out = v;
    *n = i;
    return 0;
}

int pybox_pins_parse(const char *backend, const char *text, size_t len, const char *path, pybox_pin_t **out, size_t *n,
                     pybox_error_t *err)
{
    cJSON *pins = NULL;
    if (parse_pins(text, len, path, &pins, err) < 0)
        return -1;
    int rc = pins_of(backend, pins, out, n, err);
    cJSON_Delete(pins);
    return rc;
}

int pybox_pin_list(const pybox_state_t *st, const char *backend, pybox_pin_t **out, size_t *n, pybox_error_t *err)
{
    cJSON *pins = NULL;
    _cleanup_close_ int lfd = open_pins(st, backend, LOCK_SH, &pins, err);
    if (lfd < 0)
        return -1;
    int rc = pins_of(backend, pins, out, n, err);
    cJSON_Delete(pins);
    return rc;
}

/* Write the pins (and free them) atomically; the caller holds the pins lock. */
static int save_pins(const pybox_state_t *st, const char *backend, cJSON *pins, pybox_error_t *err)
{
    char *text = cJSON_Print(pins);
    cJSON_Delete(pins);
    if (text == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "encoding the image pins");
    char path[PATH_MAX], name[64];
    int rc = pins_name(backend, name, err) < 0 ? -1 : pybox_state_path(st, name, path, sizeof path, err);
    if (rc == 0)
        rc = pybox_write_file_atomic(path, text, strlen(text), 0600, err);
    free(text);
    return rc;
}

int pybox_pin_set(const pybox_state_t *st, const pybox_pin_t *pin, pybox_error_t *err)
{
    cJSON *pins = NULL;
    _cleanup_close_ int lfd = open_pins(st, pin->backend, LOCK_EX, &pins, err);
    if (lfd < 0)
        return -1;
    cJSON *o = cJSON_CreateObject();
    const char *const texts[][2] = {{"id", pin->id},
                                    {"recipe_sha256", pin->recipe_sha256},
                                    {"built_at", pin->built_at},
                                    {"python3_package", pin->python}};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        cJSON_AddStringToObject(o, texts[i][0], texts[i][1]);
    cJSON_AddNumberToObject(o, "size", (double)pin->size);
    cJSON_AddNumberToObject(o, "guest_protocol", pin->protocol);
    cJSON_AddBoolToObject(o, "custom", pin->custom);
    cJSON *d = cJSON_AddObjectToObject(o, "defaults");
    pybox_pin_t copy = *pin;
    const pin_default_t dflt[] = PIN_DEFAULTS(&copy);
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++)
        cJSON_AddNumberToObject(d, dflt[i].key, (double)*dflt[i].v);
    cJSON_DeleteItemFromObjectCaseSensitive(pins, pin->name);
    cJSON_AddItemToObject(pins, pin->name, o);
    return save_pins(st, pin->backend, pins, err);
}

static void config_defaults(pybox_config_t *c)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int id = 0; id < PYBOX_LIMIT_COUNT; id++)
        c->limit[id] = pybox_limit(id)->ceiling;
    c->limit[PYBOX_LIMIT_CPUS] = (cpus > 0 ? cpus : 1) * 1000000000LL; /* the table's 0: every CPU */
    c->backend[0] = '\0';
    snprintf(c->source, sizeof c->source, "the installation's defaults");
}

int pybox_config_parse(const char *text, size_t len, const char *path, pybox_config_t *c, pybox_error_t *err)
{
    config_defaults(c);
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is not a JSON object", path);
    }
    int rc = 0;
    for (int id = 0; rc == 0 && id < PYBOX_LIMIT_COUNT; id++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, pybox_limit(id)->config_key);
        if (j != NULL)
            rc = pybox_limit_from_config(id, cJSON_IsNumber(j) ? j->valuedouble : 0, &c->limit[id], path, err);
    }
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(cfg, "backend");
    if (rc == 0 && be != NULL) {
        if (!cJSON_IsString(be) || !pybox_name_valid(be->valuestring))
            rc = pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s: \"backend\" must be a backend's name", path);
        else
            snprintf(c->backend, sizeof c->backend, "%s", be->valuestring);
    }
    cJSON_Delete(cfg);
    if (rc == 0)
        snprintf(c->source, sizeof c->source, "config.json of the installation");
    return rc;
}

int pybox_state_config(const pybox_state_t *st, pybox_config_t *c, pybox_error_t *err)
{
    config_defaults(c);
    char path[PATH_MAX];
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_state(st, "config.json", path, &text, &len, err);
    if (r <= 0)
        return r;
    return pybox_config_parse(text, len, path, c, err);
}

int pybox_pin_remove(const pybox_state_t *st, const char *backend, const char *name, pybox_error_t *err)
{
    cJSON *pins = NULL;
    _cleanup_close_ int lfd = open_pins(st, backend, LOCK_EX, &pins, err);
    if (lfd < 0)
        return -1;
    int had = cJSON_GetObjectItemCaseSensitive(pins, name) != NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(pins, name);
    int rc = save_pins(st, backend, pins, err);
    return rc < 0 ? -1 : had;
}
