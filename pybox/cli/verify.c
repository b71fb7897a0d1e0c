/* SPDX-License-Identifier: MIT */
/* pybox verify: a JSON receipt's signature checked (docs/receipt.md, "Signature"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../escape.h"
#include "../key.h"
#include "../sign.h"
#include "../state.h"
#include "../util.h"
#include "cli.h"

#define USAGE "usage: pybox verify RECEIPT.json|- [--key PUBLIC.pem]"
static const struct option options[] = {PYBOX_CLI_VALUE("key", 'k'), PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    const char **key = ctx;
    if (val == 'k' && *key != NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, USAGE); /* given twice */
    if (val == 'k')
        *key = value;
    return 0;
}

/* pybox verify RECEIPT.json|- [--key PUBLIC.pem]: 0 valid, 1 not, 125 not checked. */
static int run(int argc, char **argv)
{
    pybox_error_t err = {0};
    const char *keyfile = NULL;
    int first = pybox_cli_args("verify", argc, argv, &keyfile, &err);
    if (first < 0)
        return pybox_cli_fail(&err, false);
    const char *file = argv[first];
    char shown[160];
    pybox_escape_short(shown, sizeof shown, file, 96);
    _cleanup_close_ int fd = strcmp(file, "-") == 0 ? dup(STDIN_FILENO) : open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return pybox_cli_failf(PYBOX_ERR_USAGE, errno, "open(%s)", shown);
    }
    if (isatty(fd)) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "%s is a terminal: give the receipt in a file or on a pipe",
                        strcmp(file, "-") == 0 ? "standard input" : shown);
        return pybox_cli_fail(&err, false);
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, PYBOX_SIGN_RECEIPT_MAX, &text, &len, &over, &err) < 0)
        return pybox_cli_fail(&err, false);
    if (over) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "%s: larger than any receipt (%u MiB)", shown,
                        PYBOX_SIGN_RECEIPT_MAX >> 20);
        return pybox_cli_fail(&err, false);
    }
    _cleanup_(pybox_key_freep) pybox_key_t *key = NULL;
    char whose[200];
    if (keyfile != NULL) {
        if (pybox_key_read_public(keyfile, &key, &err) < 0)
            return pybox_cli_fail(&err, false);
        char kshown[160];
        pybox_escape_short(kshown, sizeof kshown, keyfile, 96);
        snprintf(whose, sizeof whose, "the key in %s", kshown);
    } else {
        pybox_state_t st;
        if (pybox_state_open(&st, false, &err) < 0 || pybox_key_load(&st, false, &key, &err) < 0)
            return pybox_cli_fail(&err, false);
        snprintf(whose, sizeof whose, "this installation");
    }
    const pybox_key_t *keys[] = {key};
    pybox_sig_check_t c;
    pybox_sign_verify_text(text, len, keys, key ? 1 : 0, &c);
    if (c.verdict == PYBOX_SIG_VALID) {
        printf("valid: signed by key %s of %s\n", c.key_id, whose);
        return 0;
    }
    printf("invalid: %s%s\n", c.why,
           c.verdict == PYBOX_SIG_UNKNOWN_KEY && key == NULL ? " (this installation has no receipt key)" : "");
    return 1;
}

const pybox_cli_command_t pybox_cli_verify = {"verify", options, false, take, 1, 1, USAGE, run};
