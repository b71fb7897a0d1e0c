/* SPDX-License-Identifier: MIT */
/* Who may reach `pybox mcp --listen`, and how a request's head is judged before its body
 * is read: the address to listen on, the bearer tokens (the token file), the origins a
 * browser may come from, and the media types a request names. Pure functions of text, no
 * HTTP library: the HTTP transport (http.c) asks them, unit tests and a fuzz target
 * drive them. Contract: docs/mcp.md, "Over HTTP". */
#ifndef PYBOX_MCP_ACCESS_H
#define PYBOX_MCP_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../error.h"

/* The token file: lines of NAME TOKEN. */
#define PYBOX_MCP_TOKENS_MAX 64
#define PYBOX_MCP_TOKEN_NAME_MAX 64 /* [A-Za-z0-9._-], unique */
#define PYBOX_MCP_TOKEN_MIN 32      /* characters of a token at least (e.g. 32 hex digits: 128 bits) */
#define PYBOX_MCP_TOKEN_MAX 512     /* and at most */
#define PYBOX_MCP_TOKEN_FILE_MAX 65536

typedef struct pybox_mcp_token {
    char name[PYBOX_MCP_TOKEN_NAME_MAX + 1];
    unsigned char digest[32]; /* SHA-256 of the token: the token itself is not kept */
} pybox_mcp_token_t;

typedef struct pybox_mcp_tokens {
    pybox_mcp_token_t t[PYBOX_MCP_TOKENS_MAX];
    size_t n;
} pybox_mcp_tokens_t;

/* The file's text: each line NAME, one or more spaces or tabs, TOKEN (RFC 6750's b64token
 * characters: A-Z a-z 0-9 - . _ ~ + / then '=' only at the end), from
 * PYBOX_MCP_TOKEN_MIN to PYBOX_MCP_TOKEN_MAX characters; blank lines and lines starting
 * with '#' are skipped. A name or a token given twice, or no token at all, is refused,
 * naming the line (never quoting a token). */
int pybox_mcp_tokens_parse(const char *text, size_t len, pybox_mcp_tokens_t *out, pybox_error_t *err);
/* The file at path: a regular file (not followed through a link) owned by the server's own
 * user and readable by it alone (no group or other bits: 0600 or 0400), at most
 * PYBOX_MCP_TOKEN_FILE_MAX bytes; then parsed. */
int pybox_mcp_tokens_load(const char *path, pybox_mcp_tokens_t *out, pybox_error_t *err);
/* The token an Authorization header's value names ("Bearer TOKEN", the scheme in any case,
 * one space): its index, or -1 (no header, another scheme, a malformed or unknown
 * token). Every token is compared, in constant time, whatever matches first. */
int pybox_mcp_bearer(const pybox_mcp_tokens_t *t, const char *authorization);

/* Where to listen: "127.0.0.1:PORT", "[::1]:PORT", another IP address literal with a port
 * (not loopback: see loopback), "PORT" or ":PORT" (127.0.0.1), or "unix:/absolute/path".
 * PORT from 0 (the kernel picks one; the server says which) to 65535. No host names: no
 * lookup decides where the server listens. */
typedef struct pybox_mcp_listen {
    int family; /* AF_INET, AF_INET6, AF_UNIX */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    bool loopback; /* 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104; a unix socket counts as local too */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} pybox_mcp_listen_t;
int pybox_mcp_listen_parse(const char *text, pybox_mcp_listen_t *out, pybox_error_t *err);

/* The origins a browser page may call from (--allow-origins): "scheme://host[:port]" with
 * scheme http or https, no path, each kept in lower case. */
#define PYBOX_MCP_ORIGINS_MAX 16
#define PYBOX_MCP_ORIGIN_MAX 256
typedef struct pybox_mcp_origins {
    char o[PYBOX_MCP_ORIGINS_MAX][PYBOX_MCP_ORIGIN_MAX];
    size_t n;
} pybox_mcp_origins_t;
/* A comma-separated list (the option's value). */
int pybox_mcp_origins_parse(const char *list, pybox_mcp_origins_t *out, pybox_error_t *err);
/* An Origin header's value against the list (compared without regard to ASCII case);
 * NULL (no header: not a browser's request) is allowed, "null" and anything unlisted
 * are not. */
bool pybox_mcp_origin_allowed(const pybox_mcp_origins_t *o, const char *origin);

/* An Accept header's value takes the media type: a range names it exactly, or with '*'
 * for its subtype or for both parts, and has no q=0. NULL: no. */
bool pybox_mcp_accepts(const char *accept, const char *type);
/* A Content-Type header's value is application/json (parameters such as charset after
 * ';' allowed). */
bool pybox_mcp_is_json(const char *content_type);

/* A session id as the server mints them: 32 lower-case hex digits (128 random bits). */
#define PYBOX_MCP_SESSION_ID_LEN 32
bool pybox_mcp_session_id_valid(const char *id);

#endif
