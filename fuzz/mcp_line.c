/* SPDX-License-Identifier: MIT */
/* Fuzz target: JSON-RPC lines through the MCP server's protocol core (pybox_mcp_serve over
 * pipes, serving a fake tool that answers at once). The input is what the client writes:
 * one message per line. Every line the server writes back must be one JSON-RPC 2.0
 * message: an object with "jsonrpc": "2.0" and either a result or an error (with an
 * integer code and a string message) and an id, or a notification, valid UTF-8 with no
 * raw control character. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/escape.h"
#include "../pybox/mcp/server.h"
#include "common.h"

/* More than this is not written in one go into the server's stdin pipe. */
#define INPUT_MAX (512 * 1024)

static cJSON *fake_describe(const pybox_mcp_config_t *cfg)
{
    (void)cfg;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", "fake");
    cJSON_AddStringToObject(t, "description", "answers at once");
    cJSON *in = cJSON_AddObjectToObject(t, "inputSchema");
    cJSON_AddStringToObject(in, "type", "object");
    return t;
}

static cJSON *fake_call(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                        pybox_mcp_progress_fn progress, void *ctx)
{
    (void)arg;
    (void)cfg;
    (void)cancel_fd;
    if (progress)
        progress(ctx, 1, 2, "half");
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(r, "content");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    char *echo = cJSON_PrintUnformatted(args);
    cJSON_AddStringToObject(t, "text", echo ? echo : "");
    free(echo);
    cJSON_AddItemToArray(content, t);
    return r;
}

static const pybox_mcp_tool_t fake_tool = {.name = "fake", .describe = fake_describe, .call = fake_call};

static void check_line(const char *line, size_t len)
{
    FUZZ_CHECK(pybox_utf8_valid(line, len), "a line that is not UTF-8");
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK((unsigned char)line[i] >= 0x20, "a raw control byte 0x%02x", (unsigned char)line[i]);
    const char *end = NULL;
    cJSON *m = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    FUZZ_CHECK(m != NULL && end == line + len, "a line that is not one JSON value: %.200s", line);
    const cJSON *jv = cJSON_GetObjectItemCaseSensitive(m, "jsonrpc");
    FUZZ_CHECK(cJSON_IsObject(m) && cJSON_IsString(jv) && strcmp(jv->valuestring, "2.0") == 0, "not JSON-RPC 2.0");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(m, "method");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(m, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(m, "error");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    if (cJSON_IsString(method)) {
        FUZZ_CHECK(strcmp(method->valuestring, "notifications/progress") == 0 && id == NULL,
                   "a request from the server: %.200s", line);
    } else {
        FUZZ_CHECK((result != NULL) != (error != NULL), "neither or both of result and error");
        FUZZ_CHECK(id != NULL && (cJSON_IsNull(id) || cJSON_IsString(id) || cJSON_IsNumber(id)), "a bad id");
        if (error != NULL) {
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
            FUZZ_CHECK(cJSON_IsNumber(code) && cJSON_IsString(msg), "an error without code or message");
        }
    }
    cJSON_Delete(m);
}

typedef struct {
    int fd;
    pybox_buf_t out;
} drain_t;

static void *drain(void *arg)
{
    drain_t *d = arg;
    char chunk[65536];
    for (;;) {
        ssize_t r = read(d->fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (pybox_buf_append(&d->out, chunk, (size_t)r) < 0)
            break;
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    int in[2], out[2];
    FUZZ_CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe2: %d", errno);
    fcntl(in[1], F_SETPIPE_SZ, 1024 * 1024);
    /* the client's lines, then end of input: the server ends when they are all answered */
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(in[1], data + off, size - off);
        FUZZ_CHECK(w > 0, "writing the client's lines: %d", errno);
        off += (size_t)w;
    }
    close(in[1]);
    drain_t d = {.fd = out[0]};
    pybox_buf_init(&d.out, 0);
    pthread_t t;
    FUZZ_CHECK(pthread_create(&t, NULL, drain, &d) == 0, "pthread_create");
    pybox_mcp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.images[0], sizeof cfg.images[0], "stdlib");
    cfg.n_images = 1;
    cfg.max_timeout_ms = 60000;
    cfg.max_memory_bytes = 1LL << 30;
    pybox_mcp_serve(in[0], out[1], -1, &cfg, &fake_tool, 1, NULL);
    close(in[0]);
    close(out[1]);
    pthread_join(t, NULL);
    close(out[0]);
    FUZZ_CHECK(pybox_buf_ok(&d.out), "the server wrote more than 64 MiB");
    const char *p = d.out.data ? d.out.data : "";
    size_t len = d.out.len;
    FUZZ_CHECK(len == 0 || p[len - 1] == '\n', "the last line is not whole");
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(p + i, '\n', len - i);
        size_t n = (size_t)(nl - (p + i));
        check_line(p + i, n);
        i += n + 1;
    }
    pybox_buf_free(&d.out);
    return 0;
}
