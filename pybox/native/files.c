/* SPDX-License-Identifier: MIT */
/* Files in and out of a native box (see sandbox.h): inputs unpacked into the staging
 * folder bound at /box/in; /box/out read through /proc/<init>/root, never following a
 * link the program made. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../archive_api.h"
#include "../bounds.h"
#include "../escape.h"
#include "../util.h"
#include "internal.h"

#define IN_ENTRIES_MAX 10000
/* /box/out is packed whole, as the engine's archive has it, and bounded by the archive's
 * size (every entry takes a 512-byte header of it): what comes back of it, how many
 * files and how deep, is for the reader of the archive (files.c) to say, entry by entry.
 * Only the nesting is bounded here (a descriptor per level), far below anything that
 * could come back: a folder nested deeper fails the copy, saying so. */
#define OUT_DEPTH_MAX 64

static void archive_readp(struct archive **a)
{
    if (*a != NULL)
        archive_read_free(*a);
}

static void archive_writep(struct archive **a)
{
    if (*a != NULL)
        archive_write_free(*a);
}

/* A relative name of clean parts: no "", ".", ".." and not absolute. */
static bool clean_name(const char *n)
{
    if (n == NULL || n[0] == '\0' || n[0] == '/' || strlen(n) > PATH_MAX - 256)
        return false;
    const char *p = n;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        if ((l == 0 && slash != NULL && slash[1] != '\0') || (l == 1 && p[0] == '.') ||
            (l == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += l;
        if (*p == '/')
            p++;
    }
    return true;
}

int pybox_native_put_files(pybox_native_box_t *b, const void *tar, size_t len, pybox_error_t *err)
{
    if (!b->own_in)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: no staging folder at /box/in to fill");
    if (len > (size_t)PYBOX_INPUT_MAX * 2)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: an input archive of %zu bytes", len);
    __attribute__((cleanup(archive_readp))) struct archive *r = archive_read_new();
    __attribute__((cleanup(archive_writep))) struct archive *w = archive_write_disk_new();
    if (r == NULL || w == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "unpacking the inputs: %s", pybox_archive_why());
    archive_read_support_format_tar(r);
    /* Owners and modes as packed (root, read-only); no links. Names are checked here and
     * then made absolute under in/, so libarchive's own refusal of absolute names cannot
     * be used; its checks of ".." and of links on the way stay. */
    /* Rootless: the user's own, which is root in the box. */
    archive_write_disk_set_options(w, (geteuid() == 0 ? ARCHIVE_EXTRACT_OWNER : 0) | ARCHIVE_EXTRACT_PERM |
                                          ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_NO_OVERWRITE);
    if (archive_read_open_memory(r, tar, len) != ARCHIVE_OK)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: the input archive: %s", archive_error_string(r));
    struct archive_entry *e;
    int entries = 0;
    int64_t total = 0;
    int rc;
    /* The packer's names are UTF-8 in pax headers: taken as such, whatever this process's
     * locale (the C locale cannot convert them, a warning only), and written as those bytes. */
    while ((rc = archive_read_next_header(r, &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
        const char *name = archive_entry_pathname_utf8(e);
        if (name == NULL)
            name = archive_entry_pathname(e);
        char shown[256];
        pybox_escape_short(shown, sizeof shown, name ? name : "", 200);
        mode_t type = archive_entry_filetype(e);
        if (++entries > IN_ENTRIES_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: more than %d input entries", IN_ENTRIES_MAX);
        if (!clean_name(name))
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: input entry %s: not a clean relative name",
                                   shown);
        if (type != AE_IFREG && type != AE_IFDIR)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "native box: input entry %s: neither a regular file nor a folder", shown);
        if (archive_entry_hardlink(e) != NULL || archive_entry_symlink(e) != NULL)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: input entry %s: a link", shown);
        total += archive_entry_size(e);
        if (total > PYBOX_INPUT_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: the inputs are larger than %lld bytes",
                                   (long long)PYBOX_INPUT_MAX);
        char path[PATH_MAX];
        if (pybox_fmt(path, sizeof path, "%s/%s", b->in_dir, name) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "native box: input entry %s", shown);
        archive_entry_set_pathname(e, path);
        if (archive_write_header(w, e) != ARCHIVE_OK)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, archive_errno(w), "native box: unpacking %s: %s", shown,
                                   archive_error_string(w));
        const void *buf;
        size_t n;
        la_int64_t off;
        int dr;
        while ((dr = archive_read_data_block(r, &buf, &n, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(w, buf, n, off) != ARCHIVE_OK)
                return pybox_error_set(err, PYBOX_ERR_SYSTEM, archive_errno(w), "native box: writing %s: %s", shown,
                                       archive_error_string(w));
        if (dr != ARCHIVE_EOF)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: input entry %s: %s", shown,
                                   archive_error_string(r));
        if (archive_write_finish_entry(w) != ARCHIVE_OK)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, archive_errno(w), "native box: finishing %s: %s", shown,
                                   archive_error_string(w));
    }
    if (rc != ARCHIVE_EOF)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "native box: the input archive: %s", archive_error_string(r));
    if (archive_write_close(w) != ARCHIVE_OK)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, archive_errno(w), "native box: unpacking: %s",
                               archive_error_string(w));
    return 0;
}

/* ---- out ---- */

/* A file met under a name already (it has more than one): its later names are hard
 * links to that one, as the engine's archive has them. */
typedef struct seen_file {
    dev_t dev;
    ino_t ino;
    char name[]; /* the file's first name in the archive */
} seen_file_t;

typedef struct packer {
    struct archive *a;
    pybox_buf_t *out;
    bool too_big;
    void *seen; /* a tsearch tree of seen_file_t, by (dev, ino): a program's links cost log n each */
} packer_t;

static void packer_free(packer_t *k)
{
    tdestroy(k->seen, free);
    k->seen = NULL;
}

static int seen_cmp(const void *a, const void *b)
{
    const seen_file_t *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The first name of a file with several, or NULL (then this is its first, noted). */
static const char *first_name(packer_t *k, const struct stat *sb, const char *name, pybox_error_t *err, int *rc)
{
    *rc = 0;
    if (sb->st_nlink < 2)
        return NULL;
    size_t n = strlen(name) + 1;
    seen_file_t *f = malloc(sizeof *f + n);
    if (f == NULL) {
        *rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "packing /box/out");
        return NULL;
    }
    f->dev = sb->st_dev;
    f->ino = sb->st_ino;
    memcpy(f->name, name, n);
    seen_file_t **at = tsearch(f, &k->seen, seen_cmp);
    if (at == NULL) {
        free(f);
        *rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "packing /box/out");
        return NULL;
    }
    if (*at != f) { /* seen before: its first name */
        free(f);
        return (*at)->name;
    }
    return NULL;
}

static la_ssize_t to_buf(struct archive *a, void *arg, const void *data, size_t len)
{
    packer_t *k = arg;
    (void)a;
    if (pybox_buf_append(k->out, data, len) < 0) {
        k->too_big = true;
        return -1;
    }
    return (la_ssize_t)len;
}

static int header(packer_t *k, const char *name, const struct stat *sb, const char *link, const char *hardlink,
                  pybox_error_t *err)
{
    struct archive_entry *e = archive_entry_new();
    if (e == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "archive_entry_new");
    archive_entry_set_pathname(e, name);
    archive_entry_copy_stat(e, sb);
    if (!S_ISREG(sb->st_mode) || hardlink != NULL)
        archive_entry_set_size(e, 0);
    if (link != NULL)
        archive_entry_set_symlink(e, link);
    if (hardlink != NULL)
        archive_entry_set_hardlink(e, hardlink);
    int rc = archive_write_header(k->a, e);
    archive_entry_free(e);
    if (rc != ARCHIVE_OK)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, k->too_big ? EFBIG : 0, "native box: packing /box/out: %s",
                               archive_error_string(k->a));
    return 0;
}

static int pack_file(packer_t *k, int fd, const struct stat *sb, pybox_error_t *err)
{
    char buf[65536];
    int64_t left = sb->st_size;
    while (left > 0) {
        ssize_t r = read(fd, buf, left < (int64_t)sizeof buf ? (size_t)left : sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            /* Shorter than it said: the rest as zeros, so the archive stays whole. */
            memset(buf, 0, sizeof buf);
            r = left < (int64_t)sizeof buf ? (ssize_t)left : (ssize_t)sizeof buf;
        }
        if (archive_write_data(k->a, buf, (size_t)r) != r)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, k->too_big ? EFBIG : 0, "native box: packing /box/out: %s",
                                   archive_error_string(k->a));
        left -= r;
    }
    return 0;
}

/* A name that went, or became something else, between the listing and its opening: left
 * out, as the engine's archive would not have it either. Any other failure is PyBox's
 * own (out of descriptors or memory), and fails the copy rather than leave the entry out
 * unsaid. */
static bool changed_meanwhile(int e)
{
    return e == ENOENT || e == ELOOP || e == ENOTDIR;
}

/* An entry that could not be looked at or opened (errno e): 0 when it changed meanwhile
 * (left out), else -1 with err set. */
static int entry_failed(int e, const char *name, pybox_error_t *err)
{
    if (changed_meanwhile(e))
        return 0;
    char shown[256];
    pybox_escape_short(shown, sizeof shown, name, 200);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "native box: packing /box/out: opening %s", shown);
}

static int walk(packer_t *k, int dfd, const char *prefix, int depth, pybox_error_t *err)
{
    if (depth > OUT_DEPTH_MAX)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ELOOP,
                               "native box: /box/out has folders nested more than %d deep", OUT_DEPTH_MAX);
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fcntl(F_DUPFD_CLOEXEC)");
    DIR *d = fdopendir(dup);
    if (d == NULL) {
        close(dup);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fdopendir(/box/out)");
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char name[PATH_MAX]; /* room for a folder's "/" after it */
        if (pybox_fmt(name, sizeof name - 1, "%s/%s", prefix, de->d_name) < 0) {
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG,
                                 "native box: a name in /box/out is longer than %d bytes", PATH_MAX - 2);
            break;
        }
        struct stat sb;
        if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = entry_failed(errno, name, err);
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            int fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                rc = entry_failed(errno, name, err);
                continue;
            }
            char dn[PATH_MAX];
            if (pybox_fmt(dn, sizeof dn, "%s/", name) < 0 || header(k, dn, &sb, NULL, NULL, err) < 0 ||
                walk(k, fd, name, depth + 1, err) < 0)
                rc = -1;
            close(fd);
        } else if (S_ISREG(sb.st_mode)) {
            /* O_NOFOLLOW and no blocking: the name may have been swapped for a link or a
             * FIFO since fstatat; what is read is what fstat of the open file says. */
            int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
                rc = entry_failed(errno, name, err);
                continue;
            }
            if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
                const char *first = first_name(k, &sb, name, err, &rc);
                if (rc == 0 && first != NULL)
                    rc = header(k, name, &sb, NULL, first, err); /* another name of a file packed */
                else if (rc == 0)
                    rc = header(k, name, &sb, NULL, NULL, err) < 0 || pack_file(k, fd, &sb, err) < 0 ? -1 : 0;
            }
            close(fd);
        } else if (S_ISLNK(sb.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(dfd, de->d_name, target, sizeof target - 1);
            if (n < 0) {
                rc = errno == EINVAL ? 0 : entry_failed(errno, name, err);
                continue;
            }
            target[n] = '\0';
            rc = header(k, name, &sb, target, NULL, err);
        } else if (S_ISSOCK(sb.st_mode)) {
            /* pax has no kind for a socket (libarchive refuses it, which would cost every
             * other file): left out, as the engine's archive leaves it out. */
        } else {
            rc = header(k, name, &sb, NULL, NULL, err); /* shown as what it is, no content */
        }
    }
    closedir(d);
    return rc;
}

static int get_files_here(pybox_native_box_t *b, size_t max, pybox_buf_t *out, pybox_error_t *err)
{
    pybox_buf_init(out, max);
    if (b->reaped || b->pid <= 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "native box: not running, /box/out is gone");
    /* This process is init's parent and has not reaped it: the pid is still init's. */
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)b->pid);
    _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", root);
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int ofd = (int)syscall(SYS_openat2, rfd, "box/out", &how, sizeof how);
    if (ofd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "openat2(%s/box/out)", root);
    packer_t k = {.out = out};
    __attribute__((cleanup(archive_writep))) struct archive *a = archive_write_new();
    if (a == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "packing /box/out: %s", pybox_archive_why());
    k.a = a;
    archive_write_set_format_pax_restricted(a);
    /* Names as the bytes the program chose (the engine's archives do the same): never
     * converted through this process's locale, which would refuse anything not ASCII. */
    archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY");
    archive_write_set_bytes_in_last_block(a, 1);
    if (archive_write_open(a, &k, NULL, to_buf, NULL) != ARCHIVE_OK)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "archive_write_open: %s", archive_error_string(a));
    struct stat sb;
    int rc = 0;
    if (fstat(ofd, &sb) < 0)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat(/box/out)");
    if (rc == 0 && (header(&k, "out/", &sb, NULL, NULL, err) < 0 || walk(&k, ofd, "out", 1, err) < 0))
        rc = -1;
    packer_free(&k);
    if (rc == 0 && archive_write_close(a) != ARCHIVE_OK)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, k.too_big ? EFBIG : 0, "native box: packing /box/out: %s",
                             archive_error_string(a));
    if (rc == 0 && k.too_big)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, EFBIG, "native box: /box/out is larger than %zu bytes", max);
    if (rc < 0) {
        if (k.too_big && err != NULL && err->errnum != EFBIG) {
            pybox_error_t e2 = {0};
            pybox_error_set(&e2, PYBOX_ERR_SYSTEM, EFBIG, "native box: /box/out is larger than %zu bytes", max);
            *err = e2;
        }
        pybox_buf_free(out);
    }
    return rc;
}

/* What a rootless box's /box/out holds is the program's (its uid from the user's
 * subordinate range, mode 0700), which the user may not read from outside: a child of
 * PyBox's joins the box's user namespace (where the user, its owner, has every
 * capability, over the ids mapped there and no others) and packs it there, with the
 * same walk; the archive and any error come back on a pipe. */
typedef struct {
    int rc, kind, errnum;
    uint32_t msg_len;
    uint64_t data_len;
} packed_head_t;

int pybox_native_get_files(pybox_native_box_t *b, size_t max, pybox_buf_t *out, pybox_error_t *err)
{
    if (!b->rootless)
        return get_files_here(b, max, out, err);
    pybox_buf_init(out, max);
    if (b->reaped || b->pid <= 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "native box: not running, /box/out is gone");
    char ns[64];
    snprintf(ns, sizeof ns, "/proc/%d/ns/user", (int)b->pid);
    _cleanup_close_ int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", ns);
    int pfd;
    pid_t pid = pybox_fork_piped(&pfd, err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        pybox_buf_t data;
        pybox_error_t cerr = {0};
        packed_head_t h = {0};
        if (setns(nsfd, CLONE_NEWUSER) < 0)
            h.rc = pybox_error_set(&cerr, PYBOX_ERR_SYSTEM, errno, "joining the box's user namespace (%s)", ns);
        else
            h.rc = get_files_here(b, max, &data, &cerr);
        h.kind = (int)cerr.kind;
        h.errnum = cerr.errnum;
        h.msg_len = h.rc < 0 ? (uint32_t)strlen(cerr.msg) : 0;
        h.data_len = h.rc < 0 ? 0 : data.len;
        if (pybox_write_all(pfd, &h, sizeof h) < 0 || pybox_write_all(pfd, cerr.msg, h.msg_len) < 0 ||
            (h.data_len > 0 && pybox_write_all(pfd, data.data, data.len) < 0))
            _exit(1);
        _exit(0);
    }
    packed_head_t h;
    char msg[PYBOX_ERROR_MSG_MAX];
    int rc = 0;
    if (pybox_read_exact(pfd, &h, sizeof h) < 0 || h.msg_len >= sizeof msg || h.data_len > max ||
        pybox_read_exact(pfd, msg, h.msg_len) < 0) {
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, EPROTO, "native box: packing /box/out in its user namespace");
    } else if (h.rc < 0) {
        msg[h.msg_len] = '\0';
        rc = pybox_error_set(err, h.kind > 0 ? (pybox_error_kind_t)h.kind : PYBOX_ERR_SYSTEM, h.errnum, "%s", msg);
    } else {
        _cleanup_free_ char *data = h.data_len > 0 ? malloc(h.data_len) : NULL;
        if (h.data_len > 0 && (data == NULL || pybox_read_exact(pfd, data, h.data_len) < 0))
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, data == NULL ? ENOMEM : EPROTO,
                                 "native box: the packed /box/out");
        else if (h.data_len > 0 && pybox_buf_append(out, data, h.data_len) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "native box: the packed /box/out");
    }
    close(pfd);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (rc < 0)
        pybox_buf_free(out);
    return rc;
}
