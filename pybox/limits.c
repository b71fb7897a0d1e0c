/* SPDX-License-Identifier: MIT */
/* The limits' one table and their parsers (see limits.h). */
#include "limits.h"

#include <stdio.h>
#include <string.h>

#include "bounds.h"

#define MIB (1024LL * 1024)

static const pybox_limit_t table[PYBOX_LIMIT_COUNT] = {
    [PYBOX_LIMIT_MEMORY] = {"memory", PYBOX_LIMIT_SIZE, "bytes", "", PYBOX_MEMORY_MIN, PYBOX_MEMORY_MAX,
                            PYBOX_DEFAULT_MEMORY, PYBOX_CEILING_MEMORY, "max_memory_mib", MIB, "memory_mib",
                            "give a size of at least %s"},
    [PYBOX_LIMIT_PIDS] = {"pids", PYBOX_LIMIT_NUMBER, "processes", "", PYBOX_PIDS_MIN, PYBOX_PIDS_MAX,
                          PYBOX_DEFAULT_PIDS, PYBOX_CEILING_PIDS, "max_pids", 1, "pids",
                          "give a whole number of at least %s"},
    [PYBOX_LIMIT_CPUS] = {"cpus", PYBOX_LIMIT_CPU, "nano-CPUs", "", PYBOX_NANO_CPUS_MIN, PYBOX_NANO_CPUS_MAX,
                          PYBOX_DEFAULT_NANO_CPUS, 0, "max_cpus", 1000000000LL, "cpus",
                          "give a number of CPUs from %s"},
    [PYBOX_LIMIT_TIMEOUT] = {"timeout", PYBOX_LIMIT_SECONDS, "ms", " s", PYBOX_TIMEOUT_MIN_MS, PYBOX_TIMEOUT_MAX_MS,
                             PYBOX_DEFAULT_TIMEOUT_MS, PYBOX_TIMEOUT_MAX_MS, "max_timeout_s", 1000, "timeout_s",
                             "give seconds from %s to %s, with at most 3 decimals"},
    [PYBOX_LIMIT_EXPIRY] = {"expiry", PYBOX_LIMIT_NUMBER, "s", " s", 1, PYBOX_EXPIRY_MAX_S, PYBOX_EXPIRY_S,
                            PYBOX_EXPIRY_S, "leftover_expiry_s", 1, NULL, "give whole seconds from %s to %s"},
};

const pybox_limit_t *pybox_limit(pybox_limit_id_t id)
{
    return (unsigned)id < PYBOX_LIMIT_COUNT ? &table[id] : NULL;
}

int pybox_limit_parse(pybox_limit_id_t id, const char *text, int64_t *out)
{
    const pybox_limit_t *l = pybox_limit(id);
    int64_t v = 0;
    uint64_t u;
    int rc = -1;
    switch (l->kind) {
    case PYBOX_LIMIT_SIZE:
        rc = pybox_parse_size(text, &v);
        break;
    case PYBOX_LIMIT_NUMBER:
        rc = pybox_parse_u64(text, &u) == 0 && u <= (uint64_t)l->max ? 0 : -1;
        v = (int64_t)u;
        break;
    case PYBOX_LIMIT_CPU:
        /* milli-CPUs, read as seconds are: at most 3 decimals; at most a million CPUs */
        rc = pybox_parse_seconds_ms(text, &v);
        v *= 1000000;
        break;
    case PYBOX_LIMIT_SECONDS:
        rc = pybox_parse_seconds_ms(text, &v);
        break;
    }
    if (rc < 0 || v < l->min || v > l->max)
        return -1;
    *out = v;
    return 0;
}

const char *pybox_limit_fmt(pybox_limit_id_t id, int64_t v, char out[PYBOX_NUM_MAX])
{
    switch (pybox_limit(id)->kind) {
    case PYBOX_LIMIT_SIZE:
        return pybox_fmt_size(out, v);
    case PYBOX_LIMIT_CPU:
        return pybox_fmt_fixed(out, v, 9);
    case PYBOX_LIMIT_SECONDS:
        return pybox_fmt_fixed(out, v, 3);
    case PYBOX_LIMIT_NUMBER:
        break;
    }
    return pybox_fmt_fixed(out, v, 0);
}

const char *pybox_limit_fmt_config(pybox_limit_id_t id, int64_t v, char out[PYBOX_NUM_MAX])
{
    int64_t unit = pybox_limit(id)->config_unit;
    if (v % unit == 0)
        return pybox_fmt_fixed(out, v / unit, 0);
    snprintf(out, PYBOX_NUM_MAX, "%g", (double)v / (double)unit);
    return out;
}

int pybox_limit_refuse(pybox_limit_id_t id, const char *what, const char *tail, pybox_error_t *err)
{
    const pybox_limit_t *l = pybox_limit(id);
    char lo[PYBOX_NUM_MAX], hi[PYBOX_NUM_MAX], how[160];
    /* a time's least is said with its decimal: "from 0.1", and "0.0" never stands for 0.05 */
    pybox_limit_fmt(id, l->min, lo);
    pybox_limit_fmt(id, l->max, hi);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(how, sizeof how, l->how, lo, hi); /* the table's own words, each with its one or two %s */
#pragma GCC diagnostic pop
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: %s%s", what, how, tail);
}

int pybox_limit_from_config(pybox_limit_id_t id, double v, int64_t *out, const char *path, pybox_error_t *err)
{
    const pybox_limit_t *l = pybox_limit(id);
    double unit = (double)l->config_unit, most = (double)l->max / unit;
    if (!(v > 0) || v > most || v * unit < 1)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s: %s must be a positive number up to %g (at least %g)", path,
                               l->config_key, most, 1 / unit);
    *out = (int64_t)(v * unit);
    return 0;
}

int pybox_limit_within(pybox_limit_id_t id, int64_t v, int64_t ceiling, const char *prefix, const char *mid,
                       const char *end, pybox_error_t *err)
{
    if (v <= ceiling)
        return 0;
    /* every digit each side needs: a value just above its ceiling must not look like it */
    const pybox_limit_t *l = pybox_limit(id);
    char a[PYBOX_NUM_MAX], m[PYBOX_NUM_MAX];
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s%s%s%s is above this installation's ceiling of %s%s%s", prefix,
                           pybox_limit_fmt(id, v, a), l->suffix, mid, pybox_limit_fmt(id, ceiling, m), l->suffix, end);
}

int64_t pybox_limit_box_timer_ms(int64_t timeout_ms)
{
    return timeout_ms + PYBOX_BOX_TIMER_MARGIN_MS;
}
