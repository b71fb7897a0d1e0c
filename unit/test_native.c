/* SPDX-License-Identifier: MIT */
/* Unit tests of the native sandbox core: the seccomp compiler, the parsers of the
 * kernel's texts, the cgroup file logic on fixture trees (v1 and v2), the verifier's
 * comparisons and the spec's checks. The real-kernel tests are tests/test_native.c. */
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/native/cgroup.h"
#include "../pybox/native/internal.h"
#include "../pybox/native/native.h"
#include "../pybox/native/parse.h"
#include "../pybox/native/sandbox.h"
#include "../pybox/native/seccomp.h"
#include "../pybox/native/verify.h"
#include "../pybox/policy.h"
#include "../pybox/systemd.h"
#include "suites.h"

/* ---- the seccomp compiler ---- */

static int count_names(void)
{
    const char *src = pybox_policy_seccomp();
    cJSON *j = cJSON_Parse(src);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItem(j, "syscalls"))
        n += cJSON_GetArraySize(cJSON_GetObjectItem(e, "names"));
    cJSON_Delete(j);
    return n;
}

START_TEST(seccomp_profile_compiles_whole)
{
    pybox_error_t err = {0};
    const pybox_native_filter_t *f = pybox_native_filter_default(NULL, &err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    /* Every name of every entry became a rule: none was unknown or dropped. */
    ck_assert_int_eq(f->rules, count_names());
    ck_assert_int_gt(f->len, 10);
    ck_assert_int_eq(strlen(f->sha256), 64);
}
END_TEST

START_TEST(seccomp_digest_is_stable)
{
    pybox_error_t err = {0};
    const char *src = pybox_policy_seccomp();
    pybox_native_filter_t a, b;
    ck_assert_int_eq(pybox_native_filter_compile(src, strlen(src), &a, &err), 0);
    ck_assert_int_eq(pybox_native_filter_compile(src, strlen(src), &b, &err), 0);
    ck_assert_str_eq(a.sha256, b.sha256);
    ck_assert_int_eq(a.len, b.len);
    ck_assert_mem_eq(a.insns, b.insns, a.len * sizeof *a.insns);
    const pybox_native_filter_t *d = pybox_native_filter_default(NULL, &err);
    ck_assert_str_eq(d->sha256, a.sha256);
    /* One rule less is another program. */
    const char *other = "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\"},"
                        "{\"architecture\":\"SCMP_ARCH_AARCH64\"}],\"syscalls\":[{\"names\":[\"read\"],"
                        "\"action\":\"SCMP_ACT_ALLOW\"}]}";
    pybox_native_filter_t c;
    ck_assert_int_eq(pybox_native_filter_compile(other, strlen(other), &c, &err), 0);
    ck_assert_str_ne(c.sha256, a.sha256);
    pybox_native_filter_free(&a);
    pybox_native_filter_free(&b);
    pybox_native_filter_free(&c);
}
END_TEST

/* A classic BPF program run over one system call's seccomp_data, as the kernel runs it:
 * its return value (the action), or ck fails on an instruction it does not know. */
static uint32_t bpf_run(const pybox_native_filter_t *f, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    const unsigned char *data = (const unsigned char *)d;
    for (unsigned pc = 0; pc < f->len; pc++) {
        const struct sock_filter *i = &f->insns[pc];
        uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
        switch (BPF_CLASS(i->code)) {
        case BPF_LD:
            if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
                ck_assert_uint_le(i->k + 4, sizeof *d);
                memcpy(&a, data + i->k, 4);
            } else if (i->code == (BPF_LD | BPF_IMM)) {
                a = i->k;
            } else if (i->code == (BPF_LD | BPF_MEM)) {
                a = mem[i->k % BPF_MEMWORDS];
            } else {
                ck_abort_msg("BPF load 0x%x", i->code);
            }
            break;
        case BPF_LDX:
            ck_assert_msg(i->code == (BPF_LDX | BPF_MEM) || i->code == (BPF_LDX | BPF_IMM), "BPF 0x%x", i->code);
            x = BPF_MODE(i->code) == BPF_MEM ? mem[i->k % BPF_MEMWORDS] : i->k;
            break;
        case BPF_ST:
            mem[i->k % BPF_MEMWORDS] = a;
            break;
        case BPF_STX:
            mem[i->k % BPF_MEMWORDS] = x;
            break;
        case BPF_ALU:
            switch (BPF_OP(i->code)) {
            case BPF_AND:
                a &= src;
                break;
            case BPF_OR:
                a |= src;
                break;
            case BPF_ADD:
                a += src;
                break;
            case BPF_SUB:
                a -= src;
                break;
            case BPF_LSH:
                a <<= src & 31;
                break;
            case BPF_RSH:
                a >>= src & 31;
                break;
            case BPF_NEG:
                a = -a;
                break;
            default:
                ck_abort_msg("BPF alu 0x%x", i->code);
            }
            break;
        case BPF_JMP:
            if (BPF_OP(i->code) == BPF_JA) {
                pc += i->k;
                break;
            }
            bool t = BPF_OP(i->code) == BPF_JEQ    ? a == src
                     : BPF_OP(i->code) == BPF_JGT  ? a > src
                     : BPF_OP(i->code) == BPF_JGE  ? a >= src
                     : BPF_OP(i->code) == BPF_JSET ? (a & src) != 0
                                                   : (ck_abort_msg("BPF jump 0x%x", i->code), false);
            pc += t ? i->jt : i->jf;
            break;
        case BPF_RET:
            return BPF_RVAL(i->code) == BPF_A ? a : i->k;
        case BPF_MISC:
            if (BPF_MISCOP(i->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        }
    }
    ck_abort_msg("BPF program ran off its end");
    return 0;
}

/* The argument values worth trying against a profile: 0, all ones, a bit above 32, and
 * for every value and valueTwo it compares with, the value, its neighbours and each of
 * its bits alone (a masked comparison's mask). At most max; returns how many. The
 * argument indexes it compares are set in *args (a bit each). */
static size_t profile_values(const char *profile, uint64_t *out, size_t max, unsigned *args)
{
    size_t n = 0;
#define ADD(x)                                                                                                         \
    do {                                                                                                               \
        uint64_t v_ = (x);                                                                                             \
        bool seen_ = false;                                                                                            \
        for (size_t k_ = 0; k_ < n; k_++)                                                                              \
            seen_ = seen_ || out[k_] == v_;                                                                            \
        if (!seen_) {                                                                                                  \
            ck_assert_uint_lt(n, max);                                                                                 \
            out[n++] = v_;                                                                                             \
        }                                                                                                              \
    } while (0)
    ADD(0);
    ADD(~0ULL);
    ADD(1ULL << 32);
    cJSON *prof = cJSON_Parse(profile);
    ck_assert_ptr_nonnull(prof);
    const cJSON *e, *a;
    *args = 0;
    cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(prof, "syscalls"))
        cJSON_ArrayForEach (a, cJSON_GetObjectItemCaseSensitive(e, "args")) {
            const cJSON *index = cJSON_GetObjectItemCaseSensitive(a, "index");
            ck_assert(cJSON_IsNumber(index) && index->valueint >= 0 && index->valueint < 6);
            *args |= 1U << index->valueint;
            for (int w = 0; w < 2; w++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, w == 0 ? "value" : "valueTwo");
                if (!cJSON_IsNumber(v))
                    continue;
                uint64_t x = (uint64_t)v->valuedouble;
                ADD(x);
                ADD(x + 1);
                ADD(x - 1);
                for (int b = 0; b < 64; b++)
                    if (x & (1ULL << b))
                        ADD(1ULL << b);
            }
        }
#undef ADD
    cJSON_Delete(prof);
    return n;
}

/* How many of the system calls tried (every number to 1023 as x86-64, with and without
 * x32's bit, as i386 and as aarch64, with every argument 0, and with each argument the
 * profile compares, and the last, as each of the profile's values) two filters decide
 * differently. */
static int decisions_differ(const pybox_native_filter_t *p, const pybox_native_filter_t *q)
{
    uint64_t values[256];
    unsigned compared = 0;
    size_t nv = profile_values(pybox_policy_seccomp(), values, sizeof values / sizeof *values, &compared);
    ck_assert_uint_ne(compared, 0);
    compared |= 1U << 5;
    static const uint32_t arches[] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64};
    int differ = 0;
    for (size_t ar = 0; ar < sizeof arches / sizeof *arches; ar++)
        for (int x32 = 0; x32 < 2; x32++)
            for (int nr = 0; nr < 1024; nr++)
                for (int arg = -1; arg < 6; arg++)
                    for (size_t v = 0; (arg < 0 || (compared & (1U << arg))) && v < (arg < 0 ? 1 : nv); v++) {
                        struct seccomp_data d = {.nr = nr | (x32 ? 0x40000000 : 0), .arch = arches[ar]};
                        if (arg >= 0)
                            d.args[arg] = values[v];
                        differ += bpf_run(p, &d) != bpf_run(q, &d);
                    }
    return differ;
}

START_TEST(seccomp_tree_decides_as_the_list)
{
    pybox_error_t err = {0};
    const char *src = pybox_policy_seccomp();
    pybox_native_filter_t tree, list, other;
    ck_assert_int_eq(pybox_native_filter_compile_as(src, strlen(src), PYBOX_FILTER_TREE, &tree, &err), 0);
    ck_assert_int_eq(pybox_native_filter_compile_as(src, strlen(src), PYBOX_FILTER_LIST, &list, &err), 0);
    ck_assert_str_ne(tree.sha256, list.sha256); /* two programs */
    ck_assert_int_eq(decisions_differ(&tree, &list), 0);
    /* and the comparison sees a difference: the profile with personality(0xffffffff) no
     * longer allowed, as a list, differs from the tree in exactly those calls */
    cJSON *prof = cJSON_Parse(src);
    ck_assert_ptr_nonnull(prof);
    int changed = 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(prof, "syscalls")) {
        cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(args, 0), "value");
        if (cJSON_IsNumber(v) && v->valuedouble == 4294967295.0) {
            cJSON_SetNumberValue(v, 4294967294.0);
            changed++;
        }
    }
    ck_assert_int_eq(changed, 1);
    char *text = cJSON_PrintUnformatted(prof);
    cJSON_Delete(prof);
    ck_assert_int_eq(pybox_native_filter_compile_as(text, strlen(text), PYBOX_FILTER_LIST, &other, &err), 0);
    free(text);
    ck_assert_int_gt(decisions_differ(&tree, &other), 0);
    pybox_native_filter_free(&tree);
    pybox_native_filter_free(&list);
    pybox_native_filter_free(&other);
}
END_TEST

/* The default filter as a new process makes it with the compiled copies' folder dir: its
 * rule count (-1: read from the copy) and digest. */
static void default_in_child(const char *dir, int *rules, char sha256[65])
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pybox_error_t err = {0};
        const pybox_native_filter_t *f = pybox_native_filter_default(dir, &err);
        char line[80];
        int n = snprintf(line, sizeof line, "%d %s", f ? f->rules : -2, f ? f->sha256 : "-");
        _exit(write(fds[1], line, (size_t)n) == n ? 0 : 1);
    }
    close(fds[1]);
    char line[80] = "";
    ck_assert_int_gt(read(fds[0], line, sizeof line - 1), 0);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(sscanf(line, "%d %64s", rules, sha256), 2);
}

/* The one copy in dir (its path into out): exactly one .bpf file and nothing else. */
static void the_copy(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        ck_assert_msg(strlen(e->d_name) == 68 && strcmp(e->d_name + 64, ".bpf") == 0, "%s", e->d_name);
        snprintf(out, len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    ck_assert_int_eq(n, 1);
}

START_TEST(seccomp_compiled_once_per_installation)
{
    char dir[] = "/tmp/pybox-unit-filters-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int rules;
    char made[65], again[65], path[PATH_MAX];
    /* the first process compiles and leaves its copy; the next reads it, the same program */
    default_in_child(dir, &rules, made);
    ck_assert_int_eq(rules, count_names());
    the_copy(dir, path, sizeof path);
    default_in_child(dir, &rules, again);
    ck_assert_int_eq(rules, -1);
    ck_assert_str_eq(again, made);
    /* a copy others may write is not used, and is replaced by the owner's own */
    ck_assert_int_eq(chmod(path, 0620), 0);
    default_in_child(dir, &rules, again);
    ck_assert_int_eq(rules, count_names());
    ck_assert_str_eq(again, made);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0600);
    /* nor one whose instructions do not match their digest (damaged on disk) */
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char byte;
    ck_assert_int_eq(pread(fd, &byte, 1, 64 + 3), 1);
    byte ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &byte, 1, 64 + 3), 1);
    close(fd);
    default_in_child(dir, &rules, again);
    ck_assert_int_eq(rules, count_names());
    ck_assert_str_eq(again, made);
    default_in_child(dir, &rules, again); /* and the copy written again is whole */
    ck_assert_int_eq(rules, -1);
    ck_assert_str_eq(again, made);
    /* nor is one that holds no whole number of instructions */
    ck_assert_int_eq(truncate(path, 12), 0);
    default_in_child(dir, &rules, again);
    ck_assert_int_eq(rules, count_names());
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_size % 8, 0);
    ck_assert_int_gt(sb.st_size, 12);
    /* nor a link to one */
    char real[PATH_MAX];
    snprintf(real, sizeof real, "%s/.real", dir);
    ck_assert_int_eq(rename(path, real), 0);
    ck_assert_int_eq(symlink(real, path), 0);
    default_in_child(dir, &rules, again);
    ck_assert_int_eq(rules, count_names());
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISREG(sb.st_mode));
    /* without a folder: compiled, nothing written */
    default_in_child(NULL, &rules, again);
    ck_assert_int_eq(rules, count_names());
    the_copy(dir, path, sizeof path);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(unlink(real), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static void refused(const char *json, const char *needle)
{
    pybox_error_t err = {0};
    pybox_native_filter_t f;
    ck_assert_int_eq(pybox_native_filter_compile(json, strlen(json), &f, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in '%s'", needle, err.msg);
}

#define ARCHES "\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\"},{\"architecture\":\"SCMP_ARCH_AARCH64\"}]"

START_TEST(seccomp_unknown_names_reported)
{
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"read\",\"no_such_call\","
            "\"write\",\"another_fake\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
            "no_such_call, another_fake");
}
END_TEST

START_TEST(seccomp_strict_form)
{
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"read\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}}]}",
            "unknown key in a syscalls entry: includes");
    refused("{\"defaultAction\":\"SCMP_ACT_TRACE\"," ARCHES ",\"syscalls\":[]}", "unknown action SCMP_ACT_TRACE");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"socket\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_SOMETIMES\"}]}]}",
            "unknown operator SCMP_CMP_SOMETIMES");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\"," ARCHES ",\"syscalls\":[{\"names\":[\"socket\"],"
            "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":7,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}",
            "index is not 0..5");
    refused("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_PPC\"}],"
            "\"syscalls\":[]}",
            "architecture is not in its archMap");
    refused("[1]", "not a JSON object");
}
END_TEST

/* Run fn in a child with no_new_privs and PyBox's filter loaded; its exit code. */
static int filtered(int (*fn)(void))
{
    pybox_error_t err = {0};
    const pybox_native_filter_t *f = pybox_native_filter_default(NULL, &err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || pybox_native_filter_load(f) < 0)
            _exit(99);
        _exit(fn());
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Each check returns its number when the filter did not do what the profile says. */
static int profile_in_force(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); /* arg 0 == 1: allowed */
    if (fd < 0)
        return 1;
    close(fd);
    errno = 0;
    if (socket(AF_NETLINK, SOCK_RAW, 0) >= 0 || errno != EPERM) /* arg 0 == 16: not listed */
        return 2;
    errno = 0;
    struct clone_args ca = {.flags = 0, .exit_signal = SIGCHLD};
    if (syscall(SYS_clone3, &ca, sizeof ca) >= 0 || errno != ENOSYS) /* its own errnoRet */
        return 3;
    errno = 0;
    if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) /* not listed */
        return 4;
    errno = 0;
    /* clone with a namespace flag: the masked comparison refuses it. */
    if (syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) >= 0 || errno != EPERM)
        return 5;
    if (personality(0xffffffff) < 0) /* query: allowed */
        return 6;
    errno = 0;
    if (personality(PER_LINUX32) >= 0 || errno != EPERM)
        return 7;
    pid_t child = fork(); /* clone without namespace flags: allowed */
    if (child < 0)
        return 8;
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    return 0;
}

START_TEST(seccomp_filter_in_force)
{
    ck_assert_int_eq(filtered(profile_in_force), 0);
}
END_TEST

/* ---- parsers ---- */

static const char status_fixture[] = "Name:\tpybox-init\n"
                                     "Umask:\t0022\n"
                                     "State:\tS (sleeping)\n"
                                     "Uid:\t0\t0\t0\t0\n"
                                     "Gid:\t0\t0\t0\t0\n"
                                     "Groups:\t \n"
                                     "CapInh:\t0000000000000000\n"
                                     "CapPrm:\t00000000000000e0\n"
                                     "CapEff:\t00000000000000e0\n"
                                     "CapBnd:\t00000000000000e0\n"
                                     "CapAmb:\t0000000000000000\n"
                                     "NoNewPrivs:\t1\n"
                                     "Seccomp:\t2\n"
                                     "Seccomp_filters:\t1\n"
                                     "Speculation_Store_Bypass:\tthread vulnerable\n";

START_TEST(parse_status)
{
    pybox_np_status_t st;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_status_parse(status_fixture, strlen(status_fixture), &st, &err), 0);
    ck_assert_uint_eq(st.have, 0xfffu);
    ck_assert_int_eq(st.umask, 022);
    ck_assert_int_eq(st.uid[0], 0);
    ck_assert_int_eq(st.ngroups, 0);
    ck_assert_uint_eq(st.cap_eff, 0xe0);
    ck_assert_uint_eq(st.cap_bnd, 0xe0);
    ck_assert_uint_eq(st.cap_inh, 0);
    ck_assert_int_eq(st.no_new_privs, 1);
    ck_assert_int_eq(st.seccomp, 2);
    ck_assert_int_eq(st.seccomp_filters, 1);
    const char prog[] = "Uid:\t200001\t200001\t200001\t200001\nGroups:\t5 7\nCapEff:\t000001ffffffffff\n";
    ck_assert_int_eq(pybox_np_status_parse(prog, strlen(prog), &st, &err), 0);
    ck_assert_int_eq(st.uid[3], 200001);
    ck_assert_int_eq(st.ngroups, 2);
    ck_assert_uint_eq(st.cap_eff, 0x1ffffffffffULL);
    ck_assert_uint_eq(st.have, PYBOX_NP_ST_UID | PYBOX_NP_ST_GROUPS | PYBOX_NP_ST_CAPEFF);
    /* Malformed: refused, never guessed. */
    const char *bad[] = {"Uid:\t0\t0\t0\n", "CapEff:\t0000000000000000000\n", "CapEff:\tzz\n", "Seccomp:\t2x\n",
                         "Uid:\t0 0 0 0\nUid:\t0 0 0 0\n", "NoNewPrivs:\t99999999999\n", "Umask:\t0028\n",
                         /* more digits than any mask (and than an int64_t holds: no overflow) */
                         "Umask:\t0111111111111111111111111111111111111111\n", "Umask:\t00022\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_t e = {0};
        ck_assert_msg(pybox_np_status_parse(bad[i], strlen(bad[i]), &st, &e) == -1, "accepted %s", bad[i]);
        ck_assert_int_eq(e.kind, PYBOX_ERR_PROTOCOL);
    }
}
END_TEST

static const char mountinfo_fixture[] =
    "412 380 254:1 /var/tmp/root / ro,nosuid,nodev,relatime - ext4 /dev/vda1 rw,errors=remount-ro\n"
    "413 412 0:61 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "414 412 0:62 / /dev ro,nosuid,noexec,relatime - tmpfs tmpfs ro,size=64k,nr_inodes=16,mode=755\n"
    "415 414 0:63 / /dev/shm rw,nosuid,nodev,noexec,relatime shared:7 - tmpfs tmpfs rw,size=16384k,mode=1777\n"
    "416 412 0:64 / /box/in\\040x ro,nosuid,nodev,noexec,relatime master:3 - ext4 /dev/vda1 rw\n";

START_TEST(parse_mountinfo)
{
    pybox_np_mount_t *m = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_mountinfo_parse(mountinfo_fixture, strlen(mountinfo_fixture), 16, &m, &n, &err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(m[0].id, 412);
    ck_assert_int_eq(m[0].parent, 380);
    ck_assert_uint_eq(m[0].major, 254);
    ck_assert_str_eq(m[0].root, "/var/tmp/root");
    ck_assert_str_eq(m[0].point, "/");
    ck_assert_uint_eq(m[0].flags, PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV);
    ck_assert_str_eq(m[0].fstype, "ext4");
    ck_assert(!m[0].propagates);
    ck_assert_uint_eq(m[1].flags, PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC);
    ck_assert_uint_eq(m[2].flags, PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NOEXEC);
    ck_assert(m[3].propagates);
    ck_assert(m[4].propagates);
    ck_assert_str_eq(m[4].point, "/box/in x");
    char v[32];
    ck_assert_int_eq(pybox_np_option(m[3].super, "size", v, sizeof v), 1);
    ck_assert_str_eq(v, "16384k");
    ck_assert_int_eq(pybox_np_option(m[3].super, "mode", v, sizeof v), 1);
    ck_assert_str_eq(v, "1777");
    ck_assert_int_eq(pybox_np_option(m[3].super, "uid", v, sizeof v), 0);
    ck_assert_int_eq(pybox_np_option(m[3].super, "rw", v, sizeof v), 1);
    ck_assert_int_eq(pybox_np_option("size=1234567890", "size", v, 4), -1);
    free(m);
    /* More mounts than allowed, and broken lines. */
    ck_assert_int_eq(pybox_np_mountinfo_parse(mountinfo_fixture, strlen(mountinfo_fixture), 4, &m, &n, &err), -1);
    const char *bad[] = {
        "1 2 3:4 / / rw - ext4 /dev/x rw",        /* no newline is fine, but: */
        "1 2 3:4 / / rw ext4 /dev/x rw\n",        /* no separator */
        "1 2 3 / / rw - ext4 /dev/x rw\n",        /* no minor */
        "1 2 3:4 /a\\09 / rw - ext4 /dev/x rw\n", /* a bad escape */
        "1 2 3:4 / / ro,rw - ext4 /dev/x rw\n",   /* ro and rw */
        "1 2 3:4 / / nosuid - ext4 /dev/x rw\n",  /* neither */
        "1 2 3:4 / / rw - ext4 /dev/x\n",         /* no super options */
        "x 2 3:4 / / rw - ext4 /dev/x rw\n",
    };
    pybox_error_t e0 = {0};
    ck_assert_int_eq(pybox_np_mountinfo_parse(bad[0], strlen(bad[0]), 4, &m, &n, &e0), 0);
    ck_assert_uint_eq(n, 1);
    free(m);
    for (size_t i = 1; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_t e = {0};
        ck_assert_msg(pybox_np_mountinfo_parse(bad[i], strlen(bad[i]), 4, &m, &n, &e) == -1, "accepted %s", bad[i]);
        ck_assert_ptr_null(m);
    }
}
END_TEST

/* A NUL byte in a field (the kernel writes none) would cut the field short as a string:
 * the line is refused, not read as a shorter one. */
START_TEST(parse_mountinfo_nul)
{
    static const char text[] = "1 2 3:4 / /proc rw - proc\0xyz proc rw\n";
    static const char point[] = "1 2 3:4 / /a\0b rw - proc proc rw\n";
    pybox_np_mount_t *m = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_mountinfo_parse(text, sizeof text - 1, 4, &m, &n, &err), -1);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(pybox_np_mountinfo_parse(point, sizeof point - 1, 4, &m, &n, &err), -1);
    ck_assert_ptr_null(m);
}
END_TEST

static const char limits_fixture[] = "Limit                     Soft Limit           Hard Limit           Units     \n"
                                     "Max cpu time              unlimited            unlimited            seconds   \n"
                                     "Max file size             67108864             67108864             bytes     \n"
                                     "Max core file size        0                    0                    bytes     \n"
                                     "Max open files            256                  256                  files     \n"
                                     "Max pending signals       1024                 1024                 signals   \n"
                                     "Max nice priority         0                    0                    \n";

START_TEST(parse_limits)
{
    int64_t s, h;
    pybox_error_t err = {0};
    size_t n = strlen(limits_fixture);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max open files", &s, &h, &err), 0);
    ck_assert_int_eq(s, 256);
    ck_assert_int_eq(h, 256);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max file size", &s, &h, &err), 0);
    ck_assert_int_eq(s, 67108864);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max cpu time", &s, &h, &err), 0);
    ck_assert_int_eq(s, -1);
    ck_assert_int_eq(h, -1);
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max nice priority", &s, &h, &err), 0);
    ck_assert_int_eq(h, 0);
    pybox_error_t e1 = {0};
    ck_assert_int_eq(pybox_np_limit_parse(limits_fixture, n, "Max open", &s, &h, &e1), -1);
    ck_assert_ptr_nonnull(strstr(e1.msg, "no line for Max open"));
    const char bad[] = "Max open files            25x                  256                  files\n";
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_limit_parse(bad, strlen(bad), "Max open files", &s, &h, &e2), -1);
}
END_TEST

START_TEST(parse_stat_and_single_values)
{
    /* A command name with spaces and parentheses: fields are counted after the last ')'. */
    const char st[] = "1 (py (x) 2) S 0 1 1 0 -1 4194560 96 0 0 0 0 0 0 0 20 -5 1 0 123 2367488 130 "
                      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    int64_t nice = 99, policy = 99;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_stat_parse(st, strlen(st), &nice, &policy, &err), 0);
    ck_assert_int_eq(nice, -5);
    ck_assert_int_eq(policy, 0);
    const char rt[] = "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 -2 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 1 1 0\n";
    ck_assert_int_eq(pybox_np_stat_parse(rt, strlen(rt), &nice, &policy, &err), 0);
    ck_assert_int_eq(policy, 1); /* SCHED_FIFO */
    pybox_error_t e1 = {0}, e2 = {0};
    ck_assert_int_eq(pybox_np_stat_parse("7 (x) S 1 2\n", 12, &nice, &policy, &e1), -1); /* too short */
    ck_assert_int_eq(e1.kind, PYBOX_ERR_PROTOCOL);
    ck_assert_int_eq(pybox_np_stat_parse("7 x S 1\n", 8, &nice, &policy, &e2), -1);
    int64_t v = 0;
    ck_assert_int_eq(pybox_np_signed("-1000\n", 6, &v, &err), 0);
    ck_assert_int_eq(v, -1000);
    ck_assert_int_eq(pybox_np_signed("1000", 4, &v, &err), 0);
    ck_assert_int_eq(v, 1000);
    pybox_error_t e3 = {0}, e4 = {0};
    ck_assert_int_eq(pybox_np_signed("-\n", 2, &v, &e3), -1);
    ck_assert_int_eq(pybox_np_signed("12a\n", 4, &v, &e4), -1);
    uint64_t h = 1;
    ck_assert_int_eq(pybox_np_hex("00040000\n", 9, &h, &err), 0);
    ck_assert_uint_eq(h, 0x40000);
    pybox_error_t e5 = {0};
    ck_assert_int_eq(pybox_np_hex("0004000g\n", 9, &h, &e5), -1);
}
END_TEST

START_TEST(parse_cgroup_membership)
{
    const char v1[] = "9:name=systemd:/\n8:pids:/pybox-x/abc\n4:memory:/pybox-x/abc\n2:cpu,cpuacct:/pybox-x/abc\n"
                      "0::/\n";
    char p[256];
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "memory", p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/pybox-x/abc");
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "cpuacct", p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/pybox-x/abc");
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), NULL, p, sizeof p, &err), 0);
    ck_assert_str_eq(p, "/");
    pybox_error_t e = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse(v1, strlen(v1), "cpus", p, sizeof p, &e), -1);
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_cgroup_parse("4:memory\n", 9, "memory", p, sizeof p, &e2), -1);
    ck_assert_int_eq(e2.kind, PYBOX_ERR_PROTOCOL);
}
END_TEST

START_TEST(parse_idmap)
{
    pybox_error_t err = {0};
    const char id[] = "         0          0 4294967295\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(id, strlen(id), &err), 1);
    const char other[] = "         0     100000      65536\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(other, strlen(other), &err), 0);
    const char two[] = "0 0 4294967295\n0 0 1\n";
    ck_assert_int_eq(pybox_np_idmap_is_identity(two, strlen(two), &err), 0);
    ck_assert_int_eq(pybox_np_idmap_is_identity("", 0, &err), 0);
    ck_assert_int_eq(pybox_np_idmap_is_identity("0 0\n", 4, &err), -1);
    /* a rootless box's: the user as root, the program's id its own, in either order */
    const int64_t want[2][3] = {{0, 1000, 1}, {198304, 198304, 1}};
    const char rl[] = "         0       1000          1\n    198304     198304          1\n";
    ck_assert_int_eq(pybox_np_idmap_is(rl, strlen(rl), want, 2, &err), 1);
    const char swapped[] = "198304 198304 1\n0 1000 1\n";
    ck_assert_int_eq(pybox_np_idmap_is(swapped, strlen(swapped), want, 2, &err), 1);
    const char more[] = "0 1000 1\n198304 198304 1\n1 100000 65536\n";
    ck_assert_int_eq(pybox_np_idmap_is(more, strlen(more), want, 2, &err), 0);
    const char wider[] = "0 1000 1\n198304 198304 2\n";
    ck_assert_int_eq(pybox_np_idmap_is(wider, strlen(wider), want, 2, &err), 0);
    const char twice[] = "0 1000 1\n0 1000 1\n";
    ck_assert_int_eq(pybox_np_idmap_is(twice, strlen(twice), want, 2, &err), 0);
    ck_assert_int_eq(pybox_np_idmap_is(id, strlen(id), want, 2, &err), 0);
}
END_TEST

START_TEST(parse_cgroup_files)
{
    int64_t v, q, per;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_cg_number("134217728\n", 10, &v, &err), 0);
    ck_assert_int_eq(v, 134217728);
    ck_assert_int_eq(pybox_np_cg_number("max\n", 4, &v, &err), 0);
    ck_assert_int_eq(v, -1);
    pybox_error_t e1 = {0};
    ck_assert_int_eq(pybox_np_cg_number("-1\n", 3, &v, &e1), -1);
    pybox_error_t e1b = {0};
    ck_assert_int_eq(pybox_np_cg_number("", 0, &v, &e1b), -1);
    const char oom[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    ck_assert_int_eq(pybox_np_cg_keyed(oom, strlen(oom), "oom_kill", &v, &err), 0);
    ck_assert_int_eq(v, 3);
    const char ev[] = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "oom", &v, &err), 0);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "max", &v, &err), 0);
    ck_assert_int_eq(v, 12);
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_np_cg_keyed(ev, strlen(ev), "oom_kil", &v, &e2), -1);
    ck_assert_int_eq(pybox_np_cg_cpu_max("50000 100000\n", 13, &q, &per, &err), 0);
    ck_assert_int_eq(q, 50000);
    ck_assert_int_eq(per, 100000);
    ck_assert_int_eq(pybox_np_cg_cpu_max("max 100000\n", 11, &q, &per, &err), 0);
    ck_assert_int_eq(q, -1);
    pybox_error_t e3 = {0};
    ck_assert_int_eq(pybox_np_cg_cpu_max("50000\n", 6, &q, &per, &e3), -1);
    /* cgroup.procs: a process id per line; an empty list is no process. */
    ck_assert_int_eq(pybox_np_cg_procs("", 0, &v, &err), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(pybox_np_cg_procs("4242\n17\n", 8, &v, &err), 0);
    ck_assert_int_eq(v, 2);
    ck_assert_int_eq(pybox_np_cg_procs("4242", 4, &v, &err), 0);
    ck_assert_int_eq(v, 1);
    static const char *const bad[] = {"\n", "0\n", "-3\n", "12 \n", "x\n", "1\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_error_t e4 = {0};
        ck_assert_msg(pybox_np_cg_procs(bad[i], strlen(bad[i]), &v, &e4) == -1, "taken: '%s'", bad[i]);
    }
    /* cgroup.events (v2): populated is one of its keys. */
    const char events[] = "populated 0\nfrozen 0\n";
    ck_assert_int_eq(pybox_np_cg_keyed(events, strlen(events), "populated", &v, &err), 0);
    ck_assert_int_eq(v, 0);
}
END_TEST

/* ---- cgroups on fixture trees ---- */

static char fixture[64];

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", fixture, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void get(const char *rel, char *buf, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", fixture, rel);
    FILE *f = fopen(p, "r");
    ck_assert_msg(f != NULL, "no %s", p);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void sub(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", fixture, rel);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void fixture_new(void)
{
    snprintf(fixture, sizeof fixture, "/tmp/pybox-native-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fixture));
}

static void fixture_end(void)
{
    unit_rm_tree(fixture);
}

#define LEAF "0123456789abcdef0123456789abcdef"

/* The fixture as a host: with systemd as its init (a folder standing for the mark
 * sd_booted looks for), or without. */
static pybox_native_cg_host_t host_of(bool systemd)
{
    char mark[256];
    snprintf(mark, sizeof mark, "%s/%s", fixture, systemd ? "run-systemd-system" : "no-such-mark");
    if (systemd)
        (void)mkdir(mark, 0755);
    pybox_native_cg_host_t h;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_native_cg_host(fixture, mark, &h, &err) == 0, "%s", err.msg);
    return h;
}

START_TEST(cgroup_v2_fixture)
{
    fixture_new();
    put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    pybox_error_t err = {0};
    int version = 0;
    ck_assert_int_eq(pybox_native_cg_detect(fixture, &version, &err), 0);
    ck_assert_int_eq(version, 2);
    /* As systemd leaves the root at boot: memory and pids only. */
    put("cgroup.subtree_control", "memory pids\n");
    pybox_native_cg_host_t h = host_of(false);
    ck_assert(!h.systemd);
    pybox_native_cgroup_t cg;
    ck_assert_int_eq(pybox_native_cg_paths(&h, "pybox-inst", LEAF, &cg, &err), 0);
    ck_assert_str_eq(cg.rel, "/pybox-inst/" LEAF);
    ck_assert(!cg.systemd);
    pybox_native_cg_limits_t want;
    pybox_native_cg_want(128LL << 20, 32, 500000000, &want);
    ck_assert_int_eq(want.cpu_quota_us, 50000);
    ck_assert_int_eq(pybox_native_cg_make(&cg, &want, &err), 0);
    char buf[128];
    /* Nobody else manages the tree: the controllers are enabled from the root down. */
    get("cgroup.subtree_control", buf, sizeof buf);
    ck_assert_str_eq(buf, "+memory +pids +cpu");
    get("pybox-inst/cgroup.subtree_control", buf, sizeof buf);
    ck_assert_str_eq(buf, "+memory +pids +cpu");
    get("pybox-inst/" LEAF "/memory.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "134217728");
    get("pybox-inst/" LEAF "/memory.swap.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "0");
    get("pybox-inst/" LEAF "/pids.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "32");
    get("pybox-inst/" LEAF "/cpu.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "50000 100000");
    /* A second box of the same name is refused. */
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_native_cg_make(&cg, &want, &e2), -1);
    ck_assert_int_eq(e2.errnum, EEXIST);
    /* The kernel saying something else is a difference, each one named. */
    put("pybox-inst/" LEAF "/memory.swap.max", "max\n");
    put("pybox-inst/" LEAF "/pids.max", "max\n");
    pybox_error_t e3 = {0};
    int checked = 0;
    ck_assert_int_eq(pybox_native_cg_check(&cg, &want, &checked, &e3), -1);
    ck_assert_int_eq(e3.kind, PYBOX_ERR_POLICY);
    ck_assert_int_eq(checked, 4);
    ck_assert_ptr_nonnull(strstr(e3.msg, "2 of 4"));
    ck_assert_ptr_nonnull(strstr(e3.msg, "memory.max (swap 0): spec 134217728, kernel -2"));
    ck_assert_ptr_nonnull(strstr(e3.msg, "pids.max: spec 32, kernel -1"));
    /* OOM kills from memory.events; membership written to cgroup.procs. */
    put("pybox-inst/" LEAF "/memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n");
    int64_t kills = -1;
    ck_assert_int_eq(pybox_native_cg_oom_kills(&cg, &kills, &err), 0);
    ck_assert_int_eq(kills, 2);
    ck_assert_int_eq(pybox_native_cg_attach(&cg, 4242, &err), 0);
    get("pybox-inst/" LEAF "/cgroup.procs", buf, sizeof buf);
    ck_assert_str_eq(buf, "4242");
    /* The box's end as the kernel counts it: cgroup.events, "populated" 0 or 1. */
    bool populated = false, empty = true;
    put("pybox-inst/" LEAF "/cgroup.events", "populated 1\nfrozen 0\n");
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &err), 0);
    ck_assert(populated);
    ck_assert_int_eq(pybox_native_cg_wait_empty(&cg, 0, &empty, &err), 0);
    ck_assert(!empty);
    put("pybox-inst/" LEAF "/cgroup.events", "populated 0\nfrozen 0\n");
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &err), 0);
    ck_assert(!populated);
    ck_assert_int_eq(pybox_native_cg_wait_empty(&cg, 0, &empty, &err), 0);
    ck_assert(empty);
    /* Without the key, or with a value that is not a count, nothing is concluded. */
    put("pybox-inst/" LEAF "/cgroup.events", "frozen 0\n");
    pybox_error_t e4 = {0};
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &e4), -1);
    ck_assert(populated);
    put("pybox-inst/" LEAF "/cgroup.events", "populated yes\n");
    pybox_error_t e5 = {0};
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &e5), -1);
    /* A leaf that is gone (systemd removed its scope as it emptied) holds nothing. */
    pybox_native_cgroup_t gone_cg = cg;
    ck_assert_int_eq(pybox_fmt(gone_cg.unified, sizeof gone_cg.unified, "%s/no-such-leaf", cg.unified), 0);
    populated = true;
    ck_assert_int_eq(pybox_native_cg_populated(&gone_cg, &populated, &err), 0);
    ck_assert(!populated);
    ck_assert_int_eq(pybox_native_cg_wait_empty(&gone_cg, 0, &empty, &err), 0);
    ck_assert(empty);
    fixture_end();
}
END_TEST

/* A folder on the way down that takes no controllers: refused with the folder named. */
START_TEST(cgroup_v2_enable_refused)
{
    fixture_new();
    put("cgroup.controllers", "cpu memory pids\n");
    sub("cgroup.subtree_control"); /* a folder: cannot be written */
    pybox_native_cg_host_t h = host_of(false);
    pybox_native_cgroup_t cg;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_native_cg_paths(&h, "pybox-inst", LEAF, &cg, &err), 0);
    pybox_native_cg_limits_t want;
    pybox_native_cg_want(128LL << 20, 32, 500000000, &want);
    ck_assert_int_eq(pybox_native_cg_make(&cg, &want, &err), -1);
    ck_assert_msg(
        strstr(err.msg, "cgroup v2: the memory, pids and cpu controllers cannot be enabled for the boxes in ") != NULL,
        "%s", err.msg);
    char p[256];
    snprintf(p, sizeof p, "%s/pybox-inst/" LEAF, fixture);
    ck_assert_int_eq(access(p, F_OK), -1); /* no leaf made */
    fixture_end();
}
END_TEST

/* v2 under systemd: the leaf sits in the box's own scope in pybox.slice; it is made only
 * once the box's process is in that scope, and only from a scope that systemd gave the
 * three controllers. */
START_TEST(cgroup_v2_systemd_scope)
{
    fixture_new();
    put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    put("cgroup.subtree_control", "memory pids\n");
    pybox_native_cg_host_t h = host_of(true);
    ck_assert(h.systemd);
    pybox_native_cgroup_t cg;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_native_cg_paths(&h, "pybox-inst", LEAF, &cg, &err), 0);
    ck_assert(cg.systemd);
    ck_assert_str_eq(cg.unit, "pybox-inst-" LEAF ".scope");
    ck_assert(pybox_sd_unit_name_ok(cg.unit, ".scope"));
    ck_assert(!pybox_sd_unit_name_ok("pybox-inst/x.scope", ".scope"));
    ck_assert(!pybox_sd_unit_name_ok(".scope", ".scope"));
    ck_assert(!pybox_sd_unit_name_ok("pybox.slice", ".scope"));
    ck_assert_str_eq(cg.rel, "/pybox.slice/pybox-inst-" LEAF ".scope/box");
    char p[512];
    snprintf(p, sizeof p, "%s/pybox.slice/pybox-inst-" LEAF ".scope", fixture);
    ck_assert_str_eq(cg.scope, p);
    snprintf(p, sizeof p, "%s/pybox.slice/pybox-inst-" LEAF ".scope/box", fixture);
    ck_assert_str_eq(cg.unified, p);
    pybox_native_cg_limits_t want;
    pybox_native_cg_want(128LL << 20, 32, 500000000, &want);
    /* Nothing is made beside systemd's slices. */
    pybox_error_t e1 = {0};
    ck_assert_int_eq(pybox_native_cg_make(&cg, &want, &e1), -1);
    snprintf(p, sizeof p, "%s/pybox-inst", fixture);
    ck_assert_int_eq(access(p, F_OK), -1);
    char buf[128];
    get("cgroup.subtree_control", buf, sizeof buf);
    ck_assert_str_eq(buf, "memory pids\n"); /* the root is systemd's: never written */
    /* A scope given memory and pids only (no delegation of cpu): refused, nothing made. */
    sub("pybox.slice");
    sub("pybox.slice/pybox-inst-" LEAF ".scope");
    put("pybox.slice/pybox-inst-" LEAF ".scope/cgroup.controllers", "memory pids\n");
    bool made = true;
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_native_cg_adopt(&cg, 4242, &want, &made, &e2), -1);
    ck_assert(!made);
    ck_assert_msg(strstr(e2.msg, "cgroup v2 under systemd: the box's scope pybox-inst-" LEAF
                                 ".scope was given the controllers \"memory pids\", not memory, pids and cpu") != NULL,
                  "%s", e2.msg);
    ck_assert_int_eq(access(cg.unified, F_OK), -1);
    /* Delegated: the leaf made, the process moved in, then the scope passes the
     * controllers on and the limits are written and read back. */
    put("pybox.slice/pybox-inst-" LEAF ".scope/cgroup.controllers", "cpuset cpu io memory pids\n");
    ck_assert_msg(pybox_native_cg_adopt(&cg, 4242, &want, &made, &err) == 0, "%s", err.msg);
    ck_assert(made);
    get("pybox.slice/pybox-inst-" LEAF ".scope/box/cgroup.procs", buf, sizeof buf);
    ck_assert_str_eq(buf, "4242");
    get("pybox.slice/pybox-inst-" LEAF ".scope/cgroup.subtree_control", buf, sizeof buf);
    ck_assert_str_eq(buf, "+memory +pids +cpu");
    get("pybox.slice/pybox-inst-" LEAF ".scope/box/memory.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "134217728");
    get("pybox.slice/pybox-inst-" LEAF ".scope/box/cpu.max", buf, sizeof buf);
    ck_assert_str_eq(buf, "50000 100000");
    get("cgroup.subtree_control", buf, sizeof buf);
    ck_assert_str_eq(buf, "memory pids\n");
    /* The installation's leftovers are its scopes that still hold PyBox's leaf. */
    sub("pybox.slice/pybox-inst-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.scope"); /* systemd's, emptied */
    sub("pybox.slice/pybox-other-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.scope");
    sub("pybox.slice/pybox-other-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.scope/box"); /* another installation's */
    sub("staging");
    char st[128];
    snprintf(st, sizeof st, "%s/staging", fixture);
    pybox_native_leftover_t *l = NULL;
    size_t n = 0;
    ck_assert_int_eq(pybox_native_leftovers(&h, "pybox-inst", st, &l, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(l[0].run_id, LEAF);
    ck_assert(l[0].cgroup && !l[0].staging);
    /* Removed: the leaf only (the fixture's files stand for the kernel's, so they go
     * first); the scope is systemd's. */
    const char *files[] = {"cgroup.procs", "memory.max", "memory.swap.max", "pids.max", "cpu.max"};
    for (size_t i = 0; i < 5; i++) {
        char f[PATH_MAX + 32];
        snprintf(f, sizeof f, "%s/%s", cg.unified, files[i]);
        ck_assert_int_eq(unlink(f), 0);
    }
    bool gone = false;
    ck_assert_int_eq(pybox_native_leftover_remove(&h, "pybox-inst", st, &l[0], 1500, &gone, &err), 0);
    ck_assert(gone);
    ck_assert_int_eq(access(cg.unified, F_OK), -1);
    ck_assert_int_eq(access(cg.scope, F_OK), 0);
    free(l);
    fixture_end();
}
END_TEST

START_TEST(cgroup_v2_without_controllers)
{
    fixture_new();
    /* This machine's unified mount: no controllers, so not usable. */
    put("cgroup.controllers", "\n");
    pybox_error_t err = {0};
    int version = 0;
    ck_assert_int_eq(pybox_native_cg_detect(fixture, &version, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "no usable cgroup hierarchy"));
    fixture_end();
}
END_TEST

START_TEST(cgroup_v1_fixture)
{
    fixture_new();
    sub("memory");
    put("memory/memory.memsw.limit_in_bytes", "9223372036854771712\n");
    sub("pids");
    sub("cpu,cpuacct");
    pybox_error_t err = {0};
    int version = 0;
    ck_assert_int_eq(pybox_native_cg_detect(fixture, &version, &err), 0);
    ck_assert_int_eq(version, 1);
    pybox_native_cgroup_t cg;
    pybox_native_cg_host_t h = host_of(true); /* systemd changes nothing on v1 */
    ck_assert(!h.systemd);
    ck_assert_int_eq(pybox_native_cg_paths(&h, "pybox-inst", LEAF, &cg, &err), 0);
    ck_assert_str_eq(cg.cpu, cg.cpuacct); /* mounted together: one folder */
    ck_assert_ptr_nonnull(strstr(cg.cpu, "/cpu,cpuacct/pybox-inst/" LEAF));
    pybox_native_cg_limits_t want;
    pybox_native_cg_want(64LL << 20, 16, 250000000, &want);
    ck_assert_int_eq(pybox_native_cg_make(&cg, &want, &err), 0);
    char buf[64];
    get("memory/pybox-inst/" LEAF "/memory.limit_in_bytes", buf, sizeof buf);
    ck_assert_str_eq(buf, "67108864");
    get("memory/pybox-inst/" LEAF "/memory.memsw.limit_in_bytes", buf, sizeof buf);
    ck_assert_str_eq(buf, "67108864");
    /* The TCP buffers, kept apart from memory by v1, bounded by the same limit. */
    get("memory/pybox-inst/" LEAF "/memory.kmem.tcp.limit_in_bytes", buf, sizeof buf);
    ck_assert_str_eq(buf, "67108864");
    get("cpu,cpuacct/pybox-inst/" LEAF "/cpu.cfs_quota_us", buf, sizeof buf);
    ck_assert_str_eq(buf, "25000");
    /* Swap beyond the memory limit is a difference. */
    put("memory/pybox-inst/" LEAF "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
    pybox_error_t e2 = {0};
    ck_assert_int_eq(pybox_native_cg_check(&cg, &want, NULL, &e2), -1);
    ck_assert_ptr_nonnull(strstr(e2.msg, "memory.limit_in_bytes = memsw: spec 67108864, kernel -2"));
    put("memory/pybox-inst/" LEAF "/memory.memsw.limit_in_bytes", "67108864\n");
    put("memory/pybox-inst/" LEAF "/memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n");
    pybox_error_t e3 = {0};
    ck_assert_int_eq(pybox_native_cg_check(&cg, &want, NULL, &e3), -1);
    ck_assert_ptr_nonnull(strstr(e3.msg, "memory.kmem.tcp.limit_in_bytes: spec 67108864, kernel -1"));
    put("memory/pybox-inst/" LEAF "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
    int64_t kills;
    ck_assert_int_eq(pybox_native_cg_oom_kills(&cg, &kills, &err), 0);
    ck_assert_int_eq(kills, 1);
    /* The box's end as the kernel counts it: v1 has no cgroup.events outside the unified
     * mount; every controller's cgroup.procs is empty. One process in one is enough. */
    bool populated = false, empty = false;
    put("memory/pybox-inst/" LEAF "/cgroup.procs", "");
    put("pids/pybox-inst/" LEAF "/cgroup.procs", "");
    put("cpu,cpuacct/pybox-inst/" LEAF "/cgroup.procs", "");
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &err), 0);
    ck_assert(!populated);
    ck_assert_int_eq(pybox_native_cg_wait_empty(&cg, 0, &empty, &err), 0);
    ck_assert(empty);
    put("pids/pybox-inst/" LEAF "/cgroup.procs", "4242\n");
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &err), 0);
    ck_assert(populated);
    ck_assert_int_eq(pybox_native_cg_wait_empty(&cg, 0, &empty, &err), 0);
    ck_assert(!empty);
    /* A list longer than a page is processes, whatever the rest says. */
    char many[8192];
    size_t at = 0;
    for (int pid = 1000; at + 8 < sizeof many; pid++)
        at += (size_t)snprintf(many + at, sizeof many - at, "%d\n", pid);
    put("pids/pybox-inst/" LEAF "/cgroup.procs", "");
    put("cpu,cpuacct/pybox-inst/" LEAF "/cgroup.procs", many);
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &err), 0);
    ck_assert(populated);
    put("cpu,cpuacct/pybox-inst/" LEAF "/cgroup.procs", "not a pid\n");
    pybox_error_t e4 = {0};
    ck_assert_int_eq(pybox_native_cg_populated(&cg, &populated, &e4), -1);
    fixture_end();
}
END_TEST

START_TEST(cgroup_limits_unlimited)
{
    pybox_native_cg_limits_t w;
    pybox_native_cg_want(0, 0, 0, &w);
    ck_assert_int_eq(w.memory_bytes, -1);
    ck_assert_int_eq(w.pids, -1);
    ck_assert_int_eq(w.cpu_quota_us, -1);
    pybox_native_cg_want(1, 1, 1, &w); /* the smallest quota the kernel takes */
    ck_assert_int_eq(w.cpu_quota_us, 1000);
}
END_TEST

START_TEST(leftovers_by_run_id_only)
{
    fixture_new();
    put("cgroup.controllers", "cpu memory pids\n");
    sub("pybox-inst");
    sub("pybox-inst/" LEAF);                            /* a leaf without staging: stale */
    sub("pybox-inst/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); /* a leaf whose staging is not expired */
    sub("pybox-inst/not-a-run-id");                     /* never touched */
    sub("staging");
    sub("staging/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    put("staging/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/expires-2000", "");
    sub("staging/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    put("staging/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/expires-1000", "");
    put("staging/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/junk", "x");
    sub("staging/.cccccccccccccccccccccccccccccccc.new"); /* caught half made: no expiry */
    sub("staging/somebody-else");
    char st[128];
    snprintf(st, sizeof st, "%s/staging", fixture);
    pybox_native_leftover_t *l = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    pybox_native_cg_host_t h = host_of(false);
    ck_assert_int_eq(pybox_native_leftovers(&h, "pybox-inst", st, &l, &n, &err), 0);
    ck_assert_uint_eq(n, 4);
    int removed = 0;
    for (size_t i = 0; i < n; i++) {
        bool gone = false;
        ck_assert_int_eq(pybox_native_leftover_remove(&h, "pybox-inst", st, &l[i], 1500, &gone, &err), 0);
        removed += gone;
        if (strcmp(l[i].run_id, LEAF) == 0) {
            ck_assert(l[i].cgroup && !l[i].staging && gone);
        } else if (l[i].run_id[0] == 'a') {
            ck_assert(l[i].cgroup && l[i].staging && !gone);
            ck_assert_int_eq(l[i].expires, 2000);
        } else if (l[i].run_id[0] == 'b') {
            ck_assert(!l[i].cgroup && l[i].staging && gone);
        } else {
            ck_assert(l[i].staging && l[i].expires == 0 && !gone);
        }
    }
    ck_assert_int_eq(removed, 2);
    free(l);
    char p[256];
    snprintf(p, sizeof p, "%s/pybox-inst/not-a-run-id", fixture);
    ck_assert_int_eq(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/staging/somebody-else", fixture);
    ck_assert_int_eq(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/staging/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", fixture);
    ck_assert_int_eq(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/staging/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", fixture);
    ck_assert_int_eq(access(p, F_OK), -1);
    fixture_end();
}
END_TEST

/* ---- the spec's checks ---- */

static const char *const test_env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL};

static void spec_ok(pybox_native_spec_t *s)
{
    /* A root filesystem shaped like an image's: only its layout is checked here. */
    sub("root");
    sub("root/pybox");
    sub("root/proc");
    sub("root/dev");
    sub("root/tmp");
    sub("root/box");
    sub("root/box/in");
    sub("root/box/out");
    put("root/pybox/init", "");
    char p[256];
    snprintf(p, sizeof p, "%s/root/pybox/init", fixture);
    ck_assert_int_eq(chmod(p, 0755), 0);
    sub("staging");
    static char root[128], staging[128];
    snprintf(root, sizeof root, "%s/root", fixture);
    snprintf(staging, sizeof staging, "%s/staging", fixture);
    memset(s, 0, sizeof *s);
    pybox_native_spec_defaults(s);
    s->rootfs = root;
    s->mount_in = true;
    s->out_bytes = 1 << 20;
    s->tmp_bytes = s->shm_bytes = 1 << 20;
    s->uid = 200001;
    s->timer_ms = 3000;
    s->memory_bytes = 128LL << 20;
    s->pids = 32;
    s->nano_cpus = 500000000;
    s->nofile = 256;
    s->fsize_bytes = 1 << 20;
    s->sigpending = 1024;
    s->cgroup_root = "/sys/fs/cgroup";
    s->cgroup_parent = "pybox-inst";
    s->name = LEAF;
    s->staging = staging;
    s->expires = 2000000000;
    s->env = test_env;
}

static void spec_refused(const pybox_native_spec_t *s, const char *needle)
{
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_native_spec_check(s, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in '%s'", needle, err.msg);
}

START_TEST(spec_checks)
{
    fixture_new();
    pybox_native_spec_t s, t;
    spec_ok(&s);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_native_spec_check(&s, &err) == 0, "%s", err.msg);
    t = s;
    t.rootfs = "relative/root";
    spec_refused(&t, "not a clean absolute path");
    t = s;
    char dotted[160];
    snprintf(dotted, sizeof dotted, "%s/../root", s.staging);
    t.rootfs = dotted;
    spec_refused(&t, "not a clean absolute path");
    t = s;
    t.rootfs = "/nonexistent-pybox-root";
    spec_refused(&t, "is not a folder");
    t = s;
    t.rootfs = s.staging; /* a folder, but no /pybox/init */
    spec_refused(&t, "no executable /pybox/init");
    t = s;
    t.name = "0123456789ABCDEF0123456789ABCDEF";
    spec_refused(&t, "not a run id");
    t.name = "../../../etc";
    spec_refused(&t, "not a run id");
    t = s;
    t.cgroup_parent = "../escape";
    spec_refused(&t, "cgroup parent");
    t.cgroup_parent = "/abs";
    spec_refused(&t, "cgroup parent");
    t = s;
    t.memory_bytes = 1 << 20;
    spec_refused(&t, "memory_bytes 1048576 is out of range");
    t = s;
    t.pids = 2;
    spec_refused(&t, "pids 2 is out of range");
    t = s;
    t.timer_ms = 0;
    spec_refused(&t, "timer_ms 0 is out of range");
    t = s;
    t.uid = 0; /* root only by the relaxation, never by a uid */
    spec_refused(&t, "uid 0 is out of range");
    t = s;
    t.nano_cpus = 1;
    spec_refused(&t, "nano_cpus");
    t = s;
    t.out_bytes = 1LL << 40;
    spec_refused(&t, "out_bytes");
    t = s;
    t.relax_cap = "CAP_EVERYTHING";
    spec_refused(&t, "not a capability");
    t = s;
    t.relax_unmask = "/proc/meminfo"; /* not one of the policy's masked paths */
    spec_refused(&t, "relax_unmask is not one of the policy's masked paths");
    t = s;
    static const char *const bad_env[] = {"NOEQUALS", NULL};
    t.env = bad_env;
    spec_refused(&t, "not NAME=value");
    t = s;
    t.relax_bind = "/tmp"; /* the root has no /host */
    spec_refused(&t, "/host");
    fixture_end();
}
END_TEST

/* ---- the verifier's comparisons ---- */

START_TEST(verify_status_each_check)
{
    pybox_np_status_t good;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_np_status_parse(status_fixture, strlen(status_fixture), &good, &err), 0);
    pybox_nv_t v;
    pybox_nv_init(&v);
    pybox_nv_status(&v, &good, 0, 0, 0xe0, true, true);
    ck_assert_int_eq(v.count, 0);
    ck_assert_int_gt(v.checked, 15);
    pybox_nv_free(&v);
    /* Each field changed alone is caught, and named. */
    static const struct {
        const char *name;
        size_t off;
        size_t size;
        uint64_t value;
    } bad[] = {
        {"CapEff", offsetof(pybox_np_status_t, cap_eff), 8, 0x1e0},
        {"CapPrm", offsetof(pybox_np_status_t, cap_prm), 8, 0xe1},
        {"CapBnd", offsetof(pybox_np_status_t, cap_bnd), 8, 0x1ffffffffffULL},
        {"CapInh", offsetof(pybox_np_status_t, cap_inh), 8, 0x20},
        {"CapAmb", offsetof(pybox_np_status_t, cap_amb), 8, 0x20},
        {"NoNewPrivs", offsetof(pybox_np_status_t, no_new_privs), sizeof(int), 0},
        {"Seccomp", offsetof(pybox_np_status_t, seccomp), sizeof(int), 0},
        {"Seccomp_filters", offsetof(pybox_np_status_t, seccomp_filters), sizeof(int), 2},
        {"effective uid", offsetof(pybox_np_status_t, uid) + 8, 8, 1000},
        {"saved gid", offsetof(pybox_np_status_t, gid) + 16, 8, 1000},
        {"supplementary groups", offsetof(pybox_np_status_t, ngroups), sizeof(int), 1},
        {"umask", offsetof(pybox_np_status_t, umask), 8, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pybox_np_status_t st = good;
        if (bad[i].size == 8)
            memcpy((char *)&st + bad[i].off, &bad[i].value, 8);
        else {
            int x = (int)bad[i].value;
            memcpy((char *)&st + bad[i].off, &x, sizeof x);
        }
        pybox_nv_init(&v);
        pybox_nv_status(&v, &st, 0, 0, 0xe0, true, true);
        ck_assert_msg(v.count == 1, "%s: %d differences", bad[i].name, v.count);
        ck_assert_msg(strstr(v.diffs.data, bad[i].name) != NULL, "%s not in %s", bad[i].name, v.diffs.data);
        pybox_nv_free(&v);
    }
    /* A status without its capability lines proves nothing. */
    pybox_np_status_t none;
    ck_assert_int_eq(pybox_np_status_parse("Name:\tx\n", 8, &none, &err), 0);
    pybox_nv_init(&v);
    pybox_nv_status(&v, &none, 0, 0, 0xe0, true, true);
    ck_assert_int_gt(v.count, 5);
    pybox_nv_free(&v);
}
END_TEST

static const char box_mounts[] =
    "103 50 254:0 / / ro,nosuid,nodev,relatime - ext4 /dev/vda rw\n"
    "104 103 0:53 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "105 103 0:54 / /dev ro,nosuid,noexec,relatime - tmpfs tmpfs rw,size=64k,nr_inodes=64,mode=755\n"
    "106 105 0:55 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=16384k\n"
    "107 104 0:54 /null /proc/keys ro,nosuid,noexec,relatime - tmpfs tmpfs rw,size=64k,nr_inodes=64,mode=755\n"
    "109 104 0:56 / /proc/acpi ro,nosuid,nodev,noexec,relatime - tmpfs tmpfs ro,size=4k,nr_inodes=4,mode=555\n"
    "113 104 0:53 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "114 103 0:57 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=16384k\n"
    "116 103 0:58 / /box/out rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=16384k,mode=700,uid=200001,"
    "gid=200001\n";

static int mounts_differences(const char *text, char *diffs, size_t len)
{
    pybox_np_mount_t *m = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_np_mountinfo_parse(text, strlen(text), 64, &m, &n, &err) == 0, "%s", err.msg);
    want_mount_t w[] = {
        {.point = "/", .flags = PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV},
        {.point = "/proc", .fstype = "proc", .flags = PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC},
        {.point = "/dev",
         .fstype = "tmpfs",
         .flags = PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NOEXEC,
         .size = "64k",
         .mode = "755"},
        {.point = "/dev/shm",
         .fstype = "tmpfs",
         .flags = PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC,
         .size = "16384k",
         .mode = "1777"},
        {.point = "/proc/keys", .flags = PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NOEXEC, .from_dev = true},
        {.point = "/proc/acpi",
         .fstype = "tmpfs",
         .flags = PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC,
         .size = "4k"},
        {.point = "/proc/sys",
         .fstype = "proc",
         .flags = PYBOX_NP_MNT_RO | PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC},
        {.point = "/tmp",
         .fstype = "tmpfs",
         .flags = PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC,
         .size = "16384k",
         .mode = "1777"},
        {.point = "/box/out",
         .fstype = "tmpfs",
         .flags = PYBOX_NP_MNT_NOSUID | PYBOX_NP_MNT_NODEV | PYBOX_NP_MNT_NOEXEC,
         .size = "16384k",
         .mode = "700",
         .uid = "200001",
         .gid = "200001"},
    };
    pybox_nv_t v;
    pybox_nv_init(&v);
    pybox_nv_mounts(&v, m, n, w, sizeof w / sizeof *w);
    int c = v.count;
    snprintf(diffs, len, "%s", v.diffs.data ? v.diffs.data : "");
    pybox_nv_free(&v);
    free(m);
    return c;
}

/* The fixture with one piece of text replaced. */
static void changed(const char *from, const char *to, char *out, size_t len)
{
    const char *p = strstr(box_mounts, from);
    ck_assert_ptr_nonnull(p);
    snprintf(out, len, "%.*s%s%s", (int)(p - box_mounts), box_mounts, to, p + strlen(from));
}

START_TEST(verify_mounts_each_check)
{
    char d[2048], t[4096];
    ck_assert_msg(mounts_differences(box_mounts, d, sizeof d) == 0, "%s", d);
    static const struct {
        const char *from, *to, *needle;
    } cases[] = {
        {"/ / ro,nosuid", "/ / rw,nosuid", "mount /: spec ro,nosuid,nodev, kernel rw,nosuid,nodev"},
        {"/tmp rw,nosuid,nodev,noexec", "/tmp rw,nosuid,nodev", "mount /tmp: spec rw,nosuid,nodev,noexec"},
        {"/tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=16384k",
         "/tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=32768k",
         "mount /tmp size: spec 16384k, kernel 32768k"},
        {"uid=200001,", "uid=200002,", "mount /box/out uid: spec 200001, kernel 200002"},
        {"/box/out rw", "/box/outx rw", "mount /box/outx: spec absent"},
        {"/proc/acpi ro", "/proc/acpi rw", "mount /proc/acpi"},
        {"0:54 /null /proc/keys", "254:0 /etc/shadow /proc/keys", "the box's /dev/null"},
        {"114 103 0:57 / /tmp rw,nosuid,nodev,noexec,relatime",
         "114 103 0:57 / /tmp rw,nosuid,nodev,noexec,relatime shared:1", "mount /tmp: spec private"},
        {"104 103 0:53 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n",
         "104 103 0:53 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
         "120 103 254:0 /home /mnt rw,relatime - ext4 /dev/vda rw\n",
         "mount /mnt: spec absent, kernel ext4 of /home"},
        {"/proc/sys ro,nosuid,nodev,noexec,relatime - proc", "/proc/sys ro,nosuid,nodev,noexec,relatime - sysfs",
         "mount /proc/sys type: spec proc, kernel sysfs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        changed(cases[i].from, cases[i].to, t, sizeof t);
        int c = mounts_differences(t, d, sizeof d);
        ck_assert_msg(c >= 1, "case %zu: no difference", i);
        ck_assert_msg(strstr(d, cases[i].needle) != NULL, "case %zu: '%s' not in '%s'", i, cases[i].needle, d);
    }
    /* A mount missing from the kernel's list. */
    changed("109 104 0:56 / /proc/acpi ro,nosuid,nodev,noexec,relatime - tmpfs tmpfs ro,size=4k,nr_inodes=4,mode=555\n",
            "", t, sizeof t);
    ck_assert_int_eq(mounts_differences(t, d, sizeof d), 1);
    ck_assert_ptr_nonnull(strstr(d, "mount /proc/acpi: spec present, kernel absent"));
}
END_TEST

/* The init's environment is the spec's, whole and in order: one entry more, less,
 * changed or moved is a difference. */
START_TEST(environment_checked)
{
    static const char *const env[] = {"PATH=/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL};
#define T(text) text, sizeof(text) - 1 /* with its NULs, without the literal's own */
    static const struct {
        int diffs;         /* the differences seen */
        const char *extra; /* relax_env */
        const char *text;  /* /proc/<pid>/environ */
        size_t len;
    } cases[] = {
        {0, NULL, T("PATH=/bin\0LANG=C.UTF-8\0HOME=/tmp\0")},
        {0, "X=1", T("PATH=/bin\0LANG=C.UTF-8\0HOME=/tmp\0X=1\0")},
        {1, NULL, T("PATH=/bin\0LANG=C.UTF-8\0HOME=/tmp\0X=1\0")},
        {1, NULL, T("PATH=/bin\0LANG=C.UTF-8\0")},
        {1, NULL, T("PATH=/bin\0LANG=C\0HOME=/tmp\0")},
        {1, NULL, T("LANG=C.UTF-8\0PATH=/bin\0HOME=/tmp\0")},
    };
#undef T
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pybox_nv_t v;
        pybox_nv_init(&v);
        pybox_nv_environ(&v, cases[i].text, cases[i].len, env, cases[i].extra);
        ck_assert_msg(v.count == cases[i].diffs, "case %zu: %d differences", i, v.count);
        ck_assert_int_eq(v.checked, 1);
        pybox_nv_free(&v);
    }
}
END_TEST

/* Capabilities are named by libcap's table, in the kernel's spelling only. */
START_TEST(capability_names)
{
    ck_assert_int_eq(pybox_native_cap_number("CAP_CHOWN"), 0);
    ck_assert_int_eq(pybox_native_cap_number("CAP_KILL"), 5);
    ck_assert_int_eq(pybox_native_cap_number("CAP_SYS_ADMIN"), 21);
    ck_assert_int_eq(pybox_native_cap_number("CAP_CHECKPOINT_RESTORE"), 40);
    static const char *const refused[] = {"cap_kill", "5", "CAP_CHOWN,CAP_KILL", "CAP_EVERYTHING", "", "all", "CAP_"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        ck_assert_msg(pybox_native_cap_number(refused[i]) == -1, "%s taken", refused[i]);
}
END_TEST

Suite *suite_native(void)
{
    Suite *s = suite_create("native");
    TCase *tc = tcase_create("seccomp");
    tcase_add_test(tc, seccomp_profile_compiles_whole);
    tcase_add_test(tc, capability_names);
    tcase_add_test(tc, environment_checked);
    tcase_add_test(tc, seccomp_digest_is_stable);
    tcase_add_test(tc, seccomp_compiled_once_per_installation);
    tcase_add_test(tc, seccomp_unknown_names_reported);
    tcase_add_test(tc, seccomp_strict_form);
    tcase_add_test(tc, seccomp_filter_in_force);
    suite_add_tcase(s, tc);
    /* Every decision of two filters, run through the test's own BPF interpreter: under
     * the sanitizers 3.5 s of CPU here, past Check's 4 s default on a busy machine. It is
     * no timing: its bound only catches a hang. */
    tc = tcase_create("seccomp-decisions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, seccomp_tree_decides_as_the_list);
    suite_add_tcase(s, tc);
    tc = tcase_create("parse");
    tcase_add_test(tc, parse_status);
    tcase_add_test(tc, parse_mountinfo);
    tcase_add_test(tc, parse_mountinfo_nul);
    tcase_add_test(tc, parse_limits);
    tcase_add_test(tc, parse_stat_and_single_values);
    tcase_add_test(tc, parse_cgroup_membership);
    tcase_add_test(tc, parse_idmap);
    tcase_add_test(tc, parse_cgroup_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("cgroup");
    tcase_add_test(tc, cgroup_v2_fixture);
    tcase_add_test(tc, cgroup_v2_enable_refused);
    tcase_add_test(tc, cgroup_v2_systemd_scope);
    tcase_add_test(tc, cgroup_v2_without_controllers);
    tcase_add_test(tc, cgroup_v1_fixture);
    tcase_add_test(tc, cgroup_limits_unlimited);
    tcase_add_test(tc, leftovers_by_run_id_only);
    suite_add_tcase(s, tc);
    tc = tcase_create("spec");
    tcase_add_test(tc, spec_checks);
    tcase_add_test(tc, verify_status_each_check);
    tcase_add_test(tc, verify_mounts_each_check);
    suite_add_tcase(s, tc);
    return s;
}
