/* SPDX-License-Identifier: MIT */
/* The receipt's shape, defined once: every member of a run's receipt and of a refusal,
 * its type, whether it is always there, and its words. The MCP tool's outputSchema and
 * the published JSON Schema (docs/receipt.schema.json) are made from it, and receipts
 * are checked against it (the writer's tests check every kind of run). */
#ifndef PYBOX_RECEIPT_SCHEMA_H
#define PYBOX_RECEIPT_SCHEMA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#define PYBOX_RECEIPT_SCHEMA "pybox.receipt/2"
#define PYBOX_RECEIPT_SCHEMA_ID "https://pybox.invalid/schema/receipt-2.json"

/* The JSON Schema (2020-12) of a receipt: a run's or a refusal's (oneOf). strict: no
 * member the definition does not name (the published schema); otherwise only the
 * definition's members are described (what a client can rely on). Caller frees. */
cJSON *pybox_receipt_schema(bool strict);

/* The published schema (strict) as text, indented by two spaces, with a newline at the
 * end: what docs/receipt.schema.json holds (make schema writes it). Appended to out. */
struct pybox_buf;
int pybox_receipt_schema_text(struct pybox_buf *out);

/* The schema of a run's receipt alone (MCP outputSchema: a result's structuredContent is
 * always one). Caller frees. */
cJSON *pybox_receipt_run_schema(bool strict);

/* Check a receipt against the definition: every member it must have, no member it must
 * not, every type and word. 0 when it conforms; -1 with where and why in why. */
int pybox_receipt_conforms(const cJSON *receipt, char *why, size_t len);

#endif
