/* SPDX-License-Identifier: MIT */
/* Files in and out through pybox exec against the real engine. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/cgroup.h"
#include "../pybox/escape.h"
#include "../pybox/native/native.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

static char work[64];

static void setup(void)
{
    snprintf(work, sizeof work, "/tmp/pybox-files-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work));
}

static void teardown(void)
{
    itest_remove_home(work); /* any folder: removed depth first, links not followed */
}

static void path_in(char *out, const char *name)
{
    ck_assert_int_eq(pybox_fmt(out, PATH_MAX, "%s/%s", work, name), 0);
}

/* `pybox exec option value` is refused with status 125 and an error that says says. */
static void refused(const char *option, const char *value, const char *says)
{
    const char *args[] = {"exec", option, value, NULL};
    itest_run_t r;
    itest_pybox("print(1)\n", 9, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, says), "%s", r.err);
    itest_run_free(&r);
}

static void write_file(const char *name, const char *data, size_t len)
{
    char p[PATH_MAX];
    path_in(p, name);
    FILE *f = fopen(p, "we");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NULL;
    char *buf = malloc(16 * 1024 * 1024);
    *len = fread(buf, 1, 16 * 1024 * 1024, f);
    fclose(f);
    return buf;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static const cJSON *entry_named(const cJSON *arr, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach (e, arr) {
        if (strcmp(itest_str(e, "name"), name) == 0)
            return e;
    }
    return NULL;
}

static int boxes_of_this_install(void)
{
    return itest_install_left(itest_state()->install_id, itest_state()->dir);
}

START_TEST(csv_in_two_files_back)
{
    write_file("data.csv", "city,n\nParis,3\nLyon,2\nParis,4\n", 30);
    char in[PATH_MAX], out[PATH_MAX];
    path_in(in, "data.csv");
    path_in(out, "result");
    const char *args[] = {"--input", in, "--output", out, NULL};
    itest_run_t r;
    itest_exec("import csv, os, collections\n"
               "t = collections.Counter()\n"
               "for row in csv.DictReader(open('/box/in/data.csv')):\n    t[row['city']] += int(row['n'])\n"
               "open('/box/out/summary.csv', 'w').write(''.join(f'{k},{v}\\n' for k, v in sorted(t.items())))\n"
               "os.makedirs('/box/out/more')\nopen('/box/out/more/notes.txt', 'w').write('done\\n')\n"
               "os.symlink('/etc/passwd', '/box/out/passwd')\n"
               "import errno\n"
               "def why(e):\n    return 'read-only' if e.errno in (errno.EACCES, errno.EROFS) else repr(e)\n"
               "try:\n    open('/box/in/data.csv', 'a').write('x')\nexcept OSError as e:\n"
               "    print('append:', why(e))\n"
               "try:\n    open('/box/in/new.txt', 'w')\nexcept OSError as e:\n    print('create:', why(e))\n",
               args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    /* refused for want of permission (the engine's volume) or as a read-only mount (a
     * native box's bind): either way nothing of /box/in can be written */
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "append: read-only\ncreate: read-only\n");
    /* asked: the input and its digest */
    const cJSON *inputs = itest_get(j, "asked.inputs");
    ck_assert_int_eq(cJSON_GetArraySize(inputs), 1);
    char digest[65];
    pybox_sha256_hex("city,n\nParis,3\nLyon,2\nParis,4\n", 30, digest);
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 0), "sha256"), digest);
    /* seen: two files back, the link not */
    ck_assert_str_eq(itest_str(j, "seen.files.status"), "delivered");
    ck_assert_int_eq((int)itest_num(j, "seen.files.returned_files"), 2);
    const cJSON *link = entry_named(itest_get(j, "seen.files.not_returned_entries"), "passwd");
    ck_assert_ptr_nonnull(link);
    ck_assert_str_eq(itest_str(link, "kind"), "symbolic link");
    char p[PATH_MAX];
    size_t len;
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/summary.csv", out), 0);
    char *data = read_file(p, &len);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(len, 15);
    ck_assert_int_eq(memcmp(data, "Lyon,2\nParis,7\n", 15), 0);
    char sha[65];
    pybox_sha256_hex(data, len, sha);
    ck_assert_str_eq(itest_str(entry_named(itest_get(j, "seen.files.returned"), "summary.csv"), "sha256"), sha);
    free(data);
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0644); /* no exec bits */
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/passwd", out), 0);
    ck_assert_int_ne(lstat(p, &sb), 0);
    ck_assert_int_eq(count_entries(out), 2);  /* summary.csv, more/ */
    ck_assert_int_eq(count_entries(work), 2); /* data.csv, result: no temporary left */
    itest_run_free(&r);
}
END_TEST

START_TEST(limits_on_what_comes_back)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"--output", out, "--timeout", "20", NULL};
    itest_run_t r;
    const cJSON *j = itest_exec_ended("open('/box/out/big.bin', 'wb').write(b'x' * (9 * 1024 * 1024))\n"
                                      "for i in range(70):\n    open(f'/box/out/f{i:02d}.txt', 'w').write(str(i))\n",
                                      args, 0, &r);
    ck_assert_str_eq(itest_str(j, "seen.files.status"), "delivered");
    ck_assert_int_eq((int)itest_num(j, "seen.files.returned_files"), 64);
    ck_assert_int_eq((int)itest_num(j, "seen.files.not_returned"), 7);
    const cJSON *big = entry_named(itest_get(j, "seen.files.not_returned_entries"), "big.bin");
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(strstr(itest_str(big, "reason"), "larger than"));
    ck_assert_int_eq(count_entries(out), 64);
    itest_run_free(&r);
}
END_TEST

/* Many entries and folders nested deep are what the limits of what comes back are for:
 * the first 64 files come back and every other entry is listed with its reason, on every
 * backend (a native box's own packing once gave up on more than 4096 entries or 32
 * levels, and the receipt said its archive was larger than the limit). */
START_TEST(many_and_deep_outputs_listed_not_lost)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"--output", out, "--timeout", "30", NULL};
    itest_run_t r;
    itest_exec("import os\n"
               "for i in range(5000):\n    open('/box/out/f%04d' % i, 'w').close()\n"
               "p = '/box/out/deep' + '/d' * 40\n"
               "os.makedirs(p)\n"
               "open(p + '/x.txt', 'w').write('x')\n",
               args, &r);
    const cJSON *j = r.receipt;
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strcmp(itest_str(j, "seen.files.status"), "delivered") == 0, "%s: %s",
                  itest_str(j, "seen.files.status"), itest_str(j, "seen.files.reason"));
    ck_assert_int_eq((int)itest_num(j, "seen.files.returned_files"), 64);
    /* 4936 files, and the 25 folders and the file below the 16th level */
    ck_assert_int_eq((int)itest_num(j, "seen.files.not_returned"), 4936 + 26);
    const cJSON *deep =
        entry_named(itest_get(j, "seen.files.not_returned_entries"), "deep/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d");
    ck_assert_ptr_nonnull(deep);
    ck_assert_str_eq(itest_str(deep, "reason"), "it is nested too deep");
    ck_assert_int_eq(count_entries(out), 65); /* 64 files and deep/ */
    itest_run_free(&r);
}
END_TEST

START_TEST(stdout_cut_file_intact)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"--output", out, NULL};
    itest_run_t r;
    itest_exec("import sys\nsys.stdout.write('s' * 100000)\n"
               "open('/box/out/data.bin', 'wb').write(bytes(range(256)) * 400)\n",
               args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(itest_bool(j, "said.stdout.truncated"), 1);
    ck_assert_int_eq((int)itest_num(j, "said.stdout.total_bytes"), 100000);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/data.bin", out), 0);
    size_t len;
    char *data = read_file(p, &len);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(len, 256 * 400);
    for (size_t i = 0; i < len; i++)
        ck_assert_int_eq((unsigned char)data[i], i % 256);
    free(data);
    itest_run_free(&r);
}
END_TEST

START_TEST(refused_before_any_box)
{
    int before = boxes_of_this_install();
    /* 9 MiB of input */
    size_t n = 9 * 1024 * 1024;
    char *big = malloc(n);
    memset(big, 'i', n);
    write_file("big.bin", big, n);
    free(big);
    char in[PATH_MAX], out[PATH_MAX], p[PATH_MAX];
    path_in(in, "big.bin");
    refused("--input", in, "larger than");
    /* a non-empty output folder */
    path_in(out, "full");
    ck_assert_int_eq(mkdir(out, 0755), 0);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/keep.txt", out), 0);
    FILE *f = fopen(p, "we");
    fputs("mine\n", f);
    fclose(f);
    refused("--output", out, "not empty");
    ck_assert_int_eq(count_entries(out), 1); /* untouched */
    /* an output path that is a file; a missing input; a FIFO inside an input folder */
    refused("--output", p, "not a folder");
    path_in(in, "missing.csv");
    refused("--input", in, "no such file");
    path_in(in, "withfifo");
    ck_assert_int_eq(mkdir(in, 0755), 0);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/pipe", in), 0);
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    refused("--input", in, "FIFO");
    ck_assert_int_eq(boxes_of_this_install(), before);
}
END_TEST

START_TEST(hostile_names_escaped)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"exec", "--output", out, NULL}; /* the terminal receipt */
    const char *prog = "import os\n"
                       "open('/box/out/ok.txt', 'w').write('fine')\n"
                       "open('/box/out/\\x1b[2J\\x1b[31mRED', 'w').write('x')\n"
                       "open('/box/out/two\\nlines', 'w').write('x')\n"
                       "open(b'/box/out/bad\\xff\\xfe', 'w').write('x')\n"
                       "os.symlink('/etc', '/box/out/etc')\n";
    itest_run_t r;
    itest_pybox(prog, strlen(prog), args, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_null(memchr(r.out, 0x1b, r.out_len));
    ck_assert_ptr_nonnull(strstr(r.out, "+ ok.txt"));
    ck_assert_ptr_nonnull(strstr(r.out, "- \\x1b[2J\\x1b[31mRED  not brought back"));
    ck_assert_ptr_nonnull(strstr(r.out, "- two\\nlines  not brought back"));
    ck_assert_ptr_nonnull(strstr(r.out, "- bad\\xff\\xfe  not brought back"));
    ck_assert_ptr_nonnull(strstr(r.out, "- etc  not brought back: it is a symbolic link"));
    ck_assert_int_eq(count_entries(out), 1);
    itest_run_free(&r);
}
END_TEST

/* Returned names padded so that, at 40 columns, a forged receipt line would start a row
 * (one name for every padding), and names that look like report.csv but hold an invisible
 * character. With COLUMNS=40 and the receipt on a pipe: the look-alikes do not come back
 * and are shown escaped; every line holding a name fits 40 columns; no row starts with
 * the forged line. */
START_TEST(forged_rows_and_lookalikes)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"exec", "--output", out, NULL};
    const char *env[] = {"COLUMNS=40", NULL};
    const char *prog = "open('/box/out/report.csv', 'w').write('real')\n"
                       "for c in ('\\u206a', '\\ufe0f', '\\U000e0001', '\\U0001d173'):\n"
                       "    open('/box/out/report' + c + '.csv', 'w').write('fake')\n"
                       "for pad in range(40):\n"
                       "    open('/box/out/ok%02d' % pad + ' ' * pad + '  kernel     final reading FORGED', 'w')\n";
    itest_run_t r;
    itest_pybox(prog, strlen(prog), args, env, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count_entries(out), 41);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/report.csv", out), 0);
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_ptr_null(strstr(r.out, "\xe2\x81\xaa"));
    int fenced = 0;
    for (const char *line = r.out; *line;) {
        const char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        size_t cells = 0;
        for (size_t i = 0; i < ll; i++)
            if (((unsigned char)line[i] & 0xc0) != 0x80)
                cells += (unsigned char)line[i] < 0x80 ? 1 : 2;
        bool chosen = strncmp(line, "  |", 3) == 0 || memmem(line, ll, "ok", 2) != NULL ||
                      memmem(line, ll, "FORGED", 6) != NULL || memmem(line, ll, "report", 6) != NULL;
        ck_assert_msg(!chosen || cells <= 40, "a line of %zu columns: %.*s", cells, (int)ll, line);
        fenced += strncmp(line, "  |+", 4) == 0;
        /* rows of a line of PyBox's own text, as a 40-column terminal wraps it */
        for (size_t row = 0; row < ll; row += 40) {
            size_t sp = row;
            while (sp < ll && line[sp] == ' ')
                sp++;
            ck_assert_msg(strncmp(line + sp, "kernel     final reading FORGED", 31) != 0, "a forged row: %.*s", (int)ll,
                          line);
        }
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    ck_assert_int_ge(fenced, 40);
    /* the look-alikes are listed, escaped, as not brought back (rows joined again) */
    pybox_buf_t joined;
    pybox_buf_init(&joined, 0);
    for (const char *q = r.out; *q;) {
        const char *at = strstr(q, "\n  |+");
        size_t n = at ? (size_t)(at - q) : strlen(q);
        ck_assert_int_eq(pybox_buf_append(&joined, q, n), 0);
        q += n + (at ? 5 : 0);
    }
    ck_assert_ptr_nonnull(strstr(joined.data, "- report\\u{206a}.csv  not brought back"));
    ck_assert_ptr_nonnull(strstr(joined.data, "- report\\u{fe0f}.csv  not brought back"));
    ck_assert_ptr_nonnull(strstr(joined.data, "- report\\u{e0001}.csv  not brought back"));
    ck_assert_ptr_nonnull(strstr(joined.data, "- report\\u{1d173}.csv  not brought back"));
    pybox_buf_free(&joined);
    itest_run_free(&r);
}
END_TEST

START_TEST(case_clash_refuses_everything)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"--output", out, NULL};
    itest_run_t r;
    itest_exec("open('/box/out/A.txt', 'w').write('upper')\nopen('/box/out/a.txt', 'w').write('lower')\n", args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(j, "seen.files.status"), "refused");
    ck_assert_ptr_nonnull(strstr(itest_str(j, "seen.files.reason"), "differ only by case"));
    struct stat sb;
    ck_assert_int_ne(stat(out, &sb), 0); /* no output folder at all */
    ck_assert_int_eq(count_entries(work), 0);
    itest_run_free(&r);
}
END_TEST

/* Two long names that differ by case, with a character of two bytes where a cut would
 * fall: the receipt is valid UTF-8 and its reason whole. */
START_TEST(long_case_clash_receipt_is_utf8)
{
    char out[PATH_MAX];
    path_in(out, "out");
    const char *args[] = {"--output", out, NULL};
    itest_run_t r;
    itest_exec("n = 'a' * 99 + '\\u00e9'\n"
               "open('/box/out/' + n, 'w').write('x')\n"
               "open('/box/out/' + n[:99].upper() + n[99:], 'w').write('y')\n",
               args, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(pybox_utf8_valid(r.out, r.out_len), "the JSON receipt is not UTF-8");
    ck_assert_str_eq(itest_str(r.receipt, "seen.files.status"), "refused");
    const char *why = itest_str(r.receipt, "seen.files.reason");
    ck_assert_msg(strstr(why, "differ only by case: such a folder cannot be copied everywhere") != NULL, "%s", why);
    itest_run_free(&r);
}
END_TEST

START_TEST(folder_input_read_only_tree)
{
    char d[PATH_MAX], p[PATH_MAX];
    path_in(d, "tree");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/sub", d), 0);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    write_file("tree/a.txt", "alpha", 5);
    write_file("tree/sub/b.txt", "beta", 4);
    const char *args[] = {"--input", d, NULL};
    itest_run_t r;
    itest_exec("import os\nfor root, dirs, files in sorted(os.walk('/box/in')):\n"
               "    for f in sorted(files):\n        p = os.path.join(root, f)\n"
               "        st = os.stat(p)\n        print(p, oct(st.st_mode & 0o777), st.st_uid, open(p).read())\n"
               "print(oct(os.stat('/box/in/tree').st_mode & 0o777))\n",
               args, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"),
                     "/box/in/tree/a.txt 0o444 0 alpha\n/box/in/tree/sub/b.txt 0o444 0 beta\n0o555\n");
    ck_assert_int_eq(cJSON_GetArraySize(itest_get(r.receipt, "asked.inputs")), 2);
    itest_run_free(&r);
}
END_TEST

/* Names that are UTF-8 go in as they are, whatever the locale PyBox runs in (it sets
 * none: the C locale), given directly or inside a folder. */
START_TEST(utf8_names_in)
{
    char d[PATH_MAX], p[PATH_MAX], f[PATH_MAX];
    write_file("caf\xc3\xa9.txt", "latte", 5);
    path_in(f, "caf\xc3\xa9.txt");
    path_in(d, "donn\xc3\xa9"
               "es");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    write_file("donn\xc3\xa9"
               "es/na\xc3\xafve.csv",
               "a,b\n1,2\n", 8);
    write_file("donn\xc3\xa9"
               "es/\xe6\x97\xa5\xe6\x9c\xac.txt",
               "nihon", 5);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/", d), 0);
    const char *args[] = {"--input", f, "--input", p, NULL};
    itest_run_t r;
    itest_exec("import os\n"
               "print(sorted(os.listdir('/box/in')) == ['caf\\u00e9.txt', 'donn\\u00e9es'])\n"
               "print(open('/box/in/caf\\u00e9.txt').read())\n"
               "print(open('/box/in/donn\\u00e9es/na\\u00efve.csv').read(), end='')\n"
               "print(open('/box/in/donn\\u00e9es/\\u65e5\\u672c.txt').read())\n",
               args, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "True\nlatte\na,b\n1,2\nnihon\n");
    const cJSON *inputs = itest_get(r.receipt, "asked.inputs");
    ck_assert_int_eq(cJSON_GetArraySize(inputs), 3);
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 0), "name"), "caf\xc3\xa9.txt");
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 1), "name"), "donn\xc3\xa9"
                                                                       "es/na\xc3\xafve.csv");
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 2), "name"), "donn\xc3\xa9"
                                                                       "es/\xe6\x97\xa5\xe6\x9c\xac.txt");
    itest_run_free(&r);
}
END_TEST

/* A folder holding café.txt composed and decomposed (e + U+0301): both reach /box/in,
 * each under its own name with its own bytes, as the receipt lists them. */
START_TEST(composed_and_decomposed_names_both_in)
{
    char d[PATH_MAX];
    path_in(d, "forms");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    write_file("forms/caf\xc3\xa9.txt", "composed", 8);
    write_file("forms/cafe\xcc\x81.txt", "decomposed", 10);
    const char *args[] = {"--input", d, NULL};
    itest_run_t r;
    itest_exec("import os\n"
               "for n in sorted(os.listdir('/box/in/forms')):\n"
               "    print(ascii(n), open('/box/in/forms/' + n).read())\n",
               args, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"),
                     "'cafe\\u0301.txt' decomposed\n'caf\\xe9.txt' composed\n");
    const cJSON *inputs = itest_get(r.receipt, "asked.inputs");
    ck_assert_int_eq(cJSON_GetArraySize(inputs), 2);
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 0), "name"), "forms/cafe\xcc\x81.txt");
    ck_assert_str_eq(itest_str(cJSON_GetArrayItem(inputs, 1), "name"), "forms/caf\xc3\xa9.txt");
    itest_run_free(&r);
}
END_TEST

/* A name that is not UTF-8 (a Latin-1 byte) is refused before any box, named escaped;
 * the receipt is still written. */
START_TEST(name_not_utf8_refused)
{
    int before = boxes_of_this_install();
    char f[PATH_MAX], d[PATH_MAX];
    write_file("caf\xe9.txt", "x", 1);
    path_in(f, "caf\xe9.txt");
    path_in(d, "folder");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    write_file("folder/na\xefve.csv", "a,b\n", 4);
    const struct {
        const char *path, *shown;
    } cases[] = {{f, "caf\\xe9.txt"}, {d, "folder/na\\xefve.csv"}};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {"--input", cases[i].path, NULL};
        itest_run_t r;
        itest_exec("print(1)\n", args, &r);
        ck_assert_int_eq(r.status, 125);
        ck_assert_ptr_nonnull(r.receipt);
        ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
        ck_assert_int_eq(itest_bool(r.receipt, "box_built"), 0);
        const char *msg = itest_str(r.receipt, "error.message");
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, "not valid UTF-8") != NULL, "%s", msg);
        ck_assert_msg(strstr(msg, cases[i].shown) != NULL, "%s", msg);
        itest_run_free(&r);
    }
    ck_assert_int_eq(boxes_of_this_install(), before);
}
END_TEST

/* ---- a full state directory ---- */

/* A fresh installation whose state directory is a small tmpfs of this test's own (in a
 * mount namespace of its own, so the mount goes with the test process whatever happens),
 * filled so that exactly free_pages pages are left. */
static char full_home[64];
static char full_id[33];

static void full_state_dir(int free_pages)
{
    char src[64];
    ck_assert_int_eq(itest_new_home(src, sizeof src, full_id), 0);
    ck_assert_int_eq(pybox_fmt(full_home, sizeof full_home, "%s/state", work), 0);
    itest_small_state(src, full_home);
    if (itest_native()) {
        /* the native backend's pins and the folders it keeps them in, borrowed as the
         * tests' own installation borrows them */
        itest_copy_into(src, full_home, "images-native.json");
        char a[PATH_MAX], b[PATH_MAX], target[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(a, sizeof a, "%s/native", full_home), 0);
        ck_assert_int_eq(mkdir(a, 0700), 0);
        ck_assert_int_eq(pybox_fmt(a, sizeof a, "%s/" PYBOX_NATIVE_BORROWED, src), 0);
        ssize_t n = readlink(a, target, sizeof target - 1);
        ck_assert_int_gt(n, 0);
        target[n] = '\0';
        ck_assert_int_eq(pybox_fmt(b, sizeof b, "%s/" PYBOX_NATIVE_BORROWED, full_home), 0);
        ck_assert_int_eq(symlink(target, b), 0);
    }
    itest_remove_home(src);
    /* Fill it up, then give back exactly free_pages pages. */
    char filler[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(filler, sizeof filler, "%s/filler", full_home), 0);
    int fd = open(filler, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    static const char page[4096];
    size_t written = 0;
    for (;;) {
        ssize_t w = write(fd, page, sizeof page);
        if (w <= 0)
            break;
        written += (size_t)w;
    }
    long psz = sysconf(_SC_PAGESIZE);
    size_t pages = (written + (size_t)psz - 1) / (size_t)psz;
    ck_assert_uint_gt(pages, (size_t)free_pages);
    ck_assert_int_eq(ftruncate(fd, (off_t)((pages - (size_t)free_pages) * (size_t)psz)), 0);
    ck_assert_int_eq(close(fd), 0);
}

static void full_state_done(void)
{
    ck_assert_int_eq(umount2(full_home, MNT_DETACH), 0);
    itest_forget_native_parents(full_id);
}

/* Boxes the engine created for an installation between two times (unix seconds). */
static int creates_between(const char *install_id, double since, double until)
{
    if (itest_native()) {
        /* No event log: a box made meanwhile would have changed its folders, whose
         * modification times the kernel keeps (the staging folder, the cgroup parent). */
        char dirs[6][PATH_MAX], parents[5][PATH_MAX];
        ck_assert_int_eq(pybox_fmt(dirs[0], sizeof dirs[0], "%s/" PYBOX_NATIVE_STAGING, full_home), 0);
        int nd = 1;
        for (int i = 0, np = itest_native_parents(install_id, parents); i < np; i++)
            pybox_strlcpy(dirs[nd++], parents[i], PATH_MAX);
        int n = 0;
        for (int i = 0; i < nd; i++) {
            struct statx sx;
            if (statx(AT_FDCWD, dirs[i], 0, STATX_MTIME | STATX_BTIME, &sx) == 0) {
                double t = (double)sx.stx_mtime.tv_sec + (double)sx.stx_mtime.tv_nsec / 1e9;
                /* an entry added since it was made (the staging folder is made, empty, when
                 * the backend opens; the cgroup parent only for a box) */
                bool made_only = i == 0 && (sx.stx_mask & STATX_BTIME) && sx.stx_btime.tv_sec == sx.stx_mtime.tv_sec &&
                                 sx.stx_btime.tv_nsec == sx.stx_mtime.tv_nsec;
                n += t >= since && t <= until && !made_only;
            }
        }
        return n;
    }
    pybox_engine_t *e = itest_engine();
    char filter[256], path[1024];
    snprintf(filter, sizeof filter,
             "{\"type\":[\"container\"],\"event\":[\"create\"],\"label\":[\"pybox.install=%s\"]}", install_id);
    char *esc = pybox_engine_escape(e, filter);
    snprintf(path, sizeof path, "/events?since=%.3f&until=%.3f&filters=%s", since, until, esc);
    free(esc);
    long status = 0;
    pybox_buf_t b;
    pybox_buf_init(&b, 1024 * 1024);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call_raw(e, "GET", path, NULL, &status, &b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(status, 200);
    int n = 0;
    for (size_t i = 0; i < b.len; i++)
        n += b.data[i] == '\n';
    pybox_buf_free(&b);
    pybox_engine_free(e);
    return n;
}

static bool unknown_has(const cJSON *receipt, const char *needle)
{
    const cJSON *u;
    cJSON_ArrayForEach (u, itest_get(receipt, "unknown")) {
        if (cJSON_IsString(u) && strstr(u->valuestring, needle) != NULL)
            return true;
    }
    return false;
}

/* The trail to the hidden output folder cannot be written: nothing of the output is
 * written at all (a PyBox failure, exit 125, said under unknown), and nothing is left. */
START_TEST(full_state_dir_no_output_without_its_trail)
{
    if (itest_needs_root("full_state_dir_no_output_without_its_trail"))
        return;
    full_state_dir(1); /* room for the run note, none for the trail */
    char out[PATH_MAX], env_home[128];
    path_in(out, "out");
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", full_home);
    const char *args[] = {"exec", "--json", "--output", out, NULL};
    const char *env[] = {env_home, NULL};
    itest_run_t r;
    const char *prog = "open('/box/out/big.bin', 'wb').write(b'x' * (4 << 20))\nprint('written')\n";
    itest_pybox(prog, strlen(prog), args, env, &r);
    ck_assert_msg(r.receipt != NULL, "no JSON receipt (exit %d): %s", r.status, r.err);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(strcmp(itest_str(r.receipt, "status"), "PYBOX_ERROR") == 0, "%s: %s", itest_str(r.receipt, "status"),
                  itest_str(r.receipt, "error.message"));
    ck_assert_msg(strcmp(itest_str(r.receipt, "said.stdout.text"), "written\n") == 0, "%s",
                  itest_str(r.receipt, "error.message"));
    const char *msg = itest_str(r.receipt, "error.message");
    ck_assert_msg(msg != NULL && strstr(msg, "the output was not written: its trail could not be recorded") != NULL,
                  "%s", msg ? msg : "(no error)");
    ck_assert_msg(strstr(msg, "No space left") != NULL, "%s", msg);
    ck_assert(unknown_has(r.receipt, "the output was not written: its trail could not be recorded"));
    ck_assert_str_eq(itest_str(r.receipt, "seen.files.status"), "refused");
    ck_assert_int_eq(itest_bool(r.receipt, "seen.box.confirmed_gone"), 1);
    itest_run_free(&r);
    /* no output folder, no hidden one, no note of any kind left */
    ck_assert_int_eq(count_entries(work), 1); /* the state directory only */
    char runs[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(runs, sizeof runs, "%s/runs", full_home), 0);
    ck_assert_int_eq(count_entries(runs), 0);
    full_state_done();
}
END_TEST

/* No room even for the run note: refused before any box. */
START_TEST(full_state_dir_no_box_without_its_note)
{
    if (itest_needs_root("full_state_dir_no_box_without_its_note"))
        return;
    full_state_dir(0);
    char out[PATH_MAX], env_home[128];
    path_in(out, "out");
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", full_home);
    const char *args[] = {"exec", "--json", "--output", out, NULL};
    const char *env[] = {env_home, NULL};
    double since = itest_wall();
    itest_run_t r;
    itest_pybox("print(1)\n", 9, args, env, &r);
    double until = itest_wall() + 0.001;
    ck_assert_msg(r.receipt != NULL, "no JSON receipt (exit %d): %s", r.status, r.err);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(strcmp(itest_str(r.receipt, "status"), "PYBOX_ERROR") == 0, "%s: %s", itest_str(r.receipt, "status"),
                  itest_str(r.receipt, "error.message"));
    const char *msg = itest_str(r.receipt, "error.message");
    ck_assert_msg(msg != NULL && strstr(msg, "writing the run note") != NULL && strstr(msg, "No space left") != NULL,
                  "%s", msg ? msg : "(no error)");
    ck_assert_int_eq(itest_bool(r.receipt, "seen.box.created"), 0);
    itest_run_free(&r);
    ck_assert_int_eq(creates_between(full_id, since, until), 0);
    ck_assert_int_eq(count_entries(work), 1);
    char runs[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(runs, sizeof runs, "%s/runs", full_home), 0);
    ck_assert_int_le(count_entries(runs), 0); /* no note, not even a torn one */
    full_state_done();
}
END_TEST

/* What an ordinary local user (uid 65534) does, in a child of its own: 0 when every
 * step worked, else the errno of the first that failed. */
enum { SQUAT_MAKE_0777, SQUAT_REPLACE };
static int as_other_user(int what, const char *dir)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
            _exit(125);
        char p[PATH_MAX], q[PATH_MAX];
        if (what == SQUAT_MAKE_0777)
            _exit(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0 ? 0 : errno);
        /* replace result.txt: a new file, renamed over it */
        if (pybox_fmt(p, sizeof p, "%s/forged", dir) < 0 || pybox_fmt(q, sizeof q, "%s/result.txt", dir) < 0)
            _exit(125);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            _exit(errno);
        close(fd);
        _exit(rename(p, q) == 0 ? 0 : errno);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* In a sticky shared folder (as /tmp is), another local user makes the output folder
 * first, empty and 0777: it is refused before any box is built, naming its owner, and
 * left as it was. An existing folder of PyBox's own user with mode 0777 is delivered
 * into without the write bits of others, so nobody else can replace a file the receipt
 * lists. */
START_TEST(output_folder_squatted_or_open_to_all)
{
    if (itest_needs_root("output_folder_squatted_or_open_to_all"))
        return;
    ck_assert_int_eq(chmod(work, 0755), 0); /* the other user can reach the shared folder */
    char shared[PATH_MAX], squat[PATH_MAX + 8], mine[PATH_MAX + 8];
    path_in(shared, "shared");
    ck_assert_int_eq(mkdir(shared, 0755), 0);
    ck_assert_int_eq(chmod(shared, 01777), 0);
    ck_assert_int_eq(pybox_fmt(squat, sizeof squat, "%s/out", shared), 0);
    ck_assert_int_eq(as_other_user(SQUAT_MAKE_0777, squat), 0);
    int before = boxes_of_this_install();
    const char *program = "open('/box/out/result.txt', 'w').write('the real result\\n')\n";
    const char *a1[] = {"--output", squat, NULL};
    itest_run_t r;
    itest_exec(program, a1, &r);
    ck_assert_msg(r.status == 125, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "status"), "REFUSED");
    ck_assert_int_eq(itest_bool(r.receipt, "box_built"), 0);
    ck_assert_msg(itest_contains(r.err, r.err_len, "belongs to another user (uid 65534"), "%s", r.err);
    itest_run_free(&r);
    ck_assert_int_eq(boxes_of_this_install(), before);
    struct stat sb;
    ck_assert_int_eq(lstat(squat, &sb), 0);
    ck_assert_uint_eq(sb.st_uid, 65534);
    ck_assert_uint_eq(sb.st_mode & 07777, 0777);
    ck_assert_int_eq(count_entries(squat), 0);
    /* this user's own empty folder, open to all: delivered, no longer open */
    ck_assert_int_eq(pybox_fmt(mine, sizeof mine, "%s/mine", shared), 0);
    ck_assert_int_eq(mkdir(mine, 0755), 0);
    ck_assert_int_eq(chmod(mine, 0777), 0);
    const char *a2[] = {"--output", mine, NULL};
    itest_exec(program, a2, &r);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(itest_str(r.receipt, "seen.files.status"), "delivered");
    const char *sha = itest_str(entry_named(itest_get(r.receipt, "seen.files.returned"), "result.txt"), "sha256");
    ck_assert_ptr_nonnull(sha);
    ck_assert_int_eq(lstat(mine, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0755);
    ck_assert_int_eq(as_other_user(SQUAT_REPLACE, mine), EACCES);
    char p[PATH_MAX + 16];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/result.txt", mine), 0);
    size_t len = 0;
    char *data = read_file(p, &len);
    ck_assert_ptr_nonnull(data);
    char got[65];
    pybox_sha256_hex(data, len, got);
    ck_assert_str_eq(got, sha); /* what the receipt lists is what is there */
    free(data);
    itest_run_free(&r);
}
END_TEST

Suite *itest_suite_files(void)
{
    Suite *s = suite_create("files");
    TCase *tc = itest_tcase(
        s, "in and out", 120,
        ITEST_TESTS(csv_in_two_files_back, limits_on_what_comes_back, many_and_deep_outputs_listed_not_lost,
                    stdout_cut_file_intact, refused_before_any_box, hostile_names_escaped, forged_rows_and_lookalikes,
                    case_clash_refuses_everything, long_case_clash_receipt_is_utf8, folder_input_read_only_tree,
                    utf8_names_in, composed_and_decomposed_names_both_in, name_not_utf8_refused,
                    output_folder_squatted_or_open_to_all));
    itest_fixture(tc, setup, teardown);
    TCase *full =
        itest_tcase(s, "full state directory", 120,
                    ITEST_TESTS(full_state_dir_no_output_without_its_trail, full_state_dir_no_box_without_its_note));
    itest_fixture(full, setup, teardown);
    return s;
}
