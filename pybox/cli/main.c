/* SPDX-License-Identifier: MIT */
/* pybox: the command-line front-end. The only place that prints errors. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bounds.h"
#include "../buf.h"
#include "../escape.h"
#include "../image/image.h"
#include "../leftovers.h"
#include "../log.h"
#include "../mcp/http.h"
#include "../mcp/run_python.h"
#include "../mcp/server.h"
#include "../prepare.h"
#include "../receipt.h"
#include "../run.h"
#include "../sign.h"
#include "../state.h"
#include "../util.h"
#include "../version.h"
#include "chart.h"
#include "help.h"
#include "parse.h"

/* Append j as one line of compact JSON, as safe on a terminal as the terminal receipt
 * (escape.h: the same JSON value, so its signature holds), and free it. */
static void json_line(pybox_buf_t *out, cJSON *j)
{
    if (j != NULL && pybox_json_append(out, j) == 0)
        pybox_buf_adds(out, "\n");
    else
        pybox_buf_fail(out);
    cJSON_Delete(j);
}

/* Print an error as PyBox's own, escaped; exit 125. */
static int fail(const pybox_error_t *err, bool json)
{
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, err->msg, strlen(err->msg), false);
    fprintf(stderr, "pybox: %s: %s\n", err->kind == PYBOX_ERR_USAGE ? "refused" : "error", b.data ? b.data : "");
    pybox_buf_free(&b);
    if (json) {
        cJSON *r = pybox_receipt_refusal(err);
        /* A refusal is signed too, when the installation can be opened to do it. */
        pybox_state_t st;
        pybox_error_t serr = {0};
        if (pybox_state_open(&st, false, &serr) == 0) {
            pybox_sign_installation(r, &st);
        } else {
            char why[PYBOX_ERROR_MSG_MAX + 64];
            snprintf(why, sizeof why, "the receipt could not be signed: %s", serr.msg);
            pybox_sign_mark_unsigned(r, why);
        }
        pybox_buf_t out;
        pybox_buf_init(&out, 0);
        json_line(&out, r);
        if (out.data)
            (void)pybox_write_all(STDOUT_FILENO, out.data, out.len);
        pybox_buf_free(&out);
    }
    return 125;
}

static void on_signal(int sig)
{
    pybox_interrupt_signal = sig;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns and the run reacts */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* When this process started: every phase of a run counts from here. */
static double process_start_s;

/* The program, whole, from stdin (never a terminal). */
static int read_program(char **prog, size_t *len, pybox_error_t *err)
{
    if (isatty(STDIN_FILENO))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "standard input is a terminal: give the program on it (pybox exec < program.py)");
    bool over = false;
    if (pybox_read_bounded(STDIN_FILENO, PYBOX_PROGRAM_MAX, prog, len, &over, err) < 0 ||
        pybox_cli_check_program(*prog, *len, over, err) < 0)
        return -1;
    return 0;
}

/* The chart (when asked), the receipt on stdout, and PyBox's own failure on stderr. The
 * JSON receipt is signed with the installation's key (st); the terminal one cannot be.
 * Returns the exit code. */
static int print_run(const pybox_run_result_t *res, int rc, bool json, pybox_color_t color, const pybox_state_t *st,
                     const pybox_cli_chart_dest_t *chart)
{
    pybox_error_t cerr = {0};
    int chart_rc = 0;
    if (chart != NULL) {
        cJSON *j = pybox_receipt_json(res);
        chart_rc = j != NULL ? pybox_cli_chart_write(chart, j, &cerr)
                             : pybox_error_set(&cerr, PYBOX_ERR_SYSTEM, ENOMEM, "the chart: no receipt to draw");
        cJSON_Delete(j);
    }
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    if (json) {
        cJSON *r = pybox_receipt_json(res); /* never in colour */
        pybox_sign_installation(r, st);
        json_line(&out, r);
    } else {
        struct winsize ws;
        bool terminal = isatty(STDOUT_FILENO);
        int tty = terminal && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
        const pybox_receipt_style_t style = {
            .columns = pybox_receipt_columns(tty, getenv("COLUMNS")),
            .color = pybox_cli_use_color(color, terminal, getenv("NO_COLOR"), getenv("TERM")),
        };
        pybox_receipt_text_styled(res, &style, &out);
    }
    int code = res->exit_code;
    if (out.data == NULL || pybox_write_all(STDOUT_FILENO, out.data, out.len) < 0) {
        char etext[128];
        fprintf(stderr, "pybox: error: the receipt could not be written: %s\n",
                pybox_strerror(errno, etext, sizeof etext));
        code = PYBOX_EXIT_FAILED;
    }
    pybox_buf_free(&out);
    if (chart_rc < 0) {
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        pybox_escape_terminal(&b, cerr.msg, strlen(cerr.msg), false);
        fprintf(stderr, "pybox: error: %s\n", b.data ? b.data : "");
        pybox_buf_free(&b);
        code = PYBOX_EXIT_FAILED;
    }
    if (rc < 0) {
        pybox_buf_t b;
        pybox_buf_init(&b, 0);
        pybox_escape_terminal(&b, res->error.msg, strlen(res->error.msg), false);
        fprintf(stderr, "pybox: error: %s\n", b.data ? b.data : "");
        pybox_buf_free(&b);
        if (res->created && !res->gone) {
            char when[32];
            time_t ex = (time_t)res->policy.expires;
            struct tm tm;
            gmtime_r(&ex, &tm);
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
            fprintf(stderr,
                    "pybox: the box %s may still exist; it ends by its own timer, and the next run or "
                    "`pybox cleanup` removes it after %s (its run note is kept until then)\n",
                    res->box_name, when);
        }
    }
    return code;
}

/* The test hook (docs/cleanup.md): PyBox ends itself, as hard as it can be ended, at one
 * step of the run. It only ever kills this process; the box's seal, its verification,
 * its own timer and its expiry do not depend on PyBox staying alive, which is what the
 * hook is there to show. */
static void kill_at(const char *step, const char *run_id, void *arg)
{
    (void)run_id;
    if (strcmp(step, (const char *)arg) == 0)
        raise(SIGKILL);
}

static int cmd_exec(int argc, char **argv)
{
    pybox_error_t err = {0};
    pybox_exec_opts_t o;
    bool json = false;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0)
            json = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "exec");
            return 0;
        }
    }
    if (pybox_cli_parse_exec(argc, argv, &o, &err) < 0)
        return fail(&err, json);
    _cleanup_(pybox_cli_chart_close) pybox_cli_chart_dest_t chart = {.dirfd = -1};
    if (o.chart != NULL && pybox_cli_chart_path_check(o.chart, &chart, &err) < 0)
        return fail(&err, o.json);
    const char *kill_step = NULL;
    if (pybox_cli_kill_step(getenv(PYBOX_TEST_KILL_ENV), &kill_step, &err) < 0)
        return fail(&err, o.json);
    _cleanup_free_ char *prog = NULL;
    size_t len = 0;
    if (read_program(&prog, &len, &err) < 0)
        return fail(&err, o.json);
    pybox_request_t rq = {
        .program = prog,
        .program_len = len,
        .image = o.image,
        .backend = o.backend,
        .timeout_ms = o.timeout_given ? o.timeout_ms : 0,
        .memory_bytes = o.memory_bytes,
        .pids = o.pids,
        .nano_cpus = o.nano_cpus,
        .inputs = o.inputs,
        .n_inputs = o.n_inputs,
        .output = o.output,
        .started_s = process_start_s,
        .hook = kill_step != NULL ? kill_at : NULL,
        .hook_arg = (void *)kill_step,
    };
    _cleanup_(pybox_ready_free) pybox_ready_t rd;
    pybox_ready_init(&rd);
    if (pybox_prepare(&rq, &rd, &err) < 0)
        return fail(&err, o.json);
    catch_signals();
    _cleanup_(pybox_run_result_free) pybox_run_result_t res;
    int rc = pybox_ready_run(&rd, &res);
    return print_run(&res, rc, o.json, o.color, &rd.st, o.chart != NULL ? &chart : NULL);
}

/* pybox chart [RECEIPT]: a receipt's kernel samples as SVG on stdout; nothing on stdout
 * when the receipt is refused. */
static int cmd_chart(int argc, char **argv)
{
    pybox_error_t err = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "chart");
            return 0;
        }
    }
    if (argc > 2 || (argc == 2 && argv[1][0] == '-' && argv[1][1] != '\0')) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "usage: pybox chart [RECEIPT.json] > chart.svg (see pybox help chart)");
        return fail(&err, false);
    }
    bool from_file = argc == 2 && strcmp(argv[1], "-") != 0;
    _cleanup_close_ int own = -1;
    if (from_file) {
        own = open(argv[1], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat sb;
        if (own < 0 || fstat(own, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            char shown[160];
            pybox_escape_short(shown, sizeof shown, argv[1], 96);
            pybox_error_set(&err, PYBOX_ERR_USAGE, own < 0 ? errno : 0, "%s: %s", shown,
                            own < 0 ? "cannot be opened" : "not a regular file");
            return fail(&err, false);
        }
    } else if (isatty(STDIN_FILENO)) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "standard input is a terminal: give the receipt on it (pybox chart < receipt.json) or name "
                        "its file");
        return fail(&err, false);
    }
    pybox_buf_t svg;
    pybox_buf_init(&svg, 0);
    if (pybox_cli_chart_fd(from_file ? own : STDIN_FILENO, from_file ? argv[1] : "standard input", &svg, &err) < 0)
        return fail(&err, false);
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

static int cmd_cleanup(int argc, char **argv)
{
    pybox_error_t err = {0};
    bool dry = false, json = false;
    const char *backend = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dry-run") == 0) {
            dry = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            backend = argv[++i];
        } else if (strncmp(argv[i], "--backend=", 10) == 0) {
            backend = argv[i] + 10;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "cleanup");
            return 0;
        } else {
            const struct option *known = pybox_cli_option("cleanup", argv[i]);
            if (known != NULL)
                pybox_cli_value("cleanup", argv[i], known->has_arg == required_argument, &err);
            else if (argv[i][0] == '-')
                pybox_cli_unknown("cleanup", argv[i], &err);
            else
                pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                                "unexpected argument (usage: pybox cleanup [--dry-run] [--json] [--backend NAME])");
            return fail(&err, json);
        }
    }
    pybox_state_t st;
    if (pybox_state_open(&st, false, &err) < 0)
        return fail(&err, json);
    _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, backend, &be, &err) < 0)
        return fail(&err, json);
    pybox_leftovers_report_t rep;
    int rc = pybox_leftovers_clean(&st, be, dry, false, &rep, &err);
    if (rc < 0) {
        pybox_leftovers_report_free(&rep);
        return fail(&err, json);
    }
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    if (json) {
        json_line(&out, pybox_leftovers_report_json(&rep));
    } else {
        pybox_leftovers_report_text(&rep, &out);
    }
    int code = out.data && pybox_write_all(STDOUT_FILENO, out.data, out.len) == 0 ? 0 : PYBOX_EXIT_FAILED;
    pybox_buf_free(&out);
    pybox_leftovers_report_free(&rep);
    return code;
}

static int cmd_image(int argc, char **argv)
{
    const pybox_out_t to_stderr = {pybox_out_file, stderr}, to_stdout = {pybox_out_file, stdout};
    pybox_error_t err = {0};
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        pybox_help(argc < 2 ? stderr : stdout, "image");
        return argc < 2 ? PYBOX_EXIT_FAILED : 0;
    }
    pybox_state_t st;
    /* --backend NAME, wherever it stands, picks the backend whose images these are. */
    const char *backend = NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            backend = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--backend=", 10) == 0) {
            backend = argv[i] + 10;
            continue;
        }
        argv[n++] = argv[i];
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "image");
            return 0;
        }
    }
    argc = n;
    if (argc < 2) {
        pybox_help(stderr, "image");
        return PYBOX_EXIT_FAILED;
    }
    if (strcmp(argv[1], "build") == 0) {
        const char *lock = NULL, *wheels = NULL, *debian = NULL;
        bool force = false, bad = argc < 3 || argv[2][0] == '-';
        for (int i = 3; !bad && i < argc; i++) {
            const struct option *o = pybox_cli_option("image build", argv[i]);
            const char *eq = strchr(argv[i], '=');
            const char *v = eq != NULL ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
            if (o != NULL && (o->has_arg == required_argument ? v == NULL : eq != NULL)) {
                pybox_cli_value("image build", argv[i], o->has_arg == required_argument, &err);
                return fail(&err, false);
            }
            if (o == NULL && argv[i][0] == '-') {
                pybox_cli_unknown("image build", argv[i], &err);
                return fail(&err, false);
            }
            if (o != NULL && o->has_arg == required_argument && eq == NULL)
                i++;
            if (o == NULL)
                bad = true;
            else if (strcmp(o->name, "force") == 0)
                force = true;
            else if (strcmp(o->name, "lock") == 0)
                lock = v;
            else if (strcmp(o->name, "wheels") == 0)
                wheels = v;
            else if (strcmp(o->name, "debian") == 0)
                debian = v;
        }
        if (bad) {
            pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                            "usage: pybox image build NAME [--force] [--lock uv.lock --wheels DIR | --debian "
                            "PACKAGES]");
            return fail(&err, false);
        }
        pybox_image_paths_t paths;
        if (pybox_state_open(&st, true, &err) < 0 || pybox_image_paths_default(&paths, &err) < 0)
            return fail(&err, false);
        _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
        if (pybox_backend_open_for(&st, backend, &be, &err) < 0)
            return fail(&err, false);
        bool built = false;
        int rc = lock || wheels || debian
                     ? pybox_image_build_custom(&st, be, &paths, argv[2], lock, wheels, debian, &to_stderr, &err)
                     : pybox_image_build(&st, be, &paths, argv[2], force, &to_stderr, &built, &err);
        return rc < 0 ? fail(&err, false) : 0;
    }
    /* list, verify and rm take no option but --backend (taken above) */
    for (int i = 2; i < argc && strcmp(argv[1], "build") != 0; i++) {
        if (argv[i][0] != '-')
            continue;
        if (pybox_cli_option("image", argv[i]) != NULL) /* --backend without its value */
            pybox_cli_value("image", argv[i], true, &err);
        else
            pybox_cli_unknown(strcmp(argv[1], "list") == 0     ? "image list"
                              : strcmp(argv[1], "verify") == 0 ? "image verify"
                              : strcmp(argv[1], "rm") == 0     ? "image rm"
                                                               : "image",
                              argv[i], &err);
        return fail(&err, false);
    }
    if (strcmp(argv[1], "list") == 0) {
        if (argc != 2) {
            pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "usage: pybox image list [--backend NAME]");
            return fail(&err, false);
        }
        if (pybox_state_open(&st, false, &err) < 0)
            return fail(&err, false);
        if (backend != NULL && pybox_backend_find(backend) == NULL) {
            pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "--backend: unknown backend");
            return fail(&err, false);
        }
        /* Every backend's pins, unless one is asked for. */
        printf("%-12s %-8s %-8s %-71s %10s  %-16s  %s\n", "NAME", "BACKEND", "KIND", "PINNED IMAGE ID", "SIZE",
               "RECIPE", "BUILT");
        const pybox_backend_ops_t *ops;
        for (size_t b = 0; (ops = pybox_backend_nth(b)) != NULL; b++) {
            if (backend != NULL && strcmp(backend, ops->name) != 0)
                continue;
            pybox_pin_t *pins = NULL;
            size_t npins = 0;
            if (pybox_pin_list(&st, ops->name, &pins, &npins, &err) < 0)
                return fail(&err, false);
            for (size_t i = 0; i < npins; i++)
                printf("%-12s %-8s %-8s %-71s %7.1f MB  %.16s  %s\n", pins[i].name, pins[i].backend,
                       pins[i].custom ? "custom" : "built-in", pins[i].id, (double)pins[i].size / 1e6,
                       pins[i].recipe_sha256, pins[i].built_at);
            free(pins);
        }
        return 0;
    }
    if (strcmp(argv[1], "rm") == 0 || strcmp(argv[1], "verify") == 0) {
        bool rm = strcmp(argv[1], "rm") == 0;
        if ((rm && argc != 3) || (!rm && argc != 2)) {
            pybox_error_set(&err, PYBOX_ERR_USAGE, 0, rm ? "usage: pybox image rm NAME" : "usage: pybox image verify");
            return fail(&err, false);
        }
        /* rm needs no recipe: a pybox without its recipes can still remove an image */
        pybox_image_paths_t paths;
        if (pybox_state_open(&st, false, &err) < 0 || (!rm && pybox_image_paths_default(&paths, &err) < 0))
            return fail(&err, false);
        _cleanup_(pybox_backend_closep) pybox_backend_t *be = NULL;
        if (pybox_backend_open_for(&st, backend, &be, &err) < 0)
            return fail(&err, false);
        int rc = rm ? pybox_image_remove(&st, be, argv[2], &to_stdout, &err)
                    : pybox_image_verify(&st, be, &paths, &to_stdout, &err);
        if (rc < 0)
            return fail(&err, false);
        return rc == 0 ? 0 : 1;
    }
    pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "unknown image command (build, list, rm, verify)");
    return fail(&err, false);
}

/* pybox verify RECEIPT.json|- [--key PUBLIC.pem]: 0 valid, 1 not, 125 not checked. */
static int cmd_verify(int argc, char **argv)
{
    pybox_error_t err = {0};
    const char *file = NULL, *keyfile = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "verify");
            return 0;
        }
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc && keyfile == NULL)
            keyfile = argv[++i];
        else if (strncmp(argv[i], "--key=", 6) == 0 && keyfile == NULL)
            keyfile = argv[i] + 6;
        else if (file == NULL && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0))
            file = argv[i];
        else if (argv[i][0] == '-' && strcmp(argv[i], "-") != 0 && pybox_cli_option("verify", argv[i]) == NULL) {
            pybox_cli_unknown("verify", argv[i], &err);
            return fail(&err, false);
        } else if (strcmp(argv[i], "--key") == 0 && i + 1 == argc) {
            pybox_cli_value("verify", argv[i], true, &err);
            return fail(&err, false);
        } else {
            bad = true;
        }
    }
    if (bad || file == NULL) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "usage: pybox verify RECEIPT.json|- [--key PUBLIC.pem]");
        return fail(&err, false);
    }
    char shown[160];
    pybox_escape_short(shown, sizeof shown, file, 96);
    _cleanup_close_ int fd = strcmp(file, "-") == 0 ? dup(STDIN_FILENO) : open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, errno, "open(%s)", shown);
        return fail(&err, false);
    }
    if (isatty(fd)) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "%s is a terminal: give the receipt in a file or on a pipe",
                        strcmp(file, "-") == 0 ? "standard input" : shown);
        return fail(&err, false);
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, PYBOX_SIGN_RECEIPT_MAX, &text, &len, &over, &err) < 0)
        return fail(&err, false);
    if (over) {
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "%s: larger than any receipt (%u MiB)", shown,
                        PYBOX_SIGN_RECEIPT_MAX >> 20);
        return fail(&err, false);
    }
    _cleanup_(pybox_key_freep) pybox_key_t *key = NULL;
    char whose[200];
    if (keyfile != NULL) {
        if (pybox_key_read_public(keyfile, &key, &err) < 0)
            return fail(&err, false);
        char kshown[160];
        pybox_escape_short(kshown, sizeof kshown, keyfile, 96);
        snprintf(whose, sizeof whose, "the key in %s", kshown);
    } else {
        pybox_state_t st;
        if (pybox_state_open(&st, false, &err) < 0 || pybox_key_load(&st, false, &key, &err) < 0)
            return fail(&err, false);
        snprintf(whose, sizeof whose, "this installation");
    }
    const pybox_key_t *keys[] = {key};
    pybox_sig_check_t c;
    pybox_sign_verify_text(text, len, keys, key ? 1 : 0, &c);
    if (c.verdict == PYBOX_SIG_VALID) {
        printf("valid: signed by key %s of %s\n", c.key_id, whose);
        return 0;
    }
    printf("invalid: %s%s\n", c.why,
           c.verdict == PYBOX_SIG_UNKNOWN_KEY && key == NULL ? " (this installation has no receipt key)" : "");
    return 1;
}

/* pybox key [--init]: the installation's public receipt key, as PEM. */
static int cmd_key(int argc, char **argv)
{
    pybox_error_t err = {0};
    bool init = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "key");
            return 0;
        }
        if (strcmp(argv[i], "--init") != 0) {
            if (pybox_cli_option("key", argv[i]) != NULL)
                pybox_cli_value("key", argv[i], false, &err); /* --init=... */
            else if (argv[i][0] == '-')
                pybox_cli_unknown("key", argv[i], &err);
            else
                pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "usage: pybox key [--init]");
            return fail(&err, false);
        }
        init = true;
    }
    pybox_state_t st;
    _cleanup_(pybox_key_freep) pybox_key_t *key = NULL;
    if (pybox_state_open(&st, init, &err) < 0)
        return fail(&err, false);
    int got = pybox_key_load(&st, init, &key, &err);
    if (got < 0)
        return fail(&err, false);
    if (got == 0) {
        pybox_error_set(&err, PYBOX_ERR_STATE, 0,
                        "this installation has no receipt key yet: pybox key --init makes one (set-up and the "
                        "first signed receipt do too)");
        return fail(&err, false);
    }
    pybox_buf_t pem;
    pybox_buf_init(&pem, 0);
    int rc = pybox_key_public_pem(key, &pem, &err);
    if (rc == 0 && pybox_write_all(STDOUT_FILENO, pem.data, pem.len) < 0)
        rc = pybox_error_set(&err, PYBOX_ERR_SYSTEM, errno, "write(stdout)");
    pybox_buf_free(&pem);
    return rc < 0 ? fail(&err, false) : 0;
}

/* pybox receipt-schema: the published JSON Schema of receipts (docs/receipt.schema.json
 * is this, written by make schema). */
static int cmd_receipt_schema(void)
{
    pybox_buf_t out;
    pybox_buf_init(&out, 0);
    int rc = pybox_receipt_schema_text(&out) == 0 && pybox_write_all(STDOUT_FILENO, out.data, out.len) == 0
                 ? 0
                 : PYBOX_EXIT_FAILED;
    pybox_buf_free(&out);
    return rc;
}

/* A folder the server reads from or writes under: it must exist; kept as its real path. */
static int mcp_dir(const char *opt, const char *dir, bool writable, char *out, pybox_error_t *err)
{
    struct stat sb;
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL || stat(real, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: '%s' is not an existing folder", opt, dir);
    if (writable && faccessat(AT_FDCWD, real, W_OK | X_OK, AT_EACCESS) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, errno, "%s: '%s' cannot be written", opt, dir);
    return pybox_fmt(out, PATH_MAX, "%s", real) < 0
               ? pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: the path is too long", opt)
               : 0;
}

/* A group by name or number (--socket-group). */
static int group_of(const char *v, gid_t *gid, pybox_error_t *err)
{
    char shown[96];
    pybox_escape_short(shown, sizeof shown, v, 64);
    uint64_t n;
    if (pybox_parse_u64(v, &n) == 0 && n < (gid_t)-1) {
        *gid = (gid_t)n;
        return 0;
    }
    struct group g, *found = NULL;
    char buf[16384];
    if (getgrnam_r(v, &g, buf, sizeof buf, &found) != 0 || found == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--socket-group: no group '%s' here", shown);
    *gid = found->gr_gid;
    return 0;
}

/* A count per token from 1 to PYBOX_MCP_HTTP_PER_TOKEN_MAX. */
static int per_token(const char *opt, const char *v, unsigned *out, pybox_error_t *err)
{
    uint64_t n;
    if (pybox_parse_u64(v, &n) < 0 || n < 1 || n > PYBOX_MCP_HTTP_PER_TOKEN_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: give a whole number from 1 to %d", opt,
                               PYBOX_MCP_HTTP_PER_TOKEN_MAX);
    *out = (unsigned)n;
    return 0;
}

/* The options of `pybox mcp --listen` (http.h); *listen says whether it was given. Only
 * read here: the token file is loaded once every option has passed. */
typedef struct {
    bool listen;
    const char *token_file;
    const char *http_only; /* the first option that needs --listen, if any */
} mcp_http_opts_t;

static int mcp_parse(int argc, char **argv, const pybox_state_t *st, pybox_mcp_config_t *cfg,
                     pybox_mcp_http_config_t *hc, mcp_http_opts_t *ho, pybox_error_t *err)
{
    memset(cfg, 0, sizeof *cfg);
    memset(hc, 0, sizeof *hc);
    memset(ho, 0, sizeof *ho);
    pybox_mcp_http_defaults(hc);
    const char *images = "stdlib";
    cfg->max_timeout_ms = 30000;
    cfg->max_memory_bytes = 512LL * 1024 * 1024;
    cfg->output_root_max = PYBOX_MCP_OUTPUT_ROOT_MAX;
    cfg->output_root_age_s = PYBOX_MCP_OUTPUT_ROOT_AGE_S;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const struct option *known = pybox_cli_option("mcp", a);
        if (known == NULL)
            return pybox_cli_unknown("mcp", a, err);
        /* --name=value, or --name value; a flag takes none */
        const char *eq = strchr(a, '=');
        char name[32];
        if (known->has_arg == no_argument) {
            if (eq != NULL)
                return pybox_cli_value("mcp", a, false, err);
            hc->listen_public = true; /* --listen-public, the one flag (--help was seen before) */
            ho->http_only = ho->http_only ? ho->http_only : "--listen-public";
            continue;
        }
        if (eq != NULL) {
            v = eq + 1;
            snprintf(name, sizeof name, "--%s", known->name);
            a = name;
        } else if (v == NULL) {
            return pybox_cli_value("mcp", a, true, err);
        } else {
            i++;
        }
        if (strcmp(a, "--images") == 0) {
            images = v;
        } else if (strcmp(a, "--backend") == 0) {
            if (!pybox_name_valid(v) || pybox_backend_find(v) == NULL) {
                char known_b[256], shown_b[160];
                pybox_backend_names(known_b, sizeof known_b);
                pybox_escape_short(shown_b, sizeof shown_b, v, 32);
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--backend: unknown backend '%s' (known: %s)", shown_b,
                                       known_b);
            }
            pybox_strlcpy(cfg->backend, v, sizeof cfg->backend);
        } else if (strcmp(a, "--max-timeout") == 0) {
            if (pybox_parse_seconds_ms(v, &cfg->max_timeout_ms) < 0 || cfg->max_timeout_ms < PYBOX_TIMEOUT_MIN_MS ||
                cfg->max_timeout_ms > PYBOX_TIMEOUT_MAX_MS)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--max-timeout: give seconds from %.1f to %lld, with at most 3 decimals",
                                       PYBOX_TIMEOUT_MIN_MS / 1000.0, PYBOX_TIMEOUT_MAX_MS / 1000);
        } else if (strcmp(a, "--max-memory") == 0) {
            if (pybox_parse_size(v, &cfg->max_memory_bytes) < 0 || cfg->max_memory_bytes < PYBOX_MEMORY_MIN)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--max-memory: give a size of at least %lld MiB (e.g. 512M or 1G)",
                                       PYBOX_MEMORY_MIN >> 20);
        } else if (strcmp(a, "--output-root-max") == 0) {
            if (pybox_parse_size(v, &cfg->output_root_max) < 0 || cfg->output_root_max < pybox_mcp_call_output_most())
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--output-root-max: give a size of at least %lld MiB, what one call's files may "
                                       "take (e.g. 1G)",
                                       (long long)((pybox_mcp_call_output_most() + (1 << 20) - 1) >> 20));
        } else if (strcmp(a, "--output-root-age") == 0) {
            if (pybox_parse_age(v, &cfg->output_root_age_s) < 0 ||
                cfg->output_root_age_s < PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--output-root-age: give a time of at least %lld s, in s, m, h or d (e.g. 7d)",
                                       PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S);
        } else if (strcmp(a, "--files-root") == 0) {
            if (mcp_dir(a, v, false, cfg->files_root, err) < 0)
                return -1;
        } else if (strcmp(a, "--output-root") == 0) {
            if (mcp_dir(a, v, true, cfg->output_root, err) < 0)
                return -1;
        } else if (strcmp(a, "--listen") == 0) {
            if (pybox_mcp_listen_parse(v, &hc->listen, err) < 0)
                return -1;
            ho->listen = true;
        } else {
            /* the options of the HTTP server, which need --listen */
            ho->http_only = ho->http_only ? ho->http_only : known->name;
            if (strcmp(a, "--token-file") == 0) {
                ho->token_file = v;
            } else if (strcmp(a, "--socket-group") == 0) {
                if (group_of(v, &hc->socket_gid, err) < 0)
                    return -1;
                hc->socket_group_set = true;
            } else if (strcmp(a, "--allow-origins") == 0) {
                if (pybox_mcp_origins_parse(v, &hc->origins, err) < 0)
                    return -1;
            } else if (strcmp(a, "--max-connections") == 0) {
                if (per_token(a, v, &hc->max_connections, err) < 0)
                    return -1;
            } else if (strcmp(a, "--max-sessions") == 0) {
                if (per_token(a, v, &hc->max_sessions, err) < 0)
                    return -1;
            } else if (strcmp(a, "--max-calls") == 0) {
                if (per_token(a, v, &hc->max_calls, err) < 0)
                    return -1;
            } else if (pybox_parse_age(v, &hc->session_idle_s) < 0 ||
                       hc->session_idle_s < PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S) { /* --session-idle */
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "--session-idle: give a time of at least %lld s, in s, m, h or d (e.g. 1h)",
                                       PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S);
            }
        }
    }
    if (!ho->listen && ho->http_only != NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--%s needs --listen (it is an option of the HTTP server)",
                               ho->http_only[0] == '-' ? ho->http_only + 2 : ho->http_only);
    if (ho->listen && ho->token_file == NULL)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--listen needs --token-file FILE (lines of NAME TOKEN, the file 0600): the server "
                               "never listens without tokens");
    if (hc->socket_group_set && hc->listen.family != AF_UNIX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--socket-group is for --listen unix:/path only");
    if (ho->listen && !hc->listen.loopback && !hc->listen_public)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "--listen: not a loopback address: give --listen-public to serve beyond this machine "
                               "(with a reverse proxy and TLS in front: docs/mcp.md)");
    /* The images: each a built, pinned image of this installation, named once. */
    const char *p = images;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char name[PYBOX_NAME_MAX];
        if (n == 0 || n >= sizeof name)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: give image names separated by commas");
        memcpy(name, p, n);
        name[n] = '\0';
        if (!pybox_name_valid(name))
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: '%.64s' is not a valid image name", name);
        for (size_t j = 0; j < cfg->n_images; j++)
            if (strcmp(cfg->images[j], name) == 0)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: '%s' is named twice", name);
        if (cfg->n_images == PYBOX_MCP_IMAGES_MAX)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: at most %d images", PYBOX_MCP_IMAGES_MAX);
        pybox_pin_t pin;
        pybox_config_t c;
        if (pybox_state_config(st, &c, err) < 0)
            return -1;
        int got = pybox_pin_get(st, pybox_backend_choose(&c, cfg->backend), name, &pin, err);
        if (got < 0)
            return -1;
        if (got == 0)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                   "--images: the image '%s' is not built here (pybox image build %s)", name, name);
        snprintf(cfg->images[cfg->n_images++], PYBOX_NAME_MAX, "%s", name);
        p += n;
        if (*p == ',' && *++p == '\0')
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: give image names separated by commas");
    }
    if (cfg->n_images == 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "--images: name at least one image");
    /* The server's ceilings stay within the installation's own. */
    pybox_config_t ceil;
    if (pybox_state_config(st, &ceil, err) < 0)
        return -1;
    /* every digit each side needs: a value just above its ceiling must not look like it */
    char asked[PYBOX_NUM_MAX], most[PYBOX_NUM_MAX];
    if (cfg->max_timeout_ms > ceil.timeout_ms)
        return pybox_error_set(
            err, PYBOX_ERR_USAGE, 0, "--max-timeout: %s s is above this installation's ceiling of %s s (%s)",
            pybox_fmt_fixed(asked, cfg->max_timeout_ms, 3), pybox_fmt_fixed(most, ceil.timeout_ms, 3), ceil.source);
    if (cfg->max_memory_bytes > ceil.memory_bytes)
        return pybox_error_set(
            err, PYBOX_ERR_USAGE, 0, "--max-memory: %s is above this installation's ceiling of %s (%s)",
            pybox_fmt_size(asked, cfg->max_memory_bytes), pybox_fmt_size(most, ceil.memory_bytes), ceil.source);
    return 0;
}

static int cmd_mcp(int argc, char **argv)
{
    pybox_error_t err = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pybox_help(stdout, "mcp");
            return 0;
        }
    }
    pybox_state_t st;
    pybox_mcp_config_t cfg;
    static pybox_mcp_http_config_t hc; /* the tokens' digests: large, and kept for the server's life */
    mcp_http_opts_t ho;
    if (pybox_state_open(&st, false, &err) < 0 || mcp_parse(argc, argv, &st, &cfg, &hc, &ho, &err) < 0)
        return fail(&err, false);
    if (ho.listen && pybox_mcp_tokens_load(ho.token_file, &hc.tokens, &err) < 0)
        return fail(&err, false);
    /* The backend is opened once before serving, so a missing engine is said at once. */
    pybox_backend_t *be = NULL;
    if (pybox_backend_open_for(&st, cfg.backend, &be, &err) < 0)
        return fail(&err, false);
    pybox_backend_close(be);
    /* Signals end the server as stdin's end does: blocked in every thread, read here. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        pybox_error_set(&err, PYBOX_ERR_SYSTEM, errno, "signalfd");
        return fail(&err, false);
    }
    pybox_buf_t imgs;
    pybox_buf_init(&imgs, 0);
    for (size_t i = 0; i < cfg.n_images; i++)
        pybox_buf_addf(&imgs, "%s%s", i ? "," : "", cfg.images[i]);
    char most_s[PYBOX_NUM_MAX], most_m[PYBOX_NUM_MAX];
    fprintf(stderr, "pybox mcp: serving run_python on %s (images %s; at most %s s and %s per call)\n",
            ho.listen ? "HTTP" : "stdio", imgs.data ? imgs.data : "", pybox_fmt_fixed(most_s, cfg.max_timeout_ms, 3),
            pybox_fmt_size(most_m, cfg.max_memory_bytes));
    pybox_buf_free(&imgs);
    int rc;
    if (ho.listen) {
        rc = pybox_mcp_http_serve(&hc, sfd, &cfg, &pybox_mcp_run_python_tool, 1, &st, &err);
        OPENSSL_cleanse(&hc.tokens, sizeof hc.tokens);
        if (rc < 0) {
            close(sfd);
            return fail(&err, false);
        }
    } else {
        rc = pybox_mcp_serve(STDIN_FILENO, STDOUT_FILENO, sfd, &cfg, &pybox_mcp_run_python_tool, 1, &st);
    }
    close(sfd);
    return rc < 0 ? 125 : 0;
}

/* A standard descriptor PyBox was started without (closed by whoever started it) is
 * /dev/null before anything is opened: else the first file, socket or folder PyBox opens
 * takes its number, and the receipt, a protocol answer or an error message written "to
 * stdout" or "to stderr" lands in it (bubblewrap and isolate do the same). */
static int standard_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR | O_NOCTTY); /* inherited, as a standard descriptor is */
        if (n != fd) {
            if (n >= 0)
                close(n);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    process_start_s = pybox_now_s();
    if (standard_fds() < 0)
        return PYBOX_EXIT_FAILED; /* nothing can be said: there is nowhere safe to say it */
    static char prefix[] = "pybox";
    pybox_log_set(pybox_log_stderr, prefix);
    if (argc < 2) {
        pybox_help(stderr, NULL);
        return PYBOX_EXIT_FAILED;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "exec") == 0)
        return cmd_exec(argc - 1, argv + 1);
    if (strcmp(cmd, "image") == 0)
        return cmd_image(argc - 1, argv + 1);
    if (strcmp(cmd, "cleanup") == 0)
        return cmd_cleanup(argc - 1, argv + 1);
    if (strcmp(cmd, "mcp") == 0)
        return cmd_mcp(argc - 1, argv + 1);
    if (strcmp(cmd, "verify") == 0)
        return cmd_verify(argc - 1, argv + 1);
    if (strcmp(cmd, "key") == 0)
        return cmd_key(argc - 1, argv + 1);
    if (strcmp(cmd, "receipt-schema") == 0 && argc == 2)
        return cmd_receipt_schema();
    if (strcmp(cmd, "chart") == 0)
        return cmd_chart(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("pybox %s\n", PYBOX_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        const char *of = strcmp(cmd, "help") == 0 && argc > 2 ? argv[2] : NULL;
        if (pybox_help(stdout, of) == 0)
            return 0;
        cmd = of;
        pybox_error_t err = {0};
        char shown[160];
        pybox_escape_short(shown, sizeof shown, cmd, 64);
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "no help for '%s': commands are exec, mcp, image, cleanup, verify, key, chart", shown);
        return fail(&err, false);
    }
    pybox_error_t err = {0};
    if (cmd[0] == '-') {
        char shown[160];
        pybox_escape_short(shown, sizeof shown, cmd, 64);
        pybox_error_set(&err, PYBOX_ERR_USAGE, 0,
                        "unknown option '%s' for `pybox` (see `pybox help`; a command's options follow it)", shown);
        return fail(&err, false);
    }
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_escape_terminal(&b, cmd, strlen(cmd) > 64 ? 64 : strlen(cmd), false);
    pybox_error_set(&err, PYBOX_ERR_USAGE, 0, "unknown command '%s' (see pybox help)", b.data ? b.data : "");
    pybox_buf_free(&b);
    return fail(&err, false);
}
