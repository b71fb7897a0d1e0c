/* SPDX-License-Identifier: MIT */
/* pybox-campaign inspect: what an installation has now, asked of its backends through the
 * box interface and of the kernel, as one JSON object for the tests and drivers. */
#ifndef PYBOX_CAMPAIGN_INSPECT_H
#define PYBOX_CAMPAIGN_INSPECT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../pybox/error.h"
#include "../pybox/state.h"

/* What to ask besides what is there now. */
typedef struct {
    const char *const *backends; /* NULL-ended; NULL: every backend of the registry */
    bool events;                 /* each backend's events between since and until (box.h) */
    double since, until;         /* seconds since the epoch */
    bool remove;                 /* everything of the installation removed first (forced
                                    where the backend can: a box that still runs too) */
} camp_inspect_opts_t;

/* Everything of installation st on the backends named: its boxes, volumes, cgroup leaves
 * or scopes, staging folders and image folders as each backend lists its leftovers, each
 * box's cgroup folders and the pids in them; what a backend keeps beside its boxes
 * (cgroup parents); with o->events, what each backend saw happen between the two times;
 * the installation's run notes; the machine's uid leases. A backend named that cannot be
 * opened or cannot list fails the call; of every backend (none named), one that cannot be
 * opened is said ("error") and skipped. *out is the caller's. */
int camp_inspect(const pybox_state_t *st, const camp_inspect_opts_t *o, cJSON **out, pybox_error_t *err);

/* One box of the backend named, as what holds it keeps its record (after its end, waited
 * for within a bound, when wait): {"box": {...}} (box.h, the campaign's record). */
int camp_inspect_box(const pybox_state_t *st, const char *backend, const char *id, bool wait, cJSON **out,
                     pybox_error_t *err);

/* What holds the named backend's boxes, as a whole (box.h, the campaign's whole):
 * {"holder": {...}}. */
int camp_inspect_holder(const pybox_state_t *st, const char *backend, cJSON **out, pybox_error_t *err);

/* The command: pybox-campaign inspect --home DIR [--backend NAME]... [--since S --until U]
 * [--remove] --json, --home DIR --backend NAME --box ID [--wait] --json, or --home DIR
 * --backend NAME --holder --json. */
int camp_inspect_main(int argc, char **argv);

#endif
