/* SPDX-License-Identifier: MIT */
/* The MCP server's warm boxes (see pool.h). A thread per image makes its boxes, one at a
 * time, and looks after those that wait (so a box of one image never waits for another's
 * to be made); a call takes one under the lock and the thread is woken to make the next. */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../hooks.h"
#include "../log.h"
#include "../util.h"

/* How often the boxes that wait are looked at (ended, said something, waited too long). */
#define POOL_CHECK_MS 1000
/* After a box of an image could not be made ready: the next try waits this long, doubled
 * at each further failure up to the most. */
#define POOL_BACKOFF_MS 1000
#define POOL_BACKOFF_MAX_MS 60000

typedef struct slot {
    pybox_mcp_pool_t *pool;
    size_t index;
    pthread_t thread;
    bool started;
    pybox_mcp_warm_t *w[PYBOX_MCP_WARM_MAX]; /* waiting, oldest first */
    int n;
    bool making; /* a box of this image is being made */
    int takers;  /* calls waiting for the box being made (at most one) */
    int fails;
    int64_t next_try_ms;
    char last_failure[512];   /* why the last box of this image was not used ("" none) */
    pybox_mcp_warm_t *reused; /* under the test-only relaxation reused-box: the last call's box, for the next */
} slot_t;

struct pybox_mcp_pool {
    const pybox_mcp_config_t *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    slot_t slots[PYBOX_MCP_IMAGES_MAX];
};

/* The preparation of a box for image: a call of the image that asks for nothing, under
 * the server's ceilings, made before its program. */
static int make_one(const pybox_mcp_pool_t *p, const char *image, pybox_mcp_warm_t **out, pybox_error_t *err)
{
    pybox_mcp_warm_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a warm box");
    pybox_ready_init(&w->rd);
    pybox_request_t rq = {
        .program = "",
        .image = image,
        .backend = p->cfg->backend,
        .cap_timeout_ms = p->cfg->max_timeout_ms,
        .cap_memory_bytes = p->cfg->max_memory_bytes,
    };
    if (pybox_prepare(&rq, &w->rd, err) < 0) {
        pybox_ready_free(&w->rd);
        free(w);
        return -1;
    }
    w->rd.run.policy.box_wait_ms = p->cfg->warm_wait_ms + PYBOX_MCP_WARM_MARGIN_MS;
    w->rd.run.policy.box_life_ms = 0;
    if (pybox_hook(PYBOX_HOOK_WARM_REUSE) != NULL) {
        /* A test showing what a fresh box per call keeps apart: the box keeps its
         * interpreter for more than one call (a session's box), and says it is relaxed. */
        w->rd.run.policy.relax |= PYBOX_RELAX_REUSED_BOX;
        w->rd.run.policy.box_life_ms = p->cfg->warm_wait_ms + PYBOX_MCP_WARM_MARGIN_MS;
    }
    if (pybox_ahead_open(w->rd.be, &w->rd.run, &w->box, err) < 0) {
        pybox_ready_free(&w->rd);
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void pybox_mcp_warm_free(pybox_mcp_warm_t *w)
{
    if (w == NULL)
        return;
    pybox_ahead_discard(w->box); /* NULL once it ran */
    pybox_ready_free(&w->rd);
    free(w);
}

static int64_t backoff_ms(int fails)
{
    int64_t ms = POOL_BACKOFF_MS;
    for (int i = 1; i < fails && ms < POOL_BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < POOL_BACKOFF_MAX_MS ? ms : POOL_BACKOFF_MAX_MS;
}

/* With the lock held: the slot's waiting boxes that may no longer be used, taken out
 * (the caller removes them without the lock). */
static int unusable_locked(pybox_mcp_pool_t *p, slot_t *s, pybox_mcp_warm_t **gone)
{
    int n = 0;
    for (int k = 0; k < s->n;) {
        char why[320];
        if (!pybox_ahead_usable(s->w[k]->box, p->cfg->warm_wait_ms, why, sizeof why)) {
            pybox_log("warm box of %s not used: %s", p->cfg->images[s->index], why);
            snprintf(s->last_failure, sizeof s->last_failure, "%s", why);
            gone[n++] = s->w[k];
            memmove(&s->w[k], &s->w[k + 1], (size_t)(s->n - k - 1) * sizeof *s->w);
            s->n--;
            continue;
        }
        k++;
    }
    return n;
}

static void wait_until(pybox_mcp_pool_t *p, int64_t until_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ms = until_ms - pybox_now_ms();
    if (ms <= 0)
        return;
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&p->cv, &p->mu, &until);
}

/* One image's thread: its boxes made, one at a time, and looked after. */
static void *slot_main(void *arg)
{
    slot_t *s = arg;
    pybox_mcp_pool_t *p = s->pool;
    char image[PYBOX_NAME_MAX];
    snprintf(image, sizeof image, "%s", p->cfg->images[s->index]);
    int64_t next_check = pybox_now_ms() + POOL_CHECK_MS;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        int64_t now = pybox_now_ms();
        if (now >= next_check) {
            pybox_mcp_warm_t *gone[PYBOX_MCP_WARM_MAX];
            int n = unusable_locked(p, s, gone);
            pthread_mutex_unlock(&p->mu);
            for (int i = 0; i < n; i++)
                pybox_mcp_warm_free(gone[i]);
            pthread_mutex_lock(&p->mu);
            next_check = pybox_now_ms() + POOL_CHECK_MS;
            continue;
        }
        if (s->n >= p->cfg->warm || s->next_try_ms > now) {
            wait_until(p, s->n < p->cfg->warm && s->next_try_ms < next_check ? s->next_try_ms : next_check);
            continue;
        }
        s->making = true;
        pthread_mutex_unlock(&p->mu);
        pybox_mcp_warm_t *w = NULL;
        pybox_error_t err = {0};
        int64_t t0 = pybox_now_ms();
        int rc = make_one(p, image, &w, &err);
        int64_t took = pybox_now_ms() - t0;
        pthread_mutex_lock(&p->mu);
        s->making = false;
        pthread_cond_broadcast(&p->cv); /* a call may wait for this one */
        if (rc < 0) {
            s->fails++;
            s->next_try_ms = pybox_now_ms() + backoff_ms(s->fails);
            pybox_strlcpy(s->last_failure, err.msg, sizeof s->last_failure);
            pybox_log("warm box of %s not made ready: %s (next try in %lld s)", image, err.msg,
                      (long long)(backoff_ms(s->fails) / 1000));
        } else if (p->stopping || s->n >= PYBOX_MCP_WARM_MAX) {
            pthread_mutex_unlock(&p->mu);
            pybox_mcp_warm_free(w);
            pthread_mutex_lock(&p->mu);
        } else {
            /* Each one: how long an image's box takes to be ready is what an operator sizes
             * --warm by, and a client may wait for it. */
            pybox_log("warm box of %s ready: made, verified and waiting for a call (in %lld ms)%s", image,
                      (long long)took, s->fails > 0 ? " (after boxes that were not)" : "");
            s->fails = 0;
            s->next_try_ms = 0;
            s->w[s->n++] = w;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pybox_mcp_pool_start(const pybox_mcp_config_t *cfg, pybox_mcp_pool_t **out, pybox_error_t *err)
{
    *out = NULL;
    if (cfg->warm <= 0)
        return 0;
    pybox_mcp_pool_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the warm boxes");
    p->cfg = cfg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    for (size_t i = 0; i < cfg->n_images; i++) {
        slot_t *s = &p->slots[i];
        s->pool = p;
        s->index = i;
        if (pthread_create(&s->thread, NULL, slot_main, s) != 0) {
            pybox_mcp_pool_stop(p);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, EAGAIN, "the warm boxes' threads");
        }
        s->started = true;
    }
    *out = p;
    return 0;
}

pybox_mcp_warm_t *pybox_mcp_pool_take(pybox_mcp_pool_t *p, const char *image, int64_t timeout_ms, int64_t memory_bytes,
                                      char *why, size_t len)
{
    if (p == NULL) {
        snprintf(why, len, "this server keeps no warm box (--warm 0)");
        return NULL;
    }
    why[0] = '\0';
    pybox_mcp_warm_t *w = NULL;
    pybox_mcp_warm_t *stale[PYBOX_MCP_WARM_MAX];
    int n_stale = 0;
    pthread_mutex_lock(&p->mu);
    slot_t *s = NULL;
    for (size_t i = 0; i < p->cfg->n_images; i++)
        if (strcmp(p->cfg->images[i], image) == 0)
            s = &p->slots[i];
    if (s == NULL) {
        snprintf(why, len, "no warm box is kept for the image %s", image);
    } else if (s->reused != NULL) {
        w = s->reused; /* the test-only relaxation: the last call's box again */
        s->reused = NULL;
    } else {
        /* None waits but one is being made, or is about to be (its thread was just woken):
         * it is ready no later than a cold box made now would be, so one call waits for
         * it (only one: the boxes are made one at a time, and a second call would wait for
         * two makings where a cold box takes one), unless making it fails (the next try is
         * then put off) or it takes longer than the bound. */
        int64_t until_ms = pybox_now_ms() + PYBOX_MCP_WARM_TAKE_WAIT_MAX_MS;
        if (s->n == 0 && s->takers == 0) {
            pthread_cond_broadcast(&p->cv); /* a call waits: the next box is made now */
            s->takers++;
            while (s->n == 0 && !p->stopping && (s->making || s->next_try_ms <= pybox_now_ms()) &&
                   pybox_now_ms() < until_ms)
                wait_until(p, until_ms);
            s->takers--;
        }
        while (s->n > 0 && w == NULL) {
            pybox_mcp_warm_t *c = s->w[0];
            memmove(&s->w[0], &s->w[1], (size_t)(s->n - 1) * sizeof *s->w);
            s->n--;
            char bad[320];
            const pybox_policy_t *bp = pybox_ahead_policy(c->box);
            if (!pybox_ahead_usable(c->box, p->cfg->warm_wait_ms, bad, sizeof bad)) {
                pybox_log("warm box of %s not used: %s", image, bad);
                snprintf(s->last_failure, sizeof s->last_failure, "%s", bad);
                stale[n_stale++] = c;
                continue;
            }
            if (memory_bytes > 0 && memory_bytes != bp->memory_bytes) {
                snprintf(why, len,
                         "the call asked for %lld MiB of memory; the warm boxes of %s have %lld MiB (the image's "
                         "default)",
                         (long long)(memory_bytes >> 20), image, (long long)(bp->memory_bytes >> 20));
                s->w[s->n++] = c; /* still good for a call that asks what it has */
                break;
            }
            if (timeout_ms > bp->timeout_ms) {
                snprintf(why, len, "the call asked for a deadline of %.3g s; the warm boxes of %s have %.3g s",
                         (double)timeout_ms / 1000.0, image, (double)bp->timeout_ms / 1000.0);
                s->w[s->n++] = c;
                break;
            }
            w = c;
        }
        if (w == NULL && why[0] == '\0' && s->last_failure[0] != '\0')
            snprintf(why, len, "no warm box of %s was ready (the last one was not used: %s)", image, s->last_failure);
        else if (w == NULL && why[0] == '\0')
            snprintf(why, len, "no warm box of %s was ready", image);
    }
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n_stale; i++)
        pybox_mcp_warm_free(stale[i]);
    return w;
}

int pybox_mcp_pool_run(pybox_mcp_warm_t *w, const pybox_run_request_t *req, pybox_run_result_t *res)
{
    if (pybox_policy_relaxed_in(pybox_ahead_policy(w->box), PYBOX_RELAX_REUSED_BOX)) {
        bool ended = false;
        int rc = pybox_ahead_call(w->box, req, res, &ended);
        if (ended)
            w->box = NULL; /* freed by the call */
        return rc;
    }
    pybox_ahead_t *box = w->box;
    w->box = NULL;
    return pybox_ahead_run(box, req, res);
}

void pybox_mcp_pool_done(pybox_mcp_pool_t *p, pybox_mcp_warm_t *w)
{
    /* The box taken is replaced now that its call has its receipt: made while the call
     * ran, the next box would take CPU from it (about 1 ms of a 6 ms warm call here). */
    if (p != NULL) {
        pthread_mutex_lock(&p->mu);
        for (size_t i = 0; w != NULL && w->box != NULL && i < p->cfg->n_images; i++) {
            slot_t *s = &p->slots[i];
            if (strcmp(p->cfg->images[i], w->rd.image) == 0 && s->reused == NULL && !p->stopping) {
                s->reused = w;
                w = NULL;
            }
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    pybox_mcp_warm_free(w);
}

void pybox_mcp_pool_stop(pybox_mcp_pool_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->cfg->n_images; i++)
        if (p->slots[i].started)
            pthread_join(p->slots[i].thread, NULL);
    for (size_t i = 0; i < p->cfg->n_images; i++) {
        slot_t *s = &p->slots[i];
        for (int k = 0; k < s->n; k++)
            pybox_mcp_warm_free(s->w[k]);
        s->n = 0;
        pybox_mcp_warm_free(s->reused);
        s->reused = NULL;
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
