/* SPDX-License-Identifier: MIT */
/* Libraries opened when first needed (see dl.h). */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*fn_t)(void);

bool pybox_dl_open(const char *soname, const char *const *names, size_t n, void *fns, size_t fns_size, char *failure,
                   size_t failure_len)
{
    if (fns_size != n * sizeof(fn_t)) {
        snprintf(failure, failure_len, "%s: a table of %zu bytes for %zu functions", soname, fns_size, n);
        return false;
    }
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(failure, failure_len, "%s", why != NULL ? why : soname);
        return false;
    }
    /* a partial table is never published: taken whole into a copy first */
    fn_t *t = calloc(n, sizeof *t);
    if (t == NULL) {
        snprintf(failure, failure_len, "%s: out of memory", soname);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        void *f = dlsym(lib, names[i]);
        if (f == NULL) {
            snprintf(failure, failure_len, "%s has no %s", soname, names[i]);
            free(t);
            return false;
        }
        /* POSIX: a function's address as dlsym gives it, taken as the function pointer it is */
        memcpy(&t[i], &f, sizeof f);
    }
    memcpy(fns, t, fns_size);
    free(t);
    return true;
}
