/* SPDX-License-Identifier: MIT */
/* Per-box users, leased machine-wide (see uid.h). */
#include "uid.h"

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

#include "util.h"

/* A lease file holds "<run id> <expires>\n"; an empty or missing file is a free uid. A
 * released lease's file is removed while still locked, so a lock only counts when it is
 * held on the file that names the uid now (checked after locking). */
#define LEASE_TEXT_MAX 96

static int make_dir(const char *dir, pybox_error_t *err)
{
    char tmp[256];
    if (pybox_strlcpy(tmp, dir, sizeof tmp) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "the folder of per-box users");
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "mkdir(%s) for the per-box users", tmp);
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno,
                               "mkdir(%s): per-box users are leased there (PyBox needs to run as root)", tmp);
    struct stat sb;
    if (lstat(tmp, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "lstat(%s)", tmp);
    /* Only this user may change who holds which uid. */
    if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 0022) != 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EPERM,
                               "%s is not a folder that only uid %u can change (owner %u, mode %04o)", tmp,
                               (unsigned)geteuid(), (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
    return 0;
}

/* Subordinate ranges ("name:start:count" lines) that other tools hand to user
 * namespaces: a box's uid must not be one a rootless container of a user maps to. */
static bool in_subordinate(const char *file, uid_t uid)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return false;
    char line[512];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f) != NULL) {
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (b == NULL)
            continue;
        char *end;
        errno = 0;
        unsigned long long start = strtoull(a + 1, &end, 10);
        if (errno != 0 || end != b)
            continue;
        unsigned long long n = strtoull(b + 1, &end, 10);
        if (errno != 0 || end == b + 1)
            continue;
        hit = (unsigned long long)uid >= start && (unsigned long long)uid - start < n;
    }
    fclose(f);
    return hit;
}

/* A uid (and gid) that the host uses for something else is never leased. */
static bool host_uses(uid_t uid)
{
    char buf[4096];
    struct passwd pw, *pwp = NULL;
    struct group gr, *grp = NULL;
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp != NULL)
        return true;
    if (getgrgid_r((gid_t)uid, &gr, buf, sizeof buf, &grp) == 0 && grp != NULL)
        return true;
    return in_subordinate("/etc/subuid", uid) || in_subordinate("/etc/subgid", uid);
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

int pybox_uid_lease_take_in(const char *dir, uid_t base, uint32_t count, const char *run_id, int64_t expires,
                            pybox_uid_lease_t *out, pybox_error_t *err)
{
    out->uid = 0;
    out->fd = -1;
    if (count == 0 || base == 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EINVAL, "the range of per-box users is empty");
    if (make_dir(dir, err) < 0)
        return -1;
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s)", dir);
    /* Start anywhere in the range: concurrent runs rarely try the same uid first. */
    uint32_t start = 0;
    if (pybox_random(&start, sizeof start, err) < 0)
        return -1;
    start %= count;
    uint32_t by_host = 0;
    for (uint32_t i = 0; i < count; i++) {
        uid_t uid = base + (start + i) % count;
        if (host_uses(uid)) {
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

int pybox_uid_lease_take(const char *run_id, int64_t expires, pybox_uid_lease_t *out, pybox_error_t *err)
{
    return pybox_uid_lease_take_in(PYBOX_UID_LEASES, PYBOX_UID_BASE, PYBOX_UID_COUNT, run_id, expires, out, err);
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
