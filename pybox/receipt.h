/* SPDX-License-Identifier: MIT */
/* Receipts: the same record in two forms, JSON (one object, schema in docs/receipt.md)
 * and a terminal form where everything the program wrote is escaped and fenced. */
#ifndef PYBOX_RECEIPT_H
#define PYBOX_RECEIPT_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "run.h"

#define PYBOX_RECEIPT_SCHEMA "pybox.receipt/1"
/* Every line of untrusted text in the terminal receipt starts with this fence; no line
 * PyBox writes itself does. */
#define PYBOX_RECEIPT_FENCE "  | "

/* The JSON receipt. The caller frees it. NULL on out of memory. */
cJSON *pybox_receipt_json(const pybox_run_result_t *res);

/* The terminal receipt, appended to out. */
int pybox_receipt_text(const pybox_run_result_t *res, pybox_buf_t *out);

/* A JSON object for a request refused or failed before any box was built. */
cJSON *pybox_receipt_refusal(const pybox_error_t *err);

#endif
