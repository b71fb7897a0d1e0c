/* SPDX-License-Identifier: MIT */
/* The MCP server over Streamable HTTP (see http.h and docs/mcp.md). Threads: one of
 * libmicrohttpd's, which parses HTTP and calls the handlers here (they never block: a
 * request waiting for a call, or a stream with nothing to send, is suspended); a worker
 * per call (server.c), which gives its messages to its exchange and resumes it; and the
 * caller's (pybox_mcp_http_serve), which reads signals, watches suspended connections for
 * a client that went, closes connections past their deadlines, sends keep-alives, ends
 * idle sessions and frees ended ones. One lock (http_t.mu) guards everything here; it is
 * never held while a message is handed to the core (whose sinks take it), and the core
 * never holds its own while it calls out, so the two cannot deadlock. */
#include "http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../buf.h"
#include "../dl.h"
#include "../escape.h"
#include "../hooks.h"
#include "../util.h"

/* ---- libmicrohttpd, opened when the server starts ---- */

/* The name Debian's libmicrohttpd12 gives the library (its ABI). */
#define MHD_SONAME "libmicrohttpd.so.12"

#define MHD_FUNCS(X)                                                                                                   \
    X(MHD_start_daemon)                                                                                                \
    X(MHD_stop_daemon)                                                                                                 \
    X(MHD_quiesce_daemon)                                                                                              \
    X(MHD_lookup_connection_value)                                                                                     \
    X(MHD_get_connection_values)                                                                                       \
    X(MHD_get_connection_info)                                                                                         \
    X(MHD_create_response_from_buffer)                                                                                 \
    X(MHD_create_response_from_callback)                                                                               \
    X(MHD_add_response_header)                                                                                         \
    X(MHD_queue_response)                                                                                              \
    X(MHD_destroy_response)                                                                                            \
    X(MHD_suspend_connection)                                                                                          \
    X(MHD_resume_connection)

static struct {
    MHD_FUNCS(PYBOX_DL_FIELD)
} mhd;

static int mhd_open(pybox_error_t *err)
{
    static const char *const names[] = {MHD_FUNCS(PYBOX_DL_NAME)};
    char why[256];
    if (!pybox_dl_open(MHD_SONAME, names, sizeof names / sizeof *names, &mhd, sizeof mhd, why, sizeof why))
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0,
                               "--listen needs GNU libmicrohttpd (Debian's libmicrohttpd12): %s", why);
    return 0; /* the library stays open for the process's life */
}

/* ---- state ---- */

typedef struct http http_t;
typedef struct hsession hsession_t;
typedef struct exchange exchange_t;

/* One connection (libmicrohttpd's socket context): its descriptor and the deadline of
 * what it is doing. */
typedef struct conn {
    struct conn *next, *prev;
    int fd;
    enum { C_IDLE, C_BODY, C_BUSY } phase; /* waiting for a head, reading a body, answering */
    int64_t since_ms;
    bool shut; /* shut down for its deadline: libmicrohttpd closes it */
} conn_t;

struct hsession {
    hsession_t *next;
    http_t *hs;
    char id[PYBOX_MCP_SESSION_ID_LEN + 1];
    int token;
    pybox_mcp_session_t *core;
    pybox_mcp_hooks_t hooks;
    int refs;    /* listed (1) and each exchange that names it */
    bool listed; /* found by its id */
    unsigned calls;
    int64_t last_ms;    /* when it last did anything */
    exchange_t *stream; /* its GET stream, when open */
};

/* One message for an exchange, as the core gave it. */
typedef struct msg {
    struct msg *next;
    bool reply;
    size_t len;
    char text[];
} msg_t;

typedef enum {
    X_HEAD,   /* reading the request */
    X_JSON,   /* waiting for a call's reply, to send it as application/json */
    X_SSE,    /* a call's messages as an SSE stream */
    X_STREAM, /* the session's GET stream */
    X_DONE,   /* answered at once */
} mode_t_;

struct exchange {
    pybox_mcp_sink_t sink; /* first: the core's sink is the exchange */
    http_t *hs;
    uint64_t serial;             /* what the watcher knows it by */
    int refs;                    /* libmicrohttpd's, until the request completes, and its call's */
    struct MHD_Connection *conn; /* NULL once libmicrohttpd completed the request */
    conn_t *cx;
    exchange_t *next_open, *prev_open; /* every exchange alive */
    int token;                         /* -1 before the bearer token is known */
    bool counted;                      /* counted in its token's connections */
    hsession_t *session;               /* a reference, or NULL */
    char method[8];
    bool refused; /* answered at the head: its body is not read */
    bool dispatched;
    pybox_buf_t body;
    size_t body_held; /* of it, counted in the bodies held (PYBOX_MCP_HTTP_BODIES_*) */
    mode_t_ mode;
    msg_t *q_head, *q_tail; /* messages not yet framed */
    pybox_buf_t cur;        /* bytes being sent (an event, a keep-alive) */
    size_t cur_off;
    bool finished;    /* nothing more will come (the call ended, the stream was closed) */
    bool suspended;   /* suspended in libmicrohttpd and watched */
    bool gone;        /* the client went, or the request ended: nothing more is taken */
    bool abandoned;   /* its call was cancelled because the client went */
    bool half_closed; /* the client shut its side (a FIN): from then on only a reset or an error is its going */
    int64_t keepalive_ms;
    char log_call[48]; /* the message's method, for the log */
};

struct http {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* an exchange was freed (the last ones are waited for at the end) */
    const pybox_mcp_http_config_t *hc;
    const pybox_mcp_config_t *cfg;
    const pybox_mcp_tool_t *tools;
    size_t n_tools;
    void *arg;
    struct MHD_Daemon *d;
    int epfd;    /* suspended connections, watched for the client's going; the signals; wake_fd */
    int wake_fd; /* an eventfd: written when a call or an exchange ends while the server stops */
    int listen_fd;
    struct {
        unsigned conns, sessions, calls;
        long long bodies; /* bytes of request bodies held */
    } use[PYBOX_MCP_TOKENS_MAX];
    long long bodies;     /* bytes of request bodies held, all tokens */
    hsession_t *sessions; /* listed */
    hsession_t *ended;    /* no longer listed nor named: freed by a reaper the main thread starts */
    unsigned reaping;     /* reapers still freeing an ended session */
    conn_t *conns;
    exchange_t *open;
    uint64_t next_serial;
    unsigned calls; /* in flight, all sessions */
    bool draining;  /* SIGTERM: nothing new is taken */
    bool stopping;  /* the daemon is being stopped: nothing is suspended any more */
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    char when[40], line[1024];
    pybox_wall_iso(when, sizeof when);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one write per line: lines of several threads never mix */
    fprintf(stderr, "%s pybox mcp: %s\n", when, line);
}

static const char *token_name(const http_t *hs, int token)
{
    return token >= 0 ? hs->hc->tokens.t[token].name : "-";
}

/* A session's id as the log shows it: its first 8 digits (the id is a capability). */
static const char *short_id(const hsession_t *s)
{
    return s != NULL ? s->id : "-";
}
#define ID8 "%.8s"

/* ---- sessions ---- */

/* Wake the main thread (it checks whether the server may stop now). */
static void poke_locked(http_t *hs)
{
    uint64_t one = 1;
    ssize_t w = write(hs->wake_fd, &one, sizeof one);
    (void)w; /* a full counter already wakes it */
}

static void session_unref_locked(hsession_t *s)
{
    if (--s->refs > 0)
        return;
    /* no longer named by anyone: its core is freed (its workers joined) by the main
     * thread, never by a worker, which would wait for itself */
    s->next = s->hs->ended;
    s->hs->ended = s;
}

/* Take a session out of the table: it ends (its calls cancelled, its stream closed). */
static void wake_locked(exchange_t *ex);
static void session_end_locked(hsession_t *s, const char *why)
{
    http_t *hs = s->hs;
    if (!s->listed)
        return;
    s->listed = false;
    for (hsession_t **p = &hs->sessions; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    hs->use[s->token].sessions--;
    if (s->stream != NULL) {
        s->stream->finished = true;
        wake_locked(s->stream);
    }
    size_t n = pybox_mcp_session_cancel(s->core, NULL, true);
    logf_("session token=%s session=" ID8 " ended (%s)%s", token_name(hs, s->token), s->id, why,
          n > 0 ? "; its calls are cancelled" : "");
    session_unref_locked(s);
}

static bool call_begin(void *ctx)
{
    hsession_t *s = ctx;
    http_t *hs = s->hs;
    pthread_mutex_lock(&hs->mu);
    bool ok = !hs->draining && hs->use[s->token].calls < hs->hc->max_calls;
    if (ok) {
        hs->use[s->token].calls++;
        hs->calls++;
        s->calls++;
        s->last_ms = pybox_now_ms();
    }
    pthread_mutex_unlock(&hs->mu);
    return ok;
}

static void call_end(void *ctx, const pybox_mcp_call_end_t *end)
{
    hsession_t *s = ctx;
    http_t *hs = s->hs;
    pthread_mutex_lock(&hs->mu);
    hs->use[s->token].calls--;
    hs->calls--;
    s->calls--;
    s->last_ms = pybox_now_ms();
    if (hs->draining)
        poke_locked(hs);
    pthread_mutex_unlock(&hs->mu);
    char run[40], status[48];
    pybox_escape_short(run, sizeof run, end->run_id, 32);
    pybox_escape_short(status, sizeof status, end->status, 40);
    logf_("call token=%s session=" ID8 " status=%s run=%s ms=%.0f", token_name(hs, s->token), s->id, status, run,
          end->ms);
}

static hsession_t *session_new(http_t *hs, int token)
{
    hsession_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->hs = hs;
    s->token = token;
    s->hooks = (pybox_mcp_hooks_t){
        .call_begin = call_begin, .call_end = call_end, .ctx = s, .early_cancels = true, .tenant = (uint64_t)token + 1};
    s->core = pybox_mcp_session_new(hs->cfg, hs->tools, hs->n_tools, hs->arg, &s->hooks);
    if (s->core == NULL) {
        free(s);
        return NULL;
    }
    s->refs = 1;
    s->last_ms = pybox_now_ms();
    return s;
}

/* The listed session of token with this id: every listed id is compared, in constant
 * time. */
static hsession_t *session_find_locked(http_t *hs, const char *id, int token)
{
    if (!pybox_mcp_session_id_valid(id))
        return NULL;
    hsession_t *found = NULL;
    for (hsession_t *s = hs->sessions; s != NULL; s = s->next) {
        bool same = CRYPTO_memcmp(s->id, id, PYBOX_MCP_SESSION_ID_LEN) == 0;
        if (same && s->token == token)
            found = s;
    }
    return found;
}

/* ---- exchanges and their sink ---- */

static void exchange_free(exchange_t *ex)
{
    while (ex->q_head != NULL) {
        msg_t *m = ex->q_head;
        ex->q_head = m->next;
        free(m);
    }
    pybox_buf_free(&ex->body);
    pybox_buf_free(&ex->cur);
    free(ex);
}

/* A body let go: it no longer counts in what is held. With the lock held. */
static void body_drop_locked(exchange_t *ex)
{
    http_t *hs = ex->hs;
    if (ex->body_held > 0 && ex->token >= 0) {
        hs->use[ex->token].bodies -= (long long)ex->body_held;
        hs->bodies -= (long long)ex->body_held;
    }
    ex->body_held = 0;
    pybox_buf_free(&ex->body);
    pybox_buf_init(&ex->body, 0);
}

/* Room for n more bytes of ex's body among those held: 0 (counted), or the status that
 * refuses it (429: its token's share is full; 503: the server's). With the lock held. */
static unsigned body_hold_locked(exchange_t *ex, size_t n)
{
    http_t *hs = ex->hs;
    if (ex->token < 0)
        return MHD_HTTP_UNAUTHORIZED; /* never: a body is read only once authenticated */
    if (hs->use[ex->token].bodies + (long long)n > PYBOX_MCP_HTTP_BODIES_PER_TOKEN)
        return MHD_HTTP_TOO_MANY_REQUESTS;
    if (hs->bodies + (long long)n > PYBOX_MCP_HTTP_BODIES_MAX)
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    hs->use[ex->token].bodies += (long long)n;
    hs->bodies += (long long)n;
    ex->body_held += n;
    return 0;
}

static void exchange_unref_locked(exchange_t *ex)
{
    if (--ex->refs > 0)
        return;
    http_t *hs = ex->hs;
    body_drop_locked(ex);
    if (ex->prev_open != NULL)
        ex->prev_open->next_open = ex->next_open;
    else
        hs->open = ex->next_open;
    if (ex->next_open != NULL)
        ex->next_open->prev_open = ex->prev_open;
    if (ex->session != NULL)
        session_unref_locked(ex->session);
    exchange_free(ex);
    pthread_cond_broadcast(&hs->freed);
    if (hs->draining)
        poke_locked(hs);
}

/* Stop watching a suspended exchange's connection and resume it: libmicrohttpd calls its
 * handler or its reader again. */
static void wake_locked(exchange_t *ex)
{
    if (!ex->suspended)
        return;
    ex->suspended = false;
    epoll_ctl(ex->hs->epfd, EPOLL_CTL_DEL, ex->cx->fd, NULL);
    mhd.MHD_resume_connection(ex->conn);
}

/* Suspend the exchange's connection (from its handler or reader, with the lock held) and
 * watch its descriptor for the client's going. */
static void suspend_locked(exchange_t *ex)
{
    struct epoll_event ev = {.events = (ex->half_closed ? 0 : EPOLLRDHUP) | EPOLLHUP | EPOLLERR,
                             .data.u64 = ex->serial};
    if (epoll_ctl(ex->hs->epfd, EPOLL_CTL_ADD, ex->cx->fd, &ev) < 0) {
        /* Not watched, so not suspended: the reader is asked again at once (a busy wait,
         * bounded by the call). Never seen: the descriptor is a socket. */
        return;
    }
    ex->suspended = true;
    mhd.MHD_suspend_connection(ex->conn);
}

static bool sink_send(pybox_mcp_sink_t *k, const char *text, size_t len, bool reply)
{
    exchange_t *ex = (exchange_t *)k;
    msg_t *m = malloc(sizeof *m + len);
    if (m == NULL)
        return false;
    memcpy(m->text, text, len);
    m->len = len;
    m->reply = reply;
    m->next = NULL;
    pthread_mutex_lock(&ex->hs->mu);
    bool taken = !ex->gone;
    if (taken) {
        if (ex->q_tail != NULL)
            ex->q_tail->next = m;
        else
            ex->q_head = m;
        ex->q_tail = m;
        wake_locked(ex);
        m = NULL;
    }
    pthread_mutex_unlock(&ex->hs->mu);
    free(m);
    return taken;
}

static void sink_hold(pybox_mcp_sink_t *k)
{
    exchange_t *ex = (exchange_t *)k;
    pthread_mutex_lock(&ex->hs->mu);
    ex->refs++;
    pthread_mutex_unlock(&ex->hs->mu);
}

/* The call ended: nothing more will come. */
static void sink_release(pybox_mcp_sink_t *k)
{
    exchange_t *ex = (exchange_t *)k;
    http_t *hs = ex->hs; /* ex may be freed below */
    pthread_mutex_lock(&hs->mu);
    ex->finished = true;
    wake_locked(ex);
    exchange_unref_locked(ex);
    pthread_mutex_unlock(&hs->mu);
}

/* The first reply queued (taken out), or NULL. */
static msg_t *take_reply_locked(exchange_t *ex)
{
    for (msg_t **p = &ex->q_head; *p != NULL; p = &(*p)->next) {
        msg_t *m = *p;
        if (!m->reply)
            continue;
        *p = m->next;
        if (ex->q_tail == m) {
            ex->q_tail = NULL;
            for (msg_t *t = ex->q_head; t != NULL; t = t->next)
                ex->q_tail = t;
        }
        return m;
    }
    return NULL;
}

/* ---- answers ---- */

static enum MHD_Result queue(exchange_t *ex, unsigned status, const char *body, size_t len, const char *type,
                             const char *const *headers)
{
    struct MHD_Response *r =
        mhd.MHD_create_response_from_buffer(len, (void *)(uintptr_t)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    if (type != NULL) {
        mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2)
        mhd.MHD_add_response_header(r, headers[i], headers[i + 1]);
    enum MHD_Result rc = mhd.MHD_queue_response(ex->conn, status, r);
    mhd.MHD_destroy_response(r);
    return rc;
}

/* A refusal at the HTTP level: a JSON-RPC error with id null (as the SDK's own server
 * answers), the connection closed after it (a body not read stays unread). */
static enum MHD_Result refuse(exchange_t *ex, unsigned status, int code, const char *extra_name,
                              const char *extra_value, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result refuse(exchange_t *ex, unsigned status, int code, const char *extra_name,
                              const char *extra_value, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    ex->refused = true;
    ex->mode = X_DONE;
    http_t *hs = ex->hs;
    logf_("refused %u %s token=%s session=" ID8 ": %s", status, ex->method, token_name(hs, ex->token),
          short_id(ex->session), reason);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddNullToObject(m, "id");
    cJSON *e = cJSON_AddObjectToObject(m, "error");
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", reason);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    int rc = pybox_json_append(&b, m);
    cJSON_Delete(m);
    const char *headers[] = {MHD_HTTP_HEADER_CONNECTION, "close", extra_name, extra_value, NULL};
    enum MHD_Result r = rc == 0 && pybox_buf_ok(&b) ? queue(ex, status, b.data, b.len, "application/json", headers)
                                                    : queue(ex, status, NULL, 0, NULL, headers);
    pybox_buf_free(&b);
    return r;
}

/* A body refused while it comes, or from its Content-Length: too large for a message
 * (413), or past the bodies held at once, its token's share (429) or the server's (503). */
static enum MHD_Result refuse_body(exchange_t *ex, unsigned status)
{
    if (status == MHD_HTTP_TOO_MANY_REQUESTS)
        return refuse(ex, status, -32000, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                      "too many requests: this token's request bodies being sent at once pass %lld MiB (set by the "
                      "server)",
                      PYBOX_MCP_HTTP_BODIES_PER_TOKEN >> 20);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        return refuse(ex, status, -32000, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                      "service unavailable: the request bodies being sent to this server at once pass %lld MiB (set "
                      "by the server)",
                      PYBOX_MCP_HTTP_BODIES_MAX >> 20);
    return refuse(ex, MHD_HTTP_CONTENT_TOO_LARGE, -32600, NULL, NULL,
                  "content too large: a message may be at most %d bytes", PYBOX_MCP_LINE_MAX);
}

/* The SSE stream's reader: the exchange's messages framed as events, keep-alives between. */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    exchange_t *ex = cls;
    http_t *hs = ex->hs;
    pthread_mutex_lock(&hs->mu);
    if (ex->gone || hs->stopping) {
        pthread_mutex_unlock(&hs->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = 0;
    while (n < max) {
        if (ex->cur_off < ex->cur.len) {
            size_t k = ex->cur.len - ex->cur_off;
            if (k > max - n)
                k = max - n;
            memcpy(buf + n, ex->cur.data + ex->cur_off, k);
            n += k;
            ex->cur_off += k;
            continue;
        }
        msg_t *m = ex->q_head;
        if (m == NULL)
            break;
        ex->q_head = m->next;
        if (ex->q_head == NULL)
            ex->q_tail = NULL;
        /* One event per message: the core's JSON has no raw newline, so one data line. */
        pybox_buf_free(&ex->cur);
        pybox_buf_init(&ex->cur, 0);
        pybox_buf_adds(&ex->cur, "event: message\ndata: ");
        pybox_buf_add(&ex->cur, m->text, m->len);
        pybox_buf_adds(&ex->cur, "\n\n");
        ex->cur_off = 0;
        free(m);
        if (!pybox_buf_ok(&ex->cur)) {
            pthread_mutex_unlock(&hs->mu);
            logf_("no memory for an event: the stream is cut");
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    if (n > 0) {
        ex->keepalive_ms = pybox_now_ms() + PYBOX_MCP_HTTP_KEEPALIVE_S * 1000;
    } else if (ex->finished) {
        pthread_mutex_unlock(&hs->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        suspend_locked(ex);
    }
    pthread_mutex_unlock(&hs->mu);
    return (ssize_t)n;
}

static enum MHD_Result queue_stream(exchange_t *ex, const char *session_id)
{
    struct MHD_Response *r = mhd.MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_stream, ex, NULL);
    if (r == NULL)
        return MHD_NO;
    mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, no-transform");
    mhd.MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass events on at once */
    if (session_id != NULL)
        mhd.MHD_add_response_header(r, "Mcp-Session-Id", session_id);
    ex->keepalive_ms = pybox_now_ms() + PYBOX_MCP_HTTP_KEEPALIVE_S * 1000;
    enum MHD_Result rc = mhd.MHD_queue_response(ex->conn, MHD_HTTP_OK, r);
    mhd.MHD_destroy_response(r);
    return rc;
}

/* A JSON-mode exchange whose call has ended (or not yet: suspended again). */
static enum MHD_Result answer_json(exchange_t *ex)
{
    http_t *hs = ex->hs;
    pthread_mutex_lock(&hs->mu);
    if (ex->gone || hs->stopping) {
        pthread_mutex_unlock(&hs->mu);
        return MHD_NO;
    }
    msg_t *m = take_reply_locked(ex);
    bool finished = ex->finished;
    if (m == NULL && !finished)
        suspend_locked(ex);
    if (m != NULL || finished)
        ex->mode = X_DONE;
    pthread_mutex_unlock(&hs->mu);
    if (m != NULL) {
        enum MHD_Result r = queue(ex, MHD_HTTP_OK, m->text, m->len, "application/json", NULL);
        free(m);
        return r;
    }
    /* cancelled by the client (notifications/cancelled): no reply will ever come */
    return finished ? queue(ex, MHD_HTTP_ACCEPTED, NULL, 0, NULL, NULL) : MHD_YES;
}

/* ---- a request's head ---- */

typedef struct {
    int content_length, transfer_encoding;
} framing_t;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    framing_t *f = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        f->content_length++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        f->transfer_encoding++;
    return MHD_YES;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* Judge the head: refused (a response queued), or let on to its body. */
static enum MHD_Result judge_head(exchange_t *ex, const char *url, const char *method)
{
    http_t *hs = ex->hs;
    const pybox_mcp_http_config_t *hc = hs->hc;
    struct MHD_Connection *c = ex->conn;
    if (strcmp(url, PYBOX_MCP_HTTP_PATH) != 0)
        return refuse(ex, MHD_HTTP_NOT_FOUND, -32000, NULL, NULL, "not found: this server's endpoint is %s",
                      PYBOX_MCP_HTTP_PATH);
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0, del = strcmp(method, "DELETE") == 0;
    if (!post && !get && !del)
        return refuse(ex, MHD_HTTP_METHOD_NOT_ALLOWED, -32000, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE",
                      "method not allowed (GET, POST and DELETE are)");
    /* One way to read the body only: a request that could be read two ways (as a proxy in
     * front read it and as this server would) is refused, and its connection closed. */
    framing_t f = {0, 0};
    mhd.MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    const char *te = header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (f.transfer_encoding > 0 && f.content_length > 0)
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL,
                      "bad request: both Transfer-Encoding and Content-Length (the body could be read two ways)");
    if (f.transfer_encoding > 1 || f.content_length > 1 || (te != NULL && strcasecmp(te, "chunked") != 0))
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL,
                      "bad request: the body's framing is given twice or is not chunked or Content-Length");
    if (!post && (te != NULL || (cl != NULL && strcmp(cl, "0") != 0)))
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL, "bad request: a %s takes no body", method);
    if (hs->draining)
        return refuse(ex, MHD_HTTP_SERVICE_UNAVAILABLE, -32000, MHD_HTTP_HEADER_RETRY_AFTER, "5",
                      "the server is shutting down (calls in progress finish; no new request is taken)");
    /* Against DNS rebinding: a browser's page may call only from a listed origin. */
    const char *origin = header(c, "Origin");
    if (!pybox_mcp_origin_allowed(&hc->origins, origin)) {
        char shown[96];
        pybox_escape_short(shown, sizeof shown, origin, 64);
        return refuse(ex, MHD_HTTP_FORBIDDEN, -32000, NULL, NULL,
                      "forbidden: the origin '%s' is not allowed (set by the server: --allow-origins)", shown);
    }
    const char *auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    ex->token = pybox_mcp_bearer(&hc->tokens, auth);
    if (ex->token < 0)
        return refuse(ex, MHD_HTTP_UNAUTHORIZED, -32000, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                      auth == NULL ? "Bearer realm=\"pybox mcp\""
                                   : "Bearer realm=\"pybox mcp\", error=\"invalid_token\"",
                      auth == NULL ? "unauthorized: a bearer token is needed (Authorization: Bearer TOKEN)"
                                   : "unauthorized: the bearer token is not one of this server's");
    if (post) {
        unsigned long long len = 0;
        if (cl != NULL && (len = strtoull(cl, NULL, 10)) > PYBOX_MCP_LINE_MAX)
            return refuse(ex, MHD_HTTP_CONTENT_TOO_LARGE, -32600, NULL, NULL,
                          "content too large: a message may be at most %d bytes (the body has %llu)",
                          PYBOX_MCP_LINE_MAX, len);
        if (len > 0) { /* refused at once when it could not be held, before it is sent */
            pthread_mutex_lock(&hs->mu);
            unsigned full = hs->use[ex->token].bodies + (long long)len > PYBOX_MCP_HTTP_BODIES_PER_TOKEN
                                ? MHD_HTTP_TOO_MANY_REQUESTS
                            : hs->bodies + (long long)len > PYBOX_MCP_HTTP_BODIES_MAX ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                                      : 0;
            pthread_mutex_unlock(&hs->mu);
            if (full != 0)
                return refuse_body(ex, full);
        }
        if (!pybox_mcp_is_json(header(c, MHD_HTTP_HEADER_CONTENT_TYPE)))
            return refuse(ex, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32000, NULL, NULL,
                          "unsupported media type: the body must be application/json");
        const char *accept = header(c, MHD_HTTP_HEADER_ACCEPT);
        if (!pybox_mcp_accepts(accept, "application/json") || !pybox_mcp_accepts(accept, "text/event-stream"))
            return refuse(ex, MHD_HTTP_NOT_ACCEPTABLE, -32000, NULL, NULL,
                          "not acceptable: the client must accept both application/json and text/event-stream");
    } else if (get && !pybox_mcp_accepts(header(c, MHD_HTTP_HEADER_ACCEPT), "text/event-stream")) {
        return refuse(ex, MHD_HTTP_NOT_ACCEPTABLE, -32000, NULL, NULL,
                      "not acceptable: the client must accept text/event-stream");
    }
    const char *sid = header(c, "Mcp-Session-Id");
    pthread_mutex_lock(&hs->mu);
    bool full = hs->use[ex->token].conns >= hc->max_connections;
    if (!full) {
        hs->use[ex->token].conns++;
        ex->counted = true;
    }
    hsession_t *s = sid != NULL ? session_find_locked(hs, sid, ex->token) : NULL;
    if (s != NULL) {
        s->refs++;
        s->last_ms = pybox_now_ms();
        ex->session = s;
    }
    const char *version = s != NULL ? pybox_mcp_session_version(s->core) : NULL;
    bool stream_open = s != NULL && s->stream != NULL;
    pthread_mutex_unlock(&hs->mu);
    if (full)
        return refuse(ex, MHD_HTTP_TOO_MANY_REQUESTS, -32000, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                      "too many requests: this token has %u connections with a request in progress (set by the "
                      "server: --max-connections)",
                      hc->max_connections);
    if (sid == NULL && !post)
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL,
                      "bad request: the Mcp-Session-Id header is needed (initialize gives one)");
    if (sid != NULL && s == NULL)
        return refuse(ex, MHD_HTTP_NOT_FOUND, -32001, NULL, NULL,
                      "session not found (ended, expired, or never this token's): initialize a new one");
    const char *pv = header(c, "MCP-Protocol-Version");
    if (s != NULL && pv != NULL && (version == NULL || strcmp(pv, version) != 0)) {
        char shown[64];
        pybox_escape_short(shown, sizeof shown, pv, 32);
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL,
                      "bad request: MCP-Protocol-Version '%s' is not this session's (%s)", shown,
                      version != NULL ? version : "none yet");
    }
    if (del) {
        pthread_mutex_lock(&hs->mu);
        session_end_locked(s, "deleted by the client");
        pthread_mutex_unlock(&hs->mu);
        ex->mode = X_DONE;
        return queue(ex, MHD_HTTP_NO_CONTENT, NULL, 0, NULL, NULL);
    }
    if (get) {
        if (stream_open)
            return refuse(ex, MHD_HTTP_CONFLICT, -32000, NULL, NULL,
                          "conflict: this session's stream is already open (one per session)");
        pthread_mutex_lock(&hs->mu);
        s->stream = ex;
        ex->mode = X_STREAM;
        ex->cx->phase = C_BUSY; /* it lasts as long as the session: no body deadline */
        pthread_mutex_unlock(&hs->mu);
        return queue_stream(ex, NULL);
    }
    return MHD_YES; /* a POST: its body comes next */
}

/* ---- a request's body: the message ---- */

/* A provisional session for an initialize, listed once it is initialized. */
static enum MHD_Result dispatch_post(exchange_t *ex)
{
    http_t *hs = ex->hs;
    hsession_t *s = ex->session;
    hsession_t *fresh = NULL;
    if (s == NULL) {
        fresh = session_new(hs, ex->token);
        if (fresh == NULL)
            return refuse(ex, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, NULL, NULL, "out of memory");
        s = fresh;
    }
    pybox_mcp_handled_t h;
    const char *body = ex->body.data != NULL ? ex->body.data : "";
    if (strspn(body, " \t\r\n") == ex->body.len) {
        if (fresh != NULL) {
            pybox_mcp_session_free(fresh->core);
            free(fresh);
        }
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32600, NULL, NULL, "bad request: the body holds no JSON-RPC message");
    }
    pybox_mcp_session_handle(s->core, body, ex->body.len, fresh != NULL ? PYBOX_MCP_ONLY_INITIALIZE : 0, &ex->sink, &h);
    /* The message is taken (the core keeps what it needs): its body is let go now, not
     * when its call ends. */
    pthread_mutex_lock(&hs->mu);
    body_drop_locked(ex);
    pthread_mutex_unlock(&hs->mu);
    pybox_strlcpy(ex->log_call, h.method, sizeof ex->log_call);
    if (h.outcome == PYBOX_MCP_NEEDS_SESSION) {
        pybox_mcp_session_free(fresh->core);
        free(fresh);
        return refuse(ex, MHD_HTTP_BAD_REQUEST, -32000, NULL, NULL,
                      "bad request: the Mcp-Session-Id header is needed (initialize gives one)");
    }
    char id[PYBOX_MCP_SESSION_ID_LEN + 1] = "";
    if (fresh != NULL) {
        pybox_error_t err = {0};
        pthread_mutex_lock(&hs->mu);
        bool full = hs->use[ex->token].sessions >= hs->hc->max_sessions;
        bool keep = h.initialized && !full && pybox_random_hex(PYBOX_MCP_SESSION_ID_LEN / 2, id, &err) == 0;
        if (keep) {
            pybox_strlcpy(fresh->id, id, sizeof fresh->id);
            fresh->listed = true;
            fresh->next = hs->sessions;
            hs->sessions = fresh;
            hs->use[ex->token].sessions++;
            fresh->refs++; /* the exchange's */
            ex->session = fresh;
        }
        pthread_mutex_unlock(&hs->mu);
        if (keep) {
            logf_("session token=%s session=" ID8 " started (protocol %s)", token_name(hs, ex->token), id,
                  pybox_mcp_session_version(fresh->core));
        } else {
            /* an initialize refused for its form, or one too many: nothing was started */
            pybox_mcp_session_free(fresh->core);
            free(fresh);
            if (h.initialized && full)
                return refuse(ex, MHD_HTTP_TOO_MANY_REQUESTS, -32000, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                              "too many sessions: this token has %u (set by the server: --" PYBOX_MCP_OPT_HTTP_SESSIONS
                              "); end one "
                              "with DELETE, or wait for an idle one to expire",
                              hs->hc->max_sessions);
            if (h.initialized)
                return refuse(ex, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, NULL, NULL, "no session id could be made: %s",
                              err.msg);
            id[0] = '\0';
        }
    }
    switch (h.outcome) {
    case PYBOX_MCP_NO_REPLY:
        ex->mode = X_DONE;
        return queue(ex, MHD_HTTP_ACCEPTED, NULL, 0, NULL, NULL);
    case PYBOX_MCP_CALL:
        if (h.progress) {
            ex->mode = X_SSE;
            return queue_stream(ex, NULL);
        }
        ex->mode = X_JSON;
        return answer_json(ex);
    default: {
        pthread_mutex_lock(&hs->mu);
        msg_t *m = take_reply_locked(ex);
        pthread_mutex_unlock(&hs->mu);
        ex->mode = X_DONE;
        unsigned status = h.outcome == PYBOX_MCP_REFUSED ? MHD_HTTP_BAD_REQUEST
                          : h.outcome == PYBOX_MCP_BUSY  ? MHD_HTTP_TOO_MANY_REQUESTS
                                                         : MHD_HTTP_OK;
        if (status != MHD_HTTP_OK)
            logf_("refused %u POST token=%s session=" ID8 ": %.*s", status, token_name(hs, ex->token),
                  short_id(ex->session), m != NULL ? (int)(m->len < 300 ? m->len : 300) : 0, m != NULL ? m->text : "");
        const char *headers[] = {"Mcp-Session-Id", id, NULL};
        enum MHD_Result r = queue(ex, status, m != NULL ? m->text : NULL, m != NULL ? m->len : 0,
                                  m != NULL ? "application/json" : NULL, id[0] != '\0' ? headers : NULL);
        free(m);
        return r;
    }
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    http_t *hs = cls;
    exchange_t *ex = *con_cls;
    if (ex == NULL) { /* the head */
        const union MHD_ConnectionInfo *ci = mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        conn_t *cx = ci != NULL ? ci->socket_context : NULL;
        ex = calloc(1, sizeof *ex);
        if (ex == NULL || cx == NULL) {
            free(ex);
            return MHD_NO;
        }
        ex->sink = (pybox_mcp_sink_t){.send = sink_send, .hold = sink_hold, .release = sink_release};
        ex->hs = hs;
        ex->refs = 1;
        ex->conn = c;
        ex->cx = cx;
        ex->token = -1;
        pybox_escape_short(ex->method, sizeof ex->method, method, 6);
        pybox_buf_init(&ex->body, PYBOX_MCP_LINE_MAX);
        pybox_buf_init(&ex->cur, 0);
        pthread_mutex_lock(&hs->mu);
        ex->serial = ++hs->next_serial;
        ex->next_open = hs->open;
        if (hs->open != NULL)
            hs->open->prev_open = ex;
        hs->open = ex;
        cx->phase = C_BODY;
        cx->since_ms = pybox_now_ms();
        pthread_mutex_unlock(&hs->mu);
        *con_cls = ex;
        return judge_head(ex, url, method);
    }
    if (ex->refused || ex->mode == X_DONE || ex->mode == X_STREAM) {
        *upload_size = 0; /* a body after a refusal is not read */
        return MHD_YES;
    }
    if (*upload_size > 0) {
        /* Bounded as a line on stdio; nothing of it is parsed before it is whole. */
        if (ex->body.len + *upload_size > PYBOX_MCP_LINE_MAX) {
            *upload_size = 0;
            return refuse_body(ex, MHD_HTTP_CONTENT_TOO_LARGE);
        }
        pthread_mutex_lock(&hs->mu);
        unsigned full = body_hold_locked(ex, *upload_size);
        pthread_mutex_unlock(&hs->mu);
        if (full != 0 || pybox_buf_append(&ex->body, upload, *upload_size) < 0) {
            *upload_size = 0;
            return refuse_body(ex, full != 0 ? full : MHD_HTTP_CONTENT_TOO_LARGE);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (!ex->dispatched) {
        ex->dispatched = true;
        pthread_mutex_lock(&hs->mu);
        ex->cx->phase = C_BUSY;
        pthread_mutex_unlock(&hs->mu);
        return dispatch_post(ex);
    }
    return ex->mode == X_JSON ? answer_json(ex) : MHD_YES;
}

/* The client went before its call's answer: nothing can reach it any more (this server
 * offers no resumption), so the call is cancelled at once and its box removed. */
static void abandon_locked(exchange_t *ex, const char *why)
{
    if (ex->abandoned || ex->session == NULL)
        return;
    ex->abandoned = true;
    if (pybox_mcp_session_cancel(ex->session->core, &ex->sink, true) > 0)
        logf_("client gone token=%s session=" ID8 ": its call is cancelled (%s)", token_name(ex->hs, ex->token),
              ex->session->id, why);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    http_t *hs = cls;
    exchange_t *ex = *con_cls;
    if (ex == NULL)
        return;
    *con_cls = NULL;
    pthread_mutex_lock(&hs->mu);
    ex->cx->phase = C_IDLE;
    ex->cx->since_ms = pybox_now_ms();
    ex->conn = NULL;
    ex->gone = true;
    bool call_open = (ex->mode == X_JSON || ex->mode == X_SSE) && !ex->finished;
    if (ex->session != NULL) {
        ex->session->last_ms = pybox_now_ms();
        if (ex->session->stream == ex)
            ex->session->stream = NULL;
    }
    if (ex->counted) {
        hs->use[ex->token].conns--;
        ex->counted = false;
    }
    if (call_open)
        abandon_locked(ex, toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out" : "disconnected");
    exchange_unref_locked(ex);
    pthread_mutex_unlock(&hs->mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_t *hs = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_t *cx = calloc(1, sizeof *cx);
        if (cx == NULL || ci == NULL) {
            free(cx);
            *socket_context = NULL;
            return;
        }
        cx->fd = ci->connect_fd;
        cx->phase = C_IDLE;
        cx->since_ms = pybox_now_ms();
        pthread_mutex_lock(&hs->mu);
        cx->next = hs->conns;
        if (hs->conns != NULL)
            hs->conns->prev = cx;
        hs->conns = cx;
        pthread_mutex_unlock(&hs->mu);
        *socket_context = cx;
        return;
    }
    conn_t *cx = *socket_context;
    if (cx == NULL)
        return;
    /* Called before libmicrohttpd closes the descriptor: once out of the list, the main
     * thread never shuts it down. */
    pthread_mutex_lock(&hs->mu);
    if (cx->prev != NULL)
        cx->prev->next = cx->next;
    else
        hs->conns = cx->next;
    if (cx->next != NULL)
        cx->next->prev = cx->prev;
    pthread_mutex_unlock(&hs->mu);
    free(cx);
    *socket_context = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512], shown[600];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
        line[--n] = '\0';
    /* What the handlers here chose (a connection closed because its client went or the
     * server stops) is logged by them in their own words. */
    if (strncmp(line, "Application reported internal error", 35) == 0 ||
        strncmp(line, "Closing connection (application error generating response)", 58) == 0)
        return;
    pybox_escape_short(shown, sizeof shown, line, 400);
    logf_("http: %s", shown);
}

/* ---- the listening socket ---- */

static int listen_socket(const pybox_mcp_http_config_t *hc, char *shown, size_t shown_len, pybox_error_t *err)
{
    const pybox_mcp_listen_t *l = &hc->listen;
    int fd = socket(l->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "socket");
    int one = 1;
    if (l->family == AF_UNIX) {
        /* A socket left by a server that is gone is replaced; a live one, or anything
         * else at that path, is not. */
        struct stat sb;
        if (lstat(l->path, &sb) == 0) {
            int probe = S_ISSOCK(sb.st_mode) ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
            bool dead = probe >= 0 && connect(probe, (const struct sockaddr *)&l->addr, l->addr_len) < 0 &&
                        errno == ECONNREFUSED;
            if (probe >= 0)
                close(probe);
            if (!dead || unlink(l->path) < 0) {
                close(fd);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--listen: %s is in use (a server answers there, or it is not a socket)",
                                       l->path);
            }
        }
    } else {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (l->family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    /* A unix socket is made 0660 by bind itself: its mode is never set by its path after,
     * which whoever may write its folder could have pointed elsewhere meanwhile (a link
     * to a file of root's: chmod follows it). No other thread runs yet. */
    mode_t old_umask = l->family == AF_UNIX ? umask(0117) : 0;
    int bound = bind(fd, (const struct sockaddr *)&l->addr, l->addr_len);
    int bind_errno = errno;
    if (l->family == AF_UNIX)
        umask(old_umask);
    if (bound < 0) {
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, bind_errno, "--listen: bind");
    }
    if (l->family == AF_UNIX) {
        const char *fifo = pybox_hook(PYBOX_HOOK_LISTEN_BOUND);
        if (fifo != NULL) {
            int h = open(fifo, O_RDONLY | O_CLOEXEC);
            char byte;
            if (h >= 0 && read(h, &byte, 1) < 0)
                byte = 0;
            if (h >= 0)
                close(h);
        }
        /* Before listen(): nobody can connect before the group is set. Its group is set
         * without following a link, and what is at the path must then still be a socket
         * of the server's, or the server does not start. */
        gid_t gid = hc->socket_group_set ? hc->socket_gid : getegid();
        struct stat sb;
        if (fchownat(AT_FDCWD, l->path, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
            int en = errno;
            close(fd);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, en, "--listen: setting %s to group %u", l->path,
                                   (unsigned)gid);
        }
        if (lstat(l->path, &sb) < 0 || !S_ISSOCK(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 0777) != 0660) {
            close(fd);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--listen: %s was replaced while the server made it (whoever may write its folder "
                                   "can do that: give a folder only the server writes)",
                                   l->path);
        }
    }
    if (listen(fd, 128) < 0) {
        int en = errno;
        if (l->family == AF_UNIX)
            unlink(l->path);
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, en, "listen");
    }
    struct sockaddr_storage a;
    socklen_t alen = sizeof a;
    char host[INET6_ADDRSTRLEN] = "?";
    if (l->family == AF_UNIX) {
        snprintf(shown, shown_len, "unix:%s", l->path);
    } else if (getsockname(fd, (struct sockaddr *)&a, &alen) == 0 && a.ss_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)&a;
        inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
        snprintf(shown, shown_len, "%s:%u", host, ntohs(in4->sin_port));
    } else if (a.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(shown, shown_len, "[%s]:%u", host, ntohs(in6->sin6_port));
    }
    return fd;
}

/* ---- the main thread ---- */

/* Close the connections past their deadline (shutdown: libmicrohttpd then closes them),
 * send keep-alives, end idle sessions. With the lock held. */
static void sweep_locked(http_t *hs, int64_t now)
{
    for (conn_t *cx = hs->conns; cx != NULL; cx = cx->next) {
        int64_t limit = cx->phase == C_IDLE   ? PYBOX_MCP_HTTP_HEAD_S * 1000LL
                        : cx->phase == C_BODY ? PYBOX_MCP_HTTP_BODY_S * 1000LL
                                              : -1;
        if (limit >= 0 && !cx->shut && now - cx->since_ms > limit) {
            cx->shut = true;
            shutdown(cx->fd, SHUT_RDWR);
        }
    }
    for (exchange_t *ex = hs->open; ex != NULL; ex = ex->next_open) {
        bool streaming = (ex->mode == X_SSE || ex->mode == X_STREAM) && !ex->gone && !ex->finished;
        if (streaming && now >= ex->keepalive_ms && ex->q_head == NULL && ex->cur_off >= ex->cur.len) {
            pybox_buf_free(&ex->cur);
            pybox_buf_init(&ex->cur, 0);
            pybox_buf_adds(&ex->cur, ": keep-alive\n\n");
            ex->cur_off = 0;
            ex->keepalive_ms = now + PYBOX_MCP_HTTP_KEEPALIVE_S * 1000;
            wake_locked(ex);
        }
    }
    for (hsession_t *s = hs->sessions, *next; s != NULL; s = next) {
        next = s->next;
        if (s->refs == 1 && s->calls == 0 && s->stream == NULL && now - s->last_ms > hs->hc->session_idle_s * 1000)
            session_end_locked(s, "idle");
    }
}

/* The listed sessions' finished calls are joined, without the lock (a worker that has
 * finished may still be taking it to say so). */
static void reap_all(http_t *hs)
{
    pthread_mutex_lock(&hs->mu);
    size_t n = 0;
    for (hsession_t *s = hs->sessions; s != NULL; s = s->next)
        n++;
    hsession_t **held = n > 0 ? calloc(n, sizeof *held) : NULL;
    size_t k = 0;
    for (hsession_t *s = hs->sessions; s != NULL && held != NULL; s = s->next) {
        s->refs++;
        held[k++] = s;
    }
    pthread_mutex_unlock(&hs->mu);
    for (size_t i = 0; i < k; i++)
        pybox_mcp_session_reap(held[i]->core, false);
    pthread_mutex_lock(&hs->mu);
    for (size_t i = 0; i < k; i++)
        session_unref_locked(held[i]);
    pthread_mutex_unlock(&hs->mu);
    free(held);
}

/* An ended session's end: its calls joined, what it owned ended (its Python sessions'
 * boxes closed and removed, which takes what the backend takes), freed. */
static void *reaper_main(void *arg)
{
    hsession_t *s = arg;
    http_t *hs = s->hs;
    pybox_mcp_session_free(s->core);
    free(s);
    pthread_mutex_lock(&hs->mu);
    hs->reaping--;
    pthread_cond_broadcast(&hs->freed);
    pthread_mutex_unlock(&hs->mu);
    return NULL;
}

/* The ended sessions no one names any more, each freed by a reaper of its own: never on
 * the main thread, which meanwhile would see no signal, deadline, keep-alive or client
 * that goes. Only when no thread can be made is one freed here. */
static void free_ended(http_t *hs)
{
    pthread_mutex_lock(&hs->mu);
    hsession_t *list = hs->ended;
    hs->ended = NULL;
    pthread_mutex_unlock(&hs->mu);
    while (list != NULL) {
        hsession_t *s = list;
        list = s->next;
        pthread_attr_t at;
        pthread_t t;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&hs->mu);
        hs->reaping++;
        pthread_mutex_unlock(&hs->mu);
        bool made = pthread_create(&t, &at, reaper_main, s) == 0;
        pthread_attr_destroy(&at);
        if (made)
            continue;
        pthread_mutex_lock(&hs->mu);
        hs->reaping--;
        pthread_mutex_unlock(&hs->mu);
        pybox_mcp_session_free(s->core);
        free(s);
    }
}

/* An interim answer any HTTP/1.1 client reads past (RFC 9110, 15.2), sent to a client
 * that shut its side before anything of the answer went. */
static const char probe_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* A FIN from a suspended exchange's client: it shut its side, or it is gone; the two look
 * the same until something is sent. So something is: a client that closed answers it
 * with a reset (then EPOLLHUP or EPOLLERR: client_went), one that only shut its side reads
 * it and its call goes on. Waiting for JSON, that is an interim 100 (nothing of the
 * answer has gone: libmicrohttpd writes nothing while suspended); on a stream, a
 * keep-alive. Returns false when the client is already known gone. With the lock held. */
static bool half_closed_locked(exchange_t *ex)
{
    ex->half_closed = true;
    struct epoll_event ev = {.events = EPOLLHUP | EPOLLERR, .data.u64 = ex->serial};
    epoll_ctl(ex->hs->epfd, EPOLL_CTL_MOD, ex->cx->fd, &ev);
    if (ex->mode == X_JSON && !ex->finished)
        return send(ex->cx->fd, probe_continue, sizeof probe_continue - 1, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0 ||
               (errno != EPIPE && errno != ECONNRESET);
    ex->keepalive_ms = 0; /* the next sweep sends one */
    return true;
}

/* The client of a suspended exchange went: cancel its call, let libmicrohttpd end it. */
static void client_went(http_t *hs, uint64_t serial, uint32_t events)
{
    pthread_mutex_lock(&hs->mu);
    exchange_t *ex = hs->open;
    while (ex != NULL && ex->serial != serial)
        ex = ex->next_open;
    if (ex != NULL && ex->suspended && !(events & (EPOLLHUP | EPOLLERR)) && !ex->half_closed &&
        half_closed_locked(ex)) {
        pthread_mutex_unlock(&hs->mu);
        return;
    }
    if (ex != NULL && ex->suspended) {
        ex->gone = true;
        if ((ex->mode == X_JSON || ex->mode == X_SSE) && !ex->finished)
            abandon_locked(ex, "disconnected");
        wake_locked(ex);
    }
    pthread_mutex_unlock(&hs->mu);
}

void pybox_mcp_http_defaults(pybox_mcp_http_config_t *hc)
{
    hc->listen_public = false;
    hc->origins.n = 0;
    hc->socket_group_set = false;
    hc->max_connections = PYBOX_MCP_HTTP_CONNECTIONS;
    hc->max_sessions = PYBOX_MCP_HTTP_SESSIONS;
    hc->max_calls = PYBOX_MCP_HTTP_CALLS;
    hc->session_idle_s = PYBOX_MCP_HTTP_SESSION_IDLE_S;
}

int pybox_mcp_http_serve(const pybox_mcp_http_config_t *hc, int signal_fd, const pybox_mcp_config_t *cfg,
                         const pybox_mcp_tool_t *tools, size_t n_tools, void *arg, pybox_error_t *err)
{
    if (!hc->listen.loopback && !hc->listen_public)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--listen: not a loopback address: give --listen-public to serve beyond this machine "
                               "(put a reverse proxy with TLS in front: docs/mcp.md)");
    if (mhd_open(err) < 0)
        return -1;
    http_t *hs = calloc(1, sizeof *hs);
    if (hs == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    pthread_mutex_init(&hs->mu, NULL);
    pthread_cond_init(&hs->freed, NULL);
    hs->hc = hc;
    hs->cfg = cfg;
    hs->tools = tools;
    hs->n_tools = n_tools;
    hs->arg = arg;
    char where[160] = "";
    hs->listen_fd = listen_socket(hc, where, sizeof where, err);
    hs->epfd = epoll_create1(EPOLL_CLOEXEC);
    hs->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event sev = {.events = EPOLLIN, .data.u64 = 0};
    struct epoll_event wev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    if (hs->listen_fd < 0 || hs->epfd < 0 || hs->wake_fd < 0 ||
        epoll_ctl(hs->epfd, EPOLL_CTL_ADD, signal_fd, &sev) < 0 ||
        epoll_ctl(hs->epfd, EPOLL_CTL_ADD, hs->wake_fd, &wev) < 0) {
        if (hs->listen_fd >= 0) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "epoll");
            close(hs->listen_fd);
            if (hc->listen.family == AF_UNIX)
                unlink(hc->listen.path);
        }
        if (hs->epfd >= 0)
            close(hs->epfd);
        if (hs->wake_fd >= 0)
            close(hs->wake_fd);
        pthread_cond_destroy(&hs->freed);
        pthread_mutex_destroy(&hs->mu);
        free(hs);
        return -1;
    }
    unsigned limit = (unsigned)hc->tokens.n * hc->max_connections + PYBOX_MCP_HTTP_SPARE_CONNECTIONS;
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
        rlim_t room = nofile.rlim_cur > 2 * PYBOX_MCP_HTTP_FD_RESERVE
                          ? (nofile.rlim_cur - PYBOX_MCP_HTTP_FD_RESERVE) / 2
                          : PYBOX_MCP_HTTP_FD_RESERVE / 2;
        if (limit > room)
            limit = (unsigned)room;
    }
    hs->d = mhd.MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        on_request, hs, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, hs->listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PYBOX_MCP_HTTP_IDLE_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PYBOX_MCP_HTTP_CONN_MEMORY, MHD_OPTION_STRICT_FOR_CLIENT, 1,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, hs, MHD_OPTION_NOTIFY_CONNECTION, on_connection, hs, MHD_OPTION_END);
    if (hs->d == NULL) {
        close(hs->listen_fd);
        if (hc->listen.family == AF_UNIX)
            unlink(hc->listen.path);
        close(hs->epfd);
        close(hs->wake_fd);
        pthread_cond_destroy(&hs->freed);
        pthread_mutex_destroy(&hs->mu);
        free(hs);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "libmicrohttpd could not start serving on %s", where);
    }
    logf_("listening on %s, endpoint %s (%zu token%s; per token at most %u connections, %u sessions, %u calls; at "
          "most %u connections in all)",
          where, PYBOX_MCP_HTTP_PATH, hc->tokens.n, hc->tokens.n == 1 ? "" : "s", hc->max_connections, hc->max_sessions,
          hc->max_calls, limit);
    int64_t flush_until = -1; /* once the calls have ended while stopping: the answers' last moment */
    bool cancel_all = false;
    for (;;) {
        struct epoll_event evs[32];
        int n = epoll_wait(hs->epfd, evs, 32, 1000);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == UINT64_MAX) {
                uint64_t count;
                ssize_t r = read(hs->wake_fd, &count, sizeof count);
                (void)r; /* only the wake-up counts */
                continue;
            }
            if (evs[i].data.u64 != 0) {
                client_went(hs, evs[i].data.u64, evs[i].events);
                continue;
            }
            struct signalfd_siginfo si;
            if (read(signal_fd, &si, sizeof si) != (ssize_t)sizeof si)
                continue;
            pthread_mutex_lock(&hs->mu);
            bool first = !hs->draining;
            bool drain = si.ssi_signo == SIGTERM && first;
            hs->draining = true;
            if (!drain)
                cancel_all = true;
            for (hsession_t *s = hs->sessions; s != NULL; s = s->next) {
                if (s->stream != NULL) { /* the sessions' own streams end now */
                    s->stream->finished = true;
                    wake_locked(s->stream);
                }
            }
            unsigned calls = hs->calls;
            pthread_mutex_unlock(&hs->mu);
            if (first) {
                /* no new connection from now on */
                int lfd = mhd.MHD_quiesce_daemon(hs->d);
                if (lfd >= 0)
                    close(lfd);
                if (hc->listen.family == AF_UNIX)
                    unlink(hc->listen.path);
            }
            if (drain)
                logf_("SIGTERM: draining: %u call%s in progress run to their end, no new request is taken", calls,
                      calls == 1 ? "" : "s");
            else
                logf_("signal %u: stopping: every call in progress is cancelled and its box removed",
                      (unsigned)si.ssi_signo);
        }
        reap_all(hs);
        free_ended(hs);
        pthread_mutex_lock(&hs->mu);
        int64_t now = pybox_now_ms();
        if (cancel_all) {
            for (hsession_t *s = hs->sessions; s != NULL; s = s->next)
                pybox_mcp_session_cancel(s->core, NULL, false);
        }
        sweep_locked(hs, now);
        bool done = false;
        if (hs->draining && hs->calls == 0) {
            if (flush_until < 0)
                flush_until = now + PYBOX_MCP_FLUSH_MS;
            bool answering = false; /* an answer still going out */
            for (exchange_t *ex = hs->open; ex != NULL && !answering; ex = ex->next_open)
                answering = ex->conn != NULL && ex->mode != X_STREAM;
            done = !answering || now >= flush_until;
        }
        pthread_mutex_unlock(&hs->mu);
        if (done)
            break;
    }
    /* Nothing suspended may be left when the daemon stops: every exchange is woken, told
     * it is over, and nothing suspends again. */
    pthread_mutex_lock(&hs->mu);
    hs->stopping = true;
    for (exchange_t *ex = hs->open; ex != NULL; ex = ex->next_open) {
        ex->gone = true;
        wake_locked(ex);
    }
    for (hsession_t *s = hs->sessions, *next; s != NULL; s = next) {
        next = s->next;
        session_end_locked(s, "the server stops");
    }
    pthread_mutex_unlock(&hs->mu);
    mhd.MHD_stop_daemon(hs->d);
    /* The calls' last references: each call's worker lets its exchange go once its box is
     * removed (they were cancelled above, or had ended). */
    pthread_mutex_lock(&hs->mu);
    while (hs->open != NULL)
        pthread_cond_wait(&hs->freed, &hs->mu);
    pthread_mutex_unlock(&hs->mu);
    free_ended(hs);
    /* and the reapers, each the last to touch hs */
    pthread_mutex_lock(&hs->mu);
    while (hs->reaping > 0)
        pthread_cond_wait(&hs->freed, &hs->mu);
    pthread_mutex_unlock(&hs->mu);
    close(hs->epfd);
    close(hs->wake_fd);
    pthread_cond_destroy(&hs->freed);
    pthread_mutex_destroy(&hs->mu);
    free(hs);
    logf_("stopped");
    return 0;
}
