/* SPDX-License-Identifier: MIT */
/* The watcher: cgroup location and kernel counters (see watch.h). */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

enum {
    F_MEM_NOW = PYBOX_WF_MEM_NOW,
    F_MEM_PEAK = PYBOX_WF_MEM_PEAK,
    F_OOM = PYBOX_WF_OOM,
    F_PIDS_NOW = PYBOX_WF_PIDS_NOW,
    F_PIDS_PEAK = PYBOX_WF_PIDS_PEAK,
    F_PIDS_EVENTS = PYBOX_WF_PIDS_EVENTS,
    F_CPU = PYBOX_WF_CPU,
    F_CPU_STAT = PYBOX_WF_CPU_STAT,
};

static int open_in(const char *dir, const char *file)
{
    char p[PATH_MAX];
    if (dir[0] == '\0' || pybox_fmt(p, sizeof p, "%s/%s", dir, file) < 0)
        return -1; /* "": the controller's folder was not found; never open "/<file>" */
    return open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

/* The files the watcher reads, by cgroup version: on v2 all in the box's one folder, on
 * v1 in its controller's (NULL: none in that version). */
static const struct {
    int file;
    int controller; /* v1 */
    const char *v2, *v1;
} watched[] = {
    {F_MEM_NOW, PYBOX_CG_MEMORY, "memory.current", "memory.usage_in_bytes"},
    {F_MEM_PEAK, PYBOX_CG_MEMORY, "memory.peak", "memory.max_usage_in_bytes"},
    {F_OOM, PYBOX_CG_MEMORY, "memory.events", "memory.oom_control"},
    {F_PIDS_NOW, PYBOX_CG_PIDS, "pids.current", "pids.current"},
    {F_PIDS_PEAK, PYBOX_CG_PIDS, "pids.peak", "pids.peak"},
    {F_PIDS_EVENTS, PYBOX_CG_PIDS, "pids.events", "pids.events"},
    {F_CPU, PYBOX_CG_CPUACCT, "cpu.stat", "cpuacct.usage"}, /* v2: usage and throttling in one file */
    {F_CPU_STAT, PYBOX_CG_CPU, NULL, "cpu.stat"},
};

static void open_files(pybox_watch_t *w, const pybox_cgroup_loc_t *loc)
{
    bool v2 = loc->version == PYBOX_CG_V2;
    w->version = loc->version;
    snprintf(w->where, sizeof w->where, "%s", loc->dir[v2 ? 0 : PYBOX_CG_MEMORY]);
    for (size_t i = 0; i < sizeof watched / sizeof *watched; i++) {
        const char *name = v2 ? watched[i].v2 : watched[i].v1;
        if (name != NULL)
            w->fd[watched[i].file] = open_in(loc->dir[v2 ? 0 : watched[i].controller], name);
    }
}

void pybox_watch_init(pybox_watch_t *w)
{
    memset(w, 0, sizeof *w);
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        w->fd[i] = -1;
    w->interval_ms = PYBOX_WATCH_INTERVAL_MS;
    w->pids_seen_max = -1;
}

int pybox_watch_arm(pybox_watch_t *w, const pybox_cgroup_loc_t *loc, pybox_error_t *err)
{
    double t0 = pybox_now_s();
    pybox_watch_free(w);
    pybox_watch_init(w);
    if ((loc->version == PYBOX_CG_V2 && loc->dir[0][0] == '/') ||
        (loc->version == PYBOX_CG_V1 && loc->dir[PYBOX_CG_MEMORY][0] == '/'))
        open_files(w, loc);
    else
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "the box's cgroup is not known");
    w->samples = calloc(PYBOX_WATCH_SAMPLES_MAX, sizeof *w->samples);
    if (w->samples == NULL) {
        pybox_watch_free(w);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "watcher samples");
    }
    w->armed_at_ms = pybox_now_ms();
    w->next_ms = w->armed_at_ms;
    w->arm_ms = (pybox_now_s() - t0) * 1000.0;
    return 0;
}

void pybox_watch_free(pybox_watch_t *w)
{
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        if (w->fd[i] >= 0) {
            close(w->fd[i]);
            w->fd[i] = -1;
        }
    free(w->samples);
    w->samples = NULL;
    w->n_samples = 0;
    w->version = PYBOX_CG_NONE;
}

/* Read a whole small counter file from its start. -1 with errno on failure. */
static ssize_t slurp(int fd, char *buf, size_t len)
{
    if (fd < 0) {
        errno = ENOENT;
        return -1;
    }
    ssize_t n = pread(fd, buf, len - 1, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* A file holding one non-negative integer. */
static int parse_single(const char *s, int64_t *out)
{
    uint64_t v;
    char num[32];
    size_t n = strcspn(s, "\n");
    if (n == 0 || n >= sizeof num || s[n] != '\n' || s[n + 1] != '\0')
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    if (pybox_parse_u64(num, &v) < 0 || v > INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* "key value" lines: the value for key. */
static int parse_keyed(const char *s, const char *key, int64_t *out)
{
    size_t klen = strlen(key);
    for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, klen) != 0 || p[klen] != ' ')
            continue;
        char num[32];
        const char *v = p + klen + 1;
        size_t n = strcspn(v, "\n");
        if (n == 0 || n >= sizeof num)
            return -1;
        memcpy(num, v, n);
        num[n] = '\0';
        uint64_t u;
        if (pybox_parse_u64(num, &u) < 0 || u > INT64_MAX)
            return -1;
        *out = (int64_t)u;
        return 0;
    }
    return -1;
}

/* How the v2 counters are read: memory.peak, memory.events "oom_kill", pids.peak,
 * pids.events "max", cpu.stat "usage_usec", "nr_throttled" and "throttled_usec". A test
 * build only (Makefile BROKEN=v2-reader) reads each from a wrong file or key, plausible
 * numbers that are not the counters, so the v2 tests can be shown to catch a reader that
 * lies; no other build has this code. */
#ifdef PYBOX_TEST_BROKEN_V2_READER
#define V2_PEAK F_MEM_NOW
#define V2_OOM_KILL "oom_group_kill"
#define V2_PIDS_PEAK F_PIDS_NOW
#define V2_REFUSED F_PIDS_NOW
#define V2_USAGE "user_usec"
#define V2_THROTTLED "nr_bursts"
#define V2_THROTTLED_USEC "burst_usec"
#else
#define V2_PEAK F_MEM_PEAK
#define V2_OOM_KILL "oom_kill"
#define V2_PIDS_PEAK F_PIDS_PEAK
#define V2_REFUSED F_PIDS_EVENTS
#define V2_USAGE "usage_usec"
#define V2_THROTTLED "nr_throttled"
#define V2_THROTTLED_USEC "throttled_usec"
#endif

static void got(pybox_reading_t *r, unsigned bit, int ok)
{
    if (ok)
        r->valid |= bit;
}

void pybox_watch_parse(pybox_cg_version_t version, const char *const text[PYBOX_WATCH_FILES], pybox_reading_t *r)
{
    r->valid = 0;
    const char *const *t = text;
    bool v2 = version == PYBOX_CG_V2;
    int peak = v2 ? V2_PEAK : F_MEM_PEAK, pids_peak = v2 ? V2_PIDS_PEAK : F_PIDS_PEAK;
    got(r, PYBOX_RD_MEM_NOW, t[F_MEM_NOW] && parse_single(t[F_MEM_NOW], &r->mem_now) == 0);
    got(r, PYBOX_RD_MEM_PEAK, t[peak] && parse_single(t[peak], &r->mem_peak) == 0);
    got(r, PYBOX_RD_OOM_KILLS, t[F_OOM] && parse_keyed(t[F_OOM], v2 ? V2_OOM_KILL : "oom_kill", &r->oom_kills) == 0);
    got(r, PYBOX_RD_PIDS_NOW, t[F_PIDS_NOW] && parse_single(t[F_PIDS_NOW], &r->pids_now) == 0);
    got(r, PYBOX_RD_PIDS_PEAK, t[pids_peak] && parse_single(t[pids_peak], &r->pids_peak) == 0);
    if (v2 && V2_REFUSED != F_PIDS_EVENTS)
        got(r, PYBOX_RD_PIDS_REFUSED, t[V2_REFUSED] && parse_single(t[V2_REFUSED], &r->pids_refused) == 0);
    else
        got(r, PYBOX_RD_PIDS_REFUSED, t[F_PIDS_EVENTS] && parse_keyed(t[F_PIDS_EVENTS], "max", &r->pids_refused) == 0);
    const char *cpu = t[F_CPU];
    if (v2) {
        int64_t us = 0;
        got(r, PYBOX_RD_CPU, cpu && parse_keyed(cpu, V2_USAGE, &us) == 0 && us <= INT64_MAX / 1000);
        r->cpu_ns = (r->valid & PYBOX_RD_CPU) ? us * 1000 : 0; /* multiply only when it fits */
        int64_t tus = 0;
        got(r, PYBOX_RD_THROTTLE,
            cpu && parse_keyed(cpu, "nr_periods", &r->periods) == 0 &&
                parse_keyed(cpu, V2_THROTTLED, &r->throttled) == 0 && parse_keyed(cpu, V2_THROTTLED_USEC, &tus) == 0 &&
                tus <= INT64_MAX / 1000);
        r->throttled_ns = (r->valid & PYBOX_RD_THROTTLE) ? tus * 1000 : 0;
    } else {
        const char *stat = t[F_CPU_STAT];
        got(r, PYBOX_RD_CPU, cpu && parse_single(cpu, &r->cpu_ns) == 0);
        got(r, PYBOX_RD_THROTTLE,
            stat && parse_keyed(stat, "nr_periods", &r->periods) == 0 &&
                parse_keyed(stat, "nr_throttled", &r->throttled) == 0 &&
                parse_keyed(stat, "throttled_time", &r->throttled_ns) == 0);
    }
}

/* One counter file's text into buf, or NULL when it could not be read (a file that was
 * open and is gone now: its bit in vanished). */
static const char *read_one(const pybox_watch_t *w, int f, char *buf, size_t len, pybox_reading_t *r, unsigned bit)
{
    ssize_t n = slurp(w->fd[f], buf, len);
    if (n < 0) {
        if (w->fd[f] >= 0 && (errno == ENODEV || errno == ENOENT))
            r->vanished |= bit;
        return NULL;
    }
    return buf;
}

void pybox_watch_read(pybox_watch_t *w, pybox_reading_t *r)
{
    memset(r, 0, sizeof *r);
    static const unsigned bits[PYBOX_WATCH_FILES] = {
        [F_MEM_NOW] = PYBOX_RD_MEM_NOW,   [F_MEM_PEAK] = PYBOX_RD_MEM_PEAK,   [F_OOM] = PYBOX_RD_OOM_KILLS,
        [F_PIDS_NOW] = PYBOX_RD_PIDS_NOW, [F_PIDS_PEAK] = PYBOX_RD_PIDS_PEAK, [F_PIDS_EVENTS] = PYBOX_RD_PIDS_REFUSED,
        [F_CPU] = PYBOX_RD_CPU,           [F_CPU_STAT] = PYBOX_RD_THROTTLE,
    };
    char buf[PYBOX_WATCH_FILES][4096];
    const char *text[PYBOX_WATCH_FILES] = {NULL};
    for (int f = 0; f < PYBOX_WATCH_FILES; f++) {
        /* v2 has no cpu.stat of its own: usage and throttling are both in F_CPU */
        if (f == F_CPU_STAT && w->version == PYBOX_CG_V2)
            continue;
        text[f] = read_one(w, f, buf[f], sizeof buf[f], r, bits[f]);
    }
    if (w->version == PYBOX_CG_V2 && (r->vanished & PYBOX_RD_CPU))
        r->vanished |= PYBOX_RD_THROTTLE;
    pybox_watch_parse(w->version, text, r);
    if ((r->valid & PYBOX_RD_PIDS_NOW) && r->pids_now > w->pids_seen_max)
        w->pids_seen_max = r->pids_now;
}

void pybox_watch_sample(pybox_watch_t *w, int64_t now_ms, pybox_reading_t *r)
{
    pybox_watch_read(w, r);
    if (r->valid != 0) {
        w->last = *r;
        w->have_last = true;
    }
    if (w->samples == NULL)
        return;
    int64_t t = now_ms - w->armed_at_ms;
    uint32_t t_ms = (uint32_t)(t < 0 ? 0 : (t > UINT32_MAX ? UINT32_MAX : t));
    /* Two readings within one millisecond (a tick and the final reading) are one sample,
     * the later: the rows never repeat a time. */
    if (w->n_samples > 0 && w->samples[w->n_samples - 1].t_ms == t_ms)
        w->n_samples--;
    else if (w->n_samples == PYBOX_WATCH_SAMPLES_MAX) {
        /* Full: keep every other sample and sample half as often from now on, so a
         * long run stays covered end to end in bounded memory. */
        size_t k = 0;
        for (size_t i = 0; i < w->n_samples; i += 2)
            w->samples[k++] = w->samples[i];
        w->n_samples = k;
        w->interval_ms *= 2;
    }
    pybox_sample_t *s = &w->samples[w->n_samples++];
    s->t_ms = t_ms;
    s->mem = (r->valid & PYBOX_RD_MEM_NOW) ? r->mem_now : -1;
    s->pids = (r->valid & PYBOX_RD_PIDS_NOW) ? (int32_t)r->pids_now : -1;
    s->cpu_ns = (r->valid & PYBOX_RD_CPU) ? r->cpu_ns : -1;
}

void pybox_watch_restart(pybox_watch_t *w, int64_t now_ms)
{
    w->n_samples = 0;
    w->armed_at_ms = now_ms;
    w->interval_ms = PYBOX_WATCH_INTERVAL_MS;
    w->next_ms = now_ms;
    w->pids_seen_max = -1;
}

int64_t pybox_watch_tick(pybox_watch_t *w, int64_t now_ms)
{
    if (w->version == PYBOX_CG_NONE)
        return INT64_MAX;
    if (now_ms >= w->next_ms) {
        pybox_reading_t r;
        pybox_watch_sample(w, now_ms, &r);
        w->next_ms = now_ms + w->interval_ms;
    }
    return w->next_ms - now_ms;
}
