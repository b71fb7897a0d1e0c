/* SPDX-License-Identifier: MIT */
/* What every command says the same way: PyBox's own failure, a JSON line (see cli.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../escape.h"
#include "../receipt.h"
#include "../sign.h"
#include "../state.h"
#include "../util.h"
#include "cli.h"

double pybox_cli_started_s;

void pybox_cli_json_line(pybox_buf_t *out, cJSON *j)
{
    if (j != NULL && pybox_json_append(out, j) == 0)
        pybox_buf_adds(out, "\n");
    else
        pybox_buf_fail(out);
    cJSON_Delete(j);
}

static void say(const char *word, const char *msg)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, msg, strlen(msg), false);
    fprintf(stderr, "pybox: %s: %s\n", word, b.data ? b.data : "");
    pybox_buf_free(&b);
}

void pybox_cli_say_error(const char *msg)
{
    say("error", msg);
}

int pybox_cli_failf(pybox_error_kind_t kind, int errnum, const char *fmt, ...)
{
    pybox_error_t err = {.kind = kind, .errnum = errnum};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof err.msg, fmt, ap);
    va_end(ap);
    if (errnum != 0) {
        size_t n = strlen(err.msg);
        char text[128];
        snprintf(err.msg + n, sizeof err.msg - n, ": %s", pybox_strerror(errnum, text, sizeof text));
    }
    return pybox_cli_fail(&err, false);
}

int pybox_cli_fail(const pybox_error_t *err, bool json)
{
    say(err->kind == PYBOX_ERR_USAGE ? "refused" : "error", err->msg);
    if (json) {
        cJSON *r = pybox_receipt_refusal(err);
        /* A refusal is signed too, when the installation can be opened to do it. */
        pybox_state_t st;
        pybox_error_t serr = {0};
        if (pybox_state_open(&st, false, &serr) == 0) {
            pybox_sign_installation(r, &st);
        } else {
            char why[PYBOX_ERROR_MSG_MAX + 64];
            snprintf(why, sizeof why, "the receipt could not be signed: %s", serr.msg);
            pybox_sign_mark_unsigned(r, why);
        }
        pybox_buf_t out;
        pybox_buf_init(&out, 0);
        pybox_cli_json_line(&out, r);
        if (out.data)
            (void)pybox_write_all(STDOUT_FILENO, out.data, out.len);
        pybox_buf_free(&out);
    }
    return PYBOX_EXIT_FAILED;
}
