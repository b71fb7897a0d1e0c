/* SPDX-License-Identifier: MIT */
/* pybox image build | list | verify | rm: the pinned images (docs/images.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../image/image.h"
#include "../state.h"
#include "../util.h"
#include "cli.h"
#include "help.h"

static const struct option build_options[] = {PYBOX_CLI_FLAG("force", 'f'),    PYBOX_CLI_VALUE("lock", 'l'),
                                              PYBOX_CLI_VALUE("wheels", 'w'),  PYBOX_CLI_VALUE("debian", 'd'),
                                              PYBOX_CLI_VALUE("backend", 'b'), PYBOX_CLI_VALUE("rootfs", 'r'),
                                              PYBOX_CLI_FLAG("help", 'h'),     PYBOX_CLI_END};
/* list, verify and rm take no option but --backend */
static const struct option options[] = {PYBOX_CLI_VALUE("backend", 'b'), PYBOX_CLI_FLAG("help", 'h'), PYBOX_CLI_END};

typedef struct {
    const char *backend, *lock, *wheels, *debian, *rootfs;
    bool force;
    pybox_state_t st;
    pybox_backend_t *be;
} args_t;

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)err;
    args_t *a = ctx;
    a->force |= val == 'f';
    const char **to = val == 'b'   ? &a->backend
                      : val == 'l' ? &a->lock
                      : val == 'w' ? &a->wheels
                      : val == 'r' ? &a->rootfs
                                   : &a->debian;
    if (value != NULL)
        *to = value;
    return 0;
}

/* The subcommand's options and arguments, then (paths) the recipes and guest init, then
 * (open) the installation and its backend: what this pybox lacks is said before any
 * backend is probed. The index of the subcommand's first argument, or -1 with err. */
static int prepare(const char *command, int argc, char **argv, args_t *a, pybox_image_paths_t *paths, bool open,
                   pybox_error_t *err)
{
    *a = (args_t){0};
    int first = pybox_cli_args(command, argc, argv, a, err);
    if (first < 0 || (paths != NULL && pybox_image_paths_default(paths, err) < 0) ||
        (open && (pybox_state_open(&a->st, strcmp(command, "image build") == 0, err) < 0 ||
                  pybox_backend_open_for(&a->st, a->backend, &a->be, err) < 0)))
        return -1;
    return first + 1; /* after the subcommand's word */
}

static int build(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a;
    pybox_image_paths_t paths;
    int first = prepare("image build", argc, argv, &a, &paths, true, &err);
    if (first < 0) {
        pybox_backend_close(a.be);
        return pybox_cli_fail(&err, false);
    }
    bool built = false;
    const pybox_out_t progress = {pybox_out_file, stderr};
    if (a.rootfs != NULL && (a.lock || a.wheels || a.debian)) {
        pybox_backend_close(a.be);
        return pybox_cli_failf(PYBOX_ERR_USAGE, 0, "--rootfs builds a recipe of images/, not a custom one");
    }
    int rc =
        a.lock || a.wheels || a.debian
            ? pybox_image_build_custom(&a.st, a.be, &paths, argv[first], a.lock, a.wheels, a.debian, &progress, &err)
            : pybox_image_build(&a.st, a.be, &paths, argv[first], a.force, a.rootfs, &progress, &built, &err);
    pybox_backend_close(a.be);
    return rc < 0 ? pybox_cli_fail(&err, false) : 0;
}

static int list(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a;
    if (prepare("image list", argc, argv, &a, NULL, false, &err) < 0 || pybox_state_open(&a.st, false, &err) < 0)
        return pybox_cli_fail(&err, false);
    if (a.backend != NULL && pybox_backend_find(a.backend) == NULL)
        return pybox_cli_failf(PYBOX_ERR_USAGE, 0, "--backend: unknown backend");
    /* Every backend's pins, unless one is asked for. */
    printf("%-12s %-8s %-8s %-71s %10s  %-16s  %s\n", "NAME", "BACKEND", "KIND", "PINNED IMAGE ID", "SIZE", "RECIPE",
           "BUILT");
    const pybox_backend_ops_t *ops;
    for (size_t b = 0; (ops = pybox_backend_nth(b)) != NULL; b++) {
        if (a.backend != NULL && strcmp(a.backend, ops->name) != 0)
            continue;
        pybox_pin_t *pins = NULL;
        size_t npins = 0;
        if (pybox_pin_list(&a.st, ops->name, &pins, &npins, &err) < 0)
            return pybox_cli_fail(&err, false);
        for (size_t i = 0; i < npins; i++)
            printf("%-12s %-8s %-8s %-71s %7.1f MB  %.16s  %s\n", pins[i].name, pins[i].backend,
                   pins[i].custom ? "custom" : "built-in", pins[i].id, (double)pins[i].size / 1e6,
                   pins[i].recipe_sha256, pins[i].built_at);
        free(pins);
    }
    return 0;
}

/* rm NAME, or verify: 0 done, 1 a pin failed its check. rm needs no recipe: a pybox
 * without its recipes can still remove an image. */
static int rm_or_verify(int argc, char **argv, bool rm)
{
    pybox_error_t err = {0};
    args_t a;
    pybox_image_paths_t paths;
    const pybox_out_t out = {pybox_out_file, stdout};
    int first = prepare(rm ? "image rm" : "image verify", argc, argv, &a, rm ? NULL : &paths, true, &err);
    int rc = first < 0 ? -1
             : rm      ? pybox_image_remove(&a.st, a.be, argv[first], &out, &err)
                       : pybox_image_verify(&a.st, a.be, &paths, &out, &err);
    pybox_backend_close(a.be);
    return rc < 0 ? pybox_cli_fail(&err, false) : rc == 0 ? 0 : 1;
}

static int rm(int argc, char **argv)
{
    return rm_or_verify(argc, argv, true);
}

static int verify(int argc, char **argv)
{
    return rm_or_verify(argc, argv, false);
}

/* The subcommand is the first argument that is neither an option nor --backend's value. */
static const char *subcommand(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0)
            i++;
        else if (argv[i][0] != '-')
            return argv[i];
    }
    return NULL;
}

static int run(int argc, char **argv)
{
    const char *sub = subcommand(argc, argv);
    char name[32];
    const pybox_cli_command_t *c =
        sub != NULL && pybox_fmt(name, sizeof name, "image %s", sub) == 0 ? pybox_cli_command(name) : NULL;
    if (c != NULL)
        return c->run(argc, argv);
    pybox_error_t err = {0};
    args_t a = {0};
    if (pybox_cli_walk("image", argc, argv, take, &a, &err) < 0 || sub != NULL) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "unknown image command (build, list, rm, verify)");
        return pybox_cli_fail(&err, false);
    }
    pybox_help(stderr, "image"); /* no subcommand */
    return PYBOX_EXIT_FAILED;
}

const pybox_cli_command_t
    pybox_cli_image = {"image", options, false, take, 0, -1, NULL, run},
    pybox_cli_image_build = {"image build",
                             build_options,
                             false,
                             take,
                             2,
                             2,
                             "usage: pybox image build NAME [--force] [--lock uv.lock --wheels "
                             "DIR | --debian PACKAGES]",
                             build},
    pybox_cli_image_list = {"image list", options, false, take, 1, 1, "usage: pybox image list [--backend NAME]", list},
    pybox_cli_image_verify = {"image verify", options, false, take, 1, 1, "usage: pybox image verify", verify},
    pybox_cli_image_rm = {"image rm", options, false, take, 2, 2, "usage: pybox image rm NAME", rm};
