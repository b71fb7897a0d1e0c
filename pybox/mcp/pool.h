/* SPDX-License-Identifier: MIT */
/* The MCP server's warm boxes (--warm N, docs/mcp.md): N boxes per image it offers,
 * each made, verified, its interpreter started and its image's preload imported, waiting
 * (at most --warm-wait) for one call. A call takes one, and a new one is made for the
 * next call; the call's box is removed after it as any box is. A box that ended, said
 * anything, or waited too long while waiting, and a preload that failed, are reported
 * and never used. */
#ifndef PYBOX_MCP_POOL_H
#define PYBOX_MCP_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "../ahead.h"
#include "../error.h"
#include "../prepare.h"
#include "../state.h"
#include "server.h"

typedef struct pybox_mcp_pool pybox_mcp_pool_t;

/* A box taken for one call: the preparation it was made with (the installation, the
 * backend opened for it, its image's pin) and the box. The call hands box to
 * pybox_ahead_run, then frees the rest with pybox_mcp_warm_free. */
typedef struct pybox_mcp_warm {
    pybox_ready_t rd;
    pybox_ahead_t *box;
} pybox_mcp_warm_t;

/* Start keeping cfg->warm boxes per image of cfg (none when 0: *out NULL). The boxes are
 * made in a thread of the pool's own, from now on. */
int pybox_mcp_pool_start(const pybox_mcp_config_t *cfg, pybox_mcp_pool_t **out, pybox_error_t *err);

/* A waiting box of image for a call that asked these limits (0: not asked), or NULL with
 * why: no box was ready, or none fits the call. */
pybox_mcp_warm_t *pybox_mcp_pool_take(pybox_mcp_pool_t *p, const char *image, int64_t timeout_ms, int64_t memory_bytes,
                                      char *why, size_t len);
void pybox_mcp_warm_free(pybox_mcp_warm_t *w);

/* The call's program in the box taken (pybox_ahead_run; w->box is NULL after it). Under
 * the test-only relaxation reused-box (the test build's PYBOX_TEST_WARM_REUSE, hooks.h)
 * the box serves the call as a session's box does and, unless the call ended it, stays
 * in w for the next call. */
int pybox_mcp_pool_run(pybox_mcp_warm_t *w, const pybox_run_request_t *req, pybox_run_result_t *res);
/* After the call (its receipt made; w NULL when the box taken was not used): w freed, or,
 * with its box kept by the relaxation, handed to the next call of its image; and the
 * pool woken to make the box that replaces it (not when the box is taken: made beside
 * the call, the next box would take CPU from it). p may be NULL. */
void pybox_mcp_pool_done(pybox_mcp_pool_t *p, pybox_mcp_warm_t *w);

/* Stop making boxes and remove every waiting one. */
void pybox_mcp_pool_stop(pybox_mcp_pool_t *p);

#endif
