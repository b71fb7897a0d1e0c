/* SPDX-License-Identifier: MIT */
/* pybox key: this installation's public receipt key. */
#include <errno.h>
#include <unistd.h>

#include "../key.h"
#include "../state.h"
#include "../util.h"
#include "cli.h"

static const struct option options[] = {PYBOX_CLI_FLAG("init", 'i'), PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)value;
    (void)err;
    *(bool *)ctx |= val == 'i';
    return 0;
}

/* pybox key [--init]: the installation's public receipt key, as PEM. */
static int run(int argc, char **argv)
{
    pybox_error_t err = {0};
    bool init = false;
    if (pybox_cli_args("key", argc, argv, &init, &err) < 0)
        return pybox_cli_fail(&err, false);
    pybox_state_t st;
    _cleanup_(pybox_key_freep) pybox_key_t *key = NULL;
    if (pybox_state_open(&st, init, &err) < 0)
        return pybox_cli_fail(&err, false);
    int got = pybox_key_load(&st, init, &key, &err);
    if (got < 0)
        return pybox_cli_fail(&err, false);
    if (got == 0) {
        return pybox_cli_failf(PYBOX_ERR_STATE, 0,
                               "this installation has no receipt key yet: pybox key --init makes one (set-up and "
                               "the first signed receipt do too)");
    }
    pybox_buf_t pem;
    pybox_buf_init(&pem, 0);
    int rc = pybox_key_public_pem(key, &pem, &err);
    if (rc == 0 && pybox_write_all(STDOUT_FILENO, pem.data, pem.len) < 0)
        rc = pybox_error_set(&err, PYBOX_ERR_SYSTEM, errno, "write(stdout)");
    pybox_buf_free(&pem);
    return rc < 0 ? pybox_cli_fail(&err, false) : 0;
}

const pybox_cli_command_t pybox_cli_key = {"key", options, false, take, 0, 0, "usage: pybox key [--init]", run};
