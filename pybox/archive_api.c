/* SPDX-License-Identifier: MIT */
/* libarchive opened on first use (see archive_api.h). */
#define PYBOX_ARCHIVE_API_IMPL
#include "archive_api.h"

#include <pthread.h>
#include <stdio.h>

/* The name Debian's libarchive13 gives the library (its ABI). */
#define PYBOX_ARCHIVE_SONAME "libarchive.so.13"

struct pybox_archive_api pybox_archive_fn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256]; /* empty once the library is open */
static bool opened;

static void open_once(void)
{
    static const char *const names[] = {PYBOX_ARCHIVE_FUNCS(PYBOX_DL_NAME)};
    opened = pybox_dl_open(PYBOX_ARCHIVE_SONAME, names, sizeof names / sizeof *names, &pybox_archive_fn,
                           sizeof pybox_archive_fn, failure, sizeof failure);
}

bool pybox_archive_open(void)
{
    pthread_once(&once, open_once);
    return opened;
}

const char *pybox_archive_failure(void)
{
    pthread_once(&once, open_once);
    return failure;
}

const char *pybox_archive_why(void)
{
    const char *f = pybox_archive_failure();
    return f[0] != '\0' ? f : "out of memory";
}
