/* SPDX-License-Identifier: MIT */
/* The test hooks (see hooks.h): built twice, with PYBOX_TEST_HOOKS for the test build and
 * without it for the build that is installed. */
#include "hooks.h"

#include <stdlib.h>

static const char *const names[PYBOX_HOOKS] = {
    [PYBOX_HOOK_KILL_AT] = "PYBOX_TEST_KILL_AT",
    [PYBOX_HOOK_CGROUP_ROOT] = "PYBOX_TEST_CGROUP_ROOT",
    [PYBOX_HOOK_RUN_DIR] = "PYBOX_TEST_RUN_DIR",
    [PYBOX_HOOK_SESSION_ANY_PEER] = "PYBOX_TEST_SESSION_ANY_PEER",
    [PYBOX_HOOK_LISTEN_BOUND] = "PYBOX_TEST_LISTEN_BOUND",
    /* the relaxation reused-box (policy.h) */
    [PYBOX_HOOK_WARM_REUSE] = "PYBOX_TEST_WARM_REUSE",
    [PYBOX_HOOK_SESSION_END_HOLD] = "PYBOX_TEST_SESSION_END_HOLD",
};

const char *pybox_hook_name(pybox_hook_t h)
{
    return (unsigned)h < PYBOX_HOOKS ? names[h] : "";
}

static const char *set(pybox_hook_t h)
{
    const char *v = (unsigned)h < PYBOX_HOOKS ? getenv(names[h]) : NULL;
    return v != NULL && v[0] != '\0' ? v : NULL;
}

#if defined(PYBOX_TEST_HOOKS)

const char *pybox_hook(pybox_hook_t h)
{
    return set(h);
}

bool pybox_hooks_built_in(void)
{
    return true;
}

int pybox_hooks_refuse(pybox_error_t *err)
{
    (void)err;
    return 0;
}

#else

const char *pybox_hook(pybox_hook_t h)
{
    (void)h;
    return NULL;
}

bool pybox_hooks_built_in(void)
{
    return false;
}

/* Set on purpose or by mistake, a hook is refused rather than ignored: whoever set it
 * expects something this build does not do. */
int pybox_hooks_refuse(pybox_error_t *err)
{
    for (int h = 0; h < PYBOX_HOOKS; h++)
        if (set((pybox_hook_t)h) != NULL)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "%s is set: it is a test hook, which only PyBox's test build (pybox-test) has; "
                                   "this pybox refuses to run with it (unset it)",
                                   names[h]);
    return 0;
}

#endif
