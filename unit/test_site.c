/* SPDX-License-Identifier: MIT */
/* Unit tests for the evidence site (campaign/site.h): the HTML pages and a walkthrough
 * page per run come from the records only, whatever the program printed is escaped,
 * the check catches a changed, missing or stray site page, and the Markdown becomes the
 * same page in HTML. Real files in a temporary folder. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../campaign/evidence.h"
#include "../campaign/site.h"
#include "../pybox/util.h"
#include "suites.h"

static const char limits[] = "## What is not claimed\n\n- Everything else,\n  over two lines.\n";

#define RUN_ID "0123456789abcdef0123456789abcdef"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/pybox-unit-site-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    unit_rm_tree(dir);
}

/* A record of one exec run whose receipt has samples, and whose program printed said. */
static void store(const char *started, const char *run_id, const char *said, char name[80])
{
    char text[4096];
    ck_assert_int_eq(
        pybox_fmt(text, sizeof text,
                  "{\"schema\":\"pybox.evidence/1\",\"campaign\":\"c0ffee\","
                  "\"case\":{\"id\":\"clean-exit\",\"kind\":\"receipt\",\"title\":\"Clean <exit>\","
                  "\"claim\":\"exits | by itself\",\"program\":\"print('<b>hi</b>')\\n\","
                  "\"show\":[{\"label\":\"said\",\"path\":\"receipt.said.stdout.text\"}]},"
                  "\"started\":\"%s\",\"finished\":\"%s\",\"host\":{\"kernel\":\"6.1\",\"cpus\":2,\"cgroup\":\"v1\","
                  "\"engine\":\"Docker\"},\"runs\":[{\"name\":\"run\",\"via\":\"exec\",\"at\":\"%s\",\"ok\":true,"
                  "\"expect\":[],\"receipt\":{\"schema\":\"pybox.receipt/2\",\"run_id\":\"%s\",\"status\":"
                  "\"TARGET_EXIT_OBSERVED\",\"exit_code\":0,\"asked\":{\"image\":{\"name\":\"stdlib\"},\"limits\":"
                  "{\"memory_bytes\":134217728,\"pids\":32,\"cpus\":0.5,\"timeout_s\":2,\"box_timer_s\":3},"
                  "\"policy\":{\"network\":\"none\"}},\"seen\":{\"backend\":\"docker\",\"box\":{\"verified\":true,"
                  "\"settings_checked\":70,\"removed\":true,\"confirmed_gone\":true},\"kernel\":{\"final\":"
                  "{\"taken\":true,\"memory_peak_bytes\":3000000},\"samples\":{\"count\":2,\"interval_ms\":50,"
                  "\"columns\":[\"t_ms\",\"memory_bytes\",\"pids\",\"cpu_ns\"],\"rows\":[[0,1000,1,0],[50,2000,2,"
                  "1000000]]}},\"clock\":\"none\",\"timings_ms\":{\"before\":3,\"housekeeping\":2,\"create\":11,"
                  "\"verify\":1,\"run\":40,\"remove\":9,\"total\":80}},\"said\":{\"stdout\":{\"total_bytes\":30,"
                  "\"text\":\"%s\"}}}}],\"agree\":[],\"verdict\":\"pass\"}",
                  started, started, started, run_id, said),
        0);
    cJSON *r = cJSON_Parse(text);
    ck_assert_msg(r != NULL, "fixture: %s", text);
    pybox_error_t err = {0};
    ck_assert_msg(ev_record_store(dir, r, name, &err) == 0, "%s", err.msg);
    cJSON_Delete(r);
}

/* The record of store(), then every string that reaches a page set to an attack. */
static void store_hostile(const char *run_id, char name[80])
{
    char plain[80], path[256];
    store("2026-01-01T00:00:00.000Z", run_id, "hello\\n", plain);
    snprintf(path, sizeof path, "%s/records/%s", dir, plain);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ck_assert_int_eq(unlink(path), 0);
    cJSON *r = cJSON_Parse(text);
    ck_assert_ptr_nonnull(r);
    /* what the red team's record did, and the same in every other string */
    cJSON_AddStringToObject(r, "backend", "[docs](javascript&#58;alert&#40;1&#41;.md)");
    cJSON *host = cJSON_GetObjectItemCaseSensitive(r, "host");
    cJSON *bk = cJSON_AddObjectToObject(host, "backends");
    cJSON_AddStringToObject(bk, "[k](javascript:alert(2)) <script>alert(3)</script>", "[v](javascript:alert(4))");
    cJSON_AddStringToObject(bk, "docker", "\" onmouseover=\"alert(5)");
    cJSON_ReplaceItemInObject(host, "kernel", cJSON_CreateString("' onfocus='alert(6)"));
    cJSON_ReplaceItemInObject(r, "campaign", cJSON_CreateString("[c](//example.org/x.md)"));
    cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "case");
    cJSON_ReplaceItemInObject(c, "title",
                              cJSON_CreateString("[t](records/../../../etc/passwd) <img src=x onerror=alert(7)>"));
    cJSON_ReplaceItemInObject(c, "claim", cJSON_CreateString("[m](x.md#\"><script>alert(8)</script>)"));
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "show"), 0), "label",
                              cJSON_CreateString("`x` [l](&#x6a;avascript:alert(9).md)"));
    cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "runs"), 0);
    cJSON_ReplaceItemInObject(run, "name", cJSON_CreateString("[n](javascript%3aalert(10).md)"));
    cJSON *rc = cJSON_GetObjectItemCaseSensitive(run, "receipt");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rc, "asked"), "image"),
                              "name", cJSON_CreateString("\"><script>alert(11)</script>"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(rc, "seen"), "backend",
                              cJSON_CreateString("javascript:alert(12)"));
    pybox_error_t err = {0};
    ck_assert_msg(ev_record_store(dir, r, name, &err) == 0, "%s", err.msg);
    cJSON_Delete(r);
}

static char *slurp(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void put(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static int check(char *report, size_t len)
{
    FILE *f = fmemopen(report, len, "w");
    ck_assert_ptr_nonnull(f);
    int bad = ev_check(dir, limits, f);
    fclose(f);
    return bad;
}

START_TEST(site_pages_from_the_records)
{
    char name[80], report[4096] = "";
    store("2026-01-01T00:00:00.000Z", RUN_ID, "hello\\n", name);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    static const char *const want[] = {"site/index.html", "site/style.css", "site/receipt.html",
                                       "site/restriction.html", "site/runs/" RUN_ID ".html"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(slurp(want[i]) != NULL, "%s is missing", want[i]);
    /* The index is the Markdown index in HTML: its table, its links, the limits' list. */
    const char *ix = slurp("site/index.html");
    ck_assert_ptr_nonnull(strstr(ix, "<h1>Evidence and limits</h1>"));
    ck_assert_ptr_nonnull(strstr(ix, "<a href=\"receipt.html\">receipt.html</a>"));
    ck_assert_ptr_nonnull(strstr(ix, "<li>Everything else,\nover two lines.</li>"));
    ck_assert_ptr_nonnull(strstr(ix, "<a href=\"runs/" RUN_ID ".html\">"));
    ck_assert_ptr_nonnull(strstr(ix, "<link rel=\"stylesheet\" href=\"style.css\">"));
    /* The kind's page links the record one folder up, and the run's walkthrough. */
    const char *kind = slurp("site/receipt.html");
    char link[160];
    snprintf(link, sizeof link, "<a href=\"../records/%s\">%.8s</a>", name, name);
    ck_assert_msg(strstr(kind, link) != NULL, "no record link in %s", kind);
    ck_assert_ptr_nonnull(strstr(kind, "walkthrough: <a href=\"runs/" RUN_ID ".html\">run</a>"));
    ck_assert_ptr_null(strstr(kind, "exits \\| by itself")); /* no Markdown escape left */
    ck_assert_ptr_nonnull(strstr(kind, "exits | by itself"));
    /* The walkthrough: ten steps, each phase's time, the chart inline, the receipt. */
    const char *run = slurp("site/runs/" RUN_ID ".html");
    for (int k = 1; k <= 10; k++) {
        char step[64];
        snprintf(step, sizeof step, "<li id=\"step-%d\"><span class=\"num\">%d</span>", k, k);
        ck_assert_msg(strstr(run, step) != NULL, "step %d missing", k);
    }
    ck_assert_ptr_nonnull(strstr(run, "<span>create</span><span>11.0 ms</span>"));
    ck_assert_ptr_nonnull(strstr(run, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_ptr_nonnull(strstr(run, "limit 128 MiB"));
    ck_assert_ptr_nonnull(strstr(run, "&quot;run_id&quot;:\t&quot;" RUN_ID "&quot;"));
    ck_assert_ptr_nonnull(strstr(run, "<a href=\"../../records/"));
    ck_assert_ptr_nonnull(strstr(run, "href=\"../style.css\""));
    ck_assert_ptr_nonnull(strstr(run, "Clean &lt;exit&gt;: run"));
    ck_assert_ptr_nonnull(strstr(run, "print(&#39;&lt;b&gt;hi&lt;/b&gt;&#39;)"));
}
END_TEST

START_TEST(program_output_never_markup)
{
    char name[80], report[4096] = "";
    store("2026-01-01T00:00:00.000Z", RUN_ID,
          "<script>alert(1)</script><img src=x onerror=alert(2)>&amp;\\u001b[31m\\\"</pre>", name);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    static const char *const pages[] = {"site/index.html", "site/receipt.html", "site/runs/" RUN_ID ".html"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        const char *p = slurp(pages[i]);
        ck_assert_msg(p != NULL, "%s is missing", pages[i]);
        ck_assert_msg(strstr(p, "<script") == NULL, "%s holds a script", pages[i]);
        ck_assert_msg(strstr(p, "<img") == NULL, "%s holds an image", pages[i]);
        ck_assert_msg(strstr(p, "\x1b") == NULL, "%s holds an escape", pages[i]);
    }
    const char *run = slurp("site/runs/" RUN_ID ".html");
    ck_assert_ptr_nonnull(strstr(run, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_nonnull(strstr(run, "&amp;amp;"));
    /* only PyBox's own <pre> blocks close: the program's "</pre>" is text */
    ck_assert_ptr_nonnull(strstr(run, "&lt;/pre&gt;"));
}
END_TEST

START_TEST(check_covers_the_site)
{
    char name[80], report[4096] = "";
    store("2026-01-01T00:00:00.000Z", RUN_ID, "hello\\n", name);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    /* one figure changed by hand on a walkthrough */
    ck_assert_ptr_nonnull(slurp("site/runs/" RUN_ID ".html"));
    char *page = strdup(slurp("site/runs/" RUN_ID ".html"));
    char *at = strstr(page, "11.0 ms");
    ck_assert_ptr_nonnull(at);
    at[0] = '9';
    put("site/runs/" RUN_ID ".html", page);
    free(page);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "site/runs/" RUN_ID ".html: line") != NULL, "%s", report);
    /* a page deleted, a page added */
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/site/style.css", dir);
    ck_assert_int_eq(unlink(path), 0);
    put("site/runs/fedcba9876543210fedcba9876543210.html", "<p>made up</p>");
    put("site/extra.html", "<p>made up</p>");
    report[0] = '\0';
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "site/style.css: missing") != NULL, "%s", report);
    ck_assert_msg(strstr(report, "site/runs/fedcba9876543210fedcba9876543210.html: a page no record renders to") !=
                      NULL,
                  "%s", report);
    ck_assert_msg(strstr(report, "site/extra.html: a page no record renders to") != NULL, "%s", report);
    /* Writing the pages again takes away what no record renders. */
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    report[0] = '\0';
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    ck_assert_ptr_null(slurp("site/extra.html"));
}
END_TEST

START_TEST(superseded_attempt_has_no_page)
{
    char first[80], second[80], report[4096] = "";
    store("2026-01-01T00:00:00.000Z", "11111111111111111111111111111111", "old\\n", first);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_ptr_nonnull(slurp("site/runs/11111111111111111111111111111111.html"));
    store("2026-01-02T00:00:00.000Z", RUN_ID, "new\\n", second);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    ck_assert_ptr_null(slurp("site/runs/11111111111111111111111111111111.html"));
    ck_assert_ptr_nonnull(slurp("site/runs/" RUN_ID ".html"));
}
END_TEST

START_TEST(site_as_a_link_refused)
{
    char name[80], report[4096] = "";
    store("2026-01-01T00:00:00.000Z", RUN_ID, "hello\\n", name);
    char path[256];
    snprintf(path, sizeof path, "%s/site", dir);
    ck_assert_int_eq(symlink("/tmp", path), 0);
    FILE *null = fopen("/dev/null", "w");
    ck_assert_int_lt(ev_write_pages(dir, limits, null), 0); /* nothing written through the link */
    fclose(null);
    ck_assert_int_gt(check(report, sizeof report), 0);
    ck_assert_msg(strstr(report, "site: not a folder") != NULL, "%s", report);
}
END_TEST

/* Every tag of a page: no script, no handler, no style attribute, no source; every href a
 * safe path (letters, digits, '.', '_', '-', '/', a fragment) that no browser decodes. */
static void tags_are_safe(const char *name, const char *page)
{
    for (const char *p = strchr(page, '<'); p != NULL; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        ck_assert_msg(end != NULL, "%s: a '<' never closed", name);
        const char *t = p + 1;
        if (strncmp(t, "!--", 3) == 0) { /* the page's note */
            p = strstr(p, "-->");
            ck_assert_ptr_nonnull(p);
            continue;
        }
        if (strncmp(t, "!DOCTYPE html>", 14) == 0 || *t == '/')
            continue;
        ck_assert_msg(strncasecmp(t, "script", 6) != 0 && strncasecmp(t, "img", 3) != 0, "%s: <%.40s", name, t);
        /* the attributes: name="value", value without '<' or '"' */
        const char *a = t + strcspn(t, " >");
        while (a < end) {
            a += strspn(a, " \n");
            if (a >= end || *a == '/' || *a == '>')
                break;
            size_t nl = strcspn(a, "= >\n");
            ck_assert_msg(nl > 0 && strncasecmp(a, "on", 2) != 0, "%s: attribute %.40s", name, a);
            if (a[nl] != '=') { /* a name alone: <details open> */
                a += nl;
                continue;
            }
            ck_assert_msg(a[nl + 1] == '"', "%s: attribute %.40s", name, a);
            const char *v = a + nl + 2, *q = strchr(v, '"');
            ck_assert_msg(q != NULL && q < end + 1, "%s: attribute %.40s", name, a);
            ck_assert_msg(strncasecmp(a, "on", 2) != 0 && strncasecmp(a, "style", 5) != 0 &&
                              strncasecmp(a, "src", 3) != 0,
                          "%s: attribute %.*s", name, (int)(q - a + 1), a);
            if (nl == 4 && strncmp(a, "href", 4) == 0) {
                size_t ok = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/#-");
                ck_assert_msg(v + ok == q, "%s: href=\"%.*s\"", name, (int)(q - v), v);
                ck_assert_msg(memmem(v, (size_t)(q - v), "//", 2) == NULL, "%s: href=\"%.*s\"", name, (int)(q - v), v);
            }
            a = q + 1;
            end = strchr(a, '>'); /* a '>' inside a value is text, as far as the scan goes */
        }
        p = end;
    }
}

START_TEST(hostile_record_strings_stay_text)
{
    char name[80], report[8192] = "";
    store_hostile(RUN_ID, name);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    ck_assert_msg(check(report, sizeof report) == 0, "%s", report);
    static const char *const pages[] = {"site/index.html", "site/receipt.html", "site/restriction.html",
                                        "site/runs/" RUN_ID ".html"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        const char *p = slurp(pages[i]);
        ck_assert_msg(p != NULL, "%s is missing", pages[i]);
        tags_are_safe(pages[i], p);
        ck_assert_msg(strstr(p, "javascript&#58;") == NULL || strstr(p, "href=\"javascript") == NULL, "%s", pages[i]);
        ck_assert_msg(strstr(p, "<meta http-equiv=\"Content-Security-Policy\" content=\"" EV_SITE_CSP "\">") != NULL,
                      "%s has no policy", pages[i]);
        ck_assert_msg(strstr(p, "<meta http-equiv=\"Content-Security-Policy\"") < strstr(p, "<link"),
                      "%s: the policy comes after what it governs", pages[i]);
    }
    /* The strings are there, as text. */
    const char *kind = slurp("site/receipt.html");
    ck_assert_ptr_nonnull(strstr(kind, "On [docs](javascript&amp;#58;alert&amp;#40;1&amp;#41;.md)</th>"));
    ck_assert_ptr_nonnull(strstr(kind, "[k](javascript:alert(2)) &lt;script&gt;alert(3)&lt;/script&gt;: "));
    const char *md = slurp("receipt.md");
    ck_assert_ptr_nonnull(strstr(md, "On \\[docs\\](javascript&amp;\\#58;alert&amp;\\#40;1&amp;\\#41;.md) |"));
}
END_TEST

/* The policy of every page: present, first, and the same on the pages of every kind. */
START_TEST(every_page_has_the_policy)
{
    char name[80];
    store("2026-01-01T00:00:00.000Z", RUN_ID, "hello\\n", name);
    ck_assert_int_eq(ev_write_pages(dir, limits, stderr), 0);
    static const char *const pages[] = {"site/index.html", "site/receipt.html", "site/mcp.html",
                                        "site/runs/" RUN_ID ".html"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        const char *p = slurp(pages[i]);
        ck_assert_ptr_nonnull(p);
        const char *meta = strstr(p, "<meta http-equiv=\"Content-Security-Policy\" content=\"" EV_SITE_CSP "\">");
        ck_assert_msg(meta != NULL && meta < strstr(p, "<title>"), "%s", pages[i]);
        tags_are_safe(pages[i], p);
    }
    ck_assert_ptr_null(strstr(EV_SITE_CSP, "unsafe"));
    ck_assert_ptr_nonnull(strstr(EV_SITE_CSP, "script-src 'none'"));
}
END_TEST

static void html_is(const char *md, const char *want)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ev_md_html(&b, md);
    ck_assert(pybox_buf_ok(&b));
    ck_assert_str_eq(b.data ? b.data : "", want);
    pybox_buf_free(&b);
}

START_TEST(markdown_as_html)
{
    html_is("# A *b* `c<d>`\n", "<h1>A <em>b</em> <code>c&lt;d&gt;</code></h1>\n");
    html_is("one\ntwo\n\nthree\n", "<p>one\ntwo</p>\n<p>three</p>\n");
    html_is("| a | b |\n|---|---|\n| x \\| y | **z**<br>&lt;w&gt; |\n",
            "<table>\n<thead><tr><th>a</th><th>b</th></tr>\n</thead>\n<tbody>\n"
            "<tr><td>x | y</td><td><strong>z</strong><br>&lt;w&gt;</td></tr>\n</tbody></table>\n");
    html_is("[mcp.md](mcp.md) [x](records/ab.json) [y](README.md)\n",
            "<p><a href=\"mcp.html\">mcp.html</a> <a href=\"../records/ab.json\">x</a> "
            "<a href=\"index.html\">y</a></p>\n");
    /* Links that leave the evidence folder, or carry markup, are text only. */
    html_is("[a](http://example.org) [b](javascript:alert(1)) [c](/etc/passwd) [d](../x) [e](x\"y)\n",
            "<p>a b) c d e</p>\n");
    /* Only a safe path is linked: nothing a browser decodes, no "//", no ".." anywhere. */
    html_is("[a](javascript&#58;alert&#40;1&#41;.md) [b](records/../../x) [c](records//x.json) [d](x%3a.md) "
            "[e](&#x6a;s.md) [f](records/./x) [g](x.md/) [h](x.md#a\"b) [i](x y.md)\n",
            "<p>a b c d e f g h i</p>\n");
    html_is("[a](x.md#step-1) [b](records/x.json) [c](mcp.md)\n",
            "<p><a href=\"x.html#step-1\">a</a> <a href=\"../records/x.json\">b</a> <a href=\"mcp.html\">c</a></p>\n");
    html_is("<script>x</script> & \"q\" \\_u\\_\n", "<p>&lt;script&gt;x&lt;/script&gt; &amp; &quot;q&quot; _u_</p>\n");
    html_is("<!-- a note -->\n- one\n  more\n- two\n", "<ul>\n<li>one\nmore</li>\n<li>two</li>\n</ul>\n");
    html_is("**open *both", "<p><strong>open <em>both</em></strong></p>\n");
}
END_TEST

Suite *suite_site(void)
{
    Suite *s = suite_create("site");
    TCase *tc = tcase_create("site");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, site_pages_from_the_records);
    tcase_add_test(tc, program_output_never_markup);
    tcase_add_test(tc, check_covers_the_site);
    tcase_add_test(tc, superseded_attempt_has_no_page);
    tcase_add_test(tc, site_as_a_link_refused);
    tcase_add_test(tc, markdown_as_html);
    tcase_add_test(tc, hostile_record_strings_stay_text);
    tcase_add_test(tc, every_page_has_the_policy);
    suite_add_tcase(s, tc);
    return s;
}
