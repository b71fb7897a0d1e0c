/* SPDX-License-Identifier: MIT */
/* The sealed-box policy: create body and read-back verifier (see policy.h). */
#include "policy.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../guest/proto.h"
#include "buf.h"
#include "limits.h"
#include "util.h"

/* The profile's source text, linked in by seccomp_blob.S. */
extern const char pybox_seccomp_src[];
extern const char pybox_seccomp_src_end[];

static char *seccomp_compact;
static char seccomp_digest[65];
static pthread_once_t seccomp_once = PTHREAD_ONCE_INIT;

static void seccomp_load(void)
{
    size_t len = (size_t)(pybox_seccomp_src_end - pybox_seccomp_src);
    cJSON *j = cJSON_ParseWithLength(pybox_seccomp_src, len);
    if (j == NULL)
        abort(); /* the build embeds a profile that `make check` parses: cannot happen */
    seccomp_compact = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (seccomp_compact == NULL)
        abort();
    pybox_sha256_hex(seccomp_compact, strlen(seccomp_compact), seccomp_digest);
}

const char *pybox_policy_seccomp(void)
{
    pthread_once(&seccomp_once, seccomp_load);
    return seccomp_compact;
}

const char *pybox_policy_seccomp_sha256(void)
{
    pthread_once(&seccomp_once, seccomp_load);
    return seccomp_digest;
}

void pybox_policy_defaults(pybox_policy_t *p)
{
    memset(p, 0, sizeof *p);
    p->memory_bytes = PYBOX_DEFAULT_MEMORY;
    p->pids = PYBOX_DEFAULT_PIDS;
    p->nano_cpus = PYBOX_DEFAULT_NANO_CPUS;
    pybox_policy_set_timeout(p, PYBOX_DEFAULT_TIMEOUT_MS);
    p->tmp_bytes = PYBOX_TMP_BYTES;
    p->shm_bytes = PYBOX_SHM_BYTES;
    p->nofile = PYBOX_NOFILE;
    p->fsize_bytes = PYBOX_FSIZE_BYTES;
    p->core_bytes = 0;
    p->sigpending = PYBOX_SIGPENDING;
    static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", NULL};
    static const char *const init_caps[] = {"CAP_KILL", "CAP_SETGID", "CAP_SETUID", NULL};
    p->env = env;
    p->hostname = "pybox";
    p->init_caps = init_caps;
}

void pybox_policy_rlimits(const pybox_policy_t *p, pybox_policy_rlimit_t out[PYBOX_POLICY_RLIMITS])
{
    out[0] = (pybox_policy_rlimit_t){"nofile", RLIMIT_NOFILE, p->nofile};
    out[1] = (pybox_policy_rlimit_t){"fsize", RLIMIT_FSIZE, p->fsize_bytes};
    out[2] = (pybox_policy_rlimit_t){"core", RLIMIT_CORE, p->core_bytes};
    out[3] = (pybox_policy_rlimit_t){"sigpending", RLIMIT_SIGPENDING, p->sigpending};
}

void pybox_policy_set_timeout(pybox_policy_t *p, int64_t timeout_ms)
{
    p->timeout_ms = timeout_ms;
    p->box_timer_ms = pybox_limit_box_timer_ms(timeout_ms);
}

/* Paths the engine hides or makes read-only inside the box. Stated here rather than left
 * to the engine's defaults, which differ between engines and versions. /proc/pressure is
 * the host's pressure stall information: its files are writable by any user (a write
 * arms a trigger the kernel then polls for, host-wide), and the engine does not mask it. */
const char *const pybox_policy_masked_paths[] = {
    "/proc/asound",        "/proc/acpi",       "/proc/kcore",       "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi",          "/proc/pressure",   "/sys/firmware",     NULL,
};
const char *const pybox_policy_readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

bool pybox_policy_is_masked_path(const char *path)
{
    for (size_t i = 0; path != NULL && pybox_policy_masked_paths[i] != NULL; i++)
        if (strcmp(path, pybox_policy_masked_paths[i]) == 0)
            return true;
    return false;
}

bool pybox_policy_masks(const pybox_policy_t *p, const char *path)
{
    if (p->relax & PYBOX_RELAX_SYSTEM_PATHS)
        return false;
    return p->relax_unmask == NULL || strcmp(p->relax_unmask, path) != 0;
}

static const struct {
    unsigned bit;
    const char *name;
} relax_names[] = {
    {PYBOX_RELAX_PROGRAM_ROOT, "program-root"},
    {PYBOX_RELAX_WRITABLE_ROOT, "writable-root"},
    {PYBOX_RELAX_ENGINE_CAPS, "engine-caps"},
    {PYBOX_RELAX_NEW_PRIVS, "new-privileges"},
    {PYBOX_RELAX_SECCOMP, "seccomp"},
    {PYBOX_RELAX_PIDS, "pids"},
    {PYBOX_RELAX_MEMORY, "memory"},
    {PYBOX_RELAX_SYSTEM_PATHS, "system-paths"},
    {PYBOX_RELAX_SHARED_UID, "shared-uid"},
    {PYBOX_RELAX_OUTPUT_OWNER, "output-owner"},
    {PYBOX_RELAX_IN_FLIGHT, "in-flight-collection"},
    {PYBOX_RELAX_APPARMOR, "apparmor"},
    {PYBOX_RELAX_REUSED_BOX, "reused-box"},
};

unsigned pybox_policy_relax_bit(const char *name)
{
    for (size_t i = 0; i < sizeof relax_names / sizeof *relax_names; i++)
        if (strcmp(name, relax_names[i].name) == 0)
            return relax_names[i].bit;
    return 0;
}

bool pybox_policy_relaxed_in(const pybox_policy_t *p, unsigned bit)
{
    return (p->relax & bit) != 0;
}

unsigned pybox_policy_program_uid(const pybox_policy_t *p)
{
    if (pybox_policy_relaxed_in(p, PYBOX_RELAX_PROGRAM_ROOT))
        return 0;
    /* (an ordinary user's box keeps its own id: its relaxation shares the user's quotas) */
    if (pybox_policy_relaxed_in(p, PYBOX_RELAX_SHARED_UID) && geteuid() == 0)
        return PYBOX_SHARED_UID;
    return p->program_uid;
}

void pybox_policy_relaxed(const pybox_policy_t *p, char *out, size_t len)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_addf(&b, "%s%s%s%s", p->relax_bind ? "host-folder," : "", p->relax_env ? "environment," : "",
                   p->relax_netns ? "network-namespace," : "", p->relax_socket ? "engine-socket," : "");
    for (size_t i = 0; i < sizeof relax_names / sizeof *relax_names; i++)
        if (pybox_policy_relaxed_in(p, relax_names[i].bit))
            pybox_buf_addf(&b, "%s,", relax_names[i].name);
    if (p->relax_cap != NULL && !pybox_policy_relaxed_in(p, PYBOX_RELAX_ENGINE_CAPS)) /* the body adds it only then */
        pybox_buf_addf(&b, "capability %s,", p->relax_cap);
    if (p->relax_unmask != NULL && !pybox_policy_relaxed_in(p, PYBOX_RELAX_SYSTEM_PATHS)) /* else: all of them */
        pybox_buf_addf(&b, "unmasked %s,", p->relax_unmask);
    /* relaxations are never left unsaid: a list that could not be made says so */
    snprintf(out, len, "%s", pybox_buf_ok(&b) ? (b.data ? b.data : "") : "(could not be listed),");
    pybox_buf_free(&b);
    size_t n = strlen(out);
    if (n > 0)
        out[n - 1] = '\0';
}
