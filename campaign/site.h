/* SPDX-License-Identifier: MIT */
/* The evidence site: static HTML and one CSS file under <evidence>/site/, rendered from
 * the Markdown pages and the records only, with a walkthrough page per recorded run
 * (its ten steps as a timeline, its receipt, its chart). Contract: docs/campaign.md. */
#ifndef PYBOX_SITE_H
#define PYBOX_SITE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "../pybox/buf.h"
#include "page.h"

#define EV_SITE "site"
#define EV_SITE_RUNS "site/runs"

/* Every page's Content-Security-Policy (a <meta http-equiv> in its head): no script of any
 * kind, the site's own style sheet and nothing else fetched, no <base>, no form. The pages
 * need nothing more: their charts are inline SVG and their bars SVG attributes, with no
 * style attribute anywhere. */
#define EV_SITE_CSP "default-src 'none'; script-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'"

/* A record as the site sees it, in the pages' order. */
typedef struct {
    const char *name; /* <sha256>.json */
    const cJSON *j;
    bool shown; /* a page cites it: its case's latest attempt, or a failed one */
} ev_site_rec_t;

/* Append the site's pages to *pages, after the Markdown pages already there (named
 * *.md): site/style.css, site/<page>.html for each Markdown page, and
 * site/runs/<run id>.html for each run with a receipt in a shown record. Returns the
 * number of problems (each listed in problems): a page that could not be made whole. */
int ev_site_render(const ev_site_rec_t *recs, size_t n_recs, ev_page_t **pages, size_t *n, pybox_buf_t *problems);

/* Markdown as the campaign writes it (headings, paragraphs, lists, tables, links, code,
 * emphasis, backslash escapes, <br>, entities) as HTML for a page in site/: links to
 * X.md go to X.html, links into records/ to ../records/. Anything else that looks like
 * markup is shown as text. */
void ev_md_html(pybox_buf_t *out, const char *md);

#endif
