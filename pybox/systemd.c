/* SPDX-License-Identifier: MIT */
/* Transient scopes from systemd over sd-bus, libsystemd opened on first use (systemd.h). */
#include "systemd.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>

#include "escape.h"
#include "util.h"

/* The name Debian's libsystemd0 gives the library (its ABI). */
#define PYBOX_SD_SONAME "libsystemd.so.0"

/* The sd-bus functions PyBox calls, each with its declared type. */
static struct {
    __typeof__(sd_bus_new) *sd_bus_new;
    __typeof__(sd_bus_set_address) *sd_bus_set_address;
    __typeof__(sd_bus_start) *sd_bus_start;
    __typeof__(sd_bus_open_system) *sd_bus_open_system;
    __typeof__(sd_bus_open_user) *sd_bus_open_user;
    __typeof__(sd_bus_flush_close_unref) *sd_bus_flush_close_unref;
    __typeof__(sd_bus_message_new_method_call) *sd_bus_message_new_method_call;
    __typeof__(sd_bus_message_append) *sd_bus_message_append;
    __typeof__(sd_bus_message_open_container) *sd_bus_message_open_container;
    __typeof__(sd_bus_message_close_container) *sd_bus_message_close_container;
    __typeof__(sd_bus_message_read) *sd_bus_message_read;
    __typeof__(sd_bus_message_unref) *sd_bus_message_unref;
    __typeof__(sd_bus_message_get_error) *sd_bus_message_get_error;
    __typeof__(sd_bus_message_is_method_error) *sd_bus_message_is_method_error;
    __typeof__(sd_bus_call_async) *sd_bus_call_async;
    __typeof__(sd_bus_match_signal) *sd_bus_match_signal;
    __typeof__(sd_bus_slot_unref) *sd_bus_slot_unref;
    __typeof__(sd_bus_process) *sd_bus_process;
    __typeof__(sd_bus_wait) *sd_bus_wait;
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256]; /* empty once the library is open */
static bool opened;

static void open_once(void)
{
    void *lib = dlopen(PYBOX_SD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "%s", why != NULL ? why : PYBOX_SD_SONAME);
        return;
    }
    /* Every function found, or none used: a partial table is never published. */
    __typeof__(fn) t;
    void *f;
#define TAKE(name)                                                                                                     \
    if ((f = dlsym(lib, #name)) == NULL) {                                                                             \
        snprintf(failure, sizeof failure, "%s has no %s", PYBOX_SD_SONAME, #name);                                     \
        return;                                                                                                        \
    }                                                                                                                  \
    t.name = (__typeof__(t.name))f;
    TAKE(sd_bus_new)
    TAKE(sd_bus_set_address)
    TAKE(sd_bus_start)
    TAKE(sd_bus_open_system)
    TAKE(sd_bus_open_user)
    TAKE(sd_bus_flush_close_unref)
    TAKE(sd_bus_message_new_method_call)
    TAKE(sd_bus_message_append)
    TAKE(sd_bus_message_open_container)
    TAKE(sd_bus_message_close_container)
    TAKE(sd_bus_message_read)
    TAKE(sd_bus_message_unref)
    TAKE(sd_bus_message_get_error)
    TAKE(sd_bus_message_is_method_error)
    TAKE(sd_bus_call_async)
    TAKE(sd_bus_match_signal)
    TAKE(sd_bus_slot_unref)
    TAKE(sd_bus_process)
    TAKE(sd_bus_wait)
#undef TAKE
    fn = t; /* the library stays open for the process's life */
    opened = true;
}

bool pybox_sd_booted(const char *mark)
{
    struct stat sb;
    return lstat(mark != NULL ? mark : PYBOX_SD_BOOTED_MARK, &sb) == 0 && S_ISDIR(sb.st_mode);
}

bool pybox_sd_unit_name_ok(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    if (n <= s || n > 255 || strcmp(name + n - s, suffix) != 0)
        return false;
    return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.-") == n;
}

struct pybox_sd {
    sd_bus *bus;
    sd_bus_slot *match, *call;
    char unit[256];
    bool asked;    /* a request is out */
    bool answered; /* systemd's reply came */
    char job[256]; /* the job's object path, from the reply */
    char result[32];
    bool removed; /* the job's JobRemoved came */
    pybox_error_t failed;
};

static int sd_fail(pybox_error_t *err, int r, const char *what)
{
    char buf[128];
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, r < 0 ? -r : 0, "systemd: %s: %s", what,
                           pybox_strerror(r < 0 ? -r : EIO, buf, sizeof buf));
}

/* The manager's own socket (no message bus in between, and no bus needed at all), else
 * the bus, where the manager is org.freedesktop.systemd1. */
static int connect_private(pybox_sd_manager_t which, sd_bus **out, char *where, size_t len)
{
    char path[PATH_MAX];
    if (which == PYBOX_SD_SYSTEM) {
        pybox_strlcpy(path, "/run/systemd/private", sizeof path);
    } else {
        char rtb[PATH_MAX];
        const char *rt = pybox_runtime_dir(rtb, sizeof rtb);
        if (rt == NULL || pybox_fmt(path, sizeof path, "%s/systemd/private", rt) < 0)
            return -ENOENT;
    }
    struct stat sb;
    if (stat(path, &sb) < 0 || !S_ISSOCK(sb.st_mode))
        return -ENOENT;
    char addr[PATH_MAX + 16];
    if (pybox_fmt(addr, sizeof addr, "unix:path=%s", path) < 0)
        return -ENAMETOOLONG;
    sd_bus *bus = NULL;
    int r = fn.sd_bus_new(&bus);
    if (r < 0)
        return r;
    if ((r = fn.sd_bus_set_address(bus, addr)) < 0 || (r = fn.sd_bus_start(bus)) < 0) {
        fn.sd_bus_flush_close_unref(bus);
        return r;
    }
    pybox_strlcpy(where, path, len);
    *out = bus;
    return 0;
}

int pybox_sd_open(pybox_sd_manager_t which, pybox_sd_t **out, pybox_error_t *err)
{
    *out = NULL;
    pthread_once(&once, open_once);
    if (!opened)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOENT, "systemd: cannot open libsystemd: %s", failure);
    pybox_sd_t *sd = calloc(1, sizeof *sd);
    if (sd == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    char where[PATH_MAX];
    int r = connect_private(which, &sd->bus, where, sizeof where);
    if (r < 0) {
        r = which == PYBOX_SD_SYSTEM ? fn.sd_bus_open_system(&sd->bus) : fn.sd_bus_open_user(&sd->bus);
        if (r < 0) {
            free(sd);
            return sd_fail(err, r,
                           which == PYBOX_SD_SYSTEM
                               ? "connecting to the system's manager (neither "
                                 "/run/systemd/private nor the system bus answered)"
                               : "connecting to the user's manager (neither "
                                 "systemd/private in the user's runtime folder nor the user bus answered)");
        }
    }
    *out = sd;
    return 0;
}

void pybox_sd_close(pybox_sd_t *sd)
{
    if (sd == NULL)
        return;
    fn.sd_bus_slot_unref(sd->call);
    fn.sd_bus_slot_unref(sd->match);
    fn.sd_bus_flush_close_unref(sd->bus);
    free(sd);
}

/* JobRemoved(u id, o job, s unit, s result): ours is known by its unit's name, so a
 * signal that comes before the reply (which names the job) is not missed. */
static int on_job_removed(sd_bus_message *m, void *arg, sd_bus_error *e)
{
    (void)e;
    pybox_sd_t *sd = arg;
    uint32_t id;
    const char *job = NULL, *unit = NULL, *result = NULL;
    if (fn.sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0 || unit == NULL || result == NULL)
        return 0;
    if (strcmp(unit, sd->unit) != 0 || sd->removed)
        return 0;
    sd->removed = true;
    pybox_strlcpy(sd->result, result, sizeof sd->result);
    return 0;
}

static int on_reply(sd_bus_message *m, void *arg, sd_bus_error *e)
{
    (void)e;
    pybox_sd_t *sd = arg;
    sd->answered = true;
    if (fn.sd_bus_message_is_method_error(m, NULL)) {
        const sd_bus_error *be = fn.sd_bus_message_get_error(m);
        char name[160], msg[400];
        pybox_escape_short(name, sizeof name, be && be->name ? be->name : "?", 120);
        pybox_escape_short(msg, sizeof msg, be && be->message ? be->message : "", 300);
        pybox_error_set(&sd->failed, PYBOX_ERR_SYSTEM, EPERM, "systemd refused to start %s: %s: %s", sd->unit, name,
                        msg);
        return 0;
    }
    const char *job = NULL;
    if (fn.sd_bus_message_read(m, "o", &job) < 0 || job == NULL)
        pybox_error_set(&sd->failed, PYBOX_ERR_PROTOCOL, 0, "systemd's answer to starting %s named no job", sd->unit);
    else
        pybox_strlcpy(sd->job, job, sizeof sd->job);
    return 0;
}

int pybox_sd_scope_request(pybox_sd_t *sd, const pybox_sd_scope_t *s, pybox_error_t *err)
{
    if (sd->asked)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "systemd: one scope per connection");
    if (!pybox_sd_unit_name_ok(s->unit, ".scope") || !pybox_sd_unit_name_ok(s->slice, ".slice") || s->pid <= 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, EINVAL, "systemd: not a scope PyBox asks for");
    pybox_strlcpy(sd->unit, s->unit, sizeof sd->unit);
    /* Watched before the request goes, so its end cannot pass unseen. On the manager's own
     * socket every signal comes; on the bus the job's requester gets its own. */
    int r = fn.sd_bus_match_signal(sd->bus, &sd->match, NULL, "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, sd);
    if (r < 0)
        return sd_fail(err, r, "watching for the end of the scope's job");
    sd_bus_message *m = NULL;
    r = fn.sd_bus_message_new_method_call(sd->bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                          "org.freedesktop.systemd1.Manager", "StartTransientUnit");
    if (r >= 0)
        r = fn.sd_bus_message_append(m, "ss", s->unit, "fail");
    if (r >= 0)
        r = fn.sd_bus_message_open_container(m, 'a', "(sv)");
    /* Delegate: the subtree is PyBox's, and systemd enables every controller it delegates
     * up the chain to the scope. OOMPolicy continue: an OOM kill of one process of a box is
     * the box's business (its init reports it), not a reason to stop the whole scope.
     * CollectMode: a scope that failed is unloaded all the same, nothing lingers. */
    if (r >= 0)
        r = fn.sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s", s->description, "Slice", "s",
                                     s->slice, "Delegate", "b", 1, "OOMPolicy", "s", "continue", "CollectMode", "s",
                                     "inactive-or-failed", "PIDs", "au", 1, (uint32_t)s->pid);
    if (r >= 0)
        r = fn.sd_bus_message_close_container(m);
    if (r >= 0)
        r = fn.sd_bus_message_append(m, "a(sa(sv))", 0);
    if (r >= 0)
        r = fn.sd_bus_call_async(sd->bus, &sd->call, m, on_reply, sd, (uint64_t)PYBOX_SD_JOB_TIMEOUT_MS * 1000);
    fn.sd_bus_message_unref(m);
    if (r < 0)
        return sd_fail(err, r, "asking for the scope");
    sd->asked = true;
    return 0;
}

int pybox_sd_scope_wait(pybox_sd_t *sd, int64_t timeout_ms, pybox_error_t *err)
{
    if (!sd->asked)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "systemd: no scope was asked for");
    int64_t deadline = pybox_now_ms() + timeout_ms;
    for (;;) {
        if (sd->failed.kind != PYBOX_ERR_NONE) {
            if (err != NULL && err->kind == PYBOX_ERR_NONE)
                *err = sd->failed;
            return -1;
        }
        if (sd->answered && sd->removed)
            break;
        int r = fn.sd_bus_process(sd->bus, NULL);
        if (r < 0)
            return sd_fail(err, r, "reading the manager's messages");
        if (r > 0)
            continue;
        int64_t left = deadline - pybox_now_ms();
        if (left <= 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, ETIMEDOUT,
                                   "systemd: the job starting %s did not end within %lld ms (%s)", sd->unit,
                                   (long long)timeout_ms, sd->answered ? "answered" : "no answer");
        r = fn.sd_bus_wait(sd->bus, (uint64_t)left * 1000);
        if (r < 0 && r != -EINTR)
            return sd_fail(err, r, "waiting for the manager");
    }
    if (strcmp(sd->result, "done") != 0) {
        char shown[64];
        pybox_escape_short(shown, sizeof shown, sd->result, 30);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "systemd's job starting %s ended \"%s\", not \"done\"",
                               sd->unit, shown);
    }
    return 0;
}
