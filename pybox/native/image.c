/* SPDX-License-Identifier: MIT */
/* The native backend's images: the recipe's root filesystem tar unpacked into a folder
 * of the installation (root's, read-only to boxes: they get it bound read-only), named
 * and pinned by the SHA-256 of its whole tree; `pybox image verify` hashes it again
 * (native.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../archive_api.h"
#include "../cgroup.h"
#include "../util.h"
#include "internal.h"
#include "native.h"

#define TREE_DEPTH_MAX 64

static int mkdir_owned(const char *path, pybox_error_t *err)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", path);
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "lstat(%s)", path);
    if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 0077) != 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, EPERM, "%s is not a private folder of uid %u", path,
                               (unsigned)geteuid());
    return 0;
}

int pybox_native_dirs(native_backend_t *be, pybox_error_t *err)
{
    char top[PATH_MAX];
    if (pybox_state_path(&be->st, PYBOX_NATIVE_DIR, top, sizeof top, err) < 0 ||
        pybox_state_path(&be->st, PYBOX_NATIVE_STAGING, be->staging, sizeof be->staging, err) < 0 ||
        pybox_state_path(&be->st, PYBOX_NATIVE_ROOTS, be->roots, sizeof be->roots, err) < 0 ||
        pybox_state_path(&be->st, PYBOX_NATIVE_FILTERS, be->filters, sizeof be->filters, err) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the native backend's folders");
    if (mkdir_owned(top, err) < 0 || mkdir_owned(be->staging, err) < 0)
        return -1;
    /* Only ever a saving: without it (a read-only state folder made before it), the profile
     * is compiled by each process. */
    pybox_error_t ferr = {0};
    if (mkdir_owned(be->filters, &ferr) < 0)
        be->filters[0] = '\0';
    if (mkdir_owned(be->roots, err) < 0)
        return -1;
    /* Named as the kernel will show it (mountinfo): no link on the way. */
    char real[PATH_MAX];
    if (realpath(be->roots, real) == NULL)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "realpath(%s)", be->roots);
    pybox_strlcpy(be->roots, real, sizeof be->roots);
    if (realpath(be->staging, real) == NULL)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "realpath(%s)", be->staging);
    pybox_strlcpy(be->staging, real, sizeof be->staging);
    /* An installation borrowing another's images links their folder (state.h); what the
     * link leads to must be as private as a folder of our own. */
    char link[PATH_MAX];
    struct stat lsb, sb;
    be->borrowed[0] = '\0';
    if (pybox_state_path(&be->st, PYBOX_NATIVE_BORROWED, link, sizeof link, err) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the native backend's folders");
    if (lstat(link, &lsb) == 0) {
        if (!S_ISLNK(lsb.st_mode) || stat(link, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
            (sb.st_mode & 0077) != 0)
            return pybox_error_set(err, PYBOX_ERR_STATE, EPERM, "%s is not a link to a private folder of uid %u", link,
                                   (unsigned)geteuid());
        pybox_strlcpy(be->borrowed, link, sizeof be->borrowed);
    }
    return 0;
}

static bool hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

int pybox_native_image_root(native_backend_t *be, const char *id, char *out, size_t len, pybox_error_t *err)
{
    if (strncmp(id, "sha256:", 7) != 0 || !hex64(id + 7))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "not a native image id");
    if (pybox_fmt(out, len, "%s/%s", be->roots, id + 7) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "an image's folder");
    /* Our own, else the one borrowed (when there is one of that digest). */
    struct stat sb;
    char other[PATH_MAX];
    char real[PATH_MAX];
    /* by the path the kernel will show for it (mountinfo), the link resolved */
    if (lstat(out, &sb) < 0 && be->borrowed[0] != '\0' &&
        pybox_fmt(other, sizeof other, "%s/%s", be->borrowed, id + 7) == 0 && lstat(other, &sb) == 0 &&
        realpath(other, real) != NULL && pybox_strlcpy(out, real, len) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "an image's folder");
    return 0;
}

/* Whether a root filesystem folder is one borrowed from another installation: not in
 * our own folder. */
static bool is_borrowed(const native_backend_t *be, const char *root)
{
    size_t n = strlen(be->roots);
    return !(strncmp(root, be->roots, n) == 0 && root[n] == '/');
}

/* ---- the tree's digest ---- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry of dfd, sorted, as "path\0kind mode uid gid size\0" then its content's
 * digest (files), target (links) or device numbers; folders are walked in turn. */
static int hash_dir(EVP_MD_CTX *md, int dfd, const char *rel, int depth, pybox_error_t *err)
{
    if (depth > TREE_DEPTH_MAX)
        return pybox_error_set(err, PYBOX_ERR_STATE, ELOOP, "an image tree deeper than %d", TREE_DEPTH_MAX);
    DIR *d = pybox_dir_open(dup(dfd));
    if (d == NULL)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "reading the image folder %s", rel);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (pybox_grow(&names, &cap, n, sizeof *names, 64) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "hashing an image");
            break;
        }
        if ((names[n] = strdup(de->d_name)) == NULL)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "hashing an image");
        else
            n++;
    }
    closedir(d);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char path[PATH_MAX];
        struct stat sb;
        if (pybox_fmt(path, sizeof path, "%s/%s", rel, names[i]) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "a path in an image");
            break;
        }
        if (fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "stat(%s)", path);
            break;
        }
        char head[PATH_MAX + 128];
        int hl = snprintf(head, sizeof head, "%s%c%o %u %u %lld", path, 0, (unsigned)sb.st_mode, (unsigned)sb.st_uid,
                          (unsigned)sb.st_gid, S_ISREG(sb.st_mode) ? (long long)sb.st_size : 0LL);
        if (hl < 0 || (size_t)hl >= sizeof head) {
            rc = pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "a path in an image");
            break;
        }
        EVP_DigestUpdate(md, head, (size_t)hl + 1);
        if (S_ISREG(sb.st_mode)) {
            int fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", path);
                break;
            }
            char buf[65536];
            ssize_t r;
            while ((r = read(fd, buf, sizeof buf)) > 0)
                EVP_DigestUpdate(md, buf, (size_t)r);
            if (r < 0)
                rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "read(%s)", path);
            close(fd);
        } else if (S_ISLNK(sb.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlinkat(dfd, names[i], target, sizeof target);
            if (tl < 0 || (size_t)tl >= sizeof target)
                rc = pybox_error_set(err, PYBOX_ERR_STATE, tl < 0 ? errno : ENAMETOOLONG, "readlink(%s)", path);
            else
                EVP_DigestUpdate(md, target, (size_t)tl + 0);
        } else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) {
            char dev[64];
            int dl = snprintf(dev, sizeof dev, "%u:%u", major(sb.st_rdev), minor(sb.st_rdev));
            EVP_DigestUpdate(md, dev, (size_t)dl);
        } else if (S_ISDIR(sb.st_mode)) {
            int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", path);
                break;
            }
            rc = hash_dir(md, sub, path, depth + 1, err);
            close(sub);
        }
        EVP_DigestUpdate(md, "\n", 1);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int pybox_native_tree_sha256(const char *dir, char out[65], pybox_error_t *err)
{
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", dir);
    EVP_MD_CTX *md = pybox_digest_start();
    if (md == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a digest");
    EVP_DigestUpdate(md, "pybox-tree/1\n", 13);
    int rc = hash_dir(md, dfd, ".", 0, err);
    if (!pybox_digest_done(md, rc == 0 ? out : NULL) && rc == 0)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the tree's digest could not be finished");
    return rc;
}

/* ---- import: unpack, hash, name by the digest ---- */

/* In a child working inside the new folder: every name stays relative, so libarchive's
 * own checks (no "..", no absolute name, no link followed on the way) hold for all of
 * it. The first problem comes back on a pipe. */
static int unpack_here(int tar_fd, char *msg, size_t len)
{
    struct archive *a = archive_read_new();
    struct archive *w = archive_write_disk_new();
    if (a == NULL || w == NULL) {
        snprintf(msg, len, "%s", pybox_archive_why());
        return -1;
    }
    archive_read_support_format_tar(a);
    /* Owners, modes and times as the image has them; never through a link, never out of
     * the folder. */
    /* An ordinary user's image is theirs throughout: their uid is the box's root (rootless.h). */
    archive_write_disk_set_options(w, (geteuid() == 0 ? ARCHIVE_EXTRACT_OWNER : 0) | ARCHIVE_EXTRACT_PERM |
                                          ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
    int rc = 0;
    if (archive_read_open_fd(a, tar_fd, 65536) != ARCHIVE_OK) {
        snprintf(msg, len, "reading the image: %s", archive_error_string(a));
        rc = -1;
    }
    struct archive_entry *e;
    while (rc == 0) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        const char *name = r >= ARCHIVE_WARN ? archive_entry_pathname(e) : NULL;
        if (r < ARCHIVE_WARN || name == NULL) {
            snprintf(msg, len, "reading the image: %s",
                     r < ARCHIVE_WARN ? archive_error_string(a) : "an entry has no name");
            rc = -1;
            break;
        }
        /* An ordinary user may make no device node; a box's /dev is its own tmpfs, which
         * hides the image's anyway (rootless.h). */
        mode_t type = archive_entry_filetype(e);
        if (geteuid() != 0 && (type == AE_IFCHR || type == AE_IFBLK))
            continue;
        if (archive_write_header(w, e) < ARCHIVE_WARN) {
            snprintf(msg, len, "unpacking the image (%.200s): %s", name, archive_error_string(w));
            rc = -1;
            break;
        }
        const void *buf;
        size_t size;
        la_int64_t off;
        while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(w, buf, size, off) < ARCHIVE_OK) {
                r = ARCHIVE_FATAL;
                break;
            }
        if (r != ARCHIVE_EOF || archive_write_finish_entry(w) < ARCHIVE_WARN) {
            snprintf(msg, len, "unpacking the image (%.200s): %s", name, archive_error_string(w));
            rc = -1;
        }
    }
    if (rc == 0 && archive_write_close(w) != ARCHIVE_OK) {
        snprintf(msg, len, "unpacking the image: %s", archive_error_string(w));
        rc = -1;
    }
    archive_read_free(a);
    archive_write_free(w);
    return rc;
}

static int unpack(int tar_fd, const char *dir, pybox_error_t *err)
{
    int pfd;
    pid_t pid = pybox_fork_piped(&pfd, err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char msg[512] = "";
        int rc = -1;
        char eb[128];
        if (chdir(dir) < 0)
            snprintf(msg, sizeof msg, "entering the new image folder: %s", pybox_strerror(errno, eb, sizeof eb));
        else
            rc = unpack_here(tar_fd, msg, sizeof msg);
        if (rc < 0 && write(pfd, msg, strlen(msg)) < 0)
            _exit(2);
        _exit(rc < 0 ? 1 : 0);
    }
    char msg[512];
    size_t have = pybox_read_message(pfd, msg, sizeof msg);
    close(pfd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s", have ? msg : "unpacking the image failed");
    return 0;
}

static int ni_import(pybox_backend_t *base, int tar_fd, const pybox_pin_t *pin, char *id, size_t id_len,
                     pybox_error_t *err)
{
    (void)pin;
    native_backend_t *be = (native_backend_t *)base;
    char rnd[17], tmp[PATH_MAX], digest[65], final[PATH_MAX];
    if (pybox_random_hex(8, rnd, err) < 0)
        return -1;
    if (pybox_fmt(tmp, sizeof tmp, "%s/.new-%s", be->roots, rnd) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the image's folder");
    if (mkdir(tmp, 0755) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", tmp);
    pybox_error_t ignored = {0};
    if (unpack(tar_fd, tmp, err) < 0 || pybox_native_tree_sha256(tmp, digest, err) < 0) {
        pybox_native_rm_tree(tmp, &ignored);
        return -1;
    }
    if (pybox_fmt(final, sizeof final, "%s/%s", be->roots, digest) < 0) {
        pybox_native_rm_tree(tmp, &ignored);
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the image's folder");
    }
    struct stat sb;
    if (lstat(final, &sb) == 0) {
        /* the same tree is there already (same recipe, same init): keep that one */
        pybox_native_rm_tree(tmp, &ignored);
    } else if (rename(tmp, final) < 0) {
        int e = errno;
        pybox_native_rm_tree(tmp, &ignored);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "rename(%s)", final);
    }
    if (pybox_fmt(id, id_len, "sha256:%s", digest) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the image's id");
    return 0;
}

/* The recipe digest the manifest inside a root filesystem folder names ("" if none). */
static void manifest_recipe(const char *root, char *out, size_t len)
{
    out[0] = '\0';
    char mpath[PATH_MAX];
    if (pybox_fmt(mpath, sizeof mpath, "%s/pybox/manifest.json", root) < 0)
        return;
    int fd = open(mpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char *text = NULL;
    size_t tl = 0;
    bool over = false;
    if (fd < 0)
        return;
    int rc = pybox_read_bounded(fd, 1 << 20, &text, &tl, &over, NULL);
    close(fd);
    if (rc < 0)
        return;
    cJSON *m = cJSON_ParseWithLength(text, tl);
    free(text);
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(m, "recipe_sha256");
    if (cJSON_IsString(fp))
        pybox_strlcpy(out, fp->valuestring, len);
    cJSON_Delete(m);
}

static int ni_resolve(pybox_backend_t *base, const pybox_pin_t *pin, pybox_error_t *err)
{
    native_backend_t *be = (native_backend_t *)base;
    char root[PATH_MAX], init[PATH_MAX];
    if (pybox_native_image_root(be, pin->id, root, sizeof root, err) < 0)
        return -1;
    struct stat sb;
    /* The folder the pin names, root's (an ordinary user's own: the box's root is that
     * user) and not writable by others; its init there. */
    if (lstat(root, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 0022) != 0 ||
        pybox_fmt(init, sizeof init, "%s/pybox/init", root) < 0 || lstat(init, &sb) < 0 || !S_ISREG(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s' is pinned to %s, whose root filesystem is not there as built: rebuild it "
                               "with `pybox image build %s --backend native`; it is never re-pinned by itself",
                               pin->name, pin->id, pin->name);
    /* Cheap enough for every run: the folder holds the image pinned (its manifest names
     * the pinned recipe), not another put in its place. The whole tree's digest is checked
     * at import and by `pybox image verify`. */
    char recipe[80];
    manifest_recipe(root, recipe, sizeof recipe);
    if (strcmp(recipe, pin->recipe_sha256) != 0)
        return pybox_error_set(
            err, PYBOX_ERR_USAGE, 0,
            "image '%s' is pinned to %s, whose root filesystem folder now holds another image (its "
            "manifest names recipe %.16s, not %.16s): rebuild it with `pybox image build %s --backend "
            "native`; it is never re-pinned by itself",
            pin->name, pin->id, recipe[0] ? recipe : "none", pin->recipe_sha256, pin->name);
    return 0;
}

static int ni_check(pybox_backend_t *base, const char *install_id, const pybox_pin_t *pin, char *problem, size_t len,
                    pybox_error_t *err)
{
    (void)install_id;
    native_backend_t *be = (native_backend_t *)base;
    problem[0] = '\0';
    char root[PATH_MAX], now[65];
    if (pybox_native_image_root(be, pin->id, root, sizeof root, err) < 0)
        return -1;
    pybox_error_t herr = {0};
    if (pybox_native_tree_sha256(root, now, &herr) < 0) {
        snprintf(problem, len, "%s", herr.msg);
        return 0;
    }
    if (strcmp(now, pin->id + 7) != 0) {
        snprintf(problem, len, "the root filesystem changed since it was pinned (its tree hashes to %.16s...)", now);
        return 0;
    }
    char recipe[80];
    manifest_recipe(root, recipe, sizeof recipe);
    if (recipe[0] == '\0')
        snprintf(problem, len, "the image holds no readable manifest");
    else if (strcmp(recipe, pin->recipe_sha256) != 0)
        snprintf(problem, len, "the manifest inside the image does not name the pinned recipe");
    return 0;
}

static int ni_remove(pybox_backend_t *base, const pybox_pin_t *pin, pybox_image_removal_t *what, char *why, size_t len,
                     pybox_error_t *err)
{
    native_backend_t *be = (native_backend_t *)base;
    why[0] = '\0';
    char root[PATH_MAX];
    if (pybox_native_image_root(be, pin->id, root, sizeof root, err) < 0)
        return -1;
    /* Another pin of this installation may name the same tree: then it stays. */
    pybox_pin_t *pins = NULL;
    size_t n = 0;
    if (pybox_pin_list(&be->st, "native", &pins, &n, err) < 0)
        return -1;
    bool shared = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(pins[i].name, pin->name) != 0 && strcmp(pins[i].id, pin->id) == 0)
            shared = true;
    free(pins);
    if (shared) {
        *what = PYBOX_IMAGE_KEPT_NAMED;
        return 0;
    }
    if (is_borrowed(be, root)) {
        *what = PYBOX_IMAGE_KEPT_NAMED;
        snprintf(why, len, "its root filesystem folder belongs to the installation this one borrows images from");
        return 0;
    }
    struct stat sb;
    if (lstat(root, &sb) < 0) {
        *what = PYBOX_IMAGE_WAS_GONE;
        return 0;
    }
    /* A box of this installation may have it as its root: never pulled from under one. */
    pybox_native_leftover_t *boxes = NULL;
    size_t nb = 0;
    if (pybox_native_leftovers(&be->cg_host, be->cg_parent, be->staging, &boxes, &nb, err) < 0)
        return -1;
    free(boxes);
    if (nb > 0) {
        *what = PYBOX_IMAGE_KEPT_IN_USE;
        snprintf(why, len, "%zu native box%s of this installation %s (running, or left for `pybox cleanup`)", nb,
                 nb == 1 ? "" : "es", nb == 1 ? "is there" : "are there");
        return 0;
    }
    /* Out of the way first (one rename), then removed: no box can start on half of it. */
    char rnd[17], old[PATH_MAX];
    if (pybox_random_hex(8, rnd, err) < 0)
        return -1;
    if (pybox_fmt(old, sizeof old, "%s/.old-%s", be->roots, rnd) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the image's folder");
    if (rename(root, old) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "rename(%s)", root);
    pybox_strlcpy(root, old, sizeof root);
    pybox_error_t rerr = {0};
    if (pybox_native_rm_tree(root, &rerr) < 0) {
        *what = PYBOX_IMAGE_KEPT_IN_USE;
        snprintf(why, len, "%s", rerr.msg);
        return 0;
    }
    *what = PYBOX_IMAGE_REMOVED;
    return 0;
}

const pybox_image_ops_t pybox_native_image_ops = {
    .import = ni_import,
    .resolve = ni_resolve,
    .check = ni_check,
    .remove = ni_remove,
};

int pybox_native_netns_pid(native_backend_t *be, const char *what, pid_t *pid, pybox_error_t *err)
{
    (void)be;
    uint64_t v;
    if (strncmp(what, "pid:", 4) != 0 || pybox_parse_u64(what + 4, &v) < 0 || v == 0 || v > 1 << 22)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "a native box joins a network namespace by pid:<n>");
    *pid = (pid_t)v;
    return 0;
}

/* ---- image folders no pin names ---- */

/* A name of roots/ that an image or an import cut short may have. */
static bool root_folder_name(const char *n)
{
    if (hex64(n))
        return true;
    return (strncmp(n, ".new-", 5) == 0 || strncmp(n, ".old-", 5) == 0) && strlen(n) == 21 &&
           strspn(n + 5, "0123456789abcdef") == 16;
}

static bool pinned(const pybox_pin_t *pins, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(pins[i].id, "sha256:", 7) == 0 && strcmp(pins[i].id + 7, name) == 0)
            return true;
    return false;
}

int native_unpinned_images(native_backend_t *be, char (**names)[72], int64_t **mtimes, size_t *n, pybox_error_t *err)
{
    *names = NULL;
    *mtimes = NULL;
    *n = 0;
    pybox_pin_t *pins = NULL;
    size_t np = 0;
    if (pybox_pin_list(&be->st, "native", &pins, &np, err) < 0)
        return -1;
    DIR *d = opendir(be->roots);
    if (d == NULL) {
        free(pins);
        return errno == ENOENT ? 0 : pybox_error_set(err, PYBOX_ERR_STATE, errno, "opendir(%s)", be->roots);
    }
    size_t cap = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        struct stat sb;
        if (!root_folder_name(de->d_name) || pinned(pins, np, de->d_name) ||
            fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char(*nn)[72] = realloc(*names, nc * sizeof **names);
            int64_t *nm = nn ? realloc(*mtimes, nc * sizeof **mtimes) : NULL;
            if (nn != NULL)
                *names = nn;
            if (nm == NULL) {
                rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing image folders");
                break;
            }
            *mtimes = nm;
            cap = nc;
        }
        pybox_strlcpy((*names)[*n], de->d_name, sizeof **names);
        (*mtimes)[*n] = (int64_t)sb.st_mtim.tv_sec;
        (*n)++;
    }
    closedir(d);
    free(pins);
    if (rc < 0) {
        free(*names);
        free(*mtimes);
        *names = NULL;
        *mtimes = NULL;
        *n = 0;
    }
    return rc;
}

int native_remove_unpinned(native_backend_t *be, const char *name, bool *gone, pybox_error_t *err)
{
    *gone = false;
    if (!root_folder_name(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "not an image folder's name");
    /* Asked again now: a pin may name it since it was listed, a box may have it. */
    pybox_pin_t *pins = NULL;
    size_t np = 0;
    if (pybox_pin_list(&be->st, "native", &pins, &np, err) < 0)
        return -1;
    bool named = pinned(pins, np, name);
    free(pins);
    if (named)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "a pin names it again");
    pybox_native_leftover_t *boxes = NULL;
    size_t nb = 0;
    if (pybox_native_leftovers(&be->cg_host, be->cg_parent, be->staging, &boxes, &nb, err) < 0)
        return -1;
    free(boxes);
    if (nb > 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "a box of this installation is there");
    char path[PATH_MAX], old[PATH_MAX], rnd[17];
    if (pybox_fmt(path, sizeof path, "%s/%s", be->roots, name) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the image's folder");
    if (name[0] != '.') {
        /* out of the way first: no run can start on half of it */
        if (pybox_random_hex(8, rnd, err) < 0 || pybox_fmt(old, sizeof old, "%s/.old-%s", be->roots, rnd) < 0)
            return -1;
        if (rename(path, old) < 0)
            return errno == ENOENT ? (*gone = true, 0)
                                   : pybox_error_set(err, PYBOX_ERR_STATE, errno, "rename(%s)", path);
        pybox_strlcpy(path, old, sizeof path);
    }
    if (pybox_native_rm_tree(path, err) < 0)
        return -1;
    *gone = true;
    return 0;
}
