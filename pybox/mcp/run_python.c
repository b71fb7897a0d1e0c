/* SPDX-License-Identifier: MIT */
/* run_python, the MCP server's tool: one fresh box per call through the core library,
 * under the ceilings the operator set (see run_python.h and docs/mcp.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../buf.h"
#include "../escape.h"
#include "../files.h"
#include "../journal.h"
#include "../log.h"
#include "../prepare.h"
#include "../receipt.h"
#include "../receipt_schema.h"
#include "../run.h"
#include "../sign.h"
#include "../state.h"
#include "../util.h"
#include "pool.h"
#include "run_python.h"
#include "server.h"
#include "sessions.h"

#define INLINE_TEXT_MAX (256 * 1024)
#define INLINE_IMAGE_MAX (4 * 1024 * 1024)
/* What one result carries inline at most (images and text files together, counted before
 * base64): the rest comes as links or notes, so one result stays a few MiB of JSON. */
#define INLINE_TOTAL_MAX (8 * 1024 * 1024)
#define FILES_MAX 64
#define SHOWN_MAX 64 /* bytes of a client's name or path quoted back in a refusal */

/* A client's string quoted in a refusal: escaped, and cut only where the escaping keeps
 * it valid UTF-8 (a cut character shows as \xNN escapes). */
static const char *shown(char *out, size_t len, const char *s)
{
    pybox_escape_short(out, len, s, SHOWN_MAX);
    return out;
}

int pybox_mcp_discard_kept(const char *output_root, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        errno = EINVAL;
        return -1;
    }
    int root = open(output_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return -1;
    int rc = pybox_remove_tree_at(root, name);
    int en = errno;
    close(root);
    errno = en;
    return rc;
}

/* ---- the output root's ceiling (server.h) ---- */

int64_t pybox_mcp_call_output_most(void)
{
    return PYBOX_OUT_TOTAL_MAX + (PYBOX_OUT_FILES_MAX + PYBOX_OUT_DIRS_MAX + 1) * (int64_t)PYBOX_MCP_ENTRY_MIN;
}

/* What one file or folder counts: its size in whole PYBOX_MCP_ENTRY_MIN, at least one. */
static int64_t entry_charge(const struct stat *sb)
{
    int64_t n = sb->st_size > 0 ? (int64_t)sb->st_size : 0;
    n = (n + PYBOX_MCP_ENTRY_MIN - 1) / PYBOX_MCP_ENTRY_MIN * PYBOX_MCP_ENTRY_MIN;
    return n > PYBOX_MCP_ENTRY_MIN ? n : PYBOX_MCP_ENTRY_MIN;
}

/* What name under dfd and everything in it count, by descriptors, following no links. */
static int64_t tree_charge(int dfd, const char *name, int depth)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    int64_t sum = entry_charge(&sb);
    if (!S_ISDIR(sb.st_mode) || depth > 64)
        return sum;
    DIR *d = pybox_dir_open(openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (d == NULL)
        return sum;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            sum += tree_charge(dirfd(d), de->d_name, depth + 1);
    closedir(d);
    return sum;
}

static bool call_folder_name(const char *n)
{
    return strlen(n) == 16 && strspn(n, "0123456789abcdef") == 16;
}

int pybox_mcp_output_root_tidy(const char *root, int64_t max_age_s, int64_t now, int64_t *used, int *removed)
{
    *used = 0;
    *removed = 0;
    DIR *d = pybox_dir_open(open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d == NULL)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat sb;
        if (!call_folder_name(de->d_name) || fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(sb.st_mode))
            continue;
        if (now - (int64_t)sb.st_mtime > max_age_s && pybox_remove_tree_at(dirfd(d), de->d_name) == 0) {
            (*removed)++;
            continue;
        }
        *used += tree_charge(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    return 0;
}

/* What the calls in flight of this server that keep files may still add to the output
 * root: each holds pybox_mcp_call_output_most until it ends. */
static pthread_mutex_t root_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t root_reserved;

/* ---- URIs, base64, paths ---- */

int pybox_mcp_file_uri(pybox_buf_t *out, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    if (pybox_buf_puts(out, "file://") < 0)
        return -1;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        unsigned char c = *p;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '.' || c == '_' || c == '~' || c == '/';
        char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
        if ((plain ? pybox_buf_append(out, p, 1) : pybox_buf_append(out, enc, 3)) < 0)
            return -1;
    }
    return 0;
}

int pybox_mcp_input_path(const char *root, const char *rel, char *out, size_t len)
{
    /* Judged by its text first, before anything is looked up: no way to ask about
     * folders outside the root, nor to learn what exists there. */
    if (root[0] == '\0' || rel[0] == '\0' || rel[0] == '/')
        return -1;
    for (const char *c = rel;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return -1;
        if (slash == NULL)
            break;
        c = slash + 1;
    }
    char rroot[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
    if (realpath(root, rroot) == NULL || pybox_fmt(joined, sizeof joined, "%s/%s", rroot, rel) < 0 ||
        realpath(joined, real) == NULL)
        return -1;
    /* A link inside the root may still lead out of it: refused the same way. */
    size_t rl = strlen(rroot);
    if (strncmp(real, rroot, rl) != 0 || (real[rl] != '/' && real[rl] != '\0' && rl != 1))
        return -1;
    return pybox_fmt(out, len, "%s", real);
}

/* A message about the inputs with the files root's absolute path replaced by its name
 * for the client ("<files root>"): the operator's paths are not the agent's business. */
static cJSON *refuse_inputs(const char *root, const char *msg)
{
    char rroot[PATH_MAX];
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    size_t rl = root[0] != '\0' && realpath(root, rroot) != NULL ? strlen(rroot) : 0;
    for (const char *m = msg; *m;) {
        if (rl > 1 && strncmp(m, rroot, rl) == 0) {
            pybox_buf_adds(&b, "<files root>");
            m += rl;
        } else {
            pybox_buf_add(&b, m++, 1);
        }
    }
    cJSON *r = pybox_mcp_error_result(pybox_buf_ok(&b) ? (b.data ? b.data : "") : "the inputs were refused");
    pybox_buf_free(&b);
    return r;
}

static cJSON *refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *refuse(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pybox_mcp_error_result(msg);
}

static void allowed_list(const pybox_mcp_config_t *cfg, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < cfg->n_images && used + 1 < len; i++) {
        int n = snprintf(out + used, len - used, "%s%s", i ? ", " : "", cfg->images[i]);
        if (n < 0)
            break;
        used += (size_t)n < len - used ? (size_t)n : len - used - 1;
    }
}

static const char *const known_args[] = {"code",  "image",        "timeout_s",  "memory_mib",
                                         "files", "return_files", "session_id", NULL};
static const char *const known_file_keys[] = {"name", "content", "content_base64", "path", NULL};

/* The first key of o not in known (NULL-terminated), or NULL. */
static const char *unknown_key(const cJSON *o, const char *const *known)
{
    const cJSON *k;
    cJSON_ArrayForEach (k, o) {
        bool ok = false;
        for (size_t i = 0; known[i] != NULL && !ok; i++)
            ok = k->string != NULL && strcmp(k->string, known[i]) == 0;
        if (!ok)
            return k->string != NULL ? k->string : "?";
    }
    return NULL;
}

/* The refusal of args with a key not in known (NULL-ended), naming it and what the tool
 * takes; NULL when every key is known. */
static cJSON *refuse_unknown(const cJSON *args, const char *tool, const char *const *known)
{
    const char *unknown = unknown_key(args, known);
    if (unknown == NULL)
        return NULL;
    char quoted[SHOWN_MAX * 4 + 8];
    pybox_buf_t takes;
    pybox_buf_init(&takes, 0);
    for (size_t i = 0; known[i] != NULL; i++)
        pybox_buf_addf(&takes, "%s%s", i ? ", " : "", known[i]);
    cJSON *r = refuse("unknown argument '%s' (%s takes: %s)", shown(quoted, sizeof quoted, unknown), tool,
                      takes.data ? takes.data : "");
    pybox_buf_free(&takes);
    return r;
}

static bool simple_name(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 255 || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
        return false;
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, n, len, false);
    bool same = b.len == len && memcmp(b.data, n, len) == 0;
    pybox_buf_free(&b);
    return same;
}

static int write_bytes(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    int rc = pybox_write_all(fd, data, len);
    if (close(fd) < 0)
        rc = -1;
    return rc;
}

typedef struct {
    pybox_mcp_progress_fn progress;
    void *ctx;
    int n;
    int64_t timeout_ms;  /* the run's deadline, for the running readings' share of step 4 */
    double next_tick_ms; /* the next running reading is sent once this much has run */
} hook_ctx_t;

static void on_step(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    hook_ctx_t *h = arg;
    /* The program's end is said by the result itself: progress keeps its six steps. */
    if (strcmp(step, PYBOX_STEP_ENDED) == 0)
        return;
    if (h->progress)
        h->progress(h->ctx, ++h->n, 6, step);
}

/* While the program runs: every PYBOX_MCP_PROGRESS_MS, what has run and the kernel's
 * readings of the box (never anything the program wrote), between the steps "running"
 * (4) and "removing" (5), so the progress still only grows. */
static void on_tick(double elapsed_ms, const pybox_reading_t *r, void *arg)
{
    hook_ctx_t *h = arg;
    if (h->progress == NULL || h->n != 4 || elapsed_ms < h->next_tick_ms)
        return;
    h->next_tick_ms = elapsed_ms + PYBOX_MCP_PROGRESS_MS;
    char msg[256], t[PYBOX_NUM_MAX], most[PYBOX_NUM_MAX], mem[PYBOX_NUM_MAX], cpu[PYBOX_NUM_MAX];
    pybox_buf_t b;
    pybox_buf_init(&b, sizeof msg);
    pybox_buf_addf(&b, "running %s s of %s s", pybox_fmt_fixed(t, (int64_t)(elapsed_ms / 100), 1),
                   pybox_fmt_fixed(most, h->timeout_ms / 100, 1));
    if (r->valid & PYBOX_RD_MEM_NOW)
        pybox_buf_addf(&b, "; memory %s MiB", pybox_fmt_fixed(mem, r->mem_now * 10 / (1024 * 1024), 1));
    if (r->valid & PYBOX_RD_PIDS_NOW)
        pybox_buf_addf(&b, "; %lld process%s", (long long)r->pids_now, r->pids_now == 1 ? "" : "es");
    if (r->valid & PYBOX_RD_CPU)
        pybox_buf_addf(&b, "; CPU %s s", pybox_fmt_fixed(cpu, r->cpu_ns / 10000000, 2));
    snprintf(msg, sizeof msg, "%s", pybox_buf_ok(&b) && b.data ? b.data : "running");
    pybox_buf_free(&b);
    double share = h->timeout_ms > 0 ? floor(elapsed_ms / (double)h->timeout_ms * 1000) / 1000 : 0;
    h->progress(h->ctx, 4 + (share < 0.99 ? share : 0.99), 6, msg);
}

static const char *image_mime(const unsigned char *d, size_t n)
{
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "image/png";
    if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
        return "image/jpeg";
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "image/gif";
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "image/webp";
    return NULL;
}

/* A content item of that type whose key holds value. */
static cJSON *item_of(const char *type, const char *key, const char *value)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", type);
    cJSON_AddStringToObject(t, key, value);
    return t;
}

static void add_text(cJSON *content, const char *text)
{
    cJSON_AddItemToArray(content, item_of("text", "text", text));
}

/* A content item of that type whose key holds what was made in b (made: the making's
 * result); NULL, with failed said in content instead, when it could not be made. */
static cJSON *content_item(cJSON *content, const char *type, const char *key, int made, const pybox_buf_t *b,
                           const char *failed)
{
    if (made < 0 || !pybox_buf_ok(b)) {
        add_text(content, failed);
        return NULL;
    }
    return item_of(type, key, b->data ? b->data : "");
}

/* The program's text, one line per line, each behind PYBOX_MCP_FENCE and escaped (control,
 * escape and bidi characters shown as escapes): no line of it can pass for one of the
 * server's, nor move a terminal's cursor. */
static void fenced(pybox_buf_t *b, const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        pybox_buf_adds(b, PYBOX_MCP_FENCE);
        pybox_escape_terminal(b, text + i, n, false);
        pybox_buf_adds(b, "\n");
        i += n + (nl != NULL);
    }
}

/* Returned files: images as images, text inline (up to INLINE_TOTAL_MAX for the whole
 * result), the rest kept under the output root. */
static void add_files(cJSON *content, const pybox_outputs_t *o, const char *dir, bool kept)
{
    size_t inline_used = 0;
    for (size_t i = 0; i < o->n; i++) {
        const pybox_out_entry_t *e = &o->entries[i];
        if (!e->returned || e->kind != 'f')
            continue;
        char path[PATH_MAX];
        if (pybox_fmt(path, sizeof path, "%s/%s", dir, e->name) < 0)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char *data = NULL;
        size_t len = 0;
        bool over = false;
        if (fd < 0 || pybox_read_bounded(fd, INLINE_IMAGE_MAX, &data, &len, &over, NULL) < 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        close(fd);
        bool room = !over && len <= INLINE_TOTAL_MAX - inline_used;
        const char *mime = over ? NULL : image_mime((const unsigned char *)data, len);
        char name[256];
        pybox_escape_short(name, sizeof name, e->name, 200);
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        if (mime != NULL && room) {
            cJSON *img = content_item(content, "image", "data", pybox_base64(&b, data, len), &b,
                                      "a returned image could not be carried: out of memory");
            if (img != NULL) {
                cJSON_AddStringToObject(img, "mimeType", mime);
                cJSON_AddItemToArray(content, img);
                inline_used += len;
            }
        } else if (mime == NULL && room && len <= INLINE_TEXT_MAX && pybox_utf8_valid(data, len) &&
                   memchr(data, 0, len) == NULL) {
            pybox_buf_addf(&b,
                           "file %s (%zu bytes, untrusted, written by the program; each line escaped, behind "
                           "\"" PYBOX_MCP_FENCE "\"):\n",
                           name, len);
            fenced(&b, data, len);
            add_text(content, pybox_buf_ok(&b) ? (b.data ? b.data : "")
                                               : "a returned text file could not be carried: out of memory");
            inline_used += len;
        } else if (kept) {
            cJSON *l = content_item(content, "resource_link", "uri", pybox_mcp_file_uri(&b, path), &b,
                                    "a returned file's link could not be made: out of memory");
            if (l != NULL) {
                cJSON_AddStringToObject(l, "name", name);
                cJSON_AddStringToObject(l, "mimeType", mime ? mime : "application/octet-stream");
                cJSON_AddNumberToObject(l, "size", (double)e->bytes);
                cJSON_AddItemToArray(content, l);
            }
        } else {
            pybox_buf_addf(&b, "file %s: %lld bytes, not returned inline (%s; this server keeps no files)", name,
                           (long long)e->bytes,
                           mime != NULL || (!over && len <= INLINE_TEXT_MAX && pybox_utf8_valid(data, len))
                               ? "this result already carries its most inline"
                               : "not text");
            add_text(content,
                     pybox_buf_ok(&b) ? (b.data ? b.data : "") : "a returned file could not be named: out of memory");
        }
        pybox_buf_free(&b);
        free(data);
    }
}

/* What a model reads first: the verdict, then what the program said (fenced, escaped,
 * labelled as its own), then what is not known. */
char *pybox_mcp_summary(const pybox_run_result_t *res)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_buf_addf(&b, "status: %s, exit code %d\n", pybox_end_word(res->end), res->exit_code);
    char cut[160];
    if (pybox_receipt_lifetime_cut(res, cut, sizeof cut))
        pybox_buf_addf(&b, "PyBox: %s\n", cut);
    const struct {
        const char *name;
        const pybox_said_t *said;
    } streams[] = {{"stdout", &res->said_out}, {"stderr", &res->said_err}};
    for (int i = 0; i < 2; i++) {
        const pybox_said_t *sd = streams[i].said;
        if (sd->kept == 0)
            continue;
        pybox_buf_addf(
            &b,
            "--- %s (untrusted, written by the program; %llu bytes%s; each line escaped, behind \"" PYBOX_MCP_FENCE
            "\") ---\n",
            streams[i].name, (unsigned long long)sd->total, sd->truncated ? ", cut" : "");
        fenced(&b, sd->data, sd->kept);
    }
    if (res->start.call_report[0] != '\0') {
        pybox_buf_adds(
            &b, "--- the session's report of this call: its last expression's value and its exception "
                "(untrusted: said by the session's interpreter, in the program's own process; behind \"" PYBOX_MCP_FENCE
                "\") ---\n");
        fenced(&b, res->start.call_report, strlen(res->start.call_report));
    }
    /* PyBox's own lines; escaped all the same, so each stays one line. */
    for (int i = 0; i < res->n_unknown; i++) {
        pybox_buf_adds(&b, "not established: ");
        pybox_escape_terminal(&b, res->unknown[i], strlen(res->unknown[i]), false);
        pybox_buf_adds(&b, "\n");
    }
    if (pybox_run_has_error(res)) {
        pybox_buf_adds(&b, "PyBox: ");
        pybox_escape_terminal(&b, res->error.msg, strlen(res->error.msg), false);
        pybox_buf_adds(&b, "\n");
    }
    return pybox_buf_steal(&b);
}

/* ---- the tool's description ---- */

static cJSON *prop(cJSON *props, const char *name, const char *type, const char *description)
{
    cJSON *p = cJSON_AddObjectToObject(props, name);
    cJSON_AddStringToObject(p, "type", type);
    cJSON_AddStringToObject(p, "description", description);
    return p;
}

/* A tool's description begun: its name and title (its description comes next). */
static cJSON *tool_new(const char *name, const char *title)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", name);
    cJSON_AddStringToObject(t, "title", title);
    return t;
}

/* A tool's input schema, an object: *in gets it; returns its properties. */
static cJSON *input_schema(cJSON *t, cJSON **in)
{
    *in = cJSON_AddObjectToObject(t, "inputSchema");
    cJSON_AddStringToObject(*in, "type", "object");
    return cJSON_AddObjectToObject(*in, "properties");
}

/* The image property: one of the server's images. */
static void image_prop(cJSON *props, const pybox_mcp_config_t *cfg, const char *description)
{
    cJSON *en = cJSON_AddArrayToObject(prop(props, "image", "string", description), "enum");
    for (size_t i = 0; i < cfg->n_images; i++)
        cJSON_AddItemToArray(en, cJSON_CreateString(cfg->images[i]));
}

/* The deadline and memory properties, from the limits' minimums to the server's maximums. */
static void limit_props(cJSON *props, const pybox_mcp_config_t *cfg, const char *timeout, const char *memory)
{
    cJSON *to = prop(props, "timeout_s", "number", timeout);
    cJSON_AddNumberToObject(to, "minimum", (double)pybox_limit(PYBOX_LIMIT_TIMEOUT)->min / 1000.0);
    cJSON_AddNumberToObject(to, "maximum", (double)cfg->max_timeout_ms / 1000.0);
    cJSON *mem = prop(props, "memory_mib", "integer", memory);
    cJSON_AddNumberToObject(mem, "minimum", (double)(pybox_limit(PYBOX_LIMIT_MEMORY)->min >> 20));
    cJSON_AddNumberToObject(mem, "maximum", (double)(cfg->max_memory_bytes >> 20));
}

cJSON *pybox_mcp_run_python_describe(const pybox_mcp_config_t *cfg)
{
    cJSON *t = tool_new("run_python", "Run Python in a sealed box");
    char desc[1024], most[PYBOX_NUM_MAX];
    snprintf(desc, sizeof desc,
             "Runs a Python 3 program in a fresh, sealed Linux container and returns its receipt: what the kernel "
             "and the container engine observed, and what the program printed (untrusted). Every call gets a new "
             "box: nothing persists between calls (no files, no state, no installed packages). The box has no "
             "network and a read-only system; input files appear read-only under /box/in; files the program writes "
             "to /box/out come back when return_files is true (text inline, images as images). Limits up to %s s "
             "and %lld MiB (set by the server).",
             pybox_fmt_fixed(most, cfg->max_timeout_ms, 3), (long long)(cfg->max_memory_bytes >> 20));
    cJSON_AddStringToObject(t, "description", desc);

    cJSON *in;
    cJSON *props = input_schema(t, &in);
    prop(props, "code", "string", "The Python program (run as the main module, from standard input).");
    image_prop(props, cfg, "The image to run in (the first is the default).");
    limit_props(props, cfg, "Deadline in seconds (set by the server: at most the maximum).",
                "Memory limit in MiB (without swap).");
    cJSON *files = prop(props, "files", "array",
                        "Input files, put read-only at /box/in/<name>: inline text (content), inline bytes "
                        "(content_base64), or a path under the server's files root (path).");
    cJSON *item = cJSON_AddObjectToObject(files, "items");
    cJSON_AddStringToObject(item, "type", "object");
    cJSON *ip = cJSON_AddObjectToObject(item, "properties");
    prop(ip, "name", "string", "The file's name in /box/in (inline files).");
    prop(ip, "content", "string", "The file's text.");
    prop(ip, "content_base64", "string", "The file's bytes, base64-encoded.");
    prop(ip, "path", "string", "A file or folder under the server's files root.");
    prop(props, "return_files", "boolean", "Return what the program leaves in /box/out.");
    if (cfg->sessions > 0)
        prop(props, "session_id", "string",
             "Run in the session session_open made: its one interpreter, the globals and files its earlier calls "
             "left (not with image or memory_mib). Its files join /box/in, kept for the session (a name an earlier "
             "call gave is refused); return_files returns /box/out as it stands at the call's end.");
    cJSON *req = cJSON_AddArrayToObject(in, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("code"));
    cJSON_AddBoolToObject(in, "additionalProperties", 0);

    /* The structured result is the receipt (docs/receipt.md), described by its one
     * definition; members it may gain later are not refused. */
    cJSON_AddItemToObject(t, "outputSchema", pybox_receipt_run_schema(false));
    return t;
}

/* What one call asked, once its arguments passed the server's own checks. */
typedef struct {
    const char *code;
    size_t code_len;
    const char *image;
    int64_t timeout_ms, memory_bytes; /* 0: not asked */
    const cJSON *files;
    bool return_files;
    const char *session_id; /* NULL: a fresh box */
} call_args_t;

/* The arguments, checked against the server's ceilings before anything else: NULL when
 * they pass, else the refusal. Numbers are compared as the doubles they came as, before
 * any conversion (a huge value must not wrap into a small one); values are shown with
 * every digit they need, maxima with all of theirs. */
/* The box's own arguments (image, timeout_s, memory_mib), checked against the server's
 * ceilings: NULL when they pass, else the refusal. */
static cJSON *check_box_args(const pybox_mcp_config_t *cfg, const cJSON *args, call_args_t *a)
{
    const cJSON *image = cJSON_GetObjectItemCaseSensitive(args, "image");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_s");
    const cJSON *memory = cJSON_GetObjectItemCaseSensitive(args, "memory_mib");
    a->image = cfg->images[0];
    if (image != NULL) {
        bool ok = false;
        for (size_t i = 0; cJSON_IsString(image) && i < cfg->n_images; i++)
            ok |= strcmp(image->valuestring, cfg->images[i]) == 0;
        if (!ok) {
            char allowed[512];
            allowed_list(cfg, allowed, sizeof allowed);
            return refuse("image: not allowed (set by the server); allowed: %s", allowed);
        }
        a->image = image->valuestring;
    }
    char asked[PYBOX_NUM_MAX], most[PYBOX_NUM_MAX], least[PYBOX_NUM_MAX];
    if (timeout != NULL) {
        pybox_fmt_fixed(most, cfg->max_timeout_ms, 3);
        int64_t min_ms = pybox_limit(PYBOX_LIMIT_TIMEOUT)->min;
        pybox_fmt_fixed(least, min_ms, 3);
        if (!cJSON_IsNumber(timeout) || !isfinite(timeout->valuedouble) || timeout->valuedouble * 1000 < (double)min_ms)
            return refuse("timeout_s: give seconds from %s up to %s (set by the server)", least, most);
        if (timeout->valuedouble * 1000 > (double)cfg->max_timeout_ms)
            return refuse("timeout_s: %s s is above the maximum of %s s (set by the server)",
                          pybox_fmt_double(asked, timeout->valuedouble), most);
        a->timeout_ms = (int64_t)(timeout->valuedouble * 1000);
    }
    if (memory != NULL) {
        double mib = cJSON_IsNumber(memory) ? memory->valuedouble : NAN;
        long long max_mib = (long long)(cfg->max_memory_bytes >> 20),
                  min_mib = pybox_limit(PYBOX_LIMIT_MEMORY)->min >> 20;
        if (isfinite(mib) && mib != floor(mib))
            return refuse("memory_mib: %s is not a whole number of MiB (give one from %lld up to %lld; set by the "
                          "server)",
                          pybox_fmt_double(asked, mib), min_mib, max_mib);
        if (!isfinite(mib) || mib < (double)min_mib)
            return refuse("memory_mib: give a whole number of MiB from %lld up to %lld (set by the server)", min_mib,
                          max_mib);
        if (mib > (double)max_mib)
            return refuse("memory_mib: %s is above the maximum of %lld MiB (set by the server)",
                          pybox_fmt_double(asked, mib), max_mib);
        a->memory_bytes = (int64_t)memory->valuedouble * 1024 * 1024;
    }
    return NULL;
}

/* A session's id as the server makes them: 32 lowercase hex digits. */
static bool session_id_valid(const cJSON *id)
{
    return cJSON_IsString(id) && strlen(id->valuestring) == 32 && strspn(id->valuestring, "0123456789abcdef") == 32;
}

static cJSON *check_args(const pybox_mcp_config_t *cfg, const cJSON *args, call_args_t *a)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(args, "files");
    const cJSON *ret = cJSON_GetObjectItemCaseSensitive(args, "return_files");
    const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session_id");
    memset(a, 0, sizeof *a);
    cJSON *unknown = refuse_unknown(args, "run_python", known_args);
    if (unknown != NULL)
        return unknown;
    if (!cJSON_IsString(code) || code->valuestring[0] == '\0')
        return refuse("code: give the Python program as a non-empty string");
    a->code = code->valuestring;
    a->code_len = strlen(code->valuestring);
    if (a->code_len > PYBOX_PROGRAM_MAX)
        return refuse("code: the program is larger than %d bytes (set by the server)", PYBOX_PROGRAM_MAX);
    cJSON *refusal = check_box_args(cfg, args, a);
    if (refusal != NULL)
        return refusal;
    if (session != NULL) {
        if (!session_id_valid(session))
            return refuse("session_id: give the id session_open returned (32 hex digits)");
        /* A session's box has its image and limits from session_open. */
        static const char *const not_in_session[] = {"image", "memory_mib"};
        for (size_t i = 0; i < sizeof not_in_session / sizeof *not_in_session; i++)
            if (cJSON_GetObjectItemCaseSensitive(args, not_in_session[i]) != NULL)
                return refuse("%s: not taken with session_id (a session's image and memory are session_open's)",
                              not_in_session[i]);
        a->session_id = session->valuestring;
    }
    if (files != NULL && (!cJSON_IsArray(files) || cJSON_GetArraySize(files) > FILES_MAX))
        return refuse("files: give an array of at most %d files", FILES_MAX);
    if (ret != NULL && !cJSON_IsBool(ret))
        return refuse("return_files: give true or false");
    a->files = files;
    a->return_files = cJSON_IsTrue(ret);
    return NULL;
}

/* The call's own scratch: inline inputs, and the output when the server keeps none. In
 * the installation's state directory under a note of its own (journal.h), so a server
 * killed mid-call leaves it to housekeeping and `pybox cleanup`; a check (no
 * installation) uses a private temporary folder. */
typedef struct {
    const pybox_state_t *st; /* the installation whose note holds work; NULL: a check's */
    pybox_journal_t note;
    int64_t reserved; /* of the output root's ceiling, while the call lasts */
    char work[PATH_MAX];
    char outdir[PATH_MAX];
    bool kept; /* the output goes under --output-root, and stays */
    const char *paths[FILES_MAX];
    char path_store[FILES_MAX][PATH_MAX];
    size_t n_paths;
} scratch_t;

/* One input file: {path} under the server's files root, or inline content written into
 * the call's scratch. NULL when taken, else the refusal. */
static cJSON *take_file(const pybox_mcp_config_t *cfg, const cJSON *f, scratch_t *sc)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(f, "content");
    const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(f, "content_base64");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(f, "path");
    char *p = sc->path_store[sc->n_paths];
    char quoted[SHOWN_MAX * 4 + 8];
    const char *bad = cJSON_IsObject(f) ? unknown_key(f, known_file_keys) : "(not an object)";
    int given = (name != NULL) + (text != NULL) + (b64 != NULL);
    if (bad != NULL || (path != NULL && given > 0) || (text != NULL && b64 != NULL))
        return refuse("files: each file is {name, content} or {name, content_base64} or {path}%s%s",
                      bad ? "; unknown: " : "", bad ? shown(quoted, sizeof quoted, bad) : "");
    if (cJSON_IsString(path)) {
        if (cfg->files_root[0] == '\0' || pybox_mcp_input_path(cfg->files_root, path->valuestring, p, PATH_MAX) < 0)
            return refuse("files: '%s' is not a file or folder under this server's files root (set by the "
                          "server); give a path relative to it, without empty, '.' or '..' parts",
                          shown(quoted, sizeof quoted, path->valuestring));
    } else if (cJSON_IsString(name) && simple_name(name->valuestring) &&
               (cJSON_IsString(text) || cJSON_IsString(b64))) {
        if (pybox_fmt(p, PATH_MAX, "%s/%s", sc->work, name->valuestring) < 0)
            return refuse("files: a name is too long");
        int wr;
        if (cJSON_IsString(text)) {
            wr = write_bytes(p, text->valuestring, strlen(text->valuestring));
        } else {
            _cleanup_free_ unsigned char *bin = NULL;
            size_t n = 0;
            if (pybox_base64_decode(b64->valuestring, strlen(b64->valuestring), &bin, &n) < 0)
                return refuse("files: content_base64 of '%s' is not base64 (RFC 4648: standard alphabet, "
                              "no whitespace, padded to a multiple of 4)",
                              shown(quoted, sizeof quoted, name->valuestring));
            wr = write_bytes(p, bin, n);
        }
        if (wr < 0)
            return refuse("files: '%s' could not be written (a name given twice?)",
                          shown(quoted, sizeof quoted, name->valuestring));
    } else {
        return refuse("files: each file needs a simple name and content or content_base64, or a path");
    }
    sc->paths[sc->n_paths++] = p;
    return NULL;
}

/* Room under the output root for one more call's files, held until the call ends; the
 * call folders past their age go first. NULL when there is room, else the refusal. */
static cJSON *reserve_output_root(const pybox_mcp_config_t *cfg, scratch_t *sc)
{
    int64_t most = pybox_mcp_call_output_most();
    int64_t max = cfg->output_root_max > 0 ? cfg->output_root_max : PYBOX_MCP_OUTPUT_ROOT_MAX;
    int64_t age = cfg->output_root_age_s > 0 ? cfg->output_root_age_s : PYBOX_MCP_OUTPUT_ROOT_AGE_S;
    int64_t used = 0;
    int removed = 0;
    pthread_mutex_lock(&root_lock);
    int rc = pybox_mcp_output_root_tidy(cfg->output_root, age, pybox_wall_s(), &used, &removed);
    int en = errno;
    int64_t busy = root_reserved;
    bool room = rc == 0 && used + busy + most <= max;
    if (room) {
        root_reserved += most;
        sc->reserved = most;
    }
    pthread_mutex_unlock(&root_lock);
    char e[128], held[PYBOX_NUM_MAX], ceiling[PYBOX_NUM_MAX], one[PYBOX_NUM_MAX], kept[PYBOX_NUM_MAX];
    if (removed > 0)
        pybox_log("output root: removed %d call folder%s older than %s", removed, removed == 1 ? "" : "s",
                  pybox_fmt_age(kept, age));
    if (rc < 0)
        return refuse("return_files: this server's output root cannot be read (%s)", pybox_strerror(en, e, sizeof e));
    if (!room)
        return refuse("return_files: this server's output root holds %s of the %s it may hold (set by the server), "
                      "with %s more held by calls in progress, and one call's files may take up to %s: call without "
                      "return_files, or again once files older than %s have gone",
                      pybox_fmt_size(held, used), pybox_fmt_size(ceiling, max), pybox_fmt_size(kept, busy),
                      pybox_fmt_size(one, most), pybox_fmt_age(e, age));
    return NULL;
}

/* The scratch, the inputs and where the output goes. NULL when all is in place. */
static cJSON *take_files(const pybox_mcp_config_t *cfg, const pybox_state_t *st, const call_args_t *a, scratch_t *sc)
{
    pybox_error_t err = {0};
    pybox_config_t c;
    if (st != NULL) {
        /* its note expires as a run's leftovers do; while the server lives it holds it */
        if (pybox_state_config(st, &c, &err) < 0 ||
            pybox_journal_scratch_open(st, pybox_wall_s() + c.limit[PYBOX_LIMIT_EXPIRY], &sc->note, sc->work,
                                       sizeof sc->work, &err) < 0) {
            sc->work[0] = '\0';
            return refuse("the server could not make a private folder: %s", err.msg);
        }
        sc->st = st;
    } else {
        snprintf(sc->work, sizeof sc->work, "/tmp/pybox-mcp-XXXXXX");
        if (mkdtemp(sc->work) == NULL) {
            sc->work[0] = '\0';
            char e[128];
            return refuse("the server could not make a private folder: %s", pybox_strerror(errno, e, sizeof e));
        }
    }
    const cJSON *f;
    cJSON_ArrayForEach (f, a->files) {
        cJSON *r = take_file(cfg, f, sc);
        if (r != NULL)
            return r;
    }
    if (a->return_files) {
        char rnd[17];
        if (pybox_random_hex(8, rnd, &err) < 0)
            return refuse("%s", err.msg);
        sc->kept = cfg->output_root[0] != '\0';
        cJSON *full = sc->kept ? reserve_output_root(cfg, sc) : NULL;
        if (full != NULL)
            return full;
        int fr = sc->kept ? pybox_fmt(sc->outdir, sizeof sc->outdir, "%s/%s", cfg->output_root, rnd)
                          : pybox_fmt(sc->outdir, sizeof sc->outdir, "%s/out", sc->work);
        if (fr < 0)
            return refuse("return_files: the output folder's path is too long");
    }
    return NULL;
}

/* A refusal from the core's preparation, in this tool's words. */
/* A call's box as its arguments ask, under the server's ceilings: an image's default never
 * passes them, it is capped there (the receipt's asked section shows what the box got). */
static pybox_request_t box_request(const pybox_mcp_config_t *cfg, const call_args_t *a)
{
    return (pybox_request_t){
        .image = a->image,
        .backend = cfg->backend,
        .timeout_ms = a->timeout_ms,
        .memory_bytes = a->memory_bytes,
        .cap_timeout_ms = cfg->max_timeout_ms,
        .cap_memory_bytes = cfg->max_memory_bytes,
    };
}

static cJSON *refuse_prepared(const pybox_mcp_config_t *cfg, const pybox_ready_t *rd, const pybox_error_t *err)
{
    if (rd->failed == PYBOX_PREP_INPUTS)
        return refuse_inputs(cfg->files_root, err->msg);
    if (rd->failed == PYBOX_PREP_OUTPUT)
        return refuse("return_files: %s", err->msg);
    return refuse("%s", err->msg);
}

/* The call's result: the summary, the files, the receipt; or NULL when cancelled. */
static cJSON *result_of(const pybox_mcp_config_t *cfg, pybox_run_result_t *res, const scratch_t *sc,
                        const pybox_state_t *st, const pybox_output_spec_t *output)
{
    if (res->end == PYBOX_END_CANCELLED) {
        /* cancelled: nothing is sent, and nothing of it kept */
        if (sc->kept && !output->existed && pybox_mcp_discard_kept(cfg->output_root, output->base) < 0 &&
            errno != ENOENT) {
            char e[128];
            pybox_log("removing the files of a cancelled call: %s", pybox_strerror(errno, e, sizeof e));
        }
        return NULL;
    }
    cJSON *result = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(result, "content");
    _cleanup_free_ char *text = pybox_mcp_summary(res);
    add_text(content, text ? text : "the summary could not be made (out of memory); the receipt is below");
    if (res->outputs.status == PYBOX_OUT_DELIVERED)
        add_files(content, &res->outputs, sc->outdir, sc->kept);
    /* A PyBox failure is an error result; its receipt still says what was seen. */
    if (res->end == PYBOX_END_PYBOX_ERROR || res->end == PYBOX_END_EXTERNAL_STOP)
        cJSON_AddBoolToObject(result, "isError", 1);
    cJSON *receipt = pybox_receipt_json(res);
    /* verifiable as it comes (pybox verify); the key is read for each call, not kept by
     * the server: one replaced while it serves (removed, then made anew) signs the next
     * receipt, and reading a key file is small beside a run */
    pybox_sign_installation(receipt, st);
    if (receipt != NULL)
        cJSON_AddItemToObject(result, "structuredContent", receipt);
    /* the core removes this folder if the call is cancelled before its result goes out */
    if (sc->kept && !output->existed)
        cJSON_AddStringToObject(result, PYBOX_MCP_KEPT_KEY, output->base);
    return result;
}

static void scratch_free(scratch_t *sc)
{
    /* inline inputs, and the output when this server keeps none */
    if (sc->st != NULL)
        pybox_journal_scratch_close(sc->st, &sc->note);
    else if (sc->work[0] != '\0')
        (void)pybox_remove_tree_at(AT_FDCWD, sc->work);
    if (sc->reserved > 0) {
        pthread_mutex_lock(&root_lock);
        root_reserved -= sc->reserved;
        pthread_mutex_unlock(&root_lock);
    }
}

cJSON *pybox_mcp_run_python_check(const pybox_mcp_config_t *cfg, const cJSON *args)
{
    call_args_t a;
    cJSON *refusal = check_args(cfg, args, &a);
    if (refusal != NULL)
        return refusal;
    _cleanup_(scratch_free) scratch_t sc = {.n_paths = 0};
    return take_files(cfg, NULL, &a, &sc);
}

/* The call's program in a box made for its image before it came (pool.h): its files go
 * there with it. The box is removed after it, or, when the files are refused, unused. */
static cJSON *run_warm(const pybox_mcp_config_t *cfg, pybox_mcp_pool_t *pool, const call_args_t *a,
                       const pybox_request_t *rq, const scratch_t *sc, pybox_mcp_warm_t *warm, bool *used,
                       char *why_cold, size_t why_len)
{
    pybox_error_t err = {0};
    _cleanup_(pybox_ready_free) pybox_ready_t frd;
    pybox_ready_init(&frd);
    if (pybox_prepare_files(rq, &frd, &err) < 0) {
        pybox_mcp_warm_free(warm);       /* never used: removed */
        pybox_mcp_pool_done(pool, NULL); /* and its place is filled again */
        *used = true;
        return refuse_prepared(cfg, &frd, &err);
    }
    pybox_run_request_t rr = warm->rd.run;
    rr.program = a->code;
    rr.program_len = a->code_len;
    rr.inputs = sc->n_paths > 0 ? &frd.inputs : NULL;
    rr.output = a->return_files ? &frd.output : NULL;
    rr.policy.timeout_ms = a->timeout_ms;
    rr.started_s = rq->started_s;
    rr.cancellable = true;
    rr.cancel_fd = rq->cancel_fd;
    rr.hook = rq->hook;
    rr.tick = rq->tick;
    rr.hook_arg = rq->hook_arg;
    ((hook_ctx_t *)rq->hook_arg)->timeout_ms = rr.policy.timeout_ms;
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    pybox_mcp_pool_run(warm, &rr, &res);
    if (res.record.seen && res.record.calls == 0 && res.end != PYBOX_END_CANCELLED) {
        /* The box ended after it was taken and before its init handed the program on
         * (its init's record says it was never given one): the program never ran, so it
         * runs in a box made for it now, and its receipt says why. */
        pybox_log("warm box of %s not used: it ended as its program came (its init says: %s, exit %d)", a->image,
                  res.record.end, res.record.exit_code);
        snprintf(why_cold, why_len, "the warm box taken for it ended before its program reached it (its init says: %s)",
                 res.record.end);
        pybox_mcp_warm_free(warm);
        pybox_mcp_pool_done(pool, NULL); /* and its place is filled again */
        return NULL;
    }
    cJSON *result = result_of(cfg, &res, sc, &warm->rd.st, &frd.output);
    pybox_mcp_pool_done(pool, warm);
    *used = true;
    return result;
}

/* The call's program in a box made for it now. */
static cJSON *run_cold(const pybox_mcp_config_t *cfg, const pybox_request_t *rq, const scratch_t *sc)
{
    pybox_error_t err = {0};
    _cleanup_(pybox_ready_free) pybox_ready_t rd;
    pybox_ready_init(&rd);
    if (pybox_prepare(rq, &rd, &err) < 0)
        return refuse_prepared(cfg, &rd, &err);
    /* the deadline as resolved (asked, the image's, or PyBox's), for the progress */
    ((hook_ctx_t *)rq->hook_arg)->timeout_ms = rd.run.policy.timeout_ms;
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    pybox_ready_run(&rd, &res);
    return result_of(cfg, &res, sc, &rd.st, &rd.output);
}

/* ---- sessions (sessions.h) ---- */

/* One call in a session's box: its result, whose receipt names the session and the call;
 * when the call ended the session, the session's end is in it too. */
static cJSON *run_in_session(const pybox_mcp_ctx_t *ctx, const pybox_mcp_config_t *cfg, const call_args_t *a,
                             const pybox_state_t *st, double started, int cancel_fd, hook_ctx_t *hook,
                             uint64_t connection)
{
    pybox_mcp_sessions_t *ss = ctx != NULL ? ctx->sessions : NULL;
    char why[320];
    pybox_mcp_warm_t *w = pybox_mcp_sessions_take(ss, a->session_id, connection, why, sizeof why);
    if (w == NULL)
        return refuse("session_id: %s", why);
    int64_t most = pybox_ahead_policy(w->box)->timeout_ms;
    if (a->timeout_ms > most) {
        pybox_mcp_sessions_give_back(ss, a->session_id, w, NULL);
        char asked[PYBOX_NUM_MAX], m[PYBOX_NUM_MAX];
        return refuse("timeout_s: %s s is above the %s s of this session (session_open's timeout_s)",
                      pybox_fmt_fixed(asked, a->timeout_ms, 3), pybox_fmt_fixed(m, most, 3));
    }
    /* The call's files as a plain call's, checked before it reaches the box: its inputs
     * join the session's /box/in, and none may have a name an earlier call gave. */
    _cleanup_(scratch_free) scratch_t sc = {.n_paths = 0};
    _cleanup_(pybox_ready_free) pybox_ready_t frd;
    pybox_ready_init(&frd);
    /* Only a call with files makes a scratch: a call without any costs nothing more. */
    bool with_files = a->files != NULL || a->return_files;
    cJSON *refusal = with_files ? take_files(cfg, st, a, &sc) : NULL;
    pybox_error_t err = {0};
    if (refusal == NULL && with_files) {
        pybox_request_t rq = {
            .inputs = sc.paths,
            .n_inputs = sc.n_paths,
            .output = a->return_files ? sc.outdir : NULL,
        };
        if (pybox_prepare_files(&rq, &frd, &err) < 0)
            refusal = refuse_prepared(cfg, &frd, &err);
        else if (sc.n_paths > 0 && pybox_ahead_inputs_check(w->box, &frd.inputs, &err) < 0)
            refusal = refuse("files: %s", err.msg);
    }
    if (refusal != NULL) {
        pybox_mcp_sessions_give_back(ss, a->session_id, w, NULL);
        return refusal;
    }
    pybox_run_request_t rr = w->rd.run;
    rr.program = a->code;
    rr.program_len = a->code_len;
    rr.inputs = sc.n_paths > 0 ? &frd.inputs : NULL;
    rr.output = a->return_files ? &frd.output : NULL;
    rr.policy.timeout_ms = a->timeout_ms;
    /* No call outlives its session: its deadline is at most what is left of the
     * session's lifetime (the take refused a session past it), and its receipt says so. */
    int64_t asked = a->timeout_ms > 0 && a->timeout_ms < most ? a->timeout_ms : most, ends_ms = 0, idle_ms = 0;
    int64_t left = pybox_mcp_sessions_limits(ss, a->session_id, &ends_ms, &idle_ms) ? ends_ms - pybox_now_ms() : asked;
    bool cut = left < asked;
    if (cut)
        rr.policy.timeout_ms = left > 1 ? left : 1;
    rr.started_s = started;
    rr.cancellable = true;
    rr.cancel_fd = cancel_fd;
    rr.hook = on_step;
    rr.tick = on_tick;
    rr.hook_arg = hook;
    hook->timeout_ms = rr.policy.timeout_ms;
    bool ended = false;
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    pybox_ahead_call(w->box, &rr, &res, &ended);
    if (cut)
        res.start.call_asked_ms = asked;
    if (ended) {
        char how[200];
        snprintf(how, sizeof how, "its call %u ended it (%s)", res.start.call, pybox_end_word(res.end));
        w->box = NULL; /* freed by the call */
        pybox_mcp_sessions_give_back(ss, a->session_id, NULL, how);
        pybox_mcp_warm_free(w);
    } else {
        pybox_mcp_sessions_give_back(ss, a->session_id, w, NULL);
    }
    return result_of(cfg, &res, &sc, st, &frd.output);
}

static const char *const known_open_args[] = {"image", "timeout_s", "memory_mib", "ttl_s", NULL};

static cJSON *session_open(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                           pybox_mcp_progress_fn progress, void *progress_ctx)
{
    (void)progress;
    const pybox_mcp_ctx_t *ctx = arg;
    pybox_mcp_sessions_t *ss = ctx != NULL ? ctx->sessions : NULL;
    call_args_t a;
    memset(&a, 0, sizeof a);
    cJSON *refusal = refuse_unknown(args, "session_open", known_open_args);
    if (refusal == NULL)
        refusal = check_box_args(cfg, args, &a);
    if (refusal != NULL)
        return refusal;
    int64_t ttl_ms = cfg->session_ttl_ms;
    const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(args, "ttl_s");
    if (ttl != NULL) {
        char most[PYBOX_NUM_MAX];
        pybox_fmt_fixed(most, cfg->session_ttl_ms, 3);
        if (!cJSON_IsNumber(ttl) || !isfinite(ttl->valuedouble) || ttl->valuedouble < 1 ||
            ttl->valuedouble * 1000 > (double)cfg->session_ttl_ms)
            return refuse("ttl_s: give seconds from 1 up to %s (set by the server)", most);
        ttl_ms = (int64_t)(ttl->valuedouble * 1000);
    }
    char why[320];
    uint64_t tenant = pybox_mcp_call_tenant(progress_ctx);
    if (pybox_mcp_sessions_reserve(ss, tenant, why, sizeof why) < 0)
        return refuse("%s", why);
    pybox_error_t err = {0};
    pybox_mcp_warm_t *w = calloc(1, sizeof *w);
    if (w == NULL) {
        pybox_mcp_sessions_unreserve(ss, tenant);
        return refuse("out of memory");
    }
    pybox_ready_init(&w->rd);
    pybox_request_t rq = box_request(cfg, &a);
    rq.program = "";
    if (pybox_prepare(&rq, &w->rd, &err) < 0) {
        cJSON *r = refuse_prepared(cfg, &w->rd, &err);
        pybox_mcp_warm_free(w);
        pybox_mcp_sessions_unreserve(ss, tenant);
        return r;
    }
    /* The init's own clocks: the idle limit and the lifetime, each with a margin after the
     * server's, so the server ends the session first while it lives. */
    w->rd.run.policy.box_wait_ms = cfg->session_idle_ms + PYBOX_MCP_WARM_MARGIN_MS;
    w->rd.run.policy.box_life_ms = ttl_ms + PYBOX_MCP_WARM_MARGIN_MS;
    /* A cancel while the box is made or readied stops it there (its calls bring their own). */
    w->rd.run.cancellable = cancel_fd >= 0;
    w->rd.run.cancel_fd = cancel_fd;
    int opened = pybox_ahead_open(w->rd.be, &w->rd.run, &w->box, &err);
    w->rd.run.cancellable = false;
    w->rd.run.cancel_fd = -1;
    if (opened < 0) {
        pybox_mcp_warm_free(w);
        pybox_mcp_sessions_unreserve(ss, tenant);
        return refuse("the session's box could not be made ready: %s", err.msg);
    }
    /* Cancelled (or its client gone) while the box was made: nobody would get the
     * session's id, so it is not opened; its box goes and its place is free again. */
    struct pollfd cp = {.fd = cancel_fd, .events = POLLIN};
    if (cancel_fd >= 0 && poll(&cp, 1, 0) > 0) {
        _cleanup_(pybox_run_result_free) pybox_run_result_t res;
        pybox_ahead_close(w->box, &res);
        w->box = NULL;
        pybox_mcp_warm_free(w);
        pybox_mcp_sessions_unreserve(ss, tenant);
        return NULL;
    }
    char id[33];
    if (pybox_mcp_sessions_add(ss, w, pybox_mcp_call_connection(progress_ctx), tenant, ttl_ms, cfg->session_idle_ms, id,
                               &err) < 0) {
        pybox_mcp_warm_free(w);
        return refuse("the session could not be kept: %s", err.msg);
    }
    /* Read under no lock: the session is not yet known to the agent, so no call uses it. */
    const pybox_run_result_t *seen = pybox_ahead_seen(w->box);
    const pybox_policy_t *p = &seen->policy;
    char ends[40], t[PYBOX_NUM_MAX], l[PYBOX_NUM_MAX], i[PYBOX_NUM_MAX];
    time_t end_s = (time_t)(pybox_wall_s() + ttl_ms / 1000);
    struct tm tmv;
    strftime(ends, sizeof ends, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&end_s, &tmv));
    cJSON *result = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(result, "content");
    char text[2048];
    snprintf(text, sizeof text,
             "session %s opened: image %s, one interpreter for every call given this session_id (state kept "
             "between them); each call at most %s s, %lld MiB for the session; it ends at session_close, after "
             "%s s with no call, at %s (its lifetime, %s s), at a call that ends its interpreter (a deadline, an "
             "out-of-memory kill, a crash), or when this connection ends. Box %s made and verified %s; preload "
             "(said by PyBox's bootstrap): %s.",
             id, a.image, pybox_fmt_fixed(t, p->timeout_ms, 3), (long long)(p->memory_bytes >> 20),
             pybox_fmt_fixed(i, cfg->session_idle_ms, 3), ends, pybox_fmt_fixed(l, ttl_ms, 3), seen->box_id,
             seen->start.made_at, seen->start.imported[0] ? seen->start.imported : "nothing");
    add_text(content, text);
    cJSON *sc = cJSON_AddObjectToObject(result, "structuredContent");
    cJSON_AddStringToObject(sc, "session_id", id);
    cJSON_AddStringToObject(sc, "image", a.image);
    cJSON_AddNumberToObject(sc, "timeout_s", (double)p->timeout_ms / 1000.0);
    cJSON_AddNumberToObject(sc, "memory_mib", (double)(p->memory_bytes >> 20));
    cJSON_AddNumberToObject(sc, "ttl_s", (double)ttl_ms / 1000.0);
    cJSON_AddNumberToObject(sc, "idle_s", (double)cfg->session_idle_ms / 1000.0);
    cJSON_AddStringToObject(sc, "ends_at", ends);
    cJSON_AddStringToObject(sc, "box_id", seen->box_id);
    cJSON_AddStringToObject(sc, "box_made_at", seen->start.made_at);
    cJSON_AddBoolToObject(sc, "box_verified", seen->verified);
    cJSON_AddStringToObject(sc, "preload_imported", seen->start.imported);
    /* Cancelled from now on, or never taken by its client: drop_session ends it. */
    cJSON_AddStringToObject(result, PYBOX_MCP_KEPT_KEY, id);
    return result;
}

/* session_open's result was never sent: nobody has its id, so the session ends now
 * rather than hold its place until its idle limit. */
static void drop_session(void *arg, const pybox_mcp_config_t *cfg, const cJSON *kept)
{
    (void)cfg;
    const pybox_mcp_ctx_t *ctx = arg;
    if (ctx != NULL && cJSON_IsString(kept))
        pybox_mcp_sessions_end(ctx->sessions, kept->valuestring, "its session_open was cancelled; its id never sent");
}

static cJSON *session_close(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                            pybox_mcp_progress_fn progress, void *progress_ctx)
{
    (void)cancel_fd;
    (void)progress;
    const pybox_mcp_ctx_t *ctx = arg;
    pybox_mcp_sessions_t *ss = ctx != NULL ? ctx->sessions : NULL;
    static const char *const known[] = {"session_id", NULL};
    cJSON *unknown = refuse_unknown(args, "session_close", known);
    if (unknown != NULL)
        return unknown;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(args, "session_id");
    if (!session_id_valid(id))
        return refuse("session_id: give the id session_open returned (32 hex digits)");
    char why[320];
    pybox_mcp_warm_t *w =
        pybox_mcp_sessions_take(ss, id->valuestring, pybox_mcp_call_connection(progress_ctx), why, sizeof why);
    if (w == NULL)
        return refuse("session_id: %s", why);
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    pybox_ahead_close(w->box, &res);
    w->box = NULL;
    pybox_mcp_sessions_give_back(ss, id->valuestring, NULL, "closed by session_close");
    pybox_mcp_warm_free(w);
    scratch_t sc = {.n_paths = 0};
    return result_of(cfg, &res, &sc, ctx != NULL ? ctx->st : NULL, NULL);
}

static cJSON *session_open_describe(const pybox_mcp_config_t *cfg)
{
    cJSON *t = tool_new("session_open", "Open a Python session in one sealed box");
    char desc[1024], most[PYBOX_NUM_MAX], idle[PYBOX_NUM_MAX];
    snprintf(desc, sizeof desc,
             "Opens a session: one sealed box whose one interpreter runs every run_python call given its "
             "session_id, in the same globals (variables, imports, /tmp and /box/out last for the session). "
             "Only when state between calls is needed: without it every call gets a fresh box. Returns the "
             "session_id. A session ends at session_close, after %s s with no call, at its lifetime (ttl_s, at "
             "most %s s), at a call that ends its interpreter, or with this connection. At most %d live at once "
             "(set by the server).",
             pybox_fmt_fixed(idle, cfg->session_idle_ms, 3), pybox_fmt_fixed(most, cfg->session_ttl_ms, 3),
             cfg->sessions);
    cJSON_AddStringToObject(t, "description", desc);
    cJSON *in;
    cJSON *props = input_schema(t, &in);
    image_prop(props, cfg, "The image of the session's box (the first is the default).");
    limit_props(props, cfg, "The longest deadline any call of the session may have.",
                "The session's memory limit in MiB (without swap).");
    cJSON *ttl = prop(props, "ttl_s", "number", "The session's lifetime in seconds (set by the server: at most).");
    cJSON_AddNumberToObject(ttl, "minimum", 1);
    cJSON_AddNumberToObject(ttl, "maximum", (double)cfg->session_ttl_ms / 1000.0);
    cJSON_AddBoolToObject(in, "additionalProperties", 0);
    return t;
}

static cJSON *session_close_describe(const pybox_mcp_config_t *cfg)
{
    (void)cfg;
    cJSON *t = tool_new("session_close", "Close a Python session");
    cJSON_AddStringToObject(t, "description",
                            "Ends a session: every process in its box is killed and the box removed. Returns the "
                            "session's receipt: its box, its calls, its totals from the kernel.");
    cJSON *in;
    cJSON *props = input_schema(t, &in);
    prop(props, "session_id", "string", "The id session_open returned.");
    cJSON *req = cJSON_AddArrayToObject(in, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("session_id"));
    cJSON_AddBoolToObject(in, "additionalProperties", 0);
    cJSON_AddItemToObject(t, "outputSchema", pybox_receipt_run_schema(false));
    return t;
}

/* A session is its connection's: it ends with it. */
static void sessions_of_connection_end(void *arg, uint64_t connection)
{
    const pybox_mcp_ctx_t *ctx = arg;
    if (ctx != NULL)
        pybox_mcp_sessions_end_owned(ctx->sessions, connection);
}

const pybox_mcp_tool_t pybox_mcp_session_open_tool = {
    .name = "session_open",
    .describe = session_open_describe,
    .call = session_open,
    .drop = drop_session,
    .connection_end = sessions_of_connection_end,
};

const pybox_mcp_tool_t pybox_mcp_session_close_tool = {
    .name = "session_close",
    .describe = session_close_describe,
    .call = session_close,
    .drop = NULL,
};

cJSON *pybox_mcp_run_python(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                            pybox_mcp_progress_fn progress, void *progress_ctx)
{
    double started = pybox_now_s(); /* the call's phases all count from here */
    /* The installation the server serves (the core opens it again itself, as PYBOX_HOME
     * names it); without one, the one PYBOX_HOME names. The call's scratch goes there. */
    const pybox_mcp_ctx_t *ctx = arg;
    const pybox_state_t *st = ctx != NULL ? ctx->st : NULL;
    pybox_state_t own;
    call_args_t a;
    cJSON *refusal = check_args(cfg, args, &a);
    if (refusal != NULL)
        return refusal;
    if (st == NULL) {
        pybox_error_t err = {0};
        if (pybox_state_open(&own, false, &err) < 0)
            return refuse("%s", err.msg);
        st = &own;
    }
    hook_ctx_t hook = {.progress = progress, .ctx = progress_ctx, .n = 0, .next_tick_ms = PYBOX_MCP_PROGRESS_MS};
    if (a.session_id != NULL)
        return run_in_session(ctx, cfg, &a, st, started, cancel_fd, &hook, pybox_mcp_call_connection(progress_ctx));
    _cleanup_(scratch_free) scratch_t sc = {.n_paths = 0};
    refusal = take_files(cfg, st, &a, &sc);
    if (refusal != NULL)
        return refusal;
    char why_cold[512];
    pybox_request_t rq = box_request(cfg, &a);
    rq.program = a.code;
    rq.program_len = a.code_len;
    rq.inputs = sc.paths;
    rq.n_inputs = sc.n_paths;
    rq.output = a.return_files ? sc.outdir : NULL;
    rq.started_s = started;
    rq.cancellable = true;
    rq.cancel_fd = cancel_fd;
    rq.hook = on_step;
    rq.tick = on_tick;
    rq.hook_arg = &hook;
    rq.why_cold = why_cold;
    pybox_mcp_warm_t *warm = pybox_mcp_pool_take(ctx != NULL ? ctx->pool : NULL, a.image, a.timeout_ms, a.memory_bytes,
                                                 why_cold, sizeof why_cold);
    bool used = false;
    cJSON *result =
        warm != NULL ? run_warm(cfg, ctx->pool, &a, &rq, &sc, warm, &used, why_cold, sizeof why_cold) : NULL;
    if (!used)
        result = run_cold(cfg, &rq, &sc);
    if (result != NULL && progress)
        progress(progress_ctx, 6, 6, "done");
    return result;
}

static void drop_kept(void *arg, const pybox_mcp_config_t *cfg, const cJSON *kept)
{
    (void)arg;
    if (!cJSON_IsString(kept) || cfg->output_root[0] == '\0')
        return;
    if (pybox_mcp_discard_kept(cfg->output_root, kept->valuestring) < 0) {
        char e[128];
        pybox_log("removing the files of a cancelled call: %s", pybox_strerror(errno, e, sizeof e));
    }
}

const pybox_mcp_tool_t pybox_mcp_run_python_tool = {
    .name = "run_python",
    .describe = pybox_mcp_run_python_describe,
    .call = pybox_mcp_run_python,
    .drop = drop_kept,
};
