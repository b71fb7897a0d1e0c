/* SPDX-License-Identifier: MIT */
/* The seccomp profile (pybox/seccomp.json, Docker's JSON form) compiled with libseccomp
 * into a classic BPF program, ready to load in a box's first process just before it
 * execs the guest init: one profile for both backends. Contract: docs/native.md. */
#ifndef PYBOX_NATIVE_SECCOMP_H
#define PYBOX_NATIVE_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

#include "../error.h"

/* A compiled filter. The owner frees it with pybox_native_filter_free. */
typedef struct pybox_native_filter {
    struct sock_filter *insns;
    unsigned short len; /* instructions */
    char sha256[65];    /* of the instructions as loaded */
    int rules;          /* syscall rules added (one per name per entry); -1: read from the compiled copy */
} pybox_native_filter_t;

/* Compile a profile (JSON text of len bytes) for this machine's architecture. Strict:
 * an unknown key, action or operator, a syscall name libseccomp does not know on this
 * architecture (all of them are named in the error), or a profile that does not list
 * this architecture is refused (PYBOX_ERR_USAGE). */
int pybox_native_filter_compile(const char *json, size_t len, pybox_native_filter_t *out, pybox_error_t *err);
/* The same, the system calls in the form asked: the binary tree pybox_native_filter_compile
 * makes (fewer instructions per call, and a quicker load), or libseccomp's plain list (the
 * unit tests hold the tree's every decision to the list's). */
typedef enum { PYBOX_FILTER_TREE, PYBOX_FILTER_LIST } pybox_native_filter_form_t;
int pybox_native_filter_compile_as(const char *json, size_t len, pybox_native_filter_form_t form,
                                   pybox_native_filter_t *out, pybox_error_t *err);
void pybox_native_filter_free(pybox_native_filter_t *f);

/* PyBox's own profile, made once per process (thread-safe): read from the installation's
 * compiled copy in dir (PYBOX_NATIVE_FILTERS, native.h), named by a digest of the
 * profile, libseccomp's version, the kernel and the architecture, when one is there and
 * is its owner's alone; else compiled, and the copy written for the next process (dir
 * NULL or "": compiled, no copy). The first caller's dir is the one used. NULL with err
 * filled if it cannot be compiled. The filter is static storage: never freed. */
const pybox_native_filter_t *pybox_native_filter_default(const char *dir, pybox_error_t *err);

/* Load a filter into the calling thread (seccomp(2), mode 2). Makes raw system calls
 * only, so it is safe between fork and exec. no_new_privs must already be set (or the
 * caller hold CAP_SYS_ADMIN). Returns 0 or -errno. */
int pybox_native_filter_load(const pybox_native_filter_t *f);

#endif
