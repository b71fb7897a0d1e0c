/* SPDX-License-Identifier: MIT */
/* Cleanup of this installation's leftovers (see cleanup.h and docs/cleanup.md). */
#include "leftovers.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "journal.h"
#include "util.h"

static void add(pybox_leftovers_report_t *rep, const char *what, const char *name, const char *run, bool removed,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add(pybox_leftovers_report_t *rep, const char *what, const char *name, const char *run, bool removed,
                const char *fmt, ...)
{
    if (pybox_grow(&rep->entries, &rep->cap, rep->n, sizeof *rep->entries, 16) < 0)
        return;
    pybox_leftovers_entry_t *e = &rep->entries[rep->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->what, sizeof e->what, "%s", what);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->run_id, sizeof e->run_id, "%s", run ? run : "");
    e->removed = removed;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof e->reason, fmt, ap);
    va_end(ap);
    if (removed)
        rep->removed++;
    else
        rep->kept++;
}

static void iso(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *label(const pybox_leftover_t *l)
{
    return l->name[0] ? l->name : l->id;
}

/* A run that died while writing its output folder: the hidden folder its note names goes,
 * then that part of the note. Followed before the note itself goes, wherever that is. */
static void sweep_output(const pybox_state_t *st, const char *run_id, bool dry_run, pybox_leftovers_report_t *rep)
{
    char outp[PATH_MAX];
    if (pybox_journal_output_of(st, run_id, outp, sizeof outp) != 1)
        return;
    if (dry_run) {
        add(rep, "output", outp, run_id, true, "a hidden output folder of a run that died writing it");
        return;
    }
    if (pybox_output_tmp_remove(outp, run_id) == 1)
        add(rep, "output", outp, run_id, true, "a hidden output folder of a run that died writing it");
    pybox_journal_output_end(st, run_id);
}

/* An MCP server that died mid-call: the call's scratch folder its note names goes (its
 * note is not held, so nothing can be using it); the note goes once expired. */
static void sweep_scratch(const pybox_state_t *st, const char *run_id, bool dry_run, pybox_leftovers_report_t *rep)
{
    char path[PATH_MAX];
    if (pybox_journal_scratch_remove(st, run_id, dry_run, path, sizeof path) == 1)
        add(rep, "scratch", path, run_id, true, "the scratch folder of an MCP call whose server died");
}

/* One leftover (a box, a volume, ...): decide, and remove when it is due. */
static void settle(const pybox_state_t *st, pybox_backend_t *be, const pybox_leftover_t *l,
                   pybox_leftovers_report_t *rep, bool *removed_out)
{
    const char *what = l->kind;
    char when[32];
    *removed_out = false;
    if (l->running) {
        add(rep, what, label(l), l->run_id, false, "%s: a running box is never removed", l->state);
        return;
    }
    if (l->expires < 0) {
        add(rep, what, label(l), l->run_id, false, "no valid %s label: not removed", "pybox.expires");
        return;
    }
    iso(l->expires, when, sizeof when);
    if (l->expires > rep->at) {
        add(rep, what, label(l), l->run_id, false, "not expired (expires %s)", when);
        return;
    }
    int fd = -1;
    int claim = 2;
    if (l->run_id[0]) {
        pybox_error_t cerr = {0};
        claim = pybox_journal_claim(st, l->run_id, &fd, &cerr);
        if (claim < 0) {
            add(rep, what, label(l), l->run_id, false, "its run note could not be checked: %s", cerr.msg);
            return;
        }
        if (claim == 0) {
            add(rep, what, label(l), l->run_id, false, "its run is still live");
            return;
        }
    }
    if (rep->dry_run) {
        add(rep, what, label(l), l->run_id, true, "expired %s, %s", when, l->state);
        if (fd >= 0)
            close(fd);
        return;
    }
    bool gone = false;
    pybox_error_t rerr = {0};
    if (be->ops->remove_leftover(be, l, &gone, &rerr) < 0 || !gone) {
        add(rep, what, label(l), l->run_id, false, "%s did not remove it%s%s", be->ops->holder, rerr.msg[0] ? ": " : "",
            rerr.msg);
        if (fd >= 0)
            close(fd);
        return;
    }
    add(rep, what, label(l), l->run_id, true, "expired %s, %s", when, l->state);
    *removed_out = true;
    if (claim == 1) {
        sweep_output(st, l->run_id, false, rep);
        pybox_journal_remove_claimed(st, l->run_id, fd);
        add(rep, "note", l->run_id, l->run_id, true, "its box is gone");
    }
}

/* The free leases of the range: expired, held by no live run (uid.h). Of every
 * installation, since a free uid is free for all; after this installation's own leftovers,
 * whose leases expire with them. */
static void sweep_leases(const pybox_uid_range_t *uids, pybox_leftovers_report_t *rep)
{
    pybox_uid_range_t machine;
    char dir[PATH_MAX];
    pybox_error_t err = {0};
    if (uids == NULL) {
        if (pybox_uid_machine(&machine, dir, sizeof dir, &err) < 0) {
            add(rep, "leases", "", NULL, false, "%s", err.msg);
            return;
        }
        uids = &machine;
    }
    int n = 0;
    if (pybox_uid_lease_sweep_in(uids, rep->dry_run, &n, &err) < 0)
        add(rep, "leases", uids->dir, NULL, false, "%s", err.msg);
    rep->leases_removed = n;
}

int pybox_leftovers_clean(const pybox_state_t *st, pybox_backend_t *be, bool dry_run, bool housekeeping,
                          pybox_leftovers_report_t *rep, pybox_error_t *err)
{
    return pybox_leftovers_clean_in(st, be, NULL, dry_run, housekeeping, rep, err);
}

int pybox_leftovers_clean_in(const pybox_state_t *st, pybox_backend_t *be, const pybox_uid_range_t *uids, bool dry_run,
                             bool housekeeping, pybox_leftovers_report_t *rep, pybox_error_t *err)
{
    memset(rep, 0, sizeof *rep);
    rep->dry_run = dry_run;
    rep->at = pybox_wall_s();
    pybox_leftover_t *left = NULL;
    size_t nleft = 0;
    if (be->ops->list_leftovers(be, st->install_id, &left, &nleft, err) < 0)
        return -1;
    bool *gone = calloc(nleft + 1, sizeof *gone);
    if (gone == NULL) {
        free(left);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "cleanup");
    }
    /* In the backend's order: a box before its volumes (a volume is in use until its box
     * is gone). */
    int last = 0;
    for (size_t i = 0; i < nleft; i++)
        if (left[i].order > last)
            last = left[i].order < 8 ? left[i].order : 8;
    for (int pass = 0; pass <= last; pass++)
        for (size_t i = 0; i < nleft; i++)
            if ((left[i].order == pass || (pass == last && left[i].order > last)) &&
                !(housekeeping && left[i].asked_only))
                settle(st, be, &left[i], rep, &gone[i]);

    /* Notes whose run is over and whose boxes and volumes are all gone. */
    pybox_journal_info_t *notes = NULL;
    size_t nnotes = 0;
    int rc = pybox_journal_list(st, &notes, &nnotes, err);
    for (size_t k = 0; rc == 0 && k < nnotes; k++) {
        const pybox_journal_info_t *ni = &notes[k];
        if (ni->live)
            continue;
        /* The note is claimed before anything it names is touched: a run the listing took
         * for dead but which holds its note now (or which removed it since) keeps its
         * output and scratch folders. The claim is held while they go. */
        int fd = -1;
        pybox_error_t cerr = {0};
        int claim = pybox_journal_claim(st, ni->run_id, &fd, &cerr);
        if (claim < 0) /* a note that cannot be opened or locked (a link, say): said, kept */
            add(rep, "note", ni->run_id, ni->run_id, false,
                "its run note could not be claimed: %s; nothing it names was removed", cerr.msg);
        if (claim != 1)
            continue;
        sweep_output(st, ni->run_id, dry_run, rep);
        sweep_scratch(st, ni->run_id, dry_run, rep);
        bool has_leftover = false;
        for (size_t i = 0; i < nleft; i++)
            if (!gone[i] && strcmp(left[i].run_id, ni->run_id) == 0)
                has_leftover = true;
        /* reported with its box; or a run that just ended, whose note goes once expired */
        if (has_leftover || (!ni->torn && ni->expires > rep->at)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        const char *why = ni->torn ? "unreadable note of a run that is over"
                                   : "expired note of a run that is over, "
                                     "with no box left";
        if (dry_run)
            close(fd);
        else
            pybox_journal_remove_claimed(st, ni->run_id, fd);
        add(rep, "note", ni->run_id, ni->run_id, true, "%s", why);
    }
    free(notes);
    free(gone);
    free(left);
    sweep_leases(uids, rep);
    return rc;
}

void pybox_leftovers_report_free(pybox_leftovers_report_t *rep)
{
    free(rep->entries);
    memset(rep, 0, sizeof *rep);
}

cJSON *pybox_leftovers_report_json(const pybox_leftovers_report_t *rep)
{
    cJSON *r = cJSON_CreateObject();
    char when[32];
    iso(rep->at, when, sizeof when);
    cJSON_AddStringToObject(r, "at", when);
    cJSON_AddBoolToObject(r, "dry_run", rep->dry_run);
    cJSON_AddNumberToObject(r, "removed", rep->removed);
    cJSON_AddNumberToObject(r, "kept", rep->kept);
    cJSON_AddNumberToObject(r, "leases_removed", rep->leases_removed);
    cJSON *items = cJSON_AddArrayToObject(r, "items");
    for (size_t i = 0; i < rep->n; i++) {
        const pybox_leftovers_entry_t *e = &rep->entries[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "what", e->what);
        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddStringToObject(o, "run_id", e->run_id);
        cJSON_AddStringToObject(o, "action", e->removed ? (rep->dry_run ? "would remove" : "removed") : "kept");
        cJSON_AddStringToObject(o, "reason", e->reason);
        cJSON_AddItemToArray(items, o);
    }
    return r;
}

int pybox_leftovers_report_text(const pybox_leftovers_report_t *rep, pybox_buf_t *out)
{
    char when[32];
    iso(rep->at, when, sizeof when);
    pybox_buf_addf(out, "PyBox cleanup%s at %s: %d %s, %d kept\n", rep->dry_run ? " (dry run)" : "", when, rep->removed,
                   rep->dry_run ? "to remove" : "removed", rep->kept);
    for (size_t i = 0; i < rep->n; i++) {
        const pybox_leftovers_entry_t *e = &rep->entries[i];
        pybox_buf_addf(out, "  %-12s %-6s %s: %s\n", e->removed ? (rep->dry_run ? "would remove" : "removed") : "kept",
                       e->what, e->name, e->reason);
    }
    if (rep->leases_removed > 0)
        pybox_buf_addf(out, "  %-12s %d expired uid lease%s that no run held (any installation's: free for all)\n",
                       rep->dry_run ? "would remove" : "removed", rep->leases_removed,
                       rep->leases_removed == 1 ? "" : "s");
    return pybox_buf_ok(out) && out->data ? 0 : -1;
}
