/* SPDX-License-Identifier: MIT */
/* Unit tests for charts (pybox/chart.h): the SVG is well-formed XML by an independent
 * parser (xmllint) whatever the receipt's text holds, the same receipt gives the same
 * bytes, limits, clocks and the final reading are drawn and labelled, and receipts that
 * cannot be drawn are refused with the problem named. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/chart.h"
#include "../pybox/cli/chart.h"
#include "suites.h"

/* A receipt of a run as pybox exec --json prints it, cut to what a chart reads. */
static const char receipt_text[] =
    "{\"schema\":\"pybox.receipt/2\",\"run_id\":\"0123456789abcdef0123456789abcdef\","
    "\"status\":\"SUPERVISOR_KILL_OBSERVED\",\"exit_code\":124,"
    "\"asked\":{\"at\":\"2026-01-02T03:04:05.678Z\",\"image\":{\"name\":\"stdlib\",\"id\":\"sha256:00\"},"
    "\"limits\":{\"memory_bytes\":134217728,\"swap_bytes\":0,\"pids\":32,\"cpus\":0.5,\"timeout_s\":0.4,"
    "\"box_timer_s\":1.4}},"
    "\"seen\":{\"backend\":\"docker\",\"kernel\":{\"cgroup\":{\"version\":\"v1\",\"path\":\"/sys/fs/cgroup\"},"
    "\"armed_ms\":0.3,\"final\":{\"taken\":true,\"memory_peak_bytes\":140000000,\"memory_bytes\":1000000,"
    "\"oom_kills\":1,\"pids_peak\":32,\"pids_peak_source\":\"kernel\",\"pids_refused\":6,\"cpu_ns\":300000000,"
    "\"cpu_periods\":5,\"cpu_throttled_periods\":4,\"cpu_throttled_ns\":1000},"
    "\"samples\":{\"count\":5,\"interval_ms\":50,\"columns\":[\"t_ms\",\"memory_bytes\",\"pids\",\"cpu_ns\"],"
    "\"rows\":[[0,1000000,1,1000000],[50,20000000,8,26000000],[100,60000000,null,51000000],"
    "[150,120000000,32,76000000],[200,134217728,32,101000000]]}},"
    "\"clock\":\"host_deadline\",\"host_deadline_passed\":true,"
    "\"init_record\":{\"exit_code\":137,\"signal\":9,\"box_timer_fired\":false,\"program_ms\":410},"
    "\"timings_ms\":{\"run\":412.5,\"total\":600}}}";

static cJSON *receipt(void)
{
    cJSON *j = cJSON_Parse(receipt_text);
    ck_assert_ptr_nonnull(j);
    return j;
}

static void set(cJSON *j, const char *obj_path, const char *key, cJSON *v)
{
    cJSON *o = j;
    for (const char *p = obj_path; *p != '\0';) {
        size_t n = strcspn(p, ".");
        char seg[64];
        ck_assert_uint_lt(n, sizeof seg);
        memcpy(seg, p, n);
        seg[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, seg);
        p += n + (p[n] == '.');
    }
    ck_assert_ptr_nonnull(o);
    if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else
        cJSON_AddItemToObject(o, key, v);
}

/* The chart as a string (the caller frees), asserted drawn. */
static char *draw(const cJSON *j)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_chart_svg(j, &b, &err) == 0, "refused: %s", err.msg);
    ck_assert(pybox_buf_ok(&b));
    char *s = pybox_buf_steal(&b);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* xmllint (Debian's libxml2-utils) parses the text: 0 when it is well-formed XML. */
static int xmllint(const char *text)
{
    char path[] = "/tmp/pybox-unit-chart-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(text);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    ck_assert_msg(access("/usr/bin/xmllint", X_OK) == 0, "xmllint is missing: apt-get install libxml2-utils");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/usr/bin/xmllint", "xmllint", "--noout", "--nonet", path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

START_TEST(chart_is_xml_whatever_the_names)
{
    cJSON *j = receipt();
    /* A receipt given to `pybox chart` is anyone's: every text in it may try to break out. */
    set(j, "asked.image", "name", cJSON_CreateString("<&\"'>]]><script>x</script>\x01\xff"));
    set(j, "", "run_id", cJSON_CreateString("\"><svg onload=alert(1)>"));
    set(j, "", "status", cJSON_CreateString("A&B<C>"));
    set(j, "seen", "backend", cJSON_CreateString("--><!--"));
    char *svg = draw(j);
    ck_assert_int_eq(xmllint(svg), 0);
    ck_assert_ptr_nonnull(strstr(svg, "&lt;&amp;&quot;&#39;&gt;]]&gt;&lt;script&gt;"));
    ck_assert_ptr_null(strstr(svg, "<script"));
    ck_assert_ptr_null(strstr(svg, "<svg onload"));
    ck_assert_ptr_nonnull(strstr(svg, "&quot;&gt;&lt;svg onload=alert(1)&gt;"));
    ck_assert_ptr_null(strstr(svg, "\xff"));
    ck_assert_ptr_nonnull(strstr(svg, "A&amp;B&lt;C&gt;"));
    ck_assert_int_eq(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), 0);
    free(svg);
    cJSON_Delete(j);
}
END_TEST

START_TEST(same_receipt_same_bytes)
{
    cJSON *j = receipt();
    char *a = draw(j);
    /* Printed and read back, as a receipt on disk is. */
    char *text = cJSON_Print(j);
    cJSON *k = cJSON_Parse(text);
    char *b = draw(k);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    free(text);
    cJSON_Delete(j);
    cJSON_Delete(k);
}
END_TEST

START_TEST(limits_clocks_and_final_reading_are_labelled)
{
    cJSON *j = receipt();
    char *svg = draw(j);
    ck_assert_int_eq(xmllint(svg), 0);
    /* Each limit is a dashed line with its value written beside it. */
    ck_assert_ptr_nonnull(strstr(svg, "limit 128 MiB"));
    ck_assert_ptr_nonnull(strstr(svg, "limit 32"));
    ck_assert_ptr_nonnull(strstr(svg, "quota 0.5 CPU"));
    ck_assert_ptr_nonnull(strstr(svg, "stroke-dasharray=\"6 4\""));
    /* The clock that fired, at its moment; the one that did not is not drawn. */
    ck_assert_ptr_nonnull(strstr(svg, "PyBox deadline 0.4 s"));
    ck_assert_ptr_null(strstr(svg, "box timer 1.4 s"));
    /* The final reading: its line and its values. */
    ck_assert_ptr_nonnull(strstr(svg, "final reading"));
    ck_assert_ptr_nonnull(strstr(svg, "peak 133.5 MiB"));
    ck_assert_ptr_nonnull(strstr(svg, "1 OOM kill"));
    ck_assert_ptr_nonnull(strstr(svg, "6 refused"));
    /* Axes say what they show. */
    ck_assert_ptr_nonnull(strstr(svg, "Memory in use (MiB)"));
    ck_assert_ptr_nonnull(strstr(svg, "Processes"));
    ck_assert_ptr_nonnull(strstr(svg, "CPU rate (CPUs)"));
    ck_assert_ptr_nonnull(strstr(svg, "seconds since the watcher was armed"));
    free(svg);

    set(j, "seen", "clock", cJSON_CreateString("box_timer"));
    set(j, "seen", "host_deadline_passed", cJSON_CreateFalse());
    set(j, "seen.init_record", "box_timer_fired", cJSON_CreateTrue());
    svg = draw(j);
    ck_assert_ptr_nonnull(strstr(svg, "box timer 1.4 s"));
    ck_assert_ptr_null(strstr(svg, "PyBox deadline 0.4 s"));
    free(svg);

    /* A test box relaxed to no limit: said, not drawn as a line. */
    set(j, "asked.limits", "pids", cJSON_CreateNull());
    svg = draw(j);
    ck_assert_ptr_null(strstr(svg, "limit 32"));
    ck_assert_ptr_nonnull(strstr(svg, "no limit"));
    free(svg);
    cJSON_Delete(j);
}
END_TEST

START_TEST(no_samples_still_a_chart)
{
    cJSON *j = receipt();
    cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "seen"), "kernel");
    cJSON_DeleteItemFromObjectCaseSensitive(k, "samples");
    cJSON_DeleteItemFromObjectCaseSensitive(k, "final");
    cJSON_ReplaceItemInObjectCaseSensitive(k, "cgroup", cJSON_CreateNull());
    cJSON_AddStringToObject(k, "not_read", "the box never started");
    char *svg = draw(j);
    ck_assert_int_eq(xmllint(svg), 0);
    ck_assert_ptr_nonnull(strstr(svg, "no samples"));
    ck_assert_ptr_nonnull(strstr(svg, "the box never started"));
    free(svg);
    cJSON_Delete(j);
}
END_TEST

static void refused(const char *text, const char *why)
{
    cJSON *j = cJSON_Parse(text);
    ck_assert_ptr_nonnull(j);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_adds(&b, "before ");
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_chart_svg(j, &b, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, why) != NULL, "'%s' lacks '%s'", err.msg, why);
    ck_assert(!pybox_buf_ok(&b)); /* nothing half drawn */
    pybox_buf_free(&b);
    cJSON_Delete(j);
}

/* A receipt with one change made to its text. */
static void refused_edit(const char *from, const char *to, const char *why)
{
    const char *at = strstr(receipt_text, from);
    ck_assert_ptr_nonnull(at);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_add(&b, receipt_text, (size_t)(at - receipt_text));
    pybox_buf_adds(&b, to);
    pybox_buf_adds(&b, at + strlen(from));
    ck_assert(pybox_buf_ok(&b));
    refused(b.data, why);
    pybox_buf_free(&b);
}

START_TEST(undrawable_receipts_are_refused)
{
    refused("[1,2]", "not a JSON object");
    refused("{\"schema\":\"pybox.evidence/1\"}", "not a PyBox receipt");
    refused("{\"schema\":\"pybox.receipt/2\",\"status\":\"REFUSED\",\"exit_code\":125}", "seen.kernel");
    refused_edit("[100,60000000,null,51000000]", "[10,60000000,null,51000000]", "row 3: out of time order");
    refused_edit("[100,60000000,null,51000000]", "[100,\"60000000\",null,51000000]", "row 3: memory_bytes");
    refused_edit("[100,60000000,null,51000000]", "[100,-5,null,51000000]", "row 3: memory_bytes");
    refused_edit("[100,60000000,null,51000000]", "[100,60000000]", "row 3: 2 values");
    refused_edit("\"columns\":[\"t_ms\",", "\"columns\":[", "t_ms");
    refused_edit("\"memory_bytes\":134217728,", "\"memory_bytes\":\"lots\",", "asked.limits.memory_bytes");

    /* More samples than any receipt holds. */
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    const char *rows = strstr(receipt_text, "[[0,");
    pybox_buf_add(&b, receipt_text, (size_t)(rows - receipt_text));
    pybox_buf_adds(&b, "[");
    for (int i = 0; i <= 1024; i++)
        pybox_buf_addf(&b, "%s[%d,1,1,1]", i ? "," : "", i);
    pybox_buf_adds(&b, strstr(rows, "]]") + 1);
    ck_assert(pybox_buf_ok(&b));
    refused(b.data, "1025 samples");
    pybox_buf_free(&b);
}
END_TEST

static void xml_is(const char *in, size_t max, int lines, const char *want)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_xml_text(&b, in, max, lines);
    ck_assert(pybox_buf_ok(&b));
    ck_assert_str_eq(b.data ? b.data : "", want);
    pybox_buf_free(&b);
}

START_TEST(xml_text_escapes)
{
    xml_is("<&>\"'", 0, 0, "&lt;&amp;&gt;&quot;&#39;");
    xml_is("a\x01z\x7f", 0, 0, "a\xef\xbf\xbdz\xef\xbf\xbd");
    xml_is("\xff", 0, 0, "\xef\xbf\xbd");
    xml_is("\xc0\x80", 0, 0, "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong NUL */
    xml_is("\xed\xa0\x80", 0, 0, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* a surrogate */
    xml_is("\xef\xbf\xbe", 0, 0, "\xef\xbf\xbd");                         /* U+FFFE: not an XML character */
    xml_is("é€😀", 0, 0, "é€😀");
    xml_is("a\nb\tc", 0, 0,
           "a\xef\xbf\xbd"
           "b\xef\xbf\xbd"
           "c");
    xml_is("a\nb\tc", 0, 1, "a\nb\tc");
    xml_is("abcdef", 3, 0, "abc…");
    xml_is("ééé", 2, 0, "éé…");
    xml_is("abc", 3, 0, "abc");
}
END_TEST

/* ---- the command line: pybox chart, pybox exec --chart ---- */

static char dir[64];

static void cli_setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/pybox-unit-chart-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void cli_teardown(void)
{
    unit_rm_tree(dir);
}

/* pybox_cli_chart_fd on a pipe holding text. */
static int chart_of_text(const char *text, pybox_buf_t *svg, pybox_error_t *err)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    size_t len = strlen(text);
    ck_assert_int_eq(write(p[1], text, len), (ssize_t)len);
    close(p[1]);
    pybox_buf_init(svg, 0);
    int rc = pybox_cli_chart_fd(p[0], "standard input", svg, err);
    close(p[0]);
    return rc;
}

static void text_refused(const char *text, const char *why)
{
    pybox_buf_t svg;
    pybox_error_t err = {0};
    ck_assert_int_eq(chart_of_text(text, &svg, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, why) != NULL, "'%s' lacks '%s'", err.msg, why);
    ck_assert_msg(strncmp(err.msg, "standard input: ", 16) == 0, "the input is not named: %s", err.msg);
    ck_assert(!pybox_buf_ok(&svg));
    pybox_buf_free(&svg);
}

START_TEST(receipt_text_read_or_refused)
{
    pybox_buf_t svg;
    pybox_error_t err = {0};
    char *with_newline = malloc(sizeof receipt_text + 1);
    snprintf(with_newline, sizeof receipt_text + 1, "%s\n", receipt_text); /* as pybox exec --json prints it */
    ck_assert_msg(chart_of_text(with_newline, &svg, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(strncmp(svg.data, "<svg ", 5), 0);
    pybox_buf_free(&svg);
    free(with_newline);
    text_refused("", "empty");
    text_refused("{\"schema\": \"pybox.receipt/2\", oops}", "not JSON (it stops making sense at byte ");
    text_refused("{} {}", "more than one JSON value (byte 3 on)");
    text_refused("{\"schema\":\"pybox.receipt/2\",\"status\":\"REFUSED\"}", "seen.kernel");
}
END_TEST

static void path_refused(const char *path, const char *why)
{
    pybox_error_t err = {0};
    pybox_cli_chart_dest_t d;
    ck_assert_int_eq(pybox_cli_chart_path_check(path, &d, &err), -1);
    ck_assert_int_eq(d.dirfd, -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, why) != NULL, "'%s' lacks '%s'", err.msg, why);
}

/* The chart's path checked, its folder held, in one step. */
static void dest_of(const char *path, pybox_cli_chart_dest_t *d)
{
    pybox_error_t err = {0};
    ck_assert_msg(pybox_cli_chart_path_check(path, d, &err) == 0, "%s", err.msg);
    ck_assert_int_ge(d->dirfd, 0);
}

START_TEST(chart_path_checked_before_any_box)
{
    char p[256];
    pybox_cli_chart_dest_t d;
    snprintf(p, sizeof p, "%s/run.svg", dir);
    dest_of(p, &d);
    pybox_cli_chart_close(&d);
    ck_assert_int_eq(d.dirfd, -1);
    path_refused("", "give the name of a new file");
    snprintf(p, sizeof p, "%s/no-such-folder/run.svg", dir);
    path_refused(p, "its folder does not exist");
    snprintf(p, sizeof p, "%s/", dir);
    path_refused(p, "names a folder");
    snprintf(p, sizeof p, "%s/..", dir);
    path_refused(p, "names a folder");
    path_refused(dir, "exists already");
    snprintf(p, sizeof p, "%s/taken.svg", dir);
    FILE *f = fopen(p, "w");
    fputs("mine", f);
    fclose(f);
    path_refused(p, "exists already");
    snprintf(p, sizeof p, "%s/taken.svg/run.svg", dir);
    path_refused(p, "its folder does not exist");
    /* A dangling link is something there too: never followed, never replaced. */
    snprintf(p, sizeof p, "%s/link.svg", dir);
    ck_assert_int_eq(symlink("/nonexistent/target", p), 0);
    path_refused(p, "exists already");
}
END_TEST

static size_t files_in(const char *d)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", d);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    unsigned long n = 0;
    ck_assert_int_eq(fscanf(p, "%lu", &n), 1);
    pclose(p);
    return n;
}

START_TEST(chart_written_whole_never_over_a_file)
{
    char p[256];
    cJSON *j = receipt();
    pybox_error_t err = {0};
    snprintf(p, sizeof p, "%s/run.svg", dir);
    pybox_cli_chart_dest_t d;
    dest_of(p, &d);
    ck_assert_msg(pybox_cli_chart_write(&d, j, &err) == 0, "%s", err.msg);
    pybox_cli_chart_close(&d);
    char *want = draw(j);
    FILE *f = fopen(p, "r");
    static char got[1 << 20];
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    ck_assert_str_eq(got, want);
    free(want);
    ck_assert_uint_eq(files_in(dir), 1); /* no temporary file left */
    /* The name taken during the run: refused, the file there kept as it was. */
    snprintf(p, sizeof p, "%s/taken.svg", dir);
    dest_of(p, &d);
    f = fopen(p, "w");
    fputs("mine", f);
    fclose(f);
    ck_assert_int_eq(pybox_cli_chart_write(&d, j, &err), -1);
    pybox_cli_chart_close(&d);
    ck_assert_msg(strstr(err.msg, "the name was taken during the run") != NULL, "%s", err.msg);
    f = fopen(p, "r");
    n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    ck_assert_str_eq(got, "mine");
    ck_assert_uint_eq(files_in(dir), 2);
    cJSON_Delete(j);
}
END_TEST

/* The chart's folder is the one checked: a folder swapped for another (or for a link
 * to one) under the same name while the program runs does not move the chart there. */
START_TEST(chart_goes_to_the_folder_checked)
{
    char sub[128], moved[128], other[128], p[256];
    snprintf(sub, sizeof sub, "%s/charts", dir);
    snprintf(moved, sizeof moved, "%s/charts-checked", dir);
    snprintf(other, sizeof other, "%s/elsewhere", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(mkdir(other, 0755), 0);
    cJSON *j = receipt();
    pybox_error_t err = {0};
    for (int link = 0; link < 2; link++) {
        snprintf(p, sizeof p, "%s/run%d.svg", sub, link);
        pybox_cli_chart_dest_t d;
        dest_of(p, &d);
        /* during the run: the folder moved away, another (or a link) put in its place */
        ck_assert_int_eq(rename(sub, moved), 0);
        ck_assert_int_eq(link ? symlink(other, sub) : mkdir(sub, 0755), 0);
        ck_assert_msg(pybox_cli_chart_write(&d, j, &err) == 0, "%s", err.msg);
        pybox_cli_chart_close(&d);
        snprintf(p, sizeof p, "%s/run%d.svg", moved, link);
        struct stat sb;
        ck_assert_msg(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode), "the chart is not in the folder checked");
        ck_assert_uint_eq(files_in(link ? other : sub), 0);
        /* back as it was, for the next round */
        ck_assert_int_eq(link ? unlink(sub) : rmdir(sub), 0);
        ck_assert_int_eq(rename(moved, sub), 0);
    }
    cJSON_Delete(j);
}
END_TEST

/* The rule of --output's parent: a folder that another user owns, or that others may
 * write to without the sticky bit, could be rearranged under the chart. */
START_TEST(chart_folder_others_could_change)
{
    char open_dir[128], p[256];
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    ck_assert_int_eq(mkdir(open_dir, 0755), 0);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    snprintf(p, sizeof p, "%s/run.svg", open_dir);
    path_refused(p, "its folder can be changed by another user (owner uid");
    ck_assert_int_eq(chmod(open_dir, 01777), 0);
    pybox_cli_chart_dest_t d;
    dest_of(p, &d);
    pybox_cli_chart_close(&d);
    if (geteuid() == 0) {
        ck_assert_int_eq(chmod(open_dir, 0755), 0);
        ck_assert_int_eq(chown(open_dir, 65534, 65534), 0);
        path_refused(p, "its folder can be changed by another user (owner uid 65534");
    }
}
END_TEST

Suite *suite_chart(void)
{
    Suite *s = suite_create("chart");
    TCase *tc = tcase_create("svg");
    tcase_add_test(tc, chart_is_xml_whatever_the_names);
    tcase_add_test(tc, same_receipt_same_bytes);
    tcase_add_test(tc, limits_clocks_and_final_reading_are_labelled);
    tcase_add_test(tc, no_samples_still_a_chart);
    tcase_add_test(tc, undrawable_receipts_are_refused);
    tcase_add_test(tc, xml_text_escapes);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("command line");
    tcase_add_checked_fixture(cli, cli_setup, cli_teardown);
    tcase_add_test(cli, receipt_text_read_or_refused);
    tcase_add_test(cli, chart_path_checked_before_any_box);
    tcase_add_test(cli, chart_written_whole_never_over_a_file);
    tcase_add_test(cli, chart_goes_to_the_folder_checked);
    tcase_add_test(cli, chart_folder_others_could_change);
    suite_add_tcase(s, cli);
    return s;
}
