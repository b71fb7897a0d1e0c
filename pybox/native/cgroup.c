/* SPDX-License-Identifier: MIT */
/* A native box's cgroup, v1 and v2 (see cgroup.h). */
#include "cgroup.h"
#include "rootless.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../buf.h"
#include "../cgroup.h"
#include "../escape.h"
#include "../systemd.h"
#include "../util.h"
#include "parse.h"

static int sys_fail(pybox_error_t *err, int e, const char *call, const char *path)
{
    char shown[PATH_MAX];
    pybox_escape_short(shown, sizeof shown, path, 300);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "%s(%s)", call, shown);
}

int pybox_native_read_small(const char *path, char *buf, size_t len, size_t *got, pybox_error_t *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return sys_fail(err, errno, "open", path);
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sys_fail(err, errno, "read", path);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n + 1 >= len)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "%s: longer than %zu bytes", path, len - 1);
    buf[n] = '\0';
    if (got != NULL)
        *got = n;
    return 0;
}

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* A whole word in a space-separated list. */
static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

int pybox_native_cg_detect(const char *root, int *version, pybox_error_t *err)
{
    char p[PATH_MAX], buf[512];
    if (pybox_fmt(p, sizeof p, "%s/cgroup.controllers", root) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup root");
    pybox_error_t ignored = {0};
    if (pybox_cgroup_unified(root) && pybox_native_read_small(p, buf, sizeof buf, NULL, &ignored) == 0 &&
        has_word(buf, "memory") && has_word(buf, "pids") && has_word(buf, "cpu")) {
        *version = 2;
        return 0;
    }
    char mem[PATH_MAX], m[PATH_MAX], pi[PATH_MAX], c[PATH_MAX];
    if (pybox_cgroup_v1_mount(root, "memory", mem, sizeof mem) == 0 &&
        pybox_fmt(m, sizeof m, "%s/memory.memsw.limit_in_bytes", mem) == 0 && exists(m) &&
        pybox_cgroup_v1_mount(root, "pids", pi, sizeof pi) == 0 &&
        pybox_cgroup_v1_mount(root, "cpu", c, sizeof c) == 0) {
        *version = 1;
        return 0;
    }
    char shown[PATH_MAX];
    pybox_escape_short(shown, sizeof shown, root, 300);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0,
                           "no usable cgroup hierarchy under %s: neither v2 with the memory, pids and cpu "
                           "controllers nor v1 memory (with swap accounting), pids and cpu",
                           shown);
}

/* A v1 controller's folder for rel, whether or not it exists yet. */
static int v1_dir(const char *root, const char *ctrl, const char *rel, char *out, size_t len)
{
    char base[PATH_MAX];
    if (pybox_cgroup_v1_mount(root, ctrl, base, sizeof base) < 0)
        return -1;
    return pybox_fmt(out, len, "%s/%s", base, rel);
}

int pybox_native_cg_host(const char *root, const char *sd_mark, pybox_native_cg_host_t *h, pybox_error_t *err)
{
    memset(h, 0, sizeof *h);
    if (pybox_strlcpy(h->root, root, sizeof h->root) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup root");
    if (pybox_native_cg_detect(root, &h->version, err) < 0)
        return -1;
    h->systemd = h->version == 2 && pybox_sd_booted(sd_mark);
    /* An ordinary user's boxes are scopes of the user's own systemd. */
    if (h->systemd && geteuid() != 0 &&
        pybox_fmt(h->manager, sizeof h->manager, PYBOX_USER_MANAGER_CGROUP, (unsigned)geteuid(), (unsigned)geteuid()) <
            0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the user's manager's cgroup");
    return 0;
}

int pybox_native_cg_paths(const pybox_native_cg_host_t *h, const char *parent, const char *name,
                          pybox_native_cgroup_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->version = h->version;
    const char *root = h->root;
    char rel[PATH_MAX];
    int rc = 0;
    if (h->systemd) {
        out->systemd = true;
        rc |= pybox_fmt(out->unit, sizeof out->unit, "%s-%s.scope", parent, name);
        const char *m = h->manager, *sep = h->manager[0] ? "/" : "";
        rc |= pybox_fmt(out->scope, sizeof out->scope, "%s/%s%s%s/%s", root, m, sep, PYBOX_SD_SLICE, out->unit);
        rc |= pybox_fmt(out->rel, sizeof out->rel, "/%s%s%s/%s/%s", m, sep, PYBOX_SD_SLICE, out->unit,
                        PYBOX_NATIVE_CG_SCOPE_LEAF);
        rc |= pybox_fmt(out->unified, sizeof out->unified, "%s%s", root, out->rel);
        if (rc == 0 && !pybox_sd_unit_name_ok(out->unit, ".scope"))
            return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "not a scope's name: %s", out->unit);
    } else if (pybox_fmt(rel, sizeof rel, "%s/%s", parent, name) < 0 ||
               pybox_fmt(out->rel, sizeof out->rel, "/%s", rel) < 0) {
        rc = -1;
    } else if (h->version == 2) {
        rc = pybox_fmt(out->unified, sizeof out->unified, "%s/%s", root, rel);
    } else {
        rc |= v1_dir(root, "memory", rel, out->memory, sizeof out->memory);
        rc |= v1_dir(root, "pids", rel, out->pids, sizeof out->pids);
        rc |= v1_dir(root, "cpu", rel, out->cpu, sizeof out->cpu);
        rc |= v1_dir(root, "cpuacct", rel, out->cpuacct, sizeof out->cpuacct);
    }
    if (rc != 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    return 0;
}

int pybox_native_cg_parent(const char *install_id, char out[PYBOX_NATIVE_CG_PARENT_MAX], pybox_error_t *err)
{
    if (pybox_fmt(out, PYBOX_NATIVE_CG_PARENT_MAX, "pybox-%s", install_id) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the installation's id");
    return 0;
}

int pybox_native_box_cgroup(const char *install_id, const char *run_id, pybox_native_cgroup_t *out, pybox_error_t *err)
{
    pybox_native_cg_host_t h;
    char parent[PYBOX_NATIVE_CG_PARENT_MAX];
    if (pybox_native_cg_parent(install_id, parent, err) < 0 ||
        pybox_native_cg_host(pybox_cgroup_root(), NULL, &h, err) < 0)
        return -1;
    return pybox_native_cg_paths(&h, parent, run_id, out, err);
}

int pybox_native_cg_holders(const pybox_native_cg_host_t *h, const char *parent, char dirs[5][PATH_MAX],
                            pybox_error_t *err)
{
    for (size_t i = 0; i < 5; i++)
        dirs[i][0] = '\0';
    /* The paths of a leaf named by a run id, cut back to the folder it is in (under
     * systemd, its scope's). */
    pybox_native_cgroup_t cg;
    if (pybox_native_cg_paths(h, parent, "00000000000000000000000000000000", &cg, err) < 0)
        return -1;
    const char *d[] = {cg.memory, cg.pids, cg.cpu, cg.cpuacct, cg.systemd ? cg.scope : cg.unified};
    for (size_t i = 0; i < 5; i++) {
        if (d[i][0] == '\0')
            continue;
        pybox_strlcpy(dirs[i], d[i], PATH_MAX);
        char *slash = strrchr(dirs[i], '/');
        if (slash != NULL)
            *slash = '\0';
        for (size_t j = 0; j < i; j++)
            if (strcmp(dirs[j], dirs[i]) == 0)
                dirs[i][0] = '\0'; /* cpu and cpuacct mounted together */
    }
    return 0;
}

void pybox_native_cg_want(int64_t memory_bytes, int64_t pids, int64_t nano_cpus, pybox_native_cg_limits_t *out)
{
    out->memory_bytes = memory_bytes > 0 ? memory_bytes : -1;
    out->tcp_bytes = out->memory_bytes;
    out->pids = pids > 0 ? pids : -1;
    out->cpu_period_us = PYBOX_NATIVE_CPU_PERIOD_US;
    /* 1e9 nano-CPUs are one CPU: a full period of quota. */
    out->cpu_quota_us = nano_cpus > 0 ? nano_cpus / (1000000000LL / PYBOX_NATIVE_CPU_PERIOD_US) : -1;
    if (nano_cpus > 0 && out->cpu_quota_us < 1000)
        out->cpu_quota_us = 1000; /* the kernel's smallest quota */
}

/* The distinct folders of the leaf (v1 cpu and cpuacct may be one). */
static size_t dirs_of(const pybox_native_cgroup_t *cg, const char *d[4])
{
    size_t n = 0;
    if (cg->version == 2) {
        d[n++] = cg->unified;
        return n;
    }
    d[n++] = cg->memory;
    d[n++] = cg->pids;
    d[n++] = cg->cpu;
    if (strcmp(cg->cpuacct, cg->cpu) != 0)
        d[n++] = cg->cpuacct;
    return n;
}

static int write_file(const char *dir, const char *file, const char *value, pybox_error_t *err)
{
    char p[PATH_MAX];
    if (pybox_fmt(p, sizeof p, "%s/%s", dir, file) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    /* O_CREAT for fixture trees; the kernel's files exist already and cgroupfs makes no
     * new ones, so a missing controller file still fails. */
    _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return sys_fail(err, errno, "open", p);
    size_t n = strlen(value);
    ssize_t w = write(fd, value, n);
    if (w != (ssize_t)n) {
        char shown[64];
        pybox_escape_short(shown, sizeof shown, value, 40);
        char what[PATH_MAX + 80];
        snprintf(what, sizeof what, "%s <- %s", p, shown);
        return sys_fail(err, w < 0 ? errno : EIO, "write", what);
    }
    return 0;
}

static int write_num(const char *dir, const char *file, int64_t v, const char *none, pybox_error_t *err)
{
    char s[32];
    if (v < 0)
        snprintf(s, sizeof s, "%s", none);
    else
        snprintf(s, sizeof s, "%lld", (long long)v);
    return write_file(dir, file, s, err);
}

static int read_num(const char *dir, const char *file, int64_t *v, pybox_error_t *err)
{
    char p[PATH_MAX], buf[128];
    size_t n;
    if (pybox_fmt(p, sizeof p, "%s/%s", dir, file) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    if (pybox_native_read_small(p, buf, sizeof buf, &n, err) < 0)
        return -1;
    if (pybox_np_cg_number(buf, n, v, err) < 0) {
        pybox_error_prefix(err, "%s", p);
        return -1;
    }
    return 0;
}

static int mkdir_p_parent(const char *leaf, pybox_error_t *err)
{
    char p[PATH_MAX];
    if (pybox_strlcpy(p, leaf, sizeof p) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    char *slash = strrchr(p, '/');
    if (slash == NULL || slash == p)
        return 0;
    *slash = '\0';
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        return sys_fail(err, errno, "mkdir", p);
    return 0;
}

#define V2_CONTROLLERS "+memory +pids +cpu"

/* The controllers enabled in dir's cgroup.subtree_control, if it lacks one. Enabling what
 * is enabled already changes nothing: no lock is needed between boxes. */
static int v2_enable_in(const char *dir, pybox_error_t *err)
{
    char p[PATH_MAX], buf[512];
    if (pybox_fmt(p, sizeof p, "%s/cgroup.subtree_control", dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    pybox_error_t ignored = {0};
    if (pybox_native_read_small(p, buf, sizeof buf, NULL, &ignored) == 0 && has_word(buf, "memory") &&
        has_word(buf, "pids") && has_word(buf, "cpu"))
        return 0;
    if (write_file(dir, "cgroup.subtree_control", V2_CONTROLLERS, err) < 0) {
        char shown[PATH_MAX];
        pybox_escape_short(shown, sizeof shown, dir, 300);
        pybox_error_prefix(
            err, "cgroup v2: the memory, pids and cpu controllers cannot be enabled for the boxes in %s%s", shown,
            err != NULL && err->errnum == EBUSY ? " (processes sit in it, and a cgroup with processes "
                                                  "gives no controller to its children)"
                                                : "");
        return -1;
    }
    return 0;
}

/* Not under systemd, nobody else manages the tree: every folder from the root down to the
 * leaf's parent passes the controllers on. */
static int v2_enable_down(const char *root_dir, const char *leaf, pybox_error_t *err)
{
    size_t rl = strlen(root_dir);
    if (strncmp(leaf, root_dir, rl) != 0 || leaf[rl] != '/')
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "the leaf is not under the cgroup root");
    char dir[PATH_MAX];
    if (pybox_strlcpy(dir, leaf, sizeof dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    const char *last = strrchr(dir, '/');
    size_t end = (size_t)(last - dir);
    for (size_t at = rl;;) {
        char keep = dir[at];
        dir[at] = '\0';
        int rc = v2_enable_in(dir, err);
        dir[at] = keep;
        if (rc < 0)
            return -1;
        if (at >= end)
            return 0;
        const char *next = strchr(dir + at + 1, '/');
        at = next != NULL ? (size_t)(next - dir) : end;
    }
}

int pybox_native_cg_read(const pybox_native_cgroup_t *cg, pybox_native_cg_limits_t *got, pybox_error_t *err)
{
    if (cg->version == 2) {
        int64_t swap;
        char p[PATH_MAX], buf[128];
        size_t n;
        if (read_num(cg->unified, "memory.max", &got->memory_bytes, err) < 0 ||
            read_num(cg->unified, "memory.swap.max", &swap, err) < 0 ||
            read_num(cg->unified, "pids.max", &got->pids, err) < 0)
            return -1;
        if (swap != 0)
            got->memory_bytes = -2; /* swap allowed: not the limit asked for */
        if (pybox_fmt(p, sizeof p, "%s/cpu.max", cg->unified) < 0 ||
            pybox_native_read_small(p, buf, sizeof buf, &n, err) < 0 ||
            pybox_np_cg_cpu_max(buf, n, &got->cpu_quota_us, &got->cpu_period_us, err) < 0)
            return -1;
        return 0;
    }
    int64_t memsw;
    if (read_num(cg->memory, "memory.limit_in_bytes", &got->memory_bytes, err) < 0 ||
        read_num(cg->memory, "memory.memsw.limit_in_bytes", &memsw, err) < 0 ||
        read_num(cg->memory, "memory.kmem.tcp.limit_in_bytes", &got->tcp_bytes, err) < 0 ||
        read_num(cg->pids, "pids.max", &got->pids, err) < 0 ||
        read_num(cg->cpu, "cpu.cfs_quota_us", &got->cpu_quota_us, err) < 0 ||
        read_num(cg->cpu, "cpu.cfs_period_us", &got->cpu_period_us, err) < 0)
        return -1;
    /* v1 says "no limit" with the largest page-aligned value, and -1 for no quota. */
    if (got->memory_bytes >= (INT64_MAX & ~4095LL))
        got->memory_bytes = -1;
    if (memsw >= (INT64_MAX & ~4095LL))
        memsw = -1;
    if (got->tcp_bytes >= (INT64_MAX & ~4095LL))
        got->tcp_bytes = -1;
    if (memsw != got->memory_bytes)
        got->memory_bytes = -2; /* swap allowed beyond the memory limit */
    if (got->cpu_quota_us < 0)
        got->cpu_quota_us = -1;
    return 0;
}

static int64_t page_down(int64_t v)
{
    return v < 0 ? v : v & ~4095LL;
}

int pybox_native_cg_check(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *want, int *checked,
                          pybox_error_t *err)
{
    pybox_native_cg_limits_t got;
    if (pybox_native_cg_read(cg, &got, err) < 0)
        return -1;
    pybox_buf_t d;
    pybox_buf_init(&d, 2048);
    int diffs = 0, n = 0;
#define CMP(name, w, g)                                                                                                \
    do {                                                                                                               \
        n++;                                                                                                           \
        if ((w) != (g)) {                                                                                              \
            pybox_buf_addf(&d, "%s%s: spec %lld, kernel %lld", diffs ? "; " : "", name, (long long)(w),                \
                           (long long)(g));                                                                            \
            diffs++;                                                                                                   \
        }                                                                                                              \
    } while (0)
    /* The kernel keeps memory limits in pages. */
    CMP(cg->version == 2 ? "memory.max (swap 0)" : "memory.limit_in_bytes = memsw", page_down(want->memory_bytes),
        got.memory_bytes);
    if (cg->version == 1)
        CMP("memory.kmem.tcp.limit_in_bytes", page_down(want->tcp_bytes), got.tcp_bytes);
    CMP("pids.max", want->pids, got.pids);
    CMP(cg->version == 2 ? "cpu.max quota" : "cpu.cfs_quota_us", want->cpu_quota_us, got.cpu_quota_us);
    CMP(cg->version == 2 ? "cpu.max period" : "cpu.cfs_period_us", want->cpu_period_us, got.cpu_period_us);
#undef CMP
    if (checked != NULL)
        *checked += n;
    int rc = 0;
    if (diffs > 0)
        rc = pybox_error_set(err, PYBOX_ERR_POLICY, 0, "the box's cgroup differs in %d of %d limits: %s", diffs, n,
                             pybox_buf_ok(&d) ? (d.data ? d.data : "")
                                              : "(out of memory: the differences could not be listed)");
    pybox_buf_free(&d);
    return rc;
}

static int write_limits(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *w, pybox_error_t *err)
{
    if (cg->version == 2) {
        char cpu[64];
        if (w->cpu_quota_us < 0)
            snprintf(cpu, sizeof cpu, "max %lld", (long long)w->cpu_period_us);
        else
            snprintf(cpu, sizeof cpu, "%lld %lld", (long long)w->cpu_quota_us, (long long)w->cpu_period_us);
        return write_num(cg->unified, "memory.max", w->memory_bytes, "max", err) < 0 ||
                       write_num(cg->unified, "memory.swap.max", 0, "0", err) < 0 ||
                       write_num(cg->unified, "pids.max", w->pids, "max", err) < 0 ||
                       write_file(cg->unified, "cpu.max", cpu, err) < 0
                   ? -1
                   : 0;
    }
    /* memsw can never be below the memory limit: the limit first. The TCP limit also turns
     * on the accounting of the leaf's TCP buffers, which v1 does not do otherwise: a box's
     * loopback connections could hold far more than its memory limit in the kernel. */
    return write_num(cg->memory, "memory.limit_in_bytes", w->memory_bytes, "-1", err) < 0 ||
                   write_num(cg->memory, "memory.memsw.limit_in_bytes", w->memory_bytes, "-1", err) < 0 ||
                   write_num(cg->memory, "memory.kmem.tcp.limit_in_bytes", w->tcp_bytes, "-1", err) < 0 ||
                   write_num(cg->pids, "pids.max", w->pids, "max", err) < 0 ||
                   write_num(cg->cpu, "cpu.cfs_period_us", w->cpu_period_us, "100000", err) < 0 ||
                   write_num(cg->cpu, "cpu.cfs_quota_us", w->cpu_quota_us, "-1", err) < 0
               ? -1
               : 0;
}

/* The cgroup root of a v2 leaf: its folder without the path the kernel names it by. */
static const char *root_of(const pybox_native_cgroup_t *cg, char root[PATH_MAX])
{
    size_t n = strlen(cg->unified), r = strlen(cg->rel);
    root[0] = '\0';
    if (r < n && strcmp(cg->unified + n - r, cg->rel) == 0) {
        memcpy(root, cg->unified, n - r);
        root[n - r] = '\0';
    }
    return root;
}

int pybox_native_cg_make(const pybox_native_cgroup_t *cg, const pybox_native_cg_limits_t *want, pybox_error_t *err)
{
    if (cg->systemd)
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "a box's cgroup under systemd is made in its scope");
    const char *d[4];
    size_t n = dirs_of(cg, d);
    size_t made = 0;
    char root[PATH_MAX];
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (mkdir_p_parent(d[i], err) < 0 || (cg->version == 2 && v2_enable_down(root_of(cg, root), d[i], err) < 0)) {
            rc = -1;
            break;
        }
        if (mkdir(d[i], 0755) < 0) {
            rc = sys_fail(err, errno, "mkdir", d[i]);
            break;
        }
        made++;
    }
    if (rc == 0 && (write_limits(cg, want, err) < 0 || pybox_native_cg_check(cg, want, NULL, err) < 0))
        rc = -1;
    if (rc < 0)
        for (size_t i = 0; i < made; i++)
            (void)rmdir(d[i]);
    return rc;
}

int pybox_native_cg_adopt(const pybox_native_cgroup_t *cg, pid_t pid, const pybox_native_cg_limits_t *want, bool *made,
                          pybox_error_t *err)
{
    *made = false;
    if (!cg->systemd || cg->version != 2)
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL, "only a box under systemd is adopted from its scope");
    /* What systemd gave the scope: the controllers it delegates, enabled up its chain. */
    char p[PATH_MAX], buf[512];
    if (pybox_fmt(p, sizeof p, "%s/cgroup.controllers", cg->scope) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    if (pybox_native_read_small(p, buf, sizeof buf, NULL, err) < 0)
        return -1;
    if (!has_word(buf, "memory") || !has_word(buf, "pids") || !has_word(buf, "cpu")) {
        buf[strcspn(buf, "\n")] = '\0';
        char shown[300];
        pybox_escape_short(shown, sizeof shown, buf, 200);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT,
                               "cgroup v2 under systemd: the box's scope %s was given the controllers \"%s\", not "
                               "memory, pids and cpu",
                               cg->unit, shown);
    }
    if (mkdir(cg->unified, 0755) < 0)
        return sys_fail(err, errno, "mkdir", cg->unified);
    *made = true;
    /* Out of the scope first: only then may the scope pass its controllers on. */
    if (pybox_native_cg_attach(cg, pid, err) < 0 || v2_enable_in(cg->scope, err) < 0 ||
        write_limits(cg, want, err) < 0 || pybox_native_cg_check(cg, want, NULL, err) < 0)
        return -1;
    return 0;
}

int pybox_native_cg_attach(const pybox_native_cgroup_t *cg, pid_t pid, pybox_error_t *err)
{
    const char *d[4];
    size_t n = dirs_of(cg, d);
    char s[24];
    snprintf(s, sizeof s, "%d", (int)pid);
    for (size_t i = 0; i < n; i++)
        if (write_file(d[i], "cgroup.procs", s, err) < 0)
            return -1;
    return 0;
}

int pybox_native_cg_oom_kills(const pybox_native_cgroup_t *cg, int64_t *kills, pybox_error_t *err)
{
    char p[PATH_MAX], buf[1024];
    size_t n;
    const char *dir = cg->version == 2 ? cg->unified : cg->memory;
    const char *file = cg->version == 2 ? "memory.events" : "memory.oom_control";
    if (pybox_fmt(p, sizeof p, "%s/%s", dir, file) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
    if (pybox_native_read_small(p, buf, sizeof buf, &n, err) < 0)
        return -1;
    return pybox_np_cg_keyed(buf, n, "oom_kill", kills, err);
}

int pybox_native_cg_populated(const pybox_native_cgroup_t *cg, bool *populated, pybox_error_t *err)
{
    char p[PATH_MAX], buf[4096];
    size_t n;
    *populated = true;
    if (cg->version == 2) {
        int64_t v;
        if (pybox_fmt(p, sizeof p, "%s/cgroup.events", cg->unified) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
        pybox_error_t rerr = {0};
        struct stat sb;
        if (pybox_native_read_small(p, buf, sizeof buf, &n, &rerr) < 0) {
            /* The leaf is gone: under systemd its scope is stopped and trimmed the moment
             * the box's last process ends. The kernel removes only a cgroup that holds no
             * process (rmdir says EBUSY otherwise), so its absence is its emptiness; one
             * being removed still has its folder, its files answering ENODEV. */
            if (rerr.errnum == ENODEV || (rerr.errnum == ENOENT && lstat(cg->unified, &sb) < 0 && errno == ENOENT)) {
                *populated = false;
                return 0;
            }
            *err = rerr;
            return -1;
        }
        if (pybox_np_cg_keyed(buf, n, "populated", &v, err) < 0)
            return -1;
        *populated = v != 0;
        return 0;
    }
    /* v1 has cgroup.events only on the unified mount: each controller's list of the
     * leaf's processes, all empty (a task is in every hierarchy at once; each is asked). */
    const char *d[4];
    size_t nd = dirs_of(cg, d);
    for (size_t i = 0; i < nd; i++) {
        if (pybox_fmt(p, sizeof p, "%s/cgroup.procs", d[i]) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "cgroup path");
        pybox_error_t rerr = {0};
        if (pybox_native_read_small(p, buf, sizeof buf, &n, &rerr) < 0) {
            if (rerr.kind == PYBOX_ERR_PROTOCOL) /* longer than a page: processes, surely */
                return 0;
            *err = rerr;
            return -1;
        }
        int64_t count;
        if (pybox_np_cg_procs(buf, n, &count, err) < 0)
            return -1;
        if (count > 0)
            return 0;
    }
    *populated = false;
    return 0;
}

int pybox_native_cg_wait_empty(const pybox_native_cgroup_t *cg, int64_t timeout_ms, bool *empty, pybox_error_t *err)
{
    int64_t deadline = pybox_now_ms() + timeout_ms;
    long pause_us = 100;
    *empty = false;
    for (;;) {
        bool populated;
        if (pybox_native_cg_populated(cg, &populated, err) < 0)
            return -1;
        if (!populated) {
            *empty = true;
            return 0;
        }
        if (pybox_now_ms() >= deadline)
            return 0;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = pause_us * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 20000)
            pause_us *= 2;
    }
}

int pybox_native_cg_remove(const pybox_native_cgroup_t *cg, int64_t timeout_ms, bool *gone, pybox_error_t *err)
{
    const char *d[4];
    size_t n = dirs_of(cg, d);
    *gone = false;
    int64_t deadline = pybox_now_ms() + timeout_ms;
    long pause_us = 200;
    size_t left;
    int last_errno = 0;
    const char *last = NULL;
    for (;;) {
        left = 0;
        for (size_t i = 0; i < n; i++) {
            if (d[i][0] == '\0')
                continue;
            if (rmdir(d[i]) == 0 || errno == ENOENT)
                continue;
            last_errno = errno;
            last = d[i];
            left++;
            if (last_errno != EBUSY)
                break;
        }
        if (left == 0) {
            *gone = true;
            return 0;
        }
        /* EBUSY: tasks that are ending still count until the kernel has released them. */
        if (last_errno != EBUSY || pybox_now_ms() >= deadline)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = pause_us * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 20000)
            pause_us *= 2;
    }
    return sys_fail(err, last_errno, "rmdir", last ? last : "");
}
