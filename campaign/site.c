/* SPDX-License-Identifier: MIT */
/* The evidence site (see site.h). Everything is printed in a fixed order from the
 * records, so the same records give the same bytes. */
#include "site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/chart.h"

/* ---- text ---- */

/* One escaper per place a string goes: text between tags (esc, esc_block, value), an
 * attribute's value (attr), a link's target (link_target, which also keeps only a safe
 * path). A record's strings reach the Markdown through the cell escaper (ev_cell). */

static void esc(pybox_buf_t *b, const char *s)
{
    pybox_xml_text(b, s, 0, 0);
}

/* An attribute's value, quoted with '"' by the caller: quotes and '&' escaped as well. */
static void attr(pybox_buf_t *b, const char *s, size_t n)
{
    char *t = strndup(s, n);
    if (t == NULL) {
        pybox_buf_fail(b);
        return;
    }
    pybox_xml_text(b, t, 0, 0);
    free(t);
}

/* The program's words and other long texts: lines kept, cut. */
static void esc_block(pybox_buf_t *b, const char *s, size_t max)
{
    pybox_xml_text(b, s, max, 1);
}

static const char *str_at(const cJSON *j, const char *path)
{
    const cJSON *v = ev_path(j, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A value in a sentence: text escaped and cut, numbers and truth values as the
 * Markdown cells show them (digits, "yes", "no", an em dash for none). */
static void value(pybox_buf_t *b, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        pybox_xml_text(b, v->valuestring, 300, 0);
    } else if (v == NULL || cJSON_IsNull(v) || cJSON_IsBool(v) || cJSON_IsNumber(v)) {
        ev_cell(b, v);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        pybox_xml_text(b, t ? t : "?", 300, 0);
        free(t);
    }
}

/* ---- Markdown as the campaign writes it, as HTML ---- */

/* What a link to a record also gets: its runs' walkthroughs. */
typedef struct {
    const ev_site_rec_t *recs;
    size_t n_recs;
    const char *const *run_pages; /* per record: "id\tlabel\n" lines */
} md_ctx_t;

static void inline_md(pybox_buf_t *b, const char *s, size_t len, const md_ctx_t *ctx);

static bool starts(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(s, p, n) == 0;
}

/* An entity the Markdown already holds (&lt; &gt; &amp; &quot; &#NN;): its length, or 0. */
static size_t entity_len(const char *s, size_t len)
{
    static const char *const known[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&#39;"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (starts(s, len, known[i]))
            return strlen(known[i]);
    return 0;
}

static void walkthrough_links(pybox_buf_t *b, const char *record, const md_ctx_t *ctx)
{
    for (size_t i = 0; ctx != NULL && i < ctx->n_recs; i++) {
        if (strcmp(ctx->recs[i].name, record) != 0 || ctx->run_pages[i] == NULL || ctx->run_pages[i][0] == '\0')
            continue;
        pybox_buf_adds(b, "<br><span class=\"walk\">walkthrough:");
        for (const char *p = ctx->run_pages[i]; *p != '\0';) {
            const char *tab = strchr(p, '\t'), *nl = strchr(p, '\n');
            if (tab == NULL || nl == NULL || tab > nl)
                break;
            pybox_buf_adds(b, " <a href=\"runs/");
            attr(b, p, (size_t)(tab - p));
            pybox_buf_adds(b, ".html\">");
            pybox_buf_add(b, tab + 1, (size_t)(nl - tab - 1)); /* made here, already escaped */
            pybox_buf_adds(b, "</a>");
            p = nl + 1;
        }
        pybox_buf_adds(b, "</span>");
    }
}

/* Whether a link's target is a safe path inside the evidence folder: a relative path of
 * [A-Za-z0-9._-] names joined by single '/', none of them "." or "..", then at most a
 * fragment of [A-Za-z0-9._-]. Nothing else is linked: no scheme, no "//", no way out of
 * the folder, and nothing a browser would decode (an entity, a '%', a quote). */
static bool safe_link(const char *href, size_t n, size_t *path_len)
{
    static const char name_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
    const char *hash = memchr(href, '#', n);
    size_t p = hash ? (size_t)(hash - href) : n;
    if (p == 0)
        return false;
    for (size_t i = 0; i < p;) {
        size_t k = i;
        while (k < p && href[k] != '/' && strchr(name_chars, href[k]) != NULL && href[k] != '\0')
            k++;
        if (k == i || (k < p && href[k] != '/') || (k - i == 1 && href[i] == '.') ||
            (k - i == 2 && href[i] == '.' && href[i + 1] == '.'))
            return false; /* an empty name ("//", a leading or trailing '/'), "." or "..", or another byte */
        i = k + (k < p);
        if (k + 1 == p)
            return false;
    }
    for (size_t i = p + 1; i < n; i++)
        if (href[i] == '\0' || strchr(name_chars, href[i]) == NULL)
            return false;
    *path_len = p;
    return true;
}

/* A link's target on the site, escaped for the href attribute: pages of evidence/ become
 * their HTML pages, records and other files of evidence/ are one folder up; a target that
 * is not a safe path (safe_link) is not linked. */
static bool link_target(pybox_buf_t *b, const char *href, size_t n)
{
    size_t p;
    if (!safe_link(href, n, &p))
        return false;
    if (p > 3 && memcmp(href + p - 3, ".md", 3) == 0 && memchr(href, '/', p) == NULL) {
        if (p == 9 && memcmp(href, "README.md", 9) == 0)
            pybox_buf_adds(b, "index");
        else
            attr(b, href, p - 3);
        pybox_buf_adds(b, ".html");
    } else {
        pybox_buf_adds(b, "../");
        attr(b, href, p);
    }
    attr(b, href + p, n - p);
    return true;
}

static void inline_md(pybox_buf_t *b, const char *s, size_t len, const md_ctx_t *ctx)
{
    bool em = false, strong = false;
    for (size_t i = 0; i < len;) {
        char c = s[i];
        size_t e;
        if (c == '\\' && i + 1 < len && strchr("\\`*_[]()#|<>!-.+{}", s[i + 1]) != NULL) {
            char t[2] = {s[i + 1], '\0'};
            esc(b, t);
            i += 2;
        } else if (c == '`') {
            const char *end = memchr(s + i + 1, '`', len - i - 1);
            if (end == NULL) {
                esc(b, "`");
                i++;
                continue;
            }
            pybox_buf_adds(b, "<code>");
            size_t n = (size_t)(end - (s + i + 1));
            char *t = strndup(s + i + 1, n);
            esc(b, t ? t : "");
            free(t);
            pybox_buf_adds(b, "</code>");
            i += n + 2;
        } else if (c == '*' && i + 1 < len && s[i + 1] == '*') {
            pybox_buf_adds(b, strong ? "</strong>" : "<strong>");
            strong = !strong;
            i += 2;
        } else if (c == '*') {
            pybox_buf_adds(b, em ? "</em>" : "<em>");
            em = !em;
            i++;
        } else if (c == '[') {
            /* [text](href): the text has no ']' of its own (cells escape theirs) */
            const char *close = memchr(s + i, ']', len - i);
            const char *paren = close && (size_t)(close - s) + 1 < len && close[1] == '(' ? close + 1 : NULL;
            const char *end = paren ? memchr(paren, ')', len - (size_t)(paren - s)) : NULL;
            if (end == NULL) {
                esc(b, "[");
                i++;
                continue;
            }
            const char *href = paren + 1, *text = s + i + 1;
            size_t hn = (size_t)(end - href), tn = (size_t)(close - text);
            pybox_buf_t target;
            pybox_buf_init(&target, 4096);
            if (link_target(&target, href, hn) && pybox_buf_ok(&target)) {
                pybox_buf_adds(b, "<a href=\"");
                pybox_buf_add(b, target.data, target.len);
                pybox_buf_adds(b, "\">");
                if (tn == hn && memcmp(text, href, hn) == 0 && tn > 3 && memcmp(href + hn - 3, ".md", 3) == 0)
                    pybox_buf_add(b, target.data, target.len); /* restriction.md shown as restriction.html */
                else
                    inline_md(b, text, tn, ctx);
                pybox_buf_adds(b, "</a>");
                if (starts(href, hn, EV_RECORDS "/")) {
                    char rec[80];
                    snprintf(rec, sizeof rec, "%.*s", (int)(hn - strlen(EV_RECORDS "/")),
                             href + strlen(EV_RECORDS "/"));
                    walkthrough_links(b, rec, ctx);
                }
            } else {
                inline_md(b, text, tn, ctx);
            }
            pybox_buf_free(&target);
            i = (size_t)(end - s) + 1;
        } else if (c == '<' && starts(s + i, len - i, "<br>")) {
            pybox_buf_adds(b, "<br>");
            i += 4;
        } else if (c == '&' && (e = entity_len(s + i, len - i)) > 0) {
            pybox_buf_add(b, s + i, e);
            i += e;
        } else {
            /* one character, escaped (a UTF-8 sequence is copied whole) */
            size_t n = 1;
            while (i + n < len && ((unsigned char)s[i + n] & 0xC0) == 0x80)
                n++;
            char *t = strndup(s + i, n);
            esc(b, t ? t : "");
            free(t);
            i += n;
        }
    }
    if (em)
        pybox_buf_adds(b, "</em>");
    if (strong)
        pybox_buf_adds(b, "</strong>");
}

/* The cells of a table row: split at '|' that no backslash escapes. */
static void table_row(pybox_buf_t *b, const char *line, size_t len, const char *tag, const md_ctx_t *ctx)
{
    size_t i = line[0] == '|' ? 1 : 0;
    if (len > i && line[len - 1] == '|')
        len--;
    pybox_buf_adds(b, "<tr>");
    while (i <= len) {
        size_t j = i;
        while (j < len && !(line[j] == '|' && line[j - 1] != '\\'))
            j++;
        size_t a = i, z = j;
        while (a < z && line[a] == ' ')
            a++;
        while (z > a && line[z - 1] == ' ')
            z--;
        pybox_buf_addf(b, "<%s>", tag);
        inline_md(b, line + a, z - a, ctx);
        pybox_buf_addf(b, "</%s>", tag);
        i = j + 1;
        if (j == len)
            break;
    }
    pybox_buf_adds(b, "</tr>\n");
}

static void md_html(pybox_buf_t *b, const char *md, const md_ctx_t *ctx)
{
    const char *p = md;
    enum { NONE, PARA, LIST, TABLE } open = NONE;
    int row = 0;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + len;
        bool blank = len == 0;
        bool is_table = len > 0 && p[0] == '|', is_item = starts(p, len, "- ");
        bool is_cont = open == LIST && len > 0 && p[0] == ' ';
        /* close what this line does not continue */
        if (open == TABLE && !is_table) {
            pybox_buf_adds(b, "</tbody></table>\n");
            open = NONE;
        } else if (open == PARA && (blank || is_table || is_item || p[0] == '#')) {
            pybox_buf_adds(b, "</p>\n");
            open = NONE;
        } else if (open == LIST && !is_item && !is_cont) {
            pybox_buf_adds(b, "</li>\n</ul>\n");
            open = NONE;
        }
        if (blank || (starts(p, len, "<!--") && len >= 3 && memcmp(p + len - 3, "-->", 3) == 0)) {
            /* the Markdown's own note: the HTML pages carry theirs */
        } else if (p[0] == '#') {
            int level = 0;
            while ((size_t)level < len && p[level] == '#')
                level++;
            size_t a = (size_t)level;
            while (a < len && p[a] == ' ')
                a++;
            if (level > 4)
                level = 4;
            pybox_buf_addf(b, "<h%d>", level);
            inline_md(b, p + a, len - a, ctx);
            pybox_buf_addf(b, "</h%d>\n", level);
        } else if (is_table) {
            if (open != TABLE) {
                pybox_buf_adds(b, "<table>\n<thead>");
                table_row(b, p, len, "th", ctx);
                pybox_buf_adds(b, "</thead>\n<tbody>\n");
                open = TABLE;
                row = 0;
            } else if (row++ > 0 || strspn(p, "|-: ") != len) {
                table_row(b, p, len, "td", ctx);
            }
        } else if (is_item) {
            if (open == LIST)
                pybox_buf_adds(b, "</li>\n");
            else
                pybox_buf_adds(b, "<ul>\n");
            pybox_buf_adds(b, "<li>");
            inline_md(b, p + 2, len - 2, ctx);
            open = LIST;
        } else if (is_cont) {
            size_t a = strspn(p, " ");
            pybox_buf_adds(b, "\n");
            inline_md(b, p + a, len - a, ctx);
        } else {
            pybox_buf_adds(b, open == PARA ? "\n" : "<p>");
            inline_md(b, p, len, ctx);
            open = PARA;
        }
        p = next;
    }
    if (open == TABLE)
        pybox_buf_adds(b, "</tbody></table>\n");
    else if (open == PARA)
        pybox_buf_adds(b, "</p>\n");
    else if (open == LIST)
        pybox_buf_adds(b, "</li>\n</ul>\n");
}

void ev_md_html(pybox_buf_t *out, const char *md)
{
    md_html(out, md, NULL);
}

/* ---- pages ---- */

static const char style_css[] =
    "/* SPDX-License-Identifier: MIT */\n"
    "/* PyBox evidence: one style for every page; nothing is fetched from elsewhere. */\n"
    ":root { --ink: #1b1b1b; --muted: #555; --line: #c8c8c8; --accent: #1f4e79; --soft: #f4f6f8; }\n"
    "* { box-sizing: border-box; }\n"
    "body { margin: 0; color: var(--ink); background: #fff; font: 15px/1.5 \"DejaVu Sans\", \"Liberation Sans\", "
    "Arial, sans-serif; }\n"
    "nav { background: var(--accent); padding: 0.5em 1.5em; }\n"
    "nav a { color: #fff; margin-right: 1.2em; text-decoration: none; white-space: nowrap; }\n"
    "nav a:hover, nav a:focus { text-decoration: underline; }\n"
    "main { max-width: 1100px; margin: 0 auto; padding: 1em 1.5em 3em; }\n"
    "h1 { font-size: 1.7em; margin: 0.6em 0 0.4em; }\n"
    "h2 { font-size: 1.25em; margin: 1.4em 0 0.5em; }\n"
    "a { color: var(--accent); }\n"
    "code, pre { font-family: \"DejaVu Sans Mono\", \"Liberation Mono\", monospace; font-size: 0.9em; }\n"
    "pre { background: var(--soft); border: 1px solid var(--line); padding: 0.7em; overflow-x: auto; "
    "white-space: pre-wrap; word-break: break-all; max-height: 32em; }\n"
    "table { border-collapse: collapse; width: 100%; margin: 0.8em 0; font-size: 0.92em; }\n"
    "th, td { border: 1px solid var(--line); padding: 0.35em 0.5em; text-align: left; vertical-align: top; "
    "overflow-wrap: anywhere; }\n"
    "th { background: var(--soft); }\n"
    ".walk { font-size: 0.9em; }\n"
    ".lead { color: var(--muted); }\n"
    ".facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.15em 1em; margin: 1em 0; }\n"
    ".facts dt { font-weight: bold; }\n"
    ".facts dd { margin: 0; }\n"
    "ol.steps { list-style: none; padding: 0; margin: 1.5em 0; border-left: 3px solid var(--accent); }\n"
    "ol.steps > li { position: relative; margin: 0 0 1.4em; padding-left: 2.6em; }\n"
    "ol.steps > li > .num { position: absolute; left: -1.05em; top: 0; width: 2em; height: 2em; "
    "border-radius: 50%; background: #fff; border: 3px solid var(--accent); text-align: center; "
    "font-weight: bold; line-height: 1.6em; }\n"
    "ol.steps h2 { margin: 0 0 0.2em; font-size: 1.15em; }\n"
    ".phase { display: grid; grid-template-columns: 9em 6em 1fr; align-items: center; gap: 0.5em; "
    "font-size: 0.9em; }\n"
    ".track { display: block; width: 100%; height: 0.8em; background: var(--soft); border: 1px solid var(--line); }\n"
    ".bar { fill: var(--accent); }\n"
    ".checked { margin: 0.4em 0; padding-left: 1.2em; }\n"
    ".untrusted { border-left: 4px solid #b00020; }\n"
    ".chart svg { max-width: 100%; height: auto; border: 1px solid var(--line); }\n"
    "footer { color: var(--muted); font-size: 0.85em; margin-top: 2em; }\n";

/* The kinds' pages, in the index's order, for the navigation bar. */
static void nav(pybox_buf_t *b, const char *up, const ev_page_t *pages, size_t n_md, const char *walk)
{
    pybox_buf_addf(b, "<nav><a href=\"%sindex.html\">Evidence and limits</a>\n", up);
    if (walk != NULL) {
        pybox_buf_addf(b, "<a href=\"%sruns/", up);
        attr(b, walk, strlen(walk));
        pybox_buf_adds(b, ".html\">One run, step by step</a>\n");
    }
    for (size_t i = 0; i < n_md; i++) {
        if (strcmp(pages[i].name, "README.md") == 0)
            continue;
        const char *t = pages[i].text.data ? pages[i].text.data : "";
        size_t tl = strncmp(t, "# ", 2) == 0 ? strcspn(t + 2, "\n") : 0;
        pybox_buf_addf(b, "<a href=\"%s", up);
        attr(b, pages[i].name, strlen(pages[i].name) - 3);
        pybox_buf_adds(b, ".html\">");
        if (tl > 0) {
            char *title = strndup(t + 2, tl);
            esc(b, title ? title : "");
            free(title);
        } else {
            esc(b, pages[i].name);
        }
        pybox_buf_adds(b, "</a>\n"); /* a space between links: the bar wraps */
    }
    pybox_buf_adds(b, "</nav>\n");
}

static void head(pybox_buf_t *b, const char *title, const char *up)
{
    pybox_buf_adds(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta http-equiv=\"Content-Security-Policy\" content=\"" EV_SITE_CSP "\">\n"
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    esc(b, title);
    pybox_buf_addf(b, " · PyBox evidence</title>\n<link rel=\"stylesheet\" href=\"%sstyle.css\">\n</head>\n<body>\n",
                   up);
    pybox_buf_adds(b, "<!-- Generated by `make campaign` from the replay records in evidence/records only; do not "
                      "edit. `make evidence-check` verifies that this page is exactly what they render to. -->\n");
}

static void foot(pybox_buf_t *b)
{
    pybox_buf_adds(b, "<footer>Generated from the replay records only; every record is named by its SHA-256 and "
                      "checked by <code>make evidence-check</code>.</footer>\n</main>\n</body>\n</html>\n");
}

/* ---- a run, step by step ---- */

static bool is_run_id(const char *s)
{
    if (s == NULL || strlen(s) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* The run flow's phases in the order they happen (docs/receipt.md, timings). */
static const char *const phase_names[] = {"before", "housekeeping", "create", "verify",    "files_in", "attach",
                                          "start",  "arm",          "run",    "files_out", "collect",  "remove"};
#define NPHASES (sizeof phase_names / sizeof *phase_names)

static const struct {
    const char *title, *what;
    const char *phases[4];
} steps[10] = {
    {"You hand PyBox a program",
     "The whole program travels on PyBox's standard input, bounded in size. It never becomes part of a command line "
     "and it chooses no setting. PyBox reads it, checks the request and opens its backend.",
     {"before"}},
    {"It tidies up",
     "Before building anything, PyBox removes this installation's expired leftovers (boxes whose run died, their "
     "volumes, their notes), and nothing else.",
     {"housekeeping"}},
    {"It writes down what it is about to build",
     "A small private note records the run's identity and expiry before anything exists, so a crash from here on "
     "leaves a trail the next run follows. It is closed only once the box is confirmed gone.",
     {NULL}},
    {"It builds a fresh, sealed box",
     "One box from the pinned image, with the policy below: its own user, no network, a read-only root, no "
     "capabilities, no new privileges, PyBox's own seccomp profile, and the limits asked for.",
     {"create"}},
    {"It reads the settings back and checks every one",
     "PyBox asks the backend what it actually built and compares every setting with the policy. Any difference and "
     "the program never starts. Then the inputs go in.",
     {"verify", "files_in"}},
    {"A watcher outside the box gets ready",
     "The box's streams are attached and the box is started (its init waits for the program); then PyBox finds the "
     "box's cgroup on the host and opens its counters. The watcher only reads.",
     {"attach", "start", "arm"}},
    {"The program runs, and two clocks start",
     "PyBox's own deadline on the host, and the box's own timer, one second longer, kept by the box's first "
     "process: if PyBox dies, the box still ends. The chart is what the watcher read from the kernel meanwhile.",
     {"run"}},
    {"It finishes, and PyBox asks the backend what happened",
     "The exit code comes from the backend's record of the box, not from anything the program printed; the box's "
     "init adds its own authenticated account. The program's output is kept, labelled untrusted.",
     {"files_out", "collect"}},
    {"The box is removed, and PyBox checks it is really gone",
     "Remove, then look again for that exact box. Only then is the note of step 3 closed.",
     {"remove"}},
    {"You get the receipt",
     "What was asked for, what was seen, what the program said, and what is not known: the JSON receipt as "
     "recorded, below.",
     {"total"}},
};

/* One fact: a label and a receipt value at a path (skipped when absent). */
static void fact(pybox_buf_t *b, const cJSON *r, const char *label, const char *path)
{
    const cJSON *v = ev_path(r, path);
    if (v == NULL)
        return;
    pybox_buf_adds(b, "<li>");
    esc(b, label);
    pybox_buf_adds(b, ": ");
    value(b, v);
    pybox_buf_adds(b, "</li>\n");
}

/* Facts by label and path, up to one with no label. */
typedef struct {
    const char *label, *path;
} fact_t;

static void facts(pybox_buf_t *b, const cJSON *r, const fact_t *list)
{
    for (; list->label != NULL; list++)
        fact(b, r, list->label, list->path);
}

/* Every field of an object, in its order, as facts (the policy and the records carry
 * fields other backends add, so none is chosen by name). */
static void facts_of(pybox_buf_t *b, const cJSON *o, const char *prefix)
{
    const cJSON *v;
    cJSON_ArrayForEach (v, o) {
        pybox_buf_adds(b, "<li>");
        esc(b, prefix);
        esc(b, v->string ? v->string : "?");
        pybox_buf_adds(b, ": ");
        value(b, v);
        pybox_buf_adds(b, "</li>\n");
    }
}

static double ms_of(const cJSON *timings, const char *name, bool *have)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(timings, name);
    *have = cJSON_IsNumber(v) && v->valuedouble >= 0;
    return *have ? v->valuedouble : 0;
}

static void said(pybox_buf_t *b, const cJSON *r, const char *stream)
{
    char path[64];
    snprintf(path, sizeof path, "said.%s", stream);
    const cJSON *s = ev_path(r, path);
    if (!cJSON_IsObject(s))
        return;
    pybox_buf_addf(b, "<li>%s: ", stream);
    value(b, cJSON_GetObjectItemCaseSensitive(s, "total_bytes"));
    pybox_buf_adds(b, " bytes");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "truncated")))
        pybox_buf_adds(b, ", cut to what was kept");
    pybox_buf_adds(b, "</li>\n");
    const char *text = str_at(s, "text");
    if (text != NULL && text[0] != '\0') {
        pybox_buf_adds(b, "<pre class=\"untrusted\" aria-label=\"untrusted: written by the program\">");
        esc_block(b, text, 2000);
        pybox_buf_adds(b, "</pre>\n");
    }
}

static void step_facts(pybox_buf_t *b, int k, const cJSON *rec, const cJSON *run, const cJSON *r)
{
    pybox_buf_adds(b, "<ul class=\"checked\">\n");
    switch (k) {
    case 0: {
        fact(b, r, "program bytes", "asked.program.bytes");
        fact(b, r, "program SHA-256", "asked.program.sha256");
        fact(b, r, "image", "asked.image.name");
        fact(b, r, "image ID (pinned)", "asked.image.id");
        const char *via = str_at(run, "via");
        if (via != NULL) {
            pybox_buf_adds(b, "<li>run through: ");
            esc(b, strcmp(via, "library") == 0 ? "the library's run flow (a test that may relax the policy)"
                   : strcmp(via, "exec") == 0  ? "pybox exec --json"
                                               : via);
            pybox_buf_adds(b, "</li>\n");
        }
        pybox_buf_adds(b, "</ul>\n");
        const char *prog = str_at(rec, "case.program");
        if (prog != NULL) {
            pybox_buf_adds(b, "<pre>");
            esc_block(b, prog, 4000);
            pybox_buf_adds(b, "</pre>\n");
        }
        return;
    }
    case 1:
        pybox_buf_adds(b, "<li>the receipt records this step's time only</li>\n");
        break;
    case 2:
        fact(b, r, "run id", "run_id");
        fact(b, r, "asked at (UTC)", "asked.at");
        pybox_buf_adds(b, "<li>the note is not timed on its own; it is written before step 4</li>\n");
        break;
    case 3:
        fact(b, r, "box", "seen.box.name");
        fact(b, r, "created", "seen.box.created");
        facts_of(b, cJSON_GetObjectItemCaseSensitive(ev_path(r, "asked"), "limits"), "limit ");
        facts_of(b, ev_path(r, "asked.policy"), "policy ");
        break;
    case 4: {
        fact(b, r, "verified before start", "seen.box.verified");
        fact(b, r, "settings compared", "seen.box.settings_checked");
        const cJSON *in;
        static const char *const input[] = {"name", ": ", "bytes", " bytes, SHA-256 ", "sha256", "</li>\n", NULL};
        cJSON_ArrayForEach (in, ev_path(r, "asked.inputs")) {
            pybox_buf_adds(b, "<li>input ");
            ev_fields(b, value, in, input);
        }
        break;
    }
    case 5: {
        static const fact_t started[] = {
            {"started", "seen.box.started"},
            {"cgroup", "seen.kernel.cgroup.version"},
            {"cgroup folder", "seen.kernel.cgroup.path"},
            {"not read", "seen.kernel.not_read"},
            {"watcher armed in (ms)", "seen.kernel.armed_ms"},
            {NULL, NULL},
        };
        facts(b, r, started);
        break;
    }
    case 6: {
        static const fact_t ran[] = {
            {"PyBox's deadline (s)", "asked.limits.timeout_s"},
            {"the box's timer (s)", "asked.limits.box_timer_s"},
            {"clock that fired", "seen.clock"},
            {"PyBox's deadline passed", "seen.host_deadline_passed"},
            {"the program ran (ms, by the box's init)", "seen.init_record.program_ms"},
            {"kernel samples", "seen.kernel.samples.count"},
            {NULL, NULL},
        };
        facts(b, r, ran);
        break;
    }
    case 7: {
        const char *br = ev_path(r, "seen.backend_record") ? "seen.backend_record" : "seen.engine_record";
        char p[64];
        snprintf(p, sizeof p, "%s.exit_code", br);
        fact(b, r, "exit code (the backend's record)", p);
        snprintf(p, sizeof p, "%s.oom_killed", br);
        fact(b, r, "out of memory (the backend's flag)", p);
        fact(b, r, "exit code (the box's init)", "seen.init_record.exit_code");
        fact(b, r, "signal (the box's init)", "seen.init_record.signal");
        fact(b, r, "OOM kills (the kernel)", "seen.kernel.final.oom_kills");
        fact(b, r, "what that establishes", "seen.oom.finding");
        fact(b, r, "files out", "seen.files.status");
        pybox_buf_adds(b, "<li>what the program said is below, escaped and cut: <strong>untrusted</strong>, written "
                          "by the program</li>\n");
        said(b, r, "stdout");
        said(b, r, "stderr");
        break;
    }
    case 8:
        fact(b, r, "removed", "seen.box.removed");
        fact(b, r, "confirmed gone", "seen.box.confirmed_gone");
        break;
    default: {
        fact(b, r, "status", "status");
        fact(b, r, "PyBox's exit code", "exit_code");
        const cJSON *u;
        cJSON_ArrayForEach (u, ev_path(r, "unknown")) {
            pybox_buf_adds(b, "<li>not known: ");
            value(b, u);
            pybox_buf_adds(b, "</li>\n");
        }
        break;
    }
    }
    pybox_buf_adds(b, "</ul>\n");
}

/* A phase's bar: drawn in SVG by its attributes, as the site's policy allows no style
 * attribute (EV_SITE_CSP); a quarter of a percent at least, so a phase of no time still
 * shows. */
static void phase_row(pybox_buf_t *b, const char *name, double at, double ms, double scale)
{
    double width = ms * scale < 0.25 ? 0.25 : ms * scale;
    pybox_buf_adds(b, "<div class=\"phase\"><span>");
    esc(b, name);
    pybox_buf_addf(b,
                   "</span><span>%.1f ms</span><svg class=\"track\" viewBox=\"0 0 100 1\" "
                   "preserveAspectRatio=\"none\" aria-hidden=\"true\"><rect class=\"bar\" x=\"%.2f\" y=\"0\" "
                   "width=\"%.2f\" height=\"1\"/></svg></div>\n",
                   ms, at * scale, width);
}

static void run_page(pybox_buf_t *b, const ev_site_rec_t *rec, const cJSON *run, const char *label,
                     const ev_page_t *pages, size_t n_md, const char *walk)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(run, "receipt");
    const char *title = str_at(rec->j, "case.title");
    pybox_buf_t t;
    pybox_buf_init(&t, 4096);
    pybox_buf_addf(&t, "%.200s: %.64s", title ? title : "a run", label);
    head(b, pybox_buf_ok(&t) ? t.data : "a run", "../");
    nav(b, "../", pages, n_md, walk);
    pybox_buf_adds(b, "<main>\n<h1>");
    esc(b, pybox_buf_ok(&t) ? t.data : "a run");
    pybox_buf_free(&t);
    pybox_buf_adds(b, "</h1>\n<p class=\"lead\">");
    value(b, ev_path(rec->j, "case.claim"));
    pybox_buf_adds(b, "</p>\n<dl class=\"facts\">\n");
    static const struct {
        const char *label, *path;
    } top[] = {{"status", "receipt.status"},
               {"exit code", "receipt.exit_code"},
               {"clock that fired", "receipt.seen.clock"},
               {"the whole run (ms)", "receipt.seen.timings_ms.total"},
               {"backend", "receipt.seen.backend"},
               {"image", "receipt.asked.image.name"},
               {"recorded at (UTC)", "at"}};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
        const cJSON *v = ev_path(run, top[i].path);
        if (v == NULL)
            continue;
        pybox_buf_adds(b, "<dt>");
        esc(b, top[i].label);
        pybox_buf_adds(b, "</dt><dd>");
        value(b, v);
        pybox_buf_adds(b, "</dd>\n");
    }
    pybox_buf_adds(b, "<dt>record</dt><dd><a href=\"../../" EV_RECORDS "/");
    attr(b, rec->name, strlen(rec->name));
    pybox_buf_adds(b, "\">");
    attr(b, rec->name, 8);
    static const char *const of[] = {"case.kind", "/", "case.id", ", verdict ", "verdict", ")</dd>\n</dl>\n", NULL};
    pybox_buf_adds(b, "</a> (case ");
    ev_fields(b, value, rec->j, of);

    /* Phases laid end to end in the order they happen, on the scale of the whole run. */
    const cJSON *tm = ev_path(r, "seen.timings_ms");
    double at[NPHASES], sum = 0;
    for (size_t i = 0; i < NPHASES; i++) {
        bool have;
        at[i] = sum;
        sum += ms_of(tm, phase_names[i], &have);
    }
    bool have_total;
    double total = ms_of(tm, "total", &have_total);
    if (!have_total || total < sum)
        total = sum;
    double scale = total > 0 ? 100.0 / total : 0;
    pybox_buf_adds(b, "<p>The ten steps of this run. Each bar is a phase's time (the receipt's "
                      "<code>seen.timings_ms</code>), the phases laid end to end in the order they happen on the "
                      "scale of the whole run; the rest of the whole is PyBox's own work between them.</p>\n");
    pybox_buf_adds(b, "<ol class=\"steps\">\n");
    for (int k = 0; k < 10; k++) {
        pybox_buf_addf(b, "<li id=\"step-%d\"><span class=\"num\">%d</span><h2>", k + 1, k + 1);
        esc(b, steps[k].title);
        pybox_buf_adds(b, "</h2>\n<p>");
        esc(b, steps[k].what);
        pybox_buf_adds(b, "</p>\n");
        for (int q = 0; q < 4 && steps[k].phases[q] != NULL; q++) {
            const char *ph = steps[k].phases[q];
            bool have;
            double ms = ms_of(tm, ph, &have);
            if (!have)
                continue;
            if (strcmp(ph, "total") == 0) {
                phase_row(b, "the whole run", 0, ms, scale);
                continue;
            }
            for (size_t i = 0; i < NPHASES; i++)
                if (strcmp(phase_names[i], ph) == 0)
                    phase_row(b, ph, at[i], ms, scale);
        }
        step_facts(b, k, rec->j, run, r);
        if (k == 6) {
            pybox_buf_adds(b, "<figure class=\"chart\">\n");
            pybox_buf_t svg;
            pybox_buf_init(&svg, 0);
            pybox_error_t err = {0};
            if (pybox_chart_svg(r, &svg, &err) == 0) {
                pybox_buf_add(b, svg.data, svg.len);
            } else {
                pybox_buf_adds(b, "<p>No chart: ");
                esc(b, err.msg);
                pybox_buf_adds(b, "</p>\n");
            }
            pybox_buf_free(&svg);
            pybox_buf_adds(b, "<figcaption>The kernel's counters of the box, read by PyBox's watcher "
                              "(<code>pybox chart</code> of this receipt draws the same).</figcaption>\n</figure>\n");
        }
        if (k == 9) {
            pybox_buf_adds(b, "<details open><summary>The receipt (JSON, as recorded; what the program said is in "
                              "<code>said</code>, untrusted)</summary>\n<pre>");
            char *text = cJSON_Print(r);
            esc_block(b, text ? text : "", 0);
            free(text);
            pybox_buf_adds(b, "</pre>\n</details>\n");
        }
        pybox_buf_adds(b, "</li>\n");
    }
    pybox_buf_adds(b, "</ol>\n");
    foot(b);
}

/* The label of each run of a record with a page ("with", "run, pass 2"), and its id. */
static void run_label(char out[96], const cJSON *rec, const cJSON *run)
{
    const char *name = str_at(run, "name");
    int passes = 0;
    const cJSON *x;
    cJSON_ArrayForEach (x, ev_path(rec, "runs")) {
        const char *n = str_at(x, "name");
        passes += n && name && strcmp(n, name) == 0;
    }
    const cJSON *pass = cJSON_GetObjectItemCaseSensitive(run, "pass");
    if (passes > 1 && cJSON_IsNumber(pass))
        snprintf(out, 96, "%.60s, pass %d", name ? name : "run", (int)pass->valuedouble);
    else
        snprintf(out, 96, "%.60s", name ? name : "run");
}

int ev_site_render(const ev_site_rec_t *recs, size_t n_recs, ev_page_t **pages, size_t *n, pybox_buf_t *problems)
{
    size_t n_md = *n;
    int bad = 0;
    /* Which runs get a page: those with a receipt and a run id, in the shown records. */
    char **run_pages = calloc(n_recs + 1, sizeof *run_pages);
    if (run_pages == NULL)
        abort();
    pybox_buf_t seen; /* run ids given a page, one per line */
    pybox_buf_init(&seen, 0);
    const char *walk = NULL, *walk_any = NULL;
    for (size_t i = 0; i < n_recs; i++) {
        if (!recs[i].shown)
            continue;
        pybox_buf_t list;
        pybox_buf_init(&list, 0);
        const cJSON *run;
        cJSON_ArrayForEach (run, ev_path(recs[i].j, "runs")) {
            const char *id = str_at(run, "receipt.run_id");
            if (!is_run_id(id) || !cJSON_IsObject(ev_path(run, "receipt.seen")) ||
                (seen.data != NULL && strstr(seen.data, id) != NULL))
                continue;
            pybox_buf_addf(&seen, "%s\n", id);
            char label[96];
            run_label(label, recs[i].j, run);
            pybox_buf_addf(&list, "%s\t", id);
            esc(&list, label);
            pybox_buf_adds(&list, "\n");
            if (walk_any == NULL)
                walk_any = id;
            /* The walkthrough the navigation offers: the clean exit's, when there is one. */
            const char *cid = str_at(recs[i].j, "case.id"), *kind = str_at(recs[i].j, "case.kind");
            if (walk == NULL && cid && kind && strcmp(cid, "clean-exit") == 0 && strcmp(kind, "receipt") == 0)
                walk = id;
        }
        run_pages[i] = pybox_buf_ok(&list) ? pybox_buf_steal(&list) : NULL;
        pybox_buf_free(&list);
    }
    if (walk == NULL)
        walk = walk_any;
    md_ctx_t ctx = {.recs = recs, .n_recs = n_recs, .run_pages = (const char *const *)run_pages};

    ev_page_t *css = ev_page_add(pages, n, EV_SITE "/style.css");
    pybox_buf_adds(&css->text, style_css);
    for (size_t i = 0; i < n_md; i++) {
        char name[64];
        /* named before ev_page_add, which may move the pages */
        bool is_index = strcmp((*pages)[i].name, "README.md") == 0;
        snprintf(name, sizeof name, EV_SITE "/%.*s.html", is_index ? 5 : (int)(strlen((*pages)[i].name) - 3),
                 is_index ? "index" : (*pages)[i].name);
        ev_page_t *pg = ev_page_add(pages, n, name);
        const ev_page_t *md = &(*pages)[i];
        const char *text = md->text.data ? md->text.data : "";
        size_t tl = strncmp(text, "# ", 2) == 0 ? strcspn(text + 2, "\n") : 0;
        char title[128];
        snprintf(title, sizeof title, "%.*s", (int)(tl < 120 ? tl : 120), text + 2);
        head(&pg->text, tl ? title : "PyBox evidence", "");
        nav(&pg->text, "", *pages, n_md, walk);
        pybox_buf_adds(&pg->text, "<main>\n");
        md_html(&pg->text, text, &ctx);
        if (is_index && walk != NULL) {
            pybox_buf_adds(&pg->text, "<h2>One run, step by step</h2>\n<p>Every run with a receipt above has a page "
                                      "that walks through its ten steps: each step's time, what was checked, the "
                                      "kernel's chart and the receipt. <a href=\"runs/");
            attr(&pg->text, walk, strlen(walk));
            pybox_buf_adds(&pg->text, ".html\">Start with a clean exit</a>.</p>\n");
        }
        foot(&pg->text);
    }
    for (size_t i = 0; i < n_recs; i++) {
        if (run_pages[i] == NULL)
            continue;
        const cJSON *run;
        cJSON_ArrayForEach (run, ev_path(recs[i].j, "runs")) {
            const char *id = str_at(run, "receipt.run_id");
            if (!is_run_id(id) || strstr(run_pages[i], id) == NULL)
                continue;
            char name[64], label[96];
            snprintf(name, sizeof name, EV_SITE_RUNS "/%s.html", id);
            run_label(label, recs[i].j, run);
            ev_page_t *pg = ev_page_add(pages, n, name);
            run_page(&pg->text, &recs[i], run, label, *pages, n_md, walk);
        }
    }
    for (size_t i = n_md; i < *n; i++) {
        if (!pybox_buf_ok(&(*pages)[i].text)) {
            pybox_buf_addf(problems, "%s: could not be made whole (too large or out of memory)\n", (*pages)[i].name);
            bad++;
        }
    }
    if (!pybox_buf_ok(&seen)) {
        pybox_buf_addf(problems, "%s: the list of runs could not be made\n", EV_SITE);
        bad++;
    }
    for (size_t i = 0; i < n_recs; i++)
        free(run_pages[i]);
    free(run_pages);
    pybox_buf_free(&seen);
    return bad;
}
