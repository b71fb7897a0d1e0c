/* SPDX-License-Identifier: MIT */
/* Fuzz target, a property: the terminal escaper (pybox_escape_terminal). Its output is
 * valid UTF-8 with no control character (but newlines when asked to keep them), no
 * invisible, format or unassigned code point, and no combining mark that does not sit on
 * a letter, digit or shown character; every printable character of the input is kept as
 * it is, and only what is not printable is escaped, so the output decodes back to the
 * input exactly. The first byte sets keep_newlines. Also: the JSON writer
 * (pybox_json_append) writes the same string back and nothing raw that the escaper
 * escapes; pybox_utf8_sanitize always
 * gives valid UTF-8 of the same length when nothing was replaced, and
 * pybox_escape_short stays within its buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../pybox/buf.h"
#include "../pybox/escape.h"
#include "common.h"
/* the same tables the escaper was built from: what is hidden is the Unicode Character
 * Database's word, not the escaper's */
#include "unicode_tables.h"

static bool in_table(const pybox_cp_range_t *r, size_t n, unsigned cp)
{
    size_t lo = 0, hi = n; /* the tables are sorted and disjoint */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static bool hidden(unsigned cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || in_table(hidden_ranges, sizeof hidden_ranges / sizeof *hidden_ranges, cp);
}

static bool mark(unsigned cp)
{
    return in_table(marks_ranges, sizeof marks_ranges / sizeof *marks_ranges, cp);
}

static bool alnum(unsigned cp)
{
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void put_utf8(pybox_buf_t *b, unsigned cp)
{
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    pybox_buf_add(b, u, n);
}

/* Walk the escaped text: each unit is a character shown as is, or an escape. Check each,
 * and decode the whole into back. */
static void walk(const unsigned char *o, size_t len, bool keep_nl, const uint8_t *in, size_t inlen, pybox_buf_t *back)
{
    bool base = false;
    for (size_t i = 0; i < len;) {
        if (o[i] == '\\') {
            FUZZ_CHECK(i + 1 < len, "a lone backslash at the end");
            char k = (char)o[i + 1];
            if (k == '\\' || k == 'n' || k == 't' || k == 'r') {
                char c = k == '\\' ? '\\' : k == 'n' ? '\n' : k == 't' ? '\t' : '\r';
                FUZZ_CHECK(!(k == 'n' && keep_nl), "a newline escaped though kept");
                pybox_buf_add(back, &c, 1);
                i += 2;
            } else if (k == 'x') {
                FUZZ_CHECK(i + 3 < len, "a cut \\x escape");
                int h = hexval((char)o[i + 2]), l = hexval((char)o[i + 3]);
                FUZZ_CHECK(h >= 0 && l >= 0, "a \\x escape without two hex digits");
                unsigned char c = (unsigned char)(h << 4 | l);
                /* \xNN: a control byte, or a byte that is not UTF-8 there */
                FUZZ_CHECK(c < 0x20 || c == 0x7f || c >= 0x80, "a printable byte 0x%02x escaped", c);
                FUZZ_CHECK(c != '\n' && c != '\t' && c != '\r', "0x%02x escaped as \\x", c);
                unsigned ignored;
                size_t at = back->len;
                FUZZ_CHECK(c < 0x80 || (at < inlen && pybox_utf8_seq(in + at, inlen - at, &ignored) == 0),
                           "a byte of valid UTF-8 escaped as \\x%02x", c);
                pybox_buf_add(back, &c, 1);
                i += 4;
            } else {
                FUZZ_CHECK(k == 'u' && i + 2 < len && o[i + 2] == '{', "an unknown escape \\%c", k);
                size_t j = i + 3;
                unsigned cp = 0;
                int digits = 0;
                while (j < len && o[j] != '}') {
                    int d = hexval((char)o[j]);
                    FUZZ_CHECK(d >= 0 && digits < 6, "a bad \\u{} escape");
                    cp = cp << 4 | (unsigned)d;
                    digits++;
                    j++;
                }
                FUZZ_CHECK(j < len && digits >= 4, "a cut \\u{} escape");
                FUZZ_CHECK(hidden(cp) || (mark(cp) && !base), "U+%04X is printable but was escaped", cp);
                put_utf8(back, cp);
                i = j + 1;
            }
            base = false;
            continue;
        }
        unsigned cp;
        size_t n = pybox_utf8_seq(o + i, len - i, &cp);
        FUZZ_CHECK(n > 0, "the output is not UTF-8 at byte %zu", i);
        if (cp == '\n') {
            FUZZ_CHECK(keep_nl, "a raw newline");
            base = false;
        } else {
            FUZZ_CHECK(cp >= 0x20 && cp != 0x7f, "a raw control character 0x%02x", cp);
            FUZZ_CHECK(!hidden(cp), "a hidden code point U+%04X shown", cp);
            FUZZ_CHECK(!mark(cp) || base, "a combining mark U+%04X with nothing to sit on", cp);
            base = cp >= 0x80 || alnum(cp) || (mark(cp) && base);
        }
        pybox_buf_add(back, o + i, n);
        i += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool keep_nl = data[0] & 1;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    pybox_buf_t out, back;
    pybox_buf_init(&out, 0);
    pybox_buf_init(&back, 0);
    FUZZ_CHECK(pybox_escape_terminal(&out, in, len, keep_nl) == 0, "the escaper failed");
    walk((const unsigned char *)out.data, out.len, keep_nl, in, len, &back);
    FUZZ_CHECK(pybox_buf_ok(&back) && back.len == len && (len == 0 || memcmp(back.data, in, len) == 0),
               "the escaped text does not decode back to the input");
    pybox_buf_free(&out);
    pybox_buf_free(&back);

    pybox_buf_t s;
    pybox_buf_init(&s, 0);
    size_t replaced = 0;
    FUZZ_CHECK(pybox_utf8_sanitize(&s, in, len, &replaced) == 0, "sanitize failed");
    FUZZ_CHECK(pybox_utf8_valid(s.data, s.len), "sanitized text that is not UTF-8");
    FUZZ_CHECK(pybox_utf8_valid(in, len) == (replaced == 0), "replacements on valid text, or none on invalid");
    if (replaced == 0)
        FUZZ_CHECK(s.len == len && (len == 0 || memcmp(s.data, in, len) == 0), "valid text changed");
    pybox_buf_free(&s);

    /* The JSON writer: the input as a string (sanitized, NUL-free, as PyBox's strings are)
     * comes back the same from any reader, and the text holds no raw character the
     * terminal escaper would escape (no hidden code point, no mark on nothing). */
    char *str = fuzz_strndup(in, len);
    pybox_buf_t u;
    pybox_buf_init(&u, 0);
    FUZZ_CHECK(pybox_utf8_sanitize(&u, str, strlen(str), NULL) == 0, "sanitize failed");
    cJSON *j = cJSON_CreateString(u.data);
    pybox_buf_t js;
    pybox_buf_init(&js, 0);
    FUZZ_CHECK(j != NULL && pybox_json_append(&js, j) == 0, "the JSON writer failed");
    cJSON *again = cJSON_ParseWithLength(js.data, js.len);
    FUZZ_CHECK(cJSON_IsString(again) && strcmp(again->valuestring, u.data) == 0, "the JSON reads back differently");
    bool base = false;
    for (size_t i = 0; i < js.len;) {
        unsigned cp;
        size_t n = pybox_utf8_seq((const unsigned char *)js.data + i, js.len - i, &cp);
        FUZZ_CHECK(n > 0, "the JSON is not UTF-8");
        FUZZ_CHECK(cp >= 0x20 && cp != 0x7f && !hidden(cp), "a raw control or hidden code point in the JSON");
        FUZZ_CHECK(!mark(cp) || base, "a raw combining mark on nothing in the JSON");
        base = cp >= 0x80 || alnum(cp);
        i += n;
    }
    cJSON_Delete(again);
    cJSON_Delete(j);
    pybox_buf_free(&js);
    pybox_buf_free(&u);
    free(str);

    char shortform[96];
    char *z = fuzz_strndup(in, len);
    pybox_escape_short(shortform, sizeof shortform, z, 40);
    FUZZ_CHECK(strnlen(shortform, sizeof shortform) < sizeof shortform, "escape_short ran over");
    free(z);
    return 0;
}
