/* SPDX-License-Identifier: MIT */
/* Making untrusted bytes safe to show: on a terminal (nothing can move the cursor, change
 * colours, reorder text or pass for a receipt line), and in JSON (always valid UTF-8, and
 * as safe on a terminal as the terminal receipt). */
#ifndef PYBOX_ESCAPE_H
#define PYBOX_ESCAPE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there are not one.
 * Rejects overlongs, surrogates and code points above U+10FFFF. *cp gets the code point. */
size_t pybox_utf8_seq(const unsigned char *s, size_t len, unsigned *cp);
bool pybox_utf8_valid(const void *s, size_t len);

/* How many of the first len bytes of s to keep so that at most max are kept and no
 * character is cut in two (a byte that is not UTF-8 counts as one character): text cut
 * there stays as valid as it was. */
size_t pybox_utf8_cut(const void *s, size_t len, size_t max);

/* Append a terminal-safe form of the bytes: printable text as is; backslash as "\\";
 * tab "\t", CR "\r", newline "\n" (unless keep_newlines), other C0/DEL controls as "\xNN";
 * as "\u{XXXX}": C1 controls, format characters (bidi controls among them), line and
 * paragraph separators, private use, unassigned code points and noncharacters, every
 * default-ignorable code point (by the Unicode Character Database the build read), and a
 * combining mark with no letter, digit or other shown non-ASCII character before it;
 * invalid UTF-8 bytes as "\xNN". */
int pybox_escape_terminal(pybox_buf_t *out, const void *s, size_t len, bool keep_newlines);

/* Whether the code point is a combining mark (Mn, Mc, Me): it sits on the character
 * before it, so text is never cut just before one. */
bool pybox_escape_is_mark(unsigned cp);

/* Whether the code point is a blank that looks like a space without being U+0020: a space
 * separator (Zs) by the Unicode Character Database, or U+2800 (a braille pattern with no
 * dots, a symbol that draws nothing). Shown as it is, so it cannot tell two names apart. */
bool pybox_escape_is_blank(unsigned cp);

/* A short terminal-safe form of a string for messages: its first max bytes escaped,
 * "..." when cut (by max, or by len when its escaped form does not fit: then at a
 * character's start), always valid UTF-8 and NUL-terminated in out. */
void pybox_escape_short(char *out, size_t len, const char *s, size_t max);

/* Append valid UTF-8: each byte of an invalid sequence becomes U+FFFD. Returns the number
 * of bytes replaced via *replaced. */
int pybox_utf8_sanitize(pybox_buf_t *out, const void *s, size_t len, size_t *replaced);

/* JSON that PyBox prints (a receipt, a refusal, a cleanup report, an MCP message) is
 * as safe on a terminal as the terminal receipt: json (len bytes, as a JSON writer such
 * as cJSON wrote it) is appended with every character inside its strings that
 * pybox_escape_terminal would not show as it is (control characters and DEL, C1
 * controls, format and bidi controls, line and paragraph separators, private use,
 * unassigned and default-ignorable code points, a combining mark with nothing to sit
 * on) written as the escape \uXXXX (a surrogate pair above U+FFFF). The JSON value is
 * the same: every reader gets the same strings, and a signature over it still holds. A
 * byte that is not UTF-8 inside a string becomes U+FFFD. -1 (out left failed or cut)
 * when json is not such text (a string not ended, anything but ASCII outside strings). */
int pybox_json_safe(pybox_buf_t *out, const char *json, size_t len);

/* Append j as compact JSON made safe the same way. */
int pybox_json_append(pybox_buf_t *out, const cJSON *j);

/* Make every string of a JSON tree (node, its siblings after it and all below) valid
 * UTF-8, as JSON requires: each stray byte becomes U+FFFD (pybox_utf8_sanitize). The one
 * place a receipt's strings are repaired, whatever they quote. False when memory ran out. */
bool pybox_json_utf8(cJSON *node);

/* Append base64 (standard alphabet, padded). */
int pybox_base64(pybox_buf_t *out, const void *s, size_t len);
/* The bytes of len characters of base64 (RFC 4648: standard alphabet, padded, no white
 * space, unused bits zero: only the text pybox_base64 writes for them), in *out
 * (malloc'd, *n bytes; the caller frees). Returns 0, or -1 for anything else. */
int pybox_base64_decode(const char *s, size_t len, unsigned char **out, size_t *n);

#endif
