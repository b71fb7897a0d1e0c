/* SPDX-License-Identifier: MIT */
/* Images: the data image, custom images from a uv lock, pins that cannot be fooled. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/image/image.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

static char work[64];

static void setup(void)
{
    snprintf(work, sizeof work, "/tmp/pybox-images-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work));
}

static void teardown(void)
{
    itest_remove_home(work); /* any folder: removed depth first, links not followed */
}

START_TEST(data_image_pandas_and_a_chart)
{
    char csv[PATH_MAX], out[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(csv, sizeof csv, "%s/sales.csv", work), 0);
    ck_assert_int_eq(pybox_fmt(out, sizeof out, "%s/out", work), 0);
    FILE *f = fopen(csv, "we");
    fputs("city,n\nParis,3\nLyon,2\nParis,4\nNice,1\n", f);
    fclose(f);
    const char *args[] = {"--image", "data", "--input", csv, "--output", out, NULL};
    itest_run_t r;
    itest_exec("import pandas as pd\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
               "df = pd.read_csv('/box/in/sales.csv')\ng = df.groupby('city')['n'].sum().sort_index()\n"
               "g.to_csv('/box/out/by_city.csv')\nax = g.plot.bar()\nax.figure.savefig('/box/out/chart.png')\n"
               "print(g.to_dict())\n",
               args, &r);
    const cJSON *j = r.receipt;
    ck_assert_msg(r.status == 0, "exit %d: %s %s", r.status, itest_str(j, "said.stderr.text"), r.err);
    ck_assert_str_eq(itest_str(j, "said.stdout.text"), "{'Lyon': 2, 'Nice': 1, 'Paris': 7}\n");
    /* The image's own policy, not the program, set the larger memory. */
    ck_assert_int_eq((long)itest_num(j, "asked.limits.memory_bytes"), 512L * 1024 * 1024);
    ck_assert_str_eq(itest_str(j, "asked.image.name"), "data");
    ck_assert_ptr_nonnull(itest_str(j, "asked.image.recipe_sha256"));
    ck_assert_int_gt((long)itest_num(j, "seen.kernel.final.memory_peak_bytes"), 20L * 1024 * 1024);
    ck_assert_int_eq((int)itest_num(j, "seen.files.returned_files"), 2);
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/chart.png", out), 0);
    unsigned char magic[8] = {0};
    f = fopen(p, "re");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(magic, 1, 8, f), 8);
    fclose(f);
    ck_assert_int_eq(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0);
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/by_city.csv", out), 0);
    f = fopen(p, "re");
    char buf[128] = "";
    ck_assert_uint_gt(fread(buf, 1, sizeof buf - 1, f), 0);
    fclose(f);
    ck_assert_str_eq(buf, "city,n\nLyon,2\nNice,1\nParis,7\n");
    itest_run_free(&r);
}
END_TEST

START_TEST(data_image_memory_fits_and_oom)
{
    const char *args[] = {"--image", "data", "--timeout", "30", NULL};
    itest_run_t r;
    itest_exec("import numpy as np\na = np.ones(300 * 1024 * 1024 // 8)\nprint(int(a.sum()))\n", args, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "39321600\n");
    ck_assert_int_ge((long)itest_num(r.receipt, "seen.kernel.final.memory_peak_bytes"), 300L * 1024 * 1024);
    itest_run_free(&r);
    itest_exec("import numpy as np\na = np.ones(700 * 1024 * 1024 // 8)\nprint(int(a.sum()))\n", args, &r);
    const cJSON *j = r.receipt;
    ck_assert_int_eq(r.status, 137);
    ck_assert_int_eq(itest_bool(j, "seen.oom.backend_flag"), 1);
    ck_assert_int_ge((int)itest_num(j, "seen.oom.kernel_oom_kills"), 1);
    ck_assert_str_eq(itest_str(j, "seen.oom.finding"), "program_killed");
    itest_run_free(&r);
}
END_TEST

/* A pure-Python wheel made here: a module and its dist-info, zipped with libarchive. */
static void make_wheel(const char *name, const char *version, const char *code, char *file, size_t flen, char sha[65])
{
    char path[PATH_MAX];
    snprintf(file, flen, "%s-%s-py3-none-any.whl", name, version);
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/%s", work, file), 0);
    struct archive *w = archive_write_new();
    archive_write_set_format_zip(w);
    ck_assert_int_eq(archive_write_open_filename(w, path), ARCHIVE_OK);
    char n1[256], n2[256], n3[256], meta[256];
    snprintf(n1, sizeof n1, "%s/__init__.py", name);
    snprintf(n2, sizeof n2, "%s-%s.dist-info/METADATA", name, version);
    snprintf(n3, sizeof n3, "%s-%s.dist-info/WHEEL", name, version);
    snprintf(meta, sizeof meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version);
    const char *names[] = {n1, n2, n3};
    const char *data[] = {code, meta, "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"};
    for (int i = 0; i < 3; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)strlen(data[i]));
        ck_assert_int_eq(archive_write_header(w, e), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_data(w, data[i], strlen(data[i])), (la_ssize_t)strlen(data[i]));
        archive_entry_free(e);
    }
    archive_write_close(w);
    archive_write_free(w);
    size_t len;
    FILE *f = fopen(path, "re");
    char *buf = malloc(1 << 20);
    len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    pybox_sha256_hex(buf, len, sha);
    free(buf);
}

START_TEST(custom_image_from_a_uv_lock)
{
    static const char *const names[] = {"tinytab", "tinyyaml", "tinycolor"};
    static const char *const codes[] = {
        "def tab(rows):\n    return '\\n'.join(' | '.join(map(str, r)) for r in rows)\n",
        "def dump(d):\n    return '\\n'.join(f'{k}: {v}' for k, v in d.items())\n",
        "def red(s):\n    return '<red>' + s + '</red>'\n"};
    char files[3][128], shas[3][65];
    pybox_buf_t lock;
    pybox_buf_init(&lock, 0);
    pybox_buf_adds(&lock, "version = 1\nrequires-python = \">=3.11\"\n\n[[package]]\nname = \"demo\"\n"
                          "version = \"0.1.0\"\nsource = { virtual = \".\" }\n");
    for (int i = 0; i < 3; i++) {
        make_wheel(names[i], "1.0", codes[i], files[i], sizeof files[i], shas[i]);
        pybox_buf_addf(&lock,
                       "\n[[package]]\nname = \"%s\"\nversion = \"1.0\"\nsource = { path = \"wheels/%s\" }\n"
                       "wheels = [\n    { filename = \"%s\", hash = \"sha256:%s\" },\n]\n",
                       names[i], files[i], files[i], shas[i]);
    }
    char lockp[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(lockp, sizeof lockp, "%s/uv.lock", work), 0);
    FILE *f = fopen(lockp, "we");
    fwrite(lock.data, 1, lock.len, f);
    fclose(f);
    pybox_buf_free(&lock);

    char name[32];
    char rnd[9];
    pybox_random_hex(4, rnd, NULL);
    snprintf(name, sizeof name, "itest-%s", rnd);
    const char *build[] = {"image", "build", name, "--lock", lockp, "--wheels", work, NULL};
    itest_run_t r;
    itest_pybox("", 0, build, NULL, &r);
    ck_assert_msg(r.status == 0, "build: %s", r.err);
    ck_assert(itest_contains(r.err, r.err_len, "installed tinytab 1.0"));
    itest_run_free(&r);
    const char *list[] = {"image", "list", NULL};
    itest_pybox("", 0, list, NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert(itest_contains(r.out, r.out_len, name));
    ck_assert(itest_contains(r.out, r.out_len, "custom"));
    itest_run_free(&r);

    const char *args[] = {"--image", name, NULL};
    itest_exec("import tinytab, tinyyaml, tinycolor\nprint(tinytab.tab([[1, 2], [3, 4]]))\n"
               "print(tinyyaml.dump({'a': 1}))\nprint(tinycolor.red('x'))\n",
               args, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "1 | 2\n3 | 4\na: 1\n<red>x</red>\n");
    const cJSON *u;
    bool noted = false;
    cJSON_ArrayForEach (u, itest_get(r.receipt, "unknown"))
        noted |= strstr(u->valuestring, "start-up") != NULL || strstr(u->valuestring, "when Python starts");
    ck_assert_msg(noted, "the receipt does not say that the custom image's packages can run start-up code");
    itest_run_free(&r);

    /* A wheel whose hash is not the lock's is refused. */
    char wp[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(wp, sizeof wp, "%s/%s", work, files[2]), 0);
    f = fopen(wp, "ae");
    fputc('x', f);
    fclose(f);
    char name2[40];
    snprintf(name2, sizeof name2, "%s-b", name);
    const char *bad[] = {"image", "build", name2, "--lock", lockp, "--wheels", work, NULL};
    itest_pybox("", 0, bad, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(itest_contains(r.err, r.err_len, "is not the lock's"), "%s", r.err);
    itest_run_free(&r);

    const char *rm[] = {"image", "rm", name, NULL};
    itest_pybox_ok("", 0, rm, NULL);
}
END_TEST

/* The native backend's root filesystem folder of a pin, as the kernel names it. */
static void native_root(const pybox_pin_t *pin, char *out, size_t len)
{
    char p[PATH_MAX], real[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/native/roots/%s", itest_state()->dir, pin->id + 7), 0);
    struct stat sb;
    if (stat(p, &sb) < 0)
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/native/borrowed-roots/%s", itest_state()->dir, pin->id + 7), 0);
    ck_assert_ptr_nonnull(realpath(p, real));
    ck_assert_int_eq(pybox_fmt(out, len, "%s", real), 0);
}

/* What a run and `pybox image verify` did while a pin named another image. */
typedef struct {
    int refused;  /* the run's status */
    bool said;    /* its error said what it was told to look for */
    int verified; /* image verify's status */
} swapped_t;

/* Read before any assertion, so that the test can put things back first. */
static void exec_then_verify(const char *says, swapped_t *w)
{
    itest_run_t r;
    const char *args[] = {"exec", NULL};
    itest_pybox("print(1)\n", 9, args, NULL, &r);
    w->refused = r.status;
    w->said = itest_contains(r.err, r.err_len, says);
    itest_run_free(&r);
    const char *verify[] = {"image", "verify", NULL};
    itest_pybox("", 0, verify, NULL, &r);
    w->verified = r.status;
    itest_run_free(&r);
}

/* Put back, the run that was refused goes. */
static void refused_until_put_back(const swapped_t *w)
{
    ck_assert_int_eq(w->refused, 125);
    ck_assert(w->said);
    ck_assert_int_eq(w->verified, 1);
    const char *args[] = {"exec", NULL};
    itest_pybox_ok("print(1)\n", 9, args, NULL);
}

/* The native analog of a name moved to another image: the data image's folder put where
 * the stdlib pin's folder is, in a mount namespace of this test's own (so nothing of the
 * installation changes, whatever happens). */
static void native_swapped_pin_is_refused(void)
{
    pybox_pin_t stdlib, data;
    pybox_error_t err = {0};
    ck_assert(itest_resolve("stdlib", &stdlib, &err) == 0);
    ck_assert(itest_resolve("data", &data, &err) == 0);
    char sroot[PATH_MAX], droot[PATH_MAX];
    native_root(&stdlib, sroot, sizeof sroot);
    native_root(&data, droot, sizeof droot);
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount(droot, sroot, NULL, MS_BIND, NULL), 0);
    swapped_t w;
    exec_then_verify("now holds another image", &w);
    ck_assert_int_eq(umount2(sroot, MNT_DETACH), 0);
    /* Only that removed: the folder is its own again. */
    refused_until_put_back(&w);
}

START_TEST(retagged_pin_is_refused)
{
    if (itest_native()) {
        if (!itest_needs_root("retagged_pin_is_refused"))
            native_swapped_pin_is_refused();
        return;
    }
    pybox_engine_t *e = itest_engine();
    pybox_pin_t stdlib, data;
    pybox_error_t err = {0};
    ck_assert(itest_resolve("stdlib", &stdlib, &err) == 0);
    ck_assert(itest_resolve("data", &data, &err) == 0);
    /* Give the stdlib pin's name to the data image. */
    char path[512];
    snprintf(path, sizeof path, "/images/%s/tag?repo=pybox-stdlib&tag=%.12s", data.id, stdlib.recipe_sha256);
    long status = 0;
    cJSON *reply = NULL;
    ck_assert(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0);
    cJSON_Delete(reply);
    ck_assert_int_eq(status, 201);
    swapped_t w;
    exec_then_verify("now points to", &w);
    /* Put the name back on the pinned image before asserting anything. */
    snprintf(path, sizeof path, "/images/%s/tag?repo=pybox-stdlib&tag=%.12s", stdlib.id, stdlib.recipe_sha256);
    ck_assert(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0);
    cJSON_Delete(reply);
    ck_assert_int_eq(status, 201);
    refused_until_put_back(&w);
    pybox_engine_free(e);
}
END_TEST

/* Native image folders no pin names (left by a rebuild while a box was there, or by an
 * import cut short) go with `pybox cleanup` once past their expiry; a pinned one never,
 * nor a borrowed one. In an installation of this test's own. */
START_TEST(unpinned_image_folders_are_cleaned_up)
{
    if (!itest_native())
        return; /* the engine keeps its own images: docker's are removed by pybox image rm */
    char home[64], id[33], roots[PATH_MAX], env_home[96];
    ck_assert_int_eq(itest_new_home(home, sizeof home, id), 0);
    snprintf(env_home, sizeof env_home, "PYBOX_HOME=%s", home);
    const char *env[] = {env_home, NULL};
    /* the backend makes its folders on first use */
    const char *list[] = {"image", "list", "--backend", "native", NULL};
    itest_run_t r;
    itest_pybox_ok("", 0, list, env);
    const char *cleanup[] = {"cleanup", "--backend", "native", NULL};
    itest_pybox_ok("", 0, cleanup, env);
    ck_assert_int_eq(pybox_fmt(roots, sizeof roots, "%s/native/roots", home), 0);
    static const char stale[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    static const char fresh[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    static const char cut[] = ".new-0123456789abcdef";
    const char *names[] = {stale, fresh, cut};
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX], f[PATH_MAX + 16];
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", roots, names[i]), 0);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        ck_assert_int_eq(pybox_fmt(f, sizeof f, "%s/file", p), 0);
        FILE *fp = fopen(f, "we");
        ck_assert_ptr_nonnull(fp);
        fputs("x", fp);
        fclose(fp);
        if (i != 1) { /* an hour old: past the ten minutes a build has to pin its folder */
            struct timespec t[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
            ck_assert_int_eq(utimensat(AT_FDCWD, p, t, 0), 0);
        }
    }
    itest_pybox("", 0, cleanup, env, &r);
    ck_assert_msg(r.status == 0, "cleanup: %s %s", r.out, r.err);
    ck_assert_msg(itest_contains(r.out, r.out_len, "root filesystem folder aaaaaaaaaaaaaaaa"), "%s", r.out);
    itest_run_free(&r);
    struct stat sb;
    char p[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", roots, stale), 0);
    ck_assert_int_ne(stat(p, &sb), 0); /* removed */
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", roots, cut), 0);
    ck_assert_int_ne(stat(p, &sb), 0); /* removed */
    ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", roots, fresh), 0);
    ck_assert_int_eq(stat(p, &sb), 0); /* not yet expired: kept */
    /* the borrowed stdlib still resolves: nothing of the main installation was touched */
    const char *run[] = {"exec", "--json", NULL};
    itest_pybox_ok("print(1)\n", 9, run, env);
    itest_remove_home(home);
}
END_TEST

START_TEST(unknown_image_lists_the_known)
{
    itest_run_t r;
    const char *args[] = {"exec", "--image", "nosuch", NULL};
    itest_pybox("print(1)\n", 9, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert(itest_contains(r.err, r.err_len, "unknown image 'nosuch' (known: stdlib, data"));
    itest_run_free(&r);
    const char *verify[] = {"image", "verify", NULL};
    itest_pybox("", 0, verify, NULL, &r);
    ck_assert_msg(r.status == 0, "%s", r.out);
    ck_assert(itest_contains(r.out, r.out_len, "stdlib       ok"));
    itest_run_free(&r);
}
END_TEST

Suite *itest_suite_images(void)
{
    Suite *s = suite_create("images");
    TCase *tc = itest_tcase(s, "images", 300,
                            ITEST_TESTS(data_image_pandas_and_a_chart, data_image_memory_fits_and_oom,
                                        custom_image_from_a_uv_lock, retagged_pin_is_refused,
                                        unknown_image_lists_the_known, unpinned_image_folders_are_cleaned_up));
    itest_fixture(tc, setup, teardown);
    return s;
}
