/* SPDX-License-Identifier: MIT */
/* Fuzz target: what the kernel says about a native box in /proc, as the native backend's
 * verifier parses it. The first byte picks the file: 0 status, 1 mountinfo, 2 limits,
 * 3 cgroup, 4 uid_map; the rest is the file. What a parser takes is within its fields. */
#include <stdlib.h>
#include <string.h>

#include "../pybox/native/parse.h"
#include "common.h"

static void mounts(const char *t, size_t len)
{
    pybox_np_mount_t *m = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    if (pybox_np_mountinfo_parse(t, len, 64, &m, &n, &err) < 0) {
        FUZZ_CHECK(m == NULL && n == 0, "a refusal with mounts");
        return;
    }
    FUZZ_CHECK(n <= 64, "%zu mounts", n);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(strnlen(m[i].point, sizeof m[i].point) < sizeof m[i].point, "a mount point not terminated");
        FUZZ_CHECK(m[i].fstype[0] != '\0' && m[i].point[0] != '\0', "a mount without type or point");
        char v[64];
        pybox_np_option(m[i].super, "size", v, sizeof v);
        pybox_np_option(m[i].super, "mode", v, sizeof v);
    }
    free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *t = (const char *)data + 1;
    size_t len = size - 1;
    pybox_error_t err = {0};
    switch (data[0] % 5) {
    case 0: {
        pybox_np_status_t st;
        if (pybox_np_status_parse(t, len, &st, &err) == 0)
            FUZZ_CHECK(st.ngroups >= 0 && st.no_new_privs >= 0 && st.seccomp >= 0, "a status out of range");
        break;
    }
    case 1:
        mounts(t, len);
        break;
    case 2: {
        static const char *const names[] = {"Max open files", "Max file size", "Max processes", "Max core file size",
                                            "Max locked memory"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            int64_t soft = 0, hard = 0;
            if (pybox_np_limit_parse(t, len, names[i], &soft, &hard, &err) == 0)
                FUZZ_CHECK(soft >= -1 && hard >= -1, "%s taken as %lld %lld", names[i], (long long)soft,
                           (long long)hard);
        }
        break;
    }
    case 3: {
        static const char *const ctrls[] = {"memory", "pids", "cpu", "cpuacct", NULL};
        for (size_t i = 0; i < sizeof ctrls / sizeof *ctrls; i++) {
            char path[256];
            if (pybox_np_cgroup_parse(t, len, ctrls[i], path, sizeof path, &err) == 0)
                FUZZ_CHECK(path[0] == '/' && strnlen(path, sizeof path) < sizeof path, "a cgroup path %s", path);
        }
        break;
    }
    default: {
        int r = pybox_np_idmap_is_identity(t, len, &err);
        FUZZ_CHECK(r >= -1 && r <= 1, "%d", r);
        break;
    }
    }
    return 0;
}
