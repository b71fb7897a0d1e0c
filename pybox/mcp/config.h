/* SPDX-License-Identifier: MIT */
/* The MCP server's configuration from its options (`pybox mcp`, docs/mcp.md): the
 * images calls may use, the ceilings they may not pass, the files root and the output
 * root, and with --listen the HTTP server's (where, who, how many). The command line
 * walks the options (pybox/cli/cli.h); each is taken here. */
#ifndef PYBOX_MCP_CONFIG_H
#define PYBOX_MCP_CONFIG_H

#include <getopt.h>

#include "../error.h"
#include "../state.h"
#include "http.h"
#include "server.h"

/* The defaults of the server's own ceilings (--max-timeout, --max-memory). */
#define PYBOX_MCP_MAX_TIMEOUT_MS 30000
#define PYBOX_MCP_MAX_MEMORY (512LL * 1024 * 1024)

typedef struct pybox_mcp_args {
    pybox_mcp_config_t cfg;
    const char *images; /* --images as given */
    /* Over HTTP (--listen): the server's configuration, the tokens loaded by
     * pybox_mcp_args_finish once every option has passed. */
    bool listen;
    pybox_mcp_http_config_t http;
    const char *token_file; /* --token-file as given */
    const char *http_only;  /* the first option given that needs --listen, if any */
} pybox_mcp_args_t;

/* The options of `pybox mcp`, {NULL}-ended, in the order the help gives them. */
extern const struct option pybox_mcp_options[];

void pybox_mcp_args_init(pybox_mcp_args_t *a);
/* One option (its val in pybox_mcp_options, its value): checked and taken, or refused. */
int pybox_mcp_args_take(void *a, int val, const char *value, pybox_error_t *err);
/* After the last option: the HTTP options only with --listen, which needs a token file
 * (loaded here) and a loopback address unless --listen-public; the images, each built and
 * pinned here and named once, and the ceilings within the installation's (st). */
int pybox_mcp_args_finish(pybox_mcp_args_t *a, const pybox_state_t *st, pybox_error_t *err);
/* Forget what was taken that is secret (the tokens' digests). */
void pybox_mcp_args_clear(pybox_mcp_args_t *a);

#endif
