/* SPDX-License-Identifier: MIT */
/* The registry of backends (see box.h): one line per backend. */
#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "escape.h"
#include "util.h"

/* The default's one copy, so that a choice can tell it was not asked for. */
static const char default_backend[] = PYBOX_DEFAULT_BACKEND;

extern const pybox_backend_ops_t pybox_docker_backend_ops;
extern const pybox_backend_ops_t pybox_native_backend_ops;

static const pybox_backend_ops_t *const registry[] = {
    &pybox_docker_backend_ops,
    &pybox_native_backend_ops,
};

#define N_BACKENDS (sizeof registry / sizeof *registry)

const char *const pybox_held_words[] = {"stdin", "stdout", "stderr", "mount_namespace", NULL};
static const char *const held_prose[] = {"its stdin's read end", "its stdout's write end", "its stderr's write end",
                                         "its mount namespace (its /tmp, /dev/shm, /box/out and other mounts)"};

void pybox_held_text(unsigned bits, char *out, size_t len)
{
    pybox_buf_t b;
    pybox_buf_init(&b, len);
    for (size_t i = 0; pybox_held_words[i] != NULL; i++)
        if (bits & (1u << i))
            pybox_buf_addf(&b, "%s%s", b.len ? ", " : "", held_prose[i]);
    pybox_strlcpy(out, b.data ? b.data : "", len);
    pybox_buf_free(&b);
}

const pybox_backend_ops_t *pybox_backend_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_BACKENDS; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const pybox_backend_ops_t *pybox_backend_nth(size_t i)
{
    return i < N_BACKENDS ? registry[i] : NULL;
}

void pybox_backend_names(char *out, size_t len)
{
    pybox_buf_t b;
    pybox_buf_init(&b, len);
    for (size_t i = 0; i < N_BACKENDS; i++)
        pybox_buf_addf(&b, "%s%s", i ? ", " : "", registry[i]->name);
    pybox_strlcpy(out, b.data ? b.data : "", len);
    pybox_buf_free(&b);
}

int pybox_backend_open(const char *name, const pybox_state_t *st, pybox_backend_t **out, pybox_error_t *err)
{
    *out = NULL;
    const char *want = name != NULL && name[0] != '\0' ? name : PYBOX_DEFAULT_BACKEND;
    const pybox_backend_ops_t *ops = pybox_backend_find(want);
    if (ops == NULL) {
        char shown[160], known[256];
        pybox_escape_short(shown, sizeof shown, want, 32);
        pybox_backend_names(known, sizeof known);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown backend '%s' (known: %s)", shown, known);
    }
    return ops->open(st, out, err);
}

void pybox_backend_close(pybox_backend_t *be)
{
    if (be != NULL)
        be->ops->close(be);
}

void pybox_backend_closep(pybox_backend_t **be)
{
    pybox_backend_close(*be);
    *be = NULL;
}

int pybox_backend_open_for(const pybox_state_t *st, const char *name, pybox_backend_t **out, pybox_error_t *err)
{
    *out = NULL;
    pybox_config_t c;
    if ((name == NULL || name[0] == '\0') && pybox_state_config(st, &c, err) < 0)
        return -1;
    const char *chosen = pybox_backend_choose(name && name[0] ? NULL : &c, name);
    if (pybox_backend_open(chosen, st, out, err) == 0)
        return 0;
    /* Nobody asked for it: say which backend that was and how to ask for the other. */
    if (chosen == default_backend)
        pybox_error_prefix(err,
                           "the default backend, %s, cannot run here (--backend %s, PYBOX_BACKEND=%s or "
                           "\"backend\": \"%s\" in config.json chooses the other)",
                           PYBOX_DEFAULT_BACKEND, PYBOX_OTHER_BACKEND, PYBOX_OTHER_BACKEND, PYBOX_OTHER_BACKEND);
    return -1;
}

const char *pybox_backend_choose(const pybox_config_t *c, const char *asked)
{
    if (asked != NULL && asked[0] != '\0')
        return asked;
    /* Read once, before any thread: the environment is not changed while PyBox runs. */
    const char *env = getenv("PYBOX_BACKEND");
    if (env != NULL && env[0] != '\0')
        return env;
    if (c != NULL && c->backend[0] != '\0')
        return c->backend;
    return default_backend;
}
