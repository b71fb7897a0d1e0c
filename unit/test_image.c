/* SPDX-License-Identifier: MIT */
/* Unit tests for where image builds find their recipes and guest init (image.h): in the
 * build folder, under an installed prefix, or where the environment says. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/image/image.h"
#include "suites.h"

/* A file (and its folders) under root. */
static void touch(const char *root, const char *rel)
{
    char path[PATH_MAX];
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", root, rel), (int)sizeof path);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
        *s = '/';
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static char root[] = "/tmp/pybox-unit-image-XXXXXX";

static void make_root(void)
{
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void remove_root(void)
{
    unit_rm_tree(root);
}

static void find(const char *exe_rel, const char *images_env, const char *init_env, pybox_image_paths_t *p, int want)
{
    char exe_dir[PATH_MAX];
    ck_assert_int_lt(snprintf(exe_dir, sizeof exe_dir, "%s/%s", root, exe_rel), (int)sizeof exe_dir);
    pybox_error_t err = {0};
    memset(p, 0, sizeof *p);
    int rc = pybox_image_paths_find(exe_dir, images_env, init_env, p, &err);
    ck_assert_msg(rc == want, "pybox_image_paths_find(%s) = %d: %s", exe_dir, rc, err.msg);
}

static void is(const char *got, const char *rel)
{
    char want[PATH_MAX];
    ck_assert_int_lt(snprintf(want, sizeof want, "%s/%s", root, rel), (int)sizeof want);
    ck_assert_str_eq(got, want);
}

START_TEST(build_folder)
{
    /* the source tree: build/pybox, build/pybox-init, images/ */
    make_root();
    touch(root, "build/pybox");
    touch(root, "build/pybox-init");
    touch(root, "images/build-rootfs.sh");
    pybox_image_paths_t p;
    find("build", NULL, NULL, &p, 0);
    is(p.recipes, "images");
    is(p.init, "build/pybox-init");
    remove_root();
}
END_TEST

START_TEST(installed_prefix)
{
    /* make install PREFIX=root: bin/pybox, libexec/pybox/pybox-init, share/pybox/images */
    make_root();
    touch(root, "bin/pybox");
    touch(root, "libexec/pybox/pybox-init");
    touch(root, "share/pybox/images/build-rootfs.sh");
    pybox_image_paths_t p;
    find("bin", NULL, NULL, &p, 0);
    is(p.recipes, "share/pybox/images");
    is(p.init, "libexec/pybox/pybox-init");
    remove_root();
}
END_TEST

START_TEST(environment_wins)
{
    make_root();
    touch(root, "bin/pybox");
    touch(root, "libexec/pybox/pybox-init");
    touch(root, "share/pybox/images/build-rootfs.sh");
    pybox_image_paths_t p;
    find("bin", "/elsewhere/images", "/elsewhere/init", &p, 0);
    ck_assert_str_eq(p.recipes, "/elsewhere/images");
    ck_assert_str_eq(p.init, "/elsewhere/init");
    /* empty is not set */
    find("bin", "", "", &p, 0);
    is(p.recipes, "share/pybox/images");
    is(p.init, "libexec/pybox/pybox-init");
    remove_root();
}
END_TEST

START_TEST(nothing_found)
{
    /* a pybox copied alone: the error names where it looked and what overrides it */
    make_root();
    touch(root, "bin/pybox");
    char exe_dir[PATH_MAX];
    ck_assert_int_lt(snprintf(exe_dir, sizeof exe_dir, "%s/bin", root), (int)sizeof exe_dir);
    pybox_image_paths_t p;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_image_paths_find(exe_dir, NULL, NULL, &p, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
    ck_assert_msg(strstr(err.msg, "share/pybox/images") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "PYBOX_IMAGES") != NULL, "%s", err.msg);
    /* the recipes there, the init not */
    touch(root, "share/pybox/images/build-rootfs.sh");
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_image_paths_find(exe_dir, NULL, NULL, &p, &err), -1);
    ck_assert_msg(strstr(err.msg, "libexec/pybox/pybox-init") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "PYBOX_INIT") != NULL, "%s", err.msg);
    remove_root();
}
END_TEST

Suite *suite_image(void)
{
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("paths");
    tcase_add_test(tc, build_folder);
    tcase_add_test(tc, installed_prefix);
    tcase_add_test(tc, environment_wins);
    tcase_add_test(tc, nothing_found);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
