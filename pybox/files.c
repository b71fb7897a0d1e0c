/* SPDX-License-Identifier: MIT */
/* Files in and out of a box (see files.h and docs/files.md). */
#include "files.h"
#include "archive_api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bounds.h"
#include "escape.h"
#include "policy.h"
#include "util.h"

/* ---- in ---- */

#define INPUT_ENTRIES_MAX 10000
#define INPUT_DEPTH_MAX 32

/* libarchive converts names through the current locale: in the C locale it drops or
 * refuses characters it cannot represent, and a name given as UTF-8 that the locale cannot
 * hold comes back NULL, which its tar writer then reads. Names are handled in C.UTF-8 (this
 * thread only, whatever the process's locale), both ways: what is judged and written is
 * the name the archive holds, and the inputs' names are packed as the UTF-8 they are. */
static locale_t utf8_loc;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void)
{
    utf8_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static locale_t utf8_begin(void)
{
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc != (locale_t)0 ? uselocale(utf8_loc) : (locale_t)0;
}

static void utf8_end(locale_t old)
{
    if (old != (locale_t)0)
        uselocale(old);
}

void pybox_inputs_init(pybox_inputs_t *in)
{
    memset(in, 0, sizeof *in);
    pybox_buf_init(&in->tar, 0);
}

void pybox_inputs_free(pybox_inputs_t *in)
{
    free(in->files);
    free(in->tops);
    pybox_buf_free(&in->tar);
    memset(in, 0, sizeof *in);
}

void pybox_inputs_freep(pybox_inputs_t *in)
{
    pybox_inputs_free(in);
}

static la_ssize_t tar_to_buf(struct archive *a, void *arg, const void *data, size_t len)
{
    (void)a;
    return pybox_buf_append(arg, data, len) == 0 ? (la_ssize_t)len : -1;
}

typedef struct {
    struct archive *w;
    pybox_inputs_t *in;
    int64_t max_total;
    size_t entries;
    const char *top; /* the path as the operator gave it, for messages */
    bool utf8;       /* this thread is in C.UTF-8: names are taken as they are */
} packer_t;

/* libarchive's last error, never NULL. */
static const char *why(struct archive *a)
{
    const char *s = a != NULL ? archive_error_string(a) : NULL;
    return s != NULL ? s : "libarchive failed";
}

static void shown(char *out, size_t len, const char *s)
{
    pybox_escape_short(out, len, s, 200);
}

static int refuse(pybox_error_t *err, const char *path, const char *why);

/* The same, for why a call failed. */
static int refuse_errno(pybox_error_t *err, const char *path, int errnum)
{
    char text[128];
    return refuse(err, path, pybox_strerror(errnum, text, sizeof text));
}

static int refuse(pybox_error_t *err, const char *path, const char *why)
{
    char p[256];
    shown(p, sizeof p, path);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "input %s: %s", p, why);
}

/* Names in /box/in are UTF-8: a name that is not (a Latin-1 byte, say) has no faithful
 * form in the archive, so it is refused rather than altered. */
static int check_name(const char *name, const char *shown_path, pybox_error_t *err)
{
    if (!pybox_utf8_valid(name, strlen(name)))
        return refuse(err, shown_path, "its name is not valid UTF-8 (names in " PYBOX_BOX_IN " are UTF-8: rename it)");
    return 0;
}

static int header(packer_t *k, const char *name, const char *shown_path, mode_t type, mode_t perm, int64_t size,
                  time_t mtime, pybox_error_t *err)
{
    if (++k->entries > INPUT_ENTRIES_MAX)
        return refuse(err, k->top, "more than 10000 files and folders in the inputs");
    struct archive_entry *e = archive_entry_new();
    if (e == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "archive_entry_new");
    /* In C.UTF-8 the name is handed over as the bytes it is: libarchive recomposes a name
     * it converts from UTF-8 (Unicode NFC), which would rename a decomposed one and make
     * two names one (the second file overwriting the first in /box/in). Only without
     * that locale is it converted. */
    if (k->utf8)
        archive_entry_copy_pathname(e, name);
    else
        archive_entry_set_pathname_utf8(e, name);
    /* The writer takes the name in the locale's form; never let it read a NULL one. */
    if (archive_entry_pathname(e) == NULL) {
        archive_entry_free(e);
        return refuse(err, shown_path, "its name cannot be packed as UTF-8 here");
    }
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, size);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, "root");
    archive_entry_set_gname(e, "root");
    archive_entry_set_mtime(e, mtime, 0);
    int rc = archive_write_header(k->w, e);
    archive_entry_free(e);
    if (rc != ARCHIVE_OK)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "packing the inputs: %s", why(k->w));
    return 0;
}

/* One regular file: read it once, whole, hash what was read, pack what was hashed. */
static int pack_file(packer_t *k, int fd, const char *name, const char *shown_path, pybox_error_t *err)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat");
    if (!S_ISREG(sb.st_mode))
        return refuse(err, shown_path, "not a regular file");
    if (sb.st_size > k->max_total - k->in->total) {
        char msg[128];
        snprintf(msg, sizeof msg, "the inputs are larger than %lld bytes in all (the limit)", (long long)k->max_total);
        return refuse(err, k->top, msg);
    }
    size_t size = (size_t)sb.st_size;
    _cleanup_free_ char *data = malloc(size + 1);
    if (data == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "malloc(%zu)", size + 1);
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, data + got, size + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return refuse_errno(err, shown_path, errno);
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > size)
            break;
    }
    if (got != size)
        return refuse(err, shown_path, "it changed while it was being read");
    if (pybox_grow(&k->in->files, &k->in->cap, k->in->n, sizeof *k->in->files, 16) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "inputs");
    pybox_input_file_t *f = &k->in->files[k->in->n++];
    memset(f, 0, sizeof *f);
    if (pybox_strlcpy(f->name, name, sizeof f->name) < 0)
        return refuse(err, shown_path, "its name is too long");
    f->bytes = (int64_t)size;
    pybox_sha256_hex(data, size, f->sha256);
    k->in->total += (int64_t)size;
    if (header(k, name, shown_path, AE_IFREG, 0444, (int64_t)size, sb.st_mtime, err) < 0)
        return -1;
    if (size > 0 && archive_write_data(k->w, data, size) != (la_ssize_t)size)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "packing the inputs: %s", why(k->w));
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder, depth first, in name order; anything but files and folders is refused. */
static int pack_dir(packer_t *k, int dfd, const char *name, const char *path, int depth, pybox_error_t *err)
{
    if (depth > INPUT_DEPTH_MAX)
        return refuse(err, path, "folders nested more than 32 deep");
    struct stat sb;
    if (fstat(dfd, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat");
    char dname[PATH_MAX];
    if (pybox_fmt(dname, sizeof dname, "%s/", name) < 0)
        return refuse(err, path, "a name is too long");
    if (header(k, dname, path, AE_IFDIR, 0555, 0, sb.st_mtime, err) < 0)
        return -1;
    DIR *d = pybox_dir_open(dup(dfd));
    if (d == NULL)
        return refuse_errno(err, path, errno);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (pybox_grow(&names, &cap, n, sizeof *names, 32) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "inputs");
            break;
        }
        names[n] = strdup(de->d_name);
        if (names[n] == NULL) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "inputs");
            break;
        }
        n++;
        if (n > INPUT_ENTRIES_MAX) {
            rc = refuse(err, k->top, "more than 10000 files and folders in the inputs");
            break;
        }
    }
    closedir(d);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char child[PATH_MAX], childpath[PATH_MAX];
        if (pybox_fmt(child, sizeof child, "%s/%s", name, names[i]) < 0 ||
            pybox_fmt(childpath, sizeof childpath, "%s/%s", path, names[i]) < 0) {
            rc = refuse(err, path, "a name is too long");
            break;
        }
        if (check_name(names[i], childpath, err) < 0) {
            rc = -1;
            break;
        }
        struct stat cs;
        if (fstatat(dfd, names[i], &cs, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = refuse_errno(err, childpath, errno);
            break;
        }
        if (S_ISREG(cs.st_mode)) {
            int fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (fd < 0) {
                rc = refuse_errno(err, childpath, errno);
                break;
            }
            rc = pack_file(k, fd, child, childpath, err);
            close(fd);
        } else if (S_ISDIR(cs.st_mode)) {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                rc = refuse_errno(err, childpath, errno);
                break;
            }
            rc = pack_dir(k, cfd, child, childpath, depth + 1, err);
            close(cfd);
        } else {
            const char *what = S_ISLNK(cs.st_mode)    ? "holds a symbolic link"
                               : S_ISFIFO(cs.st_mode) ? "holds a FIFO"
                               : S_ISSOCK(cs.st_mode) ? "holds a socket"
                                                      : "holds a device";
            rc = refuse(err, childpath, what);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* The name an input gets in /box/in: its last path component. */
static int base_name(const char *path, char *out, size_t len)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *start = path;
    for (size_t i = 0; i < n; i++)
        if (path[i] == '/')
            start = path + i + 1;
    size_t bl = (size_t)(path + n - start);
    if (bl == 0 || bl >= len || (bl == 1 && start[0] == '.') || (bl == 2 && start[0] == '.' && start[1] == '.'))
        return -1;
    memcpy(out, start, bl);
    out[bl] = '\0';
    return 0;
}

int pybox_inputs_prepare(const char *const *paths, size_t n, int64_t max_total, pybox_inputs_t *in, pybox_error_t *err)
{
    pybox_inputs_init(in);
    /* The archive is at most the inputs plus its headers: bounded. */
    pybox_buf_init(&in->tar, (size_t)max_total + 6 * 1024 * (INPUT_ENTRIES_MAX + 1));
    char(*bases)[NAME_MAX + 1] = calloc(n ? n : 1, sizeof *bases);
    if (bases == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "inputs");
    /* Before the archive exists: it takes the locale's character set once, at its first name. */
    locale_t old = utf8_begin();
    packer_t k = {.w = archive_write_new(), .in = in, .max_total = max_total, .utf8 = utf8_loc != (locale_t)0};
    int rc = 0;
    /* pax headers carry the names as UTF-8, never as "binary" bytes of some locale */
    if (k.w == NULL || archive_write_set_format_pax_restricted(k.w) != ARCHIVE_OK ||
        archive_write_set_format_option(k.w, "pax", "hdrcharset", "UTF-8") != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(k.w, 1) != ARCHIVE_OK ||
        archive_write_open2(k.w, &in->tar, NULL, tar_to_buf, NULL, NULL) != ARCHIVE_OK)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "packing the inputs: %s",
                             k.w == NULL ? pybox_archive_why() : why(k.w));
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *path = paths[i];
        k.top = path;
        if (path == NULL || path[0] == '\0') {
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--input needs a path");
            break;
        }
        if (base_name(path, bases[i], sizeof bases[i]) < 0) {
            rc = refuse(err, path, "give a file or a folder by its name");
            break;
        }
        if (check_name(bases[i], path, err) < 0) {
            rc = -1;
            break;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(bases[i], bases[j]) == 0) {
                rc = refuse(err, path, "another input has the same name in /box/in");
                break;
            }
        if (rc < 0)
            break;
        /* The operator's own path may be a link to a file or folder; it is followed. */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) < 0) {
            rc = errno == ENOENT ? refuse(err, path, "no such file or folder") : refuse_errno(err, path, errno);
            if (fd >= 0)
                close(fd);
            break;
        }
        if (S_ISREG(sb.st_mode)) {
            rc = pack_file(&k, fd, bases[i], path, err);
        } else if (S_ISDIR(sb.st_mode)) {
            rc = pack_dir(&k, fd, bases[i], path, 0, err);
        } else {
            rc = refuse(err, path, "a special file (only regular files and folders can go in)");
        }
        close(fd);
    }
    if (rc == 0 && archive_write_close(k.w) != ARCHIVE_OK)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "packing the inputs: %s", why(k.w));
    if (k.w != NULL)
        archive_write_free(k.w);
    utf8_end(old);
    in->tops = bases;
    in->n_tops = n;
    if (rc < 0) {
        pybox_inputs_free(in);
        return -1;
    }
    return 0;
}

/* ---- out ---- */

void pybox_ingest_limits_default(pybox_ingest_limits_t *l)
{
    l->max_files = PYBOX_OUT_FILES_MAX;
    l->max_file = PYBOX_OUT_FILE_MAX;
    l->max_total = PYBOX_OUT_TOTAL_MAX;
    l->max_depth = PYBOX_OUT_DEPTH_MAX;
    l->max_dirs = PYBOX_OUT_DIRS_MAX;
}

void pybox_output_close(pybox_output_spec_t *spec)
{
    if (spec->parent_fd >= 0)
        close(spec->parent_fd);
    spec->parent_fd = -1;
}

int pybox_folder_hold(const char *path, const char *what, const char *hint, int *fd, pybox_error_t *err)
{
    *fd = -1;
    struct stat sb;
    int pfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0 || fstat(pfd, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        if (pfd >= 0)
            close(pfd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s does not exist", what);
    }
    /* Nobody else may be able to move things around in the folder while PyBox writes
     * there: its owner is this user or root, and if others can write to it, the sticky
     * bit keeps them from renaming what is not theirs. */
    bool others_write = (sb.st_mode & 0022) != 0;
    if ((sb.st_uid != geteuid() && sb.st_uid != 0) || (others_write && !(sb.st_mode & S_ISVTX))) {
        close(pfd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "%s can be changed by another user (owner uid %u, mode %04o): %s", what,
                               (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777), hint);
    }
    if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) < 0) {
        int en = errno;
        close(pfd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, en, "%s is not writable", what);
    }
    *fd = pfd;
    return 0;
}

/* A user's name for messages ("uid 65534 (nobody)"), never cut. */
static void owner_shown(uid_t uid, char *out, size_t len)
{
    struct passwd pw, *res = NULL;
    char buf[1024];
    char name[96] = "";
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res != NULL)
        pybox_escape_short(name, sizeof name, res->pw_name, 32);
    snprintf(out, len, name[0] ? "uid %u (%s)" : "uid %u", (unsigned)uid, name);
}

int pybox_output_check(const char *dir, pybox_output_spec_t *spec, pybox_error_t *err)
{
    return pybox_output_check_relaxed(dir, 0, spec, err);
}

int pybox_output_check_relaxed(const char *dir, unsigned relax, pybox_output_spec_t *spec, pybox_error_t *err)
{
    memset(spec, 0, sizeof *spec);
    spec->parent_fd = -1;
    spec->owner_relaxed = (relax & PYBOX_RELAX_OUTPUT_OWNER) != 0;
    char p[256];
    shown(p, sizeof p, dir ? dir : "");
    if (dir == NULL || dir[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output needs a folder");
    char abs[PATH_MAX];
    if (dir[0] == '/') {
        if (pybox_strlcpy(abs, dir, sizeof abs) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output %s: the path is too long", p);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL || pybox_fmt(abs, sizeof abs, "%s/%s", cwd, dir) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output %s: the path is too long", p);
    }
    size_t n = strlen(abs);
    while (n > 1 && abs[n - 1] == '/')
        abs[--n] = '\0';
    if (base_name(abs, spec->base, sizeof spec->base) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output %s: give a folder by its name", p);
    memcpy(spec->dir, abs, n + 1);
    size_t plen = n - strlen(spec->base);
    while (plen > 1 && abs[plen - 1] == '/')
        plen--;
    memcpy(spec->parent, abs, plen);
    spec->parent[plen] = '\0';
    char what[320];
    snprintf(what, sizeof what, "--output %s: its parent folder", p);
    if (pybox_folder_hold(spec->parent, what, "give a folder whose parent only you control", &spec->parent_fd, err) < 0)
        return -1;
    struct stat sb;
    int pfd = spec->parent_fd;
    if (fstatat(pfd, spec->base, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            pybox_output_close(spec);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--output %s: it exists and is not a folder", p);
        }
        /* The run's files replace this folder under its name, with its mode: a folder
         * someone else made (in a shared folder such as /tmp, before the run) would be
         * theirs to change again once delivered. */
        if (sb.st_uid != geteuid() && !spec->owner_relaxed) {
            char who[160];
            owner_shown(sb.st_uid, who, sizeof who);
            pybox_output_close(spec);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--output %s: the folder exists and belongs to another user (%s, mode %04o): give "
                                   "a new folder or one of your own",
                                   p, who, (unsigned)(sb.st_mode & 07777));
        }
        spec->mode = sb.st_mode & 07777;
        DIR *d = pybox_dir_open(openat(pfd, spec->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (d == NULL) {
            int en = errno;
            pybox_output_close(spec);
            return pybox_error_set(err, PYBOX_ERR_USAGE, en, "--output %s", p);
        }
        struct dirent *de;
        bool empty = true;
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                empty = false;
        closedir(d);
        if (!empty) {
            pybox_output_close(spec);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--output %s: the folder exists and is not empty (nothing would be overwritten: "
                                   "give a new or empty folder)",
                                   p);
        }
        spec->existed = true;
    } else if (errno != ENOENT) {
        int en = errno;
        pybox_output_close(spec);
        return pybox_error_set(err, PYBOX_ERR_USAGE, en, "--output %s", p);
    }
    return 0;
}

void pybox_outputs_init(pybox_outputs_t *o)
{
    memset(o, 0, sizeof *o);
}

void pybox_outputs_free(pybox_outputs_t *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->entries[i].name);
    free(o->entries);
    memset(o, 0, sizeof *o);
}

static pybox_out_entry_t *add_entry(pybox_outputs_t *o, const char *name)
{
    if (pybox_grow(&o->entries, &o->cap, o->n, sizeof *o->entries, 32) < 0)
        return NULL;
    pybox_out_entry_t *e = &o->entries[o->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (e->name == NULL)
        return NULL;
    o->n++;
    return e;
}

/* A name that can come back: relative, no empty, "." or ".." part, printable UTF-8 with
 * nothing the terminal form escapes (so two names that look the same on a terminal are
 * the same name), parts of at most 255 bytes, not too deep. */
static const char *name_problem(const char *name, int max_depth)
{
    size_t len = strlen(name);
    if (len == 0 || len > 1024)
        return "its name is empty or longer than 1024 bytes";
    if (name[0] == '/')
        return "its name is absolute";
    if (!pybox_utf8_valid(name, len))
        return "its name is not UTF-8";
    int depth = 0;
    const char *p = name;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t part = slash ? (size_t)(slash - p) : strlen(p);
        if (part == 0 || (part == 1 && p[0] == '.') || (part == 2 && p[0] == '.' && p[1] == '.'))
            return "its name has an empty, \".\" or \"..\" part";
        if (part > 255)
            return "a part of its name is longer than 255 bytes";
        depth++;
        p += part + (slash ? 1 : 0);
    }
    if (depth > max_depth)
        return "it is nested too deep";
    /* The terminal form of the name must be the name itself: no control, format,
     * invisible or unassigned code point, no combining mark with nothing to sit on. */
    pybox_buf_t esc;
    pybox_buf_init(&esc, 0);
    pybox_escape_terminal(&esc, name, len, false);
    bool same = esc.len == len && memcmp(esc.data, name, len) == 0;
    pybox_buf_free(&esc);
    if (!same)
        return "its name has control, escape, format, invisible or backslash characters, or a stray mark";
    /* Nor a blank that only looks like a space, nor a part that ends in one: the receipt
     * shows names as they are, and neither could tell two of them apart. */
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t n = pybox_utf8_seq((const unsigned char *)name + i, len - i, &cp);
        if (pybox_escape_is_blank(cp))
            return "its name has a space other than U+0020, or a blank that looks like one";
        if (cp == ' ' && (i + 1 == len || name[i + 1] == '/'))
            return "a part of its name ends with a space";
        i += n;
    }
    return NULL;
}

static char *fold(const char *s)
{
    char *f = strdup(s);
    for (char *p = f; p && *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return f;
}

typedef struct {
    char *raw;
    char *folded;
    bool file; /* the whole name of a file (not a folder above a name) */
} pair_t;

static int cmp_pair(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    int c = strcmp(x->folded, y->folded);
    return c ? c : strcmp(x->raw, y->raw);
}

/* Two names that differ only by case (a file's parent folders included) make a folder
 * that cannot be copied to a case-insensitive disk: refuse (1). A file's name that comes
 * twice, or that is also a folder's, cannot be written as the archive says: refuse (2). */
static int case_clash(const pybox_outputs_t *o, char *a, size_t alen, char *b, size_t blen)
{
    size_t cap = 0, n = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (!o->entries[i].returned)
            continue;
        cap++;
        for (const char *s = o->entries[i].name; (s = strchr(s, '/')) != NULL; s++)
            cap++;
    }
    pair_t *v = calloc(cap + 1, sizeof *v);
    if (v == NULL)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < o->n && rc == 0; i++) {
        if (!o->entries[i].returned)
            continue;
        const char *name = o->entries[i].name;
        /* the name itself and every folder above it */
        for (const char *s = name;; s++) {
            const char *slash = strchr(s, '/');
            size_t plen = slash ? (size_t)(slash - name) : strlen(name);
            v[n].raw = strndup(name, plen);
            v[n].folded = v[n].raw ? fold(v[n].raw) : NULL;
            v[n].file = slash == NULL && o->entries[i].kind == 'f';
            if (v[n].raw == NULL || v[n].folded == NULL) {
                rc = -1;
                n++;
                break;
            }
            n++;
            if (slash == NULL)
                break;
            s = slash;
        }
    }
    if (rc == 0) {
        qsort(v, n, sizeof *v, cmp_pair);
        for (size_t i = 1; i < n; i++) {
            if (strcmp(v[i].folded, v[i - 1].folded) != 0)
                continue;
            bool same = strcmp(v[i].raw, v[i - 1].raw) == 0;
            if (same && !v[i].file && !v[i - 1].file)
                continue; /* a folder named again: harmless */
            snprintf(a, alen, "%s", v[i - 1].raw);
            snprintf(b, blen, "%s", v[i].raw);
            rc = same ? 2 : 1;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(v[i].raw);
        free(v[i].folded);
    }
    free(v);
    return rc;
}

/* A name quoted in a reason: escaped, at most QUOTED_NAME bytes of it, cut only between
 * characters ("..." when cut), so that two fit in a reason whole and it stays UTF-8. */
#define QUOTED_NAME 80
#define QUOTED_MAX (QUOTED_NAME + 4)

static void quoted(char out[QUOTED_MAX], const char *name)
{
    pybox_buf_t e;
    pybox_buf_init(&e, 0);
    pybox_escape_terminal(&e, name, strlen(name), false);
    const char *t = e.data ? e.data : "";
    size_t n = pybox_utf8_cut(t, e.len, QUOTED_NAME);
    snprintf(out, QUOTED_MAX, "%.*s%s", (int)n, t, n < e.len ? "..." : "");
    pybox_buf_free(&e);
}

static void refuse_all(pybox_outputs_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse_all(pybox_outputs_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->reason, sizeof o->reason, fmt, ap);
    va_end(ap);
    /* should it not fit, it ends between characters, never in one */
    if (n >= (int)sizeof o->reason)
        o->reason[pybox_utf8_cut(o->reason, strlen(o->reason), sizeof o->reason - 1)] = '\0';
    o->status = PYBOX_OUT_REFUSED;
    o->returned_files = 0;
    o->returned_bytes = 0;
    o->not_returned = (int)o->n;
    for (size_t i = 0; i < o->n; i++) {
        if (o->entries[i].returned)
            snprintf(o->entries[i].reason, sizeof o->entries[i].reason, "the whole transfer was refused");
        o->entries[i].returned = false;
    }
}

static struct archive *open_tar(const void *tar, size_t len)
{
    struct archive *r = archive_read_new();
    if (r == NULL)
        return NULL; /* said as an archive that could not be read */
    archive_read_support_format_tar(r);
    if (archive_read_open_memory(r, tar, len) != ARCHIVE_OK) {
        archive_read_free(r);
        return NULL;
    }
    return r;
}

/* The entry's name as the archive holds it: the UTF-8 form that pax headers carry when
 * there is one (whatever this process's locale), else the raw bytes. libarchive reads a
 * pax name composed (Unicode NFC): a name the box wrote decomposed is judged, listed and
 * written composed, and its two forms are one name (so they never come back as two names
 * that look the same). */
static const char *entry_name(struct archive_entry *e)
{
    const char *u = archive_entry_pathname_utf8(e);
    return u != NULL ? u : archive_entry_pathname(e);
}

/* Where an archive entry of /box/out lands: the part after "out/" ("" for the root). */
static const char *inside_out(const char *pn)
{
    if (pn == NULL)
        return NULL;
    if (strcmp(pn, "out") == 0 || strcmp(pn, "out/") == 0)
        return "";
    if (strncmp(pn, "out/", 4) != 0)
        return NULL;
    return pn + 4;
}

/* The folders a transfer would make, to count them against the limit. */
typedef struct {
    char **v;
    size_t n, cap;
} folders_t;

static bool folders_has(const folders_t *f, const char *s, size_t len)
{
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->v[i]) == len && memcmp(f->v[i], s, len) == 0)
            return true;
    return false;
}

/* How many folders of name (its parents, and itself when it is a folder) are new. */
static int count_new_folders(const folders_t *f, const char *name, bool is_dir)
{
    int n = 0;
    size_t len = strlen(name);
    for (size_t i = 0; i <= len; i++) {
        if (name[i] == '/' || (i == len && is_dir)) {
            bool dup = folders_has(f, name, i);
            /* a later part may repeat an earlier new one: not possible, parts grow */
            n += !dup;
        }
    }
    return n;
}

static int add_folders(folders_t *f, const char *name, bool is_dir)
{
    size_t len = strlen(name);
    for (size_t i = 0; i <= len; i++) {
        if (!(name[i] == '/' || (i == len && is_dir)) || folders_has(f, name, i))
            continue;
        if (pybox_grow(&f->v, &f->cap, f->n, sizeof *f->v, 64) < 0)
            return -1;
        f->v[f->n] = strndup(name, i);
        if (f->v[f->n] == NULL)
            return -1;
        f->n++;
    }
    return 0;
}

static void folders_free(folders_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i]);
    free(f->v);
    memset(f, 0, sizeof *f);
}

/* Pass 1: every entry, decided from its header alone. */
static int survey(const void *tar, size_t len, const pybox_ingest_limits_t *lim, pybox_outputs_t *o)
{
    struct archive *r = open_tar(tar, len);
    if (r == NULL) {
        refuse_all(o, "the box's archive of %s could not be read", PYBOX_BOX_OUT);
        return 0;
    }
    struct archive_entry *e;
    int hr;
    int64_t total = 0;
    int dirs = 0;
    folders_t made = {0};
    /* A warning (e.g. a name that is not text in this locale) is not damage: the entry
     * is still there, and its name is judged below. */
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK || hr == ARCHIVE_WARN) {
        const char *pn = entry_name(e);
        const char *rel = inside_out(pn);
        if (rel != NULL && rel[0] == '\0')
            continue; /* /box/out itself */
        char name[1100];
        snprintf(name, sizeof name, "%s", rel ? rel : (pn ? pn : "(no name)"));
        size_t nl = strlen(name);
        while (nl > 1 && name[nl - 1] == '/')
            name[--nl] = '\0';
        pybox_out_entry_t *x = add_entry(o, name);
        if (x == NULL) {
            archive_read_free(r);
            return -1;
        }
        mode_t type = archive_entry_filetype(e);
        x->kind = archive_entry_hardlink(e) ? 'h'
                  : type == AE_IFREG        ? 'f'
                  : type == AE_IFDIR        ? 'd'
                  : type == AE_IFLNK        ? 'l'
                                            : 'o';
        x->bytes = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
        const char *problem = rel == NULL ? "it is outside " PYBOX_BOX_OUT : name_problem(name, lim->max_depth);
        if (problem == NULL && x->kind == 'l')
            problem = "it is a symbolic link";
        if (problem == NULL && x->kind == 'h')
            problem = "it is a hard link";
        if (problem == NULL && x->kind == 'o')
            problem = "it is a device, FIFO or socket";
        if (problem == NULL && x->kind == 'f') {
            if (x->bytes < 0 || x->bytes > lim->max_file)
                problem = "it is larger than the limit for one file";
            else if (o->returned_files >= lim->max_files)
                problem = "more files than the limit came back";
            else if (total + x->bytes > lim->max_total)
                problem = "it would pass the limit for all files";
        }
        /* Every folder that would be made counts, named or implied by a name below it. */
        if (problem == NULL && (x->kind == 'f' || x->kind == 'd')) {
            int added = count_new_folders(&made, name, x->kind == 'd');
            if (added < 0) {
                archive_read_free(r);
                folders_free(&made);
                return -1;
            }
            if (dirs + added > lim->max_dirs)
                problem = "more folders than the limit came back";
            else if (add_folders(&made, name, x->kind == 'd') < 0) {
                archive_read_free(r);
                folders_free(&made);
                return -1;
            } else
                dirs += added;
        }
        if (problem != NULL) {
            snprintf(x->reason, sizeof x->reason, "%s", problem);
            o->not_returned++;
        } else {
            x->returned = true;
            if (x->kind == 'f') {
                o->returned_files++;
                total += x->bytes;
            }
        }
        if (archive_read_data_skip(r) != ARCHIVE_OK) {
            hr = ARCHIVE_FATAL;
            break;
        }
    }
    folders_free(&made);
    if (hr != ARCHIVE_EOF) {
        refuse_all(o, "the box's archive of %s is damaged: %.120s", PYBOX_BOX_OUT,
                   archive_error_string(r) ? archive_error_string(r) : "truncated");
        archive_read_free(r);
        return 0;
    }
    archive_read_free(r);
    o->returned_bytes = total;
    char a[1100], b[1100];
    int clash = case_clash(o, a, sizeof a, b, sizeof b);
    if (clash < 0)
        return -1;
    if (clash) {
        char qa[QUOTED_MAX], qb[QUOTED_MAX];
        quoted(qa, a);
        quoted(qb, b);
        if (clash == 2)
            refuse_all(o,
                       "'%s' is named twice in the archive, names read in Unicode normal form C (a file and a file "
                       "or folder of that name, or one name composed and decomposed)",
                       qa);
        else
            refuse_all(o, "'%s' and '%s' differ only by case: such a folder cannot be copied everywhere", qa, qb);
    }
    return 0;
}

static void remove_tmp(const char *parent, const char *tmpname)
{
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return;
    (void)pybox_remove_tree_at(pfd, tmpname);
    close(pfd);
}

/* Open (making it, mode 0755, when missing) the folder a name sits in, one part at a
 * time, never following a link: whatever happens around the temporary folder, nothing is
 * written outside it. Returns the folder's descriptor (root itself for a top-level name)
 * and the name's last part in *leaf, or -1. */
static int open_parent(int root, const char *name, char *last, size_t lastlen)
{
    char buf[1100];
    snprintf(buf, sizeof buf, "%s", name);
    int dfd = dup(root);
    char *part = buf;
    for (char *s = strchr(part, '/'); dfd >= 0 && s; s = strchr(part, '/')) {
        *s = '\0';
        bool made = mkdirat(dfd, part, 0755) == 0;
        if (!made && errno != EEXIST) {
            close(dfd);
            return -1;
        }
        int next = openat(dfd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        if (next < 0 || (made && fchmod(next, 0755) < 0)) {
            if (next >= 0)
                close(next);
            return -1;
        }
        dfd = next;
        part = s + 1;
    }
    if (pybox_strlcpy(last, part, lastlen) < 0) { /* parts were checked to be at most 255 bytes */
        close(dfd);
        errno = ENAMETOOLONG;
        return -1;
    }
    return dfd;
}

/* Pass 2: write what comes back into a private temporary folder, then move it into
 * place in one rename. */
/* Written output files whose data is waited for together: a bound on the descriptors a
 * delivery holds (a server runs many at once) that still lets the disk work on several
 * files at a time. */
#define OUT_SYNC_BATCH 16

/* Wait for the n written files' data (fsync) and close them; rc < 0 (an earlier failure):
 * only closed. Returns rc, or -1 with err when a file could not be synced or closed. */
static int synced(int *fds, size_t *n, int rc, pybox_error_t *err)
{
    for (size_t i = 0; i < *n; i++) {
        if (rc == 0 && fsync(fds[i]) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "writing an output file");
        if (close(fds[i]) < 0 && rc == 0)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "writing an output file");
    }
    *n = 0;
    return rc;
}

static int deliver(const void *tar, size_t len, const pybox_output_spec_t *spec, const char *run_id, pybox_outputs_t *o,
                   pybox_error_t *err)
{
    char tmpname[NAME_MAX + 1];
    if (pybox_fmt(tmpname, sizeof tmpname, ".pybox-out-%.32s.tmp", run_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "output");
    /* The parent as it was checked, by descriptor: its name may point elsewhere by now. */
    int pfd = spec->parent_fd >= 0 ? dup(spec->parent_fd) : open(spec->parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", spec->parent);
    if (mkdirat(pfd, tmpname, 0700) < 0) {
        int e = errno;
        close(pfd);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "mkdir(%s/%s)", spec->parent, tmpname);
    }
    int root = openat(pfd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = root < 0 ? pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", tmpname) : 0;
    /* It must be the folder just made: ours, private, empty. */
    struct stat ts;
    if (rc == 0 && (fstat(root, &ts) < 0 || !S_ISDIR(ts.st_mode) || ts.st_uid != geteuid() ||
                    (ts.st_mode & 07777) != 0700 || ts.st_nlink != 2))
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, EEXIST,
                             "the temporary output folder %s/%s is not the one just made", spec->parent, tmpname);
    struct archive *r = rc == 0 ? open_tar(tar, len) : NULL;
    if (rc == 0 && r == NULL)
        rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the box's archive could not be read again");
    size_t idx = 0;
    struct archive_entry *e;
    char *buf = malloc(65536);
    /* Each file's descriptor, kept until all are written: each file's writeback is started
     * as soon as it is written and waited for at the end, so the disk works on all of them
     * at once instead of one sync after another (64 files of 100 KB: about 20 ms, not 60
     * to 120). */
    int written_fds[OUT_SYNC_BATCH];
    size_t n_written = 0;
    if (rc == 0 && buf == NULL)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "output");
    bool damaged = false;
    int hr;
    while (rc == 0 && !damaged && ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK || hr == ARCHIVE_WARN)) {
        const char *rel = inside_out(entry_name(e));
        if (rel != NULL && rel[0] == '\0')
            continue;
        if (idx >= o->n)
            break;
        pybox_out_entry_t *x = &o->entries[idx++];
        if (!x->returned)
            continue;
        char leaf[NAME_MAX + 1];
        int dfd = open_parent(root, x->name, leaf, sizeof leaf);
        if (dfd < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "creating folders for an output file");
            break;
        }
        if (x->kind == 'd') {
            /* modes set outright, on the folder itself: no umask, no link followed */
            bool made = mkdirat(dfd, leaf, 0755) == 0;
            int sub =
                (made || errno == EEXIST) ? openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (sub < 0 || fchmod(sub, 0755) < 0)
                rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "creating an output folder");
            if (sub >= 0)
                close(sub);
            close(dfd);
            continue;
        }
        int fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        close(dfd);
        if (fd < 0 || fchmod(fd, 0644) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "creating an output file");
            if (fd >= 0)
                close(fd);
            break;
        }
        EVP_MD_CTX *md = pybox_digest_start();
        if (md == NULL) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a digest");
            close(fd);
            break;
        }
        int64_t written = 0;
        for (;;) {
            la_ssize_t got = archive_read_data(r, buf, 65536);
            if (got < 0) {
                damaged = true;
                break;
            }
            if (got == 0)
                break;
            if (written + got > x->bytes) {
                damaged = true;
                break;
            }
            EVP_DigestUpdate(md, buf, (size_t)got);
            if (pybox_write_all(fd, buf, (size_t)got) < 0) {
                rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "writing an output file");
                break;
            }
            written += got;
        }
        if (!pybox_digest_done(md, x->sha256) && rc == 0)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the digest of an output file could not be finished");
        if (written != x->bytes)
            damaged = true;
        /* Trace each file to the run that made it, where the filesystem allows. */
        if (!damaged && rc == 0 && fsetxattr(fd, "user.pybox.run", run_id, strlen(run_id), 0) < 0)
            o->xattr_failed = true;
        if (!damaged && rc == 0) {
            (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a start only: the fsync says */
            written_fds[n_written++] = fd;
            if (n_written == OUT_SYNC_BATCH)
                rc = synced(written_fds, &n_written, rc, err);
        } else if (close(fd) < 0 && rc == 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "writing an output file");
        }
    }
    int src = synced(written_fds, &n_written, damaged ? -1 : rc, err); /* damaged: only closed */
    if (rc == 0 && !damaged && src < 0)
        rc = -1;
    free(buf);
    if (r)
        archive_read_free(r);
    if (rc == 0 && damaged) {
        refuse_all(o, "the box's archive of %s is damaged: a file's data does not match its size", PYBOX_BOX_OUT);
    } else if (rc == 0) {
        /* A new output folder gets 0755; an existing (empty) one keeps its mode, but never
         * a bit that would let anyone else change what the receipt lists. */
        mode_t mode = !spec->existed ? 0755 : spec->owner_relaxed ? spec->mode : spec->mode & PYBOX_OUT_MODE_KEEP;
        if (fchmod(root, mode) < 0 || fsync(root) < 0 || renameat(pfd, tmpname, pfd, spec->base) < 0) {
            int en = errno;
            rc =
                pybox_error_set(err, PYBOX_ERR_SYSTEM, en, "moving the output into place (%s): the files stay in %s/%s",
                                spec->dir, spec->parent, tmpname);
            if (root >= 0)
                close(root);
            close(pfd);
            return rc; /* lose nothing: the files stay where they are */
        }
        o->status = PYBOX_OUT_DELIVERED;
        snprintf(o->dir, sizeof o->dir, "%s", spec->dir);
    }
    if (root >= 0)
        close(root);
    close(pfd);
    if (o->status != PYBOX_OUT_DELIVERED)
        remove_tmp(spec->parent, tmpname);
    return rc;
}

int pybox_outputs_ingest(const void *tar, size_t len, const pybox_output_spec_t *spec, const char *run_id,
                         const pybox_ingest_limits_t *lim, pybox_outputs_t *o, pybox_error_t *err)
{
    locale_t old = utf8_begin();
    int rc = survey(tar, len, lim, o);
    if (rc < 0)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "reading the box's output");
    else if (o->status != PYBOX_OUT_REFUSED)
        rc = deliver(tar, len, spec, run_id, o, err);
    utf8_end(old);
    return rc;
}

int pybox_output_tmp_path(const pybox_output_spec_t *spec, const char *run_id, char *out, size_t len)
{
    return pybox_fmt(out, len, "%s/.pybox-out-%.32s.tmp", spec->parent, run_id);
}

int pybox_output_tmp_remove(const char *path, const char *run_id)
{
    char want[64];
    snprintf(want, sizeof want, ".pybox-out-%.32s.tmp", run_id);
    const char *slash = strrchr(path, '/');
    if (slash == NULL || strcmp(slash + 1, want) != 0)
        return 0;
    char parent[PATH_MAX];
    size_t plen = (size_t)(slash - path);
    if (plen == 0 || plen >= sizeof parent)
        return 0;
    memcpy(parent, path, plen);
    parent[plen] = '\0';
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return 0;
    struct stat sb;
    int removed = 0;
    if (fstatat(pfd, want, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid()) {
        close(pfd);
        remove_tmp(parent, want);
        removed = 1;
    } else {
        close(pfd);
    }
    return removed;
}
