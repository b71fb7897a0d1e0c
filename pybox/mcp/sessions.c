/* SPDX-License-Identifier: MIT */
/* The MCP server's sessions (see sessions.h): a table under one lock, and a thread that
 * ends the sessions past their idle limit or lifetime. A session's box is never touched
 * under the lock: it is taken out (busy) first. */
#include "sessions.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../hooks.h"
#include "../log.h"
#include "../util.h"

#define SESSIONS_CHECK_MS 250
#define SESSIONS_ENDED_KEPT 32 /* ended ids remembered, so a call names why its session is gone */

typedef struct sess {
    char id[33];
    uint64_t owner;      /* the MCP connection that opened it (pybox_mcp_call_connection) */
    uint64_t tenant;     /* whose share it counts in (pybox_mcp_call_tenant) */
    pybox_mcp_warm_t *w; /* NULL while busy */
    bool busy;
    bool orphaned;   /* its connection ended while a call ran in it: it ends when given back */
    int64_t ends_ms; /* its lifetime's end (pybox_now_ms) */
    int64_t idle_ms;
    int64_t last_ms; /* its last call's end, or its opening */
} sess_t;

struct pybox_mcp_sessions {
    const pybox_mcp_config_t *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    sess_t *s[PYBOX_MCP_SESSIONS_MAX];
    uint64_t opening[PYBOX_MCP_SESSIONS_MAX]; /* places taken by sessions being opened: their tenants */
    int reserved;
    struct {
        char id[33];
        uint64_t owner;
        char why[160];
    } ended[SESSIONS_ENDED_KEPT];
    int ended_next;
    pthread_t thread;
    bool started;
};

static int live_locked(const pybox_mcp_sessions_t *ss)
{
    int n = 0;
    for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX; i++)
        n += ss->s[i] != NULL;
    return n;
}

/* A tenant's sessions, live or being opened. */
static int of_tenant_locked(const pybox_mcp_sessions_t *ss, uint64_t tenant)
{
    int n = 0;
    for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX; i++)
        n += ss->s[i] != NULL && ss->s[i]->tenant == tenant;
    for (int i = 0; i < ss->reserved; i++)
        n += ss->opening[i] == tenant;
    return n;
}

/* A place reserved for tenant is given up (its session opened, or not). */
static void unreserve_locked(pybox_mcp_sessions_t *ss, uint64_t tenant)
{
    for (int i = 0; i < ss->reserved; i++)
        if (ss->opening[i] == tenant) {
            ss->opening[i] = ss->opening[--ss->reserved];
            return;
        }
}

static void remember_locked(pybox_mcp_sessions_t *ss, const sess_t *s, const char *why)
{
    int k = ss->ended_next++ % SESSIONS_ENDED_KEPT;
    pybox_strlcpy(ss->ended[k].id, s->id, sizeof ss->ended[k].id);
    ss->ended[k].owner = s->owner;
    pybox_strlcpy(ss->ended[k].why, why, sizeof ss->ended[k].why);
}

/* End a session that is no longer in the table: its box closed and removed, its own
 * receipt's verdict logged (the agent did not ask for it: it ended by its limits). */
static void end_unasked(const char *id, pybox_mcp_warm_t *w, const char *why)
{
    const char *hold = pybox_hook(PYBOX_HOOK_SESSION_END_HOLD);
    if (hold != NULL) {
        int h = open(hold, O_RDONLY | O_CLOEXEC);
        char byte;
        if (h >= 0 && read(h, &byte, 1) < 0)
            byte = 0;
        if (h >= 0)
            close(h);
    }
    pybox_run_result_t res;
    pybox_ahead_t *box = w->box;
    w->box = NULL;
    pybox_ahead_close(box, &res);
    /* Its first 8 digits only, as the HTTP server logs an Mcp-Session-Id: the log names a
     * session without handing whoever reads it the id that reaches it. */
    pybox_log("session %.8s ended (%s): %s, box %s", id, why, pybox_end_word(res.end),
              res.gone ? "removed and confirmed gone" : "NOT confirmed gone");
    pybox_run_result_free(&res);
    pybox_mcp_warm_free(w);
}

static void *sessions_main(void *arg)
{
    pybox_mcp_sessions_t *ss = arg;
    pthread_mutex_lock(&ss->mu);
    while (!ss->stopping) {
        int64_t now = pybox_now_ms();
        sess_t *gone = NULL;
        char why[160] = "";
        for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX && gone == NULL; i++) {
            sess_t *s = ss->s[i];
            if (s == NULL || s->busy)
                continue;
            if (now >= s->ends_ms)
                snprintf(why, sizeof why, "its lifetime ran out");
            else if (now - s->last_ms >= s->idle_ms)
                snprintf(why, sizeof why, "no call came for %lld s, its idle limit", (long long)(s->idle_ms / 1000));
            else
                continue;
            gone = s;
            ss->s[i] = NULL;
            remember_locked(ss, s, why);
        }
        if (gone != NULL) {
            pthread_mutex_unlock(&ss->mu);
            end_unasked(gone->id, gone->w, why);
            free(gone);
            pthread_mutex_lock(&ss->mu);
            pthread_cond_broadcast(&ss->cv);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += SESSIONS_CHECK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&ss->cv, &ss->mu, &until);
    }
    pthread_mutex_unlock(&ss->mu);
    return NULL;
}

int pybox_mcp_sessions_start(const pybox_mcp_config_t *cfg, pybox_mcp_sessions_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (cfg->sessions <= 0)
        return 0;
    pybox_mcp_sessions_t *ss = calloc(1, sizeof *ss);
    if (ss == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the sessions' table");
    ss->cfg = cfg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ss->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&ss->mu, NULL);
    if (pthread_create(&ss->thread, NULL, sessions_main, ss) != 0) {
        pybox_mcp_sessions_stop(ss);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EAGAIN, "the sessions' thread");
    }
    ss->started = true;
    *out = ss;
    return 0;
}

int pybox_mcp_sessions_reserve(pybox_mcp_sessions_t *ss, uint64_t tenant, char *why, size_t len)
{
    if (ss == NULL) {
        snprintf(why, len, "this server keeps no sessions (--" PYBOX_MCP_OPT_PYTHON_SESSIONS " 0, set by the server)");
        return -1;
    }
    pthread_mutex_lock(&ss->mu);
    int all = live_locked(ss) + ss->reserved;
    int share = ss->cfg->sessions_per_tenant;
    int mine = tenant != 0 && share > 0 ? of_tenant_locked(ss, tenant) : 0;
    bool room = !ss->stopping && all < ss->cfg->sessions && (tenant == 0 || share <= 0 || mine < share);
    if (room)
        ss->opening[ss->reserved++] = tenant;
    pthread_mutex_unlock(&ss->mu);
    if (room)
        return 0;
    if (tenant != 0 && share > 0 && mine >= share)
        snprintf(why, len,
                 "this token has %d session%s live or opening, the most one token keeps "
                 "(--" PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN ", set by the server); close one with session_close",
                 mine, mine == 1 ? "" : "s");
    else
        snprintf(why, len,
                 "%d session%s live or opening, the most this server keeps (set by the server); close one with "
                 "session_close",
                 all, all == 1 ? " is" : "s are");
    return -1;
}

void pybox_mcp_sessions_unreserve(pybox_mcp_sessions_t *ss, uint64_t tenant)
{
    pthread_mutex_lock(&ss->mu);
    unreserve_locked(ss, tenant);
    pthread_mutex_unlock(&ss->mu);
}

int pybox_mcp_sessions_add(pybox_mcp_sessions_t *ss, pybox_mcp_warm_t *w, uint64_t owner, uint64_t tenant,
                           int64_t ttl_ms, int64_t idle_ms, char id[33], pybox_error_t *err)
{
    sess_t *s = calloc(1, sizeof *s);
    if (s == NULL || pybox_random_hex(16, s->id, err) < 0) {
        free(s);
        pybox_mcp_sessions_unreserve(ss, tenant);
        return err->kind != PYBOX_ERR_NONE ? -1 : pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a session");
    }
    s->w = w;
    s->owner = owner;
    s->tenant = tenant;
    s->idle_ms = idle_ms;
    s->last_ms = pybox_now_ms();
    s->ends_ms = s->last_ms + ttl_ms;
    pybox_ahead_set_session(w->box, s->id);
    memcpy(id, s->id, 33);
    pthread_mutex_lock(&ss->mu);
    unreserve_locked(ss, tenant);
    for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX; i++)
        if (ss->s[i] == NULL) {
            ss->s[i] = s;
            s = NULL;
            break;
        }
    pthread_mutex_unlock(&ss->mu);
    if (s != NULL) { /* cannot happen: the place was reserved */
        free(s);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOSPC, "no place for the session");
    }
    return 0;
}

/* A session id is compared in constant time (over HTTP any token's client may send one),
 * so how long a refusal takes says nothing of how much of an id was right. */
static bool same_id(const char *kept, const char *given)
{
    size_t n = strlen(kept);
    return strlen(given) == n && CRYPTO_memcmp(kept, given, n) == 0;
}

/* The live session with this id that owner opened: another connection's is not found,
 * as if it did not exist (any: whoever opened it, for the server's own use). */
static sess_t *find_locked(pybox_mcp_sessions_t *ss, const char *id, uint64_t owner, bool any, int *at)
{
    for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX; i++)
        if (ss->s[i] != NULL && same_id(ss->s[i]->id, id) && (any || ss->s[i]->owner == owner)) {
            if (at != NULL)
                *at = i;
            return ss->s[i];
        }
    return NULL;
}

pybox_mcp_warm_t *pybox_mcp_sessions_take(pybox_mcp_sessions_t *ss, const char *id, uint64_t owner, char *why,
                                          size_t len)
{
    if (ss == NULL) {
        snprintf(why, len, "this server keeps no sessions (--" PYBOX_MCP_OPT_PYTHON_SESSIONS " 0, set by the server)");
        return NULL;
    }
    pybox_mcp_warm_t *w = NULL;
    sess_t *gone = NULL;
    pthread_mutex_lock(&ss->mu);
    int at = -1;
    sess_t *s = find_locked(ss, id, owner, false, &at);
    if (s != NULL && !s->busy && !s->orphaned && !ss->stopping && pybox_now_ms() >= s->ends_ms) {
        /* Its lifetime ran out before the session thread ended it: no call is taken. */
        gone = s;
        ss->s[at] = NULL;
        remember_locked(ss, s, "its lifetime ran out");
        snprintf(why, len, "session %s has ended: its lifetime ran out", id);
        pthread_cond_broadcast(&ss->cv);
    } else if (s != NULL && !s->busy && !s->orphaned && !ss->stopping) {
        s->busy = true;
        w = s->w;
        s->w = NULL;
    } else if (s != NULL) {
        snprintf(why, len, "a call runs in session %s now: a session takes one call at a time", id);
    } else {
        snprintf(why, len, "no live session of this server has that id");
        for (int i = 0; i < SESSIONS_ENDED_KEPT; i++)
            if (ss->ended[i].id[0] != '\0' && ss->ended[i].owner == owner && same_id(ss->ended[i].id, id))
                snprintf(why, len, "session %s has ended: %s", id, ss->ended[i].why);
    }
    pthread_mutex_unlock(&ss->mu);
    if (gone != NULL) {
        end_unasked(gone->id, gone->w, "its lifetime ran out");
        free(gone);
    }
    return w;
}

void pybox_mcp_sessions_give_back(pybox_mcp_sessions_t *ss, const char *id, pybox_mcp_warm_t *w, const char *how)
{
    pthread_mutex_lock(&ss->mu);
    int at = -1;
    sess_t *s = find_locked(ss, id, 0, true, &at);
    if (s != NULL && s->orphaned && w != NULL) {
        /* its connection ended while this call ran: the session ends now */
        ss->s[at] = NULL;
        remember_locked(ss, s, "its MCP connection ended");
        free(s);
        how = "its MCP connection ended";
    } else if (s != NULL && w != NULL) {
        s->w = w;
        s->busy = false;
        s->last_ms = pybox_now_ms();
        w = NULL;
    } else if (s != NULL) {
        ss->s[at] = NULL;
        remember_locked(ss, s, how);
        free(s);
    }
    pthread_cond_broadcast(&ss->cv);
    pthread_mutex_unlock(&ss->mu);
    if (w != NULL) /* its connection ended meanwhile (a taken session stays in the table) */
        end_unasked(id, w, how != NULL ? how : "its table entry was gone");
}

bool pybox_mcp_sessions_limits(pybox_mcp_sessions_t *ss, const char *id, int64_t *ends_ms, int64_t *idle_ms)
{
    pthread_mutex_lock(&ss->mu);
    sess_t *s = find_locked(ss, id, 0, true, NULL);
    if (s != NULL) {
        *ends_ms = s->ends_ms;
        *idle_ms = s->idle_ms;
    }
    pthread_mutex_unlock(&ss->mu);
    return s != NULL;
}

void pybox_mcp_sessions_end_owned(pybox_mcp_sessions_t *ss, uint64_t owner)
{
    if (ss == NULL)
        return;
    const char *why = "its MCP connection ended";
    for (;;) {
        sess_t *gone = NULL;
        pthread_mutex_lock(&ss->mu);
        for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX && gone == NULL; i++) {
            sess_t *s = ss->s[i];
            if (s == NULL || s->owner != owner || s->orphaned)
                continue;
            if (s->busy) { /* a call runs in it: it ends when the call gives it back */
                s->orphaned = true;
                continue;
            }
            gone = s;
            ss->s[i] = NULL;
            remember_locked(ss, s, why);
        }
        pthread_cond_broadcast(&ss->cv);
        pthread_mutex_unlock(&ss->mu);
        if (gone == NULL)
            return;
        end_unasked(gone->id, gone->w, why);
        free(gone);
    }
}

void pybox_mcp_sessions_end(pybox_mcp_sessions_t *ss, const char *id, const char *why)
{
    if (ss == NULL)
        return;
    pthread_mutex_lock(&ss->mu);
    int at = -1;
    sess_t *s = find_locked(ss, id, 0, true, &at);
    if (s != NULL && s->busy) {
        s->orphaned = true; /* a call runs in it: it ends when the call gives it back */
        s = NULL;
    } else if (s != NULL) {
        ss->s[at] = NULL;
        remember_locked(ss, s, why);
    }
    pthread_cond_broadcast(&ss->cv);
    pthread_mutex_unlock(&ss->mu);
    if (s == NULL)
        return;
    end_unasked(s->id, s->w, why);
    free(s);
}

void pybox_mcp_sessions_stop(pybox_mcp_sessions_t *ss)
{
    if (ss == NULL)
        return;
    pthread_mutex_lock(&ss->mu);
    ss->stopping = true;
    pthread_cond_broadcast(&ss->cv);
    pthread_mutex_unlock(&ss->mu);
    if (ss->started)
        pthread_join(ss->thread, NULL);
    /* The server's calls have all ended (pybox_mcp_serve waits for them): none is busy. */
    for (int i = 0; i < PYBOX_MCP_SESSIONS_MAX; i++) {
        sess_t *s = ss->s[i];
        if (s == NULL)
            continue;
        ss->s[i] = NULL;
        if (s->w != NULL)
            end_unasked(s->id, s->w, "the server ended");
        free(s);
    }
    pthread_cond_destroy(&ss->cv);
    pthread_mutex_destroy(&ss->mu);
    free(ss);
}
