/* SPDX-License-Identifier: MIT */
/* Image build, import and pinning (see image.h). */
#include "image.h"

#include "../archive_api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../guest/proto.h"
#include "../buf.h"
#include "../escape.h"
#include "../limits.h"
#include "../util.h"
#include "../version.h"
#include "wheels.h"

/* The first of two candidates (an installed prefix's, the build folder's) that is a
 * file, into out; else an error naming both and the variable that overrides them. */
static int first_file(const char *what, const char *installed, const char *build, const char *var, char *out,
                      size_t len, pybox_error_t *err)
{
    struct stat sb;
    const char *pick = stat(installed, &sb) == 0 && S_ISREG(sb.st_mode) ? installed
                       : stat(build, &sb) == 0 && S_ISREG(sb.st_mode)   ? build
                                                                        : NULL;
    if (pick == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0,
                               "cannot find %s: looked for %s (installed) and %s (build folder); %s names another",
                               what, installed, build, var);
    return pybox_fmt(out, len, "%s", pick) < 0 ? pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "%s", what) : 0;
}

int pybox_image_paths_find(const char *exe_dir, const char *images_env, const char *init_env,
                           pybox_image_paths_t *paths, pybox_error_t *err)
{
    /* The prefix is the binary's parent folder (<prefix>/bin/pybox, or <tree>/build/pybox):
     * nothing of where it was built is kept in the binary, so an installed tree can move. */
    char prefix[PATH_MAX], inst[PATH_MAX], build[PATH_MAX];
    if (pybox_fmt(prefix, sizeof prefix, "%s", exe_dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the folder of pybox");
    char *slash = strrchr(prefix, '/');
    if (slash != NULL)
        *slash = '\0'; /* "/bin" gives "": its files are then under /share, /libexec */
    if (images_env && *images_env) {
        if (pybox_fmt(paths->recipes, sizeof paths->recipes, "%s", images_env) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "PYBOX_IMAGES");
    } else {
        if (pybox_fmt(inst, sizeof inst, "%s/" PYBOX_SHARE_IMAGES "/build-rootfs.sh", prefix) < 0 ||
            pybox_fmt(build, sizeof build, "%s/images/build-rootfs.sh", prefix) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the image recipes");
        if (first_file("the image recipes", inst, build, "PYBOX_IMAGES", paths->recipes, sizeof paths->recipes, err) <
            0)
            return -1;
        paths->recipes[strlen(paths->recipes) - strlen("/build-rootfs.sh")] = '\0';
    }
    if (init_env && *init_env) {
        if (pybox_fmt(paths->init, sizeof paths->init, "%s", init_env) < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "PYBOX_INIT");
        return 0;
    }
    if (pybox_fmt(inst, sizeof inst, "%s/" PYBOX_LIBEXEC "/pybox-init", prefix) < 0 ||
        pybox_fmt(build, sizeof build, "%s/pybox-init", exe_dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "the guest init");
    return first_file("the guest init", inst, build, "PYBOX_INIT", paths->init, sizeof paths->init, err);
}

int pybox_image_paths_default(pybox_image_paths_t *paths, pybox_error_t *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "readlink(/proc/self/exe)");
    exe[n] = '\0';
    return pybox_image_paths_find(dirname(exe), getenv("PYBOX_IMAGES"), getenv("PYBOX_INIT"), paths, err);
}

/* The names of a backend's pinned images, for messages ("stdlib, data"). */
static void known_images(const pybox_state_t *st, const char *backend, char *out, size_t len)
{
    pybox_pin_t *pins = NULL;
    size_t n = 0;
    out[0] = '\0';
    if (pybox_pin_list(st, backend, &pins, &n, NULL) < 0)
        return;
    size_t used = 0;
    for (size_t i = 0; i < n && used + 2 < len; i++) {
        int w = snprintf(out + used, len - used, "%s%s", i ? ", " : "", pins[i].name);
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
    free(pins);
    if (n == 0)
        snprintf(out, len, "none");
}

int pybox_image_resolve(const pybox_state_t *st, pybox_backend_t *be, const char *name, pybox_pin_t *pin,
                        pybox_error_t *err)
{
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    int r = pybox_pin_get(st, be->ops->name, name, pin, err);
    if (r < 0)
        return -1;
    if (r == 0) {
        char known[512];
        known_images(st, be->ops->name, known, sizeof known);
        bool other = strcmp(be->ops->name, PYBOX_DEFAULT_BACKEND) != 0;
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "unknown image '%s' (known: %s%s%s); build it with `pybox image build %s%s%s`", name,
                               known, other ? "; on the backend " : "", other ? be->ops->name : "", name,
                               other ? " --backend " : "", other ? be->ops->name : "");
    }
    bool other = strcmp(be->ops->name, PYBOX_DEFAULT_BACKEND) != 0;
    if (pin->protocol != PYBOX_GUEST_PROTOCOL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s' holds a guest init of protocol %d; this PyBox speaks %d: rebuild it with "
                               "`pybox image build %s%s%s`",
                               name, pin->protocol, PYBOX_GUEST_PROTOCOL, name, other ? " --backend " : "",
                               other ? be->ops->name : "");
    return be->ops->images->resolve(be, pin, err);
}

/* ---- fingerprints ---- */

/* Every byte read from fd (path names it) handed on in chunks to fn, which may stop the
 * reading (-1 with err). 0, or -1 with err. */
static int each_chunk(int fd, const char *path, int (*fn)(void *arg, const char *buf, size_t n, pybox_error_t *err),
                      void *arg, pybox_error_t *err)
{
    char buf[65536];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "read(%s)", path);
        if (r == 0)
            return 0;
        if (fn(arg, buf, (size_t)r, err) < 0)
            return -1;
    }
}

static int digest_chunk(void *md, const char *buf, size_t n, pybox_error_t *err)
{
    (void)err;
    EVP_DigestUpdate(md, buf, n);
    return 0;
}

static int hash_file(EVP_MD_CTX *md, const char *path, pybox_error_t *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", path);
    return each_chunk(fd, path, digest_chunk, md, err);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Where an image's recipe lives: images/<name> for the built-in ones, the state
 * directory's recipes/<name> for custom ones (made by --lock or --debian). */
static int recipe_dir(const pybox_state_t *st, const pybox_image_paths_t *paths, const char *name, char *out,
                      size_t len, bool *custom, pybox_error_t *err)
{
    struct stat sb;
    if (pybox_fmt(out, len, "%s/%s", paths->recipes, name) == 0 && stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        *custom = false;
        return 0;
    }
    char rel[PYBOX_NAME_MAX + 16];
    snprintf(rel, sizeof rel, "recipes/%s", name);
    if (pybox_state_path(st, rel, out, len, err) == 0 && stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        *custom = true;
        return 0;
    }
    return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                           "no recipe for image '%s': built-in recipes are in %s; a custom image is made with "
                           "`pybox image build %s --lock uv.lock --wheels DIR` or `--debian PACKAGES`",
                           name, paths->recipes, name);
}

static int hash_tree(EVP_MD_CTX *md, const char *dir, const char *rel, int depth, pybox_error_t *err)
{
    if (depth > 4)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "recipe folders nest too deep");
    char path[PATH_MAX];
    if (pybox_fmt(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
    DIR *d = opendir(path);
    if (d == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "opendir(%s)", path);
    char *names[1024];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 1024)
        if (de->d_name[0] != '.')
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char crel[PATH_MAX], cpath[PATH_MAX];
        struct stat sb;
        if (rc == 0 && (pybox_fmt(crel, sizeof crel, "%s%s%s", rel, rel[0] ? "/" : "", names[i]) < 0 ||
                        pybox_fmt(cpath, sizeof cpath, "%s/%s", dir, crel) < 0))
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
        if (rc == 0 && lstat(cpath, &sb) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, errno, "lstat(%s)", cpath);
        if (rc == 0) {
            /* each entry as: kind, name length, name, content length, content: no two
             * different trees can hash alike by moving bytes between names and files */
            char headr[64];
            int hn = snprintf(headr, sizeof headr, "%c%zu:", S_ISDIR(sb.st_mode) ? 'd' : 'f', strlen(crel));
            EVP_DigestUpdate(md, headr, (size_t)hn);
            EVP_DigestUpdate(md, crel, strlen(crel));
            if (S_ISREG(sb.st_mode)) {
                hn = snprintf(headr, sizeof headr, "%lld:", (long long)sb.st_size);
                EVP_DigestUpdate(md, headr, (size_t)hn);
            }
            if (S_ISDIR(sb.st_mode))
                rc = hash_tree(md, dir, crel, depth + 1, err);
            else if (S_ISREG(sb.st_mode))
                rc = hash_file(md, cpath, err);
            else
                rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: only files and folders belong in a recipe", cpath);
        }
        free(names[i]);
    }
    return rc;
}

/* The recipe's fingerprint. The base one covers only what builds the root filesystem
 * (its package list, its customize step and the files it installs, the build script),
 * so images that share it share the cached root filesystem; the full one covers
 * everything, the guest init included. */
/* The folders and files compose() adds, named so that the fingerprint changes with them. */
#define PYBOX_COMPOSE_LAYOUT                                                                                           \
    "compose/3: /pybox/{init,bootstrap.py,preload,manifest.json} /box/{in,out} /run /host /etc/{hostname,hosts}\n"

/* The interpreter bootstrap, linked in (bootstrap_blob.S). */
extern const char pybox_bootstrap_src[];
extern const char pybox_bootstrap_src_end[];

static int fingerprint(const pybox_image_paths_t *paths, const char *dir, bool full, char out[65], pybox_error_t *err)
{
    char script[PATH_MAX], pkgs[PATH_MAX];
    if (pybox_fmt(script, sizeof script, "%s/build-rootfs.sh", paths->recipes) < 0 ||
        pybox_fmt(pkgs, sizeof pkgs, "%s/packages", dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
    EVP_MD_CTX *md = pybox_digest_start();
    if (md == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "a digest");
    int rc = full ? hash_tree(md, dir, "", 0, err) : hash_file(md, pkgs, err);
    if (rc == 0 && !full) {
        /* the optional customize step and its files (images/README.md) */
        char cust[PATH_MAX], files[PATH_MAX];
        struct stat sb;
        if (pybox_fmt(cust, sizeof cust, "%s/customize", dir) < 0 ||
            pybox_fmt(files, sizeof files, "%s/files", dir) < 0)
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
        if (rc == 0 && lstat(cust, &sb) == 0) {
            EVP_DigestUpdate(md, "customize\n", 10);
            rc = hash_file(md, cust, err);
        }
        if (rc == 0 && lstat(files, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            EVP_DigestUpdate(md, "files\n", 6);
            rc = hash_tree(md, dir, "files", 1, err);
        }
    }
    if (rc == 0)
        rc = hash_file(md, script, err);
    if (rc == 0 && full)
        rc = hash_file(md, paths->init, err);
    if (rc == 0 && full)
        EVP_DigestUpdate(md, pybox_bootstrap_src, (size_t)(pybox_bootstrap_src_end - pybox_bootstrap_src));
    /* What PyBox itself adds to every image (compose): a change of it is a new image. */
    if (rc == 0 && full)
        EVP_DigestUpdate(md, PYBOX_COMPOSE_LAYOUT, sizeof PYBOX_COMPOSE_LAYOUT - 1);
    if (!pybox_digest_done(md, rc == 0 ? out : NULL) && rc == 0)
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the recipe's digest could not be finished");
    return rc;
}

/* ---- the recipe's preload: modules a warm box imports before its program ---- */

int pybox_image_preload_check(const char *text, size_t len, char *why, size_t why_len)
{
    int lineno = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        lineno++;
        const char *l = text + i;
        size_t k = 0, end = n;
        const char *hash = memchr(l, '#', n);
        if (hash != NULL)
            end = (size_t)(hash - l);
        while (k < end && (l[k] == ' ' || l[k] == '\t' || l[k] == '\r'))
            k++;
        while (end > k && (l[end - 1] == ' ' || l[end - 1] == '\t' || l[end - 1] == '\r'))
            end--;
        /* a dotted module name: parts of [A-Za-z_][A-Za-z0-9_]*, nothing else on the line */
        bool ok = true, part_start = true;
        for (size_t j = k; j < end && ok; j++) {
            char c = l[j];
            bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
            if (c == '.') {
                ok = !part_start;
                part_start = true;
            } else if (alpha || (!part_start && c >= '0' && c <= '9')) {
                part_start = false;
            } else {
                ok = false;
            }
        }
        if (!ok || (end > k && part_start)) {
            snprintf(why, why_len, "line %d is not one module name (a dotted Python name, '#' comments)", lineno);
            return -1;
        }
        i += n + (nl != NULL);
    }
    return 0;
}

/* The recipe's preload file (images/README.md), checked; "" when it has none. */
static int read_preload(const char *dir, char **out, pybox_error_t *err)
{
    char path[PATH_MAX];
    if (pybox_fmt(path, sizeof path, "%s/preload", dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        *out = strdup("");
        return *out ? 0 : pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "preload");
    }
    if (fd < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", path);
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, PYBOX_IMAGE_PRELOAD_MAX, out, &len, &over, err) < 0)
        return -1;
    char why[128];
    if (over || memchr(*out, '\0', len) != NULL || pybox_image_preload_check(*out, len, why, sizeof why) < 0) {
        free(*out);
        *out = NULL;
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: %s", path,
                               over ? "larger than the most a preload list may be" : why);
    }
    return 0;
}

/* ---- the recipe's policy: defaults of runs in the image ---- */

/* "key value" lines, # comments: memory_mib, pids, cpus, timeout_s. */
static int read_policy(const char *dir, pybox_pin_t *pin, pybox_error_t *err)
{
    char path[PATH_MAX];
    if (pybox_fmt(path, sizeof path, "%s/policy", dir) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "recipe path");
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? 0 : pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", path);
    char line[256];
    int rc = 0, lineno = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "#\n")] = '\0';
        /* "key value": two words, each within its bound */
        char key[32], val[64];
        int n = 0;
        const char *q = line + strspn(line, " \t\r");
        size_t kl = strcspn(q, " \t\r");
        if (kl > 0 && kl < sizeof key) {
            memcpy(key, q, kl);
            key[kl] = '\0';
            n = 1;
            q += kl;
            q += strspn(q, " \t\r");
            size_t vl = strcspn(q, " \t\r");
            if (vl > 0 && vl < sizeof val) {
                memcpy(val, q, vl);
                val[vl] = '\0';
                n = 2;
            }
        } else if (kl >= sizeof key) {
            n = 1; /* a key too long: refused below */
            key[0] = '\0';
        }
        if (n <= 0)
            continue;
        /* each a limit's recipe_key (limits.h), in the limit's own parser */
        int64_t *to[PYBOX_LIMIT_RUN] = {&pin->memory_bytes, &pin->pids, &pin->nano_cpus, &pin->timeout_ms};
        bool ok = false;
        for (int id = 0; n == 2 && !ok && id < PYBOX_LIMIT_RUN; id++)
            ok = strcmp(key, pybox_limit(id)->recipe_key) == 0 && pybox_limit_parse(id, val, to[id]) == 0;
        if (!ok)
            rc = pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                 "%s line %d: expected memory_mib, pids, cpus or timeout_s "
                                 "with a valid value",
                                 path, lineno);
    }
    fclose(f);
    return rc;
}

/* ---- building ---- */

static void progress_line(const pybox_out_t *f, double t0, const char *what, const char *arg)
{
    if (f == NULL)
        return;
    pybox_out_line(f, "[%6.1fs] %s %s", pybox_now_s() - t0, what, arg);
}

static int run_script(const char *script, const char *recipe, const char *out, const char *debs, pybox_error_t *err)
{
    pid_t pid = fork();
    if (pid < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fork");
    if (pid == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO); /* the script's chatter is progress, not output */
        close_range(3, ~0U, 0);             /* nothing of PyBox's (engine socket, state) leaks */
        execl("/bin/sh", "sh", script, recipe, out, debs, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "%s %s failed (%s %d)", script, recipe,
                               WIFEXITED(status) ? "exit" : "signal",
                               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}

static int add_file(struct archive *w, const char *name, const void *data, size_t len, mode_t mode)
{
    return pybox_image_tar_entry(w, name, AE_IFREG, mode, (int64_t)len, data);
}

/* The base rootfs tar, plus /pybox/init and /pybox/manifest.json, into out_fd. */
/* The paths of the base archive, sorted, for lookups while wheels are added. */
typedef struct {
    char **v;
    size_t n, cap;
} names_t;

static int names_add(names_t *s, const char *path)
{
    if (pybox_grow(&s->v, &s->cap, s->n, sizeof *s->v, 4096) < 0)
        return -1;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    s->v[s->n] = strndup(path, len);
    return s->v[s->n] ? (int)(s->n++, 0) : -1;
}

static bool names_has(const char *path, void *arg)
{
    names_t *s = arg;
    const char *key = path;
    return bsearch(&key, s->v, s->n, sizeof *s->v, cmp_str) != NULL;
}

static void names_free(names_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* A root-owned 0755 folder entry. */
static int add_dir(struct archive *w, const char *path)
{
    struct archive_entry *d = archive_entry_new();
    if (d == NULL)
        return ARCHIVE_FATAL;
    archive_entry_set_pathname(d, path);
    archive_entry_set_filetype(d, AE_IFDIR);
    archive_entry_set_perm(d, 0755);
    archive_entry_set_uid(d, 0);
    archive_entry_set_gid(d, 0);
    archive_entry_set_mtime(d, 0, 0);
    int r = archive_write_header(w, d);
    archive_entry_free(d);
    return r;
}

static int compose(const char *base, int out_fd, const char *init_path, const char *manifest, const char *preload,
                   const pybox_lock_t *lock, const char *wheels_dir, const char *pyver, const pybox_out_t *progress,
                   pybox_error_t *err)
{
    names_t names = {0};
    bool had_run = false, had_host = false;
    _cleanup_free_ char *init = NULL;
    size_t init_len = 0;
    {
        _cleanup_close_ int fd = open(init_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s): build the guest init first (make)",
                                   init_path);
        bool over;
        if (pybox_read_bounded(fd, 16 * 1024 * 1024, &init, &init_len, &over, err) < 0)
            return -1;
    }
    struct archive *r = archive_read_new();
    struct archive *w = archive_write_new();
    if (r == NULL || w == NULL) {
        if (r != NULL)
            archive_read_free(r);
        if (w != NULL)
            archive_write_free(w);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the image tar: %s", pybox_archive_why());
    }
    archive_read_support_format_tar(r);
    archive_write_set_format_pax_restricted(w);
    int rc = -1;
    if (archive_read_open_filename(r, base, 1 << 16) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
        goto done;
    }
    if (archive_write_open_fd(w, out_fd) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    struct archive_entry *e;
    int hr;
    while ((hr = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
        const char *pn = archive_entry_pathname(e);
        if (pn == NULL) { /* the writer would read it: never hand it an entry without a name */
            pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: an entry has no name that can be read", base);
            goto done;
        }
        if (strncmp(pn, "./pybox/", 8) == 0 || strcmp(pn, "./pybox") == 0 || strncmp(pn, "./box/", 6) == 0 ||
            strcmp(pn, "./box") == 0)
            continue; /* PyBox's own folders come from PyBox only */
        if (strcmp(pn, "./run/") == 0 || strcmp(pn, "./run") == 0)
            had_run = true;
        if (strcmp(pn, "./host/") == 0 || strcmp(pn, "./host") == 0)
            had_host = true;
        if (strcmp(pn, "./etc/hostname") == 0 || strcmp(pn, "./etc/hosts") == 0)
            continue; /* the box's own, below */
        if (lock != NULL && names_add(&names, pn) < 0) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "image paths");
            goto done;
        }
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
            goto done;
        }
        const void *buf;
        size_t size;
        la_int64_t off;
        int dr;
        while ((dr = archive_read_data_block(r, &buf, &size, &off)) == ARCHIVE_OK) {
            if (archive_write_data(w, buf, size) < 0) {
                pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
                goto done;
            }
        }
        if (dr != ARCHIVE_EOF) {
            pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
            goto done;
        }
    }
    if (hr != ARCHIVE_EOF) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "reading %s: %s", base, archive_error_string(r));
        goto done;
    }
    if (lock != NULL) {
        /* "3.11.2-1+b1" -> site-packages of Python 3.11 */
        long major = 0, minor = 0;
        char site[128], *end = NULL;
        errno = 0;
        major = strtol(pyver, &end, 10);
        bool ver_ok = errno == 0 && end != pyver && *end == '.' && major > 0 && major < 100;
        if (ver_ok) {
            const char *m = end + 1;
            minor = strtol(m, &end, 10);
            ver_ok = errno == 0 && end != m && minor >= 0 && minor < 1000;
        }
        if (!ver_ok || pybox_fmt(site, sizeof site, "./usr/local/lib/python%ld.%ld/dist-packages", major, minor) < 0) {
            pybox_error_set(err, PYBOX_ERR_USAGE, 0, "cannot tell the image's Python version (%s)", pyver);
            goto done;
        }
        qsort(names.v, names.n, sizeof *names.v, cmp_str);
        if (pybox_wheels_unpack(w, lock, wheels_dir, site, "./usr/local/bin", names_has, &names, progress, err) < 0)
            goto done;
    }
    /* PyBox's folder, and the mount points a box's files and a relaxed test box use
     * (a backend that mounts on a read-only root needs them there already). */
    int dh = add_dir(w, "./pybox/");
    if (dh == ARCHIVE_OK)
        dh = add_dir(w, "./box/");
    if (dh == ARCHIVE_OK)
        dh = add_dir(w, "./box/in/");
    if (dh == ARCHIVE_OK)
        dh = add_dir(w, "./box/out/");
    if (dh == ARCHIVE_OK && !had_run)
        dh = add_dir(w, "./run/");
    if (dh == ARCHIVE_OK && !had_host)
        dh = add_dir(w, "./host/");
    /* The box's name, as a backend that does not write these itself needs them (the
     * engine mounts its own over them). */
    static const char hostname[] = "pybox\n";
    static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tpybox\n";
    if (dh != ARCHIVE_OK || add_file(w, "./etc/hostname", hostname, sizeof hostname - 1, 0644) < 0 ||
        add_file(w, "./etc/hosts", hosts, sizeof hosts - 1, 0644) < 0 ||
        add_file(w, "." PYBOX_GUEST_INIT_PATH, init, init_len, 0555) < 0 ||
        add_file(w, "." PYBOX_GUEST_BOOTSTRAP, pybox_bootstrap_src,
                 (size_t)(pybox_bootstrap_src_end - pybox_bootstrap_src), 0444) < 0 ||
        add_file(w, "." PYBOX_GUEST_PRELOAD, preload, strlen(preload), 0444) < 0 ||
        add_file(w, "./pybox/manifest.json", manifest, strlen(manifest), 0444) < 0) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    if (archive_write_close(w) != ARCHIVE_OK) {
        pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the image tar: %s", archive_error_string(w));
        goto done;
    }
    rc = 0;
done:
    names_free(&names);
    archive_read_free(r);
    archive_write_free(w);
    return rc;
}

/* The python3 package's version from the build's package list. */
static void python_version(const char *packages_path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(packages_path, "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "python3 ", 8) == 0) {
            line[strcspn(line, "\n")] = '\0';
            pybox_strlcpy(out, line + 8, len);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* The manifest: recipe, package versions, Python version. */
static char *manifest_json(const char *name, const char *recipe_sha, const char *packages_path, bool custom,
                           const pybox_lock_t *lock)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "recipe_sha256", recipe_sha);
    cJSON_AddStringToObject(m, "pybox_version", PYBOX_VERSION);
    cJSON_AddNumberToObject(m, "guest_protocol", PYBOX_GUEST_PROTOCOL);
    cJSON_AddBoolToObject(m, "custom", custom);
    if (lock != NULL) {
        cJSON *ws = cJSON_AddArrayToObject(m, "wheels");
        for (size_t i = 0; i < lock->n; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "name", lock->wheels[i].name);
            cJSON_AddStringToObject(x, "version", lock->wheels[i].version);
            cJSON_AddStringToObject(x, "file", lock->wheels[i].file);
            cJSON_AddStringToObject(x, "sha256", lock->wheels[i].sha256);
            cJSON_AddItemToArray(ws, x);
        }
    }
    cJSON *pk = cJSON_AddObjectToObject(m, "packages");
    FILE *f = fopen(packages_path, "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *sp = strchr(line, ' ');
        char *nl = strchr(line, '\n');
        if (!sp || !nl)
            continue;
        *sp = '\0';
        *nl = '\0';
        cJSON_AddStringToObject(pk, line, sp + 1);
        if (strcmp(line, "python3") == 0)
            cJSON_AddStringToObject(m, "python3_package", sp + 1);
    }
    if (f)
        fclose(f);
    char *t = cJSON_Print(m);
    cJSON_Delete(m);
    return t;
}

/* A root filesystem tar given with --rootfs: a regular file, with the package list
 * images/build-rootfs.sh writes beside it. */
static int rootfs_given(const char *rootfs, char *pkgs, size_t len, pybox_error_t *err)
{
    struct stat sb;
    if (rootfs[0] != '/')
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--rootfs %s: give the tar's absolute path", rootfs);
    if (stat(rootfs, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "--rootfs %s", rootfs);
    if (!S_ISREG(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--rootfs %s: not a file", rootfs);
    if (pybox_fmt(pkgs, len, "%s.packages", rootfs) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "--rootfs %s", rootfs);
    if (stat(pkgs, &sb) < 0 || !S_ISREG(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--rootfs %s: %s is missing (images/build-rootfs.sh writes the tar's package list "
                               "beside it, and the image's manifest names them)",
                               rootfs, pkgs);
    return 0;
}

int pybox_image_build(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths, const char *name,
                      bool force, const char *rootfs, const pybox_out_t *progress, bool *built, pybox_error_t *err)
{
    double t0 = pybox_now_s();
    *built = false;
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    char given_pkgs[PATH_MAX];
    if (rootfs != NULL && rootfs_given(rootfs, given_pkgs, sizeof given_pkgs, err) < 0)
        return -1;
    char rdir[PATH_MAX], base_fp[65], full_fp[65];
    bool custom = false;
    if (recipe_dir(st, paths, name, rdir, sizeof rdir, &custom, err) < 0 ||
        fingerprint(paths, rdir, false, base_fp, err) < 0 || fingerprint(paths, rdir, true, full_fp, err) < 0)
        return -1;
    /* A recipe with a lock file: its wheels are checked against the lock first. */
    char lockp[PATH_MAX], wheelsd[PATH_MAX];
    pybox_lock_t lock = {0};
    bool has_lock = false;
    struct stat lsb;
    if (pybox_fmt(lockp, sizeof lockp, "%s/uv.lock", rdir) == 0 && stat(lockp, &lsb) == 0) {
        has_lock = true;
        if (pybox_fmt(wheelsd, sizeof wheelsd, "%s/wheels", rdir) < 0 ||
            pybox_lock_check(lockp, wheelsd, &lock, err) < 0)
            return -1;
    }
    pybox_pin_t pin;
    int have = pybox_pin_get(st, be->ops->name, name, &pin, err);
    if (have < 0)
        return -1;
    if (have == 1 && !force && strcmp(pin.recipe_sha256, full_fp) == 0) {
        pybox_error_t probe = {0};
        pybox_pin_t tmp;
        if (pybox_image_resolve(st, be, name, &tmp, &probe) == 0) {
            progress_line(progress, t0, "up to date:", name);
            return 0;
        }
    }
    char cache[PATH_MAX], base[PATH_MAX], pkgs[PATH_MAX], tmp[PATH_MAX];
    char debs[PATH_MAX];
    if (pybox_state_path(st, PYBOX_STATE_CACHE, cache, sizeof cache, err) < 0 ||
        pybox_state_path(st, PYBOX_STATE_DEB_CACHE, debs, sizeof debs, err) < 0)
        return -1;
    if (mkdir(cache, 0700) < 0 && errno != EEXIST)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "mkdir(%s)", cache);
    if (pybox_fmt(base, sizeof base, "%s/base-%.16s.tar", cache, base_fp) < 0 ||
        pybox_fmt(pkgs, sizeof pkgs, "%s.packages", base) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "cache path");
    if (rootfs != NULL) {
        /* Given: the tar a build elsewhere made (a root build keeps one in its cache). */
        if (pybox_strlcpy(base, rootfs, sizeof base) < 0 || pybox_strlcpy(pkgs, given_pkgs, sizeof pkgs) < 0) {
            pybox_lock_free(&lock);
            return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "--rootfs");
        }
        progress_line(progress, t0, "root filesystem given:", base);
    } else if (faccessat(AT_FDCWD, base, R_OK, AT_EACCESS) != 0 || faccessat(AT_FDCWD, pkgs, R_OK, AT_EACCESS) != 0) {
        char rnd[9];
        if (pybox_random_hex(4, rnd, err) < 0)
            return -1;
        char script[PATH_MAX], tmp_pkgs[PATH_MAX];
        if (pybox_fmt(tmp, sizeof tmp, "%s.tmp-%s", base, rnd) < 0 ||
            pybox_fmt(script, sizeof script, "%s/build-rootfs.sh", paths->recipes) < 0 ||
            pybox_fmt(tmp_pkgs, sizeof tmp_pkgs, "%s.packages", tmp) < 0) {
            pybox_lock_free(&lock);
            return pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "build paths");
        }
        progress_line(progress, t0, "building the root filesystem from Debian packages:", name);
        if (run_script(script, rdir, tmp, debs, err) < 0) {
            pybox_lock_free(&lock);
            unlink(tmp);
            unlink(tmp_pkgs);
            return -1;
        }
        if (rename(tmp_pkgs, pkgs) < 0 || rename(tmp, base) < 0) {
            pybox_lock_free(&lock);
            return pybox_error_set(err, PYBOX_ERR_STATE, errno, "rename(%s)", base);
        }
    } else {
        progress_line(progress, t0, "root filesystem cached:", name);
    }
    _cleanup_free_ char *preload = NULL;
    if (read_preload(rdir, &preload, err) < 0) {
        pybox_lock_free(&lock);
        return -1;
    }
    _cleanup_free_ char *manifest = manifest_json(name, full_fp, pkgs, custom, has_lock ? &lock : NULL);
    if (manifest == NULL) {
        pybox_lock_free(&lock);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "manifest");
    }
    /* The image tar only lives as an unlinked temporary file. */
    _cleanup_close_ int fd = open(cache, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        pybox_lock_free(&lock);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "open(%s, O_TMPFILE)", cache);
    }
    progress_line(
        progress, t0,
        has_lock ? "adding the wheels, the guest init and the manifest:" : "adding the guest init and manifest:", name);
    char pyver[48];
    python_version(pkgs, pyver, sizeof pyver);
    int crc = compose(base, fd, paths->init, manifest, preload, has_lock ? &lock : NULL, wheelsd, pyver, progress, err);
    pybox_lock_free(&lock);
    if (crc < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "fstat/lseek of the image tar");
    progress_line(progress, t0, be->ops->importing, name);
    pybox_pin_t np = {0};
    snprintf(np.name, sizeof np.name, "%s", name);
    snprintf(np.backend, sizeof np.backend, "%s", be->ops->name);
    snprintf(np.recipe_sha256, sizeof np.recipe_sha256, "%s", full_fp);
    char id[PYBOX_ID_MAX];
    if (be->ops->images->import(be, fd, &np, id, sizeof id, err) < 0)
        return -1;

    if (read_policy(rdir, &np, err) < 0)
        return -1;
    np.custom = custom;
    python_version(pkgs, np.python, sizeof np.python);
    snprintf(np.id, sizeof np.id, "%s", id);
    pybox_wall_iso(np.built_at, sizeof np.built_at);
    np.protocol = PYBOX_GUEST_PROTOCOL;
    np.size = (int64_t)sb.st_size;
    if (pybox_pin_set(st, &np, err) < 0)
        return -1;
    *built = true;
    progress_line(progress, t0, "pinned:", id);
    if (have == 1 && strcmp(pin.id, id) != 0) {
        /* The image this name was pinned to before is no longer used by new runs: it goes
         * when it is PyBox's own alone (a box still using it keeps it, which is fine). */
        pybox_image_removal_t what;
        char why[256];
        pybox_error_t ignored = {0};
        if (be->ops->images->remove(be, &pin, &what, why, sizeof why, &ignored) == 0 && what == PYBOX_IMAGE_REMOVED)
            progress_line(progress, t0, "removed the image pinned before:", pin.id);
    }
    return 0;
}

static void remove_recipe(const char *dir);

int pybox_image_remove(const pybox_state_t *st, pybox_backend_t *be, const char *name, const pybox_out_t *report,
                       pybox_error_t *err)
{
    pybox_pin_t pin;
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    int r = pybox_pin_get(st, be->ops->name, name, &pin, err);
    if (r < 0)
        return -1;
    if (r == 0) {
        char known[512];
        known_images(st, be->ops->name, known, sizeof known);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "unknown image '%s' (known: %s)", name, known);
    }
    if (pybox_pin_remove(st, be->ops->name, name, err) < 0)
        return -1;
    if (pin.custom) {
        char rel[PYBOX_NAME_MAX + 16], dir[PATH_MAX];
        snprintf(rel, sizeof rel, "recipes/%s", name);
        if (pybox_state_path(st, rel, dir, sizeof dir, NULL) == 0)
            remove_recipe(dir);
    }
    pybox_image_removal_t what;
    char why[256] = "";
    if (be->ops->images->remove(be, &pin, &what, why, sizeof why, err) < 0)
        return -1;
    if (report == NULL)
        return 0;
    switch (what) {
    case PYBOX_IMAGE_REMOVED:
        pybox_out_line(report, "removed %s (%s)", name, pin.id);
        break;
    case PYBOX_IMAGE_WAS_GONE:
        pybox_out_line(report, "forgot %s; %s no longer has %s", name, be->ops->holder, pin.id);
        break;
    case PYBOX_IMAGE_KEPT_NAMED:
        pybox_out_line(report, "forgot %s; %s keeps %s: %s", name, be->ops->holder, pin.id,
                       why[0] ? why : "other names use it");
        break;
    case PYBOX_IMAGE_KEPT_UNKNOWN:
        pybox_out_line(report, "forgot %s; %s keeps %s as far as known: its names could not be read", name,
                       be->ops->holder, pin.id);
        break;
    case PYBOX_IMAGE_KEPT_IN_USE:
        pybox_out_line(report, "forgot %s; %s keeps %s: %s", name, be->ops->holder, pin.id, why);
        break;
    }
    return 0;
}

int pybox_image_verify(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths,
                       const pybox_out_t *report, pybox_error_t *err)
{
    pybox_pin_t *pins = NULL;
    size_t n = 0;
    if (pybox_pin_list(st, be->ops->name, &pins, &n, err) < 0)
        return -1;
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        pybox_pin_t *pin = &pins[i];
        pybox_error_t perr = {0};
        pybox_pin_t again;
        const char *problem = NULL;
        char detail[600] = "";
        char found[512];
        if (pybox_image_resolve(st, be, pin->name, &again, &perr) < 0) {
            problem = perr.msg;
        } else if (be->ops->images->check(be, st->install_id, pin, found, sizeof found, &perr) < 0) {
            problem = perr.msg;
        } else {
            if (found[0])
                problem = found;
            char now[65];
            pybox_error_t ferr = {0};
            char rd[PATH_MAX];
            bool cu;
            if (problem == NULL && recipe_dir(st, paths, pin->name, rd, sizeof rd, &cu, &ferr) == 0 &&
                fingerprint(paths, rd, true, now, &ferr) == 0 && strcmp(now, pin->recipe_sha256) != 0) {
                snprintf(detail, sizeof detail,
                         "the recipe (or the guest init) changed since the build: rebuild "
                         "with `pybox image build %s`",
                         pin->name);
                problem = detail;
            }
        }
        if (problem != NULL)
            failed++;
        if (report) {
            pybox_buf_t esc;
            pybox_buf_init(&esc, 0);
            if (problem)
                pybox_escape_terminal(&esc, problem, strlen(problem), false);
            pybox_out_line(report, "%-12s %s %s%s%s", pin->name, problem ? "FAILED" : "ok", pin->id,
                           problem ? ": " : "", problem ? (esc.data ? esc.data : "") : "");
            pybox_buf_free(&esc);
        }
    }
    free(pins);
    return failed;
}

/* Where copy_file writes. */
typedef struct {
    int fd;
    const char *path;
} copy_t;

static int copy_chunk(void *arg, const char *buf, size_t n, pybox_error_t *err)
{
    const copy_t *c = arg;
    if (pybox_write_all(c->fd, buf, n) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "write(%s)", c->path);
    return 0;
}

static int copy_file(const char *from, const char *to, pybox_error_t *err)
{
    _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", from);
    _cleanup_close_ int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", to);
    copy_t c = {out, to};
    return each_chunk(in, from, copy_chunk, &c, err);
}

static void remove_recipe(const char *dir)
{
    char p[PATH_MAX];
    DIR *d = NULL;
    if (pybox_fmt(p, sizeof p, "%s/wheels", dir) == 0 && (d = opendir(p)) != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.')
                unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        rmdir(p);
    }
    static const char *const files[] = {"packages", "uv.lock", "policy"};
    for (size_t i = 0; i < 3; i++)
        if (pybox_fmt(p, sizeof p, "%s/%s", dir, files[i]) == 0)
            unlink(p);
    rmdir(dir);
}

static bool debian_name_ok(const char *s, size_t n)
{
    if (n < 2 || n > 64 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

int pybox_image_build_custom(const pybox_state_t *st, pybox_backend_t *be, const pybox_image_paths_t *paths,
                             const char *name, const char *lock, const char *wheels, const char *debian,
                             const pybox_out_t *progress, pybox_error_t *err)
{
    if (!pybox_name_valid(name))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "image name: use lowercase letters, digits, '-' and '_'");
    char builtin[PATH_MAX];
    struct stat sb;
    if (pybox_fmt(builtin, sizeof builtin, "%s/%s", paths->recipes, name) == 0 && stat(builtin, &sb) == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "'%s' is a built-in image: give a custom one another name",
                               name);
    if ((lock == NULL) == (debian == NULL) || (lock != NULL && wheels == NULL) || (debian != NULL && wheels != NULL))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "give --lock FILE --wheels DIR, or --debian PACKAGES");
    /* Everything is checked before anything is made. */
    pybox_lock_t checked = {0};
    if (lock != NULL && pybox_lock_check(lock, wheels, &checked, err) < 0)
        return -1;
    if (debian != NULL) {
        for (const char *p = debian; *p;) {
            size_t n = strcspn(p, ",");
            if (!debian_name_ok(p, n))
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--debian: '%.*s' is not a Debian package name",
                                       (int)(n > 64 ? 64 : n), p);
            p += n + (p[n] == ',');
        }
    }
    char recipes[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX], old[PATH_MAX], p[PATH_MAX], rnd[9];
    int rc = 0;
    if (pybox_state_path(st, "recipes", recipes, sizeof recipes, err) < 0 || pybox_random_hex(4, rnd, err) < 0) {
        pybox_lock_free(&checked);
        return -1;
    }
    if ((mkdir(recipes, 0700) < 0 && errno != EEXIST) || pybox_fmt(dir, sizeof dir, "%s/%s", recipes, name) < 0 ||
        pybox_fmt(tmp, sizeof tmp, "%s/.%s.new-%s", recipes, name, rnd) < 0 ||
        pybox_fmt(old, sizeof old, "%s/.%s.old-%s", recipes, name, rnd) < 0 || mkdir(tmp, 0700) < 0) {
        pybox_lock_free(&checked);
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "making the recipe of %s", name);
    }
    /* The package list: the stdlib image's, plus any Debian packages asked for. */
    pybox_buf_t pk;
    pybox_buf_init(&pk, 0);
    char std[PATH_MAX];
    _cleanup_free_ char *stdpk = NULL;
    size_t stdlen = 0;
    bool over;
    int sfd =
        pybox_fmt(std, sizeof std, "%s/stdlib/packages", paths->recipes) == 0 ? open(std, O_RDONLY | O_CLOEXEC) : -1;
    if (sfd < 0 || pybox_read_bounded(sfd, 65536, &stdpk, &stdlen, &over, err) < 0) {
        rc = pybox_error_set(err, PYBOX_ERR_USAGE, errno, "reading %s", std);
    } else {
        pybox_buf_add(&pk, stdpk, stdlen);
        if (debian != NULL) {
            pybox_buf_adds(&pk, "# asked for this image\n");
            for (const char *q = debian; *q;) {
                size_t n = strcspn(q, ",");
                pybox_buf_add(&pk, q, n);
                pybox_buf_adds(&pk, "\n");
                q += n + (q[n] == ',');
            }
        }
    }
    if (sfd >= 0)
        close(sfd);
    if (rc == 0 && !pybox_buf_ok(&pk))
        rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "the package list");
    if (rc == 0 && (pybox_fmt(p, sizeof p, "%s/packages", tmp) < 0 ||
                    pybox_write_file_atomic(p, pk.data ? pk.data : "", pk.len, 0600, err) < 0))
        rc = -1;
    pybox_buf_free(&pk);
    if (rc == 0 && lock != NULL) {
        char wd[PATH_MAX];
        if (pybox_fmt(p, sizeof p, "%s/uv.lock", tmp) < 0 || copy_file(lock, p, err) < 0 ||
            pybox_fmt(wd, sizeof wd, "%s/wheels", tmp) < 0 || mkdir(wd, 0700) < 0)
            rc = rc < 0 ? rc : pybox_error_set(err, PYBOX_ERR_STATE, errno, "copying the lock");
        for (size_t i = 0; rc == 0 && i < checked.n; i++) {
            char from[PATH_MAX], to[PATH_MAX];
            if (pybox_fmt(from, sizeof from, "%s/%s", wheels, checked.wheels[i].file) < 0 ||
                pybox_fmt(to, sizeof to, "%s/%s", wd, checked.wheels[i].file) < 0 || copy_file(from, to, err) < 0)
                rc = -1;
        }
    }
    pybox_lock_free(&checked);
    /* Into place: the old recipe (if any) moves aside first and goes once the new is in. */
    bool had_old = rc == 0 && rename(dir, old) == 0;
    if (rc == 0 && rename(tmp, dir) < 0) {
        rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "rename(%s)", dir);
        if (had_old)
            (void)rename(old, dir);
    }
    if (rc < 0) {
        remove_recipe(tmp);
        return -1;
    }
    if (had_old)
        remove_recipe(old);
    bool built = false;
    return pybox_image_build(st, be, paths, name, true, NULL, progress, &built, err);
}
