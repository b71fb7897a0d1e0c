/* SPDX-License-Identifier: MIT */
/* Signed receipts and the published schema against real runs: pybox exec --json, then
 * pybox verify (valid; refused after a change, without a signature, with another
 * installation's key); a key that cannot be read leaves the receipt unsigned, not lost;
 * real receipts of every status valid against docs/receipt.schema.json by Debian's
 * python3-jsonschema, a wrong type refused by it; PyBox's canonical JSON byte for byte
 * as the npm package canonicalize makes it. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/jcs.h"
#include "../pybox/prepare.h"
#include "../pybox/receipt.h"
#include "../pybox/run.h"
#include "../pybox/sign.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

#define VALIDATOR "/usr/bin/python3"

static void write_text(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_msg(fd >= 0, "open(%s)", path);
    ck_assert_int_eq(pybox_write_all(fd, text, len), 0);
    close(fd);
}

static char *read_text(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "open(%s)", path);
    char *t = NULL;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 64 << 20, &t, len, &over, &err), 0);
    close(fd);
    return t;
}

/* pybox verify FILE [more args] in the installation env names (or the tests'). */
static int verify(const char *file, const char *key, const char *const *env, itest_run_t *r)
{
    const char *args[] = {"verify", file, key ? "--key" : NULL, key, NULL};
    itest_pybox("", 0, args, env, r);
    return r->status;
}

static char tmp[64];

static void setup(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/pybox-itest-sign-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
    itest_remove_home(tmp);
}

START_TEST(exec_receipt_verifies_and_changes_are_refused)
{
    itest_run_t r;
    itest_exec("print('h\\u00e9llo \\U0001F600')\n", NULL, &r);
    ck_assert_int_eq(r.status, 0);
    const char *kid = itest_str(r.receipt, "signature.key_id");
    ck_assert_ptr_nonnull(kid);
    ck_assert_str_eq(itest_str(r.receipt, "signature.alg"), "Ed25519");
    char file[128], key[128], want[160];
    snprintf(file, sizeof file, "%s/receipt.json", tmp);
    write_text(file, r.out, r.out_len);
    snprintf(want, sizeof want, "valid: signed by key %s of this installation\n", kid);

    itest_run_t v;
    ck_assert_int_eq(verify(file, NULL, NULL, &v), 0);
    ck_assert_str_eq(v.out, want);
    itest_run_free(&v);
    /* from standard input */
    const char *stdin_args[] = {"verify", "-", NULL};
    itest_pybox(r.out, r.out_len, stdin_args, NULL, &v);
    ck_assert_int_eq(v.status, 0);
    itest_run_free(&v);

    /* with the public key pybox key prints; its id is the SHA-256 of the raw key, as
     * openssl sees it */
    const char *key_args[] = {"key", NULL};
    itest_pybox("", 0, key_args, NULL, &v);
    ck_assert_int_eq(v.status, 0);
    snprintf(key, sizeof key, "%s/public.pem", tmp);
    write_text(key, v.out, v.out_len);
    itest_run_free(&v);
    char cmd[512], idfile[160];
    snprintf(idfile, sizeof idfile, "%s/id", tmp);
    snprintf(cmd, sizeof cmd, "openssl pkey -pubin -in %s -outform DER | tail -c 32 | sha256sum | cut -c1-32 >%s", key,
             idfile);
    ck_assert_int_eq(system(cmd), 0);
    size_t n;
    char *id = read_text(idfile, &n);
    ck_assert_uint_eq(n, 33);
    ck_assert_int_eq(strncmp(id, kid, 32), 0);
    free(id);
    ck_assert_int_eq(verify(file, key, NULL, &v), 0);
    ck_assert_ptr_nonnull(strstr(v.out, "valid: signed by key"));
    itest_run_free(&v);

    /* one changed byte: the exit code */
    char *changed = strdup(r.out);
    char *ec = strstr(changed, "\"exit_code\":0");
    ck_assert_ptr_nonnull(ec);
    ec[12] = '1';
    write_text(file, changed, strlen(changed));
    free(changed);
    ck_assert_int_eq(verify(file, NULL, NULL, &v), 1);
    ck_assert_str_eq(v.out, "invalid: signature does not match (the receipt was changed after signing)\n");
    itest_run_free(&v);
    /* no signature */
    cJSON *j = cJSON_Duplicate(r.receipt, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "signature");
    char *t = cJSON_Print(j);
    write_text(file, t, strlen(t));
    free(t);
    cJSON_Delete(j);
    ck_assert_int_eq(verify(file, NULL, NULL, &v), 1);
    ck_assert_str_eq(v.out, "invalid: not signed\n");
    itest_run_free(&v);
    /* not JSON */
    write_text(file, "{\"schema\":", 10);
    ck_assert_int_eq(verify(file, NULL, NULL, &v), 1);
    ck_assert_str_eq(v.out, "invalid: not JSON\n");
    itest_run_free(&v);

    /* another installation's key: unknown */
    char home[64], other[33], env_home[96];
    ck_assert_int_eq(itest_new_home(home, sizeof home, other), 0);
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", home);
    const char *env[] = {env_home, NULL};
    const char *init_args[] = {"key", "--init", NULL};
    itest_pybox("", 0, init_args, env, &v);
    ck_assert_int_eq(v.status, 0);
    itest_run_free(&v);
    write_text(file, r.out, r.out_len);
    ck_assert_int_eq(verify(file, NULL, env, &v), 1);
    snprintf(want, sizeof want, "invalid: signed by an unknown key %s\n", kid);
    ck_assert_str_eq(v.out, want);
    itest_run_free(&v);
    itest_remove_home(home);
    /* bad usage */
    const char *bad_args[] = {"verify", NULL};
    itest_pybox("", 0, bad_args, NULL, &v);
    ck_assert_int_eq(v.status, 125);
    itest_run_free(&v);

    /* a refusal is signed too */
    itest_run_t refusal;
    const char *refuse_args[] = {"--timeout", "x", NULL};
    itest_exec("print(1)\n", refuse_args, &refusal);
    ck_assert_int_eq(refusal.status, 125);
    ck_assert_str_eq(itest_str(refusal.receipt, "status"), "REFUSED");
    write_text(file, refusal.out, refusal.out_len);
    ck_assert_int_eq(verify(file, NULL, NULL, &v), 0);
    itest_run_free(&v);
    itest_run_free(&refusal);
    itest_run_free(&r);
}
END_TEST

/* A program that prints what a terminal acts on (CSI U+009B, which the Linux console
 * and xterm take even UTF-8 encoded, a bidi override, a line separator, DEL) and tries to
 * pass for a receipt: pybox exec --json prints each as \uXXXX, never raw, the same
 * string reads back, and the receipt still verifies. */
START_TEST(exec_json_is_safe_on_a_terminal_and_verifies)
{
    itest_run_t r;
    itest_exec("import sys\n"
               "sys.stdout.write('\\u009b2J\\u009bH\\u202eteiceer xoBYP\\u2028  status     TARGET_EXIT_OBSERVED\\x7f"
               "\\U000E0041')\n",
               NULL, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    static const char *const raw[] = {"\xc2\x9b", "\xe2\x80\xae", "\xe2\x80\xa8", "\x7f", "\xf3\xa0\x81\x81"};
    for (size_t i = 0; i < sizeof raw / sizeof *raw; i++)
        ck_assert_msg(!itest_contains(r.out, r.out_len, raw[i]), "raw bytes %zu on stdout", i);
    ck_assert_msg(itest_contains(r.out, r.out_len, "\\u009b2J\\u009bH\\u202eteiceer"), "%s", r.out);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"),
                     "\xc2\x9b"
                     "2J\xc2\x9bH\xe2\x80\xae"
                     "teiceer xoBYP\xe2\x80\xa8  status     TARGET_EXIT_OBSERVED"
                     "\x7f\xf3\xa0\x81\x81");
    const char *args[] = {"verify", "-", NULL};
    itest_run_t v;
    itest_pybox(r.out, r.out_len, args, NULL, &v);
    ck_assert_msg(v.status == 0, "%s%s", v.out, v.err);
    itest_run_free(&v);
    itest_run_free(&r);
}
END_TEST

/* pybox verify takes strict JSON only: a real receipt with a byte-order mark in front,
 * or with its signature member given twice, is read by cJSON as the receipt signed, but
 * not by every reader: invalid, not valid. */
START_TEST(verify_takes_strict_json_only)
{
    itest_run_t r;
    itest_exec("print('strict')\n", NULL, &r);
    ck_assert_int_eq(r.status, 0);
    const char *args[] = {"verify", "-", NULL};
    itest_run_t v;
    itest_pybox(r.out, r.out_len, args, NULL, &v);
    ck_assert_msg(v.status == 0, "%s%s", v.out, v.err);
    itest_run_free(&v);
    size_t n = r.out_len + 400;
    char *m = malloc(n);
    snprintf(m, n, "\xef\xbb\xbf%.*s", (int)r.out_len, r.out);
    itest_pybox(m, strlen(m), args, NULL, &v);
    ck_assert_msg(v.status == 1, "exit %d: %s", v.status, v.out);
    ck_assert_msg(itest_contains(v.out, v.out_len, "invalid: not strict JSON"), "%s", v.out);
    itest_run_free(&v);
    const char *sig = strstr(r.out, ",\"signature\":");
    ck_assert_ptr_nonnull(sig);
    /* {"signature":{...the real one...}, <the receipt as printed> */
    const char *end = strrchr(r.out, '}');
    snprintf(m, n, "{%.*s,%.*s", (int)(end - sig - 1), sig + 1, (int)(r.out_len - 1), r.out + 1);
    itest_pybox(m, strlen(m), args, NULL, &v);
    ck_assert_msg(v.status == 1, "exit %d: %s", v.status, v.out);
    ck_assert_msg(itest_contains(v.out, v.out_len, "duplicate"), "%s", v.out);
    itest_run_free(&v);
    free(m);
    itest_run_free(&r);
}
END_TEST

START_TEST(a_key_that_cannot_be_read_leaves_the_receipt_unsigned)
{
    char home[64], id[33], env_home[96], path[160];
    ck_assert_int_eq(itest_new_home(home, sizeof home, id), 0);
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", home);
    const char *env[] = {env_home, NULL};
    itest_run_t v;
    const char *init_args[] = {"key", "--init", NULL};
    itest_pybox("", 0, init_args, env, &v);
    ck_assert_int_eq(v.status, 0);
    itest_run_free(&v);
    snprintf(path, sizeof path, "%s/receipt-key.pem", home);
    ck_assert_int_eq(chmod(path, 0640), 0);
    const char *args[] = {"exec", "--json", "--timeout", ITEST_ROOMY_TIMEOUT_S, NULL};
    itest_run_t r;
    itest_pybox("print('kept')\nraise SystemExit(3)\n", 35, args, env, &r);
    /* the run's receipt and exit code, whole; unsigned, saying why */
    ck_assert_msg(r.status == 3, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(r.receipt);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "kept\n");
    ck_assert_ptr_null(itest_get(r.receipt, "signature"));
    const char *why = itest_str(r.receipt, "unsigned");
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "group or others (mode 0640)") != NULL, "%s", why);
    char file[128];
    snprintf(file, sizeof file, "%s/receipt.json", tmp);
    write_text(file, r.out, r.out_len);
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_int_eq(verify(file, NULL, env, &v), 1);
    ck_assert_ptr_nonnull(strstr(v.out, "invalid: not signed (the receipt says: the receipt could not be signed: "));
    itest_run_free(&v);
    itest_run_free(&r);
    itest_remove_home(home);
}
END_TEST

/* ---- every status, against the published schema ---- */

static void add_receipt(cJSON *all, cJSON *r)
{
    ck_assert_ptr_nonnull(r);
    cJSON_AddItemToArray(all, r);
}

static void add_exec(cJSON *all, const char *program, const char *const *extra, int want_status)
{
    itest_run_t r;
    itest_exec(program, extra, &r);
    ck_assert_msg(r.status == want_status, "exit %d, not %d: %s", r.status, want_status, r.err);
    add_receipt(all, cJSON_Duplicate(r.receipt, 1));
    itest_run_free(&r);
}

static void add_lib(cJSON *all, pybox_run_result_t *res)
{
    cJSON *j = pybox_receipt_json(res);
    ck_assert_int_eq(pybox_sign_installation(j, itest_state()), 0);
    add_receipt(all, j);
    pybox_run_result_free(res);
}

static void box_timer_first(pybox_policy_t *p, void *arg)
{
    (void)arg;
    p->timeout_ms = 6000;
    p->box_timer_ms = 1000; /* the box's own timer before PyBox's deadline */
}

static void set_tamper(pybox_policy_t *p, void *arg)
{
    p->tamper = arg;
}

/* pybox exec of a sleeping program, its box then signalled from outside (the engine, or
 * the host's kill of a native box's init). */
static void add_signalled(cJSON *all, const char *sig)
{
    double since = itest_wall();
    const char *args[] = {"exec", "--json", "--timeout", "20", NULL};
    itest_job_t job;
    itest_start("import time\ntime.sleep(15)\n", 27, args, NULL, &job);
    char id[65];
    ck_assert_msg(itest_box_wait_running(since, id, "python3", 30) == 0, "the program never ran");
    itest_box_signal(id, sig);
    itest_run_t r;
    itest_finish(&job, &r);
    ck_assert_msg(r.receipt != NULL, "no receipt: %s", r.err);
    add_receipt(all, cJSON_Duplicate(r.receipt, 1));
    itest_run_free(&r);
}

START_TEST(every_status_valid_against_the_published_schema)
{
    cJSON *all = cJSON_CreateArray();
    /* the eight kinds of the campaign's receipt cases, as real programs */
    add_exec(all, "print('hello')\n", NULL, 0);
    add_exec(all, "raise ValueError('boom')\n", NULL, 1);
    add_exec(all,
             "import subprocess, sys\np = subprocess.run([sys.executable, '-c', 'b = bytearray(160 * 1024 * "
             "1024)'])\nprint(p.returncode)\n",
             NULL, 0);
    const char *ten[] = {"--timeout", "10", NULL};
    add_exec(all,
             "import os, time\nok = bad = 0\nfor i in range(36):\n    try:\n        if os.fork() == 0:\n"
             "            time.sleep(1)\n            os._exit(0)\n        ok += 1\n    except OSError:\n"
             "        bad += 1\nprint(ok, bad)\n",
             ten, 0);
    char in[128], out1[128], out2[128];
    snprintf(in, sizeof in, "%s/data.csv", tmp);
    write_text(in, "city,sales\nOslo,3\n", 18);
    snprintf(out1, sizeof out1, "%s/out1", tmp);
    snprintf(out2, sizeof out2, "%s/out2", tmp);
    const char *files[] = {"--input", in, "--output", out1, NULL};
    add_exec(all,
             "import os\nopen('/box/out/n.txt', 'w').write(open('/box/in/data.csv').read())\n"
             "os.symlink('/etc/passwd', '/box/out/passwd')\n",
             files, 0);
    const char *hostile[] = {"--output", out2, NULL};
    add_exec(all,
             "for n in [b'\\x1b[31mred', b'new\\nline', b'bad\\xff.txt']:\n    open(b'/box/out/' + n, 'w').write('x')\n"
             "print('\\x1b[2J forged \\xff'.encode('latin-1').decode('latin-1'))\n",
             hostile, 0);
    const char *short_deadline[] = {"--timeout", "0.5", NULL};
    add_exec(all, "import time\ntime.sleep(5)\n", short_deadline, 124);
    pybox_run_result_t res;
    itest_lib_run("import time\ntime.sleep(5)\n", box_timer_first, NULL, &res);
    ck_assert_str_eq(pybox_end_word(res.end), "BOX_TIMER_KILL_OBSERVED");
    add_lib(all, &res);
    /* and the other ends: PyBox's failure, a stop from outside, an end without the
     * init's record, a cancelled run, a refusal */
    ck_assert_int_eq(itest_lib_run("print(1)\n", set_tamper, (void *)"memory", &res), -1);
    add_lib(all, &res);
    add_signalled(all, "SIGTERM");
    add_signalled(all, "SIGKILL");
    int cancel[2];
    ck_assert_int_eq(pipe(cancel), 0);
    ck_assert_int_eq(pybox_write_all(cancel[1], "x", 1), 0);
    pybox_request_t rq = {.program = "import time\ntime.sleep(5)\n",
                          .program_len = 27,
                          .image = "stdlib",
                          .cancellable = true,
                          .cancel_fd = cancel[0]};
    pybox_ready_t rd;
    pybox_ready_init(&rd);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_prepare(&rq, &rd, &err) == 0, "%s", err.msg);
    pybox_ready_run(&rd, &res);
    pybox_ready_free(&rd);
    close(cancel[0]);
    close(cancel[1]);
    add_lib(all, &res);
    const char *refuse[] = {"--memory", "1", NULL};
    add_exec(all, "print(1)\n", refuse, 125);

    /* every status word a receipt can carry is here */
    static const char *const words[] = {"TARGET_EXIT_OBSERVED",
                                        "SUPERVISOR_KILL_OBSERVED",
                                        "BOX_TIMER_KILL_OBSERVED",
                                        "PYBOX_ERROR",
                                        "EXTERNAL_STOP_OBSERVED",
                                        "BOX_END_UNEXPLAINED",
                                        "CANCELLED",
                                        "REFUSED"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        bool seen = false;
        const cJSON *x;
        cJSON_ArrayForEach (x, all)
            seen = seen || strcmp(itest_str(x, "status"), words[w]) == 0;
        ck_assert_msg(seen, "no receipt with status %s", words[w]);
    }
    /* each verifies */
    char file[128];
    snprintf(file, sizeof file, "%s/one.json", tmp);
    const cJSON *x;
    cJSON_ArrayForEach (x, all) {
        char *t = cJSON_PrintUnformatted(x);
        write_text(file, t, strlen(t));
        free(t);
        itest_run_t v;
        ck_assert_msg(verify(file, NULL, NULL, &v) == 0, "%s: %s", itest_str(x, "status"), v.out);
        itest_run_free(&v);
    }
    /* and each is valid against the published schema by Debian's python3-jsonschema,
     * a copy with one member of another type is refused, as is another status word */
    char receipts[128];
    snprintf(receipts, sizeof receipts, "%s/receipts.json", tmp);
    char *t = cJSON_Print(all);
    write_text(receipts, t, strlen(t));
    free(t);
    struct stat sb;
    ck_assert_msg(stat(VALIDATOR, &sb) == 0, VALIDATOR " is missing (scripts/setup.sh installs python3-jsonschema)");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             VALIDATOR
             " -c 'import json, sys, jsonschema\n"
             "assert jsonschema.__file__.startswith(\"/usr/lib/python3/dist-packages/\"), jsonschema.__file__\n"
             "schema = json.load(open(sys.argv[1]))\n"
             "jsonschema.Draft202012Validator.check_schema(schema)\n"
             "v = jsonschema.Draft202012Validator(schema)\n"
             "rs = json.load(open(sys.argv[2]))\n"
             "for r in rs:\n"
             "    v.validate(r)\n"
             "    bad = dict(r, exit_code=str(r[\"exit_code\"]))\n"
             "    assert not v.is_valid(bad), \"a string exit_code passed\"\n"
             "    bad = dict(r, status=\"ALL_FINE\")\n"
             "    assert not v.is_valid(bad), \"an unknown status passed\"\n"
             "    bad = dict(r, signature=dict(r[\"signature\"], alg=\"RS256\"))\n"
             "    assert not v.is_valid(bad), \"another alg passed\"\n"
             "print(len(rs), \"receipts valid\")\n' %s %s",
             PYBOX_SOURCE "/docs/receipt.schema.json", receipts);
    ck_assert_msg(system(cmd) == 0, "the schema validator refused a real receipt (or passed a wrong one)");
    cJSON_Delete(all);
}
END_TEST

/* ---- canonical JSON, beside an independent implementation ---- */

START_TEST(canonical_json_as_an_independent_implementation_makes_it)
{
    struct stat sb;
    ck_assert_msg(stat("tests/mcp/node_modules/canonicalize", &sb) == 0,
                  "the npm package canonicalize is not installed: make mcp-clients (npm ci in tests/mcp)");
    cJSON *texts = cJSON_CreateArray();
    /* RFC 8785's examples */
    cJSON_AddItemToArray(
        texts, cJSON_CreateString("{\"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],"
                                  "\"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\","
                                  "\"literals\": [null, true, false]}"));
    cJSON_AddItemToArray(texts, cJSON_CreateString("{\"\\u20ac\": 1, \"\\r\": 2, \"\\ufb33\": 3, \"1\": 4, "
                                                   "\"\\ud83d\\ude00\": 5, \"\\u0080\": 6, \"\\u00f6\": 7, "
                                                   "\"\\u007f\": [\"\\u0001\\u001f\\b\\f\\t\"]}"));
    /* doubles: every power of two, and random bit patterns */
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "[");
    for (int e = -1074; e <= 1023; e++)
        pybox_buf_addf(&b, "%s%.17g", e > -1074 ? "," : "", ldexp(1.0, e));
    pybox_buf_adds(&b, "]");
    cJSON_AddItemToArray(texts, cJSON_CreateString(b.data));
    pybox_buf_free(&b);
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "[-0.0,0.1,1e21,1e-7,123456789012345680000");
    unsigned long long x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof d);
        if (isfinite(d))
            pybox_buf_addf(&b, ",%.17g", d);
    }
    pybox_buf_adds(&b, "]");
    cJSON_AddItemToArray(texts, cJSON_CreateString(b.data));
    pybox_buf_free(&b);
    /* real receipts */
    itest_run_t r;
    itest_exec("print('h\\u00e9llo \\U0001F600 \\x01\\t\"q\"\\\\')\n", NULL, &r);
    cJSON_AddItemToArray(texts, cJSON_CreateString(r.out));
    itest_run_free(&r);
    const char *hostile[] = {"--output", tmp, NULL};
    itest_exec("open(b'/box/out/\\xe2\\x80\\xae\\x1bname', 'w').write('x')\nprint('\\u2028\\ufeff')\n", hostile, &r);
    cJSON_AddItemToArray(texts, cJSON_CreateString(r.out));
    itest_run_free(&r);

    /* PyBox's canonical form of each, one a line */
    pybox_buf_t mine;
    pybox_buf_init(&mine, 0);
    const cJSON *t;
    cJSON_ArrayForEach (t, texts) {
        cJSON *v = cJSON_Parse(t->valuestring);
        ck_assert_ptr_nonnull(v);
        pybox_error_t err = {0};
        ck_assert_msg(pybox_jcs_append(&mine, v, NULL, &err) == 0, "%s", err.msg);
        pybox_buf_adds(&mine, "\n");
        cJSON_Delete(v);
    }
    char in[128], out[128], cmd[768];
    snprintf(in, sizeof in, "%s/texts.json", tmp);
    snprintf(out, sizeof out, "%s/theirs.txt", tmp);
    char *all = cJSON_PrintUnformatted(texts);
    write_text(in, all, strlen(all));
    free(all);
    snprintf(cmd, sizeof cmd,
             "cd tests/mcp && node --input-type=module -e '"
             "import canonicalize from \"canonicalize\"; import fs from \"node:fs\";"
             "const texts = JSON.parse(fs.readFileSync(process.argv[1], \"utf8\"));"
             "fs.writeFileSync(process.argv[2], texts.map((t) => canonicalize(JSON.parse(t)) + \"\\n\").join(\"\"));"
             "' %s %s",
             in, out);
    ck_assert_int_eq(system(cmd), 0);
    size_t n;
    char *theirs = read_text(out, &n);
    ck_assert_uint_gt(mine.len, 100000);
    if (n != mine.len || memcmp(theirs, mine.data, n) != 0) {
        size_t at = 0;
        while (at < n && at < mine.len && theirs[at] == mine.data[at])
            at++;
        ck_abort_msg("canonical JSON differs at byte %zu: PyBox %.60s, canonicalize %.60s", at, mine.data + at,
                     theirs + at);
    }
    free(theirs);
    pybox_buf_free(&mine);
    cJSON_Delete(texts);
}
END_TEST

Suite *itest_suite_sign(void)
{
    Suite *s = suite_create("sign");
    TCase *tc = itest_tcase(s, "receipts", 180,
                            ITEST_TESTS(exec_receipt_verifies_and_changes_are_refused,
                                        exec_json_is_safe_on_a_terminal_and_verifies, verify_takes_strict_json_only,
                                        a_key_that_cannot_be_read_leaves_the_receipt_unsigned,
                                        every_status_valid_against_the_published_schema,
                                        canonical_json_as_an_independent_implementation_makes_it));
    itest_fixture(tc, setup, teardown);
    return s;
}
