/* SPDX-License-Identifier: MIT */
/* Where the engine puts a box's cgroup (docker.h). */
#include <string.h>
#include <sys/stat.h>

#include "../util.h"
#include "docker.h"

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool valid_id(const char *id)
{
    size_t n = strlen(id);
    return n >= 12 && n <= 64 && strspn(id, "0123456789abcdef") == n;
}

int pybox_docker_cgroup(const char *root, const char *id, pybox_cgroup_loc_t *loc)
{
    memset(loc, 0, sizeof *loc);
    if (!valid_id(id))
        return -1;
    if (pybox_cgroup_unified(root)) {
        /* the systemd driver's scope, then the cgroupfs driver's folder */
        if ((pybox_fmt(loc->dir[0], PATH_MAX, "%s/system.slice/docker-%s.scope", root, id) == 0 &&
             is_dir(loc->dir[0])) ||
            (pybox_fmt(loc->dir[0], PATH_MAX, "%s/docker/%s", root, id) == 0 && is_dir(loc->dir[0]))) {
            loc->version = PYBOX_CG_V2;
            return 0;
        }
        memset(loc, 0, sizeof *loc);
        return -1;
    }
    char path[PATH_MAX];
    static const char *const parents[] = {"/docker/", "/system.slice/docker-"};
    for (size_t i = 0; i < 2; i++) {
        if (pybox_fmt(path, sizeof path, "%s%s%s", parents[i], id, i == 1 ? ".scope" : "") == 0 &&
            pybox_cgroup_v1_at(root, path, loc) == 0)
            return 0;
    }
    memset(loc, 0, sizeof *loc);
    return -1;
}
