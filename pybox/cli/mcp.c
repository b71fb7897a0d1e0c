/* SPDX-License-Identifier: MIT */
/* pybox mcp: the run_python tool served over MCP on stdio, or over HTTP with --listen
 * (docs/mcp.md). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../mcp/config.h"
#include "../mcp/http.h"
#include "../mcp/pool.h"
#include "../mcp/run_python.h"
#include "../mcp/sessions.h"
#include "../util.h"
#include "cli.h"
#include "parse.h"

static int run(int argc, char **argv)
{
    pybox_error_t err = {0};
    pybox_state_t st;
    static pybox_mcp_args_t a; /* the tokens' digests: large, and kept for the server's life */
    pybox_mcp_args_init(&a);
    const pybox_mcp_config_t *cfg = &a.cfg;
    int first = pybox_state_open(&st, false, &err) < 0 ? -1 : pybox_cli_args("mcp", argc, argv, &a, &err);
    if (first >= 0 && first < argc)
        pybox_cli_unknown("mcp", argv[first], &err); /* the server takes no argument */
    if (err.kind != PYBOX_ERR_NONE || pybox_mcp_args_finish(&a, &st, &err) < 0) {
        pybox_mcp_args_clear(&a);
        return pybox_cli_fail(&err, false);
    }
    /* The backend is opened once before serving, so a missing engine is said at once. */
    pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, cfg->backend, &be, &err) < 0) {
        pybox_mcp_args_clear(&a);
        return pybox_cli_fail(&err, false);
    }
    pybox_backend_close(be);
    /* Signals end the server as stdin's end does: blocked in every thread, read here. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        pybox_mcp_args_clear(&a);
        return pybox_cli_failf(PYBOX_ERR_SYSTEM, errno, "signalfd");
    }
    pybox_buf_t imgs;
    pybox_buf_init(&imgs, 0);
    for (size_t i = 0; i < cfg->n_images; i++)
        pybox_buf_addf(&imgs, "%s%s", i ? "," : "", cfg->images[i]);
    char most_s[PYBOX_NUM_MAX], most_m[PYBOX_NUM_MAX];
    fprintf(stderr, "pybox mcp: serving run_python on %s (images %s; at most %s s and %s per call)\n",
            a.listen ? "HTTP" : "stdio", imgs.data ? imgs.data : "", pybox_fmt_fixed(most_s, cfg->max_timeout_ms, 3),
            pybox_fmt_size(most_m, cfg->max_memory_bytes));
    if (cfg->warm > 0) {
        char wait[PYBOX_NUM_MAX];
        fprintf(stderr,
                "pybox mcp: keeping %d warm box%s per image waiting (%zu resident at most, each within its image's "
                "memory limit), each replaced after %s s\n",
                cfg->warm, cfg->warm == 1 ? "" : "es", (size_t)cfg->warm * cfg->n_images,
                pybox_fmt_fixed(wait, cfg->warm_wait_ms, 3));
    }
    if (cfg->sessions > 0) {
        char ttl[PYBOX_NUM_MAX], idle[PYBOX_NUM_MAX], share[64] = "";
        if (cfg->sessions_per_tenant > 0)
            snprintf(share, sizeof share, " (at most %d per token)", cfg->sessions_per_tenant);
        fprintf(stderr,
                "pybox mcp: sessions on request (session_open): at most %d live at once%s, each within the memory it "
                "asked, ending at session_close, after %s s idle, at its lifetime (at most %s s) or with the "
                "client\n",
                cfg->sessions, share, pybox_fmt_fixed(idle, cfg->session_idle_ms, 3),
                pybox_fmt_fixed(ttl, cfg->session_ttl_ms, 3));
    }
    pybox_buf_free(&imgs);
    /* The warm boxes are made from now on, while the client connects. */
    pybox_mcp_ctx_t ctx = {.st = &st, .pool = NULL, .sessions = NULL};
    if (pybox_mcp_pool_start(cfg, &ctx.pool, &err) < 0 || pybox_mcp_sessions_start(cfg, &ctx.sessions, &err) < 0) {
        pybox_mcp_pool_stop(ctx.pool);
        pybox_mcp_args_clear(&a);
        close(sfd);
        return pybox_cli_fail(&err, false);
    }
    const pybox_mcp_tool_t tools[] = {pybox_mcp_run_python_tool, pybox_mcp_session_open_tool,
                                      pybox_mcp_session_close_tool};
    size_t n_tools = cfg->sessions > 0 ? 3 : 1;
    int rc;
    if (a.listen) {
        rc = pybox_mcp_http_serve(&a.http, sfd, cfg, tools, n_tools, &ctx, &err);
        pybox_mcp_args_clear(&a);
    } else {
        rc = pybox_mcp_serve(STDIN_FILENO, STDOUT_FILENO, sfd, cfg, tools, n_tools, &ctx);
    }
    pybox_mcp_sessions_stop(ctx.sessions); /* every session's box is removed */
    pybox_mcp_pool_stop(ctx.pool);         /* every box that waits is removed */
    if (rc < 0 && a.listen) {
        close(sfd);
        return pybox_cli_fail(&err, false);
    }
    close(sfd);
    return rc < 0 ? 125 : 0;
}

const pybox_cli_command_t pybox_cli_mcp = {"mcp", pybox_mcp_options, false, pybox_mcp_args_take, 0, -1, NULL, run};
