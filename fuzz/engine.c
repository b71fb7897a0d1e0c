/* SPDX-License-Identifier: MIT */
/* Fuzz target: the Docker engine's answers as the client judges them. The first byte
 * picks the parser: 0 the /_ping answer (version negotiation), 1 a reply body (JSON, or
 * an error body carried as the message), 2 the head and error body of an answer to an
 * upgrade (attach) request. The rest is the answer as the engine sent it: status line and
 * headers up to the blank line, then the body. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/docker/engine.h"
#include "../pybox/escape.h"
#include "common.h"

static void check_error(const pybox_error_t *err)
{
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_CHECK(n < sizeof err->msg, "the error message is not terminated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 3;
    char *answer = fuzz_strndup(data + 1, size - 1);
    size_t alen = size - 1;
    /* the status and where the body starts, as the engine's HTTP framing says */
    long status = 200;
    size_t hlen = 0, want = 0;
    bool whole = pybox_engine_upgrade_head(answer, &status, &hlen, &want) == 0;
    if (whole)
        FUZZ_CHECK(hlen >= 4 && hlen <= strlen(answer), "a head of %zu bytes in an answer of %zu", hlen,
                   strlen(answer));
    const char *body = whole ? answer + hlen : "";
    size_t blen = whole ? alen - hlen : 0;
    pybox_error_t err = {0};
    if (which == 0) {
        char head[16384];
        size_t n = whole ? hlen : strlen(answer);
        if (n >= sizeof head)
            n = sizeof head - 1;
        memcpy(head, answer, n);
        head[n] = '\0';
        char version[64] = "";
        if (pybox_engine_negotiate("/run/fuzz.sock", whole ? status : 200, head, body, blen, version, sizeof version,
                                   &err) == 0) {
            FUZZ_CHECK(strstr(version, "(API ") != NULL, "version %s", version);
            for (const char *p = version; *p; p++)
                FUZZ_CHECK(*p >= 0x20 && *p < 0x7f, "a byte 0x%02x in the engine's version", (unsigned char)*p);
        } else {
            check_error(&err);
        }
    } else if (which == 1) {
        cJSON *reply = NULL;
        int rc = pybox_engine_reply_parse("GET", "/containers/x/json", status, body, blen, &reply, &err);
        if (rc == 0 && status >= 400) {
            FUZZ_CHECK(blen == 0 || reply != NULL, "an error reply of %zu bytes taken as nothing", blen);
            pybox_engine_fail(&err, "GET /containers/x/json", status, reply);
            check_error(&err);
        } else if (rc < 0) {
            FUZZ_CHECK(reply == NULL, "a refused reply still handed over");
            check_error(&err);
        }
        /* an error body that is not JSON is carried as valid UTF-8 */
        cJSON *as_json = cJSON_ParseWithLength(body, blen);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");
        if (cJSON_IsString(m) && rc == 0 && status >= 400 && as_json == NULL)
            FUZZ_CHECK(pybox_utf8_valid(m->valuestring, strlen(m->valuestring)), "a message that is not UTF-8");
        cJSON_Delete(as_json);
        cJSON_Delete(reply);
    } else if (whole && status != 101) {
        size_t take = blen < want ? blen : want;
        cJSON *j = cJSON_ParseWithLength(body, take ? take : blen);
        if (status < 0)
            pybox_error_set(&err, PYBOX_ERR_PROTOCOL, 0, "the engine's answer is not HTTP");
        else
            pybox_engine_fail(&err, "POST /containers/x/attach", status, j);
        check_error(&err);
        cJSON_Delete(j);
    }
    free(answer);
    return 0;
}
