/* SPDX-License-Identifier: MIT */
/* Fuzz target: the arguments of a run_python call (the JSON object of tools/call's
 * "arguments"), checked against the server's ceilings and the input files taken, as a
 * call does before it prepares a run (pybox_mcp_run_python_check). A refusal must be a
 * tool error result: isError true and one text block of valid UTF-8. Files by path are
 * looked for under a files root of the target's own. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../pybox/escape.h"
#include "../pybox/mcp/run_python.h"
#include "common.h"

static pybox_mcp_config_t cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char p[256];
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.images[0], sizeof cfg.images[0], "stdlib");
    snprintf(cfg.images[1], sizeof cfg.images[1], "data");
    cfg.n_images = 2;
    cfg.max_timeout_ms = 60000;
    cfg.max_memory_bytes = 1LL << 30;
    fuzz_path(cfg.files_root, sizeof cfg.files_root, "files");
    mkdir(cfg.files_root, 0700);
    fuzz_path(p, sizeof p, "files/data.csv");
    fuzz_write(p, "a,b\n1,2\n", 8);
    fuzz_path(p, sizeof p, "files/sub");
    mkdir(p, 0700);
    fuzz_path(p, sizeof p, "files/sub/notes.txt");
    fuzz_write(p, "notes\n", 6);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *args = cJSON_ParseWithLength((const char *)data, size);
    if (args == NULL)
        return 0;
    /* the server hands over only objects (anything else is refused before a call) */
    if (cJSON_IsObject(args)) {
        cJSON *r = pybox_mcp_run_python_check(&cfg, args);
        if (r != NULL) {
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 0), "text");
            FUZZ_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "isError")), "a refusal that is no error");
            FUZZ_CHECK(cJSON_GetArraySize(content) == 1 && cJSON_IsString(text), "a refusal without its text");
            FUZZ_CHECK(pybox_utf8_valid(text->valuestring, strlen(text->valuestring)),
                       "a refusal that is not UTF-8: %s", text->valuestring);
            cJSON_Delete(r);
        }
    }
    cJSON_Delete(args);
    return 0;
}
