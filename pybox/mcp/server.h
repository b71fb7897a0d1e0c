/* SPDX-License-Identifier: MIT */
/* `pybox mcp`: a Model Context Protocol server over stdio (JSON-RPC 2.0, one message per
 * line) serving a table of tools (run_python.h has the one PyBox serves). The agent
 * chooses the program and its arguments; the operator who starts the server sets the
 * ceilings. The protocol core here calls tools only through the table, so it is tested
 * with a fake one; its configuration (pybox_mcp_config_t) is still run_python's (images,
 * ceilings, the output root), which the core only holds and hands to the tool. Contract:
 * docs/mcp.md. */
#ifndef PYBOX_MCP_SERVER_H
#define PYBOX_MCP_SERVER_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bounds.h"
#include "../buf.h"
#include "../error.h"

#define PYBOX_MCP_PROTOCOL "2025-11-25"
#define PYBOX_MCP_PROTOCOL_OLD "2025-06-18"
/* One message on stdin at most (a program and inline files, base64-encoded, fit). */
#define PYBOX_MCP_LINE_MAX (16 * 1024 * 1024)
/* JSON values in one message at most: cJSON spends about 64 bytes on each, so a 16 MiB
 * line of "[0,0,0,...]" would cost over a gigabyte. Counted before parsing. */
#define PYBOX_MCP_VALUES_MAX 100000
/* Nesting levels in one message at most (the request object is the first), counted
 * before parsing so that the refusal names the reason; below cJSON's own limit, which
 * would only say the line is not JSON. A request of run_python needs 5. */
#define PYBOX_MCP_DEPTH_MAX 64
_Static_assert(PYBOX_MCP_DEPTH_MAX < CJSON_NESTING_LIMIT, "the server's bound must come before cJSON's");
#define PYBOX_MCP_CALLS_MAX 16 /* tool calls in flight at once */
/* Bytes waiting for stdout at most. One writer thread owns stdout; every other thread
 * queues whole lines. A line that would take the queue past this means the client is no
 * longer reading: the server stops taking requests, cancels every call (boxes removed),
 * and pybox_mcp_serve returns -1 once they have ended. One result is at most about 12 MiB
 * of JSON (8 MiB of files inline, base64), so even 16 results at once stay under it for a
 * client that reads, however slowly. */
#define PYBOX_MCP_OUT_QUEUE_MAX (256 * 1024 * 1024)
/* At the end (stdin closed, stop_fd), after every call has ended: the longest the writer
 * is given to write what is still queued before pybox_mcp_serve returns without it. */
#define PYBOX_MCP_FLUSH_MS 5000
/* A member a tool may add to its result, never sent: the core takes it out before
 * sending, and gives it to the tool's drop() when the result is dropped (its call was
 * cancelled). run_python names the folder it kept under --output-root there. */
#define PYBOX_MCP_KEPT_KEY "_pybox_kept_dir"
#define PYBOX_MCP_IMAGES_MAX 8
/* The output root's ceiling (--output-root-max, --output-root-age; docs/mcp.md): what the
 * call folders under it may hold together, each file and folder counted as at least
 * PYBOX_MCP_ENTRY_MIN bytes (so many small files count too), and how long a call folder is
 * kept (by its modification time, when its files were written) before the server removes
 * it. A call whose files could take the folders past the ceiling is refused before its box.
 * The least ceiling is what one call may add (pybox_mcp_call_output_most). */
#define PYBOX_MCP_ENTRY_MIN 4096
#define PYBOX_MCP_OUTPUT_ROOT_MAX (1024LL * 1024 * 1024)
#define PYBOX_MCP_OUTPUT_ROOT_AGE_S (24LL * 3600)
#define PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S 60LL
/* Warm boxes (--warm, --warm-wait; docs/mcp.md): how many the server keeps waiting per
 * image it offers, made, verified, their interpreter started and the image's preload
 * imported, each for one call; and how long one may wait before it is replaced (its own
 * init ends it PYBOX_MCP_WARM_MARGIN_MS later, should the server be gone). */
#define PYBOX_MCP_WARM 1
#define PYBOX_MCP_WARM_MAX 8
#define PYBOX_MCP_WARM_WAIT_MS (300LL * 1000)
#define PYBOX_MCP_WARM_WAIT_MIN_MS (10LL * 1000)
#define PYBOX_MCP_WARM_WAIT_MAX_MS (3600LL * 1000)
#define PYBOX_MCP_WARM_MARGIN_MS (10LL * 1000)
/* A call that finds no box waiting but one being made waits for it at most this long. */
#define PYBOX_MCP_WARM_TAKE_WAIT_MAX_MS 10000
/* Sessions (--sessions, --session-ttl, --session-idle; docs/mcp.md): how many may be live
 * at once (0: the session tools are not offered), the longest lifetime session_open may
 * ask (and its default), and how long a session waits for its next call. The box's own
 * init ends it PYBOX_MCP_WARM_MARGIN_MS after either, should the server be gone. */
#define PYBOX_MCP_SESSIONS 2
#define PYBOX_MCP_SESSIONS_MAX 16
#define PYBOX_MCP_SESSION_TTL_MS (1800LL * 1000)
#define PYBOX_MCP_SESSION_TTL_MIN_MS (10LL * 1000)
#define PYBOX_MCP_SESSION_TTL_MAX_MS (24LL * 3600 * 1000)
#define PYBOX_MCP_SESSION_IDLE_MS (300LL * 1000)
#define PYBOX_MCP_SESSION_IDLE_MIN_MS (5LL * 1000)

typedef struct pybox_mcp_config {
    char images[PYBOX_MCP_IMAGES_MAX][PYBOX_NAME_MAX]; /* allowed images, first is the default */
    size_t n_images;
    int64_t max_timeout_ms;
    int64_t max_memory_bytes;
    char files_root[PATH_MAX];  /* "" = no input files by path */
    char output_root[PATH_MAX]; /* "" = files that cannot be shown inline are not kept */
    int64_t output_root_max;    /* bytes the call folders under it may hold; 0 = PYBOX_MCP_OUTPUT_ROOT_MAX */
    int64_t output_root_age_s;  /* a call folder older than this goes; 0 = PYBOX_MCP_OUTPUT_ROOT_AGE_S */
    size_t out_queue_max;       /* bytes queued for stdout at most; 0 = PYBOX_MCP_OUT_QUEUE_MAX */
    char backend[32];           /* --backend ("" = the installation's) */
    int warm;                   /* warm boxes kept per image (0: none) */
    int64_t warm_wait_ms;       /* the longest one waits before it is replaced */
    int sessions;               /* sessions live at once at most (0: none) */
    int64_t session_ttl_ms;     /* the longest lifetime a session may have */
    int64_t session_idle_ms;    /* how long a session waits for its next call */
} pybox_mcp_config_t;

/* Report progress of a call (only when the client asked for it). */
typedef void (*pybox_mcp_progress_fn)(void *ctx, double progress, double total, const char *message);

/* Do one tools/call. cancel_fd becomes readable when the call is cancelled (poll it;
 * never read it). Returns the result object (the caller frees it), or NULL when the call
 * was cancelled (then nothing is sent). */
typedef cJSON *(*pybox_mcp_runner_fn)(void *arg, const pybox_mcp_config_t *cfg, const cJSON *arguments, int cancel_fd,
                                      pybox_mcp_progress_fn progress, void *progress_ctx);

/* A tool the server serves. */
typedef struct pybox_mcp_tool {
    const char *name;
    /* Its tools/list entry: name, description, inputSchema, outputSchema (caller frees). */
    cJSON *(*describe)(const pybox_mcp_config_t *cfg);
    pybox_mcp_runner_fn call;
    /* Its result is dropped (cancelled): undo what kept (its PYBOX_MCP_KEPT_KEY member)
     * names. May be NULL. */
    void (*drop)(const pybox_mcp_config_t *cfg, const cJSON *kept);
} pybox_mcp_tool_t;

/* Serve on in_fd/out_fd until in_fd ends or stop_fd (-1: none) becomes readable; then
 * cancel what is in flight, wait for it (every box removed), give the writer up to
 * PYBOX_MCP_FLUSH_MS to write what is queued, and return 0, or -1 when lines were left
 * unwritten then. When the client stops reading (out_queue_max), the same end
 * comes at once, nothing more is written, and it returns -1. Logs go to stderr only.
 * arg is given to every call. */
int pybox_mcp_serve(int in_fd, int out_fd, int stop_fd, const pybox_mcp_config_t *cfg, const pybox_mcp_tool_t *tools,
                    size_t n_tools, void *arg);

/* A tool result that is a refusal or a failure: isError with one text block. */
cJSON *pybox_mcp_error_result(const char *message);

#endif
