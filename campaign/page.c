/* SPDX-License-Identifier: MIT */
/* A record's values as the evidence pages show them (see page.h). */
#include "page.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/escape.h"
#include "../pybox/util.h"

#define CELL_MAX 240

const cJSON *ev_path(const cJSON *j, const char *path)
{
    const char *p = path;
    while (j != NULL && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char seg[128];
        if (n == 0 || n >= sizeof seg)
            return NULL;
        memcpy(seg, p, n);
        seg[n] = '\0';
        bool digits = true;
        for (size_t i = 0; i < n; i++)
            digits = digits && seg[i] >= '0' && seg[i] <= '9';
        if (cJSON_IsArray(j) && digits && n <= 6) /* at most 999999: fits an int */
            j = cJSON_GetArrayItem(j, (int)strtol(seg, NULL, 10));
        else if (cJSON_IsObject(j))
            j = cJSON_GetObjectItemCaseSensitive(j, seg);
        else
            return NULL;
        p += n;
        if (*p == '.')
            p++;
    }
    return j;
}

/* Length of the UTF-8 sequence at s (1 for a byte that does not start a valid one). */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || n > left)
        return 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    return n;
}

void ev_cell_text(pybox_buf_t *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), shown = 0;
    for (size_t i = 0; i < len;) {
        if (shown >= CELL_MAX) {
            pybox_buf_adds(b, "…");
            return;
        }
        size_t n = utf8_len(u + i, len - i);
        unsigned char c = u[i];
        if (n == 1 && c >= 0x80) {
            pybox_buf_addf(b, "\\x%02x", c);
        } else if (c == '\n') {
            if (i + 1 < len)
                pybox_buf_adds(b, " ⏎ ");
        } else if (c < 0x20 || c == 0x7f) {
            pybox_buf_addf(b, "\\x%02x", c);
        } else if (c == '<') {
            pybox_buf_adds(b, "&lt;");
        } else if (c == '>') {
            pybox_buf_adds(b, "&gt;");
        } else if (c == '&') {
            pybox_buf_adds(b, "&amp;");
        } else if (strchr("|\\*_[]`#", c) != NULL) {
            pybox_buf_addf(b, "\\%c", c);
        } else {
            pybox_buf_add(b, s + i, n);
        }
        shown += n;
        i += n;
    }
}

void ev_cell(pybox_buf_t *b, const cJSON *v)
{
    if (v == NULL || cJSON_IsNull(v)) {
        pybox_buf_adds(b, "—");
    } else if (cJSON_IsString(v)) {
        ev_cell_text(b, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        pybox_buf_adds(b, cJSON_IsTrue(v) ? "yes" : "no");
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d < 1e15 && d > -1e15 && d == (double)(long long)d) {
            pybox_buf_addf(b, "%lld", (long long)d);
        } else if (d >= 1e15 || d <= -1e15 || (d < 0.001 && d > -0.001)) {
            pybox_buf_addf(b, "%g", d);
        } else {
            /* Three decimals at most, no trailing zeros: 260.2, 0.357. */
            char t[64];
            snprintf(t, sizeof t, "%.3f", d);
            size_t n = strlen(t);
            while (n > 0 && t[n - 1] == '0')
                t[--n] = '\0';
            if (n > 0 && t[n - 1] == '.')
                t[--n] = '\0';
            pybox_buf_adds(b, t);
        }
    } else {
        char *t = cJSON_PrintUnformatted(v);
        ev_cell_text(b, t ? t : "?");
        free(t);
    }
}

ev_page_t *ev_page_add(ev_page_t **pages, size_t *n, const char *name)
{
    ev_page_t *nv = realloc(*pages, (*n + 1) * sizeof **pages);
    if (nv == NULL)
        abort();
    *pages = nv;
    ev_page_t *p = &nv[(*n)++];
    snprintf(p->name, sizeof p->name, "%s", name);
    pybox_buf_init(&p->text, 0);
    return p;
}

void ev_pages_free(ev_page_t *pages, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pybox_buf_free(&pages[i].text);
    free(pages);
}

void ev_fields(pybox_buf_t *b, void (*cell)(pybox_buf_t *, const cJSON *), const cJSON *o, const char *const *keys)
{
    for (; keys[0] != NULL; keys += 2) {
        cell(b, ev_path(o, keys[0]));
        if (keys[1] == NULL)
            break;
        pybox_buf_adds(b, keys[1]);
    }
}

const cJSON *ev_first_failed(const cJSON *list)
{
    const cJSON *x;
    cJSON_ArrayForEach (x, list)
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "ok")))
            return x;
    return NULL;
}
