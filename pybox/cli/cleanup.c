/* SPDX-License-Identifier: MIT */
/* pybox cleanup: this installation's expired leftovers removed (docs/cleanup.md). */
#include <unistd.h>

#include "../leftovers.h"
#include "../util.h"
#include "cli.h"

static const struct option options[] = {
    PYBOX_CLI_FLAG("dry-run", 'n'),
    PYBOX_CLI_FLAG("json", 'j'),
    PYBOX_CLI_VALUE("backend", 'b'),
    PYBOX_CLI_FLAG("help", 'h'),
    PYBOX_CLI_END,
};

typedef struct {
    bool dry, json;
    const char *backend;
} args_t;

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)err;
    args_t *a = ctx;
    a->dry |= val == 'n';
    a->json |= val == 'j';
    if (val == 'b')
        a->backend = value;
    return 0;
}

static int run(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a = {0};
    if (pybox_cli_args("cleanup", argc, argv, &a, &err) < 0)
        return pybox_cli_fail(&err, a.json);
    pybox_state_t st;
    if (pybox_state_open(&st, false, &err) < 0)
        return pybox_cli_fail(&err, a.json);
    _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, a.backend, &be, &err) < 0)
        return pybox_cli_fail(&err, a.json);
    pybox_leftovers_report_t rep;
    int rc = pybox_leftovers_clean(&st, be, a.dry, false, &rep, &err);
    if (rc < 0) {
        pybox_leftovers_report_free(&rep);
        return pybox_cli_fail(&err, a.json);
    }
    /* The files of sessions whose holder is gone (their boxes are leftovers as above). */
    int sessions = 0;
    if (pybox_cli_session_sweep(&st, a.dry, &sessions) < 0)
        sessions = -1;
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    if (a.json) {
        cJSON *j = pybox_leftovers_report_json(&rep);
        cJSON_AddNumberToObject(j, "session_holders_gone", sessions);
        pybox_cli_json_line(&out, j);
    } else {
        pybox_leftovers_report_text(&rep, &out);
        if (sessions != 0)
            pybox_buf_addf(&out,
                           sessions < 0 ? "the sessions' folder could not be read\n"
                           : a.dry      ? "%d session%s whose holder is gone: its files would be removed\n"
                                        : "%d session%s whose holder is gone: its files removed\n",
                           sessions, sessions == 1 ? "" : "s");
    }
    int code = out.data && pybox_write_all(STDOUT_FILENO, out.data, out.len) == 0 ? 0 : PYBOX_EXIT_FAILED;
    pybox_buf_free(&out);
    pybox_leftovers_report_free(&rep);
    return code;
}

const pybox_cli_command_t pybox_cli_cleanup = {
    "cleanup",
    options,
    false,
    take,
    0,
    0,
    "unexpected argument (usage: pybox cleanup [--dry-run] [--json] [--backend NAME])",
    run};
