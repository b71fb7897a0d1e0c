/* SPDX-License-Identifier: MIT */
/* `pybox mcp`: a Model Context Protocol server (JSON-RPC 2.0) serving a table of tools
 * (run_python.h has the one PyBox serves). The agent chooses the program and its
 * arguments; the operator who starts the server sets the ceilings. The protocol core
 * (sessions: the lifecycle, tools/list, tools/call in threads of their own, cancellation,
 * progress) knows neither tools nor transports but through the tool table and the sink a
 * message's answers go to, so it is tested with a fake tool; its transports are stdio
 * (pybox_mcp_serve, one message per line) and Streamable HTTP (http.h). Contract:
 * docs/mcp.md. */
#ifndef PYBOX_MCP_SERVER_H
#define PYBOX_MCP_SERVER_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bounds.h"
#include "../buf.h"
#include "../error.h"

#define PYBOX_MCP_PROTOCOL "2025-11-25"
#define PYBOX_MCP_PROTOCOL_OLD "2025-06-18"
/* One message on stdin at most (a program and inline files, base64-encoded, fit). */
#define PYBOX_MCP_LINE_MAX (16 * 1024 * 1024)
/* JSON values in one message at most: cJSON spends about 64 bytes on each, so a 16 MiB
 * line of "[0,0,0,...]" would cost over a gigabyte. Counted before parsing. */
#define PYBOX_MCP_VALUES_MAX 100000
/* Nesting levels in one message at most (the request object is the first), counted
 * before parsing so that the refusal names the reason; below cJSON's own limit, which
 * would only say the line is not JSON. A request of run_python needs 5. */
#define PYBOX_MCP_DEPTH_MAX 64
_Static_assert(PYBOX_MCP_DEPTH_MAX < CJSON_NESTING_LIMIT, "the server's bound must come before cJSON's");
#define PYBOX_MCP_CALLS_MAX 16 /* tool calls in flight at once */
/* Bytes waiting for stdout at most. One writer thread owns stdout; every other thread
 * queues whole lines. A line that would take the queue past this means the client is no
 * longer reading: the server stops taking requests, cancels every call (boxes removed),
 * and pybox_mcp_serve returns -1 once they have ended. One result is at most about 12 MiB
 * of JSON (8 MiB of files inline, base64), so even 16 results at once stay under it for a
 * client that reads, however slowly. */
#define PYBOX_MCP_OUT_QUEUE_MAX (256 * 1024 * 1024)
/* At the end (stdin closed, stop_fd), after every call has ended: the longest the writer
 * is given to write what is still queued before pybox_mcp_serve returns without it. */
#define PYBOX_MCP_FLUSH_MS 5000
/* A member a tool may add to its result, never sent: the core takes it out before
 * sending, and gives it to the tool's drop() when the result is dropped (its call was
 * cancelled, or its client gone). run_python names the folder it kept under
 * --output-root there, session_open the session it opened. */
#define PYBOX_MCP_KEPT_KEY "_pybox_kept_dir"
#define PYBOX_MCP_IMAGES_MAX 8
/* While a program runs, a call that asked for progress is sent the box's elapsed time
 * and kernel readings this often. */
#define PYBOX_MCP_PROGRESS_MS 1000
/* The output root's ceiling (--output-root-max, --output-root-age; docs/mcp.md): what the
 * call folders under it may hold together, each file and folder counted as at least
 * PYBOX_MCP_ENTRY_MIN bytes (so many small files count too), and how long a call folder is
 * kept (by its modification time, when its files were written) before the server removes
 * it. A call whose files could take the folders past the ceiling is refused before its box.
 * The least ceiling is what one call may add (pybox_mcp_call_output_most). */
#define PYBOX_MCP_ENTRY_MIN 4096
#define PYBOX_MCP_OUTPUT_ROOT_MAX (1024LL * 1024 * 1024)
#define PYBOX_MCP_OUTPUT_ROOT_AGE_S (24LL * 3600)
#define PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S 60LL
/* Warm boxes (--warm, --warm-wait; docs/mcp.md): how many the server keeps waiting per
 * image it offers, made, verified, their interpreter started and the image's preload
 * imported, each for one call; and how long one may wait before it is replaced (its own
 * init ends it PYBOX_MCP_WARM_MARGIN_MS later, should the server be gone). */
#define PYBOX_MCP_WARM 1
#define PYBOX_MCP_WARM_MAX 8
#define PYBOX_MCP_WARM_WAIT_MS (300LL * 1000)
#define PYBOX_MCP_WARM_WAIT_MIN_MS (10LL * 1000)
#define PYBOX_MCP_WARM_WAIT_MAX_MS (3600LL * 1000)
#define PYBOX_MCP_WARM_MARGIN_MS (10LL * 1000)
/* A call that finds no box waiting but one being made waits for it at most this long. */
#define PYBOX_MCP_WARM_TAKE_WAIT_MAX_MS 10000
/* The two options that bound sessions (their names, without the leading "--"), named once here, each saying which
 * sessions it bounds: Python sessions (session_open's boxes, all connections together) and MCP sessions over HTTP
 * (Mcp-Session-Id, per token). */
#define PYBOX_MCP_OPT_PYTHON_SESSIONS "python-sessions"
#define PYBOX_MCP_OPT_HTTP_SESSIONS "max-http-sessions"
/* Over HTTP, one token's share of the Python sessions. */
#define PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN "python-sessions-per-token"
/* Python sessions (--python-sessions, --session-ttl, --session-idle; docs/mcp.md): how many may be live
 * at once (0: the session tools are not offered), the longest lifetime session_open may
 * ask (and its default), and how long a session waits for its next call. The box's own
 * init ends it PYBOX_MCP_WARM_MARGIN_MS after either, should the server be gone. */
#define PYBOX_MCP_SESSIONS 2
#define PYBOX_MCP_SESSIONS_MAX 16
#define PYBOX_MCP_SESSION_TTL_MS (1800LL * 1000)
#define PYBOX_MCP_SESSION_TTL_MIN_MS (10LL * 1000)
#define PYBOX_MCP_SESSION_TTL_MAX_MS (24LL * 3600 * 1000)
#define PYBOX_MCP_SESSION_IDLE_MS (300LL * 1000)
#define PYBOX_MCP_SESSION_IDLE_MIN_MS (5LL * 1000)

typedef struct pybox_mcp_config {
    char images[PYBOX_MCP_IMAGES_MAX][PYBOX_NAME_MAX]; /* allowed images, first is the default */
    size_t n_images;
    int64_t max_timeout_ms;
    int64_t max_memory_bytes;
    char files_root[PATH_MAX];  /* "" = no input files by path */
    char output_root[PATH_MAX]; /* "" = files that cannot be shown inline are not kept */
    int64_t output_root_max;    /* bytes the call folders under it may hold; 0 = PYBOX_MCP_OUTPUT_ROOT_MAX */
    int64_t output_root_age_s;  /* a call folder older than this goes; 0 = PYBOX_MCP_OUTPUT_ROOT_AGE_S */
    size_t out_queue_max;       /* bytes queued for stdout at most; 0 = PYBOX_MCP_OUT_QUEUE_MAX */
    char backend[32];           /* --backend ("" = the installation's) */
    int warm;                   /* warm boxes kept per image (0: none) */
    int64_t warm_wait_ms;       /* the longest one waits before it is replaced */
    int sessions;               /* sessions live at once at most (0: none) */
    int sessions_per_tenant;    /* of them, one tenant's (an HTTP token's) at most; 0: no share (stdio) */
    int64_t session_ttl_ms;     /* the longest lifetime a session may have */
    int64_t session_idle_ms;    /* how long a session waits for its next call */
} pybox_mcp_config_t;

/* Report progress of a call (only when the client asked for it). */
typedef void (*pybox_mcp_progress_fn)(void *ctx, double progress, double total, const char *message);

/* Do one tools/call. cancel_fd becomes readable when the call is cancelled (poll it;
 * never read it). Returns the result object (the caller frees it), or NULL when the call
 * was cancelled (then nothing is sent). */
typedef cJSON *(*pybox_mcp_runner_fn)(void *arg, const pybox_mcp_config_t *cfg, const cJSON *arguments, int cancel_fd,
                                      pybox_mcp_progress_fn progress, void *progress_ctx);

/* A tool the server serves. */
typedef struct pybox_mcp_tool {
    const char *name;
    /* Its tools/list entry: name, description, inputSchema, outputSchema (caller frees). */
    cJSON *(*describe)(const pybox_mcp_config_t *cfg);
    pybox_mcp_runner_fn call;
    /* Its result is dropped (cancelled): undo what kept (its PYBOX_MCP_KEPT_KEY member)
     * names; arg is the runner's. May be NULL. */
    void (*drop)(void *arg, const pybox_mcp_config_t *cfg, const cJSON *kept);
    /* The MCP connection connection (pybox_mcp_call_connection) has ended, every call of
     * it ended: end what it owned. May be NULL. */
    void (*connection_end)(void *arg, uint64_t connection);
} pybox_mcp_tool_t;

/* The MCP connection a call came on (stdio: the one client; over HTTP: its
 * Mcp-Session-Id session), from the progress_ctx its runner was given: a number never
 * given to another connection of this server. What a call makes that lasts beyond it (a
 * Python session) belongs to that connection, ends with it (the tools' connection_end),
 * and is not another connection's to use. */
uint64_t pybox_mcp_call_connection(const void *progress_ctx);
/* Whose that connection is (pybox_mcp_hooks_t.tenant; 0: the server's one client). */
uint64_t pybox_mcp_call_tenant(const void *progress_ctx);

/* ---- the protocol core: sessions ----
 * A session is one client's protocol state: initialized or not, the version agreed, its
 * calls in flight (at most PYBOX_MCP_CALLS_MAX). A transport hands it whole messages
 * (pybox_mcp_session_handle) with the sink their answers go to. */

typedef struct pybox_mcp_session pybox_mcp_session_t;

/* Where the messages answering one incoming message go: its reply, and for a tools/call
 * its progress notifications and its result, from the call's own thread. */
typedef struct pybox_mcp_sink pybox_mcp_sink_t;
struct pybox_mcp_sink {
    /* One whole message: compact JSON in valid UTF-8 with every control character
     * escaped (no newline in it), copied by the sink. reply: a response to a request (a
     * result or an error), else a notification. Returns whether it was taken; false: it
     * was dropped (its receiver is gone or not reading). Never blocks on the client. */
    bool (*send)(pybox_mcp_sink_t *k, const char *text, size_t len, bool reply);
    /* A call holds its sink from its start (hold) to its end (release, after its last
     * message); either may be NULL. */
    void (*hold)(pybox_mcp_sink_t *k);
    void (*release)(pybox_mcp_sink_t *k);
};

/* How one call ended, for the transport's log: the receipt's status word (or REFUSED: a
 * refusal, no box; CANCELLED: the client cancelled it, or went; OK: a result with no
 * receipt, as session_open's; FAILED: the call could not start), the run's id ("-"
 * without a run), and how long it took. */
typedef struct pybox_mcp_call_end {
    const char *status;
    const char *run_id;
    double ms;
} pybox_mcp_call_end_t;

/* What a transport counts or logs around calls (any member may be NULL). call_begin is
 * asked before a call starts: false refuses it as too many in flight (the client gets
 * -32603 and the outcome is PYBOX_MCP_BUSY); every call it admitted is given to call_end
 * once, before its result is sent. */
typedef struct pybox_mcp_hooks {
    bool (*call_begin)(void *ctx);
    void (*call_end)(void *ctx, const pybox_mcp_call_end_t *end);
    void *ctx;
    /* A cancellation may overtake its request (over HTTP they come on connections of
     * their own): one that names no call in progress is remembered (the last
     * PYBOX_MCP_EARLY_CANCELS), and a tools/call with that id arriving later is not run
     * (PYBOX_MCP_NO_REPLY: nothing is answered, no box is made). */
    bool early_cancels;
    /* Whose the connection is when the server serves several (over HTTP: its token,
     * numbered from 1): what it opens counts in that tenant's share
     * (pybox_mcp_config_t.sessions_per_tenant). 0: the server's one client (stdio). */
    uint64_t tenant;
} pybox_mcp_hooks_t;
#define PYBOX_MCP_EARLY_CANCELS 16

typedef enum {
    PYBOX_MCP_NO_REPLY,      /* a notification or a response (or nothing): nothing is answered */
    PYBOX_MCP_REPLIED,       /* answered, in the sink already: a result, or an error naming the request */
    PYBOX_MCP_REFUSED,       /* not a request this server can take (not JSON, too large, no usable id): an
                                error with id null is in the sink */
    PYBOX_MCP_BUSY,          /* a call refused as one too many in flight: the error is in the sink */
    PYBOX_MCP_CALL,          /* a call started: its messages go to the sink, then the sink is released */
    PYBOX_MCP_NEEDS_SESSION, /* PYBOX_MCP_ONLY_INITIALIZE and not an initialize: nothing was done or sent */
} pybox_mcp_outcome_t;

typedef struct pybox_mcp_handled {
    pybox_mcp_outcome_t outcome;
    bool progress;    /* PYBOX_MCP_CALL: the client asked for progress notifications */
    bool initialized; /* this message initialized the session */
    char method[40];  /* the message's method, for the log ("" when none, escaped, cut) */
} pybox_mcp_handled_t;

/* Flags of pybox_mcp_session_handle. */
#define PYBOX_MCP_ONLY_INITIALIZE 1u /* take an initialize request only (a client with no session yet) */

/* A new session (NULL: out of memory). cfg, tools and hooks must outlive it; arg is given
 * to every call. */
pybox_mcp_session_t *pybox_mcp_session_new(const pybox_mcp_config_t *cfg, const pybox_mcp_tool_t *tools, size_t n_tools,
                                           void *arg, const pybox_mcp_hooks_t *hooks);
/* One whole message (len bytes at most PYBOX_MCP_LINE_MAX; space, tab, CR and LF are
 * whitespace between its tokens), checked as docs/mcp.md says, then answered into sink.
 * Thread-safe. */
void pybox_mcp_session_handle(pybox_mcp_session_t *s, const char *msg, size_t len, unsigned flags,
                              pybox_mcp_sink_t *sink, pybox_mcp_handled_t *out);
/* A line of the server's own on stderr, "pybox mcp: " and the words (stdio's log). */
void pybox_mcp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The protocol version initialize agreed, or NULL before. The text is the server's own. */
const char *pybox_mcp_session_version(pybox_mcp_session_t *s);
/* Calls in flight (not yet ended). */
size_t pybox_mcp_session_calls(pybox_mcp_session_t *s);
/* Cancel the calls whose sink is sink (NULL: every call). by_client: the client cancelled
 * them or is gone, so nothing is sent for them (what they kept is dropped); otherwise
 * (shutdown) their programs are stopped and a result they still give is sent. Returns
 * how many were cancelled. Does not wait. */
size_t pybox_mcp_session_cancel(pybox_mcp_session_t *s, const pybox_mcp_sink_t *sink, bool by_client);
/* Join the calls that have ended (all: wait for every one). Safe from several threads:
 * one reaps at a time. */
void pybox_mcp_session_reap(pybox_mcp_session_t *s, bool all);
/* Cancel every call (by_client), wait for each to end (every box removed), end what the
 * connection owned (the tools' connection_end), free. */
void pybox_mcp_session_free(pybox_mcp_session_t *s);
/* The answer to a message larger than PYBOX_MCP_LINE_MAX (or than memory could hold),
 * which a transport drops unread: an error with id null, into k. */
void pybox_mcp_too_large(pybox_mcp_sink_t *k, bool out_of_memory);

/* Serve on in_fd/out_fd until in_fd ends or stop_fd (-1: none) becomes readable; then
 * cancel what is in flight, wait for it (every box removed), give the writer up to
 * PYBOX_MCP_FLUSH_MS to write what is queued, and return 0, or -1 when lines were left
 * unwritten then. When the client stops reading (out_queue_max), the same end
 * comes at once, nothing more is written, and it returns -1. Logs go to stderr only.
 * arg is given to every call. */
int pybox_mcp_serve(int in_fd, int out_fd, int stop_fd, const pybox_mcp_config_t *cfg, const pybox_mcp_tool_t *tools,
                    size_t n_tools, void *arg);

/* A tool result that is a refusal or a failure: isError with one text block. */
cJSON *pybox_mcp_error_result(const char *message);

#endif
