/* SPDX-License-Identifier: MIT */
/* Charts end to end: pybox exec --chart writes the chart of the very receipt it prints,
 * a chart path that cannot be used is refused before any box, and pybox chart draws a
 * receipt or refuses it with nothing on stdout. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "suites.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/pybox-itest-chart-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    static char buf[4 << 20];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static int xmllint(const char *path)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "xmllint --noout --nonet %s", path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* What the tests' installation holds on the backend in use (boxes and volumes of the
 * engine, or native leaves and staging folders). */
static int boxes_of_this_install(void)
{
    return itest_install_left(itest_state()->install_id, itest_state()->dir);
}

START_TEST(exec_chart_is_the_printed_receipts)
{
    char chart[128];
    snprintf(chart, sizeof chart, "%s/run.svg", dir);
    const char *extra[] = {"--chart", chart, NULL};
    itest_run_t r;
    itest_exec("b = bytearray(40 * 1024 * 1024)\nimport time\ntime.sleep(0.3)\nprint(len(b))\n", extra, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(xmllint(chart), 0);
    size_t len = 0;
    char *svg = slurp(chart, &len);
    ck_assert_ptr_nonnull(svg);
    ck_assert_ptr_nonnull(strstr(svg, itest_str(r.receipt, "run_id")));
    ck_assert_ptr_nonnull(strstr(svg, "limit 128 MiB"));
    /* pybox chart of the receipt printed gives the very same bytes. */
    itest_run_t c;
    const char *args[] = {"chart", NULL};
    itest_pybox(r.out, r.out_len, args, NULL, &c);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(c.out_len, len);
    ck_assert_int_eq(memcmp(c.out, svg, len), 0);
    itest_run_free(&c);
    /* and of the receipt's file, named */
    char saved[128];
    snprintf(saved, sizeof saved, "%s/receipt.json", dir);
    FILE *f = fopen(saved, "w");
    fwrite(r.out, 1, r.out_len, f);
    fclose(f);
    const char *named[] = {"chart", saved, NULL};
    itest_pybox("", 0, named, NULL, &c);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(c.out_len, len);
    itest_run_free(&c);
    itest_run_free(&r);
}
END_TEST

START_TEST(exec_chart_with_the_terminal_receipt)
{
    char chart[128];
    snprintf(chart, sizeof chart, "%s/run.svg", dir);
    const char *args[] = {"exec", "--chart", chart, NULL};
    itest_run_t r;
    itest_pybox("print('hello')\n", 15, args, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(itest_contains(r.out, r.out_len, "PyBox receipt"), "%s", r.out);
    ck_assert_int_eq(xmllint(chart), 0);
    itest_run_free(&r);
}
END_TEST

static void refused(const char *chart, const char *expect)
{
    int before = boxes_of_this_install();
    const char *args[] = {"exec", "--json", "--chart", chart, NULL};
    itest_run_t r;
    itest_pybox("print('never')\n", 15, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "pybox: refused: --chart"), "%s", r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, expect), "stderr lacks '%s': %s", expect, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
    ck_assert_int_eq(boxes_of_this_install(), before);
    itest_run_free(&r);
}

START_TEST(unusable_chart_path_refused_before_any_box)
{
    char p[128];
    snprintf(p, sizeof p, "%s/missing/run.svg", dir);
    refused(p, "its folder does not exist");
    snprintf(p, sizeof p, "%s/mine.svg", dir);
    FILE *f = fopen(p, "w");
    fputs("mine", f);
    fclose(f);
    refused(p, "exists already");
    size_t len = 0;
    ck_assert_str_eq(slurp(p, &len), "mine");
    refused(dir, "exists already");
}
END_TEST

/* The chart goes to the folder that was checked before the box was built: that folder
 * moved away while the program runs and another made under its name, the chart is
 * written into the one checked, nothing into the new one. */
START_TEST(exec_chart_goes_to_the_folder_checked)
{
    char sub[128], moved[128], chart[160], p[192];
    snprintf(sub, sizeof sub, "%s/charts", dir);
    snprintf(moved, sizeof moved, "%s/charts-checked", dir);
    snprintf(chart, sizeof chart, "%s/run.svg", sub);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    const char *prog = "import subprocess\n"
                       "subprocess.run(['python3', '-c', 'import time; time.sleep(30)', 'pybox-chart-marker'])\n";
    const char *args[] = {"exec", "--json", "--timeout", "2", "--chart", chart, NULL};
    double since = itest_wall();
    itest_job_t job;
    itest_start(prog, strlen(prog), args, NULL, &job);
    char id[65];
    int seen = itest_box_wait_running(since, id, "pybox-chart-marker", 30);
    /* the folder swapped while the box runs (PyBox's deadline ends it afterwards) */
    ck_assert_int_eq(rename(sub, moved), 0);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    itest_run_t r;
    itest_finish(&job, &r);
    ck_assert_msg(seen == 0, "the program never ran");
    ck_assert_msg(r.status == 124, "exit %d: %s", r.status, r.err);
    snprintf(p, sizeof p, "%s/run.svg", moved);
    ck_assert_int_eq(xmllint(p), 0);
    size_t len = 0;
    char *svg = slurp(p, &len);
    ck_assert_ptr_nonnull(svg);
    ck_assert_ptr_nonnull(strstr(svg, itest_str(r.receipt, "run_id")));
    struct stat sb;
    ck_assert_int_ne(lstat(chart, &sb), 0); /* nothing in the folder made under the name */
    itest_run_free(&r);
}
END_TEST

static void chart_refused(const char *input, const char *const *args, const char *expect)
{
    itest_run_t r;
    itest_pybox(input, strlen(input), args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_uint_eq(r.out_len, 0); /* nothing half drawn */
    ck_assert_msg(itest_contains(r.err, r.err_len, expect), "stderr lacks '%s': %s", expect, r.err);
    itest_run_free(&r);
}

START_TEST(chart_of_bad_input_refused)
{
    const char *args[] = {"chart", NULL};
    chart_refused("not json", args, "not JSON");
    chart_refused("{\"schema\":\"pybox.receipt/2\",\"status\":\"REFUSED\",\"exit_code\":125}\n", args, "seen.kernel");
    chart_refused("{\"schema\":\"pybox.receipt/2\",\"seen\":{\"kernel\":{\"samples\":{\"columns\":[\"t_ms\"],"
                  "\"rows\":[[5],[1]]}}}}",
                  args, "row 2: out of time order");
    char p[128];
    snprintf(p, sizeof p, "%s/none.json", dir);
    const char *missing[] = {"chart", p, NULL};
    chart_refused("", missing, "cannot be opened");
    const char *folder[] = {"chart", dir, NULL};
    chart_refused("", folder, "not a regular file");
    const char *two[] = {"chart", p, p, NULL};
    chart_refused("", two, "usage: pybox chart");
}
END_TEST

Suite *itest_suite_chart(void)
{
    Suite *s = suite_create("chart");
    TCase *tc = itest_tcase(s, "chart", 120,
                            ITEST_TESTS(exec_chart_is_the_printed_receipts, exec_chart_with_the_terminal_receipt,
                                        unusable_chart_path_refused_before_any_box,
                                        exec_chart_goes_to_the_folder_checked, chart_of_bad_input_refused));
    itest_fixture(tc, setup, teardown);
    return s;
}
