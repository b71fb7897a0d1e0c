/* SPDX-License-Identifier: MIT */
/* The Docker backend's own parts, shared by its files and its unit tests: the create
 * body and read-back check, the attach stream's frames, the box's cgroup, images in the
 * engine. Nothing outside pybox/docker/ (and unit tests) includes this. */
#ifndef PYBOX_DOCKER_H
#define PYBOX_DOCKER_H

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "../box.h"
#include "../cgroup.h"
#include "../error.h"
#include "../policy.h"
#include "../util.h"
#include "engine.h"

/* An engine request path into a fixed buffer, in a function with an `err`: a path that
 * would be cut is refused (never sent cut), and the function returns fail. */
#define PYBOX_DOCKER_PATH(buf, fail, ...)                                                                              \
    do {                                                                                                               \
        if (pybox_fmt(buf, sizeof buf, __VA_ARGS__) < 0) {                                                             \
            pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "an engine request path would be cut");               \
            return fail;                                                                                               \
        }                                                                                                              \
    } while (0)

/* The box's name in the engine. */
#define PYBOX_DOCKER_NAME_PREFIX "pybox-"

/* The body of POST /containers/create. The caller frees it (cJSON_Delete). NULL on out
 * of memory. */
cJSON *pybox_docker_body(const pybox_policy_t *p);

/* Compare the engine's read-back of a created box (GET /containers/{id}/json) with the
 * policy. *checked gets the number of settings compared. Every difference is listed in a
 * PYBOX_ERR_POLICY error; returns -1 if any. */
int pybox_docker_verify(const pybox_policy_t *p, const cJSON *inspect, int *checked, pybox_error_t *err);

/* A box's cgroup under root. On cgroup v2 from the engine's own answer only: pid is the
 * box's PID 1 from its record (State.Pid), and the kernel's list for it
 * (<proc_root>/<pid>/cgroup) says where it is (systemd driver:
 * system.slice/docker-<id>.scope), never a path guessed from the id. On v1 the engine's
 * layouts by id first (<controller>/docker/<id> or <controller>/system.slice/docker-<id>.scope),
 * then the same list. 0 when found. */
int pybox_docker_cgroup(const char *root, const char *proc_root, const char *id, pid_t pid, pybox_cgroup_loc_t *loc,
                        pybox_error_t *err);

/* ---- the attach stream's frames: [type(1), 0, 0, 0, length(u32 BE)] payload ---- */

typedef struct pybox_demux {
    unsigned char hdr[8];
    size_t hdr_len;
    uint32_t remaining;
    int stream;
    uint64_t frames;
} pybox_demux_t;

void pybox_demux_init(pybox_demux_t *d);
/* Feed bytes as they arrive, in any chunking. Calls cb for each payload piece with
 * stream 1 (stdout) or 2 (stderr). A frame of another type or above PYBOX_FRAME_MAX is
 * a protocol error. cb returning -1 stops with that error. */
int pybox_demux_feed(pybox_demux_t *d, const char *data, size_t len, pybox_output_cb cb, void *arg, pybox_error_t *err);
/* True when the stream ended between frames (not in the middle of one). */
bool pybox_demux_clean_end(const pybox_demux_t *d);

/* The backend (box.c), as the registry names it. */
extern const pybox_backend_ops_t pybox_docker_backend_ops;

/* What the evidence campaign asks of the engine (pybox/docker/campaign.c). */
extern const pybox_campaign_ops_t pybox_docker_campaign_ops;

/* The engine's events for the installation's boxes and volumes between two times (the
 * backend's events, box.h; pybox/docker/campaign.c). */
int pybox_docker_events(pybox_backend_t *be, const char *install_id, double since, double until, struct cJSON *into,
                        pybox_error_t *err);

/* Images in the engine (pybox/docker/image.c). */
extern const pybox_image_ops_t pybox_docker_image_ops;
/* An engine's box id as PyBox takes it: 12 to 64 lowercase hex digits (cgroup.c). */
bool pybox_docker_valid_id(const char *id);

/* The engine of an open Docker backend (tests and images). */
pybox_engine_t *pybox_docker_engine(pybox_backend_t *be);
/* A Docker backend over an engine that stays the caller's (tests; close it with
 * pybox_backend_close, which leaves the engine open). */
int pybox_docker_backend_over(pybox_engine_t *e, pybox_backend_t **out, pybox_error_t *err);

#endif
