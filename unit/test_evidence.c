/* SPDX-License-Identifier: MIT */
/* Unit tests for the evidence store (campaign/evidence.h): records named by their
 * SHA-256, pages rendered from records only, and the check that catches a changed
 * byte, a hand-edited page or a stray one. Real files in a temporary folder. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../campaign/evidence.h"
#include "../pybox/key.h"
#include "../pybox/sign.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "suites.h"

static const char limits[] = "## What is not claimed\n\n- Everything else.\n";

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/pybox-unit-evidence-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    unit_rm_tree(dir);
}

/* A record as the campaign writes it, small. */
static cJSON *record(const char *kind, const char *id, const char *started, const char *verdict, const char *said)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "schema", EV_SCHEMA);
    cJSON_AddStringToObject(r, "campaign", "c0ffee");
    cJSON *c = cJSON_AddObjectToObject(r, "case");
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "kind", kind);
    cJSON_AddStringToObject(c, "title", id);
    cJSON_AddStringToObject(c, "claim", "a claim | with a pipe");
    cJSON *show = cJSON_AddArrayToObject(c, "show");
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "label", "");
    cJSON_AddStringToObject(s, "path", "receipt.said.stdout.text");
    cJSON_AddItemToArray(show, s);
    cJSON_AddStringToObject(r, "started", started);
    cJSON_AddStringToObject(r, "finished", started);
    cJSON *host = cJSON_AddObjectToObject(r, "host");
    cJSON_AddStringToObject(host, "kernel", "6.1.0");
    cJSON_AddNumberToObject(host, "cpus", 2);
    cJSON_AddStringToObject(host, "cgroup", "v1");
    cJSON_AddStringToObject(host, "engine", "Docker/20.10");
    cJSON *runs = cJSON_AddArrayToObject(r, "runs");
    const char *names[] = {"with", "without"};
    for (int i = 0; i < 2; i++) {
        cJSON *run = cJSON_CreateObject();
        cJSON_AddStringToObject(run, "name", names[i]);
        cJSON_AddStringToObject(run, "relaxed", i ? "seccomp" : "");
        cJSON_AddStringToObject(run, "removed", i ? "seccomp" : "");
        cJSON *said_o =
            cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(run, "receipt"), "said"), "stdout");
        cJSON_AddStringToObject(said_o, "text", i ? "ESCAPED: yes\n" : said);
        cJSON *ex = cJSON_AddArrayToObject(run, "expect");
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "path", "receipt.said.stdout.text");
        cJSON_AddStringToObject(x, "op", "contains");
        cJSON_AddStringToObject(x, "want", i ? "ESCAPED:" : "BLOCKED:");
        cJSON_AddStringToObject(x, "got", i ? "ESCAPED: yes\n" : said);
        bool ok = strcmp(verdict, "pass") == 0 || i;
        cJSON_AddBoolToObject(x, "ok", ok);
        cJSON_AddItemToArray(ex, x);
        cJSON_AddBoolToObject(run, "ok", ok);
        cJSON_AddItemToArray(runs, run);
    }
    cJSON_AddStringToObject(r, "verdict", verdict);
    return r;
}

static void store(cJSON *r, char name[80])
{
    pybox_error_t err = {0};
    ck_assert_msg(ev_record_store(dir, r, name, &err) == 0, "%s", err.msg);
    cJSON_Delete(r);
}

static char *slurp(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Run the check with its report captured. */
static int check(char *report, size_t len)
{
    FILE *f = fmemopen(report, len, "w");
    ck_assert_ptr_nonnull(f);
    int bad = ev_check(dir, limits, f);
    fclose(f);
    return bad;
}

static void write_pages(void)
{
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
}

START_TEST(record_named_by_its_sha256)
{
    char name[80];
    cJSON *r = record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n");
    char *text = cJSON_Print(r);
    char hex[65];
    pybox_sha256_hex(text, strlen(text), hex);
    free(text);
    store(r, name);
    ck_assert_int_eq(strncmp(name, hex, 64), 0);
    ck_assert_str_eq(name + 64, ".json");
    char rel[128];
    snprintf(rel, sizeof rel, "records/%s", name);
    ck_assert_int_eq(strncmp(slurp(rel), "{", 1), 0);
}
END_TEST

START_TEST(pages_pass_the_check)
{
    char name[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    const char *page = slurp("restriction.md");
    ck_assert_ptr_nonnull(strstr(
        page,
        "| keyring | a claim \\| with a pipe | seccomp | *with:* BLOCKED: no<br>*without:* ESCAPED: yes<br>pass · "));
    ck_assert_ptr_nonnull(strstr(slurp("README.md"), "What is not claimed"));
}
END_TEST

/* The soak's and the fault cases' records have pages of their own, listed in the index. */
START_TEST(reliability_and_fault_pages)
{
    char name[80], report[4096] = "";
    store(record("reliability", "soak", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: lost ids 0\n"), name);
    store(record("faults", "engine-killed", "2026-01-01T00:00:01.000Z", "pass", "BLOCKED: exit 125\n"), name);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    ck_assert_ptr_nonnull(strstr(slurp("reliability.md"), "| soak | a claim \\| with a pipe |"));
    ck_assert_ptr_nonnull(strstr(slurp("reliability.md"), "lost ids 0"));
    ck_assert_ptr_nonnull(strstr(slurp("faults.md"), "| engine-killed | a claim \\| with a pipe |"));
    const char *index = slurp("README.md");
    ck_assert_ptr_nonnull(strstr(index, "[reliability.md](reliability.md)"));
    ck_assert_ptr_nonnull(strstr(index, "[faults.md](faults.md)"));
}
END_TEST

START_TEST(one_changed_byte_fails)
{
    char name[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    write_pages();
    char path[256];
    snprintf(path, sizeof path, "%s/records/%s", dir, name);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    char c;
    ck_assert_int_eq(pread(fd, &c, 1, 40), 1);
    c ^= 0x01;
    ck_assert_int_eq(pwrite(fd, &c, 1, 40), 1);
    close(fd);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "the record was changed") != NULL, "%s", report);
}
END_TEST

START_TEST(hand_edited_page_fails)
{
    char name[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    write_pages();
    char path[256];
    snprintf(path, sizeof path, "%s/restriction.md", dir);
    char *page = strdup(slurp("restriction.md"));
    char *at = strstr(page, "BLOCKED: no");
    ck_assert_ptr_nonnull(at);
    at[0] = 'b'; /* one figure changed by hand */
    FILE *f = fopen(path, "w");
    fputs(page, f);
    fclose(f);
    free(page);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "restriction.md: line") != NULL, "%s", report);
}
END_TEST

START_TEST(stray_page_and_record_fail)
{
    char name[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    write_pages();
    char path[256];
    snprintf(path, sizeof path, "%s/extra.md", dir);
    FILE *f = fopen(path, "w");
    fputs("| made up | pass |\n", f);
    fclose(f);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "extra.md: a page no record renders to") != NULL, "%s", report);
    unlink(path);
    snprintf(path, sizeof path, "%s/records/notes.json", dir);
    f = fopen(path, "w");
    fputs("{}", f);
    fclose(f);
    report[0] = '\0';
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "not a record name") != NULL, "%s", report);
}
END_TEST

START_TEST(deleted_page_fails)
{
    char name[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    write_pages();
    char path[256];
    snprintf(path, sizeof path, "%s/restriction.md", dir);
    unlink(path);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "restriction.md: missing") != NULL, "%s", report);
}
END_TEST

START_TEST(failed_attempt_kept_and_listed)
{
    char first[80], second[80], report[4096] = "";
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "fail", "ESCAPED: oops\n"), first);
    store(record("restriction", "keyring", "2026-01-02T00:00:00.000Z", "pass", "BLOCKED: no\n"), second);
    ck_assert_str_ne(first, second);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    const char *index = slurp("README.md");
    ck_assert_msg(strstr(index, first) != NULL, "the failed attempt is not listed");
    ck_assert_ptr_nonnull(strstr(index, "no, a later one exists"));
    /* The table shows the latest attempt only. */
    const char *page = slurp("restriction.md");
    ck_assert_msg(strstr(page, second) != NULL, "%s", page);
    ck_assert_ptr_null(strstr(page, first));
    /* Storing the same record again keeps the one file. */
    char again[80];
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "fail", "ESCAPED: oops\n"), again);
    ck_assert_str_eq(again, first);
}
END_TEST

/* Records of two backends: a column each, every case once; a backend without a record of
 * a case says so. */
START_TEST(a_column_per_backend)
{
    char a[80], b[80], c[80], report[4096] = "";
    cJSON *r1 = record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: docker\n");
    cJSON_AddStringToObject(r1, "backend", "docker");
    cJSON *r2 = record("restriction", "keyring", "2026-01-01T00:00:01.000Z", "pass", "BLOCKED: native\n");
    cJSON_AddStringToObject(r2, "backend", "native");
    cJSON *r3 = record("restriction", "mount", "2026-01-01T00:00:02.000Z", "pass", "BLOCKED: only docker\n");
    cJSON_AddStringToObject(r3, "backend", "docker");
    store(r1, a);
    store(r2, b);
    store(r3, c);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    const char *page = slurp("restriction.md");
    ck_assert_ptr_nonnull(strstr(page, "| On docker | On native |"));
    const char *row = strstr(page, "| keyring |");
    ck_assert_ptr_nonnull(row);
    const char *end = strchr(row, '\n');
    ck_assert_ptr_nonnull(end);
    char *line = strndup(row, (size_t)(end - row));
    ck_assert_msg(strstr(line, "BLOCKED: docker") && strstr(line, "BLOCKED: native") &&
                      strstr(line, "BLOCKED: docker") < strstr(line, "BLOCKED: native"),
                  "%s", line);
    free(line);
    row = strstr(page, "| mount |");
    ck_assert_ptr_nonnull(row);
    end = strchr(row, '\n');
    line = strndup(row, (size_t)(end - row));
    ck_assert_msg(strstr(line, "BLOCKED: only docker") && strstr(line, "| not run |"), "%s", line);
    free(line);
    const char *index = slurp("README.md");
    ck_assert_ptr_nonnull(strstr(index, "| Restriction checks | 2 | 2 of 2 | 1 of 1 |"));
}
END_TEST

/* The same case on a host of cgroup v1 and in a Debian guest as shipped (cgroup v2 under
 * systemd): a column for each, the guest's after its backend's own, and each column's
 * machine said under the table. */
START_TEST(a_column_per_kind_of_host)
{
    char a[80], b[80], c[80], report[4096] = "";
    cJSON *r1 = record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: here\n");
    cJSON_AddStringToObject(r1, "backend", "native");
    cJSON *r2 = record("restriction", "keyring", "2026-01-01T00:00:01.000Z", "pass", "BLOCKED: guest\n");
    cJSON_AddStringToObject(r2, "backend", "native");
    cJSON *h = cJSON_GetObjectItemCaseSensitive(r2, "host");
    cJSON_ReplaceItemInObjectCaseSensitive(h, "cgroup", cJSON_CreateString("v2"));
    cJSON_ReplaceItemInObjectCaseSensitive(h, "kernel", cJSON_CreateString("6.1.0-guest"));
    cJSON_AddStringToObject(h, "cgroup_manager", "systemd");
    cJSON_AddNumberToObject(h, "time_scale", 10);
    cJSON *r3 = record("restriction", "keyring", "2026-01-01T00:00:02.000Z", "pass", "BLOCKED: docker\n");
    cJSON_AddStringToObject(r3, "backend", "docker");
    store(r1, a);
    store(r2, b);
    store(r3, c);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    const char *page = slurp("restriction.md");
    ck_assert_msg(strstr(page, "| On docker | On native | On native, cgroup v2 (systemd) |") != NULL, "%s", page);
    const char *row = strstr(page, "| keyring |");
    ck_assert_ptr_nonnull(row);
    const char *end = strchr(row, '\n');
    char *line = strndup(row, (size_t)(end - row));
    ck_assert_msg(strstr(line, "BLOCKED: docker") < strstr(line, "BLOCKED: here") &&
                      strstr(line, "BLOCKED: here") < strstr(line, "BLOCKED: guest"),
                  "%s", line);
    free(line);
    ck_assert_msg(strstr(page, "- on native, cgroup v2 (systemd): kernel 6.1.0-guest") != NULL, "%s", page);
    ck_assert_msg(strstr(page, "cgroup v2, every deadline 10 times the case's (a slower machine)") != NULL, "%s", page);
    ck_assert_msg(strstr(page, "- on native: kernel 6.1.0,") != NULL, "%s", page);
    const char *v1 = strstr(page, "- on native: kernel 6.1.0,");
    char *v1_line = strndup(v1, (size_t)(strchr(v1, '\n') - v1));
    ck_assert_msg(strstr(v1_line, "every deadline") == NULL, "%s", v1_line);
    free(v1_line);
    const char *index = slurp("README.md");
    ck_assert_msg(strstr(index, "| Restriction checks | 1 | 1 of 1 | 1 of 1 | 1 of 1 |") != NULL, "%s", index);
}
END_TEST

/* The same case run in the guest as root and as an ordinary user (host.rootless): the
 * user's runs have a column of their own, on the native backend said rootless, beside
 * root's; a record that says false, or nothing, is root's. */
START_TEST(a_column_for_rootless_runs)
{
    char a[80], b[80], c[80], d[80], report[4096] = "";
    cJSON *r[4];
    static const char *const said[] = {"BLOCKED: root\n", "BLOCKED: user\n", "BLOCKED: old\n", "BLOCKED: engine\n"};
    for (int i = 0; i < 4; i++) {
        char at[32];
        snprintf(at, sizeof at, "2026-01-01T00:00:0%d.000Z", i);
        r[i] = record("restriction", "keyring", at, "pass", said[i]);
        cJSON_AddStringToObject(r[i], "backend", i == 3 ? "docker" : "native");
        cJSON *h = cJSON_GetObjectItemCaseSensitive(r[i], "host");
        cJSON_ReplaceItemInObjectCaseSensitive(h, "cgroup", cJSON_CreateString("v2"));
        cJSON_AddStringToObject(h, "cgroup_manager", "systemd");
        if (i != 2)
            cJSON_AddBoolToObject(h, "rootless", i != 0);
    }
    store(r[0], a);
    store(r[1], b);
    store(r[2], c);
    store(r[3], d);
    write_pages();
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    const char *page = slurp("restriction.md");
    ck_assert_msg(strstr(page,
                         "| On docker, cgroup v2 (systemd), as an ordinary user | On native, cgroup v2 (systemd) | "
                         "On native, cgroup v2 (systemd), rootless |") != NULL,
                  "%s", page);
    const char *row = strstr(page, "| keyring |");
    ck_assert_ptr_nonnull(row);
    const char *end = strchr(row, '\n');
    char *line = strndup(row, (size_t)(end - row));
    /* root's column holds the latest of root's records (the one that says nothing) */
    ck_assert_msg(strstr(line, "BLOCKED: engine") < strstr(line, "BLOCKED: old") &&
                      strstr(line, "BLOCKED: old") < strstr(line, "BLOCKED: user") &&
                      strstr(line, "BLOCKED: root") == NULL,
                  "%s", line);
    free(line);
}
END_TEST

START_TEST(paths_and_cells)
{
    cJSON *j = cJSON_Parse("{\"a\":{\"b\":[{\"c\":1},{\"c\":\"x|y\\n<z>\"}]},\"n\":2.5}");
    ck_assert_ptr_nonnull(j);
    ck_assert_double_eq(ev_path(j, "a.b.0.c")->valuedouble, 1);
    ck_assert_str_eq(ev_path(j, "a.b.1.c")->valuestring, "x|y\n<z>");
    ck_assert_ptr_null(ev_path(j, "a.b.2.c"));
    ck_assert_ptr_null(ev_path(j, "a..b"));
    ck_assert_ptr_null(ev_path(j, "n.x"));
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ev_cell(&b, ev_path(j, "a.b.1.c"));
    ck_assert_str_eq(b.data, "x\\|y ⏎ &lt;z&gt;");
    b.len = 0;
    ev_cell(&b, ev_path(j, "n"));
    ev_cell(&b, NULL);
    ev_cell(&b, ev_path(j, "a.b.0.c"));
    b.data[b.len] = '\0';
    ck_assert_str_eq(b.data, "2.5—1");
    /* Program bytes that are not UTF-8, or terminal escapes, cannot reach a page raw. */
    cJSON *s = cJSON_CreateString("\x1b[31m\xff|");
    b.len = 0;
    ev_cell(&b, s);
    b.data[b.len] = '\0';
    ck_assert_str_eq(b.data, "\\x1b\\[31m\\xff\\|");
    cJSON_Delete(s);
    pybox_buf_free(&b);
    cJSON_Delete(j);
}
END_TEST

START_TEST(not_a_record_is_a_problem)
{
    /* Right name, right hash, wrong content: listed, not rendered. */
    char rdir[128], path[256], hex[65], report[4096] = "";
    const char *text = "{\"schema\":\"something else\"}";
    pybox_sha256_hex(text, strlen(text), hex);
    snprintf(rdir, sizeof rdir, "%s/records", dir);
    mkdir(rdir, 0755);
    snprintf(path, sizeof path, "%s/%s.json", rdir, hex);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    FILE *null = fopen("/dev/null", "w");
    ck_assert_int_gt(ev_write_pages(dir, limits, null), 0);
    fclose(null);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "not a pybox.evidence/1 record") != NULL, "%s", report);
}
END_TEST

/* A record that claims more than its runs show, or is oddly dated, is not used: the
 * fingerprint proves the bytes, this proves the verdict follows from them. */
START_TEST(verdict_must_follow_from_runs)
{
    char name[80], report[4096] = "";
    cJSON *r = record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "fail", "ESCAPED: oops\n");
    cJSON_ReplaceItemInObject(r, "verdict", cJSON_CreateString("pass"));
    store(r, name);
    ck_assert_int_gt(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "says \"pass\" but its runs say \"fail\"") != NULL, "%s", report);
    ck_assert_ptr_null(strstr(slurp("restriction.md"), name));

    r = record("restriction", "mount", "2|<b>x</b>|T99:99", "pass", "BLOCKED: no\n");
    store(r, name);
    report[0] = '\0';
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "not a pybox.evidence/1 record") != NULL, "%s", report);
}
END_TEST

START_TEST(fifo_in_records_not_waited_on)
{
    char name[80], report[4096] = "", path[256];
    store(record("restriction", "keyring", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n"), name);
    snprintf(path, sizeof path, "%s/records/%064d.json", dir, 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_gt(check(report, sizeof report), 0); /* returns: nothing waits on the FIFO */
    ck_assert_msg(strstr(report, "cannot be read") != NULL, "%s", report);
}
END_TEST

START_TEST(numbers_shown_plainly)
{
    static const struct {
        double v;
        const char *shown;
    } cases[] = {{260.2, "260.2"},   {0.357, "0.357"},     {1.0006, "1.001"},     {3, "3"},
                 {0.0004, "0.0004"}, {-0.0001, "-0.0001"}, {1.23e22, "1.23e+22"}, {2.0001, "2"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        cJSON *n = cJSON_CreateNumber(cases[i].v);
        ev_cell(&b, n);
        ck_assert_str_eq(b.data, cases[i].shown);
        cJSON_Delete(n);
        pybox_buf_free(&b);
    }
}
END_TEST

/* A record whose campaign names its receipt key: every receipt in it must be signed by
 * that key and unchanged, even in a record renamed to its new SHA-256. */
START_TEST(receipts_verified_against_the_campaigns_key)
{
    char home[128];
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("PYBOX_HOME", home, 1);
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
    pybox_key_t *k = NULL;
    ck_assert_int_eq(pybox_key_load(&st, true, &k, &err), 1);
    pybox_buf_t pem;
    pybox_buf_init(&pem, 0);
    ck_assert_int_eq(pybox_key_public_pem(k, &pem, &err), 0);
    unsetenv("PYBOX_HOME");
    for (int variant = 0; variant < 4; variant++) {
        cJSON *r = record("restriction", "signed", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n");
        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(r, "host"), "receipt_key", pem.data);
        const cJSON *run;
        cJSON_ArrayForEach (run, ev_path(r, "runs"))
            ck_assert_int_eq(pybox_sign_receipt(cJSON_GetObjectItemCaseSensitive(run, "receipt"), k, &err), 0);
        cJSON *second = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ev_path(r, "runs"), 1), "receipt");
        const char *want = NULL;
        if (variant == 1) { /* a value changed after signing */
            cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(ev_path(second, "said"), "stdout")->child,
                                 "ESCAPED: no\n");
            want = "runs.1.receipt: signature does not match";
        } else if (variant == 2) { /* the signature taken away */
            cJSON_DeleteItemFromObjectCaseSensitive(second, "signature");
            want = "runs.1.receipt: not signed";
        } else if (variant == 3) { /* another key named */
            cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "host"), "receipt_key",
                                                   cJSON_CreateString("junk"));
            want = "host.receipt_key: ";
        }
        char name[80];
        store(r, name);
        FILE *quiet = fopen("/dev/null", "we");
        ev_write_pages(dir, limits, quiet);
        fclose(quiet);
        char report[4096];
        int bad = check(report, sizeof report);
        if (want == NULL) {
            ck_assert_msg(bad == 0, "%s", report);
        } else {
            ck_assert_msg(bad > 0 && strstr(report, want) != NULL, "variant %d: %s", variant, report);
        }
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/" EV_RECORDS "/%s", dir, name);
        ck_assert_int_eq(unlink(path), 0);
    }
    pybox_buf_free(&pem);
    pybox_key_free(k);
}
END_TEST

/* What that check is not (docs/campaign.md, "The check"): the key is the record's own, so
 * a record whose receipt was changed and signed again with another key that the record
 * now carries, or that names no key at all, passes. It detects corruption, not forgery. */
START_TEST(a_record_carrying_its_own_key_detects_corruption_not_forgery)
{
    pybox_key_t *keys[2] = {NULL, NULL};
    pybox_buf_t pem[2];
    for (int i = 0; i < 2; i++) {
        char home[128];
        snprintf(home, sizeof home, "%s/home%d", dir, i);
        setenv("PYBOX_HOME", home, 1);
        pybox_state_t st;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(pybox_key_load(&st, true, &keys[i], &err), 1);
        pybox_buf_init(&pem[i], 0);
        ck_assert_int_eq(pybox_key_public_pem(keys[i], &pem[i], &err), 0);
    }
    unsetenv("PYBOX_HOME");
    for (int variant = 0; variant < 3; variant++) {
        cJSON *r = record("restriction", "forged", "2026-01-01T00:00:00.000Z", "pass", "BLOCKED: no\n");
        cJSON *host = cJSON_GetObjectItemCaseSensitive(r, "host");
        cJSON_AddStringToObject(host, "receipt_key", pem[0].data);
        const cJSON *run;
        pybox_error_t err = {0};
        cJSON_ArrayForEach (run, ev_path(r, "runs"))
            ck_assert_int_eq(pybox_sign_receipt(cJSON_GetObjectItemCaseSensitive(run, "receipt"), keys[0], &err), 0);
        /* the receipt changed after the campaign signed it */
        cJSON *second = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ev_path(r, "runs"), 1), "receipt");
        cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(ev_path(second, "said"), "stdout")->child,
                             "ESCAPED: no\n");
        if (variant == 1) { /* signed again with another key, which the record now carries */
            cJSON_DeleteItemFromObjectCaseSensitive(second, "signature");
            ck_assert_int_eq(pybox_sign_receipt(second, keys[1], &err), 0);
            cJSON_ReplaceItemInObjectCaseSensitive(host, "receipt_key", cJSON_CreateString(pem[1].data));
            cJSON_ArrayForEach (run, ev_path(r, "runs")) {
                cJSON *rc = cJSON_GetObjectItemCaseSensitive(run, "receipt");
                if (rc == second)
                    continue;
                cJSON_DeleteItemFromObjectCaseSensitive(rc, "signature");
                ck_assert_int_eq(pybox_sign_receipt(rc, keys[1], &err), 0);
            }
        } else if (variant == 2) { /* or naming no key, as records from before signing */
            cJSON_DeleteItemFromObjectCaseSensitive(host, "receipt_key");
        }
        char name[80];
        store(r, name);
        FILE *quiet = fopen("/dev/null", "we");
        ev_write_pages(dir, limits, quiet);
        fclose(quiet);
        char report[4096];
        int bad = check(report, sizeof report);
        if (variant == 0)
            ck_assert_msg(bad > 0 && strstr(report, "runs.1.receipt: signature does not match"), "%s", report);
        else
            ck_assert_msg(bad == 0, "variant %d: %s", variant, report);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/" EV_RECORDS "/%s", dir, name);
        ck_assert_int_eq(unlink(path), 0);
    }
    for (int i = 0; i < 2; i++) {
        pybox_buf_free(&pem[i]);
        pybox_key_free(keys[i]);
    }
}
END_TEST

Suite *suite_evidence(void)
{
    Suite *s = suite_create("evidence");
    TCase *tc = tcase_create("store and check");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, record_named_by_its_sha256);
    tcase_add_test(tc, pages_pass_the_check);
    tcase_add_test(tc, reliability_and_fault_pages);
    tcase_add_test(tc, one_changed_byte_fails);
    tcase_add_test(tc, hand_edited_page_fails);
    tcase_add_test(tc, stray_page_and_record_fail);
    tcase_add_test(tc, deleted_page_fails);
    tcase_add_test(tc, failed_attempt_kept_and_listed);
    tcase_add_test(tc, a_column_per_backend);
    tcase_add_test(tc, a_column_per_kind_of_host);
    tcase_add_test(tc, a_column_for_rootless_runs);
    tcase_add_test(tc, paths_and_cells);
    tcase_add_test(tc, not_a_record_is_a_problem);
    tcase_add_test(tc, verdict_must_follow_from_runs);
    tcase_add_test(tc, fifo_in_records_not_waited_on);
    tcase_add_test(tc, a_record_carrying_its_own_key_detects_corruption_not_forgery);
    tcase_add_test(tc, numbers_shown_plainly);
    tcase_add_test(tc, receipts_verified_against_the_campaigns_key);
    suite_add_tcase(s, tc);
    return s;
}
