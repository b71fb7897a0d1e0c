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
    struct {
        int64_t asked, image, cap, dflt;
        int64_t *to;
        unsigned bit;
    } l[] = {
        {rq->timeout_ms, pin->timeout_ms, rq->cap_timeout_ms, PYBOX_DEFAULT_TIMEOUT_MS, &out->timeout_ms,
         PYBOX_FROM_IMAGE_TIMEOUT},
        {rq->memory_bytes, pin->memory_bytes, rq->cap_memory_bytes, PYBOX_DEFAULT_MEMORY, &out->memory_bytes,
         PYBOX_FROM_IMAGE_MEMORY},
        {rq->pids, pin->pids, 0, PYBOX_DEFAULT_PIDS, &out->pids, PYBOX_FROM_IMAGE_PIDS},
        {rq->nano_cpus, pin->nano_cpus, 0, PYBOX_DEFAULT_NANO_CPUS, &out->nano_cpus, PYBOX_FROM_IMAGE_CPUS},
    };
    for (size_t i = 0; i < sizeof l / sizeof *l; i++) {
        if (l[i].asked > 0) {
            *l[i].to = l[i].asked;
        } else if (l[i].image > 0) {
            *l[i].to = l[i].cap > 0 && l[i].image > l[i].cap ? l[i].cap : l[i].image;
            out->from_image |= l[i].bit;
        } else {
            *l[i].to = l[i].cap > 0 && l[i].dflt > l[i].cap ? l[i].cap : l[i].dflt;
        }
    }
}

static const char *who(const pybox_limits_t *l, unsigned bit)
{
    return (l->from_image & bit) ? "the image's default" : "asked";
}

int pybox_limits_check(const pybox_limits_t *l, const pybox_config_t *c, pybox_error_t *err)
{
    /* every digit each side needs: a value just above its ceiling must not look like it */
    char a[PYBOX_NUM_MAX], m[PYBOX_NUM_MAX];
    if (l->memory_bytes > c->memory_bytes)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "memory %s (%s) is above this installation's ceiling of %s (set by %s)",
                               pybox_fmt_size(a, l->memory_bytes), who(l, PYBOX_FROM_IMAGE_MEMORY),
                               pybox_fmt_size(m, c->memory_bytes), c->source);
    if (l->pids > c->pids)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "pids %lld (%s) is above this installation's ceiling of %lld (set by %s)",
                               (long long)l->pids, who(l, PYBOX_FROM_IMAGE_PIDS), (long long)c->pids, c->source);
    if (l->nano_cpus > c->nano_cpus)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "cpus %s (%s) is above this installation's ceiling of %s (set by %s)",
                               pybox_fmt_fixed(a, l->nano_cpus, 9), who(l, PYBOX_FROM_IMAGE_CPUS),
                               pybox_fmt_fixed(m, c->nano_cpus, 9), c->source);
    if (l->timeout_ms > c->timeout_ms)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "timeout %s s (%s) is above this installation's ceiling of %s s (set by %s)",
                               pybox_fmt_fixed(a, l->timeout_ms, 3), who(l, PYBOX_FROM_IMAGE_TIMEOUT),
                               pybox_fmt_fixed(m, c->timeout_ms, 3), c->source);
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
        .expiry_s = rd->config.expiry_s,
        .housekeeping = true,
        .started_s = rq->started_s,
        .cancellable = rq->cancellable,
        .cancel_fd = rq->cancellable ? rq->cancel_fd : -1,
        .hook = rq->hook,
        .tick = rq->tick,
        .hook_arg = rq->hook_arg,
    };
    pybox_policy_t *p = &run->policy;
    pybox_policy_defaults(p);
    pybox_strlcpy(p->image_id, rd->pin.id, sizeof p->image_id);
    pybox_strlcpy(p->install_id, rd->st.install_id, sizeof p->install_id);
    p->timeout_ms = l.timeout_ms;
    p->memory_bytes = l.memory_bytes;
    p->pids = l.pids;
    p->nano_cpus = l.nano_cpus;
    /* The box's own clock: a full margin behind PyBox's deadline. */
    p->box_timer_ms = l.timeout_ms + PYBOX_BOX_TIMER_MARGIN_MS;
    p->relax |= rq->relax;
    return 0;
}

int pybox_ready_run(pybox_ready_t *rd, pybox_run_result_t *res)
{
    return pybox_run(rd->be, &rd->run, res);
}
