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

enum { OPT_BACKEND = 1, OPT_HELP, OPT_FORCE, OPT_LOCK, OPT_WHEELS, OPT_DEBIAN };
static const struct option build_options[] = {
    {"force", no_argument, NULL, OPT_FORCE},
    {"lock", required_argument, NULL, OPT_LOCK},
    {"wheels", required_argument, NULL, OPT_WHEELS},
    {"debian", required_argument, NULL, OPT_DEBIAN},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};
/* list, verify and rm take no option but --backend */
static const struct option options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

typedef struct {
    const char *backend, *lock, *wheels, *debian;
    bool force;
} args_t;

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)err;
    args_t *a = ctx;
    const char **to[] = {
        [OPT_BACKEND] = &a->backend, [OPT_LOCK] = &a->lock, [OPT_WHEELS] = &a->wheels, [OPT_DEBIAN] = &a->debian};
    if (val == OPT_FORCE)
        a->force = true;
    else if (val < (int)(sizeof to / sizeof *to) && to[val] != NULL)
        *to[val] = value;
    return 0;
}

/* The subcommand's options walked (argv[0] is "image"): the arguments after the
 * subcommand's word, from *first on, or -1 with err. */
static int walk(const char *command, int argc, char **argv, args_t *a, int *first, pybox_error_t *err)
{
    *a = (args_t){0};
    *first = pybox_cli_walk(command, argc, argv, take, a, err);
    if (*first < 0)
        return -1;
    (*first)++; /* the subcommand's word */
    return 0;
}

static int build(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a;
    int first;
    if (walk("image build", argc, argv, &a, &first, &err) < 0)
        return pybox_cli_fail(&err, false);
    if (first + 1 != argc) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "usage: pybox image build NAME [--force] [--lock uv.lock --wheels DIR | --debian PACKAGES]");
        return pybox_cli_fail(&err, false);
    }
    const char *name = argv[first];
    pybox_state_t st;
    pybox_image_paths_t paths;
    if (pybox_state_open(&st, true, &err) < 0 || pybox_image_paths_default(&paths, &err) < 0)
        return pybox_cli_fail(&err, false);
    _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, a.backend, &be, &err) < 0)
        return pybox_cli_fail(&err, false);
    bool built = false;
    const pybox_out_t progress = {pybox_out_file, stderr};
    int rc = a.lock || a.wheels || a.debian
                 ? pybox_image_build_custom(&st, be, &paths, name, a.lock, a.wheels, a.debian, &progress, &err)
                 : pybox_image_build(&st, be, &paths, name, a.force, &progress, &built, &err);
    return rc < 0 ? pybox_cli_fail(&err, false) : 0;
}

static int list(int argc, char **argv)
{
    pybox_error_t err = {0};
    args_t a;
    int first;
    if (walk("image list", argc, argv, &a, &first, &err) < 0)
        return pybox_cli_fail(&err, false);
    pybox_state_t st;
    if (first != argc)
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "usage: pybox image list [--backend NAME]");
    else if (pybox_state_open(&st, false, &err) == 0 && a.backend != NULL && pybox_backend_find(a.backend) == NULL)
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "--backend: unknown backend");
    if (err.kind != PYBOX_ERR_NONE)
        return pybox_cli_fail(&err, false);
    /* Every backend's pins, unless one is asked for. */
    printf("%-12s %-8s %-8s %-71s %10s  %-16s  %s\n", "NAME", "BACKEND", "KIND", "PINNED IMAGE ID", "SIZE", "RECIPE",
           "BUILT");
    const pybox_backend_ops_t *ops;
    for (size_t b = 0; (ops = pybox_backend_nth(b)) != NULL; b++) {
        if (a.backend != NULL && strcmp(a.backend, ops->name) != 0)
            continue;
        pybox_pin_t *pins = NULL;
        size_t npins = 0;
        if (pybox_pin_list(&st, ops->name, &pins, &npins, &err) < 0)
            return pybox_cli_fail(&err, false);
        for (size_t i = 0; i < npins; i++)
            printf("%-12s %-8s %-8s %-71s %7.1f MB  %.16s  %s\n", pins[i].name, pins[i].backend,
                   pins[i].custom ? "custom" : "built-in", pins[i].id, (double)pins[i].size / 1e6,
                   pins[i].recipe_sha256, pins[i].built_at);
        free(pins);
    }
    return 0;
}

/* rm NAME, or verify: 0 done, 1 a pin failed its check. */
static int rm_or_verify(int argc, char **argv, bool rm)
{
    pybox_error_t err = {0};
    args_t a;
    int first;
    if (walk(rm ? "image rm" : "image verify", argc, argv, &a, &first, &err) < 0)
        return pybox_cli_fail(&err, false);
    if (argc - first != (rm ? 1 : 0)) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, rm ? "usage: pybox image rm NAME" : "usage: pybox image verify");
        return pybox_cli_fail(&err, false);
    }
    /* rm needs no recipe: a pybox without its recipes can still remove an image */
    pybox_state_t st;
    pybox_image_paths_t paths;
    if (pybox_state_open(&st, false, &err) < 0 || (!rm && pybox_image_paths_default(&paths, &err) < 0))
        return pybox_cli_fail(&err, false);
    _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, a.backend, &be, &err) < 0)
        return pybox_cli_fail(&err, false);
    const pybox_out_t out = {pybox_out_file, stdout};
    int rc =
        rm ? pybox_image_remove(&st, be, argv[first], &out, &err) : pybox_image_verify(&st, be, &paths, &out, &err);
    if (rc < 0)
        return pybox_cli_fail(&err, false);
    return rc == 0 ? 0 : 1;
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
    args_t a;
    int first;
    if (walk("image", argc, argv, &a, &first, &err) < 0 || sub != NULL) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "unknown image command (build, list, rm, verify)");
        return pybox_cli_fail(&err, false);
    }
    pybox_help(stderr, "image"); /* no subcommand */
    return PYBOX_EXIT_FAILED;
}

const pybox_cli_command_t pybox_cli_image = {"image", options, false, run},
                          pybox_cli_image_build = {"image build", build_options, false, build},
                          pybox_cli_image_list = {"image list", options, false, list},
                          pybox_cli_image_verify = {"image verify", options, false, verify},
                          pybox_cli_image_rm = {"image rm", options, false, rm};
