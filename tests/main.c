/* SPDX-License-Identifier: MIT */
/* The integration test runner. It needs a running engine and a set-up installation
 * (`make check` does both first). The tests run as an installation of their own: a
 * temporary state directory with its own installation id and the main installation's
 * image pins, so every box they make carries a label that is theirs alone, and the
 * safety sweep at the end removes exactly what the tests made and nothing else. */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pybox/cgroup.h"
#include "../pybox/docker/engine.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* Remove every container (and its volumes) labelled with the tests' installation id. */
static int sweep(void)
{
    pybox_error_t err = {0};
    pybox_state_t st;
    pybox_engine_t *e = NULL;
    if (pybox_state_open(&st, false, &err) < 0 || pybox_engine_open(NULL, &e, &err) < 0) {
        fprintf(stderr, "itest: sweep: %s\n", err.msg);
        return -1;
    }
    char filter[128];
    snprintf(filter, sizeof filter, "{\"label\":[\"pybox.install=%s\"]}", st.install_id);
    char *esc = pybox_engine_escape(e, filter);
    char path[512];
    snprintf(path, sizeof path, "/containers/json?all=1&filters=%s", esc);
    free(esc);
    long status = 0;
    cJSON *list = NULL;
    int left = 0;
    if (pybox_engine_call(e, "GET", path, NULL, &status, &list, &err) == 0 && status == 200) {
        const cJSON *c;
        cJSON_ArrayForEach (c, list) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "Id");
            if (!cJSON_IsString(id))
                continue;
            left++;
            snprintf(path, sizeof path, "/containers/%s?force=1&v=1", id->valuestring);
            cJSON *r = NULL;
            pybox_engine_call(e, "DELETE", path, NULL, &status, &r, &err);
            cJSON_Delete(r);
        }
    }
    cJSON_Delete(list);
    pybox_engine_free(e);
    return left;
}

int main(void)
{
    char home[64], id[33];
    if (itest_new_home(home, sizeof home, id) < 0)
        return EXIT_FAILURE;
    setenv("PYBOX_HOME", home, 1);
    bool native = itest_native();
    printf("integration tests run as installation %s, on the %s backend\n", id, itest_backend());
    /* The same suites on each backend; what only one backend has runs on that one (the
     * engine's own checks, a private engine; the native sandbox's library). */
    SRunner *sr = srunner_create(itest_suite_exec());
    srunner_add_suite(sr, itest_suite_inflight());
    srunner_add_suite(sr, itest_suite_refuse());
    srunner_add_suite(sr, itest_suite_isolation());
    srunner_add_suite(sr, itest_suite_verify());
    srunner_add_suite(sr, itest_suite_crash());
    srunner_add_suite(sr, itest_suite_kernel());
    srunner_add_suite(sr, itest_suite_files());
    srunner_add_suite(sr, itest_suite_images());
    srunner_add_suite(sr, itest_suite_mcp());
    srunner_add_suite(sr, itest_suite_session());
    srunner_add_suite(sr, itest_suite_uids());
    srunner_add_suite(sr, itest_suite_chart());
    srunner_add_suite(sr, itest_suite_sign());
    if (native) {
        srunner_add_suite(sr, itest_suite_native());
        srunner_add_suite(sr, itest_suite_rootless());
        /* What only a cgroup v2 host under systemd has: the boxes' scopes. */
        pybox_cgroup_host_t host;
        pybox_cgroup_host(NULL, NULL, &host);
        if (host.version == PYBOX_CG_V2 && host.systemd)
            srunner_add_suite(sr, itest_suite_systemd());
        else
            printf("the systemd suite needs a cgroup v2 host under systemd: not run here\n");
    } else {
        srunner_add_suite(sr, itest_suite_lifecycle());
        srunner_add_suite(sr, itest_suite_engine_down()); /* last: it restarts the engine */
    }
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    int left = native ? itest_native_sweep(id) : sweep();
    if (left > 0) {
        /* Every test removes what it made; a leftover is a failure of its own. */
        fprintf(stderr, "itest: %d box(es) of the tests were left behind (removed now)\n", left);
        failed++;
    }
    itest_remove_home(home);
    return failed == 0 && left == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
