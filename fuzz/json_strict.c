/* SPDX-License-Identifier: MIT */
/* Fuzz target, a property: the strict JSON check pybox verify runs before it reads a
 * receipt (pybox_sign_json_strict). Whatever the bytes, it answers and says why in
 * bounded, escaped words; text it accepts is valid UTF-8 with no NUL, cJSON reads it
 * whole as one value (unless nested deeper than cJSON reads), and no object in it has
 * two members of one name; pybox_sign_verify_text answers on the same bytes. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/escape.h"
#include "../pybox/sign.h"
#include "common.h"

/* Whether an object anywhere in j has two members of one name (names as read). */
static bool has_duplicate(const cJSON *j, int depth)
{
    if (depth > 2000)
        return false;
    for (const cJSON *a = j->child; a != NULL; a = a->next) {
        if (cJSON_IsObject(j))
            for (const cJSON *b = a->next; b != NULL; b = b->next)
                if (strcmp(a->string, b->string) == 0)
                    return true;
        if (has_duplicate(a, depth + 1))
            return true;
    }
    return false;
}

/* How deep arrays and objects nest, counted outside strings. */
static int nesting(const char *t, size_t len)
{
    int d = 0, most = 0;
    bool in = false;
    for (size_t i = 0; i < len; i++) {
        if (in) {
            if (t[i] == '\\')
                i++;
            else if (t[i] == '"')
                in = false;
        } else if (t[i] == '"') {
            in = true;
        } else if (t[i] == '[' || t[i] == '{') {
            most = ++d > most ? d : most;
        } else if (t[i] == ']' || t[i] == '}') {
            d--;
        }
    }
    return most;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char why[300];
    memset(why, 'x', sizeof why);
    bool ok = pybox_sign_json_strict(text, size, why, sizeof why);
    if (!ok) {
        FUZZ_CHECK(memchr(why, '\0', sizeof why) != NULL, "why is not ended");
        FUZZ_CHECK(pybox_utf8_valid(why, strlen(why)), "why is not UTF-8");
        for (const char *p = why; *p != '\0'; p++)
            FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f, "a control character in why");
    } else {
        FUZZ_CHECK(pybox_utf8_valid(text, size), "accepted text that is not UTF-8");
        FUZZ_CHECK(memchr(text, '\0', size) == NULL, "accepted a NUL byte");
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts(text, size, &end, false);
        if (j == NULL) {
            FUZZ_CHECK(nesting(text, size) > CJSON_NESTING_LIMIT, "accepted text cJSON does not read");
        } else {
            for (const char *p = end; p < text + size; p++)
                FUZZ_CHECK(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r', "accepted text after the value");
            FUZZ_CHECK(!has_duplicate(j, 0), "accepted an object with a member named twice");
            cJSON_Delete(j);
        }
    }
    pybox_sig_check_t c;
    pybox_sign_verify_text(text, size, NULL, 0, &c);
    FUZZ_CHECK(c.verdict != PYBOX_SIG_VALID, "valid with no key");
    FUZZ_CHECK(ok || c.verdict == PYBOX_SIG_NOT_JSON, "text refused as strict JSON went on to be checked");
    return 0;
}
