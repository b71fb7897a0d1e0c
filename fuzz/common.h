/* SPDX-License-Identifier: MIT */
/* What the fuzz targets share: a private scratch folder per process, input split into
 * parts, files written whole, and a check that fails the target loudly (docs/fuzzing.md). */
#ifndef PYBOX_FUZZ_COMMON_H
#define PYBOX_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property that must hold: when it does not, the target prints why and aborts, which
 * libFuzzer reports as a crash with the input kept. */
#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                                         \
    } while (0)
void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

/* The process's own scratch folder (made once, on tmpfs when /dev/shm is there, removed
 * at exit): never the state directory. */
const char *fuzz_scratch(void);
/* A path in it ("" name: the folder itself). */
void fuzz_path(char *out, size_t len, const char *name);
/* Write a file whole (created or truncated); aborts when the host cannot. */
void fuzz_write(const char *path, const void *data, size_t len);
/* Remove a folder and everything in it, following no link. */
void fuzz_rm_tree(const char *path);

/* Split data at each occurrence of sep into at most max parts (the last takes the rest).
 * Returns the number of parts; parts point into data. */
size_t fuzz_split(const uint8_t *data, size_t size, const char *sep, const uint8_t **part, size_t *len, size_t max);

/* A NUL-terminated copy (malloc'd; aborts when out of memory). */
char *fuzz_strndup(const uint8_t *data, size_t size);

#endif
