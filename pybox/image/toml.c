/* SPDX-License-Identifier: MIT */
/* A small TOML reader for lock files (see toml.h): enough of TOML for uv.lock, strict
 * about everything it accepts, bounded in depth and size. */
#include "toml.h"

#include <stdbool.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../buf.h"
#include "../escape.h"
#include "../util.h"

#define TOML_DEPTH_MAX 32
#define TOML_KEYS_MAX 4096 /* per table: lookups are linear */

typedef struct {
    const char *p, *end;
    int line;
    pybox_error_t *err;
} reader_t;

static int fail(reader_t *r, const char *what)
{
    return pybox_error_set(r->err, PYBOX_ERR_USAGE, 0, "lock file line %d: %s", r->line, what);
}

/* Skip spaces, tabs, comments; newlines too when nl. */
static void skip(reader_t *r, bool nl)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == ' ' || c == '\t' || c == '\r') {
            r->p++;
        } else if (c == '#') {
            while (r->p < r->end && *r->p != '\n')
                r->p++;
        } else if (c == '\n' && nl) {
            r->line++;
            r->p++;
        } else {
            break;
        }
    }
}

/* Whether c comes next; taken when it does. */
static bool eat(reader_t *r, char c)
{
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

static int put_utf8(pybox_buf_t *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return pybox_buf_append(b, u, n);
}

/* "basic" or 'literal', one line. */
static int read_string(reader_t *r, pybox_buf_t *out)
{
    char q = *r->p++;
    while (r->p < r->end && *r->p != q) {
        char c = *r->p++;
        if (c == '\n')
            return fail(r, "a string does not end on its line");
        if (q == '"' && c == '\\') {
            if (r->p >= r->end)
                return fail(r, "a string ends in an escape");
            char e = *r->p++;
            const char *simple = NULL;
            switch (e) {
            case 'n':
                simple = "\n";
                break;
            case 't':
                simple = "\t";
                break;
            case 'r':
                simple = "\r";
                break;
            case '"':
                simple = "\"";
                break;
            case '\\':
                simple = "\\";
                break;
            case 'u':
            case 'U': {
                int digits = e == 'u' ? 4 : 8;
                unsigned cp = 0;
                for (int i = 0; i < digits; i++) {
                    int h = r->p < r->end ? pybox_hex_value(*r->p) : -1;
                    if (h < 0)
                        return fail(r, "a bad \\u escape");
                    cp = cp * 16 + (unsigned)h;
                    r->p++;
                }
                if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || put_utf8(out, cp) < 0)
                    return fail(r, "a bad \\u escape");
                continue;
            }
            default:
                return fail(r, "an unknown escape in a string");
            }
            if (pybox_buf_puts(out, simple) < 0)
                return fail(r, "a string too long");
            continue;
        }
        if (pybox_buf_append(out, &c, 1) < 0)
            return fail(r, "a string too long");
    }
    if (r->p >= r->end)
        return fail(r, "a string does not end");
    r->p++;
    if (out->data == NULL && pybox_buf_append(out, "", 0) < 0)
        return -1;
    if (!pybox_utf8_valid(out->data, out->len) || memchr(out->data, 0, out->len) != NULL)
        return fail(r, "a string is not UTF-8 text");
    return 0;
}

static int read_key(reader_t *r, pybox_buf_t *out)
{
    skip(r, false);
    if (r->p < r->end && (*r->p == '"' || *r->p == '\''))
        return read_string(r, out);
    const char *s = r->p;
    while (r->p < r->end && ((*r->p >= 'a' && *r->p <= 'z') || (*r->p >= 'A' && *r->p <= 'Z') ||
                             (*r->p >= '0' && *r->p <= '9') || *r->p == '_' || *r->p == '-'))
        r->p++;
    if (r->p == s)
        return fail(r, "a key was expected");
    return pybox_buf_append(out, s, (size_t)(r->p - s)) < 0 ? fail(r, "a key too long") : 0;
}

static cJSON *read_value(reader_t *r, int depth);

/* After an item of an inline table or array (newlines skipped too when nl): 1 when a ','
 * follows (another item may come), 0 when close ends it, -1 (failed) when neither. */
static int item_end(reader_t *r, bool nl, char close)
{
    skip(r, nl);
    if (eat(r, ','))
        return 1;
    if (eat(r, close))
        return 0;
    return fail(r, close == '}' ? "',' or '}' was expected" : "',' or ']' was expected");
}

/* A key = value of an inline table, into t. 0, or -1 (failed). */
static int table_item(reader_t *r, int depth, cJSON *t)
{
    pybox_buf_t key;
    pybox_buf_init(&key, 1024);
    if (read_key(r, &key) < 0) {
        pybox_buf_free(&key);
        return -1;
    }
    skip(r, false);
    if (r->p >= r->end || *r->p != '=') {
        pybox_buf_free(&key);
        return fail(r, "'=' was expected");
    }
    r->p++;
    cJSON *v = read_value(r, depth + 1);
    if (v == NULL || cJSON_GetObjectItemCaseSensitive(t, key.data) != NULL) {
        if (v != NULL)
            fail(r, "a key is given twice");
        cJSON_Delete(v);
        pybox_buf_free(&key);
        return -1;
    }
    if (cJSON_GetArraySize(t) >= TOML_KEYS_MAX) {
        cJSON_Delete(v);
        pybox_buf_free(&key);
        return fail(r, "a table has too many keys");
    }
    cJSON_AddItemToObject(t, key.data, v);
    pybox_buf_free(&key);
    return 0;
}

/* A value of an array, into a. 0, or -1 (failed). */
static int array_item(reader_t *r, int depth, cJSON *a)
{
    cJSON *v = read_value(r, depth + 1);
    if (v == NULL)
        return -1;
    cJSON_AddItemToArray(a, v);
    return 0;
}

/* An inline table ({...}) or an array ([...]), its opening bracket next: items read into
 * c by item, separated by ',' up to close. An array may span lines and end in a ','; an
 * inline table does neither. c, or NULL (c freed) on failure. */
static cJSON *read_list(reader_t *r, int depth, cJSON *c, char close, int (*item)(reader_t *, int, cJSON *))
{
    bool array = close == ']';
    r->p++;
    skip(r, array);
    if (eat(r, close))
        return c;
    for (;;) {
        if (item(r, depth, c) < 0)
            break;
        int more = item_end(r, array, close);
        if (more == 0)
            return c;
        if (more < 0)
            break;
        if (array) {
            skip(r, true);
            if (eat(r, close))
                return c;
        }
    }
    cJSON_Delete(c);
    return NULL;
}

static cJSON *read_value(reader_t *r, int depth)
{
    if (depth > TOML_DEPTH_MAX) {
        fail(r, "values nested too deep");
        return NULL;
    }
    skip(r, false);
    if (r->p >= r->end) {
        fail(r, "a value was expected");
        return NULL;
    }
    char c = *r->p;
    if (c == '"' || c == '\'') {
        if (r->p + 2 < r->end && r->p[1] == c && r->p[2] == c) {
            fail(r, "multi-line strings are not supported");
            return NULL;
        }
        pybox_buf_t s;
        pybox_buf_init(&s, 1024 * 1024);
        cJSON *v = read_string(r, &s) == 0 ? cJSON_CreateString(s.data) : NULL;
        pybox_buf_free(&s);
        return v;
    }
    if (c == '{')
        return read_list(r, depth, cJSON_CreateObject(), '}', table_item);
    if (c == '[')
        return read_list(r, depth, cJSON_CreateArray(), ']', array_item);
    if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
        r->p += 4;
        return cJSON_CreateTrue();
    }
    if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
        r->p += 5;
        return cJSON_CreateFalse();
    }
    if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        const char *s = r->p;
        if (c == '-' || c == '+')
            r->p++;
        while (r->p < r->end && ((*r->p >= '0' && *r->p <= '9') || *r->p == '_'))
            r->p++;
        char num[32];
        size_t n = 0;
        bool cut = false;
        for (const char *q = s; q < r->p; q++) {
            if (*q == '_')
                continue;
            if (n + 1 >= sizeof num) {
                cut = true; /* never read fewer digits than were written */
                break;
            }
            num[n++] = *q;
        }
        num[n] = '\0';
        char *endp;
        errno = 0;
        long long v = strtoll(num, &endp, 10);
        /* Past 2^53 a cJSON number (a double) would not hold the value exactly. */
        if (cut || errno != 0 || *endp != '\0' || n == 0 || v > (1LL << 53) || v < -(1LL << 53)) {
            fail(r, "a number out of range");
            return NULL;
        }
        return cJSON_CreateNumber((double)v);
    }
    fail(r, "a value of a kind this reader does not take");
    return NULL;
}

/* The object a dotted header names, made as needed; [[x]] appends to the array x. */
static cJSON *header(reader_t *r, cJSON *root, bool array)
{
    cJSON *cur = root;
    for (int parts = 0;; parts++) {
        if (parts >= TOML_DEPTH_MAX) {
            fail(r, "a table header has too many parts");
            return NULL;
        }
        pybox_buf_t key;
        pybox_buf_init(&key, 1024);
        if (read_key(r, &key) < 0) {
            pybox_buf_free(&key);
            return NULL;
        }
        skip(r, false);
        bool last = r->p < r->end && *r->p == ']';
        cJSON *next = cJSON_GetObjectItemCaseSensitive(cur, key.data);
        if (last && array) {
            if (next == NULL)
                next = cJSON_AddArrayToObject(cur, key.data);
            if (!cJSON_IsArray(next)) {
                pybox_buf_free(&key);
                fail(r, "a table header names a value that is not an array of tables");
                return NULL;
            }
            if (cJSON_GetArraySize(next) >= TOML_KEYS_MAX) {
                pybox_buf_free(&key);
                fail(r, "an array of tables has too many tables");
                return NULL;
            }
            cJSON *t = cJSON_CreateObject();
            cJSON_AddItemToArray(next, t);
            pybox_buf_free(&key);
            return t;
        }
        if (next == NULL)
            next = cJSON_AddObjectToObject(cur, key.data);
        else if (cJSON_IsArray(next))
            next = cJSON_GetArrayItem(next, cJSON_GetArraySize(next) - 1); /* [a.b] after [[a]] */
        pybox_buf_free(&key);
        if (!cJSON_IsObject(next)) {
            fail(r, "a table header names a value that is not a table");
            return NULL;
        }
        cur = next;
        if (last)
            return cur;
        if (r->p >= r->end || *r->p != '.') {
            fail(r, "'.' or ']' was expected in a table header");
            return NULL;
        }
        r->p++;
    }
}

cJSON *pybox_toml_parse(const char *text, size_t len, pybox_error_t *err)
{
    reader_t r = {.p = text, .end = text + len, .line = 1, .err = err};
    if (memchr(text, 0, len) != NULL) {
        fail(&r, "the file holds a NUL byte");
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *table = root;
    for (;;) {
        skip(&r, true);
        if (r.p >= r.end)
            return root;
        if (*r.p == '[') {
            bool array = r.p + 1 < r.end && r.p[1] == '[';
            r.p += array ? 2 : 1;
            table = header(&r, root, array);
            if (table == NULL)
                break;
            if (r.end - r.p < (array ? 2 : 1) || *r.p != ']' || (array && r.p[1] != ']')) {
                fail(&r, "a table header does not end");
                break;
            }
            r.p += array ? 2 : 1;
        } else {
            pybox_buf_t key;
            pybox_buf_init(&key, 1024);
            if (read_key(&r, &key) < 0) {
                pybox_buf_free(&key);
                break;
            }
            skip(&r, false);
            if (r.p >= r.end || *r.p != '=') {
                pybox_buf_free(&key);
                fail(&r, "'=' was expected");
                break;
            }
            r.p++;
            cJSON *v = read_value(&r, 0);
            if (v == NULL || cJSON_GetObjectItemCaseSensitive(table, key.data) != NULL) {
                if (v != NULL)
                    fail(&r, "a key is given twice");
                cJSON_Delete(v);
                pybox_buf_free(&key);
                break;
            }
            if (cJSON_GetArraySize(table) >= TOML_KEYS_MAX) {
                cJSON_Delete(v);
                pybox_buf_free(&key);
                fail(&r, "a table has too many keys");
                break;
            }
            cJSON_AddItemToObject(table, key.data, v);
            pybox_buf_free(&key);
        }
        skip(&r, false);
        if (r.p < r.end && *r.p != '\n') {
            fail(&r, "the line goes on after its value");
            break;
        }
    }
    cJSON_Delete(root);
    return NULL;
}
