/* SPDX-License-Identifier: MIT */
/* Capabilities by name, from libcap's own table of the kernel's names (see internal.h).
 * libcap is opened the first time a name is looked up (pybox/dl.h): only a relaxed test
 * box names one, so a run never loads it. */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/capability.h>

#include "../dl.h"
#include "internal.h"

/* The name Debian's libcap2 gives the library (its ABI). */
#define CAP_SONAME "libcap.so.2"
#define CAP_FUNCS(X) X(cap_from_name) X(cap_to_name) X(cap_free)
static struct {
    CAP_FUNCS(PYBOX_DL_FIELD)
} fn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool opened;
static char failure[256];

static void open_once(void)
{
    static const char *const names[] = {CAP_FUNCS(PYBOX_DL_NAME)};
    opened = pybox_dl_open(CAP_SONAME, names, sizeof names / sizeof *names, &fn, sizeof fn, failure, sizeof failure);
}

/* "CAP_KILL" only: not "cap_kill", "5" or a list, which libcap also reads. */
int pybox_native_cap_number(const char *name)
{
    cap_value_t v;
    pthread_once(&once, open_once);
    if (!opened || strncmp(name, "CAP_", 4) != 0 ||
        strspn(name + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != strlen(name + 4) || fn.cap_from_name(name, &v) != 0 ||
        v < 0 || v > 63)
        return -1;
    char *back = fn.cap_to_name(v);
    bool same = back != NULL && strcasecmp(back, name) == 0;
    fn.cap_free(back);
    return same ? (int)v : -1;
}
