/* SPDX-License-Identifier: MIT */
/* Escaping untrusted bytes for terminals and JSON (see escape.h). */
#include "escape.h"

#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hidden_ranges, marks_ranges, blanks_ranges: generated at build time from the Unicode Character
 * Database (scripts/gen-unicode.sh) */
#include "unicode_tables.h"

size_t pybox_utf8_seq(const unsigned char *s, size_t len, unsigned *cp)
{
    if (len == 0)
        return 0;
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        c &= 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        c &= 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        c &= 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

bool pybox_utf8_valid(const void *s, size_t len)
{
    const unsigned char *p = s;
    unsigned cp;
    for (size_t i = 0, n; i < len; i += n)
        if ((n = pybox_utf8_seq(p + i, len - i, &cp)) == 0)
            return false;
    return true;
}

size_t pybox_utf8_cut(const void *s, size_t len, size_t max)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < len) {
        unsigned cp;
        size_t n = pybox_utf8_seq(p + i, len - i, &cp);
        if (n == 0)
            n = 1;
        if (i + n > max)
            break;
        i += n;
    }
    return i;
}

static bool in_ranges(const pybox_cp_range_t *r, size_t n, unsigned cp)
{
    size_t lo = 0, hi = n;
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

/* Code points that are invisible, change how text is laid out, or have no look of their
 * own: C1 controls (also in the table, kept here whatever the table says) and the
 * generated table (controls, format characters, line and paragraph separators, private
 * use, unassigned, noncharacters and every default-ignorable code point). */
static bool is_hidden(unsigned cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || in_ranges(hidden_ranges, sizeof hidden_ranges / sizeof *hidden_ranges, cp);
}

bool pybox_escape_is_mark(unsigned cp)
{
    return in_ranges(marks_ranges, sizeof marks_ranges / sizeof *marks_ranges, cp);
}

bool pybox_escape_is_blank(unsigned cp)
{
    return cp == 0x2800 || in_ranges(blanks_ranges, sizeof blanks_ranges / sizeof *blanks_ranges, cp);
}

static bool ascii_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The escaper's one rule for a code point above ASCII: shown as it is, or escaped (a
 * hidden code point; a combining mark when what comes before it, *base, cannot carry
 * one). *base becomes whether this can carry the next mark. */
static bool shown_as_is(unsigned cp, bool *base)
{
    if (is_hidden(cp) || (pybox_escape_is_mark(cp) && !*base)) {
        *base = false;
        return false;
    }
    *base = true;
    return true;
}

int pybox_escape_terminal(pybox_buf_t *out, const void *s, size_t len, bool keep_newlines)
{
    const unsigned char *p = s;
    size_t i = 0;
    char tmp[16];
    /* Whether the last character shown as is can carry a combining mark: a letter, a digit,
     * any shown non-ASCII character, or a mark on one. A mark after anything else (the
     * start, a space, punctuation, an escape) would sit on text the program did not
     * write, or merge with it: it is escaped. */
    bool base = false;
    while (i < len) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f) {
            size_t j = i;
            while (j < len && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '\\')
                j++;
            if (j > i) {
                if (pybox_buf_append(out, p + i, j - i) < 0)
                    return -1;
                base = ascii_alnum(p[j - 1]);
                i = j;
                continue;
            }
            /* backslash */
            if (pybox_buf_puts(out, "\\\\") < 0)
                return -1;
            base = false;
            i++;
            continue;
        }
        if (c < 0x80) {
            base = false;
            const char *e = NULL;
            if (c == '\n')
                e = keep_newlines ? "\n" : "\\n";
            else if (c == '\t')
                e = "\\t";
            else if (c == '\r')
                e = "\\r";
            if (e == NULL) {
                snprintf(tmp, sizeof tmp, "\\x%02x", c);
                e = tmp;
            }
            if (pybox_buf_puts(out, e) < 0)
                return -1;
            i++;
            continue;
        }
        unsigned cp;
        size_t n = pybox_utf8_seq(p + i, len - i, &cp);
        if (n == 0) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            if (pybox_buf_puts(out, tmp) < 0)
                return -1;
            base = false;
            i++;
            continue;
        }
        if (!shown_as_is(cp, &base)) {
            snprintf(tmp, sizeof tmp, "\\u{%04x}", cp);
            if (pybox_buf_puts(out, tmp) < 0)
                return -1;
        } else if (pybox_buf_append(out, p + i, n) < 0) {
            return -1;
        }
        i += n;
    }
    if (out->data == NULL && pybox_buf_append(out, "", 0) < 0)
        return -1;
    return 0;
}

int pybox_utf8_sanitize(pybox_buf_t *out, const void *s, size_t len, size_t *replaced)
{
    const unsigned char *p = s;
    size_t i = 0, bad = 0;
    while (i < len) {
        unsigned cp;
        size_t n = pybox_utf8_seq(p + i, len - i, &cp);
        if (n == 0) {
            if (pybox_buf_append(out, "\xef\xbf\xbd", 3) < 0)
                return -1;
            bad++;
            i++;
            continue;
        }
        size_t j = i + n;
        /* copy runs of valid sequences at once */
        while (j < len && (n = pybox_utf8_seq(p + j, len - j, &cp)) != 0)
            j += n;
        if (pybox_buf_append(out, p + i, j - i) < 0)
            return -1;
        i = j;
    }
    if (out->data == NULL && pybox_buf_append(out, "", 0) < 0)
        return -1;
    if (replaced != NULL)
        *replaced = bad;
    return 0;
}

int pybox_base64(pybox_buf_t *out, const void *s, size_t len)
{
    size_t olen = 4 * ((len + 2) / 3);
    size_t start = out->len;
    /* reserve by appending placeholder bytes, then encode in place */
    for (size_t k = 0; k < olen; k += 64) {
        static const char pad[64] = {0};
        size_t chunk = olen - k < 64 ? olen - k : 64;
        if (pybox_buf_append(out, pad, chunk) < 0)
            return -1;
    }
    if (olen == 0)
        return pybox_buf_append(out, "", 0);
    int n = EVP_EncodeBlock((unsigned char *)out->data + start, s, (int)len);
    if (n < 0 || (size_t)n != olen)
        return -1;
    out->data[out->len] = '\0';
    return 0;
}

int pybox_base64_decode(const char *s, size_t len, unsigned char **out, size_t *n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (len % 4 != 0 || len > (size_t)INT_MAX)
        return -1;
    size_t pad = len >= 1 && u[len - 1] == '=' ? (len >= 2 && u[len - 2] == '=' ? 2 : 1) : 0;
    unsigned char *bin = malloc(len / 4 * 3 + 1);
    if (bin == NULL)
        return -1;
    /* libcrypto's decoder passes over white space and takes any bits the padding leaves;
     * only the text that encodes the bytes back to itself is taken: one spelling each */
    int got = len == 0 ? 0 : EVP_DecodeBlock(bin, u, (int)len);
    size_t bytes = got < 0 ? 0 : (size_t)got - pad;
    pybox_buf_t again;
    pybox_buf_init(&again, len + 1);
    bool same = got >= 0 && (size_t)got == len / 4 * 3 && pybox_base64(&again, bin, bytes) == 0 && again.len == len &&
                (len == 0 || memcmp(again.data, s, len) == 0);
    pybox_buf_free(&again);
    if (!same) {
        free(bin);
        return -1;
    }
    *out = bin;
    *n = bytes;
    return 0;
}

/* Every string of the receipt is valid UTF-8, as JSON requires (a strict client, an MCP
 * one among them, may drop a whole session over one bad byte): one that quotes bytes from
 * outside that are not (a note cut inside a character, an operator's Latin-1 path) gets
 * U+FFFD for each stray byte. False when memory ran out. */
bool pybox_json_utf8(cJSON *node)
{
    for (cJSON *c = node; c != NULL; c = c->next) {
        if (cJSON_IsString(c) && c->valuestring != NULL && !pybox_utf8_valid(c->valuestring, strlen(c->valuestring))) {
            pybox_buf_t b;
            pybox_buf_init(&b, 0);
            pybox_utf8_sanitize(&b, c->valuestring, strlen(c->valuestring), NULL);
            bool set = pybox_buf_ok(&b) && b.data != NULL && cJSON_SetValuestring(c, b.data) != NULL;
            pybox_buf_free(&b);
            if (!set)
                return false;
        }
        if (c->child != NULL && !pybox_json_utf8(c->child))
            return false;
    }
    return true;
}

void pybox_escape_short(char *out, size_t len, const char *s, size_t max)
{
    if (len == 0)
        return;
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    size_t n = strlen(s);
    pybox_escape_terminal(&b, s, n > max ? max : n, false);
    const char *e = b.data ? b.data : "";
    size_t el = strlen(e);
    bool cut = n > max;
    if (el + (cut ? 3 : 0) >= len) {
        /* out is too small for it: cut where a character starts, never inside one */
        size_t room = len > 4 ? len - 4 : 0;
        if (el > room)
            el = room;
        while (el > 0 && ((unsigned char)e[el] & 0xC0) == 0x80)
            el--;
        cut = true;
    }
    snprintf(out, len, "%.*s%s", (int)el, e, cut && len > 3 ? "..." : "");
    pybox_buf_free(&b);
}

/* \uXXXX for a code point, as a surrogate pair above U+FFFF. */
static int json_u(pybox_buf_t *out, unsigned cp)
{
    char t[16];
    if (cp < 0x10000)
        snprintf(t, sizeof t, "\\u%04x", cp);
    else
        snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
    return pybox_buf_puts(out, t);
}

int pybox_json_safe(pybox_buf_t *out, const char *json, size_t len)
{
    const unsigned char *p = (const unsigned char *)json;
    size_t i = 0;
    bool in_string = false, base = false;
    while (i < len) {
        unsigned char c = p[i];
        if (!in_string) {
            /* Between strings a JSON writer puts ASCII structure only. */
            if (c >= 0x80 || (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
                return -1;
            in_string = c == '"';
            base = false; /* a quote carries no mark */
            if (pybox_buf_append(out, p + i, 1) < 0)
                return -1;
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            /* the string's end, or an escape the writer made, kept as it is */
            size_t n = c == '"' ? 1 : i + 1 < len && p[i + 1] == 'u' ? 6 : 2;
            if (i + n > len || pybox_buf_append(out, p + i, n) < 0)
                return -1;
            in_string = c != '"';
            base = false;
            i += n;
            continue;
        }
        if (c >= 0x20 && c < 0x7f) {
            size_t j = i;
            while (j < len && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\')
                j++;
            if (pybox_buf_append(out, p + i, j - i) < 0)
                return -1;
            base = ascii_alnum(p[j - 1]);
            i = j;
            continue;
        }
        if (c < 0x80) { /* a control character or DEL: the escaper's \xNN */
            if (json_u(out, c) < 0)
                return -1;
            base = false;
            i++;
            continue;
        }
        unsigned cp;
        size_t n = pybox_utf8_seq(p + i, len - i, &cp);
        if (n == 0) { /* not UTF-8, so not JSON: U+FFFD, as the stray byte would read */
            if (pybox_buf_append(out, "\xef\xbf\xbd", 3) < 0)
                return -1;
            base = true;
            i++;
            continue;
        }
        if (shown_as_is(cp, &base) ? pybox_buf_append(out, p + i, n) < 0 : json_u(out, cp) < 0)
            return -1;
        i += n;
    }
    if (in_string)
        return -1;
    if (out->data == NULL && pybox_buf_append(out, "", 0) < 0)
        return -1;
    return 0;
}

int pybox_json_append(pybox_buf_t *out, const cJSON *j)
{
    char *text = j != NULL ? cJSON_PrintUnformatted(j) : NULL;
    if (text == NULL)
        return -1;
    int rc = pybox_json_safe(out, text, strlen(text));
    free(text);
    return rc;
}
