/* SPDX-License-Identifier: MIT */
/* The command line's charts: `pybox chart [RECEIPT]` and `pybox exec --chart FILE`
 * (docs/chart.md). Kept apart from main() so they are unit-tested. */
#ifndef PYBOX_CLI_CHART_H
#define PYBOX_CLI_CHART_H

#include <cjson/cJSON.h>
#include <limits.h>

#include "../buf.h"
#include "../error.h"

/* The most a receipt given to `pybox chart` may hold. Not pybox verify's bound
 * (PYBOX_SIGN_RECEIPT_MAX, 64 MiB), and not its reader: the chart reads with cJSON, whose
 * memory grows with every value, where verify reads strictly with jansson; one reader
 * and one bound for both is left to do. */
#define PYBOX_CLI_RECEIPT_MAX (8 * 1024 * 1024)

/* Read one JSON receipt from fd (at most PYBOX_CLI_RECEIPT_MAX bytes; only white space
 * may follow it) and draw its chart into svg. `from` names the input in messages. Bad
 * input is refused with PYBOX_ERR_USAGE and svg is left failed. */
int pybox_cli_chart_fd(int fd, const char *from, pybox_buf_t *svg, pybox_error_t *err);

/* Where --chart writes: its folder as checked, held by descriptor (a folder swapped for
 * another under the same name during the run does not move the chart), and the file's
 * name in it. */
typedef struct pybox_cli_chart_dest {
    int dirfd; /* O_PATH; -1 when none */
    char base[NAME_MAX + 1];
    char shown[256]; /* the path as given, escaped, for messages */
} pybox_cli_chart_dest_t;

/* Check a --chart path before any box is built: a file name in an existing folder that
 * this user can write and nobody else can rearrange (pybox_folder_hold, the rule of
 * --output's parent), and no file (or anything else) there yet, since a chart is never
 * written over one. Refused with PYBOX_ERR_USAGE; on success the folder is held in dest
 * until pybox_cli_chart_close. */
int pybox_cli_chart_path_check(const char *path, pybox_cli_chart_dest_t *dest, pybox_error_t *err);
void pybox_cli_chart_close(pybox_cli_chart_dest_t *dest);

/* Draw the receipt's chart and write it into the held folder through a temporary file,
 * put in place under its name only if nothing has taken the name meanwhile. */
int pybox_cli_chart_write(const pybox_cli_chart_dest_t *dest, const cJSON *receipt, pybox_error_t *err);

#endif
