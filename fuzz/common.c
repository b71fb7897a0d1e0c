/* SPDX-License-Identifier: MIT */
/* Helpers shared by the fuzz targets (see common.h). */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pybox/util.h"

void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\n%s:%d: property failed: %s\n  ", file, line, cond);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static char scratch[128];

void fuzz_rm_tree(const char *path)
{
    (void)pybox_remove_tree_at(AT_FDCWD, path);
}

static void scratch_remove(void)
{
    if (scratch[0] != '\0')
        fuzz_rm_tree(scratch);
}

const char *fuzz_scratch(void)
{
    if (scratch[0] != '\0')
        return scratch;
    /* tmpfs: every target writes often, and fsync there costs nothing */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(scratch, sizeof scratch, "%s/pybox-fuzz-XXXXXX", base);
    if (mkdtemp(scratch) == NULL) {
        perror("mkdtemp");
        abort();
    }
    atexit(scratch_remove);
    return scratch;
}

void fuzz_path(char *out, size_t len, const char *name)
{
    int n = snprintf(out, len, "%s%s%s", fuzz_scratch(), name[0] ? "/" : "", name);
    if (n < 0 || (size_t)n >= len)
        abort();
}

void fuzz_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        perror(path);
        abort();
    }
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror(path);
            abort();
        }
        p += w;
        len -= (size_t)w;
    }
    close(fd);
}

size_t fuzz_split(const uint8_t *data, size_t size, const char *sep, const uint8_t **part, size_t *len, size_t max)
{
    size_t n = 0, sl = strlen(sep);
    const uint8_t *p = data, *end = data + size;
    while (n + 1 < max) {
        const uint8_t *s = sl && (size_t)(end - p) >= sl ? memmem(p, (size_t)(end - p), sep, sl) : NULL;
        if (s == NULL)
            break;
        part[n] = p;
        len[n] = (size_t)(s - p);
        n++;
        p = s + sl;
    }
    part[n] = p;
    len[n] = (size_t)(end - p);
    return n + 1;
}

char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
