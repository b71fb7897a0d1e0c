/* SPDX-License-Identifier: MIT */
/* Signed receipts (docs/receipt.md, "Signature"). A receipt carries a top-level
 * "signature": {"alg": "Ed25519", "key_id": the key's id, "value": base64 of the 64-byte
 * signature}, made over the canonical JSON (RFC 8785, jcs.h) of the receipt without its
 * "signature" member. So any JSON writer may re-space, re-order or re-escape it (an MCP
 * client, a campaign record) and it still verifies; any change of a value does not. A
 * receipt that could not be signed says why in "unsigned" instead. */
#ifndef PYBOX_SIGN_H
#define PYBOX_SIGN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "key.h"
#include "state.h"

#define PYBOX_SIGN_ALG "Ed25519"
/* What pybox verify reads at most: larger than any receipt. */
#define PYBOX_SIGN_RECEIPT_MAX (64u * 1024 * 1024)

/* Sign the receipt (an object) with k: its "signature" member added, any earlier
 * "signature" or "unsigned" removed first. -1 (the receipt unchanged but for those) when
 * it has no canonical form or k cannot sign. */
int pybox_sign_receipt(cJSON *receipt, const pybox_key_t *k, pybox_error_t *err);

/* Sign with the installation's key (made on first need); when that fails, the receipt
 * is left unsigned and says why in "unsigned". A NULL receipt is left alone. 0 when
 * signed, -1 when not. */
int pybox_sign_installation(cJSON *receipt, const pybox_state_t *st);

/* Mark the receipt unsigned, saying why (made valid UTF-8). */
void pybox_sign_mark_unsigned(cJSON *receipt, const char *why);

typedef enum {
    PYBOX_SIG_VALID = 0,
    PYBOX_SIG_NOT_JSON,    /* not a JSON object, or JSON readers would disagree on it */
    PYBOX_SIG_NOT_SIGNED,  /* no "signature" member */
    PYBOX_SIG_MALFORMED,   /* a "signature" that is not one PyBox writes (another alg among them) */
    PYBOX_SIG_UNKNOWN_KEY, /* signed by a key not among those given */
    PYBOX_SIG_MISMATCH,    /* the signature is not the key's over this receipt */
} pybox_sig_verdict_t;

typedef struct pybox_sig_check {
    pybox_sig_verdict_t verdict;
    char key_id[PYBOX_KEY_ID_LEN + 1]; /* the signature's key, when it names one */
    char why[512];                     /* for all but VALID: what is wrong, in words */
} pybox_sig_check_t;

/* Check a receipt's signature against keys (n of them, any may be the signer). */
void pybox_sign_verify(const cJSON *receipt, const pybox_key_t *const *keys, size_t n, pybox_sig_check_t *out);

/* Whether text (len bytes) is strict JSON, read by Debian's jansson: RFC 8259's grammar
 * and nothing else (no byte-order mark, only space, tab, CR and LF between tokens, no
 * control character raw in a string, no leading zero, a surrogate escape only in a
 * pair), valid UTF-8, an object or array at the top with only white space after it, no
 * NUL character, no integer beyond 64 bits or number beyond a double, and no object
 * with two members of one name at any depth (names compared as read, escapes undone).
 * When not, why (whylen bytes) says what and at which byte, escaped. */
bool pybox_sign_json_strict(const char *text, size_t len, char *why, size_t whylen);

/* The same from the receipt's text (len bytes): one JSON object and nothing else but
 * white space, and strict JSON (pybox_sign_json_strict), so that every reader reads the
 * receipt that is verified. Text with a NUL character, raw or as \u0000, is refused as
 * NOT_JSON: readers disagree on where such a string ends, and no receipt holds one. */
void pybox_sign_verify_text(const char *text, size_t len, const pybox_key_t *const *keys, size_t n,
                            pybox_sig_check_t *out);

#endif
