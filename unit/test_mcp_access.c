/* SPDX-License-Identifier: MIT */
/* Who may reach pybox mcp --listen (pybox/mcp/access.c): the token file, bearer tokens,
 * addresses, origins and media types; and the protocol core's session API as a transport
 * sees it (outcomes, a client with no session yet, call admission), with a fake tool. */
#include <arpa/inet.h>
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/mcp/access.h"
#include "../pybox/mcp/http.h"
#include "../pybox/mcp/server.h"
#include "suites.h"

#define TOK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_B "0123456789abcdef0123456789abcdef+/~._-=="

static int parse(const char *text, pybox_mcp_tokens_t *t, pybox_error_t *err)
{
    memset(err, 0, sizeof *err);
    return pybox_mcp_tokens_parse(text, strlen(text), t, err);
}

START_TEST(token_file_text)
{
    pybox_mcp_tokens_t t;
    pybox_error_t err;
    ck_assert_int_eq(parse("# agents\n\nalice " TOK_A "\r\n  bob\t" TOK_B "  \n", &t, &err), 0);
    ck_assert_int_eq((int)t.n, 2);
    ck_assert_str_eq(t.t[0].name, "alice");
    ck_assert_str_eq(t.t[1].name, "bob");
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "no token in it"},
        {"# only a comment\n", "no token in it"},
        {"alice\n", "line 1: give NAME TOKEN"},
        {"alice " TOK_A " extra\n", "line 1: give NAME TOKEN"},
        {"al/ice " TOK_A "\n", "line 1: give NAME TOKEN"},
        {"alice short\n", "line 1: the token must be 32 to 512 characters"},
        {"alice " TOK_A "!\n", "the token must be"},
        {"alice ==" TOK_A "\n", "the token must be"},
        {"alice " TOK_A "\nalice " TOK_B "\n", "line 2: the name 'alice' is given twice"},
        {"alice " TOK_A "\nbob " TOK_A "\n", "line 2: the token of 'bob' is also 'alice''s"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(parse(bad[i].text, &t, &err) < 0, "accepted: %s", bad[i].text);
        ck_assert_msg(strstr(err.msg, bad[i].says) != NULL, "'%s': %s", bad[i].text, err.msg);
        ck_assert_msg(strstr(err.msg, TOK_A) == NULL, "a refusal quotes the token: %s", err.msg);
    }
}
END_TEST

START_TEST(bearer_tokens)
{
    pybox_mcp_tokens_t t;
    pybox_error_t err;
    ck_assert_int_eq(parse("alice " TOK_A "\nbob " TOK_B "\n", &t, &err), 0);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer " TOK_A), 0);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "bearer " TOK_B), 1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "BEARER " TOK_B), 1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, NULL), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, ""), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Basic " TOK_A), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer  " TOK_A), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer " TOK_A " "), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer " TOK_A "a"), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer aaaa"), -1);
    ck_assert_int_eq(pybox_mcp_bearer(&t, "Bearer"), -1);
}
END_TEST

/* Errors keep their first message: each check starts from a clean one. */
static int load(const char *path, pybox_mcp_tokens_t *t, pybox_error_t *err)
{
    memset(err, 0, sizeof *err);
    return pybox_mcp_tokens_load(path, t, err);
}

static int listen_at(const char *text, pybox_mcp_listen_t *l, pybox_error_t *err)
{
    memset(err, 0, sizeof *err);
    return pybox_mcp_listen_parse(text, l, err);
}

static int origins_of(const char *text, pybox_mcp_origins_t *o, pybox_error_t *err)
{
    memset(err, 0, sizeof *err);
    return pybox_mcp_origins_parse(text, o, err);
}

START_TEST(token_file_on_disk)
{
    char dir[] = "/tmp/pybox-unit-tokens-XXXXXX", path[128], link[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tokens", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "alice " TOK_A "\n", 7 + strlen(TOK_A)), (ssize_t)(7 + strlen(TOK_A)));
    close(fd);
    pybox_mcp_tokens_t t;
    pybox_error_t err = {0};
    ck_assert_int_eq(load(path, &t, &err), 0);
    ck_assert_int_eq(chmod(path, 0400), 0);
    ck_assert_int_eq(load(path, &t, &err), 0);
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_lt(load(path, &t, &err), 0);
    ck_assert_msg(strstr(err.msg, "chmod 600") != NULL, "%s", err.msg);
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_int_lt(load(path, &t, &err), 0);
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_int_lt(load(link, &t, &err), 0); /* never followed */
    ck_assert_int_lt(load(dir, &t, &err), 0);
    ck_assert_msg(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
    if (geteuid() == 0) { /* another owner: the file must be the server's own */
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        ck_assert_int_lt(load(path, &t, &err), 0);
        ck_assert_msg(strstr(err.msg, "belongs to another user") != NULL, "%s", err.msg);
    }
    unit_rm_tree(dir);
}
END_TEST

START_TEST(listen_addresses)
{
    pybox_mcp_listen_t l;
    pybox_error_t err = {0};
    ck_assert_int_eq(listen_at("127.0.0.1:8080", &l, &err), 0);
    ck_assert(l.family == AF_INET && l.loopback);
    ck_assert_int_eq(ntohs(((struct sockaddr_in *)&l.addr)->sin_port), 8080);
    ck_assert_int_eq(listen_at("8080", &l, &err), 0);
    ck_assert(l.family == AF_INET && l.loopback);
    ck_assert_int_eq(listen_at(":0", &l, &err), 0);
    ck_assert(l.family == AF_INET && l.loopback);
    ck_assert_int_eq(listen_at("127.9.9.9:1", &l, &err), 0);
    ck_assert(l.loopback);
    ck_assert_int_eq(listen_at("[::1]:443", &l, &err), 0);
    ck_assert(l.family == AF_INET6 && l.loopback);
    ck_assert_int_eq(listen_at("[::ffff:127.0.0.1]:443", &l, &err), 0);
    ck_assert(l.loopback);
    ck_assert_int_eq(listen_at("0.0.0.0:80", &l, &err), 0);
    ck_assert(!l.loopback);
    ck_assert_int_eq(listen_at("10.1.2.3:80", &l, &err), 0);
    ck_assert(!l.loopback);
    ck_assert_int_eq(listen_at("[::]:80", &l, &err), 0);
    ck_assert(!l.loopback);
    ck_assert_int_eq(listen_at("unix:/run/pybox/mcp.sock", &l, &err), 0);
    ck_assert(l.family == AF_UNIX && l.loopback);
    ck_assert_str_eq(l.path, "/run/pybox/mcp.sock");
    static const char *const bad[] = {
        "localhost:80", "127.0.0.1", "127.0.0.1:",  "127.0.0.1:65536", "127.0.0.1:080", "127.0.0.1:-1",
        "::1:80",       "[::1]",     "[::1]80",     "[127.0.0.1]:80",  "1.2.3:80",      "unix:relative",
        "unix:",        "",          "127.0.0.1:8O"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(listen_at(bad[i], &l, &err) < 0, "accepted '%s'", bad[i]);
    char longpath[200] = "unix:/";
    memset(longpath + 6, 'a', 150);
    longpath[156] = '\0';
    ck_assert_int_lt(listen_at(longpath, &l, &err), 0);
    ck_assert_msg(strstr(err.msg, "absolute path of at most") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(origins)
{
    pybox_mcp_origins_t o;
    pybox_error_t err = {0};
    ck_assert_int_eq(origins_of("http://localhost:6274,HTTPS://Agents.Example.org", &o, &err), 0);
    ck_assert_int_eq((int)o.n, 2);
    ck_assert(pybox_mcp_origin_allowed(&o, NULL)); /* not a browser */
    ck_assert(pybox_mcp_origin_allowed(&o, "http://localhost:6274"));
    ck_assert(pybox_mcp_origin_allowed(&o, "https://agents.example.org"));
    ck_assert(!pybox_mcp_origin_allowed(&o, "http://localhost:6275"));
    ck_assert(!pybox_mcp_origin_allowed(&o, "http://localhost:6274/"));
    ck_assert(!pybox_mcp_origin_allowed(&o, "http://evil.example"));
    ck_assert(!pybox_mcp_origin_allowed(&o, "null"));
    ck_assert(!pybox_mcp_origin_allowed(&o, ""));
    pybox_mcp_origins_t none = {.n = 0};
    ck_assert(pybox_mcp_origin_allowed(&none, NULL));
    ck_assert(!pybox_mcp_origin_allowed(&none, "http://127.0.0.1:8080"));
    static const char *const bad[] = {"localhost", "ftp://x",     "http://x/",  "http://x:0", "http://x:99999",
                                      "http://",   "http://[::1", "http://a b", "http://x,",  "http://x,,http://y",
                                      "*",         "http://[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(origins_of(bad[i], &o, &err) < 0, "accepted '%s'", bad[i]);
    ck_assert_int_eq(origins_of("http://[::1]:8080", &o, &err), 0);
}
END_TEST

START_TEST(media_types)
{
    ck_assert(pybox_mcp_accepts("application/json, text/event-stream", "application/json"));
    ck_assert(pybox_mcp_accepts("application/json, text/event-stream", "text/event-stream"));
    ck_assert(pybox_mcp_accepts("text/*;q=0.5", "text/event-stream"));
    ck_assert(pybox_mcp_accepts("*/*", "application/json"));
    ck_assert(pybox_mcp_accepts("Application/JSON ; charset=utf-8", "application/json"));
    ck_assert(!pybox_mcp_accepts("application/json", "text/event-stream"));
    ck_assert(!pybox_mcp_accepts("text/event-stream;q=0", "text/event-stream"));
    ck_assert(!pybox_mcp_accepts("*/*;q=0.000", "text/event-stream"));
    ck_assert(pybox_mcp_accepts("*/*;q=0.001", "text/event-stream"));
    ck_assert(!pybox_mcp_accepts("text/event-streamx", "text/event-stream"));
    ck_assert(!pybox_mcp_accepts("application/*", "text/event-stream"));
    ck_assert(!pybox_mcp_accepts(NULL, "application/json"));
    ck_assert(!pybox_mcp_accepts("", "application/json"));
    ck_assert(pybox_mcp_is_json("application/json"));
    ck_assert(pybox_mcp_is_json("application/json; charset=utf-8"));
    ck_assert(pybox_mcp_is_json("APPLICATION/JSON"));
    ck_assert(!pybox_mcp_is_json("application/json-seq"));
    ck_assert(!pybox_mcp_is_json("text/plain"));
    ck_assert(!pybox_mcp_is_json(NULL));
    ck_assert(pybox_mcp_session_id_valid("0123456789abcdef0123456789abcdef"));
    ck_assert(!pybox_mcp_session_id_valid("0123456789ABCDEF0123456789abcdef"));
    ck_assert(!pybox_mcp_session_id_valid("0123456789abcdef0123456789abcde"));
    ck_assert(!pybox_mcp_session_id_valid(NULL));
}
END_TEST

/* ---- the session API, with a fake tool ---- */

typedef struct {
    pybox_mcp_sink_t sink;
    char *last;
    int messages, replies, holds, releases;
} test_sink_t;

static bool t_send(pybox_mcp_sink_t *k, const char *text, size_t len, bool reply)
{
    test_sink_t *t = (test_sink_t *)k;
    free(t->last);
    t->last = strndup(text, len);
    t->messages++;
    t->replies += reply;
    return true;
}
static void t_hold(pybox_mcp_sink_t *k)
{
    ((test_sink_t *)k)->holds++;
}
static void t_release(pybox_mcp_sink_t *k)
{
    ((test_sink_t *)k)->releases++;
}

static int release_pipe[2];

/* Waits for a byte on release_pipe or its cancellation. */
static cJSON *fake_call(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                        pybox_mcp_progress_fn progress, void *progress_ctx)
{
    (void)arg;
    (void)cfg;
    (void)args;
    (void)progress;
    (void)progress_ctx;
    struct pollfd ps[2] = {{.fd = release_pipe[0], .events = POLLIN}, {.fd = cancel_fd, .events = POLLIN}};
    ck_assert_int_gt(poll(ps, 2, 10000), 0);
    if (ps[1].revents != 0)
        return NULL;
    char b;
    ck_assert_int_eq(read(release_pipe[0], &b, 1), 1);
    return pybox_mcp_error_result("released");
}

static cJSON *fake_describe(const pybox_mcp_config_t *cfg)
{
    (void)cfg;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", "run_python");
    return d;
}

static const pybox_mcp_tool_t fake = {.name = "run_python", .describe = fake_describe, .call = fake_call};

static int admitted, ended, allow;
static bool h_begin(void *ctx)
{
    (void)ctx;
    if (admitted >= allow)
        return false;
    admitted++;
    return true;
}
static void h_end(void *ctx, const pybox_mcp_call_end_t *end)
{
    (void)ctx;
    ck_assert_ptr_nonnull(end->status);
    ended++;
}

#define INIT "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}"
#define CALL(id) "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"tools/call\",\"params\":{\"name\":\"run_python\"}}"

static void handle(pybox_mcp_session_t *s, const char *msg, unsigned flags, test_sink_t *k, pybox_mcp_handled_t *h)
{
    pybox_mcp_session_handle(s, msg, strlen(msg), flags, &k->sink, h);
}

/* Each MCP connection (a core session) has its own number: its calls are told it, and
 * its end is told to the tools with that number, once its calls have ended (so that what
 * a call made for the connection, a Python session, ends with it and is no other's). */
static uint64_t seen_connection, ended_connection;
static int connection_ends;
static cJSON *which_call(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                         pybox_mcp_progress_fn progress, void *progress_ctx)
{
    (void)arg;
    (void)cfg;
    (void)args;
    (void)cancel_fd;
    (void)progress;
    seen_connection = pybox_mcp_call_connection(progress_ctx);
    return pybox_mcp_error_result("seen");
}
static void which_end(void *arg, uint64_t connection)
{
    (void)arg;
    ck_assert_int_eq(connection_ends, 0);
    ended_connection = connection;
    connection_ends++;
}
static const pybox_mcp_tool_t which = {
    .name = "run_python", .describe = fake_describe, .call = which_call, .connection_end = which_end};

START_TEST(each_connection_its_own)
{
    pybox_mcp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    uint64_t ids[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        pybox_mcp_session_t *s = pybox_mcp_session_new(&cfg, &which, 1, NULL, NULL);
        ck_assert_ptr_nonnull(s);
        test_sink_t k = {.sink = {.send = t_send, .hold = t_hold, .release = t_release}};
        pybox_mcp_handled_t h;
        handle(s, INIT, 0, &k, &h);
        seen_connection = 0;
        handle(s, CALL("2"), 0, &k, &h);
        ck_assert_int_eq(h.outcome, PYBOX_MCP_CALL);
        pybox_mcp_session_reap(s, true);
        ids[i] = seen_connection;
        ck_assert_uint_ne(ids[i], 0);
        connection_ends = 0;
        pybox_mcp_session_free(s);
        free(k.last);
        ck_assert_int_eq(connection_ends, 1);
        ck_assert_uint_eq(ended_connection, ids[i]);
    }
    ck_assert_uint_ne(ids[0], ids[1]);
    ck_assert_uint_eq(pybox_mcp_call_connection(NULL), 0);
}
END_TEST

START_TEST(session_outcomes)
{
    ck_assert_int_eq(pipe2(release_pipe, O_CLOEXEC), 0);
    pybox_mcp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    admitted = ended = 0;
    allow = 1;
    pybox_mcp_hooks_t hooks = {.call_begin = h_begin, .call_end = h_end};
    pybox_mcp_session_t *s = pybox_mcp_session_new(&cfg, &fake, 1, NULL, &hooks);
    ck_assert_ptr_nonnull(s);
    test_sink_t k = {.sink = {.send = t_send, .hold = t_hold, .release = t_release}};
    pybox_mcp_handled_t h;
    /* With no session yet, only an initialize is taken; nothing else is done or said. */
    handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", PYBOX_MCP_ONLY_INITIALIZE, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NEEDS_SESSION);
    handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", PYBOX_MCP_ONLY_INITIALIZE, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NEEDS_SESSION);
    handle(s, CALL("2"), PYBOX_MCP_ONLY_INITIALIZE, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NEEDS_SESSION);
    ck_assert_int_eq(k.messages, 0);
    ck_assert_ptr_null(pybox_mcp_session_version(s));
    handle(s, INIT, PYBOX_MCP_ONLY_INITIALIZE, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REPLIED);
    ck_assert(h.initialized);
    ck_assert_str_eq(h.method, "initialize");
    ck_assert_str_eq(pybox_mcp_session_version(s), "2025-06-18");
    ck_assert_int_eq(k.replies, 1);
    /* Outcomes by kind. */
    handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NO_REPLY);
    handle(s, "  \n ", 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NO_REPLY);
    handle(s, "{\"jsonrpc\":\"2.0\",\n \"id\": 5,\r\n \"method\": \"ping\"}\n", 0, &k, &h); /* JSON's own whitespace */
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REPLIED);
    ck_assert_str_eq(k.last, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}");
    handle(s, "{not json", 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REFUSED);
    ck_assert_ptr_nonnull(strstr(k.last, "\"id\":null"));
    handle(s, "[" INIT "]", 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REFUSED);
    handle(s, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"nope\"}", 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REPLIED);
    ck_assert_ptr_nonnull(strstr(k.last, "-32601"));
    handle(s, INIT, 0, &k, &h); /* answered once */
    ck_assert_int_eq(h.outcome, PYBOX_MCP_REPLIED);
    ck_assert(!h.initialized);
    /* A call: held, admitted; a second is refused as busy by the transport's count. */
    handle(s,
           "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python\",\"_meta\":"
           "{\"progressToken\":\"t\"}}}",
           0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_CALL);
    ck_assert(h.progress);
    ck_assert_int_eq(k.holds, 1);
    ck_assert_int_eq((int)pybox_mcp_session_calls(s), 1);
    test_sink_t k2 = {.sink = {.send = t_send, .hold = t_hold, .release = t_release}};
    handle(s, CALL("8"), 0, &k2, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_BUSY);
    ck_assert_ptr_nonnull(strstr(k2.last, "too many calls"));
    ck_assert_int_eq(k2.holds, 0);
    /* Cancelling another sink's calls touches none; this sink's, its one. */
    ck_assert_int_eq((int)pybox_mcp_session_cancel(s, &k2.sink, true), 0);
    ck_assert_int_eq((int)pybox_mcp_session_cancel(s, &k.sink, true), 1);
    pybox_mcp_session_reap(s, true);
    ck_assert_int_eq(k.releases, 1);
    ck_assert_int_eq(ended, 1);
    ck_assert_int_eq((int)pybox_mcp_session_calls(s), 0);
    /* A call that ends by itself: its result, then its release. */
    allow = 2;
    int replies = k.replies;
    handle(s, CALL("9"), 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_CALL);
    ck_assert(!h.progress);
    ck_assert_int_eq(write(release_pipe[1], "x", 1), 1);
    pybox_mcp_session_reap(s, true);
    ck_assert_int_eq(k.replies, replies + 1);
    ck_assert_ptr_nonnull(strstr(k.last, "released"));
    ck_assert_int_eq(k.releases, 2);
    ck_assert_int_eq(ended, 2);
    /* Without early_cancels (stdio, where lines keep their order), a cancellation naming
     * no call is forgotten: a request with that id later runs. */
    allow = 10;
    handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":30}}", 0, &k, &h);
    handle(s, CALL("30"), 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_CALL);
    ck_assert_int_eq(write(release_pipe[1], "x", 1), 1);
    pybox_mcp_session_free(s);
    /* With early_cancels (HTTP, where a cancellation can overtake its request), the
     * request that comes after its cancellation is not run, and nothing is said. */
    hooks.early_cancels = true;
    admitted = ended = 0;
    s = pybox_mcp_session_new(&cfg, &fake, 1, NULL, &hooks);
    handle(s, INIT, 0, &k, &h);
    int holds = k.holds, messages = k.messages;
    handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"c1\"}}", 0, &k,
           &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NO_REPLY);
    handle(s, CALL("\"c1\""), 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_NO_REPLY);
    ck_assert_int_eq(k.holds, holds);
    ck_assert_int_eq(k.messages, messages);
    ck_assert_int_eq(admitted, 0);
    /* once only: the id given again is a new request */
    handle(s, CALL("\"c1\""), 0, &k, &h);
    ck_assert_int_eq(h.outcome, PYBOX_MCP_CALL);
    ck_assert_int_eq(write(release_pipe[1], "x", 1), 1);
    pybox_mcp_session_reap(s, true);
    ck_assert_int_eq(ended, 1);
    pybox_mcp_session_free(s);
    free(k.last);
    free(k2.last);
    close(release_pipe[0]);
    close(release_pipe[1]);
}
END_TEST

/* ---- finished calls joined from two threads at once (the HTTP server's main thread and
 * its libmicrohttpd thread both reap a session): each call joined once ---- */

static atomic_int quick_replies;
static atomic_bool stop_reaping;

static bool q_send(pybox_mcp_sink_t *k, const char *text, size_t len, bool reply)
{
    (void)k;
    (void)text;
    (void)len;
    if (reply)
        atomic_fetch_add(&quick_replies, 1);
    return true;
}

static cJSON *quick_call(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                         pybox_mcp_progress_fn progress, void *progress_ctx)
{
    (void)arg;
    (void)cfg;
    (void)args;
    (void)cancel_fd;
    (void)progress;
    (void)progress_ctx;
    return pybox_mcp_error_result("quick");
}

static const pybox_mcp_tool_t quick = {.name = "run_python", .describe = fake_describe, .call = quick_call};

static void *reaper(void *arg)
{
    while (!atomic_load(&stop_reaping))
        pybox_mcp_session_reap(arg, false);
    return NULL;
}

START_TEST(reaped_from_two_threads)
{
    pybox_mcp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    pybox_mcp_session_t *s = pybox_mcp_session_new(&cfg, &quick, 1, NULL, NULL);
    pybox_mcp_sink_t k = {.send = q_send};
    pybox_mcp_handled_t h;
    atomic_store(&quick_replies, 0);
    atomic_store(&stop_reaping, false);
    pybox_mcp_session_handle(s, INIT, strlen(INIT), 0, &k, &h);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, reaper, s), 0);
    int calls = 0;
    for (int i = 0; i < 3000; i++) {
        char msg[160];
        snprintf(msg, sizeof msg, CALL("%d"), i + 100);
        pybox_mcp_session_handle(s, msg, strlen(msg), 0, &k, &h); /* it reaps too */
        calls += h.outcome == PYBOX_MCP_CALL;
    }
    atomic_store(&stop_reaping, true);
    pthread_join(t, NULL);
    pybox_mcp_session_reap(s, true);
    ck_assert_int_ge(calls, PYBOX_MCP_CALLS_MAX);            /* the others refused while all slots ran */
    ck_assert_int_eq(atomic_load(&quick_replies), 1 + 3000); /* initialize's, and one for each call or refusal */
    ck_assert_int_eq((int)pybox_mcp_session_calls(s), 0);
    pybox_mcp_session_free(s);
}
END_TEST

START_TEST(http_defaults)
{
    pybox_mcp_http_config_t hc;
    memset(&hc, 0xff, sizeof hc);
    pybox_mcp_http_defaults(&hc);
    ck_assert(!hc.listen_public && !hc.socket_group_set);
    ck_assert_int_eq((int)hc.origins.n, 0);
    ck_assert_int_eq((int)hc.max_calls, PYBOX_MCP_CALLS_MAX);
    ck_assert_int_eq((int)hc.max_sessions, PYBOX_MCP_HTTP_SESSIONS);
    ck_assert_int_eq((int)hc.max_connections, PYBOX_MCP_HTTP_CONNECTIONS);
}
END_TEST

Suite *suite_mcp_access(void)
{
    Suite *s = suite_create("mcp_access");
    TCase *t = tcase_create("access");
    tcase_add_test(t, token_file_text);
    tcase_add_test(t, bearer_tokens);
    tcase_add_test(t, token_file_on_disk);
    tcase_add_test(t, listen_addresses);
    tcase_add_test(t, origins);
    tcase_add_test(t, media_types);
    tcase_add_test(t, session_outcomes);
    tcase_add_test(t, each_connection_its_own);
    tcase_add_test(t, http_defaults);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("reap");
    tcase_set_timeout(r, 60);
    tcase_add_test(r, reaped_from_two_threads);
    suite_add_tcase(s, r);
    return s;
}
