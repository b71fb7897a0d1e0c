/* SPDX-License-Identifier: MIT */
/* The evidence store and its pages (see evidence.h). */
#include "evidence.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pybox/box.h"
#include "../pybox/escape.h"
#include "../pybox/key.h"
#include "../pybox/sign.h"
#include "../pybox/state.h"
#include "../pybox/util.h"
#include "page.h"
#include "site.h"

int ev_record_store(const char *dir, const cJSON *record, char name[80], pybox_error_t *err)
{
    char *text = cJSON_Print(record);
    if (text == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "printing a record");
    size_t len = strlen(text);
    char hex[65];
    pybox_sha256_hex(text, len, hex);
    snprintf(name, 80, "%s.json", hex);
    char rdir[PATH_MAX], path[PATH_MAX];
    if (pybox_fmt(rdir, sizeof rdir, "%s/%s", dir, EV_RECORDS) < 0 ||
        pybox_fmt(path, sizeof path, "%s/%s", rdir, name) < 0) {
        free(text);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: path too long", dir);
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        free(text);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "mkdir(%s)", dir);
    }
    if (mkdir(rdir, 0755) < 0 && errno != EEXIST) {
        free(text);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "mkdir(%s)", rdir);
    }
    struct stat sb;
    if (stat(path, &sb) == 0) { /* same name, same bytes: already kept */
        free(text);
        return 0;
    }
    int rc = pybox_write_file_atomic(path, text, len, 0644, err);
    free(text);
    return rc;
}

/* ---- reading records ---- */

typedef struct {
    char name[80];
    cJSON *j;
    const char *id, *kind, *started, *verdict;
    const char *backend; /* what built its boxes ("docker" for records that say none) */
    char column[96];     /* the pages' column: the backend, and the kind of host when not this one's */
} rec_t;

static int read_file(const char *path, char **out, size_t *len)
{
    /* Regular files only: a FIFO or a device is never waited on. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (fd < 0)
        return -1;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return -1;
    }
    bool over = false;
    pybox_error_t err = {0};
    int rc = pybox_read_bounded(fd, 64 * 1024 * 1024, out, len, &over, &err);
    close(fd);
    return rc < 0 || over ? -1 : 0;
}

static bool is_record_name(const char *n)
{
    if (strlen(n) != 69 || strcmp(n + 64, ".json") != 0)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return false;
    return true;
}

static const char *str_at(const cJSON *j, const char *path)
{
    const cJSON *v = ev_path(j, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "2026-11-30T01:02:03.456Z", as the campaign writes times. */
static bool is_time(const char *t)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (t == NULL || strlen(t) != sizeof shape - 1)
        return false;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? !(t[i] >= '0' && t[i] <= '9') : t[i] != shape[i])
            return false;
    return true;
}

/* The verdict a record's own contents support: "pass" only when it holds no error, has
 * runs, and every run, expectation, driver check and agreement is ok. A record whose
 * "verdict" says otherwise is not used. */
static const char *derived_verdict(const cJSON *j)
{
    if (ev_path(j, "error") != NULL || cJSON_GetArraySize(ev_path(j, "runs")) == 0)
        return "fail";
    const cJSON *run, *x;
    cJSON_ArrayForEach (run, ev_path(j, "runs")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(run, "ok")) ||
            cJSON_GetObjectItemCaseSensitive(run, "error") != NULL)
            return "fail";
        cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive(run, "expect"))
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "ok")))
                return "fail";
        cJSON_ArrayForEach (x, ev_path(run, "observed.checks"))
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "ok")))
                return "fail";
    }
    cJSON_ArrayForEach (x, ev_path(j, "agree"))
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "ok")))
            return "fail";
    return "pass";
}

/* Backends in the registry's order, then any other name a record gives, by name. */
static int backend_rank(const char *b)
{
    const pybox_backend_ops_t *ops;
    for (size_t i = 0; (ops = pybox_backend_nth(i)) != NULL; i++)
        if (strcmp(ops->name, b) == 0)
            return (int)i;
    return 1000;
}

static int backend_cmp(const char *a, const char *b)
{
    int ra = backend_rank(a), rb = backend_rank(b);
    return ra != rb ? (ra < rb ? -1 : 1) : strcmp(a, b);
}

/* A record's column: its backend alone on a host of cgroup v1 (the machines the campaign
 * first ran on), else the backend and the kind of host (the campaign's cases run in a
 * Debian guest as shipped: cgroup v2 under systemd), so each kind of host has columns of
 * its own beside the others; a campaign run by an ordinary user (host.rootless) has its
 * own again: the native backend's boxes rootless, the engine's made for a user. */
static void column_of(rec_t *r)
{
    const char *cg = str_at(r->j, "host.cgroup"), *mgr = str_at(r->j, "host.cgroup_manager");
    const char *user = "";
    if (cJSON_IsTrue(ev_path(r->j, "host.rootless")))
        user = strcmp(r->backend, "native") == 0 ? ", rootless" : ", as an ordinary user";
    if (cg == NULL || strcmp(cg, "v2") != 0) {
        snprintf(r->column, sizeof r->column, "%s%s", r->backend, user);
        return;
    }
    bool systemd = mgr != NULL && strcmp(mgr, "systemd") == 0;
    snprintf(r->column, sizeof r->column, "%s, cgroup v2%s%s", r->backend, systemd ? " (systemd)" : "", user);
}

/* Columns: by backend, then a backend's own host first. */
static int column_cmp(const rec_t *x, const rec_t *y)
{
    int c = backend_cmp(x->backend, y->backend);
    return c != 0 ? c : strcmp(x->column, y->column);
}

/* A record whose campaign names its receipt key (host.receipt_key: the public key, PEM)
 * holds receipts that key signed: each must verify, unchanged since. Records of
 * campaigns from before receipts were signed name no key. True when one does not. */
static bool receipts_problem(const cJSON *j, const char *name, pybox_buf_t *problems)
{
    const cJSON *pem = ev_path(j, "host.receipt_key");
    if (pem == NULL)
        return false;
    pybox_key_t *k = NULL;
    pybox_error_t err = {0};
    if (!cJSON_IsString(pem) || pybox_key_from_pem(pem->valuestring, strlen(pem->valuestring), &k, &err) < 0) {
        pybox_buf_addf(problems, "%s/%s: host.receipt_key: %s\n", EV_RECORDS, name,
                       err.msg[0] ? err.msg : "not a PEM text");
        return true;
    }
    static const char *const which[] = {"receipt", "hold_receipt"};
    const pybox_key_t *keys[] = {k};
    bool bad = false;
    int i = 0;
    const cJSON *run;
    cJSON_ArrayForEach (run, ev_path(j, "runs")) {
        for (size_t w = 0; w < sizeof which / sizeof *which; w++) {
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(run, which[w]);
            if (r == NULL)
                continue;
            pybox_sig_check_t c;
            pybox_sign_verify(r, keys, 1, &c);
            if (c.verdict != PYBOX_SIG_VALID) {
                pybox_buf_addf(problems, "%s/%s: runs.%d.%s: %s\n", EV_RECORDS, name, i, which[w], c.why);
                bad = true;
            }
        }
        i++;
    }
    pybox_key_free(k);
    return bad;
}

static int rec_cmp(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    int c = strcmp(x->kind, y->kind);
    if (c == 0)
        c = strcmp(x->id, y->id);
    if (c == 0)
        c = column_cmp(x, y);
    if (c == 0)
        c = strcmp(x->started, y->started);
    if (c == 0)
        c = strcmp(x->name, y->name);
    return c;
}

static int load(const char *dir, rec_t **out, size_t *n, pybox_buf_t *problems)
{
    char rdir[PATH_MAX];
    if (pybox_fmt(rdir, sizeof rdir, "%s/%s", dir, EV_RECORDS) < 0)
        return -1;
    *out = NULL;
    *n = 0;
    struct stat sb;
    if (lstat(rdir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        pybox_buf_addf(problems, "%s: not a folder (a link is not followed)\n", EV_RECORDS);
        return -1;
    }
    DIR *d = opendir(rdir);
    if (d == NULL) {
        if (errno == ENOENT)
            return 0;
        char etext[128];
        pybox_buf_addf(problems, "%s: %s\n", rdir, pybox_strerror(errno, etext, sizeof etext));
        return -1;
    }
    int bad = 0;
    size_t cap = 0;
    rec_t *v = NULL;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (!is_record_name(de->d_name)) {
            pybox_buf_addf(problems, "%s/%s: not a record name (<sha256>.json)\n", EV_RECORDS, de->d_name);
            bad++;
            continue;
        }
        char path[PATH_MAX], *text = NULL, hex[65];
        size_t len = 0;
        if (pybox_fmt(path, sizeof path, "%s/%s", rdir, de->d_name) < 0 || read_file(path, &text, &len) < 0) {
            pybox_buf_addf(problems, "%s/%s: cannot be read\n", EV_RECORDS, de->d_name);
            bad++;
            continue;
        }
        pybox_sha256_hex(text, len, hex);
        if (strncmp(hex, de->d_name, 64) != 0) {
            pybox_buf_addf(problems, "%s/%s: its SHA-256 is %s: the record was changed\n", EV_RECORDS, de->d_name, hex);
            bad++;
            free(text);
            continue;
        }
        cJSON *j = cJSON_ParseWithLength(text, len);
        free(text);
        rec_t r = {.j = j};
        snprintf(r.name, sizeof r.name, "%s", de->d_name);
        const cJSON *schema = ev_path(j, "schema");
        r.id = str_at(j, "case.id");
        r.kind = str_at(j, "case.kind");
        r.started = str_at(j, "started");
        r.verdict = str_at(j, "verdict");
        r.backend = str_at(j, "backend") ? str_at(j, "backend") : "docker";
        column_of(&r);
        if (j == NULL || !cJSON_IsString(schema) || strcmp(schema->valuestring, EV_SCHEMA) != 0 || !r.id || !r.kind ||
            !r.started || !r.verdict || !is_time(r.started) || !is_time(str_at(j, "finished"))) {
            pybox_buf_addf(problems, "%s/%s: not a %s record\n", EV_RECORDS, de->d_name, EV_SCHEMA);
            bad++;
            cJSON_Delete(j);
            continue;
        }
        const char *derived = derived_verdict(j);
        if (strcmp(r.verdict, derived) != 0) {
            char said_v[80];
            pybox_escape_short(said_v, sizeof said_v, r.verdict, 32); /* the report goes to a terminal */
            pybox_buf_addf(problems, "%s/%s: says \"%s\" but its runs say \"%s\"\n", EV_RECORDS, de->d_name, said_v,
                           derived);
            bad++;
            cJSON_Delete(j);
            continue;
        }
        if (receipts_problem(j, de->d_name, problems)) {
            bad++;
            cJSON_Delete(j);
            continue;
        }
        if (pybox_grow(&v, &cap, *n, sizeof *v, 64) < 0)
            abort();
        v[(*n)++] = r;
    }
    closedir(d);
    if (*n > 0)
        qsort(v, *n, sizeof *v, rec_cmp);
    *out = v;
    return bad;
}

/* ---- pages ---- */

static const struct {
    const char *kind, *title, *about;
} kinds[] = {
    {"restriction", "Restriction checks",
     "Each check runs the same probe twice: with PyBox's policy, and with only the named protection removed "
     "(a relaxed policy the library allows for tests, never the command line; such receipts say "
     "`RELAXED_FOR_A_TEST`). A check passes only if the escape is blocked with the protection and observed "
     "without it. The probe's own words are quoted; they are the program's output."},
    {"resource", "Resource checks", "Limits read straight from the kernel's cgroup files by PyBox's watcher."},
    {"receipt", "Receipt passes", "Each kind of run three times; the verdict fields must agree across the passes."},
    {"crash", "Crash safety",
     "PyBox itself killed mid-run: what the box's timer did, as the engine's record and event log say (docker) or "
     "the kernel's waitid of the box's init (native)."},
    {"files", "Files in and out", "Inputs, outputs and their refusals, through `pybox exec`."},
    {"images", "Images", "The stdlib and data images and their refusals."},
    {"mcp", "MCP server", "`pybox mcp` driven by the official MCP TypeScript SDK client and a raw client."},
    {"lifecycle", "Throwaway installation",
     "PyBox set up from nothing in an installation of its own, used, then deleted: on a second, private engine for "
     "the docker backend, with no daemon at all for the native one."},
    {"performance", "Performance",
     "Complete runs of both backends side by side with bare bubblewrap (`bwrap --unshare-all`, the same root "
     "filesystem) and `docker run --rm -i` under the same limits, interleaved; `make bench` runs the same."},
    {"reliability", "Reliability",
     "Many runs and calls in a row: wrong exit codes or status words, unparsable receipts, lost or duplicated ids, "
     "what was left behind, and the MCP server's memory and descriptors over time."},
    {"session", "Sessions",
     "One sealed box kept for many calls (pybox session open, pybox exec --session): state across calls, what "
     "ends a session, what one session sees of another, and what its code can make its receipt say."},
    {"faults", "Fault cases",
     "The engine killed or frozen mid-run, a full or read-only state directory, PyBox killed at each phase: what "
     "PyBox says, how each box ends, and what cleanup leaves."},
};
#define NKINDS (sizeof kinds / sizeof *kinds)

static int kind_index(const char *k)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (strcmp(kinds[i].kind, k) == 0)
            return (int)i;
    return -1;
}

static void link_record(pybox_buf_t *b, const rec_t *r)
{
    pybox_buf_addf(b, "[%.8s](%s/%s)", r->name, EV_RECORDS, r->name);
}

static void when(pybox_buf_t *b, const rec_t *r)
{
    /* "2026-11-30T01:02:03.456Z" -> "2026-11-30 01:02" */
    pybox_buf_addf(b, "%.10s %.5s", r->started, strlen(r->started) > 16 ? r->started + 11 : "");
}

/* The first failed expectation or agreement of a record, for the verdict cell. */
static void why_failed(pybox_buf_t *b, const rec_t *r)
{
    const cJSON *err = ev_path(r->j, "error");
    if (cJSON_IsString(err)) {
        ev_cell_text(b, err->valuestring);
        return;
    }
    static const char *const expectation[] = {"path", " ", "op", " ", "want", ", got ", "got", NULL};
    static const char *const check[] = {"name", ": ", "detail", NULL};
    const cJSON *run, *x;
    cJSON_ArrayForEach (run, ev_path(r->j, "runs")) {
        if ((x = ev_first_failed(cJSON_GetObjectItemCaseSensitive(run, "expect"))) != NULL) {
            ev_cell(b, cJSON_GetObjectItemCaseSensitive(run, "name"));
            pybox_buf_adds(b, ": ");
            ev_fields(b, ev_cell, x, expectation);
            return;
        }
        if ((x = ev_first_failed(ev_path(run, "observed.checks"))) != NULL) {
            ev_fields(b, ev_cell, x, check);
            return;
        }
    }
    if ((x = ev_first_failed(ev_path(r->j, "agree"))) != NULL) {
        pybox_buf_adds(b, "passes disagree on ");
        ev_cell(b, cJSON_GetObjectItemCaseSensitive(x, "path"));
        return;
    }
    pybox_buf_adds(b, "failed");
}

static void verdict(pybox_buf_t *b, const rec_t *r)
{
    if (strcmp(r->verdict, "pass") == 0) {
        pybox_buf_adds(b, "pass");
        return;
    }
    pybox_buf_adds(b, "**FAIL**: ");
    why_failed(b, r);
}

/* The case's chosen values ("show": [{"label", "path"}]) for one run. */
static void shown(pybox_buf_t *b, const cJSON *c, const cJSON *run)
{
    const cJSON *s;
    int k = 0;
    cJSON_ArrayForEach (s, cJSON_GetObjectItemCaseSensitive(c, "show")) {
        const char *label = str_at(s, "label"), *path = str_at(s, "path");
        if (path == NULL)
            continue;
        if (k++)
            pybox_buf_adds(b, "; ");
        if (label && *label) {
            ev_cell_text(b, label);
            pybox_buf_adds(b, " ");
        }
        ev_cell(b, ev_path(run, path));
    }
    if (k == 0)
        pybox_buf_adds(b, "—");
}

static const cJSON *run_named(const cJSON *rec, const char *name)
{
    const cJSON *run;
    cJSON_ArrayForEach (run, ev_path(rec, "runs")) {
        const char *n = str_at(run, "name");
        if (n && strcmp(n, name) == 0)
            return run;
    }
    return NULL;
}

static int passes_of(const cJSON *rec, const char *name)
{
    int k = 0;
    const cJSON *run;
    cJSON_ArrayForEach (run, ev_path(rec, "runs")) {
        const char *n = str_at(run, "name");
        k += n && strcmp(n, name) == 0;
    }
    return k;
}

/* A cell's last line: the verdict, when, and the record. */
static void verdict_line(pybox_buf_t *b, const rec_t *r)
{
    pybox_buf_adds(b, "<br>");
    verdict(b, r);
    pybox_buf_adds(b, " · ");
    when(b, r);
    pybox_buf_adds(b, " · ");
    link_record(b, r);
}

/* One backend's cell of a restriction check: both runs' words, the verdict, when, the
 * record. */
static void restriction_cell(pybox_buf_t *b, const rec_t *r)
{
    const cJSON *c = ev_path(r->j, "case");
    const cJSON *with = run_named(r->j, "with"), *without = run_named(r->j, "without");
    pybox_buf_adds(b, "*with:* ");
    shown(b, c, with);
    pybox_buf_adds(b, "<br>*without:* ");
    shown(b, c, without);
    /* the same two inside a session, when the campaign ran them there */
    const cJSON *in_with = run_named(r->j, "with in a session"), *in_without = run_named(r->j, "without in a session");
    if (in_with != NULL || in_without != NULL) {
        pybox_buf_adds(b, "<br>*in a session, as its second call:* with ");
        pybox_buf_adds(b, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(in_with, "ok")) ? "✓" : "✗");
        pybox_buf_adds(b, ", without ");
        pybox_buf_adds(b, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(in_without, "ok")) ? "✓" : "✗");
    }
    verdict_line(b, r);
}

/* What was removed for the "without" run (and what both runs had), from a record. */
static void removed_cell(pybox_buf_t *b, const rec_t *r)
{
    const cJSON *with = run_named(r->j, "with"), *without = run_named(r->j, "without");
    ev_cell(b, cJSON_GetObjectItemCaseSensitive(without, "removed"));
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(with, "relaxed");
    if (cJSON_IsString(base) && base->valuestring[0]) {
        pybox_buf_adds(b, " (both runs: ");
        ev_cell(b, base);
        pybox_buf_adds(b, ")");
    }
}

/* One backend's cell of any other case: each distinct run (its first pass, with how many
 * passes it had), its checks and chosen values; the verdict, when, the record. */
static void generic_cell(pybox_buf_t *b, const rec_t *r)
{
    const cJSON *c = ev_path(r->j, "case");
    const cJSON *run;
    int k = 0;
    cJSON_ArrayForEach (run, ev_path(r->j, "runs")) {
        const char *name = str_at(run, "name");
        if (name == NULL || run_named(r->j, name) != run)
            continue;
        if (k++)
            pybox_buf_adds(b, "<br>");
        int passes = passes_of(r->j, name);
        if (cJSON_GetArraySize(ev_path(r->j, "runs")) > 1 || passes > 1) {
            pybox_buf_adds(b, "*");
            ev_cell_text(b, name);
            if (passes > 1)
                pybox_buf_addf(b, ", %d passes", passes);
            pybox_buf_adds(b, "*: ");
        }
        const cJSON *checks = ev_path(run, "observed.checks");
        if (cJSON_IsArray(checks)) {
            const cJSON *x;
            int m = 0;
            cJSON_ArrayForEach (x, checks) {
                if (m++)
                    pybox_buf_adds(b, "<br>");
                pybox_buf_adds(b, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "ok")) ? "✓ " : "✗ ");
                ev_cell(b, cJSON_GetObjectItemCaseSensitive(x, "name"));
                pybox_buf_adds(b, ": ");
                ev_cell(b, cJSON_GetObjectItemCaseSensitive(x, "detail"));
            }
        }
        if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "show")) > 0) {
            if (cJSON_IsArray(checks))
                pybox_buf_adds(b, "<br>");
            shown(b, c, run);
        }
    }
    verdict_line(b, r);
}

/* The columns records name (a record of each), in the registry's order. */
typedef struct {
    const rec_t *v[8];
    size_t n;
} backends_t;

static void backends_of(const rec_t *v, size_t nv, backends_t *out)
{
    out->n = 0;
    for (size_t i = 0; i < nv; i++) {
        size_t k = 0;
        while (k < out->n && strcmp(out->v[k]->column, v[i].column) != 0)
            k++;
        if (k == out->n && out->n < 8)
            out->v[out->n++] = &v[i];
    }
    for (size_t i = 1; i < out->n; i++)
        for (size_t k = i; k > 0 && column_cmp(out->v[k - 1], out->v[k]) > 0; k--) {
            const rec_t *t = out->v[k];
            out->v[k] = out->v[k - 1];
            out->v[k - 1] = t;
        }
}

/* One row per case: its title and claim (from the latest record of any backend), then a
 * cell per backend with that backend's latest record ("not run" when it has none). */
static void case_row(pybox_buf_t *b, const rec_t *v, size_t nv, const bool *latest, size_t first, const backends_t *bk,
                     bool restriction)
{
    const rec_t *any = &v[first];
    for (size_t i = first; i < nv && strcmp(v[i].kind, any->kind) == 0 && strcmp(v[i].id, any->id) == 0; i++)
        if (latest[i] && strcmp(v[i].started, any->started) > 0)
            any = &v[i];
    const cJSON *c = ev_path(any->j, "case");
    pybox_buf_adds(b, "| ");
    ev_cell(b, cJSON_GetObjectItemCaseSensitive(c, "title"));
    pybox_buf_adds(b, " | ");
    ev_cell(b, cJSON_GetObjectItemCaseSensitive(c, "claim"));
    if (restriction) {
        pybox_buf_adds(b, " | ");
        removed_cell(b, any);
    }
    for (size_t k = 0; k < bk->n; k++) {
        const rec_t *r = NULL;
        for (size_t i = first; i < nv && strcmp(v[i].kind, any->kind) == 0 && strcmp(v[i].id, any->id) == 0; i++)
            if (latest[i] && strcmp(v[i].column, bk->v[k]->column) == 0)
                r = &v[i];
        pybox_buf_adds(b, " | ");
        if (r == NULL)
            pybox_buf_adds(b, "not run");
        else if (restriction)
            restriction_cell(b, r);
        else
            generic_cell(b, r);
    }
    pybox_buf_adds(b, " |\n");
}

#define GENERATED                                                                                                      \
    "<!-- Generated by `make campaign` from the replay records in records/ only; do not edit. "                        \
    "`make evidence-check` verifies every record's SHA-256 and that this page is exactly what they render to. -->\n\n"

/* Whether two records ran on one kind of host: the part of their columns after the
 * backend (nothing for a host of cgroup v1). */
static bool same_host(const rec_t *a, const rec_t *b)
{
    return strcmp(a->column + strlen(a->backend), b->column + strlen(b->backend)) == 0;
}

static void host_line(pybox_buf_t *b, const rec_t *r)
{
    static const char *const host[] = {"host.kernel", ", ", "host.cpus", " CPUs, cgroup ", "host.cgroup", NULL};
    pybox_buf_adds(b, "kernel ");
    ev_fields(b, ev_cell, r->j, host);
    /* A slower machine's runs had their deadlines grown (pybox-campaign run --time-scale). */
    const cJSON *scale = ev_path(r->j, "host.time_scale");
    if (cJSON_IsNumber(scale)) {
        pybox_buf_adds(b, ", every deadline ");
        ev_cell(b, scale);
        pybox_buf_adds(b, " times the case's (a slower machine)");
    }
    const cJSON *bk = ev_path(r->j, "host.backends");
    if (!cJSON_IsObject(bk)) {
        pybox_buf_adds(b, ", ");
        ev_cell(b, ev_path(r->j, "host.engine"));
        return;
    }
    const cJSON *x;
    cJSON_ArrayForEach (x, bk) {
        pybox_buf_adds(b, "; ");
        ev_cell_text(b, x->string ? x->string : "?");
        pybox_buf_adds(b, ": ");
        ev_cell(b, x);
    }
}

int ev_render(const char *dir, const char *limits_md, ev_page_t **pages, size_t *n, pybox_buf_t *problems)
{
    rec_t *v = NULL;
    size_t nv = 0;
    *pages = NULL;
    *n = 0;
    int bad = load(dir, &v, &nv, problems);
    if (bad < 0)
        return -1;
    /* The latest attempt of each case; earlier ones are kept, failed ones listed. */
    bool *latest = calloc(nv + 1, sizeof *latest);
    for (size_t i = 0; i < nv; i++)
        latest[i] = i + 1 == nv || strcmp(v[i].kind, v[i + 1].kind) != 0 || strcmp(v[i].id, v[i + 1].id) != 0 ||
                    strcmp(v[i].column, v[i + 1].column) != 0;
    backends_t bk;
    backends_of(v, nv, &bk);
    for (size_t i = 0; i < nv; i++)
        if (kind_index(v[i].kind) < 0) {
            char kind[80];
            pybox_escape_short(kind, sizeof kind, v[i].kind, 32); /* the report goes to a terminal */
            pybox_buf_addf(problems, "%s/%s: unknown kind \"%s\"\n", EV_RECORDS, v[i].name, kind);
            bad++;
        }
    const rec_t *newest = NULL;
    for (size_t i = 0; i < nv; i++)
        if (newest == NULL || strcmp(v[i].started, newest->started) > 0)
            newest = &v[i];

    ev_page_t *index = ev_page_add(pages, n, "README.md");
    pybox_buf_t *ix = &index->text;
    pybox_buf_adds(ix, "# Evidence and limits\n\n" GENERATED);
    pybox_buf_adds(ix, "Every claim below points to a real, dated run of `make campaign`, kept as a replay "
                       "record (JSON: the receipt, timings, kernel samples, the engine and kernel versions) "
                       "named by its SHA-256. Anyone can rerun the campaign; CI reruns a fast part of it.\n\n");
    if (newest != NULL) {
        pybox_buf_adds(ix, "Latest record: ");
        when(ix, newest);
        pybox_buf_adds(ix, " UTC, campaign ");
        ev_cell(ix, ev_path(newest->j, "campaign"));
        pybox_buf_adds(ix, "; ");
        host_line(ix, newest);
        pybox_buf_adds(ix, ".\n\n");
    } else {
        pybox_buf_adds(ix, "No records yet: run `make campaign`.\n\n");
    }
    /* Per backend: its cases passed of those it ran. */
    pybox_buf_adds(ix, "| Kind | Cases |");
    for (size_t k = 0; k < bk.n; k++) {
        pybox_buf_adds(ix, " Passed on ");
        ev_cell_text(ix, bk.v[k]->column);
        pybox_buf_adds(ix, " |");
    }
    pybox_buf_adds(ix, " Runs recorded | Page |\n|---|---|");
    for (size_t k = 0; k < bk.n; k++)
        pybox_buf_adds(ix, "---|");
    pybox_buf_adds(ix, "---|---|\n");
    for (size_t k = 0; k < NKINDS; k++) {
        int cases = 0, runs = 0, passed[8] = {0}, ran[8] = {0};
        for (size_t i = 0; i < nv; i++) {
            if (strcmp(v[i].kind, kinds[k].kind) != 0)
                continue;
            bool first_of_case = i == 0 || strcmp(v[i - 1].kind, v[i].kind) != 0 || strcmp(v[i - 1].id, v[i].id) != 0;
            cases += first_of_case;
            if (!latest[i])
                continue;
            runs += cJSON_GetArraySize(ev_path(v[i].j, "runs"));
            for (size_t b = 0; b < bk.n; b++)
                if (strcmp(v[i].column, bk.v[b]->column) == 0) {
                    ran[b]++;
                    passed[b] += strcmp(v[i].verdict, "pass") == 0;
                }
        }
        pybox_buf_addf(ix, "| %s | %d |", kinds[k].title, cases);
        for (size_t b = 0; b < bk.n; b++)
            pybox_buf_addf(ix, " %d of %d |", passed[b], ran[b]);
        pybox_buf_addf(ix, " %d | [%s.md](%s.md) |\n", runs, kinds[k].kind, kinds[k].kind);

        ev_page_t *pg = NULL;
        char pname[64];
        snprintf(pname, sizeof pname, "%s.md", kinds[k].kind);
        pg = ev_page_add(pages, n, pname);
        ix = &(*pages)[0].text; /* ev_page_add may have moved the pages */
        pybox_buf_t *b = &pg->text;
        pybox_buf_addf(b, "# %s\n\n" GENERATED "%s\n\n", kinds[k].title, kinds[k].about);
        if (cases == 0) {
            pybox_buf_adds(b, "No records yet.\n");
            continue;
        }
        bool restriction = strcmp(kinds[k].kind, "restriction") == 0;
        /* A column per backend: what it did, its verdict, when (UTC), its record. */
        pybox_buf_adds(b, restriction ? "| Check | Claim | Removed for the \"without\" run |" : "| Case | Claim |");
        for (size_t x = 0; x < bk.n; x++) {
            pybox_buf_adds(b, " On ");
            ev_cell_text(b, bk.v[x]->column);
            pybox_buf_adds(b, " |");
        }
        pybox_buf_adds(b, restriction ? "\n|---|---|---|" : "\n|---|---|");
        for (size_t x = 0; x < bk.n; x++)
            pybox_buf_adds(b, "---|");
        pybox_buf_adds(b, "\n");
        for (size_t i = 0; i < nv; i++) {
            if (strcmp(v[i].kind, kinds[k].kind) != 0)
                continue;
            bool first_of_case = i == 0 || strcmp(v[i - 1].kind, v[i].kind) != 0 || strcmp(v[i - 1].id, v[i].id) != 0;
            if (first_of_case)
                case_row(b, v, nv, latest, i, &bk, restriction);
        }
        /* The machine of each column's latest record when the columns ran on different
         * hosts, else the one machine. */
        const rec_t *h = NULL, *of[8] = {NULL};
        bool hosts_differ = false;
        for (size_t i = 0; i < nv; i++) {
            if (strcmp(v[i].kind, kinds[k].kind) != 0 || !latest[i])
                continue;
            if (h != NULL && !same_host(h, &v[i]))
                hosts_differ = true;
            if (h == NULL || strcmp(v[i].started, h->started) > 0)
                h = &v[i];
            for (size_t x = 0; x < bk.n; x++)
                if (strcmp(v[i].column, bk.v[x]->column) == 0 &&
                    (of[x] == NULL || strcmp(v[i].started, of[x]->started) > 0))
                    of[x] = &v[i];
        }
        if (!hosts_differ) {
            pybox_buf_adds(b, "\nMachine of the latest record: ");
            host_line(b, h);
            pybox_buf_adds(b, ".\n");
        } else {
            pybox_buf_adds(b, "\nMachines of each column's latest record:\n\n");
            for (size_t x = 0; x < bk.n; x++) {
                if (of[x] == NULL)
                    continue;
                pybox_buf_adds(b, "- on ");
                ev_cell_text(b, of[x]->column);
                pybox_buf_adds(b, ": ");
                host_line(b, of[x]);
                pybox_buf_adds(b, "\n");
            }
        }
    }
    ix = &(*pages)[0].text;
    pybox_buf_adds(ix, "\n## Failed attempts (kept, never overwritten)\n\n");
    int failed = 0;
    for (size_t i = 0; i < nv; i++) {
        if (strcmp(v[i].verdict, "pass") == 0)
            continue;
        if (failed++ == 0)
            pybox_buf_adds(ix, "| Case | When (UTC) | What failed | Latest attempt of its case | Record |\n"
                               "|---|---|---|---|---|\n");
        pybox_buf_adds(ix, "| ");
        ev_cell(ix, ev_path(v[i].j, "case.kind"));
        pybox_buf_adds(ix, "/");
        ev_cell(ix, ev_path(v[i].j, "case.id"));
        pybox_buf_adds(ix, " on ");
        ev_cell_text(ix, v[i].column);
        pybox_buf_adds(ix, " | ");
        when(ix, &v[i]);
        pybox_buf_adds(ix, " | ");
        why_failed(ix, &v[i]);
        pybox_buf_addf(ix, " | %s | ", latest[i] ? "yes" : "no, a later one exists");
        link_record(ix, &v[i]);
        pybox_buf_adds(ix, " |\n");
    }
    if (failed == 0)
        pybox_buf_adds(ix, "None recorded.\n");
    pybox_buf_addf(ix, "\nRecords in `records/`: %zu.\n\n", nv);
    if (limits_md != NULL)
        pybox_buf_adds(ix, limits_md);
    /* The site: the same pages in HTML, and a page per run the pages cite. */
    ev_site_rec_t *sr = calloc(nv + 1, sizeof *sr);
    if (sr == NULL)
        abort();
    for (size_t i = 0; i < nv; i++)
        sr[i] =
            (ev_site_rec_t){.name = v[i].name, .j = v[i].j, .shown = latest[i] || strcmp(v[i].verdict, "pass") != 0};
    bad += ev_site_render(sr, nv, pages, n, problems);
    free(sr);
    for (size_t i = 0; i < nv; i++)
        cJSON_Delete(v[i].j);
    free(v);
    free(latest);
    return bad;
}

/* Render, with the records' problems listed on report. */
static int render_reported(const char *dir, const char *limits_md, ev_page_t **pages, size_t *n, FILE *report)
{
    pybox_buf_t problems;
    pybox_buf_init(&problems, 0);
    int bad = ev_render(dir, limits_md, pages, n, &problems);
    if (problems.len)
        fputs(problems.data, report);
    pybox_buf_free(&problems);
    return bad;
}

/* Whether a page of that name was rendered. */
static bool rendered(const ev_page_t *pages, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pages[i].name, name) == 0)
            return true;
    return false;
}

/* The site's folders: made when missing, never a link followed. */
static int site_dirs(const char *dir, FILE *report)
{
    static const char *const sub[] = {EV_SITE, EV_SITE_RUNS};
    for (size_t i = 0; i < 2; i++) {
        char path[PATH_MAX];
        struct stat sb;
        if (pybox_fmt(path, sizeof path, "%s/%s", dir, sub[i]) < 0)
            return -1;
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            char etext[128];
            fprintf(report, "%s: %s\n", sub[i], pybox_strerror(errno, etext, sizeof etext));
            return -1;
        }
        if (lstat(path, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(report, "%s: not a folder (a link is not followed)\n", sub[i]);
            return -1;
        }
    }
    return 0;
}

/* The site's files that the records no longer render (a run page of an attempt since
 * superseded): listed on report by the check, removed when the pages are written. */
static int site_strays(const char *dir, const ev_page_t *pages, size_t n, bool remove, FILE *report)
{
    static const char *const sub[] = {EV_SITE, EV_SITE_RUNS};
    int bad = 0;
    for (size_t k = 0; k < 2; k++) {
        char path[PATH_MAX];
        struct stat sb;
        if (pybox_fmt(path, sizeof path, "%s/%s", dir, sub[k]) < 0)
            return bad + 1;
        if (lstat(path, &sb) < 0) {
            if (errno != ENOENT)
                bad++;
            continue; /* a missing site: its pages are reported missing */
        }
        if (!S_ISDIR(sb.st_mode)) {
            fprintf(report, "%s: not a folder (a link is not followed)\n", sub[k]);
            bad++;
            continue;
        }
        DIR *d = opendir(path);
        struct dirent *de;
        while (d != NULL && (de = readdir(d)) != NULL) {
            char name[PATH_MAX], full[PATH_MAX];
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                (k == 0 && strcmp(de->d_name, "runs") == 0) ||
                pybox_fmt(name, sizeof name, "%s/%s", sub[k], de->d_name) < 0 || rendered(pages, n, name))
                continue;
            size_t l = strlen(de->d_name);
            bool html = l > 5 && strcmp(de->d_name + l - 5, ".html") == 0;
            if (remove && html && pybox_fmt(full, sizeof full, "%s/%s", dir, name) == 0 && lstat(full, &sb) == 0 &&
                S_ISREG(sb.st_mode) && unlink(full) == 0)
                continue;
            fprintf(report, "%s: a page no record renders to\n", name);
            bad++;
        }
        if (d)
            closedir(d);
    }
    return bad;
}

/* The pages written into dir, stray site pages removed. The number of problems. */
static int write_pages(const char *dir, const ev_page_t *pages, size_t n, FILE *report)
{
    if (site_dirs(dir, report) < 0)
        return -1;
    int bad = site_strays(dir, pages, n, true, report);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        pybox_error_t err = {0};
        if (pybox_fmt(path, sizeof path, "%s/%s", dir, pages[i].name) < 0 ||
            pybox_write_file_atomic(path, pages[i].text.data ? pages[i].text.data : "", pages[i].text.len, 0644, &err) <
                0) {
            fprintf(report, "%s: %s\n", pages[i].name, err.msg);
            bad++;
        }
    }
    return bad;
}

/* dir's pages compared with the rendered ones: each that differs, is missing or is not
 * rendered from any record listed. The number of problems. */
static int compare_pages(const char *dir, const ev_page_t *pages, size_t n, FILE *report)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX], *text = NULL;
        size_t len = 0;
        if (pybox_fmt(path, sizeof path, "%s/%s", dir, pages[i].name) < 0 || read_file(path, &text, &len) < 0) {
            fprintf(report, "%s: missing (make campaign-pages writes it)\n", pages[i].name);
            bad++;
            continue;
        }
        if (len != pages[i].text.len || memcmp(text, pages[i].text.data, len) != 0) {
            /* Say where, so a hand edit is easy to find. */
            size_t at = 0, line = 1;
            while (at < len && at < pages[i].text.len && text[at] == pages[i].text.data[at])
                line += text[at++] == '\n';
            fprintf(report, "%s: line %zu differs from what the records render to\n", pages[i].name, line);
            bad++;
        }
        free(text);
    }
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 3 || strcmp(de->d_name + l - 3, ".md") != 0)
            continue;
        if (!rendered(pages, n, de->d_name)) {
            fprintf(report, "%s: a page no record renders to\n", de->d_name);
            bad++;
        }
    }
    if (d)
        closedir(d);
    return bad + site_strays(dir, pages, n, false, report);
}

/* The pages rendered, then written or compared. -1 when the records cannot be read (or,
 * writing, the site's folders made). */
static int render_then(const char *dir, const char *limits_md, bool write, FILE *report)
{
    ev_page_t *pages;
    size_t n;
    int bad = render_reported(dir, limits_md, &pages, &n, report);
    if (bad < 0)
        return -1;
    int more = write ? write_pages(dir, pages, n, report) : compare_pages(dir, pages, n, report);
    ev_pages_free(pages, n);
    return more < 0 ? -1 : bad + more;
}

int ev_write_pages(const char *dir, const char *limits_md, FILE *report)
{
    return render_then(dir, limits_md, true, report);
}

int ev_check(const char *dir, const char *limits_md, FILE *report)
{
    int bad = render_then(dir, limits_md, false, report);
    return bad < 0 ? 1 : bad;
}
