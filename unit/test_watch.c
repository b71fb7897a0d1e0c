/* SPDX-License-Identifier: MIT */
/* Unit tests for the watcher: cgroup layouts, counter parsing, unreadable files and sampling (watch.h). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/cgroup.h"
#include "../pybox/docker/docker.h"
#include "../pybox/hooks.h"
#include "../pybox/util.h"
#include "../pybox/watch.h"
#include "suites.h"

/* The container id every fixture tree is built for, and one that no tree holds. */
#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OTHER_ID "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

#define CG PYBOX_FIXTURES "/cgroup"
#define PROC CG "/proc"

/* Folders inside the fixture trees, relative to their root. */
#define V1_MEM "memory/docker/" ID
#define V1_PIDS "pids/docker/" ID
#define V1_ACCT "cpuacct/docker/" ID
#define V1_CPU "cpu/docker/" ID
#define V2_FS "docker/" ID
#define V2_SD "system.slice/docker-" ID ".scope"
/* The box's PID 1 as the engine's record gives it, in each v2 tree: its cgroup is where
 * the kernel's list for it (proc/<pid>/cgroup) says, never where a layout guesses. */
#define SD_PID 4646
#define FS_PID 4444

#define ALL_BITS                                                                                                       \
    (PYBOX_RD_MEM_NOW | PYBOX_RD_MEM_PEAK | PYBOX_RD_OOM_KILLS | PYBOX_RD_PIDS_NOW | PYBOX_RD_PIDS_PEAK |              \
     PYBOX_RD_PIDS_REFUSED | PYBOX_RD_CPU | PYBOX_RD_THROTTLE)

/* A folder per test case, made and removed by the runner process itself (so a test
 * that fails part-way leaves nothing behind), and a fresh folder inside it per test
 * for the trees that test changes. */
static char case_root[PATH_MAX];
static char tmp_root[PATH_MAX];

static void remove_tree(char *dir)
{
    if (dir[0] != '\0')
        unit_rm_tree(dir);
    dir[0] = '\0';
}

static void case_setup(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] != '/')
        base = "/tmp";
    ck_assert_int_eq(pybox_fmt(case_root, sizeof case_root, "%s/pybox-unit-watch-XXXXXX", base), 0);
    ck_assert_ptr_nonnull(mkdtemp(case_root));
}

static void case_teardown(void)
{
    remove_tree(case_root);
}

static void setup(void)
{
    ck_assert_int_eq(pybox_fmt(tmp_root, sizeof tmp_root, "%s/test-XXXXXX", case_root), 0);
    ck_assert_ptr_nonnull(mkdtemp(tmp_root));
}

static void teardown(void)
{
    remove_tree(tmp_root);
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* ---- copying a fixture tree so a test may change it ---- */

static char copy_src[PATH_MAX];
static char copy_dst[PATH_MAX];

static int copy_contents(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    int rc = pybox_read_bounded(in, 1 << 16, &text, &len, &over, &err);
    close(in);
    if (rc < 0 || over) {
        free(text);
        return -1;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    rc = out >= 0 && pybox_write_all(out, text, len) == 0 ? 0 : -1;
    if (out >= 0)
        close(out);
    free(text);
    return rc;
}

static void copy_file(const char *from, const char *to)
{
    ck_assert_msg(copy_contents(from, to) == 0, "copying %s failed", from);
}

static int copy_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    char to[PATH_MAX];
    if (pybox_fmt(to, sizeof to, "%s%s", copy_dst, path + strlen(copy_src)) < 0)
        return -1;
    if (flag == FTW_D)
        return mkdir(to, 0700) == 0 ? 0 : -1;
    if (flag != FTW_F)
        return -1;
    return copy_contents(path, to);
}

/* Copy the fixture tree `name` to tmp_root/name and return that path (static storage). */
static const char *copy_tree(const char *name)
{
    static char root[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(copy_src, sizeof copy_src, "%s/%s", CG, name), 0);
    ck_assert_int_eq(pybox_fmt(copy_dst, sizeof copy_dst, "%s/%s", tmp_root, name), 0);
    ck_assert_msg(nftw(copy_src, copy_entry, 16, FTW_PHYS) == 0, "copying %s failed", name);
    ck_assert_int_eq(pybox_strlcpy(root, copy_dst, sizeof root), 0);
    return root;
}

static void path_in(char *out, const char *root, const char *rel)
{
    ck_assert_int_eq(pybox_fmt(out, PATH_MAX, "%s/%s", root, rel), 0);
}

/* Rewrite a file in place (same inode), so a descriptor the watcher holds sees the new text. */
static void write_at(const char *root, const char *rel, const char *text)
{
    char p[PATH_MAX];
    path_in(p, root, rel);
    int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "cannot open %s", p);
    ck_assert_int_eq(pybox_write_all(fd, text, strlen(text)), 0);
    close(fd);
}

static void remove_at(const char *root, const char *rel)
{
    char p[PATH_MAX];
    path_in(p, root, rel);
    ck_assert_msg(unlink(p) == 0, "cannot remove %s", p);
}

/* What the Docker backend does for a box (pid: its PID 1 from the engine's record, 0
 * when there is none); then the watcher arms at that location. */
static int locate_and_arm(pybox_watch_t *w, const char *root, const char *proc_root, const char *id, pid_t pid,
                          pybox_error_t *err)
{
    pybox_cgroup_loc_t loc;
    if (pybox_docker_cgroup(root, proc_root, id, pid, &loc, err) < 0) {
        pybox_watch_free(w);
        pybox_watch_init(w);
        return -1;
    }
    return pybox_watch_arm(w, &loc, err);
}

static void arm_ok(pybox_watch_t *w, const char *root, const char *proc_root, const char *id, pid_t pid)
{
    pybox_error_t err = {0};
    pybox_watch_init(w);
    ck_assert_msg(locate_and_arm(w, root, proc_root, id, pid, &err) == 0, "arm under %s: %s", root, err.msg);
    ck_assert_ptr_nonnull(w->samples);
    ck_assert_uint_eq(w->n_samples, 0);
}

static void arm_fails(pybox_watch_t *w, const char *root, const char *proc_root, const char *id, pid_t pid)
{
    pybox_error_t err = {0};
    pybox_watch_init(w);
    ck_assert_int_eq(locate_and_arm(w, root, proc_root, id, pid, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
    ck_assert_int_ne(err.errnum, 0);
    ck_assert_int_eq(w->version, PYBOX_CG_NONE);
    ck_assert_ptr_null(w->samples);
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        ck_assert_int_eq(w->fd[i], -1);
}

/* The watcher's descriptor for a file, found by inode; -1 if it holds none. */
static int fd_of(const pybox_watch_t *w, const char *root, const char *rel)
{
    char p[PATH_MAX];
    path_in(p, root, rel);
    struct stat want;
    ck_assert_msg(stat(p, &want) == 0, "stat(%s) failed", p);
    for (int i = 0; i < PYBOX_WATCH_FILES; i++) {
        struct stat sb;
        if (w->fd[i] >= 0 && fstat(w->fd[i], &sb) == 0 && sb.st_dev == want.st_dev && sb.st_ino == want.st_ino)
            return w->fd[i];
    }
    return -1;
}

/* Put a descriptor that cannot be read (a folder: pread fails with EISDIR) in place of fd. */
static void make_unreadable(int fd)
{
    int dir = open(tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dir, 0);
    ck_assert_int_eq(dup2(dir, fd), fd);
    close(dir);
}

/* The values in the fixture trees. */
static void expect_v1(const pybox_reading_t *r)
{
    ck_assert_uint_eq(r->valid, ALL_BITS);
    ck_assert_uint_eq(r->vanished, 0);
    ck_assert_int_eq(r->mem_now, 3710976);
    ck_assert_int_eq(r->mem_peak, 5156864);
    ck_assert_int_eq(r->oom_kills, 1);
    ck_assert_int_eq(r->pids_now, 2);
    ck_assert_int_eq(r->pids_peak, 7);
    ck_assert_int_eq(r->pids_refused, 6);
    ck_assert_int_eq(r->cpu_ns, 92451853);
    ck_assert_int_eq(r->periods, 14);
    ck_assert_int_eq(r->throttled, 9);
    ck_assert_int_eq(r->throttled_ns, 364621629);
}

static void expect_v2(const pybox_reading_t *r)
{
    ck_assert_uint_eq(r->valid, ALL_BITS);
    ck_assert_uint_eq(r->vanished, 0);
    ck_assert_int_eq(r->mem_now, 4268032);
    ck_assert_int_eq(r->mem_peak, 134217728);
    ck_assert_int_eq(r->oom_kills, 1);
    ck_assert_int_eq(r->pids_now, 1);
    ck_assert_int_eq(r->pids_peak, 32);
    ck_assert_int_eq(r->pids_refused, 4);
    ck_assert_int_eq(r->cpu_ns, 699410000);
    ck_assert_int_eq(r->periods, 14);
    ck_assert_int_eq(r->throttled, 9);
    ck_assert_int_eq(r->throttled_ns, 364621000);
}

/* ---- finding each layout and reading every counter ---- */

START_TEST(v1_separate_controllers)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    ck_assert_int_eq(w.version, PYBOX_CG_V1);
    ck_assert_str_eq(w.where, CG "/v1/" V1_MEM);
    ck_assert(w.arm_ms >= 0.0);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    expect_v1(&r);
    ck_assert_int_eq(w.pids_seen_max, 2);
    /* reading again gives the same values: every file is read from its start */
    pybox_watch_read(&w, &r);
    expect_v1(&r);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(v1_combined_cpu_cpuacct)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v1-combined", PROC, ID, 0);
    ck_assert_int_eq(w.version, PYBOX_CG_V1);
    ck_assert_str_eq(w.where, CG "/v1-combined/" V1_MEM);
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms, &r);
    /* no pids.peak on older kernels: that bit stays unknown, the sampled maximum remains */
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)PYBOX_RD_PIDS_PEAK);
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.mem_now, 8654848);
    ck_assert_int_eq(r.mem_peak, 9097216);
    ck_assert_int_eq(r.oom_kills, 2);
    ck_assert_int_eq(r.pids_now, 3);
    ck_assert_int_eq(r.pids_refused, 5);
    ck_assert_int_eq(r.cpu_ns, 183302216);
    ck_assert_int_eq(r.periods, 21);
    ck_assert_int_eq(r.throttled, 11);
    ck_assert_int_eq(r.throttled_ns, 512004731);
    ck_assert_int_eq(w.pids_seen_max, 3);
    ck_assert_uint_eq(w.n_samples, 1);
    ck_assert_int_eq(w.samples[0].pids, 3);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(v2_systemd_driver)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v2-systemd", PROC, ID, SD_PID);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    ck_assert_str_eq(w.where, CG "/v2-systemd/" V2_SD);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    expect_v2(&r);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(v2_cgroupfs_driver)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v2-cgroupfs", PROC, ID, FS_PID);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    ck_assert_str_eq(w.where, CG "/v2-cgroupfs/" V2_FS);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    expect_v2(&r);
    pybox_watch_free(&w);
}
END_TEST

/* The largest values that still fit: INT64_MAX bytes, and the most microseconds that
 * still fit in int64 nanoseconds. */
START_TEST(largest_values)
{
    const char *root = copy_tree("v1");
    write_at(root, V1_MEM "/memory.usage_in_bytes", "9223372036854775807\n");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS);
    ck_assert_int_eq(r.mem_now, INT64_MAX);
    pybox_watch_free(&w);

    const char *root2 = copy_tree("v2-cgroupfs");
    write_at(root2, V2_FS "/cpu.stat",
             "usage_usec 9223372036854775\nnr_periods 1\nnr_throttled 1\nthrottled_usec 9223372036854775\n");
    arm_ok(&w, root2, PROC, ID, FS_PID);
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS);
    ck_assert_int_eq(r.cpu_ns, INT64_C(9223372036854775000));
    ck_assert_int_eq(r.throttled_ns, INT64_C(9223372036854775000));
    pybox_watch_free(&w);
}
END_TEST

START_TEST(root_from_environment)
{
    /* the test hook (hooks.h), which the unit tests are built with */
    const char *hook = pybox_hook_name(PYBOX_HOOK_CGROUP_ROOT);
    unsetenv(hook);
    ck_assert_str_eq(pybox_cgroup_root(), "/sys/fs/cgroup");
    ck_assert_int_eq(setenv(hook, CG "/v1", 1), 0);
    ck_assert_str_eq(pybox_cgroup_root(), CG "/v1");
    /* a relative root is not taken */
    ck_assert_int_eq(setenv(hook, "cgroup/v1", 1), 0);
    ck_assert_str_eq(pybox_cgroup_root(), "/sys/fs/cgroup");
    ck_assert_int_eq(setenv(hook, "", 1), 0);
    ck_assert_str_eq(pybox_cgroup_root(), "/sys/fs/cgroup");
    unsetenv(hook);
    /* the name it had before it was a test hook is nobody's */
    ck_assert_int_eq(setenv("PYBOX_CGROUP_ROOT", CG "/v1", 1), 0);
    ck_assert_str_eq(pybox_cgroup_root(), "/sys/fs/cgroup");
    unsetenv("PYBOX_CGROUP_ROOT");
}
END_TEST

/* ---- arming that fails, and the lifecycle ---- */

START_TEST(arm_absent_id)
{
    pybox_watch_t w;
    arm_fails(&w, CG "/v1", PROC, OTHER_ID, 0);
    pybox_watch_free(&w);
    arm_fails(&w, CG "/v1-combined", PROC, OTHER_ID, 0);
    pybox_watch_free(&w);
    arm_fails(&w, CG "/v2-systemd", PROC, OTHER_ID, 0);
    pybox_watch_free(&w);
    arm_fails(&w, CG "/v2-cgroupfs", PROC, OTHER_ID, 0);
    pybox_watch_free(&w);
    arm_fails(&w, CG "/absent", PROC, ID, 0);
    pybox_watch_free(&w);
    /* a prefix of a real id is a different box */
    arm_fails(&w, CG "/v1", PROC, "0123456789abcdef", 0);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(arm_bad_id)
{
    /* every id below names a real folder in this tree, so only the id check can refuse it */
    const char *root = copy_tree("v2-cgroupfs");
    static const char *const made[] = {
        "0123456789a", /* 11: too short */
        "0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
        ID "0", /* 65: too long */
        " 0123456789abcdef",
        "0123456789ab", /* 12: the shortest id taken */
    };
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        char p[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/docker/%s", root, made[i]), 0);
        ck_assert_int_eq(mkdir(p, 0700), 0);
    }
    static const char *const bad[] = {
        "", /* would be the docker/ folder itself */
        "0123456789a",
        "0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
        ID "0",
        " 0123456789abcdef",
        "0123456789ab/../" ID,
        "../docker/" ID,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char p[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/docker/%s", root, bad[i]), 0);
        ck_assert_msg(is_dir(p), "%s is not there", p);
        pybox_watch_t w;
        pybox_error_t err = {0};
        pybox_watch_init(&w);
        ck_assert_msg(locate_and_arm(&w, root, PROC, bad[i], FS_PID, &err) == -1, "id '%s' accepted", bad[i]);
        ck_assert_int_eq(err.kind, PYBOX_ERR_SYSTEM);
        ck_assert_int_eq(w.version, PYBOX_CG_NONE);
        ck_assert_ptr_null(w.samples);
        pybox_watch_free(&w);
    }
    pybox_watch_t w;
    arm_ok(&w, root, PROC, "0123456789ab", FS_PID);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(arm_nothing_found_anywhere)
{
    pybox_watch_t w;
    /* the proc file exists but its paths are not under this root */
    arm_fails(&w, CG "/v1", PROC, OTHER_ID, 4242);
    pybox_watch_free(&w);
    /* no proc file for this pid */
    arm_fails(&w, CG "/v1-custom", PROC, ID, 4545);
    pybox_watch_free(&w);
    /* no proc folder at all */
    arm_fails(&w, CG "/v1-custom", CG "/absent", ID, 4242);
    pybox_watch_free(&w);
    /* pid 0 and negative pids are never looked up, even where such a file exists */
    char proc[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(proc, sizeof proc, "%s/proc", tmp_root), 0);
    ck_assert_int_eq(mkdir(proc, 0700), 0);
    static const char *const pids[] = {"4242", "0", "-4242"};
    for (size_t i = 0; i < sizeof pids / sizeof pids[0]; i++) {
        char p[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s", proc, pids[i]), 0);
        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(pybox_fmt(p, sizeof p, "%s/%s/cgroup", proc, pids[i]), 0);
        copy_file(PROC "/4242/cgroup", p);
    }
    arm_ok(&w, CG "/v1-custom", proc, ID, 4242); /* the copies are good */
    pybox_watch_free(&w);
    arm_fails(&w, CG "/v1-custom", proc, ID, 0);
    pybox_watch_free(&w);
    arm_fails(&w, CG "/v1-custom", proc, ID, -4242);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(failed_arm_then_free_and_use)
{
    pybox_watch_t w;
    arm_fails(&w, CG "/v1", PROC, OTHER_ID, 0);
    ck_assert_int_eq(pybox_watch_tick(&w, pybox_now_ms()), INT64_MAX);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, 0);
    ck_assert_uint_eq(r.vanished, 0);
    pybox_watch_free(&w);
    pybox_watch_free(&w);
    /* the same watcher can be armed afterwards */
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    pybox_watch_read(&w, &r);
    expect_v1(&r);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(init_and_free_without_arm)
{
    /* make sure 0-2 are open, whatever the runner was given */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1)
            ck_assert_int_eq(open("/dev/null", O_RDWR), fd);
    pybox_watch_t w;
    memset(&w, 0x55, sizeof w);
    pybox_watch_init(&w);
    ck_assert_int_eq(w.version, PYBOX_CG_NONE);
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        ck_assert_int_eq(w.fd[i], -1);
    ck_assert_ptr_null(w.samples);
    ck_assert_uint_eq(w.n_samples, 0);
    ck_assert_int_eq(w.interval_ms, PYBOX_WATCH_INTERVAL_MS);
    ck_assert_int_eq(w.pids_seen_max, -1);
    ck_assert(!w.have_last);
    ck_assert_int_eq(pybox_watch_tick(&w, 0), INT64_MAX);
    ck_assert_uint_eq(w.n_samples, 0);
    pybox_reading_t r;
    pybox_watch_sample(&w, 0, &r);
    ck_assert_uint_eq(r.valid, 0);
    ck_assert(!w.have_last);
    pybox_watch_free(&w);
    pybox_watch_free(&w);
    for (int fd = 0; fd <= 2; fd++)
        ck_assert_msg(fcntl(fd, F_GETFD) != -1, "fd %d was closed", fd);
}
END_TEST

/* How many descriptors this process has open. */
static int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

START_TEST(free_closes_every_file)
{
    const int before = count_open_fds();
    pybox_watch_t w;
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    ck_assert_int_eq(count_open_fds(), before + 8);
    /* arming again releases the first set */
    pybox_error_t err = {0};
    ck_assert_int_eq(locate_and_arm(&w, CG "/v2-cgroupfs", PROC, ID, FS_PID, &err), 0);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    ck_assert_int_eq(count_open_fds(), before + 7); /* v2: cpu.stat holds usage and throttling */
    int held[PYBOX_WATCH_FILES];
    int n = 0;
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        if (w.fd[i] >= 0)
            held[n++] = w.fd[i];
    ck_assert_int_eq(n, 7);
    pybox_watch_free(&w);
    ck_assert_int_eq(count_open_fds(), before);
    for (int i = 0; i < n; i++) {
        errno = 0;
        ck_assert_int_eq(fcntl(held[i], F_GETFD), -1);
        ck_assert_int_eq(errno, EBADF);
    }
    ck_assert_ptr_null(w.samples);
    ck_assert_int_eq(w.version, PYBOX_CG_NONE);
}
END_TEST

/* ---- the /proc/<pid>/cgroup fallback ---- */

START_TEST(proc_fallback_v1_custom_parent)
{
    pybox_watch_t w;
    /* the layout guesses do not find a tree under a custom parent */
    arm_fails(&w, CG "/v1-custom", PROC, ID, 0);
    pybox_watch_free(&w);

    arm_ok(&w, CG "/v1-custom", PROC, ID, 4242);
    ck_assert_int_eq(w.version, PYBOX_CG_V1);
    ck_assert_str_eq(w.where, CG "/v1-custom/memory/custom/parent/" ID);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS);
    ck_assert_int_eq(r.mem_now, 1576960);
    ck_assert_int_eq(r.mem_peak, 2101248);
    ck_assert_int_eq(r.oom_kills, 0);
    ck_assert_int_eq(r.pids_now, 4);
    ck_assert_int_eq(r.pids_peak, 9);
    ck_assert_int_eq(r.pids_refused, 0);
    ck_assert_int_eq(r.cpu_ns, 41000000);
    ck_assert_int_eq(r.periods, 2);
    ck_assert_int_eq(r.throttled, 1);
    ck_assert_int_eq(r.throttled_ns, 1500000);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(proc_fallback_v2)
{
    /* the id names no folder; the unified line of the proc file does */
    pybox_watch_t w;
    arm_fails(&w, CG "/v2-cgroupfs", PROC, OTHER_ID, 0);
    pybox_watch_free(&w);
    arm_ok(&w, CG "/v2-cgroupfs", PROC, OTHER_ID, 4444);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    ck_assert_str_eq(w.where, CG "/v2-cgroupfs/" V2_FS);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    expect_v2(&r);
    pybox_watch_free(&w);
}
END_TEST

/* On v2 where a box's cgroup is depends on the engine's cgroup driver and parent: it is
 * taken from the kernel's list for the box's PID 1 only, never from a layout, even where a
 * folder named after the box is there. */
START_TEST(v2_never_guessed)
{
    pybox_watch_t w;
    ck_assert(is_dir(CG "/v2-systemd/" V2_SD));
    arm_fails(&w, CG "/v2-systemd", PROC, ID, 0);
    pybox_watch_free(&w);
    ck_assert(is_dir(CG "/v2-cgroupfs/" V2_FS));
    arm_fails(&w, CG "/v2-cgroupfs", PROC, ID, 0);
    pybox_watch_free(&w);
    /* a PID 1 elsewhere is followed there */
    arm_ok(&w, CG "/v2-cgroupfs", PROC, OTHER_ID, FS_PID);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(proc_fallback_refuses_climbing)
{
    /* every path in the file would reach a real cgroup folder if ".." were followed */
    ck_assert(is_dir(CG "/v1-custom/memory/../../v1/memory/docker/" ID));
    ck_assert(is_dir(CG "/v1-custom/pids/../../v1/pids/docker/" ID));
    ck_assert(is_dir(CG "/v1-custom/cpu,cpuacct/custom/../../../v1/cpu/docker/" ID));
    ck_assert(is_dir(CG "/v1-custom/../v2-cgroupfs/docker/" ID));
    pybox_watch_t w;
    arm_fails(&w, CG "/v1-custom", PROC, ID, 4343);
    pybox_watch_free(&w);
}
END_TEST

/* ---- missing files ---- */

START_TEST(missing_files_v1)
{
    const char *root = copy_tree("v1");
    remove_at(root, V1_PIDS "/pids.peak");
    remove_at(root, V1_MEM "/memory.oom_control");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_PIDS_PEAK | PYBOX_RD_OOM_KILLS));
    /* missing from the start is not the same as vanished */
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.mem_now, 3710976);
    ck_assert_int_eq(r.pids_now, 2);
    ck_assert_int_eq(r.pids_refused, 6);
    ck_assert_int_eq(r.cpu_ns, 92451853);
    ck_assert_int_eq(w.samples[0].mem, 3710976);
    ck_assert_int_eq(w.samples[0].pids, 2);
    ck_assert_int_eq(w.samples[0].cpu_ns, 92451853);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(missing_sampled_files_are_minus_one)
{
    const char *root = copy_tree("v1");
    remove_at(root, V1_MEM "/memory.usage_in_bytes");
    remove_at(root, V1_PIDS "/pids.current");
    remove_at(root, V1_ACCT "/cpuacct.usage");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms + 5, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_MEM_NOW | PYBOX_RD_PIDS_NOW | PYBOX_RD_CPU));
    ck_assert_uint_eq(w.n_samples, 1);
    ck_assert_uint_eq(w.samples[0].t_ms, 5);
    ck_assert_int_eq(w.samples[0].mem, -1);
    ck_assert_int_eq(w.samples[0].pids, -1);
    ck_assert_int_eq(w.samples[0].cpu_ns, -1);
    ck_assert_int_eq(w.pids_seen_max, -1);
    ck_assert(w.have_last);
    ck_assert_int_eq(w.last.mem_peak, 5156864);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(missing_controller_folders_v1)
{
    /* no pids controller and no cpu controller: only the memory counters and usage remain */
    const char *root = copy_tree("v1");
    char p[PATH_MAX];
    remove_at(root, V1_PIDS "/pids.current");
    remove_at(root, V1_PIDS "/pids.peak");
    remove_at(root, V1_PIDS "/pids.events");
    path_in(p, root, V1_PIDS);
    ck_assert_int_eq(rmdir(p), 0);
    remove_at(root, V1_CPU "/cpu.stat");
    path_in(p, root, V1_CPU);
    ck_assert_int_eq(rmdir(p), 0);
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, PYBOX_RD_MEM_NOW | PYBOX_RD_MEM_PEAK | PYBOX_RD_OOM_KILLS | PYBOX_RD_CPU);
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.cpu_ns, 92451853);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(missing_files_v2)
{
    /* kernels before 5.19 have no memory.peak; pids.peak is newer still */
    const char *root = copy_tree("v2-systemd");
    remove_at(root, V2_SD "/memory.peak");
    remove_at(root, V2_SD "/pids.peak");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, SD_PID);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_MEM_PEAK | PYBOX_RD_PIDS_PEAK));
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.mem_now, 4268032);
    ck_assert_int_eq(r.cpu_ns, 699410000);
    pybox_watch_free(&w);

    /* without cpu.stat neither usage nor throttling is known */
    remove_at(root, V2_SD "/cpu.stat");
    arm_ok(&w, root, PROC, ID, SD_PID);
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(
        r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_MEM_PEAK | PYBOX_RD_PIDS_PEAK | PYBOX_RD_CPU | PYBOX_RD_THROTTLE));
    ck_assert_uint_eq(r.vanished, 0);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(empty_cgroup_folder)
{
    /* the folder is there but holds no counter file: found, and nothing is known */
    const char *root = copy_tree("v2-cgroupfs");
    static const char *const files[] = {"memory.current", "memory.peak", "memory.events", "pids.current",
                                        "pids.peak",      "pids.events", "cpu.stat"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[PATH_MAX];
        ck_assert_int_eq(pybox_fmt(rel, sizeof rel, "%s/%s", V2_FS, files[i]), 0);
        remove_at(root, rel);
    }
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, FS_PID);
    ck_assert_int_eq(w.version, PYBOX_CG_V2);
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms, &r);
    ck_assert_uint_eq(r.valid, 0);
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert(!w.have_last);
    ck_assert_uint_eq(w.n_samples, 1);
    ck_assert_int_eq(w.samples[0].mem, -1);
    ck_assert_int_eq(w.samples[0].pids, -1);
    ck_assert_int_eq(w.samples[0].cpu_ns, -1);
    pybox_watch_free(&w);
}
END_TEST

/* ---- malformed content ---- */

typedef struct {
    const char *tree; /* fixture tree to copy */
    const char *rel;  /* file to overwrite */
    const char *text;
    unsigned bad; /* the bits that must be unknown; every other bit stays valid */
} malformed_t;

#define OOM_HEAD "oom_kill_disable 0\nunder_oom 0\n"
#define V2_EVENTS_HEAD "low 0\nhigh 0\nmax 3\noom 1\n"

static const malformed_t malformed[] = {
    /* files holding one number */
    {"v1", V1_MEM "/memory.usage_in_bytes", "abc\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "12 34\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "-5\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "+5\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", " 5\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "4096", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "4096\n\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "4096\n8192\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "0x1000\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "99999999999999999999\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "9223372036854775808\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.usage_in_bytes", "123456789012345678901234567890123456789\n", PYBOX_RD_MEM_NOW},
    {"v1", V1_MEM "/memory.max_usage_in_bytes", "max\n", PYBOX_RD_MEM_PEAK},
    {"v1", V1_PIDS "/pids.current", "abc\n", PYBOX_RD_PIDS_NOW},
    {"v1", V1_PIDS "/pids.peak", "", PYBOX_RD_PIDS_PEAK},
    {"v1", V1_ACCT "/cpuacct.usage", "12 34\n", PYBOX_RD_CPU},
    {"v1", V1_ACCT "/cpuacct.usage", "-5\n", PYBOX_RD_CPU},
    /* keyed files */
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD, PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill \n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill abc\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill -1\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill 1 2\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD "oom_kill 99999999999999999999\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", OOM_HEAD " oom_kill 1\n", PYBOX_RD_OOM_KILLS},
    {"v1", V1_MEM "/memory.oom_control", "", PYBOX_RD_OOM_KILLS},
    {"v1", V1_PIDS "/pids.events", "max\n", PYBOX_RD_PIDS_REFUSED},
    {"v1", V1_PIDS "/pids.events", "max \n", PYBOX_RD_PIDS_REFUSED},
    {"v1", V1_PIDS "/pids.events", "maximum 3\n", PYBOX_RD_PIDS_REFUSED},
    {"v1", V1_PIDS "/pids.events", "max -1\n", PYBOX_RD_PIDS_REFUSED},
    {"v1", V1_PIDS "/pids.events", "", PYBOX_RD_PIDS_REFUSED},
    {"v1", V1_CPU "/cpu.stat", "nr_periods 14\nnr_throttled 9\nnr_bursts 0\n", PYBOX_RD_THROTTLE},
    {"v1", V1_CPU "/cpu.stat", "nr_throttled 9\nthrottled_time 364621629\n", PYBOX_RD_THROTTLE},
    {"v1", V1_CPU "/cpu.stat", "nr_periods 14\nnr_throttled x\nthrottled_time 364621629\n", PYBOX_RD_THROTTLE},
    {"v1", V1_CPU "/cpu.stat", "nr_periods 14\nnr_throttled 9\nthrottled_time \n", PYBOX_RD_THROTTLE},
    /* v2 */
    {"v2-cgroupfs", V2_FS "/memory.current", "abc\n", PYBOX_RD_MEM_NOW},
    {"v2-cgroupfs", V2_FS "/memory.peak", "99999999999999999999\n", PYBOX_RD_MEM_PEAK},
    {"v2-cgroupfs", V2_FS "/memory.events", V2_EVENTS_HEAD "oom_group_kill 0\n", PYBOX_RD_OOM_KILLS},
    {"v2-cgroupfs", V2_FS "/memory.events", V2_EVENTS_HEAD "oom_kill\noom_group_kill 0\n", PYBOX_RD_OOM_KILLS},
    {"v2-cgroupfs", V2_FS "/pids.events", "max\n", PYBOX_RD_PIDS_REFUSED},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "user_usec 600000\nnr_periods 14\nnr_throttled 9\nthrottled_usec 364621\n",
     PYBOX_RD_CPU},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "usage_usec abc\nnr_periods 14\nnr_throttled 9\nthrottled_usec 364621\n",
     PYBOX_RD_CPU},
    /* fits in int64 as microseconds but not as nanoseconds */
    {"v2-cgroupfs", V2_FS "/cpu.stat",
     "usage_usec 9223372036854775807\nnr_periods 14\nnr_throttled 9\nthrottled_usec 364621\n", PYBOX_RD_CPU},
    {"v2-cgroupfs", V2_FS "/cpu.stat",
     "usage_usec 9223372036854776\nnr_periods 14\nnr_throttled 9\nthrottled_usec 364621\n", PYBOX_RD_CPU},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "usage_usec 699410\nnr_periods 14\nnr_throttled 9\n", PYBOX_RD_THROTTLE},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "usage_usec 699410\nnr_throttled 9\nthrottled_usec 364621\n", PYBOX_RD_THROTTLE},
    {"v2-cgroupfs", V2_FS "/cpu.stat",
     "usage_usec 699410\nnr_periods 14\nnr_throttled 9\nthrottled_usec 9223372036854775807\n", PYBOX_RD_THROTTLE},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "", PYBOX_RD_CPU | PYBOX_RD_THROTTLE},
    {"v2-cgroupfs", V2_FS "/cpu.stat", "abc\n", PYBOX_RD_CPU | PYBOX_RD_THROTTLE},
};

START_TEST(malformed_content)
{
    const malformed_t *m = &malformed[_i];
    const char *root = copy_tree(m->tree);
    write_at(root, m->rel, m->text);
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, strcmp(m->tree, "v2-cgroupfs") == 0 ? FS_PID : 0);
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms, &r);
    ck_assert_msg(r.valid == (ALL_BITS & ~m->bad), "case %d (%s): valid 0x%x, expected 0x%x", _i, m->rel, r.valid,
                  ALL_BITS & ~m->bad);
    ck_assert_uint_eq(r.vanished, 0);
    if (m->bad & PYBOX_RD_MEM_NOW)
        ck_assert_int_eq(w.samples[0].mem, -1);
    if (m->bad & PYBOX_RD_PIDS_NOW)
        ck_assert_int_eq(w.samples[0].pids, -1);
    if (m->bad & PYBOX_RD_CPU)
        ck_assert_int_eq(w.samples[0].cpu_ns, -1);
    pybox_watch_free(&w);
}
END_TEST

/* ---- a file that cannot be read any more ----
 * When a cgroup is removed, the kernel fails reads of its already open files with
 * ENODEV; the watcher then marks those fields vanished (the integration tests see
 * that on a real box). A regular filesystem keeps serving the old content of an open
 * file after it is deleted, so here a read is made to fail another way: the
 * descriptor is replaced by a folder's (EISDIR) or a pipe's (ESPIPE). */

START_TEST(read_failure_leaves_field_unknown)
{
    const char *root = copy_tree("v2-systemd");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, SD_PID);
    pybox_reading_t r;
    pybox_watch_read(&w, &r);
    expect_v2(&r);

    make_unreadable(fd_of(&w, root, V2_SD "/memory.current"));
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)PYBOX_RD_MEM_NOW);
    ck_assert_uint_eq(r.vanished, 0); /* a failed read is not taken for a vanished cgroup */
    ck_assert_int_eq(r.mem_peak, 134217728);
    ck_assert_int_eq(r.cpu_ns, 699410000);

    /* cpu.stat through a pipe: usage and throttling both unknown */
    int cpu = fd_of(&w, root, V2_SD "/cpu.stat");
    ck_assert_int_ge(cpu, 0);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    ck_assert_int_eq(pybox_write_all(pfd[1], "usage_usec 1\n", 13), 0);
    ck_assert_int_eq(dup2(pfd[0], cpu), cpu);
    close(pfd[0]);
    close(pfd[1]);
    pybox_watch_read(&w, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_MEM_NOW | PYBOX_RD_CPU | PYBOX_RD_THROTTLE));
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.pids_now, 1);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(read_failure_v1)
{
    const char *root = copy_tree("v1");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    make_unreadable(fd_of(&w, root, V1_PIDS "/pids.current"));
    make_unreadable(fd_of(&w, root, V1_CPU "/cpu.stat"));
    pybox_reading_t r;
    pybox_watch_sample(&w, w.armed_at_ms, &r);
    ck_assert_uint_eq(r.valid, ALL_BITS & ~(unsigned)(PYBOX_RD_PIDS_NOW | PYBOX_RD_THROTTLE));
    ck_assert_uint_eq(r.vanished, 0);
    ck_assert_int_eq(r.pids_peak, 7);
    ck_assert_int_eq(r.cpu_ns, 92451853);
    ck_assert_int_eq(w.samples[0].pids, -1);
    ck_assert_int_eq(w.pids_seen_max, -1);
    pybox_watch_free(&w);
}
END_TEST

/* ---- sampling ---- */

START_TEST(tick_schedule)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    const int64_t t0 = w.armed_at_ms;
    ck_assert_int_eq(w.next_ms, t0);
    ck_assert_int_eq(w.interval_ms, PYBOX_WATCH_INTERVAL_MS);
    /* due at once */
    ck_assert_int_eq(pybox_watch_tick(&w, t0), PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.n_samples, 1);
    ck_assert_uint_eq(w.samples[0].t_ms, 0);
    /* not due yet: no sample, the time left */
    ck_assert_int_eq(pybox_watch_tick(&w, t0 + 10), PYBOX_WATCH_INTERVAL_MS - 10);
    ck_assert_int_eq(pybox_watch_tick(&w, t0 + PYBOX_WATCH_INTERVAL_MS - 1), 1);
    ck_assert_uint_eq(w.n_samples, 1);
    /* due exactly */
    ck_assert_int_eq(pybox_watch_tick(&w, t0 + PYBOX_WATCH_INTERVAL_MS), PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.n_samples, 2);
    ck_assert_uint_eq(w.samples[1].t_ms, PYBOX_WATCH_INTERVAL_MS);
    /* late: one sample now, the next a full interval later */
    ck_assert_int_eq(pybox_watch_tick(&w, t0 + 175), PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.n_samples, 3);
    ck_assert_uint_eq(w.samples[2].t_ms, 175);
    ck_assert_int_eq(pybox_watch_tick(&w, t0 + 200), 175 + PYBOX_WATCH_INTERVAL_MS - 200);
    ck_assert_uint_eq(w.n_samples, 3);
    for (size_t i = 0; i < w.n_samples; i++) {
        ck_assert_int_eq(w.samples[i].mem, 3710976);
        ck_assert_int_eq(w.samples[i].pids, 2);
        ck_assert_int_eq(w.samples[i].cpu_ns, 92451853);
    }
    ck_assert(w.have_last);
    expect_v1(&w.last);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(sample_times_relative_to_arming)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v2-systemd", PROC, ID, SD_PID);
    const int64_t t0 = w.armed_at_ms;
    pybox_reading_t r;
    pybox_watch_sample(&w, t0 + 1234, &r);
    expect_v2(&r);
    ck_assert_uint_eq(w.n_samples, 1);
    ck_assert_uint_eq(w.samples[0].t_ms, 1234);
    ck_assert_int_eq(w.samples[0].mem, 4268032);
    ck_assert_int_eq(w.samples[0].pids, 1);
    ck_assert_int_eq(w.samples[0].cpu_ns, 699410000);
    /* an explicit sample does not move the tick schedule */
    ck_assert_int_eq(w.next_ms, t0);
    /* a time before arming is clamped to 0; a huge one to the largest t_ms */
    pybox_watch_sample(&w, t0 - 5, &r);
    ck_assert_uint_eq(w.samples[1].t_ms, 0);
    pybox_watch_sample(&w, t0 + INT64_C(10000000000), &r);
    ck_assert_uint_eq(w.samples[2].t_ms, UINT32_MAX);
    ck_assert_uint_eq(w.n_samples, 3);
    pybox_watch_free(&w);
}
END_TEST

static void expect_increasing(const pybox_watch_t *w)
{
    for (size_t i = 1; i < w->n_samples; i++)
        ck_assert_msg(w->samples[i - 1].t_ms < w->samples[i].t_ms, "t_ms not increasing at %zu: %u then %u", i,
                      (unsigned)w->samples[i - 1].t_ms, (unsigned)w->samples[i].t_ms);
}

START_TEST(thinning_when_full)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    const int64_t t0 = w.armed_at_ms;
    int64_t now = t0;
    for (int i = 0; i < PYBOX_WATCH_SAMPLES_MAX; i++) {
        ck_assert_int_eq(pybox_watch_tick(&w, now), PYBOX_WATCH_INTERVAL_MS);
        now += PYBOX_WATCH_INTERVAL_MS;
    }
    ck_assert_uint_eq(w.n_samples, PYBOX_WATCH_SAMPLES_MAX);
    ck_assert_int_eq(w.interval_ms, PYBOX_WATCH_INTERVAL_MS);
    expect_increasing(&w);

    /* one more: every other sample is kept, then the new one; half as often from now on */
    ck_assert_int_eq(pybox_watch_tick(&w, now), 2 * PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.n_samples, PYBOX_WATCH_SAMPLES_MAX / 2 + 1);
    ck_assert_int_eq(w.interval_ms, 2 * PYBOX_WATCH_INTERVAL_MS);
    for (size_t k = 0; k < PYBOX_WATCH_SAMPLES_MAX / 2; k++)
        ck_assert_uint_eq(w.samples[k].t_ms, k * 2 * PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.samples[PYBOX_WATCH_SAMPLES_MAX / 2].t_ms, (uint32_t)(now - t0));
    expect_increasing(&w);
    ck_assert_uint_eq(w.samples[0].t_ms, 0); /* the start stays covered */

    /* fill again at the new pace: thinned a second time */
    while (w.n_samples < PYBOX_WATCH_SAMPLES_MAX) {
        now += w.interval_ms;
        pybox_watch_tick(&w, now);
    }
    expect_increasing(&w);
    now += w.interval_ms;
    ck_assert_int_eq(pybox_watch_tick(&w, now), 4 * PYBOX_WATCH_INTERVAL_MS);
    ck_assert_uint_eq(w.n_samples, PYBOX_WATCH_SAMPLES_MAX / 2 + 1);
    ck_assert_int_eq(w.interval_ms, 4 * PYBOX_WATCH_INTERVAL_MS);
    expect_increasing(&w);
    ck_assert_uint_eq(w.samples[0].t_ms, 0);
    ck_assert_uint_eq(w.samples[w.n_samples - 1].t_ms, (uint32_t)(now - t0));
    for (size_t i = 0; i < w.n_samples; i++)
        ck_assert_int_eq(w.samples[i].mem, 3710976);
    pybox_watch_free(&w);
}
END_TEST

/* A tick and the final reading within one millisecond are one sample, the later: the
 * receipt's rows never repeat a time. */
START_TEST(readings_in_one_millisecond_are_one_sample)
{
    pybox_watch_t w;
    arm_ok(&w, CG "/v1", PROC, ID, 0);
    const int64_t t0 = w.armed_at_ms;
    pybox_reading_t r;
    pybox_watch_tick(&w, t0);
    pybox_watch_tick(&w, t0 + PYBOX_WATCH_INTERVAL_MS);
    pybox_watch_sample(&w, t0 + PYBOX_WATCH_INTERVAL_MS, &r);
    ck_assert_uint_eq(w.n_samples, 2);
    expect_increasing(&w);
    ck_assert_uint_eq(w.samples[1].t_ms, PYBOX_WATCH_INTERVAL_MS);
    pybox_watch_sample(&w, t0 + PYBOX_WATCH_INTERVAL_MS + 1, &r);
    ck_assert_uint_eq(w.n_samples, 3);
    expect_increasing(&w);
    pybox_watch_free(&w);
}
END_TEST

START_TEST(last_and_pids_seen_max)
{
    const char *root = copy_tree("v1");
    pybox_watch_t w;
    arm_ok(&w, root, PROC, ID, 0);
    const int64_t t0 = w.armed_at_ms;
    ck_assert(!w.have_last);
    ck_assert_int_eq(w.pids_seen_max, -1);
    pybox_reading_t r;

    pybox_watch_sample(&w, t0, &r);
    ck_assert(w.have_last);
    ck_assert_int_eq(w.last.pids_now, 2);
    ck_assert_int_eq(w.pids_seen_max, 2);

    write_at(root, V1_PIDS "/pids.current", "5\n");
    write_at(root, V1_MEM "/memory.usage_in_bytes", "4194304\n");
    pybox_watch_sample(&w, t0 + 50, &r);
    ck_assert_int_eq(w.last.pids_now, 5);
    ck_assert_int_eq(w.last.mem_now, 4194304);
    ck_assert_int_eq(w.pids_seen_max, 5);

    write_at(root, V1_PIDS "/pids.current", "3\n");
    pybox_watch_sample(&w, t0 + 100, &r);
    ck_assert_int_eq(w.last.pids_now, 3);
    ck_assert_int_eq(w.pids_seen_max, 5); /* the maximum, not the latest */

    ck_assert_uint_eq(w.n_samples, 3);
    ck_assert_int_eq(w.samples[0].pids, 2);
    ck_assert_int_eq(w.samples[1].pids, 5);
    ck_assert_int_eq(w.samples[2].pids, 3);
    ck_assert_int_eq(w.samples[0].mem, 3710976);
    ck_assert_int_eq(w.samples[1].mem, 4194304);

    /* an unreadable count is unknown: -1 in the series, the maximum unchanged */
    write_at(root, V1_PIDS "/pids.current", "abc\n");
    pybox_watch_sample(&w, t0 + 150, &r);
    ck_assert_int_eq(w.samples[3].pids, -1);
    ck_assert_int_eq(w.pids_seen_max, 5);
    ck_assert_uint_eq(w.last.valid, ALL_BITS & ~(unsigned)PYBOX_RD_PIDS_NOW);
    ck_assert_int_eq(w.last.mem_now, 4194304);

    /* a reading where nothing is known does not replace the last one */
    for (int i = 0; i < PYBOX_WATCH_FILES; i++)
        if (w.fd[i] >= 0)
            make_unreadable(w.fd[i]);
    pybox_watch_sample(&w, t0 + 200, &r);
    ck_assert_uint_eq(r.valid, 0);
    ck_assert(w.have_last);
    ck_assert_uint_eq(w.last.valid, ALL_BITS & ~(unsigned)PYBOX_RD_PIDS_NOW);
    ck_assert_int_eq(w.last.mem_now, 4194304);
    ck_assert_uint_eq(w.n_samples, 5);
    ck_assert_uint_eq(w.samples[4].t_ms, 200);
    ck_assert_int_eq(w.samples[4].mem, -1);
    ck_assert_int_eq(w.samples[4].pids, -1);
    ck_assert_int_eq(w.samples[4].cpu_ns, -1);
    expect_increasing(&w);
    pybox_watch_free(&w);
}
END_TEST

Suite *suite_watch(void)
{
    Suite *s = suite_create("watch");

    TCase *find = tcase_create("find");
    tcase_add_unchecked_fixture(find, case_setup, case_teardown);
    tcase_add_checked_fixture(find, setup, teardown);
    tcase_set_timeout(find, 10);
    tcase_add_test(find, v1_separate_controllers);
    tcase_add_test(find, v1_combined_cpu_cpuacct);
    tcase_add_test(find, readings_in_one_millisecond_are_one_sample);
    tcase_add_test(find, v2_systemd_driver);
    tcase_add_test(find, v2_cgroupfs_driver);
    tcase_add_test(find, largest_values);
    tcase_add_test(find, root_from_environment);
    tcase_add_test(find, proc_fallback_v1_custom_parent);
    tcase_add_test(find, proc_fallback_v2);
    tcase_add_test(find, v2_never_guessed);
    tcase_add_test(find, proc_fallback_refuses_climbing);
    suite_add_tcase(s, find);

    TCase *arm = tcase_create("arm");
    tcase_add_unchecked_fixture(arm, case_setup, case_teardown);
    tcase_add_checked_fixture(arm, setup, teardown);
    tcase_set_timeout(arm, 10);
    tcase_add_test(arm, arm_absent_id);
    tcase_add_test(arm, arm_bad_id);
    tcase_add_test(arm, arm_nothing_found_anywhere);
    tcase_add_test(arm, failed_arm_then_free_and_use);
    tcase_add_test(arm, init_and_free_without_arm);
    tcase_add_test(arm, free_closes_every_file);
    suite_add_tcase(s, arm);

    TCase *rd = tcase_create("read");
    tcase_add_unchecked_fixture(rd, case_setup, case_teardown);
    tcase_add_checked_fixture(rd, setup, teardown);
    tcase_set_timeout(rd, 10);
    tcase_add_test(rd, missing_files_v1);
    tcase_add_test(rd, missing_sampled_files_are_minus_one);
    tcase_add_test(rd, missing_controller_folders_v1);
    tcase_add_test(rd, missing_files_v2);
    tcase_add_test(rd, empty_cgroup_folder);
    tcase_add_loop_test(rd, malformed_content, 0, (int)(sizeof malformed / sizeof malformed[0]));
    tcase_add_test(rd, read_failure_leaves_field_unknown);
    tcase_add_test(rd, read_failure_v1);
    suite_add_tcase(s, rd);

    TCase *sample = tcase_create("sample");
    tcase_add_unchecked_fixture(sample, case_setup, case_teardown);
    tcase_add_checked_fixture(sample, setup, teardown);
    tcase_set_timeout(sample, 20);
    tcase_add_test(sample, tick_schedule);
    tcase_add_test(sample, sample_times_relative_to_arming);
    tcase_add_test(sample, thinning_when_full);
    tcase_add_test(sample, last_and_pids_seen_max);
    suite_add_tcase(s, sample);

    return s;
}
