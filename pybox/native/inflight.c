/* SPDX-License-Identifier: MIT */
/* What can outlive a native box's last process, and the kernel's collector that ends it
 * (see sandbox.h, docs/native.md). */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../util.h"
#include "sandbox.h"

/* Linux 6.10's mount namespace ids and listmount's request (6.8; the namespace field
 * since 6.10), defined here when the system's headers are older than the kernel. */
#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(NSIO, 0x5, uint64_t)
#endif
#ifndef __NR_listmount
#define __NR_listmount 458 /* the same on every architecture since 5.1's numbering */
#endif
#define LISTMOUNT_ROOT 0xffffffffffffffffULL

struct mount_id_req {
    uint32_t size;
    uint32_t spare;
    uint64_t mnt_id;
    uint64_t param;
    uint64_t mnt_ns_id;
};

/* A datagram to a bound unix socket, with descriptors attached (SCM_RIGHTS) when n > 0. */
static int send_to(int sock, const struct sockaddr_un *to, socklen_t to_len, const void *data, size_t len,
                   const int *fds, size_t n)
{
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_name = (void *)to, .msg_namelen = to_len, .msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    ssize_t w;
    do
        w = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)len ? 0 : -1;
}

/* A datagram socket with an address of the kernel's choosing (abstract, unique). */
static int bound_socket(struct sockaddr_un *addr, socklen_t *len)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sa_family_t family = AF_UNIX;
    *len = sizeof *addr;
    if (bind(fd, (const struct sockaddr *)&family, sizeof family) < 0 ||
        getsockname(fd, (struct sockaddr *)addr, len) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The close of a unix socket while anything is in flight is what has the kernel run its
 * collector (at once before Linux 6.10, on a work queue since). */
static int nudge(pybox_error_t *err)
{
    int s[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "socketpair(AF_UNIX)");
    close(s[0]);
    close(s[1]);
    return 0;
}

static bool writable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLOUT);
}

int pybox_native_collect_start(pybox_native_collect_t *c, pybox_error_t *err)
{
    c->end_r = -1;
    c->started_ms = pybox_now_ms();
    /* The marker: two sockets x and y, each in flight in the other's queue, then closed
     * here: a cycle nothing refers to, which only the collector ends. Beside it in y's
     * queue, a datagram of a socket w that stays ours, charged to w's send buffer until
     * it is freed: w becomes writable (POLLOUT) when the collector empties y's queue,
     * on the collector's own thread, with no wait for the files it closes after. */
    struct sockaddr_un ax, ay;
    socklen_t lx, ly;
    int x = -1, y = -1, w = -1, e = 0;
    const char *what = "socket(AF_UNIX)";
    if ((x = bound_socket(&ax, &lx)) < 0 || (y = bound_socket(&ay, &ly)) < 0 ||
        (w = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        e = errno;
    } else {
        what = "sendmsg(SCM_RIGHTS) of the collector's marker";
        int small = 4096, sndbuf = 0;
        socklen_t sl = sizeof sndbuf;
        static char load[65536];
        if (setsockopt(w, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) < 0 ||
            getsockopt(w, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) < 0 || sndbuf <= 64 ||
            (size_t)sndbuf / 2 > sizeof load || send_to(y, &ax, lx, "m", 1, &y, 1) < 0 ||
            send_to(x, &ay, ly, "m", 1, &x, 1) < 0 || send_to(w, &ay, ly, load, (size_t)sndbuf / 2, NULL, 0) < 0)
            e = errno ? errno : EIO;
        else if (writable(w))
            e = ENOBUFS; /* the datagram does not hold w's buffer: nothing to see */
    }
    if (x >= 0)
        close(x);
    if (y >= 0)
        close(y);
    if (e != 0) {
        if (w >= 0)
            close(w);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "%s", what);
    }
    c->end_r = w;
    if (nudge(err) < 0) {
        pybox_native_collect_end(c);
        return -1;
    }
    return 0;
}

int pybox_native_collect_wait(pybox_native_collect_t *c, int64_t deadline_ms, bool *done, pybox_error_t *err)
{
    *done = false;
    if (c->end_r < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "the collector was not started");
    int wait_ms = 1;
    for (;;) {
        struct pollfd pf = {.fd = c->end_r, .events = POLLOUT};
        int64_t left = deadline_ms - pybox_now_ms();
        int pr = poll(&pf, 1, left <= 0 ? 0 : (int)(left < wait_ms ? left : wait_ms));
        if (pr < 0 && errno != EINTR)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "poll(the collector's marker)");
        if (pr > 0 && (pf.revents & POLLOUT)) {
            *done = true;
            return 0;
        }
        if (left <= 0)
            return 0;
        /* Again: a pass already running when the marker was made may not have seen it,
         * and before Linux 6.10 a close during another's pass does not start one. */
        if (nudge(err) < 0)
            return -1;
        if (wait_ms < 50)
            wait_ms *= 2;
    }
}

void pybox_native_collect_end(pybox_native_collect_t *c)
{
    if (c->end_r >= 0)
        close(c->end_r);
    c->end_r = -1;
}

int pybox_native_collect(int64_t timeout_ms, bool *done, pybox_error_t *err)
{
    pybox_native_collect_t c;
    *done = false;
    if (pybox_native_collect_start(&c, err) < 0)
        return -1;
    int rc = pybox_native_collect_wait(&c, pybox_now_ms() + timeout_ms, done, err);
    pybox_native_collect_end(&c);
    return rc;
}

uint64_t pybox_native_mntns_id(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/ns/mnt", (int)pid);
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    uint64_t id = 0;
    if (fd < 0 || ioctl(fd, NS_GET_MNTNS_ID, &id) < 0)
        return 0;
    return id;
}

int pybox_native_mntns_exists(uint64_t id)
{
    if (id == 0)
        return -1;
    struct mount_id_req req = {.size = sizeof req, .mnt_id = LISTMOUNT_ROOT, .mnt_ns_id = id};
    uint64_t one;
    long n = syscall(__NR_listmount, &req, &one, 1, 0);
    if (n >= 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}
