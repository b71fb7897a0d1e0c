/* SPDX-License-Identifier: MIT */
/* The Docker box's create body, made from the engine-neutral policy, and the check of
 * the engine's read-back of a created box against it, setting by setting (docker.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../guest/proto.h"
#include "../buf.h"
#include "../files.h"
#include "../policy.h"
#include "../util.h"
#include "docker.h"

#define relaxed(p, bit) pybox_policy_relaxed_in(p, bit)
#define masked_paths pybox_policy_masked_paths
#define readonly_paths pybox_policy_readonly_paths

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v[n] != NULL)
        n++;
    return n;
}

static cJSON *string_array(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

static cJSON *ulimit(const char *name, int64_t v)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "Name", name);
    cJSON_AddNumberToObject(u, "Soft", (double)v);
    cJSON_AddNumberToObject(u, "Hard", (double)v);
    return u;
}

static int tampered(const pybox_policy_t *p, const char *what)
{
    return p->tamper != NULL && strcmp(p->tamper, what) == 0;
}

/* The part of the body that the engine reports back under "Config". */
static cJSON *config_part(const pybox_policy_t *p)
{
    cJSON *c = cJSON_CreateObject();
    char args[PYBOX_GUEST_ARGC][PYBOX_GUEST_ARG_MAX];
    pybox_guest_argv(args, p->box_timer_ms, pybox_policy_program_uid(p), p->box_wait_ms, p->box_life_ms);
    char expires[32];
    snprintf(expires, sizeof expires, "%lld", (long long)p->expires);

    cJSON_AddStringToObject(c, "Image", p->image_id);
    cJSON_AddStringToObject(c, "User", tampered(p, "user") ? "1000:1000" : PYBOX_BOX_INIT_USER);
    if (p->relax_netns == NULL) { /* a joined network namespace brings its own name */
        cJSON_AddStringToObject(c, "Hostname", p->hostname);
        cJSON_AddStringToObject(c, "Domainname", "");
    }
    cJSON_AddStringToObject(c, "WorkingDir", "/tmp");
    cJSON *env = cJSON_AddArrayToObject(c, "Env");
    for (const char *const *e = p->env; e != NULL && *e != NULL; e++)
        cJSON_AddItemToArray(env, cJSON_CreateString(*e));
    if (p->relax_env != NULL)
        cJSON_AddItemToArray(env, cJSON_CreateString(p->relax_env));
    const char *entry[PYBOX_GUEST_ARGC];
    for (int i = 0; i < PYBOX_GUEST_ARGC; i++)
        entry[i] = args[i];
    cJSON_AddItemToObject(c, "Entrypoint", string_array(entry, PYBOX_GUEST_ARGC));
    cJSON_AddItemToObject(c, "Cmd", cJSON_CreateArray());
    if (p->relax_netns == NULL) /* the engine reports it only when true */
        cJSON_AddBoolToObject(c, "NetworkDisabled", 1);
    cJSON_AddBoolToObject(c, "AttachStdin", 1);
    cJSON_AddBoolToObject(c, "AttachStdout", 1);
    cJSON_AddBoolToObject(c, "AttachStderr", 1);
    cJSON_AddBoolToObject(c, "OpenStdin", 1);
    cJSON_AddBoolToObject(c, "StdinOnce", 1);
    cJSON_AddBoolToObject(c, "Tty", 0);
    cJSON *labels = cJSON_AddObjectToObject(c, "Labels");
    cJSON_AddStringToObject(labels, PYBOX_LABEL_INSTALL, p->install_id);
    cJSON_AddStringToObject(labels, PYBOX_LABEL_RUN, p->run_id);
    cJSON_AddStringToObject(labels, PYBOX_LABEL_EXPIRES, expires);
    return c;
}

static cJSON *volume_labels(const pybox_policy_t *p)
{
    char expires[32];
    snprintf(expires, sizeof expires, "%lld", (long long)p->expires);
    cJSON *l = cJSON_CreateObject();
    cJSON_AddStringToObject(l, PYBOX_LABEL_INSTALL, p->install_id);
    cJSON_AddStringToObject(l, PYBOX_LABEL_RUN, p->run_id);
    cJSON_AddStringToObject(l, PYBOX_LABEL_EXPIRES, expires);
    return l;
}

/* A labelled volume at target, added to the mounts m; returns its options. */
static cJSON *volume(cJSON *m, const pybox_policy_t *p, const char *target)
{
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "Type", "volume");
    cJSON_AddStringToObject(v, "Target", target);
    cJSON *o = cJSON_AddObjectToObject(v, "VolumeOptions");
    cJSON_AddItemToObject(o, "Labels", volume_labels(p));
    cJSON_AddItemToArray(m, v);
    return o;
}

/* The box's volumes: anonymous (removed with the box), labelled (found by cleanup). */
static cJSON *mounts(const pybox_policy_t *p)
{
    cJSON *m = cJSON_CreateArray();
    if (p->mount_in)
        volume(m, p, PYBOX_BOX_IN);
    if (p->mount_out) {
        cJSON *o = volume(m, p, PYBOX_BOX_OUT);
        cJSON *dc = cJSON_AddObjectToObject(o, "DriverConfig");
        cJSON_AddStringToObject(dc, "Name", "local");
        cJSON *opts = cJSON_AddObjectToObject(dc, "Options");
        char mo[128];
        unsigned uid = pybox_policy_program_uid(p);
        snprintf(mo, sizeof mo, "size=%lld,uid=%u,gid=%u,mode=0700", (long long)p->out_bytes, uid, uid);
        cJSON_AddStringToObject(opts, "device", "tmpfs");
        cJSON_AddStringToObject(opts, "o", mo);
        cJSON_AddStringToObject(opts, "type", "tmpfs");
    }
    return m;
}

static cJSON *host_part(const pybox_policy_t *p)
{
    cJSON *h = cJSON_CreateObject();
    int64_t mem = tampered(p, "memory") ? p->memory_bytes * 2 : p->memory_bytes;
    if (relaxed(p, PYBOX_RELAX_MEMORY))
        mem = 0;
    if (p->relax_netns != NULL) {
        char mode[PYBOX_ID_MAX + 16];
        snprintf(mode, sizeof mode, "container:%s", p->relax_netns);
        cJSON_AddStringToObject(h, "NetworkMode", mode);
    } else {
        cJSON_AddStringToObject(h, "NetworkMode", "none");
    }
    if (p->relax_bind != NULL || p->relax_socket != NULL) {
        char bind[PATH_MAX + 16], sock[PATH_MAX + 32];
        snprintf(bind, sizeof bind, "%s:/host:ro", p->relax_bind ? p->relax_bind : "");
        snprintf(sock, sizeof sock, "%s:%s", p->relax_socket ? p->relax_socket : "", PYBOX_RELAX_SOCKET_AT);
        const char *binds[2];
        int n = 0;
        if (p->relax_bind != NULL)
            binds[n++] = bind;
        if (p->relax_socket != NULL)
            binds[n++] = sock;
        cJSON_AddItemToObject(h, "Binds", string_array(binds, (size_t)n));
    }
    cJSON_AddBoolToObject(h, "ReadonlyRootfs",
                          tampered(p, "readonly") || relaxed(p, PYBOX_RELAX_WRITABLE_ROOT) ? 0 : 1);
    cJSON_AddBoolToObject(h, "Privileged", 0);
    cJSON_AddBoolToObject(h, "Init", 0);
    cJSON_AddNumberToObject(h, "OomScoreAdj", 0);
    cJSON_AddNumberToObject(h, "Memory", (double)mem);
    cJSON_AddNumberToObject(h, "MemorySwap", (double)mem);
    int64_t pids = tampered(p, "pids") ? p->pids + 1 : p->pids;
    if (relaxed(p, PYBOX_RELAX_PIDS)) /* no limit: the engine reads it back as null */
        cJSON_AddNullToObject(h, "PidsLimit");
    else
        cJSON_AddNumberToObject(h, "PidsLimit", (double)pids);
    cJSON_AddNumberToObject(h, "NanoCpus", (double)p->nano_cpus);
    const char *capdrop[] = {"ALL"};
    if (tampered(p, "capdrop") || relaxed(p, PYBOX_RELAX_ENGINE_CAPS))
        cJSON_AddItemToObject(h, "CapDrop", cJSON_CreateArray());
    else
        cJSON_AddItemToObject(h, "CapDrop", string_array(capdrop, 1));
    /* Only what the box's init needs to start the program as its own user and to end it. */
    cJSON *capadd = cJSON_AddArrayToObject(h, "CapAdd");
    for (const char *const *cap = p->init_caps; !relaxed(p, PYBOX_RELAX_ENGINE_CAPS) && cap && *cap; cap++)
        cJSON_AddItemToArray(capadd, cJSON_CreateString(*cap));
    if (!relaxed(p, PYBOX_RELAX_ENGINE_CAPS) && p->relax_cap != NULL)
        cJSON_AddItemToArray(capadd, cJSON_CreateString(p->relax_cap));
    const char *secopt[3];
    int nsec = 0;
    if (!relaxed(p, PYBOX_RELAX_NEW_PRIVS))
        secopt[nsec++] = "no-new-privileges";
    /* On a host with AppArmor the engine confines every box with its own profile; a check
     * of another layer (the seccomp profile refusing mount) takes it off in both runs. */
    if (relaxed(p, PYBOX_RELAX_APPARMOR))
        secopt[nsec++] = "apparmor=unconfined";
    pybox_buf_t sc;
    pybox_buf_init(&sc, 0);
    pybox_buf_adds(&sc, "seccomp=");
    pybox_buf_adds(&sc, relaxed(p, PYBOX_RELAX_SECCOMP) ? "unconfined" : pybox_policy_seccomp());
    if (!pybox_buf_ok(&sc)) {
        /* never a body without its seccomp option, which the check would then miss too */
        cJSON_Delete(h);
        return NULL;
    }
    secopt[nsec++] = sc.data;
    cJSON_AddItemToObject(h, "SecurityOpt", string_array(secopt, (size_t)nsec));
    pybox_buf_free(&sc);
    cJSON *tmpfs = cJSON_AddObjectToObject(h, "Tmpfs");
    char opts[128];
    snprintf(opts, sizeof opts, "rw,noexec,nosuid,nodev,size=%lld,mode=1777", (long long)p->tmp_bytes);
    cJSON_AddStringToObject(tmpfs, "/tmp", opts);
    cJSON_AddNumberToObject(h, "ShmSize", (double)p->shm_bytes);
    cJSON *ul = cJSON_AddArrayToObject(h, "Ulimits");
    pybox_policy_rlimit_t rl[PYBOX_POLICY_RLIMITS];
    pybox_policy_rlimits(p, rl);
    for (size_t i = 0; i < PYBOX_POLICY_RLIMITS; i++)
        cJSON_AddItemToArray(ul, ulimit(rl[i].name, rl[i].value));
    cJSON *log = cJSON_AddObjectToObject(h, "LogConfig");
    cJSON_AddStringToObject(log, "Type", "none");
    cJSON_AddObjectToObject(log, "Config");
    cJSON_AddStringToObject(h, "IpcMode", "private");
    cJSON_AddStringToObject(h, "CgroupnsMode", "private");
    /* The engine writes /etc/resolv.conf even without a network; these keep the host's
     * resolver settings out of it. */
    const char *dns[] = {"127.0.0.1"};
    const char *dnssearch[] = {"."};
    const char *dnsopt[] = {"ndots:0"};
    if (p->relax_netns == NULL) {
        cJSON_AddItemToObject(h, "Dns", string_array(dns, 1));
        cJSON_AddItemToObject(h, "DnsSearch", string_array(dnssearch, 1));
        cJSON_AddItemToObject(h, "DnsOptions", string_array(dnsopt, 1));
    }
    bool sys = relaxed(p, PYBOX_RELAX_SYSTEM_PATHS);
    cJSON *masked = cJSON_AddArrayToObject(h, "MaskedPaths");
    for (size_t i = 0; masked != NULL && masked_paths[i] != NULL; i++)
        if (pybox_policy_masks(p, masked_paths[i]))
            cJSON_AddItemToArray(masked, cJSON_CreateString(masked_paths[i]));
    cJSON_AddItemToObject(h, "ReadonlyPaths", string_array(readonly_paths, sys ? 0 : count(readonly_paths)));
    if (p->mount_in || p->mount_out)
        cJSON_AddItemToObject(h, "Mounts", mounts(p));
    cJSON *rp = cJSON_AddObjectToObject(h, "RestartPolicy");
    cJSON_AddStringToObject(rp, "Name", "no");
    cJSON_AddNumberToObject(rp, "MaximumRetryCount", 0);
    cJSON_AddBoolToObject(h, "AutoRemove", 0);
    return h;
}

cJSON *pybox_docker_body(const pybox_policy_t *p)
{
    cJSON *body = config_part(p);
    if (body == NULL)
        return NULL;
    cJSON *h = host_part(p);
    if (h == NULL) {
        cJSON_Delete(body);
        return NULL;
    }
    cJSON_AddItemToObject(body, "HostConfig", h);
    return body;
}

/* ---- verification ---- */

typedef struct {
    pybox_buf_t diffs;
    int count;
    int checked;
} verdict_t;

static void show(pybox_buf_t *b, const cJSON *v)
{
    if (v == NULL) {
        pybox_buf_adds(b, "(absent)");
        return;
    }
    char *t = cJSON_PrintUnformatted(v);
    if (t == NULL) {
        pybox_buf_adds(b, "?");
        return;
    }
    size_t n = strlen(t);
    if (n > 96) {
        pybox_buf_add(b, t, 90);
        pybox_buf_adds(b, "...");
    } else {
        pybox_buf_adds(b, t);
    }
    free(t);
}

static void differ(verdict_t *v, const char *where, const cJSON *want, const cJSON *got)
{
    v->count++;
    if (v->count > 12)
        return;
    pybox_buf_addf(&v->diffs, "%s%s: policy ", v->count > 1 ? "; " : "", where);
    show(&v->diffs, want);
    pybox_buf_adds(&v->diffs, ", engine ");
    show(&v->diffs, got);
}

static void expect(verdict_t *v, const char *where, const cJSON *want, const cJSON *got)
{
    v->checked++;
    if (got == NULL || !cJSON_Compare(want, got, 1))
        differ(v, where, want, got);
}

/* Values that mean "nothing granted": null, false, 0, "" or an empty array/object. */
static int is_empty(const cJSON *j)
{
    if (j == NULL || cJSON_IsNull(j) || cJSON_IsFalse(j))
        return 1;
    if (cJSON_IsNumber(j))
        return j->valuedouble == 0;
    if (cJSON_IsString(j))
        return j->valuestring[0] == '\0';
    if (cJSON_IsArray(j) || cJSON_IsObject(j))
        return j->child == NULL;
    return 0;
}

static void expect_empty(verdict_t *v, const char *section, const cJSON *obj, const char *key)
{
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(obj, key);
    char where[96];
    snprintf(where, sizeof where, "%s%s", section, key);
    v->checked++;
    if (!is_empty(got)) {
        cJSON *want = cJSON_CreateNull();
        differ(v, where, want, got);
        cJSON_Delete(want);
    }
}

static void expect_section(verdict_t *v, const char *section, const cJSON *want, const cJSON *got_obj)
{
    for (const cJSON *w = want ? want->child : NULL; w != NULL; w = w->next) {
        char where[96];
        snprintf(where, sizeof where, "%s%s", section, w->string);
        expect(v, where, w, cJSON_GetObjectItemCaseSensitive(got_obj, w->string));
    }
}

/* What is mounted: exactly the box's own volumes, nothing of the host. */
static void expect_mounts(verdict_t *v, const pybox_policy_t *p, const cJSON *got)
{
    int want = (p->mount_in ? 1 : 0) + (p->mount_out ? 1 : 0) + (p->relax_bind ? 1 : 0) + (p->relax_socket ? 1 : 0);
    v->checked++;
    cJSON *w = cJSON_CreateNumber(want);
    if (want == 0) {
        if (!is_empty(got))
            differ(v, "Mounts", w, got);
        cJSON_Delete(w);
        return;
    }
    bool ok = cJSON_GetArraySize(got) == want;
    const cJSON *m;
    cJSON_ArrayForEach (m, got) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "Type");
        const cJSON *driver = cJSON_GetObjectItemCaseSensitive(m, "Driver");
        const cJSON *dest = cJSON_GetObjectItemCaseSensitive(m, "Destination");
        const cJSON *rw = cJSON_GetObjectItemCaseSensitive(m, "RW");
        bool known = cJSON_IsString(dest) && ((p->mount_in && strcmp(dest->valuestring, PYBOX_BOX_IN) == 0) ||
                                              (p->mount_out && strcmp(dest->valuestring, PYBOX_BOX_OUT) == 0));
        if (p->relax_bind != NULL && cJSON_IsString(dest) && strcmp(dest->valuestring, "/host") == 0 &&
            cJSON_IsString(type) && strcmp(type->valuestring, "bind") == 0)
            continue;
        if (p->relax_socket != NULL && cJSON_IsString(dest) && strcmp(dest->valuestring, PYBOX_RELAX_SOCKET_AT) == 0 &&
            cJSON_IsString(type) && strcmp(type->valuestring, "bind") == 0)
            continue;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "volume") != 0 || !cJSON_IsString(driver) ||
            strcmp(driver->valuestring, "local") != 0 || !known || !cJSON_IsTrue(rw))
            ok = false;
    }
    if (!ok)
        differ(v, "Mounts", w, got);
    cJSON_Delete(w);
}

static int verify(const pybox_policy_t *p, const cJSON *inspect, verdict_t *v)
{
    cJSON *want = pybox_docker_body(p);
    if (want == NULL)
        return -1;
    /* An honest policy is compared, not the body actually sent (which a test may have
     * tampered with): the read-back must match what the policy says. */
    if (p->tamper != NULL) {
        pybox_policy_t honest = *p;
        honest.tamper = NULL;
        cJSON_Delete(want);
        want = pybox_docker_body(&honest);
        if (want == NULL)
            return -1;
    }
    cJSON *want_host = cJSON_DetachItemFromObjectCaseSensitive(want, "HostConfig");
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(inspect, "Config");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(inspect, "HostConfig");

    /* The exact image, the exact program started as PID 1. */
    cJSON *img = cJSON_CreateString(p->image_id);
    expect(v, "Image", img, cJSON_GetObjectItemCaseSensitive(inspect, "Image"));
    cJSON_Delete(img);
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(want, "Entrypoint");
    expect(v, "Path", entry->child, cJSON_GetObjectItemCaseSensitive(inspect, "Path"));
    cJSON *args = cJSON_CreateArray();
    for (const cJSON *a = entry->child->next; a; a = a->next)
        cJSON_AddItemToArray(args, cJSON_Duplicate(a, 1));
    expect(v, "Args", args, cJSON_GetObjectItemCaseSensitive(inspect, "Args"));
    cJSON_Delete(args);

    expect_section(v, "Config.", want, config);
    expect_section(v, "HostConfig.", want_host, host);

    /* Nothing granted that the policy does not mention. */
    static const char *const host_empty[] = {
        "Binds",          "VolumesFrom",     "Devices",      "DeviceCgroupRules",
        "DeviceRequests", "Links",           "ExtraHosts",   "GroupAdd",
        "PortBindings",   "PublishAllPorts", "PidMode",      "UTSMode",
        "UsernsMode",     "Cgroup",          "CgroupParent", "OomKillDisable",
        "VolumeDriver",   "Sysctls",         "CpusetCpus",   "CpuRealtimeRuntime",
    };
    for (size_t i = 0; i < sizeof host_empty / sizeof *host_empty; i++)
        if (!((p->relax_bind != NULL || p->relax_socket != NULL) && strcmp(host_empty[i], "Binds") == 0))
            expect_empty(v, "HostConfig.", host, host_empty[i]);
    expect_mounts(v, p, cJSON_GetObjectItemCaseSensitive(inspect, "Mounts"));
    expect_empty(v, "Config.", config, "ExposedPorts");
    expect_empty(v, "Config.", config, "Volumes");
    expect_empty(v, "Config.", config, "Healthcheck");
    expect_empty(v, "Config.", config, "OnBuild");

    /* Not started yet: the program must not run before this check passes. */
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(inspect, "State");
    cJSON *created = cJSON_CreateString("created");
    expect(v, "State.Status", created, cJSON_GetObjectItemCaseSensitive(state, "Status"));
    cJSON_Delete(created);

    cJSON_Delete(want_host);
    cJSON_Delete(want);
    return 0;
}

int pybox_docker_verify(const pybox_policy_t *p, const cJSON *inspect, int *checked, pybox_error_t *err)
{
    verdict_t v = {.count = 0, .checked = 0};
    pybox_buf_init(&v.diffs, 0);
    if (!cJSON_IsObject(inspect)) {
        pybox_buf_free(&v.diffs);
        return pybox_error_set(err, PYBOX_ERR_POLICY, 0, "the engine's read-back of the box is not an object");
    }
    if (verify(p, inspect, &v) < 0) {
        pybox_buf_free(&v.diffs);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 12, "building the expected box");
    }
    int rc = 0;
    if (checked != NULL)
        *checked = v.checked;
    if (v.count > 0) {
        rc = pybox_error_set(err, PYBOX_ERR_POLICY, 0, "the box differs from the policy in %d of %d settings: %s%s",
                             v.count, v.checked,
                             pybox_buf_ok(&v.diffs) ? (v.diffs.data ? v.diffs.data : "")
                                                    : "(out of memory: the differences could not be listed)",
                             v.count > 12 ? "; ..." : "");
    }
    pybox_buf_free(&v.diffs);
    return rc;
}
