/* SPDX-License-Identifier: MIT */
/* Unit tests for files in and out of a box (files.h): packing inputs, checking and filling the output folder. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../pybox/bounds.h"
#include "../pybox/buf.h"
#include "../pybox/escape.h"
#include "../pybox/files.h"
#include "../pybox/policy.h"
#include "../pybox/util.h"
#include "suites.h"

#define RUN_ID "0123456789abcdef0123456789abcdef"
#define TMP_PREFIX ".pybox-out-"

/* One private folder per test case (made and removed by the runner's own process, so it
 * goes even when a test fails), and one folder per test inside it. */
static char root_dir[PATH_MAX];
static char work[PATH_MAX];

static void case_setup(void)
{
    ck_assert_int_eq(pybox_fmt(root_dir, sizeof root_dir, "/tmp/pybox-unit-files-XXXXXX"), 0);
    ck_assert_ptr_nonnull(mkdtemp(root_dir));
}

static void case_teardown(void)
{
    unit_rm_tree(root_dir);
    root_dir[0] = '\0';
}

static void test_setup(void)
{
    umask(022);
    ck_assert_int_eq(pybox_fmt(work, sizeof work, "%s/t-XXXXXX", root_dir), 0);
    ck_assert_ptr_nonnull(mkdtemp(work));
}

static void test_teardown(void)
{
    unit_rm_tree(work);
    work[0] = '\0';
}

/* work/name into out (PATH_MAX bytes). */
static void path_in(char *out, const char *name)
{
    ck_assert_int_eq(pybox_fmt(out, PATH_MAX, "%s/%s", work, name), 0);
}

static void write_file_at(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pybox_write_all(fd, data, len), 0);
    ck_assert_int_eq(close(fd), 0);
}

static void make_dir_at(const char *path)
{
    ck_assert_msg(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
}

/* The whole of a file (NUL-terminated, not counted); NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *data = NULL;
    bool over = false;
    pybox_error_t err = {0};
    int rc = pybox_read_bounded(fd, 64 * 1024 * 1024, &data, len, &over, &err);
    close(fd);
    return rc == 0 && !over ? data : NULL;
}

static bool exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* The names in a folder, sorted, joined by '|' ("" when empty); -1 if it cannot be read. */
static int listing(const char *dir, char *out, size_t len)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return -1;
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    int count = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0) {
            if (count++ > 0)
                pybox_buf_adds(&b, "|");
            pybox_buf_adds(&b, nm);
        }
        free(names[i]);
    }
    free(names);
    snprintf(out, len, "%s", b.data ? b.data : "");
    pybox_buf_free(&b);
    return count;
}

/* Any leftover temporary output folder in dir. */
static bool has_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    bool found = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0)
            found = true;
    closedir(d);
    return found;
}

/* Counts of what lies under a folder, links not followed. */
static int tree_files, tree_dirs, tree_other;

static int count_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F && S_ISREG(sb->st_mode))
        tree_files++;
    else if (flag == FTW_D && S_ISDIR(sb->st_mode))
        tree_dirs++;
    else
        tree_other++;
    return 0;
}

static void count_tree(const char *dir)
{
    tree_files = tree_dirs = tree_other = 0;
    ck_assert_int_eq(nftw(dir, count_entry, 16, FTW_PHYS), 0);
}

/* Can this filesystem hold user extended attributes? */
static bool user_xattrs_work(const char *dir)
{
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/xattr-probe", dir), 0);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    bool ok = fsetxattr(fd, "user.pybox.probe", "1", 1, 0) == 0;
    close(fd);
    ck_assert_int_eq(unlink(p), 0);
    return ok;
}

/* ---- building archives as the engine would hand them back ---- */

typedef struct {
    struct archive *a;
    pybox_buf_t buf;
    bool utf8; /* names are given as UTF-8 (as pax carries them) rather than raw bytes */
} tw_t;

/* libarchive writes a pax name from UTF-8 only in a UTF-8 locale; the module itself
 * always reads in the C locale, as the program runs. */
static void writer_locale(bool utf8)
{
    ck_assert_ptr_nonnull(setlocale(LC_CTYPE, utf8 ? "C.UTF-8" : "C"));
}

static la_ssize_t tw_write(struct archive *a, void *arg, const void *data, size_t len)
{
    (void)a;
    return pybox_buf_append(arg, data, len) == 0 ? (la_ssize_t)len : -1;
}

static void tw_open_utf8(tw_t *t, int format, bool utf8)
{
    memset(t, 0, sizeof *t);
    t->utf8 = utf8;
    writer_locale(utf8);
    pybox_buf_init(&t->buf, 64 * 1024 * 1024);
    t->a = archive_write_new();
    ck_assert_ptr_nonnull(t->a);
    ck_assert_int_eq(archive_write_set_format(t->a, format), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_set_bytes_in_last_block(t->a, 1), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open2(t->a, &t->buf, NULL, tw_write, NULL, NULL), ARCHIVE_OK);
}

static void tw_open(tw_t *t, int format)
{
    tw_open_utf8(t, format, false);
}

static struct archive_entry *tw_new(const tw_t *t, const char *name, mode_t type, mode_t perm, int64_t size)
{
    struct archive_entry *e = archive_entry_new();
    ck_assert_ptr_nonnull(e);
    if (t->utf8)
        archive_entry_set_pathname_utf8(e, name);
    else
        archive_entry_copy_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, size);
    archive_entry_set_uid(e, 1000);
    archive_entry_set_gid(e, 1000);
    archive_entry_set_mtime(e, 1700000000, 0);
    return e;
}

static void tw_put(tw_t *t, struct archive_entry *e, const void *data, size_t len)
{
    int rc = archive_write_header(t->a, e);
    ck_assert_msg(rc == ARCHIVE_OK || rc == ARCHIVE_WARN, "writing a header: %s", archive_error_string(t->a));
    archive_entry_free(e);
    if (len > 0)
        ck_assert_int_eq(archive_write_data(t->a, data, len), (la_ssize_t)len);
}

static void tw_dir(tw_t *t, const char *name)
{
    tw_put(t, tw_new(t, name, AE_IFDIR, 0755, 0), NULL, 0);
}

static void tw_file_mode(tw_t *t, const char *name, const void *data, size_t len, mode_t perm)
{
    tw_put(t, tw_new(t, name, AE_IFREG, perm, (int64_t)len), data, len);
}

static void tw_file(tw_t *t, const char *name, const char *text)
{
    tw_file_mode(t, name, text, strlen(text), 0644);
}

static void tw_symlink(tw_t *t, const char *name, const char *target)
{
    struct archive_entry *e = tw_new(t, name, AE_IFLNK, 0777, 0);
    archive_entry_copy_symlink(e, target);
    tw_put(t, e, NULL, 0);
}

static void tw_hardlink(tw_t *t, const char *name, const char *target)
{
    struct archive_entry *e = tw_new(t, name, AE_IFREG, 0644, 0);
    archive_entry_copy_hardlink(e, target);
    tw_put(t, e, NULL, 0);
}

static void tw_special(tw_t *t, const char *name, mode_t type)
{
    struct archive_entry *e = tw_new(t, name, type, 0644, 0);
    if (type == AE_IFCHR || type == AE_IFBLK) {
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
    }
    tw_put(t, e, NULL, 0);
}

/* Finish the archive; the caller owns t->buf. */
static void tw_close(tw_t *t)
{
    ck_assert_int_eq(archive_write_close(t->a), ARCHIVE_OK);
    archive_write_free(t->a);
    t->a = NULL;
    writer_locale(false);
}

/* The offset of the ustar header block of an entry with this (short) name. */
static size_t header_at(const pybox_buf_t *b, const char *name)
{
    size_t nl = strlen(name);
    for (size_t off = 0; off + 512 <= b->len; off += 512) {
        const char *h = b->data + off;
        if (memcmp(h, name, nl) == 0 && h[nl] == '\0' && memcmp(h + 257, "ustar", 5) == 0)
            return off;
    }
    ck_abort_msg("no header for %s", name);
    return 0;
}

/* Set a header's size field in base-256 (as GNU tar does for large sizes), fix its checksum. */
static void set_size_base256(char *h, int64_t size)
{
    uint64_t v = (uint64_t)size;
    h[124] = (char)(size < 0 ? 0xff : 0x80);
    for (int i = 0; i < 11; i++)
        h[135 - i] = (char)(i < 8 ? (v >> (8 * i)) & 0xff : (size < 0 ? 0xff : 0));
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    char ck[8];
    snprintf(ck, sizeof ck, "%06o", sum);
    memcpy(h + 148, ck, 7);
    h[155] = ' ';
}

/* ---- running the ingest ---- */

/* Check target (as the CLI would), then ingest the archive into it. */
static int ingest_lim(const pybox_buf_t *tar, const char *target, const pybox_ingest_limits_t *lim, pybox_outputs_t *o,
                      pybox_error_t *err)
{
    pybox_output_spec_t spec;
    pybox_error_t cerr = {0};
    ck_assert_msg(pybox_output_check(target, &spec, &cerr) == 0, "output check: %s", cerr.msg);
    pybox_ingest_limits_t dl;
    if (lim == NULL) {
        pybox_ingest_limits_default(&dl);
        lim = &dl;
    }
    pybox_outputs_init(o);
    return pybox_outputs_ingest(tar->data, tar->len, &spec, RUN_ID, lim, o, err);
}

static int ingest(const pybox_buf_t *tar, const char *target, pybox_outputs_t *o, pybox_error_t *err)
{
    return ingest_lim(tar, target, NULL, o, err);
}

static const pybox_out_entry_t *entry_named(const pybox_outputs_t *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->entries[i].name, name) == 0)
            return &o->entries[i];
    return NULL;
}

static const pybox_out_entry_t *must_entry(const pybox_outputs_t *o, const char *name)
{
    const pybox_out_entry_t *x = entry_named(o, name);
    ck_assert_msg(x != NULL, "no entry for '%s'", name);
    return x;
}

static void assert_not_back(const pybox_outputs_t *o, const char *name, const char *why)
{
    const pybox_out_entry_t *x = must_entry(o, name);
    ck_assert_msg(!x->returned, "'%s' came back", name);
    ck_assert_msg(strstr(x->reason, why) != NULL, "'%s': reason '%s', wanted '%s'", name, x->reason, why);
}

/* A file under the delivered folder: its content equals data, mode 0644, traced to the run. */
static void assert_delivered_file(const char *target, const char *rel, const void *data, size_t len, bool xattrs)
{
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", target, rel), 0);
    struct stat sb;
    ck_assert_msg(lstat(p, &sb) == 0, "%s missing", rel);
    ck_assert_msg(S_ISREG(sb.st_mode), "%s is not a regular file", rel);
    ck_assert_msg((sb.st_mode & 07777) == 0644, "%s has mode %o", rel, (unsigned)(sb.st_mode & 07777));
    size_t got = 0;
    char *content = slurp(p, &got);
    ck_assert_ptr_nonnull(content);
    ck_assert_uint_eq(got, len);
    if (len > 0)
        ck_assert_mem_eq(content, data, len);
    free(content);
    char v[128];
    ssize_t vl = getxattr(p, "user.pybox.run", v, sizeof v);
    if (xattrs) {
        ck_assert_int_eq(vl, (ssize_t)strlen(RUN_ID));
        ck_assert_mem_eq(v, RUN_ID, strlen(RUN_ID));
    } else {
        ck_assert_int_lt(vl, 0);
    }
}

static void assert_dir_mode(const char *path, mode_t mode)
{
    struct stat sb;
    ck_assert_msg(lstat(path, &sb) == 0, "%s missing", path);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_uint_eq(sb.st_mode & 07777, mode);
}

/* A refusal of the whole transfer: a verdict, no folder, nothing left behind. */
static void assert_refused(int rc, const pybox_outputs_t *o, const pybox_error_t *err, const char *target,
                           const char *why)
{
    ck_assert_msg(rc == 0, "ingest failed: %s", err->msg);
    ck_assert_int_eq(o->status, PYBOX_OUT_REFUSED);
    ck_assert_msg(strstr(o->reason, why) != NULL, "reason '%s', wanted '%s'", o->reason, why);
    ck_assert_int_eq(o->returned_files, 0);
    ck_assert_int_eq(o->returned_bytes, 0);
    for (size_t i = 0; i < o->n; i++)
        ck_assert(!o->entries[i].returned);
    ck_assert(!exists(target));
    char parent[PATH_MAX];
    ck_assert_int_eq(pybox_strlcpy(parent, target, sizeof parent), 0);
    *strrchr(parent, '/') = '\0';
    ck_assert(!has_tmp(parent));
}

/* ---- out: what comes back ---- */

START_TEST(out_plain_delivered)
{
    static const char a_txt[] = "hello, world\n";
    unsigned char bin[3000];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)(i * 7 + 3);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file_mode(&t, "out/a.txt", a_txt, strlen(a_txt), 0755); /* exec bits do not come back */
    tw_dir(&t, "out/sub/");
    tw_file_mode(&t, "out/sub/b.bin", bin, sizeof bin, 0600);
    tw_close(&t);

    bool xattrs = user_xattrs_work(work);
    char target[PATH_MAX];
    path_in(target, "result");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_str_eq(o.dir, target);
    ck_assert_int_eq(o.returned_files, 2);
    ck_assert_int_eq(o.returned_bytes, (int64_t)(strlen(a_txt) + sizeof bin));
    ck_assert_int_eq(o.not_returned, 0);
    ck_assert_uint_eq(o.n, 3);
    ck_assert_int_eq(o.xattr_failed, !xattrs);

    const pybox_out_entry_t *a = must_entry(&o, "a.txt");
    char sha[65];
    ck_assert(a->returned);
    ck_assert_int_eq(a->kind, 'f');
    ck_assert_int_eq(a->bytes, (int64_t)strlen(a_txt));
    pybox_sha256_hex(a_txt, strlen(a_txt), sha);
    ck_assert_str_eq(a->sha256, sha);
    const pybox_out_entry_t *sub = must_entry(&o, "sub");
    ck_assert(sub->returned);
    ck_assert_int_eq(sub->kind, 'd');
    const pybox_out_entry_t *b = must_entry(&o, "sub/b.bin");
    ck_assert(b->returned);
    ck_assert_int_eq(b->bytes, (int64_t)sizeof bin);
    pybox_sha256_hex(bin, sizeof bin, sha);
    ck_assert_str_eq(b->sha256, sha);

    assert_delivered_file(target, "a.txt", a_txt, strlen(a_txt), xattrs);
    assert_delivered_file(target, "sub/b.bin", bin, sizeof bin, xattrs);
    assert_dir_mode(target, 0755);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/sub", target), 0);
    assert_dir_mode(p, 0755);
    count_tree(target);
    ck_assert_int_eq(tree_files, 2);
    ck_assert_int_eq(tree_dirs, 2);
    ck_assert_int_eq(tree_other, 0);
    char names[1024];
    ck_assert_int_eq(listing(work, names, sizeof names), 1);
    ck_assert_str_eq(names, "result");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_empty_archive)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "empty");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_int_eq(o.returned_files, 0);
    assert_dir_mode(target, 0755);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 0);
    ck_assert(!has_tmp(work));
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_links_and_specials_not_back)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/keep.txt", "kept");
    tw_symlink(&t, "out/link", "/etc/passwd");
    tw_hardlink(&t, "out/hard", "out/keep.txt");
    tw_special(&t, "out/fifo", AE_IFIFO);
    tw_special(&t, "out/null", AE_IFCHR);
    tw_special(&t, "out/disk", AE_IFBLK);
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_int_eq(o.returned_files, 1);
    ck_assert_int_eq(o.not_returned, 5);
    assert_not_back(&o, "link", "symbolic link");
    ck_assert_int_eq(must_entry(&o, "link")->kind, 'l');
    assert_not_back(&o, "hard", "hard link");
    ck_assert_int_eq(must_entry(&o, "hard")->kind, 'h');
    assert_not_back(&o, "fifo", "FIFO");
    ck_assert_int_eq(must_entry(&o, "fifo")->kind, 'o');
    assert_not_back(&o, "null", "device");
    assert_not_back(&o, "disk", "device");
    ck_assert(must_entry(&o, "keep.txt")->returned);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 1);
    ck_assert_str_eq(names, "keep.txt");
    count_tree(target);
    ck_assert_int_eq(tree_other, 0);
    ck_assert_int_eq(tree_files, 1);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* Names that must not come back; none of them may write anything outside the target. */
START_TEST(out_hostile_names)
{
    char long_part[4 + 256 + 1];
    memcpy(long_part, "out/", 4);
    memset(long_part + 4, 'a', 256);
    long_part[260] = '\0';
    static const struct {
        const char *name;
        int format;
        bool utf8;
        const char *why;
    } cases[] = {
        {"../evil", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "outside"},
        {"out/../x", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "\"..\""},
        {"out/../../escape", ARCHIVE_FORMAT_TAR_GNUTAR, false, "\"..\""},
        {"out/sub/../../up", ARCHIVE_FORMAT_TAR_USTAR, false, "\"..\""},
        {"/abs", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "outside"},
        {"/out/abs", ARCHIVE_FORMAT_TAR_GNUTAR, false, "outside"},
        {"out//double", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "absolute"},
        {"out/a//double", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "empty"},
        {"out/./dot", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "\".\""},
        {"out/red\x1b[31m.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "control"},
        {"out/new\nline.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "control"},
        {"out/cr\r.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "control"},
        {"out/tab\t.txt", ARCHIVE_FORMAT_TAR_GNUTAR, false, "control"},
        {"out/del\x7f.txt", ARCHIVE_FORMAT_TAR_GNUTAR, false, "control"},
        {"out/bad\xff.txt", ARCHIVE_FORMAT_TAR_GNUTAR, false, "UTF-8"},
        {"out/bad\xc3(.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "UTF-8"},
        {"out/rlo\xe2\x80\xae.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true, "format"},
        {"out/rlo\xe2\x80\xae.txt", ARCHIVE_FORMAT_TAR_GNUTAR, false, "format"},
        {"out/iso\xe2\x81\xa6.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true, "format"},
        {"out/nel\xc2\x85.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true, "control"},
        {"out/back\\slash.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "backslash"},
        {"out/..\\..\\win.txt", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "backslash"},
        {NULL, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, false, "255"}, /* the 256-byte part */
        {NULL, ARCHIVE_FORMAT_TAR_GNUTAR, false, "255"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *name = cases[i].name ? cases[i].name : long_part;
        char parent[PATH_MAX], target[PATH_MAX], dirname[32];
        snprintf(dirname, sizeof dirname, "case-%zu", i);
        path_in(parent, dirname);
        make_dir_at(parent);
        ck_assert_int_eq(pybox_fmt(target, sizeof target, "%s/res", parent), 0);
        char sub[PATH_MAX];
        tw_t t;
        tw_open_utf8(&t, cases[i].format, cases[i].utf8);
        tw_dir(&t, "out/");
        tw_dir(&t, "out/sub/");
        tw_file(&t, "out/ok.txt", "ok");
        tw_file(&t, name, "bad");
        tw_dir(&t, "out/z/");
        tw_close(&t);
        pybox_outputs_t o;
        pybox_error_t err = {0};
        ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "case %zu: %s", i, err.msg);
        ck_assert_msg(o.status == PYBOX_OUT_DELIVERED, "case %zu: status %d (%s)", i, o.status, o.reason);
        const char *expect = strncmp(name, "out/", 4) == 0 ? name + 4 : name;
        const pybox_out_entry_t *x = entry_named(&o, expect);
        ck_assert_msg(x != NULL, "case %zu: no entry", i);
        ck_assert_msg(!x->returned, "case %zu came back", i);
        ck_assert_msg(x->reason[0] != '\0' && strstr(x->reason, cases[i].why) != NULL, "case %zu: reason '%s'", i,
                      x->reason);
        ck_assert_int_eq(o.returned_files, 1);
        ck_assert_int_eq(o.not_returned, 1);
        char names[1024];
        ck_assert_int_eq(listing(target, names, sizeof names), 3);
        ck_assert_str_eq(names, "ok.txt|sub|z");
        ck_assert_int_eq(pybox_fmt(sub, sizeof sub, "%s/sub", target), 0);
        ck_assert_int_eq(listing(sub, names, sizeof names), 0);
        count_tree(target);
        ck_assert_int_eq(tree_files, 1);
        ck_assert_int_eq(listing(parent, names, sizeof names), 1);
        ck_assert_str_eq(names, "res");
        /* the test's own folder holds the case folders and nothing else */
        ck_assert_int_eq(listing(work, names, sizeof names), (int)i + 1);
        pybox_outputs_free(&o);
        pybox_buf_free(&t.buf);
    }
}
END_TEST

/* Names that look like "report.csv" on a terminal but are not it: an invisible character
 * (a format character, a default-ignorable code point, a variation selector, a private use
 * or unassigned code point) or a combining mark with nothing to sit on. Beside the real
 * report.csv, none of them comes back: only one file that looks like report.csv does. */
START_TEST(out_invisible_names)
{
    static const char *const lookalikes[] = {
        "report\xe2\x81\xaa.csv",     /* U+206A inhibit symmetric swapping */
        "report\xe2\x81\xaf.csv",     /* U+206F nominal digit shapes */
        "report\xef\xb8\x8f.csv",     /* U+FE0F variation selector 16 */
        "report\xef\xb8\x80.csv",     /* U+FE00 variation selector 1 */
        "report\xf3\xa0\x84\x80.csv", /* U+E0100 variation selector 17 */
        "report\xf3\xa0\x80\x81.csv", /* U+E0001 language tag */
        "report\xf0\x9d\x85\xb3.csv", /* U+1D173 musical symbol begin beam */
        "report\xf0\x9b\xb2\xa0.csv", /* U+1BCA0 shorthand format letter overlap */
        "report\xf0\x93\x90\xb0.csv", /* U+13430 Egyptian hieroglyph vertical joiner */
        "report\xf0\x91\x82\xbd.csv", /* U+110BD Kaithi number sign */
        "report\xe0\xa2\x90.csv",     /* U+0890 Arabic pound mark above */
        "report\xe0\xa3\xa2.csv",     /* U+08E2 Arabic disputed end of ayah */
        "report\xe1\xa0\x8f.csv",     /* U+180F Mongolian free variation selector 4 */
        "report\xcd\x8f.csv",         /* U+034F combining grapheme joiner */
        "report\xe3\x85\xa4.csv",     /* U+3164 Hangul filler */
        "report\xee\x80\x80.csv",     /* U+E000 private use */
        "report\xcd\xb8.csv",         /* U+0378 unassigned */
        "report\xef\xb7\x90.csv",     /* U+FDD0 noncharacter */
        "report\xe2\x80\xa8.csv",     /* U+2028 line separator */
        "report.\xcc\xb8"
        "csv",                /* U+0338 on the dot: a mark with no letter under it */
        "\xcc\x81report.csv", /* U+0301 at the start */
    };
    static const int formats[] = {ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FORMAT_TAR_GNUTAR};
    for (size_t f = 0; f < 2; f++) {
        char target[PATH_MAX], dirname[32];
        snprintf(dirname, sizeof dirname, "res-%zu", f);
        path_in(target, dirname);
        tw_t t;
        tw_open_utf8(&t, formats[f], formats[f] == ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(&t, "out/");
        tw_file(&t, "out/report.csv", "real");
        for (size_t i = 0; i < sizeof lookalikes / sizeof *lookalikes; i++) {
            char name[64];
            ck_assert_int_eq(pybox_fmt(name, sizeof name, "out/%s", lookalikes[i]), 0);
            tw_file(&t, name, "fake");
        }
        tw_close(&t);
        pybox_outputs_t o;
        pybox_error_t err = {0};
        ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
        for (size_t i = 0; i < sizeof lookalikes / sizeof *lookalikes; i++)
            assert_not_back(&o, lookalikes[i], "its name has");
        ck_assert_msg(o.returned_files == 1, "format %zu: %d files came back", f, o.returned_files);
        ck_assert_int_eq(o.not_returned, (int)(sizeof lookalikes / sizeof *lookalikes));
        ck_assert(must_entry(&o, "report.csv")->returned);
        char names[1024];
        ck_assert_int_eq(listing(target, names, sizeof names), 1);
        ck_assert_str_eq(names, "report.csv");
        assert_delivered_file(target, "report.csv", "real", 4, !o.xattr_failed);
        pybox_outputs_free(&o);
        pybox_buf_free(&t.buf);
    }
}
END_TEST

/* Blanks that look like a space but are not U+0020, and a name part that ends in a space
 * (which the receipt, listing the name before its size, cannot show): each would let two
 * different names look the same, like the invisible characters above. A space inside a
 * name comes back. */
START_TEST(out_blank_lookalike_names)
{
    static const char *const lookalikes[] = {
        "report\xc2\xa0v2.csv",     /* U+00A0 no-break space */
        "report\xe2\x80\x83v2.csv", /* U+2003 em space */
        "report\xe2\x80\xafv2.csv", /* U+202F narrow no-break space */
        "report\xe3\x80\x80v2.csv", /* U+3000 ideographic space */
        "report\xe2\xa0\x80v2.csv", /* U+2800 braille pattern blank: a symbol that draws nothing */
        "report v2.csv ",           /* ends with a space */
        "report v2 /data.csv",      /* a folder that ends with a space */
    };
    char target[PATH_MAX];
    path_in(target, "blanks");
    tw_t t;
    tw_open_utf8(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true);
    tw_dir(&t, "out/");
    tw_file(&t, "out/report v2.csv", "real");
    for (size_t i = 0; i < sizeof lookalikes / sizeof *lookalikes; i++) {
        char name[64];
        ck_assert_int_eq(pybox_fmt(name, sizeof name, "out/%s", lookalikes[i]), 0);
        tw_file(&t, name, "fake");
    }
    tw_close(&t);
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    for (size_t i = 0; i < sizeof lookalikes / sizeof *lookalikes; i++)
        assert_not_back(&o, lookalikes[i], "space");
    ck_assert_int_eq(o.returned_files, 1);
    assert_delivered_file(target, "report v2.csv", "real", 4, !o.xattr_failed);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* The longest part (255 bytes) and names in other scripts come back, byte for byte. */
START_TEST(out_good_names)
{
    char long_name[4 + 255 + 1];
    memcpy(long_name, "out/", 4);
    memset(long_name + 4, 'b', 255);
    long_name[259] = '\0';
    static const char cafe[] = "out/caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac.txt";
    static const int formats[] = {ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FORMAT_TAR_GNUTAR};
    for (size_t i = 0; i < 2; i++) {
        char target[PATH_MAX], dirname[32];
        snprintf(dirname, sizeof dirname, "res-%zu", i);
        path_in(target, dirname);
        tw_t t;
        tw_open_utf8(&t, formats[i], formats[i] == ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(&t, "out/");
        tw_file(&t, long_name, "long");
        tw_file(&t, cafe, "caf");
        tw_file(&t, "out/with space & 'quotes' #1.txt", "sp");
        tw_close(&t);
        pybox_outputs_t o;
        pybox_error_t err = {0};
        ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
        ck_assert_msg(o.returned_files == 3, "format %zu: %d came back", i, o.returned_files);
        bool xattrs = !o.xattr_failed;
        assert_delivered_file(target, long_name + 4, "long", 4, xattrs);
        assert_delivered_file(target, cafe + 4, "caf", 3, xattrs);
        assert_delivered_file(target, "with space & 'quotes' #1.txt", "sp", 2, xattrs);
        pybox_outputs_free(&o);
        pybox_buf_free(&t.buf);
    }
}
END_TEST

START_TEST(out_outside_out)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/in.txt", "in");
    tw_dir(&t, "other/");
    tw_file(&t, "other/x", "x");
    tw_file(&t, "outside.txt", "o");
    tw_file(&t, "out", "a file named like the root");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_not_back(&o, "other/x", "outside");
    assert_not_back(&o, "other", "outside");
    assert_not_back(&o, "outside.txt", "outside");
    ck_assert_int_eq(o.returned_files, 1);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 1);
    ck_assert_str_eq(names, "in.txt");
    ck_assert_int_eq(listing(work, names, sizeof names), 1);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_too_many_files)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    for (int i = 0; i < 70; i++) {
        char name[64], text[32];
        snprintf(name, sizeof name, "out/f%02d.txt", i);
        snprintf(text, sizeof text, "file %d", i);
        tw_file(&t, name, text);
    }
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_int_eq(PYBOX_OUT_FILES_MAX, 64);
    ck_assert_int_eq(o.returned_files, 64);
    ck_assert_int_eq(o.not_returned, 6);
    int over = 0;
    for (size_t i = 0; i < o.n; i++)
        if (!o.entries[i].returned && strstr(o.entries[i].reason, "more files than the limit") != NULL)
            over++;
    ck_assert_int_eq(over, 6);
    /* the first 64 in the archive's order come back */
    ck_assert(must_entry(&o, "f63.txt")->returned);
    ck_assert(!must_entry(&o, "f64.txt")->returned);
    count_tree(target);
    ck_assert_int_eq(tree_files, 64);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/f64.txt", target), 0);
    ck_assert(!exists(p));
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_file_over_limit)
{
    size_t big = 9 * 1024 * 1024;
    char *data = malloc(big);
    ck_assert_ptr_nonnull(data);
    memset(data, 'z', big);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/small.txt", "small");
    tw_file_mode(&t, "out/big.bin", data, big, 0644);
    tw_file(&t, "out/after.txt", "after");
    tw_close(&t);
    free(data);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_not_back(&o, "big.bin", "larger than the limit for one file");
    ck_assert_int_eq(must_entry(&o, "big.bin")->bytes, (int64_t)big);
    ck_assert_int_eq(o.returned_files, 2);
    ck_assert_int_eq(o.returned_bytes, 10);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 2);
    ck_assert_str_eq(names, "after.txt|small.txt");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* One file's limit is inclusive; the total is kept in the archive's order. */
START_TEST(out_file_and_total_limits)
{
    char d40[40], d41[41];
    memset(d40, 'a', sizeof d40);
    memset(d41, 'b', sizeof d41);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file_mode(&t, "out/one", d40, 40, 0644);
    tw_file_mode(&t, "out/over", d41, 41, 0644);
    tw_file_mode(&t, "out/two", d40, 40, 0644);
    tw_file_mode(&t, "out/three", d40, 40, 0644);
    tw_file_mode(&t, "out/fits", d40, 20, 0644);
    tw_file_mode(&t, "out/more", d40, 1, 0644);
    tw_close(&t);
    pybox_ingest_limits_t lim;
    pybox_ingest_limits_default(&lim);
    lim.max_file = 40;
    lim.max_total = 100;
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest_lim(&t.buf, target, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert(must_entry(&o, "one")->returned);
    assert_not_back(&o, "over", "limit for one file");
    ck_assert(must_entry(&o, "two")->returned);
    assert_not_back(&o, "three", "limit for all files");
    /* a later, smaller file still fits under the total */
    ck_assert(must_entry(&o, "fits")->returned);
    assert_not_back(&o, "more", "limit for all files");
    ck_assert_int_eq(o.returned_bytes, 100);
    ck_assert_int_eq(o.returned_files, 3);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 3);
    ck_assert_str_eq(names, "fits|one|two");
    count_tree(target);
    ck_assert_int_eq(tree_files, 3);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_depth_limit)
{
    pybox_ingest_limits_t lim;
    pybox_ingest_limits_default(&lim);
    lim.max_depth = 4;
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_dir(&t, "out/a/");
    tw_dir(&t, "out/a/b/");
    tw_dir(&t, "out/a/b/c/");
    tw_dir(&t, "out/a/b/c/d/");
    tw_dir(&t, "out/a/b/c/d/e/");
    tw_file(&t, "out/a/b/c/d/e/f/deep.txt", "deep");
    tw_file(&t, "out/a/b/shallow.txt", "shallow");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest_lim(&t.buf, target, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert(must_entry(&o, "a/b/c/d")->returned);
    assert_not_back(&o, "a/b/c/d/e", "too deep");
    assert_not_back(&o, "a/b/c/d/e/f/deep.txt", "too deep");
    ck_assert(must_entry(&o, "a/b/shallow.txt")->returned);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/a/b/c/d", target), 0);
    assert_dir_mode(p, 0755);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/a/b/c/d/e", target), 0);
    ck_assert(!exists(p));
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);

    /* the default limit, well passed */
    ck_assert_int_eq(PYBOX_OUT_DEPTH_MAX, 16);
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    char name[256] = "out";
    for (int i = 0; i < 20; i++) {
        size_t l = strlen(name);
        snprintf(name + l, sizeof name - l, "/d");
    }
    size_t l = strlen(name);
    snprintf(name + l, sizeof name - l, "/x.txt");
    tw_file(&t, name, "x");
    tw_file(&t, "out/top.txt", "top");
    tw_close(&t);
    path_in(target, "res2");
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_not_back(&o, name + 4, "too deep");
    ck_assert_int_eq(o.returned_files, 1);
    char names[256];
    ck_assert_int_eq(listing(target, names, sizeof names), 1);
    ck_assert_str_eq(names, "top.txt");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* Ingest in a child whose address space is bounded (not under AddressSanitizer, which
 * needs far more): a declared size must never turn into an allocation. Returns the
 * child's exit status: 0 refused as damaged, 1 another verdict, 2 failed. */
static int ingest_bounded(const pybox_buf_t *tar, const char *target)
{
    pybox_output_spec_t spec;
    pybox_error_t cerr = {0};
    ck_assert_msg(pybox_output_check(target, &spec, &cerr) == 0, "%s", cerr.msg);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__)
        struct rlimit rl = {.rlim_cur = 1024ULL * 1024 * 1024, .rlim_max = 1024ULL * 1024 * 1024};
        if (setrlimit(RLIMIT_AS, &rl) < 0)
            _exit(3);
#endif
        pybox_ingest_limits_t lim;
        pybox_ingest_limits_default(&lim);
        lim.max_file = INT64_MAX; /* let the size pass the header checks */
        lim.max_total = INT64_MAX;
        pybox_outputs_t o;
        pybox_outputs_init(&o);
        pybox_error_t err = {0};
        if (pybox_outputs_ingest(tar->data, tar->len, &spec, RUN_ID, &lim, &o, &err) < 0)
            _exit(2);
        int st = o.status == PYBOX_OUT_REFUSED && strstr(o.reason, "damaged") != NULL ? 0 : 1;
        pybox_outputs_free(&o);
        _exit(st);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the ingest crashed (status %d)", status);
    return WEXITSTATUS(status);
}

START_TEST(out_huge_declared_size)
{
    static const int64_t sizes[] = {(int64_t)1 << 40, (int64_t)1 << 62, -1, 9 * 1024 * 1024, INT64_MAX - 511};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int cut = 0; cut < 2; cut++) {
            tw_t t;
            tw_open(&t, ARCHIVE_FORMAT_TAR_USTAR);
            tw_dir(&t, "out/");
            tw_file(&t, "out/ok.txt", "ok");
            tw_file(&t, "out/huge.bin", "12345");
            tw_file(&t, "out/after.txt", "after");
            tw_close(&t);
            size_t off = header_at(&t.buf, "out/huge.bin");
            set_size_base256(t.buf.data + off, sizes[i]);
            if (cut)
                t.buf.len = off + 512; /* no data at all after the header */
            char target[PATH_MAX], dirname[32];
            snprintf(dirname, sizeof dirname, "res-%zu-%d", i, cut);
            path_in(target, dirname);
            int st = ingest_bounded(&t.buf, target);
            ck_assert_msg(st == 0, "size %lld cut %d: child status %d", (long long)sizes[i], cut, st);
            /* The declared data is never there (or the size is negative): the whole
             * archive is refused as damaged when it is surveyed, before anything is
             * written or allocated for it. */
            ck_assert(!exists(target));
            ck_assert(!has_tmp(work));
            pybox_buf_free(&t.buf);
        }
    }
}
END_TEST

START_TEST(out_case_clash_file)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/keep.txt", "k");
    tw_file(&t, "out/A.txt", "upper");
    tw_file(&t, "out/a.txt", "lower");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "differ only by case");
    ck_assert_ptr_nonnull(strstr(o.reason, "'A.txt'"));
    ck_assert_ptr_nonnull(strstr(o.reason, "'a.txt'"));
    ck_assert_int_eq(o.not_returned, 3);
    assert_not_back(&o, "keep.txt", "whole transfer was refused");
    char names[256];
    ck_assert_int_eq(listing(work, names, sizeof names), 0);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_case_clash_parents)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/Dir/x", "x");
    tw_file(&t, "out/dir/y", "y");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "differ only by case");
    ck_assert_ptr_nonnull(strstr(o.reason, "'Dir'"));
    ck_assert_ptr_nonnull(strstr(o.reason, "'dir'"));
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);

    /* deeper: a/B/c and a/b/d */
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_dir(&t, "out/a/");
    tw_dir(&t, "out/a/B/");
    tw_file(&t, "out/a/B/c", "c");
    tw_file(&t, "out/a/b/d", "d");
    tw_close(&t);
    rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "differ only by case");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* Long names with a character of two bytes where a cut would fall: the reason names
 * both, each cut only between characters, and says all of what it says (it is quoted in
 * the JSON receipt and by the MCP server, which must stay valid UTF-8). */
START_TEST(out_case_clash_reason_whole_and_utf8)
{
    char lower[160], upper[160];
    memcpy(lower, "out/", 4);
    memcpy(upper, "out/", 4);
    memset(lower + 4, 'a', 99);
    memset(upper + 4, 'A', 99);
    memcpy(lower + 103, "\xc3\xa9", 3);
    memcpy(upper + 103, "\xc3\xa9", 3);
    tw_t t;
    tw_open_utf8(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true);
    tw_dir(&t, "out/");
    tw_file(&t, lower, "x");
    tw_file(&t, upper, "y");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "long-clash");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "differ only by case");
    ck_assert_msg(pybox_utf8_valid(o.reason, strlen(o.reason)), "the reason is not UTF-8: %s", o.reason);
    ck_assert_msg(strstr(o.reason, "cannot be copied everywhere") != NULL, "the reason is cut: %s", o.reason);
    ck_assert_ptr_nonnull(strstr(o.reason, "'aaaa"));
    ck_assert_ptr_nonnull(strstr(o.reason, "'AAAA"));
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* The engine's archive carries names as the box wrote them; libarchive reads them
 * composed (Unicode NFC). A decomposed name comes back composed; café.txt in both forms
 * is one name twice: refused as a whole, saying so, not as if the box had named a file
 * twice. */
START_TEST(out_composed_and_decomposed_names)
{
    tw_t t;
    tw_open_utf8(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true);
    t.utf8 = false; /* in C.UTF-8, the names' bytes as they are (as the engine writes them) */
    tw_dir(&t, "out/");
    tw_file(&t, "out/na\x69\xcc\x88ve.txt", "decomposed");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "one-form");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_delivered_file(target, "na\xc3\xafve.txt", "decomposed", 10, !o.xattr_failed);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);

    tw_open_utf8(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, true);
    t.utf8 = false;
    tw_dir(&t, "out/");
    tw_file(&t, "out/caf\xc3\xa9.txt", "composed");
    tw_file(&t, "out/cafe\xcc\x81.txt", "decomposed");
    tw_close(&t);
    path_in(target, "two-forms");
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "twice");
    ck_assert_msg(strstr(o.reason, "normal form") != NULL, "the reason does not say why: %s", o.reason);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* Only names that would come back can clash: a symbolic link named like a file is
 * dropped first, and the rest is delivered. */
START_TEST(out_case_clash_ignores_dropped)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/A.txt", "upper");
    tw_symlink(&t, "out/a.txt", "A.txt");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_not_back(&o, "a.txt", "symbolic link");
    assert_delivered_file(target, "A.txt", "upper", 5, !o.xattr_failed);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* The same name twice is not a case clash. A folder listed twice is harmless and is
 * delivered once. A file named twice (or a name that is a file and also a folder) cannot
 * be written as the archive says: the whole transfer is refused, as a verdict, never as
 * a failure of the host. */
START_TEST(out_duplicate_names)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_dir(&t, "out/d/");
    tw_file(&t, "out/d/x.txt", "x");
    tw_dir(&t, "out/d/");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "dirs");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_delivered_file(target, "d/x.txt", "x", 1, !o.xattr_failed);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);

    static const char *const pairs[][2] = {
        {"out/a.txt", "out/a.txt"}, /* a file twice */
        {"out/x", "out/x/y"},       /* a file, then a folder of that name above a file */
        {"out/x/y", "out/x"},       /* a folder above a file, then a file of that name */
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(&t, "out/");
        tw_file(&t, "out/keep.txt", "keep");
        tw_file(&t, pairs[i][0], "first");
        tw_file(&t, pairs[i][1], "second");
        tw_close(&t);
        char dirname[32];
        snprintf(dirname, sizeof dirname, "dup-%zu", i);
        path_in(target, dirname);
        pybox_error_clear(&err);
        int rc = ingest(&t.buf, target, &o, &err);
        ck_assert_msg(rc == 0, "pair %zu: %s", i, err.msg);
        assert_refused(rc, &o, &err, target, "twice");
        ck_assert_ptr_null(strstr(o.reason, "case"));
        pybox_outputs_free(&o);
        pybox_buf_free(&t.buf);
    }
    /* a file and a folder entry of the same name */
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/n", "file");
    tw_dir(&t, "out/n/");
    tw_close(&t);
    path_in(target, "dup-dir");
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "twice");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* A whole, valid archive with a file of 3000 bytes in the middle. */
static void three_files(tw_t *t)
{
    char data[3000];
    memset(data, 'm', sizeof data);
    tw_open(t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(t, "out/");
    tw_file(t, "out/first.txt", "first");
    tw_file_mode(t, "out/mid.bin", data, sizeof data, 0644);
    tw_file(t, "out/last.txt", "last");
    tw_close(t);
}

START_TEST(out_truncated)
{
    tw_t t;
    three_files(&t);
    size_t mid = header_at(&t.buf, "out/mid.bin");
    size_t last = header_at(&t.buf, "out/last.txt");
    const size_t cuts[] = {
        mid + 512 + 1000, /* in the middle of a file's data */
        last + 100,       /* in the middle of a header */
        mid + 511,        /* one byte short of a header */
        mid + 512 + 2999, /* one byte short of a file's data */
    };
    size_t full = t.buf.len;
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        ck_assert_uint_lt(cuts[i], full);
        t.buf.len = cuts[i];
        char target[PATH_MAX], dirname[32];
        snprintf(dirname, sizeof dirname, "res-%zu", i);
        path_in(target, dirname);
        pybox_outputs_t o;
        pybox_error_t err = {0};
        int rc = ingest(&t.buf, target, &o, &err);
        assert_refused(rc, &o, &err, target, "damaged");
        pybox_outputs_free(&o);
    }
    char names[256];
    ck_assert_int_eq(listing(work, names, sizeof names), 0);
    /* the same bytes whole are delivered */
    t.buf.len = full;
    char target[PATH_MAX];
    path_in(target, "whole");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_int_eq(o.returned_files, 3);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_corrupt_header)
{
    tw_t t;
    three_files(&t);
    size_t mid = header_at(&t.buf, "out/mid.bin");
    t.buf.data[mid + 150] ^= 0x55; /* the checksum no longer matches */
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    int rc = ingest(&t.buf, target, &o, &err);
    assert_refused(rc, &o, &err, target, "damaged");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_garbage)
{
    pybox_buf_t g;
    pybox_buf_init(&g, 0);
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(pybox_buf_puts(&g, "this is not a tar archive at all, just words. "), 0);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    int rc = ingest(&g, target, &o, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_REFUSED);
    ck_assert_ptr_nonnull(strstr(o.reason, "could not be read"));
    ck_assert(!exists(target));
    ck_assert(!has_tmp(work));
    pybox_outputs_free(&o);

    /* 512 random-looking bytes: a header whose checksum cannot match */
    pybox_buf_free(&g);
    pybox_buf_init(&g, 0);
    unsigned char block[1536];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (unsigned char)(i * 131 + 17);
    ck_assert_int_eq(pybox_buf_append(&g, block, sizeof block), 0);
    rc = ingest(&g, target, &o, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_REFUSED);
    ck_assert(!exists(target));
    ck_assert(!has_tmp(work));
    pybox_outputs_free(&o);
    pybox_buf_free(&g);
}
END_TEST

/* Nothing at all is not an archive: libarchive recognises no format in zero bytes, so
 * the transfer is refused (the caller reports NOT_RECEIVED only when no archive came). */
START_TEST(out_zero_length)
{
    static const char nothing[1] = {0};
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_output_check(target, &spec, &err), 0);
    pybox_ingest_limits_t lim;
    pybox_ingest_limits_default(&lim);
    pybox_outputs_t o;
    pybox_outputs_init(&o);
    ck_assert_msg(pybox_outputs_ingest(nothing, 0, &spec, RUN_ID, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_REFUSED);
    ck_assert_ptr_nonnull(strstr(o.reason, "could not be read"));
    ck_assert(!exists(target));
    ck_assert(!has_tmp(work));
    pybox_outputs_free(&o);
    /* and the same from an empty buffer that never held anything */
    pybox_buf_t empty;
    pybox_buf_init(&empty, 0);
    pybox_outputs_init(&o);
    ck_assert_msg(pybox_outputs_ingest(empty.data, empty.len, &spec, RUN_ID, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_REFUSED);
    ck_assert(!exists(target));
    pybox_outputs_free(&o);
}
END_TEST

START_TEST(output_parent_others_could_change)
{
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    /* writable by others without the sticky bit */
    char open_dir[PATH_MAX], target[PATH_MAX + 8];
    path_in(open_dir, "open");
    make_dir_at(open_dir);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    ck_assert_int_eq(pybox_fmt(target, sizeof target, "%s/out", open_dir), 0);
    ck_assert_int_eq(pybox_output_check(target, &spec, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "changed by another user"));
    /* the same with the sticky bit, as /tmp has: accepted */
    ck_assert_int_eq(chmod(open_dir, 01777), 0);
    pybox_error_clear(&err);
    ck_assert_msg(pybox_output_check(target, &spec, &err) == 0, "%s", err.msg);
    ck_assert_int_ge(spec.parent_fd, 0);
    pybox_output_close(&spec);
    ck_assert_int_eq(spec.parent_fd, -1);
    /* owned by another user */
    if (geteuid() == 0) {
        ck_assert_int_eq(chmod(open_dir, 0755), 0);
        ck_assert_int_eq(chown(open_dir, 65534, 65534), 0);
        pybox_error_clear(&err);
        ck_assert_int_eq(pybox_output_check(target, &spec, &err), -1);
        ck_assert_ptr_nonnull(strstr(err.msg, "changed by another user"));
    }
}
END_TEST

START_TEST(out_into_existing_empty_folder)
{
    char target[PATH_MAX];
    path_in(target, "ready");
    make_dir_at(target);
    ck_assert_int_eq(chmod(target, 0700), 0);
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_output_check(target, &spec, &err), 0);
    ck_assert(spec.existed);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/r.txt", "result");
    tw_close(&t);
    pybox_ingest_limits_t lim;
    pybox_ingest_limits_default(&lim);
    pybox_outputs_t o;
    pybox_outputs_init(&o);
    ck_assert_msg(pybox_outputs_ingest(t.buf.data, t.buf.len, &spec, RUN_ID, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    ck_assert_str_eq(o.dir, target);
    /* an existing folder keeps its own mode (here private) */
    assert_dir_mode(target, 0700);
    assert_delivered_file(target, "r.txt", "result", 6, !o.xattr_failed);
    char names[256];
    ck_assert_int_eq(listing(work, names, sizeof names), 1);
    ck_assert_str_eq(names, "ready");
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* An existing output folder is delivered into only when it is this user's, and never
 * with a bit that lets anyone else change what the receipt lists: a folder another local
 * user made (mode 0777, in a shared sticky folder, before the run) would otherwise be
 * delivered with its 0777, and its maker could replace a file the receipt vouches for. */
START_TEST(out_existing_folder_of_another_user_refused)
{
    if (geteuid() != 0)
        return; /* only root can make a folder another user's */
    char shared[PATH_MAX], target[PATH_MAX + 8];
    path_in(shared, "shared");
    make_dir_at(shared);
    ck_assert_int_eq(chmod(shared, 01777), 0);
    ck_assert_int_eq(pybox_fmt(target, sizeof target, "%s/out", shared), 0);
    make_dir_at(target);
    ck_assert_int_eq(chmod(target, 0777), 0);
    ck_assert_int_eq(chown(target, 65534, 65534), 0);
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_output_check(target, &spec, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "belongs to another user (uid 65534") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "mode 0777") != NULL, "%s", err.msg);
    ck_assert_int_eq(spec.parent_fd, -1);
    /* with only that protection relaxed (a test's), it is taken and keeps its mode */
    pybox_error_clear(&err);
    ck_assert_msg(pybox_output_check_relaxed(target, PYBOX_RELAX_OUTPUT_OWNER, &spec, &err) == 0, "%s", err.msg);
    ck_assert(spec.existed);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/result.txt", "result");
    tw_close(&t);
    pybox_ingest_limits_t lim;
    pybox_ingest_limits_default(&lim);
    pybox_outputs_t o;
    pybox_outputs_init(&o);
    ck_assert_msg(pybox_outputs_ingest(t.buf.data, t.buf.len, &spec, RUN_ID, &lim, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_dir_mode(target, 0777);
    pybox_outputs_free(&o);
    pybox_output_close(&spec);
    pybox_buf_free(&t.buf);
}
END_TEST

START_TEST(out_existing_folder_loses_others_write)
{
    static const mode_t modes[] = {0777, 02775, 01777, 0757, 0700};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        char target[PATH_MAX], name[32];
        snprintf(name, sizeof name, "ready%zu", i);
        path_in(target, name);
        make_dir_at(target);
        ck_assert_int_eq(chmod(target, modes[i]), 0);
        pybox_output_spec_t spec;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_output_check(target, &spec, &err) == 0, "%s", err.msg);
        tw_t t;
        tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(&t, "out/");
        tw_dir(&t, "out/sub/");
        tw_file(&t, "out/sub/r.txt", "result");
        tw_close(&t);
        pybox_ingest_limits_t lim;
        pybox_ingest_limits_default(&lim);
        pybox_outputs_t o;
        pybox_outputs_init(&o);
        ck_assert_msg(pybox_outputs_ingest(t.buf.data, t.buf.len, &spec, RUN_ID, &lim, &o, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
        /* the owner's bits kept, nobody else's write, no special bit */
        assert_dir_mode(target, modes[i] & 0755);
        char sub[PATH_MAX + 8];
        ck_assert_int_eq(pybox_fmt(sub, sizeof sub, "%s/sub", target), 0);
        assert_dir_mode(sub, 0755);
        assert_delivered_file(target, "sub/r.txt", "result", 6, !o.xattr_failed);
        pybox_outputs_free(&o);
        pybox_output_close(&spec);
        pybox_buf_free(&t.buf);
    }
}
END_TEST

/* The host cannot write (a file size limit stands in for a full disk): a failure, not a
 * verdict, and nothing is left half-written: no folder, no temporary folder. */
START_TEST(out_host_write_failure)
{
    char data[5000];
    memset(data, 'w', sizeof data);
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    tw_dir(&t, "out/");
    tw_file(&t, "out/first.txt", "first");
    tw_file_mode(&t, "out/big.bin", data, sizeof data, 0644);
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_output_check(target, &spec, &err), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 1000, .rlim_max = 1000};
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            _exit(3);
        pybox_ingest_limits_t lim;
        pybox_ingest_limits_default(&lim);
        pybox_outputs_t o;
        pybox_outputs_init(&o);
        int rc = pybox_outputs_ingest(t.buf.data, t.buf.len, &spec, RUN_ID, &lim, &o, &err);
        int st = rc < 0 && err.kind == PYBOX_ERR_SYSTEM && o.status != PYBOX_OUT_DELIVERED ? 0 : 1;
        pybox_outputs_free(&o);
        _exit(st);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert(!exists(target));
    ck_assert(!has_tmp(work));
    char names[256];
    ck_assert_int_eq(listing(work, names, sizeof names), 0);
    pybox_buf_free(&t.buf);
}
END_TEST

/* Folders of a file that have no entry of their own are made, 0755. */
START_TEST(out_implied_folders)
{
    tw_t t;
    tw_open(&t, ARCHIVE_FORMAT_TAR_GNUTAR);
    tw_file(&t, "out/p/q/r.txt", "deep");
    tw_close(&t);
    char target[PATH_MAX];
    path_in(target, "res");
    pybox_outputs_t o;
    pybox_error_t err = {0};
    ck_assert_msg(ingest(&t.buf, target, &o, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(o.status, PYBOX_OUT_DELIVERED);
    assert_delivered_file(target, "p/q/r.txt", "deep", 4, !o.xattr_failed);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/p/q", target), 0);
    assert_dir_mode(p, 0755);
    pybox_outputs_free(&o);
    pybox_buf_free(&t.buf);
}
END_TEST

/* ---- out: the folder asked for ---- */

START_TEST(output_check_refusals)
{
    char file[PATH_MAX], full[PATH_MAX], inner[PATH_MAX], missing[PATH_MAX], under_file[PATH_MAX], lnk[PATH_MAX];
    path_in(file, "a-file");
    write_file_at(file, "x", 1);
    path_in(full, "full");
    make_dir_at(full);
    ck_assert_int_eq(pybox_fmt(inner, sizeof inner, "%s/inside", full), 0);
    write_file_at(inner, "x", 1);
    path_in(missing, "no/such/parent");
    ck_assert_int_eq(pybox_fmt(under_file, sizeof under_file, "%s/x", file), 0);
    path_in(lnk, "link");
    ck_assert_int_eq(symlink(full, lnk), 0);
    char dotdot[PATH_MAX];
    path_in(dotdot, "..");
    const struct {
        const char *path;
        const char *why;
    } cases[] = {
        {file, "not a folder"},
        {full, "not empty"},
        {missing, "parent folder does not exist"},
        {under_file, "parent folder does not exist"},
        {lnk, "not a folder"},
        {"", "needs a folder"},
        {NULL, "needs a folder"},
        {"/", "by its name"},
        {"///", "by its name"},
        {dotdot, "by its name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pybox_output_spec_t spec;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_output_check(cases[i].path, &spec, &err) < 0, "case %zu accepted", i);
        ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
        ck_assert_msg(strstr(err.msg, cases[i].why) != NULL, "case %zu: '%s'", i, err.msg);
    }
    /* nothing was touched */
    size_t len = 0;
    char *content = slurp(inner, &len);
    ck_assert_ptr_nonnull(content);
    ck_assert_uint_eq(len, 1);
    free(content);
}
END_TEST

START_TEST(output_check_accepts)
{
    char fresh[PATH_MAX], empty[PATH_MAX];
    path_in(fresh, "fresh");
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_output_check(fresh, &spec, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(spec.dir, fresh);
    ck_assert_str_eq(spec.parent, work);
    ck_assert_str_eq(spec.base, "fresh");
    ck_assert(!spec.existed);
    ck_assert(!exists(fresh)); /* checking makes nothing */

    path_in(empty, "empty");
    make_dir_at(empty);
    ck_assert_msg(pybox_output_check(empty, &spec, &err) == 0, "%s", err.msg);
    ck_assert(spec.existed);
    ck_assert_str_eq(spec.dir, empty);

    /* trailing slashes go */
    char slashed[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(slashed, sizeof slashed, "%s//", fresh), 0);
    ck_assert_msg(pybox_output_check(slashed, &spec, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(spec.dir, fresh);
    ck_assert_str_eq(spec.base, "fresh");

    /* a folder right under / (refused only if / is not writable) */
    int rc = pybox_output_check("/pybox-unit-no-such-folder", &spec, &err);
    ck_assert_msg(rc == 0 || strstr(err.msg, "not writable") != NULL, "%s", err.msg);
    ck_assert_str_eq(spec.parent, "/");
    ck_assert_str_eq(spec.base, "pybox-unit-no-such-folder");
}
END_TEST

START_TEST(output_check_relative)
{
    char old[PATH_MAX], cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(old, sizeof old));
    ck_assert_int_eq(chdir(work), 0);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    make_dir_at("sub");
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    int rc1 = pybox_output_check("rel", &spec, &err);
    pybox_output_spec_t spec2;
    int rc2 = pybox_output_check("sub/inner/", &spec2, &err);
    ck_assert_int_eq(chdir(old), 0);
    ck_assert_msg(rc1 == 0 && rc2 == 0, "%s", err.msg);
    char want[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(want, sizeof want, "%s/rel", cwd), 0);
    ck_assert_str_eq(spec.dir, want);
    ck_assert_str_eq(spec.parent, cwd);
    ck_assert_int_eq(spec.dir[0], '/');
    ck_assert_int_eq(pybox_fmt(want, sizeof want, "%s/sub/inner", cwd), 0);
    ck_assert_str_eq(spec2.dir, want);
    ck_assert_int_eq(pybox_fmt(want, sizeof want, "%s/sub", cwd), 0);
    ck_assert_str_eq(spec2.parent, want);
}
END_TEST

/* ---- in ---- */

typedef struct {
    char name[PATH_MAX];
    mode_t type, perm;
    int64_t uid, gid;
    char uname[32];
    char *data;
    size_t len;
} read_entry_t;

/* Read back a tar into at most max entries; returns how many. */
static size_t read_tar(const pybox_buf_t *tar, read_entry_t *out, size_t max)
{
    struct archive *r = archive_read_new();
    ck_assert_ptr_nonnull(r);
    archive_read_support_format_tar(r);
    ck_assert_int_eq(archive_read_open_memory(r, tar->data, tar->len), ARCHIVE_OK);
    struct archive_entry *e;
    size_t n = 0;
    int hr;
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
        ck_assert_uint_lt(n, max);
        read_entry_t *x = &out[n++];
        memset(x, 0, sizeof *x);
        snprintf(x->name, sizeof x->name, "%s", archive_entry_pathname(e));
        x->type = archive_entry_filetype(e);
        x->perm = archive_entry_perm(e);
        x->uid = archive_entry_uid(e);
        x->gid = archive_entry_gid(e);
        snprintf(x->uname, sizeof x->uname, "%s", archive_entry_uname(e) ? archive_entry_uname(e) : "");
        int64_t size = archive_entry_size(e);
        ck_assert_int_ge(size, 0);
        x->data = malloc((size_t)size + 1);
        ck_assert_ptr_nonnull(x->data);
        la_ssize_t got = size > 0 ? archive_read_data(r, x->data, (size_t)size) : 0;
        ck_assert_int_eq(got, size);
        x->len = (size_t)got;
    }
    ck_assert_int_eq(hr, ARCHIVE_EOF);
    archive_read_free(r);
    return n;
}

static void free_entries(read_entry_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
}

START_TEST(in_file_and_folder)
{
    static const char note[] = "a note\n";
    static const char a_txt[] = "aaaa";
    char x_data[5000];
    for (size_t i = 0; i < sizeof x_data; i++)
        x_data[i] = (char)('A' + i % 26);
    char p[PATH_MAX], dir[PATH_MAX];
    path_in(p, "note.txt");
    write_file_at(p, note, strlen(note));
    ck_assert_int_eq(chmod(p, 0755), 0); /* exec bits do not go in */
    path_in(dir, "dir");
    make_dir_at(dir);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/sub", dir), 0);
    make_dir_at(p);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/sub/x", dir), 0);
    write_file_at(p, x_data, sizeof x_data);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/a.txt", dir), 0);
    write_file_at(p, a_txt, strlen(a_txt));
    ck_assert_int_eq(chmod(p, 0600), 0);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/empty", dir), 0);
    make_dir_at(p);

    char note_path[PATH_MAX], dir_slash[PATH_MAX];
    path_in(note_path, "note.txt");
    ck_assert_int_eq(pybox_fmt(dir_slash, sizeof dir_slash, "%s/", dir), 0);
    const char *paths[] = {note_path, dir_slash};
    pybox_inputs_t in;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_inputs_prepare(paths, 2, PYBOX_INPUT_MAX, &in, &err) == 0, "%s", err.msg);

    /* the files in archive order, with their hashes */
    ck_assert_uint_eq(in.n, 3);
    char sha[65];
    ck_assert_str_eq(in.files[0].name, "note.txt");
    ck_assert_int_eq(in.files[0].bytes, (int64_t)strlen(note));
    pybox_sha256_hex(note, strlen(note), sha);
    ck_assert_str_eq(in.files[0].sha256, sha);
    ck_assert_str_eq(in.files[1].name, "dir/a.txt");
    ck_assert_int_eq(in.files[1].bytes, 4);
    pybox_sha256_hex(a_txt, 4, sha);
    ck_assert_str_eq(in.files[1].sha256, sha);
    ck_assert_str_eq(in.files[2].name, "dir/sub/x");
    ck_assert_int_eq(in.files[2].bytes, (int64_t)sizeof x_data);
    pybox_sha256_hex(x_data, sizeof x_data, sha);
    ck_assert_str_eq(in.files[2].sha256, sha);
    ck_assert_int_eq(in.total, (int64_t)(strlen(note) + 4 + sizeof x_data));

    /* the archive is bounded, and holds what it says */
    ck_assert_uint_gt(in.tar.max, 0);
    ck_assert_uint_le(in.tar.len, in.tar.max);
    ck_assert_uint_le(in.tar.max, (size_t)PYBOX_INPUT_MAX + 64 * 1024 * 1024);
    read_entry_t v[16];
    size_t n = read_tar(&in.tar, v, 16);
    static const struct {
        const char *name;
        mode_t type;
    } want[] = {
        {"note.txt", AE_IFREG},   {"dir/", AE_IFDIR},     {"dir/a.txt", AE_IFREG},
        {"dir/empty/", AE_IFDIR}, {"dir/sub/", AE_IFDIR}, {"dir/sub/x", AE_IFREG},
    };
    ck_assert_uint_eq(n, sizeof want / sizeof *want);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(v[i].name, want[i].name);
        ck_assert_uint_eq(v[i].type, want[i].type);
        ck_assert_uint_eq(v[i].perm, want[i].type == AE_IFDIR ? 0555 : 0444);
        ck_assert_int_eq(v[i].uid, 0);
        ck_assert_int_eq(v[i].gid, 0);
        ck_assert_str_eq(v[i].uname, "root");
    }
    ck_assert_uint_eq(v[0].len, strlen(note));
    ck_assert_mem_eq(v[0].data, note, strlen(note));
    ck_assert_uint_eq(v[2].len, 4);
    ck_assert_mem_eq(v[2].data, a_txt, 4);
    ck_assert_uint_eq(v[5].len, sizeof x_data);
    ck_assert_mem_eq(v[5].data, x_data, sizeof x_data);
    free_entries(v, n);
    pybox_inputs_free(&in);
    ck_assert_ptr_null(in.files);
    ck_assert_ptr_null(in.tar.data);
}
END_TEST

START_TEST(in_top_level_symlink_followed)
{
    char target[PATH_MAX], lnk[PATH_MAX];
    path_in(target, "real.txt");
    write_file_at(target, "real", 4);
    path_in(lnk, "alias.txt");
    ck_assert_int_eq(symlink(target, lnk), 0);
    const char *paths[] = {lnk};
    pybox_inputs_t in;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_inputs_prepare(paths, 1, PYBOX_INPUT_MAX, &in, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(in.n, 1);
    ck_assert_str_eq(in.files[0].name, "alias.txt");
    ck_assert_int_eq(in.files[0].bytes, 4);
    read_entry_t v[4];
    size_t n = read_tar(&in.tar, v, 4);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(v[0].name, "alias.txt");
    ck_assert_uint_eq(v[0].type, AE_IFREG);
    ck_assert_uint_eq(v[0].len, 4);
    ck_assert_mem_eq(v[0].data, "real", 4);
    free_entries(v, n);
    pybox_inputs_free(&in);
}
END_TEST

START_TEST(in_no_inputs)
{
    pybox_inputs_t in;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_inputs_prepare(NULL, 0, PYBOX_INPUT_MAX, &in, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(in.n, 0);
    ck_assert_int_eq(in.total, 0);
    read_entry_t v[1];
    ck_assert_uint_eq(read_tar(&in.tar, v, 1), 0);
    pybox_inputs_free(&in);
}
END_TEST

START_TEST(in_total_limit)
{
    char p[PATH_MAX], q[PATH_MAX];
    path_in(p, "six");
    write_file_at(p, "123456", 6);
    path_in(q, "four");
    write_file_at(q, "1234", 4);
    const char *paths[] = {p, q};
    pybox_inputs_t in;
    pybox_error_t err = {0};
    /* exactly at the limit */
    ck_assert_msg(pybox_inputs_prepare(paths, 2, 10, &in, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(in.total, 10);
    ck_assert_uint_le(in.tar.len, in.tar.max);
    pybox_inputs_free(&in);
    /* one byte over */
    write_file_at(q, "12345", 5);
    ck_assert_int_lt(pybox_inputs_prepare(paths, 2, 10, &in, &err), 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "larger than 10 bytes") != NULL, "%s", err.msg);
    ck_assert_ptr_null(in.files);
    ck_assert_ptr_null(in.tar.data);
    /* in a folder */
    char d[PATH_MAX], f[PATH_MAX];
    path_in(d, "folder");
    make_dir_at(d);
    ck_assert_int_eq(pybox_fmt(f, sizeof f, "%s/big", d), 0);
    write_file_at(f, "0123456789A", 11);
    const char *one[] = {d};
    pybox_error_clear(&err);
    ck_assert_int_lt(pybox_inputs_prepare(one, 1, 10, &in, &err), 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "larger than 10 bytes") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(in_refusals)
{
    char missing[PATH_MAX], with_link[PATH_MAX], with_fifo[PATH_MAX], with_sock[PATH_MAX], fifo_top[PATH_MAX];
    char p[PATH_MAX], a_dir[PATH_MAX], b_dir[PATH_MAX], a_same[PATH_MAX], b_same[PATH_MAX], dot_end[PATH_MAX];
    path_in(missing, "no-such-file");
    path_in(with_link, "with-link");
    make_dir_at(with_link);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/ok.txt", with_link), 0);
    write_file_at(p, "ok", 2);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/z-link", with_link), 0);
    ck_assert_int_eq(symlink("ok.txt", p), 0);
    path_in(with_fifo, "with-fifo");
    make_dir_at(with_fifo);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/deeper", with_fifo), 0);
    make_dir_at(p);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/deeper/pipe", with_fifo), 0);
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    path_in(with_sock, "with-sock");
    make_dir_at(with_sock);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_int_eq(pybox_fmt(sa.sun_path, sizeof sa.sun_path, "%s/s", with_sock), 0);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (const struct sockaddr *)&sa, sizeof sa), 0);
    close(s);
    path_in(fifo_top, "fifo-top");
    ck_assert_int_eq(mkfifo(fifo_top, 0644), 0);
    path_in(a_dir, "a");
    make_dir_at(a_dir);
    path_in(b_dir, "b");
    make_dir_at(b_dir);
    ck_assert_int_eq(pybox_fmt(a_same, sizeof a_same, "%s/same.txt", a_dir), 0);
    write_file_at(a_same, "a", 1);
    ck_assert_int_eq(pybox_fmt(b_same, sizeof b_same, "%s/same.txt/", b_dir), 0);
    make_dir_at(b_same);
    ck_assert_int_eq(pybox_fmt(dot_end, sizeof dot_end, "%s/.", a_dir), 0);

    const struct {
        const char *paths[2];
        size_t n;
        const char *why;
    } cases[] = {
        {{missing}, 1, "no such file or folder"},
        {{with_link}, 1, "symbolic link"},
        {{with_fifo}, 1, "FIFO"},
        {{with_sock}, 1, "socket"},
        {{fifo_top}, 1, "special file"},
        {{a_same, b_same}, 2, "same name"},
        {{a_dir, a_dir}, 2, "same name"},
        {{""}, 1, "needs a path"},
        {{NULL}, 1, "needs a path"},
        {{"."}, 1, "by its name"},
        {{".."}, 1, "by its name"},
        {{"/"}, 1, "by its name"},
        {{dot_end}, 1, "by its name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pybox_inputs_t in;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_inputs_prepare(cases[i].paths, cases[i].n, PYBOX_INPUT_MAX, &in, &err) < 0,
                      "case %zu accepted", i);
        ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
        ck_assert_msg(strstr(err.msg, cases[i].why) != NULL, "case %zu: '%s'", i, err.msg);
        ck_assert_ptr_null(in.files);
        ck_assert_ptr_null(in.tar.data);
    }
}
END_TEST

/* A name with control characters is shown escaped in the refusal. */
START_TEST(in_refusal_escapes_name)
{
    char p[PATH_MAX];
    path_in(p, "gone\x1b[2J");
    const char *paths[] = {p};
    pybox_inputs_t in;
    pybox_error_t err = {0};
    ck_assert_int_lt(pybox_inputs_prepare(paths, 1, PYBOX_INPUT_MAX, &in, &err), 0);
    ck_assert_ptr_null(strchr(err.msg, '\x1b'));
    ck_assert_ptr_nonnull(strstr(err.msg, "gone"));
}
END_TEST

/* ---- names in: UTF-8 whatever the locale ---- */

/* The locales a packer must work in: the C locale (pybox never calls setlocale), C.UTF-8,
 * and a Latin-1 one where this system has one (e.g. through LOCPATH). */
static const char *const pack_locales[] = {"C", "C.UTF-8", "en_US.ISO-8859-1", "de_DE.ISO-8859-1", NULL};

/* Read back a tar in C.UTF-8 (as the engine reads it: the names are bytes), each entry's
 * UTF-8 name into names (joined by '|'). */
static void read_names_utf8(const pybox_buf_t *tar, char *names, size_t len)
{
    locale_t u = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    ck_assert_ptr_nonnull(u);
    locale_t old = uselocale(u);
    struct archive *r = archive_read_new();
    archive_read_support_format_tar(r);
    ck_assert_int_eq(archive_read_open_memory(r, tar->data, tar->len), ARCHIVE_OK);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    struct archive_entry *e;
    int hr, n = 0;
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname_utf8(e);
        ck_assert_ptr_nonnull(name);
        if (n++ > 0)
            pybox_buf_adds(&b, "|");
        pybox_buf_adds(&b, name);
    }
    ck_assert_int_eq(hr, ARCHIVE_EOF);
    archive_read_free(r);
    uselocale(old);
    freelocale(u);
    snprintf(names, len, "%s", b.data ? b.data : "");
    pybox_buf_free(&b);
}

/* A file named café.txt and a folder données/ holding naïve.csv and 日本.txt. */
static void utf8_inputs(char *file, char *dir)
{
    char p[PATH_MAX];
    path_in(file, "caf\xc3\xa9.txt");
    write_file_at(file, "x", 1);
    path_in(dir, "donn\xc3\xa9"
                 "es");
    make_dir_at(dir);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/na\xc3\xafve.csv", dir), 0);
    write_file_at(p, "a,b\n", 4);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/\xe6\x97\xa5\xe6\x9c\xac.txt", dir), 0);
    write_file_at(p, "jp", 2);
}

static void assert_utf8_packed(const char *file, const char *dir, const char *where)
{
    const char *paths[] = {file, dir};
    pybox_inputs_t in;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_inputs_prepare(paths, 2, PYBOX_INPUT_MAX, &in, &err) == 0, "%s: %s", where, err.msg);
    ck_assert_uint_eq(in.n, 3);
    ck_assert_str_eq(in.files[0].name, "caf\xc3\xa9.txt");
    ck_assert_str_eq(in.files[1].name, "donn\xc3\xa9"
                                       "es/na\xc3\xafve.csv");
    ck_assert_str_eq(in.files[2].name, "donn\xc3\xa9"
                                       "es/\xe6\x97\xa5\xe6\x9c\xac.txt");
    char names[1024];
    read_names_utf8(&in.tar, names, sizeof names);
    ck_assert_msg(strcmp(names, "caf\xc3\xa9.txt|donn\xc3\xa9"
                                "es/|donn\xc3\xa9"
                                "es/na\xc3\xafve.csv|donn\xc3\xa9"
                                "es/\xe6\x97\xa5\xe6\x9c\xac.txt") == 0,
                  "%s: the archive holds %s", where, names);
    /* the pax header carries the name itself, in UTF-8, never marked as binary */
    ck_assert_ptr_nonnull(memmem(in.tar.data, in.tar.len, "path=caf\xc3\xa9.txt\n", 14));
    ck_assert_ptr_null(memmem(in.tar.data, in.tar.len, "hdrcharset", 10));
    pybox_inputs_free(&in);
}

START_TEST(in_utf8_names_any_locale)
{
    char file[PATH_MAX], dir[PATH_MAX];
    utf8_inputs(file, dir);
    int tried = 0;
    for (size_t i = 0; pack_locales[i] != NULL; i++) {
        if (setlocale(LC_ALL, pack_locales[i]) == NULL)
            continue; /* not on this system */
        tried++;
        assert_utf8_packed(file, dir, pack_locales[i]);
        /* the caller's locale is left as it was */
        ck_assert_ptr_eq(uselocale((locale_t)0), LC_GLOBAL_LOCALE);
    }
    ck_assert_int_ge(tried, 2);
    setlocale(LC_ALL, "C");
}
END_TEST

static void *pack_in_thread(void *arg)
{
    char **p = arg;
    assert_utf8_packed(p[0], p[1], "a thread");
    return uselocale((locale_t)0) == LC_GLOBAL_LOCALE ? p : NULL;
}

/* The MCP server packs in a thread per call: the thread's locale is its own. */
START_TEST(in_utf8_names_in_threads)
{
    char file[PATH_MAX], dir[PATH_MAX];
    utf8_inputs(file, dir);
    ck_assert_ptr_nonnull(setlocale(LC_ALL, "C"));
    char *p[2] = {file, dir};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, pack_in_thread, p), 0);
    for (int i = 0; i < 4; i++) {
        void *rv = NULL;
        ck_assert_int_eq(pthread_join(t[i], &rv), 0);
        ck_assert_ptr_eq(rv, p);
    }
}
END_TEST

/* A name that is not UTF-8 (a Latin-1 byte) cannot be named in /box/in: refused, with
 * the name escaped, in any locale, whether it is an input itself or inside a folder. */
START_TEST(in_name_not_utf8_refused)
{
    char top[PATH_MAX], dir[PATH_MAX], inner[PATH_MAX];
    path_in(top, "caf\xe9.txt");
    write_file_at(top, "x", 1);
    path_in(dir, "folder");
    make_dir_at(dir);
    ck_assert_int_eq(pybox_fmt(inner, sizeof inner, "%s/na\xefve.csv", dir), 0);
    write_file_at(inner, "a,b\n", 4);
    for (size_t i = 0; pack_locales[i] != NULL; i++) {
        if (setlocale(LC_ALL, pack_locales[i]) == NULL)
            continue;
        const struct {
            const char *path, *shown;
        } cases[] = {{top, "caf\\xe9.txt"}, {dir, "folder/na\\xefve.csv"}};
        for (size_t c = 0; c < 2; c++) {
            const char *paths[] = {cases[c].path};
            pybox_inputs_t in;
            pybox_error_t err = {0};
            ck_assert_msg(pybox_inputs_prepare(paths, 1, PYBOX_INPUT_MAX, &in, &err) < 0, "%s: case %zu accepted",
                          pack_locales[i], c);
            ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
            ck_assert_msg(strstr(err.msg, "not valid UTF-8") != NULL, "%s: %s", pack_locales[i], err.msg);
            ck_assert_msg(strstr(err.msg, cases[c].shown) != NULL, "%s: %s", pack_locales[i], err.msg);
            ck_assert_msg(pybox_utf8_valid(err.msg, strlen(err.msg)), "the message itself is UTF-8: %s", err.msg);
            ck_assert_ptr_null(in.files);
            ck_assert_ptr_null(in.tar.data);
        }
    }
    setlocale(LC_ALL, "C");
}
END_TEST

/* Names go in as the bytes they are: a decomposed name (e + U+0301, as macOS writes it)
 * is not recomposed, so a folder holding café.txt in both forms keeps two files in the
 * archive, each under its own name, and the receipt's two entries are what the box gets
 * (recomposed, the second overwrote the first in /box/in). In any locale. */
START_TEST(in_names_kept_as_written)
{
    char top[PATH_MAX], dir[PATH_MAX], p[PATH_MAX];
    path_in(top, "cafe\xcc\x81-top.txt");
    write_file_at(top, "top", 3);
    path_in(dir, "forms");
    make_dir_at(dir);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/caf\xc3\xa9.txt", dir), 0);
    write_file_at(p, "composed", 8);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/cafe\xcc\x81.txt", dir), 0);
    write_file_at(p, "decomposed", 10);
    static const char *const want[] = {"path=cafe\xcc\x81-top.txt\n", "path=forms/caf\xc3\xa9.txt\n",
                                       "path=forms/cafe\xcc\x81.txt\n"};
    int tried = 0;
    for (size_t i = 0; pack_locales[i] != NULL; i++) {
        if (setlocale(LC_ALL, pack_locales[i]) == NULL)
            continue;
        tried++;
        const char *paths[] = {top, dir};
        pybox_inputs_t in;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_inputs_prepare(paths, 2, PYBOX_INPUT_MAX, &in, &err) == 0, "%s: %s", pack_locales[i],
                      err.msg);
        ck_assert_uint_eq(in.n, 3);
        for (size_t w = 0; w < 3; w++)
            ck_assert_msg(memmem(in.tar.data, in.tar.len, want[w], strlen(want[w])) != NULL,
                          "%s: the archive does not hold %s as written", pack_locales[i], want[w] + 5);
        ck_assert_ptr_null(memmem(in.tar.data, in.tar.len, "hdrcharset", 10));
        pybox_inputs_free(&in);
    }
    ck_assert_int_ge(tried, 2);
    setlocale(LC_ALL, "C");
}
END_TEST

Suite *suite_files(void)
{
    Suite *s = suite_create("files");
    TCase *out = tcase_create("out");
    tcase_add_unchecked_fixture(out, case_setup, case_teardown);
    tcase_add_checked_fixture(out, test_setup, test_teardown);
    tcase_set_timeout(out, 60);
    tcase_add_test(out, out_plain_delivered);
    tcase_add_test(out, out_empty_archive);
    tcase_add_test(out, out_links_and_specials_not_back);
    tcase_add_test(out, out_hostile_names);
    tcase_add_test(out, out_invisible_names);
    tcase_add_test(out, out_blank_lookalike_names);
    tcase_add_test(out, out_good_names);
    tcase_add_test(out, out_outside_out);
    tcase_add_test(out, out_too_many_files);
    tcase_add_test(out, out_file_over_limit);
    tcase_add_test(out, out_file_and_total_limits);
    tcase_add_test(out, out_depth_limit);
    tcase_add_test(out, out_huge_declared_size);
    tcase_add_test(out, out_case_clash_file);
    tcase_add_test(out, out_case_clash_parents);
    tcase_add_test(out, out_case_clash_ignores_dropped);
    tcase_add_test(out, out_case_clash_reason_whole_and_utf8);
    tcase_add_test(out, out_composed_and_decomposed_names);
    tcase_add_test(out, out_duplicate_names);
    tcase_add_test(out, out_truncated);
    tcase_add_test(out, out_corrupt_header);
    tcase_add_test(out, out_garbage);
    tcase_add_test(out, out_zero_length);
    tcase_add_test(out, out_into_existing_empty_folder);
    tcase_add_test(out, out_existing_folder_of_another_user_refused);
    tcase_add_test(out, out_existing_folder_loses_others_write);
    tcase_add_test(out, output_parent_others_could_change);
    tcase_add_test(out, out_implied_folders);
    tcase_add_test(out, out_host_write_failure);
    suite_add_tcase(s, out);

    TCase *check = tcase_create("output_check");
    tcase_add_unchecked_fixture(check, case_setup, case_teardown);
    tcase_add_checked_fixture(check, test_setup, test_teardown);
    tcase_set_timeout(check, 30);
    tcase_add_test(check, output_check_refusals);
    tcase_add_test(check, output_check_accepts);
    tcase_add_test(check, output_check_relative);
    suite_add_tcase(s, check);

    TCase *in = tcase_create("in");
    tcase_add_unchecked_fixture(in, case_setup, case_teardown);
    tcase_add_checked_fixture(in, test_setup, test_teardown);
    tcase_set_timeout(in, 30);
    tcase_add_test(in, in_file_and_folder);
    tcase_add_test(in, in_top_level_symlink_followed);
    tcase_add_test(in, in_no_inputs);
    tcase_add_test(in, in_total_limit);
    tcase_add_test(in, in_refusals);
    tcase_add_test(in, in_refusal_escapes_name);
    tcase_add_test(in, in_utf8_names_any_locale);
    tcase_add_test(in, in_utf8_names_in_threads);
    tcase_add_test(in, in_name_not_utf8_refused);
    tcase_add_test(in, in_names_kept_as_written);
    suite_add_tcase(s, in);
    return s;
}
