/* SPDX-License-Identifier: MIT */
/* Custom images from a uv lock file and a folder of wheels (see wheels.h). */
#include "wheels.h"
#include "../archive_api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../buf.h"
#include "../escape.h"
#include "../util.h"
#include "toml.h"

#define LOCK_MAX (4 * 1024 * 1024)
#define WHEEL_MAX (256LL * 1024 * 1024)
#define WHEEL_UNPACKED_MAX (512LL * 1024 * 1024)

void pybox_lock_free(pybox_lock_t *lock)
{
    free(lock->wheels);
    memset(lock, 0, sizeof *lock);
}

/* Hash a wheel file; with keep, hand back its descriptor (rewound) so that what is read
 * later is the very file that was hashed. */
static int sha256_file_fd(const char *path, char out[65], int64_t *size, int *keep, pybox_error_t *err)
{
    /* O_NONBLOCK: a FIFO is refused below, not waited on. */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", path);
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s is not a regular file", path);
    if (sb.st_size > WHEEL_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s is larger than %lld bytes", path, WHEEL_MAX);
    EVP_MD_CTX *md = pybox_digest_start();
    if (md == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a digest");
    char buf[65536];
    int64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            EVP_MD_CTX_free(md);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "read(%s)", path);
        }
        if (r == 0)
            break;
        EVP_DigestUpdate(md, buf, (size_t)r);
        total += r;
    }
    if (!pybox_digest_done(md, out))
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the digest of %s could not be finished", path);
    *size = total;
    if (keep != NULL) {
        if (lseek(fd, 0, SEEK_SET) < 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "lseek(%s)", path);
        *keep = pybox_steal_fd(&fd);
    }
    return 0;
}

static int sha256_file(const char *path, char out[65], int64_t *size, pybox_error_t *err)
{
    return sha256_file_fd(path, out, size, NULL, err);
}

/* The last part of a URL or path: the wheel's file name. */
static const char *base_of(const char *s)
{
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

static bool wheel_name_ok(const char *f)
{
    size_t n = strlen(f);
    return n > 4 && n < 256 && strcmp(f + n - 4, ".whl") == 0 && strchr(f, '/') == NULL && f[0] != '.' &&
           pybox_utf8_valid(f, n);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int pybox_lock_check(const char *lock_path, const char *wheels_dir, pybox_lock_t *lock, pybox_error_t *err)
{
    memset(lock, 0, sizeof *lock);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_file(lock_path, 0, LOCK_MAX, &text, &len, &over, err) < 0)
        return err->kind != PYBOX_ERR_NONE ? -1 : pybox_error_set(err, PYBOX_ERR_USAGE, errno, "--lock %s", lock_path);
    if (over)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--lock %s: larger than %d bytes", lock_path, LOCK_MAX);
    return pybox_lock_check_text(text, len, lock_path, wheels_dir, lock, err);
}

int pybox_lock_check_text(const char *text, size_t len, const char *lock_path, const char *wheels_dir,
                          pybox_lock_t *lock, pybox_error_t *err)
{
    memset(lock, 0, sizeof *lock);
    cJSON *doc = pybox_toml_parse(text, len, err);
    if (doc == NULL)
        return -1;
    const cJSON *pkgs = cJSON_GetObjectItemCaseSensitive(doc, "package");
    int rc = 0;
    size_t cap = (size_t)cJSON_GetArraySize(pkgs) + 1;
    lock->wheels = calloc(cap, sizeof *lock->wheels);
    if (lock->wheels == NULL)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "lock");
    if (rc == 0 && !cJSON_IsArray(pkgs))
        rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: no [[package]] tables (is it a uv lock file?)", lock_path);
    const cJSON *pkg;
    cJSON_ArrayForEach (pkg, pkgs) {
        if (rc < 0)
            break;
        const char *name = str_of(pkg, "name"), *version = str_of(pkg, "version");
        const cJSON *source = cJSON_GetObjectItemCaseSensitive(pkg, "source");
        if (name == NULL || version == NULL) {
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: a package without a name or version", lock_path);
            break;
        }
        /* The project itself (not a dependency) has nothing to install. */
        if (cJSON_GetObjectItemCaseSensitive(source, "virtual") || cJSON_GetObjectItemCaseSensitive(source, "editable"))
            continue;
        const cJSON *wheels = cJSON_GetObjectItemCaseSensitive(pkg, "wheels");
        if (cJSON_GetArraySize(wheels) == 0) {
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                 "%s: %s %s has no wheel in the lock (building it from source would run its code)",
                                 lock_path, name, version);
            break;
        }
        /* The first wheel of the lock that is in the folder. */
        const cJSON *w;
        bool found = false;
        cJSON_ArrayForEach (w, wheels) {
            const char *url = str_of(w, "url"), *file = str_of(w, "filename"), *path = str_of(w, "path");
            const char *hash = str_of(w, "hash");
            const char *fname = file ? file : (url ? base_of(url) : (path ? base_of(path) : NULL));
            if (fname == NULL || hash == NULL || !wheel_name_ok(fname))
                continue;
            char p[PATH_MAX];
            struct stat wsb;
            if (pybox_fmt(p, sizeof p, "%s/%s", wheels_dir, fname) < 0 || stat(p, &wsb) != 0)
                continue;
            found = true;
            if (strncmp(hash, "sha256:", 7) != 0 || strlen(hash) != 71) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: the hash of %s is not a SHA-256", lock_path, fname);
                break;
            }
            pybox_wheel_t *x = &lock->wheels[lock->n];
            memset(x, 0, sizeof *x);
            if (pybox_strlcpy(x->name, name, sizeof x->name) < 0 ||
                pybox_strlcpy(x->version, version, sizeof x->version) < 0 ||
                pybox_strlcpy(x->file, fname, sizeof x->file) < 0) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: a name too long", lock_path);
                break;
            }
            if (sha256_file(p, x->sha256, &x->bytes, err) < 0) {
                rc = -1;
                break;
            }
            if (strcmp(x->sha256, hash + 7) != 0) {
                char shown[300];
                pybox_escape_short(shown, sizeof shown, fname, 200);
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                     "wheel %s: its SHA-256 %.16s... is not the lock's %.16s...: refused", shown,
                                     x->sha256, hash + 7);
                break;
            }
            lock->n++;
            break;
        }
        if (rc == 0 && !found) {
            char shown[300];
            pybox_escape_short(shown, sizeof shown, wheels_dir, 200);
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "no wheel of %s %s from the lock is in %s", name, version,
                                 shown);
        }
    }
    cJSON_Delete(doc);
    if (rc < 0)
        pybox_lock_free(lock);
    return rc;
}

/* A wheel entry's name: relative, no empty, "." or ".." part, printable UTF-8. */
static bool entry_ok(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 1024 || n[0] == '/' || !pybox_utf8_valid(n, len))
        return false;
    for (const char *p = n; *p;) {
        const char *s = strchr(p, '/');
        size_t part = s ? (size_t)(s - p) : strlen(p);
        if ((s && part == 0) || (part == 1 && p[0] == '.') || (part == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (part >= 4 && memcmp(p, ".wh.", 4) == 0)
            return false; /* the engine takes such names as deletions in an image layer */
        p += part + (s ? 1 : 0);
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)n[i] < 0x20 || n[i] == 0x7f || n[i] == '\\')
            return false;
    return true;
}

typedef struct {
    char **paths;
    size_t n, cap;
} pathset_t;

static bool pathset_has(const pathset_t *s, const char *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->paths[i], p) == 0)
            return true;
    return false;
}

static int pathset_add(pathset_t *s, const char *p)
{
    if (pybox_grow(&s->paths, &s->cap, s->n, sizeof *s->paths, 64) < 0)
        return -1;
    s->paths[s->n] = strdup(p);
    return s->paths[s->n] ? (int)(s->n++, 0) : -1;
}

static void pathset_free(pathset_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
}

int pybox_image_tar_entry(struct archive *w, const char *path, mode_t type, mode_t perm, int64_t size, const void *data)
{
    struct archive_entry *e = archive_entry_new();
    if (e == NULL)
        return -1;
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, size);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_mtime(e, 0, 0);
    int rc = archive_write_header(w, e);
    if (rc == ARCHIVE_OK && data != NULL && size > 0 && archive_write_data(w, data, (size_t)size) != (la_ssize_t)size)
        rc = ARCHIVE_FATAL;
    archive_entry_free(e);
    return rc == ARCHIVE_OK ? 0 : -1;
}

/* Folder entries for every parent of path that neither the image nor this run has; 1 if
 * a file of this run is where a folder would be. */
static int parents(struct archive *w, pathset_t *dirs, const pathset_t *files, const char *path,
                   pybox_path_exists_fn exists, void *arg)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = strchr(buf + 2, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (!pathset_has(dirs, buf) && !(exists && exists(buf, arg))) {
            if (pathset_has(files, buf))
                return 1;
            char d[2050];
            snprintf(d, sizeof d, "%s/", buf);
            if (pybox_image_tar_entry(w, d, AE_IFDIR, 0755, 0, NULL) < 0 || pathset_add(dirs, buf) < 0)
                return -1;
        }
        *s = '/';
    }
    return 0;
}

int pybox_wheels_unpack(struct archive *w, const pybox_lock_t *lock, const char *wheels_dir, const char *site,
                        const char *bin, pybox_path_exists_fn exists, void *arg, const pybox_out_t *progress,
                        pybox_error_t *err)
{
    pathset_t dirs = {0}, files = {0};
    int rc = 0;
    char *buf = malloc(65536);
    if (buf == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "wheels");
    for (size_t i = 0; rc == 0 && i < lock->n; i++) {
        const pybox_wheel_t *x = &lock->wheels[i];
        char p[PATH_MAX];
        if (pybox_fmt(p, sizeof p, "%s/%s", wheels_dir, x->file) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "wheel path");
            break;
        }
        /* The file is hashed again here: what is unpacked is what was checked. */
        char digest[65];
        int64_t size;
        int wfd = -1;
        if (sha256_file_fd(p, digest, &size, &wfd, err) < 0) {
            rc = -1;
            break;
        }
        if (strcmp(digest, x->sha256) != 0) {
            close(wfd);
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s changed after it was checked", x->file);
            break;
        }
        /* Read from the descriptor that was hashed, not from the name again. */
        struct archive *r = archive_read_new();
        if (r == NULL) {
            close(wfd);
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "wheel %s: %s", x->file, pybox_archive_why());
            break;
        }
        archive_read_support_format_zip(r);
        if (archive_read_open_fd(r, wfd, 65536) != ARCHIVE_OK) {
            const char *why = archive_error_string(r);
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s: %s", x->file, why ? why : "unreadable");
            archive_read_free(r);
            close(wfd);
            break;
        }
        struct archive_entry *e;
        int hr;
        int64_t unpacked = 0;
        while (rc == 0 && ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK || hr == ARCHIVE_WARN)) {
            const char *n = archive_entry_pathname(e);
            mode_t type = archive_entry_filetype(e);
            if (n == NULL || !entry_ok(n)) {
                rc =
                    pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s holds a name that cannot be installed", x->file);
                break;
            }
            if (type == AE_IFDIR)
                continue; /* folders are made for the files in them */
            if (type != AE_IFREG) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s holds a link or special file", x->file);
                break;
            }
            /* Lay it out as an installer would, without running anything of it. */
            const char *dotdata = strstr(n, ".data/");
            const char *slash = strchr(n, '/');
            char dest[2048];
            mode_t perm = 0644;
            if (dotdata != NULL && slash != NULL && dotdata + 5 == slash) {
                const char *rest = slash + 1;
                if (strncmp(rest, "purelib/", 8) == 0 || strncmp(rest, "platlib/", 8) == 0) {
                    snprintf(dest, sizeof dest, "%s/%s", site, rest + 8);
                } else if (strncmp(rest, "scripts/", 8) == 0 && strchr(rest + 8, '/') == NULL) {
                    snprintf(dest, sizeof dest, "%s/%s", bin, rest + 8);
                    perm = 0755;
                } else {
                    if (progress) {
                        char shown_n[300], shown_f[300];
                        pybox_escape_short(shown_n, sizeof shown_n, n, 200);
                        pybox_escape_short(shown_f, sizeof shown_f, x->file, 200);
                        pybox_out_line(progress,
                                       "           skipped %s from %s (headers and data files are not installed)",
                                       shown_n, shown_f);
                    }
                    continue;
                }
            } else {
                snprintf(dest, sizeof dest, "%s/%s", site, n);
            }
            if (pathset_has(&files, dest) || pathset_has(&dirs, dest) || (exists && exists(dest, arg))) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s installs a file the image or another wheel has",
                                     x->file);
                break;
            }
            int64_t esize = archive_entry_size(e);
            if (esize < 0 || (unpacked += esize) > WHEEL_UNPACKED_MAX) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s unpacks to more than %lld bytes", x->file,
                                     WHEEL_UNPACKED_MAX);
                break;
            }
            int pr = parents(w, &dirs, &files, dest, exists, arg);
            if (pr > 0) {
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s installs a file the image or another wheel has",
                                     x->file);
                break;
            }
            if (pr < 0 || pathset_add(&files, dest) < 0 ||
                pybox_image_tar_entry(w, dest, AE_IFREG, perm, esize, NULL) < 0) {
                rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image: %s",
                                     archive_error_string(w) ? archive_error_string(w) : "out of memory");
                break;
            }
            int64_t done = 0;
            for (;;) {
                la_ssize_t got = archive_read_data(r, buf, 65536);
                if (got < 0) {
                    rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s: %s", x->file, archive_error_string(r));
                    break;
                }
                if (got == 0)
                    break;
                if (done + got > esize || archive_write_data(w, buf, (size_t)got) != got) {
                    rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s: an entry is larger than it says", x->file);
                    break;
                }
                done += got;
            }
            if (rc == 0 && done != esize)
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s: an entry is shorter than it says", x->file);
        }
        if (rc == 0 && hr != ARCHIVE_EOF)
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "wheel %s: %s", x->file,
                                 archive_error_string(r) ? archive_error_string(r) : "unreadable");
        archive_read_free(r);
        close(wfd);
        if (rc == 0 && progress) {
            char shown_n[300], shown_v[300], shown_f[300];
            pybox_escape_short(shown_n, sizeof shown_n, x->name, 200);
            pybox_escape_short(shown_v, sizeof shown_v, x->version, 200);
            pybox_escape_short(shown_f, sizeof shown_f, x->file, 200);
            pybox_out_line(progress, "           installed %s %s (%s, sha256 %.16s...)", shown_n, shown_v, shown_f,
                           x->sha256);
        }
    }
    free(buf);
    pathset_free(&dirs);
    pathset_free(&files);
    return rc;
}
