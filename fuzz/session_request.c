/* SPDX-License-Identifier: MIT */
/* Fuzz target: the first line of a request to a CLI session's holder, as a peer of the
 * session's user writes it on the holder's socket (pybox_cli_session_request_parse,
 * docs/sessions.md). What must hold: a request taken is a call or the close, a call's
 * program length is 1 to PYBOX_PROGRAM_MAX and its timeout within the timeout's ceiling,
 * the receipt's columns 1 to 10000; a line longer than the holder reads is refused; a
 * refusal says why in valid UTF-8; a request taken, written again as the client writes
 * it, is read back the same. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/bounds.h"
#include "../pybox/cli/cli.h"
#include "../pybox/escape.h"
#include "../pybox/limits.h"
#include "common.h"

static void same_again(const pybox_cli_session_request_t *rq)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", rq->op == PYBOX_CLI_SESSION_CALL ? "call" : "close");
    cJSON_AddBoolToObject(j, "json", rq->json);
    cJSON_AddNumberToObject(j, "columns", rq->columns);
    cJSON_AddBoolToObject(j, "color", rq->color);
    if (rq->op == PYBOX_CLI_SESSION_CALL) {
        cJSON_AddNumberToObject(j, "timeout_ms", (double)rq->timeout_ms);
        cJSON_AddNumberToObject(j, "program_bytes", (double)rq->program_bytes);
    }
    char *line = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    FUZZ_CHECK(line != NULL, "a request that cannot be written again");
    pybox_cli_session_request_t again;
    FUZZ_CHECK(pybox_cli_session_request_parse(line, strlen(line), &again) == 0, "a request written again refused: %s",
               line);
    FUZZ_CHECK(again.op == rq->op && again.program_bytes == rq->program_bytes && again.timeout_ms == rq->timeout_ms &&
                   again.columns == rq->columns && again.json == rq->json && again.color == rq->color,
               "a request written again read otherwise: %s", line);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pybox_cli_session_request_t rq;
    int rc = pybox_cli_session_request_parse((const char *)data, size, &rq);
    if (rc < 0) {
        FUZZ_CHECK(rq.op == PYBOX_CLI_SESSION_REFUSED, "a refusal with an operation");
        FUZZ_CHECK(rq.why != NULL && rq.why[0] != '\0' && pybox_utf8_valid(rq.why, strlen(rq.why)),
                   "a refusal without its reason");
        return 0;
    }
    FUZZ_CHECK(rc == 0, "an answer other than 0 or -1: %d", rc);
    FUZZ_CHECK(size <= PYBOX_CLI_SESSION_HEAD_MAX, "a line of %zu bytes taken", size);
    FUZZ_CHECK(rq.op == PYBOX_CLI_SESSION_CALL || rq.op == PYBOX_CLI_SESSION_CLOSE, "an unknown operation taken");
    FUZZ_CHECK(rq.columns >= 1 && rq.columns <= 10000, "columns %d", rq.columns);
    if (rq.op == PYBOX_CLI_SESSION_CALL) {
        FUZZ_CHECK(rq.program_bytes >= 1 && rq.program_bytes <= PYBOX_PROGRAM_MAX, "a program of %lld bytes",
                   (long long)rq.program_bytes);
        FUZZ_CHECK(rq.timeout_ms >= 0 && rq.timeout_ms <= pybox_limit(PYBOX_LIMIT_TIMEOUT)->max, "a timeout of %lld ms",
                   (long long)rq.timeout_ms);
    }
    same_again(&rq);
    return 0;
}
