/* SPDX-License-Identifier: MIT */
/* The seccomp profile compiler (see seccomp.h). */
#include "seccomp.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../buf.h"
#include "../escape.h"
#include "../policy.h"
#include "../util.h"
#include "../version.h"

static void ctx_release(scmp_filter_ctx *c)
{
    if (*c != NULL)
        seccomp_release(*c);
}

static void json_release(cJSON **j)
{
    cJSON_Delete(*j);
}

/* "seccomp profile: <what>[ <value>]", the value escaped. */
static int bad(pybox_error_t *err, const char *what, const char *value)
{
    char shown[160] = "";
    if (value != NULL)
        pybox_escape_short(shown, sizeof shown, value, 120);
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seccomp profile: %s%s%s", what, value ? " " : "", shown);
}

/* Only the keys PyBox's compiler understands: anything else could be a restriction it
 * would silently drop. */
static int known_keys(const cJSON *obj, const char *const *keys, size_t n, const char *where, pybox_error_t *err)
{
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(c->string, keys[i]) == 0;
        if (!ok) {
            char msg[96];
            snprintf(msg, sizeof msg, "unknown key in %s:", where);
            return bad(err, msg, c->string);
        }
    }
    return 0;
}

static int errno_of(const cJSON *v, int fallback, pybox_error_t *err)
{
    if (v == NULL)
        return fallback;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4095 || v->valuedouble != (int)v->valuedouble)
        return bad(err, "errnoRet is not an errno number", NULL);
    return (int)v->valuedouble;
}

/* An action by name; errnum used for SCMP_ACT_ERRNO. 0 with *act set, or -1. */
static int action_of(const cJSON *v, int errnum, uint32_t *act, pybox_error_t *err)
{
    if (!cJSON_IsString(v))
        return bad(err, "an action is not a string", NULL);
    const char *s = v->valuestring;
    if (strcmp(s, "SCMP_ACT_ALLOW") == 0)
        *act = SCMP_ACT_ALLOW;
    else if (strcmp(s, "SCMP_ACT_ERRNO") == 0)
        *act = SCMP_ACT_ERRNO((uint32_t)errnum);
    else if (strcmp(s, "SCMP_ACT_KILL") == 0 || strcmp(s, "SCMP_ACT_KILL_THREAD") == 0)
        *act = SCMP_ACT_KILL;
    else if (strcmp(s, "SCMP_ACT_KILL_PROCESS") == 0)
        *act = SCMP_ACT_KILL_PROCESS;
    else
        return bad(err, "unknown action", s);
    return 0;
}

/* An object's action and the errno it returns (fallback when it names none), by their
 * keys. 0 with *errnum and *act set, or -1. */
static int errno_action(const cJSON *o, const char *errno_key, const char *action_key, int fallback, int *errnum,
                        uint32_t *act, pybox_error_t *err)
{
    *errnum = errno_of(cJSON_GetObjectItemCaseSensitive(o, errno_key), fallback, err);
    if (*errnum < 0)
        return -1;
    return action_of(cJSON_GetObjectItemCaseSensitive(o, action_key), *errnum, act, err);
}

static int op_of(const char *s, enum scmp_compare *op)
{
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {
        {"SCMP_CMP_NE", SCMP_CMP_NE},
        {"SCMP_CMP_LT", SCMP_CMP_LT},
        {"SCMP_CMP_LE", SCMP_CMP_LE},
        {"SCMP_CMP_EQ", SCMP_CMP_EQ},
        {"SCMP_CMP_GE", SCMP_CMP_GE},
        {"SCMP_CMP_GT", SCMP_CMP_GT},
        {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(s, ops[i].name) == 0) {
            *op = ops[i].op;
            return 0;
        }
    return -1;
}

static int u64_of(const cJSON *v, uint64_t *out)
{
    /* JSON numbers are doubles: exact only up to 2^53, enough for every flag and value
     * the profile compares (the largest is 0xffffffff). */
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

#define ARGS_MAX 6

static int conditions(const cJSON *args, struct scmp_arg_cmp *cmp, unsigned *n, pybox_error_t *err)
{
    *n = 0;
    if (args == NULL || cJSON_IsNull(args))
        return 0;
    if (!cJSON_IsArray(args))
        return bad(err, "args is not an array", NULL);
    const cJSON *a;
    cJSON_ArrayForEach (a, args) {
        static const char *const keys[] = {"index", "value", "valueTwo", "op"};
        if (!cJSON_IsObject(a) || *n >= ARGS_MAX)
            return bad(err, "an argument is not an object, or more than 6", NULL);
        if (known_keys(a, keys, 4, "an argument", err) < 0)
            return -1;
        uint64_t index = 0, value = 0, two = 0;
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(a, "op");
        enum scmp_compare cop;
        if (u64_of(cJSON_GetObjectItemCaseSensitive(a, "index"), &index) < 0 || index > 5)
            return bad(err, "an argument's index is not 0..5", NULL);
        if (u64_of(cJSON_GetObjectItemCaseSensitive(a, "value"), &value) < 0)
            return bad(err, "an argument's value is not a whole number", NULL);
        const cJSON *vt = cJSON_GetObjectItemCaseSensitive(a, "valueTwo");
        if (vt != NULL && u64_of(vt, &two) < 0)
            return bad(err, "an argument's valueTwo is not a whole number", NULL);
        if (!cJSON_IsString(op) || op_of(op->valuestring, &cop) < 0)
            return bad(err, "unknown operator", cJSON_IsString(op) ? op->valuestring : "(absent)");
        /* Docker's form: for SCMP_CMP_MASKED_EQ, value is the mask and valueTwo the
         * datum compared with the masked argument. */
        cmp[*n] = (struct scmp_arg_cmp){.arg = (unsigned)index, .op = cop, .datum_a = value, .datum_b = two};
        (*n)++;
    }
    return 0;
}

static int arch_listed(const cJSON *root, pybox_error_t *err)
{
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "archMap");
    const char *native = NULL;
    uint32_t a = seccomp_arch_native();
    if (a == SCMP_ARCH_X86_64)
        native = "SCMP_ARCH_X86_64";
    else if (a == SCMP_ARCH_AARCH64)
        native = "SCMP_ARCH_AARCH64";
    if (native == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "seccomp profile: this machine's architecture is not supported");
    const cJSON *m;
    cJSON_ArrayForEach (m, map) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "architecture");
        if (cJSON_IsString(name) && strcmp(name->valuestring, native) == 0)
            return 0;
    }
    return bad(err, "this machine's architecture is not in its archMap:", native);
}

/* One entry of "syscalls": every name resolved first (the unknown ones collected), then
 * one rule per name. */
static int add_entry(scmp_filter_ctx ctx, const cJSON *e, int def_errno, int *rules, pybox_buf_t *unknown,
                     pybox_error_t *err)
{
    static const char *const keys[] = {"names", "action", "args", "errnoRet", "comment"};
    if (!cJSON_IsObject(e))
        return bad(err, "a syscalls entry is not an object", NULL);
    if (known_keys(e, keys, sizeof keys / sizeof *keys, "a syscalls entry", err) < 0)
        return -1;
    int en;
    uint32_t act;
    if (errno_action(e, "errnoRet", "action", def_errno, &en, &act, err) < 0)
        return -1;
    struct scmp_arg_cmp cmp[ARGS_MAX];
    unsigned ncmp = 0;
    if (conditions(cJSON_GetObjectItemCaseSensitive(e, "args"), cmp, &ncmp, err) < 0)
        return -1;
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(e, "names");
    if (!cJSON_IsArray(names) || names->child == NULL)
        return bad(err, "a syscalls entry has no names", NULL);
    const cJSON *n;
    cJSON_ArrayForEach (n, names) {
        if (!cJSON_IsString(n))
            return bad(err, "a syscall name is not a string", NULL);
        int nr = seccomp_syscall_resolve_name(n->valuestring);
        if (nr == __NR_SCMP_ERROR) {
            pybox_buf_addf(unknown, "%s%s", unknown->len ? ", " : "", n->valuestring);
            continue;
        }
        if (unknown->len > 0)
            continue; /* the profile is refused anyway: just collect the names */
        int rc = seccomp_rule_add_exact_array(ctx, act, nr, ncmp, cmp);
        if (rc < 0) {
            char shown[96];
            pybox_escape_short(shown, sizeof shown, n->valuestring, 64);
            return pybox_error_set(err, PYBOX_ERR_USAGE, -rc, "seccomp profile: seccomp_rule_add(%s)", shown);
        }
        (*rules)++;
    }
    return 0;
}

/* The BPF program as libseccomp exports it: through a memory file, since this
 * libseccomp exports only to a descriptor. */
static int export_bpf(scmp_filter_ctx ctx, pybox_native_filter_t *out, pybox_error_t *err)
{
    _cleanup_close_ int fd = (int)syscall(SYS_memfd_create, "pybox-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "memfd_create(pybox-seccomp)");
    int rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, -rc, "seccomp_export_bpf");
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "seccomp_export_bpf: a program of %lld bytes",
                               (long long)size);
    out->insns = malloc((size_t)size);
    if (out->insns == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "malloc(%lld)", (long long)size);
    if (pread(fd, out->insns, (size_t)size, 0) != (ssize_t)size) {
        free(out->insns);
        out->insns = NULL;
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "reading the exported filter");
    }
    out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
    pybox_sha256_hex(out->insns, (size_t)size, out->sha256);
    return 0;
}

int pybox_native_filter_compile(const char *json, size_t len, pybox_native_filter_t *out, pybox_error_t *err)
{
    return pybox_native_filter_compile_as(json, len, PYBOX_FILTER_TREE, out, err);
}

int pybox_native_filter_compile_as(const char *json, size_t len, pybox_native_filter_form_t form,
                                   pybox_native_filter_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    __attribute__((cleanup(json_release))) cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seccomp profile: not a JSON object");
    static const char *const keys[] = {"comment", "defaultAction", "defaultErrnoRet", "archMap", "syscalls"};
    if (known_keys(root, keys, sizeof keys / sizeof *keys, "the profile", err) < 0)
        return -1;
    if (arch_listed(root, err) < 0)
        return -1;
    int def_errno;
    uint32_t def;
    if (errno_action(root, "defaultErrnoRet", "defaultAction", EPERM, &def_errno, &def, err) < 0)
        return -1;
    __attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = seccomp_init(def);
    if (ctx == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "seccomp_init");
    /* The loader sets no_new_privs itself; only the native architecture is in the filter,
     * so every other entry point (i386, x32) meets the bad-architecture action: kill. The
     * system calls are sorted into a binary tree (the same decisions as a list): the kernel
     * runs the filter once per system call number when it is loaded, to learn which ones it
     * always allows: 0.34 to 0.44 ms per box for a list of some 300, 0.15 ms for the tree. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, form == PYBOX_FILTER_TREE ? 2 : 1) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "seccomp_attr_set");
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "syscalls");
    if (!cJSON_IsArray(sys))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seccomp profile: no syscalls array");
    pybox_buf_t unknown;
    pybox_buf_init(&unknown, 4096);
    int rules = 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, sys) {
        if (add_entry(ctx, e, def_errno, &rules, &unknown, err) < 0) {
            pybox_buf_free(&unknown);
            return -1;
        }
    }
    if (unknown.len > 0) {
        int rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                 "seccomp profile: system calls unknown to libseccomp on this architecture: %s",
                                 unknown.data);
        pybox_buf_free(&unknown);
        return rc;
    }
    pybox_buf_free(&unknown);
    if (export_bpf(ctx, out, err) < 0)
        return -1;
    out->rules = rules;
    return 0;
}

void pybox_native_filter_free(pybox_native_filter_t *f)
{
    free(f->insns);
    memset(f, 0, sizeof *f);
}

/* ---- PyBox's own profile, compiled once per installation ---- */

/* How PyBox compiles a profile (pybox_native_filter_compile: actions, attributes,
 * conditions): raise it with any change there that could change a program, so that no
 * copy compiled the old way is read again. */
#define FILTER_COMPILER 2

/* What the compiled program depends on: the profile's text, PyBox's compiler (its version
 * and FILTER_COMPILER), libseccomp's version (its code generator) and the kernel and
 * architecture it was made for (libseccomp asks the running kernel which actions it
 * supports). A change in any of them is another name. */
static void default_key(const char *src, char out[65])
{
    char profile[65];
    pybox_sha256_hex(src, strlen(src), profile);
    const struct scmp_version *v = seccomp_version();
    struct utsname u;
    if (uname(&u) < 0)
        memset(&u, 0, sizeof u);
    pybox_buf_t b;
    pybox_buf_init(&b, 512);
    pybox_buf_addf(&b, "profile %s\npybox %s compiler %d\nlibseccomp %u.%u.%u\nkernel %s %s %s\n", profile,
                   PYBOX_VERSION, FILTER_COMPILER, v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0, u.release,
                   u.version, u.machine);
    pybox_sha256_hex(b.data, b.len, out);
    pybox_buf_free(&b);
}

/* The installation's compiled copy: the SHA-256 of the instructions (64 hex characters),
 * then the instructions. Used only when it is a regular file of its owner's, written by no one
 * else, of a whole number of instructions that match their digest; anything else (a
 * copy damaged on disk among them) is not used: the profile is compiled again and the
 * copy replaced. */
#define COPY_DIGEST 64

static int copy_read(const char *path, pybox_native_filter_t *out)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 022) != 0 ||
        sb.st_size <= COPY_DIGEST || (sb.st_size - COPY_DIGEST) % (off_t)sizeof(struct sock_filter) != 0 ||
        (sb.st_size - COPY_DIGEST) / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        return -1;
    size_t len = (size_t)sb.st_size - COPY_DIGEST;
    struct sock_filter *insns = malloc(len);
    char want[COPY_DIGEST + 1] = "", got[65];
    if (insns == NULL || pybox_read_exact(fd, want, COPY_DIGEST) < 0 || pybox_read_exact(fd, insns, len) < 0) {
        free(insns);
        return -1;
    }
    pybox_sha256_hex(insns, len, got);
    if (strcmp(want, got) != 0) {
        free(insns);
        return -1;
    }
    out->insns = insns;
    out->len = (unsigned short)(len / sizeof(struct sock_filter));
    out->rules = -1;
    memcpy(out->sha256, got, sizeof out->sha256);
    return 0;
}

/* Written whole and synced under a name of this process's, then renamed into place: a
 * reader sees the old copy, none or the whole new one. A copy that cannot be written is
 * no error: the next process compiles again. */
static void copy_write(const char *dir, const char *path, const pybox_native_filter_t *f)
{
    char tmp[PATH_MAX];
    if (pybox_fmt(tmp, sizeof tmp, "%s/.filter.%ld.tmp", dir, (long)getpid()) < 0)
        return;
    (void)unlink(tmp); /* one a process of this pid left when it was killed */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    bool ok = pybox_write_all(fd, f->sha256, COPY_DIGEST) == 0 &&
              pybox_write_all(fd, f->insns, f->len * sizeof *f->insns) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) < 0)
        unlink(tmp);
}

static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static bool default_done;
static pybox_native_filter_t default_filter;
static pybox_error_t default_err;
static int default_rc;

const pybox_native_filter_t *pybox_native_filter_default(const char *dir, pybox_error_t *err)
{
    pthread_mutex_lock(&default_mu);
    if (!default_done) {
        const char *src = pybox_policy_seccomp();
        char key[65], path[PATH_MAX] = "";
        if (dir != NULL && dir[0] != '\0') {
            default_key(src, key);
            if (pybox_fmt(path, sizeof path, "%s/%s.bpf", dir, key) < 0)
                path[0] = '\0';
        }
        if (path[0] == '\0' || copy_read(path, &default_filter) < 0) {
            default_rc = pybox_native_filter_compile(src, strlen(src), &default_filter, &default_err);
            if (default_rc == 0 && path[0] != '\0')
                copy_write(dir, path, &default_filter);
        }
        default_done = true;
    }
    pthread_mutex_unlock(&default_mu);
    if (default_rc < 0) {
        if (err != NULL && err->kind == PYBOX_ERR_NONE)
            *err = default_err;
        return NULL;
    }
    return &default_filter;
}

int pybox_native_filter_load(const pybox_native_filter_t *f)
{
    struct sock_fprog prog = {.len = f->len, .filter = f->insns};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return -errno;
    return 0;
}
