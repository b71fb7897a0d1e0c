/* SPDX-License-Identifier: MIT */
/* Small shared helpers: cleanup attributes, ownership hand-off, clocks, random ids,
 * SHA-256, bounded reads. Nothing here knows about boxes or engines. */
#ifndef PYBOX_UTIL_H
#define PYBOX_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(pybox_freep)
#define _cleanup_close_ _cleanup_(pybox_closep)

void pybox_freep(void *p);
void pybox_closep(int *fd);

/* Take ownership out of a cleanup variable: returns *pp and sets it to NULL. */
static inline void *pybox_steal_pointer(void *pp)
{
    void **p = (void **)pp;
    void *v = *p;
    *p = NULL;
    return v;
}
#define steal_pointer(pp) pybox_steal_pointer(pp)

static inline int pybox_steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

/* Monotonic time, for durations and deadlines. */
int64_t pybox_now_ms(void);
double pybox_now_s(void);
/* Wall-clock seconds since the epoch. */
int64_t pybox_wall_s(void);
/* UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ"; buf at least 32 bytes. */
void pybox_wall_iso(char *buf, size_t len);

/* Fill buf with n bytes from the kernel's random source. */
int pybox_random(void *buf, size_t n, pybox_error_t *err);
/* Lowercase hex of n bytes into out (2n+1 bytes). */
void pybox_hex(const unsigned char *in, size_t n, char *out);
/* A random id of 2n hex characters. out holds 2n+1. */
int pybox_random_hex(size_t n, char *out, pybox_error_t *err);

/* SHA-256 of a buffer as 64 hex characters + NUL (aborts if libcrypto cannot), or as its
 * 32 bytes (false if libcrypto could not: no memory for its context). */
void pybox_sha256_hex(const void *data, size_t len, char out[65]);
bool pybox_sha256(const void *data, size_t len, unsigned char out[32]);

/* Work done ahead, on a thread of its own, while the process reads its options, program
 * and state: work is a warm-up (below). Joined (by pybox_warmup_join, or by scope with _cleanup_)
 * before the process may exit: no library's exit handler may run beside its start. */
typedef struct {
    pthread_t thread;
    bool started;
} pybox_warmup_t;
void pybox_warmup_start(pybox_warmup_t *a, void *(*work)(void *));
void pybox_warmup_join(pybox_warmup_t *a);
/* libcrypto made ready: its configuration read, SHA-256 and Ed25519 fetched (about 0.6 ms
 * that a short-lived process would otherwise spend at its first digest, which waits for
 * this if it has not finished). */
void *pybox_crypto_warm(void *arg);

/* A SHA-256 digest begun (NULL when libcrypto has no memory for it), and one finished and
 * freed: its hex into out (65 bytes), unless out is NULL; false (out untouched) when it
 * could not be finished. The one SHA-256 of the process. */
typedef struct evp_md_ctx_st EVP_MD_CTX;
EVP_MD_CTX *pybox_digest_start(void);
bool pybox_digest_done(EVP_MD_CTX *md, char *out);

/* Read all of fd up to max bytes. On success *out is malloc'd (NUL-terminated, not
 * counted) and *len is the size. If the input holds more than max bytes, *over is set
 * and reading stops (the content is still returned). */
int pybox_read_bounded(int fd, size_t max, char **out, size_t *len, bool *over, pybox_error_t *err);

/* The same from the file at path, opened O_RDONLY | O_CLOEXEC | flags: 0; -1 with err
 * left as it was and errno set when it cannot be opened (the caller says so in its own
 * words); -1 with err when it cannot be read. */
int pybox_read_file(const char *path, int flags, size_t max, char **out, size_t *len, bool *over, pybox_error_t *err);

/* One write(), retried on EINTR, that never raises SIGPIPE: a reader gone is -1 with
 * EPIPE, whatever the process does with the signal (a library's caller decides that, and
 * the tests leave it as the default that ends a process). */
ssize_t pybox_write_some(int fd, const void *buf, size_t len);

/* pybox_write_some() until all of buf is written. */
int pybox_write_all(int fd, const void *buf, size_t len);

/* read() exactly len bytes into buf, retrying on EINTR; -1 on an error or an end before
 * len bytes. */
int pybox_read_exact(int fd, void *buf, size_t len);

/* read() a child's message: until its end, an error or size - 1 bytes, retrying on EINTR;
 * buf is NUL-terminated and the length returned. */
size_t pybox_read_message(int fd, char *buf, size_t size);

/* Parse a decimal (optionally fractional) number of seconds into milliseconds.
 * Strict: no sign, no exponent, no trailing garbage, at most 3 decimals. */
int pybox_parse_seconds_ms(const char *s, int64_t *out_ms);
/* Parse a memory size: digits, then an optional unit k/K/KiB, m/M/MiB, g/G/GiB; a bare
 * number is in MiB. Strict: no sign, no decimals, no spaces. */
int pybox_parse_size(const char *s, int64_t *out_bytes);
/* Parse a strict non-negative decimal integer. */
int pybox_parse_u64(const char *s, uint64_t *out);
/* Parse a length of time in whole units: digits, then s (seconds, also when there is no
 * unit), m (minutes), h (hours) or d (days). Strict: no sign, no decimals, no spaces;
 * at most 10 years. */
int pybox_parse_age(const char *s, int64_t *out_s);

/* A JSON number as an int64_t (its fraction dropped): false when the double is not finite
 * or outside int64_t's range, where a conversion would be undefined. */
bool pybox_double_to_i64(double v, int64_t *out);

/* Numbers for messages, written so that two different values never look the same (a
 * value refused above a ceiling must not be shown as the ceiling). */
#define PYBOX_NUM_MAX 32
/* v / 10^decimals (decimals 0 to 9) exactly, trailing zeros dropped: (5000, 3) is "5",
 * (3600001, 3) "3600.001". Returns out. */
const char *pybox_fmt_fixed(char out[PYBOX_NUM_MAX], int64_t v, int decimals);
/* The shortest %g text that reads back as v: "5.0000001", "31", "1e+300". Returns out. */
const char *pybox_fmt_double(char out[PYBOX_NUM_MAX], double v);
/* A size in its largest whole unit: "512 MiB", "102913 KiB", "104857601 bytes". Returns
 * out. */
const char *pybox_fmt_size(char out[PYBOX_NUM_MAX], int64_t bytes);
/* "30d", "12h", "90m", "45s": the largest of those units that divides it whole (what
 * pybox_parse_age reads back). */
const char *pybox_fmt_age(char out[PYBOX_NUM_MAX], int64_t seconds);

/* snprintf that reports truncation: 0 if the whole text fit, -1 if not (out is then
 * unusable: never use a cut path). */
int pybox_fmt(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Bounded copy that always terminates; returns -1 if src did not fit. */
int pybox_strlcpy(char *dst, const char *src, size_t size);

/* Make the folder path (mode) and each missing folder above it (0755), as mkdir -p: 0, or
 * -1 with errno and the folder that could not be made in failed (failed_len bytes). */
int pybox_mkdir_parents(const char *path, mode_t mode, char *failed, size_t failed_len);

/* The value of a hexadecimal digit (either case), or -1. */
int pybox_hex_value(char c);

/* Room for one more element in the array *v of n elements (elem bytes each) and *cap
 * allocated: doubled (first the first time) when full. 0, or -1 when out of memory (*v
 * as it was). */
int pybox_grow(void *v, size_t *cap, size_t n, size_t elem, size_t first);

/* The folder open at fd (taken: closed on failure; -1 is a failure too) as a DIR, or
 * NULL with errno kept. */
DIR *pybox_dir_open(int fd);

/* Remove name under the folder dfd (AT_FDCWD: a path) and everything in it, by
 * descriptors: a link is removed, never followed; a folder of another file system than
 * the tree's top (a mount point) is never entered (EXDEV), nor one deeper than
 * PYBOX_REMOVE_DEPTH_MAX (ELOOP). Returns 0 (also when nothing of that name is there), or
 * -1 with errno (the first failure), having removed all it could. PyBox's one tree
 * remover. */
#define PYBOX_REMOVE_DEPTH_MAX 256
int pybox_remove_tree_at(int dfd, const char *name);

/* The user's runtime folder, into buf: $XDG_RUNTIME_DIR when set (an absolute path), else
 * /run/user/<euid> when it is a real folder of the user's alone (logind makes it for a
 * user with a session, or lingering, and a login session's XDG_RUNTIME_DIR names it): an
 * MCP client starts its servers with an environment that drops XDG_RUNTIME_DIR. NULL when
 * there is none (or buf is too short). Where an ordinary user's systemd is reached and
 * their boxes' ids are leased. */
const char *pybox_runtime_dir(char *buf, size_t len);
/* The same for user uid on a host whose root folder is root ("" for this one; a fixture
 * tree in tests): what is looked at is under root, what is returned is the host's path. */
const char *pybox_runtime_dir_of(const char *root, uid_t uid, char *buf, size_t len);

/* A child that answers its parent through a pipe (close-on-exec): 0 in the child, *fd its
 * write end; the child's pid in the parent, *fd the read end; -1 with err set and nothing
 * left open when either cannot be made. */
pid_t pybox_fork_piped(int *fd, pybox_error_t *err);

#endif
