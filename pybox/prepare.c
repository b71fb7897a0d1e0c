/* SPDX-License-Identifier: MIT */
/* One run prepared from a request (see prepare.h). */
#include "prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "escape.h"
#include "image/image.h"
#include "util.h"

#define DEFAULT_IMAGE "stdlib"

void pybox_limits_resolve(const pybox_request_t *rq, const pybox_pin_t *pin, pybox_limits_t *out)
{
    memset(out, 0, sizeof *out);
    /* asked, else the image's default (never above a cap), else PyBox's own */
    const int64_t asked[PYBOX_LIMIT_RUN] = {rq->memory_bytes, rq->pids, rq->nano_cpus, rq->timeout_ms};
    const int64_t image[PYBOX_LIMIT_RUN] = {pin->memory_bytes, pin->pids, pin->nano_cpus, pin->timeout_ms};
    const int64_t cap[PYBOX_LIMIT_RUN] = {rq->cap_memory_bytes, 0, 0, rq->cap_timeout_ms};
    for (int id = 0; id < PYBOX_LIMIT_RUN; id++) {
        int64_t v = pybox_limit(id)->dflt;
        if (asked[id] > 0) {
            out->v[id] = asked[id];
            continue;
        }
        if (image[id] > 0) {
            v = image[id];
            out->from_image |= 1u << id;
        }
        out->v[id] = cap[id] > 0 && v > cap[id] ? cap[id] : v;
    }
}

int pybox_limits_check(const pybox_limits_t *l, const pybox_config_t *c, pybox_error_t *err)
{
    char end[96];
    snprintf(end, sizeof end, " (set by %s)", c->source);
    for (int id = 0; id < PYBOX_LIMIT_RUN; id++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s ", pybox_limit(id)->name);
        if (pybox_limit_within(id, l->v[id], c->limit[id], prefix,
                               (l->from_image & (1u << id)) ? " (the image's default)" : " (asked)", end, err) < 0)
            return -1;
    }
    return 0;
}

void pybox_ready_init(pybox_ready_t *rd)
{
    memset(rd, 0, sizeof *rd);
    pybox_inputs_init(&rd->inputs);
    rd->output.parent_fd = -1;
    rd->run.cancel_fd = -1;
}

void pybox_ready_free(pybox_ready_t *rd)
{
    pybox_backend_close(rd->be);
    rd->be = NULL;
    pybox_inputs_free(&rd->inputs);
    pybox_output_close(&rd->output);
}

/* The installation, the backend's name, the image's defaults, the ceilings. */
static int limits(const pybox_request_t *rq, pybox_ready_t *rd, pybox_limits_t *l, pybox_error_t *err)
{
    if (pybox_state_open(&rd->st, false, err) < 0 || pybox_state_config(&rd->st, &rd->config, err) < 0)
        return -1;
    /* A run writes its note there before anything is made: a state directory that cannot
     * be written is said as such, not as the first of its files that failed. */
    if (faccessat(AT_FDCWD, rd->st.dir, W_OK | X_OK, AT_EACCESS) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno,
                               "the state directory %s cannot be written (a run notes itself there before anything "
                               "is made)",
                               rd->st.dir);
    const char *backend = pybox_backend_choose(&rd->config, rq->backend);
    if (pybox_backend_find(backend) == NULL) {
        char known[256], shown[160];
        pybox_backend_names(known, sizeof known);
        pybox_escape_short(shown, sizeof shown, backend, 32);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown backend '%s' (known: %s)", shown, known);
    }
    pybox_strlcpy(rd->backend, backend, sizeof rd->backend);
    pybox_strlcpy(rd->image, rq->image != NULL && rq->image[0] != '\0' ? rq->image : DEFAULT_IMAGE, sizeof rd->image);
    pybox_pin_t defaults = {0};
    if (pybox_name_valid(rd->image) && pybox_pin_get(&rd->st, rd->backend, rd->image, &rd->pin, err) == 1)
        defaults = rd->pin;
    pybox_error_clear(err);
    pybox_limits_resolve(rq, &defaults, l);
    rd->from_image = l->from_image;
    return pybox_limits_check(l, &rd->config, err);
}

/* Files: the inputs read and packed, the output folder checked. */
static int files(const pybox_request_t *rq, pybox_ready_t *rd, pybox_error_t *err)
{
    rd->failed = PYBOX_PREP_INPUTS;
    if (rq->n_inputs > 0 && pybox_inputs_prepare(rq->inputs, rq->n_inputs, PYBOX_INPUT_MAX, &rd->inputs, err) < 0)
        return -1;
    rd->failed = PYBOX_PREP_OUTPUT;
    if (rq->output != NULL && pybox_output_check_relaxed(rq->output, rq->relax, &rd->output, err) < 0)
        return -1;
    return 0;
}

int pybox_prepare_files(const pybox_request_t *rq, pybox_ready_t *rd, pybox_error_t *err)
{
    if (files(rq, rd, err) < 0)
        return -1;
    rd->failed = PYBOX_PREP_OK;
    return 0;
}

int pybox_prepare(const pybox_request_t *rq, pybox_ready_t *rd, pybox_error_t *err)
{
    pybox_limits_t l;
    rd->failed = PYBOX_PREP_LIMITS;
    if (limits(rq, rd, &l, err) < 0 || files(rq, rd, err) < 0)
        return -1;
    rd->failed = PYBOX_PREP_BACKEND;
    if (pybox_backend_open(rd->backend, &rd->st, &rd->be, err) < 0)
        return -1;
    rd->failed = PYBOX_PREP_IMAGE;
    if (pybox_image_resolve(&rd->st, rd->be, rd->image, &rd->pin, err) < 0)
        return -1;
    rd->failed = PYBOX_PREP_OK;

    pybox_run_request_t *run = &rd->run;
    *run = (pybox_run_request_t){
        .program = rq->program,
        .program_len = rq->program_len,
        .image_name = rd->image,
        .pin = &rd->pin,
        .state = &rd->st,
        .inputs = rq->n_inputs > 0 ? &rd->inputs : NULL,
        .output = rq->output != NULL ? &rd->output : NULL,
        .expiry_s = rd->config.limit[PYBOX_LIMIT_EXPIRY],
        .housekeeping = true,
        .started_s = rq->started_s,
        .cancellable = rq->cancellable,
        .cancel_fd = rq->cancellable ? rq->cancel_fd : -1,
        .hook = rq->hook,
        .tick = rq->tick,
        .hook_arg = rq->hook_arg,
        .why_cold = rq->why_cold,
    };
    pybox_policy_t *p = &run->policy;
    pybox_policy_defaults(p);
    pybox_strlcpy(p->image_id, rd->pin.id, sizeof p->image_id);
    pybox_strlcpy(p->install_id, rd->st.install_id, sizeof p->install_id);
    pybox_policy_set_timeout(p, l.v[PYBOX_LIMIT_TIMEOUT]);
    p->memory_bytes = l.v[PYBOX_LIMIT_MEMORY];
    p->pids = l.v[PYBOX_LIMIT_PIDS];
    p->nano_cpus = l.v[PYBOX_LIMIT_CPUS];
    p->relax |= rq->relax;
    return 0;
}

int pybox_ready_run(pybox_ready_t *rd, pybox_run_result_t *res)
{
    return pybox_run(rd->be, &rd->run, res);
}
