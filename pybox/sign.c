/* SPDX-License-Identifier: MIT */
/* Signed receipts (see sign.h). */
#include "sign.h"

#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "jcs.h"
#include "util.h"

/* The base64 text of a 64-byte signature: 88 characters, "==" at the end. */
#define SIG_B64_LEN 88

/* From 2^53 on, doubles are no longer every integer: the digits a writer put and the
 * double a reader got differ, and readers that keep integers whole (Python's) would see
 * digits nobody signed. No receipt holds such a number; none is signed or accepted. */
#define EXACT_LIMIT 9007199254740992.0

static bool numbers_exact(const cJSON *v, int depth)
{
    if (depth > 1000)
        return false;
    if (cJSON_IsNumber(v))
        return fabs(v->valuedouble) < EXACT_LIMIT;
    for (const cJSON *c = v->child; c != NULL; c = c->next)
        if (!numbers_exact(c, depth + 1))
            return false;
    return true;
}

void pybox_sign_mark_unsigned(cJSON *receipt, const char *why)
{
    if (receipt == NULL)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(receipt, "signature");
    cJSON_DeleteItemFromObjectCaseSensitive(receipt, "unsigned");
    cJSON *u = cJSON_AddStringToObject(receipt, "unsigned", why);
    if (u != NULL && !pybox_json_utf8(u)) /* the last member: none after it */
        cJSON_SetValuestring(u, "the reason could not be made");
}

int pybox_sign_receipt(cJSON *receipt, const pybox_key_t *k, pybox_error_t *err)
{
    if (!cJSON_IsObject(receipt))
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "a receipt is a JSON object");
    cJSON_DeleteItemFromObjectCaseSensitive(receipt, "signature");
    cJSON_DeleteItemFromObjectCaseSensitive(receipt, "unsigned");
    /* What is signed is what every reader will read: the receipt as cJSON writes it,
     * read back. cJSON writes some doubles with 15 digits where 17 would be exact (its
     * check is approximate), and a non-finite number as null. */
    char *text = cJSON_PrintUnformatted(receipt);
    cJSON *as_read = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (as_read == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "the receipt could not be written and read back");
    pybox_buf_t c;
    pybox_buf_init(&c, 0);
    unsigned char sig[64];
    int rc = 0;
    if (!numbers_exact(as_read, 0))
        rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0,
                             "a number at or past 2^53, whose digits JSON readers do not agree on");
    if (rc == 0)
        rc = pybox_jcs_append(&c, as_read, "signature", err);
    if (rc == 0)
        rc = pybox_key_sign(k, c.data, c.len, sig, err);
    cJSON_Delete(as_read);
    pybox_buf_free(&c);
    if (rc < 0)
        return -1;
    pybox_buf_t v;
    pybox_buf_init(&v, 0);
    pybox_base64(&v, sig, sizeof sig);
    cJSON *s = cJSON_CreateObject();
    bool ok = pybox_buf_ok(&v) && v.data != NULL && s != NULL && cJSON_AddStringToObject(s, "alg", PYBOX_SIGN_ALG) &&
              cJSON_AddStringToObject(s, "key_id", pybox_key_id(k)) && cJSON_AddStringToObject(s, "value", v.data);
    pybox_buf_free(&v);
    if (!ok || !cJSON_AddItemToObject(receipt, "signature", s)) {
        cJSON_Delete(s);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "the signature could not be added (out of memory)");
    }
    return 0;
}

int pybox_sign_installation(cJSON *receipt, const pybox_state_t *st)
{
    if (receipt == NULL)
        return -1;
    pybox_error_t err = {0};
    _cleanup_(pybox_key_freep) pybox_key_t *k = NULL;
    if (pybox_key_load(st, true, &k, &err) < 0 || pybox_sign_receipt(receipt, k, &err) < 0) {
        char why[PYBOX_ERROR_MSG_MAX + 64];
        snprintf(why, sizeof why, "the receipt could not be signed: %s", err.msg);
        pybox_sign_mark_unsigned(receipt, why);
        return -1;
    }
    return 0;
}

static void say(pybox_sig_check_t *out, pybox_sig_verdict_t v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(pybox_sig_check_t *out, pybox_sig_verdict_t v, const char *fmt, ...)
{
    out->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->why, sizeof out->why, fmt, ap);
    va_end(ap);
}

static bool is_hex_id(const char *s)
{
    return strlen(s) == PYBOX_KEY_ID_LEN && strspn(s, "0123456789abcdef") == PYBOX_KEY_ID_LEN;
}

/* The 64 bytes a signature's base64 text stands for: one spelling only (padded, no
 * spaces, unused bits zero), so the text too is as PyBox wrote it. */
static bool sig_bytes(const char *b64, unsigned char sig[64])
{
    unsigned char *raw = NULL;
    size_t n = 0;
    bool ok = strlen(b64) == SIG_B64_LEN && pybox_base64_decode(b64, SIG_B64_LEN, &raw, &n) == 0 && n == 64;
    if (ok)
        memcpy(sig, raw, 64);
    free(raw);
    return ok;
}

void pybox_sign_verify(const cJSON *receipt, const pybox_key_t *const *keys, size_t n, pybox_sig_check_t *out)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(receipt)) {
        say(out, PYBOX_SIG_NOT_JSON, "not JSON (a receipt is one JSON object)");
        return;
    }
    if (!numbers_exact(receipt, 0)) {
        say(out, PYBOX_SIG_NOT_JSON,
            "not JSON PyBox writes (a number at or past 2^53, which readers read differently)");
        return;
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(receipt, "signature");
    if (s == NULL) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(receipt, "unsigned");
        if (cJSON_IsString(u)) {
            char shown[300];
            pybox_escape_short(shown, sizeof shown, u->valuestring, 200);
            say(out, PYBOX_SIG_NOT_SIGNED, "not signed (the receipt says: %s)", shown);
        } else {
            say(out, PYBOX_SIG_NOT_SIGNED, "not signed");
        }
        return;
    }
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(s, "alg");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(s, "key_id");
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(s, "value");
    if (!cJSON_IsObject(s) || cJSON_GetArraySize(s) != 3 || !cJSON_IsString(alg) || !cJSON_IsString(id) ||
        !cJSON_IsString(value)) {
        say(out, PYBOX_SIG_MALFORMED,
            "the signature is malformed (it has exactly \"alg\", \"key_id\" and \"value\", each a string)");
        return;
    }
    if (strcmp(alg->valuestring, PYBOX_SIGN_ALG) != 0) {
        char shown[80];
        pybox_escape_short(shown, sizeof shown, alg->valuestring, 32);
        say(out, PYBOX_SIG_MALFORMED, "the signature is malformed (alg \"%s\": only " PYBOX_SIGN_ALG " is known)",
            shown);
        return;
    }
    if (!is_hex_id(id->valuestring)) {
        say(out, PYBOX_SIG_MALFORMED, "the signature is malformed (key_id is not %d hex digits)", PYBOX_KEY_ID_LEN);
        return;
    }
    memcpy(out->key_id, id->valuestring, PYBOX_KEY_ID_LEN + 1);
    unsigned char sig[64];
    if (!sig_bytes(value->valuestring, sig)) {
        say(out, PYBOX_SIG_MALFORMED, "the signature is malformed (value is not the base64 of 64 bytes)");
        return;
    }
    const pybox_key_t *k = NULL;
    for (size_t i = 0; i < n && k == NULL; i++)
        if (keys[i] != NULL && strcmp(pybox_key_id(keys[i]), out->key_id) == 0)
            k = keys[i];
    if (k == NULL) {
        say(out, PYBOX_SIG_UNKNOWN_KEY, "signed by an unknown key %s", out->key_id);
        return;
    }
    pybox_buf_t c;
    pybox_buf_init(&c, 0);
    pybox_error_t err = {0};
    if (pybox_jcs_append(&c, receipt, "signature", &err) < 0) {
        pybox_buf_free(&c);
        say(out, PYBOX_SIG_NOT_JSON, "not JSON with a canonical form (%s)", err.msg);
        return;
    }
    bool ok = pybox_key_verify(k, c.data, c.len, sig);
    pybox_buf_free(&c);
    if (!ok) {
        say(out, PYBOX_SIG_MISMATCH, "signature does not match (the receipt was changed after signing)");
        return;
    }
    out->verdict = PYBOX_SIG_VALID;
}

/* A NUL character in the text: a raw byte, or the escape \u0000 (any case of hex). */
static bool has_nul(const char *t, size_t len)
{
    if (memchr(t, '\0', len) != NULL)
        return true;
    for (size_t i = 0; i + 1 < len; i++) {
        if (t[i] != '\\')
            continue;
        if (t[i + 1] == 'u' && i + 5 < len && memcmp(t + i + 2, "0000", 4) == 0)
            return true;
        i++; /* the escaped character: "\\u0000" is a backslash and "u0000" */
    }
    return false;
}

bool pybox_sign_json_strict(const char *text, size_t len, char *why, size_t whylen)
{
    /* jansson takes a raw NUL in some places (just after a number): refused here */
    const char *nul = memchr(text, '\0', len);
    if (nul != NULL) {
        snprintf(why, whylen, "a NUL byte, at byte %zu", (size_t)(nul - text));
        return false;
    }
    json_error_t e;
    memset(&e, 0, sizeof e);
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (j != NULL) {
        json_decref(j);
        return true;
    }
    /* jansson's words quote the text near the fault: outside bytes, shown escaped */
    char shown[200];
    pybox_escape_short(shown, sizeof shown, e.text, 120);
    snprintf(why, whylen, "%s, at byte %d", shown, e.position);
    return false;
}

void pybox_sign_verify_text(const char *text, size_t len, const pybox_key_t *const *keys, size_t n,
                            pybox_sig_check_t *out)
{
    memset(out, 0, sizeof *out);
    if (has_nul(text, len)) {
        say(out, PYBOX_SIG_NOT_JSON, "not JSON PyBox writes (it holds a NUL character, which no receipt holds)");
        return;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    bool rest_blank = j != NULL && end != NULL;
    for (const char *p = end; rest_blank && p < text + len; p++)
        rest_blank = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r';
    if (!rest_blank) {
        cJSON_Delete(j);
        say(out, PYBOX_SIG_NOT_JSON, j == NULL ? "not JSON" : "not JSON (something follows the receipt's object)");
        return;
    }
    /* cJSON is lenient: it takes a byte-order mark, control bytes between tokens, raw
     * control characters in strings, "00", and a member named twice (the first is used;
     * readers that take the last see another receipt). What is verified is only text
     * that every reader reads as this one value. */
    char why[300];
    if (!pybox_sign_json_strict(text, len, why, sizeof why)) {
        cJSON_Delete(j);
        say(out, PYBOX_SIG_NOT_JSON, "not strict JSON (%s)", why);
        return;
    }
    pybox_sign_verify(j, keys, n, out);
    cJSON_Delete(j);
}
