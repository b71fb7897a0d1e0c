/* SPDX-License-Identifier: MIT */
/* The command line's help (see help.h). Numbers come from the limits' table (limits.h)
 * and bounds.h, so the help says what the code does. */
#include "help.h"

#include <string.h>

#include "../bounds.h"
#include "../box.h"
#include "../limits.h"
#include "../mcp/config.h"
#include "../mcp/http.h"
#include "../mcp/run_python.h"
#include "../mcp/server.h"
#include "../util.h"
#include "cli.h"

static void main_help(FILE *o)
{
    fprintf(o, "usage: pybox exec [OPTION]... < program.py\n"
               "       pybox mcp [OPTION]...\n"
               "       pybox image build NAME [--force] [--lock uv.lock --wheels DIR | --debian PACKAGES |\n"
               "                              --rootfs FILE.tar]\n"
               "       pybox image list | verify | rm NAME\n"
               "       pybox session open [OPTION]... | close ID | list\n"
               "       pybox exec --session ID < program.py\n"
               "       pybox cleanup [--dry-run] [--json]\n"
               "       pybox verify RECEIPT.json|- [--key PUBLIC.pem]\n"
               "       pybox key [--init]\n"
               "       pybox chart [RECEIPT.json] > chart.svg\n"
               "       pybox help [COMMAND] | version\n"
               "\n"
               "PyBox runs an untrusted Python program in a fresh, sealed box and prints a receipt:\n"
               "what was asked, what the backend and the kernel observed, what the program said\n"
               "(untrusted), and what is not known.\n"
               "\n"
               "  exec      run the program given on standard input (pybox help exec)\n"
               "  mcp       serve the run_python tool to an AI agent over MCP, on stdio or HTTP (pybox help mcp)\n"
               "  image     build, list, verify and remove the pinned images (pybox help image)\n"
               "  session   open, list and close sessions: one box kept for many calls (pybox help session)\n"
               "  cleanup   remove this installation's expired leftovers (pybox help cleanup)\n"
               "  verify    check a JSON receipt's signature (pybox help verify)\n"
               "  key       print this installation's public receipt key (pybox help key)\n"
               "  chart     draw a JSON receipt's kernel samples as SVG (pybox help chart)\n"
               "  help      this help, or a command's\n"
               "  version   the version\n"
               "\n"
               "exec, mcp, image and cleanup take --backend NAME (known: ");
    char names[256];
    pybox_backend_names(names, sizeof names);
    fprintf(o,
            "%s;\n"
            "default: PYBOX_BACKEND, then config.json's \"backend\", else " PYBOX_DEFAULT_BACKEND ").\n"
            "Exit codes of exec: the program's own when it ended by itself; 124 when a deadline\n"
            "stopped it; 125 when PyBox refused or failed.\n"
            "The installation lives in /var/lib/pybox for root (PYBOX_HOME overrides).\n"
            "Manuals: pybox(1), pybox-exec(1), pybox-mcp(1), pybox-receipt(5).\n",
            names);
}

/* A limit's default, minimum, maximum or ceiling as the help gives it (limits.h); one of
 * a few buffers, so that several can stand in one call. */
static const char *lim(pybox_limit_id_t id, char which)
{
    static char bufs[12][PYBOX_NUM_MAX];
    static unsigned next;
    char *out = bufs[next++ % 12];
    const pybox_limit_t *l = pybox_limit(id);
    switch (which) {
    case 'd':
        return pybox_limit_fmt(id, l->dflt, out);
    case 'n':
        return pybox_limit_fmt(id, l->min, out);
    case 'x':
        return pybox_limit_fmt(id, l->max, out);
    }
    return l->ceiling == 0 ? "all CPUs" : pybox_limit_fmt_config(id, l->ceiling, out);
}

static void exec_help(FILE *o)
{
    fprintf(o,
            "usage: pybox exec [OPTION]... < program.py\n"
            "\n"
            "Run the Python program given whole on standard input (at most %d bytes; never a\n"
            "terminal, never an argument) in a fresh, sealed box, and print its receipt.\n"
            "\n"
            "  --timeout SECONDS  PyBox's deadline, counted from the box running (default %s,\n"
            "                     or the image's; %s to %s, at most 3 decimals); the box's own\n"
            "                     timer is %g s longer\n"
            "  --memory SIZE      memory without swap: a bare number is MiB, or 512m, 1g (default\n"
            "                     %s, or the image's; at least %s)\n"
            "  --pids N           processes at most (default %s, or the image's; at least %s)\n"
            "  --cpus N           CPUs (default %s, or the image's; at least %s)\n"
            "  --image NAME       the pinned image to run in (default stdlib; pybox image list)\n"
            "  --input PATH       a file or folder copied read-only to /box/in/<name>; repeat it\n"
            "                     (at most 64, %lld MiB in all)\n"
            "  --output DIR       a new or empty folder for what the program leaves in /box/out\n"
            "                     (regular files and folders only; at most %d files, %lld MiB each,\n"
            "                     %lld MiB in all; it appears whole or not at all)\n"
            "  --backend NAME     the backend that builds the box (default: PYBOX_BACKEND, then\n"
            "                     config.json's, else " PYBOX_DEFAULT_BACKEND ")\n"
            "  --json             the receipt as one JSON object (docs/receipt.md; never in colour)\n"
            "  --chart FILE       also draw the run's kernel samples as SVG into FILE, a new file\n"
            "                     in an existing folder (never written over; docs/chart.md)\n"
            "  --color WHEN       the status word and headings in colour: auto (default: on a\n"
            "                     terminal, unless NO_COLOR is set or TERM is dumb), always (even\n"
            "                     with NO_COLOR), never\n"
            "  --session ID       run the program as the next call of the session `pybox session\n"
            "                     open` printed: its globals, /tmp and /box/out from the earlier\n"
            "                     calls (with --timeout, --json, --color only; pybox help session)\n"
            "  --help             this help\n"
            "\n"
            "Ceilings: every limit stays under the installation's (config.json in the state\n"
            "folder: %s, default %s; %s, default %s; %s, default all\n"
            "CPUs; %s, default %s); a limit above one is refused before any box.\n"
            "Exit code: the program's own; 124 when a deadline stopped it; 125 when PyBox refused\n"
            "or failed.\n",
            PYBOX_PROGRAM_MAX, lim(PYBOX_LIMIT_TIMEOUT, 'd'), lim(PYBOX_LIMIT_TIMEOUT, 'n'),
            lim(PYBOX_LIMIT_TIMEOUT, 'x'), PYBOX_BOX_TIMER_MARGIN_MS / 1000.0, lim(PYBOX_LIMIT_MEMORY, 'd'),
            lim(PYBOX_LIMIT_MEMORY, 'n'), lim(PYBOX_LIMIT_PIDS, 'd'), lim(PYBOX_LIMIT_PIDS, 'n'),
            lim(PYBOX_LIMIT_CPUS, 'd'), lim(PYBOX_LIMIT_CPUS, 'n'), (long long)(PYBOX_INPUT_MAX >> 20),
            PYBOX_OUT_FILES_MAX, (long long)(PYBOX_OUT_FILE_MAX >> 20), (long long)(PYBOX_OUT_TOTAL_MAX >> 20),
            pybox_limit(PYBOX_LIMIT_MEMORY)->config_key, lim(PYBOX_LIMIT_MEMORY, 'c'),
            pybox_limit(PYBOX_LIMIT_PIDS)->config_key, lim(PYBOX_LIMIT_PIDS, 'c'),
            pybox_limit(PYBOX_LIMIT_CPUS)->config_key, pybox_limit(PYBOX_LIMIT_TIMEOUT)->config_key,
            lim(PYBOX_LIMIT_TIMEOUT, 'c'));
}

static void mcp_help(FILE *o)
{
    char root_max[PYBOX_NUM_MAX], root_age[PYBOX_NUM_MAX], age_min[PYBOX_NUM_MAX], timeout[PYBOX_NUM_MAX],
        wait[PYBOX_NUM_MAX], wait_min[PYBOX_NUM_MAX], wait_max[PYBOX_NUM_MAX], margin[PYBOX_NUM_MAX],
        ttl[PYBOX_NUM_MAX], ttl_min[PYBOX_NUM_MAX], ttl_max[PYBOX_NUM_MAX], idle[PYBOX_NUM_MAX],
        idle_min[PYBOX_NUM_MAX], hidle[PYBOX_NUM_MAX], hidle_min[PYBOX_NUM_MAX];
    fprintf(
        o,
        "usage: pybox mcp [OPTION]...\n"
        "       pybox mcp --listen ADDRESS --token-file FILE [OPTION]...\n"
        "\n"
        "Serve the run_python tool over the Model Context Protocol on stdin/stdout (revision\n" PYBOX_MCP_PROTOCOL
        ", " PYBOX_MCP_PROTOCOL_OLD " also), or with --listen over Streamable HTTP at\n"
        "ADDRESS" PYBOX_MCP_HTTP_PATH ". The agent chooses the program, its image, limits and files;\n"
        "these options are the ceilings it cannot pass (refused \"(set by the server)\" before\n"
        "any box). Logs go to stderr. On stdio, closing stdin or SIGTERM cancels every call\n"
        "in progress, removes its box and exits; over HTTP, SIGTERM drains (calls in progress\n"
        "finish, nothing new is taken), SIGINT cancels them all.\n"
        "\n"
        "  --images NAME,...   the images calls may use, the first the default (default stdlib;\n"
        "                      at most %d)\n"
        "  --max-timeout SECS  the longest deadline a call may ask (default %s; %s to %s)\n"
        "  --max-memory SIZE   the most memory a call may ask (default %lldM; at least %s)\n"
        "  --files-root DIR    calls may give input files by path under DIR (default: none)\n"
        "  --output-root DIR   returned files that are not shown inline are kept under DIR and\n"
        "                      linked (default: none kept)\n"
        "  --output-root-max SIZE  the most the call folders under --output-root may hold\n"
        "                      together, each file and folder counted as at least %lld KiB; a call\n"
        "                      that could pass it is refused (default %s; at least %lld MiB)\n"
        "  --output-root-age AGE  a call folder under --output-root older than AGE is removed\n"
        "                      by the server (default %s; in s, m, h or d; at least %s)\n"
        "  --backend NAME      the backend that builds the boxes (default: PYBOX_BACKEND, then\n"
        "                      config.json's, else " PYBOX_DEFAULT_BACKEND ")\n"
        "  --warm N            boxes kept waiting per image, made, verified, their interpreter\n"
        "                      started and the image's preload imported, each for one call\n"
        "                      (default %d; 0 to %d; 0: every call starts cold)\n"
        "  --warm-wait SECS    the longest a box waits before it is replaced (default %s; %s\n"
        "                      to %s); its own init ends it %s s later if the server is gone\n"
        "  --" PYBOX_MCP_OPT_PYTHON_SESSIONS " N  Python sessions (session_open) live at once at most\n"
        "                      (default %d; 0 to %d; 0: the session tools are not offered)\n"
        "  --session-ttl SECS  the longest lifetime session_open may ask, and its default\n"
        "                      (default %s; %s to %s)\n"
        "  --session-idle SECS a session with no call for this long ends (default %s; at\n"
        "                      least %s)\n"
        "  --help              this help\n"
        "\n"
        "Over HTTP (every request needs a bearer token of FILE; docs/mcp.md, \"Over HTTP\"):\n"
        "  --listen ADDRESS    127.0.0.1:PORT, [::1]:PORT, PORT (on 127.0.0.1; 0: any free port),\n"
        "                      another IP address with a port (needs --listen-public), or\n"
        "                      unix:/path (a socket of mode 0660)\n"
        "  --listen-public     allow an address other than loopback (put TLS in front)\n"
        "  --token-file FILE   lines of NAME TOKEN (%d to %d characters); the file the server's\n"
        "                      own, 0600; required with --listen\n"
        "  --socket-group GROUP  the unix socket's group (default: the server's)\n"
        "  --allow-origins ORIGIN,...  the browser origins allowed (default: none; requests\n"
        "                      without an Origin header, as non-browser clients send, pass)\n"
        "  --max-connections N  connections with a request in progress, per token (default %d)\n"
        "  --" PYBOX_MCP_OPT_HTTP_SESSIONS " N  MCP sessions (Mcp-Session-Id) open at once, per token\n"
        "                      (default %d)\n"
        "  --max-calls N       calls in progress at once, per token (default %d; 1 to %d each)\n"
        "  --http-session-idle AGE  an MCP session with nothing in progress for AGE ends\n"
        "                      (default %s; at least %s)\n"
        "  --" PYBOX_MCP_OPT_PYTHON_SESSIONS_PER_TOKEN " N  of the --" PYBOX_MCP_OPT_PYTHON_SESSIONS " live at once,\n"
        "                      one token's at most (default: an even share, --" PYBOX_MCP_OPT_PYTHON_SESSIONS "\n"
        "                      divided by the tokens, rounded up; 1 to --" PYBOX_MCP_OPT_PYTHON_SESSIONS ")\n"
        "\n"
        "At most %d calls run at once, each in its own box. The server's ceilings stay under\n"
        "the installation's (pybox help exec).\n"
        "Resident boxes: --warm boxes per image of --images wait at all times (with the\n"
        "defaults, one per image), each holding memory within its image's limit (capped\n"
        "by --max-memory) from its start; a call takes one and the next is made at once.\n"
        "Sessions (session_open, run_python with session_id, session_close): at most\n--" PYBOX_MCP_OPT_PYTHON_SESSIONS
        " boxes, each within the memory its session_open asked (capped by\n"
        "--max-memory) until session_close, its idle limit, its lifetime, a call that ends\n"
        "its interpreter, the end of the MCP connection that opened it (whose alone it is),\n"
        "or the server's end.\n"
        "docs/mcp.md.\n",
        PYBOX_MCP_IMAGES_MAX, pybox_limit_fmt(PYBOX_LIMIT_TIMEOUT, PYBOX_MCP_MAX_TIMEOUT_MS, timeout),
        lim(PYBOX_LIMIT_TIMEOUT, 'n'), lim(PYBOX_LIMIT_TIMEOUT, 'x'), (long long)(PYBOX_MCP_MAX_MEMORY >> 20),
        lim(PYBOX_LIMIT_MEMORY, 'n'), (long long)(PYBOX_MCP_ENTRY_MIN / 1024),
        pybox_fmt_size(root_max, PYBOX_MCP_OUTPUT_ROOT_MAX),
        (long long)((pybox_mcp_call_output_most() + (1 << 20) - 1) >> 20),
        pybox_fmt_age(root_age, PYBOX_MCP_OUTPUT_ROOT_AGE_S), pybox_fmt_age(age_min, PYBOX_MCP_OUTPUT_ROOT_AGE_MIN_S),
        PYBOX_MCP_WARM, PYBOX_MCP_WARM_MAX, pybox_fmt_fixed(wait, PYBOX_MCP_WARM_WAIT_MS, 3),
        pybox_fmt_fixed(wait_min, PYBOX_MCP_WARM_WAIT_MIN_MS, 3),
        pybox_fmt_fixed(wait_max, PYBOX_MCP_WARM_WAIT_MAX_MS, 3), pybox_fmt_fixed(margin, PYBOX_MCP_WARM_MARGIN_MS, 3),
        PYBOX_MCP_SESSIONS, PYBOX_MCP_SESSIONS_MAX, pybox_fmt_fixed(ttl, PYBOX_MCP_SESSION_TTL_MS, 3),
        pybox_fmt_fixed(ttl_min, PYBOX_MCP_SESSION_TTL_MIN_MS, 3),
        pybox_fmt_fixed(ttl_max, PYBOX_MCP_SESSION_TTL_MAX_MS, 3), pybox_fmt_fixed(idle, PYBOX_MCP_SESSION_IDLE_MS, 3),
        pybox_fmt_fixed(idle_min, PYBOX_MCP_SESSION_IDLE_MIN_MS, 3), PYBOX_MCP_TOKEN_MIN, PYBOX_MCP_TOKEN_MAX,
        PYBOX_MCP_HTTP_CONNECTIONS, PYBOX_MCP_HTTP_SESSIONS, PYBOX_MCP_HTTP_CALLS, PYBOX_MCP_HTTP_PER_TOKEN_MAX,
        pybox_fmt_age(hidle, PYBOX_MCP_HTTP_SESSION_IDLE_S),
        pybox_fmt_age(hidle_min, PYBOX_MCP_HTTP_SESSION_IDLE_MIN_S), PYBOX_MCP_CALLS_MAX);
}

static void image_help(FILE *o)
{
    fputs("usage: pybox image build NAME [--force] [--backend NAME]\n"
          "       pybox image build NAME --lock uv.lock --wheels DIR [--backend NAME]\n"
          "       pybox image build NAME --debian PACKAGE,... [--backend NAME]\n"
          "       pybox image build NAME --rootfs FILE.tar [--backend NAME]\n"
          "       pybox image list [--backend NAME]\n"
          "       pybox image verify [--backend NAME]\n"
          "       pybox image rm NAME [--backend NAME]\n"
          "\n"
          "Images are built offline from a recipe (Debian packages; stdlib and data are built\n"
          "in) or a custom one, and pinned; a run uses the pinned image only.\n"
          "\n"
          "  build      build the image (or confirm it is up to date) and pin it\n"
          "  list       the pinned images (of every backend, or of --backend's)\n"
          "  verify     check every pin: the image is there as pinned, its name points to it,\n"
          "             its manifest names the pinned recipe, the recipe is unchanged (exit 1 if\n"
          "             any fails)\n"
          "  rm         forget the pin and remove the image (never forced)\n"
          "\n"
          "  --force             (build) rebuild even when up to date (default: build only when\n"
          "                      the recipe or the guest init changed)\n"
          "  --lock FILE         (build) a custom image from a uv lock; every wheel's SHA-256\n"
          "                      must be the lock's (with --wheels)\n"
          "  --wheels DIR        (build) the folder of the wheels the lock names\n"
          "  --debian PKG,...    (build) a custom image: the stdlib image plus these Debian\n"
          "                      packages\n"
          "  --rootfs FILE.tar   (build) from this root filesystem tar, as images/build-rootfs.sh\n"
          "                      writes it, with FILE.tar.packages beside it: no network, no root\n"
          "  --backend NAME      the backend whose images these are (default: config.json's,\n"
          "                      else " PYBOX_DEFAULT_BACKEND ")\n"
          "  --help              this help\n"
          "\n"
          "The built-in recipes and the guest init are found under the installed prefix\n"
          "(share/pybox/images, libexec/pybox) or in the build folder; PYBOX_IMAGES and\n"
          "PYBOX_INIT name others. docs/images.md.\n",
          o);
}

static void cleanup_help(FILE *o)
{
    fputs("usage: pybox cleanup [--dry-run] [--json] [--backend NAME]\n"
          "\n"
          "Remove this installation's expired leftovers (a box whose run died, its volumes, its\n"
          "run note, a hidden output folder) and nothing else; the same happens before every\n"
          "run. Never a running box, never another installation's.\n"
          "\n"
          "  --dry-run        say what would be removed, remove nothing (default: remove)\n"
          "  --json           the report as one JSON object (default: text)\n"
          "  --backend NAME   the backend whose leftovers these are (default: config.json's,\n"
          "                   else " PYBOX_DEFAULT_BACKEND ")\n"
          "  --help           this help\n"
          "docs/cleanup.md.\n",
          o);
}

static void verify_help(FILE *o)
{
    fputs("usage: pybox verify RECEIPT.json|- [--key PUBLIC.pem]\n"
          "\n"
          "Check the signature of a JSON receipt (pybox exec --json, an MCP result's\n"
          "structuredContent, a campaign record's) from a file or standard input (-).\n"
          "It proves this installation's key (or the key in PUBLIC.pem) signed this receipt\n"
          "and nothing in it changed since; not that the host was honest. The terminal\n"
          "receipt carries no signature.\n"
          "\n"
          "  --key PUBLIC.pem  the public key to check against (pybox key prints one);\n"
          "                    default: this installation's own\n"
          "  --help            this help\n"
          "\n"
          "Exit code: 0 valid; 1 not (not JSON, not signed, signed by an unknown key, or the\n"
          "signature does not match); 125 when it could not be checked. docs/receipt.md.\n",
          o);
}

static void key_help(FILE *o)
{
    fputs("usage: pybox key [--init]\n"
          "\n"
          "Print this installation's public receipt key (PEM). Its private half is\n"
          "receipt-key.pem in the state folder, readable by its owner only; it is made by\n"
          "--init (set-up runs it) or by the first receipt that needs it.\n"
          "\n"
          "  --init   make the key if there is none, then print it\n"
          "  --help   this help\n"
          "docs/receipt.md.\n",
          o);
}

static void session_help(FILE *o)
{
    char ttl[PYBOX_NUM_MAX], most[PYBOX_NUM_MAX], idle[PYBOX_NUM_MAX], idle_least[PYBOX_NUM_MAX];
    fprintf(o,
            "usage: pybox session open [--image NAME] [--timeout S] [--memory M] [--pids N] [--cpus N]\n"
            "                          [--backend NAME] [--ttl S] [--idle S]\n"
            "       pybox exec --session ID [--timeout S] [--json] < program.py\n"
            "       pybox session close ID [--json] [--color WHEN]\n"
            "       pybox session list [--json]\n"
            "\n"
            "A session is one sealed box, kept: made, verified and watched as a run's, whose one\n"
            "interpreter runs each call given to it in the same globals (/tmp and /box/out last\n"
            "for the session). `session open` makes it, leaves a holder process of yours that\n"
            "keeps it, and prints its id; each `exec --session ID` prints that call's receipt\n"
            "(its session, its number, \"state from calls 1..k-1\"); `session close` prints the\n"
            "session's own receipt. Only the user who opened a session may use it. A call that\n"
            "passes its deadline, is killed for memory or is interrupted ends the session.\n"
            "\n"
            "  --image NAME       the session's image (default stdlib)\n"
            "  --timeout SECONDS  the longest deadline any of its calls may have\n"
            "  --memory SIZE      the whole session's memory (as pybox exec's)\n"
            "  --pids N           the session's processes at most (as pybox exec's)\n"
            "  --cpus N           the session's CPUs (as pybox exec's)\n"
            "  --backend NAME     the backend that builds its box (as pybox exec's)\n"
            "  --ttl SECONDS      the session's lifetime (default %s, at most %s); its box's own\n"
            "                     timer ends it %g s later should the holder die\n"
            "  --idle SECONDS     the session ends this long after its last call (default %s,\n"
            "                     at least %s)\n"
            "  --json             a receipt (close) or the list as JSON\n"
            "  --color WHEN       as pybox exec's (close)\n"
            "  --help             this help\n"
            "docs/sessions.md.\n",
            pybox_fmt_fixed(ttl, PYBOX_MCP_SESSION_TTL_MS, 3), pybox_fmt_fixed(most, PYBOX_MCP_SESSION_TTL_MAX_MS, 3),
            PYBOX_CLI_SESSION_MARGIN_MS / 1000.0, pybox_fmt_fixed(idle, PYBOX_MCP_SESSION_IDLE_MS, 3),
            pybox_fmt_fixed(idle_least, PYBOX_MCP_SESSION_IDLE_MIN_MS, 3));
}

static void chart_help(FILE *o)
{
    fputs("usage: pybox chart [RECEIPT.json] > chart.svg\n"
          "       pybox exec --chart FILE.svg [OPTION]... < program.py\n"
          "\n"
          "Draw a run's kernel samples as SVG: memory with its limit, processes with theirs, the\n"
          "CPU rate with its quota, the moment PyBox's deadline or the box's timer fired, and the\n"
          "final reading. The receipt (pybox exec --json) comes from the named file or standard\n"
          "input; the SVG goes to standard output. A receipt that cannot be drawn is refused\n"
          "(exit 125, nothing on standard output). The same receipt always gives the same bytes.\n"
          "\n"
          "  --help   this help\n"
          "docs/chart.md.\n",
          o);
}

int pybox_help(FILE *out, const char *command)
{
    static const struct {
        const char *command;
        void (*help)(FILE *o);
    } helps[] = {{"exec", exec_help},     {"mcp", mcp_help}, {"image", image_help}, {"cleanup", cleanup_help},
                 {"verify", verify_help}, {"key", key_help}, {"chart", chart_help}, {"session", session_help}};
    if (command == NULL || command[0] == '\0') {
        main_help(out);
        return 0;
    }
    for (size_t i = 0; i < sizeof helps / sizeof *helps; i++) {
        if (strcmp(command, helps[i].command) == 0) {
            helps[i].help(out);
            return 0;
        }
    }
    return -1;
}
