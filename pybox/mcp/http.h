/* SPDX-License-Identifier: MIT */
/* `pybox mcp --listen`: the MCP server over Streamable HTTP (specification revision
 * 2025-11-25) on GNU libmicrohttpd, opened when the server starts (never by other
 * commands). One endpoint, PYBOX_MCP_HTTP_PATH: POST carries one JSON-RPC message,
 * answered as application/json, or as an SSE stream for a call that asked for progress;
 * GET opens the session's own stream; DELETE ends a session and cancels its calls. Every
 * request needs a bearer token of the token file; a browser's Origin must be listed.
 * The protocol is the core's (server.h), shared with stdio. Contract: docs/mcp.md,
 * "Over HTTP". */
#ifndef PYBOX_MCP_HTTP_H
#define PYBOX_MCP_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../error.h"
#include "access.h"
#include "server.h"

#define PYBOX_MCP_HTTP_PATH "/mcp"
/* A connection that has not sent a whole request head within this long of its opening, or
 * of the end of its last exchange, is closed (slow-loris heads; idle keep-alive). */
#define PYBOX_MCP_HTTP_HEAD_S 10
/* A request body must have arrived whole within this long of its head (16 MiB at 280 KB/s). */
#define PYBOX_MCP_HTTP_BODY_S 60
/* A connection on which nothing moves for this long, a client not reading an answer
 * included, is closed (libmicrohttpd's own timeout; never while a call is waited for). */
#define PYBOX_MCP_HTTP_IDLE_S 30
/* An open SSE stream gets a comment this often when nothing else went, so proxies in
 * front keep it. */
#define PYBOX_MCP_HTTP_KEEPALIVE_S 15
/* Request bodies held at once (read, not yet parsed; a body is let go once its message is
 * taken): one token's at most, and all tokens' together. A body that would pass either is
 * refused (429 for the token's, 503 for the server's, each with its reason), so many
 * connections uploading at once hold no more memory than this. */
#define PYBOX_MCP_HTTP_BODIES_PER_TOKEN (64LL * 1024 * 1024)
#define PYBOX_MCP_HTTP_BODIES_MAX (256LL * 1024 * 1024)
/* Memory for one connection's request head and buffers (libmicrohttpd's pool). */
#define PYBOX_MCP_HTTP_CONN_MEMORY (64 * 1024)
/* Connections beyond the tokens' own, for requests not yet authenticated. */
#define PYBOX_MCP_HTTP_SPARE_CONNECTIONS 64
/* Connections take at most half the descriptors the server may open (RLIMIT_NOFILE's
 * soft limit) beyond these: the other half is the calls' (their boxes' pipes, process
 * handles, files), so a flood of connections, authenticated or not, never leaves a call
 * without descriptors. */
#define PYBOX_MCP_HTTP_FD_RESERVE 64
/* Per token, by default, and at most (--max-connections, --max-http-sessions, --max-calls). */
#define PYBOX_MCP_HTTP_CONNECTIONS 64
#define PYBOX_MCP_HTTP_SESSIONS 16
#define PYBOX_MCP_HTTP_CALLS PYBOX_MCP_CALLS_MAX
#define PYBOX_MCP_HTTP_PER_TOKEN_MAX 1024
/* A session with nothing in progress for this long ends (--session-idle). */
#define PYBOX_MCP_HTTP_SESSION_IDLE_S 3600LL
#define PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S 10LL

typedef struct pybox_mcp_http_config {
    pybox_mcp_listen_t listen;
    bool listen_public; /* --listen-public: an address other than loopback is allowed */
    pybox_mcp_tokens_t tokens;
    pybox_mcp_origins_t origins;
    bool socket_group_set;
    gid_t socket_gid;                                  /* a unix socket's group (--socket-group), else the server's */
    unsigned max_connections, max_sessions, max_calls; /* per token */
    int64_t session_idle_s;
} pybox_mcp_http_config_t;

/* Defaults for every member but listen and tokens. */
void pybox_mcp_http_defaults(pybox_mcp_http_config_t *hc);

/* Serve until a signal read from signal_fd (a signalfd of SIGINT, SIGTERM and SIGHUP)
 * ends it: the first SIGTERM drains (no new connection or request; calls in progress run
 * to their end and their answers go out; then exit), SIGINT, SIGHUP or a second SIGTERM
 * cancel every call (boxes removed) and exit. Logs go to stderr, one line per call.
 * Returns 0, or -1 with err when the server could not start (nothing was served). */
int pybox_mcp_http_serve(const pybox_mcp_http_config_t *hc, int signal_fd, const pybox_mcp_config_t *cfg,
                         const pybox_mcp_tool_t *tools, size_t n_tools, void *arg, pybox_error_t *err);

#endif
