/* SPDX-License-Identifier: MIT */
/* Per-box users, leased machine-wide (see uid.h). */
#include "uid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hooks.h"
#include "util.h"

/* A lease file holds "<run id> <expires>\n"; an empty or missing file is a free uid. A
 * released lease's file is removed while still locked, so a lock only counts when it is
 * held on the file that names the uid now (checked after locking). */
#define LEASE_TEXT_MAX 96

/* One of the two folders PyBox keeps leases under (the run folder, the leases' folder):
 * opened without following a link, it must be a folder of this user that nobody else may
 * write (whoever can rename in it can put their own leases in PyBox's place); one that
 * others may read or enter is closed to them, as the state folder is. */
static int own_folder(int at, const char *name, const char *shown, bool create, int *out, pybox_error_t *err)
{
    *out = -1;
    if (create && mkdirat(at, name, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno,
                               "mkdir(%s): per-box users are leased there (PyBox needs to run as root)", shown);
    _cleanup_close_ int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && !create)
        return 0;
    struct stat sb;
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && fstatat(at, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0,
                               "%s is not a folder (a %s): per-box users are leased there; remove it", shown,
                               S_ISLNK(sb.st_mode) ? "symbolic link" : "file");
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", shown);
    if (fstat(fd, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "fstat(%s)", shown);
    if (sb.st_uid != geteuid() || (sb.st_mode & 0022) != 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0,
                               "%s is not a folder that only uid %u can change (owner %u, mode %04o): per-box users "
                               "are leased there, and another user could hand out theirs; remove it, or give it to "
                               "uid %u with mode 0700",
                               shown, (unsigned)geteuid(), (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777),
                               (unsigned)geteuid());
    if ((sb.st_mode & 0077) != 0 && fchmod(fd, 0700) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "chmod(%s, 0700)", shown);
    *out = pybox_steal_fd(&fd);
    return 1;
}

/* The folder of leases, dir, and its parent (the run folder, for the machine's), each
 * made when missing (create) and checked (own_folder) every time; the parent's parent
 * must exist. 1 with *out open, 0 when a folder is missing and create is false. */
static int open_leases(const char *dir, bool create, int *out, pybox_error_t *err)
{
    *out = -1;
    char path[PATH_MAX];
    if (pybox_strlcpy(path, dir, sizeof path) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the folder of per-box users");
    char *base = strrchr(path, '/');
    char *parent = base && base > path ? memrchr(path, '/', (size_t)(base - path)) : NULL;
    if (path[0] != '/' || parent == NULL || base[1] == '\0' || parent + 1 == base)
        return pybox_error_set(err, PYBOX_ERR_STATE, EINVAL,
                               "%s: the folder of per-box users needs an absolute path with a folder of its own above "
                               "it",
                               dir);
    char shown_parent[PATH_MAX];
    *base = '\0';
    if (pybox_strlcpy(shown_parent, path, sizeof shown_parent) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the folder of per-box users");
    *parent = '\0';
    _cleanup_close_ int above = open(parent == path ? "/" : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (above < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", parent == path ? "/" : path);
    _cleanup_close_ int run = -1;
    int r = own_folder(above, parent + 1, shown_parent, create, &run, err);
    if (r <= 0)
        return r;
    return own_folder(run, base + 1, dir, create, out, err);
}

int pybox_subid_line(const char *line, char *owner, size_t owner_len, uint64_t *start, uint64_t *count)
{
    const char *a = strchr(line, ':');
    const char *b = a ? strchr(a + 1, ':') : NULL;
    if (b == NULL || a == line || (size_t)(a - line) >= owner_len)
        return -1;
    char *end;
    errno = 0;
    unsigned long long s = strtoull(a + 1, &end, 10);
    if (errno != 0 || end != b || a[1] < '0' || a[1] > '9')
        return -1;
    unsigned long long n = strtoull(b + 1, &end, 10);
    if (errno != 0 || b[1] < '0' || b[1] > '9' || (*end != '\0' && *end != '\n') || n == 0 || s > UINT32_MAX ||
        n > (unsigned long long)UINT32_MAX + 1 - s)
        return -1;
    memcpy(owner, line, (size_t)(a - line));
    owner[a - line] = '\0';
    *start = s;
    *count = n;
    return 0;
}

/* Subordinate ranges that other tools hand to user namespaces: a box's uid must not be
 * one a rootless container of a user maps to. */
static bool in_subordinate(const char *file, uid_t uid)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return false;
    char line[512], owner[256];
    uint64_t start, n;
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f) != NULL)
        hit = pybox_subid_line(line, owner, sizeof owner, &start, &n) == 0 && uid >= start && uid - start < n;
    fclose(f);
    return hit;
}

int pybox_subid_find(const char *file, const char *user, uid_t uid, uint64_t *start, uint64_t *count)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return 0;
    char line[512], owner[256], num[16];
    snprintf(num, sizeof num, "%u", (unsigned)uid);
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = pybox_subid_line(line, owner, sizeof owner, start, count) == 0 &&
                ((user[0] != '\0' && strcmp(owner, user) == 0) || strcmp(owner, num) == 0);
    fclose(f);
    return found;
}

int pybox_subid_overlap(const char *file, const char *user, uid_t uid, uint64_t start, uint64_t count, char *other,
                        size_t other_len)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return 0;
    char line[512], owner[256], num[16];
    snprintf(num, sizeof num, "%u", (unsigned)uid);
    uint64_t s, n;
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f) != NULL) {
        if (pybox_subid_line(line, owner, sizeof owner, &s, &n) < 0 || strcmp(owner, num) == 0 ||
            (user[0] != '\0' && strcmp(owner, user) == 0))
            continue;
        hit = s < start + count && start < s + n;
        if (hit)
            pybox_strlcpy(other, owner, other_len);
    }
    fclose(f);
    return hit;
}

void pybox_uid_user_half(uint64_t uid_start, uint64_t uid_count, uint64_t gid_start, uint64_t gid_count,
                         uid_t *uid_base, gid_t *gid_base, uint32_t *count)
{
    uint64_t c = uid_count < gid_count ? uid_count : gid_count;
    uint64_t half = c / 2;
    uint64_t take = c - half;
    if (take > PYBOX_UID_COUNT)
        take = PYBOX_UID_COUNT;
    *uid_base = (uid_t)(uid_start + half);
    *gid_base = (gid_t)(gid_start + half);
    *count = (uint32_t)take;
}

int pybox_uid_user_range(pybox_uid_range_t *r, gid_t *gid_base, char *buf, size_t len, pybox_error_t *err)
{
    char pwbuf[4096], name[256] = "";
    struct passwd pw, *pwp = NULL;
    if (getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &pwp) == 0 && pwp != NULL)
        pybox_strlcpy(name, pwp->pw_name, sizeof name);
    uint64_t us, uc, gs, gc;
    if (!pybox_subid_find("/etc/subuid", name, geteuid(), &us, &uc) ||
        !pybox_subid_find("/etc/subgid", name, geteuid(), &gs, &gc))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "uid %u has no subordinate range in /etc/subuid and /etc/subgid for its boxes "
                               "(a box runs as an id of it, never as the user); fix: usermod --add-subuids "
                               "100000-165535 --add-subgids 100000-165535 %s (any 65536 ids of no other user)",
                               (unsigned)geteuid(), name[0] ? name : "USER");
    char rtb[PATH_MAX];
    const char *rt = pybox_runtime_dir(rtb, sizeof rtb);
    if (rt == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "XDG_RUNTIME_DIR is not set and /run/user/%u is not the user's: an ordinary user's "
                               "boxes lease their ids in the user's runtime folder; fix: a login session",
                               (unsigned)geteuid());
    if (pybox_fmt(buf, len, "%s/pybox/%s", rt, PYBOX_UID_LEASES_IN) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the folder of per-box users under %s", rt);
    r->dir = buf;
    r->own = true;
    pybox_uid_user_half(us, uc, gs, gc, &r->base, gid_base, &r->count);
    return 0;
}

/* A uid (and gid) that the host uses for something else is never leased: a user's or
 * a group's, or (own: false) one of a subordinate range. */
static bool host_uses(uid_t uid, bool own)
{
    char buf[4096];
    struct passwd pw, *pwp = NULL;
    struct group gr, *grp = NULL;
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp != NULL)
        return true;
    if (getgrgid_r((gid_t)uid, &gr, buf, sizeof buf, &grp) == 0 && grp != NULL)
        return true;
    return !own && (in_subordinate("/etc/subuid", uid) || in_subordinate("/etc/subgid", uid));
}

/* The lease's expiry, or 0 for a free (empty) lease; -1 when the text is not a lease. */
static int64_t lease_expiry(int fd)
{
    char text[LEASE_TEXT_MAX + 1];
    ssize_t n = pread(fd, text, LEASE_TEXT_MAX, 0);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    text[n] = '\0';
    char *sp = strchr(text, ' ');
    if (sp == NULL)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(sp + 1, &end, 10);
    if (errno != 0 || end == sp + 1 || *end != '\n' || v < 0)
        return -1;
    return (int64_t)v;
}

/* Try one uid: 1 when leased, 0 when it is not free, -1 on a failure. */
static int try_uid(int dfd, uid_t uid, const char *run_id, int64_t expires, int *out_fd, pybox_error_t *err)
{
    char name[16];
    if (pybox_fmt(name, sizeof name, "%u", (unsigned)uid) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "lease name");
    _cleanup_close_ int fd = openat(dfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "openat(%s) for a per-box user", name);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK || errno == EINTR)
            return 0; /* a live run holds it */
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "flock(%s)", name);
    }
    /* Released (and removed) between our open and our lock: this file names nothing. */
    struct stat held, now;
    if (fstat(fd, &held) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat(%s)", name);
    if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev)
        return 2;
    int64_t exp = lease_expiry(fd);
    /* Held by a run that ended without confirming its box gone: the box may live until
     * its expiry. A lease that cannot be read is left alone too. */
    if (exp < 0 || exp > pybox_wall_s())
        return 0;
    char text[LEASE_TEXT_MAX];
    int len = snprintf(text, sizeof text, "%s %lld\n", run_id, (long long)expires);
    if (len < 0 || (size_t)len >= sizeof text)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "lease text");
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)len, 0) != (ssize_t)len)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno ? errno : EIO, "writing the lease of uid %u",
                               (unsigned)uid);
    *out_fd = pybox_steal_fd(&fd);
    return 1;
}

int pybox_uid_lease_renew(pybox_uid_lease_t *l, const char *run_id, int64_t expires, pybox_error_t *err)
{
    if (l->fd < 0)
        return 0;
    int64_t now = lease_expiry(l->fd);
    if (now >= expires)
        return 0;
    /* The same run id and a later expiry: never shorter than the text it replaces, so it is
     * written over it whole in one write (no moment where the lease reads as free). */
    char text[LEASE_TEXT_MAX];
    int len = snprintf(text, sizeof text, "%s %lld\n", run_id, (long long)expires);
    if (len < 0 || (size_t)len >= sizeof text)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "lease text");
    if (pwrite(l->fd, text, (size_t)len, 0) != (ssize_t)len || ftruncate(l->fd, len) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno ? errno : EIO, "renewing the lease of uid %u",
                               (unsigned)l->uid);
    return 0;
}

/* The lease's own name, for removing it. */
static void lease_path(const pybox_uid_lease_t *l, char *out, size_t len)
{
    if (pybox_fmt(out, len, "%s/%u", l->dir, (unsigned)l->uid) < 0)
        out[0] = '\0';
}

static int take_in(const char *dir, uid_t base, uint32_t count, bool own, const char *run_id, int64_t expires,
                   pybox_uid_lease_t *out, pybox_error_t *err)
{
    out->uid = 0;
    out->fd = -1;
    if (count == 0 || base == 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EINVAL, "the range of per-box users is empty");
    _cleanup_close_ int dfd = -1;
    if (open_leases(dir, true, &dfd, err) < 0)
        return -1;
    /* Start anywhere in the range: concurrent runs rarely try the same uid first. */
    uint32_t start = 0;
    if (pybox_random(&start, sizeof start, err) < 0)
        return -1;
    start %= count;
    uint32_t by_host = 0;
    for (uint32_t i = 0; i < count; i++) {
        uid_t uid = base + (start + i) % count;
        if (host_uses(uid, own)) {
            by_host++;
            continue;
        }
        int fd = -1;
        int r, tries = 0;
        do
            r = try_uid(dfd, uid, run_id, expires, &fd, err);
        while (r == 2 && ++tries < 8);
        if (r < 0)
            return -1;
        if (r == 1) {
            out->uid = uid;
            out->fd = fd;
            if (pybox_strlcpy(out->dir, dir, sizeof out->dir) < 0)
                out->dir[0] = '\0';
            return 0;
        }
    }
    /* Say which it is: a range the host took for its own users (subordinate ranges of
     * /etc/subuid, say) is not one that boxes are using up. */
#define HOST_USES "the host uses (its users and groups, or subordinate ranges in /etc/subuid or /etc/subgid)"
    if (by_host == 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EAGAIN,
                               "no free per-box user: all %u uids from %u are held by live boxes (leases in %s)", count,
                               (unsigned)base, dir);
    if (by_host == count)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EAGAIN,
                               "no free per-box user: all %u uids from %u are ones " HOST_USES, count, (unsigned)base);
    return pybox_error_set(err, PYBOX_ERR_SYSTEM, EAGAIN,
                           "no free per-box user: of the %u uids from %u, %u are held by live boxes (leases in %s) "
                           "and %u are ones " HOST_USES,
                           count, (unsigned)base, count - by_host, dir, by_host);
#undef HOST_USES
}

int pybox_uid_lease_take_in(const char *dir, uid_t base, uint32_t count, const char *run_id, int64_t expires,
                            pybox_uid_lease_t *out, pybox_error_t *err)
{
    return take_in(dir, base, count, false, run_id, expires, out, err);
}

int pybox_uid_machine(pybox_uid_range_t *r, char *buf, size_t len, pybox_error_t *err)
{
    r->own = false;
    if (geteuid() != 0) {
        gid_t gid_base;
        return pybox_uid_user_range(r, &gid_base, buf, len, err);
    }
    const char *run = pybox_hook(PYBOX_HOOK_RUN_DIR);
    if (run == NULL || run[0] != '/')
        run = PYBOX_RUN_DIR;
    if (pybox_fmt(buf, len, "%s/%s", run, PYBOX_UID_LEASES_IN) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "the folder of per-box users under %s", run);
    r->dir = buf;
    r->base = PYBOX_UID_BASE;
    r->count = PYBOX_UID_COUNT;
    return 0;
}

int pybox_uid_lease_take(const char *run_id, int64_t expires, pybox_uid_lease_t *out, pybox_error_t *err)
{
    out->uid = 0;
    out->fd = -1;
    pybox_uid_range_t r;
    char dir[PATH_MAX];
    if (pybox_uid_machine(&r, dir, sizeof dir, err) < 0)
        return -1;
    return take_in(r.dir, r.base, r.count, r.own, run_id, expires, out, err);
}

void pybox_uid_lease_release(pybox_uid_lease_t *l)
{
    if (l->fd < 0)
        return;
    /* Removed while still locked: whoever opened it before cannot take it (they check
     * that the file they locked is still the one named), whoever comes after makes a
     * new one. Should the removal fail, the lease is emptied: free as well. */
    char path[PATH_MAX];
    lease_path(l, path, sizeof path);
    if (path[0] == '\0' || unlink(path) < 0) {
        if (ftruncate(l->fd, 0) < 0) {
            /* then it stays until its expiry */
        }
    }
    close(l->fd);
    l->fd = -1;
}

void pybox_uid_lease_keep(pybox_uid_lease_t *l)
{
    if (l->fd < 0)
        return;
    close(l->fd);
    l->fd = -1;
}

/* One lease file of the folder: removed when it is free (see uid.h). 1 removed (or
 * would be), 0 left alone. */
static int sweep_one(int dfd, const char *name, bool dry_run)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat held, now;
    if (fd < 0 || fstat(fd, &held) < 0 || !S_ISREG(held.st_mode))
        return 0;
    /* Locked: a live run holds it, whatever it says. Ours: nobody can take it meanwhile. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        return 0;
    if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev)
        return 0; /* released and made again meanwhile: another file now */
    int64_t exp = lease_expiry(fd);
    if (exp < 0 || exp > pybox_wall_s())
        return 0; /* not a lease, or kept for a box that may still live */
    if (dry_run)
        return 1;
    /* Removed while locked, as a release does: whoever locks it next sees it is gone. */
    return unlinkat(dfd, name, 0) == 0 ? 1 : 0;
}

/* Call fn for each lease file of the range (by name: a uid of the range); stops at the
 * first fn that returns <0. No folder: none. */
static int each_lease(const pybox_uid_range_t *r, int (*fn)(int dfd, const char *name, uid_t uid, void *arg), void *arg,
                      pybox_error_t *err)
{
    _cleanup_close_ int dfd = -1;
    int rc = open_leases(r->dir, false, &dfd, err);
    if (rc <= 0)
        return rc;
    int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (d == NULL) {
        int e = errno;
        if (lfd >= 0)
            close(lfd);
        return pybox_error_set(err, PYBOX_ERR_STATE, e, "opendir(%s)", r->dir);
    }
    struct dirent *de;
    rc = 0;
    while (rc >= 0 && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (n[0] < '1' || n[0] > '9' || strspn(n, "0123456789") != strlen(n) || strlen(n) > 10)
            continue;
        unsigned long long uid = strtoull(n, NULL, 10);
        if (uid < r->base || uid - r->base >= r->count)
            continue; /* not a lease of this range */
        rc = fn(dfd, n, (uid_t)uid, arg);
    }
    closedir(d);
    return rc < 0 ? pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "listing leases") : 0;
}

typedef struct {
    bool dry_run;
    int removed;
} sweep_arg_t;

static int sweep_each(int dfd, const char *name, uid_t uid, void *arg)
{
    (void)uid;
    sweep_arg_t *a = arg;
    a->removed += sweep_one(dfd, name, a->dry_run);
    return 0;
}

int pybox_uid_lease_sweep_in(const pybox_uid_range_t *r, bool dry_run, int *removed, pybox_error_t *err)
{
    sweep_arg_t a = {.dry_run = dry_run, .removed = 0};
    int rc = each_lease(r, sweep_each, &a, err);
    *removed = a.removed;
    return rc;
}

/* One lease file as it is, read and lock-tested without taking it. 1 when it is one. */
static int look_one(int dfd, const char *name, pybox_uid_lease_info_t *out)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return 0;
    memset(out, 0, sizeof *out);
    out->expires = lease_expiry(fd);
    char text[LEASE_TEXT_MAX + 1];
    ssize_t n = pread(fd, text, LEASE_TEXT_MAX, 0);
    text[n > 0 ? n : 0] = '\0';
    if (out->expires >= 0)
        snprintf(out->run_id, sizeof out->run_id, "%.*s", (int)strcspn(text, " \n"), text);
    /* A shared lock is refused only while a run holds its exclusive one. */
    out->locked = flock(fd, LOCK_SH | LOCK_NB) < 0;
    return 1;
}

typedef struct {
    pybox_uid_lease_info_t *v;
    size_t n, cap;
} list_arg_t;

static int list_each(int dfd, const char *name, uid_t uid, void *arg)
{
    list_arg_t *a = arg;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        pybox_uid_lease_info_t *v = realloc(a->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    if (look_one(dfd, name, &a->v[a->n]) == 1)
        a->v[a->n++].uid = uid;
    return 0;
}

int pybox_uid_lease_list_in(const pybox_uid_range_t *r, pybox_uid_lease_info_t **out, size_t *n, pybox_error_t *err)
{
    list_arg_t a = {0};
    *out = NULL;
    *n = 0;
    if (each_lease(r, list_each, &a, err) < 0) {
        free(a.v);
        return -1;
    }
    *out = a.v;
    *n = a.n;
    return 0;
}
