/* SPDX-License-Identifier: MIT */
/* Fuzz target: the tar of /box/out taken in by pybox_outputs_ingest (survey, then
 * delivery), under small limits so that every limit is reached. Properties: a refusal
 * leaves nothing; a delivered folder holds exactly the regular files and folders the
 * verdict lists as returned, within the limits, and nothing else is left beside it. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/files.h"
#include "common.h"

#define RUN_ID "0123456789abcdef0123456789abcdef"

typedef struct {
    int files, dirs, other;
    int64_t bytes;
} tally_t;

static void walk(int dfd, tally_t *t, int depth)
{
    FUZZ_CHECK(depth < 64, "the delivered tree is deeper than any limit");
    DIR *d = fdopendir(dfd);
    FUZZ_CHECK(d != NULL, "cannot read a delivered folder");
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat sb;
        FUZZ_CHECK(fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0, "stat of %s", de->d_name);
        if (S_ISDIR(sb.st_mode)) {
            t->dirs++;
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            FUZZ_CHECK(sub >= 0, "open of %s", de->d_name);
            walk(sub, t, depth + 1);
        } else if (S_ISREG(sb.st_mode)) {
            t->files++;
            t->bytes += sb.st_size;
            FUZZ_CHECK((sb.st_mode & 07777) == 0644, "a file of mode %o", (unsigned)(sb.st_mode & 07777));
        } else {
            t->other++;
        }
    }
    closedir(d);
}

static int entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    FUZZ_CHECK(d != NULL, "cannot list %s", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char parent[256], dir[300];
    fuzz_path(parent, sizeof parent, "p");
    mkdir(parent, 0700);
    snprintf(dir, sizeof dir, "%s/out", parent);
    pybox_output_spec_t spec;
    pybox_error_t err = {0};
    FUZZ_CHECK(pybox_output_check(dir, &spec, &err) == 0, "the output folder is refused: %s", err.msg);
    pybox_ingest_limits_t lim = {.max_files = 6, .max_file = 4096, .max_total = 10000, .max_depth = 5, .max_dirs = 5};
    pybox_outputs_t o;
    pybox_outputs_init(&o);
    int rc = pybox_outputs_ingest(data, size, &spec, RUN_ID, &lim, &o, &err);
    FUZZ_CHECK(rc == 0, "ingest failed on the host: %s", err.msg);
    struct stat sb;
    if (o.status == PYBOX_OUT_DELIVERED) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_CHECK(fd >= 0, "a delivered folder that is not there");
        tally_t t = {0};
        walk(fd, &t, 0);
        FUZZ_CHECK(t.other == 0, "%d entries that are neither files nor folders", t.other);
        FUZZ_CHECK(t.files == o.returned_files && t.bytes == o.returned_bytes,
                   "%d files of %lld bytes delivered, the verdict says %d of %lld", t.files, (long long)t.bytes,
                   o.returned_files, (long long)o.returned_bytes);
        FUZZ_CHECK(t.files <= lim.max_files && t.bytes <= lim.max_total && t.dirs <= lim.max_dirs,
                   "limits passed: %d files, %lld bytes, %d folders", t.files, (long long)t.bytes, t.dirs);
        int counted = 0;
        for (size_t i = 0; i < o.n; i++)
            counted += o.entries[i].returned && o.entries[i].kind == 'f';
        FUZZ_CHECK(counted == o.returned_files, "%d entries returned as files, %d counted", counted, o.returned_files);
    } else {
        FUZZ_CHECK(lstat(dir, &sb) < 0, "a folder was left after status %d", (int)o.status);
        FUZZ_CHECK(o.returned_files == 0, "files returned in a refusal");
    }
    FUZZ_CHECK(entries_in(parent) == (o.status == PYBOX_OUT_DELIVERED ? 1 : 0),
               "something beside the output folder was left");
    pybox_output_close(&spec);
    pybox_outputs_free(&o);
    fuzz_rm_tree(dir);
    return 0;
}
