/* SPDX-License-Identifier: MIT */
/* What a rootless native box needs of the host, checked before any box (see rootless.h). */
#include "rootless.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../buf.h"
#include "../cgroup.h"
#include "../systemd.h"
#include "../uid.h"
#include "../util.h"

/* A small file of the host's, its first line without the newline; "" when absent. */
static void read_line(const char *root, const char *rel, char *out, size_t len)
{
    char path[PATH_MAX];
    out[0] = '\0';
    _cleanup_free_ char *text = NULL;
    size_t n = 0;
    bool over = false;
    pybox_error_t ignored = {0};
    if (pybox_fmt(path, sizeof path, "%s%s", root, rel) < 0 ||
        pybox_read_file(path, O_NOFOLLOW, 4096, &text, &n, &over, &ignored) < 0)
        return;
    text[strcspn(text, "\n")] = '\0';
    pybox_strlcpy(out, text, len);
}

/* A helper newuidmap or newgidmap: a root-owned executable that is set-user-ID or has
 * file capabilities (some distributions give it cap_setuid instead). NULL when it is
 * fit, else what is wrong with it. */
static const char *helper_unfit(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return errno == ENOENT ? "is not installed" : "cannot be looked at";
    if (!S_ISREG(sb.st_mode) || sb.st_uid != 0 || (sb.st_mode & 0111) == 0 || (sb.st_mode & 0022) != 0)
        return "is not a root-owned executable that only root can change";
    if ((sb.st_mode & S_ISUID) == 0 && getxattr(path, "security.capability", NULL, 0) <= 0)
        return "is neither set-user-ID root nor given capabilities (cap_setuid, cap_setgid)";
    return NULL;
}

/* Whether this process can make a user namespace now: a child tries. */
static int userns_try(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0x7f));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return errno;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
}

static void reason(pybox_buf_t *b, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason(pybox_buf_t *b, int *n, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pybox_buf_addf(b, "%s(%d) %s", *n > 0 ? "; " : "", *n + 1, line);
    (*n)++;
}

static void check_cgroups(const pybox_rootless_host_t *h, const char *cg, pybox_rootless_t *r, pybox_buf_t *b, int *n)
{
    char mark[PATH_MAX];
    if (!pybox_cgroup_unified(cg)) {
        reason(b, n,
               "cgroup v1 (%s is not the unified hierarchy): nothing can be delegated to a user there, so no "
               "limit would hold; fix: boot with systemd.unified_cgroup_hierarchy=1 (Debian 11's default on), or "
               "run pybox as root",
               cg);
        return;
    }
    if (pybox_fmt(mark, sizeof mark, "%s" PYBOX_SD_BOOTED_MARK, h->root) < 0 || !pybox_sd_booted(mark)) {
        reason(b, n,
               "cgroup v2 without systemd: nothing delegates a cgroup to uid %u, so no limit would hold; fix: "
               "run pybox as root",
               (unsigned)r->uid);
        return;
    }
    char rel[128];
    snprintf(rel, sizeof rel, PYBOX_USER_MANAGER_CGROUP, (unsigned)r->uid, (unsigned)r->uid);
    struct stat sb;
    if (pybox_fmt(r->manager_cgroup, sizeof r->manager_cgroup, "%s/%s", cg, rel) < 0 ||
        stat(r->manager_cgroup, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        reason(b, n,
               "no systemd --user runs for uid %u (no %s/%s), and each box's cgroup is asked of it; fix: log "
               "in, or loginctl enable-linger %s",
               (unsigned)r->uid, cg, rel, r->user[0] ? r->user : "USER");
        r->manager_cgroup[0] = '\0';
        return;
    }
    char have[256], p[PATH_MAX];
    read_line("", pybox_fmt(p, sizeof p, "%s/cgroup.controllers", r->manager_cgroup) == 0 ? p : "", have, sizeof have);
    char missing[64] = "";
    static const char *const need[] = {"memory", "pids", "cpu"};
    for (size_t i = 0; i < 3; i++) {
        bool found = false;
        char copy[256];
        pybox_strlcpy(copy, have, sizeof copy);
        for (char *save = NULL, *w = strtok_r(copy, " ", &save); w && !found; w = strtok_r(NULL, " ", &save))
            found = strcmp(w, need[i]) == 0;
        if (!found) {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, "%s%s", l ? " " : "", need[i]);
        }
    }
    if (missing[0] != '\0')
        reason(b, n,
               "the user's systemd was not delegated the %s controller%s (it has \"%s\"), so a limit would not "
               "hold; fix: " PYBOX_DELEGATE_DROPIN " with \"[Service]\" and \"Delegate=cpu cpuset io memory "
               "pids\", systemctl daemon-reload, a new login",
               missing, strchr(missing, ' ') ? "s" : "", have);
    char rtb[PATH_MAX];
    const char *bus = getenv("DBUS_SESSION_BUS_ADDRESS");
    if ((bus == NULL || bus[0] == '\0') && pybox_runtime_dir_of(h->root, r->uid, rtb, sizeof rtb) == NULL)
        reason(b, n,
               "neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set and /run/user/%u is not the user's, "
               "so the user's systemd cannot be reached; fix: a login session (or loginctl enable-linger)",
               (unsigned)r->uid);
}

static void check_userns(const pybox_rootless_host_t *h, pybox_buf_t *b, int *n)
{
    char v[64];
    read_line(h->root, "/proc/sys/kernel/unprivileged_userns_clone", v, sizeof v);
    if (strcmp(v, "0") == 0)
        reason(b, n,
               "unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0); fix: sysctl -w "
               "kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/)");
    read_line(h->root, "/proc/sys/user/max_user_namespaces", v, sizeof v);
    if (strcmp(v, "0") == 0)
        reason(b, n,
               "user namespaces are off (user.max_user_namespaces = 0); fix: sysctl -w "
               "user.max_user_namespaces=15000 (and in /etc/sysctl.d/)");
    read_line(h->root, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", v, sizeof v);
    if (strcmp(v, "1") == 0) {
        char label[256];
        read_line(h->root, "/proc/self/attr/apparmor/current", label, sizeof label);
        if (label[0] == '\0')
            read_line(h->root, "/proc/self/attr/current", label, sizeof label);
        if (label[0] == '\0' || strncmp(label, "unconfined", 10) == 0)
            reason(b, n,
                   "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns "
                   "= 1) and pybox runs unconfined; fix: apparmor_parser -r /etc/apparmor.d/pybox (the profile "
                   "PyBox's package ships)");
    }
}

int pybox_rootless_probe(const pybox_rootless_host_t *h, pybox_rootless_t *r, pybox_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->uid = h->uid;
    r->gid = h->gid;
    if (h->user != NULL) {
        pybox_strlcpy(r->user, h->user, sizeof r->user);
    } else {
        char buf[4096];
        struct passwd pw, *pwp = NULL;
        if (getpwuid_r(h->uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp != NULL)
            pybox_strlcpy(r->user, pwp->pw_name, sizeof r->user);
    }
    char cg[PATH_MAX], path[PATH_MAX];
    const char *cgr = h->cgroup_root;
    if (cgr == NULL && h->root[0] == '\0')
        cgr = pybox_cgroup_root();
    if (cgr != NULL ? pybox_strlcpy(cg, cgr, sizeof cg) < 0 : pybox_fmt(cg, sizeof cg, "%s/sys/fs/cgroup", h->root) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the cgroup root");

    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    int n = 0;
    check_cgroups(h, cg, r, &b, &n);
    check_userns(h, &b, &n);

    static const char *const helpers[] = {PYBOX_NEWUIDMAP, PYBOX_NEWGIDMAP};
    for (size_t i = 0; i < 2; i++) {
        const char *why =
            pybox_fmt(path, sizeof path, "%s%s", h->root, helpers[i]) < 0 ? "cannot be named" : helper_unfit(path);
        if (why != NULL) {
            reason(&b, &n, "%s %s (only it may map a box's ids); fix: apt-get install uidmap", helpers[i], why);
            break; /* the other comes with the same package */
        }
    }

    static const char *const files[] = {"/etc/subuid", "/etc/subgid"};
    uint64_t *starts[] = {&r->subuid_start, &r->subgid_start}, *counts[] = {&r->subuid_count, &r->subgid_count};
    for (size_t i = 0; i < 2; i++) {
        char other[64];
        if (pybox_fmt(path, sizeof path, "%s%s", h->root, files[i]) == 0 &&
            pybox_subid_find(path, r->user, r->uid, starts[i], counts[i])) {
            if (pybox_subid_overlap(path, r->user, r->uid, *starts[i], *counts[i], other, sizeof other))
                reason(&b, &n,
                       "%s gives ids of %s's range to %s too (a box's id must be no one else's); fix: give each "
                       "user ids of their own (usermod --del-sub%cids, --add-sub%cids)",
                       files[i], r->user[0] ? r->user : "this user", other, i == 0 ? 'u' : 'g', i == 0 ? 'u' : 'g');
            continue;
        }
        if (r->user[0] != '\0')
            reason(&b, &n,
                   "%s has no range for %s (a box runs as an id of it, never as the user); fix: usermod "
                   "--add-sub%cids 100000-165535 %s (any 65536 ids of no other user)",
                   files[i], r->user, i == 0 ? 'u' : 'g', r->user);
        else
            reason(&b, &n,
                   "%s has no range for uid %u (a box runs as an id of it, never as the user); fix: a "
                   "line \"%u:100000:65536\" in it (any 65536 ids of no other user)",
                   files[i], (unsigned)r->uid, (unsigned)r->uid);
    }

    /* This host's kernel has the last word on user namespaces (a container's seccomp
     * filter, a security module): one is made for real when nothing else is missing. */
    if (n == 0 && h->root[0] == '\0') {
        int e = userns_try();
        char ebuf[128];
        if (e != 0)
            reason(&b, &n,
                   "this host refuses pybox a user namespace (unshare(CLONE_NEWUSER): %s); fix: allow them (the "
                   "security module or filter that refuses), or run pybox as root",
                   pybox_strerror(e, ebuf, sizeof ebuf));
    }
    int rc = 0;
    if (!pybox_buf_ok(&b))
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "rootless check");
    else if (n > 0)
        rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                             "the native backend as uid %u%s%s%s runs rootless, and this host lacks what it needs "
                             "(no box runs with less): %.*s",
                             (unsigned)r->uid, r->user[0] ? " (" : "", r->user, r->user[0] ? ")" : "", (int)b.len,
                             b.data);
    pybox_buf_free(&b);
    return rc;
}

void pybox_rootless_box_ids(const pybox_rootless_t *r, uid_t *uid_base, gid_t *gid_base, uint32_t *count)
{
    pybox_uid_user_half(r->subuid_start, r->subuid_count, r->subgid_start, r->subgid_count, uid_base, gid_base, count);
}
