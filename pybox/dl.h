/* SPDX-License-Identifier: MIT */
/* A library opened when first needed rather than when PyBox starts (libarchive,
 * libcurl, libcap, libmicrohttpd): its functions are listed once, as an X-macro list, which expands into the
 * table of pointers (each with the function's own declared type), the names to look up
 * and nothing else:
 *     #define LIB_FUNCS(X) X(lib_a) X(lib_b)
 *     struct lib_api { LIB_FUNCS(PYBOX_DL_FIELD) };
 *     static const char *const lib_names[] = {LIB_FUNCS(PYBOX_DL_NAME)};
 *     pybox_dl_open("liblib.so.1", lib_names, N, &api, sizeof api, why, sizeof why); */
#ifndef PYBOX_DL_H
#define PYBOX_DL_H

#include <stdbool.h>
#include <stddef.h>

#define PYBOX_DL_FIELD(name) __typeof__(name) *name;
#define PYBOX_DL_NAME(name) #name,

/* Open soname (for the process's life) and fill the table at fns, n function pointers in
 * the order of names (fns_size, its size, says it holds exactly n). Every function
 * found, or the table is left untouched: false, with why in failure. */
bool pybox_dl_open(const char *soname, const char *const *names, size_t n, void *fns, size_t fns_size, char *failure,
                   size_t failure_len);

#endif
