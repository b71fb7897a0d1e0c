/* SPDX-License-Identifier: MIT */
/* Image build, import and pinning (see image.h). */
#include "image.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../guest/proto.h"
#include "buf.h"
#include "util.h"
#include "version.h"

int pybox_image_paths_default(pybox_image_paths_t *paths, pybox_error_t *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "readlink(/proc/self/exe)");
    exe[n] = '\0';
    char *dir = dirname(exe);
    const char *r = getenv("PYBOX_IMAGES");
    const char *i = getenv("PYBOX_INIT");
    int a = r && *r ? snprintf(paths->recipes, sizeof paths->recipes, "%s", r)
                    : snprintf(paths->recipes, sizeof paths->recipes, "%s/../images", dir);
    int b = i && *i ? snprintf(paths->init, sizeof paths->init, "%s", i)
                    : snprintf(paths->init, sizeof paths->init, "%s/pybox-init", dir);
    if (a < 0 || b < 0 || (size_t)a >= sizeof paths->recipes || (size_t)b >= sizeof paths->init)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "image paths");
    return 0;
}

int pybox_image_resolve(const pybox_state_t *st, pybox_engine_t *e, const char *name, pybox_pin_t *pin,
                        pybox_error_t *err)
{
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    int r = pybox_pin_get(st, name, pin, err);
    if (r < 0)
        return -1;
    if (r == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown image '%s': build it with `pybox image build %s`",
                               name, name);
    if (pin->protocol != PYBOX_GUEST_PROTOCOL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s' holds a guest init of protocol %d; this PyBox speaks %d: rebuild it with "
                               "`pybox image build %s`",
                               name, pin->protocol, PYBOX_GUEST_PROTOCOL, name);
    char path[200];
    snprintf(path, sizeof path, "/images/%s/json", pin->id);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call(e, "GET", path, NULL, &status, &reply, err) < 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    int ok = status == 200 && cJSON_IsString(id) && strcmp(id->valuestring, pin->id) == 0;
    cJSON_Delete(reply);
    if (!ok)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s' is pinned to %s, which the engine no longer has (HTTP %ld): "
                               "rebuild it with `pybox image build %s`",
                               name, pin->id, status, name);
    return 0;
}

/* ---- fingerprints ---- */

static int hash_file(EVP_MD_CTX *md, const char *path, pybox_error_t *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", path);
    char buf[65536];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "read(%s)", path);
        if (r == 0)
            return 0;
        EVP_DigestUpdate(md, buf, (size_t)r);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* SHA-256 over the recipe folder's regular files (sorted by name, each as name NUL
 * content) and the shared build script, optionally the init binary too. */
static int fingerprint(const pybox_image_paths_t *paths, const char *name, bool with_init, char out[65],
                       pybox_error_t *err)
{
    char dir[PATH_MAX], script[PATH_MAX];
    if (pybox_fmt(dir, sizeof dir, "%s/%s", paths->recipes, name) < 0 ||
        pybox_fmt(script, sizeof script, "%s/build-rootfs.sh", paths->recipes) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
    DIR *d = opendir(dir);
    if (d == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "no recipe for image '%s' (%s)", name, dir);
    char *names[64];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 64) {
        if (de->d_name[0] == '.')
            continue;
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX];
        EVP_DigestUpdate(md, names[i], strlen(names[i]) + 1);
        if (rc == 0 && pybox_fmt(p, sizeof p, "%s/%s", dir, names[i]) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
        if (rc == 0)
            rc = hash_file(md, p, err);
        free(names[i]);
    }
    if (rc == 0)
        rc = hash_file(md, script, err);
    if (rc == 0 && with_init)
        rc = hash_file(md, paths->init, err);
    unsigned char dig[32];
    unsigned int dl = 0;
    EVP_DigestFinal_ex(md, dig, &dl);
    EVP_MD_CTX_free(md);
    if (rc == 0)
        pybox_hex(dig, 32, out);
    return rc;
}

/* ---- building ---- */

static void progress_line(FILE *f, double t0, const char *what, const char *arg)
{
    if (f == NULL)
        return;
    fprintf(f, "[%6.1fs] %s %s\n", pybox_now_s() - t0, what, arg);
    fflush(f);
}

static int run_script(const char *script, const char *recipe, const char *out, pybox_error_t *err)
{
    pid_t pid = fork();
    if (pid < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fork");
    if (pid == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO); /* the script's chatter is progress, not output */
        close_range(3, ~0U, 0);             /* nothing of PyBox's (engine socket, state) leaks */
        execl("/bin/sh", "sh", script, recipe, out, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "%s %s failed (%s %d)", script, recipe,
                               WIFEXITED(status) ? "exit" : "signal",
                               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}

static int add_file(struct archive *w, const char *name, const void *data, size_t len, mode_t mode)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode);
    archive_entry_set_size(e, (la_int64_t)len);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_mtime(e, 0, 0);
    int rc = archive_write_header(w, e);
    if (rc == ARCHIVE_OK && len > 0 && archive_write_data(w, data, len) != (la_ssize_t)len)
        rc = ARCHIVE_FATAL;
    archive_entry_free(e);
    return rc == ARCHIVE_OK ? 0 : -1;
}

/* The base rootfs tar, plus /pybox/init and /pybox/manifest.json, into out_fd. */
static int compose(const char *base, int out_fd, const char *init_path, const char *manifest, pybox_error_t *err)
{
    _cleanup_free_ char *init = NULL;
    size_t init_len = 0;
    {
        _cleanup_close_ int fd = open(init_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s): build the guest init first (make)",
                                   init_path);
        bool over;
        if (pybox_read_bounded(fd, 16 * 1024 * 1024, &init, &init_len, &over, err) < 0)
            return -1;
    }
    struct archive *r = archive_read_new();
    struct archive *w = archive_write_new();
    archive_read_support_format_tar(r);
    archive_write_set_format_pax_restricted(w);
    int rc = -1;
    if (archive_read_open_filename(r, base, 1 << 16) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
        goto done;
    }
    if (archive_write_open_fd(w, out_fd) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    struct archive_entry *e;
    int hr;
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
        const char *pn = archive_entry_pathname(e);
        if (pn != NULL && (strncmp(pn, "./pybox/", 8) == 0 || strcmp(pn, "./pybox") == 0))
            continue; /* PyBox's own folder comes from PyBox only */
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
            goto done;
        }
        const void *buf;
        size_t size;
        la_int64_t off;
        int dr;
        while ((dr = archive_read_data_block(r, &buf, &size, &off)) == ARCHIVE_OK) {
            if (archive_write_data(w, buf, size) < 0) {
                pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
                goto done;
            }
        }
        if (dr != ARCHIVE_EOF) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
            goto done;
        }
    }
    if (hr != ARCHIVE_EOF) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
        goto done;
    }
    struct archive_entry *d = archive_entry_new();
    archive_entry_set_pathname(d, "./pybox/");
    archive_entry_set_filetype(d, AE_IFDIR);
    archive_entry_set_perm(d, 0755);
    archive_entry_set_uid(d, 0);
    archive_entry_set_gid(d, 0);
    int dh = archive_write_header(w, d);
    archive_entry_free(d);
    if (dh != ARCHIVE_OK || add_file(w, "." PYBOX_GUEST_INIT_PATH, init, init_len, 0555) < 0 ||
        add_file(w, "./pybox/manifest.json", manifest, strlen(manifest), 0444) < 0) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    if (archive_write_close(w) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    rc = 0;
done:
    archive_read_free(r);
    archive_write_free(w);
    return rc;
}

/* The manifest: recipe, package versions, Python version. */
static char *manifest_json(const char *name, const char *recipe_sha, const char *packages_path)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "recipe_sha256", recipe_sha);
    cJSON_AddStringToObject(m, "pybox_version", PYBOX_VERSION);
    cJSON_AddNumberToObject(m, "guest_protocol", PYBOX_GUEST_PROTOCOL);
    cJSON *pk = cJSON_AddObjectToObject(m, "packages");
    FILE *f = fopen(packages_path, "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *sp = strchr(line, ' ');
        char *nl = strchr(line, '\n');
        if (!sp || !nl)
            continue;
        *sp = '\0';
        *nl = '\0';
        cJSON_AddStringToObject(pk, line, sp + 1);
        if (strcmp(line, "python3") == 0)
            cJSON_AddStringToObject(m, "python3_package", sp + 1);
    }
    if (f)
        fclose(f);
    char *t = cJSON_Print(m);
    cJSON_Delete(m);
    return t;
}

/* The image ID from the import reply (JSON lines; the last "status" names it). */
static int import_id(const pybox_buf_t *reply, char *id, size_t idlen, pybox_error_t *err)
{
    id[0] = '\0';
    const char *p = reply->data ? reply->data : "";
    const char *end = p + reply->len;
    while (p < end) {
        cJSON *j = cJSON_ParseWithOpts(p, &p, 0);
        if (j == NULL)
            break;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
        if (cJSON_IsString(e)) {
            pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "image import: the engine said: %s", e->valuestring);
            cJSON_Delete(j);
            return -1;
        }
        if (cJSON_IsString(s) && strncmp(s->valuestring, "sha256:", 7) == 0)
            snprintf(id, idlen, "%s", s->valuestring);
        cJSON_Delete(j);
        while (p < end && (*p == '\n' || *p == '\r' || *p == ' '))
            p++;
    }
    if (id[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "image import: no image ID in the engine's reply");
    return 0;
}

int pybox_image_build(const pybox_state_t *st, pybox_engine_t *e, const pybox_image_paths_t *paths, const char *name,
                      bool force, FILE *progress, bool *built, pybox_error_t *err)
{
    double t0 = pybox_now_s();
    *built = false;
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    char base_fp[65], full_fp[65];
    if (fingerprint(paths, name, false, base_fp, err) < 0 || fingerprint(paths, name, true, full_fp, err) < 0)
        return -1;
    pybox_pin_t pin;
    int have = pybox_pin_get(st, name, &pin, err);
    if (have < 0)
        return -1;
    if (have == 1 && !force && strcmp(pin.recipe_sha256, full_fp) == 0) {
        pybox_error_t probe = {0};
        pybox_pin_t tmp;
        if (pybox_image_resolve(st, e, name, &tmp, &probe) == 0) {
            progress_line(progress, t0, "up to date:", name);
            return 0;
        }
    }
    char cache[PATH_MAX], base[PATH_MAX], pkgs[PATH_MAX], tmp[PATH_MAX];
    if (pybox_state_path(st, "cache", cache, sizeof cache, err) < 0)
        return -1;
    if (mkdir(cache, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", cache);
    if (pybox_fmt(base, sizeof base, "%s/%s-%.16s.tar", cache, name, base_fp) < 0 ||
        pybox_fmt(pkgs, sizeof pkgs, "%s.packages", base) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "cache path");
    if (access(base, R_OK) != 0 || access(pkgs, R_OK) != 0) {
        char rnd[9];
        if (pybox_random_hex(4, rnd, err) < 0)
            return -1;
        char script[PATH_MAX], recipe[PATH_MAX], tmp_pkgs[PATH_MAX];
        if (pybox_fmt(tmp, sizeof tmp, "%s.tmp-%s", base, rnd) < 0 ||
            pybox_fmt(script, sizeof script, "%s/build-rootfs.sh", paths->recipes) < 0 ||
            pybox_fmt(recipe, sizeof recipe, "%s/%s", paths->recipes, name) < 0 ||
            pybox_fmt(tmp_pkgs, sizeof tmp_pkgs, "%s.packages", tmp) < 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "build paths");
        progress_line(progress, t0, "building the root filesystem from Debian packages:", name);
        if (run_script(script, recipe, tmp, err) < 0) {
            unlink(tmp);
            unlink(tmp_pkgs);
            return -1;
        }
        if (rename(tmp_pkgs, pkgs) < 0 || rename(tmp, base) < 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, errno, "rename(%s)", base);
    } else {
        progress_line(progress, t0, "root filesystem cached:", name);
    }
    _cleanup_free_ char *manifest = manifest_json(name, full_fp, pkgs);
    if (manifest == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "manifest");
    /* The image tar only lives as an unlinked temporary file. */
    _cleanup_close_ int fd = open(cache, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s, O_TMPFILE)", cache);
    progress_line(progress, t0, "adding the guest init and manifest:", name);
    if (compose(base, fd, paths->init, manifest, err) < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat/lseek of the image tar");
    progress_line(progress, t0, "importing into the engine:", name);
    char path[256];
    snprintf(path, sizeof path, "/images/create?fromSrc=-&repo=pybox-%s&tag=%.12s", name, full_fp);
    pybox_buf_t reply;
    pybox_buf_init(&reply, PYBOX_ENGINE_REPLY_MAX);
    long status = 0;
    int rc = pybox_engine_upload(e, path, fd, "application/x-tar", &status, &reply, err);
    if (rc == 0 && status != 200) {
        cJSON *j = cJSON_ParseWithLength(reply.data ? reply.data : "", reply.len);
        pybox_engine_fail(err, "image import", status, j);
        cJSON_Delete(j);
        rc = -1;
    }
    char id[PYBOX_ID_MAX];
    if (rc == 0)
        rc = import_id(&reply, id, sizeof id, err);
    pybox_buf_free(&reply);
    if (rc < 0)
        return -1;
    pybox_pin_t np = {0};
    snprintf(np.name, sizeof np.name, "%s", name);
    snprintf(np.id, sizeof np.id, "%s", id);
    snprintf(np.recipe_sha256, sizeof np.recipe_sha256, "%s", full_fp);
    pybox_wall_iso(np.built_at, sizeof np.built_at);
    np.protocol = PYBOX_GUEST_PROTOCOL;
    np.size = (int64_t)sb.st_size;
    if (pybox_pin_set(st, &np, err) < 0)
        return -1;
    *built = true;
    progress_line(progress, t0, "pinned:", id);
    if (have == 1 && strcmp(pin.id, id) != 0) {
        /* The image this name was pinned to before is PyBox's own and no longer used by
         * new runs; the engine refuses (409) while a box still uses it, which is fine. */
        snprintf(path, sizeof path, "/images/%s", pin.id);
        cJSON *gone = NULL;
        pybox_error_t ignored = {0};
        if (pybox_engine_call(e, "DELETE", path, NULL, &status, &gone, &ignored) == 0 && status == 200)
            progress_line(progress, t0, "removed the image pinned before:", pin.id);
        cJSON_Delete(gone);
    }
    return 0;
}
