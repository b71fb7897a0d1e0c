/* SPDX-License-Identifier: MIT */
/* The limits a run may ask for, each described once: its kind, unit, minimum, maximum,
 * default, the installation's ceiling and its key in config.json, its key in an image
 * recipe, and one parser for each place a limit is given (an option, an MCP argument's
 * range, a recipe's line, config.json's number). Help, man pages, the MCP input schema
 * and the docs' tables say what this table says; the numbers are bounds.h's. */
#ifndef PYBOX_LIMITS_H
#define PYBOX_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* In the order a refusal checks them (the first above its ceiling is named). */
typedef enum pybox_limit_id {
    PYBOX_LIMIT_MEMORY,                   /* bytes, without swap */
    PYBOX_LIMIT_PIDS,                     /* processes */
    PYBOX_LIMIT_CPUS,                     /* nano-CPUs */
    PYBOX_LIMIT_TIMEOUT,                  /* ms: PyBox's deadline */
    PYBOX_LIMIT_RUN,                      /* the limits above are a run's; those below the installation's */
    PYBOX_LIMIT_EXPIRY = PYBOX_LIMIT_RUN, /* s: a run's leftovers may be removed this long after */
    PYBOX_LIMIT_COUNT,
} pybox_limit_id_t;

typedef enum pybox_limit_kind {
    PYBOX_LIMIT_SIZE,    /* pybox_parse_size: "512" (MiB), "512m", "1g" */
    PYBOX_LIMIT_NUMBER,  /* pybox_parse_u64 */
    PYBOX_LIMIT_CPU,     /* a number with at most 3 decimals, in CPUs */
    PYBOX_LIMIT_SECONDS, /* a number with at most 3 decimals, in seconds */
} pybox_limit_kind_t;

typedef struct pybox_limit {
    const char *name; /* "memory": the option (--memory) and the word of messages */
    pybox_limit_kind_t kind;
    const char *unit;       /* of every number below: "bytes", "processes", "nano-CPUs", "ms", "s" */
    const char *suffix;     /* after a value in a message: " s" for a time */
    int64_t min, max, dflt; /* what may be asked; the default when nothing is */
    int64_t ceiling;        /* the installation's unless config.json says; 0: every CPU of the host */
    const char *config_key; /* config.json's key: a positive number up to max, in config_unit */
    int64_t config_unit;    /* one of config.json's (and of a recipe's) in unit: 1 MiB for max_memory_mib */
    const char *recipe_key; /* an image recipe's (images/<name>/policy) key, NULL: none */
    const char *how;        /* how to give it, the words a refusal ends with */
} pybox_limit_t;

/* The limit, or NULL for an id outside the table. */
const pybox_limit_t *pybox_limit(pybox_limit_id_t id);

/* Parse text as a value of limit id (in its unit) and check it is within [min, max]:
 * 0, else -1 (*out untouched). A recipe's bare number of MiB is what a size's is. */
int pybox_limit_parse(pybox_limit_id_t id, const char *text, int64_t *out);

/* The refusal of a value of limit id: "<what>: give seconds from 0.1 to 3600, with at
 * most 3 decimals<tail>" (what: "--timeout 0.01", "--max-timeout"; tail: an example or
 * ""). Returns -1, as pybox_error_set does. */
int pybox_limit_refuse(pybox_limit_id_t id, const char *what, const char *tail, pybox_error_t *err);

/* config.json's number v for limit id: 0 and *out in the limit's unit when it is positive
 * (in the unit too: 1e-9 MiB is no byte) and at most the maximum, else the refusal
 * (PYBOX_ERR_STATE, naming path and the key). */
int pybox_limit_from_config(pybox_limit_id_t id, double v, int64_t *out, const char *path, pybox_error_t *err);

/* A value of limit id as a message or the help gives it, with every digit it needs and
 * without its suffix: "2.5" (a time, in s), "128 MiB" (a size), "32", "0.5" (CPUs).
 * Returns out. */
const char *pybox_limit_fmt(pybox_limit_id_t id, int64_t v, char out[PYBOX_NUM_MAX]);
/* The same in config.json's unit ("4096" for 4 GiB of max_memory_mib). */
const char *pybox_limit_fmt_config(pybox_limit_id_t id, int64_t v, char out[PYBOX_NUM_MAX]);

/* Whether v is above ceiling for limit id; if so, refuse it: "<prefix><v><suffix><mid>
 * is above this installation's ceiling of <ceiling><suffix><end>" (prefix: "timeout ",
 * "--max-timeout: "; mid: " (asked)" or ""; end: " (set by config.json ...)"). Returns
 * -1 when refused, else 0. */
int pybox_limit_within(pybox_limit_id_t id, int64_t v, int64_t ceiling, const char *prefix, const char *mid,
                       const char *end, pybox_error_t *err);

/* The guest init's own timer for a deadline: a full margin behind it
 * (PYBOX_BOX_TIMER_MARGIN_MS), so the box ends by itself if PyBox does not end it. */
int64_t pybox_limit_box_timer_ms(int64_t timeout_ms);

#endif
