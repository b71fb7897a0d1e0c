/* SPDX-License-Identifier: MIT */
/* pybox-campaign inspect: what an installation has now, asked of its backends through the
 * box interface and of the kernel, as one JSON object for the tests and drivers. */
#ifndef PYBOX_CAMPAIGN_INSPECT_H
#define PYBOX_CAMPAIGN_INSPECT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../pybox/error.h"
#include "../pybox/state.h"

/* Everything of installation st on the backends named (NULL-ended; NULL: every backend
 * of the registry): its boxes, volumes, cgroup leaves or scopes, staging folders and image
 * folders as each backend lists its leftovers, each box's cgroup folders and the pids in
 * them; what a backend keeps beside its boxes (cgroup parents); the installation's run
 * notes; the machine's uid leases. A backend named that cannot be opened or cannot list
 * fails the call; of every backend (none named), one that cannot be opened is said
 * ("error") and skipped. *out is the caller's. */
int camp_inspect(const pybox_state_t *st, const char *const *backends, cJSON **out, pybox_error_t *err);

/* The command: pybox-campaign inspect --home DIR [--backend NAME]... --json. */
int camp_inspect_main(int argc, char **argv);

#endif
