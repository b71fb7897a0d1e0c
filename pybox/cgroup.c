/* SPDX-License-Identifier: MIT */
/* Cgroup locations (see cgroup.h). */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "hooks.h"
#include "systemd.h"
#include "util.h"

const char *pybox_cgroup_root(void)
{
    const char *r = pybox_hook(PYBOX_HOOK_CGROUP_ROOT);
    return r && r[0] == '/' ? r : "/sys/fs/cgroup";
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

bool pybox_cgroup_unified(const char *root)
{
    char p[PATH_MAX];
    struct stat sb;
    return pybox_fmt(p, sizeof p, "%s/cgroup.controllers", root) == 0 && stat(p, &sb) == 0;
}

void pybox_cgroup_host(const char *root, const char *sd_mark, pybox_cgroup_host_t *h)
{
    memset(h, 0, sizeof *h);
    if (root == NULL)
        root = pybox_cgroup_root();
    struct utsname u;
    if (uname(&u) == 0)
        pybox_strlcpy(h->kernel, u.release, sizeof h->kernel);
    char p[PATH_MAX];
    if (pybox_cgroup_unified(root))
        h->version = PYBOX_CG_V2;
    else if (pybox_fmt(p, sizeof p, "%s/memory", root) == 0 && is_dir(p))
        h->version = PYBOX_CG_V1;
    h->systemd = pybox_sd_booted(sd_mark);
}

const char *pybox_cgroup_version_word(pybox_cg_version_t v)
{
    return v == PYBOX_CG_V2 ? "v2" : v == PYBOX_CG_V1 ? "v1" : NULL;
}

const char *pybox_cgroup_manager_word(const pybox_cgroup_host_t *h)
{
    return h->systemd ? "systemd" : "none";
}

int pybox_cgroup_v1_mount(const char *root, const char *ctrl, char *out, size_t len)
{
    /* cpu and cpuacct may be mounted together, under either name. */
    const char *names[] = {ctrl, "cpu,cpuacct", "cpuacct,cpu"};
    size_t n = strncmp(ctrl, "cpu", 3) == 0 ? 3 : 1;
    for (size_t i = 0; i < n; i++)
        if (pybox_fmt(out, len, "%s/%s", root, names[i]) == 0 && is_dir(out))
            return 0;
    return pybox_fmt(out, len, "%s/%s", root, ctrl) == 0 ? 1 : -1;
}

int pybox_cgroup_v1_dir(const char *root, const char *ctrl, const char *path, char *out, size_t len)
{
    char base[PATH_MAX];
    if (pybox_cgroup_v1_mount(root, ctrl, base, sizeof base) == 0 && pybox_fmt(out, len, "%s%s", base, path) == 0 &&
        is_dir(out))
        return 0;
    out[0] = '\0';
    return -1;
}

int pybox_cgroup_v1_at(const char *root, const char *path, pybox_cgroup_loc_t *loc)
{
    static const char *const ctrls[PYBOX_CG_CONTROLLERS] = {"memory", "pids", "cpuacct", "cpu"};
    memset(loc, 0, sizeof *loc);
    if (pybox_cgroup_v1_dir(root, "memory", path, loc->dir[PYBOX_CG_MEMORY], PATH_MAX) < 0)
        return -1;
    for (int c = 1; c < PYBOX_CG_CONTROLLERS; c++)
        pybox_cgroup_v1_dir(root, ctrls[c], path, loc->dir[c], PATH_MAX);
    loc->version = PYBOX_CG_V1;
    return 0;
}

int pybox_cgroup_of_text(const char *root, const char *text, size_t len, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    memset(loc, 0, sizeof *loc);
    char line[PATH_MAX + 64];
    char v2[PATH_MAX] = "";
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        const char *start = text + at;
        at += n + (nl ? 1 : 0);
        /* A line longer than any path the kernel writes, or holding a NUL, is not one of
         * the kernel's: skipped whole, never read in pieces. */
        if (n >= sizeof line || memchr(start, '\0', n) != NULL)
            continue;
        memcpy(line, start, n);
        line[n] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL || c2[1] != '/' || strstr(c2 + 1, "/..") != NULL)
            continue; /* malformed, or a path that climbs out of the root */
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        char dir[PATH_MAX];
        if (ctrls[0] == '\0') {
            if (pybox_fmt(dir, sizeof dir, "%s%s", root, path) == 0 && is_dir(dir))
                pybox_strlcpy(v2, dir, sizeof v2);
            continue;
        }
        char list[256];
        if (pybox_fmt(list, sizeof list, ",%s,", ctrls) < 0 ||
            pybox_fmt(dir, sizeof dir, "%s/%s%s", root, ctrls, path) < 0 || !is_dir(dir))
            continue;
        if (strstr(list, ",memory,"))
            pybox_strlcpy(loc->dir[PYBOX_CG_MEMORY], dir, PATH_MAX);
        if (strstr(list, ",pids,"))
            pybox_strlcpy(loc->dir[PYBOX_CG_PIDS], dir, PATH_MAX);
        if (strstr(list, ",cpuacct,"))
            pybox_strlcpy(loc->dir[PYBOX_CG_CPUACCT], dir, PATH_MAX);
        if (strstr(list, ",cpu,"))
            pybox_strlcpy(loc->dir[PYBOX_CG_CPU], dir, PATH_MAX);
    }
    if (loc->dir[PYBOX_CG_MEMORY][0]) {
        loc->version = PYBOX_CG_V1;
        return 0;
    }
    if (v2[0]) {
        memset(loc, 0, sizeof *loc);
        pybox_strlcpy(loc->dir[0], v2, PATH_MAX);
        loc->version = PYBOX_CG_V2;
        return 0;
    }
    memset(loc, 0, sizeof *loc);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "no cgroup of the process was found under %s", root);
}

int pybox_cgroup_of_pid(const char *root, const char *proc_root, pid_t pid, pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    memset(loc, 0, sizeof *loc);
    char p[PATH_MAX];
    if (pid <= 0 || pybox_fmt(p, sizeof p, "%s/%d/cgroup", proc_root, (int)pid) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EINVAL, "no process to find a cgroup by");
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", p);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, PYBOX_CGROUP_TEXT_MAX, &text, &len, &over, err) < 0)
        return -1;
    if (pybox_cgroup_of_text(root, text ? text : "", len, loc, err) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "the cgroups of process %d were not found under %s",
                               (int)pid, root);
    return 0;
}
