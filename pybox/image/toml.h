/* SPDX-License-Identifier: MIT */
/* A small TOML reader for lock files (uv.lock): key/value pairs, [tables] and
 * [[arrays of tables]], one-line strings, integers, booleans, arrays and inline tables,
 * read into cJSON. Anything else is refused, never guessed. */
#ifndef PYBOX_TOML_H
#define PYBOX_TOML_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../error.h"

/* Known leniencies (harmless for reading a lock): a [table] may reopen the last table of
 * an [[array]] of that name or a table given before; integers may have leading zeros;
 * raw control characters are taken inside strings. Bounded: 32 levels, 4,096 keys per
 * table, 4,096 tables per array.
 * NULL with a PYBOX_ERR_USAGE error naming the line when the text is not what this
 * reader takes. The caller frees the result. */
cJSON *pybox_toml_parse(const char *text, size_t len, pybox_error_t *err);

#endif
