/* SPDX-License-Identifier: MIT */
/* Charts of a run's kernel samples, as SVG (see chart.h). Everything is placed on a
 * fixed grid and printed with fixed decimals, so the same receipt gives the same bytes. */
#include "chart.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

/* ---- text ---- */

/* The code point of the UTF-8 sequence at s, or -1 when it is not a valid, shortest one
 * (then one byte is taken). *n gets its length. */
static long utf8_at(const unsigned char *s, size_t left, size_t *n)
{
    *n = 1;
    unsigned char c = s[0];
    if (c < 0x80)
        return c;
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > left)
        return -1;
    long cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const long least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *n = len;
    return cp;
}

/* The characters XML 1.0 allows (its Char production). */
static bool xml_char(long cp, int keep_lines)
{
    if (cp == '\n' || cp == '\t')
        return keep_lines;
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) /* C0, DEL, C1: nothing to show */
        return false;
    return cp <= 0xD7FF || (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
}

void pybox_xml_text(pybox_buf_t *out, const char *s, size_t max_chars, int keep_lines)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), shown = 0;
    for (size_t i = 0; i < len;) {
        if (max_chars > 0 && shown == max_chars) {
            pybox_buf_adds(out, "…");
            return;
        }
        size_t n;
        long cp = utf8_at(u + i, len - i, &n);
        if (cp == '<')
            pybox_buf_adds(out, "&lt;");
        else if (cp == '>')
            pybox_buf_adds(out, "&gt;");
        else if (cp == '&')
            pybox_buf_adds(out, "&amp;");
        else if (cp == '"')
            pybox_buf_adds(out, "&quot;");
        else if (cp == '\'')
            pybox_buf_adds(out, "&#39;");
        else if (cp < 0 || !xml_char(cp, keep_lines))
            pybox_buf_adds(out, "\xef\xbf\xbd");
        else
            pybox_buf_add(out, s + i, n);
        i += n;
        shown++;
    }
}

/* ---- reading the receipt ---- */

static const cJSON *at(const cJSON *j, const char *a, const char *b, const char *c)
{
    j = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b != NULL)
        j = cJSON_GetObjectItemCaseSensitive(j, b);
    if (c != NULL)
        j = cJSON_GetObjectItemCaseSensitive(j, c);
    return j;
}

static const char *str_or(const cJSON *v, const char *dflt)
{
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* A number that is there, finite and not negative. */
static bool num(const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return false;
    *out = v->valuedouble;
    return true;
}

/* An optional limit: absent or null is "none"; anything else must be a number. */
static int limit_of(const cJSON *limits, const char *key, double *out, bool *have, pybox_error_t *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(limits, key);
    *have = false;
    if (v == NULL || cJSON_IsNull(v))
        return 0;
    if (!num(v, out))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "asked.limits.%s is not a number of at least 0", key);
    *have = true;
    return 0;
}

#define NCOLS 4
static const char *const col_names[NCOLS] = {"t_ms", "memory_bytes", "pids", "cpu_ns"};

typedef struct {
    double v[NCOLS];
    bool have[NCOLS];
} row_t;

typedef struct {
    row_t *rows;
    size_t n;
    double interval_ms;
    bool have_limit[3];
    double limit[3]; /* memory bytes, pids, cpus */
    double timeout_s, box_timer_s;
    bool deadline_fired, timer_fired;
    const cJSON *final;
    bool final_taken;
    double final_t; /* where the final reading is drawn */
    double t_max;   /* the time axis' end */
} chart_t;

static int read_samples(const cJSON *samples, chart_t *c, pybox_error_t *err)
{
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(samples, "columns");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(samples, "rows");
    if (!cJSON_IsArray(cols) || !cJSON_IsArray(rows))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seen.kernel.samples has no \"columns\" and \"rows\" arrays");
    int ncols = cJSON_GetArraySize(cols), where[NCOLS];
    for (int k = 0; k < NCOLS; k++) {
        where[k] = -1;
        for (int i = 0; i < ncols; i++)
            if (strcmp(str_or(cJSON_GetArrayItem(cols, i), ""), col_names[k]) == 0)
                where[k] = i;
    }
    if (where[0] < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seen.kernel.samples.columns has no \"t_ms\"");
    int nrows = cJSON_GetArraySize(rows);
    if (nrows > PYBOX_WATCH_SAMPLES_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "seen.kernel.samples holds %d samples: a receipt holds at most %d", nrows,
                               PYBOX_WATCH_SAMPLES_MAX);
    c->rows = calloc((size_t)nrows + 1, sizeof *c->rows);
    if (c->rows == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "out of memory for %d samples", nrows);
    const cJSON *row;
    cJSON_ArrayForEach (row, rows) {
        size_t r = c->n + 1; /* rows are named from 1 */
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != ncols)
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seen.kernel.samples row %zu: %d values, not %d", r,
                                   cJSON_IsArray(row) ? cJSON_GetArraySize(row) : 0, ncols);
        row_t *x = &c->rows[c->n];
        for (int k = 0; k < NCOLS; k++) {
            if (where[k] < 0)
                continue;
            const cJSON *v = cJSON_GetArrayItem(row, where[k]);
            if (cJSON_IsNull(v) && k > 0)
                continue; /* unknown: a gap in its line */
            if (!num(v, &x->v[k]) || x->v[k] > 1e18)
                return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                                       "seen.kernel.samples row %zu: %s is not a number from 0 to 1e18", r,
                                       col_names[k]);
            x->have[k] = true;
        }
        if (c->n > 0 && x->v[0] < c->rows[c->n - 1].v[0])
            return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "seen.kernel.samples row %zu: out of time order", r);
        c->n++;
    }
    double iv;
    c->interval_ms = num(cJSON_GetObjectItemCaseSensitive(samples, "interval_ms"), &iv) ? iv : 0;
    return 0;
}

static int read_receipt(const cJSON *j, chart_t *c, pybox_error_t *err)
{
    if (!cJSON_IsObject(j))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "not a receipt: not a JSON object");
    const char *schema = str_or(cJSON_GetObjectItemCaseSensitive(j, "schema"), "");
    if (strncmp(schema, "pybox.receipt/", 14) != 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "not a PyBox receipt (its \"schema\" is not \"pybox.receipt/N\"; pybox exec --json "
                               "prints one)");
    const cJSON *kernel = at(j, "seen", "kernel", NULL);
    if (!cJSON_IsObject(kernel))
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "the receipt has no kernel readings (seen.kernel): no box ran, so there is nothing "
                               "to draw");
    const cJSON *limits = at(j, "asked", "limits", NULL);
    static const char *const lim_keys[3] = {"memory_bytes", "pids", "cpus"};
    for (int k = 0; k < 3; k++)
        if (limit_of(limits, lim_keys[k], &c->limit[k], &c->have_limit[k], err) < 0)
            return -1;
    bool have;
    if (limit_of(limits, "timeout_s", &c->timeout_s, &have, err) < 0)
        return -1;
    if (!have)
        c->timeout_s = 0;
    if (limit_of(limits, "box_timer_s", &c->box_timer_s, &have, err) < 0)
        return -1;
    if (!have)
        c->box_timer_s = 0;
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(kernel, "samples");
    if (samples != NULL && read_samples(samples, c, err) < 0)
        return -1;
    const char *clock = str_or(at(j, "seen", "clock", NULL), "none");
    c->deadline_fired = c->timeout_s > 0 && (strcmp(clock, "host_deadline") == 0 ||
                                             cJSON_IsTrue(at(j, "seen", "host_deadline_passed", NULL)));
    c->timer_fired = c->box_timer_s > 0 &&
                     (strcmp(clock, "box_timer") == 0 || cJSON_IsTrue(at(j, "seen", "init_record", "box_timer_fired")));
    c->final = cJSON_GetObjectItemCaseSensitive(kernel, "final");
    if (!cJSON_IsObject(c->final))
        c->final = NULL;
    c->final_taken = c->final != NULL && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->final, "taken"));
    /* The final reading is taken when the program and all it left have ended: the end of
     * the run phase, counted like the samples from the box running. */
    double run_ms;
    c->final_t = c->n > 0 ? c->rows[c->n - 1].v[0] : 0;
    if (num(at(j, "seen", "timings_ms", "run"), &run_ms) && run_ms > c->final_t && run_ms < 1e10)
        c->final_t = run_ms;
    c->t_max = c->final_t;
    if (c->deadline_fired && c->timeout_s * 1000 > c->t_max)
        c->t_max = c->timeout_s * 1000;
    if (c->timer_fired && c->box_timer_s * 1000 > c->t_max)
        c->t_max = c->box_timer_s * 1000;
    return 0;
}

/* ---- drawing ---- */

#define W 820
#define ML 78  /* left of the plots: the value axis */
#define PW 540 /* plot width; the right margin holds the limits' labels */
#define PH 120 /* panel height */
#define TOP 112
#define STEP 162 /* from one panel's top to the next */
#define H (TOP + 2 * STEP + PH + 72)

/* Printed numbers: "-0.0" never appears. */
static double pos(double v)
{
    return v + 0.0;
}

/* The smallest of 1, 2, 2.5, 5 times a power of ten that is at least v. */
static double nice(double v)
{
    if (!(v > 0))
        return 1;
    double p = pow(10, floor(log10(v)));
    static const double m[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (m[i] * p >= v * (1 - 1e-12))
            return m[i] * p;
    return 10 * p;
}

/* A value with the decimals its step needs (0.25 two, 0.5 one, 20 none). */
static void num_text(char out[32], double v, double step)
{
    int d = 0;
    while (d < 6 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6)
        d++;
    snprintf(out, 32, "%.*f", d, pos(v));
}

/* A figure for a label: at most one decimal, none when whole. */
static void fig(char out[32], double v)
{
    if (fabs(v - round(v)) < 0.05)
        snprintf(out, 32, "%.0f", pos(round(v)));
    else
        snprintf(out, 32, "%.1f", pos(v));
}

typedef struct {
    pybox_buf_t *o;
    const chart_t *c;
    double t_axis; /* ms at the right edge */
} pen_t;

static double xt(const pen_t *p, double t_ms)
{
    return ML + PW * (t_ms / p->t_axis);
}

static void text(pybox_buf_t *o, double x, double y, const char *anchor, const char *extra, const char *s)
{
    pybox_buf_addf(o, "<text x=\"%.1f\" y=\"%.1f\"%s%s%s%s>", pos(x), pos(y), anchor ? " text-anchor=\"" : "",
                   anchor ? anchor : "", anchor ? "\"" : "", extra ? extra : "");
    pybox_xml_text(o, s, 120, 0);
    pybox_buf_adds(o, "</text>\n");
}

/* One panel: value axis, grid, the series (a line broken where a value is unknown), the
 * limit, the final reading's mark and its values in the panel's title row. */
typedef struct {
    const char *title, *unit, *limit_word, *stroke;
    int limit_index; /* into chart_t.limit, -1: none */
    double scale;    /* a value divided by this is in the panel's unit */
    bool rate;       /* draw the rate of change per ms (CPU ns to CPUs) */
    bool steps;      /* a count: flat between samples */
    double final_mark;
    bool have_final_mark;
    const char *final_text;
} panel_t;

static double series_value(const chart_t *c, size_t i, int col, bool rate, bool *ok)
{
    const row_t *x = &c->rows[i];
    *ok = false;
    if (!rate) {
        *ok = x->have[col];
        return x->v[col];
    }
    if (i == 0 || !x->have[col] || !c->rows[i - 1].have[col])
        return 0;
    double dt = x->v[0] - c->rows[i - 1].v[0], dv = x->v[col] - c->rows[i - 1].v[col];
    if (!(dt > 0) || dv < 0)
        return 0;
    *ok = true;
    return dv / dt;
}

static void panel(const pen_t *p, int k, int col, const panel_t *pn)
{
    pybox_buf_t *o = p->o;
    const chart_t *c = p->c;
    double top = TOP + k * STEP, bottom = top + PH;
    /* The scale: room above the highest value, the limit and the final mark. */
    double most = 0;
    for (size_t i = 0; i < c->n; i++) {
        bool ok;
        double v = series_value(c, i, col, pn->rate, &ok) / pn->scale;
        if (ok && v > most)
            most = v;
    }
    bool have_limit = pn->limit_index >= 0 && c->have_limit[pn->limit_index];
    double lim = have_limit ? c->limit[pn->limit_index] : 0;
    if (lim > most)
        most = lim;
    if (pn->have_final_mark && pn->final_mark > most)
        most = pn->final_mark;
    double step = nice(most * 1.1 / 4), ymax = step * ceil(most * 1.1 / step - 1e-9);
    if (ymax < step)
        ymax = step;
    pybox_buf_addf(o, "<g class=\"panel\" aria-label=\"%s\">\n", pn->title);
    text(o, ML, top - 10, NULL, " font-weight=\"bold\"", pn->title);
    if (pn->final_text != NULL)
        text(o, ML + PW, top - 10, "end", NULL, pn->final_text);
    pybox_buf_addf(o, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#f7f7f7\" stroke=\"#000\"/>\n", ML,
                   pos(top), PW, PH);
    for (double v = 0; v <= ymax * (1 + 1e-9); v += step) {
        double y = bottom - PH * v / ymax;
        char t[32];
        num_text(t, v, step);
        if (v > 0)
            pybox_buf_addf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, pos(y),
                           ML + PW, pos(y));
        text(o, ML - 6, y + 4, "end", NULL, t);
    }
    /* the unit, along the value axis */
    pybox_buf_addf(o, "<text transform=\"translate(%d %.1f) rotate(-90)\" text-anchor=\"middle\">", 16,
                   pos(top + PH / 2.0));
    pybox_xml_text(o, pn->unit, 0, 0);
    pybox_buf_adds(o, "</text>\n");
    /* the series */
    bool open = false, any = false;
    double last_y = 0;
    for (size_t i = 0; i < c->n; i++) {
        bool ok;
        double v = series_value(c, i, col, pn->rate, &ok) / pn->scale;
        if (!ok) {
            if (open)
                pybox_buf_adds(o, "\"/>\n");
            open = false;
            continue;
        }
        any = true;
        double y = bottom - PH * (v > ymax ? ymax : v) / ymax;
        double x1 = xt(p, c->rows[i].v[0]);
        if (pn->rate) {
            /* the rate holds over the interval that ends at this sample */
            double x0 = xt(p, c->rows[i - 1].v[0]);
            if (!open)
                pybox_buf_addf(o, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"M%.1f %.1f", pn->stroke,
                               pos(x0), pos(y));
            else
                pybox_buf_addf(o, " L%.1f %.1f", pos(x0), pos(y));
            pybox_buf_addf(o, " L%.1f %.1f", pos(x1), pos(y));
        } else if (!open) {
            pybox_buf_addf(o, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"M%.1f %.1f", pn->stroke,
                           pos(x1), pos(y));
        } else if (pn->steps) {
            pybox_buf_addf(o, " L%.1f %.1f L%.1f %.1f", pos(x1), pos(last_y), pos(x1), pos(y));
        } else {
            pybox_buf_addf(o, " L%.1f %.1f", pos(x1), pos(y));
        }
        open = true;
        last_y = y;
    }
    if (open)
        pybox_buf_adds(o, "\"/>\n");
    if (!any)
        text(o, ML + PW / 2.0, top + PH / 2.0 + 4, "middle", " font-style=\"italic\"", "no samples");
    /* the limit: dashed, its value beside it */
    char t[96], f[32];
    if (have_limit) {
        double y = bottom - PH * lim / ymax;
        pybox_buf_addf(o,
                       "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#b00020\" stroke-width=\"1.5\" "
                       "stroke-dasharray=\"6 4\"/>\n",
                       ML, pos(y), ML + PW, pos(y));
        fig(f, lim);
        if (lim > 0 && lim < 10 && fabs(lim - round(lim)) >= 0.05)
            snprintf(f, sizeof f, "%g", lim);
        snprintf(t, sizeof t, "%s %s%s", pn->limit_word, f, pn->limit_index == 0 ? " MiB" : pn->rate ? " CPU" : "");
        text(o, ML + PW + 6, y + 4, NULL, NULL, t);
    } else if (pn->limit_index >= 0) {
        text(o, ML + PW + 6, top + 12, NULL, NULL, "no limit");
    }
    /* the final reading's peak: a diamond where it was taken */
    if (pn->have_final_mark) {
        double x = xt(p, c->final_t), y = bottom - PH * pn->final_mark / ymax;
        pybox_buf_addf(o,
                       "<path d=\"M%.1f %.1f l6 6 l-6 6 l-6 -6 z\" fill=\"#fff\" stroke=\"#000\" "
                       "stroke-width=\"1.5\"><title>final reading</title></path>\n",
                       pos(x), pos(y - 6));
    }
    pybox_buf_adds(o, "</g>\n");
}

/* A moment across all three panels, labelled above them in a row of its own. */
static void moment(const pen_t *p, double t_ms, int row, const char *dash, const char *label)
{
    double x = xt(p, t_ms), y0 = TOP - 30 - 13 * row;
    /* inside each panel, never across a title */
    for (int k = 0; k < 3; k++)
        pybox_buf_addf(p->o,
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" stroke-width=\"1.5\" "
                       "stroke-dasharray=\"%s\"/>\n",
                       pos(x), pos(TOP + k * STEP), pos(x), TOP + k * STEP + PH, dash);
    /* a tick from the label down to the first panel's title row */
    pybox_buf_addf(p->o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" stroke-width=\"1.5\"/>\n",
                   pos(x), pos(y0 + 3), pos(x), TOP - 23);
    text(p->o, x > ML + PW * 0.6 ? x - 4 : x + 4, y0, x > ML + PW * 0.6 ? "end" : NULL, NULL, label);
}

static bool final_num(const chart_t *c, const char *key, double *v)
{
    return c->final != NULL && num(cJSON_GetObjectItemCaseSensitive(c->final, key), v);
}

static void plural(pybox_buf_t *b, double n, const char *one, const char *many)
{
    pybox_buf_addf(b, "%.0f %s", pos(n), n == 1 ? one : many);
}

static void draw(const cJSON *j, const chart_t *c, pybox_buf_t *o)
{
    pen_t p = {.o = o, .c = c};
    double tstep = nice((c->t_max > 100 ? c->t_max : 100) / 6);
    p.t_axis = tstep * ceil((c->t_max > 100 ? c->t_max : 100) / tstep - 1e-9);

    const char *run_id = str_or(cJSON_GetObjectItemCaseSensitive(j, "run_id"), "unknown");
    const char *image = str_or(at(j, "asked", "image", "name"), "unknown");
    const char *status = str_or(cJSON_GetObjectItemCaseSensitive(j, "status"), "unknown");
    const char *backend = str_or(at(j, "seen", "backend", NULL), NULL);
    double code;
    bool have_code = num(cJSON_GetObjectItemCaseSensitive(j, "exit_code"), &code);

    pybox_buf_addf(o,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "font-family=\"DejaVu Sans, Liberation Sans, Arial, sans-serif\" font-size=\"11\" role=\"img\" "
                   "aria-labelledby=\"pybox-chart-title\">\n",
                   W, H, W, H);
    pybox_buf_adds(o, "<title id=\"pybox-chart-title\">Kernel samples of PyBox run ");
    pybox_xml_text(o, run_id, 64, 0);
    pybox_buf_adds(o, ": memory, processes and CPU rate over time, with their limits</title>\n");
    pybox_buf_addf(o, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H);

    /* Who ran, in what, how it ended: the receipt's own words, escaped. */
    pybox_buf_t line;
    pybox_buf_init(&line, 4096);
    pybox_buf_addf(&line, "run %.32s · image %.64s", run_id, image);
    if (backend != NULL)
        pybox_buf_addf(&line, " · %.16s", backend);
    pybox_buf_addf(&line, " · %.40s", status);
    if (have_code)
        pybox_buf_addf(&line, " · exit %.0f", code);
    text(o, ML, 20, NULL, " font-size=\"13\" font-weight=\"bold\"", pybox_buf_ok(&line) ? line.data : "");
    pybox_buf_free(&line);
    pybox_buf_init(&line, 4096);
    const cJSON *kernel = at(j, "seen", "kernel", NULL);
    if (c->n > 0) {
        char iv[32];
        fig(iv, c->interval_ms);
        pybox_buf_addf(&line, "%zu kernel samples (every %s ms) from the box's cgroup", c->n, iv);
    } else {
        const char *why = str_or(cJSON_GetObjectItemCaseSensitive(kernel, "not_read"), NULL);
        pybox_buf_addf(&line, "no samples: %.160s", why ? why : "the receipt holds none");
    }
    pybox_buf_adds(&line, c->final_taken     ? "; final reading taken after the program ended"
                          : c->final != NULL ? "; no final reading: the last sample is shown as one"
                                             : "");
    text(o, ML, 38, NULL, NULL, pybox_buf_ok(&line) ? line.data : "");
    pybox_buf_free(&line);

    char label[96], f[32];
    /* Memory */
    pybox_buf_t ft;
    pybox_buf_init(&ft, 4096);
    double v, w;
    const char *head = c->final_taken ? "final: " : "last: ";
    pybox_buf_adds(&ft, head);
    bool peak = final_num(c, "memory_peak_bytes", &v);
    if (peak) {
        fig(f, v / 1048576);
        pybox_buf_addf(&ft, "peak %s MiB", f);
    } else {
        pybox_buf_adds(&ft, "peak unknown");
    }
    if (final_num(c, "oom_kills", &w)) {
        pybox_buf_adds(&ft, " · ");
        plural(&ft, w, "OOM kill", "OOM kills");
    }
    panel_t mem = {.title = "Memory in use (MiB)",
                   .unit = "MiB",
                   .limit_word = "limit",
                   .stroke = "#1f4e79",
                   .limit_index = 0,
                   .scale = 1048576,
                   .final_mark = peak ? v / 1048576 : 0,
                   .have_final_mark = peak && c->final != NULL,
                   .final_text = c->final != NULL && pybox_buf_ok(&ft) ? ft.data : NULL};
    chart_t cm = *c;
    cm.limit[0] = c->limit[0] / 1048576;
    p.c = &cm;
    panel(&p, 0, 1, &mem);
    p.c = c;
    pybox_buf_free(&ft);

    /* Processes */
    pybox_buf_init(&ft, 4096);
    pybox_buf_adds(&ft, head);
    peak = final_num(c, "pids_peak", &v);
    if (peak)
        pybox_buf_addf(&ft, "peak %.0f%s", pos(v),
                       strcmp(str_or(cJSON_GetObjectItemCaseSensitive(c->final, "pids_peak_source"), ""), "samples") ==
                               0
                           ? " (sampled)"
                           : "");
    else
        pybox_buf_adds(&ft, "peak unknown");
    if (final_num(c, "pids_refused", &w))
        pybox_buf_addf(&ft, " · %.0f refused", pos(w));
    panel_t pids = {.title = "Processes",
                    .unit = "processes",
                    .limit_word = "limit",
                    .stroke = "#2e6b30",
                    .limit_index = 1,
                    .scale = 1,
                    .steps = true,
                    .final_mark = v,
                    .have_final_mark = peak && c->final != NULL,
                    .final_text = c->final != NULL && pybox_buf_ok(&ft) ? ft.data : NULL};
    panel(&p, 1, 2, &pids);
    pybox_buf_free(&ft);

    /* CPU */
    pybox_buf_init(&ft, 4096);
    pybox_buf_adds(&ft, head);
    if (final_num(c, "cpu_ns", &v))
        pybox_buf_addf(&ft, "%.2f s of CPU", pos(v / 1e9));
    else
        pybox_buf_adds(&ft, "CPU time unknown");
    if (final_num(c, "cpu_throttled_periods", &v) && final_num(c, "cpu_periods", &w))
        pybox_buf_addf(&ft, " · throttled in %.0f of %.0f periods", pos(v), pos(w));
    panel_t cpu = {.title = "CPU rate (CPUs)",
                   .unit = "CPUs",
                   .limit_word = "quota",
                   .stroke = "#7a4a00",
                   .limit_index = 2,
                   .scale = 1e6, /* ns per ms: CPUs */
                   .rate = true,
                   .final_text = c->final != NULL && pybox_buf_ok(&ft) ? ft.data : NULL};
    panel(&p, 2, 3, &cpu);
    pybox_buf_free(&ft);

    /* The clocks that fired and the final reading, across the panels (over them, so drawn after). */
    int row = 0;
    if (c->timer_fired) {
        fig(f, c->box_timer_s);
        if (fabs(c->box_timer_s - round(c->box_timer_s)) >= 0.05 || c->box_timer_s < 10)
            snprintf(f, sizeof f, "%g", c->box_timer_s);
        snprintf(label, sizeof label, "box timer %s s", f);
        moment(&p, c->box_timer_s * 1000, row++, "12 4", label);
    }
    if (c->deadline_fired) {
        snprintf(f, sizeof f, "%g", c->timeout_s);
        snprintf(label, sizeof label, "PyBox deadline %s s", f);
        moment(&p, c->timeout_s * 1000, row++, "8 3 2 3", label);
    }
    if (c->final != NULL)
        moment(&p, c->final_t, row++, "2 3", c->final_taken ? "final reading" : "last sample (no final reading)");

    /* The shared time axis, in seconds. */
    double bottom = TOP + 2 * STEP + PH;
    for (double t = 0; t <= p.t_axis * (1 + 1e-9); t += tstep) {
        double x = xt(&p, t);
        char tt[32];
        num_text(tt, t / 1000, tstep / 1000);
        pybox_buf_addf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", pos(x),
                       pos(bottom), pos(x), pos(bottom + 4));
        text(o, x, bottom + 16, "middle", NULL, tt);
    }
    text(o, ML + PW / 2.0, bottom + 32, "middle", NULL,
         "seconds since the watcher was armed (the box running; the program is fed from then on)");
    /* What each line style means, so that no colour is needed to read the chart. */
    static const struct {
        const char *dash, *label;
    } keys[] = {{"", "kernel sample"},
                {"6 4", "limit or quota"},
                {"8 3 2 3", "PyBox deadline"},
                {"12 4", "box timer"},
                {"2 3", "final reading"}};
    double lx = 20, ly = bottom + 56;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        pybox_buf_addf(
            o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"%s\"%s%s%s/>\n",
            pos(lx), pos(ly - 4), pos(lx + 22), pos(ly - 4), keys[i].dash[0] ? "1.5" : "2",
            keys[i].dash[0] ? " stroke-dasharray=\"" : "", keys[i].dash, keys[i].dash[0] ? "\"" : "");
        text(o, lx + 27, ly, NULL, NULL, keys[i].label);
        lx += 27 + 6.2 * (double)strlen(keys[i].label) + 14;
    }
    pybox_buf_addf(o,
                   "<path d=\"M%.1f %.1f l5 5 l-5 5 l-5 -5 z\" fill=\"#fff\" stroke=\"#000\" stroke-width=\"1.5\"/>\n",
                   pos(lx + 5), pos(ly - 9));
    text(o, lx + 14, ly, NULL, NULL, "peak, final reading");
    pybox_buf_adds(o, "</svg>\n");
}

int pybox_chart_svg(const cJSON *receipt, pybox_buf_t *out, pybox_error_t *err)
{
    chart_t c = {0};
    int rc = read_receipt(receipt, &c, err);
    if (rc == 0) {
        draw(receipt, &c, out);
        if (!pybox_buf_ok(out))
            rc = pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "the chart did not fit its buffer (%zu bytes at most)",
                                 out->max);
    }
    free(c.rows);
    if (rc < 0)
        pybox_buf_fail(out);
    return rc;
}
