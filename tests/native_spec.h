/* SPDX-License-Identifier: MIT */
/* A native sandbox's spec as the tests below the box interface make it (test_native.c and
 * the trial tool, tools/native_try.c): the box's place on the host and its program's
 * user; each sets its own timer and output size. */
#ifndef PYBOX_TESTS_NATIVE_SPEC_H
#define PYBOX_TESTS_NATIVE_SPEC_H

#include <stdint.h>
#include <string.h>

#include "../pybox/cgroup.h"
#include "../pybox/native/sandbox.h"
#include "../pybox/util.h"

static inline void native_spec_at(pybox_native_spec_t *s, const char *rootfs, const char *parent, const char *staging,
                                  const char *name, uint32_t uid, const char *const *env)
{
    memset(s, 0, sizeof *s);
    pybox_native_spec_defaults(s);
    s->rootfs = rootfs;
    s->mount_in = true;
    s->uid = uid;
    s->nano_cpus = 1000000000LL;
    s->cgroup_root = pybox_cgroup_root(); /* where the backend's own boxes go */
    s->cgroup_parent = parent;
    s->name = name;
    s->staging = staging;
    s->expires = pybox_wall_s() + 120;
    s->env = env;
}

#endif
