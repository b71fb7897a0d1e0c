/* SPDX-License-Identifier: MIT */
/* Unit tests for escaping untrusted bytes: terminal form, UTF-8 checks, base64 (escape.h). */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../pybox/buf.h"
#include "../pybox/escape.h"
#include "suites.h"

/* Escape s (len bytes) for the terminal; the caller frees the result. Every result is
 * also checked for the property the receipt relies on: no control byte survives. */
static char *esc_n(const char *s, size_t len, bool keep_newlines)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_escape_terminal(&b, s, len, keep_newlines), 0);
    ck_assert_ptr_nonnull(b.data);
    ck_assert_uint_eq(strlen(b.data), b.len);
    for (size_t i = 0; i < b.len; i++) {
        unsigned char c = (unsigned char)b.data[i];
        ck_assert_msg(c != 0x7f && (c >= 0x20 || (keep_newlines && c == '\n')),
                      "control byte 0x%02x at %zu in the escaped form of a %zu-byte input", c, i, len);
    }
    ck_assert_msg(pybox_utf8_valid(b.data, b.len), "escaped form is not valid UTF-8");
    return b.data;
}

static char *esc(const char *s, bool keep_newlines)
{
    return esc_n(s, strlen(s), keep_newlines);
}

static void expect_esc(const char *in, bool keep, const char *want)
{
    char *got = esc(in, keep);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(escape_plain_and_backslash)
{
    expect_esc("hello, world", false, "hello, world");
    expect_esc("", false, "");
    expect_esc("a\\b", false, "a\\\\b");
    expect_esc("\\", false, "\\\\");
    /* an escaped form written by the program stays distinguishable from a real escape */
    expect_esc("\\x1b", false, "\\\\x1b");
}
END_TEST

START_TEST(escape_c0_controls)
{
    expect_esc("\x1b[2J\x1b[H", false, "\\x1b[2J\\x1b[H");
    expect_esc("\x1b]0;title\x07", false, "\\x1b]0;title\\x07");
    expect_esc("a\rb", false, "a\\rb");
    expect_esc("a\tb", false, "a\\tb");
    expect_esc("a\nb", false, "a\\nb");
    expect_esc("a\nb", true, "a\nb");
    expect_esc("a\r\nb", true, "a\\r\nb");
    expect_esc("\x7f", false, "\\x7f");
    expect_esc("\x01\x08\x0b\x0c\x1f", false, "\\x01\\x08\\x0b\\x0c\\x1f");
    char *got = esc_n("a\0b", 3, false);
    ck_assert_str_eq(got, "a\\x00b");
    free(got);
}
END_TEST

START_TEST(escape_unicode_controls)
{
    /* C1 controls: U+009B is a one-character CSI on some terminals, U+0085 a newline */
    expect_esc("\xc2\x9b"
               "2J",
               false, "\\u{009b}2J");
    expect_esc("\xc2\x85", false, "\\u{0085}");
    expect_esc("\xc2\x80\xc2\x9f", false, "\\u{0080}\\u{009f}");
    /* bidi overrides and isolates */
    expect_esc("abc\xe2\x80\xae"
               "def",
               false, "abc\\u{202e}def");
    expect_esc("\xe2\x81\xa6x\xe2\x81\xa9", false, "\\u{2066}x\\u{2069}");
    expect_esc("\xe2\x80\x8f", false, "\\u{200f}");
    /* zero-width and invisible characters */
    expect_esc("a\xe2\x80\x8b"
               "b",
               false, "a\\u{200b}b");
    expect_esc("\xe2\x81\xa0", false, "\\u{2060}");
    expect_esc("\xc2\xad", false, "\\u{00ad}");
    /* byte order mark, line and paragraph separators */
    expect_esc("\xef\xbb\xbfstart", false, "\\u{feff}start");
    expect_esc("\xe2\x80\xa8\xe2\x80\xa9", false, "\\u{2028}\\u{2029}");
    /* tag characters (invisible, used to hide text) */
    expect_esc("\xf3\xa0\x80\x81\xf3\xa0\x81\xbf", false, "\\u{e0001}\\u{e007f}");
}
END_TEST

START_TEST(escape_invalid_utf8)
{
    expect_esc("\xff", false, "\\xff");
    expect_esc("a\x80z", false, "a\\x80z");
    expect_esc("\xfe\xfe", false, "\\xfe\\xfe");
    /* overlong "/" */
    expect_esc("\xc0\xaf", false, "\\xc0\\xaf");
    expect_esc("\xe0\x80\xaf", false, "\\xe0\\x80\\xaf");
    expect_esc("\xf0\x80\x80\xaf", false, "\\xf0\\x80\\x80\\xaf");
    /* surrogates */
    expect_esc("\xed\xa0\x80", false, "\\xed\\xa0\\x80");
    expect_esc("\xed\xbf\xbf", false, "\\xed\\xbf\\xbf");
    /* above U+10FFFF */
    expect_esc("\xf4\x90\x80\x80", false, "\\xf4\\x90\\x80\\x80");
    expect_esc("\xf5\x80\x80\x80", false, "\\xf5\\x80\\x80\\x80");
    /* truncated sequences, at the end and before other text */
    expect_esc("\xe2\x82", false, "\\xe2\\x82");
    expect_esc("\xe2\x82z", false, "\\xe2\\x82z");
    expect_esc("\xf0\x9f\x98", false, "\\xf0\\x9f\\x98");
    /* a truncated lead byte does not swallow a following escape */
    expect_esc("\xe2\x1b[1m", false, "\\xe2\\x1b[1m");
    /* an encoded C1 control split across a bad byte stays escaped */
    expect_esc("\xc2\xc2\x9b", false, "\\xc2\\u{009b}");
}
END_TEST

START_TEST(escape_valid_text_unchanged)
{
    const char *t = "h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac";
    expect_esc(t, false, t);
    expect_esc("\xf0\x9f\x98\x80 emoji", false, "\xf0\x9f\x98\x80 emoji");
    expect_esc("\xef\xbf\xbd", false, "\xef\xbf\xbd"); /* U+FFFD itself is text */
    expect_esc("\xc2\xa0", false, "\xc2\xa0");         /* U+00A0 is printable */
}
END_TEST

/* The UTF-8 form of one code point into o (5 bytes at least, NUL-terminated). */
static size_t put_utf8(char *o, unsigned cp)
{
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        o[0] = (char)(0xf0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    o[n] = '\0';
    return n;
}

/* "a<cp>b" escapes to "a\u{cp}b". */
static void expect_cp_escaped(unsigned cp)
{
    char in[8], want[24], c[5];
    put_utf8(c, cp);
    snprintf(in, sizeof in, "a%sb", c);
    snprintf(want, sizeof want, "a\\u{%04x}b", cp);
    char *got = esc(in, false);
    ck_assert_msg(strcmp(got, want) == 0, "U+%04X: got %s, wanted %s", cp, got, want);
    free(got);
}

/* Invisible characters the hand-written list missed, from the Unicode Character Database:
 * format characters (Cf) and default-ignorable code points, variation selectors among them. */
START_TEST(escape_format_and_ignorable)
{
    static const unsigned ranges[][2] = {
        {0x0890, 0x0891},   {0x08e2, 0x08e2},   {0x206a, 0x206f},   {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
        {0x13430, 0x13438}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xfe00, 0xfe0f},   {0xe0100, 0xe01ef},
        {0x180b, 0x180f},   {0x034f, 0x034f},   {0x115f, 0x1160},   {0x3164, 0x3164},   {0xffa0, 0xffa0},
        {0xe0000, 0xe0fff}, {0x2065, 0x2065},   {0xfff0, 0xfffb},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++)
        for (unsigned cp = ranges[i][0]; cp <= ranges[i][1]; cp++)
            expect_cp_escaped(cp);
    /* also what moves text without being a format character: line and paragraph
     * separators; and what has no fixed look: private use, unassigned, noncharacters */
    static const unsigned others[] = {0x2028, 0x2029, 0xe000, 0xf8ff, 0xf0000,  0x10fffd, 0x0378, 0x1fffe,
                                      0xfdd0, 0xfdef, 0xfffe, 0xffff, 0x10ffff, 0x0080,   0x0085, 0x009f};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        expect_cp_escaped(others[i]);
}
END_TEST

/* A combining mark with nothing to combine with (at the start, after a space, a
 * punctuation mark, a slash or an escaped character) is escaped: on a terminal it would
 * sit on the character before it, which the program did not write. */
START_TEST(escape_stray_combining_marks)
{
    expect_esc("\xcc\x81x", false, "\\u{0301}x");
    expect_esc(" \xcc\x81", false, " \\u{0301}");
    expect_esc("dir/\xcc\x81x", false, "dir/\\u{0301}x");
    expect_esc(".\xcc\x81", false, ".\\u{0301}");
    expect_esc("\x1b\xcc\x81", false, "\\x1b\\u{0301}");
    expect_esc("\xe2\x80\x8d\xcc\x81", false, "\\u{200d}\\u{0301}");
    expect_esc("\xe2\x83\xa3", false, "\\u{20e3}"); /* an enclosing mark alone */
    /* marks on a letter, a digit or another mark are text */
    expect_esc("e\xcc\x81", false, "e\xcc\x81");
    expect_esc("e\xcc\x81\xcc\xa3", false, "e\xcc\x81\xcc\xa3");
    expect_esc("1\xe2\x83\xa3", false, "1\xe2\x83\xa3");
    expect_esc("\xc3\xa9\xcc\xa3", false, "\xc3\xa9\xcc\xa3");
    /* scripts whose vowel signs are marks */
    const char *hindi = "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
                        "\xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4\xbf\xe0\xa4\xaf\xe0\xa4\xbe";
    expect_esc(hindi, false, hindi);
    const char *thai = "\xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5";
    expect_esc(thai, false, thai);
}
END_TEST

/* General categories and default-ignorable code points, read here from the same files
 * the escaper's table is built from, by a parser of their own. */
typedef struct {
    char (*gc)[2];
    unsigned char *ignorable;
} ucd_t;

static unsigned hex_of(const char *s, char **end)
{
    unsigned long v = strtoul(s, end, 16);
    ck_assert_msg(*end != s && v <= 0x10ffff, "a code point in the database: %.20s", s);
    return (unsigned)v;
}

static void ucd_load(ucd_t *u)
{
    u->gc = malloc(0x110000 * sizeof *u->gc);
    u->ignorable = calloc(0x110000, 1);
    ck_assert(u->gc != NULL && u->ignorable != NULL);
    for (unsigned cp = 0; cp < 0x110000; cp++)
        memcpy(u->gc[cp], "Cn", 2);
    FILE *f = fopen(PYBOX_UCD_DIR "/UnicodeData.txt", "re");
    ck_assert_msg(f != NULL, "open " PYBOX_UCD_DIR "/UnicodeData.txt");
    char line[512];
    unsigned first = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *end;
        unsigned cp = hex_of(line, &end);
        const char *name = strchr(line, ';');
        ck_assert_ptr_nonnull(name);
        const char *cat = strchr(name + 1, ';');
        ck_assert_ptr_nonnull(cat);
        cat++;
        if (strstr(name, ", First>;") != NULL) {
            first = cp;
            continue;
        }
        unsigned lo = strstr(name, ", Last>;") != NULL ? first : cp;
        for (unsigned c = lo; c <= cp; c++)
            memcpy(u->gc[c], cat, 2);
    }
    fclose(f);
    f = fopen(PYBOX_UCD_DIR "/DerivedCoreProperties.txt", "re");
    ck_assert_msg(f != NULL, "open " PYBOX_UCD_DIR "/DerivedCoreProperties.txt");
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || strstr(line, "; Default_Ignorable_Code_Point ") == NULL)
            continue;
        char *end;
        unsigned lo = hex_of(line, &end), hi = lo;
        if (end[0] == '.' && end[1] == '.')
            hi = hex_of(end + 2, &end);
        for (unsigned c = lo; c <= hi; c++)
            u->ignorable[c] = 1;
        n++;
    }
    fclose(f);
    ck_assert_int_gt(n, 10);
}

/* Every code point above ASCII, alone and after a letter, against the database. */
START_TEST(escape_agrees_with_ucd)
{
    ucd_t u;
    ucd_load(&u);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    int escaped = 0, marks = 0;
    for (unsigned cp = 0x80; cp < 0x110000; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue; /* not UTF-8 at all */
        const char *g = u.gc[cp];
        bool hidden = u.ignorable[cp] || memcmp(g, "Cc", 2) == 0 || memcmp(g, "Cf", 2) == 0 ||
                      memcmp(g, "Co", 2) == 0 || memcmp(g, "Cn", 2) == 0 || memcmp(g, "Zl", 2) == 0 ||
                      memcmp(g, "Zp", 2) == 0;
        bool mark = g[0] == 'M';
        char c[5], in[8], want[24];
        size_t n = put_utf8(c, cp);
        for (int after_letter = 0; after_letter < 2; after_letter++) {
            snprintf(in, sizeof in, "%s%s", after_letter ? "a" : "", c);
            if (hidden || (mark && !after_letter))
                snprintf(want, sizeof want, "%s\\u{%04x}", after_letter ? "a" : "", cp);
            else
                snprintf(want, sizeof want, "%s", in);
            b.len = 0;
            /* asserted only when wrong: Check records every assertion that passes */
            if (pybox_escape_terminal(&b, in, n + (size_t)after_letter, false) < 0 || strcmp(b.data, want) != 0)
                ck_abort_msg("U+%04X (%.2s%s): got %s, wanted %s", cp, g, u.ignorable[cp] ? ", default-ignorable" : "",
                             b.data ? b.data : "(nothing)", want);
        }
        escaped += hidden;
        marks += mark;
    }
    /* the database was really read: thousands of format, private and unassigned code
     * points, and thousands of marks */
    ck_assert_int_gt(escaped, 100000);
    ck_assert_int_gt(marks, 2000);
    pybox_buf_free(&b);
    free(u.gc);
    free(u.ignorable);
}
END_TEST

/* Every single byte value, and a blob of every byte pair: nothing dangerous comes out. */
START_TEST(escape_all_bytes)
{
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    for (int keep = 0; keep < 2; keep++) {
        for (int i = 0; i < 256; i++)
            free(esc_n(all + i, 1, keep != 0));
        free(esc_n(all, sizeof all, keep != 0));
    }
    char *pairs = malloc(2 * 256 * 256);
    ck_assert_ptr_nonnull(pairs);
    for (int i = 0; i < 256 * 256; i++) {
        pairs[2 * i] = (char)(i >> 8);
        pairs[2 * i + 1] = (char)(i & 0xff);
    }
    free(esc_n(pairs, 2 * 256 * 256, false));
    free(esc_n(pairs, 2 * 256 * 256, true));
    free(pairs);
}
END_TEST

START_TEST(escape_respects_buffer_max)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 8);
    ck_assert_int_lt(pybox_escape_terminal(&b, "\x1b\x1b\x1b", 3, false), 0);
    ck_assert_uint_le(b.len, 8);
    pybox_buf_free(&b);
}
END_TEST

/* ---- UTF-8 validity and sanitising ---- */

START_TEST(utf8_valid_cases)
{
    ck_assert(pybox_utf8_valid("", 0));
    ck_assert(pybox_utf8_valid("ascii", 5));
    ck_assert(pybox_utf8_valid("h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5", 14));
    ck_assert(pybox_utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
    ck_assert(pybox_utf8_valid("a\0b", 3));
    ck_assert(!pybox_utf8_valid("\xc0\xaf", 2));
    ck_assert(!pybox_utf8_valid("\xed\xa0\x80", 3));
    ck_assert(!pybox_utf8_valid("\xf4\x90\x80\x80", 4));
    ck_assert(!pybox_utf8_valid("\xe2\x82", 2));
    ck_assert(!pybox_utf8_valid("ok\xff", 3));
    ck_assert(!pybox_utf8_valid("\x80", 1));
    /* the length bounds the check: a sequence cut by len is invalid */
    ck_assert(!pybox_utf8_valid("\xe2\x9c\x93", 2));
}
END_TEST

static char *sanitized(const char *s, size_t len, size_t *replaced)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    *replaced = 12345;
    ck_assert_int_eq(pybox_utf8_sanitize(&b, s, len, replaced), 0);
    ck_assert_ptr_nonnull(b.data);
    ck_assert(pybox_utf8_valid(b.data, b.len));
    return b.data;
}

/* A cut keeps whole characters only; a stray byte is one character. */
START_TEST(utf8_cut_between_characters)
{
    ck_assert_uint_eq(pybox_utf8_cut("abc", 3, 10), 3);
    ck_assert_uint_eq(pybox_utf8_cut("abc", 3, 2), 2);
    ck_assert_uint_eq(pybox_utf8_cut("a\xc3\xa9", 3, 2), 1);
    ck_assert_uint_eq(pybox_utf8_cut("a\xc3\xa9", 3, 3), 3);
    ck_assert_uint_eq(pybox_utf8_cut("\xf0\x9f\x98\x80x", 5, 3), 0);
    ck_assert_uint_eq(pybox_utf8_cut("\xff\xfe", 2, 1), 1);
    ck_assert_uint_eq(pybox_utf8_cut("", 0, 5), 0);
}
END_TEST

/* Blanks that look like U+0020 without being it, from the database's Zs, and U+2800. */
START_TEST(blanks_that_look_like_a_space)
{
    static const unsigned blank[] = {0xa0, 0x1680, 0x2000, 0x2003, 0x200a, 0x202f, 0x205f, 0x3000, 0x2800};
    static const unsigned not_blank[] = {0x20, 'a', 0x200b, 0x2028, 0x3164, 0xe9, 0x2801};
    for (size_t i = 0; i < sizeof blank / sizeof *blank; i++)
        ck_assert_msg(pybox_escape_is_blank(blank[i]), "U+%04X", blank[i]);
    for (size_t i = 0; i < sizeof not_blank / sizeof *not_blank; i++)
        ck_assert_msg(!pybox_escape_is_blank(not_blank[i]), "U+%04X", not_blank[i]);
}
END_TEST

START_TEST(utf8_sanitize_cases)
{
    size_t r;
    char *t = sanitized("", 0, &r);
    ck_assert_str_eq(t, "");
    ck_assert_uint_eq(r, 0);
    free(t);

    t = sanitized("h\xc3\xa9llo", 6, &r);
    ck_assert_str_eq(t, "h\xc3\xa9llo");
    ck_assert_uint_eq(r, 0);
    free(t);

    t = sanitized("a\xff"
                  "b",
                  3, &r);
    ck_assert_str_eq(t, "a\xef\xbf\xbd"
                        "b");
    ck_assert_uint_eq(r, 1);
    free(t);

    /* each byte of an invalid sequence is replaced */
    t = sanitized("\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82", 14, &r);
    ck_assert_str_eq(t, "\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_uint_eq(r, 11);
    free(t);

    /* a truncated sequence followed by valid text keeps the text */
    t = sanitized("\xe2\x82\xe2\x9c\x93", 5, &r);
    ck_assert_str_eq(t, "\xef\xbf\xbd\xef\xbf\xbd\xe2\x9c\x93");
    ck_assert_uint_eq(r, 2);
    free(t);

    /* replaced may be NULL */
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_utf8_sanitize(&b, "\xff", 1, NULL), 0);
    ck_assert_str_eq(b.data, "\xef\xbf\xbd");
    pybox_buf_free(&b);
}
END_TEST

START_TEST(utf8_sanitize_all_bytes)
{
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    size_t r;
    char *t = sanitized(all, sizeof all, &r);
    /* 0x00..0x7f pass; every byte from 0x80 up is a stray continuation byte or a lead
     * byte followed by another lead byte, so all 128 are replaced */
    ck_assert_uint_eq(r, 128);
    free(t);
}
END_TEST

/* ---- base64 ---- */

static void expect_b64(const char *in, const char *want)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_base64(&b, in, strlen(in)), 0);
    ck_assert_ptr_nonnull(b.data);
    ck_assert_str_eq(b.data, want);
    ck_assert_uint_eq(b.len, strlen(want));
    pybox_buf_free(&b);
}

START_TEST(base64_rfc4648)
{
    expect_b64("", "");
    expect_b64("f", "Zg==");
    expect_b64("fo", "Zm8=");
    expect_b64("foo", "Zm9v");
    expect_b64("foob", "Zm9vYg==");
    expect_b64("fooba", "Zm9vYmE=");
    expect_b64("foobar", "Zm9vYmFy");
}
END_TEST

START_TEST(base64_appends_and_binary)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_buf_puts(&b, "x="), 0);
    const unsigned char bin[] = {0x00, 0xff, 0xfe, 0x80};
    ck_assert_int_eq(pybox_base64(&b, bin, sizeof bin), 0);
    ck_assert_str_eq(b.data, "x=AP/+gA==");
    pybox_buf_free(&b);

    /* long input: output spans several internal chunks */
    char in[300];
    memset(in, 0, sizeof in);
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_base64(&b, in, sizeof in), 0);
    ck_assert_uint_eq(b.len, 400);
    ck_assert_uint_eq(strspn(b.data, "A"), 400);
    pybox_buf_free(&b);

    /* would pass the buffer's maximum: refused */
    pybox_buf_init(&b, 7);
    ck_assert_int_lt(pybox_base64(&b, "foobar", 6), 0);
    ck_assert_uint_le(b.len, 7);
    pybox_buf_free(&b);
}
END_TEST

/* ---- JSON as safe on a terminal as the terminal receipt ---- */

/* j written by pybox_json_append (NUL-terminated, caller frees). */
static char *json_of(const cJSON *j)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_json_append(&b, j), 0);
    ck_assert(pybox_buf_ok(&b));
    return pybox_buf_steal(&b);
}

/* The text read back is the value written. */
static void assert_same_value(const cJSON *j, const char *text)
{
    cJSON *back = cJSON_Parse(text);
    ck_assert_msg(back != NULL, "not JSON: %s", text);
    ck_assert_msg(cJSON_Compare(j, back, 1), "a different value: %s", text);
    cJSON_Delete(back);
}

START_TEST(json_terminal_controls_escaped)
{
    /* CSI (U+009B: the Linux console and xterm act on it even UTF-8 encoded), a C1 NEL,
     * bidi override, line separator, BOM, private use, a tag (above the BMP), DEL, ESC. */
    const char *text = "ok\xc2\x9b"
                       "2J\xc2\x85\xe2\x80\xae"
                       "evil\xe2\x80\xa8\xef\xbb\xbf\xee\x80\x80"
                       "\xf3\xa0\x80\x81\x7f\x1b[31m\\ \"q\" caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80";
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "text", text);
    char *got = json_of(j);
    ck_assert_str_eq(got, "{\"text\":\"ok\\u009b2J\\u0085\\u202eevil\\u2028\\ufeff\\ue000\\udb40\\udc01\\u007f"
                          "\\u001b[31m\\\\ \\\"q\\\" caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80\"}");
    assert_same_value(j, got);
    free(got);
    cJSON_Delete(j);
}
END_TEST

/* A combining mark is escaped where the terminal receipt escapes it: with nothing to sit
 * on (the string's opening quote, a space, an escape), never after a letter. */
START_TEST(json_stray_marks_escaped)
{
    cJSON *j = cJSON_CreateArray();
    cJSON_AddItemToArray(j, cJSON_CreateString("\xcc\x81x"));  /* at the start */
    cJSON_AddItemToArray(j, cJSON_CreateString("e\xcc\x81"));  /* on a letter */
    cJSON_AddItemToArray(j, cJSON_CreateString(" \xcc\x81"));  /* on a space */
    cJSON_AddItemToArray(j, cJSON_CreateString("\n\xcc\x81")); /* after an escape */
    char *got = json_of(j);
    ck_assert_str_eq(got, "[\"\\u0301x\",\"e\xcc\x81\",\" \\u0301\",\"\\n\\u0301\"]");
    assert_same_value(j, got);
    free(got);
    cJSON_Delete(j);
}
END_TEST

/* Every code point, after a letter and at a string's start: written raw exactly when the
 * terminal receipt shows it as it is in the same place, and read back the same. */
START_TEST(json_agrees_with_the_terminal_escaper)
{
    pybox_buf_t t, j;
    pybox_buf_init(&t, 0);
    pybox_buf_init(&j, 0);
    int raw_count = 0;
    for (unsigned cp = 1; cp <= 0x10ffff; cp++) {
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp < 0x20 || cp == '"' || cp == '\\') /* JSON's own escapes */
            continue;
        char c[5], in[8], quoted[16];
        size_t n = put_utf8(c, cp);
        for (int after_letter = 0; after_letter < 2; after_letter++) {
            snprintf(in, sizeof in, "%s%s", after_letter ? "a" : "", c);
            snprintf(quoted, sizeof quoted, "\"%s\"", in);
            t.len = 0;
            j.len = 0;
            /* asserted only when wrong: Check records every assertion that passes */
            if (pybox_escape_terminal(&t, in, n + (size_t)after_letter, false) < 0 ||
                pybox_json_safe(&j, quoted, strlen(quoted)) < 0)
                ck_abort_msg("U+%04X: not written", cp);
            bool shown = strcmp(t.data, in) == 0, raw = strcmp(j.data, quoted) == 0;
            if (raw != shown)
                ck_abort_msg("U+%04X (%s): JSON %s, terminal %s", cp, after_letter ? "after a letter" : "first", j.data,
                             t.data);
            cJSON *back = cJSON_Parse(j.data);
            if (!cJSON_IsString(back) || strcmp(back->valuestring, in) != 0)
                ck_abort_msg("U+%04X read back differently from %s", cp, j.data);
            cJSON_Delete(back);
            raw_count += raw;
        }
    }
    ck_assert_int_gt(raw_count, 100000); /* most code points are shown as they are */
    pybox_buf_free(&t);
    pybox_buf_free(&j);
}
END_TEST

START_TEST(json_bad_text_and_bad_utf8)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    /* a stray byte inside a string: U+FFFD, the JSON otherwise the same */
    ck_assert_int_eq(pybox_json_safe(&b,
                                     "[\"a\xff"
                                     "b\"]",
                                     7),
                     0);
    ck_assert_str_eq(b.data, "[\"a\xef\xbf\xbd"
                             "b\"]");
    pybox_buf_free(&b);
    /* not a JSON writer's text: a string not ended, a raw byte or control outside strings */
    static const char *const bad[] = {"[\"abc", "[\xc2\x9b]", "[\x01]", "[\"a\\", "[\"\\u00"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_buf_init(&b, 0);
        ck_assert_msg(pybox_json_safe(&b, bad[i], strlen(bad[i])) < 0, "case %zu accepted", i);
        pybox_buf_free(&b);
    }
    /* white space between tokens (a pretty writer's) is kept */
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_json_safe(&b, "{\n\t\"a\": 1\r\n}", 12), 0);
    ck_assert_str_eq(b.data, "{\n\t\"a\": 1\r\n}");
    pybox_buf_free(&b);
}
END_TEST

/* A short form that does not fit its buffer is cut where a character starts: an address
 * of many two-byte characters quoted in a refusal stayed invalid UTF-8 before. */
START_TEST(escape_short_cut_at_a_character)
{
    char in[200], out[40];
    for (int i = 0; i < 60; i++)
        memcpy(in + 2 * i, "\xc3\xa9", 2); /* U+00E9, kept as it is */
    in[120] = '\0';
    for (size_t len = 1; len <= sizeof out; len++) {
        memset(out, 'x', sizeof out);
        pybox_escape_short(out, len, in, 128);
        ck_assert_msg(strlen(out) < len, "len %zu", len);
        ck_assert_msg(pybox_utf8_valid(out, strlen(out)), "len %zu: not UTF-8", len);
        if (len > 4)
            ck_assert_msg(strstr(out, "...") != NULL, "len %zu: %s", len, out);
    }
    pybox_escape_short(out, sizeof out, "plain", 64);
    ck_assert_str_eq(out, "plain");
    pybox_escape_short(out, sizeof out, "0123456789", 4);
    ck_assert_str_eq(out, "0123...");
}
END_TEST

Suite *suite_escape(void)
{
    Suite *s = suite_create("escape");
    TCase *tc = tcase_create("terminal");
    tcase_add_test(tc, escape_plain_and_backslash);
    tcase_add_test(tc, escape_short_cut_at_a_character);
    tcase_add_test(tc, escape_c0_controls);
    tcase_add_test(tc, escape_unicode_controls);
    tcase_add_test(tc, escape_invalid_utf8);
    tcase_add_test(tc, escape_valid_text_unchanged);
    tcase_add_test(tc, escape_format_and_ignorable);
    tcase_add_test(tc, escape_stray_combining_marks);
    tcase_add_test(tc, escape_all_bytes);
    tcase_add_test(tc, escape_respects_buffer_max);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    /* every code point: slow under the sanitizers */
    tc = tcase_create("ucd");
    tcase_add_test(tc, escape_agrees_with_ucd);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("json");
    tcase_add_test(tc, json_terminal_controls_escaped);
    tcase_add_test(tc, json_stray_marks_escaped);
    tcase_add_test(tc, json_bad_text_and_bad_utf8);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    tc = tcase_create("json every code point");
    tcase_add_test(tc, json_agrees_with_the_terminal_escaper);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("utf8");
    tcase_add_test(tc, utf8_valid_cases);
    tcase_add_test(tc, utf8_sanitize_cases);
    tcase_add_test(tc, utf8_cut_between_characters);
    tcase_add_test(tc, blanks_that_look_like_a_space);
    tcase_add_test(tc, utf8_sanitize_all_bytes);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("base64");
    tcase_add_test(tc, base64_rfc4648);
    tcase_add_test(tc, base64_appends_and_binary);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
