/* SPDX-License-Identifier: MIT */
/* Who may reach the HTTP server, judged from text (see access.h). */
#include "access.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../escape.h"
#include "../util.h"

static bool name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

/* RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static bool token_valid(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (name_char((unsigned char)p[i]) || p[i] == '~' || p[i] == '+' || p[i] == '/'))
        i++;
    if (i == 0)
        return false;
    while (i < n && p[i] == '=')
        i++;
    return i == n;
}

int pybox_mcp_tokens_parse(const char *text, size_t len, pybox_mcp_tokens_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    size_t line = 0;
    for (size_t off = 0; off < len;) {
        const char *p = text + off;
        const char *nl = memchr(p, '\n', len - off);
        size_t n = nl ? (size_t)(nl - p) : len - off;
        off += n + (nl != NULL);
        line++;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        size_t i = 0;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        if (i == n || p[i] == '#')
            continue;
        size_t name_at = i;
        while (i < n && name_char((unsigned char)p[i]))
            i++;
        size_t name_len = i - name_at;
        size_t sep = i;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        size_t tok_at = i;
        while (i < n && p[i] != ' ' && p[i] != '\t')
            i++;
        size_t tok_len = i - tok_at;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        if (name_len == 0 || name_len > PYBOX_MCP_TOKEN_NAME_MAX || sep == tok_at || tok_len == 0 || i != n)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "line %zu: give NAME TOKEN (a name of 1 to %d letters, digits, '.', '_' or '-', "
                                   "then the token)",
                                   line, PYBOX_MCP_TOKEN_NAME_MAX);
        if (tok_len < PYBOX_MCP_TOKEN_MIN || tok_len > PYBOX_MCP_TOKEN_MAX || !token_valid(p + tok_at, tok_len))
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "line %zu: the token must be %d to %d characters of A-Z a-z 0-9 - . _ ~ + / "
                                   "(then '=' only at its end), e.g. 32 random bytes in hex",
                                   line, PYBOX_MCP_TOKEN_MIN, PYBOX_MCP_TOKEN_MAX);
        if (out->n == PYBOX_MCP_TOKENS_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "line %zu: at most %d tokens", line, PYBOX_MCP_TOKENS_MAX);
        pybox_mcp_token_t *t = &out->t[out->n];
        memcpy(t->name, p + name_at, name_len);
        t->name[name_len] = '\0';
        if (!pybox_sha256(p + tok_at, tok_len, t->digest))
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "line %zu: the token could not be hashed", line);
        for (size_t k = 0; k < out->n; k++) {
            if (strcmp(out->t[k].name, t->name) == 0)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "line %zu: the name '%s' is given twice", line,
                                       t->name);
            if (memcmp(out->t[k].digest, t->digest, sizeof t->digest) == 0)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "line %zu: the token of '%s' is also '%s''s (each name needs its own)", line,
                                       t->name, out->t[k].name);
        }
        out->n++;
    }
    if (out->n == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "no token in it (lines of NAME TOKEN)");
    return 0;
}

int pybox_mcp_tokens_load(const char *path, pybox_mcp_tokens_t *out, pybox_error_t *err)
{
    char shown[160];
    pybox_escape_short(shown, sizeof shown, path, 128);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "--token-file: cannot open '%s'", shown);
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int en = errno;
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, en, "--token-file: fstat '%s'", shown);
    }
    const char *why = NULL;
    if (!S_ISREG(sb.st_mode))
        why = "is not a regular file";
    else if (sb.st_uid != geteuid())
        why = "belongs to another user than the server's (it must be the server's own)";
    else if ((sb.st_mode & 077) != 0)
        why = "can be read or written by others than its owner (chmod 600 it)";
    if (why != NULL) {
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--token-file: '%s' %s", shown, why);
    }
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    int rc = pybox_read_bounded(fd, PYBOX_MCP_TOKEN_FILE_MAX, &text, &len, &over, err);
    close(fd);
    if (rc < 0)
        return -1;
    if (over) {
        free(text);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--token-file: '%s' is larger than %d bytes", shown,
                               PYBOX_MCP_TOKEN_FILE_MAX);
    }
    pybox_error_t perr = {0};
    rc = pybox_mcp_tokens_parse(text, len, out, &perr);
    OPENSSL_cleanse(text, len);
    free(text);
    if (rc < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--token-file: '%s': %s", shown, perr.msg);
    return 0;
}

int pybox_mcp_bearer(const pybox_mcp_tokens_t *t, const char *authorization)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return -1;
    const char *tok = authorization + 7;
    size_t n = strnlen(tok, PYBOX_MCP_TOKEN_MAX + 1);
    if (n > PYBOX_MCP_TOKEN_MAX || !token_valid(tok, n))
        return -1;
    unsigned char d[32];
    if (!pybox_sha256(tok, n, d))
        return -1;
    /* Digests of equal length, every one compared: how long the answer takes says nothing
     * of which token, or how much of one, was right. */
    int found = -1;
    for (size_t i = 0; i < t->n; i++) {
        int same = CRYPTO_memcmp(d, t->t[i].digest, sizeof d) == 0;
        found = same ? (int)i : found;
    }
    return found;
}

/* ---- addresses ---- */

static bool port_of(const char *s, unsigned *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || strspn(s, "0123456789") != n || (n > 1 && s[0] == '0'))
        return false;
    unsigned long v = strtoul(s, NULL, 10);
    if (v > 65535)
        return false;
    *port = (unsigned)v;
    return true;
}

int pybox_mcp_listen_parse(const char *text, pybox_mcp_listen_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    char shown[160];
    pybox_escape_short(shown, sizeof shown, text, 128);
    static const char usage[] =
        "--listen: '%s' is not an address to listen on (give 127.0.0.1:PORT, [::1]:PORT, PORT, another IP address "
        "with a port, or unix:/absolute/path)";
    if (strncmp(text, "unix:", 5) == 0) {
        const char *path = text + 5;
        struct sockaddr_un *un = (struct sockaddr_un *)&out->addr;
        if (path[0] != '/' || strlen(path) >= sizeof un->sun_path)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--listen: '%s': a unix socket needs an absolute path of at most %zu bytes", shown,
                                   sizeof un->sun_path - 1);
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, path, strlen(path) + 1);
        pybox_strlcpy(out->path, path, sizeof out->path);
        out->family = AF_UNIX;
        out->addr_len = sizeof *un;
        out->loopback = true;
        return 0;
    }
    char host[64];
    const char *port_text;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - text - 1) >= sizeof host)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, usage, shown);
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        port_text = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon == NULL) {
            pybox_strlcpy(host, "127.0.0.1", sizeof host);
            port_text = text;
        } else {
            if (strchr(text, ':') != colon || (size_t)(colon - text) >= sizeof host)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, usage, shown); /* an IPv6 address needs brackets */
            memcpy(host, text, (size_t)(colon - text));
            host[colon - text] = '\0';
            if (host[0] == '\0')
                pybox_strlcpy(host, "127.0.0.1", sizeof host);
            port_text = colon + 1;
        }
    }
    unsigned port;
    if (!port_of(port_text, &port))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--listen: '%s': the port must be a number from 0 to 65535",
                               shown);
    struct sockaddr_in *in4 = (struct sockaddr_in *)&out->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->addr;
    if (text[0] != '[' && inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        out->family = AF_INET;
        out->addr_len = sizeof *in4;
        out->loopback = (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (text[0] == '[' && inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        out->family = AF_INET6;
        out->addr_len = sizeof *in6;
        const unsigned char *a = in6->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        out->loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || (memcmp(a, mapped, 12) == 0 && a[12] == 127);
        return 0;
    }
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, usage, shown);
}

/* ---- origins ---- */

/* "scheme://host[:port]": http or https, a host of letters, digits, '.', '-', or an IPv6
 * literal in brackets, an optional port; nothing after. Lower-cased into out. */
static bool origin_form(const char *s, size_t n, char *out)
{
    if (n == 0 || n >= PYBOX_MCP_ORIGIN_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    out[n] = '\0';
    const char *h;
    if (strncmp(out, "http://", 7) == 0)
        h = out + 7;
    else if (strncmp(out, "https://", 8) == 0)
        h = out + 8;
    else
        return false;
    if (*h == '[') {
        const char *close = strchr(h, ']');
        if (close == NULL || close == h + 1 || strspn(h + 1, "0123456789abcdef:.") != (size_t)(close - h - 1))
            return false;
        h = close + 1;
    } else {
        size_t hl = strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789.-");
        if (hl == 0)
            return false;
        h += hl;
    }
    if (*h == ':') {
        unsigned port;
        return port_of(h + 1, &port) && port > 0;
    }
    return *h == '\0';
}

int pybox_mcp_origins_parse(const char *list, pybox_mcp_origins_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, ",");
        char shown[96];
        char one[PYBOX_MCP_ORIGIN_MAX];
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one - 1 ? n : sizeof one - 1), p);
        pybox_escape_short(shown, sizeof shown, one, 64);
        if (out->n == PYBOX_MCP_ORIGINS_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--allow-origins: at most %d origins",
                                   PYBOX_MCP_ORIGINS_MAX);
        if (!origin_form(p, n, out->o[out->n]))
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--allow-origins: '%s' is not an origin (give scheme://host[:port], http or "
                                   "https, without a path), separated by commas",
                                   shown);
        out->n++;
        p += n;
        if (*p == ',' && *++p == '\0')
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--allow-origins: give origins separated by commas");
    }
    return 0;
}

bool pybox_mcp_origin_allowed(const pybox_mcp_origins_t *o, const char *origin)
{
    if (origin == NULL)
        return true;
    for (size_t i = 0; i < o->n; i++)
        if (strcasecmp(origin, o->o[i]) == 0)
            return true;
    return false;
}

/* ---- media types ---- */

static const char *trim(const char *p, const char *end, const char **last)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *last = end;
    return p;
}

/* Whether the parameters [p, end) of a range hold q=0 (0, 0., 0.0, 0.00, 0.000). */
static bool q_zero(const char *p, const char *end)
{
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *stop = semi ? semi : end;
        const char *e;
        const char *s = trim(p, stop, &e);
        if (e - s >= 2 && (s[0] == 'q' || s[0] == 'Q') && s[1] == '=') {
            s += 2;
            if (s < e && *s == '0') {
                s++;
                if (s < e && *s == '.')
                    s++;
                while (s < e && *s == '0')
                    s++;
                if (s == e)
                    return true;
            }
        }
        p = semi ? semi + 1 : end;
    }
    return false;
}

bool pybox_mcp_accepts(const char *accept, const char *type)
{
    if (accept == NULL)
        return false;
    const char *slash = strchr(type, '/');
    size_t major = slash ? (size_t)(slash - type) : strlen(type);
    for (const char *p = accept; *p != '\0';) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *e;
        const char *s = trim(p, semi ? semi : end, &e);
        size_t n = (size_t)(e - s);
        bool match = (n == strlen(type) && strncasecmp(s, type, n) == 0) || (n == 3 && memcmp(s, "*/*", 3) == 0) ||
                     (n == major + 2 && strncasecmp(s, type, major) == 0 && s[major] == '/' && s[major + 1] == '*');
        if (match && !(semi != NULL && q_zero(semi + 1, end)))
            return true;
        p = comma ? comma + 1 : end;
    }
    return false;
}

bool pybox_mcp_is_json(const char *content_type)
{
    if (content_type == NULL)
        return false;
    const char *end = content_type + strcspn(content_type, ";");
    const char *e;
    const char *s = trim(content_type, end, &e);
    return e - s == 16 && strncasecmp(s, "application/json", 16) == 0;
}

bool pybox_mcp_session_id_valid(const char *id)
{
    return id != NULL && strlen(id) == PYBOX_MCP_SESSION_ID_LEN &&
           strspn(id, "0123456789abcdef") == PYBOX_MCP_SESSION_ID_LEN;
}
