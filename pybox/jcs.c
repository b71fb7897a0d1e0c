/* SPDX-License-Identifier: MIT */
/* Canonical JSON by RFC 8785 over cJSON (see jcs.h). */
#include "jcs.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* ---- numbers: ECMAScript's Number.prototype.toString ---- */

/* Whether text reads back as exactly d. */
static bool reads_back(const char *text, double d)
{
    return strtod(text, NULL) == d;
}

/* The shortest decimal digits of x > 0 that read back as x: digits (no zeros at the end,
 * NUL-ended, at most 17) and the exponent n such that x = 0.DIGITS * 10^n. For each
 * precision, the correctly rounded candidate (printf's %e, exact in glibc) is the one
 * closest to x; when it does not read back and lies below x, the next one up still may
 * (the gap below a power of two is half the gap above), so it is tried too. */
static void shortest(double x, char digits[18], int *n)
{
    char t[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, x);
        /* t is "D[.DDD]e[+-]XX": the digits are t[0] and t[2..p] */
        const char *e = strchr(t, 'e');
        long exp10 = strtol(e + 1, NULL, 10);
        bool ok = reads_back(t, x);
        if (!ok && strtod(t, NULL) < x) {
            char up[40];
            memcpy(up, t, sizeof up);
            int i = p == 1 ? 0 : p; /* the last digit's index */
            for (;;) {
                if (up[i] != '9') {
                    up[i]++;
                    break;
                }
                up[i] = '0';
                if (i == 0)
                    break;
                i = i == 2 ? 0 : i - 1;
            }
            if (i == 0 && up[0] == '0') { /* 9.99e+N + 1 is 1e+(N+1) */
                snprintf(up, sizeof up, "1e%ld", exp10 + 1);
            }
            if (reads_back(up, x)) {
                memcpy(t, up, sizeof t);
                e = strchr(t, 'e');
                exp10 = strtol(e + 1, NULL, 10);
                ok = true;
            }
        }
        if (!ok)
            continue;
        size_t k = 0;
        for (const char *c = t; c < e; c++)
            if (*c >= '0' && *c <= '9')
                digits[k++] = *c;
        while (k > 1 && digits[k - 1] == '0')
            k--;
        digits[k] = '\0';
        *n = (int)exp10 + 1;
        return;
    }
    /* not reached: 17 digits always read back */
    snprintf(digits, 18, "0");
    *n = 1;
}

int pybox_jcs_number(double d, char out[PYBOX_JCS_NUMBER_MAX])
{
    if (!isfinite(d))
        return -1;
    if (d == 0) { /* -0 too */
        snprintf(out, PYBOX_JCS_NUMBER_MAX, "0");
        return 0;
    }
    char s[18];
    int n;
    shortest(fabs(d), s, &n);
    int k = (int)strlen(s);
    char *o = out;
    if (d < 0)
        *o++ = '-';
    if (k <= n && n <= 21) { /* digits, then zeros */
        memcpy(o, s, (size_t)k);
        o += k;
        memset(o, '0', (size_t)(n - k));
        o += n - k;
        *o = '\0';
    } else if (0 < n && n <= 21) { /* a point inside the digits */
        memcpy(o, s, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, s + n, (size_t)(k - n));
        o += k - n;
        *o = '\0';
    } else if (-6 < n && n <= 0) { /* 0.000ddd */
        *o++ = '0';
        *o++ = '.';
        memset(o, '0', (size_t)-n);
        o += -n;
        memcpy(o, s, (size_t)k);
        o += k;
        *o = '\0';
    } else { /* d[.ddd]e+X or e-X */
        int e = n - 1;
        *o++ = s[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, s + 1, (size_t)(k - 1));
            o += k - 1;
        }
        snprintf(o, (size_t)(PYBOX_JCS_NUMBER_MAX - (o - out)), "e%c%d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return 0;
}

/* ---- strings ---- */

static int string_append(pybox_buf_t *out, const char *s, pybox_error_t *err)
{
    size_t len = strlen(s);
    if (!pybox_utf8_valid(s, len))
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: a string is not valid UTF-8");
    pybox_buf_add(out, "\"", 1);
    size_t run = 0; /* bytes written as they are, appended together */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '\b':
            esc = "\\b";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (esc == NULL) {
            run++;
            continue;
        }
        pybox_buf_add(out, s + i - run, run);
        run = 0;
        pybox_buf_adds(out, esc);
    }
    pybox_buf_add(out, s + len - run, run);
    pybox_buf_add(out, "\"", 1);
    return 0;
}

/* ---- objects: members by their names' UTF-16 code units ---- */

typedef struct {
    const cJSON *item;
    uint16_t *units;
    size_t n;
} member_t;

static int to_utf16(const char *s, member_t *m)
{
    size_t len = strlen(s);
    m->units = malloc((len + 1) * sizeof *m->units); /* never more units than bytes */
    if (m->units == NULL)
        return -1;
    m->n = 0;
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t b = pybox_utf8_seq((const unsigned char *)s + i, len - i, &cp);
        if (b == 0)
            return -1;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            m->units[m->n++] = (uint16_t)(0xd800 + (cp >> 10));
            m->units[m->n++] = (uint16_t)(0xdc00 + (cp & 0x3ff));
        } else {
            m->units[m->n++] = (uint16_t)cp;
        }
        i += b;
    }
    return 0;
}

static int by_units(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    for (size_t i = 0; i < n; i++)
        if (x->units[i] != y->units[i])
            return x->units[i] < y->units[i] ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n ? 1 : 0;
}

static int value_append(pybox_buf_t *out, const cJSON *v, const char *skip, int depth, pybox_error_t *err);

static int object_append(pybox_buf_t *out, const cJSON *v, const char *skip, int depth, pybox_error_t *err)
{
    size_t count = 0;
    for (const cJSON *c = v->child; c != NULL; c = c->next)
        count++;
    member_t *m = calloc(count ? count : 1, sizeof *m);
    if (m == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "canonical JSON: out of memory");
    int rc = 0;
    size_t n = 0;
    for (const cJSON *c = v->child; c != NULL && rc == 0; c = c->next) {
        if (c->string == NULL) {
            rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: a member has no name");
            break;
        }
        if (skip != NULL && strcmp(c->string, skip) == 0)
            continue;
        m[n].item = c;
        if (to_utf16(c->string, &m[n++]) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: a member's name is not valid UTF-8");
    }
    if (rc == 0)
        qsort(m, n, sizeof *m, by_units);
    for (size_t i = 1; rc == 0 && i < n; i++) {
        if (by_units(&m[i - 1], &m[i]) == 0) {
            char shown[80];
            pybox_escape_short(shown, sizeof shown, m[i].item->string, 32);
            rc = pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: two members named \"%s\"", shown);
        }
    }
    if (rc == 0) {
        pybox_buf_add(out, "{", 1);
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (i > 0)
                pybox_buf_add(out, ",", 1);
            rc = string_append(out, m[i].item->string, err);
            pybox_buf_add(out, ":", 1);
            if (rc == 0)
                rc = value_append(out, m[i].item, NULL, depth + 1, err);
        }
        pybox_buf_add(out, "}", 1);
    }
    for (size_t i = 0; i < n; i++)
        free(m[i].units);
    free(m);
    return rc;
}

/* Deeper than any receipt, and than cJSON reads (CJSON_NESTING_LIMIT). */
#define JCS_DEPTH_MAX 1000

static int value_append(pybox_buf_t *out, const cJSON *v, const char *skip, int depth, pybox_error_t *err)
{
    if (depth > JCS_DEPTH_MAX)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: nested deeper than %d", JCS_DEPTH_MAX);
    char num[PYBOX_JCS_NUMBER_MAX];
    switch (v->type & 0xff) {
    case cJSON_NULL:
        pybox_buf_adds(out, "null");
        return 0;
    case cJSON_True:
        pybox_buf_adds(out, "true");
        return 0;
    case cJSON_False:
        pybox_buf_adds(out, "false");
        return 0;
    case cJSON_Number:
        if (pybox_jcs_number(v->valuedouble, num) < 0)
            return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: a number that is not finite");
        pybox_buf_adds(out, num);
        return 0;
    case cJSON_String:
        return string_append(out, v->valuestring ? v->valuestring : "", err);
    case cJSON_Array: {
        pybox_buf_add(out, "[", 1);
        for (const cJSON *c = v->child; c != NULL; c = c->next) {
            if (c != v->child)
                pybox_buf_add(out, ",", 1);
            if (value_append(out, c, NULL, depth + 1, err) < 0)
                return -1;
        }
        pybox_buf_add(out, "]", 1);
        return 0;
    }
    case cJSON_Object:
        return object_append(out, v, skip, depth, err);
    default: /* cJSON_Raw, cJSON_Invalid: made by a writer, never read from JSON */
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: a value that is not JSON");
    }
}

int pybox_jcs_append(pybox_buf_t *out, const cJSON *v, const char *skip, pybox_error_t *err)
{
    if (v == NULL)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "canonical JSON: no value");
    if (value_append(out, v, skip, 0, err) < 0)
        return -1;
    if (!pybox_buf_ok(out))
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "canonical JSON: larger than %zu bytes", out->max);
    return 0;
}
