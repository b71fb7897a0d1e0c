/* SPDX-License-Identifier: MIT */
/* The MCP server's configuration from its options (see config.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../box.h"
#include "../escape.h"
#include "../limits.h"
#include "../util.h"
#include "run_python.h"

enum {
    OPT_IMAGES = 1,
    OPT_MAX_TIMEOUT,
    OPT_MAX_MEMORY,
    OPT_FILES_ROOT,
    OPT_OUTPUT_ROOT,
    OPT_OUTPUT_ROOT_MAX,
    OPT_OUTPUT_ROOT_AGE,
    OPT_BACKEND,
    OPT_WARM,
    OPT_WARM_WAIT,
    OPT_SESSIONS,
    OPT_SESSION_TTL,
    OPT_SESSION_IDLE,
    OPT_LISTEN,
    OPT_LISTEN_PUBLIC,
    OPT_TOKEN_FILE,
    OPT_SOCKET_GROUP,
    OPT_ALLOW_ORIGINS,
    OPT_MAX_CONNECTIONS,
    OPT_MAX_SESSIONS,
    OPT_MAX_CALLS,
    OPT_HTTP_SESSION_IDLE,
    OPT_SESSIONS_PER_TOKEN,
    OPT_HELP,
};

const struct option pybox_mcp_options[] = {
    {"images", required_argument, NULL, OPT_IMAGES},
    {"max-timeout", required_argument, NULL, OPT_MAX_TIMEOUT},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"files-root", required_argument, NULL, OPT_FILES_ROOT},
    {"output-root", required_argument, NULL, OPT_OUTPUT_ROOT},
    {"output-root-max", required_argument, NULL, OPT_OUTPUT_ROOT_MAX},
    {"output-root-age", required_argument, NULL, OPT_OUTPUT_ROOT_AGE},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"warm", required_argument, NULL, OPT_WARM},
    {"warm-wait", required_argument, NULL, OPT_WARM_WAIT},
    {PYBOX_MCP_OPT_PYTHON_SESSIONS, required_argument, NULL, OPT_SESSIONS},
    {"session-ttl", required_argument, NULL, OPT_SESSION_TTL},
    {"session-idle", required_argument, NULL, OPT_SESSION_IDLE},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"listen-public", no_argument, NULL, OPT_LISTEN_PUBLIC},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
    {"allow-origins", required_argument, NULL, OPT_ALLOW_ORIGINS},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {PYBOX_MCP_OPT_HTTP_SESSIONS, required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-calls", required_argument, NULL, OPT_MAX_CALLS},
    {"http-session-idle", required_argument, NULL, OPT_HTTP_SESSION_IDLE},
    {PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN, required_argument, NULL, OPT_SESSIONS_PER_TOKEN},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void pybox_mcp_args_init(pybox_mcp_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->images = "stdlib";
    a->cfg.max_timeout_ms = PYBOX_MCP_MAX_TIMEOUT_MS;
    a->cfg.max_memory_bytes = PYBOX_MCP_MAX_MEMORY;
    a->cfg.output_root_max = PYBOX_MCP_OUTPUT_ROOT_MAX;
    a->cfg.output_root_age_s = PYBOX_MCP_OUTPUT_ROOT_AGE_S;
    a->cfg.warm = PYBOX_MCP_WARM;
    a->cfg.warm_wait_ms = PYBOX_MCP_WARM_WAIT_MS;
    a->cfg.sessions = PYBOX_MCP_SESSIONS;
    a->cfg.session_ttl_ms = PYBOX_MCP_SESSION_TTL_MS;
    a->cfg.session_idle_ms = PYBOX_MCP_SESSION_IDLE_MS;
    pybox_mcp_http_defaults(&a->http);
}

void pybox_mcp_args_clear(pybox_mcp_args_t *a)
{
    OPENSSL_cleanse(&a->http.tokens, sizeof a->http.tokens);
}

/* A folder the server reads from or writes under: it must exist; kept as its real path. */
static int mcp_dir(const char *opt, const char *dir, bool writable, char *out, pybox_error_t *err)
{
    struct stat sb;
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL || stat(real, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: '%s' is not an existing folder", opt, dir);
    if (writable && faccessat(AT_FDCWD, real, W_OK | X_OK, AT_EACCESS) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "%s: '%s' cannot be written", opt, dir);
    return pybox_fmt(out, PATH_MAX, "%s", real) < 0
               ? pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: the path is too long", opt)
               : 0;
}

/* A group by name or number (--socket-group). */
static int group_of(const char *v, gid_t *gid, pybox_error_t *err)
{
    char shown[96];
    pybox_escape_short(shown, sizeof shown, v, 64);
    uint64_t n;
    if (pybox_parse_u64(v, &n) == 0 && n < (gid_t)-1) {
        *gid = (gid_t)n;
        return 0;
    }
    struct group g, *found = NULL;
    char buf[16384];
    if (getgrnam_r(v, &g, buf, sizeof buf, &found) != 0 || found == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--socket-group: no group '%s' here", shown);
    *gid = found->gr_gid;
    return 0;
}

/* A count per token from 1 to PYBOX_MCP_HTTP_PER_TOKEN_MAX. */
static int per_token(const char *opt, const char *v, unsigned *out, pybox_error_t *err)
{
    uint64_t n;
    if (pybox_parse_u64(v, &n) < 0 || n < 1 || n > PYBOX_MCP_HTTP_PER_TOKEN_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: give a whole number from 1 to %d", opt,
                               PYBOX_MCP_HTTP_PER_TOKEN_MAX);
    *out = (unsigned)n;
    return 0;
}

/* An option of the HTTP server (they need --listen; checked once all are taken). */
static int http_option(pybox_mcp_args_t *a, int val, const char *v, pybox_error_t *err)
{
    pybox_mcp_http_config_t *hc = &a->http;
    for (const struct option *o = pybox_mcp_options; a->http_only == NULL && o->name != NULL; o++)
        if (o->val == val)
            a->http_only = o->name;
    switch (val) {
    case OPT_LISTEN_PUBLIC:
        hc->listen_public = true;
        return 0;
    case OPT_TOKEN_FILE:
        a->token_file = v;
        return 0;
    case OPT_SOCKET_GROUP:
        if (group_of(v, &hc->socket_gid, err) < 0)
            return -1;
        hc->socket_group_set = true;
        return 0;
    case OPT_ALLOW_ORIGINS:
        return pybox_mcp_origins_parse(v, &hc->origins, err);
    case OPT_MAX_CONNECTIONS:
        return per_token("--max-connections", v, &hc->max_connections, err);
    case OPT_MAX_SESSIONS:
        return per_token("--" PYBOX_MCP_OPT_HTTP_SESSIONS, v, &hc->max_sessions, err);
    case OPT_MAX_CALLS:
        return per_token("--max-calls", v, &hc->max_calls, err);
    case OPT_SESSIONS_PER_TOKEN: {
        uint64_t n;
        if (pybox_parse_u64(v, &n) < 0 || n < 1 || n > PYBOX_MCP_SESSIONS_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--" PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN
                                   ": give how many Python sessions one token may have live at once, from 1 to %d",
                                   PYBOX_MCP_SESSIONS_MAX);
        a->cfg.sessions_per_tenant = (int)n;
        return 0;
    }
    case OPT_HTTP_SESSION_IDLE:
        if (pybox_parse_age(v, &hc->session_idle_s) < 0 || hc->session_idle_s < PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--http-session-idle: give a time of at least %lld s, in s, m, h or d (e.g. 1h)",
                                   PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S);
        return 0;
    }
    return 0;
}

int pybox_mcp_args_take(void *ctx, int val, const char *v, pybox_error_t *err)
{
    pybox_mcp_args_t *a = ctx;
    pybox_mcp_config_t *cfg = &a->cfg;
    switch (val) {
    case OPT_IMAGES:
        a->images = v;
        return 0;
    case OPT_BACKEND:
        if (!pybox_name_valid(v) || pybox_backend_find(v) == NULL) {
            char known_b[256], shown_b[160];
            pybox_backend_names(known_b, sizeof known_b);
            pybox_escape_short(shown_b, sizeof shown_b, v, 32);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--backend: unknown backend '%s' (known: %s)", shown_b,
                                   known_b);
        }
        pybox_strlcpy(cfg->backend, v, sizeof cfg->backend);
        return 0;
    case OPT_MAX_TIMEOUT:
        return pybox_limit_parse(PYBOX_LIMIT_TIMEOUT, v, &cfg->max_timeout_ms) == 0
                   ? 0
                   : pybox_limit_refuse(PYBOX_LIMIT_TIMEOUT, "--max-timeout", "", err);
    case OPT_MAX_MEMORY:
        return pybox_limit_parse(PYBOX_LIMIT_MEMORY, v, &cfg->max_memory_bytes) == 0
                   ? 0
                   : pybox_limit_refuse(PYBOX_LIMIT_MEMORY, "--max-memory", " (e.g. 512M or 1G)", err);
    case OPT_OUTPUT_ROOT_MAX:
        if (pybox_parse_size(v, &cfg->output_root_max) < 0 || cfg->output_root_max < pybox_mcp_call_output_most())
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--output-root-max: give a size of at least %lld MiB, what one call's files may "
                                   "take (e.g. 1G)",
                                   (long long)((pybox_mcp_call_output_most() + (1 << 20) - 1) >> 20));
        return 0;
    case OPT_OUTPUT_ROOT_AGE:
        if (pybox_parse_age(v, &cfg->output_root_age_s) < 0 || cfg->output_root_age_s < PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--output-root-age: give a time of at least %lld s, in s, m, h or d (e.g. 7d)",
                                   PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S);
        return 0;
    case OPT_WARM: {
        uint64_t n;
        if (pybox_parse_u64(v, &n) < 0 || n > PYBOX_MCP_WARM_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--warm: give how many boxes to keep waiting per image, from 0 (none) to %d",
                                   PYBOX_MCP_WARM_MAX);
        cfg->warm = (int)n;
        return 0;
    }
    case OPT_WARM_WAIT:
        if (pybox_parse_seconds_ms(v, &cfg->warm_wait_ms) < 0 || cfg->warm_wait_ms < PYBOX_MCP_WARM_WAIT_MIN_MS ||
            cfg->warm_wait_ms > PYBOX_MCP_WARM_WAIT_MAX_MS)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--warm-wait: give seconds from %lld to %lld",
                                   PYBOX_MCP_WARM_WAIT_MIN_MS / 1000, PYBOX_MCP_WARM_WAIT_MAX_MS / 1000);
        return 0;
    case OPT_SESSIONS: {
        uint64_t n;
        if (pybox_parse_u64(v, &n) < 0 || n > PYBOX_MCP_SESSIONS_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--" PYBOX_MCP_OPT_PYTHON_SESSIONS
                                   ": give how many Python sessions may be live at once, from 0 (none) to %d",
                                   PYBOX_MCP_SESSIONS_MAX);
        cfg->sessions = (int)n;
        return 0;
    }
    case OPT_SESSION_TTL:
        if (pybox_parse_seconds_ms(v, &cfg->session_ttl_ms) < 0 || cfg->session_ttl_ms < PYBOX_MCP_SESSION_TTL_MIN_MS ||
            cfg->session_ttl_ms > PYBOX_MCP_SESSION_TTL_MAX_MS)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--session-ttl: give seconds from %lld to %lld",
                                   PYBOX_MCP_SESSION_TTL_MIN_MS / 1000, PYBOX_MCP_SESSION_TTL_MAX_MS / 1000);
        return 0;
    case OPT_SESSION_IDLE:
        if (pybox_parse_seconds_ms(v, &cfg->session_idle_ms) < 0 ||
            cfg->session_idle_ms < PYBOX_MCP_SESSION_IDLE_MIN_MS || cfg->session_idle_ms > PYBOX_MCP_SESSION_TTL_MAX_MS)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--session-idle: give seconds from %lld to %lld",
                                   PYBOX_MCP_SESSION_IDLE_MIN_MS / 1000, PYBOX_MCP_SESSION_TTL_MAX_MS / 1000);
        return 0;
    case OPT_FILES_ROOT:
        return mcp_dir("--files-root", v, false, cfg->files_root, err);
    case OPT_OUTPUT_ROOT:
        return mcp_dir("--output-root", v, true, cfg->output_root, err);
    case OPT_LISTEN:
        if (pybox_mcp_listen_parse(v, &a->http.listen, err) < 0)
            return -1;
        a->listen = true;
        return 0;
    case OPT_HELP:
        return 0; /* given before parsing */
    }
    return http_option(a, val, v, err);
}

int pybox_mcp_args_finish(pybox_mcp_args_t *a, const pybox_state_t *st, pybox_error_t *err)
{
    pybox_mcp_config_t *cfg = &a->cfg;
    const pybox_mcp_http_config_t *hc = &a->http;
    if (!a->listen && a->http_only != NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--%s needs --listen (it is an option of the HTTP server)",
                               a->http_only);
    if (a->listen && a->token_file == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--listen needs --token-file FILE (lines of NAME TOKEN, the file 0600): the server "
                               "never listens without tokens");
    if (hc->socket_group_set && hc->listen.family != AF_UNIX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--socket-group is for --listen unix:/path only");
    if (a->listen && !hc->listen.loopback && !hc->listen_public)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--listen: not a loopback address: give --listen-public to serve beyond this machine "
                               "(with a reverse proxy and TLS in front: docs/mcp.md)");
    pybox_config_t ceil;
    if (pybox_state_config(st, &ceil, err) < 0)
        return -1;
    /* The images: each a built, pinned image of this installation, named once. */
    const char *p = a->images;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char name[PYBOX_NAME_MAX];
        if (n == 0 || n >= sizeof name)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: give image names separated by commas");
        memcpy(name, p, n);
        name[n] = '\0';
        if (!pybox_name_valid(name))
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: '%.64s' is not a valid image name", name);
        for (size_t j = 0; j < cfg->n_images; j++)
            if (strcmp(cfg->images[j], name) == 0)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: '%s' is named twice", name);
        if (cfg->n_images == PYBOX_MCP_IMAGES_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: at most %d images", PYBOX_MCP_IMAGES_MAX);
        pybox_pin_t pin;
        int got = pybox_pin_get(st, pybox_backend_choose(&ceil, cfg->backend), name, &pin, err);
        if (got < 0)
            return -1;
        if (got == 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--images: the image '%s' is not built here (pybox image build %s)", name, name);
        snprintf(cfg->images[cfg->n_images++], PYBOX_NAME_MAX, "%s", name);
        p += n;
        if (*p == ',' && *++p == '\0')
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: give image names separated by commas");
    }
    if (cfg->n_images == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: name at least one image");
    /* The server's ceilings stay within the installation's own. */
    char end[96];
    snprintf(end, sizeof end, " (%s)", ceil.source);
    if (pybox_limit_within(PYBOX_LIMIT_TIMEOUT, cfg->max_timeout_ms, ceil.limit[PYBOX_LIMIT_TIMEOUT],
                           "--max-timeout: ", "", end, err) < 0 ||
        pybox_limit_within(PYBOX_LIMIT_MEMORY, cfg->max_memory_bytes, ceil.limit[PYBOX_LIMIT_MEMORY],
                           "--max-memory: ", "", end, err) < 0)
        return -1;
    if (!a->listen)
        return 0;
    if (pybox_mcp_tokens_load(a->token_file, &a->http.tokens, err) < 0)
        return -1;
    /* One token's share of the Python sessions: by default an even share, so that one
     * token cannot hold every place (never more than the server keeps). */
    if (cfg->sessions_per_tenant > cfg->sessions && cfg->sessions > 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--" PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN
                               ": %d is more than --" PYBOX_MCP_OPT_PYTHON_SESSIONS " (%d), the most the server keeps",
                               cfg->sessions_per_tenant, cfg->sessions);
    if (cfg->sessions_per_tenant == 0 && a->http.tokens.n > 0)
        cfg->sessions_per_tenant = (int)((cfg->sessions + (int)a->http.tokens.n - 1) / (int)a->http.tokens.n);
    return 0;
}
