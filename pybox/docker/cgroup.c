/* SPDX-License-Identifier: MIT */
/* Where the engine put a box's cgroup (docker.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../util.h"
#include "docker.h"

bool pybox_docker_valid_id(const char *id)
{
    size_t n = strlen(id);
    return n >= 12 && n <= 64 && strspn(id, "0123456789abcdef") == n;
}

int pybox_docker_cgroup(const char *root, const char *proc_root, const char *id, pid_t pid, pybox_cgroup_loc_t *loc,
                        pybox_error_t *err)
{
    memset(loc, 0, sizeof *loc);
    if (!pybox_docker_valid_id(id))
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EINVAL, "not an engine's box id");
    if (!pybox_cgroup_unified(root)) {
        /* v1: the engine's layouts by id first (its cgroupfs and systemd drivers) */
        char path[PATH_MAX];
        static const char *const parents[] = {"/docker/", "/system.slice/docker-"};
        for (size_t i = 0; i < 2; i++)
            if (pybox_fmt(path, sizeof path, "%s%s%s", parents[i], id, i == 1 ? ".scope" : "") == 0 &&
                pybox_cgroup_v1_at(root, path, loc) == 0)
                return 0;
        memset(loc, 0, sizeof *loc);
    }
    /* v2: where the box is depends on the engine's cgroup driver and parent; the kernel
     * says where the box's PID 1 is. */
    if (pid <= 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT,
                               "the box's cgroup was not found under %s: the engine gave no process of it", root);
    if (pybox_cgroup_of_pid(root, proc_root, pid, loc, err) < 0)
        return -1;
    return 0;
}
