/* SPDX-License-Identifier: MIT */
/* Unit tests for the shared helpers (util.h) and the bounded byte buffer (buf.h). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/buf.h"
#include "../pybox/util.h"
#include "suites.h"

/* ---- pybox_parse_seconds_ms ---- */

START_TEST(seconds_valid)
{
    static const struct {
        const char *in;
        int64_t ms;
    } cases[] = {
        {"2", 2000}, {"0.4", 400}, {"2.5", 2500},     {"10.125", 10125},
        {"0", 0},    {"0.001", 1}, {"3600", 3600000}, {"007.50", 7500},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t ms = -1;
        ck_assert_msg(pybox_parse_seconds_ms(cases[i].in, &ms) == 0, "'%s' refused", cases[i].in);
        ck_assert_msg(ms == cases[i].ms, "'%s' gave %lld ms", cases[i].in, (long long)ms);
    }
}
END_TEST

START_TEST(seconds_invalid)
{
    static const char *const bad[] = {
        "",
        ".5",
        "1.",
        "-1",
        "1e3",
        "1.2345",
        "abc",
        "2s",
        " 2",
        "2 ",
        "+2",
        "1.x",
        "1..2",
        ".",
        "0x10",
        "1,5",
        "99999999999999999999",
        "1000000000000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t ms = 424242;
        ck_assert_msg(pybox_parse_seconds_ms(bad[i], &ms) < 0, "'%s' accepted", bad[i]);
        ck_assert_msg(ms == 424242, "'%s' wrote the output on failure", bad[i]);
    }
    int64_t ms = 0;
    ck_assert_int_lt(pybox_parse_seconds_ms(NULL, &ms), 0);
}
END_TEST

/* ---- pybox_parse_u64 ---- */

START_TEST(u64_parse)
{
    uint64_t v = 0;
    ck_assert_int_eq(pybox_parse_u64("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(pybox_parse_u64("12345", &v), 0);
    ck_assert_uint_eq(v, 12345);
    ck_assert_int_eq(pybox_parse_u64("18446744073709551615", &v), 0);
    ck_assert(v == UINT64_MAX);

    v = 7;
    ck_assert_int_lt(pybox_parse_u64("18446744073709551616", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("18446744073709551620", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("99999999999999999999999", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("-1", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("+1", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("1 ", &v), 0);
    ck_assert_int_lt(pybox_parse_u64("12a", &v), 0);
    ck_assert_int_lt(pybox_parse_u64(NULL, &v), 0);
    ck_assert_uint_eq(v, 7);
}
END_TEST

/* ---- pybox_fmt, pybox_strlcpy ---- */

START_TEST(fmt_fits_and_truncates)
{
    char out[8];
    ck_assert_int_eq(pybox_fmt(out, sizeof out, "%s-%d", "ab", 42), 0);
    ck_assert_str_eq(out, "ab-42");
    /* exactly len - 1 characters still fit */
    ck_assert_int_eq(pybox_fmt(out, sizeof out, "%s", "1234567"), 0);
    ck_assert_str_eq(out, "1234567");
    /* one more does not: -1 and nothing usable left behind */
    ck_assert_int_eq(pybox_fmt(out, sizeof out, "%s", "12345678"), -1);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(pybox_fmt(out, sizeof out, "/very/long/path/%d", 1), -1);
    ck_assert_str_eq(out, "");
}
END_TEST

/* Numbers for messages: exact, and never two values that look the same. */
START_TEST(fmt_numbers)
{
    char out[PYBOX_NUM_MAX];
    static const struct {
        int64_t v;
        int decimals;
        const char *want;
    } fixed[] = {{5000, 3, "5"},
                 {5500, 3, "5.5"},
                 {3600001, 3, "3600.001"},
                 {100, 3, "0.1"},
                 {0, 3, "0"},
                 {-1500, 3, "-1.5"},
                 {1000000500, 9, "1.0000005"},
                 {500000000, 9, "0.5"},
                 {42, 0, "42"},
                 {INT64_MIN, 3, "-9223372036854775.808"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        ck_assert_str_eq(pybox_fmt_fixed(out, fixed[i].v, fixed[i].decimals), fixed[i].want);
    static const struct {
        double v;
        const char *want;
    } dbl[] = {{5.0000001, "5.0000001"},
               {31, "31"},
               {0.1, "0.1"},
               {1e300, "1e+300"},
               {2.5, "2.5"},
               {-0.25, "-0.25"},
               {0, "0"},
               {9007199254740993.0, "9007199254740992"}};
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        ck_assert_str_eq(pybox_fmt_double(out, dbl[i].v), dbl[i].want);
    /* any double reads back from its text */
    static const double back[] = {0.1 + 0.2, 1.0 / 3, 5.000000000000001, 1e-310, 123456789.123456789};
    for (size_t i = 0; i < sizeof back / sizeof back[0]; i++)
        ck_assert(strtod(pybox_fmt_double(out, back[i]), NULL) == back[i]);
    ck_assert_str_eq(pybox_fmt_size(out, 512LL << 20), "512 MiB");
    ck_assert_str_eq(pybox_fmt_size(out, 102913LL << 10), "102913 KiB");
    ck_assert_str_eq(pybox_fmt_size(out, (100LL << 20) + 1), "104857601 bytes");
}
END_TEST

START_TEST(strlcpy_bounds)
{
    char dst[6];
    ck_assert_int_eq(pybox_strlcpy(dst, "abc", sizeof dst), 0);
    ck_assert_str_eq(dst, "abc");
    ck_assert_int_eq(pybox_strlcpy(dst, "abcde", sizeof dst), 0);
    ck_assert_str_eq(dst, "abcde");
    ck_assert_int_eq(pybox_strlcpy(dst, "abcdef", sizeof dst), -1);
    ck_assert_str_eq(dst, "abcde"); /* cut, but always terminated */
    ck_assert_int_eq(pybox_strlcpy(dst, "", sizeof dst), 0);
    ck_assert_str_eq(dst, "");
    dst[0] = 'x';
    ck_assert_int_eq(pybox_strlcpy(dst, "a", 0), -1);
    ck_assert_int_eq(dst[0], 'x'); /* size 0: nothing written */
}
END_TEST

/* ---- pybox_read_bounded ---- */

/* Write len bytes of a pattern into a pipe from a child process (so any size works),
 * and return the read end. */
static int pipe_with(size_t len, pid_t *child)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        char chunk[4096 + 26];
        for (size_t i = 0; i < sizeof chunk; i++)
            chunk[i] = (char)('a' + i % 26);
        size_t left = len, off = 0;
        while (left > 0) {
            size_t n = left < 4096 ? left : 4096;
            if (pybox_write_all(fds[1], chunk + off % 26, n) < 0)
                _exit(1);
            off += n;
            left -= n;
        }
        _exit(0);
    }
    close(fds[1]);
    *child = pid;
    return fds[0];
}

static void reap(pid_t pid)
{
    /* The reader may have stopped early (over the maximum): the writer is then stuck
     * on a full pipe or gets SIGPIPE; either way it must not outlive the test. */
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* A write to a pipe whose reader is gone is an error the caller is told, never a signal
 * that ends the process: the library's callers (the tests among them) keep SIGPIPE's
 * default. A SIGPIPE that was already pending stays pending. */
START_TEST(write_to_a_gone_reader_is_epipe)
{
    ck_assert_ptr_ne(signal(SIGPIPE, SIG_DFL), SIG_ERR);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    close(fds[0]);
    errno = 0;
    ck_assert_int_eq(pybox_write_some(fds[1], "x", 1), -1);
    ck_assert_int_eq(errno, EPIPE);
    ck_assert_int_eq(pybox_write_all(fds[1], "xyz", 3), -1);
    ck_assert_int_eq(errno, EPIPE);
    sigset_t pipe_sig, old, pending;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    ck_assert_int_eq(sigpending(&pending), 0);
    ck_assert_int_eq(sigismember(&pending, SIGPIPE), 0); /* none left behind */
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &pipe_sig, &old), 0);
    ck_assert_int_eq(raise(SIGPIPE), 0);
    ck_assert_int_eq(pybox_write_some(fds[1], "x", 1), -1);
    ck_assert_int_eq(sigpending(&pending), 0);
    ck_assert_int_eq(sigismember(&pending, SIGPIPE), 1); /* the caller's own, kept */
    const struct timespec now = {0, 0};
    ck_assert_int_eq(sigtimedwait(&pipe_sig, NULL, &now), SIGPIPE);
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    close(fds[1]);
}
END_TEST

static void check_bounded(size_t input, size_t max, bool want_over)
{
    pid_t child;
    int fd = pipe_with(input, &child);
    char *out = NULL;
    size_t len = 0;
    bool over = !want_over;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, max, &out, &len, &over, &err), 0);
    close(fd);
    reap(child);
    ck_assert_msg(over == want_over, "input %zu, max %zu: over %d", input, max, over);
    ck_assert_ptr_nonnull(out);
    if (!want_over) {
        ck_assert_uint_eq(len, input);
    } else {
        ck_assert_uint_gt(len, max);
    }
    ck_assert_int_eq(out[len], '\0');
    for (size_t i = 0; i < len; i++)
        ck_assert_msg(out[i] == (char)('a' + i % 26), "byte %zu is wrong", i);
    free(out);
}

START_TEST(read_bounded_sizes)
{
    check_bounded(0, 100, false);
    check_bounded(99, 100, false);
    check_bounded(100, 100, false);
    check_bounded(101, 100, true);
    check_bounded(8191, 8192, false);
    check_bounded(8192, 8192, false);
    check_bounded(8193, 8192, true);
    check_bounded(300000, 200000, true);
    check_bounded(200000, 200000, false);
    check_bounded(1, 0, true);
    check_bounded(0, 0, false);
}
END_TEST

START_TEST(read_bounded_bad_fd)
{
    char *out = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_lt(pybox_read_bounded(-1, 10, &out, &len, &over, &err), 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
    ck_assert_int_eq(err.errnum, EBADF);
    ck_assert_ptr_null(out);
}
END_TEST

/* ---- SHA-256, hex, random ids ---- */

START_TEST(sha256_vectors)
{
    char d[65];
    pybox_sha256_hex("abc", 3, d);
    ck_assert_str_eq(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    pybox_sha256_hex("", 0, d);
    ck_assert_str_eq(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

START_TEST(hex_encoding)
{
    const unsigned char in[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[2 * sizeof in + 1];
    memset(out, 'Z', sizeof out);
    pybox_hex(in, sizeof in, out);
    ck_assert_str_eq(out, "00017f80abff");
    pybox_hex(in, 0, out);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(random_hex_ids)
{
    char a[33], b[33];
    pybox_error_t err = {0};
    memset(a, 'Z', sizeof a);
    ck_assert_int_eq(pybox_random_hex(16, a, &err), 0);
    ck_assert_int_eq(pybox_random_hex(16, b, &err), 0);
    ck_assert_uint_eq(strlen(a), 32);
    ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 32);
    ck_assert_uint_eq(strspn(b, "0123456789abcdef"), 32);
    ck_assert_str_ne(a, b); /* 128 random bits: equal only if the source is broken */

    char big[129];
    ck_assert_int_eq(pybox_random_hex(64, big, &err), 0);
    ck_assert_uint_eq(strlen(big), 128);
    ck_assert_uint_eq(strspn(big, "0123456789abcdef"), 128);

    char small[3];
    ck_assert_int_eq(pybox_random_hex(1, small, &err), 0);
    ck_assert_uint_eq(strlen(small), 2);

    /* more than the helper's own buffer: refused, not overflowed */
    char huge[2 * 65 + 1];
    ck_assert_int_lt(pybox_random_hex(65, huge, &err), 0);
    ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
}
END_TEST

/* ---- buf.h ---- */

START_TEST(buf_append_and_max)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 10);
    ck_assert_int_eq(pybox_buf_append(&b, "hello", 5), 0);
    ck_assert_int_eq(pybox_buf_puts(&b, "world"), 0);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_str_eq(b.data, "helloworld");
    ck_assert(pybox_buf_ok(&b));
    /* past the maximum: the failure sticks; what was held is gone, and every later
     * append fails too (a text is whole or nothing) */
    ck_assert_int_eq(pybox_buf_append(&b, "!", 1), -1);
    ck_assert(!pybox_buf_ok(&b));
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(pybox_buf_append(&b, "", 0), -1);
    pybox_buf_adds(&b, "x");
    ck_assert(!pybox_buf_ok(&b));
    ck_assert_ptr_null(pybox_buf_steal(&b));
    pybox_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    /* a maximum always: 0 means the default one */
    pybox_buf_init(&b, 0);
    ck_assert_uint_eq(b.max, PYBOX_BUF_DEFAULT_MAX);
    pybox_buf_free(&b);

    /* a single append larger than the maximum appends nothing */
    pybox_buf_init(&b, 4);
    ck_assert_int_eq(pybox_buf_append(&b, "12345", 5), -1);
    ck_assert_uint_eq(b.len, 0);
    pybox_buf_free(&b);

    /* binary data, growth well past the first allocation */
    pybox_buf_init(&b, 0);
    char chunk[1000];
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (char)(i & 0xff);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(pybox_buf_append(&b, chunk, sizeof chunk), 0);
    ck_assert_uint_eq(b.len, 100000);
    ck_assert_uint_ge(b.cap, b.len + 1);
    ck_assert_int_eq(memcmp(b.data + 99000, chunk, sizeof chunk), 0);
    ck_assert_int_eq(b.data[b.len], '\0');
    pybox_buf_free(&b);
}
END_TEST

START_TEST(buf_printf_and_steal)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 16);
    ck_assert_int_eq(pybox_buf_printf(&b, "%d-%s", 12, "ab"), 0);
    ck_assert_int_eq(pybox_buf_printf(&b, "[%03d]", 7), 0);
    ck_assert_str_eq(b.data, "12-ab[007]");
    ck_assert_uint_eq(b.len, 10);
    ck_assert_int_eq(pybox_buf_printf(&b, "%s", "123456"), 0);
    ck_assert_uint_eq(b.len, 16);

    char *s = pybox_buf_steal(&b);
    ck_assert_str_eq(s, "12-ab[007]123456");
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    free(s);
    /* the buffer stays usable after the hand-off */
    ck_assert_int_eq(pybox_buf_puts(&b, "again"), 0);
    ck_assert_str_eq(b.data, "again");
    pybox_buf_free(&b);
    /* a printf that would pass the maximum fails the buffer */
    pybox_buf_init(&b, 8);
    pybox_buf_addf(&b, "%s", "12345");
    pybox_buf_addf(&b, "%s", "6789");
    ck_assert(!pybox_buf_ok(&b));
    ck_assert_ptr_null(pybox_buf_steal(&b));
    pybox_buf_free(&b);

    /* stealing an empty buffer still hands over a string */
    pybox_buf_init(&b, 0);
    s = pybox_buf_steal(&b);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

/* PyBox's one tree remover: a deep tree goes whole, a link goes without what it points
 * to, and a file system mounted inside the tree is never entered. */
START_TEST(remove_tree)
{
    char top[] = "/tmp/pybox-unit-rmXXXXXX", outside[] = "/tmp/pybox-unit-keepXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(top));
    ck_assert_ptr_nonnull(mkdtemp(outside));
    int keep = openat(AT_FDCWD, outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(keep, 0);
    close(openat(keep, "kept", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    int d = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(d, 0);
    ck_assert_int_eq(symlinkat(outside, d, "link"), 0);
    /* 100 folders deep: past what a smaller bound (64) would enter */
    int cur = dup(d);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(mkdirat(cur, "d", 0700), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(next, 0);
        close(cur);
        cur = next;
    }
    close(openat(cur, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    close(cur);
    ck_assert_int_eq(pybox_remove_tree_at(AT_FDCWD, top), 0);
    ck_assert_int_eq(faccessat(AT_FDCWD, top, F_OK, AT_SYMLINK_NOFOLLOW), -1);
    ck_assert_int_eq(faccessat(keep, "kept", F_OK, 0), 0);    /* the link's target stays */
    ck_assert_int_eq(pybox_remove_tree_at(AT_FDCWD, top), 0); /* nothing there: done */
    close(d);
    /* a tmpfs mounted inside the tree (needs root, as the tests have) */
    memcpy(top, "/tmp/pybox-unit-rmXXXXXX", sizeof top);
    ck_assert_ptr_nonnull(mkdtemp(top));
    char mnt[64];
    snprintf(mnt, sizeof mnt, "%s/mnt", top);
    ck_assert_int_eq(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") == 0) {
        char inside[80];
        snprintf(inside, sizeof inside, "%s/inside", mnt);
        close(open(inside, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        ck_assert_int_eq(pybox_remove_tree_at(AT_FDCWD, top), -1);
        ck_assert_int_eq(errno, EXDEV);
        ck_assert_int_eq(access(inside, F_OK), 0); /* what is mounted there is untouched */
        ck_assert_int_eq(umount(mnt), 0);
    }
    ck_assert_int_eq(pybox_remove_tree_at(AT_FDCWD, top), 0);
    ck_assert_int_eq(pybox_remove_tree_at(keep, "kept"), 0);
    close(keep);
    ck_assert_int_eq(rmdir(outside), 0);
}
END_TEST

Suite *suite_util(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, seconds_valid);
    tcase_add_test(tc, seconds_invalid);
    tcase_add_test(tc, u64_parse);
    tcase_add_test(tc, fmt_fits_and_truncates);
    tcase_add_test(tc, fmt_numbers);
    tcase_add_test(tc, strlcpy_bounds);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("io");
    tcase_add_test(tc, read_bounded_sizes);
    tcase_add_test(tc, read_bounded_bad_fd);
    tcase_add_test(tc, write_to_a_gone_reader_is_epipe);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);

    tc = tcase_create("digest");
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, remove_tree);
    tcase_add_test(tc, hex_encoding);
    tcase_add_test(tc, random_hex_ids);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("buf");
    tcase_add_test(tc, buf_append_and_max);
    tcase_add_test(tc, buf_printf_and_steal);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);
    return s;
}
