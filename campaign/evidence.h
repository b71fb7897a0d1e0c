/* SPDX-License-Identifier: MIT */
/* The evidence store: replay records named by their SHA-256, and the Markdown pages
 * generated from them and nothing else. Contract: docs/campaign.md. */
#ifndef PYBOX_EVIDENCE_H
#define PYBOX_EVIDENCE_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "../pybox/buf.h"
#include "../pybox/error.h"
#include "page.h"

#define EV_SCHEMA "pybox.evidence/1"

/* Write a record (printed deterministically) as <dir>/records/<sha256>.json, through a
 * temporary file and a rename. An existing record of the same name is the same bytes
 * and is left alone: records are never overwritten. name gets "<sha256>.json". */
int ev_record_store(const char *dir, const cJSON *record, char name[80], pybox_error_t *err);

/* Read every record in <dir>/records (each checked against its name; a problem is
 * listed in problems and the record is not used) and render the pages: index.md (with
 * limits_md, the text of what is assumed and not claimed, inserted verbatim) and one
 * page per kind. Returns the number of problems, or -1 when the folder cannot be read. */
int ev_render(const char *dir, const char *limits_md, ev_page_t **pages, size_t *n, pybox_buf_t *problems);

/* Render and write the pages into dir. Returns the number of problems (listed on
 * report), -1 on failure. */
int ev_write_pages(const char *dir, const char *limits_md, FILE *report);

/* Verify the evidence folder: every record matches its fingerprint and schema, every
 * page is exactly what the records render to, and no other page is there. Returns 0
 * when all holds, else the number of problems (each listed on report). */
int ev_check(const char *dir, const char *limits_md, FILE *report);

#endif
