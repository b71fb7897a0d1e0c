/* SPDX-License-Identifier: MIT */
/* Fuzz target: a wheel (a zip: modules, *.dist-info/METADATA, RECORD, WHEEL, *.data/)
 * unpacked into an image archive by pybox_wheels_unpack. The input is the wheel file. What
 * it writes is read back: every entry is a folder or a regular file under the image's
 * site-packages or bin folder, with no empty, "." or ".." part, root-owned, never one the
 * image already has. */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../pybox/buf.h"
#include "../pybox/image/wheels.h"
#include "../pybox/util.h"
#include "common.h"

#define SITE "./usr/local/lib/python3.11/dist-packages"
#define BIN "./usr/local/bin"
#define FILE_NAME "fuzzed-1.0-py3-none-any.whl"

static char wheels[256];

/* What the image has already: the usual folders and one file. */
static bool image_has(const char *path, void *arg)
{
    (void)arg;
    static const char *const have[] = {"./usr", "./usr/local", "./usr/local/lib", "./usr/local/lib/python3.11",
                                       SITE,    BIN,           BIN "/python3",    SITE "/taken.py"};
    for (size_t i = 0; i < sizeof have / sizeof *have; i++)
        if (strcmp(path, have[i]) == 0)
            return true;
    return false;
}

static la_ssize_t to_buf(struct archive *a, void *arg, const void *data, size_t len)
{
    (void)a;
    pybox_buf_t *b = arg;
    return pybox_buf_append(b, data, len) < 0 ? -1 : (la_ssize_t)len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_path(wheels, sizeof wheels, "wheels");
    mkdir(wheels, 0700);
    return 0;
}

static bool under(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(p, dir, n) == 0 && p[n] == '/' && p[n + 1] != '\0';
}

static void check_name(const char *p)
{
    FUZZ_CHECK(under(p, SITE) || under(p, BIN), "an entry outside site-packages and bin: %s", p);
    for (const char *s = p + 2; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        FUZZ_CHECK(!(n == 0 && e != NULL) && !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.'),
                   "an entry with an empty, . or .. part: %s", p);
        s += n + (e ? 1 : 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", wheels, FILE_NAME);
    fuzz_write(path, data, size);
    pybox_lock_t lock;
    pybox_wheel_t w;
    memset(&w, 0, sizeof w);
    snprintf(w.name, sizeof w.name, "fuzzed");
    snprintf(w.version, sizeof w.version, "1.0");
    snprintf(w.file, sizeof w.file, FILE_NAME);
    pybox_sha256_hex(data, size, w.sha256);
    w.bytes = (int64_t)size;
    lock.wheels = &w;
    lock.n = 1;
    pybox_buf_t img;
    pybox_buf_init(&img, 0);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_set_bytes_in_last_block(a, 1);
    FUZZ_CHECK(archive_write_open(a, &img, NULL, to_buf, NULL) == ARCHIVE_OK, "archive_write_open");
    pybox_error_t err = {0};
    int rc = pybox_wheels_unpack(a, &lock, wheels, SITE, BIN, image_has, NULL, NULL, &err);
    archive_write_close(a);
    archive_write_free(a);
    if (rc < 0)
        FUZZ_CHECK(err.msg[0] != '\0', "a wheel refused without a reason");
    /* whatever was written before a refusal is what the image would hold: check it all */
    if (pybox_buf_ok(&img) && img.len > 0) {
        struct archive *r = archive_read_new();
        archive_read_support_format_tar(r);
        FUZZ_CHECK(archive_read_open_memory(r, img.data, img.len) == ARCHIVE_OK, "the image archive cannot be read");
        struct archive_entry *e;
        while (archive_read_next_header(r, &e) == ARCHIVE_OK) {
            const char *p = archive_entry_pathname(e);
            FUZZ_CHECK(p != NULL, "an entry without a name");
            check_name(p);
            mode_t t = archive_entry_filetype(e);
            FUZZ_CHECK(t == AE_IFREG || t == AE_IFDIR, "an entry of type %o: %s", (unsigned)t, p);
            FUZZ_CHECK(archive_entry_uid(e) == 0 && archive_entry_gid(e) == 0, "an entry not root's: %s", p);
            char bare[2048];
            snprintf(bare, sizeof bare, "%s", p);
            size_t n = strlen(bare);
            if (n > 0 && bare[n - 1] == '/')
                bare[n - 1] = '\0';
            FUZZ_CHECK(!image_has(bare, NULL), "an entry the image already has: %s", p);
        }
        archive_read_free(r);
    }
    pybox_buf_free(&img);
    return 0;
}
