/* SPDX-License-Identifier: MIT */
/* Unit tests for the lock file reader (toml.h): what it reads, what it refuses, and no crash on cut input. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/buf.h"
#include "../pybox/image/toml.h"
#include "suites.h"

/* A uv.lock as uv writes it, with the parts of TOML it uses. */
static const char LOCK[] =
    "version = 1\n"
    "revision = 2\n"
    "requires-python = \">=3.11\"\n"
    "\n"
    "[manifest]\n"
    "members = [\"demo\"]\n"
    "\n"
    "[[package]]\n"
    "name = \"certifi\"\n"
    "version = \"2024.8.30\"\n"
    "source = { registry = \"https://pypi.org/simple\" }\n"
    "sdist = { url = \"https://files.example/certifi-2024.8.30.tar.gz\", hash = "
    "\"sha256:bec941d2aa8195e248a60b31ff9f0558284cf01a52591ceda73ea9afffd69fd9\", size = 168507, upload-time = "
    "\"2024-08-30T01:55:04.365Z\" }\n"
    "wheels = [\n"
    "    # the one wheel there is\n"
    "    { url = \"https://files.example/certifi-2024.8.30-py3-none-any.whl\", hash = "
    "\"sha256:922820b53db7a7257ffbda3f597266d435245903d80737e34f8a45ff3e3230d8\", size = 167321 }, # trailing\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"demo\"\n"
    "version = \"0.1.0\"\n"
    "source = { virtual = \".\" }\n"
    "dependencies = [\n"
    "    { name = \"certifi\" },\n"
    "    { name = \"requests\", extra = [\"socks\"] },\n"
    "]\n"
    "\n"
    "[package.optional-dependencies]\n"
    "socks = [\n"
    "    { name = \"pysocks\" },\n"
    "]\n"
    "\n"
    "[package.metadata]\n"
    "requires-dist = [\n"
    "    { name = \"certifi\", specifier = \">=2024\" },\n"
    "    { name = \"requests\", extras = [\"socks\"], marker = \"python_full_version < '3.12'\", specifier = "
    "\">=2.32\" },\n"
    "]\n"
    "provides-extras = [\"socks\"]\n"
    "\n"
    "[package.metadata.requires-dev]\n"
    "dev = []\n";

static const char LOCK_JSON[] =
    "{\"version\": 1, \"revision\": 2, \"requires-python\": \">=3.11\","
    " \"manifest\": {\"members\": [\"demo\"]},"
    " \"package\": ["
    "  {\"name\": \"certifi\", \"version\": \"2024.8.30\","
    "   \"source\": {\"registry\": \"https://pypi.org/simple\"},"
    "   \"sdist\": {\"url\": \"https://files.example/certifi-2024.8.30.tar.gz\","
    "     \"hash\": \"sha256:bec941d2aa8195e248a60b31ff9f0558284cf01a52591ceda73ea9afffd69fd9\","
    "     \"size\": 168507, \"upload-time\": \"2024-08-30T01:55:04.365Z\"},"
    "   \"wheels\": [{\"url\": \"https://files.example/certifi-2024.8.30-py3-none-any.whl\","
    "     \"hash\": \"sha256:922820b53db7a7257ffbda3f597266d435245903d80737e34f8a45ff3e3230d8\", \"size\": 167321}]},"
    "  {\"name\": \"demo\", \"version\": \"0.1.0\", \"source\": {\"virtual\": \".\"},"
    "   \"dependencies\": [{\"name\": \"certifi\"}, {\"name\": \"requests\", \"extra\": [\"socks\"]}],"
    "   \"optional-dependencies\": {\"socks\": [{\"name\": \"pysocks\"}]},"
    "   \"metadata\": {\"requires-dist\": [{\"name\": \"certifi\", \"specifier\": \">=2024\"},"
    "       {\"name\": \"requests\", \"extras\": [\"socks\"], \"marker\": \"python_full_version < '3.12'\","
    "        \"specifier\": \">=2.32\"}],"
    "     \"provides-extras\": [\"socks\"], \"requires-dev\": {\"dev\": []}}}"
    " ]}";

/* Parse exactly len bytes from a heap copy of their own, so that a read past the end is
 * seen by the sanitizers. */
static cJSON *parse_n(const char *text, size_t len, pybox_error_t *err)
{
    char *copy = malloc(len > 0 ? len : 1);
    ck_assert_ptr_nonnull(copy);
    if (len > 0)
        memcpy(copy, text, len);
    memset(err, 0, sizeof *err);
    cJSON *doc = pybox_toml_parse(copy, len, err);
    free(copy);
    return doc;
}

static cJSON *parse(const char *text, pybox_error_t *err)
{
    return parse_n(text, strlen(text), err);
}

/* The text reads as the given JSON, exactly. */
static void assert_reads_as(const char *text, const char *json)
{
    pybox_error_t err;
    cJSON *doc = parse(text, &err);
    ck_assert_msg(doc != NULL, "refused: %s", err.msg);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
    cJSON *want = cJSON_Parse(json);
    ck_assert_msg(want != NULL, "bad expected JSON: %s", json);
    char *got = cJSON_PrintUnformatted(doc);
    ck_assert_msg(cJSON_Compare(doc, want, true), "read as %s", got);
    free(got);
    cJSON_Delete(want);
    cJSON_Delete(doc);
}

/* The text is refused as a usage error naming the line and saying why. */
static void assert_refused_n(const char *text, size_t len, int line, const char *why)
{
    pybox_error_t err;
    cJSON *doc = parse_n(text, len, &err);
    char *got = doc ? cJSON_PrintUnformatted(doc) : NULL;
    ck_assert_msg(doc == NULL, "accepted as %s", got ? got : "?");
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    char at[48];
    snprintf(at, sizeof at, "lock file line %d: ", line);
    ck_assert_msg(strstr(err.msg, at) != NULL, "message '%s' does not name line %d", err.msg, line);
    ck_assert_msg(strstr(err.msg, why) != NULL, "message '%s' does not say '%s'", err.msg, why);
}

static void assert_refused(const char *text, int line, const char *why)
{
    assert_refused_n(text, strlen(text), line, why);
}

START_TEST(toml_uv_lock)
{
    assert_reads_as(LOCK, LOCK_JSON);
}
END_TEST

START_TEST(toml_uv_lock_lookups)
{
    pybox_error_t err;
    cJSON *doc = parse(LOCK, &err);
    ck_assert_ptr_nonnull(doc);
    const cJSON *pkgs = cJSON_GetObjectItemCaseSensitive(doc, "package");
    ck_assert(cJSON_IsArray(pkgs));
    ck_assert_int_eq(cJSON_GetArraySize(pkgs), 2);
    /* [package.*] after the second [[package]] belongs to it, not to the first. */
    const cJSON *first = cJSON_GetArrayItem(pkgs, 0), *second = cJSON_GetArrayItem(pkgs, 1);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(first, "metadata"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(first, "optional-dependencies"));
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(second, "metadata"));
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(first, "wheels"), 0), "size");
    ck_assert(cJSON_IsNumber(size));
    ck_assert_int_eq(size->valueint, 167321);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(toml_strings)
{
    assert_reads_as("a = \"q\\\"b\\\\s\\nn\\tt\\r\\u00e9\\U0001F600\\u0041\"\n",
                    "{\"a\": \"q\\\"b\\\\s\\nn\\tt\\r\\u00e9\\ud83d\\ude00A\"}");
    /* Literal strings keep backslashes; a '#' inside a string is not a comment. */
    assert_reads_as("a = 'C:\\path\\no \"escape\" # here' # a comment\nb = \"x # y\"\nc = ''\nd = \"\"\n",
                    "{\"a\": \"C:\\\\path\\\\no \\\"escape\\\" # here\", \"b\": \"x # y\", \"c\": \"\", \"d\": \"\"}");
    /* UTF-8 as is. */
    assert_reads_as("a = \"caf\xc3\xa9 \xe2\x82\xac\"\n", "{\"a\": \"caf\\u00e9 \\u20ac\"}");
    assert_reads_as("a = \"\\u007f\\U0010FFFF\"", "{\"a\": \"\\u007f\\udbff\\udfff\"}");
}
END_TEST

START_TEST(toml_keys)
{
    assert_reads_as("bare_key-1 = 1\n\"quoted key\" = 2\n'lit.key' = 3\n\"a.b\" = 4\n1234 = 5\n\"\\u00e9\" = 6\n",
                    "{\"bare_key-1\": 1, \"quoted key\": 2, \"lit.key\": 3, \"a.b\": 4, \"1234\": 5, \"\\u00e9\": 6}");
    assert_reads_as("[ \"t x\" . 'y' ]\nk = 1\n[[ arr ]]\n[[arr]]\nk = 2\n",
                    "{\"t x\": {\"y\": {\"k\": 1}}, \"arr\": [{}, {\"k\": 2}]}");
    /* Keys are case-sensitive. */
    assert_reads_as("k = 1\nK = 2\n", "{\"k\": 1, \"K\": 2}");
}
END_TEST

START_TEST(toml_numbers_and_booleans)
{
    assert_reads_as("a = 1_000_000\nb = -42\nc = +7\nd = 0\ne = -0\nf = 9007199254740992\ng = -9007199254740992\n"
                    "t = true\nu = false\n",
                    "{\"a\": 1000000, \"b\": -42, \"c\": 7, \"d\": 0, \"e\": 0, \"f\": 9007199254740992,"
                    " \"g\": -9007199254740992, \"t\": true, \"u\": false}");
    pybox_error_t err;
    cJSON *doc = parse("n = -123456789\nb = true\n", &err);
    ck_assert_ptr_nonnull(doc);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "n");
    ck_assert(cJSON_IsNumber(n));
    ck_assert(n->valuedouble == -123456789.0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "b")));
    cJSON_Delete(doc);
}
END_TEST

START_TEST(toml_arrays_and_tables)
{
    assert_reads_as("e = []\nf = {}\ng = [ ]\nh = { }\n"
                    "n = [[1, 2], [\"a\", ['b']], [], [[[]]]]\n"
                    "m = [ { x = 1, y = { z = [true] } }, {} ]\n"
                    "w = [\n  1, # one\n\n  2,\n  # nothing\n]\n"
                    "[empty]\n"
                    "[a.b.c]\n"
                    "k = 'v'\n"
                    "[a.d] # a comment\n"
                    "[[list]]\n"
                    "[list.sub]\n"
                    "x = 1\n",
                    "{\"e\": [], \"f\": {}, \"g\": [], \"h\": {},"
                    " \"n\": [[1, 2], [\"a\", [\"b\"]], [], [[[]]]],"
                    " \"m\": [{\"x\": 1, \"y\": {\"z\": [true]}}, {}],"
                    " \"w\": [1, 2],"
                    " \"empty\": {}, \"a\": {\"b\": {\"c\": {\"k\": \"v\"}}, \"d\": {}},"
                    " \"list\": [{\"sub\": {\"x\": 1}}]}");
    /* CRLF line ends, no final newline, an empty document. */
    assert_reads_as("a = 1\r\nb = [\r\n 2,\r\n]\r\n[t]\r\nc = 'x'", "{\"a\": 1, \"b\": [2], \"t\": {\"c\": \"x\"}}");
    assert_reads_as("", "{}");
    assert_reads_as("# only a comment\n\n   \n", "{}");
}
END_TEST

START_TEST(toml_depth)
{
    /* Deep enough for any lock, and bounded. */
    char text[256];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "a = ");
    for (int i = 0; i < 30; i++)
        text[n++] = '[';
    for (int i = 0; i < 30; i++)
        text[n++] = ']';
    text[n] = '\0';
    pybox_error_t err;
    cJSON *doc = parse(text, &err);
    ck_assert_msg(doc != NULL, "refused: %s", err.msg);
    cJSON_Delete(doc);

    n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "x = 1\na = ");
    for (int i = 0; i < 40; i++)
        text[n++] = '[';
    for (int i = 0; i < 40; i++)
        text[n++] = ']';
    text[n] = '\0';
    assert_refused(text, 2, "nested too deep");

    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "a = ");
    for (int i = 0; i < 40; i++)
        pybox_buf_adds(&b, "{ b = ");
    pybox_buf_adds(&b, "1");
    for (int i = 0; i < 40; i++)
        pybox_buf_adds(&b, " }");
    assert_refused(b.data, 1, "nested too deep");
    pybox_buf_free(&b);

    /* Far deeper than the limit: refused, not a stack overflow. */
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "a = ");
    for (int i = 0; i < 100000; i++)
        pybox_buf_adds(&b, "[");
    assert_refused(b.data, 1, "nested too deep");
    pybox_buf_free(&b);
}
END_TEST

typedef struct {
    const char *text;
    int line;
    const char *why;
} refusal_t;

static const refusal_t REFUSALS[] = {
    /* strings */
    {"a = 1\nb = \"abc", 2, "does not end"},
    {"a = 1\nb = 'abc", 2, "does not end"},
    {"a = 1\nb = \"ab\nc\"\n", 2, "does not end on its line"},
    {"b = 'ab\nc'\n", 1, "does not end on its line"},
    {"a = \"x\\", 1, "ends in an escape"},
    {"a = 1\n\nb = \"a\\qb\"\n", 3, "unknown escape"},
    {"a = \"\\x41\"", 1, "unknown escape"},
    {"a = \"\\e\"", 1, "unknown escape"},
    {"a = \"\\ \"", 1, "unknown escape"},
    {"a = \"\\uD800\"", 1, "bad \\u escape"},
    {"a = \"\\udfff\"", 1, "bad \\u escape"},
    {"a = \"\\U0000D800\"", 1, "bad \\u escape"},
    {"a = \"\\U00110000\"", 1, "bad \\u escape"},
    {"a = \"\\UFFFFFFFF\"", 1, "bad \\u escape"},
    {"a = \"\\u12\"", 1, "bad \\u escape"},
    {"a = \"\\u12G4\"", 1, "bad \\u escape"},
    {"a = \"\\U0001F60\"", 1, "bad \\u escape"},
    {"a = \"\\u00", 1, "bad \\u escape"},
    {"a = \"\\u0000\"", 1, "not UTF-8 text"},
    {"a = \"\xff\"", 1, "not UTF-8 text"},
    {"x = 1\na = '\xc0\xaf'", 2, "not UTF-8 text"},
    {"a = \"\xed\xa0\x80\"", 1, "not UTF-8 text"},
    {"a = \"\xe2\x82\"", 1, "not UTF-8 text"},
    {"a = \"\xf4\x90\x80\x80\"", 1, "not UTF-8 text"},
    {"\"k\xff\" = 1", 1, "not UTF-8 text"},
    {"x = 1\na = \"\"\"multi\nline\"\"\"\n", 2, "multi-line strings"},
    {"a = '''multi'''", 1, "multi-line strings"},
    {"a = \"\"\"", 1, "multi-line strings"},
    /* duplicates */
    {"a = 1\na = 2\n", 2, "given twice"},
    {"a = 1\n\"a\" = 2\n", 2, "given twice"},
    {"[t]\nk = 1\nk = 'x'\n", 3, "given twice"},
    {"[[p]]\nk = 1\n[p.m]\nk = 1\nk = 2\n", 5, "given twice"},
    {"a = { x = 1, y = 2, x = 3 }\n", 1, "given twice"},
    {"a = [{ x = 1 }, { x = 1, 'x' = 2 }]\n", 1, "given twice"},
    /* keys and '=' */
    {"a 1\n", 1, "'=' was expected"},
    {"x = 1\na\n", 2, "'=' was expected"},
    {"a", 1, "'=' was expected"},
    {"a.b = 1\n", 1, "'=' was expected"},
    {"= 1\n", 1, "a key was expected"},
    {"a$ = 1\n", 1, "'=' was expected"},
    {"\xc3\xa9 = 1\n", 1, "a key was expected"},
    {"a =\n", 1, "a value of a kind"},
    {"a = ", 1, "a value was expected"},
    {"a = { x 1 }", 1, "'=' was expected"},
    {"a = { = 1 }", 1, "a key was expected"},
    /* the line goes on */
    {"a = 1 2\n", 1, "goes on"},
    {"x = 1\na = \"s\" t\n", 2, "goes on"},
    {"a = true false\n", 1, "goes on"},
    {"a = truex\n", 1, "goes on"},
    {"a = [1] ,\n", 1, "goes on"},
    {"a = {} }\n", 1, "goes on"},
    {"[t] x = 1\n", 1, "goes on"},
    {"[[t]] ]\n", 1, "goes on"},
    /* arrays and inline tables */
    {"x = 1\na = [1, 2\n", 3, "',' or ']' was expected"},
    {"a = [\n  1,\n  2\n  3\n]\n", 4, "',' or ']' was expected"},
    {"a = [", 1, "a value was expected"},
    {"a = [1,,2]", 1, "a value of a kind"},
    {"a = [,]", 1, "a value of a kind"},
    {"a = { x = 1", 1, "',' or '}' was expected"},
    {"a = { x = 1, }", 1, "a key was expected"},
    {"a = { x = 1 y = 2 }", 1, "',' or '}' was expected"},
    {"a = { x = 1,\n y = 2 }", 1, "a key was expected"},
    {"a = {\n}", 1, "a key was expected"},
    /* floats, dates, other numbers and kinds: refused, not misread */
    {"a = 1.5\n", 1, "goes on"},
    {"x = 1\na = -0.0\n", 2, "goes on"},
    {"a = 1e3\n", 1, "goes on"},
    {"a = 5E-2\n", 1, "goes on"},
    {"a = .5\n", 1, "a value of a kind"},
    {"a = inf\n", 1, "a value of a kind"},
    {"a = -inf\n", 1, "number"},
    {"a = nan\n", 1, "a value of a kind"},
    {"a = 1979-05-27\n", 1, "goes on"},
    {"a = 1979-05-27T07:32:00Z\n", 1, "goes on"},
    {"a = 07:32:00\n", 1, "goes on"},
    {"a = [1979-05-27]\n", 1, "',' or ']' was expected"},
    {"a = [1.0, 2.0]\n", 1, "',' or ']' was expected"},
    {"a = { v = 3.14 }\n", 1, "',' or '}' was expected"},
    {"a = 0x1F\n", 1, "goes on"},
    {"a = 0o17\n", 1, "goes on"},
    {"a = 0b101\n", 1, "goes on"},
    {"a = -\n", 1, "number"},
    {"a = +\n", 1, "number"},
    {"a = - 1\n", 1, "number"},
    {"a = 9223372036854775808\n", 1, "number"},
    {"a = -9223372036854775809\n", 1, "number"},
    {"a = 99999999999999999999999999999999999999\n", 1, "number"},
    /* Too many digits to be read: refused, never cut to fewer. */
    {"a = 0000000000000000000000000000000000000042\n", 1, "number"},
    /* Integers a double cannot hold exactly are refused, not rounded. */
    {"a = 9007199254740993\n", 1, "number"},
    {"a = -9223372036854775807\n", 1, "number"},
    {"a = yes\n", 1, "a value of a kind"},
    {"a = True\n", 1, "a value of a kind"},
    {"a = @\n", 1, "a value of a kind"},
    /* table headers */
    {"[x]\na = 1\n[[x]]\n", 3, "not an array of tables"},
    {"x = 1\n[[x]]\n", 2, "not an array of tables"},
    {"x = { y = 1 }\n[[x]]\n", 2, "not an array of tables"},
    {"a = \"s\"\n[a.b]\n", 2, "not a table"},
    {"a = \"s\"\n[a]\n", 2, "not a table"},
    {"a = 1\n[[a.b]]\n", 2, "not a table"},
    {"a = []\n[a]\n", 2, "not a table"},
    {"a = [1]\n[a.b]\n", 2, "not a table"},
    {"[a]\nb = true\n\n[a.b.c]\n", 4, "not a table"},
    {"[a", 1, "'.' or ']' was expected"},
    {"[[a]", 1, "does not end"},
    {"[[a] ]", 1, "does not end"},
    {"[a.]\n", 1, "a key was expected"},
    {"[]\n", 1, "a key was expected"},
    {"[a b]\n", 1, "'.' or ']' was expected"},
    {"[a\n]\n", 1, "'.' or ']' was expected"},
    {"[[]]\n", 1, "a key was expected"},
};

START_TEST(toml_refusals)
{
    for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
        const refusal_t *t = &REFUSALS[i];
        pybox_error_t err;
        cJSON *doc = parse(t->text, &err);
        char *got = doc ? cJSON_PrintUnformatted(doc) : NULL;
        ck_assert_msg(doc == NULL, "#%zu accepted as %s", i, got ? got : "?");
        ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "#%zu: kind %d", i, (int)err.kind);
        char at[48];
        snprintf(at, sizeof at, "lock file line %d: ", t->line);
        ck_assert_msg(strstr(err.msg, at) != NULL, "#%zu: '%s' does not name line %d", i, err.msg, t->line);
        ck_assert_msg(strstr(err.msg, t->why) != NULL, "#%zu: '%s' does not say '%s'", i, err.msg, t->why);
    }
}
END_TEST

START_TEST(toml_nul_byte)
{
    static const char with_nul[] = "a = 1\0\nb = 2\n";
    assert_refused_n(with_nul, sizeof with_nul - 1, 1, "NUL byte");
    static const char in_string[] = "a = \"x\0y\"\n";
    assert_refused_n(in_string, sizeof in_string - 1, 1, "NUL byte");
    static const char only[] = "\0";
    assert_refused_n(only, 1, 1, "NUL byte");
}
END_TEST

START_TEST(toml_error_names_the_line)
{
    /* Lines are counted through comments, blank lines and arrays over several lines. */
    assert_refused("# c\n\nversion = 1\n[[package]]\nname = \"x\"\nwheels = [\n  { url = \"u\" },\n  # c\n\n"
                   "  { url = 'v' hash = 1 },\n]\n",
                   10, "',' or '}' was expected");
    assert_refused("a = [\r\n1,\r\n2.5]\r\n", 3, "',' or ']' was expected");
}
END_TEST

/* Every cut of a valid lock, and every one-byte change to a few bytes that matter to a
 * reader, either reads or is refused cleanly. */
static void assert_clean(const char *text, size_t len, const char *what, size_t at)
{
    pybox_error_t err;
    cJSON *doc = parse_n(text, len, &err);
    if (doc != NULL) {
        ck_assert_msg(err.kind == PYBOX_ERR_NONE, "%s %zu: read, yet an error", what, at);
        cJSON_Delete(doc);
    } else {
        ck_assert_msg(err.kind == PYBOX_ERR_USAGE, "%s %zu: kind %d", what, at, (int)err.kind);
        ck_assert_msg(strncmp(err.msg, "lock file line ", 15) == 0, "%s %zu: '%s'", what, at, err.msg);
    }
}

START_TEST(toml_every_prefix)
{
    size_t len = strlen(LOCK);
    size_t read = 0;
    for (size_t i = 0; i <= len; i++) {
        pybox_error_t err;
        cJSON *doc = parse_n(LOCK, i, &err);
        if (doc != NULL)
            read++;
        cJSON_Delete(doc);
        assert_clean(LOCK, i, "prefix", i);
    }
    /* Some cuts end a line cleanly (and read); cuts inside a string or an inline table
     * never do. */
    ck_assert_uint_gt(read, 0);
    ck_assert_uint_lt(read, len / 2);
    const char *mid = strstr(LOCK, "pypi.org");
    pybox_error_t err;
    ck_assert_ptr_null(parse_n(LOCK, (size_t)(mid - LOCK), &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "does not end"));
}
END_TEST

START_TEST(toml_every_byte_changed)
{
    static const char bytes[] = {'"', '\'', '[', ']', '{', '}', '\\', '\n', ',', '=', '#', '.', '\0', '\x80', '\xff'};
    size_t len = strlen(LOCK);
    char *text = malloc(len);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < len; i++) {
        for (size_t j = 0; j < sizeof bytes; j++) {
            memcpy(text, LOCK, len);
            text[i] = bytes[j];
            assert_clean(text, len, "changed byte", i);
        }
    }
    free(text);
}
END_TEST

Suite *suite_toml(void)
{
    Suite *s = suite_create("toml");
    TCase *read = tcase_create("read");
    tcase_set_timeout(read, 10);
    tcase_add_test(read, toml_uv_lock);
    tcase_add_test(read, toml_uv_lock_lookups);
    tcase_add_test(read, toml_strings);
    tcase_add_test(read, toml_keys);
    tcase_add_test(read, toml_numbers_and_booleans);
    tcase_add_test(read, toml_arrays_and_tables);
    tcase_add_test(read, toml_depth);
    suite_add_tcase(s, read);

    TCase *refuse = tcase_create("refuse");
    tcase_set_timeout(refuse, 10);
    tcase_add_test(refuse, toml_refusals);
    tcase_add_test(refuse, toml_nul_byte);
    tcase_add_test(refuse, toml_error_names_the_line);
    suite_add_tcase(s, refuse);

    TCase *cut = tcase_create("cut");
    tcase_set_timeout(cut, 120);
    tcase_add_test(cut, toml_every_prefix);
    tcase_add_test(cut, toml_every_byte_changed);
    suite_add_tcase(s, cut);
    return s;
}
