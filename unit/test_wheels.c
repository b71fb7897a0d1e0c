/* SPDX-License-Identifier: MIT */
/* Unit tests for images from a uv lock and wheels (wheels.h): the lock check and the unpacking into an image. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/image/wheels.h"
#include "../pybox/util.h"
#include "suites.h"

#define SITE "./usr/local/lib/python3.11/dist-packages"
#define BIN "./usr/local/bin"
#define NO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* One private folder per test case (made and removed by the runner's own process, so it
 * goes even when a test fails), and one folder per test inside it. */
static char root_dir[PATH_MAX];
static char work[PATH_MAX];
static char wheels[PATH_MAX];
static char lockp[PATH_MAX];

static void case_setup(void)
{
    ck_assert_int_eq(pybox_fmt(root_dir, sizeof root_dir, "/tmp/pybox-unit-wheels-XXXXXX"), 0);
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
    ck_assert_int_eq(pybox_fmt(wheels, sizeof wheels, "%s/wheels", work), 0);
    ck_assert_int_eq(mkdir(wheels, 0755), 0);
    ck_assert_int_eq(pybox_fmt(lockp, sizeof lockp, "%s/uv.lock", work), 0);
}

static void test_teardown(void)
{
    unit_rm_tree(work);
    work[0] = '\0';
}

/* ---- files ---- */

static void wheel_path(char *out, const char *file)
{
    ck_assert_int_eq(pybox_fmt(out, PATH_MAX, "%s/%s", wheels, file), 0);
}

static void write_file_at(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(pybox_write_all(fd, data, len), 0);
    ck_assert_int_eq(close(fd), 0);
}

/* The whole of a file (NUL-terminated, not counted). */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    char *data = NULL;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 64 * 1024 * 1024, &data, len, &over, &err), 0);
    ck_assert(!over);
    close(fd);
    return data;
}

static void sha_of(const char *file, char out[65])
{
    char p[PATH_MAX];
    wheel_path(p, file);
    size_t len;
    char *data = slurp(p, &len);
    pybox_sha256_hex(data, len, out);
    free(data);
}

/* ---- wheels, as zip files ---- */

static la_ssize_t to_buf(struct archive *a, void *arg, const void *data, size_t len)
{
    (void)a;
    return pybox_buf_append(arg, data, len) == 0 ? (la_ssize_t)len : -1;
}

typedef struct {
    struct archive *a;
    pybox_buf_t buf;
} zip_t;

static void zip_open(zip_t *z)
{
    pybox_buf_init(&z->buf, 0);
    z->a = archive_write_new();
    ck_assert_ptr_nonnull(z->a);
    ck_assert_int_eq(archive_write_set_format_zip(z->a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_set_bytes_in_last_block(z->a, 1), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open(z->a, &z->buf, NULL, to_buf, NULL), ARCHIVE_OK);
}

/* A file (data), a folder (a name ending in '/') or a symbolic link (data is its target). */
static void zip_entry(zip_t *z, const char *name, mode_t type, const char *data)
{
    struct archive_entry *e = archive_entry_new();
    ck_assert_ptr_nonnull(e);
    archive_entry_copy_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, type == AE_IFREG ? 0664 : 0777);
    archive_entry_set_mtime(e, 1700000000, 0);
    archive_entry_set_uid(e, 1000);
    archive_entry_set_gid(e, 1000);
    size_t len = type == AE_IFREG ? strlen(data) : 0;
    if (type == AE_IFLNK)
        archive_entry_copy_symlink(e, data);
    archive_entry_set_size(e, (la_int64_t)len);
    ck_assert_msg(archive_write_header(z->a, e) == ARCHIVE_OK, "zip %s: %s", name, archive_error_string(z->a));
    if (len > 0)
        ck_assert_int_eq(archive_write_data(z->a, data, len), (la_ssize_t)len);
    archive_entry_free(e);
}

static void zip_close(zip_t *z)
{
    ck_assert_int_eq(archive_write_close(z->a), ARCHIVE_OK);
    archive_write_free(z->a);
    z->a = NULL;
}

/* A wheel from (name, content) pairs, NULL-terminated; a name ending in '/' is a folder. */
static void make_wheel_in(const char *path, const char *const *entries)
{
    zip_t z;
    zip_open(&z);
    for (size_t i = 0; entries[i] != NULL; i += 2) {
        size_t n = strlen(entries[i]);
        zip_entry(&z, entries[i], n > 0 && entries[i][n - 1] == '/' ? AE_IFDIR : AE_IFREG, entries[i + 1]);
    }
    zip_close(&z);
    write_file_at(path, z.buf.data, z.buf.len);
    pybox_buf_free(&z.buf);
}

static void make_wheel(const char *file, const char *const *entries)
{
    char p[PATH_MAX];
    wheel_path(p, file);
    make_wheel_in(p, entries);
}

#define ALPHA_WHL "alpha-1.0-py3-none-any.whl"
#define BETA_WHL "beta-2.0-py3-none-any.whl"
#define GAMMA_WHL "gamma-3.0-py3-none-any.whl"
#define DELTA_WHL "delta-0.4-py3-none-any.whl"

static const char *const ALPHA[] = {
    "alpha/",
    "",
    "alpha/__init__.py",
    "from .core import VALUE\n",
    "alpha/core.py",
    "VALUE = 42\n",
    "alpha/sub/deep.py",
    "DEEP = True\n",
    "alpha-1.0.dist-info/METADATA",
    "Metadata-Version: 2.1\nName: alpha\nVersion: 1.0\n",
    "alpha-1.0.dist-info/WHEEL",
    "Wheel-Version: 1.0\nGenerator: unit\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "alpha-1.0.dist-info/RECORD",
    "alpha/__init__.py,,\nalpha/core.py,,\n",
    NULL,
};

static const char *const BETA[] = {
    "beta/__init__.py",
    "B = 2\n",
    "beta-2.0.data/purelib/beta_extra.py",
    "EXTRA = True\n",
    "beta-2.0.data/platlib/beta_native/__init__.py",
    "NATIVE = 1\n",
    "beta-2.0.data/scripts/beta-tool",
    "#!python\nprint('tool')\n",
    "beta-2.0.data/headers/beta.h",
    "int beta(void);\n",
    "beta-2.0.data/data/share/beta.txt",
    "shared data\n",
    "beta-2.0.data/scripts/sub/nested",
    "not a script\n",
    "beta-2.0.dist-info/METADATA",
    "Metadata-Version: 2.1\nName: beta\nVersion: 2.0\n",
    "beta-2.0.dist-info/WHEEL",
    "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    NULL,
};

static const char *const GAMMA[] = {
    "gamma.py", "G = 3\n", "gamma-3.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: gamma\nVersion: 3.0\n", NULL,
};

static const char *const DELTA[] = {
    "delta.py", "D = 4\n", "delta-0.4.dist-info/METADATA", "Metadata-Version: 2.1\nName: delta\nVersion: 0.4\n", NULL,
};

/* ---- locks ---- */

static void lock_begin(pybox_buf_t *b)
{
    pybox_buf_init(b, 0);
    pybox_buf_adds(b, "version = 1\n"
                      "revision = 2\n"
                      "requires-python = \">=3.11\"\n"
                      "\n"
                      "[[package]]\n"
                      "name = \"demo\"\n"
                      "version = \"0.1.0\"\n"
                      "source = { virtual = \".\" }\n"
                      "dependencies = [\n"
                      "    { name = \"alpha\" },\n"
                      "]\n"
                      "\n"
                      "[package.metadata]\n"
                      "requires-dist = [{ name = \"alpha\", specifier = \">=1\" }]\n");
}

/* A [[package]] with one wheel, named by key ("url", "filename" or "path"). */
static void lock_package(pybox_buf_t *b, const char *name, const char *version, const char *key, const char *ref,
                         const char *hash)
{
    ck_assert_int_eq(pybox_buf_printf(b,
                                      "\n[[package]]\n"
                                      "name = \"%s\"\n"
                                      "version = \"%s\"\n"
                                      "source = { registry = \"https://pypi.org/simple\" }\n"
                                      "wheels = [\n"
                                      "    { %s = \"%s\", hash = \"sha256:%s\", size = 1 }, # the wheel\n"
                                      "]\n",
                                      name, version, key, ref, hash),
                     0);
}

static void lock_save(pybox_buf_t *b)
{
    write_file_at(lockp, b->data, b->len);
    pybox_buf_free(b);
}

/* A lock of the given text alone. */
static void lock_text(const char *text)
{
    write_file_at(lockp, text, strlen(text));
}

/* alpha (by url), beta (by filename) and gamma (by path), checked. */
static void three_wheels(pybox_lock_t *lock)
{
    make_wheel(ALPHA_WHL, ALPHA);
    make_wheel(BETA_WHL, BETA);
    make_wheel(GAMMA_WHL, GAMMA);
    char ha[65], hb[65], hg[65];
    sha_of(ALPHA_WHL, ha);
    sha_of(BETA_WHL, hb);
    sha_of(GAMMA_WHL, hg);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "alpha", "1.0", "url", "https://files.example/packages/ab/cd/" ALPHA_WHL, ha);
    lock_package(&b, "beta", "2.0", "filename", BETA_WHL, hb);
    lock_package(&b, "gamma", "3.0", "path", "../dist/" GAMMA_WHL, hg);
    lock_save(&b);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_lock_check(lockp, wheels, lock, &err) == 0, "refused: %s", err.msg);
}

/* The lock of one wheel (by filename), checked. */
static void one_wheel(pybox_lock_t *lock, const char *name, const char *file, const char *const *entries)
{
    make_wheel(file, entries);
    char h[65];
    sha_of(file, h);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, name, "1.0", "filename", file, h);
    lock_save(&b);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_lock_check(lockp, wheels, lock, &err) == 0, "refused: %s", err.msg);
}

static void assert_check_refused(const char *why)
{
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), -1);
    ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "kind %d: %s", (int)err.kind, err.msg);
    ck_assert_msg(strstr(err.msg, why) != NULL, "'%s' does not say '%s'", err.msg, why);
    ck_assert_ptr_null(lock.wheels);
    ck_assert_uint_eq(lock.n, 0);
}

/* ---- the image archive ---- */

/* Paths the image has already, NULL-terminated. */
typedef struct {
    const char *const *paths;
    int calls;
} image_t;

static bool image_has(const char *path, void *arg)
{
    image_t *im = arg;
    im->calls++;
    ck_assert_msg(path[0] == '.' && path[1] == '/', "asked about %s", path);
    ck_assert_msg(path[strlen(path) - 1] != '/', "asked about %s", path);
    for (size_t i = 0; im->paths[i] != NULL; i++)
        if (strcmp(im->paths[i], path) == 0)
            return true;
    return false;
}

static const char *const IMAGE[] = {".", "./usr", "./usr/local", "./usr/local/bin", "./usr/local/lib", NULL};

/* Unpack into a pax archive in memory; the progress text is returned in *progress. */
static int unpack(const pybox_lock_t *lock, image_t *im, pybox_buf_t *tar, char **progress, pybox_error_t *err)
{
    pybox_buf_init(tar, 0);
    struct archive *w = archive_write_new();
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(archive_write_set_format_pax_restricted(w), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open(w, tar, NULL, to_buf, NULL), ARCHIVE_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    memset(err, 0, sizeof *err);
    const pybox_out_t out = {pybox_out_file, f};
    int rc = pybox_wheels_unpack(w, lock, wheels, SITE, BIN, im ? image_has : NULL, im, f ? &out : NULL, err);
    ck_assert_int_eq(fclose(f), 0);
    if (rc == 0)
        ck_assert_int_eq(archive_write_close(w), ARCHIVE_OK);
    archive_write_free(w);
    *progress = text;
    return rc;
}

typedef struct {
    char name[1024];
    mode_t type, perm;
    int64_t uid, gid, mtime;
    char *data;
    size_t len;
} entry_t;

typedef struct {
    entry_t *v;
    size_t n;
} entries_t;

static void read_tar(const pybox_buf_t *tar, entries_t *out)
{
    memset(out, 0, sizeof *out);
    struct archive *r = archive_read_new();
    ck_assert_ptr_nonnull(r);
    archive_read_support_format_tar(r);
    ck_assert_int_eq(archive_read_open_memory(r, tar->data, tar->len), ARCHIVE_OK);
    struct archive_entry *e;
    int hr;
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
        out->v = realloc(out->v, (out->n + 1) * sizeof *out->v);
        ck_assert_ptr_nonnull(out->v);
        entry_t *x = &out->v[out->n++];
        memset(x, 0, sizeof *x);
        ck_assert_int_eq(pybox_strlcpy(x->name, archive_entry_pathname(e), sizeof x->name), 0);
        x->type = archive_entry_filetype(e);
        x->perm = archive_entry_perm(e);
        x->uid = archive_entry_uid(e);
        x->gid = archive_entry_gid(e);
        x->mtime = archive_entry_mtime(e);
        pybox_buf_t data;
        pybox_buf_init(&data, 0);
        char buf[4096];
        la_ssize_t got;
        while ((got = archive_read_data(r, buf, sizeof buf)) > 0)
            ck_assert_int_eq(pybox_buf_append(&data, buf, (size_t)got), 0);
        ck_assert_int_eq(got, 0);
        x->len = data.len;
        x->data = pybox_buf_steal(&data);
    }
    ck_assert_msg(hr == ARCHIVE_EOF, "reading the image back: %s", archive_error_string(r));
    archive_read_free(r);
}

static void entries_free(entries_t *es)
{
    for (size_t i = 0; i < es->n; i++)
        free(es->v[i].data);
    free(es->v);
}

static size_t count_of(const entries_t *es, const char *name)
{
    size_t c = 0;
    for (size_t i = 0; i < es->n; i++)
        c += strcmp(es->v[i].name, name) == 0;
    return c;
}

static long index_of(const entries_t *es, const char *name)
{
    for (size_t i = 0; i < es->n; i++)
        if (strcmp(es->v[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* A regular file, root-owned, of this mode and content. */
static void assert_file(const entries_t *es, const char *name, mode_t perm, const char *content)
{
    ck_assert_msg(count_of(es, name) == 1, "%s is there %zu times", name, count_of(es, name));
    const entry_t *x = &es->v[index_of(es, name)];
    ck_assert_msg(x->type == AE_IFREG, "%s: type %o", name, (unsigned)x->type);
    ck_assert_msg(x->perm == perm, "%s: mode %o", name, (unsigned)x->perm);
    ck_assert_int_eq(x->uid, 0);
    ck_assert_int_eq(x->gid, 0);
    ck_assert_int_eq(x->mtime, 0);
    ck_assert_uint_eq(x->len, strlen(content));
    ck_assert(memcmp(x->data, content, x->len) == 0);
}

static void assert_no_name_with(const entries_t *es, const char *part)
{
    for (size_t i = 0; i < es->n; i++)
        ck_assert_msg(strstr(es->v[i].name, part) == NULL, "%s is in the image", es->v[i].name);
}

/* Every folder entry is a root-owned 0755 folder, written once, before what is in it;
 * every parent of an entry is either such a folder or one the image has. */
static void assert_folders(const entries_t *es, const char *const *have)
{
    for (size_t i = 0; i < es->n; i++) {
        const entry_t *x = &es->v[i];
        if (x->type == AE_IFDIR) {
            ck_assert_msg(x->perm == 0755 && x->uid == 0 && x->gid == 0, "%s", x->name);
            ck_assert_msg(count_of(es, x->name) == 1, "%s written %zu times", x->name, count_of(es, x->name));
            size_t n = strlen(x->name);
            ck_assert_msg(n > 0 && x->name[n - 1] == '/', "%s", x->name);
        } else {
            ck_assert_msg(x->type == AE_IFREG, "%s: type %o", x->name, (unsigned)x->type);
        }
        char parent[1024];
        ck_assert_int_eq(pybox_strlcpy(parent, x->name, sizeof parent), 0);
        size_t n = strlen(parent);
        if (parent[n - 1] == '/')
            parent[n - 1] = '\0';
        char *s = strrchr(parent, '/');
        ck_assert_ptr_nonnull(s);
        *s = '\0';
        if (strcmp(parent, ".") == 0)
            continue; /* the image's root */
        bool image = false;
        for (size_t j = 0; have != NULL && have[j] != NULL; j++)
            image = image || strcmp(have[j], parent) == 0;
        if (image) {
            char d[1030];
            ck_assert_int_eq(pybox_fmt(d, sizeof d, "%s/", parent), 0);
            ck_assert_msg(count_of(es, d) == 0, "%s written, but the image has it", d);
        } else {
            char d[1030];
            ck_assert_int_eq(pybox_fmt(d, sizeof d, "%s/", parent), 0);
            long at = index_of(es, d);
            ck_assert_msg(at >= 0 && (size_t)at < i, "%s comes without its folder %s first", x->name, d);
        }
    }
}

static void assert_unpack_refused(const pybox_lock_t *lock, image_t *im, const char *why)
{
    pybox_buf_t tar;
    char *progress = NULL;
    pybox_error_t err;
    int rc = unpack(lock, im, &tar, &progress, &err);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "kind %d: %s", (int)err.kind, err.msg);
    ck_assert_msg(strstr(err.msg, why) != NULL, "'%s' does not say '%s'", err.msg, why);
    free(progress);
    pybox_buf_free(&tar);
}

/* ---- the lock check ---- */

START_TEST(check_accepts)
{
    make_wheel(DELTA_WHL, DELTA);
    pybox_lock_t lock;
    three_wheels(&lock);
    ck_assert_uint_eq(lock.n, 3);
    static const char *const names[] = {"alpha", "beta", "gamma"}, *const versions[] = {"1.0", "2.0", "3.0"},
                             *const files[] = {ALPHA_WHL, BETA_WHL, GAMMA_WHL};
    for (size_t i = 0; i < 3; i++) {
        const pybox_wheel_t *x = &lock.wheels[i];
        ck_assert_str_eq(x->name, names[i]);
        ck_assert_str_eq(x->version, versions[i]);
        ck_assert_str_eq(x->file, files[i]);
        char h[65];
        sha_of(files[i], h);
        ck_assert_str_eq(x->sha256, h);
        char p[PATH_MAX];
        wheel_path(p, files[i]);
        struct stat sb;
        ck_assert_int_eq(stat(p, &sb), 0);
        ck_assert_int_eq(x->bytes, sb.st_size);
    }
    pybox_lock_free(&lock);
    ck_assert_ptr_null(lock.wheels);
    ck_assert_uint_eq(lock.n, 0);

    /* The first of a package's wheels that is in the folder is the one used; an editable
     * project is skipped like a virtual one. */
    char hd[65];
    sha_of(DELTA_WHL, hd);
    pybox_buf_t b;
    lock_begin(&b);
    pybox_buf_addf(&b,
                   "\n[[package]]\nname = \"mine\"\nversion = \"0.2\"\nsource = { editable = \".\" }\n"
                   "\n[[package]]\nname = \"delta\"\nversion = \"0.4\"\n"
                   "source = { registry = \"https://pypi.org/simple\" }\n"
                   "sdist = { url = \"https://files.example/delta-0.4.tar.gz\", hash = \"sha256:%s\" }\n"
                   "wheels = [\n"
                   "    { url = \"https://files.example/delta-0.4-cp311-cp311-win_amd64.whl\", hash = "
                   "\"sha256:%s\" },\n"
                   "    { url = \"https://files.example/" DELTA_WHL "\", hash = \"sha256:%s\", size = 9 },\n"
                   "]\n",
                   NO_HASH, NO_HASH, hd);
    lock_save(&b);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_lock_check(lockp, wheels, &lock, &err) == 0, "refused: %s", err.msg);
    ck_assert_uint_eq(lock.n, 1);
    ck_assert_str_eq(lock.wheels[0].name, "delta");
    ck_assert_str_eq(lock.wheels[0].file, DELTA_WHL);
    ck_assert_str_eq(lock.wheels[0].sha256, hd);
    pybox_lock_free(&lock);

    /* Only the project itself: nothing to install. */
    lock_begin(&b);
    lock_save(&b);
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
    ck_assert_uint_eq(lock.n, 0);
    pybox_lock_free(&lock);
}
END_TEST

/* One byte more, one byte less, one byte changed: each refused. */
START_TEST(check_hash_mismatch)
{
    make_wheel(ALPHA_WHL, ALPHA);
    char h[65];
    sha_of(ALPHA_WHL, h);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "alpha", "1.0", "url", "https://files.example/" ALPHA_WHL, h);
    lock_save(&b);
    char p[PATH_MAX];
    wheel_path(p, ALPHA_WHL);
    size_t len;
    char *orig = slurp(p, &len);
    char *bad = malloc(len + 1);
    ck_assert_ptr_nonnull(bad);
    for (int variant = 0; variant < 3; variant++) {
        memcpy(bad, orig, len);
        size_t n = len;
        if (variant == 0)
            bad[len / 2] ^= 1;
        else if (variant == 1)
            bad[n++] = '\n';
        else
            n--;
        write_file_at(p, bad, n);
        assert_check_refused("is not the lock's");
        assert_check_refused(ALPHA_WHL);
    }
    free(bad);
    write_file_at(p, orig, len);
    free(orig);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(check_no_wheel_in_lock)
{
    make_wheel(ALPHA_WHL, ALPHA);
    char h[65];
    sha_of(ALPHA_WHL, h);
    pybox_buf_t b;
    lock_begin(&b);
    pybox_buf_addf(&b,
                   "\n[[package]]\nname = \"alpha\"\nversion = \"1.0\"\n"
                   "source = { registry = \"https://pypi.org/simple\" }\n"
                   "sdist = { url = \"https://files.example/alpha-1.0.tar.gz\", hash = \"sha256:%s\" }\n",
                   h);
    lock_save(&b);
    assert_check_refused("alpha 1.0 has no wheel in the lock");
    assert_check_refused("source would run its code");

    lock_begin(&b);
    pybox_buf_adds(&b, "\n[[package]]\nname = \"alpha\"\nversion = \"1.0\"\nwheels = []\n");
    lock_save(&b);
    assert_check_refused("has no wheel in the lock");

    /* A package of a git or path source without wheels is refused the same way. */
    lock_begin(&b);
    pybox_buf_adds(&b, "\n[[package]]\nname = \"alpha\"\nversion = \"1.0\"\nsource = { git = "
                       "\"https://git.example/alpha?rev=1#abc\" }\n");
    lock_save(&b);
    assert_check_refused("has no wheel in the lock");
}
END_TEST

START_TEST(check_wheel_not_in_folder)
{
    make_wheel(ALPHA_WHL, ALPHA);
    char h[65];
    sha_of(ALPHA_WHL, h);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "alpha", "1.0", "url", "https://files.example/" ALPHA_WHL, h);
    lock_package(&b, "beta", "2.0", "url", "https://files.example/" BETA_WHL, NO_HASH);
    lock_save(&b);
    assert_check_refused("no wheel of beta 2.0 from the lock is in");
    assert_check_refused(wheels);
}
END_TEST

START_TEST(check_hash_not_sha256)
{
    make_wheel(ALPHA_WHL, ALPHA);
    static const char *const hashes[] = {
        "md5:0123456789abcdef0123456789abcdef",
        "sha256:0123",
        "sha512:" NO_HASH NO_HASH,
        "SHA256:" NO_HASH,
        "sha256:" NO_HASH "0",
        NO_HASH,
    };
    for (size_t i = 0; i < sizeof hashes / sizeof hashes[0]; i++) {
        pybox_buf_t b;
        lock_begin(&b);
        pybox_buf_addf(&b,
                       "\n[[package]]\nname = \"alpha\"\nversion = \"1.0\"\nwheels = [{ filename = \"%s\", hash = "
                       "\"%s\" }]\n",
                       ALPHA_WHL, hashes[i]);
        lock_save(&b);
        assert_check_refused("is not a SHA-256");
    }
    /* A wheel without any hash is not taken either. */
    lock_text("[[package]]\nname = \"alpha\"\nversion = \"1.0\"\nwheels = [{ filename = \"" ALPHA_WHL "\" }]\n");
    assert_check_refused("no wheel of alpha 1.0 from the lock is in");
    lock_text("[[package]]\nname = \"alpha\"\nversion = \"1.0\"\nwheels = [{ filename = \"" ALPHA_WHL
              "\", hash = 12 }]\n");
    assert_check_refused("no wheel of alpha 1.0 from the lock is in");
}
END_TEST

START_TEST(check_not_a_lock)
{
    lock_text("<html><body>not a lock</body></html>\n");
    assert_check_refused("lock file line 1");
    lock_text("version = 1\n[[package]]\nname = \"alpha\"\nversion = 1.0\n");
    assert_check_refused("lock file line 4");
    lock_text("version = 1\nrequires-python = \">=3.11\"\n");
    assert_check_refused("no [[package]] tables");
    lock_text("");
    assert_check_refused("no [[package]] tables");
    lock_text("[package]\nname = \"alpha\"\nversion = \"1.0\"\n");
    assert_check_refused("no [[package]] tables");
    lock_text("package = \"alpha\"\n");
    assert_check_refused("no [[package]] tables");
    lock_text("[[package]]\nversion = \"1.0\"\nwheels = []\n");
    assert_check_refused("a package without a name or version");
    lock_text("[[package]]\nname = \"alpha\"\nversion = 1\n");
    assert_check_refused("a package without a name or version");
    lock_text("package = [1, 2]\n");
    assert_check_refused("a package without a name or version");

    /* No lock at all. */
    ck_assert_int_eq(unlink(lockp), 0);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_int_eq(err.errnum, ENOENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "--lock"));
}
END_TEST

START_TEST(check_bad_wheel_names)
{
    /* Names that are not a plain wheel file name are not looked for in the folder, even
     * when a file of that name is there. */
    char sub[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(sub, sizeof sub, "%s/sub", wheels), 0);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    make_wheel("sub/" ALPHA_WHL, ALPHA);
    make_wheel("alpha-1.0-py3-none-any.zip", ALPHA);
    make_wheel(".alpha-1.0-py3-none-any.whl", ALPHA);
    make_wheel(".whl", ALPHA);
    static const char *const names[] = {
        "sub/" ALPHA_WHL, "alpha-1.0-py3-none-any.zip", ".alpha-1.0-py3-none-any.whl", ".whl", "", "alpha.WHL",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char h[65];
        if (names[i][0] != '\0' && strcmp(names[i], "alpha.WHL") != 0)
            sha_of(names[i], h);
        else
            memcpy(h, NO_HASH, sizeof h);
        pybox_buf_t b;
        lock_begin(&b);
        lock_package(&b, "alpha", "1.0", "filename", names[i], h);
        lock_save(&b);
        assert_check_refused("no wheel of alpha 1.0 from the lock is in");
    }
    /* A url or path ending in '/' names no file. */
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "alpha", "1.0", "url", "https://files.example/sub/", NO_HASH);
    lock_save(&b);
    assert_check_refused("no wheel of alpha 1.0 from the lock is in");
}
END_TEST

START_TEST(check_special_files)
{
    /* A link in the folder is not followed, even to the very wheel of the lock. */
    char real[PATH_MAX], p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(real, sizeof real, "%s/real.whl", work), 0);
    make_wheel_in(real, ALPHA);
    size_t len;
    char *data = slurp(real, &len);
    char h[65];
    pybox_sha256_hex(data, len, h);
    free(data);
    wheel_path(p, ALPHA_WHL);
    ck_assert_int_eq(symlink(real, p), 0);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "alpha", "1.0", "filename", ALPHA_WHL, h);
    lock_save(&b);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_int_eq(err.errnum, ELOOP);
    ck_assert_msg(strstr(err.msg, "open(") != NULL && strstr(err.msg, ALPHA_WHL) != NULL, "%s", err.msg);
    ck_assert_ptr_null(lock.wheels);

    /* A folder of that name. */
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    assert_check_refused("is not a regular file");

    /* A FIFO of that name: refused at once, not waited on. */
    ck_assert_int_eq(rmdir(p), 0);
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    assert_check_refused("is not a regular file");
}
END_TEST

/* ---- unpacking ---- */

START_TEST(unpack_layout)
{
    pybox_lock_t lock;
    three_wheels(&lock);
    image_t im = {IMAGE, 0};
    pybox_buf_t tar;
    char *progress = NULL;
    pybox_error_t err;
    ck_assert_msg(unpack(&lock, &im, &tar, &progress, &err) == 0, "refused: %s", err.msg);
    ck_assert_int_gt(im.calls, 0);
    entries_t es;
    read_tar(&tar, &es);

    /* Modules and metadata under site, as in the wheel. */
    assert_file(&es, SITE "/alpha/__init__.py", 0644, "from .core import VALUE\n");
    assert_file(&es, SITE "/alpha/core.py", 0644, "VALUE = 42\n");
    assert_file(&es, SITE "/alpha/sub/deep.py", 0644, "DEEP = True\n");
    assert_file(&es, SITE "/alpha-1.0.dist-info/METADATA", 0644, "Metadata-Version: 2.1\nName: alpha\nVersion: 1.0\n");
    assert_file(&es, SITE "/alpha-1.0.dist-info/RECORD", 0644, "alpha/__init__.py,,\nalpha/core.py,,\n");
    assert_file(&es, SITE "/beta/__init__.py", 0644, "B = 2\n");
    assert_file(&es, SITE "/gamma.py", 0644, "G = 3\n");
    assert_file(&es, SITE "/gamma-3.0.dist-info/METADATA", 0644, "Metadata-Version: 2.1\nName: gamma\nVersion: 3.0\n");
    /* .data/purelib and platlib into site, .data/scripts into bin (executable). */
    assert_file(&es, SITE "/beta_extra.py", 0644, "EXTRA = True\n");
    assert_file(&es, SITE "/beta_native/__init__.py", 0644, "NATIVE = 1\n");
    assert_file(&es, BIN "/beta-tool", 0755, "#!python\nprint('tool')\n");
    /* Headers, data files and scripts in a subfolder are not installed. */
    assert_no_name_with(&es, ".data");
    assert_no_name_with(&es, "beta.h");
    assert_no_name_with(&es, "beta.txt");
    assert_no_name_with(&es, "nested");
    size_t files = 0;
    for (size_t i = 0; i < es.n; i++)
        files += es.v[i].type == AE_IFREG;
    ck_assert_uint_eq(files, 14);

    /* Folders: each once, none the image has. */
    assert_folders(&es, IMAGE);
    static const char *const dirs[] = {
        "./usr/local/lib/python3.11/",
        SITE "/",
        SITE "/alpha/",
        SITE "/alpha/sub/",
        SITE "/alpha-1.0.dist-info/",
        SITE "/beta/",
        SITE "/beta-2.0.dist-info/",
        SITE "/gamma-3.0.dist-info/",
        SITE "/beta_native/",
    };
    size_t ndirs = 0;
    for (size_t i = 0; i < es.n; i++)
        ndirs += es.v[i].type == AE_IFDIR;
    ck_assert_uint_eq(ndirs, sizeof dirs / sizeof dirs[0]);
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        ck_assert_msg(count_of(&es, dirs[i]) == 1, "%s written %zu times", dirs[i], count_of(&es, dirs[i]));
    ck_assert_uint_eq(count_of(&es, "./usr/"), 0);
    ck_assert_uint_eq(count_of(&es, "./usr/local/"), 0);
    ck_assert_uint_eq(count_of(&es, "./usr/local/lib/"), 0);
    ck_assert_uint_eq(count_of(&es, BIN "/"), 0);

    /* What was skipped and what was installed is told. */
    ck_assert_ptr_nonnull(progress);
    ck_assert_msg(strstr(progress, "skipped beta-2.0.data/headers/beta.h from " BETA_WHL) != NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "skipped beta-2.0.data/data/share/beta.txt") != NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "installed alpha 1.0 (" ALPHA_WHL ", sha256 ") != NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "installed beta 2.0") != NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "installed gamma 3.0") != NULL, "%s", progress);

    entries_free(&es);
    free(progress);
    pybox_buf_free(&tar);
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(unpack_image_has_nothing)
{
    pybox_lock_t lock;
    three_wheels(&lock);
    pybox_buf_t tar;
    char *progress = NULL;
    pybox_error_t err;
    ck_assert_msg(unpack(&lock, NULL, &tar, &progress, &err) == 0, "refused: %s", err.msg);
    entries_t es;
    read_tar(&tar, &es);
    assert_folders(&es, NULL);
    static const char *const dirs[] = {"./usr/", "./usr/local/", "./usr/local/lib/", "./usr/local/bin/", SITE "/"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        ck_assert_msg(count_of(&es, dirs[i]) == 1, "%s written %zu times", dirs[i], count_of(&es, dirs[i]));
    ck_assert_uint_eq(count_of(&es, "./"), 0);
    assert_file(&es, BIN "/beta-tool", 0755, "#!python\nprint('tool')\n");
    entries_free(&es);
    free(progress);
    pybox_buf_free(&tar);
    pybox_lock_free(&lock);

    /* Nothing to install, nothing written. */
    pybox_buf_t b;
    lock_begin(&b);
    lock_save(&b);
    pybox_error_t cerr = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &cerr), 0);
    ck_assert_int_eq(unpack(&lock, NULL, &tar, &progress, &err), 0);
    read_tar(&tar, &es);
    ck_assert_uint_eq(es.n, 0);
    entries_free(&es);
    free(progress);
    pybox_buf_free(&tar);
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(unpack_hostile_names)
{
    static const char *const names[] = {
        "../evil",
        "/abs",
        "a//b",
        "evil/../../x",
        "evil/./x",
        "./x",
        "evil/..",
        "evil/c\001d",
        "evil/tab\tx",
        "evil/new\nline",
        "evil/a\\b.py",
        "evil/del\x7f",
        "evil/bad\xff.py",
        "evil/esc\x1b[2J",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *const entries[] = {"evil/__init__.py", "E = 1\n", names[i], "boom\n", NULL};
        pybox_lock_t lock;
        one_wheel(&lock, "evil", "evil-1.0-py3-none-any.whl", entries);
        image_t im = {IMAGE, 0};
        assert_unpack_refused(&lock, &im, "holds a name that cannot be installed");
        pybox_lock_free(&lock);
    }
}
END_TEST

START_TEST(unpack_link_entry)
{
    zip_t z;
    zip_open(&z);
    zip_entry(&z, "evil/__init__.py", AE_IFREG, "E = 1\n");
    zip_entry(&z, "evil/passwd", AE_IFLNK, "/etc/passwd");
    zip_close(&z);
    char p[PATH_MAX];
    wheel_path(p, "evil-1.0-py3-none-any.whl");
    write_file_at(p, z.buf.data, z.buf.len);
    pybox_buf_free(&z.buf);
    char h[65];
    sha_of("evil-1.0-py3-none-any.whl", h);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "evil", "1.0", "filename", "evil-1.0-py3-none-any.whl", h);
    lock_save(&b);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
    image_t im = {IMAGE, 0};
    assert_unpack_refused(&lock, &im, "holds a link or special file");
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(unpack_same_file_twice)
{
    /* Two wheels installing one file. */
    static const char *const one[] = {"shared/mod.py", "ONE = 1\n", NULL};
    static const char *const two[] = {"shared/mod.py", "TWO = 2\n", NULL};
    make_wheel("one-1.0-py3-none-any.whl", one);
    make_wheel("two-1.0-py3-none-any.whl", two);
    char h1[65], h2[65];
    sha_of("one-1.0-py3-none-any.whl", h1);
    sha_of("two-1.0-py3-none-any.whl", h2);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "one", "1.0", "filename", "one-1.0-py3-none-any.whl", h1);
    lock_package(&b, "two", "1.0", "filename", "two-1.0-py3-none-any.whl", h2);
    lock_save(&b);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
    image_t im = {IMAGE, 0};
    assert_unpack_refused(&lock, &im, "two-1.0-py3-none-any.whl installs a file the image or another wheel has");
    pybox_lock_free(&lock);

    /* One wheel installing one file twice, once through .data/purelib. */
    static const char *const twice[] = {"mod.py", "A = 1\n", "twice-1.0.data/purelib/mod.py", "B = 2\n", NULL};
    one_wheel(&lock, "twice", "twice-1.0-py3-none-any.whl", twice);
    assert_unpack_refused(&lock, &im, "installs a file the image or another wheel has");
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(unpack_file_and_folder_clash)
{
    /* A file where another wheel made a folder, and a folder where another wheel put a file. */
    static const char *const pkg[] = {"clash/__init__.py", "C = 1\n", NULL};
    static const char *const file[] = {"clash", "not a folder\n", NULL};
    for (int order = 0; order < 2; order++) {
        make_wheel("a-1.0-py3-none-any.whl", order == 0 ? pkg : file);
        make_wheel("b-1.0-py3-none-any.whl", order == 0 ? file : pkg);
        char ha[65], hb[65];
        sha_of("a-1.0-py3-none-any.whl", ha);
        sha_of("b-1.0-py3-none-any.whl", hb);
        pybox_buf_t b;
        lock_begin(&b);
        lock_package(&b, "a", "1.0", "filename", "a-1.0-py3-none-any.whl", ha);
        lock_package(&b, "b", "1.0", "filename", "b-1.0-py3-none-any.whl", hb);
        lock_save(&b);
        pybox_lock_t lock;
        pybox_error_t err = {0};
        ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
        image_t im = {IMAGE, 0};
        assert_unpack_refused(&lock, &im, "b-1.0-py3-none-any.whl installs a file the image or another wheel has");
        pybox_lock_free(&lock);
    }
}
END_TEST

START_TEST(unpack_image_has_file)
{
    pybox_lock_t lock;
    three_wheels(&lock);
    static const char *const has_module[] = {".", "./usr", "./usr/local", SITE "/alpha/core.py", NULL};
    image_t im = {has_module, 0};
    assert_unpack_refused(&lock, &im, ALPHA_WHL " installs a file the image or another wheel has");
    static const char *const has_script[] = {".", "./usr", "./usr/local", BIN, BIN "/beta-tool", NULL};
    image_t im2 = {has_script, 0};
    assert_unpack_refused(&lock, &im2, BETA_WHL " installs a file the image or another wheel has");
    /* A folder the image has where a wheel puts a file. */
    static const char *const has_folder[] = {".", "./usr", SITE "/gamma.py", NULL};
    image_t im3 = {has_folder, 0};
    assert_unpack_refused(&lock, &im3, GAMMA_WHL " installs a file the image or another wheel has");
    pybox_lock_free(&lock);
}
END_TEST

START_TEST(unpack_changed_after_check)
{
    pybox_lock_t lock;
    three_wheels(&lock);
    char p[PATH_MAX];
    wheel_path(p, BETA_WHL);
    size_t len;
    char *data = slurp(p, &len);
    data[len - 1] ^= 0x20;
    write_file_at(p, data, len);
    free(data);
    image_t im = {IMAGE, 0};
    assert_unpack_refused(&lock, &im, "wheel " BETA_WHL " changed after it was checked");

    /* Replaced by another valid wheel. */
    make_wheel(BETA_WHL, GAMMA);
    assert_unpack_refused(&lock, &im, "wheel " BETA_WHL " changed after it was checked");

    /* Replaced by a link to the checked content. */
    char real[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(real, sizeof real, "%s/real.whl", work), 0);
    make_wheel_in(real, BETA);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(symlink(real, p), 0);
    assert_unpack_refused(&lock, &im, "open(");

    /* Gone. */
    ck_assert_int_eq(unlink(p), 0);
    assert_unpack_refused(&lock, &im, BETA_WHL);
    pybox_lock_free(&lock);
}
END_TEST

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* A wheel whose one entry says it is `says` bytes long in all of its headers, whatever it
 * holds; its content deflated or stored. */
static void make_lying_wheel(const char *file, const char *content, uint32_t says, bool store)
{
    zip_t z;
    zip_open(&z);
    if (store)
        ck_assert_int_eq(archive_write_zip_set_compression_store(z.a), ARCHIVE_OK);
    zip_entry(&z, "liar/__init__.py", AE_IFREG, content);
    zip_close(&z);
    unsigned char *d = (unsigned char *)z.buf.data;
    int patched = 0;
    for (size_t i = 0; i + 30 < z.buf.len; i++) {
        if (memcmp(d + i, "PK\3\4", 4) == 0) {
            put32(d + i + 22, says); /* local header: uncompressed size */
            patched++;
        } else if (memcmp(d + i, "PK\1\2", 4) == 0) {
            put32(d + i + 24, says); /* central directory: uncompressed size */
            patched++;
        } else if (memcmp(d + i, "PK\7\10", 4) == 0) {
            put32(d + i + 12, says); /* data descriptor: uncompressed size */
        }
    }
    ck_assert_int_eq(patched, 2);
    char p[PATH_MAX];
    wheel_path(p, file);
    write_file_at(p, z.buf.data, z.buf.len);
    pybox_buf_free(&z.buf);
}

START_TEST(unpack_size_lies)
{
    static const char content[] = "# a module of some length, to be lied about\nVALUE = 1\n";
    static const uint32_t says[] = {0, 5, sizeof content - 2, sizeof content, 4096, 0xffffffffu};
    for (int store = 0; store < 2; store++) {
        for (size_t i = 0; i < sizeof says / sizeof says[0]; i++) {
            make_lying_wheel("liar-1.0-py3-none-any.whl", content, says[i], store);
            char h[65];
            sha_of("liar-1.0-py3-none-any.whl", h);
            pybox_buf_t b;
            lock_begin(&b);
            lock_package(&b, "liar", "1.0", "filename", "liar-1.0-py3-none-any.whl", h);
            lock_save(&b);
            pybox_lock_t lock;
            pybox_error_t err = {0};
            ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
            image_t im = {IMAGE, 0};
            assert_unpack_refused(&lock, &im, "wheel liar-1.0-py3-none-any.whl");
            pybox_lock_free(&lock);
        }
    }
}
END_TEST

/* Every cut of a wheel (with the lock's hash of the cut file) unpacks or is refused,
 * never a crash; a cut inside an entry's data is refused. */
START_TEST(unpack_truncated)
{
    make_wheel(ALPHA_WHL, ALPHA);
    char p[PATH_MAX];
    wheel_path(p, ALPHA_WHL);
    size_t len;
    char *whole = slurp(p, &len);
    size_t refused = 0, read = 0;
    for (size_t cut = 0; cut < len; cut++) {
        write_file_at(p, whole, cut);
        char h[65];
        pybox_sha256_hex(whole, cut, h);
        pybox_buf_t b;
        lock_begin(&b);
        lock_package(&b, "alpha", "1.0", "filename", ALPHA_WHL, h);
        lock_save(&b);
        pybox_lock_t lock;
        pybox_error_t err = {0};
        ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
        image_t im = {IMAGE, 0};
        pybox_buf_t tar;
        char *progress = NULL;
        int rc = unpack(&lock, &im, &tar, &progress, &err);
        if (rc == 0) {
            read++;
            entries_t es;
            read_tar(&tar, &es);
            assert_folders(&es, IMAGE);
            /* What is there is whole: some of the wheel's files, each as in the wheel. */
            for (size_t i = 0; i < es.n; i++) {
                if (es.v[i].type != AE_IFREG)
                    continue;
                ck_assert(strncmp(es.v[i].name, SITE "/", strlen(SITE "/")) == 0);
                const char *rel = es.v[i].name + strlen(SITE "/");
                size_t j = 0;
                while (ALPHA[j] != NULL && strcmp(ALPHA[j], rel) != 0)
                    j += 2;
                ck_assert_msg(ALPHA[j] != NULL, "cut %zu: %s", cut, es.v[i].name);
                ck_assert_uint_eq(es.v[i].len, strlen(ALPHA[j + 1]));
                ck_assert(memcmp(es.v[i].data, ALPHA[j + 1], es.v[i].len) == 0);
            }
            entries_free(&es);
        } else {
            refused++;
            ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "cut %zu: kind %d: %s", cut, (int)err.kind, err.msg);
            ck_assert_msg(strstr(err.msg, ALPHA_WHL) != NULL, "cut %zu: %s", cut, err.msg);
        }
        free(progress);
        pybox_buf_free(&tar);
        pybox_lock_free(&lock);
        /* A cut well inside the entries. */
        if (cut == len / 2)
            ck_assert_msg(rc == -1, "cut %zu unpacked", cut);
    }
    /* Cuts inside the central directory still read (entry by entry); cuts before it do not. */
    ck_assert_uint_gt(refused, len / 4);
    ck_assert_uint_gt(read, 0);
    free(whole);
}
END_TEST

START_TEST(unpack_not_a_zip)
{
    static const char *const garbage[] = {"", "PK", "PK\3\4", "not a zip at all\n",
                                          "PK\3\4 garbage after a local header signature"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        char p[PATH_MAX];
        wheel_path(p, ALPHA_WHL);
        size_t n = strlen(garbage[i]);
        write_file_at(p, garbage[i], n);
        char h[65];
        pybox_sha256_hex(garbage[i], n, h);
        pybox_buf_t b;
        lock_begin(&b);
        lock_package(&b, "alpha", "1.0", "filename", ALPHA_WHL, h);
        lock_save(&b);
        pybox_lock_t lock;
        pybox_error_t err = {0};
        ck_assert_int_eq(pybox_lock_check(lockp, wheels, &lock, &err), 0);
        image_t im = {IMAGE, 0};
        assert_unpack_refused(&lock, &im, "wheel " ALPHA_WHL);
        pybox_lock_free(&lock);
    }
}
END_TEST

START_TEST(unpack_progress_escaped)
{
    /* Names from the lock and the wheel reach the terminal only escaped. */
    static const char *const entries[] = {
        "esc/__init__.py",
        "E = 1\n",
        "esc-1.0.data/headers/\xc2\x9b"
        "31mred.h",
        "int x;\n",
        NULL,
    };
    make_wheel("esc-1.0-py3-none-any.whl", entries);
    char h[65];
    sha_of("esc-1.0-py3-none-any.whl", h);
    pybox_buf_t b;
    lock_begin(&b);
    lock_package(&b, "esc\\u001b[2J", "1.0\\u202e", "filename", "esc-1.0-py3-none-any.whl", h);
    lock_save(&b);
    pybox_lock_t lock;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_lock_check(lockp, wheels, &lock, &err) == 0, "refused: %s", err.msg);
    image_t im = {IMAGE, 0};
    pybox_buf_t tar;
    char *progress = NULL;
    ck_assert_msg(unpack(&lock, &im, &tar, &progress, &err) == 0, "refused: %s", err.msg);
    ck_assert_ptr_nonnull(strstr(progress, "skipped esc-1.0.data/headers/"));
    ck_assert_ptr_nonnull(strstr(progress, "installed esc"));
    ck_assert_msg(strchr(progress, '\x1b') == NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "\xc2\x9b") == NULL, "%s", progress);
    ck_assert_msg(strstr(progress, "\xe2\x80\xae") == NULL, "%s", progress);
    free(progress);
    pybox_buf_free(&tar);
    pybox_lock_free(&lock);
}
END_TEST

Suite *suite_wheels(void)
{
    Suite *s = suite_create("wheels");
    TCase *check = tcase_create("lock_check");
    tcase_add_unchecked_fixture(check, case_setup, case_teardown);
    tcase_add_checked_fixture(check, test_setup, test_teardown);
    tcase_set_timeout(check, 30);
    tcase_add_test(check, check_accepts);
    tcase_add_test(check, check_hash_mismatch);
    tcase_add_test(check, check_no_wheel_in_lock);
    tcase_add_test(check, check_wheel_not_in_folder);
    tcase_add_test(check, check_hash_not_sha256);
    tcase_add_test(check, check_not_a_lock);
    tcase_add_test(check, check_bad_wheel_names);
    tcase_add_test(check, check_special_files);
    suite_add_tcase(s, check);

    TCase *unpack_tc = tcase_create("unpack");
    tcase_add_unchecked_fixture(unpack_tc, case_setup, case_teardown);
    tcase_add_checked_fixture(unpack_tc, test_setup, test_teardown);
    tcase_set_timeout(unpack_tc, 60);
    tcase_add_test(unpack_tc, unpack_layout);
    tcase_add_test(unpack_tc, unpack_image_has_nothing);
    tcase_add_test(unpack_tc, unpack_hostile_names);
    tcase_add_test(unpack_tc, unpack_link_entry);
    tcase_add_test(unpack_tc, unpack_same_file_twice);
    tcase_add_test(unpack_tc, unpack_file_and_folder_clash);
    tcase_add_test(unpack_tc, unpack_image_has_file);
    tcase_add_test(unpack_tc, unpack_changed_after_check);
    tcase_add_test(unpack_tc, unpack_size_lies);
    tcase_add_test(unpack_tc, unpack_truncated);
    tcase_add_test(unpack_tc, unpack_not_a_zip);
    tcase_add_test(unpack_tc, unpack_progress_escaped);
    suite_add_tcase(s, unpack_tc);
    return s;
}
