/* SPDX-License-Identifier: MIT */
/* The command line's charts (see chart.h). */
#include "chart.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../chart.h"
#include "../escape.h"
#include "../files.h"
#include "../util.h"
#include "cli.h"

static void shown(char *out, size_t len, const char *arg)
{
    pybox_escape_short(out, len, arg, 96);
}

int pybox_cli_chart_fd(int fd, const char *from, pybox_buf_t *svg, pybox_error_t *err)
{
    char name[160];
    shown(name, sizeof name, from);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, PYBOX_CLI_RECEIPT_MAX, &text, &len, &over, err) < 0) {
        pybox_buf_fail(svg);
        return -1;
    }
    if (over) {
        pybox_buf_fail(svg);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: larger than %d bytes: not a receipt", name,
                               PYBOX_CLI_RECEIPT_MAX);
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (j == NULL) {
        pybox_buf_fail(svg);
        /* cJSON says where it stopped; the receipt's text is not shown, only where. */
        const char *stop = end != NULL ? end : cJSON_GetErrorPtr();
        size_t off = stop != NULL && stop >= text && stop <= text + len ? (size_t)(stop - text) : 0;
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               len == 0 ? "%s: empty: give a receipt (pybox exec --json prints one)"
                                        : "%s: not JSON (it stops making sense at byte %zu)",
                               name, off);
    }
    for (const char *p = end; p != NULL && p < text + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            cJSON_Delete(j);
            pybox_buf_fail(svg);
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: more than one JSON value (byte %zu on)", name,
                                   (size_t)(p - text));
        }
    }
    int rc = pybox_chart_svg(j, svg, err);
    cJSON_Delete(j);
    if (rc < 0)
        pybox_error_prefix(err, "%s: ", name);
    return rc;
}

/* The folder part of path ("." when there is none). */
static int folder_of(const char *path, char out[PATH_MAX], const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (slash == NULL)
        return pybox_fmt(out, PATH_MAX, ".");
    if (slash == path)
        return pybox_fmt(out, PATH_MAX, "/");
    return pybox_fmt(out, PATH_MAX, "%.*s", (int)(slash - path), path);
}

int pybox_cli_chart_path_check(const char *path, pybox_cli_chart_dest_t *dest, pybox_error_t *err)
{
    char dir[PATH_MAX];
    dest->dirfd = -1;
    dest->base[0] = '\0';
    shown(dest->shown, sizeof dest->shown, path);
    const char *arg = dest->shown, *base;
    if (path[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart: give the name of a new file, e.g. --chart run.svg");
    if (strlen(path) >= PATH_MAX || folder_of(path, dir, &base) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart %s: the path is too long", arg);
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart %s: names a folder, not a file", arg);
    if (pybox_strlcpy(dest->base, base, sizeof dest->base) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--chart %s: the name is too long", arg);
    char what[320];
    snprintf(what, sizeof what, "--chart %s: its folder", arg);
    int fd;
    if (pybox_folder_hold(dir, what, "give a folder only you control", &fd, err) < 0)
        return -1;
    struct stat sb;
    if (fstatat(fd, dest->base, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--chart %s: it exists already (a chart is never written over anything)", arg);
    }
    if (errno != ENOENT) {
        int en = errno;
        close(fd);
        return pybox_error_set(err, PYBOX_ERR_USAGE, en, "--chart %s: lstat failed", arg);
    }
    dest->dirfd = fd;
    return 0;
}

void pybox_cli_chart_close(pybox_cli_chart_dest_t *dest)
{
    if (dest->dirfd >= 0)
        close(dest->dirfd);
    dest->dirfd = -1;
}

int pybox_cli_chart_write(const pybox_cli_chart_dest_t *dest, const cJSON *receipt, pybox_error_t *err)
{
    char tmp[NAME_MAX + 1], rnd[17];
    const char *arg = dest->shown;
    if (dest->dirfd < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, EBADF, "the chart %s: its folder is not held", arg);
    if (pybox_random_hex(8, rnd, err) < 0)
        return -1;
    if (pybox_fmt(tmp, sizeof tmp, ".%.200s.tmp-%s", dest->base, rnd) < 0)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENAMETOOLONG, "the chart %s: the name is too long", arg);
    pybox_buf_t svg;
    pybox_buf_init(&svg, 0);
    if (pybox_chart_svg(receipt, &svg, err) < 0) {
        pybox_error_prefix(err, "the chart %s was not drawn: ", arg);
        return -1;
    }
    /* Into the folder as it was checked, by descriptor: its name may lead elsewhere now. */
    int fd = openat(dest->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        pybox_buf_free(&svg);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, errno, "the chart %s: open of its temporary file failed", arg);
    }
    int rc = pybox_write_all(fd, svg.data, svg.len) < 0 || fsync(fd) < 0 ? -1 : 0;
    int e = errno;
    close(fd);
    pybox_buf_free(&svg);
    if (rc < 0) {
        unlinkat(dest->dirfd, tmp, 0);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, e, "the chart %s: write failed", arg);
    }
    /* Put in place whole, and never over a file that took the name during the run. */
    if (renameat2(dest->dirfd, tmp, dest->dirfd, dest->base, RENAME_NOREPLACE) < 0) {
        e = errno;
        if (e == EINVAL) /* a filesystem without RENAME_NOREPLACE: link refuses a taken name too */
            e = linkat(dest->dirfd, tmp, dest->dirfd, dest->base, 0) == 0 ? 0 : errno;
        unlinkat(dest->dirfd, tmp, 0);
        if (e != 0)
            return pybox_error_set(err, PYBOX_ERR_SYSTEM, e,
                                   e == EEXIST ? "the chart %s was not written: the name was taken during the run"
                                               : "the chart %s: rename failed",
                                   arg);
    }
    return 0;
}

/* ---- the command ---- */

static const struct option options[] = {
    PYBOX_CLI_FLAG("help", 'h'),
    PYBOX_CLI_END,
};

static int take(void *ctx, int val, const char *value, pybox_error_t *err)
{
    (void)ctx, (void)val, (void)value, (void)err;
    return 0; /* --help: given before parsing (main) */
}

/* pybox chart [RECEIPT]: a receipt's kernel samples as SVG on stdout; nothing on stdout
 * when the receipt is refused. */
static int run(int argc, char **argv)
{
    pybox_error_t err = {0};
    int first = pybox_cli_args("chart", argc, argv, NULL, &err);
    if (first < 0)
        return pybox_cli_fail(&err, false);
    const char *file = first < argc ? argv[first] : "-";
    bool from_file = strcmp(file, "-") != 0;
    _cleanup_close_ int own = -1;
    if (from_file) {
        own = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat sb;
        if (own < 0 || fstat(own, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            char name[160];
            shown(name, sizeof name, file);
            return pybox_cli_failf(PYBOX_ERR_USAGE, own < 0 ? errno : 0, "%s: %s", name,
                                   own < 0 ? "cannot be opened" : "not a regular file");
        }
    } else if (isatty(STDIN_FILENO)) {
        return pybox_cli_failf(PYBOX_ERR_USAGE, 0,
                               "standard input is a terminal: give the receipt on it (pybox chart < receipt.json) or "
                               "name its file");
    }
    pybox_buf_t svg;
    pybox_buf_init(&svg, 0);
    if (pybox_cli_chart_fd(from_file ? own : STDIN_FILENO, from_file ? file : "standard input", &svg, &err) < 0)
        return pybox_cli_fail(&err, false);
    int code = 0;
    if (pybox_write_all(STDOUT_FILENO, svg.data, svg.len) < 0) {
        char etext[128];
        fprintf(stderr, "pybox: error: the chart could not be written: %s\n",
                pybox_strerror(errno, etext, sizeof etext));
        code = PYBOX_EXIT_FAILED;
    }
    pybox_buf_free(&svg);
    return code;
}

const pybox_cli_command_t pybox_cli_chart = {
    "chart", options, false, take, 0, 1, "usage: pybox chart [RECEIPT.json] > chart.svg (see pybox help chart)", run};
