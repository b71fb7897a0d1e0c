/* SPDX-License-Identifier: MIT */
/* Pure parsers of the kernel's texts about a box (see parse.h). */
#include "parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

/* A line of text: [p, end) without its newline; *next after it. 0 when none is left. */
static int next_line(const char **cur, const char *end, const char **p, const char **lend)
{
    if (*cur >= end)
        return 0;
    *p = *cur;
    const char *nl = memchr(*cur, '\n', (size_t)(end - *cur));
    *lend = nl ? nl : end;
    *cur = nl ? nl + 1 : end;
    return 1;
}

static bool starts(const char *p, const char *end, const char *prefix)
{
    size_t n = strlen(prefix);
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

static const char *skip_blank(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Strict unsigned decimal at p: at least one digit, no overflow past INT64_MAX. */
static const char *dec(const char *p, const char *end, int64_t *out)
{
    if (p >= end || *p < '0' || *p > '9')
        return NULL;
    int64_t v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return NULL;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return p;
}

static const char *hex64(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    for (; p < end; p++, digits++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (digits >= 16)
            return NULL;
        v = v << 4 | (uint64_t)d;
    }
    if (digits == 0)
        return NULL;
    *out = v;
    return p;
}

static int malformed(pybox_error_t *err, const char *what)
{
    return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "%s: malformed", what);
}

/* ---- status ---- */

/* "0022": octal digits only, at most four (a mask has nine bits). */
static int one_octal(const char *p, const char *end, int64_t *v)
{
    p = skip_blank(p, end);
    int64_t x = 0;
    int digits = 0;
    for (; p < end && *p >= '0' && *p <= '7'; p++, digits++) {
        if (digits == 4)
            return -1; /* more digits than a mask has: refused before they could overflow */
        x = x * 8 + (*p - '0');
    }
    if (digits == 0 || skip_blank(p, end) != end || x > 0777)
        return -1;
    *v = x;
    return 0;
}

static int ids(const char *p, const char *end, int64_t v[4])
{
    for (int i = 0; i < 4; i++) {
        p = skip_blank(p, end);
        p = dec(p, end, &v[i]);
        if (p == NULL)
            return -1;
    }
    return skip_blank(p, end) == end ? 0 : -1;
}

static int one_hex(const char *p, const char *end, uint64_t *v)
{
    p = skip_blank(p, end);
    p = hex64(p, end, v);
    return p != NULL && p == end ? 0 : -1;
}

static int one_dec(const char *p, const char *end, int *v)
{
    int64_t x;
    p = skip_blank(p, end);
    p = dec(p, end, &x);
    if (p == NULL || skip_blank(p, end) != end || x > INT32_MAX)
        return -1;
    *v = (int)x;
    return 0;
}

int pybox_np_status_parse(const char *text, size_t len, pybox_np_status_t *out, pybox_error_t *err)
{
    memset(out, 0, sizeof *out);
    const char *cur = text, *end = text + len, *p, *le;
    while (next_line(&cur, end, &p, &le)) {
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon == NULL)
            continue;
        const char *v = colon + 1;
        size_t klen = (size_t)(colon - p);
        int rc = 0;
        unsigned bit = 0;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
        if (KEY("Uid"))
            bit = PYBOX_NP_ST_UID, rc = ids(v, le, out->uid);
        else if (KEY("Gid"))
            bit = PYBOX_NP_ST_GID, rc = ids(v, le, out->gid);
        else if (KEY("CapInh"))
            bit = PYBOX_NP_ST_CAPINH, rc = one_hex(v, le, &out->cap_inh);
        else if (KEY("CapPrm"))
            bit = PYBOX_NP_ST_CAPPRM, rc = one_hex(v, le, &out->cap_prm);
        else if (KEY("CapEff"))
            bit = PYBOX_NP_ST_CAPEFF, rc = one_hex(v, le, &out->cap_eff);
        else if (KEY("CapBnd"))
            bit = PYBOX_NP_ST_CAPBND, rc = one_hex(v, le, &out->cap_bnd);
        else if (KEY("CapAmb"))
            bit = PYBOX_NP_ST_CAPAMB, rc = one_hex(v, le, &out->cap_amb);
        else if (KEY("NoNewPrivs"))
            bit = PYBOX_NP_ST_NNP, rc = one_dec(v, le, &out->no_new_privs);
        else if (KEY("Seccomp"))
            bit = PYBOX_NP_ST_SECCOMP, rc = one_dec(v, le, &out->seccomp);
        else if (KEY("Seccomp_filters"))
            bit = PYBOX_NP_ST_FILTERS, rc = one_dec(v, le, &out->seccomp_filters);
        else if (KEY("Umask"))
            bit = PYBOX_NP_ST_UMASK, rc = one_octal(v, le, &out->umask);
        else if (KEY("Groups")) {
            bit = PYBOX_NP_ST_GROUPS;
            const char *q = skip_blank(v, le);
            while (q < le) {
                int64_t g;
                q = dec(q, le, &g);
                if (q == NULL) {
                    rc = -1;
                    break;
                }
                out->ngroups++;
                q = skip_blank(q, le);
            }
        }
#undef KEY
        if (bit == 0)
            continue;
        if (rc < 0 || (out->have & bit))
            return malformed(err, "/proc/<pid>/status");
        out->have |= bit;
    }
    return 0;
}

/* ---- mountinfo ---- */

/* One space-separated field, octal escapes (\040 and the like) undone. */
static const char *field(const char *p, const char *end, char *out, size_t olen)
{
    size_t n = 0;
    if (p >= end || *p == ' ')
        return NULL;
    while (p < end && *p != ' ') {
        char c = *p++;
        if (c == '\0')
            return NULL; /* the kernel writes none; as a string the field would be cut short */
        if (c == '\\') {
            if (end - p < 3)
                return NULL;
            int v = 0;
            for (int i = 0; i < 3; i++) {
                if (p[i] < '0' || p[i] > '7')
                    return NULL;
                v = v * 8 + (p[i] - '0');
            }
            if (v == 0 || v > 255)
                return NULL;
            c = (char)v;
            p += 3;
        }
        if (n + 1 >= olen)
            return NULL;
        out[n++] = c;
    }
    out[n] = '\0';
    return p < end ? p + 1 : p;
}

int pybox_np_option(const char *opts, const char *name, char *value, size_t len)
{
    size_t nl = strlen(name);
    for (const char *p = opts; *p;) {
        const char *comma = strchr(p, ',');
        size_t ol = comma ? (size_t)(comma - p) : strlen(p);
        if (ol >= nl && memcmp(p, name, nl) == 0 && (ol == nl || p[nl] == '=')) {
            const char *v = ol == nl ? "" : p + nl + 1;
            size_t vl = ol == nl ? 0 : ol - nl - 1;
            if (vl + 1 > len)
                return -1;
            memcpy(value, v, vl);
            value[vl] = '\0';
            return 1;
        }
        p += ol;
        if (*p == ',')
            p++;
    }
    return 0;
}

static unsigned mount_flags(const char *opts, bool *ok)
{
    unsigned f = 0;
    char v[8];
    bool ro = pybox_np_option(opts, "ro", v, sizeof v) == 1;
    bool rw = pybox_np_option(opts, "rw", v, sizeof v) == 1;
    *ok = ro != rw;
    if (ro)
        f |= PYBOX_NP_MNT_RO;
    if (pybox_np_option(opts, "nosuid", v, sizeof v) == 1)
        f |= PYBOX_NP_MNT_NOSUID;
    if (pybox_np_option(opts, "nodev", v, sizeof v) == 1)
        f |= PYBOX_NP_MNT_NODEV;
    if (pybox_np_option(opts, "noexec", v, sizeof v) == 1)
        f |= PYBOX_NP_MNT_NOEXEC;
    return f;
}

static int mount_line(const char *p, const char *end, pybox_np_mount_t *m)
{
    memset(m, 0, sizeof *m);
    int64_t id, parent, major, minor;
    char opts[512], tag[128];
    if ((p = dec(p, end, &id)) == NULL || p >= end || *p++ != ' ')
        return -1;
    if ((p = dec(p, end, &parent)) == NULL || p >= end || *p++ != ' ')
        return -1;
    if ((p = dec(p, end, &major)) == NULL || p >= end || *p++ != ':')
        return -1;
    if ((p = dec(p, end, &minor)) == NULL || p >= end || *p++ != ' ')
        return -1;
    if (id > INT32_MAX || parent > INT32_MAX || major > UINT32_MAX || minor > UINT32_MAX)
        return -1;
    if ((p = field(p, end, m->root, sizeof m->root)) == NULL)
        return -1;
    if ((p = field(p, end, m->point, sizeof m->point)) == NULL)
        return -1;
    if ((p = field(p, end, opts, sizeof opts)) == NULL)
        return -1;
    /* Optional fields up to the lone "-". */
    for (;;) {
        if ((p = field(p, end, tag, sizeof tag)) == NULL)
            return -1;
        if (strcmp(tag, "-") == 0)
            break;
        if (strncmp(tag, "shared:", 7) == 0 || strncmp(tag, "master:", 7) == 0)
            m->propagates = true;
    }
    if ((p = field(p, end, m->fstype, sizeof m->fstype)) == NULL)
        return -1;
    if ((p = field(p, end, m->source, sizeof m->source)) == NULL)
        return -1;
    if (p >= end)
        return -1;
    if ((p = field(p, end, m->super, sizeof m->super)) == NULL || p != end)
        return -1;
    bool ok;
    m->flags = mount_flags(opts, &ok);
    if (!ok)
        return -1;
    m->id = (int)id;
    m->parent = (int)parent;
    m->major = (unsigned)major;
    m->minor = (unsigned)minor;
    return 0;
}

int pybox_np_mountinfo_parse(const char *text, size_t len, size_t max, pybox_np_mount_t **out, size_t *n,
                             pybox_error_t *err)
{
    *out = NULL;
    *n = 0;
    const char *cur = text, *end = text + len, *p, *le;
    size_t lines = 0;
    for (const char *q = text; q < end; q++)
        lines += *q == '\n';
    if (len > 0 && text[len - 1] != '\n')
        lines++;
    if (lines > max)
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "/proc/<pid>/mountinfo: more than %zu mounts", max);
    pybox_np_mount_t *m = calloc(lines ? lines : 1, sizeof *m);
    if (m == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc(%zu mounts)", lines);
    size_t k = 0;
    while (next_line(&cur, end, &p, &le)) {
        if (k >= lines || mount_line(p, le, &m[k]) < 0) {
            free(m);
            return malformed(err, "/proc/<pid>/mountinfo");
        }
        k++;
    }
    *out = m;
    *n = k;
    return 0;
}

/* ---- limits ---- */

static const char *limit_value(const char *p, const char *end, int64_t *v)
{
    p = skip_blank(p, end);
    if (starts(p, end, "unlimited")) {
        *v = -1;
        return p + 9;
    }
    return dec(p, end, v);
}

int pybox_np_limit_parse(const char *text, size_t len, const char *name, int64_t *soft, int64_t *hard,
                         pybox_error_t *err)
{
    const char *cur = text, *end = text + len, *p, *le;
    size_t nl = strlen(name);
    while (next_line(&cur, end, &p, &le)) {
        /* The name is followed by two spaces at least: "Max open files" must not match
         * "Max open files and more". */
        if ((size_t)(le - p) < nl + 2 || memcmp(p, name, nl) != 0 || p[nl] != ' ' || p[nl + 1] != ' ')
            continue;
        const char *q = limit_value(p + nl, le, soft);
        if (q == NULL || q >= le || *q != ' ')
            return malformed(err, "/proc/<pid>/limits");
        q = limit_value(q, le, hard);
        if (q == NULL || (q < le && *q != ' '))
            return malformed(err, "/proc/<pid>/limits");
        return 0;
    }
    return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "/proc/<pid>/limits: no line for %s", name);
}

/* ---- stat and one-value files ---- */

static size_t trim(const char *text, size_t len);

/* A decimal with an optional '-'. */
static const char *sdec(const char *p, const char *end, int64_t *out)
{
    bool neg = p < end && *p == '-';
    const char *q = dec(neg ? p + 1 : p, end, out);
    if (q != NULL && neg)
        *out = -*out;
    return q;
}

int pybox_np_stat_parse(const char *text, size_t len, int64_t *nice, int64_t *policy, pybox_error_t *err)
{
    const char *end = text + len, *rp = NULL;
    for (const char *p = text; p < end; p++)
        if (*p == ')')
            rp = p;
    if (rp == NULL || rp + 1 >= end || rp[1] != ' ')
        return malformed(err, "/proc/<pid>/stat");
    bool have_nice = false, have_policy = false;
    const char *p = rp + 2;
    end = text + trim(text, len);
    /* Fields are single-space separated; the first after ')' is field 3. */
    for (int field = 3; p < end && !(have_nice && have_policy); field++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *fe = sp ? sp : end;
        if (field == 19 || field == 41) {
            int64_t v;
            if (sdec(p, fe, &v) != fe)
                return malformed(err, "/proc/<pid>/stat");
            if (field == 19) {
                *nice = v;
                have_nice = true;
            } else {
                *policy = v;
                have_policy = true;
            }
        }
        p = sp ? sp + 1 : end;
    }
    if (!have_nice || !have_policy)
        return malformed(err, "/proc/<pid>/stat");
    return 0;
}

int pybox_np_signed(const char *text, size_t len, int64_t *out, pybox_error_t *err)
{
    len = trim(text, len);
    if (sdec(text, text + len, out) != text + len)
        return malformed(err, "a number");
    return 0;
}

int pybox_np_hex(const char *text, size_t len, uint64_t *out, pybox_error_t *err)
{
    len = trim(text, len);
    if (hex64(text, text + len, out) != text + len)
        return malformed(err, "a hexadecimal number");
    return 0;
}

/* ---- cgroup membership ---- */

int pybox_np_cgroup_parse(const char *text, size_t len, const char *controller, char *path, size_t plen,
                          pybox_error_t *err)
{
    const char *cur = text, *end = text + len, *p, *le;
    while (next_line(&cur, end, &p, &le)) {
        const char *c1 = memchr(p, ':', (size_t)(le - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
        if (c2 == NULL)
            return malformed(err, "/proc/<pid>/cgroup");
        bool match = false;
        if (controller == NULL) {
            match = c1 - p == 1 && p[0] == '0' && c2 == c1 + 1;
        } else {
            size_t cl = strlen(controller);
            for (const char *q = c1 + 1; q < c2;) {
                const char *comma = memchr(q, ',', (size_t)(c2 - q));
                const char *qe = comma ? comma : c2;
                if ((size_t)(qe - q) == cl && memcmp(q, controller, cl) == 0)
                    match = true;
                q = qe + 1;
            }
        }
        if (!match)
            continue;
        size_t l = (size_t)(le - c2 - 1);
        if (l == 0 || c2[1] != '/' || l + 1 > plen)
            return malformed(err, "/proc/<pid>/cgroup");
        memcpy(path, c2 + 1, l);
        path[l] = '\0';
        return 0;
    }
    return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "/proc/<pid>/cgroup: no line for %s",
                           controller ? controller : "the unified hierarchy");
}

/* ---- id maps ---- */

int pybox_np_idmap_is(const char *text, size_t len, const int64_t (*want)[3], size_t n, pybox_error_t *err)
{
    const char *cur = text, *end = text + len, *p, *le;
    size_t lines = 0;
    bool seen[PYBOX_NP_IDMAP_MAX] = {false}, all = n <= PYBOX_NP_IDMAP_MAX;
    while (next_line(&cur, end, &p, &le)) {
        int64_t v[3];
        const char *q = p;
        for (int i = 0; i < 3; i++) {
            q = skip_blank(q, le);
            if ((q = dec(q, le, &v[i])) == NULL)
                return malformed(err, "/proc/<pid>/uid_map");
        }
        if (skip_blank(q, le) != le)
            return malformed(err, "/proc/<pid>/uid_map");
        lines++;
        bool found = false;
        for (size_t k = 0; all && k < n && !found; k++)
            if (!seen[k] && want[k][0] == v[0] && want[k][1] == v[1] && want[k][2] == v[2])
                found = seen[k] = true;
        all = all && found;
    }
    return all && lines == n ? 1 : 0;
}

int pybox_np_idmap_is_identity(const char *text, size_t len, pybox_error_t *err)
{
    static const int64_t identity[1][3] = {{0, 0, 4294967295LL}};
    return pybox_np_idmap_is(text, len, identity, 1, err);
}

/* ---- cgroup files ---- */

static size_t trim(const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    return len;
}

int pybox_np_cg_number(const char *text, size_t len, int64_t *out, pybox_error_t *err)
{
    len = trim(text, len);
    if (len == 3 && memcmp(text, "max", 3) == 0) {
        *out = -1;
        return 0;
    }
    const char *e = dec(text, text + len, out);
    if (e == NULL || e != text + len)
        return malformed(err, "cgroup file");
    return 0;
}

int pybox_np_cg_keyed(const char *text, size_t len, const char *key, int64_t *out, pybox_error_t *err)
{
    const char *cur = text, *end = text + len, *p, *le;
    size_t kl = strlen(key);
    while (next_line(&cur, end, &p, &le)) {
        if ((size_t)(le - p) <= kl || memcmp(p, key, kl) != 0 || p[kl] != ' ')
            continue;
        const char *q = dec(p + kl + 1, le, out);
        if (q == NULL || q != le)
            return malformed(err, "cgroup file");
        return 0;
    }
    return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "cgroup file: no line for %s", key);
}

int pybox_np_cg_procs(const char *text, size_t len, int64_t *count, pybox_error_t *err)
{
    const char *cur = text, *end = text + len, *p, *le;
    int64_t n = 0, pid;
    while (next_line(&cur, end, &p, &le)) {
        const char *q = dec(p, le, &pid);
        if (q == NULL || q != le || pid <= 0)
            return malformed(err, "cgroup.procs");
        n++;
    }
    *count = n;
    return 0;
}

int pybox_np_cg_cpu_max(const char *text, size_t len, int64_t *quota, int64_t *period, pybox_error_t *err)
{
    len = trim(text, len);
    const char *end = text + len, *p = text;
    if (starts(p, end, "max ")) {
        *quota = -1;
        p += 3;
    } else if ((p = dec(p, end, quota)) == NULL) {
        return malformed(err, "cpu.max");
    }
    if (p >= end || *p != ' ')
        return malformed(err, "cpu.max");
    p = dec(p + 1, end, period);
    if (p == NULL || p != end)
        return malformed(err, "cpu.max");
    return 0;
}
