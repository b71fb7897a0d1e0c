/* SPDX-License-Identifier: MIT */
/* Receipts: the same record in two forms, JSON (one object, schema in docs/receipt.md)
 * and a terminal form where everything the program wrote is escaped and fenced. */
#ifndef PYBOX_RECEIPT_H
#define PYBOX_RECEIPT_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "run.h"

#define PYBOX_RECEIPT_SCHEMA "pybox.receipt/2"
/* Every line of untrusted text in the terminal receipt starts with "  |": a line of
 * the program's output with the first fence, the rest of a line too long for the
 * terminal with the second. No line PyBox writes itself starts with either. Program text
 * is cut to fit the terminal so that the terminal never wraps it into an unfenced line. */
#define PYBOX_RECEIPT_FENCE "  | "
#define PYBOX_RECEIPT_FENCE_CONT "  |+"

/* The JSON receipt. The caller frees it. NULL on out of memory. */
cJSON *pybox_receipt_json(const pybox_run_result_t *res);

/* The terminal receipt, appended to out, for a terminal `columns` wide (at least 24;
 * 80 when not known). */
int pybox_receipt_text(const pybox_run_result_t *res, int columns, pybox_buf_t *out);

/* A JSON object for a request refused or failed before any box was built. */
cJSON *pybox_receipt_refusal(const pybox_error_t *err);

#endif
