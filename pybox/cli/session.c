/* SPDX-License-Identifier: MIT */
/* pybox session open | close | list, and pybox exec --session: a session from the command
 * line (docs/sessions.md). No server lives between two commands, so `session open` leaves
 * a holder: a process of the user who opened the session, which keeps the session's box
 * (pybox/ahead.h) and serves its calls one at a time on a unix socket in the
 * installation's sessions folder (0700, the socket 0600), letting in only a peer of its
 * own user (SO_PEERCRED). The box's own clocks end it at its lifetime should the holder
 * die; `pybox cleanup` then removes the holder's files as any leftover. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../ahead.h"
#include "../bounds.h"
#include "../escape.h"
#include "../hooks.h"
#include "../limits.h"
#include "../mcp/server.h"
#include "../prepare.h"
#include "../receipt.h"
#include "../sign.h"
#include "../state.h"
#include "../util.h"
#include "cli.h"
#include "help.h"
#include "parse.h"

#define SESSIONS_DIR "sessions"
#define CLIENT_WAIT_MS 10000 /* how long the holder waits for a request's bytes */
#define OPEN_WAIT_MS 300000  /* how long session open waits for its holder's word */

static const struct option open_options[] = {PYBOX_CLI_VALUE("image", 'i'),  PYBOX_CLI_VALUE("timeout", 't'),
                                             PYBOX_CLI_VALUE("memory", 'm'), PYBOX_CLI_VALUE("pids", 'p'),
                                             PYBOX_CLI_VALUE("cpus", 'c'),   PYBOX_CLI_VALUE("backend", 'b'),
                                             PYBOX_CLI_VALUE("ttl", 'T'),    PYBOX_CLI_VALUE("idle", 'I'),
                                             PYBOX_CLI_FLAG("help", 'h'),    PYBOX_CLI_END};
static const struct option close_options[] = {PYBOX_CLI_FLAG("json", 'j'), PYBOX_CLI_VALUE("color", 'C'),
                                              PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};
static const struct option list_options[] = {PYBOX_CLI_FLAG("json", 'j'), PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};
static const struct option group_options[] = {PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};

typedef struct {
    const char *image, *backend;
    int64_t timeout_ms, memory_bytes, pids, nano_cpus, ttl_ms, idle_ms;
    bool timeout_given, json;
    pybox_color_t color;
} args_t;

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    args_t *a = ctx;
    switch (val) {
    case 'i':
        a->image = value;
        return 0;
    case 'b':
        a->backend = value;
        return 0;
    case 't':
        a->timeout_given = true;
        return pybox_cli_limit(PYBOX_LIMIT_TIMEOUT, value, &a->timeout_ms, ", e.g. --timeout 30", err);
    case 'm':
        return pybox_cli_limit(PYBOX_LIMIT_MEMORY, value, &a->memory_bytes, ", e.g. --memory 512", err);
    case 'p':
        return pybox_cli_limit(PYBOX_LIMIT_PIDS, value, &a->pids, "", err);
    case 'c':
        return pybox_cli_limit(PYBOX_LIMIT_CPUS, value, &a->nano_cpus, ", e.g. --cpus 0.5", err);
    case 'T': {
        char shown[96], most[PYBOX_NUM_MAX];
        pybox_escape_short(shown, sizeof shown, value, 64);
        if (pybox_parse_seconds_ms(value, &a->ttl_ms) < 0 || a->ttl_ms < 1000 ||
            a->ttl_ms > PYBOX_MCP_SESSION_TTL_MAX_MS)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--ttl %s: give seconds from 1 to %s", shown,
                                   pybox_fmt_fixed(most, PYBOX_MCP_SESSION_TTL_MAX_MS, 3));
        return 0;
    }
    case 'I': {
        char shown[96], least[PYBOX_NUM_MAX], most[PYBOX_NUM_MAX];
        pybox_escape_short(shown, sizeof shown, value, 64);
        if (pybox_parse_seconds_ms(value, &a->idle_ms) < 0 || a->idle_ms < PYBOX_MCP_SESSION_IDLE_MIN_MS ||
            a->idle_ms > PYBOX_MCP_SESSION_TTL_MAX_MS)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--idle %s: give seconds from %s to %s", shown,
                                   pybox_fmt_fixed(least, PYBOX_MCP_SESSION_IDLE_MIN_MS, 3),
                                   pybox_fmt_fixed(most, PYBOX_MCP_SESSION_TTL_MAX_MS, 3));
        return 0;
    }
    case 'j':
        a->json = true;
        return 0;
    case 'C':
        if (strcmp(value, "auto") == 0 || strcmp(value, "always") == 0 || strcmp(value, "never") == 0) {
            a->color = value[0] == 'a' && value[1] == 'u' ? PYBOX_COLOR_AUTO
                       : value[0] == 'a'                  ? PYBOX_COLOR_ALWAYS
                                                          : PYBOX_COLOR_NEVER;
            return 0;
        }
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--color: give auto, always or never");
    }
    return 0;
}

bool pybox_cli_session_id_valid(const char *id)
{
    return id != NULL && strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32;
}

/* <state>/sessions/<id><suffix>, or the folder itself with id NULL. */
static int session_path(const pybox_state_t *st, const char *id, const char *suffix, char *out, size_t len,
                        pybox_error_t *err)
{
    int rc = id == NULL ? pybox_fmt(out, len, "%s/%s", st->dir, SESSIONS_DIR)
                        : pybox_fmt(out, len, "%s/%s/%s%s", st->dir, SESSIONS_DIR, id, suffix);
    return rc < 0 ? pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "a session's path in the state directory") : 0;
}

static int socket_address(const pybox_state_t *st, const char *id, struct sockaddr_un *sa, pybox_error_t *err)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (session_path(st, id, ".sock", sa->sun_path, sizeof sa->sun_path, err) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG,
                               "the state directory's path is too long for a session's socket (at most %zu bytes)",
                               sizeof sa->sun_path - 50);
    return 0;
}

/* ---- the wire: a line of JSON, then as many bytes as it says ---- */

static int send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_head(int fd, cJSON *head, const void *body, size_t len)
{
    char *line = cJSON_PrintUnformatted(head);
    cJSON_Delete(head);
    int rc = line != NULL && send_all(fd, line, strlen(line)) == 0 && send_all(fd, "\n", 1) == 0 &&
                     (len == 0 || send_all(fd, body, len) == 0)
                 ? 0
                 : -1;
    free(line);
    return rc;
}

/* Up to len bytes from fd into buf, by deadline_ms (pybox_now_ms; -1: none): how many,
 * 0 at the peer's end, -1 when it failed, the deadline passed or a signal came to end the
 * process (pybox_interrupt_signal). */
static ssize_t recv_by(int fd, void *buf, size_t len, int64_t deadline_ms)
{
    for (;;) {
        if (pybox_interrupt_signal != 0)
            return -1;
        int64_t left = deadline_ms < 0 ? -1 : deadline_ms - pybox_now_ms();
        if (deadline_ms >= 0 && left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, left < 0 || left > 1000 ? 1000 : (int)left);
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        ssize_t r = recv(fd, buf, len, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return r;
    }
}

/* The first line (at most PYBOX_CLI_SESSION_HEAD_MAX bytes, its newline not counted), read a byte at a time
 * so that nothing after it is taken, into line (PYBOX_CLI_SESSION_HEAD_MAX + 1 bytes), by deadline_ms (-1:
 * none); its length, or -1 when the peer ended, failed or went past the deadline first or the line is
 * longer. */
static ssize_t recv_line(int fd, char *line, int64_t deadline_ms)
{
    size_t n = 0;
    for (;;) {
        if (recv_by(fd, line + n, 1, deadline_ms) != 1)
            return -1;
        if (line[n] == '\n')
            return (ssize_t)n;
        if (n == PYBOX_CLI_SESSION_HEAD_MAX)
            return -1;
        n++;
    }
}

/* Exactly len bytes by deadline_ms: 0, or -1. */
static int recv_all_by(int fd, void *buf, size_t len, int64_t deadline_ms)
{
    for (size_t got = 0; got < len;) {
        ssize_t r = recv_by(fd, (char *)buf + got, len - got, deadline_ms);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The first line as a JSON object; NULL when it is not one. */
static cJSON *recv_head(int fd)
{
    char line[PYBOX_CLI_SESSION_HEAD_MAX + 1];
    ssize_t n = recv_line(fd, line, -1);
    cJSON *j = n >= 0 ? cJSON_ParseWithLength(line, (size_t)n) : NULL;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* A number of the head, whole and within [0, max]; -1 when it is not. */
static int64_t head_num(const cJSON *head, const char *key, int64_t max)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(head, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    return (int64_t)v->valuedouble;
}

int pybox_cli_session_request_parse(const char *line, size_t len, pybox_cli_session_request_t *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->columns = 80;
    cJSON *req = len <= PYBOX_CLI_SESSION_HEAD_MAX ? cJSON_ParseWithLength(line, len) : NULL;
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
    int rc = 0;
    if (!cJSON_IsObject(req) || !cJSON_IsString(op)) {
        rq->why = "not a request this session's holder takes";
        rc = -1;
    } else if (strcmp(op->valuestring, "call") == 0) {
        rq->op = PYBOX_CLI_SESSION_CALL;
        rq->program_bytes = head_num(req, "program_bytes", PYBOX_PROGRAM_MAX);
        rq->timeout_ms = head_num(req, "timeout_ms", pybox_limit(PYBOX_LIMIT_TIMEOUT)->max);
        if (rq->program_bytes <= 0 || rq->timeout_ms < 0) {
            rq->why = "the request was not whole";
            rc = -1;
        }
    } else if (strcmp(op->valuestring, "close") == 0) {
        rq->op = PYBOX_CLI_SESSION_CLOSE;
    } else {
        rq->why = "not a request this session's holder takes";
        rc = -1;
    }
    if (rc == 0) {
        int64_t columns = head_num(req, "columns", 10000);
        rq->columns = columns > 0 ? (int)columns : 80;
        rq->json = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "json"));
        rq->color = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "color"));
    } else {
        rq->op = PYBOX_CLI_SESSION_REFUSED;
    }
    cJSON_Delete(req);
    return rc;
}

/* ---- the holder ---- */

typedef struct {
    pybox_state_t st;
    char id[33];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char note[PATH_MAX], lock[PATH_MAX];
    int listen_fd, lock_fd;
    pybox_ready_t rd;
    pybox_ahead_t *box;
    int64_t ends_ms, idle_ms;
    char ends_at[32], opened_at[32];
    unsigned calls;
} holder_t;

/* The note `session list` reads: which session, whose, until when. */
static void write_note(holder_t *h)
{
    const pybox_run_result_t *seen = pybox_ahead_seen(h->box);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", h->id);
    cJSON_AddNumberToObject(j, "uid", (double)getuid());
    cJSON_AddNumberToObject(j, "holder_pid", (double)getpid());
    cJSON_AddStringToObject(j, "image", h->rd.image);
    cJSON_AddStringToObject(j, "backend", h->rd.backend);
    cJSON_AddStringToObject(j, "box_id", seen->box_id);
    cJSON_AddStringToObject(j, "opened_at", h->opened_at);
    cJSON_AddStringToObject(j, "ends_at", h->ends_at);
    cJSON_AddNumberToObject(j, "idle_s", (double)h->idle_ms / 1000);
    cJSON_AddNumberToObject(j, "calls", h->calls);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    pybox_error_t err = {0};
    if (text != NULL)
        (void)pybox_write_file_atomic(h->note, text, strlen(text), 0600, &err);
    free(text);
}

/* The session has ended: no new caller reaches the holder (its socket's name is gone
 * before the last answer is sent, so the caller's next call finds no live session). */
static void holder_stop_listening(holder_t *h)
{
    if (h->sock[0] != '\0')
        unlink(h->sock);
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    h->listen_fd = -1;
}

static void holder_files_remove(holder_t *h)
{
    holder_stop_listening(h);
    if (h->note[0] != '\0')
        unlink(h->note);
    if (h->lock[0] != '\0')
        unlink(h->lock);
}

/* The receipt as the client asked for it: signed JSON, or the terminal's text. */
static void render(const pybox_run_result_t *res, const pybox_cli_session_request_t *req, const pybox_state_t *st,
                   pybox_buf_t *out)
{
    if (req->json) {
        cJSON *j = pybox_receipt_json(res);
        pybox_sign_installation(j, st);
        pybox_cli_json_line(out, j);
        return;
    }
    const pybox_receipt_style_t style = {.columns = req->columns, .color = req->color};
    pybox_receipt_text_styled(res, &style, out);
}

static int reply(int fd, int exit_code, const char *word, const char *msg, const pybox_buf_t *body)
{
    cJSON *head = cJSON_CreateObject();
    cJSON_AddNumberToObject(head, "exit", exit_code);
    if (word != NULL)
        cJSON_AddStringToObject(head, word, msg);
    cJSON_AddNumberToObject(head, "bytes", body != NULL ? (double)body->len : 0);
    return send_head(fd, head, body != NULL ? body->data : NULL, body != NULL ? body->len : 0);
}

/* The session's result to the client, and whether it ends the session. */
static void answer(int fd, const pybox_cli_session_request_t *req, const pybox_run_result_t *res, int rc,
                   const pybox_state_t *st)
{
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    render(res, req, st, &out);
    reply(fd, out.data != NULL ? res->exit_code : PYBOX_EXIT_FAILED, rc < 0 ? "error" : NULL, res->error.msg,
          out.data != NULL ? &out : NULL);
    pybox_buf_free(&out);
}

/* Only the user who opened the session: the peer's uid as the kernel gives it. */
static bool peer_allowed(int fd, char *why, size_t len)
{
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
        snprintf(why, len, "who is asking could not be read (SO_PEERCRED)");
        return false;
    }
    if (cred.uid == getuid())
        return true;
    if (pybox_hook(PYBOX_HOOK_SESSION_ANY_PEER) != NULL) /* a test showing what the check keeps out */
        return true;
    snprintf(why, len, "this session belongs to uid %u, who opened it; uid %u may not use it", (unsigned)getuid(),
             (unsigned)cred.uid);
    return false;
}

/* One connection: a call or the close. Returns 1 when the session ended. */
static int serve(holder_t *h, int fd)
{
    char why[256];
    if (!peer_allowed(fd, why, sizeof why)) {
        reply(fd, PYBOX_EXIT_FAILED, "refused", why, NULL);
        return 0;
    }
    /* The whole request within CLIENT_WAIT_MS of its connection, and each send of the
     * answer bounded as well: one caller cannot hold the holder (and the other callers,
     * and its ends at its lifetime, its idle limit or a signal) by sending or reading
     * slowly. */
    int64_t deadline = pybox_now_ms() + CLIENT_WAIT_MS;
    struct timeval tv = {.tv_sec = CLIENT_WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char line[PYBOX_CLI_SESSION_HEAD_MAX + 1];
    ssize_t n = recv_line(fd, line, deadline);
    pybox_cli_session_request_t req;
    int ended = 0;
    if (n < 0) {
        reply(fd, PYBOX_EXIT_FAILED, "refused", "the request was not whole", NULL);
    } else if (pybox_cli_session_request_parse(line, (size_t)n, &req) < 0) {
        reply(fd, PYBOX_EXIT_FAILED, "refused", req.why, NULL);
    } else if (req.op == PYBOX_CLI_SESSION_CALL) {
        char *prog = malloc((size_t)req.program_bytes);
        int64_t most = pybox_ahead_policy(h->box)->timeout_ms;
        if (prog == NULL || recv_all_by(fd, prog, (size_t)req.program_bytes, deadline) < 0) {
            reply(fd, PYBOX_EXIT_FAILED, "refused", "the request was not whole", NULL);
        } else if (req.timeout_ms > most) {
            char a[PYBOX_NUM_MAX], m[PYBOX_NUM_MAX];
            snprintf(why, sizeof why, "--timeout %s s is above the %s s of this session (session open's --timeout)",
                     pybox_fmt_fixed(a, req.timeout_ms, 3), pybox_fmt_fixed(m, most, 3));
            reply(fd, PYBOX_EXIT_FAILED, "refused", why, NULL);
        } else {
            pybox_run_request_t rr = h->rd.run;
            rr.program = prog;
            rr.program_len = (size_t)req.program_bytes;
            rr.policy.timeout_ms = req.timeout_ms;
            rr.started_s = pybox_now_s();
            /* The client gone mid-call (its Ctrl-C) cancels the call, which ends the
             * session: nothing is left half-done in it. */
            rr.cancellable = true;
            rr.cancel_fd = fd;
            rr.hook = NULL;
            bool gone = false;
            pybox_run_result_t res;
            int rc = pybox_ahead_call(h->box, &rr, &res, &gone);
            h->calls++;
            if (gone) {
                h->box = NULL;
                holder_stop_listening(h);
            } else
                write_note(h); /* before the answer: what the client does next sees it */
            answer(fd, &req, &res, rc, &h->st);
            pybox_run_result_free(&res);
            ended = gone;
        }
        free(prog);
    } else {
        pybox_run_result_t res;
        int rc = pybox_ahead_close(h->box, &res);
        h->box = NULL;
        holder_stop_listening(h);
        answer(fd, &req, &res, rc, &h->st);
        pybox_run_result_free(&res);
        ended = 1;
    }
    return ended;
}

static void on_signal(int sig)
{
    pybox_interrupt_signal = sig;
}

/* The holder's life: calls until the session ends (its close, a call that ends it, its
 * lifetime, a signal). */
static void holder_loop(holder_t *h)
{
    for (;;) {
        /* until its lifetime's end, or its idle limit after its last call (or its start) */
        int64_t now = pybox_now_ms(), left = h->ends_ms - now;
        int64_t idle_left = (int64_t)(pybox_ahead_idle_since(h->box) * 1000) + h->idle_ms - now;
        if (idle_left < left)
            left = idle_left;
        if (left <= 0 || pybox_interrupt_signal != 0)
            break;
        struct pollfd p = {.fd = h->listen_fd, .events = POLLIN};
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n <= 0)
            continue;
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int ended = serve(h, fd);
        close(fd);
        if (ended)
            return;
    }
    /* Its lifetime, its idle limit, or a signal: the session ends as a close would end it. */
    pybox_interrupt_signal = 0;
    pybox_run_result_t res;
    pybox_ahead_close(h->box, &res);
    h->box = NULL;
    pybox_run_result_free(&res);
}

/* Tell session open how it went: "O<id>" or "E<kind> <message>". */
static void tell(int fd, const char *id, const pybox_error_t *err)
{
    char line[PYBOX_ERROR_MSG_MAX + 64];
    int n = err == NULL ? snprintf(line, sizeof line, "O%s", id)
                        : snprintf(line, sizeof line, "E%d %s", (int)err->kind, err->msg);
    if (n > 0)
        (void)pybox_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    close(fd);
}

/* The holder: make the session, say so on report_fd, serve it, end it. Never returns. */
static void holder(const args_t *a, int report_fd)
{
    holder_t h = {.listen_fd = -1, .lock_fd = -1};
    pybox_error_t err = {0};
    pybox_ready_init(&h.rd);
    int64_t ttl = a->ttl_ms > 0 ? a->ttl_ms : PYBOX_MCP_SESSION_TTL_MS;
    pybox_request_t rq = {
        .program = "",
        .image = a->image,
        .backend = a->backend,
        .timeout_ms = a->timeout_given ? a->timeout_ms : 0,
        .memory_bytes = a->memory_bytes,
        .pids = a->pids,
        .nano_cpus = a->nano_cpus,
        .started_s = pybox_cli_started_s,
    };
    char dir[PATH_MAX];
    struct sockaddr_un sa;
    int rc = pybox_state_open(&h.st, false, &err);
    if (rc == 0)
        rc = pybox_random_hex(16, h.id, &err);
    if (rc == 0 &&
        (session_path(&h.st, NULL, NULL, dir, sizeof dir, &err) < 0 || socket_address(&h.st, h.id, &sa, &err) < 0 ||
         session_path(&h.st, h.id, ".json", h.note, sizeof h.note, &err) < 0 ||
         session_path(&h.st, h.id, ".lock", h.lock, sizeof h.lock, &err) < 0))
        rc = -1;
    if (rc == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
        rc = pybox_error_set(&err, PYBOX_ERR_STATE, errno, "making %s", dir);
    /* The lock says the holder lives: `pybox cleanup` removes the files of a session
     * whose lock it can take. A record lock, the process's own: the box's processes,
     * forked from this one, do not hold it after the holder's end. */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (rc == 0 && ((h.lock_fd = open(h.lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 ||
                    fcntl(h.lock_fd, F_SETLK, &fl) < 0))
        rc = pybox_error_set(&err, PYBOX_ERR_STATE, errno, "the session's lock %s", h.lock);
    if (rc == 0 && pybox_prepare(&rq, &h.rd, &err) < 0)
        rc = -1;
    if (rc == 0) {
        /* The box's own clocks: its lifetime and how long it waits for a call, each a margin
         * after the holder's, so the holder ends it first while it lives. */
        h.rd.run.policy.box_wait_ms = ttl + PYBOX_CLI_SESSION_MARGIN_MS;
        h.rd.run.policy.box_life_ms = ttl + PYBOX_CLI_SESSION_MARGIN_MS;
        rc = pybox_ahead_open(h.rd.be, &h.rd.run, &h.box, &err);
    }
    if (rc == 0) {
        pybox_ahead_set_session(h.box, h.id);
        h.ends_ms = pybox_now_ms() + ttl;
        h.idle_ms = a->idle_ms > 0 ? a->idle_ms : PYBOX_MCP_SESSION_IDLE_MS;
        time_t now = (time_t)pybox_wall_s(), end = now + (time_t)(ttl / 1000);
        struct tm tm;
        strftime(h.opened_at, sizeof h.opened_at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        strftime(h.ends_at, sizeof h.ends_at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&end, &tm));
        /* The socket is made in the private folder and is its owner's alone before
         * anyone can reach it. */
        h.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        pybox_strlcpy(h.sock, sa.sun_path, sizeof h.sock);
        mode_t old = umask(0177);
        if (h.listen_fd < 0 || bind(h.listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(h.sock, 0600) < 0 ||
            listen(h.listen_fd, 8) < 0)
            rc = pybox_error_set(&err, PYBOX_ERR_SYSTEM, errno, "the session's socket %s", h.sock);
        umask(old);
    }
    if (rc < 0) {
        tell(report_fd, NULL, &err);
        if (h.box != NULL) {
            pybox_run_result_t res;
            pybox_ahead_close(h.box, &res);
            pybox_run_result_free(&res);
        }
        holder_files_remove(&h);
        pybox_ready_free(&h.rd);
        _exit(PYBOX_EXIT_FAILED);
    }
    write_note(&h);
    tell(report_fd, h.id, NULL);
    holder_loop(&h);
    holder_files_remove(&h);
    pybox_ready_free(&h.rd);
    _exit(0);
}

static int open_run(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a = {0};
    int first = pybox_cli_args("session open", argc, argv, &a, &err);
    if (first < 0)
        return pybox_cli_fail(&err, false);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return pybox_cli_failf(PYBOX_ERR_SYSTEM, errno, "a pipe for the session's holder");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return pybox_cli_failf(PYBOX_ERR_SYSTEM, errno, "starting the session's holder");
    if (pid == 0) {
        /* The holder: its own session of the terminal's, reparented to init, nothing of
         * this command's streams kept (whoever reads them sees them end with this
         * command). */
        close(p[0]);
        if (setsid() < 0 || fork() != 0)
            _exit(0);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            close(null);
        }
        if (chdir("/") < 0)
            _exit(PYBOX_EXIT_FAILED);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        holder(&a, p[1]);
    }
    close(p[1]);
    int status = 0;
    (void)waitpid(pid, &status, 0);
    /* One message, written whole (less than a pipe's atomic write): read once, not to the
     * pipe's end, which a process the holder started may hold open. */
    char said[PYBOX_ERROR_MSG_MAX + 64];
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    ssize_t got = poll(&pf, 1, OPEN_WAIT_MS) == 1 ? read(p[0], said, sizeof said - 1) : -1;
    close(p[0]);
    size_t len = got > 0 ? (size_t)got : 0;
    if (len < 2)
        return pybox_cli_failf(PYBOX_ERR_SYSTEM, 0, "the session's holder ended without saying how its opening went");
    if (said[0] == 'E') {
        char *sp = memchr(said, ' ', len);
        long kind = strtol(said + 1, NULL, 10);
        err.kind = kind > 0 && kind < 64 ? (pybox_error_kind_t)kind : PYBOX_ERR_SYSTEM;
        snprintf(err.msg, sizeof err.msg, "%.*s", sp != NULL ? (int)(len - (size_t)(sp + 1 - said)) : 0,
                 sp != NULL ? sp + 1 : "");
        return pybox_cli_fail(&err, false);
    }
    printf("%.*s\n", (int)(len - 1), said + 1);
    return fflush(stdout) == 0 ? 0 : PYBOX_EXIT_FAILED;
}

/* ---- the clients ---- */

/* Connected to the session's holder, or -1 with why. */
static int connect_session(const char *id, pybox_error_t *err)
{
    if (!pybox_cli_session_id_valid(id))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "give the id `pybox session open` printed (32 lowercase hex digits)");
    pybox_state_t st;
    struct sockaddr_un sa;
    if (pybox_state_locate(&st, err) < 0 || socket_address(&st, id, &sa, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "a socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
        return fd;
    int en = errno;
    close(fd);
    if (en == ENOENT || en == ENOTDIR)
        return pybox_error_set(err, PYBOX_ERR_USAGE, en, "no live session %s in this installation (pybox session list)",
                               id);
    if (en == EACCES || en == EPERM)
        return pybox_error_set(err, PYBOX_ERR_USAGE, en,
                               "session %s is not yours: only the user who opened it may use it", id);
    if (en == ECONNREFUSED)
        return pybox_error_set(err, PYBOX_ERR_STATE, en,
                               "session %s has no holder any more (it ended; pybox cleanup removes what is left)", id);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, en, "reaching session %s", id);
}

/* Send the request, print the receipt that comes back; the exit code. */
static int ask(int fd, cJSON *req, const char *prog, size_t len, bool json)
{
    pybox_error_t err = {0};
    /* A holder that refuses answers at once and closes: its answer is read even when the
     * request could not be sent whole. */
    int sent = send_head(fd, req, prog, len) < 0 ? errno : 0;
    cJSON *head = recv_head(fd);
    if (head == NULL && sent != 0) {
        close(fd);
        return pybox_cli_failf(PYBOX_ERR_SYSTEM, sent, "sending the request to the session's holder");
    }
    int64_t code = head_num(head, "exit", 255);
    int64_t bytes = head_num(head, "bytes", (int64_t)1 << 30);
    const cJSON *refused = cJSON_GetObjectItemCaseSensitive(head, "refused");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(head, "error");
    char *body = bytes > 0 ? malloc((size_t)bytes) : NULL;
    int rc;
    if (code < 0 || bytes < 0 || (bytes > 0 && (body == NULL || pybox_read_exact(fd, body, (size_t)bytes) < 0))) {
        rc = pybox_cli_failf(PYBOX_ERR_SYSTEM, 0, "the session's holder gave no whole answer (did the session end?)");
    } else if (cJSON_IsString(refused)) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "%s", refused->valuestring);
        rc = pybox_cli_fail(&err, json);
    } else {
        rc = (int)code;
        if (bytes > 0 && pybox_write_all(STDOUT_FILENO, body, (size_t)bytes) < 0)
            rc = PYBOX_EXIT_FAILED;
        if (cJSON_IsString(error) && error->valuestring[0] != '\0')
            pybox_cli_say_error(error->valuestring);
    }
    free(body);
    cJSON_Delete(head);
    close(fd);
    return rc;
}

static cJSON *style_request(const char *op, bool json, pybox_color_t color)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "op", op);
    cJSON_AddBoolToObject(req, "json", json);
    struct winsize ws;
    bool terminal = isatty(STDOUT_FILENO);
    int tty = terminal && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
    cJSON_AddNumberToObject(req, "columns", pybox_receipt_columns(tty, getenv("COLUMNS")));
    cJSON_AddBoolToObject(req, "color", pybox_cli_use_color(color, terminal, getenv("NO_COLOR"), getenv("TERM")));
    return req;
}

int pybox_cli_session_exec(const pybox_exec_opts_t *o, const char *prog, size_t len)
{
    pybox_error_t err = {0};
    int fd = connect_session(o->session, &err);
    if (fd < 0)
        return pybox_cli_fail(&err, o->json);
    cJSON *req = style_request("call", o->json, o->color);
    cJSON_AddNumberToObject(req, "timeout_ms", o->timeout_given ? (double)o->timeout_ms : 0);
    cJSON_AddNumberToObject(req, "program_bytes", (double)len);
    return ask(fd, req, prog, len, o->json);
}

static int close_run(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a = {0};
    int first = pybox_cli_args("session close", argc, argv, &a, &err);
    if (first < 0)
        return pybox_cli_fail(&err, a.json);
    int fd = connect_session(argv[first + 1], &err);
    if (fd < 0)
        return pybox_cli_fail(&err, a.json);
    return ask(fd, style_request("close", a.json, a.color), NULL, 0, a.json);
}

/* Whether a session's holder lives: its lock is held (by another process). */
static bool holder_lives(const char *lock)
{
    int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    bool held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

static int list_run(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a = {0};
    pybox_state_t st;
    char dir[PATH_MAX];
    if (pybox_cli_args("session list", argc, argv, &a, &err) < 0 || pybox_state_open(&st, false, &err) < 0 ||
        session_path(&st, NULL, NULL, dir, sizeof dir, &err) < 0)
        return pybox_cli_fail(&err, a.json);
    cJSON *all = cJSON_CreateArray();
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char id[33];
        if (n != 37 || strcmp(e->d_name + 32, ".json") != 0)
            continue;
        memcpy(id, e->d_name, 32);
        id[32] = '\0';
        char note[PATH_MAX], lock[PATH_MAX];
        char *text = NULL;
        size_t len = 0;
        bool over = false;
        if (!pybox_cli_session_id_valid(id) || session_path(&st, id, ".json", note, sizeof note, &err) < 0 ||
            session_path(&st, id, ".lock", lock, sizeof lock, &err) < 0)
            continue;
        int fd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        int rc = pybox_read_bounded(fd, PYBOX_CLI_SESSION_HEAD_MAX, &text, &len, &over, &err);
        close(fd);
        cJSON *j = rc == 0 ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            continue;
        }
        cJSON_AddBoolToObject(j, "holder_alive", holder_lives(lock));
        cJSON_AddItemToArray(all, j);
    }
    if (d != NULL)
        closedir(d);
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    if (a.json) {
        pybox_cli_json_line(&out, all);
    } else {
        const cJSON *j;
        if (cJSON_GetArraySize(all) == 0)
            pybox_buf_adds(&out, "no session in this installation\n");
        else
            pybox_buf_addf(&out, "%-32s  %-10s  %-6s  %-20s  %s\n", "SESSION", "IMAGE", "CALLS", "ENDS AT", "HOLDER");
        cJSON_ArrayForEach (j, all) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
            const cJSON *image = cJSON_GetObjectItemCaseSensitive(j, "image");
            const cJSON *calls = cJSON_GetObjectItemCaseSensitive(j, "calls");
            const cJSON *ends = cJSON_GetObjectItemCaseSensitive(j, "ends_at");
            char si[80], sm[80], se[80];
            pybox_escape_short(si, sizeof si, cJSON_IsString(id) ? id->valuestring : "?", 32);
            pybox_escape_short(sm, sizeof sm, cJSON_IsString(image) ? image->valuestring : "?", 32);
            pybox_escape_short(se, sizeof se, cJSON_IsString(ends) ? ends->valuestring : "?", 32);
            pybox_buf_addf(&out, "%-32s  %-10s  %-6d  %-20s  %s\n", si, sm,
                           cJSON_IsNumber(calls) ? calls->valueint : -1, se,
                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "holder_alive"))
                               ? "alive"
                               : "gone (its box ends by its own timer; pybox cleanup removes what is left)");
        }
        cJSON_Delete(all);
    }
    int rc = out.data != NULL && pybox_write_all(STDOUT_FILENO, out.data, out.len) == 0 ? 0 : PYBOX_EXIT_FAILED;
    pybox_buf_free(&out);
    return rc;
}

int pybox_cli_session_sweep(const pybox_state_t *st, bool dry_run, int *removed)
{
    *removed = 0;
    char dir[PATH_MAX];
    pybox_error_t err = {0};
    if (session_path(st, NULL, NULL, dir, sizeof dir, &err) < 0)
        return -1;
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char id[33], lock[PATH_MAX], path[PATH_MAX];
        if (strlen(e->d_name) != 37 || strcmp(e->d_name + 32, ".lock") != 0)
            continue;
        memcpy(id, e->d_name, 32);
        id[32] = '\0';
        if (!pybox_cli_session_id_valid(id) || session_path(st, id, ".lock", lock, sizeof lock, &err) < 0)
            continue;
        int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0 || fcntl(fd, F_SETLK, &fl) < 0) {
            if (fd >= 0)
                close(fd);
            continue; /* its holder lives */
        }
        if (!dry_run) {
            static const char *const suffixes[] = {".sock", ".json", ".lock"};
            for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++)
                if (session_path(st, id, suffixes[i], path, sizeof path, &err) == 0)
                    unlink(path);
        }
        close(fd);
        (*removed)++;
    }
    closedir(d);
    return 0;
}

static int group_run(int argc, char **argv)
{
    const char *sub = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    char name[32];
    const pybox_cli_command_t *c =
        sub != NULL && pybox_fmt(name, sizeof name, "session %s", sub) == 0 ? pybox_cli_command(name) : NULL;
    if (c != NULL)
        return c->run(argc, argv);
    if (sub != NULL)
        return pybox_cli_failf(PYBOX_ERR_USAGE, 0, "unknown session command (open, close, list)");
    pybox_help(stderr, "session");
    return PYBOX_EXIT_FAILED;
}

const pybox_cli_command_t pybox_cli_session = {"session", group_options, false, take, 0, -1, NULL, group_run},
                          pybox_cli_session_open = {"session open",
                                                    open_options,
                                                    false,
                                                    take,
                                                    1,
                                                    1,
                                                    "usage: pybox session open [--image NAME] [--timeout S] "
                                                    "[--memory M] [--pids N] [--cpus N] [--ttl S]",
                                                    open_run},
                          pybox_cli_session_close = {"session close",
                                                     close_options,
                                                     false,
                                                     take,
                                                     2,
                                                     2,
                                                     "usage: pybox session close ID [--json]",
                                                     close_run},
                          pybox_cli_session_list = {
                              "session list", list_options, false, take, 1, 1, "usage: pybox session list [--json]",
                              list_run};
