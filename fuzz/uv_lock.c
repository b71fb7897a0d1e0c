/* SPDX-License-Identifier: MIT */
/* Fuzz target: a uv lock file read by PyBox's TOML reader and checked against a folder of
 * wheels (pybox_lock_check_text). The folder holds the wheels of this target's corpus
 * (fuzz/corpus/wheel), so a lock naming them with their real hashes is accepted. Every
 * accepted wheel has a name that could be installed and the lock's SHA-256. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/image/toml.h"
#include "../pybox/image/wheels.h"
#include "../pybox/util.h"
#include "common.h"

#ifndef PYBOX_FUZZ_DIR
#error "PYBOX_FUZZ_DIR (the fuzz folder) must be defined by the build"
#endif

static char wheels[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_path(wheels, sizeof wheels, "wheels");
    mkdir(wheels, 0700);
    DIR *d = opendir(PYBOX_FUZZ_DIR "/corpus/wheel");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".whl") != 0)
            continue;
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/corpus/wheel/%s", PYBOX_FUZZ_DIR, de->d_name);
        snprintf(to, sizeof to, "%s/%s", wheels, de->d_name);
        FILE *f = fopen(from, "rb");
        if (f == NULL)
            continue;
        static char buf[1 << 20];
        size_t got = fread(buf, 1, sizeof buf, f);
        fclose(f);
        fuzz_write(to, buf, got);
    }
    if (d != NULL)
        closedir(d);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pybox_error_t err = {0};
    /* the reader alone, then the whole check */
    cJSON *doc = pybox_toml_parse((const char *)data, size, &err);
    if (doc == NULL)
        FUZZ_CHECK(err.msg[0] != '\0', "a lock refused without a reason");
    cJSON_Delete(doc);
    pybox_lock_t lock;
    memset(&err, 0, sizeof err);
    if (pybox_lock_check_text((const char *)data, size, "uv.lock", wheels, &lock, &err) == 0) {
        for (size_t i = 0; i < lock.n; i++) {
            const pybox_wheel_t *w = &lock.wheels[i];
            size_t n = strlen(w->file);
            FUZZ_CHECK(n > 4 && strcmp(w->file + n - 4, ".whl") == 0 && strchr(w->file, '/') == NULL,
                       "an accepted wheel named %s", w->file);
            FUZZ_CHECK(strlen(w->sha256) == 64, "an accepted wheel without its digest");
        }
        pybox_lock_free(&lock);
    } else {
        FUZZ_CHECK(lock.wheels == NULL && lock.n == 0, "a refused lock keeps wheels");
        FUZZ_CHECK(err.msg[0] != '\0', "a lock refused without a reason");
    }
    return 0;
}
