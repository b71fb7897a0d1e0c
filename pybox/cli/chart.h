/* SPDX-License-Identifier: MIT */
/* The command line's charts: `pybox chart [RECEIPT]` and `pybox exec --chart FILE`
 * (docs/chart.md). Kept apart from main() so they are unit-tested. */
#ifndef PYBOX_CLI_CHART_H
#define PYBOX_CLI_CHART_H

#include <cjson/cJSON.h>

#include "../buf.h"
#include "../error.h"

/* The most a receipt given to `pybox chart` may hold. */
#define PYBOX_CLI_RECEIPT_MAX (8 * 1024 * 1024)

/* Read one JSON receipt from fd (at most PYBOX_CLI_RECEIPT_MAX bytes; only white space
 * may follow it) and draw its chart into svg. `from` names the input in messages. Bad
 * input is refused with PYBOX_ERR_USAGE and svg is left failed. */
int pybox_cli_chart_fd(int fd, const char *from, pybox_buf_t *svg, pybox_error_t *err);

/* Check a --chart path before any box is built: a file name in an existing folder that
 * can be written, and no file (or anything else) there yet, since a chart is never
 * written over one. Refused with PYBOX_ERR_USAGE. */
int pybox_cli_chart_path_check(const char *path, pybox_error_t *err);

/* Draw the receipt's chart and write it to path through a temporary file in the same
 * folder, put in place only if nothing has taken the name meanwhile. */
int pybox_cli_chart_write(const char *path, const cJSON *receipt, pybox_error_t *err);

#endif
