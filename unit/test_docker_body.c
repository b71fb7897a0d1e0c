/* SPDX-License-Identifier: MIT */
/* Unit tests for the Docker box's create body and read-back check, and the seccomp profile (docker.h, policy.h). */
#include <check.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../guest/proto.h"
#include "../pybox/bounds.h"
#include "../pybox/buf.h"
#include "../pybox/docker/docker.h"
#include "../pybox/policy.h"
#include "../pybox/util.h"
#include "suites.h"

#ifndef PYBOX_FIXTURES
#error "PYBOX_FIXTURES (the fixture directory) must be defined by the build"
#endif

/* ---- helpers ---- */

/* The policy the recorded read-back was created from. */
static void fixture_policy(pybox_policy_t *p)
{
    pybox_policy_defaults(p);
    ck_assert_int_eq(pybox_strlcpy(p->image_id,
                                   "sha256:0f7d0080cbe62c085e8259af8a055581d48a56cb6c8143885265cfe819807aca",
                                   sizeof p->image_id),
                     0);
    ck_assert_int_eq(pybox_strlcpy(p->install_id, "00112233445566778899aabbccddeeff", sizeof p->install_id), 0);
    ck_assert_int_eq(pybox_strlcpy(p->run_id, "fixture0000000000000000000000000", sizeof p->run_id), 0);
    p->expires = 1800000000;
    p->program_uid = 200123;
}

static cJSON *load_json(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "cannot open the fixture %s", path);
    char *text = NULL;
    size_t len = 0;
    bool over = false;
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_read_bounded(fd, PYBOX_ENGINE_REPLY_MAX, &text, &len, &over, &err), 0);
    close(fd);
    ck_assert(!over);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_msg(j != NULL, "the fixture %s is not JSON", path);
    return j;
}

static cJSON *seccomp_opt(void)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_buf_puts(&b, "seccomp="), 0);
    ck_assert_int_eq(pybox_buf_puts(&b, pybox_policy_seccomp()), 0);
    cJSON *s = cJSON_CreateString(b.data);
    pybox_buf_free(&b);
    return s;
}

/* The engine's recorded read-back of a box created from fixture_policy(). The seccomp
 * profile is PyBox's own and changes with the repository while the recording does not,
 * so the recorded profile (HostConfig.SecurityOpt[1]) is replaced with the current one;
 * every other setting is compared exactly as the engine reported it. */
static cJSON *load_fixture(void)
{
    cJSON *j = load_json(PYBOX_FIXTURES "/inspect-created.json");
    cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "HostConfig");
    cJSON *secopt = cJSON_GetObjectItemCaseSensitive(host, "SecurityOpt");
    ck_assert(cJSON_IsArray(secopt));
    ck_assert_int_eq(cJSON_GetArraySize(secopt), 2);
    ck_assert_str_eq(cJSON_GetArrayItem(secopt, 0)->valuestring, "no-new-privileges");
    ck_assert_int_eq(strncmp(cJSON_GetArrayItem(secopt, 1)->valuestring, "seccomp=", 8), 0);
    ck_assert(cJSON_ReplaceItemInArray(secopt, 1, seccomp_opt()));
    return j;
}

static cJSON *obj_at(cJSON *root, const char *section)
{
    if (section == NULL)
        return root;
    cJSON *o = cJSON_GetObjectItemCaseSensitive(root, section);
    ck_assert_msg(cJSON_IsObject(o), "no section %s", section);
    return o;
}

/* Set section.key (section NULL: top level) to v, replacing or adding it. */
static void set_item(cJSON *root, const char *section, const char *key, cJSON *v)
{
    cJSON *o = obj_at(root, section);
    if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL)
        ck_assert(cJSON_ReplaceItemInObjectCaseSensitive(o, key, v));
    else
        ck_assert(cJSON_AddItemToObject(o, key, v));
}

static cJSON *strings(const char *a, const char *b)
{
    cJSON *arr = cJSON_CreateArray();
    if (a != NULL)
        cJSON_AddItemToArray(arr, cJSON_CreateString(a));
    if (b != NULL)
        cJSON_AddItemToArray(arr, cJSON_CreateString(b));
    return arr;
}

/* The init's four arguments. */
static cJSON *init_args(const char *timer, const char *uid, const char *wait, const char *life)
{
    cJSON *arr = strings(timer, uid);
    cJSON_AddItemToArray(arr, cJSON_CreateString(wait));
    cJSON_AddItemToArray(arr, cJSON_CreateString(life));
    return arr;
}

/* Verify a mutated read-back: it must fail as a policy error that names the setting,
 * with exactly that one difference. */
static void expect_caught(cJSON *inspect, const char *field, const char *what)
{
    pybox_policy_t p;
    fixture_policy(&p);
    pybox_error_t err = {0};
    int checked = 0;
    int rc = pybox_docker_verify(&p, inspect, &checked, &err);
    ck_assert_msg(rc == -1, "%s: not caught", what);
    ck_assert_msg(err.kind == PYBOX_ERR_POLICY, "%s: error kind %d", what, err.kind);
    char needle[128];
    ck_assert_int_eq(pybox_fmt(needle, sizeof needle, " %s: policy ", field), 0);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "%s: the message does not name %s: %s", what, field, err.msg);
    ck_assert_msg(strstr(err.msg, "differs from the policy in 1 of ") != NULL, "%s: not exactly one difference: %s",
                  what, err.msg);
    ck_assert_int_gt(checked, 40);
    cJSON_Delete(inspect);
}

/* ---- create body ---- */

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(v != NULL, "no %s", key);
    return v;
}

static void expect_number(const cJSON *o, const char *key, double want)
{
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    ck_assert_msg(v->valuedouble == want, "%s is %.0f, not %.0f", key, v->valuedouble, want);
}

static void expect_string(const cJSON *o, const char *key, const char *want)
{
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsString(v), "%s is not a string", key);
    ck_assert_str_eq(v->valuestring, want);
}

static bool array_has(const cJSON *a, const char *s)
{
    const cJSON *v;
    cJSON_ArrayForEach (v, a) {
        if (cJSON_IsString(v) && strcmp(v->valuestring, s) == 0)
            return true;
    }
    return false;
}

static void body_policy(pybox_policy_t *p)
{
    pybox_policy_defaults(p);
    ck_assert_int_eq(pybox_strlcpy(p->image_id,
                                   "sha256:0000000000000000000000000000000000000000000000000000000000000001",
                                   sizeof p->image_id),
                     0);
    ck_assert_int_eq(pybox_strlcpy(p->install_id, "ffeeddccbbaa99887766554433221100", sizeof p->install_id), 0);
    ck_assert_int_eq(pybox_strlcpy(p->run_id, "run0", sizeof p->run_id), 0);
    p->expires = 1234567890;
    p->program_uid = 200077;
    /* values other than the defaults, so each is seen to come from the policy */
    p->memory_bytes = 256LL * 1024 * 1024;
    p->pids = 50;
    p->nano_cpus = 1500000000LL;
    p->timeout_ms = 3500;
    p->box_timer_ms = 4500;
    p->tmp_bytes = 8LL * 1024 * 1024;
    p->nofile = 128;
    p->fsize_bytes = 1024 * 1024;
}

START_TEST(body_contents)
{
    pybox_policy_t p;
    body_policy(&p);
    cJSON *body = pybox_docker_body(&p);
    ck_assert_ptr_nonnull(body);

    expect_string(body, "Image", p.image_id);
    /* The box starts as root for its init, which runs the program as the run's own user. */
    expect_string(body, "User", "0:0");
    ck_assert(cJSON_IsTrue(get(body, "NetworkDisabled")));
    ck_assert(cJSON_IsFalse(get(body, "Tty")));
    const cJSON *entry = get(body, "Entrypoint");
    ck_assert_int_eq(cJSON_GetArraySize(entry), 5);
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 0)->valuestring, "/pybox/init");
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 1)->valuestring, "--timer-ms=4500");
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 2)->valuestring, "--program-uid=200077");
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 3)->valuestring, "--wait-ms=0");
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 4)->valuestring, "--life-ms=0");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(body, "Cmd");
    ck_assert(cmd == NULL || cJSON_GetArraySize(cmd) == 0); /* nothing the image could add */
    const cJSON *labels = get(body, "Labels");
    expect_string(labels, "pybox.install", "ffeeddccbbaa99887766554433221100");
    expect_string(labels, "pybox.run", "run0");
    expect_string(labels, "pybox.expires", "1234567890");
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(body, "Volumes"));

    const cJSON *h = get(body, "HostConfig");
    expect_string(h, "NetworkMode", "none");
    ck_assert(cJSON_IsTrue(get(h, "ReadonlyRootfs")));
    ck_assert(cJSON_IsFalse(get(h, "Privileged")));
    ck_assert(cJSON_IsFalse(get(h, "Init")));
    expect_number(h, "Memory", 256.0 * 1024 * 1024);
    expect_number(h, "MemorySwap", 256.0 * 1024 * 1024);
    expect_number(h, "PidsLimit", 50);
    expect_number(h, "NanoCpus", 1500000000.0);

    const cJSON *capdrop = get(h, "CapDrop");
    ck_assert_int_eq(cJSON_GetArraySize(capdrop), 1);
    ck_assert_str_eq(cJSON_GetArrayItem(capdrop, 0)->valuestring, "ALL");
    /* Only what the init needs: CAP_KILL to end the program, CAP_SETGID/CAP_SETUID to
     * start it as its own user (which leaves the program none). */
    const cJSON *capadd = get(h, "CapAdd");
    ck_assert_int_eq(cJSON_GetArraySize(capadd), 3);
    ck_assert_str_eq(cJSON_GetArrayItem(capadd, 0)->valuestring, "CAP_KILL");
    ck_assert_str_eq(cJSON_GetArrayItem(capadd, 1)->valuestring, "CAP_SETGID");
    ck_assert_str_eq(cJSON_GetArrayItem(capadd, 2)->valuestring, "CAP_SETUID");

    const cJSON *secopt = get(h, "SecurityOpt");
    ck_assert(array_has(secopt, "no-new-privileges"));
    cJSON *want_seccomp = seccomp_opt();
    ck_assert(array_has(secopt, want_seccomp->valuestring));
    cJSON_Delete(want_seccomp);

    const cJSON *tmpfs = get(h, "Tmpfs");
    ck_assert_int_eq(cJSON_GetArraySize(tmpfs), 1);
    const cJSON *tmp = get(tmpfs, "/tmp");
    ck_assert(cJSON_IsString(tmp));
    ck_assert_ptr_nonnull(strstr(tmp->valuestring, "noexec"));
    ck_assert_ptr_nonnull(strstr(tmp->valuestring, "nosuid"));
    ck_assert_ptr_nonnull(strstr(tmp->valuestring, "size=8388608"));

    const cJSON *ul = get(h, "Ulimits");
    static const struct {
        const char *name;
        double v;
    } want_ul[] = {{"nofile", 128}, {"fsize", 1024 * 1024}, {"core", 0}, {"sigpending", 1024}};
    for (size_t i = 0; i < sizeof want_ul / sizeof *want_ul; i++) {
        const cJSON *found = NULL, *u;
        cJSON_ArrayForEach (u, ul) {
            if (strcmp(get(u, "Name")->valuestring, want_ul[i].name) == 0)
                found = u;
        }
        ck_assert_msg(found != NULL, "no ulimit %s", want_ul[i].name);
        expect_number(found, "Soft", want_ul[i].v);
        expect_number(found, "Hard", want_ul[i].v);
    }

    expect_string(get(h, "LogConfig"), "Type", "none");
    /* nothing of the host goes in */
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "Binds"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "Mounts"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(body, "Mounts"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "Devices"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "VolumesFrom"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "PidMode"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "UsernsMode"));
    cJSON_Delete(body);
}
END_TEST

START_TEST(body_tamper_knob)
{
    pybox_policy_t p;
    body_policy(&p);
    cJSON *honest = pybox_docker_body(&p);
    p.tamper = "memory";
    cJSON *bad = pybox_docker_body(&p);
    ck_assert_ptr_nonnull(honest);
    ck_assert_ptr_nonnull(bad);
    ck_assert(!cJSON_Compare(honest, bad, 1));
    const cJSON *hh = get(honest, "HostConfig"), *bh = get(bad, "HostConfig");
    ck_assert_double_eq(get(hh, "Memory")->valuedouble, (double)p.memory_bytes);
    ck_assert_double_ne(get(bh, "Memory")->valuedouble, get(hh, "Memory")->valuedouble);
    /* only the memory settings differ */
    cJSON *bad_h = cJSON_Duplicate(bh, 1);
    cJSON_ReplaceItemInObjectCaseSensitive(bad_h, "Memory", cJSON_Duplicate(get(hh, "Memory"), 1));
    cJSON_ReplaceItemInObjectCaseSensitive(bad_h, "MemorySwap", cJSON_Duplicate(get(hh, "MemorySwap"), 1));
    ck_assert(cJSON_Compare(hh, bad_h, 1));
    cJSON_Delete(bad_h);
    cJSON_Delete(honest);
    cJSON_Delete(bad);

    /* an unknown knob changes nothing */
    p.tamper = NULL;
    honest = pybox_docker_body(&p);
    p.tamper = "no-such-setting";
    bad = pybox_docker_body(&p);
    ck_assert(cJSON_Compare(honest, bad, 1));
    cJSON_Delete(honest);
    cJSON_Delete(bad);
}
END_TEST

/* ---- the seccomp profile ---- */

static cJSON *seccomp_profile(void)
{
    const char *text = pybox_policy_seccomp();
    ck_assert_ptr_nonnull(text);
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(cJSON_IsObject(j), "the seccomp profile is not a JSON object");
    return j;
}

START_TEST(seccomp_default_denies)
{
    cJSON *j = seccomp_profile();
    const cJSON *def = get(j, "defaultAction");
    ck_assert(cJSON_IsString(def));
    ck_assert_msg(strncmp(def->valuestring, "SCMP_ACT_ERRNO", 14) == 0, "default action %s", def->valuestring);
    /* every rule either allows or fails with an errno: nothing traced, logged or notified */
    const cJSON *rule;
    cJSON_ArrayForEach (rule, get(j, "syscalls")) {
        const char *a = get(rule, "action")->valuestring;
        ck_assert_msg(strcmp(a, "SCMP_ACT_ALLOW") == 0 || strcmp(a, "SCMP_ACT_ERRNO") == 0, "action %s", a);
    }
    /* no 32-bit entry points */
    const cJSON *arch;
    cJSON_ArrayForEach (arch, get(j, "archMap")) {
        const char *name = get(arch, "architecture")->valuestring;
        ck_assert_msg(strcmp(name, "SCMP_ARCH_X86_64") == 0 || strcmp(name, "SCMP_ARCH_AARCH64") == 0, "arch %s", name);
        ck_assert_int_eq(cJSON_GetArraySize(get(arch, "subArchitectures")), 0);
    }
    /* the digest is of the exact text sent to the engine */
    char d[65];
    pybox_sha256_hex(pybox_policy_seccomp(), strlen(pybox_policy_seccomp()), d);
    ck_assert_str_eq(d, pybox_policy_seccomp_sha256());
    cJSON_Delete(j);
}
END_TEST

static bool allowed_anywhere(const cJSON *profile, const char *name)
{
    const cJSON *rule;
    cJSON_ArrayForEach (rule, get(profile, "syscalls")) {
        if (strcmp(get(rule, "action")->valuestring, "SCMP_ACT_ALLOW") == 0 && array_has(get(rule, "names"), name))
            return true;
    }
    return false;
}

START_TEST(seccomp_denies_dangerous)
{
    static const char *const denied[] = {
        "ptrace",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "mount",
        "umount2",
        "unshare",
        "setns",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "userfaultfd",
        "perf_event_open",
        "process_vm_readv",
        "process_vm_writev",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "open_by_handle_at",
        "pivot_root",
        "chroot",
        "reboot",
        "swapon",
        "swapoff",
        "syslog",
        "acct",
        "clock_settime",
        "settimeofday",
        "fsopen",
        "fsmount",
        "move_mount",
        "open_tree",
        "kcmp",
        "lookup_dcookie",
        "quotactl",
        "iopl",
        "ioperm",
    };
    cJSON *j = seccomp_profile();
    for (size_t i = 0; i < sizeof denied / sizeof *denied; i++)
        ck_assert_msg(!allowed_anywhere(j, denied[i]), "%s is allowed", denied[i]);
    /* a few the program needs, to show the check above can see allowed calls */
    ck_assert(allowed_anywhere(j, "read"));
    ck_assert(allowed_anywhere(j, "execve"));
    cJSON_Delete(j);
}
END_TEST

START_TEST(seccomp_socket_domains)
{
    cJSON *j = seccomp_profile();
    bool seen[3] = {false, false, false};
    const cJSON *rule;
    cJSON_ArrayForEach (rule, get(j, "syscalls")) {
        if (strcmp(get(rule, "action")->valuestring, "SCMP_ACT_ALLOW") != 0 || !array_has(get(rule, "names"), "socket"))
            continue;
        /* socket is allowed only under a condition on its first argument, the domain */
        ck_assert_int_eq(cJSON_GetArraySize(get(rule, "names")), 1);
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(rule, "args");
        ck_assert_msg(cJSON_GetArraySize(args) == 1, "socket allowed without a single condition");
        const cJSON *a = cJSON_GetArrayItem(args, 0);
        expect_number(a, "index", 0);
        expect_string(a, "op", "SCMP_CMP_EQ");
        double v = get(a, "value")->valuedouble;
        if (v == 1)
            seen[0] = true;
        else if (v == 2)
            seen[1] = true;
        else if (v == 10)
            seen[2] = true;
        else
            ck_abort_msg("socket allowed for domain %.0f", v);
    }
    ck_assert(seen[0] && seen[1] && seen[2]);
    cJSON_Delete(j);
}
END_TEST

START_TEST(seccomp_clone_without_namespaces)
{
    /* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
    const double ns_flags = (double)0x7E020000u;
    cJSON *j = seccomp_profile();
    const cJSON *rule;
    int clone_rules = 0;
    cJSON_ArrayForEach (rule, get(j, "syscalls")) {
        if (strcmp(get(rule, "action")->valuestring, "SCMP_ACT_ALLOW") != 0 || !array_has(get(rule, "names"), "clone"))
            continue;
        clone_rules++;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(rule, "args");
        ck_assert_int_eq(cJSON_GetArraySize(args), 1);
        const cJSON *a = cJSON_GetArrayItem(args, 0);
        expect_number(a, "index", 0);
        expect_string(a, "op", "SCMP_CMP_MASKED_EQ");
        expect_number(a, "value", ns_flags);
        expect_number(a, "valueTwo", 0);
    }
    ck_assert_int_eq(clone_rules, 1);
    ck_assert(!allowed_anywhere(j, "clone3")); /* its flags are out of seccomp's reach */
    cJSON_Delete(j);
}
END_TEST

/* ---- the read-back verifier ---- */

START_TEST(verify_recorded_readback)
{
    cJSON *inspect = load_fixture();
    pybox_policy_t p;
    fixture_policy(&p);
    pybox_error_t err = {0};
    int checked = 0;
    int rc = pybox_docker_verify(&p, inspect, &checked, &err);
    ck_assert_msg(rc == 0, "the recorded read-back fails: %s", err.msg);
    ck_assert_int_eq(err.kind, PYBOX_ERR_NONE);
    ck_assert_int_gt(checked, 40);

    /* the tamper knob changes the body sent, never what the read-back is held to */
    p.tamper = "memory";
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_docker_verify(&p, inspect, &checked, &err), 0);

    /* the same read-back against another policy fails */
    fixture_policy(&p);
    p.pids = 64;
    pybox_error_clear(&err);
    ck_assert_int_eq(pybox_docker_verify(&p, inspect, &checked, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_POLICY);
    ck_assert_ptr_nonnull(strstr(err.msg, "HostConfig.PidsLimit"));
    cJSON_Delete(inspect);
}
END_TEST

/* Test-only relaxations: each changes exactly its setting in the body, is named in the
 * relaxed list, and is held against the read-back like any other setting (so a
 * default box never passes for a relaxed one, nor the reverse). */
START_TEST(relaxations_named_and_held)
{
    static const struct {
        const char *name, *section, *key;
    } r[] = {
        {"program-root", NULL, "Entrypoint"},      {"writable-root", "HostConfig", "ReadonlyRootfs"},
        {"engine-caps", "HostConfig", "CapAdd"},   {"new-privileges", "HostConfig", "SecurityOpt"},
        {"seccomp", "HostConfig", "SecurityOpt"},  {"pids", "HostConfig", "PidsLimit"},
        {"memory", "HostConfig", "Memory"},        {"system-paths", "HostConfig", "MaskedPaths"},
        {"apparmor", "HostConfig", "SecurityOpt"},
    };
    ck_assert_uint_eq(pybox_policy_relax_bit("nope"), 0);
    cJSON *inspect = load_fixture();
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
        pybox_policy_t p;
        fixture_policy(&p);
        cJSON *plain = pybox_docker_body(&p);
        unsigned bit = pybox_policy_relax_bit(r[i].name);
        ck_assert_uint_ne(bit, 0);
        p.relax = bit;
        cJSON *relaxed = pybox_docker_body(&p);
        const cJSON *a = r[i].section ? get(get(plain, r[i].section), r[i].key) : get(plain, r[i].key);
        const cJSON *b = r[i].section ? get(get(relaxed, r[i].section), r[i].key) : get(relaxed, r[i].key);
        ck_assert_msg(!cJSON_Compare(a, b, 1), "%s: %s unchanged", r[i].name, r[i].key);
        char list[256];
        pybox_policy_relaxed(&p, list, sizeof list);
        ck_assert_str_eq(list, r[i].name);
        pybox_error_t err = {0};
        ck_assert_msg(pybox_docker_verify(&p, inspect, NULL, &err) == -1, "%s: a default box passed", r[i].name);
        ck_assert_int_eq(err.kind, PYBOX_ERR_POLICY);
        cJSON_Delete(plain);
        cJSON_Delete(relaxed);
    }
    /* The root program is uid 0 in the init's arguments, and only then; a shared uid is
     * the one every box had before boxes had users of their own. */
    pybox_policy_t p;
    fixture_policy(&p);
    p.relax = PYBOX_RELAX_PROGRAM_ROOT;
    cJSON *body = pybox_docker_body(&p);
    const cJSON *entry = get(body, "Entrypoint");
    ck_assert_int_eq(cJSON_GetArraySize(entry), 5);
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 2)->valuestring, "--program-uid=0");
    cJSON_Delete(body);
    fixture_policy(&p);
    p.relax = PYBOX_RELAX_SHARED_UID;
    body = pybox_docker_body(&p);
    entry = get(body, "Entrypoint");
    ck_assert_str_eq(cJSON_GetArrayItem(entry, 2)->valuestring, "--program-uid=65534");
    cJSON_Delete(body);
    /* A capability and the engine's socket are named too. */
    fixture_policy(&p);
    p.relax_cap = "CAP_NET_RAW";
    p.relax_socket = "/run/engine.sock";
    char list[256];
    pybox_policy_relaxed(&p, list, sizeof list);
    ck_assert_str_eq(list, "engine-socket,capability CAP_NET_RAW");
    body = pybox_docker_body(&p);
    ck_assert(array_has(get(get(body, "HostConfig"), "CapAdd"), "CAP_NET_RAW"));
    ck_assert(array_has(get(get(body, "HostConfig"), "Binds"), "/run/engine.sock:" PYBOX_RELAX_SOCKET_AT));
    cJSON_Delete(body);
    /* One masked path left as it is, the host's pressure files: that one alone leaves
     * MaskedPaths, it is named, and a box masking it does not pass for one that does not. */
    fixture_policy(&p);
    body = pybox_docker_body(&p);
    const cJSON *masked = get(get(body, "HostConfig"), "MaskedPaths");
    ck_assert(array_has(masked, "/proc/pressure"));
    int all = cJSON_GetArraySize(masked);
    cJSON_Delete(body);
    ck_assert(pybox_policy_is_masked_path("/proc/pressure"));
    ck_assert(!pybox_policy_is_masked_path("/proc/meminfo"));
    p.relax_unmask = "/proc/pressure";
    pybox_policy_relaxed(&p, list, sizeof list);
    ck_assert_str_eq(list, "unmasked /proc/pressure");
    body = pybox_docker_body(&p);
    masked = get(get(body, "HostConfig"), "MaskedPaths");
    ck_assert(!array_has(masked, "/proc/pressure"));
    ck_assert(array_has(masked, "/proc/kcore") && array_has(masked, "/proc/timer_list"));
    ck_assert_int_eq(cJSON_GetArraySize(masked), all - 1);
    ck_assert(array_has(get(get(body, "HostConfig"), "ReadonlyPaths"), "/proc/sysrq-trigger"));
    pybox_error_t err = {0};
    ck_assert_int_eq(pybox_docker_verify(&p, inspect, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "HostConfig.MaskedPaths") != NULL, "%s", err.msg);
    cJSON_Delete(body);
    cJSON_Delete(inspect);
}
END_TEST

START_TEST(verify_not_an_object)
{
    pybox_policy_t p;
    fixture_policy(&p);
    pybox_error_t err = {0};
    cJSON *arr = cJSON_CreateArray();
    ck_assert_int_eq(pybox_docker_verify(&p, arr, NULL, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_POLICY);
    cJSON_Delete(arr);

    /* an empty object: everything is missing, and the message says there is more */
    cJSON *empty = cJSON_CreateObject();
    pybox_error_clear(&err);
    int checked = 0;
    ck_assert_int_eq(pybox_docker_verify(&p, empty, &checked, &err), -1);
    ck_assert_int_eq(err.kind, PYBOX_ERR_POLICY);
    ck_assert_int_gt(checked, 40);
    ck_assert_ptr_nonnull(strstr(err.msg, "; ..."));
    cJSON_Delete(empty);
}
END_TEST

START_TEST(verify_catches_each_mutation)
{
    cJSON *j;

    j = load_fixture();
    set_item(j, "HostConfig", "Memory", cJSON_CreateNumber(268435456));
    expect_caught(j, "HostConfig.Memory", "Memory changed");

    j = load_fixture();
    set_item(j, "HostConfig", "MemorySwap", cJSON_CreateNumber(268435456));
    expect_caught(j, "HostConfig.MemorySwap", "MemorySwap larger than Memory");

    j = load_fixture();
    set_item(j, "HostConfig", "MemorySwap", cJSON_CreateNumber(-1));
    expect_caught(j, "HostConfig.MemorySwap", "unlimited swap");

    j = load_fixture();
    set_item(j, "HostConfig", "PidsLimit", cJSON_CreateNumber(0));
    expect_caught(j, "HostConfig.PidsLimit", "PidsLimit 0");

    j = load_fixture();
    set_item(j, "HostConfig", "NanoCpus", cJSON_CreateNumber(0));
    expect_caught(j, "HostConfig.NanoCpus", "NanoCpus 0");

    j = load_fixture();
    set_item(j, "HostConfig", "ReadonlyRootfs", cJSON_CreateFalse());
    expect_caught(j, "HostConfig.ReadonlyRootfs", "ReadonlyRootfs false");

    j = load_fixture();
    set_item(j, "HostConfig", "NetworkMode", cJSON_CreateString("bridge"));
    expect_caught(j, "HostConfig.NetworkMode", "NetworkMode bridge");

    j = load_fixture();
    set_item(j, "Config", "NetworkDisabled", cJSON_CreateFalse());
    expect_caught(j, "Config.NetworkDisabled", "NetworkDisabled false");

    j = load_fixture();
    set_item(j, "Config", "User", cJSON_CreateString("0"));
    expect_caught(j, "Config.User", "User 0");

    j = load_fixture();
    set_item(j, "Config", "User", cJSON_CreateString(""));
    expect_caught(j, "Config.User", "User empty (the image's default)");

    j = load_fixture();
    set_item(j, "HostConfig", "CapDrop", cJSON_CreateArray());
    expect_caught(j, "HostConfig.CapDrop", "CapDrop empty");

    j = load_fixture();
    cJSON *caps = strings("CAP_KILL", "CAP_SETGID");
    cJSON_AddItemToArray(caps, cJSON_CreateString("CAP_SETUID"));
    cJSON_AddItemToArray(caps, cJSON_CreateString("SYS_ADMIN"));
    set_item(j, "HostConfig", "CapAdd", caps);
    expect_caught(j, "HostConfig.CapAdd", "CapAdd SYS_ADMIN");

    j = load_fixture();
    set_item(j, "HostConfig", "Privileged", cJSON_CreateTrue());
    expect_caught(j, "HostConfig.Privileged", "Privileged");

    j = load_fixture();
    set_item(j, "HostConfig", "Binds", strings("/:/host", NULL));
    expect_caught(j, "HostConfig.Binds", "Binds /:/host");

    j = load_fixture();
    {
        cJSON *mounts = cJSON_CreateArray();
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "Type", "bind");
        cJSON_AddStringToObject(m, "Source", "/");
        cJSON_AddStringToObject(m, "Destination", "/host");
        cJSON_AddBoolToObject(m, "RW", 1);
        cJSON_AddItemToArray(mounts, m);
        set_item(j, NULL, "Mounts", mounts);
    }
    expect_caught(j, "Mounts", "Mounts non-empty");

    j = load_fixture();
    set_item(j, "HostConfig", "SecurityOpt", strings("no-new-privileges", NULL));
    expect_caught(j, "HostConfig.SecurityOpt", "SecurityOpt without seccomp");

    j = load_fixture();
    set_item(j, "HostConfig", "SecurityOpt", strings("no-new-privileges", "seccomp=unconfined"));
    expect_caught(j, "HostConfig.SecurityOpt", "seccomp unconfined");

    j = load_fixture();
    {
        cJSON *only = cJSON_CreateArray();
        cJSON_AddItemToArray(only, seccomp_opt());
        set_item(j, "HostConfig", "SecurityOpt", only);
    }
    expect_caught(j, "HostConfig.SecurityOpt", "SecurityOpt without no-new-privileges");

    j = load_fixture();
    set_item(j, "HostConfig", "PidMode", cJSON_CreateString("host"));
    expect_caught(j, "HostConfig.PidMode", "PidMode host");

    j = load_fixture();
    set_item(j, "HostConfig", "UsernsMode", cJSON_CreateString("host"));
    expect_caught(j, "HostConfig.UsernsMode", "UsernsMode host");

    j = load_fixture();
    {
        cJSON *devs = cJSON_CreateArray();
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "PathOnHost", "/dev/mem");
        cJSON_AddStringToObject(d, "PathInContainer", "/dev/mem");
        cJSON_AddStringToObject(d, "CgroupPermissions", "rwm");
        cJSON_AddItemToArray(devs, d);
        set_item(j, "HostConfig", "Devices", devs);
    }
    expect_caught(j, "HostConfig.Devices", "Devices non-empty");

    j = load_fixture();
    set_item(j, NULL, "Image",
             cJSON_CreateString("sha256:1111111111111111111111111111111111111111111111111111111111111111"));
    expect_caught(j, "Image", "another image");

    j = load_fixture();
    set_item(j, NULL, "Path", cJSON_CreateString("/bin/sh"));
    expect_caught(j, "Path", "Path /bin/sh");

    j = load_fixture();
    set_item(j, NULL, "Args", strings("--timer-ms=86400000", NULL));
    expect_caught(j, "Args", "timer changed");

    j = load_fixture();
    set_item(j, NULL, "Args", init_args("--timer-ms=3000", "--program-uid=65534", "--wait-ms=0", "--life-ms=0"));
    expect_caught(j, "Args", "the program's user changed");

    j = load_fixture();
    set_item(j, NULL, "Args", init_args("--timer-ms=3000", "--program-uid=0", "--wait-ms=0", "--life-ms=0"));
    expect_caught(j, "Args", "the program left root");

    /* a cold box made to wait for a program, or to live as a session */
    j = load_fixture();
    set_item(j, NULL, "Args", init_args("--timer-ms=3000", "--program-uid=200123", "--wait-ms=600000", "--life-ms=0"));
    expect_caught(j, "Args", "a wait added");

    j = load_fixture();
    set_item(j, NULL, "Args",
             init_args("--timer-ms=3000", "--program-uid=200123", "--wait-ms=0", "--life-ms=86400000"));
    expect_caught(j, "Args", "a session's life added");

    j = load_fixture();
    set_item(j, NULL, "Args", strings("--timer-ms=3000", NULL));
    expect_caught(j, "Args", "the program's user left out");

    j = load_fixture();
    set_item(obj_at(j, "Config"), "Labels", "pybox.install", cJSON_CreateString("ffffffffffffffffffffffffffffffff"));
    expect_caught(j, "Config.Labels", "install label changed");

    j = load_fixture();
    set_item(obj_at(j, "Config"), "Labels", "pybox.expires", cJSON_CreateString("4000000000"));
    expect_caught(j, "Config.Labels", "expiry label changed");

    j = load_fixture();
    set_item(obj_at(j, "Config"), "Labels", "extra", cJSON_CreateString("x"));
    expect_caught(j, "Config.Labels", "a label added");

    j = load_fixture();
    set_item(j, "State", "Status", cJSON_CreateString("running"));
    expect_caught(j, "State.Status", "already running");

    j = load_fixture();
    {
        cJSON *log = cJSON_CreateObject();
        cJSON_AddStringToObject(log, "Type", "json-file");
        cJSON_AddObjectToObject(log, "Config");
        set_item(j, "HostConfig", "LogConfig", log);
    }
    expect_caught(j, "HostConfig.LogConfig", "LogConfig json-file");

    j = load_fixture();
    {
        cJSON *tmpfs = cJSON_CreateObject();
        cJSON_AddStringToObject(tmpfs, "/tmp", "rw,nosuid,nodev,size=16777216,mode=1777");
        set_item(j, "HostConfig", "Tmpfs", tmpfs);
    }
    expect_caught(j, "HostConfig.Tmpfs", "Tmpfs without noexec");

    /* a setting the engine did not report at all counts as a difference */
    j = load_fixture();
    cJSON_DeleteItemFromObjectCaseSensitive(obj_at(j, "HostConfig"), "Ulimits");
    expect_caught(j, "HostConfig.Ulimits", "Ulimits absent");

    /* a number reported as a string is not the number */
    j = load_fixture();
    set_item(j, "HostConfig", "Memory", cJSON_CreateString("134217728"));
    expect_caught(j, "HostConfig.Memory", "Memory as a string");

    j = load_fixture();
    set_item(j, "HostConfig", "Sysctls", cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(obj_at(j, "HostConfig"), "Sysctls"),
                            "kernel.shm_rmid_forced", "1");
    expect_caught(j, "HostConfig.Sysctls", "Sysctls set");
}
END_TEST

Suite *suite_policy(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("body");
    tcase_add_test(tc, body_contents);
    tcase_add_test(tc, body_tamper_knob);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("seccomp");
    tcase_add_test(tc, seccomp_default_denies);
    tcase_add_test(tc, seccomp_denies_dangerous);
    tcase_add_test(tc, seccomp_socket_domains);
    tcase_add_test(tc, seccomp_clone_without_namespaces);
    tcase_set_timeout(tc, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("verify");
    tcase_add_test(tc, verify_recorded_readback);
    tcase_add_test(tc, verify_not_an_object);
    tcase_add_test(tc, relaxations_named_and_held);
    tcase_add_test(tc, verify_catches_each_mutation);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return s;
}
