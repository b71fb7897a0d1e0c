/* SPDX-License-Identifier: MIT */
/* What the evidence pages (evidence.h) and the site (site.h) both read a record with: a
 * value by its path, a value as a table cell, a generated page. Below both, so neither
 * includes the other's header for these. */
#ifndef PYBOX_CAMPAIGN_PAGE_H
#define PYBOX_CAMPAIGN_PAGE_H

#include <cjson/cJSON.h>

#include "../pybox/buf.h"

#define EV_RECORDS "records"

/* A value inside a JSON document by a dotted path ("receipt.seen.box.removed");
 * a segment of digits indexes an array. NULL when absent. */
const cJSON *ev_path(const cJSON *j, const char *path);

/* Text as a Markdown table cell: escaped, on one line, cut at a bound. Appends to b. */
void ev_cell_text(pybox_buf_t *b, const char *s);

/* A value as table text: strings escaped for a Markdown cell, numbers plainly, absent
 * values as an em dash. Appends to b. */
void ev_cell(pybox_buf_t *b, const cJSON *v);

/* Values in o, each by its path (as ev_path) shown by cell (ev_cell, or a page's own) and followed by
 * its separator: path, separator, path, separator ..., NULL-ended. Appends to b. */
void ev_fields(pybox_buf_t *b, void (*cell)(pybox_buf_t *, const cJSON *), const cJSON *o, const char *const *keys);

/* The first item of a list whose "ok" is not true, NULL when none. */
const cJSON *ev_first_failed(const cJSON *list);

/* One generated page. */
typedef struct {
    char name[64];
    pybox_buf_t text;
} ev_page_t;

/* A new empty page named name at the end of *pages (which may move). */
ev_page_t *ev_page_add(ev_page_t **pages, size_t *n, const char *name);

/* The pages and their texts. */
void ev_pages_free(ev_page_t *pages, size_t n);

#endif
