/* SPDX-License-Identifier: MIT */
/* Charts of a run: a JSON receipt's kernel samples drawn as SVG, in three panels that
 * share the time axis (memory with its limit, processes with theirs, CPU rate with its
 * quota), the moments a clock fired and the final reading. Same receipt, same bytes.
 * Contract: docs/chart.md. */
#ifndef PYBOX_CHART_H
#define PYBOX_CHART_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "buf.h"
#include "error.h"

/* Draw the chart of a receipt (pybox.receipt/N, of a run: it has seen.kernel), appended
 * to out as one standalone SVG document. A receipt that cannot be drawn (not a receipt,
 * no kernel readings, samples that are not numbers in time order, more samples than a
 * receipt holds) is refused with PYBOX_ERR_USAGE, the first problem named; a buffer that
 * failed (its maximum, memory) with PYBOX_ERR_SYSTEM. On failure out is failed (nothing
 * half drawn is left in it). Text taken from the receipt (run id, image name, status,
 * notes) is escaped for XML; the program's output is never drawn. */
int pybox_chart_svg(const cJSON *receipt, pybox_buf_t *out, pybox_error_t *err);

/* Text for XML and HTML, in elements and quoted attributes alike: & < > " ' as
 * references; invalid UTF-8, control characters and the code points XML forbids as
 * U+FFFD (a line feed and a tab are kept when keep_lines). At most max_chars code points
 * (0: all), then "…". Appended to out. */
void pybox_xml_text(pybox_buf_t *out, const char *s, size_t max_chars, int keep_lines);

#endif
