/* SPDX-License-Identifier: MIT */
/* Canonical JSON (RFC 8785, the JSON Canonicalization Scheme): one byte string for one
 * JSON value, whatever spacing, member order or escapes a writer chose. Receipts are
 * signed over it (sign.h). */
#ifndef PYBOX_JCS_H
#define PYBOX_JCS_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "error.h"

/* Longest text of a number in ECMAScript form ("-1.2345678901234567e-308" is 24). */
#define PYBOX_JCS_NUMBER_MAX 32

/* Append the canonical form of v to out: members sorted by their names' UTF-16 code
 * units, numbers as ECMAScript writes them (shortest digits that read back the same
 * double), strings with only the escapes RFC 8785 names, no spaces. skip (may be NULL)
 * is a member of the top-level object left out (a receipt's "signature"). -1 (and err)
 * for what has no canonical form: a number that is not finite, a string that is not
 * UTF-8, two members of one object with the same name, or out's maximum. */
int pybox_jcs_append(pybox_buf_t *out, const cJSON *v, const char *skip, pybox_error_t *err);

/* A finite double as ECMAScript's Number.prototype.toString writes it (-0 is "0");
 * -1 when it is not finite. */
int pybox_jcs_number(double d, char out[PYBOX_JCS_NUMBER_MAX]);

#endif
