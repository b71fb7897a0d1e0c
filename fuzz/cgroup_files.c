/* SPDX-License-Identifier: MIT */
/* Fuzz target: the cgroup files PyBox reads. The first byte picks the reader:
 *   0, 1  the watcher's counter files on v1, v2 (pybox_watch_parse): the rest is the
 *         files' texts in the watcher's order, separated by "\n=====\n";
 *   2     /proc/<pid>/cgroup located under a fixture cgroup tree (pybox_cgroup_of_text;
 *         the second byte picks the tree);
 *   3     the native backend's cgroup file parsers (one number or "max", key-value
 *         lines, cpu.max, cgroup.procs);
 *   4, 5  the native backend's read-back of a v1, v2 leaf's limits and OOM kills
 *         (pybox_native_cg_check, _oom_kills) from files of the target's own: the rest is
 *         the files' texts, separated as above.
 * A counter taken is never negative; a located cgroup is a folder inside the tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../pybox/cgroup.h"
#include "../pybox/native/cgroup.h"
#include "../pybox/native/parse.h"
#include "../pybox/watch.h"
#include "common.h"

#ifndef PYBOX_FIXTURES
#error "PYBOX_FIXTURES (the unit tests' fixture folder) must be defined by the build"
#endif

#define SEP "\n=====\n"

static void watcher(pybox_cg_version_t v, const uint8_t *data, size_t size)
{
    const uint8_t *part[PYBOX_WATCH_FILES];
    size_t len[PYBOX_WATCH_FILES];
    size_t n = fuzz_split(data, size, SEP, part, len, PYBOX_WATCH_FILES);
    char *text[PYBOX_WATCH_FILES] = {NULL};
    for (size_t i = 0; i < n; i++)
        text[i] = len[i] == 1 && part[i][0] == '-' ? NULL : fuzz_strndup(part[i], len[i]); /* "-": not read */
    pybox_reading_t r;
    memset(&r, 0, sizeof r);
    pybox_watch_parse(v, (const char *const *)text, &r);
    const struct {
        unsigned bit;
        int64_t v;
    } got[] = {{PYBOX_RD_MEM_NOW, r.mem_now},     {PYBOX_RD_MEM_PEAK, r.mem_peak},
               {PYBOX_RD_OOM_KILLS, r.oom_kills}, {PYBOX_RD_PIDS_NOW, r.pids_now},
               {PYBOX_RD_PIDS_PEAK, r.pids_peak}, {PYBOX_RD_PIDS_REFUSED, r.pids_refused},
               {PYBOX_RD_CPU, r.cpu_ns},          {PYBOX_RD_THROTTLE, r.periods},
               {PYBOX_RD_THROTTLE, r.throttled},  {PYBOX_RD_THROTTLE, r.throttled_ns}};
    for (size_t i = 0; i < sizeof got / sizeof *got; i++)
        if (r.valid & got[i].bit)
            FUZZ_CHECK(got[i].v >= 0, "counter %zu taken as %lld", i, (long long)got[i].v);
    for (size_t i = 0; i < PYBOX_WATCH_FILES; i++)
        free(text[i]);
}

static void membership(const uint8_t *data, size_t size)
{
    static const char *const roots[] = {"/v1", "/v1-combined", "/v1-custom", "/v2-cgroupfs", "/v2-systemd", ""};
    if (size < 1)
        return;
    char root[512];
    snprintf(root, sizeof root, "%s%s", PYBOX_FIXTURES "/cgroup", roots[data[0] % 6]);
    pybox_cgroup_loc_t loc;
    pybox_error_t err = {0};
    if (pybox_cgroup_of_text(root, (const char *)data + 1, size - 1, &loc, &err) < 0) {
        FUZZ_CHECK(loc.version == PYBOX_CG_NONE, "a location given with a failure");
        return;
    }
    FUZZ_CHECK(loc.version == PYBOX_CG_V1 || loc.version == PYBOX_CG_V2, "version %d", (int)loc.version);
    for (int c = 0; c < PYBOX_CG_CONTROLLERS; c++) {
        if (loc.dir[c][0] == '\0')
            continue;
        struct stat sb;
        FUZZ_CHECK(strncmp(loc.dir[c], root, strlen(root)) == 0 && stat(loc.dir[c], &sb) == 0 && S_ISDIR(sb.st_mode),
                   "a cgroup outside the tree or not a folder: %s", loc.dir[c]);
        FUZZ_CHECK(strstr(loc.dir[c] + strlen(root), "/..") == NULL, "a cgroup path that climbs: %s", loc.dir[c]);
    }
}

static void native_parsers(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    pybox_error_t err = {0};
    int64_t v = 0, q = 0, p = 0;
    if (pybox_np_cg_number(t, size, &v, &err) == 0)
        FUZZ_CHECK(v >= -1, "a number taken as %lld", (long long)v);
    static const char *const keys[] = {"oom_kill", "max", "nr_throttled", "under_oom", "populated"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (pybox_np_cg_keyed(t, size, keys[i], &v, &err) == 0)
            FUZZ_CHECK(v >= 0, "%s taken as %lld", keys[i], (long long)v);
    if (pybox_np_cg_cpu_max(t, size, &q, &p, &err) == 0)
        FUZZ_CHECK(q >= -1 && p >= 0, "cpu.max taken as %lld %lld", (long long)q, (long long)p);
    if (pybox_np_cg_procs(t, size, &v, &err) == 0)
        FUZZ_CHECK(v >= 0 && (v == 0 || memchr(t, '\0', size) == NULL), "cgroup.procs taken as %lld processes",
                   (long long)v);
}

static void native_leaf(int version, const uint8_t *data, size_t size)
{
    static const char *const v1_files[] = {
        "memory/memory.limit_in_bytes", "memory/memory.memsw.limit_in_bytes", "pids/pids.max", "cpu/cpu.cfs_quota_us",
        "cpu/cpu.cfs_period_us",        "memory/memory.oom_control"};
    static const char *const v2_files[] = {"u/memory.max", "u/memory.swap.max", "u/pids.max", "u/cpu.max",
                                           "u/memory.events"};
    const char *const *files = version == 1 ? v1_files : v2_files;
    size_t nfiles = version == 1 ? 6 : 5;
    char dir[512];
    pybox_native_cgroup_t cg;
    memset(&cg, 0, sizeof cg);
    cg.version = version;
    fuzz_path(dir, sizeof dir, version == 1 ? "leaf1" : "leaf2");
    mkdir(dir, 0700);
    static const char *const sub[] = {"memory", "pids", "cpu", "u"};
    for (size_t i = 0; i < 4; i++) {
        char d[600];
        snprintf(d, sizeof d, "%s/%s", dir, sub[i]);
        mkdir(d, 0700);
    }
    snprintf(cg.memory, sizeof cg.memory, "%s/memory", dir);
    snprintf(cg.pids, sizeof cg.pids, "%s/pids", dir);
    snprintf(cg.cpu, sizeof cg.cpu, "%s/cpu", dir);
    snprintf(cg.cpuacct, sizeof cg.cpuacct, "%s/cpu", dir);
    snprintf(cg.unified, sizeof cg.unified, "%s/u", dir);
    const uint8_t *part[6];
    size_t len[6];
    size_t n = fuzz_split(data, size, SEP, part, len, nfiles);
    for (size_t i = 0; i < nfiles; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (i < n)
            fuzz_write(p, part[i], len[i]);
        else
            remove(p);
    }
    pybox_native_cg_limits_t want;
    pybox_native_cg_want(128LL << 20, 32, 500000000, &want);
    pybox_error_t err = {0};
    int checked = 0;
    if (pybox_native_cg_check(&cg, &want, &checked, &err) < 0)
        FUZZ_CHECK(err.msg[0] != '\0', "a read-back refused without a reason");
    int64_t kills = -1;
    memset(&err, 0, sizeof err);
    if (pybox_native_cg_oom_kills(&cg, &kills, &err) == 0)
        FUZZ_CHECK(kills >= 0, "%lld OOM kills", (long long)kills);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 6) {
    case 0:
        watcher(PYBOX_CG_V1, data + 1, size - 1);
        break;
    case 1:
        watcher(PYBOX_CG_V2, data + 1, size - 1);
        break;
    case 2:
        membership(data + 1, size - 1);
        break;
    case 3:
        native_parsers(data + 1, size - 1);
        break;
    default:
        native_leaf(data[0] % 6 == 4 ? 1 : 2, data + 1, size - 1);
        break;
    }
    return 0;
}
