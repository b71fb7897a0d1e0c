/* SPDX-License-Identifier: MIT */
/* Small shared helpers (see util.h). */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void pybox_freep(void *p)
{
    free(*(void **)p);
}

void pybox_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
        *fd = -1;
    }
}

int64_t pybox_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double pybox_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t pybox_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

void pybox_wall_iso(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char day[24];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03ldZ", day, ts.tv_nsec / 1000000);
}

int pybox_random(void *buf, size_t n, pybox_error_t *err)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "getrandom(%zu)", n);
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

void pybox_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int pybox_random_hex(size_t n, char *out, pybox_error_t *err)
{
    unsigned char raw[64];
    if (n > sizeof raw)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EINVAL, "random id of %zu bytes", n);
    if (pybox_random(raw, n, err) < 0)
        return -1;
    pybox_hex(raw, n, out);
    return 0;
}

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;

/* What the first use of libcrypto costs, paid once: its default provider loaded, SHA-256
 * fetched for keeps, Ed25519's key manager and signature fetched (libcrypto keeps them
 * cached for the receipt's signing). Not the old by-name tables of every cipher and digest
 * (PyBox fetches by name from the providers, or uses EVP_sha256() and the like), which cost
 * more than the rest together: 0.35 ms of every run's CPU. Not the host's OpenSSL
 * configuration file either (0.35-0.4 ms of every run, read at the first fetch): PyBox asks
 * for two fixed algorithms, SHA-256 and Ed25519, whose results no configuration changes;
 * docs/receipt.md says so. And no clean-up at exit: what it would free, the process's end
 * frees.
 * First, when this is libcrypto's first use, as `pybox exec` makes it; otherwise libcrypto
 * was set up by whatever used it first, and this changes nothing. */
static void crypto_init(void)
{
    (void)OPENSSL_init_crypto(OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
                                  OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ATEXIT,
                              NULL);
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    EVP_KEYMGMT_free(EVP_KEYMGMT_fetch(NULL, "ED25519", NULL));
    EVP_SIGNATURE_free(EVP_SIGNATURE_fetch(NULL, "ED25519", NULL));
}

static const EVP_MD *sha256(void)
{
    pthread_once(&crypto_once, crypto_init);
    return sha256_md != NULL ? sha256_md : EVP_sha256();
}

void *pybox_crypto_warm(void *arg)
{
    (void)arg;
    pthread_once(&crypto_once, crypto_init);
    return NULL;
}

void pybox_warmup_start(pybox_warmup_t *a, void *(*work)(void *))
{
    a->started = pthread_create(&a->thread, NULL, work, NULL) == 0;
}

void pybox_warmup_join(pybox_warmup_t *a)
{
    if (a->started)
        pthread_join(a->thread, NULL);
    a->started = false;
}

bool pybox_sha256(const void *data, size_t len, unsigned char out[32])
{
    unsigned int mdlen = 0;
    return EVP_Digest(data, len, out, &mdlen, sha256(), NULL) == 1 && mdlen == 32;
}

void pybox_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    if (!pybox_sha256(data, len, md)) {
        /* libcrypto fails on SHA-256 of memory only without memory for its context: say
         * so loudly rather than use a digest that was not computed. */
        abort();
    }
    pybox_hex(md, 32, out);
}

EVP_MD_CTX *pybox_digest_start(void)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md != NULL && EVP_DigestInit_ex(md, sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return NULL;
    }
    return md;
}

bool pybox_digest_done(EVP_MD_CTX *md, char *out)
{
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    bool ok = EVP_DigestFinal_ex(md, dig, &dl) == 1 && dl == 32;
    EVP_MD_CTX_free(md);
    if (out != NULL && ok)
        pybox_hex(dig, 32, out);
    return ok;
}

int pybox_read_bounded(int fd, size_t max, char **out, size_t *len, bool *over, pybox_error_t *err)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "malloc(%zu)", cap + 1);
    *over = false;
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                *over = true;
                break;
            }
            size_t ncap = cap * 2;
            if (ncap > max + 1)
                ncap = max + 1;
            char *nb = realloc(buf, ncap + 1);
            if (nb == NULL) {
                free(buf);
                return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "realloc(%zu)", ncap + 1);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "read(fd %d)", fd);
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            *over = true;
            break;
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int pybox_read_file(const char *path, int flags, size_t max, char **out, size_t *len, bool *over, pybox_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return -1;
    int rc = pybox_read_bounded(fd, max, out, len, over, err);
    close(fd);
    return rc;
}

ssize_t pybox_write_some(int fd, const void *buf, size_t len)
{
    /* SIGPIPE held back on this thread for the write; one it raised is taken from the
     * pending set before the old mask returns. One pending before stays (the write's merges
     * with it) where the caller blocks SIGPIPE itself; where it does not, a pending one can
     * only be another thread's share, and the write's own is taken all the same. */
    sigset_t pipe_sig, old, pending;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    bool held = pthread_sigmask(SIG_BLOCK, &pipe_sig, &old) == 0;
    bool was_pending = held && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    ssize_t w;
    do
        w = write(fd, buf, len);
    while (w < 0 && errno == EINTR);
    int e = errno;
    if (held) {
        if (w < 0 && e == EPIPE && (!was_pending || sigismember(&old, SIGPIPE) != 1)) {
            const struct timespec now = {0, 0};
            while (sigtimedwait(&pipe_sig, NULL, &now) < 0 && errno == EINTR)
                ;
        }
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    errno = e;
    return w;
}

int pybox_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = pybox_write_some(fd, p, len);
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

size_t pybox_read_message(int fd, char *buf, size_t size)
{
    size_t have = 0;
    while (have < size - 1) {
        ssize_t r = read(fd, buf + have, size - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    buf[have] = '\0';
    return have;
}

int pybox_read_exact(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int pybox_parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static const struct {
    char unit;
    int64_t seconds;
} age_units[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};

int pybox_parse_age(const char *s, int64_t *out_s)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    size_t nd = strspn(s, "0123456789");
    if (nd > 10 || (s[nd] != '\0' && s[nd + 1] != '\0'))
        return -1;
    int64_t per = s[nd] == '\0' ? 1 : 0;
    for (size_t i = 0; per == 0 && i < sizeof age_units / sizeof *age_units; i++)
        if (s[nd] == age_units[i].unit)
            per = age_units[i].seconds;
    char num[16];
    memcpy(num, s, nd);
    num[nd] = '\0';
    uint64_t n;
    if (per == 0 || pybox_parse_u64(num, &n) < 0 || n > (uint64_t)(3660LL * 86400) / (uint64_t)per)
        return -1;
    *out_s = (int64_t)n * per;
    return 0;
}

const char *pybox_fmt_age(char out[PYBOX_NUM_MAX], int64_t seconds)
{
    for (size_t i = 0; i < sizeof age_units / sizeof *age_units; i++)
        if (seconds % age_units[i].seconds == 0 || age_units[i].seconds == 1) {
            snprintf(out, PYBOX_NUM_MAX, "%lld%c", (long long)(seconds / age_units[i].seconds), age_units[i].unit);
            break;
        }
    return out;
}

int pybox_parse_size(const char *s, int64_t *out_bytes)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    size_t nd = strspn(s, "0123456789");
    if (nd > 12)
        return -1;
    char num[16];
    memcpy(num, s, nd);
    num[nd] = '\0';
    uint64_t v;
    if (pybox_parse_u64(num, &v) < 0)
        return -1;
    const char *u = s + nd;
    int64_t unit;
    if (*u == '\0')
        unit = 1024 * 1024;
    else if (strcmp(u, "k") == 0 || strcmp(u, "K") == 0 || strcmp(u, "KiB") == 0)
        unit = 1024;
    else if (strcmp(u, "m") == 0 || strcmp(u, "M") == 0 || strcmp(u, "MiB") == 0)
        unit = 1024 * 1024;
    else if (strcmp(u, "g") == 0 || strcmp(u, "G") == 0 || strcmp(u, "GiB") == 0)
        unit = 1024LL * 1024 * 1024;
    else
        return -1;
    if (v > (uint64_t)(INT64_MAX / unit))
        return -1;
    *out_bytes = (int64_t)v * unit;
    return 0;
}

int pybox_parse_seconds_ms(const char *s, int64_t *out_ms)
{
    if (s == NULL || *s == '\0')
        return -1;
    int64_t whole = 0, frac = 0;
    int frac_digits = 0;
    const char *p = s;
    if (*p == '.')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        whole = whole * 10 + (*p - '0');
        if (whole > 1000000000LL)
            return -1;
    }
    if (*p == '.') {
        p++;
        if (*p == '\0')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++frac_digits > 3)
                return -1;
            frac = frac * 10 + (*p - '0');
        }
    }
    if (*p != '\0')
        return -1;
    while (frac_digits < 3) {
        frac *= 10;
        frac_digits++;
    }
    *out_ms = whole * 1000 + frac;
    return 0;
}

int pybox_strlcpy(char *dst, const char *src, size_t size)
{
    if (size == 0)
        return -1;
    size_t n = strlen(src);
    if (n >= size) {
        memcpy(dst, src, size - 1);
        dst[size - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

int pybox_fmt(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len) {
        if (len > 0)
            out[0] = '\0';
        return -1;
    }
    return 0;
}

const char *pybox_fmt_fixed(char out[PYBOX_NUM_MAX], int64_t v, int decimals)
{
    uint64_t scale = 1;
    for (int i = 0; i < decimals && i < 9; i++)
        scale *= 10;
    /* the magnitude, INT64_MIN included */
    uint64_t mag = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    uint64_t whole = mag / scale, frac = mag % scale;
    int width = decimals < 9 ? decimals : 9;
    if (frac == 0) {
        snprintf(out, PYBOX_NUM_MAX, "%s%llu", v < 0 ? "-" : "", (unsigned long long)whole);
        return out;
    }
    while (frac % 10 == 0) {
        frac /= 10;
        width--;
    }
    snprintf(out, PYBOX_NUM_MAX, "%s%llu.%0*llu", v < 0 ? "-" : "", (unsigned long long)whole, width,
             (unsigned long long)frac);
    return out;
}

const char *pybox_fmt_double(char out[PYBOX_NUM_MAX], double v)
{
    /* 17 significant digits read back as any double; fewer do for most */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, PYBOX_NUM_MAX, "%.*g", prec, v);
        if (!isfinite(v) || strtod(out, NULL) == v)
            break;
    }
    return out;
}

const char *pybox_fmt_size(char out[PYBOX_NUM_MAX], int64_t bytes)
{
    if (bytes % (1024 * 1024) == 0)
        snprintf(out, PYBOX_NUM_MAX, "%lld MiB", (long long)(bytes / (1024 * 1024)));
    else if (bytes % 1024 == 0)
        snprintf(out, PYBOX_NUM_MAX, "%lld KiB", (long long)(bytes / 1024));
    else
        snprintf(out, PYBOX_NUM_MAX, "%lld bytes", (long long)bytes);
    return out;
}

bool pybox_double_to_i64(double v, int64_t *out)
{
    /* -2^63 is exact as a double, 2^63 too: [-2^63, 2^63) is what converts */
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return false;
    *out = (int64_t)v;
    return true;
}

int pybox_mkdir_parents(const char *path, mode_t mode, char *failed, size_t failed_len)
{
    if (pybox_strlcpy(failed, path, failed_len) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* each parent in turn, cut at its slash, then the folder itself whole */
    for (char *p = failed + 1;; p++) {
        bool last = *p == '\0';
        if (!last && *p != '/')
            continue;
        *p = '\0';
        if (mkdir(failed, last ? mode : 0755) < 0 && errno != EEXIST)
            return -1;
        if (last)
            return 0;
        *p = '/';
    }
}

int pybox_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int pybox_grow(void *v, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : first;
    void *nv = realloc(*(void **)v, ncap * elem);
    if (nv == NULL)
        return -1;
    *(void **)v = nv;
    *cap = ncap;
    return 0;
}

DIR *pybox_dir_open(int fd)
{
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

/* dev: the file system of the tree's top (0 until it is open): a folder of another one
 * (a mount point) is never entered, so nothing mounted under the tree is removed. */
static int remove_at(int dfd, const char *name, int depth, dev_t dev)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (depth > PYBOX_REMOVE_DEPTH_MAX) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && depth > 0 && sb.st_dev != dev) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    DIR *d = pybox_dir_open(fd);
    if (d == NULL)
        return -1;
    int rc = 0, e = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (remove_at(dirfd(d), de->d_name, depth + 1, sb.st_dev) < 0 && rc == 0) {
            rc = -1;
            e = errno;
        }
    }
    closedir(d);
    if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -1;
    errno = rc < 0 ? e : errno;
    return rc;
}

int pybox_remove_tree_at(int dfd, const char *name)
{
    return remove_at(dfd, name, 0, 0);
}

pid_t pybox_fork_piped(int *fd, pybox_error_t *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "pipe2");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "fork");
    }
    close(p[pid == 0 ? 0 : 1]);
    *fd = p[pid == 0 ? 1 : 0];
    return pid;
}

const char *pybox_runtime_dir_of(const char *root, uid_t uid, char *buf, size_t len)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (rt != NULL && rt[0] != '\0')
        return rt[0] == '/' && pybox_strlcpy(buf, rt, len) == 0 ? buf : NULL;
    char dir[64], at[PATH_MAX];
    struct stat sb;
    if (pybox_fmt(dir, sizeof dir, "/run/user/%u", (unsigned)uid) < 0 ||
        pybox_fmt(at, sizeof at, "%s%s", root, dir) < 0 || lstat(at, &sb) < 0 || !S_ISDIR(sb.st_mode) ||
        sb.st_uid != uid || (sb.st_mode & 077) != 0)
        return NULL;
    return pybox_strlcpy(buf, dir, len) == 0 ? buf : NULL;
}

const char *pybox_runtime_dir(char *buf, size_t len)
{
    return pybox_runtime_dir_of("", geteuid(), buf, len);
}
