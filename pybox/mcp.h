/* SPDX-License-Identifier: MIT */
/* `pybox mcp`: a Model Context Protocol server over stdio (JSON-RPC 2.0, one message per
 * line) with one tool, run_python. The agent chooses the program and its arguments; the
 * operator who starts the server sets the ceilings. The protocol core here is separate
 * from the tool's work (a runner), so it is tested with a fake runner. Contract:
 * docs/mcp.md. */
#ifndef PYBOX_MCP_H
#define PYBOX_MCP_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "limits.h"

#define PYBOX_MCP_PROTOCOL "2025-11-25"
#define PYBOX_MCP_PROTOCOL_OLD "2025-06-18"
/* One message on stdin at most (a program and inline files, base64-encoded, fit). */
#define PYBOX_MCP_LINE_MAX (16 * 1024 * 1024)
#define PYBOX_MCP_CALLS_MAX 16 /* tool calls in flight at once */
#define PYBOX_MCP_IMAGES_MAX 8

typedef struct pybox_mcp_config {
    char images[PYBOX_MCP_IMAGES_MAX][PYBOX_NAME_MAX]; /* allowed images, first is the default */
    size_t n_images;
    int64_t max_timeout_ms;
    int64_t max_memory_bytes;
    char files_root[PATH_MAX];  /* "" = no input files by path */
    char output_root[PATH_MAX]; /* "" = files that cannot be shown inline are not kept */
} pybox_mcp_config_t;

/* Report progress of a call (only when the client asked for it). */
typedef void (*pybox_mcp_progress_fn)(void *ctx, double progress, double total, const char *message);

/* Do one tools/call of run_python. cancel_fd becomes readable when the call is cancelled
 * (poll it; never read it). Returns the result object (the caller frees it), or NULL when
 * the call was cancelled (then nothing is sent). */
typedef cJSON *(*pybox_mcp_runner_fn)(void *arg, const pybox_mcp_config_t *cfg, const cJSON *arguments, int cancel_fd,
                                      pybox_mcp_progress_fn progress, void *progress_ctx);

/* Serve on in_fd/out_fd until in_fd ends or stop_fd (-1: none) becomes readable; then
 * cancel what is in flight, wait for it (every box removed), and return 0. Logs go to
 * stderr only. */
int pybox_mcp_serve(int in_fd, int out_fd, int stop_fd, const pybox_mcp_config_t *cfg, pybox_mcp_runner_fn runner,
                    void *runner_arg);

/* The tool's description, input schema and output schema (tools/list). Caller frees. */
cJSON *pybox_mcp_tool(const pybox_mcp_config_t *cfg);

/* A tool result that is a refusal or a failure: isError with one text block. */
cJSON *pybox_mcp_error_result(const char *message);

/* The real runner: a fresh box per call through the core library. arg: the installation
 * (const pybox_state_t *). */
cJSON *pybox_mcp_run_python(void *arg, const pybox_mcp_config_t *cfg, const cJSON *arguments, int cancel_fd,
                            pybox_mcp_progress_fn progress, void *progress_ctx);

#endif
