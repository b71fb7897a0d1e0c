/* SPDX-License-Identifier: MIT */
/* Unit tests for the installation's state directory, pinned images and atomic writes (state.h). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/box.h"
#include "../pybox/journal.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "suites.h"

/* Each test gets a fresh private directory; PYBOX_HOME points somewhere inside it. */
static char tmp_root[PATH_MAX];

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] != '/')
        base = "/tmp";
    ck_assert_int_eq(pybox_fmt(tmp_root, sizeof tmp_root, "%s/pybox-unit-state-XXXXXX", base), 0);
    ck_assert_ptr_nonnull(mkdtemp(tmp_root));
    umask(022);
    unsetenv("PYBOX_HOME");
}

static void teardown(void)
{
    unsetenv("PYBOX_HOME");
    if (tmp_root[0] != '\0')
        unit_rm_tree(tmp_root);
    tmp_root[0] = '\0';
}

/* Point PYBOX_HOME at tmp_root/sub and return that path (static storage). */
static const char *home_at(const char *sub)
{
    static char home[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(home, sizeof home, "%s/%s", tmp_root, sub), 0);
    ck_assert_int_eq(setenv("PYBOX_HOME", home, 1), 0);
    return home;
}

static void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pybox_write_all(fd, text, strlen(text)), 0);
    close(fd);
}

static char *read_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, 1 << 20, &text, &len, &over, &err), 0);
    close(fd);
    return text;
}

/* No temporary file (".tmp-" or ".new-") is left in dir. */
static void expect_no_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        ck_assert_msg(strstr(e->d_name, ".tmp-") == NULL && strstr(e->d_name, ".new-") == NULL,
                      "temporary file left behind: %s", e->d_name);
    closedir(d);
}

static mode_t mode_of(const char *path)
{
    struct stat sb;
    ck_assert_msg(stat(path, &sb) == 0, "stat(%s) failed", path);
    return sb.st_mode & 07777;
}

static bool is_install_id(const char *id)
{
    return strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32;
}

/* ---- the state directory ---- */

START_TEST(open_missing_without_create)
{
    const char *home = home_at("missing");
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_open(&st, false, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(err.msg, home));
    /* it says what sets an installation up, which an installed pybox can do itself */
    ck_assert_msg(strstr(err.msg, "pybox image build stdlib") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "scripts/") == NULL, "%s", err.msg);
    /* and nothing was made */
    struct stat sb;
    ck_assert_int_eq(stat(home, &sb), -1);
    ck_assert_int_eq(errno, ENOENT);
    /* a folder without an installation id says the same */
    ck_assert_int_eq(mkdir(home, 0700), 0);
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_state_open(&st, false, &err), -1);
    ck_assert_msg(strstr(err.msg, "pybox image build stdlib") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "scripts/") == NULL, "%s", err.msg);
}
END_TEST

START_TEST(open_create_and_reopen)
{
    const char *home = home_at("nested/state/home");
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(&st, true, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(st.dir, home);
    ck_assert_uint_eq(mode_of(home), 0700);
    ck_assert_msg(is_install_id(st.install_id), "install id '%s'", st.install_id);

    char path[PATH_MAX];
    ck_assert_int_eq(pybox_state_path(&st, "install-id", path, sizeof path, &err), 0);
    char *text = read_text(path);
    ck_assert_uint_eq(strlen(text), 33);
    ck_assert_int_eq(strncmp(text, st.install_id, 32), 0);
    ck_assert_int_eq(text[32], '\n');
    free(text);
    expect_no_temporaries(home);

    /* stable across reopening, with and without create */
    char first[33];
    memcpy(first, st.install_id, sizeof first);
    pybox_state_t again;
    ck_assert_int_eq(pybox_state_open(&again, false, &err), 0);
    ck_assert_str_eq(again.install_id, first);
    ck_assert_int_eq(pybox_state_open(&again, true, &err), 0);
    ck_assert_str_eq(again.install_id, first);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
}
END_TEST

START_TEST(open_tightens_mode)
{
    const char *home = home_at("open");
    ck_assert_int_eq(mkdir(home, 0755), 0);
    ck_assert_int_eq(chmod(home, 0755), 0);
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_open(&st, true, &err), 0);
    ck_assert_uint_eq(mode_of(home), 0700);
}
END_TEST

START_TEST(open_existing_dir_without_id)
{
    const char *home = home_at("bare");
    ck_assert_int_eq(mkdir(home, 0700), 0);
    pybox_state_t st;
    pybox_error_t err = {0};
    /* the directory is there but PyBox was never set up in it */
    ck_assert_int_eq(pybox_state_open(&st, false, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
}
END_TEST

START_TEST(corrupt_install_id)
{
    static const char *const bad[] = {
        "not an id\n",
        "0123456789abcdef0123456789abcde\n",   /* 31 digits */
        "0123456789abcdef0123456789abcdef0\n", /* 33 digits */
        "0123456789ABCDEF0123456789ABCDEF\n",  /* uppercase */
        "0123456789abcdef0123456789abcdeg\n",
        "",
        "\n",
    };
    const char *home = home_at("corrupt");
    ck_assert_int_eq(mkdir(home, 0700), 0);
    char path[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/install-id", home), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(path, bad[i]);
        for (int create = 0; create < 2; create++) {
            pybox_state_t st;
            pybox_error_t err = {0};
            ck_assert_msg(pybox_state_open(&st, create != 0, &err) == -1, "install id '%s' accepted", bad[i]);
            ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
            /* a bad id is never silently replaced */
            char *text = read_text(path);
            ck_assert_str_eq(text, bad[i]);
            free(text);
        }
    }
    /* without the trailing newline a good id is fine */
    write_text(path, "00112233445566778899aabbccddeeff");
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_open(&st, false, &err), 0);
    ck_assert_str_eq(st.install_id, "00112233445566778899aabbccddeeff");
}
END_TEST

START_TEST(relative_home_refused)
{
    ck_assert_int_eq(setenv("PYBOX_HOME", "relative/state", 1), 0);
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_open(&st, true, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "PYBOX_HOME"));
    struct stat sb;
    ck_assert_int_eq(stat("relative", &sb), -1); /* nothing made relative to the cwd */
}
END_TEST

START_TEST(home_is_a_file)
{
    const char *home = home_at("file");
    write_text(home, "x");
    pybox_state_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_open(&st, false, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
}
END_TEST

START_TEST(state_path_bounds)
{
    pybox_state_t st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(pybox_strlcpy(st.dir, "/state", sizeof st.dir), 0);
    char out[19]; /* exactly "/state/images.json" and its NUL */
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_state_path(&st, "images.json", out, sizeof out, &err), 0);
    ck_assert_str_eq(out, "/state/images.json");
    ck_assert_int_eq(pybox_state_path(&st, "images.jsonx", out, sizeof out, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
}
END_TEST

/* ---- pins ---- */

static void open_state(pybox_state_t *st)
{
    home_at("pins");
    pybox_error_t err = {0};
    ck_assert_msg(pybox_state_open(st, true, &err) == 0, "%s", err.msg);
}

static pybox_pin_t make_pin(const char *name, const char *id, int64_t size)
{
    pybox_pin_t p;
    memset(&p, 0, sizeof p);
    ck_assert_int_eq(pybox_strlcpy(p.name, name, sizeof p.name), 0);
    ck_assert_int_eq(pybox_strlcpy(p.id, id, sizeof p.id), 0);
    pybox_sha256_hex(name, strlen(name), p.recipe_sha256);
    ck_assert_int_eq(pybox_strlcpy(p.built_at, "2026-01-02T03:04:05.678Z", sizeof p.built_at), 0);
    p.size = size;
    return p;
}

/* The pins file of the backend a pin with none named goes to. */
static const char *default_pins(void)
{
    return pybox_backend_find(PYBOX_DEFAULT_BACKEND)->pins_file;
}

START_TEST(pins_round_trip)
{
    pybox_state_t st;
    open_state(&st);
    pybox_error_t err = {0};
    pybox_pin_t got;

    /* nothing pinned yet */
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "stdlib", &got, &err), 0);
    pybox_pin_t *all = NULL;
    size_t n = 99;
    ck_assert_int_eq(pybox_pin_list(&st, NULL, &all, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    free(all);

    pybox_pin_t a = make_pin("stdlib", "sha256:aaaa", 123456789);
    pybox_pin_t b = make_pin("data", "sha256:bbbb", 987654321);
    ck_assert_int_eq(pybox_pin_set(&st, &a, &err), 0);
    ck_assert_int_eq(pybox_pin_set(&st, &b, &err), 0);

    memset(&got, 0, sizeof got);
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "stdlib", &got, &err), 1);
    ck_assert_str_eq(got.name, "stdlib");
    ck_assert_str_eq(got.id, "sha256:aaaa");
    ck_assert_str_eq(got.recipe_sha256, a.recipe_sha256);
    ck_assert_str_eq(got.built_at, a.built_at);
    ck_assert_int_eq(got.size, 123456789);
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "data", &got, &err), 1);
    ck_assert_str_eq(got.id, "sha256:bbbb");
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "other", &got, &err), 0);

    /* set replaces */
    pybox_pin_t a2 = make_pin("stdlib", "sha256:cccc", 42);
    ck_assert_int_eq(pybox_pin_set(&st, &a2, &err), 0);
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "stdlib", &got, &err), 1);
    ck_assert_str_eq(got.id, "sha256:cccc");
    ck_assert_int_eq(got.size, 42);

    ck_assert_int_eq(pybox_pin_list(&st, NULL, &all, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    bool seen_stdlib = false, seen_data = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(all[i].name, "stdlib") == 0) {
            seen_stdlib = true;
            ck_assert_str_eq(all[i].id, "sha256:cccc");
        } else if (strcmp(all[i].name, "data") == 0) {
            seen_data = true;
            ck_assert_str_eq(all[i].id, "sha256:bbbb");
            ck_assert_int_eq(all[i].size, 987654321);
        }
    }
    ck_assert(seen_stdlib && seen_data);
    free(all);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);

    char path[PATH_MAX];
    ck_assert_int_eq(pybox_state_path(&st, default_pins(), path, sizeof path, &err), 0);
    ck_assert_uint_eq(mode_of(path), 0600);
    expect_no_temporaries(st.dir);
}
END_TEST

START_TEST(pins_corrupt_file)
{
    pybox_state_t st;
    open_state(&st);
    pybox_error_t err = {0};
    char path[PATH_MAX];
    ck_assert_int_eq(pybox_state_path(&st, default_pins(), path, sizeof path, &err), 0);
    write_text(path, "[1, 2, 3]");
    pybox_pin_t got;
    ck_assert_int_eq(pybox_pin_get(&st, NULL, "stdlib", &got, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    pybox_error_clear(&err);
    pybox_pin_t a = make_pin("stdlib", "sha256:aaaa", 1);
    ck_assert_int_eq(pybox_pin_set(&st, &a, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    /* the file is left as it was for the owner to look at */
    char *text = read_text(path);
    ck_assert_str_eq(text, "[1, 2, 3]");
    free(text);
}
END_TEST

/* ---- atomic writes ---- */

/* Numbers a double holds but an int64_t does not (a hand-edited or damaged images.json):
 * not taken, as if absent, instead of converted into whatever the machine makes of them. */
START_TEST(pins_numbers_out_of_range)
{
    const char text[] = "{\"huge\": {\"id\": \"sha256:1\", \"size\": 1e308, \"guest_protocol\": 3, "
                        "\"defaults\": {\"memory_bytes\": -1e300, \"pids\": 9.3e18, \"nano_cpus\": 5e8, "
                        "\"timeout_ms\": 1e19}}}";
    pybox_pin_t *pins = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_pins_parse(NULL, text, strlen(text), "images.json", &pins, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(pins[0].id, "sha256:1");
    ck_assert_int_eq(pins[0].size, 0);
    ck_assert_int_eq(pins[0].memory_bytes, 0);
    ck_assert_int_eq(pins[0].pids, 0);
    ck_assert_int_eq(pins[0].timeout_ms, 0);
    ck_assert_int_eq(pins[0].nano_cpus, 500000000);
    free(pins);
}
END_TEST

/* A run note whose expiry no int64_t holds is torn, not an expiry. */
START_TEST(note_expiry_out_of_range)
{
    const char *id = "0123456789abcdef0123456789abcdef";
    int64_t exp = -1;
    const char ok[] = "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"expires\":1764600000}";
    ck_assert_int_eq(pybox_journal_note_parse(ok, strlen(ok), id, &exp), 0);
    ck_assert_int_eq(exp, 1764600000);
    const char *bad[] = {"{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"expires\":1e308}",
                         "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"expires\":-1e19}"};
    for (size_t i = 0; i < 2; i++) {
        exp = -1;
        ck_assert_msg(pybox_journal_note_parse(bad[i], strlen(bad[i]), id, &exp) == -1, "taken: %s", bad[i]);
        ck_assert_int_eq(exp, -1);
    }
}
END_TEST

/* A ceiling is a positive number: one so small that it comes to nothing in PyBox's own
 * unit (1e-9 MiB is no byte, 0.0001 s no millisecond) is refused, not taken as zero. */
START_TEST(config_ceiling_below_unit)
{
    const char *bad[] = {"{\"max_memory_mib\": 1e-9}", "{\"max_timeout_s\": 0.0001}", "{\"max_cpus\": 1e-10}",
                         "{\"max_pids\": 0.5}", "{\"leftover_expiry_s\": 1e-300}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_config_t c;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_config_parse(bad[i], strlen(bad[i]), "config.json", &c, &err) == -1, "taken: %s", bad[i]);
        ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    }
    const char ok[] = "{\"max_memory_mib\": 0.5, \"max_timeout_s\": 0.001, \"max_cpus\": 0.25}";
    pybox_config_t c;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_config_parse(ok, strlen(ok), "config.json", &c, &err), 0);
    ck_assert_int_eq(c.limit[PYBOX_LIMIT_MEMORY], 512 * 1024);
    ck_assert_int_eq(c.limit[PYBOX_LIMIT_TIMEOUT], 1);
    ck_assert_int_eq(c.limit[PYBOX_LIMIT_CPUS], 250000000);
}
END_TEST

/* A ceiling goes no higher than what a run may ask (limits.h): max_timeout_s was taken up
 * to 24 h while no run may pass 1 h. */
START_TEST(config_ceiling_at_most_the_limit)
{
    for (int id = 0; id < PYBOX_LIMIT_COUNT; id++) {
        const pybox_limit_t *l = pybox_limit(id);
        char text[128];
        snprintf(text, sizeof text, "{\"%s\": %lld}", l->config_key, (long long)(l->max / l->config_unit));
        pybox_config_t c;
        pybox_error_t err = {0};
        ck_assert_msg(pybox_config_parse(text, strlen(text), "config.json", &c, &err) == 0, "%s: %s", text, err.msg);
        ck_assert_int_eq(c.limit[id], l->max);
        snprintf(text, sizeof text, "{\"%s\": %lld}", l->config_key, (long long)(l->max / l->config_unit) + 1);
        pybox_error_clear(&err);
        ck_assert_msg(pybox_config_parse(text, strlen(text), "config.json", &c, &err) == -1, "taken: %s", text);
        ck_assert_ptr_nonnull(strstr(err.msg, l->config_key));
    }
    const char day[] = "{\"max_timeout_s\": 86400}";
    pybox_config_t c;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_config_parse(day, strlen(day), "config.json", &c, &err), -1);
    ck_assert_str_eq(err.msg, "config.json: max_timeout_s must be a positive number up to 3600 (at least 0.001)");
}
END_TEST

START_TEST(write_atomic)
{
    home_at("w");
    char dir[PATH_MAX], path[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(dir, sizeof dir, "%s/w", tmp_root), 0);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/file.json", dir), 0);
    pybox_error_t err = {0};

    ck_assert_int_eq(pybox_write_file_atomic(path, "first", 5, 0600, &err), 0);
    char *text = read_text(path);
    ck_assert_str_eq(text, "first");
    free(text);
    ck_assert_uint_eq(mode_of(path), 0600);

    /* replacing keeps no trace of the old content or the temporary file */
    ck_assert_int_eq(pybox_write_file_atomic(path, "2nd", 3, 0640, &err), 0);
    text = read_text(path);
    ck_assert_str_eq(text, "2nd");
    free(text);
    ck_assert_uint_eq(mode_of(path), 0640);
    ck_assert_int_eq(pybox_write_file_atomic(path, "", 0, 0600, &err), 0);
    text = read_text(path);
    ck_assert_str_eq(text, "");
    free(text);
    expect_no_temporaries(dir);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);

    /* into a directory that does not exist: an error, and nothing is left */
    char bad[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(bad, sizeof bad, "%s/no/such/file", dir), 0);
    ck_assert_int_eq(pybox_write_file_atomic(bad, "x", 1, 0600, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    expect_no_temporaries(dir);

    /* the target is a directory: the rename fails and the temporary file is removed */
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_write_file_atomic(dir, "x", 1, 0600, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_STATE);
    expect_no_temporaries(tmp_root);
}
END_TEST

/* ---- names ---- */

START_TEST(name_validity)
{
    static const char *const good[] = {"stdlib", "data", "a",      "0",
                                       "a-b_c",  "0abc", "x1-2_3", "abcdefghijklmnopqrstuvwxyz012345"};
    static const char *const bad[] = {
        "",     "-a",  "_a",  "A",        "Stdlib", "a b",   "a/b",
        "../x", "a.b", "a:b", "\xc3\xa9", "a\n",    "a\x1b", "abcdefghijklmnopqrstuvwxyz0123456",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(pybox_name_valid(good[i]), "'%s' refused", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!pybox_name_valid(bad[i]), "'%s' accepted", bad[i]);
}
END_TEST

Suite *suite_state(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("dir");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_missing_without_create);
    tcase_add_test(tc, open_create_and_reopen);
    tcase_add_test(tc, open_tightens_mode);
    tcase_add_test(tc, open_existing_dir_without_id);
    tcase_add_test(tc, corrupt_install_id);
    tcase_add_test(tc, relative_home_refused);
    tcase_add_test(tc, home_is_a_file);
    tcase_add_test(tc, state_path_bounds);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    tc = tcase_create("pins");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pins_round_trip);
    tcase_add_test(tc, pins_corrupt_file);
    tcase_add_test(tc, pins_numbers_out_of_range);
    tcase_add_test(tc, note_expiry_out_of_range);
    tcase_add_test(tc, config_ceiling_below_unit);
    tcase_add_test(tc, config_ceiling_at_most_the_limit);
    tcase_add_test(tc, write_atomic);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, name_validity);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
