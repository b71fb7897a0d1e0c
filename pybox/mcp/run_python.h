/* SPDX-License-Identifier: MIT */
/* The run_python tool of `pybox mcp`: a fresh box per call through the core library,
 * under the server's ceilings; its arguments, its schema, and the files it takes in and
 * gives back. Contract: docs/mcp.md. */
#ifndef PYBOX_MCP_RUN_PYTHON_H
#define PYBOX_MCP_RUN_PYTHON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../buf.h"
#include "../run.h"
#include "../state.h"
#include "server.h"

/* What the server's tools share (their calls' arg; NULL: the installation PYBOX_HOME
 * names, no warm box). */
typedef struct pybox_mcp_pool pybox_mcp_pool_t;
typedef struct pybox_mcp_sessions pybox_mcp_sessions_t;
typedef struct pybox_mcp_ctx {
    const pybox_state_t *st;        /* the installation */
    pybox_mcp_pool_t *pool;         /* the warm boxes (pool.h), or NULL */
    pybox_mcp_sessions_t *sessions; /* the sessions (sessions.h), or NULL */
} pybox_mcp_ctx_t;

/* The tools: run_python, and the session tools (served when the server keeps sessions). */
extern const pybox_mcp_tool_t pybox_mcp_run_python_tool;
extern const pybox_mcp_tool_t pybox_mcp_session_open_tool;
extern const pybox_mcp_tool_t pybox_mcp_session_close_tool;

/* Its tools/list entry, and one call. */
cJSON *pybox_mcp_run_python_describe(const pybox_mcp_config_t *cfg);
cJSON *pybox_mcp_run_python(void *arg, const pybox_mcp_config_t *cfg, const cJSON *arguments, int cancel_fd,
                            pybox_mcp_progress_fn progress, void *progress_ctx);

/* A call's arguments checked and its input files taken (written into a scratch folder,
 * removed again), as a call does before it prepares a run: NULL when they pass, else
 * the refusal (caller frees). Nothing is run, nothing is kept. */
cJSON *pybox_mcp_run_python_check(const pybox_mcp_config_t *cfg, const cJSON *args);

/* Remove the folder `name` (one simple name, made by this call) under output_root and
 * everything in it, following no links. Returns 0, or -1 with errno. */
int pybox_mcp_discard_kept(const char *output_root, const char *name);

/* What one call may add to the output root at most (its files, PYBOX_OUT_TOTAL_MAX, and
 * each of its files and folders counted as at least PYBOX_MCP_ENTRY_MIN): the least
 * --output-root-max. */
int64_t pybox_mcp_call_output_most(void);

/* The call folders under root (names of 16 hex digits, made by the server; nothing else
 * there is counted or touched): those whose modification time is more than max_age_s
 * before now are removed, by descriptors and following no links; *used gets what the
 * others hold (pybox_mcp_call_output_most's way of counting), *removed how many went.
 * Returns 0, or -1 with errno when root cannot be read. */
int pybox_mcp_output_root_tidy(const char *root, int64_t max_age_s, int64_t now, int64_t *used, int *removed);

/* A file:// URI for an absolute path: every byte outside RFC 3986's unreserved set and
 * '/' percent-encoded ('%' included), so the URI decodes exactly to the path. */
int pybox_mcp_file_uri(pybox_buf_t *out, const char *path);

/* A {path} input: rel must be relative with no empty, "." or ".." component; then it is
 * resolved under root and must stay there. Returns 0 with the resolved path in out, or -1
 * (the same for every refused path, whatever exists outside). */
int pybox_mcp_input_path(const char *root, const char *rel, char *out, size_t len);

/* The text block (content[0]) for a run: PyBox's lines, and the program's lines each
 * fenced with PYBOX_MCP_FENCE and escaped. Read from the run's result, never from the
 * JSON made of it. Caller frees. */
#define PYBOX_MCP_FENCE "  | "
char *pybox_mcp_summary(const pybox_run_result_t *res);

#endif
