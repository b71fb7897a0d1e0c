/* SPDX-License-Identifier: MIT */
/* The Docker Engine API client (see engine.h). */
#include "engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../bounds.h"
#include "../dl.h"
#include "../escape.h"
#include "../util.h"

struct pybox_engine {
    CURL *curl;      /* kept for its connection: requests reuse one keep-alive socket */
    long contact_ms; /* the bound of the first contact (connect and GET /_ping) */
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char version[64];
    char base[64];
};

struct pybox_engine_stream {
    CURL *curl; /* owns the socket */
    int fd;
    char *pending; /* bytes after the 101 headers, returned first */
    size_t pending_len, pending_off;
};

/* libcurl is opened the first time an engine is, not when PyBox starts: with the
 * libraries it brings (TLS, Kerberos, LDAP, SSH, IDN, HTTP/2 and more, none of which a
 * Unix socket needs) it costs every process milliseconds in the dynamic loader
 * (docs/bench.md), and a native box's run or a refusal never uses it. Each function is taken with its own declared
 * type. */
#define PYBOX_CURL_SONAME "libcurl.so.4"
/* called through the table below, by their own names: curl's type-checking macros of
 * these two names (which check calls of the linked functions) would stand in the way */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define CURL_FUNCS(X)                                                                                                  \
    X(curl_global_init)                                                                                                \
    X(curl_easy_init)                                                                                                  \
    X(curl_easy_reset)                                                                                                 \
    X(curl_easy_setopt)                                                                                                \
    X(curl_easy_perform)                                                                                               \
    X(curl_easy_getinfo)                                                                                               \
    X(curl_easy_strerror)                                                                                              \
    X(curl_easy_escape)                                                                                                \
    X(curl_easy_cleanup)                                                                                               \
    X(curl_free)                                                                                                       \
    X(curl_slist_append)                                                                                               \
    X(curl_slist_free_all)
static struct {
    CURL_FUNCS(PYBOX_DL_FIELD)
} cu;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static char curl_failure[256]; /* empty when libcurl is ready */

static void curl_init(void)
{
    static const char *const names[] = {CURL_FUNCS(PYBOX_DL_NAME)};
    if (!pybox_dl_open(PYBOX_CURL_SONAME, names, sizeof names / sizeof *names, &cu, sizeof cu, curl_failure,
                       sizeof curl_failure))
        return;
    if (cu.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        snprintf(curl_failure, sizeof curl_failure, "curl_global_init failed");
}

/* Once per process, whichever thread comes first (the MCP server opens engines from
 * several threads). */
static int curl_ready(pybox_error_t *err)
{
    pthread_once(&curl_once, curl_init);
    if (curl_failure[0] != '\0')
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "the docker backend needs libcurl (%s, Debian's libcurl4): %s",
                               PYBOX_CURL_SONAME, curl_failure);
    return 0;
}

static int socket_from_host(const char *docker_host, char *out, size_t outlen, pybox_error_t *err)
{
    const char *h = docker_host;
    if (h == NULL || *h == '\0')
        h = getenv("DOCKER_HOST");
    if (h == NULL || *h == '\0')
        h = "unix:///var/run/docker.sock";
    if (strncmp(h, "unix://", 7) != 0) {
        pybox_buf_t esc;
        pybox_buf_init(&esc, 512);
        pybox_escape_terminal(&esc, h, strlen(h) > 200 ? 200 : strlen(h), false);
        pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                        "DOCKER_HOST=%s: only a local engine socket (unix:///path) is supported",
                        esc.data ? esc.data : "");
        pybox_buf_free(&esc);
        return -1;
    }
    const char *path = h + 7;
    if (*path != '/' || pybox_strlcpy(out, path, outlen) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "DOCKER_HOST: the socket path must be absolute and short");
    return 0;
}

/* How long the first contact may take. A socket that accepts and never answers (a hung
 * engine, something else listening there) is named within seconds, not held for the
 * minute a long request gets; only this contact gets the short bound. */
static int contact_timeout(long *out_ms, pybox_error_t *err)
{
    const char *v = getenv(PYBOX_ENGINE_CONTACT_ENV);
    *out_ms = PYBOX_ENGINE_CONTACT_TIMEOUT_MS;
    if (v == NULL || *v == '\0')
        return 0;
    int64_t ms = 0;
    if (pybox_parse_seconds_ms(v, &ms) < 0 || ms < PYBOX_ENGINE_CONTACT_MIN_MS || ms > PYBOX_ENGINE_CONTACT_MAX_MS) {
        char shown[96];
        pybox_escape_short(shown, sizeof shown, v, 32);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s=%s: give seconds from %.1f to %lld",
                               PYBOX_ENGINE_CONTACT_ENV, shown, PYBOX_ENGINE_CONTACT_MIN_MS / 1000.0,
                               (long long)(PYBOX_ENGINE_CONTACT_MAX_MS / 1000));
    }
    *out_ms = (long)ms;
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    pybox_buf_t *b = userdata;
    size_t n = size * nmemb;
    if (pybox_buf_append(b, ptr, n) < 0)
        return 0; /* over PYBOX_ENGINE_REPLY_MAX: curl aborts the transfer */
    return n;
}

typedef struct {
    int fd;
} upload_src_t;

static size_t on_upload(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    upload_src_t *src = userdata;
    for (;;) {
        ssize_t r = read(src->fd, ptr, size * nmemb);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return CURL_READFUNC_ABORT;
        return (size_t)r;
    }
}

static int transfer(pybox_engine_t *e, const char *method, const char *url, const char *body, size_t body_len,
                    int upload_fd, const char *content_type, long timeout_ms, long *status, pybox_buf_t *reply,
                    pybox_error_t *err)
{
    CURL *c = e->curl;
    cu.curl_easy_reset(c);
    cu.curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->socket_path);
    cu.curl_easy_setopt(c, CURLOPT_URL, url);
    cu.curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu.curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)PYBOX_ENGINE_CONNECT_TIMEOUT_MS);
    cu.curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    cu.curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    cu.curl_easy_setopt(c, CURLOPT_WRITEDATA, reply);
    cu.curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    struct curl_slist *hdrs = NULL;
    upload_src_t src = {.fd = upload_fd};
    if (upload_fd >= 0) {
        cu.curl_easy_setopt(c, CURLOPT_POST, 1L);
        cu.curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
        cu.curl_easy_setopt(c, CURLOPT_READDATA, &src);
        hdrs = cu.curl_slist_append(hdrs, "Transfer-Encoding: chunked");
        hdrs = cu.curl_slist_append(hdrs, "Expect:");
    } else if (strcmp(method, "POST") == 0 || body != NULL) {
        cu.curl_easy_setopt(c, CURLOPT_POST, 1L);
        cu.curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        cu.curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
        if (strcmp(method, "POST") != 0)
            cu.curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body_len > 1024)
            hdrs = cu.curl_slist_append(hdrs, "Expect:");
    } else if (strcmp(method, "GET") != 0) {
        cu.curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    if (content_type != NULL) {
        char h[128];
        snprintf(h, sizeof h, "Content-Type: %s", content_type);
        hdrs = cu.curl_slist_append(hdrs, h);
    }
    if (hdrs != NULL)
        cu.curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = cu.curl_easy_perform(c);
    cu.curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        int kind_errno = 0;
        if (rc == CURLE_COULDNT_CONNECT)
            kind_errno = ECONNREFUSED;
        if (rc == CURLE_OPERATION_TIMEDOUT)
            kind_errno = ETIMEDOUT;
        if (rc == CURLE_WRITE_ERROR)
            return pybox_error_set(err, PYBOX_ERR_PROTOCOL, EFBIG, "%s %s: the engine's reply is larger than %zu bytes",
                                   method, url, reply->max);
        return pybox_error_set(err, PYBOX_ERR_ENGINE, kind_errno, "%s %s via %s: %s", method, url, e->socket_path,
                               cu.curl_easy_strerror(rc));
    }
    cu.curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

static int make_url(pybox_engine_t *e, const char *path, char *url, size_t len, pybox_error_t *err)
{
    int n = snprintf(url, len, "%s%s", e->base, path);
    if (n < 0 || (size_t)n >= len)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "engine path too long");
    return 0;
}

static int call_raw(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, long timeout_ms,
                    long *status, pybox_buf_t *reply, pybox_error_t *err)
{
    char url[2048];
    if (make_url(e, path, url, sizeof url, err) < 0)
        return -1;
    _cleanup_free_ char *text = NULL;
    if (body != NULL) {
        text = cJSON_PrintUnformatted(body);
        if (text == NULL)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "encoding a request to the engine");
    }
    return transfer(e, method, url, text, text ? strlen(text) : 0, -1, text ? "application/json" : NULL, timeout_ms,
                    status, reply, err);
}

int pybox_engine_call_raw(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, long *status,
                          pybox_buf_t *reply, pybox_error_t *err)
{
    return call_raw(e, method, path, body, PYBOX_ENGINE_TIMEOUT_MS, status, reply, err);
}

int pybox_engine_reply_parse(const char *method, const char *path, long status, const char *body, size_t len,
                             cJSON **reply, pybox_error_t *err)
{
    *reply = NULL;
    if (len == 0)
        return 0;
    *reply = cJSON_ParseWithLength(body, len);
    if (*reply == NULL && status < 400)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "%s %s: the engine's reply (HTTP %ld) is not JSON", method,
                               path, status);
    if (*reply == NULL) {
        /* An error reply that is not JSON: carry its text as the message. */
        pybox_buf_t s;
        pybox_buf_init(&s, 0);
        pybox_utf8_sanitize(&s, body, len > 512 ? 512 : len, NULL);
        *reply = cJSON_CreateObject();
        cJSON_AddStringToObject(*reply, "message", s.data ? s.data : "");
        pybox_buf_free(&s);
        if (*reply == NULL)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "%s %s: the engine's error reply", method, path);
    }
    return 0;
}

int pybox_engine_call_timeout(pybox_engine_t *e, const char *method, const char *path, const cJSON *body,
                              long timeout_ms, long *status, cJSON **reply, pybox_error_t *err)
{
    pybox_buf_t b;
    pybox_buf_init(&b, PYBOX_ENGINE_REPLY_MAX);
    *reply = NULL;
    if (call_raw(e, method, path, body, timeout_ms, status, &b, err) < 0) {
        pybox_buf_free(&b);
        return -1;
    }
    int rc = pybox_engine_reply_parse(method, path, *status, b.data, b.len, reply, err);
    pybox_buf_free(&b);
    return rc;
}

int pybox_engine_call(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, long *status,
                      cJSON **reply, pybox_error_t *err)
{
    return pybox_engine_call_timeout(e, method, path, body, PYBOX_ENGINE_TIMEOUT_MS, status, reply, err);
}

int pybox_engine_put(pybox_engine_t *e, const char *path, const void *data, size_t len, const char *content_type,
                     long *status, cJSON **reply, pybox_error_t *err)
{
    char url[2048];
    if (make_url(e, path, url, sizeof url, err) < 0)
        return -1;
    pybox_buf_t b;
    pybox_buf_init(&b, PYBOX_ENGINE_REPLY_MAX);
    *reply = NULL;
    int rc = transfer(e, "PUT", url, data, len, -1, content_type, PYBOX_ENGINE_TIMEOUT_MS, status, &b, err);
    if (rc == 0 && b.len > 0)
        *reply = cJSON_ParseWithLength(b.data, b.len);
    pybox_buf_free(&b);
    return rc;
}

int pybox_engine_upload(pybox_engine_t *e, const char *path, int fd, const char *content_type, long *status,
                        pybox_buf_t *reply, pybox_error_t *err)
{
    char url[2048];
    if (make_url(e, path, url, sizeof url, err) < 0)
        return -1;
    /* Imports of large images take a while; bound them generously, not forever. */
    return transfer(e, "POST", url, NULL, 0, fd, content_type, 30L * 60 * 1000, status, reply, err);
}

int pybox_engine_fail(pybox_error_t *err, const char *what, long status, const cJSON *reply)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");
    const char *msg = cJSON_IsString(m) ? m->valuestring : "(no message)";
    return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "%s: the engine answered HTTP %ld: %s", what, status, msg);
}

int pybox_engine_call_ok(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, const long *ok,
                         const char *what, long *status, cJSON **reply, pybox_error_t *err)
{
    cJSON *r = NULL;
    if (reply != NULL)
        *reply = NULL;
    if (pybox_engine_call(e, method, path, body, status, &r, err) < 0)
        return -1;
    size_t i = 0;
    while (ok[i] != 0 && ok[i] != *status)
        i++;
    if (ok[i] == 0) {
        pybox_engine_fail(err, what, *status, r);
        cJSON_Delete(r);
        return -1;
    }
    if (reply != NULL)
        *reply = r;
    else
        cJSON_Delete(r);
    return 0;
}

int pybox_engine_get_200(pybox_engine_t *e, const char *path, const char *what, cJSON **reply, pybox_error_t *err)
{
    static const long ok[] = {200, 0};
    long status;
    return pybox_engine_call_ok(e, "GET", path, NULL, ok, what, &status, reply, err);
}

char *pybox_engine_escape(pybox_engine_t *e, const char *s)
{
    char *c = cu.curl_easy_escape(e->curl, s, 0);
    if (c == NULL)
        return NULL;
    char *r = strdup(c);
    cu.curl_free(c);
    return r;
}

static int parse_api(const char *v, int *major, int *minor)
{
    char *end;
    long a = strtol(v, &end, 10);
    if (end == v || *end != '.')
        return -1;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (end == p || *end != '\0' || a < 0 || b < 0 || a > 100 || b > 1000)
        return -1;
    *major = (int)a;
    *minor = (int)b;
    return 0;
}

static int api_cmp(const char *a, const char *b)
{
    int a1, a2, b1, b2;
    if (parse_api(a, &a1, &a2) < 0 || parse_api(b, &b1, &b2) < 0)
        return -2;
    if (a1 != b1)
        return a1 < b1 ? -1 : 1;
    return a2 < b2 ? -1 : (a2 > b2 ? 1 : 0);
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    pybox_buf_t *b = userdata;
    size_t n = size * nmemb;
    if (pybox_buf_append(b, ptr, n) < 0)
        return 0;
    return n;
}

static int ping(pybox_engine_t *e, long *status, pybox_buf_t *body, pybox_buf_t *head, pybox_error_t *err)
{
    CURL *c = e->curl;
    cu.curl_easy_reset(c);
    cu.curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->socket_path);
    cu.curl_easy_setopt(c, CURLOPT_URL, "http://localhost/_ping");
    cu.curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu.curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->contact_ms);
    cu.curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, e->contact_ms); /* the whole exchange, answer included */
    cu.curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    cu.curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    cu.curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    cu.curl_easy_setopt(c, CURLOPT_HEADERDATA, head);
    cu.curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    CURLcode rc = cu.curl_easy_perform(c);
    if (rc == CURLE_WRITE_ERROR)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "GET /_ping: the engine's answer is too large");
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, ETIMEDOUT,
                               "the engine at %s does not answer: nothing came back within %.1f s of GET /_ping (%s "
                               "sets how many seconds to wait)",
                               e->socket_path, e->contact_ms / 1000.0, PYBOX_ENGINE_CONTACT_ENV);
    if (rc != CURLE_OK)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, rc == CURLE_COULDNT_CONNECT ? ECONNREFUSED : 0,
                               "GET /_ping via %s: %s", e->socket_path, cu.curl_easy_strerror(rc));
    cu.curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

/* The value of a response header (case-insensitive name), printable ASCII only. */
static void header_value(const char *head, const char *name, char *out, size_t len)
{
    out[0] = '\0';
    size_t nlen = strlen(name);
    for (const char *p = head; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncasecmp(p, name, nlen) != 0 || p[nlen] != ':')
            continue;
        const char *v = p + nlen + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t k = 0;
        while (v[k] >= 0x20 && v[k] < 0x7f && k + 1 < len) {
            out[k] = v[k];
            k++;
        }
        while (k > 0 && out[k - 1] == ' ')
            k--;
        out[k] = '\0';
        return;
    }
}

int pybox_engine_negotiate(const char *socket_path, long status, const char *head, const char *body, size_t body_len,
                           char *version, size_t vlen, pybox_error_t *err)
{
    char api[32] = "", server[64] = "";
    header_value(head, "Api-Version", api, sizeof api);
    header_value(head, "Server", server, sizeof server);
    if (status != 200) {
        cJSON *j = cJSON_ParseWithLength(body ? body : "", body_len);
        if (j == NULL && body_len > 0) {
            pybox_buf_t m;
            pybox_buf_init(&m, 0);
            pybox_utf8_sanitize(&m, body, body_len > 256 ? 256 : body_len, NULL);
            j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "message", m.data ? m.data : "");
            pybox_buf_free(&m);
        }
        int rc = pybox_engine_fail(err, "GET /_ping", status, j);
        cJSON_Delete(j);
        return rc;
    }
    if (api[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "GET /_ping at %s: no Api-Version header in the answer",
                               socket_path);
    if (api_cmp(api, PYBOX_ENGINE_API) < 0)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "the engine at %s speaks API %s; PyBox needs API %s",
                               socket_path, api, PYBOX_ENGINE_API);
    /* The server's name is cut to fit, never the API it speaks (the receipt names it). */
    const char *name = server[0] ? server : "engine";
    int room = (int)vlen - (int)strlen(api) - (int)sizeof " (API )";
    snprintf(version, vlen, "%.*s (API %s)", room > 0 ? room : 0, name, api);
    return 0;
}

int pybox_engine_open(const char *docker_host, pybox_engine_t **out, pybox_error_t *err)
{
    if (curl_ready(err) < 0)
        return -1;
    long contact_ms = 0;
    if (contact_timeout(&contact_ms, err) < 0)
        return -1;
    pybox_engine_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    e->contact_ms = contact_ms;
    if (socket_from_host(docker_host, e->socket_path, sizeof e->socket_path, err) < 0) {
        free(e);
        return -1;
    }
    /* Say plainly what is wrong with the socket before talking over it. */
    struct stat sb;
    if (stat(e->socket_path, &sb) < 0 || !S_ISSOCK(sb.st_mode)) {
        int en = errno;
        bool missing = stat(e->socket_path, &sb) < 0;
        pybox_error_set(err, PYBOX_ERR_ENGINE, missing ? en : 0,
                        missing ? "no container engine: its socket %s is not there (start one with "
                                  "scripts/engine-start.sh, or point DOCKER_HOST at one)"
                                : "no container engine: %s is not a socket",
                        e->socket_path);
        free(e);
        return -1;
    }
    if (faccessat(AT_FDCWD, e->socket_path, R_OK | W_OK, AT_EACCESS) < 0) {
        pybox_error_set(err, PYBOX_ERR_ENGINE, errno,
                        "the engine's socket %s is not open to this user (run as root, or as a member of the "
                        "socket's group)",
                        e->socket_path);
        free(e);
        return -1;
    }
    e->curl = cu.curl_easy_init();
    if (e->curl == NULL) {
        free(e);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "curl_easy_init failed");
    }
    snprintf(e->base, sizeof e->base, "http://localhost");
    /* Negotiate with /_ping, as the engine's own client does: it answers at once with
     * the API version in a header (GET /version asks every component and is slow). */
    pybox_buf_t body, head;
    pybox_buf_init(&body, 4096);
    pybox_buf_init(&head, PYBOX_DOCKER_ENGINE_HEADER_MAX);
    long status = 0;
    int rc = ping(e, &status, &body, &head, err);
    if (rc < 0) {
        if (err != NULL && err->kind == PYBOX_ERR_ENGINE && err->errnum != ETIMEDOUT)
            pybox_error_prefix(err, "no container engine answers at %s (start it: scripts/engine-start.sh)",
                               e->socket_path);
    } else {
        rc = pybox_engine_negotiate(e->socket_path, status, head.data ? head.data : "", body.data, body.len, e->version,
                                    sizeof e->version, err);
    }
    pybox_buf_free(&body);
    pybox_buf_free(&head);
    if (rc < 0) {
        pybox_engine_free(e);
        return -1;
    }
    snprintf(e->base, sizeof e->base, "http://localhost/v%s", PYBOX_ENGINE_API);
    *out = e;
    return 0;
}

void pybox_engine_free(pybox_engine_t *e)
{
    if (e == NULL)
        return;
    if (e->curl)
        cu.curl_easy_cleanup(e->curl);
    free(e);
}

void pybox_engine_freep(pybox_engine_t **e)
{
    pybox_engine_free(*e);
    *e = NULL;
}

const char *pybox_engine_socket(const pybox_engine_t *e)
{
    return e->socket_path;
}

const char *pybox_engine_version(const pybox_engine_t *e)
{
    return e->version;
}

/* ---- upgraded streams ---- */

static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - pybox_now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Parse "HTTP/1.x NNN" from the start of the reply. */
static long status_of(const char *head)
{
    if (strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ')
        return -1;
    long s = 0;
    for (int i = 9; i < 12; i++) {
        if (head[i] < '0' || head[i] > '9')
            return -1;
        s = s * 10 + (head[i] - '0');
    }
    return s;
}

/* The Content-Length in a reply head of hlen bytes; 0 when there is none. */
static size_t content_length(const char *head, size_t hlen)
{
    for (const char *p = strstr(head, "\r\n"); p != NULL && (size_t)(p - head) + 2 < hlen; p = strstr(p + 2, "\r\n"))
        if (strncasecmp(p + 2, "Content-Length:", 15) == 0)
            return (size_t)strtoull(p + 17, NULL, 10);
    return 0;
}

int pybox_engine_upgrade_head(const char *answer, long *status, size_t *head_len, size_t *body_len)
{
    const char *end = strstr(answer, "\r\n\r\n");
    if (end == NULL)
        return -1;
    *head_len = (size_t)(end - answer) + 4;
    *status = status_of(answer);
    *body_len = *status == 101 ? 0 : content_length(answer, *head_len);
    return 0;
}

int pybox_engine_upgrade(pybox_engine_t *e, const char *path, pybox_engine_stream_t **out, pybox_error_t *err)
{
    pybox_engine_stream_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    s->fd = -1;
    s->curl = cu.curl_easy_init();
    if (s->curl == NULL) {
        free(s);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "curl_easy_init failed");
    }
    cu.curl_easy_setopt(s->curl, CURLOPT_UNIX_SOCKET_PATH, e->socket_path);
    cu.curl_easy_setopt(s->curl, CURLOPT_URL, "http://localhost/");
    cu.curl_easy_setopt(s->curl, CURLOPT_CONNECT_ONLY, 1L);
    cu.curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
    cu.curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)PYBOX_ENGINE_CONNECT_TIMEOUT_MS);
    CURLcode rc = cu.curl_easy_perform(s->curl);
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        rc = cu.curl_easy_getinfo(s->curl, CURLINFO_ACTIVESOCKET, &fd);
    if (rc != CURLE_OK || fd == CURL_SOCKET_BAD) {
        pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "connecting to %s for %s: %s", e->socket_path, path,
                        cu.curl_easy_strerror(rc));
        pybox_engine_stream_free(s);
        return -1;
    }
    s->fd = fd;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fcntl(O_NONBLOCK) on the engine socket");
        pybox_engine_stream_free(s);
        return -1;
    }
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "POST %s%s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
                     "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
                     e->base + strlen("http://localhost"), path);
    if (n < 0 || (size_t)n >= sizeof req) {
        pybox_engine_stream_free(s);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "upgrade path too long");
    }
    int64_t deadline = pybox_now_ms() + PYBOX_ENGINE_TIMEOUT_MS;
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR) && wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        pybox_error_set(err, PYBOX_ERR_ENGINE, errno, "sending %s to the engine", path);
        pybox_engine_stream_free(s);
        return -1;
    }
    /* Read the reply head (bounded); keep whatever follows it. */
    pybox_buf_t head;
    pybox_buf_init(&head, PYBOX_DOCKER_ENGINE_HEADER_MAX);
    char *end = NULL;
    while (end == NULL) {
        char chunk[4096];
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLIN, deadline) < 0) {
                pybox_error_set(err, PYBOX_ERR_ENGINE, errno, "waiting for the engine's answer to %s", path);
                goto fail;
            }
            continue;
        }
        if (r <= 0) {
            pybox_error_set(err, PYBOX_ERR_ENGINE, r < 0 ? errno : 0, "the engine closed the connection during %s",
                            path);
            goto fail;
        }
        if (pybox_buf_append(&head, chunk, (size_t)r) < 0) {
            pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "the engine's answer to %s has oversized headers", path);
            goto fail;
        }
        end = strstr(head.data, "\r\n\r\n");
    }
    long status = -1;
    size_t hlen = 0, want = 0;
    pybox_engine_upgrade_head(head.data, &status, &hlen, &want);
    if (status != 101) {
        /* An error: the body (JSON with "message") follows the headers, possibly in
         * later packets; read up to its Content-Length, within the same bound. */
        while (head.len - hlen < want) {
            char chunk[4096];
            ssize_t r = recv(fd, chunk, sizeof chunk, 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (wait_fd(fd, POLLIN, deadline) < 0)
                    break;
                continue;
            }
            if (r <= 0 || pybox_buf_append(&head, chunk, (size_t)r) < 0)
                break;
        }
        const char *body = head.data + hlen;
        cJSON *j = cJSON_ParseWithLength(body, head.len - hlen);
        char what[256];
        snprintf(what, sizeof what, "POST %s", path);
        if (status < 0)
            pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "%s: the engine's answer is not HTTP", what);
        else
            pybox_engine_fail(err, what, status, j);
        cJSON_Delete(j);
        goto fail;
    }
    if (head.len > hlen) {
        s->pending_len = head.len - hlen;
        s->pending = malloc(s->pending_len);
        if (s->pending == NULL) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "malloc");
            goto fail;
        }
        memcpy(s->pending, head.data + hlen, s->pending_len);
    }
    pybox_buf_free(&head);
    *out = s;
    return 0;
fail:
    pybox_buf_free(&head);
    pybox_engine_stream_free(s);
    return -1;
}

void pybox_engine_stream_free(pybox_engine_stream_t *s)
{
    if (s == NULL)
        return;
    if (s->curl)
        cu.curl_easy_cleanup(s->curl); /* closes the socket */
    free(s->pending);
    free(s);
}

int pybox_engine_stream_fd(const pybox_engine_stream_t *s)
{
    return s->fd;
}

/* A stream's read or write that failed: EAGAIN as it is (nothing to do yet), anything
 * else an error of the engine's stream. Returns -1, errno kept. */
static ssize_t stream_failed(const char *what, pybox_error_t *err)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        errno = EAGAIN;
        return -1;
    }
    int e = errno;
    pybox_error_set(err, PYBOX_ERR_ENGINE, e, "%s", what);
    errno = e;
    return -1;
}

ssize_t pybox_engine_stream_read(pybox_engine_stream_t *s, void *buf, size_t len, pybox_error_t *err)
{
    if (s->pending_off < s->pending_len) {
        size_t n = s->pending_len - s->pending_off;
        if (n > len)
            n = len;
        memcpy(buf, s->pending + s->pending_off, n);
        s->pending_off += n;
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t r = recv(s->fd, buf, len, 0);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return stream_failed("reading the box's output stream", err);
    }
}

ssize_t pybox_engine_stream_write(pybox_engine_stream_t *s, const void *buf, size_t len, pybox_error_t *err)
{
    for (;;) {
        ssize_t w = send(s->fd, buf, len, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno != EINTR)
            return stream_failed("writing the program to the box", err);
    }
}

int pybox_engine_stream_close_write(pybox_engine_stream_t *s, pybox_error_t *err)
{
    if (shutdown(s->fd, SHUT_WR) < 0)
        return pybox_error_set(err, PYBOX_ERR_ENGINE, errno, "shutdown(SHUT_WR) of the box's input");
    return 0;
}
