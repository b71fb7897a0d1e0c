/* SPDX-License-Identifier: MIT */
/* pybox: the command-line front-end. Each command is in its own file (cli.h has the
 * table); here the process is set up and the command picked. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../escape.h"
#include "../hooks.h"
#include "../log.h"
#include "../receipt.h"
#include "../util.h"
#include "../version.h"
#include "cli.h"
#include "help.h"

/* pybox receipt-schema: the published JSON Schema of receipts (docs/receipt.schema.json
 * is this, written by make schema). */
static int cmd_receipt_schema(void)
{
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    int rc = pybox_receipt_schema_text(&out) == 0 && pybox_write_all(STDOUT_FILENO, out.data, out.len) == 0
                 ? 0
                 : PYBOX_EXIT_FAILED;
    pybox_buf_free(&out);
    return rc;
}

/* A standard descriptor PyBox was started without (closed by whoever started it) is
 * /dev/null before anything is opened: else the first file, socket or folder PyBox opens
 * takes its number, and the receipt, a protocol answer or an error message written "to
 * stdout" or "to stderr" lands in it (bubblewrap and isolate do the same). */
static int standard_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR | O_NOCTTY); /* inherited, as a standard descriptor is */
        if (n != fd) {
            if (n >= 0)
                close(n);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    pybox_cli_started_s = pybox_now_s();
    if (standard_fds() < 0)
        return PYBOX_EXIT_FAILED; /* nothing can be said: there is nowhere safe to say it */
    static char prefix[] = "pybox";
    pybox_log_set(pybox_log_stderr, prefix);
    if (argc < 2) {
        pybox_help(stderr, NULL);
        return PYBOX_EXIT_FAILED;
    }
    const char *cmd = argv[1];
    pybox_error_t herr = {0};
    if (pybox_hooks_refuse(&herr) < 0) { /* the installed build has no test hook (hooks.h) */
        bool json = false;
        for (int i = 2; i < argc; i++)
            json = json || strcmp(argv[i], "--json") == 0;
        return pybox_cli_fail(&herr, json);
    }
    /* a command's own words only: a subcommand ("image build") is its command's to pick */
    const pybox_cli_command_t *c = strchr(cmd, ' ') == NULL ? pybox_cli_command(cmd) : NULL;
    if (c != NULL) {
        if (pybox_cli_wants_help(argc - 1, argv + 1)) {
            pybox_help(stdout, cmd);
            return 0;
        }
        return c->run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "receipt-schema") == 0 && argc == 2)
        return cmd_receipt_schema();
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("pybox %s\n", PYBOX_VERSION_SAID);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        const char *of = strcmp(cmd, "help") == 0 && argc > 2 ? argv[2] : NULL;
        if (pybox_help(stdout, of) == 0)
            return 0;
        cmd = of;
        pybox_error_t err = {0};
        char shown[160];
        pybox_escape_short(shown, sizeof shown, cmd, 64);
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "no help for '%s': commands are exec, mcp, image, session, cleanup, verify, key, chart", shown);
        return pybox_cli_fail(&err, false);
    }
    pybox_error_t err = {0};
    if (cmd[0] == '-') {
        char shown[160];
        pybox_escape_short(shown, sizeof shown, cmd, 64);
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "unknown option '%s' for `pybox` (see `pybox help`; a command's options follow it)", shown);
        return pybox_cli_fail(&err, false);
    }
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, cmd, strlen(cmd) > 64 ? 64 : strlen(cmd), false);
    pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "unknown command '%s' (see pybox help)", b.data ? b.data : "");
    pybox_buf_free(&b);
    return pybox_cli_fail(&err, false);
}
