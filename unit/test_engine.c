/* SPDX-License-Identifier: MIT */
/* The engine client against a fake engine on a Unix socket that answers with recorded replies. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/bounds.h"
#include "../pybox/docker/docker.h"
#include "../pybox/docker/engine.h"
#include "../pybox/escape.h"
#include "../pybox/image/image.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "suites.h"

/* ---- the fake engine ----
 * A child process serves a script of answers, one per request, in the order the
 * requests arrive (on any connection: libcurl keeps one alive, attach opens another).
 * Every request it saw goes back to the test over a pipe, so assertions run in the
 * test process, where Check can report them. */

#define FAKE_STEPS_MAX 8
#define FAKE_CONNS_MAX 8
#define FAKE_HEAD_MAX 8192
#define FAKE_BODY_KEEP 4096
#define FAKE_WAIT_MS 10000

typedef enum {
    FAKE_ANSWER,    /* status/headers/body, or the raw parts */
    FAKE_HANGUP,    /* read the request, close without a word */
    FAKE_BIG,       /* a JSON string body of exactly `big` bytes, with Content-Length */
    FAKE_HUGE_HEAD, /* `big` bytes of header lines that never end */
    FAKE_UPGRADE,   /* raw parts, then `later` when the test says go, then echo stdin at its EOF */
} fake_kind_t;

typedef struct {
    fake_kind_t kind;
    const char *status;  /* "200 OK" */
    const char *headers; /* extra header lines, each ending in \r\n */
    const char *body;    /* sent with Content-Length, or one chunk per line when chunked */
    bool chunked;
    bool split_body; /* the body only once the client has taken the head */
    bool close_after;
    /* Exact bytes instead of the above; each part only once the client has taken the last. */
    const char *raw[3];
    size_t big;
    bool check_body; /* answer 400 unless the request body is expect_body bytes */
    uint64_t expect_body;
    const char *later;
    int delay_ms; /* answer only after this long: a slow engine */
} fake_step_t;

/* What the server saw of one request. */
typedef struct {
    uint32_t conn; /* connections are numbered in accept order */
    uint32_t head_len;
    uint32_t kept;
    uint32_t chunked;
    uint64_t body_len;
    uint64_t body_hash;
} fake_rec_t;

typedef struct {
    fake_rec_t rec;
    char head[FAKE_HEAD_MAX]; /* request line and headers, up to and including \r\n\r\n */
    char body[FAKE_BODY_KEEP + 1];
} fake_req_t;

static struct {
    char dir[128];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char host[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
    pid_t pid;
    int log_fd;  /* test end: the requests the server saw */
    int go_fd;   /* test end: one byte lets an upgraded answer go on */
    int life_fd; /* test end: only the test holds it, so its closing means the test is gone */
    fake_step_t steps[FAKE_STEPS_MAX];
    size_t nsteps;
} fake = {.pid = -1, .log_fd = -1, .go_fd = -1, .life_fd = -1};

/* The server's ends of the same pipes. */
static struct {
    int log_fd, go_fd, life_fd;
} srv;

typedef struct {
    int fd;
    uint32_t id;
    size_t off, len;
    char buf[65536];
} conn_t;

static conn_t conns[FAKE_CONNS_MAX];

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define FNV_START 0xcbf29ce484222325ULL

/* The value of header name in an HTTP head, or NULL. */
static const char *head_value(const char *head, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    const char *p = strstr(head, "\r\n");
    while (p != NULL && p[2] != '\0' && !(p[2] == '\r' && p[3] == '\n')) {
        const char *line = p + 2;
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = (size_t)(eol - v);
            while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return out;
        }
        p = eol;
    }
    return NULL;
}

/* The server leaves nothing behind: socket and directory go with it. */
static _Noreturn void srv_exit(int code)
{
    unlink(fake.sock);
    rmdir(fake.dir);
    _exit(code);
}

/* Wait for fd (or, with fd < 0, just timeout_ms); end the server as soon as the test
 * is gone, whatever it was waiting for. Returns >0 when fd is ready, 0 on timeout. */
static int srv_wait(int fd, short events, int timeout_ms)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = srv.life_fd, .events = POLLIN}, {.fd = fd, .events = events}};
        int r = poll(p, 2, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || p[0].revents != 0)
            srv_exit(r < 0 ? 2 : 0);
        return r;
    }
}

static int srv_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1; /* the client went away; that is its right */
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Until the client has read everything sent so far: the client cannot say so from
 * inside one call, but the socket's send queue empties exactly then. */
static void srv_drained(int fd)
{
    for (;;) {
        int queued = 0;
        if (ioctl(fd, SIOCOUTQ, &queued) < 0 || queued == 0)
            return;
        srv_wait(-1, 0, 1);
    }
}

/* More bytes into the connection's buffer: >0 read, 0 end of stream, -1 error. */
static ssize_t srv_fill(conn_t *c)
{
    if (c->off == c->len)
        c->off = c->len = 0;
    if (c->len == sizeof c->buf && c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (c->len == sizeof c->buf)
        return -1;
    srv_wait(c->fd, POLLIN, -1);
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0)
            c->len += (size_t)r;
        return r;
    }
}

/* One line without its \r\n: 1, or 0 at end of stream, -1 on error. */
static int srv_line(conn_t *c, char *out, size_t max)
{
    for (;;) {
        const char *crlf = memmem(c->buf + c->off, c->len - c->off, "\r\n", 2);
        if (crlf != NULL) {
            size_t n = (size_t)(crlf - (c->buf + c->off));
            if (n >= max)
                return -1;
            memcpy(out, c->buf + c->off, n);
            out[n] = '\0';
            c->off += n + 2;
            return 1;
        }
        ssize_t r = srv_fill(c);
        if (r <= 0)
            return r == 0 ? 0 : -1;
    }
}

static int srv_body(conn_t *c, uint64_t n, fake_req_t *r)
{
    while (n > 0) {
        if (c->off == c->len && srv_fill(c) <= 0)
            return -1;
        size_t k = c->len - c->off;
        if (k > n)
            k = (size_t)n;
        const char *p = c->buf + c->off;
        if (r->rec.kept < FAKE_BODY_KEEP) {
            size_t keep = FAKE_BODY_KEEP - r->rec.kept < k ? FAKE_BODY_KEEP - r->rec.kept : k;
            memcpy(r->body + r->rec.kept, p, keep);
            r->rec.kept += (uint32_t)keep;
        }
        r->rec.body_hash = fnv1a(r->rec.body_hash, p, k);
        r->rec.body_len += k;
        c->off += k;
        n -= k;
    }
    return 0;
}

/* Read one request: 1, or 0 when the client closed between requests, -1 on error. */
static int srv_request(conn_t *c, fake_req_t *r)
{
    memset(&r->rec, 0, sizeof r->rec);
    r->rec.conn = c->id;
    r->rec.body_hash = FNV_START;
    r->head[0] = '\0';
    size_t hl = 0;
    char line[FAKE_HEAD_MAX];
    for (;;) {
        int g = srv_line(c, line, sizeof line);
        if (g <= 0)
            return hl == 0 && g == 0 ? 0 : -1;
        size_t ll = strlen(line);
        if (hl + ll + 2 >= sizeof r->head)
            return -1;
        memcpy(r->head + hl, line, ll);
        memcpy(r->head + hl + ll, "\r\n", 3);
        hl += ll + 2;
        if (ll == 0 && hl > 2)
            break;
    }
    r->rec.head_len = (uint32_t)hl;
    char v[64];
    if (head_value(r->head, "Transfer-Encoding", v, sizeof v) && strcasecmp(v, "chunked") == 0) {
        r->rec.chunked = 1;
        for (;;) {
            if (srv_line(c, line, sizeof line) != 1)
                return -1;
            char *end;
            errno = 0;
            unsigned long long n = strtoull(line, &end, 16);
            if (end == line || errno != 0 || (*end != '\0' && *end != ';'))
                return -1;
            if (n == 0)
                break;
            if (srv_body(c, n, r) < 0 || srv_line(c, line, sizeof line) != 1 || line[0] != '\0')
                return -1;
        }
        do { /* trailers, up to the empty line */
            if (srv_line(c, line, sizeof line) != 1)
                return -1;
        } while (line[0] != '\0');
    } else if (head_value(r->head, "Content-Length", v, sizeof v)) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (end == v || *end != '\0' || errno != 0 || srv_body(c, n, r) < 0)
            return -1;
    }
    r->body[r->rec.kept] = '\0';
    return 1;
}

static void srv_log(const fake_req_t *r)
{
    if (pybox_write_all(srv.log_fd, &r->rec, sizeof r->rec) < 0 ||
        pybox_write_all(srv.log_fd, r->head, r->rec.head_len) < 0 ||
        pybox_write_all(srv.log_fd, r->body, r->rec.kept) < 0)
        srv_exit(2);
}

/* Answer one request; returns 0 to keep the connection, -1 to close it. */
static int srv_answer(conn_t *c, const fake_step_t *st, const fake_req_t *r)
{
    static const fake_step_t bad_body = {.status = "400 Bad Request",
                                         .headers = "Content-Type: application/json\r\n",
                                         .body = "{\"message\":\"fake engine: unexpected request body length\"}\n"};
    if (st->kind == FAKE_HANGUP)
        return -1;
    if (st->delay_ms > 0)
        poll(NULL, 0, st->delay_ms);
    if (st->check_body && r->rec.body_len != st->expect_body)
        st = &bad_body;
    if (st->kind == FAKE_BIG || st->kind == FAKE_HUGE_HEAD) {
        char block[65536];
        pybox_buf_t h;
        pybox_buf_init(&h, 0);
        if (st->kind == FAKE_BIG)
            pybox_buf_addf(&h, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n\"",
                           st->big);
        else
            pybox_buf_adds(&h, "HTTP/1.1 101 UPGRADED\r\n");
        int rc = srv_send(c->fd, h.data, h.len);
        pybox_buf_free(&h);
        size_t left = st->kind == FAKE_BIG ? st->big - 2 : st->big;
        if (st->kind == FAKE_BIG) {
            memset(block, 'a', sizeof block);
        } else {
            /* Header lines, every one complete, none of them the last. */
            for (size_t i = 0; i < sizeof block; i += 64) {
                memcpy(block + i, "X-Pad: ", 7);
                memset(block + i + 7, 'p', 55);
                memcpy(block + i + 62, "\r\n", 2);
            }
        }
        while (rc == 0 && left > 0) {
            size_t k = left < sizeof block ? left : sizeof block;
            rc = srv_send(c->fd, block, k);
            left -= k;
        }
        if (rc == 0 && st->kind == FAKE_BIG)
            rc = srv_send(c->fd, "\"", 1);
        return rc == 0 && st->kind == FAKE_BIG ? 0 : -1;
    }
    if (st->raw[0] != NULL) {
        for (size_t i = 0; i < sizeof st->raw / sizeof st->raw[0] && st->raw[i] != NULL; i++) {
            if (i > 0)
                srv_drained(c->fd);
            if (srv_send(c->fd, st->raw[i], strlen(st->raw[i])) < 0)
                return -1;
        }
    } else {
        pybox_buf_t out;
        pybox_buf_init(&out, 0);
        const char *body = st->body ? st->body : "";
        pybox_buf_addf(&out, "HTTP/1.1 %s\r\n%s", st->status, st->headers ? st->headers : "");
        if (st->close_after)
            pybox_buf_adds(&out, "Connection: close\r\n");
        if (st->chunked)
            pybox_buf_adds(&out, "Transfer-Encoding: chunked\r\n\r\n");
        else
            pybox_buf_addf(&out, "Content-Length: %zu\r\n\r\n", strlen(body));
        size_t head_len = out.len;
        if (!st->chunked)
            pybox_buf_adds(&out, body);
        int rc;
        if (st->split_body) {
            rc = srv_send(c->fd, out.data, head_len);
            srv_drained(c->fd);
            if (rc == 0)
                rc = srv_send(c->fd, out.data + head_len, out.len - head_len);
        } else {
            rc = srv_send(c->fd, out.data, out.len);
        }
        pybox_buf_free(&out);
        /* A chunked body goes one line per chunk, each in its own write. */
        for (const char *p = body; rc == 0 && st->chunked && *p != '\0';) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
            char size_line[32];
            snprintf(size_line, sizeof size_line, "%zx\r\n", n);
            pybox_buf_t ch;
            pybox_buf_init(&ch, 0);
            pybox_buf_adds(&ch, size_line);
            pybox_buf_add(&ch, p, n);
            pybox_buf_adds(&ch, "\r\n");
            rc = srv_send(c->fd, ch.data, ch.len);
            pybox_buf_free(&ch);
            p += n;
        }
        if (rc == 0 && st->chunked)
            rc = srv_send(c->fd, "0\r\n\r\n", 5);
        if (rc < 0)
            return -1;
    }
    if (st->kind != FAKE_UPGRADE)
        return st->close_after ? -1 : 0;
    /* The upgraded stream: more output once the test has looked at the first, then
     * whatever the client sends, echoed after its half-close. */
    char go;
    srv_wait(srv.go_fd, POLLIN, -1);
    if (read(srv.go_fd, &go, 1) != 1)
        srv_exit(0);
    if (st->later != NULL && srv_send(c->fd, st->later, strlen(st->later)) < 0)
        return -1;
    pybox_buf_t in;
    pybox_buf_init(&in, 4096);
    pybox_buf_adds(&in, "echo:");
    for (;;) {
        if (c->off < c->len && pybox_buf_append(&in, c->buf + c->off, c->len - c->off) < 0)
            break;
        c->off = c->len;
        if (srv_fill(c) <= 0)
            break;
    }
    if (srv_send(c->fd, in.data, in.len) < 0) {
        pybox_buf_free(&in);
        return -1;
    }
    pybox_buf_free(&in);
    return -1;
}

static _Noreturn void srv_main(int ready_fd)
{
    static const fake_step_t unscripted = {.status = "500 Internal Server Error",
                                           .headers = "Content-Type: application/json\r\n",
                                           .body = "{\"message\":\"fake engine: no scripted answer\"}\n"};
    signal(SIGPIPE, SIG_IGN);
    alarm(120); /* a last resort only: the lifeline ends the server first */
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, fake.sock, strlen(fake.sock) + 1);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 16) < 0)
        srv_exit(2);
    if (write(ready_fd, "r", 1) != 1)
        srv_exit(2);
    close(ready_fd);
    size_t nconn = 0, step = 0;
    uint32_t next_id = 0;
    for (;;) {
        struct pollfd p[2 + FAKE_CONNS_MAX];
        p[0] = (struct pollfd){.fd = srv.life_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (size_t i = 0; i < nconn; i++)
            p[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        if (poll(p, 2 + nconn, -1) < 0) {
            if (errno == EINTR)
                continue;
            srv_exit(2);
        }
        if (p[0].revents != 0)
            srv_exit(0);
        for (size_t i = 0; i < nconn; i++) {
            if (p[2 + i].revents == 0)
                continue;
            conn_t *c = &conns[i];
            for (;;) {
                static fake_req_t req;
                int g = srv_request(c, &req);
                if (g <= 0) {
                    close(c->fd);
                    c->fd = -1;
                    break;
                }
                srv_log(&req);
                const fake_step_t *st = step < fake.nsteps ? &fake.steps[step++] : &unscripted;
                if (srv_answer(c, st, &req) < 0) {
                    close(c->fd);
                    c->fd = -1;
                    break;
                }
                if (c->off == c->len)
                    break; /* nothing pipelined: back to waiting on all */
            }
        }
        size_t k = 0;
        for (size_t i = 0; i < nconn; i++)
            if (conns[i].fd >= 0)
                conns[k++] = conns[i];
        nconn = k;
        if ((p[1].revents & POLLIN) && nconn < FAKE_CONNS_MAX) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd >= 0) {
                conns[nconn].fd = cfd;
                conns[nconn].id = next_id++;
                conns[nconn].off = conns[nconn].len = 0;
                nconn++;
            }
        }
    }
}

static void fake_add(fake_step_t st)
{
    ck_assert_uint_lt(fake.nsteps, FAKE_STEPS_MAX);
    fake.steps[fake.nsteps++] = st;
}

/* The engine's answer to GET /_ping: the API version in a header, "OK" as the body. */
#define PING_OK "Api-Version: 1.41\r\nServer: Docker/20.10.24 (linux)\r\nContent-Type: text/plain; charset=utf-8\r\n"

static void fake_add_ping(const char *headers, bool close_after)
{
    fake_add((fake_step_t){.status = "200 OK", .headers = headers, .body = "OK", .close_after = close_after});
}

static void fake_add_version(void)
{
    fake_add_ping(PING_OK, false);
}

static void fake_add_json(const char *status, const char *body)
{
    fake_add((fake_step_t){.status = status, .headers = "Content-Type: application/json\r\n", .body = body});
}

/* Fork the server with the script so far; returns once its socket accepts. */
static void fake_start(void)
{
    int ready[2], logp[2], go[2], life[2];
    ck_assert(pipe2(ready, O_CLOEXEC) == 0 && pipe2(logp, O_CLOEXEC) == 0);
    ck_assert(pipe2(go, O_CLOEXEC) == 0 && pipe2(life, O_CLOEXEC) == 0);
    /* Room for every record of a test, so the server never blocks on an unread log. */
    (void)fcntl(logp[1], F_SETPIPE_SZ, 1 << 20);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Out of the test's process group: Check kills that group as soon as a test
         * ends, which after a failure would leave the socket and directory behind. */
        setpgid(0, 0);
        close(ready[0]);
        close(logp[0]);
        close(go[1]);
        close(life[1]);
        srv.log_fd = logp[1];
        srv.go_fd = go[0];
        srv.life_fd = life[0];
        srv_main(ready[1]);
    }
    fake.pid = pid;
    close(ready[1]);
    close(logp[1]);
    close(go[0]);
    close(life[0]);
    fake.log_fd = logp[0];
    fake.go_fd = go[1];
    fake.life_fd = life[1];
    struct pollfd p = {.fd = ready[0], .events = POLLIN};
    char b = 0;
    ck_assert_msg(poll(&p, 1, FAKE_WAIT_MS) == 1 && read(ready[0], &b, 1) == 1 && b == 'r',
                  "the fake engine did not start");
    close(ready[0]);
}

/* Kill the server (the socket file stays until teardown). */
static void fake_kill(void)
{
    if (fake.pid > 0) {
        kill(fake.pid, SIGKILL);
        waitpid(fake.pid, NULL, 0);
        fake.pid = -1;
    }
}

static void fake_go(void)
{
    ck_assert_int_eq(write(fake.go_fd, "g", 1), 1);
}

static void read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        ck_assert_msg(poll(&pf, 1, FAKE_WAIT_MS) == 1, "no request record from the fake engine");
        ssize_t r = read(fd, p, len);
        ck_assert_msg(r > 0, "the fake engine's request log ended");
        p += r;
        len -= (size_t)r;
    }
}

/* The next request the server saw. */
static void fake_request(fake_req_t *r)
{
    read_full(fake.log_fd, &r->rec, sizeof r->rec);
    ck_assert_uint_lt(r->rec.head_len, sizeof r->head);
    ck_assert_uint_le(r->rec.kept, FAKE_BODY_KEEP);
    read_full(fake.log_fd, r->head, r->rec.head_len);
    r->head[r->rec.head_len] = '\0';
    read_full(fake.log_fd, r->body, r->rec.kept);
    r->body[r->rec.kept] = '\0';
}

static void expect_line(const fake_req_t *r, const char *line)
{
    size_t n = strlen(line);
    ck_assert_msg(strncmp(r->head, line, n) == 0 && r->head[n] == '\r', "expected \"%s\", the request was: %.300s",
                  line, r->head);
}

static void expect_header(const fake_req_t *r, const char *name, const char *value)
{
    char v[256];
    ck_assert_msg(head_value(r->head, name, v, sizeof v) != NULL, "no %s header in: %.500s", name, r->head);
    ck_assert_str_eq(v, value);
}

/* No request beyond those the test read: the log has nothing more right now. */
static void expect_no_more_requests(void)
{
    struct pollfd p = {.fd = fake.log_fd, .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 0), 0);
}

static pybox_engine_t *open_fake(void)
{
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_open(fake.host, &e, &err) == 0, "open: %s", err.msg);
    ck_assert_ptr_nonnull(e);
    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "GET /_ping HTTP/1.1");
    return e;
}

static void setup(void)
{
    unsetenv("DOCKER_HOST");
    unsetenv("PYBOX_ENGINE_CONTACT_TIMEOUT_S");
    memset(fake.steps, 0, sizeof fake.steps);
    fake.nsteps = 0;
    /* Not $TMPDIR: the socket's path has to fit in a sockaddr_un. */
    ck_assert(pybox_fmt(fake.dir, sizeof fake.dir, "/tmp/pybox-engine-test-XXXXXX") == 0);
    ck_assert_ptr_nonnull(mkdtemp(fake.dir));
    ck_assert(pybox_fmt(fake.sock, sizeof fake.sock, "%s/engine.sock", fake.dir) == 0);
    ck_assert(pybox_fmt(fake.host, sizeof fake.host, "unix://%s", fake.sock) == 0);
}

/* Runs after a passing test only: after a failing one the test process is gone, and
 * the server, seeing its lifeline close, removes the socket and directory itself. */
static void teardown(void)
{
    fake_kill();
    int *fds[] = {&fake.log_fd, &fake.go_fd, &fake.life_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    unlink(fake.sock);
    rmdir(fake.dir);
}

static void expect_open_fails(pybox_error_kind_t kind, const char *needle)
{
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_msg(err.kind == kind, "kind %s, message: %s", pybox_error_kind_name(err.kind), err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "\"%s\" not in: %s", needle, err.msg);
}

/* ---- opening: version negotiation and DOCKER_HOST ---- */

START_TEST(t_open_negotiates)
{
    fake_add_version();
    fake_add_json("200 OK", "[]");
    fake_add_json("200 OK", "{\"Id\":\"c1\"}");
    fake_start();
    pybox_engine_t *e = open_fake();
    ck_assert_ptr_nonnull(strstr(pybox_engine_version(e), "20.10.24"));
    ck_assert_str_eq(pybox_engine_socket(e), fake.sock);

    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/containers/json?all=1", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 200);
    ck_assert(cJSON_IsArray(reply) && cJSON_GetArraySize(reply) == 0);
    cJSON_Delete(reply);
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/containers/c1/json", NULL, &status, &reply, &err), 0);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(reply, "Id")->valuestring, "c1");
    cJSON_Delete(reply);

    fake_req_t r1, r2;
    fake_request(&r1);
    fake_request(&r2);
    expect_line(&r1, "GET /v1.41/containers/json?all=1 HTTP/1.1");
    expect_line(&r2, "GET /v1.41/containers/c1/json HTTP/1.1");
    /* One engine keeps one connection alive across requests. */
    ck_assert_uint_eq(r1.rec.conn, 0);
    ck_assert_uint_eq(r2.rec.conn, 0);
    expect_no_more_requests();
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_open_newer_engine)
{
    /* An engine newer than PyBox still speaks PyBox's API: requests stay on /v1.41. */
    fake_add_ping("Api-Version: 1.45\r\nServer: Docker/26.1.0 (linux)\r\n", false);
    fake_add((fake_step_t){.status = "204 No Content"});
    fake_start();
    pybox_engine_t *e = open_fake();
    ck_assert_ptr_nonnull(strstr(pybox_engine_version(e), "26.1.0"));
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "POST", "/containers/x/start", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 204);
    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "POST /v1.41/containers/x/start HTTP/1.1");
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_open_long_server_name)
{
    /* A Server header as long as the field PyBox keeps: the version is cut, never the API
     * it speaks, which the receipt names. */
    fake_add_ping("Api-Version: 1.41\r\nServer: Docker is too new. Maximum supported API version is 1.41 ok\r\n",
                  false);
    fake_start();
    pybox_engine_t *e = open_fake();
    const char *v = pybox_engine_version(e);
    size_t n = strlen(v);
    ck_assert_msg(n >= 10 && strcmp(v + n - 10, "(API 1.41)") == 0, "version: %s", v);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_open_engine_too_old)
{
    fake_add_ping("Api-Version: 1.40\r\nServer: Docker/19.03.15 (linux)\r\n", false);
    fake_start();
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    /* Both versions named: what the engine speaks and what PyBox needs. */
    ck_assert_msg(strstr(err.msg, "1.40") != NULL && strstr(err.msg, "1.41") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(t_open_engine_min_too_new)
{
    /* An engine too new for API 1.41 says so on the first versioned request; its own
     * words reach the error. */
    fake_add_ping("Api-Version: 1.46\r\nServer: Docker/99.0.0 (linux)\r\n", false);
    fake_add_json("400 Bad Request", "{\"message\":\"client version 1.41 is too old. Minimum supported API version is "
                                     "1.44, please upgrade your client to a newer version\"}");
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/containers/json", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 400);
    pybox_engine_fail(&err, "GET /containers/json", status, reply);
    ck_assert_ptr_nonnull(strstr(err.msg, "Minimum supported API version is 1.44"));
    cJSON_Delete(reply);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_open_no_api_version)
{
    fake_add_ping("Server: Docker/20.10.24 (linux)\r\n", false);
    fake_start();
    expect_open_fails(PYBOX_ERR_PROTOCOL, "Api-Version");
}
END_TEST

START_TEST(t_open_version_not_json)
{
    fake_add((fake_step_t){.status = "200 OK", .headers = "Content-Type: text/html\r\n", .body = "<html>hi</html>"});
    fake_start();
    expect_open_fails(PYBOX_ERR_PROTOCOL, "Api-Version");
}
END_TEST

START_TEST(t_open_version_error)
{
    fake_add_json("500 Internal Server Error", "{\"message\":\"the daemon is still starting\"}");
    fake_start();
    expect_open_fails(PYBOX_ERR_ENGINE, "the daemon is still starting");
}
END_TEST

START_TEST(t_host_tcp_refused)
{
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open("tcp://1.2.3.4:2375", &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "unix://"));

    /* The same from the environment; the bytes shown back are escaped. */
    ck_assert_int_eq(setenv("DOCKER_HOST", "tcp://\x1b[2Jevil:2375", 1), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_engine_open(NULL, &e, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "unix://"));
    ck_assert_ptr_null(strchr(err.msg, '\x1b'));
}
END_TEST

START_TEST(t_host_relative_refused)
{
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open("unix://sock", &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);

    /* A path that does not fit a socket address is refused, never cut short. */
    char host[300] = "unix:///";
    memset(host + 8, 'd', sizeof host - 9);
    host[sizeof host - 1] = '\0';
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_engine_open(host, &e, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
}
END_TEST

START_TEST(t_host_from_env)
{
    fake_add_version();
    fake_start();
    ck_assert_int_eq(setenv("DOCKER_HOST", fake.host, 1), 0);
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_open("", &e, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(pybox_engine_socket(e), fake.sock);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_host_nobody_answers)
{
    /* Nothing at the path at all. */
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_msg(strstr(err.msg, "is not there") != NULL && strstr(err.msg, fake.sock) != NULL, "%s", err.msg);

    /* A socket file whose owner does not listen. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, fake.sock, strlen(fake.sock) + 1);
    ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(fd);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_int_eq(err.errnum, ECONNREFUSED);
    ck_assert_ptr_nonnull(strstr(err.msg, "no container engine answers"));
}
END_TEST

/* A socket that takes connections and never answers: the first contact gives up within
 * its own bound and says so, naming the socket. */
START_TEST(t_host_never_answers)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, fake.sock, strlen(fake.sock) + 1);
    ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 8) == 0);
    ck_assert_int_eq(setenv("PYBOX_ENGINE_CONTACT_TIMEOUT_S", "0.2", 1), 0);
    pybox_engine_t *e = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_int_eq(err.errnum, ETIMEDOUT);
    ck_assert_msg(strstr(err.msg, "does not answer") != NULL && strstr(err.msg, fake.sock) != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "PYBOX_ENGINE_CONTACT_TIMEOUT_S") != NULL, "%s", err.msg);
    close(fd);
}
END_TEST

START_TEST(t_contact_timeout_setting)
{
    static const char *const bad[] = {"abc", "0", "0.05", "301", "-1", "5s", "\x1b[2J"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(setenv("PYBOX_ENGINE_CONTACT_TIMEOUT_S", bad[i], 1), 0);
        pybox_engine_t *e = NULL;
        pybox_error_t err = {0};
        ck_assert_int_eq(pybox_engine_open(fake.host, &e, &err), -1);
        ck_assert_ptr_null(e);
        ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "%s: %s", bad[i], err.msg);
        ck_assert_msg(strstr(err.msg, "PYBOX_ENGINE_CONTACT_TIMEOUT_S") != NULL, "%s", err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\x1b'));
    }
}
END_TEST

/* Only the first contact gets the short bound: a later request may take longer. */
START_TEST(t_contact_bound_first_only)
{
    fake_add_version();
    fake_add((fake_step_t){.status = "200 OK",
                           .headers = "Content-Type: application/json\r\n",
                           .body = "{\"slow\":true}",
                           .delay_ms = 1000});
    fake_start();
    ck_assert_int_eq(setenv("PYBOX_ENGINE_CONTACT_TIMEOUT_S", "0.1", 1), 0);
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(status, 200);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "slow")));
    cJSON_Delete(reply);
    pybox_engine_free(e);
}
END_TEST

/* ---- requests ---- */

START_TEST(t_call_post_json)
{
    fake_add_version();
    fake_add_json("201 Created", "{\"Id\":\"abc123\",\"Warnings\":[]}");
    fake_start();
    pybox_engine_t *e = open_fake();
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "Image", "pybox-std");
    cJSON *cmd = cJSON_AddArrayToObject(body, "Cmd");
    cJSON_AddItemToArray(cmd, cJSON_CreateString("python3"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("-"));
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "POST", "/containers/create?name=x", body, &status, &reply, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(status, 201);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(reply, "Id")->valuestring, "abc123");
    cJSON_Delete(reply);

    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "POST /v1.41/containers/create?name=x HTTP/1.1");
    expect_header(&r, "Content-Type", "application/json");
    char len[32];
    snprintf(len, sizeof len, "%llu", (unsigned long long)r.rec.body_len);
    expect_header(&r, "Content-Length", len);
    cJSON *got = cJSON_ParseWithLength(r.body, r.rec.kept);
    ck_assert_msg(got != NULL, "the body is not JSON: %s", r.body);
    ck_assert(cJSON_Compare(got, body, true));
    cJSON_Delete(got);
    cJSON_Delete(body);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_error_json)
{
    fake_add_version();
    fake_add_json("404 Not Found", "{\"message\":\"No such container: abc\"}");
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/containers/abc/json", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 404);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
    ck_assert_int_eq(pybox_engine_fail(&err, "reading the box back", status, reply), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_msg(strstr(err.msg, "No such container: abc") != NULL && strstr(err.msg, "404") != NULL, "%s", err.msg);
    cJSON_Delete(reply);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_error_text)
{
    fake_add_version();
    fake_add((fake_step_t){
        .status = "502 Bad Gateway", .headers = "Content-Type: text/plain\r\n", .body = "upstream went away \xff\n"});
    char longtext[2049];
    memset(longtext, 'x', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    fake_add((fake_step_t){.status = "500 Internal Server Error", .body = longtext});
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 502);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");
    ck_assert(cJSON_IsString(m));
    ck_assert_ptr_nonnull(strstr(m->valuestring, "upstream went away"));
    /* Carried as data, so it must be valid UTF-8 whatever the engine sent. */
    ck_assert(pybox_utf8_valid(m->valuestring, strlen(m->valuestring)));
    pybox_engine_fail(&err, "GET /info", status, reply);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_ptr_nonnull(strstr(err.msg, "upstream went away"));
    cJSON_Delete(reply);

    ck_assert_int_eq(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 500);
    m = cJSON_GetObjectItemCaseSensitive(reply, "message");
    ck_assert(cJSON_IsString(m));
    ck_assert_uint_eq(strlen(m->valuestring), 512); /* bounded, not the whole page */
    cJSON_Delete(reply);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_ok_not_json)
{
    fake_add_version();
    fake_add((fake_step_t){.status = "200 OK", .headers = "Content-Type: text/html\r\n", .body = "<html>ok</html>"});
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *sentinel = cJSON_CreateNull();
    cJSON *reply = sentinel; /* must not survive the call */
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err), -1);
    ck_assert_ptr_null(reply);
    cJSON_Delete(sentinel);
    ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_empty_204)
{
    fake_add_version();
    fake_add((fake_step_t){.status = "204 No Content"});
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *sentinel = cJSON_CreateNull();
    cJSON *reply = sentinel;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "DELETE", "/containers/x?force=1", NULL, &status, &reply, &err), 0);
    ck_assert_int_eq(status, 204);
    ck_assert_ptr_null(reply);
    cJSON_Delete(sentinel);
    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "DELETE /v1.41/containers/x?force=1 HTTP/1.1");
    ck_assert_uint_eq(r.rec.body_len, 0);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_reply_bounded)
{
    fake_add_version();
    fake_add((fake_step_t){.kind = FAKE_BIG, .big = PYBOX_ENGINE_REPLY_MAX});
    fake_add((fake_step_t){.kind = FAKE_BIG, .big = PYBOX_ENGINE_REPLY_MAX + 1});
    fake_add_json("200 OK", "{\"after\":true}");
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    /* Exactly at the limit: accepted. */
    ck_assert_msg(pybox_engine_call(e, "GET", "/big", NULL, &status, &reply, &err) == 0, "%s", err.msg);
    ck_assert(cJSON_IsString(reply));
    ck_assert_uint_eq(strlen(reply->valuestring), PYBOX_ENGINE_REPLY_MAX - 2);
    cJSON_Delete(reply);
    /* One byte over: refused, not kept. */
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/bigger", NULL, &status, &reply, &err), -1);
    ck_assert_ptr_null(reply);
    ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(err.msg, "larger than"));
    /* The engine is still usable afterwards (on a new connection). */
    pybox_error_clear(&err);
    ck_assert_msg(pybox_engine_call(e, "GET", "/after", NULL, &status, &reply, &err) == 0, "%s", err.msg);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "after")));
    cJSON_Delete(reply);
    fake_req_t r;
    fake_request(&r);
    fake_request(&r);
    expect_line(&r, "GET /v1.41/bigger HTTP/1.1");
    uint32_t big_conn = r.rec.conn;
    fake_request(&r);
    expect_line(&r, "GET /v1.41/after HTTP/1.1");
    ck_assert_uint_ne(r.rec.conn, big_conn);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_reconnects)
{
    /* The engine closes after /_ping: the next request goes on a new connection. */
    fake_add_ping(PING_OK, true);
    fake_add_json("200 OK", "{\"n\":1}");
    fake_add_json("200 OK", "{\"n\":2}");
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    for (int i = 1; i <= 2; i++) {
        ck_assert_msg(pybox_engine_call(e, "GET", "/n", NULL, &status, &reply, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(reply, "n")->valueint, i);
        cJSON_Delete(reply);
    }
    fake_req_t r1, r2;
    fake_request(&r1);
    fake_request(&r2);
    ck_assert_uint_eq(r1.rec.conn, 1);
    ck_assert_uint_eq(r2.rec.conn, 1);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_hangup)
{
    /* A fresh connection that the engine closes unanswered (a reused one libcurl may
     * retry on its own, which would hide the answer under test). */
    fake_add_ping(PING_OK, true);
    fake_add((fake_step_t){.kind = FAKE_HANGUP});
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err), -1);
    ck_assert_ptr_null(reply);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "GET /v1.41/info HTTP/1.1");
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_call_engine_gone)
{
    fake_add_version();
    fake_start();
    pybox_engine_t *e = open_fake();
    fake_kill();
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_call(e, "GET", "/info", NULL, &status, &reply, &err), -1);
    ck_assert_ptr_null(reply);
    ck_assert_int_eq(err.kind, PYBOX_ERR_ENGINE);
    ck_assert_ptr_nonnull(strstr(err.msg, fake.sock));
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_escape)
{
    fake_add_version();
    fake_start();
    pybox_engine_t *e = open_fake();
    char *s = pybox_engine_escape(e, "a b&c=d/\xc3\xa9");
    ck_assert_str_eq(s, "a%20b%26c%3Dd%2F%C3%A9");
    free(s);
    pybox_engine_free(e);
}
END_TEST

/* ---- raw replies and uploads ---- */

#define PULL_LINES "{\"status\":\"Pulling from library/python\"}\n{\"status\":\"Downloading\",\"progress\":\"1/2\"}\n"

START_TEST(t_call_raw_chunked)
{
    fake_add_version();
    fake_add((fake_step_t){.status = "200 OK",
                           .headers = "Content-Type: application/json\r\n",
                           .body = PULL_LINES "{\"status\":\"Done\"}\n",
                           .chunked = true});
    fake_add((fake_step_t){.status = "200 OK", .body = PULL_LINES, .chunked = true});
    fake_start();
    pybox_engine_t *e = open_fake();
    long status = 0;
    pybox_error_t err = {0};
    pybox_buf_t b;
    pybox_buf_init(&b, PYBOX_ENGINE_REPLY_MAX);
    ck_assert_msg(pybox_engine_call_raw(e, "POST", "/images/create?fromImage=python", NULL, &status, &b, &err) == 0,
                  "%s", err.msg);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(b.len, strlen(PULL_LINES "{\"status\":\"Done\"}\n"));
    ck_assert_str_eq(b.data, PULL_LINES "{\"status\":\"Done\"}\n");
    pybox_buf_free(&b);
    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "POST /v1.41/images/create?fromImage=python HTTP/1.1");
    ck_assert_uint_eq(r.rec.body_len, 0);

    /* The caller's bound holds for raw replies too. */
    pybox_buf_init(&b, 16);
    ck_assert_int_eq(pybox_engine_call_raw(e, "GET", "/events", NULL, &status, &b, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_PROTOCOL);
    ck_assert_uint_le(b.len, 16);
    pybox_buf_free(&b);
    pybox_engine_free(e);
}
END_TEST

START_TEST(t_upload_file)
{
    const size_t size = 1024 * 1024;
    fake_add_version();
    fake_add((fake_step_t){.status = "200 OK",
                           .headers = "Content-Type: application/json\r\n",
                           .body = "{\"status\":\"Loading\"}\n{\"status\":\"sha256:0123abcd\"}\n",
                           .chunked = true,
                           .check_body = true,
                           .expect_body = size});
    fake_start();
    pybox_engine_t *e = open_fake();

    char path[sizeof fake.dir + 16];
    ck_assert(pybox_fmt(path, sizeof path, "%s/upXXXXXX", fake.dir) == 0);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    /* Varied bytes, so that a lost or repeated block changes the hash. */
    unsigned char *data = malloc(size);
    ck_assert_ptr_nonnull(data);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data[i] = (unsigned char)x;
    }
    ck_assert_int_eq(pybox_write_all(fd, data, size), 0);
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    uint64_t want_hash = fnv1a(FNV_START, data, size);
    free(data);

    long status = 0;
    pybox_error_t err = {0};
    pybox_buf_t b;
    pybox_buf_init(&b, PYBOX_ENGINE_REPLY_MAX);
    ck_assert_msg(pybox_engine_upload(e, "/images/load?quiet=1", fd, "application/x-tar", &status, &b, &err) == 0, "%s",
                  err.msg);
    close(fd);
    ck_assert_msg(status == 200, "HTTP %ld: %s", status, b.data ? b.data : "");
    ck_assert_str_eq(b.data, "{\"status\":\"Loading\"}\n{\"status\":\"sha256:0123abcd\"}\n");
    pybox_buf_free(&b);

    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "POST /v1.41/images/load?quiet=1 HTTP/1.1");
    expect_header(&r, "Content-Type", "application/x-tar");
    expect_header(&r, "Transfer-Encoding", "chunked");
    char v[64];
    /* No 100-continue round trip before the body. */
    ck_assert_ptr_null(head_value(r.head, "Expect", v, sizeof v));
    ck_assert_uint_eq(r.rec.chunked, 1);
    ck_assert_uint_eq(r.rec.body_len, size);
    ck_assert(r.rec.body_hash == want_hash);
    pybox_engine_free(e);
}
END_TEST

/* ---- attach: the upgraded raw stream ---- */

#define UPGRADED_HEAD                                                                                                  \
    "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\n"              \
    "Upgrade: tcp\r\n"
#define ATTACH_PATH "/containers/x/attach?stream=1&stdin=1&stdout=1&stderr=1"

/* Read from the stream once it has something, within the test's patience. */
static ssize_t read_ready(pybox_engine_stream_t *s, char *buf, size_t len)
{
    for (;;) {
        pybox_error_t err = {0};
        ssize_t n = pybox_engine_stream_read(s, buf, len, &err);
        if (n >= 0)
            return n;
        ck_assert_msg(errno == EAGAIN, "stream read: %s", err.msg);
        struct pollfd p = {.fd = pybox_engine_stream_fd(s), .events = POLLIN};
        ck_assert_msg(poll(&p, 1, FAKE_WAIT_MS) == 1, "nothing arrived on the stream");
    }
}

static void attach_round_trip(const char *first_part, const char *second_part)
{
    fake_add_version();
    fake_add((fake_step_t){.kind = FAKE_UPGRADE, .raw = {first_part, second_part}, .later = "later bytes"});
    fake_start();
    pybox_engine_t *e = open_fake();
    pybox_engine_stream_t *s = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_upgrade(e, ATTACH_PATH, &s, &err) == 0, "%s", err.msg);
    ck_assert_ptr_nonnull(s);
    int fd = pybox_engine_stream_fd(s);
    ck_assert_int_ge(fd, 0);

    fake_req_t r;
    fake_request(&r);
    expect_line(&r, "POST /v1.41" ATTACH_PATH " HTTP/1.1");
    expect_header(&r, "Upgrade", "tcp");
    expect_header(&r, "Connection", "Upgrade");
    ck_assert_uint_eq(r.rec.body_len, 0);

    /* The bytes that came with the headers are already read off the socket: they
     * must come first, from memory, in pieces as small as the caller asks. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 0), 0);
    char buf[256];
    ck_assert_int_eq(pybox_engine_stream_read(s, buf, 3, &err), 3);
    ck_assert(memcmp(buf, "fir", 3) == 0);
    ck_assert_int_eq(pybox_engine_stream_read(s, buf, sizeof buf, &err), 2);
    ck_assert(memcmp(buf, "st", 2) == 0);
    /* Nothing more until the test lets the server go on. */
    errno = 0;
    ck_assert_int_eq(pybox_engine_stream_read(s, buf, sizeof buf, &err), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);

    fake_go();
    ssize_t n = read_ready(s, buf, sizeof buf);
    ck_assert_int_eq(n, 11);
    ck_assert(memcmp(buf, "later bytes", 11) == 0);

    const char *in = "print(42)\n";
    size_t off = 0;
    while (off < strlen(in)) {
        ssize_t w = pybox_engine_stream_write(s, in + off, strlen(in) - off, &err);
        ck_assert_msg(w > 0, "stream write: %s", err.msg);
        off += (size_t)w;
    }
    /* The server echoes only once it sees end of file: the half-close must reach it
     * while the stream stays open for reading. */
    ck_assert_msg(pybox_engine_stream_close_write(s, &err) == 0, "%s", err.msg);
    pybox_buf_t got;
    pybox_buf_init(&got, 4096);
    for (;;) {
        n = read_ready(s, buf, sizeof buf);
        if (n == 0)
            break;
        ck_assert_int_eq(pybox_buf_append(&got, buf, (size_t)n), 0);
    }
    ck_assert_str_eq(got.data, "echo:print(42)\n");
    pybox_buf_free(&got);
    ck_assert_int_eq(pybox_engine_stream_read(s, buf, sizeof buf, &err), 0);
    pybox_engine_stream_free(s);
    pybox_engine_free(e);
}

START_TEST(t_upgrade_attach)
{
    /* Headers and the first output in one write. */
    attach_round_trip(UPGRADED_HEAD "\r\nfirst", NULL);
}
END_TEST

START_TEST(t_upgrade_attach_split_head)
{
    /* As dockerd writes it: the header lines, then the blank line on its own (here
     * together with the first output). */
    attach_round_trip(UPGRADED_HEAD, "\r\nfirst");
}
END_TEST

static void expect_upgrade_fails(pybox_error_kind_t kind, const char *needle)
{
    pybox_engine_t *e = open_fake();
    pybox_engine_stream_t *s = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_engine_upgrade(e, ATTACH_PATH, &s, &err), -1);
    ck_assert_ptr_null(s);
    ck_assert_msg(err.kind == kind, "kind %s, message: %s", pybox_error_kind_name(err.kind), err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "\"%s\" not in: %s", needle, err.msg);
    pybox_engine_free(e);
}

START_TEST(t_upgrade_refused)
{
    fake_add_version();
    fake_add_json("404 Not Found", "{\"message\":\"No such container: x\"}\n");
    fake_start();
    expect_upgrade_fails(PYBOX_ERR_ENGINE, "No such container: x");
}
END_TEST

START_TEST(t_upgrade_refused_body_later)
{
    /* The error's body in a later packet than its head. */
    fake_add_version();
    fake_add((fake_step_t){.status = "404 Not Found",
                           .headers = "Content-Type: application/json\r\n",
                           .body = "{\"message\":\"No such container: x\"}\n",
                           .split_body = true});
    fake_start();
    expect_upgrade_fails(PYBOX_ERR_ENGINE, "No such container: x");
}
END_TEST

START_TEST(t_upgrade_oversized_head)
{
    fake_add_version();
    fake_add((fake_step_t){.kind = FAKE_HUGE_HEAD, .big = 4 * PYBOX_DOCKER_ENGINE_HEADER_MAX});
    fake_start();
    expect_upgrade_fails(PYBOX_ERR_PROTOCOL, "oversized");
}
END_TEST

START_TEST(t_upgrade_hangup)
{
    fake_add_version();
    fake_add((fake_step_t){.kind = FAKE_HANGUP});
    fake_start();
    expect_upgrade_fails(PYBOX_ERR_ENGINE, "closed the connection");
}
END_TEST

START_TEST(t_upgrade_not_http)
{
    fake_add_version();
    fake_add((fake_step_t){.raw = {"SSH-2.0-OpenSSH_9.2\r\n\r\n"}});
    fake_start();
    expect_upgrade_fails(PYBOX_ERR_PROTOCOL, "not HTTP");
}
END_TEST

/* ---- pybox image rm: what the engine's replies say happened ---- */

#define RM_ID "sha256:1111111111111111111111111111111111111111111111111111111111111111"

static char rm_home[128];

static void rm_setup(void)
{
    setup();
    ck_assert(pybox_fmt(rm_home, sizeof rm_home, "/tmp/pybox-unit-image-XXXXXX") == 0);
    ck_assert_ptr_nonnull(mkdtemp(rm_home));
    ck_assert_int_eq(setenv("PYBOX_HOME", rm_home, 1), 0);
}

static void rm_teardown(void)
{
    unsetenv("PYBOX_HOME");
    unit_rm_tree(rm_home);
    teardown();
}

/* Pin image "x" as RM_ID, run pybox_image_remove against the script, and return what it
 * reported (the caller frees it). The pin is gone afterwards in every case. */
static char *image_rm(char *tag, size_t tag_len)
{
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
    pybox_pin_t pin;
    memset(&pin, 0, sizeof pin);
    snprintf(pin.name, sizeof pin.name, "x");
    snprintf(pin.backend, sizeof pin.backend, "docker");
    snprintf(pin.id, sizeof pin.id, "%s", RM_ID);
    pybox_sha256_hex("x", 1, pin.recipe_sha256);
    ck_assert_int_eq(pybox_pin_set(&st, &pin, &err), 0);
    snprintf(tag, tag_len, "pybox-x:%.12s", pin.recipe_sha256);
    fake_start();
    pybox_engine_t *e = open_fake();
    char *text = NULL;
    size_t len = 0;
    FILE *report = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(report);
    pybox_backend_t *be = NULL;
    ck_assert_int_eq(pybox_docker_backend_over(e, &be, &err), 0);
    const pybox_out_t out = {pybox_out_file, report};
    ck_assert_msg(pybox_image_remove(&st, be, "x", &out, &err) == 0, "%s", err.msg);
    fclose(report);
    pybox_backend_close(be);
    pybox_engine_free(e);
    ck_assert_int_eq(pybox_pin_get(&st, "docker", "x", &pin, &err), 0);
    return text;
}

static void expect_request(const char *method, const char *path)
{
    fake_req_t r;
    fake_request(&r);
    char line[256];
    snprintf(line, sizeof line, "%s /v1.41%s HTTP/1.1", method, path);
    expect_line(&r, line);
}

/* The last name of the image removed with it: the engine's reply to the untagging names
 * the image as deleted, and nothing more is asked. */
START_TEST(t_image_rm_last_name)
{
    fake_add_version();
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\",\"RepoTags\":[\"pybox-x:1\"]}");
    fake_add_json("200 OK", "[{\"Untagged\":\"pybox-x:1\"},{\"Deleted\":\"" RM_ID "\"},{\"Deleted\":\"sha256:22\"}]");
    char tag[64];
    char *said = image_rm(tag, sizeof tag);
    ck_assert_str_eq(said, "removed x (" RM_ID ")\n");
    free(said);
    char path[128];
    snprintf(path, sizeof path, "/images/%s/json", tag);
    expect_request("GET", path);
    snprintf(path, sizeof path, "/images/%s", tag);
    expect_request("DELETE", path);
    expect_no_more_requests();
}
END_TEST

/* Untagged, and the engine keeps the image for its other names: said so. */
START_TEST(t_image_rm_other_names)
{
    fake_add_version();
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\"}");
    fake_add_json("200 OK", "[{\"Untagged\":\"pybox-x:1\"}]");
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\",\"RepoTags\":[\"someone-else:latest\"]}");
    char tag[64];
    char *said = image_rm(tag, sizeof tag);
    ck_assert_str_eq(said, "forgot x; the engine keeps " RM_ID ": other names use it\n");
    free(said);
}
END_TEST

/* Untagged, no other name: the image is removed by its id. */
START_TEST(t_image_rm_by_id)
{
    fake_add_version();
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\"}");
    fake_add_json("200 OK", "[{\"Untagged\":\"pybox-x:1\"}]");
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\",\"RepoTags\":[]}");
    fake_add_json("200 OK", "[{\"Deleted\":\"" RM_ID "\"}]");
    char tag[64];
    char *said = image_rm(tag, sizeof tag);
    ck_assert_str_eq(said, "removed x (" RM_ID ")\n");
    free(said);
}
END_TEST

/* The image was already gone from the engine (its name too): not "kept". */
START_TEST(t_image_rm_already_gone)
{
    fake_add_version();
    fake_add_json("404 Not Found", "{\"message\":\"No such image: pybox-x:1\"}");
    fake_add_json("404 Not Found", "{\"message\":\"No such image: " RM_ID "\"}");
    char tag[64];
    char *said = image_rm(tag, sizeof tag);
    ck_assert_str_eq(said, "forgot x; the engine no longer has " RM_ID "\n");
    free(said);
}
END_TEST

/* The engine cannot say what names the image has: not claimed either way. */
START_TEST(t_image_rm_names_unknown)
{
    fake_add_version();
    fake_add_json("200 OK", "{\"Id\":\"" RM_ID "\"}");
    fake_add_json("200 OK", "[{\"Untagged\":\"pybox-x:1\"}]");
    fake_add_json("500 Internal Server Error", "{\"message\":\"disk on fire\"}");
    char tag[64];
    char *said = image_rm(tag, sizeof tag);
    ck_assert_str_eq(said, "forgot x; the engine keeps " RM_ID " as far as known: its names could not be read\n");
    free(said);
}
END_TEST

Suite *suite_engine(void)
{
    Suite *s = suite_create("engine");
    TCase *open = tcase_create("open");
    tcase_add_checked_fixture(open, setup, teardown);
    tcase_set_timeout(open, 30);
    tcase_add_test(open, t_open_negotiates);
    tcase_add_test(open, t_open_newer_engine);
    tcase_add_test(open, t_open_long_server_name);
    tcase_add_test(open, t_open_engine_too_old);
    tcase_add_test(open, t_open_engine_min_too_new);
    tcase_add_test(open, t_open_no_api_version);
    tcase_add_test(open, t_open_version_not_json);
    tcase_add_test(open, t_open_version_error);
    tcase_add_test(open, t_host_tcp_refused);
    tcase_add_test(open, t_host_relative_refused);
    tcase_add_test(open, t_host_from_env);
    tcase_add_test(open, t_host_nobody_answers);
    tcase_add_test(open, t_host_never_answers);
    tcase_add_test(open, t_contact_timeout_setting);
    tcase_add_test(open, t_contact_bound_first_only);
    suite_add_tcase(s, open);

    TCase *call = tcase_create("call");
    tcase_add_checked_fixture(call, setup, teardown);
    tcase_set_timeout(call, 30);
    tcase_add_test(call, t_call_post_json);
    tcase_add_test(call, t_call_error_json);
    tcase_add_test(call, t_call_error_text);
    tcase_add_test(call, t_call_ok_not_json);
    tcase_add_test(call, t_call_empty_204);
    tcase_add_test(call, t_call_reply_bounded);
    tcase_add_test(call, t_call_reconnects);
    tcase_add_test(call, t_call_hangup);
    tcase_add_test(call, t_call_engine_gone);
    tcase_add_test(call, t_escape);
    tcase_add_test(call, t_call_raw_chunked);
    tcase_add_test(call, t_upload_file);
    suite_add_tcase(s, call);

    TCase *up = tcase_create("upgrade");
    tcase_add_checked_fixture(up, setup, teardown);
    tcase_set_timeout(up, 30);
    tcase_add_test(up, t_upgrade_attach);
    tcase_add_test(up, t_upgrade_attach_split_head);
    tcase_add_test(up, t_upgrade_refused);
    tcase_add_test(up, t_upgrade_refused_body_later);
    tcase_add_test(up, t_upgrade_oversized_head);
    tcase_add_test(up, t_upgrade_hangup);
    tcase_add_test(up, t_upgrade_not_http);
    suite_add_tcase(s, up);

    TCase *rm = tcase_create("image-rm");
    tcase_add_checked_fixture(rm, rm_setup, rm_teardown);
    tcase_set_timeout(rm, 30);
    tcase_add_test(rm, t_image_rm_last_name);
    tcase_add_test(rm, t_image_rm_other_names);
    tcase_add_test(rm, t_image_rm_by_id);
    tcase_add_test(rm, t_image_rm_already_gone);
    tcase_add_test(rm, t_image_rm_names_unknown);
    suite_add_tcase(s, rm);
    return s;
}
