/* SPDX-License-Identifier: MIT */
/* Fuzz target, a property: what pybox mcp --listen judges from text before a request's
 * body is read (pybox/mcp/access.c), by the first byte: 't' a token file's text, 'b' an
 * Authorization header against two known tokens, 'l' a --listen address, 'o' an
 * --allow-origins list then, after "\0--\0", an Origin header, 'a' an Accept header, 'c' a
 * Content-Type header, 's' a session id. What must hold: a token file taken has 1 to
 * PYBOX_MCP_TOKENS_MAX tokens with valid, distinct names, and a refusal is a bounded line
 * of valid UTF-8 that never quotes the text; a bearer header names token i exactly when
 * it is "Bearer " (the scheme in any case) and that token; an address taken is of a family
 * it names, loopback only when it is; origins taken are lower-case http(s) origins and a
 * header is allowed exactly when absent or equal to one of them in any case; a media type
 * or session id taken is one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "../pybox/escape.h"
#include "../pybox/mcp/access.h"
#include "common.h"

#define TOKEN_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOKEN_B "0123456789abcdef0123456789abcdef+/~._-=="

static void tokens(const char *t, size_t n)
{
    pybox_mcp_tokens_t out;
    pybox_error_t err = {0};
    if (pybox_mcp_tokens_parse(t, n, &out, &err) == 0) {
        FUZZ_CHECK(out.n >= 1 && out.n <= PYBOX_MCP_TOKENS_MAX, "%zu tokens", out.n);
        for (size_t i = 0; i < out.n; i++) {
            size_t l = strlen(out.t[i].name);
            FUZZ_CHECK(l >= 1 && l <= PYBOX_MCP_TOKEN_NAME_MAX, "a name of %zu bytes", l);
            FUZZ_CHECK(strspn(out.t[i].name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == l,
                       "name '%s'", out.t[i].name);
            for (size_t k = 0; k < i; k++)
                FUZZ_CHECK(strcmp(out.t[k].name, out.t[i].name) != 0, "name '%s' twice", out.t[i].name);
        }
        return;
    }
    size_t l = strnlen(err.msg, sizeof err.msg);
    FUZZ_CHECK(l > 0 && l < sizeof err.msg, "a refusal of %zu bytes", l);
    FUZZ_CHECK(pybox_utf8_valid(err.msg, l), "a refusal that is not UTF-8: %s", err.msg);
    /* the refusal names a line, never what is on it beyond a name it refuses */
    FUZZ_CHECK(strstr(err.msg, TOKEN_A) == NULL, "a refusal quotes a token");
}

static void bearer(const char *h)
{
    pybox_mcp_tokens_t t;
    pybox_error_t err = {0};
    static const char file[] = "alice " TOKEN_A "\nbob " TOKEN_B "\n";
    FUZZ_CHECK(pybox_mcp_tokens_parse(file, strlen(file), &t, &err) == 0, "%s", err.msg);
    int i = pybox_mcp_bearer(&t, h);
    bool a = strncasecmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, TOKEN_A) == 0;
    bool b = strncasecmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, TOKEN_B) == 0;
    FUZZ_CHECK(i == (a ? 0 : b ? 1 : -1), "'%s' named token %d", h, i);
}

static void listen_at(const char *s)
{
    pybox_mcp_listen_t l;
    pybox_error_t err = {0};
    if (pybox_mcp_listen_parse(s, &l, &err) < 0) {
        FUZZ_CHECK(pybox_utf8_valid(err.msg, strlen(err.msg)), "a refusal that is not UTF-8");
        return;
    }
    if (l.family == AF_UNIX) {
        FUZZ_CHECK(strncmp(s, "unix:/", 6) == 0 && strcmp(l.path, s + 5) == 0 && l.loopback, "unix '%s'", s);
    } else if (l.family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&l.addr;
        FUZZ_CHECK(l.addr_len == sizeof *a && l.loopback == ((ntohl(a->sin_addr.s_addr) >> 24) == 127), "v4 '%s'", s);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&l.addr;
        FUZZ_CHECK(l.family == AF_INET6 && l.addr_len == sizeof *a && s[0] == '[', "v6 '%s'", s);
        FUZZ_CHECK(!l.loopback || IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) || a->sin6_addr.s6_addr[10] == 0xff,
                   "loopback '%s'", s);
    }
}

static void origins(const uint8_t *data, size_t size)
{
    const uint8_t *part[2];
    size_t len[2];
    size_t n = fuzz_split(data, size, "\0--\0", part, len, 2);
    char *list = fuzz_strndup(part[0], len[0]);
    char *header = n > 1 ? fuzz_strndup(part[1], len[1]) : NULL;
    pybox_mcp_origins_t o;
    pybox_error_t err = {0};
    if (pybox_mcp_origins_parse(list, &o, &err) == 0) {
        for (size_t i = 0; i < o.n; i++) {
            FUZZ_CHECK(strncmp(o.o[i], "http://", 7) == 0 || strncmp(o.o[i], "https://", 8) == 0, "'%s'", o.o[i]);
            for (const char *c = o.o[i]; *c; c++)
                FUZZ_CHECK(!(*c >= 'A' && *c <= 'Z'), "'%s' not in lower case", o.o[i]);
        }
        bool listed = false;
        for (size_t i = 0; header != NULL && i < o.n; i++)
            listed |= strcasecmp(header, o.o[i]) == 0;
        FUZZ_CHECK(pybox_mcp_origin_allowed(&o, header) == (header == NULL || listed), "origin '%s'",
                   header ? header : "(none)");
    }
    free(list);
    free(header);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    char *s = fuzz_strndup(data + 1, size - 1);
    switch (data[0]) {
    case 't':
        tokens((const char *)data + 1, size - 1);
        break;
    case 'b':
        bearer(s);
        break;
    case 'l':
        listen_at(s);
        break;
    case 'o':
        origins(data + 1, size - 1);
        break;
    case 'a':
        if (pybox_mcp_accepts(s, "text/event-stream"))
            FUZZ_CHECK(strcasestr(s, "text/event-stream") || strcasestr(s, "text/*") || strstr(s, "*/*"), "'%s'", s);
        break;
    case 'c':
        if (pybox_mcp_is_json(s))
            FUZZ_CHECK(strcasestr(s, "application/json") != NULL, "'%s'", s);
        break;
    case 's':
        FUZZ_CHECK(pybox_mcp_session_id_valid(s) == (strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32), "'%s'",
                   s);
        break;
    default:
        break;
    }
    free(s);
    return 0;
}
