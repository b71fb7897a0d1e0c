/* SPDX-License-Identifier: MIT */
/* The MCP server's sessions (docs/mcp.md, Sessions): boxes an agent asked for with
 * session_open, each one sealed box whose one interpreter runs the session's calls one
 * after another in the same globals. The table bounds them (--python-sessions live at once; each
 * within --session-ttl and --session-idle) and ends each at its idle limit, its lifetime,
 * its first call that ends its interpreter, session_close, the end of the MCP connection
 * that opened it (whose alone it is), or the server's end; the box's
 * own clocks end it should the server die first. Every id is made by the server from the
 * kernel's random source and names one session of this server only. */
#ifndef PYBOX_MCP_SESSIONS_H
#define PYBOX_MCP_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "../ahead.h"
#include "../error.h"
#include "pool.h"
#include "server.h"

typedef struct pybox_mcp_sessions pybox_mcp_sessions_t;

/* Keep sessions for cfg (none when cfg->sessions is 0: *out NULL); a thread of the
 * table's own ends those past their idle limit or lifetime. */
int pybox_mcp_sessions_start(const pybox_mcp_config_t *cfg, pybox_mcp_sessions_t **out, pybox_error_t *err);

/* Room for one more session of tenant (pybox_mcp_call_tenant): 0 with a place reserved
 * (give it to _add or _unreserve), or -1 with why (the server's ceiling, or the tenant's
 * share of it, each set by the server). */
int pybox_mcp_sessions_reserve(pybox_mcp_sessions_t *ss, uint64_t tenant, char *why, size_t len);
void pybox_mcp_sessions_unreserve(pybox_mcp_sessions_t *ss, uint64_t tenant);
/* A new session in tenant's reserved place: its box (w: the preparation and the box,
 * ready), the MCP connection that owns it (pybox_mcp_call_connection), its lifetime and
 * idle limit; its id made here (33 bytes). -1 when no id could be made (the caller then
 * removes w). */
int pybox_mcp_sessions_add(pybox_mcp_sessions_t *ss, pybox_mcp_warm_t *w, uint64_t owner, uint64_t tenant,
                           int64_t ttl_ms, int64_t idle_ms, char id[33], pybox_error_t *err);

/* A session's box for one call or its close, asked on the connection owner: NULL with why
 * when there is no such live session of that connection (another connection's is refused
 * as an unknown id), or a call runs in it now. Taken, it is the caller's until given
 * back. */
pybox_mcp_warm_t *pybox_mcp_sessions_take(pybox_mcp_sessions_t *ss, const char *id, uint64_t owner, char *why,
                                          size_t len);
/* Given back after a call: w when the session goes on, NULL when it ended (how: why). */
void pybox_mcp_sessions_give_back(pybox_mcp_sessions_t *ss, const char *id, pybox_mcp_warm_t *w, const char *how);

/* When a session ends at the latest (pybox_now_ms), its idle limit: for the receipt of
 * its calls. */
bool pybox_mcp_sessions_limits(pybox_mcp_sessions_t *ss, const char *id, int64_t *ends_ms, int64_t *idle_ms);

/* The MCP connection owner has ended: its sessions end (boxes removed), one in a call
 * when that call gives it back. */
void pybox_mcp_sessions_end_owned(pybox_mcp_sessions_t *ss, uint64_t owner);

/* End the session with this id (its box removed), or, when a call runs in it, when that
 * call gives it back. why: for the log. */
void pybox_mcp_sessions_end(pybox_mcp_sessions_t *ss, const char *id, const char *why);

/* End every session (boxes removed) and stop. */
void pybox_mcp_sessions_stop(pybox_mcp_sessions_t *ss);

#endif
