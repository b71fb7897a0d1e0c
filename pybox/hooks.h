/* SPDX-License-Identifier: MIT */
/* PyBox's test hooks, all of them: environment variables that change what PyBox does so
 * that a test can reach a state on purpose (kill PyBox at a phase, point it at another
 * cgroup tree or machine-wide run folder). Only the test build has them (hooks.c built
 * with PYBOX_TEST_HOOKS: pybox-test and the test programs); the build that is installed
 * and packaged (pybox) reads none of them and refuses to start while one is set, so a
 * hook can never be reached on a host by setting PyBox's environment. Contract:
 * docs/cleanup.md ("Test hooks"). */
#ifndef PYBOX_HOOKS_H
#define PYBOX_HOOKS_H

#include <stdbool.h>

#include "error.h"

typedef enum {
    PYBOX_HOOK_KILL_AT,          /* pybox exec SIGKILLs itself at a phase (create, start, run, collect) */
    PYBOX_HOOK_CGROUP_ROOT,      /* the cgroup root instead of /sys/fs/cgroup (an absolute path) */
    PYBOX_HOOK_RUN_DIR,          /* the machine-wide run folder instead of /run/pybox (an absolute path) */
    PYBOX_HOOK_SESSION_ANY_PEER, /* a session's holder lets any local user in ("1"): its peer check removed, to
                                    show what it keeps out */
    PYBOX_HOOK_LISTEN_BOUND,     /* pybox mcp --listen unix:PATH waits, once its socket is bound, for a byte from
                                    this FIFO */
    PYBOX_HOOK_WARM_REUSE,       /* pybox mcp's warm pool hands the box of a call to the next call of its image
                                    ("1"), instead of a fresh one: to show what a fresh box per call keeps apart */
    PYBOX_HOOK_SESSION_END_HOLD, /* pybox mcp: a Python session that ends waits, before its box is closed, for a
                                    byte from this FIFO */
    PYBOX_HOOKS,
} pybox_hook_t;

/* The hook's environment variable, e.g. "PYBOX_TEST_KILL_AT". */
const char *pybox_hook_name(pybox_hook_t h);

/* The hook's value: in the test build, its variable when set and not empty; NULL
 * otherwise, and always NULL in the installed build. */
const char *pybox_hook(pybox_hook_t h);

/* Whether this build honours the hooks (the test build). */
bool pybox_hooks_built_in(void);

/* The installed build: -1 with PYBOX_ERR_USAGE naming the first hook set (and not
 * empty) in the environment, else 0. The test build: always 0. */
int pybox_hooks_refuse(pybox_error_t *err);

#endif
