/* SPDX-License-Identifier: MIT */
/* Signed receipts (pybox/sign.c) and the installation's key (pybox/key.c): a real
 * receipt signed and verified, refused after one changed byte anywhere, with an unknown
 * key, without a signature or with another algorithm; the key file's own rules. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/escape.h"
#include "../pybox/jcs.h"
#include "../pybox/key.h"
#include "../pybox/receipt.h"
#include "../pybox/receipt_schema.h"
#include "../pybox/sign.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "suites.h"

static char tmp_root[64];
static pybox_state_t st;

static void setup(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/pybox-unit-sign-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp_root));
    char home[128];
    snprintf(home, sizeof home, "%s/home", tmp_root);
    ck_assert_int_eq(setenv("PYBOX_HOME", home, 1), 0);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    unsetenv("PYBOX_HOME");
    unit_rm_tree(tmp_root);
}

/* A real receipt (a run of unit/fixtures/receipt-run.json's program through pybox exec
 * --json), as pybox printed it. */
static char *fixture(size_t *len)
{
    int fd = open(PYBOX_FIXTURES "/receipt-run.json", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    char *text = NULL;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 1 << 20, &text, len, &over, &err), 0);
    close(fd);
    return text;
}

static pybox_key_t *own_key(void)
{
    pybox_key_t *k = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_key_load(&st, true, &k, &err) == 1, "%s", err.msg);
    return k;
}

/* The fixture signed by k, as compact JSON text (caller frees). */
static char *signed_text(const pybox_key_t *k)
{
    size_t len;
    char *text = fixture(&len);
    cJSON *r = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_ptr_nonnull(r);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_sign_receipt(r, k, &err) == 0, "%s", err.msg);
    char *out = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return out;
}

static pybox_sig_verdict_t check_text(const char *text, size_t len, const pybox_key_t *k, pybox_sig_check_t *c)
{
    const pybox_key_t *keys[] = {k};
    pybox_sign_verify_text(text, len, keys, 1, c);
    return c->verdict;
}

START_TEST(a_real_receipt_signed_and_verified)
{
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    cJSON *r = cJSON_Parse(t);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "signature");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(s, "alg")->valuestring, "Ed25519");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(s, "key_id")->valuestring, pybox_key_id(k));
    ck_assert_uint_eq(strlen(cJSON_GetObjectItemCaseSensitive(s, "value")->valuestring), 88);
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(t, strlen(t), k, &c), PYBOX_SIG_VALID);
    ck_assert_str_eq(c.key_id, pybox_key_id(k));
    /* Written again by another writer: spaced, members in another order, other escapes
     * for the same characters. It is the same receipt, and verifies. */
    char *pretty = cJSON_Print(r);
    ck_assert_int_eq(check_text(pretty, strlen(pretty), k, &c), PYBOX_SIG_VALID);
    free(pretty);
    cJSON *moved = cJSON_DetachItemFromObjectCaseSensitive(r, "schema");
    cJSON_AddItemToObject(r, "schema", moved);
    char *reordered = cJSON_PrintUnformatted(r);
    ck_assert_int_eq(check_text(reordered, strlen(reordered), k, &c), PYBOX_SIG_VALID);
    free(reordered);
    const char *e_acute = strstr(t, "h\xc3\xa9llo");
    ck_assert_ptr_nonnull(e_acute);
    char escaped[16384];
    size_t at = (size_t)(e_acute - t) + 1;
    snprintf(escaped, sizeof escaped, "%.*s\\u00E9%s", (int)at, t, t + at + 2);
    ck_assert_int_eq(check_text(escaped, strlen(escaped), k, &c), PYBOX_SIG_VALID);
    cJSON_Delete(r);
    free(t);
    pybox_key_free(k);
}
END_TEST

/* A receipt whose program printed what a terminal acts on (CSI, bidi override, a line
 * separator, a tag above the BMP) is printed with those as \uXXXX: the same JSON value,
 * so the signature made over it holds, and no such byte is left raw. */
START_TEST(terminal_safe_json_still_verifies)
{
    pybox_key_t *k = own_key();
    size_t len;
    char *text = fixture(&len);
    cJSON *r = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_ptr_nonnull(r);
    cJSON *said = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "said"), "stdout");
    ck_assert_ptr_nonnull(said);
    const char *hostile = "\xc2\x9b"
                          "2J\xe2\x80\xae"
                          "PyBox receipt\xe2\x80\xa8\xf3\xa0\x80\x81\x7f";
    cJSON_ReplaceItemInObjectCaseSensitive(said, "text", cJSON_CreateString(hostile));
    pybox_error_t err = {0};
    ck_assert_msg(pybox_sign_receipt(r, k, &err) == 0, "%s", err.msg);
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    ck_assert_int_eq(pybox_json_append(&out, r), 0);
    ck_assert_ptr_null(strstr(out.data, "\xc2\x9b"));
    ck_assert_ptr_null(strstr(out.data, "\xe2\x80\xae"));
    ck_assert_ptr_null(strstr(out.data, "\xe2\x80\xa8"));
    ck_assert_ptr_null(strstr(out.data, "\xf3\xa0"));
    ck_assert_ptr_null(strchr(out.data, 0x7f));
    ck_assert_ptr_nonnull(strstr(out.data, "\\u009b2J\\u202ePyBox receipt\\u2028\\udb40\\udc01\\u007f"));
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(out.data, out.len, k, &c), PYBOX_SIG_VALID);
    pybox_buf_free(&out);
    cJSON_Delete(r);
    pybox_key_free(k);
}
END_TEST

START_TEST(one_changed_byte_anywhere_is_refused)
{
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    size_t len = strlen(t);
    cJSON *orig = cJSON_Parse(t);
    char *m = malloc(len + 1);
    int refused = 0, same = 0;
    static const unsigned char flips[] = {0x01, 0x20, 0x80};
    for (size_t i = 0; i < len; i++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(m, t, len + 1);
            m[i] = (char)((unsigned char)m[i] ^ flips[f]);
            pybox_sig_check_t c;
            if (check_text(m, len, k, &c) != PYBOX_SIG_VALID) {
                refused++;
                continue;
            }
            /* Only a byte whose change leaves the same JSON value may pass. */
            cJSON *j = cJSON_ParseWithLength(m, len);
            ck_assert_msg(j != NULL && cJSON_Compare(j, orig, 1),
                          "byte %zu (^0x%02x) changed and still verified: %.60s", i, flips[f],
                          t + (i > 20 ? i - 20 : 0));
            cJSON_Delete(j);
            same++;
        }
    }
    ck_assert_int_eq(same, 0); /* a compact receipt has no byte to spare */
    ck_assert_int_eq(refused, (int)(len * sizeof flips));
    free(m);
    cJSON_Delete(orig);
    free(t);
    pybox_key_free(k);
}
END_TEST

START_TEST(each_refusal_says_why)
{
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    pybox_sig_check_t c;
    cJSON *r = cJSON_Parse(t);
    cJSON *sig = cJSON_GetObjectItemCaseSensitive(r, "signature");

    /* a changed value: the exit code */
    cJSON *x = cJSON_Duplicate(r, 1);
    cJSON_ReplaceItemInObjectCaseSensitive(x, "exit_code", cJSON_CreateNumber(0));
    const pybox_key_t *keys[] = {k};
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_MISMATCH);
    ck_assert_str_eq(c.why, "signature does not match (the receipt was changed after signing)");
    cJSON_Delete(x);

    /* an added member */
    x = cJSON_Duplicate(r, 1);
    cJSON_AddBoolToObject(x, "trusted", 1);
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_MISMATCH);
    cJSON_Delete(x);

    /* no signature */
    x = cJSON_Duplicate(r, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(x, "signature");
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_NOT_SIGNED);
    ck_assert_str_eq(c.why, "not signed");
    pybox_sign_mark_unsigned(x, "the key could not be read");
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_NOT_SIGNED);
    ck_assert_str_eq(c.why, "not signed (the receipt says: the key could not be read)");
    cJSON_Delete(x);

    /* an unknown key: another installation's */
    pybox_key_t *other = NULL;
    pybox_error_t err = {0};
    char home2[128];
    snprintf(home2, sizeof home2, "%s/other", tmp_root);
    setenv("PYBOX_HOME", home2, 1);
    pybox_state_t st2;
    ck_assert_msg(pybox_state_open(&st2, true, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(pybox_key_load(&st2, true, &other, &err), 1);
    ck_assert_str_ne(pybox_key_id(other), pybox_key_id(k));
    const pybox_key_t *others[] = {other};
    pybox_sign_verify(r, others, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_UNKNOWN_KEY);
    char want[128];
    snprintf(want, sizeof want, "signed by an unknown key %s", pybox_key_id(k));
    ck_assert_str_eq(c.why, want);
    pybox_sign_verify(r, NULL, 0, &c); /* no key at all */
    ck_assert_int_eq(c.verdict, PYBOX_SIG_UNKNOWN_KEY);
    /* a key_id changed to the other key's: its signature does not match */
    x = cJSON_Duplicate(r, 1);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "signature"), "key_id",
                                           cJSON_CreateString(pybox_key_id(other)));
    pybox_sign_verify(x, others, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_MISMATCH);
    cJSON_Delete(x);

    /* another algorithm, a member more or less, a value that is not 64 bytes */
    static const char *const bad[][2] = {{"alg", "RS256"},  {"alg", "ed25519"}, {"key_id", "xyz"},
                                         {"value", "AAAA"}, {"value", NULL},    {"extra", "1"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        x = cJSON_Duplicate(r, 1);
        cJSON *s = cJSON_GetObjectItemCaseSensitive(x, "signature");
        if (bad[i][1] == NULL)
            cJSON_DeleteItemFromObjectCaseSensitive(s, bad[i][0]);
        else if (cJSON_GetObjectItemCaseSensitive(s, bad[i][0]))
            cJSON_ReplaceItemInObjectCaseSensitive(s, bad[i][0], cJSON_CreateString(bad[i][1]));
        else
            cJSON_AddStringToObject(s, bad[i][0], bad[i][1]);
        pybox_sign_verify(x, keys, 1, &c);
        ck_assert_msg(c.verdict == PYBOX_SIG_MALFORMED, "%s=%s: %s", bad[i][0], bad[i][1], c.why);
        cJSON_Delete(x);
    }
    pybox_sign_verify(r, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_VALID);
    x = cJSON_Duplicate(r, 1);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "signature"), "alg",
                                           cJSON_CreateString("RS256"));
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_str_eq(c.why, "the signature is malformed (alg \"RS256\": only Ed25519 is known)");
    cJSON_Delete(x);
    /* the last character of the signature's base64 changed: another spelling */
    x = cJSON_Duplicate(r, 1);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "signature"), "value");
    char b64[89];
    snprintf(b64, sizeof b64, "%s", v->valuestring);
    b64[85] = b64[85] == 'A' ? 'B' : 'A';
    cJSON_SetValuestring(v, b64);
    pybox_sign_verify(x, keys, 1, &c);
    ck_assert_int_ne(c.verdict, PYBOX_SIG_VALID);
    cJSON_Delete(x);
    (void)sig;

    /* texts that are not a receipt */
    static const char *const texts[] = {"", "not json", "[1,2]", "{\"a\":1} {\"b\":2}", "{\"a\":1}x"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        ck_assert_int_eq(check_text(texts[i], strlen(texts[i]), k, &c), PYBOX_SIG_NOT_JSON);
    ck_assert_int_eq(check_text("{\"a\":1}\n  ", 10, k, &c), PYBOX_SIG_NOT_SIGNED);
    cJSON_Delete(r);
    free(t);
    pybox_key_free(k);
    pybox_key_free(other);
}
END_TEST

START_TEST(a_nul_character_is_refused)
{
    /* cJSON ends a string at a NUL: text after "\u0000" would be read by others but not
     * signed. Such text is refused, wherever the NUL is. */
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    const char *run = strstr(t, "\"run_id\":\"");
    ck_assert_ptr_nonnull(run);
    size_t at = (size_t)(run - t) + 10 + 32; /* just before the closing quote */
    char m[16384];
    snprintf(m, sizeof m, "%.*s\\u0000 and more%s", (int)at, t, t + at);
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    ck_assert_ptr_nonnull(strstr(c.why, "NUL"));
    /* a raw NUL byte */
    size_t len = strlen(t);
    memcpy(m, t, len);
    m[at] = '\0';
    ck_assert_int_eq(check_text(m, len, k, &c), PYBOX_SIG_NOT_JSON);
    /* "\\u0000" is a backslash and "u0000": text a program may print, not a NUL */
    ck_assert_int_eq(check_text("{\"a\":\"\\\\u0000\"}", 15, k, &c), PYBOX_SIG_NOT_SIGNED);
    free(t);
    pybox_key_free(k);
}
END_TEST

/* Text cJSON reads leniently as the very receipt that was signed, but that other
 * readers read otherwise or not at all: each is refused, not verified. */
START_TEST(lenient_json_is_not_verified)
{
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    size_t len = strlen(t);
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(t, len, k, &c), PYBOX_SIG_VALID);
    static char m[65536];
    ck_assert_uint_lt(len + 600, sizeof m);
    /* two top-level signatures: cJSON uses the first, readers that take the last see
     * another (here a forged one) */
    const char *sig = strstr(t, "\"signature\":");
    ck_assert_ptr_nonnull(sig);
    snprintf(m, sizeof m, "{%.*s,%s", (int)(len - 1 - (size_t)(sig - t)), sig, t + 1);
    m[strlen(m) - 1] = '\0';
    snprintf(m + strlen(m), sizeof m - strlen(m),
             ",\"signature\":{\"alg\":\"Ed25519\",\"key_id\":\"%s\","
             "\"value\":\"forged\"}}",
             pybox_key_id(k));
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    ck_assert_msg(strstr(c.why, "duplicate") != NULL, "%s", c.why);
    /* a byte-order mark */
    snprintf(m, sizeof m, "\xef\xbb\xbf%s", t);
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    ck_assert_msg(strstr(c.why, "not strict JSON") != NULL, "%s", c.why);
    /* a vertical tab (or any other control byte) between tokens */
    snprintf(m, sizeof m, "{\x0b%s", t + 1);
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    /* a raw newline in a string, where the receipt had the escape */
    const char *nl = strstr(t, "\\n");
    ck_assert_ptr_nonnull(nl);
    snprintf(m, sizeof m, "%.*s\n%s", (int)(nl - t), t, nl + 2);
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    /* a number with a leading zero */
    const char *zero = strstr(t, "\"swap_bytes\":0");
    ck_assert_ptr_nonnull(zero);
    size_t at = (size_t)(zero - t) + 13;
    snprintf(m, sizeof m, "%.*s0%s", (int)at, t, t + at);
    ck_assert_int_eq(check_text(m, strlen(m), k, &c), PYBOX_SIG_NOT_JSON);
    free(t);
    pybox_key_free(k);
}
END_TEST

static void strict(const char *text, size_t len, bool want, const char *why_has)
{
    char why[300] = "";
    bool got = pybox_sign_json_strict(text, len, why, sizeof why);
    ck_assert_msg(got == want, "%s: %s", text, got ? "accepted" : why);
    if (!want)
        ck_assert_msg(strstr(why, why_has) != NULL, "%s: '%s' lacks '%s'", text, why, why_has);
}
#define STRICT(t, want, has) strict(t, sizeof t - 1, want, has)

START_TEST(strict_json_each_case)
{
    STRICT("{\"a\":1}", true, "");
    STRICT(" [1, -0, 0.5e-3, true, null, \"\\u00e9\\ud83d\\ude00\"] \r\n", true, "");
    /* a member named twice, at the top, deep down, or once escaped */
    STRICT("{\"a\":1,\"a\":1}", false, "duplicate");
    STRICT("{\"x\":[{\"y\":{\"a\":1,\"b\":2,\"a\":3}}]}", false, "duplicate");
    STRICT("{\"a\":1,\"\\u0061\":1}", false, "duplicate");
    STRICT("{\"a\":{\"a\":1},\"b\":{\"a\":1}}", true, ""); /* one name in two objects */
    /* not RFC 8259 */
    STRICT("\xef\xbb\xbf{}", false, "at byte");
    STRICT("{\x0b}", false, "at byte");
    STRICT("{\"a\":\x0c"
           "1}",
           false, "at byte");
    STRICT("{\"a\":\"x\ny\"}", false, "at byte");
    STRICT("{\"a\":\"x\ty\"}", false, "control character");
    STRICT("{\"a\":00}", false, "at byte");
    STRICT("{\"a\":01}", false, "at byte");
    STRICT("{\"a\":1.}", false, "at byte");
    STRICT("{\"a\":.5}", false, "at byte");
    STRICT("{\"a\":+1}", false, "at byte");
    STRICT("{\"a\":NaN}", false, "at byte");
    STRICT("{\"a\":1,}", false, "at byte");
    STRICT("{'a':1}", false, "at byte");
    STRICT("{\"a\":1}/**/", false, "at byte");
    STRICT("{} {}", false, "at byte");
    STRICT("{\"a\":\"\\x41\"}", false, "at byte");
    /* not UTF-8, or a surrogate alone */
    STRICT("{\"a\":\"\xff\"}", false, "at byte");
    STRICT("{\"a\":\"\xc0\xaf\"}", false, "at byte");
    STRICT("{\"a\":\"\xed\xa0\x80\"}", false, "at byte");
    STRICT("{\"a\":\"\\ud800\"}", false, "at byte");
    STRICT("{\"a\":\"\\udc00x\"}", false, "at byte");
    /* NUL, raw or escaped */
    STRICT("{\"a\":\"\\u0000\"}", false, "at byte");
    strict("{\"a\":1}\0", 8, false, "at byte");
    strict("{\"a\":4\0}", 8, false, "a NUL byte, at byte 6"); /* jansson alone would take it */
    /* the words from outside are shown escaped */
    char why[300];
    ck_assert(!pybox_sign_json_strict("{\"\xc2\x9b\":1,\"\xc2\x9b\":2}", 17, why, sizeof why));
    ck_assert_ptr_null(strstr(why, "\xc2\x9b"));
}
END_TEST

START_TEST(numbers_beyond_two_to_the_53_are_refused)
{
    /* Past 2^53 a digit string and the double it reads as differ, and readers that keep
     * integers whole would see digits nobody signed. */
    pybox_key_t *k = own_key();
    cJSON *r = cJSON_Parse("{\"n\":9007199254740991}");
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_sign_receipt(r, k, &err), 0);
    char *t = cJSON_PrintUnformatted(r);
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(t, strlen(t), k, &c), PYBOX_SIG_VALID);
    free(t);
    cJSON_ReplaceItemInObjectCaseSensitive(r, "n", cJSON_CreateNumber(1e16));
    ck_assert_int_eq(pybox_sign_receipt(r, k, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "2^53"));
    char text[256];
    snprintf(text, sizeof text,
             "{\"n\":12345678901234567891,\"signature\":{\"alg\":\"Ed25519\",\"key_id\":\"%s\","
             "\"value\":\"%088d\"}}",
             pybox_key_id(k), 0);
    ck_assert_int_eq(check_text(text, strlen(text), k, &c), PYBOX_SIG_NOT_JSON);
    cJSON_Delete(r);
    pybox_key_free(k);
}
END_TEST

START_TEST(the_key_file)
{
    pybox_error_t err = {0};
    pybox_key_t *k = NULL;
    ck_assert_int_eq(pybox_key_load(&st, false, &k, &err), 0); /* none yet, none made */
    k = own_key();
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", st.dir, PYBOX_KEY_FILE);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0600);
    ck_assert_uint_eq(sb.st_uid, geteuid());
    /* the same key the next time */
    pybox_key_t *again = NULL;
    ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), 1);
    ck_assert_str_eq(pybox_key_id(again), pybox_key_id(k));
    ck_assert(pybox_key_private(again));
    pybox_key_free(again);
    /* the public half, as PEM, is a key of the same id that verifies, and cannot sign */
    pybox_buf_t pem;
    pybox_buf_init(&pem, 0);
    ck_assert_int_eq(pybox_key_public_pem(k, &pem, &err), 0);
    ck_assert_ptr_nonnull(strstr(pem.data, "-----BEGIN PUBLIC KEY-----"));
    ck_assert_ptr_null(strstr(pem.data, "PRIVATE"));
    pybox_key_t *pub = NULL;
    ck_assert_int_eq(pybox_key_from_pem(pem.data, pem.len, &pub, &err), 0);
    ck_assert_str_eq(pybox_key_id(pub), pybox_key_id(k));
    ck_assert(!pybox_key_private(pub));
    char *t = signed_text(k);
    pybox_sig_check_t c;
    ck_assert_int_eq(check_text(t, strlen(t), pub, &c), PYBOX_SIG_VALID);
    unsigned char sig[64];
    ck_assert_int_eq(pybox_key_sign(pub, "x", 1, sig, &err), -1);
    free(t);
    pybox_buf_free(&pem);
    pybox_key_free(pub);
    ck_assert_int_eq(pybox_key_from_pem("not a key", 9, &pub, &err), -1);

    /* readable by the group: refused, and said why */
    ck_assert_int_eq(chmod(path, 0640), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), -1);
    ck_assert_msg(strstr(err.msg, "group or others (mode 0640)") != NULL, "%s", err.msg);
    ck_assert_int_eq(stat(path, &sb), 0); /* and not replaced */
    ck_assert_int_eq(sb.st_mode & 07777, 0640);
    ck_assert_int_eq(chmod(path, 0600), 0);
    /* owned by another user */
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        pybox_error_clear(&err);
        ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), -1);
        ck_assert_msg(strstr(err.msg, "belongs to uid 65534") != NULL, "%s", err.msg);
        ck_assert_int_eq(chown(path, 0, 0), 0);
    }
    /* a link to a key */
    char moved[300];
    snprintf(moved, sizeof moved, "%s/elsewhere.pem", tmp_root);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(symlink(moved, path), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), -1);
    ck_assert_msg(strstr(err.msg, "symbolic link") != NULL, "%s", err.msg);
    ck_assert_int_eq(unlink(path), 0);
    /* not a key */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pybox_write_all(fd, "junk\n", 5), 0);
    close(fd);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), -1);
    ck_assert_msg(strstr(err.msg, "no PEM private key") != NULL, "%s", err.msg);
    /* a PKCS#8 key of another kind goes past the Ed25519 reader and is refused as such */
    ck_assert_int_eq(unlink(path), 0);
    EVP_PKEY *ec = EVP_EC_gen("P-256");
    ck_assert_ptr_nonnull(ec);
    FILE *f = fopen(path, "wx");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fchmod(fileno(f), 0600), 0);
    ck_assert_int_eq(PEM_write_PrivateKey(f, ec, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
    EVP_PKEY_free(ec);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_key_load(&st, true, &again, &err), -1);
    ck_assert_msg(strstr(err.msg, "not an Ed25519 key") != NULL, "%s", err.msg);
    pybox_key_free(k);
}
END_TEST

START_TEST(concurrent_first_makers_agree)
{
    enum { N = 8 };
    int fds[N][2];
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(pipe(fds[i]), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            pybox_key_t *k = NULL;
            pybox_error_t err = {0};
            int rc = pybox_key_load(&st, true, &k, &err);
            const char *id = rc == 1 ? pybox_key_id(k) : "failed";
            _exit(pybox_write_all(fds[i][1], id, strlen(id)) == 0 ? 0 : 1);
        }
        close(fds[i][1]);
    }
    char first[64] = "";
    for (int i = 0; i < N; i++) {
        char id[64] = "";
        ssize_t n = read(fds[i][0], id, sizeof id - 1);
        ck_assert_int_eq(n, PYBOX_KEY_ID_LEN);
        close(fds[i][0]);
        if (i == 0)
            memcpy(first, id, sizeof first);
        ck_assert_str_eq(id, first);
    }
    for (int i = 0; i < N; i++) {
        int status;
        ck_assert_int_gt(wait(&status), 0);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* and no temporary file left beside it */
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s | grep -c receipt-key)\" = 1", st.dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(a_key_that_cannot_be_read_leaves_the_receipt_unsigned)
{
    pybox_key_t *k = own_key();
    pybox_key_free(k);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", st.dir, PYBOX_KEY_FILE);
    ck_assert_int_eq(chmod(path, 0644), 0);
    size_t len;
    char *text = fixture(&len);
    cJSON *r = cJSON_ParseWithLength(text, len);
    cJSON *before = cJSON_Duplicate(r, 1);
    ck_assert_int_eq(pybox_sign_installation(r, &st), -1);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(r, "signature"));
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(r, "unsigned");
    ck_assert(cJSON_IsString(u));
    ck_assert_msg(strstr(u->valuestring, "the receipt could not be signed: ") == u->valuestring, "%s", u->valuestring);
    ck_assert_ptr_nonnull(strstr(u->valuestring, "mode 0644"));
    /* everything else as it was */
    cJSON_DeleteItemFromObjectCaseSensitive(r, "unsigned");
    ck_assert(cJSON_Compare(r, before, 1));
    /* readable again: signed, and the note gone */
    ck_assert_int_eq(chmod(path, 0600), 0);
    pybox_sign_mark_unsigned(r, "earlier");
    ck_assert_int_eq(pybox_sign_installation(r, &st), 0);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(r, "unsigned"));
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(r, "signature"));
    ck_assert_int_eq(pybox_sign_installation(NULL, &st), -1); /* nothing to sign: no crash */
    cJSON_Delete(r);
    cJSON_Delete(before);
    free(text);
}
END_TEST

START_TEST(a_state_without_a_key_makes_one_on_first_need)
{
    size_t len;
    char *text = fixture(&len);
    cJSON *r = cJSON_ParseWithLength(text, len);
    ck_assert_int_eq(pybox_sign_installation(r, &st), 0);
    pybox_key_t *k = NULL;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_key_load(&st, false, &k, &err), 1);
    const pybox_key_t *keys[] = {k};
    pybox_sig_check_t c;
    pybox_sign_verify(r, keys, 1, &c);
    ck_assert_int_eq(c.verdict, PYBOX_SIG_VALID);
    cJSON_Delete(r);
    free(text);
    pybox_key_free(k);
}
END_TEST

START_TEST(signed_receipts_conform_to_the_definition)
{
    pybox_key_t *k = own_key();
    char *t = signed_text(k);
    cJSON *r = cJSON_Parse(t);
    char why[512];
    ck_assert_msg(pybox_receipt_conforms(r, why, sizeof why) == 0, "%s", why);
    cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "signature");
    cJSON_ReplaceItemInObjectCaseSensitive(s, "alg", cJSON_CreateString("RS256"));
    ck_assert_int_eq(pybox_receipt_conforms(r, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "receipt.signature.alg"));
    cJSON_DeleteItemFromObjectCaseSensitive(r, "signature");
    pybox_sign_mark_unsigned(r, "no key");
    ck_assert_msg(pybox_receipt_conforms(r, why, sizeof why) == 0, "%s", why);
    cJSON_Delete(r);
    free(t);
    /* a refusal, signed */
    pybox_error_t err = {0};
    pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "refused for a test");
    r = pybox_receipt_refusal(&err);
    ck_assert_int_eq(pybox_sign_installation(r, &st), 0);
    ck_assert_msg(pybox_receipt_conforms(r, why, sizeof why) == 0, "%s", why);
    cJSON_Delete(r);
    pybox_key_free(k);
}
END_TEST

/* docs/receipt.schema.json is what the one definition makes (make schema writes it):
 * the published schema never drifts from the receipts. */
START_TEST(the_published_schema_is_the_definition)
{
    pybox_buf_t made;
    pybox_buf_init(&made, 0);
    ck_assert_int_eq(pybox_receipt_schema_text(&made), 0);
    int fd = open(PYBOX_FIXTURES "/../../docs/receipt.schema.json", O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "docs/receipt.schema.json is missing: make schema writes it");
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 1 << 20, &text, &len, &over, &err), 0);
    close(fd);
    ck_assert_msg(len == made.len && memcmp(text, made.data, len) == 0,
                  "docs/receipt.schema.json is not what pybox/receipt_schema.c makes: run make schema");
    /* its identity and version */
    cJSON *j = cJSON_Parse(text);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "$id")->valuestring, PYBOX_RECEIPT_SCHEMA_ID);
    ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItemCaseSensitive(j, "title")->valuestring, PYBOX_RECEIPT_SCHEMA));
    cJSON_Delete(j);
    free(text);
    pybox_buf_free(&made);
}
END_TEST

Suite *suite_sign(void)
{
    Suite *s = suite_create("sign");
    TCase *tc = tcase_create("receipts");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_real_receipt_signed_and_verified);
    tcase_add_test(tc, terminal_safe_json_still_verifies);
    tcase_add_test(tc, one_changed_byte_anywhere_is_refused);
    tcase_add_test(tc, each_refusal_says_why);
    tcase_add_test(tc, a_nul_character_is_refused);
    tcase_add_test(tc, lenient_json_is_not_verified);
    tcase_add_test(tc, strict_json_each_case);
    tcase_add_test(tc, numbers_beyond_two_to_the_53_are_refused);
    tcase_add_test(tc, the_key_file);
    tcase_add_test(tc, concurrent_first_makers_agree);
    tcase_add_test(tc, a_key_that_cannot_be_read_leaves_the_receipt_unsigned);
    tcase_add_test(tc, a_state_without_a_key_makes_one_on_first_need);
    tcase_add_test(tc, signed_receipts_conform_to_the_definition);
    suite_add_tcase(s, tc);
    tc = tcase_create("schema");
    tcase_add_test(tc, the_published_schema_is_the_definition);
    suite_add_tcase(s, tc);
    return s;
}
