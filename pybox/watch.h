/* SPDX-License-Identifier: MIT */
/* The watcher: reads the kernel's own counters of a box's cgroup on the host (v1 and
 * v2; the backend says where it is, cgroup.h): memory, OOM kills, processes, refused
 * forks, CPU time, throttling. It only reads; it never writes a cgroup file or signals
 * anything.
 * Contract: docs/watcher.md. */
#ifndef PYBOX_WATCH_H
#define PYBOX_WATCH_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "error.h"

/* The counters, each with its own validity bit: a missing or malformed file leaves its
 * field unknown, never zero. */
enum {
    PYBOX_RD_MEM_NOW = 1 << 0,
    PYBOX_RD_MEM_PEAK = 1 << 1,
    PYBOX_RD_OOM_KILLS = 1 << 2,
    PYBOX_RD_PIDS_NOW = 1 << 3,
    PYBOX_RD_PIDS_PEAK = 1 << 4,
    PYBOX_RD_PIDS_REFUSED = 1 << 5,
    PYBOX_RD_CPU = 1 << 6,
    PYBOX_RD_THROTTLE = 1 << 7,
};

typedef struct pybox_reading {
    unsigned valid;    /* PYBOX_RD_* bits */
    unsigned vanished; /* PYBOX_RD_* bits whose file was gone (the cgroup vanished) */
    int64_t mem_now, mem_peak, oom_kills;
    int64_t pids_now, pids_peak, pids_refused;
    int64_t cpu_ns;
    int64_t periods, throttled, throttled_ns;
} pybox_reading_t;

typedef struct pybox_sample {
    uint32_t t_ms;  /* since the watcher was armed */
    int64_t mem;    /* -1: unknown */
    int32_t pids;   /* -1: unknown */
    int64_t cpu_ns; /* -1: unknown */
} pybox_sample_t;

#define PYBOX_WATCH_FILES 8
#define PYBOX_WATCH_INTERVAL_MS 50
#define PYBOX_WATCH_SAMPLES_MAX 1024

typedef struct pybox_watch {
    pybox_cg_version_t version;
    char where[PATH_MAX];      /* the memory (v1) or unified (v2) cgroup folder */
    int fd[PYBOX_WATCH_FILES]; /* open counter files, -1 when missing */
    int64_t armed_at_ms;
    double arm_ms;   /* time taken to find and open the cgroup */
    int interval_ms; /* current sampling interval (doubles when samples are thinned) */
    int64_t next_ms;
    pybox_sample_t *samples; /* owned */
    size_t n_samples;
    int64_t pids_seen_max; /* the highest pids.current sampled (when no peak file) */
    pybox_reading_t last;  /* the most recent reading */
    bool have_last;
} pybox_watch_t;

/* An unarmed watcher (nothing open); pybox_watch_free is safe on it. */
void pybox_watch_init(pybox_watch_t *w);
/* Open the counters of the box's cgroup at loc (w: initialised with pybox_watch_init).
 * Fails with PYBOX_ERR_SYSTEM when the location is not known; the caller reports that as
 * unknown. A counter file that is missing leaves its reading unknown. */
int pybox_watch_arm(pybox_watch_t *w, const pybox_cgroup_loc_t *loc, pybox_error_t *err);
void pybox_watch_free(pybox_watch_t *w);

/* Read every counter now. */
void pybox_watch_read(pybox_watch_t *w, pybox_reading_t *r);

/* The counter files, in the order of pybox_watch_t's fd: v1 memory.usage_in_bytes,
 * memory.max_usage_in_bytes, memory.oom_control, pids.current, pids.peak, pids.events,
 * cpuacct.usage, cpu.stat; v2 memory.current, memory.peak, memory.events, pids.current,
 * pids.peak, pids.events, cpu.stat (usage and throttling), none. */
enum {
    PYBOX_WF_MEM_NOW,
    PYBOX_WF_MEM_PEAK,
    PYBOX_WF_OOM,
    PYBOX_WF_PIDS_NOW,
    PYBOX_WF_PIDS_PEAK,
    PYBOX_WF_PIDS_EVENTS,
    PYBOX_WF_CPU,
    PYBOX_WF_CPU_STAT,
};
/* The counters from the files' texts (each NUL-terminated; NULL: not read), as
 * pybox_watch_read takes them; sets r's values and valid bits, leaves vanished. */
void pybox_watch_parse(pybox_cg_version_t version, const char *const text[PYBOX_WATCH_FILES], pybox_reading_t *r);

/* Take a sample if one is due; returns the milliseconds until the next one is due. */
int64_t pybox_watch_tick(pybox_watch_t *w, int64_t now_ms);
/* Take a sample now (e.g. at the end). */
void pybox_watch_sample(pybox_watch_t *w, int64_t now_ms, pybox_reading_t *r);
/* Start the samples over from now (a box made before its program: its samples count from
 * the program's arrival); the counters stay open. */
void pybox_watch_restart(pybox_watch_t *w, int64_t now_ms);

#endif
