/* SPDX-License-Identifier: MIT */
/* Receipts: the same record in two forms, JSON (one object, schema in docs/receipt.md)
 * and a terminal form where everything the program wrote is escaped and fenced. */
#ifndef PYBOX_RECEIPT_H
#define PYBOX_RECEIPT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "buf.h"
#include "receipt_schema.h"
#include "run.h"

/* Every line of untrusted text in the terminal receipt starts with "  |": a line of
 * the program's output with the first fence, the rest of a line too long for the
 * terminal with the second. No line PyBox writes itself starts with either. A line that
 * holds text the program or the caller chose (program output, file names, reasons and
 * notes quoting them, paths, messages) is cut to fit the terminal, its later rows behind
 * the second fence, so that the terminal never wraps it into a row that starts with that
 * text. */
#define PYBOX_RECEIPT_FENCE "  | "
#define PYBOX_RECEIPT_FENCE_CONT "  |+"
/* Narrower terminals are taken as this wide (the fence and one wide character fit). */
#define PYBOX_RECEIPT_MIN_COLUMNS 8
/* A COLUMNS above this is not taken as a width. */
#define PYBOX_RECEIPT_MAX_COLUMNS 10000

/* The JSON receipt. The caller frees it. NULL on out of memory. */
cJSON *pybox_receipt_json(const pybox_run_result_t *res);

/* The terminal receipt, appended to out, for a terminal `columns` wide (at least
 * PYBOX_RECEIPT_MIN_COLUMNS; 80 when not known, i.e. 0 or less). */
int pybox_receipt_text(const pybox_run_result_t *res, int columns, pybox_buf_t *out);

/* How the terminal receipt is drawn. */
typedef struct pybox_receipt_style {
    int columns; /* as pybox_receipt_text's */
    bool color;  /* the status word and the section headings in colour (ANSI SGR); nothing
                    the program or the caller chose is ever coloured */
} pybox_receipt_style_t;

/* The terminal receipt in a style; pybox_receipt_text is it without colour. */
int pybox_receipt_text_styled(const pybox_run_result_t *res, const pybox_receipt_style_t *style, pybox_buf_t *out);

/* The width to render for: the terminal's (`terminal`, from TIOCGWINSZ; 0 or less when
 * stdout is not a terminal or did not say), else `columns_env` (COLUMNS) when it is a
 * decimal number from 1 to PYBOX_RECEIPT_MAX_COLUMNS, else 80; never less than
 * PYBOX_RECEIPT_MIN_COLUMNS. */
int pybox_receipt_columns(int terminal, const char *columns_env);

/* A JSON object for a request refused or failed before any box was built. */
cJSON *pybox_receipt_refusal(const pybox_error_t *err);

/* A session call whose deadline its session's lifetime cut: the line that says so (no
 * newline), for the receipt's text and the MCP summary; false when it was not cut. */
bool pybox_receipt_lifetime_cut(const pybox_run_result_t *res, char *line, size_t len);

#endif
