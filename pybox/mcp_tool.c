/* SPDX-License-Identifier: MIT */
/* run_python, the MCP server's tool: one fresh box per call through the core library,
 * under the ceilings the operator set (see mcp.h and docs/mcp.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box.h"
#include "buf.h"
#include "cli.h"
#include "engine.h"
#include "escape.h"
#include "files.h"
#include "image.h"
#include "mcp.h"
#include "receipt.h"
#include "run.h"
#include "state.h"
#include "util.h"

#define INLINE_TEXT_MAX (256 * 1024)
#define INLINE_IMAGE_MAX (4 * 1024 * 1024)
#define FILES_MAX 64

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir)
{
    if (dir[0] != '\0')
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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

static const char *const known_args[] = {"code", "image", "timeout_s", "memory_mib", "files", "return_files", NULL};
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

/* A path under the files root, resolved, that stays under it. */
static int under_root(const char *root, const char *rel, char *out, size_t len)
{
    char rroot[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
    if (root[0] == '\0' || realpath(root, rroot) == NULL || rel[0] == '/' ||
        pybox_fmt(joined, sizeof joined, "%s/%s", rroot, rel) < 0 || realpath(joined, real) == NULL)
        return -1;
    size_t rl = strlen(rroot);
    if (strncmp(real, rroot, rl) != 0 || (real[rl] != '/' && real[rl] != '\0'))
        return -1;
    return pybox_fmt(out, len, "%s", real);
}

typedef struct {
    pybox_mcp_progress_fn progress;
    void *ctx;
    int n;
} hook_ctx_t;

static void on_step(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    hook_ctx_t *h = arg;
    if (h->progress)
        h->progress(h->ctx, ++h->n, 6, step);
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

static void add_text(cJSON *content, const char *text)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddItemToArray(content, t);
}

/* Returned files: images as images, text inline, the rest kept under the output root. */
static void add_files(cJSON *content, const pybox_outputs_t *o, const char *dir, bool kept)
{
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
        const char *mime = over ? NULL : image_mime((const unsigned char *)data, len);
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        if (mime != NULL) {
            cJSON *img = cJSON_CreateObject();
            cJSON_AddStringToObject(img, "type", "image");
            pybox_base64(&b, data, len);
            cJSON_AddStringToObject(img, "data", b.data ? b.data : "");
            cJSON_AddStringToObject(img, "mimeType", mime);
            cJSON_AddItemToArray(content, img);
        } else if (!over && len <= INLINE_TEXT_MAX && pybox_utf8_valid(data, len) && memchr(data, 0, len) == NULL) {
            pybox_buf_printf(&b, "file %s (%zu bytes, written by the program):\n", e->name, len);
            pybox_buf_append(&b, data, len);
            add_text(content, b.data ? b.data : "");
        } else if (kept) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddStringToObject(l, "type", "resource_link");
            pybox_buf_printf(&b, "file://%s", path);
            cJSON_AddStringToObject(l, "uri", b.data ? b.data : "");
            cJSON_AddStringToObject(l, "name", e->name);
            cJSON_AddStringToObject(l, "mimeType", "application/octet-stream");
            cJSON_AddNumberToObject(l, "size", (double)e->bytes);
            cJSON_AddItemToArray(content, l);
        } else {
            pybox_buf_printf(&b, "file %s: %lld bytes, not shown (not text; this server keeps no files)", e->name,
                             (long long)e->bytes);
            add_text(content, b.data ? b.data : "");
        }
        pybox_buf_free(&b);
        free(data);
    }
}

/* What a model reads first: the verdict, then what the program said, then what is not
 * known. The program's text is labelled as its own. */
static char *summary(const cJSON *receipt)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(receipt, "status");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(receipt, "exit_code");
    pybox_buf_printf(&b, "status: %s, exit code %d\n", cJSON_IsString(st) ? st->valuestring : "?",
                     cJSON_IsNumber(code) ? code->valueint : -1);
    const cJSON *said = cJSON_GetObjectItemCaseSensitive(receipt, "said");
    static const char *const streams[] = {"stdout", "stderr"};
    for (int i = 0; i < 2; i++) {
        const cJSON *sj = cJSON_GetObjectItemCaseSensitive(said, streams[i]);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(sj, "text");
        const cJSON *total = cJSON_GetObjectItemCaseSensitive(sj, "total_bytes");
        if (!cJSON_IsString(text) || text->valuestring[0] == '\0')
            continue;
        pybox_buf_printf(&b, "--- %s (untrusted, written by the program; %d bytes%s) ---\n%s\n", streams[i],
                         cJSON_IsNumber(total) ? total->valueint : 0,
                         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sj, "truncated")) ? ", cut" : "",
                         text->valuestring);
    }
    const cJSON *u;
    cJSON_ArrayForEach (u, cJSON_GetObjectItemCaseSensitive(receipt, "unknown")) {
        if (cJSON_IsString(u))
            pybox_buf_printf(&b, "not established: %s\n", u->valuestring);
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(receipt, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    if (cJSON_IsString(msg))
        pybox_buf_printf(&b, "PyBox: %s\n", msg->valuestring);
    return pybox_buf_steal(&b);
}

cJSON *pybox_mcp_run_python(void *arg, const pybox_mcp_config_t *cfg, const cJSON *args, int cancel_fd,
                            pybox_mcp_progress_fn progress, void *progress_ctx)
{
    const pybox_state_t *st = arg;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *image = cJSON_GetObjectItemCaseSensitive(args, "image");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_s");
    const cJSON *memory = cJSON_GetObjectItemCaseSensitive(args, "memory_mib");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(args, "files");
    const cJSON *ret = cJSON_GetObjectItemCaseSensitive(args, "return_files");
    char allowed[512];
    allowed_list(cfg, allowed, sizeof allowed);

    /* Everything is checked before any box is built; an argument this tool does not
     * know is refused, never ignored. */
    const char *unknown = unknown_key(args, known_args);
    if (unknown != NULL)
        return refuse("unknown argument '%.64s' (run_python takes: code, image, timeout_s, memory_mib, files, "
                      "return_files)",
                      unknown);
    if (!cJSON_IsString(code) || code->valuestring[0] == '\0')
        return refuse("code: give the Python program as a non-empty string");
    size_t code_len = strlen(code->valuestring);
    if (code_len > PYBOX_PROGRAM_MAX)
        return refuse("code: the program is larger than %d bytes (set by the server)", PYBOX_PROGRAM_MAX);
    const char *img = cfg->images[0];
    if (image != NULL) {
        bool ok = false;
        for (size_t i = 0; cJSON_IsString(image) && i < cfg->n_images; i++)
            ok |= strcmp(image->valuestring, cfg->images[i]) == 0;
        if (!ok)
            return refuse("image: not allowed (set by the server); allowed: %s", allowed);
        img = image->valuestring;
    }
    pybox_exec_opts_t o;
    memset(&o, 0, sizeof o);
    o.image = img;
    o.timeout_ms = PYBOX_DEFAULT_TIMEOUT_MS;
    if (timeout != NULL) {
        if (!cJSON_IsNumber(timeout) || timeout->valuedouble * 1000 < PYBOX_TIMEOUT_MIN_MS)
            return refuse("timeout_s: give seconds from %.1f up to %.0f (set by the server)",
                          PYBOX_TIMEOUT_MIN_MS / 1000.0, (double)cfg->max_timeout_ms / 1000.0);
        if (timeout->valuedouble * 1000 > (double)cfg->max_timeout_ms)
            return refuse("timeout_s: %g s is above the maximum of %.0f s (set by the server)", timeout->valuedouble,
                          (double)cfg->max_timeout_ms / 1000.0);
        o.timeout_ms = (int64_t)(timeout->valuedouble * 1000);
        o.timeout_given = true;
    }
    if (memory != NULL) {
        if (!cJSON_IsNumber(memory) || memory->valuedouble < (double)(PYBOX_MEMORY_MIN >> 20) ||
            memory->valuedouble != (double)(int64_t)memory->valuedouble)
            return refuse("memory_mib: give a whole number of MiB from %lld (set by the server)",
                          (long long)(PYBOX_MEMORY_MIN >> 20));
        if ((int64_t)memory->valuedouble * 1024 * 1024 > cfg->max_memory_bytes)
            return refuse("memory_mib: %lld is above the maximum of %lld MiB (set by the server)",
                          (long long)memory->valuedouble, (long long)(cfg->max_memory_bytes >> 20));
        o.memory_bytes = (int64_t)memory->valuedouble * 1024 * 1024;
    }
    if (files != NULL && (!cJSON_IsArray(files) || cJSON_GetArraySize(files) > FILES_MAX))
        return refuse("files: give an array of at most %d files", FILES_MAX);
    if (ret != NULL && !cJSON_IsBool(ret))
        return refuse("return_files: give true or false");

    /* The image's own defaults, then the installation's ceilings, then the server's. */
    pybox_error_t err = {0};
    pybox_config_t ceil;
    pybox_pin_t pin;
    if (pybox_state_config(st, &ceil, &err) < 0)
        return refuse("%s", err.msg);
    if (pybox_pin_get(st, img, &pin, &err) == 1)
        pybox_cli_apply_defaults(&o, &pin);
    else
        pybox_cli_apply_defaults(&o, &(pybox_pin_t){0});
    /* An image's default never passes the server's ceiling: it is capped there (the
     * receipt's asked section shows what the box got). */
    if (o.timeout_ms > cfg->max_timeout_ms)
        o.timeout_ms = cfg->max_timeout_ms;
    if (o.memory_bytes > cfg->max_memory_bytes)
        o.memory_bytes = cfg->max_memory_bytes;
    if (pybox_cli_check_ceilings(&o, &ceil, &err) < 0)
        return refuse("%s", err.msg);

    /* Input files: inline ones into a private folder first; all packed before the box. */
    char work[64] = "";
    char outdir[PATH_MAX] = "";
    const char *paths[FILES_MAX];
    char path_store[FILES_MAX][PATH_MAX];
    size_t n_paths = 0;
    cJSON *result = NULL;
    pybox_inputs_t inputs;
    pybox_inputs_init(&inputs);
    pybox_output_spec_t out;
    memset(&out, 0, sizeof out);
    out.parent_fd = -1;
    bool kept = false;
    snprintf(work, sizeof work, "/tmp/pybox-mcp-XXXXXX");
    if (mkdtemp(work) == NULL) {
        work[0] = '\0';
        result = refuse("the server could not make a private folder: %s", strerror(errno));
        goto done;
    }
    const cJSON *f;
    cJSON_ArrayForEach (f, files) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(f, "content");
        const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(f, "content_base64");
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(f, "path");
        char *p = path_store[n_paths];
        const char *bad = cJSON_IsObject(f) ? unknown_key(f, known_file_keys) : "(not an object)";
        int given = (name != NULL) + (text != NULL) + (b64 != NULL);
        if (bad != NULL || (path != NULL && given > 0) || (text != NULL && b64 != NULL)) {
            result = refuse("files: each file is {name, content} or {name, content_base64} or {path}%s%.64s",
                            bad ? "; unknown: " : "", bad ? bad : "");
            goto done;
        }
        if (cJSON_IsString(path)) {
            if (cfg->files_root[0] == '\0' || under_root(cfg->files_root, path->valuestring, p, PATH_MAX) < 0) {
                result = refuse("files: '%.200s' is not a file under this server's files root (set by the server)",
                                path->valuestring);
                goto done;
            }
        } else if (cJSON_IsString(name) && simple_name(name->valuestring) &&
                   (cJSON_IsString(text) || cJSON_IsString(b64))) {
            if (pybox_fmt(p, PATH_MAX, "%s/%s", work, name->valuestring) < 0) {
                result = refuse("files: a name is too long");
                goto done;
            }
            int wr;
            if (cJSON_IsString(text)) {
                wr = write_bytes(p, text->valuestring, strlen(text->valuestring));
            } else {
                size_t bl = strlen(b64->valuestring);
                unsigned char *bin = malloc(bl / 4 * 3 + 4);
                int n = bin ? EVP_DecodeBlock(bin, (const unsigned char *)b64->valuestring, (int)bl) : -1;
                if (n < 0 || bl % 4 != 0) {
                    free(bin);
                    result = refuse("files: content_base64 of '%.100s' is not base64", name->valuestring);
                    goto done;
                }
                /* EVP_DecodeBlock counts the padding as bytes */
                size_t pad =
                    (bl >= 1 && b64->valuestring[bl - 1] == '=') + (bl >= 2 && b64->valuestring[bl - 2] == '=');
                wr = write_bytes(p, bin, (size_t)n - pad);
                free(bin);
            }
            if (wr < 0) {
                result = refuse("files: '%.100s' could not be written (a name given twice?)", name->valuestring);
                goto done;
            }
        } else {
            result = refuse("files: each file needs a simple name and content or content_base64, or a path");
            goto done;
        }
        paths[n_paths] = p;
        n_paths++;
    }
    if (n_paths > 0 && pybox_inputs_prepare(paths, n_paths, PYBOX_INPUT_MAX, &inputs, &err) < 0) {
        result = refuse("%s", err.msg);
        goto done;
    }
    if (cJSON_IsTrue(ret)) {
        char rnd[17];
        if (pybox_random_hex(8, rnd, &err) < 0) {
            result = refuse("%s", err.msg);
            goto done;
        }
        kept = cfg->output_root[0] != '\0';
        int fr = kept ? pybox_fmt(outdir, sizeof outdir, "%s/%s", cfg->output_root, rnd)
                      : pybox_fmt(outdir, sizeof outdir, "%s/out", work);
        if (fr < 0 || pybox_output_check(outdir, &out, &err) < 0) {
            result = refuse("return_files: %s", fr < 0 ? "the output folder's path is too long" : err.msg);
            goto done;
        }
    }

    pybox_engine_t *e = NULL;
    if (pybox_engine_open(NULL, &e, &err) < 0 || pybox_image_resolve(st, e, img, &pin, &err) < 0) {
        pybox_engine_free(e);
        result = refuse("%s", err.msg);
        goto done;
    }
    hook_ctx_t hook = {.progress = progress, .ctx = progress_ctx, .n = 0};
    pybox_run_request_t req = {.program = code->valuestring,
                               .program_len = code_len,
                               .image_name = img,
                               .pin = &pin,
                               .state = st,
                               .expiry_s = ceil.expiry_s,
                               .housekeeping = true,
                               .inputs = n_paths > 0 ? &inputs : NULL,
                               .output = cJSON_IsTrue(ret) ? &out : NULL,
                               .cancellable = true,
                               .cancel_fd = cancel_fd,
                               .hook = on_step,
                               .hook_arg = &hook};
    pybox_policy_defaults(&req.policy);
    snprintf(req.policy.image_id, sizeof req.policy.image_id, "%s", pin.id);
    snprintf(req.policy.install_id, sizeof req.policy.install_id, "%s", st->install_id);
    req.policy.timeout_ms = o.timeout_ms;
    req.policy.box_timer_ms = o.timeout_ms + PYBOX_BOX_TIMER_MARGIN_MS;
    req.policy.memory_bytes = o.memory_bytes;
    req.policy.pids = o.pids;
    req.policy.nano_cpus = o.nano_cpus;
    pybox_backend_t be;
    pybox_docker_backend(&be, e);
    pybox_run_result_t res;
    pybox_run(&be, &req, &res);
    snprintf(res.engine, sizeof res.engine, "engine %s", pybox_engine_version(e));
    pybox_engine_free(e);
    if (res.end == PYBOX_END_CANCELLED) {
        pybox_run_result_free(&res);
        result = NULL; /* cancelled: nothing is sent */
        goto done;
    }
    cJSON *receipt = pybox_receipt_json(&res);
    result = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(result, "content");
    char *text = receipt ? summary(receipt) : NULL;
    add_text(content, text ? text : "no receipt");
    free(text);
    if (res.outputs.status == PYBOX_OUT_DELIVERED)
        add_files(content, &res.outputs, outdir, kept);
    /* A PyBox failure is an error result; its receipt still says what was seen. */
    if (res.end == PYBOX_END_PYBOX_ERROR || res.end == PYBOX_END_EXTERNAL_STOP)
        cJSON_AddBoolToObject(result, "isError", 1);
    if (receipt != NULL)
        cJSON_AddItemToObject(result, "structuredContent", receipt);
    if (progress)
        progress(progress_ctx, 6, 6, "done");
    pybox_run_result_free(&res);

done:
    pybox_output_close(&out);
    pybox_inputs_free(&inputs);
    rm_tree(work); /* inline inputs, and the output when this server keeps none */
    return result;
}
