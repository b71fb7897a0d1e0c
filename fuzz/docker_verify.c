/* SPDX-License-Identifier: MIT */
/* Fuzz target: the engine's read-back of a created box (GET /containers/{id}/json)
 * compared with the policy by pybox_docker_verify. The first byte picks the policy's
 * mounts (none, /box/in, /box/out, both); the rest is the read-back. A "seccomp=..."
 * second SecurityOpt is replaced by PyBox's current profile, as the unit tests do with
 * the recording, so that a faithful read-back can pass. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "../pybox/docker/docker.h"
#include "../pybox/policy.h"
#include "common.h"

static void fuzz_policy(pybox_policy_t *p, unsigned mounts)
{
    pybox_policy_defaults(p);
    snprintf(p->image_id, sizeof p->image_id, "%s",
             "sha256:0f7d0080cbe62c085e8259af8a055581d48a56cb6c8143885265cfe819807aca");
    snprintf(p->install_id, sizeof p->install_id, "%s", "00112233445566778899aabbccddeeff");
    snprintf(p->run_id, sizeof p->run_id, "%s", "fixture0000000000000000000000000");
    p->expires = 1800000000;
    p->program_uid = 200123;
    p->mount_in = (mounts & 1) != 0;
    p->mount_out = (mounts & 2) != 0;
}

static void current_seccomp(cJSON *inspect)
{
    cJSON *host = cJSON_GetObjectItemCaseSensitive(inspect, "HostConfig");
    cJSON *opts = cJSON_GetObjectItemCaseSensitive(host, "SecurityOpt");
    cJSON *s = cJSON_GetArrayItem(opts, 1);
    if (!cJSON_IsString(s) || strncmp(s->valuestring, "seccomp=", 8) != 0)
        return;
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "seccomp=");
    pybox_buf_adds(&b, pybox_policy_seccomp());
    if (pybox_buf_ok(&b))
        cJSON_ReplaceItemInArray(opts, 1, cJSON_CreateString(b.data));
    pybox_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pybox_policy_t p;
    fuzz_policy(&p, data[0] & 3);
    cJSON *inspect = cJSON_ParseWithLength((const char *)data + 1, size - 1);
    if (inspect == NULL)
        return 0;
    current_seccomp(inspect);
    pybox_error_t err = {0};
    int checked = -1;
    int rc = pybox_docker_verify(&p, inspect, &checked, &err);
    if (rc == 0)
        FUZZ_CHECK(checked > 40, "a read-back passed after only %d settings were compared", checked);
    else
        FUZZ_CHECK(err.kind == PYBOX_ERR_POLICY && err.msg[0] != '\0', "a refusal without its reason");
    cJSON_Delete(inspect);
    return 0;
}
