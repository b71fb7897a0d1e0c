/* SPDX-License-Identifier: MIT */
/* The receipt's one definition (see receipt_schema.h). */
#include "receipt_schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "run.h"

/* Types, as bits: a member may allow several (a reading that is a number or null). */
enum { T_STR = 1, T_INT = 2, T_NUM = 4, T_BOOL = 8, T_NULL = 16, T_OBJ = 32, T_ARR = 64 };

typedef struct node node_t;
struct node {
    const char *name;         /* NULL ends a list */
    unsigned type;            /* T_* bits */
    bool optional;            /* not always there */
    const node_t *members;    /* objects: their members (NULL-named end) */
    const node_t *items;      /* arrays: what each item is */
    const char *const *words; /* strings: the only words allowed (NULL-ended), or NULL */
    const char *constant;     /* strings: the one value */
    const char *description;
};

/* A member, every field in the struct's order; the shorthands below name the common kinds. */
#define NODE(n, t, opt, m, it, w, d)                                                                                   \
    {                                                                                                                  \
        n, t, opt, m, it, w, NULL, d                                                                                   \
    }
#define END NODE(NULL, 0, false, NULL, NULL, NULL, NULL)
#define M(n, t, d) NODE(n, t, false, NULL, NULL, NULL, d)
#define OPT(n, t, d) NODE(n, t, true, NULL, NULL, NULL, d)
#define OBJ(n, t, m, d) NODE(n, t, false, m, NULL, NULL, d)
#define OPT_OBJ(n, t, m, d) NODE(n, t, true, m, NULL, NULL, d)
#define ARR(n, it, d) NODE(n, T_ARR, false, NULL, it, NULL, d)
#define OPT_ARR(n, it, d) NODE(n, T_ARR, true, NULL, it, NULL, d)
#define WORDS(n, w, d) NODE(n, T_STR, false, NULL, NULL, w, d)
#define OPT_WORDS(n, w, d) NODE(n, T_STR, true, NULL, NULL, w, d)

static const char *const status_words[] = {"NOT_RUN",
                                           "TARGET_EXIT_OBSERVED",
                                           "SUPERVISOR_KILL_OBSERVED",
                                           "BOX_TIMER_KILL_OBSERVED",
                                           "BOX_END_UNEXPLAINED",
                                           "EXTERNAL_STOP_OBSERVED",
                                           "PYBOX_ERROR",
                                           "CANCELLED",
                                           "SESSION_CALL_ENDED",
                                           "SESSION_CLOSED_OBSERVED",
                                           NULL};
static const char *const refusal_words[] = {"REFUSED", "PYBOX_ERROR", NULL};
static const char *const clock_words[] = {"none", "host_deadline", "box_timer", NULL};
static const char *const cg_words[] = {"v1", "v2", NULL};
static const char *const manager_words[] = {"systemd", "none", NULL};
static const char *const pids_source_words[] = {"kernel", "samples", NULL};
static const char *const files_words[] = {"not_asked", "delivered", "refused", "not_received", NULL};
static const char *const kind_words[] = {"file", "folder", "symbolic link", "hard link", "other", NULL};
static const char *const finding_words[] = {"none",       "kernel_not_read",      "program_killed",
                                            "oom_in_box", "other_process_killed", NULL};
static const char *const error_words[] = {"none", "refused", "system", "engine", "policy", "protocol", "state", NULL};

static const node_t string_item = M("", T_STR, NULL);
static const node_t cell_item = M("", T_INT | T_NULL, NULL);
static const node_t row_item = ARR("", &cell_item, NULL);

static const node_t program_m[] = {M("bytes", T_INT, "bytes of the program on stdin"),
                                   M("sha256", T_STR, "SHA-256 of the program"), END};
static const node_t image_m[] = {M("name", T_STR, "the image's name"),
                                 M("id", T_STR, "the image as the backend pinned it"),
                                 OPT("recipe_sha256", T_STR, "the fingerprint of what it was built from"),
                                 OPT("built_at", T_STR, "when it was built"),
                                 OPT("python3_package", T_STR, "the python3 package's version in it"),
                                 OPT("manifest", T_STR, "where its manifest is"),
                                 END};
static const node_t limits_m[] = {M("memory_bytes", T_INT | T_NULL, "memory limit (null: a test box relaxed to none)"),
                                  M("swap_bytes", T_INT, "always 0: no swap"),
                                  M("pids", T_INT | T_NULL, "process limit (null: a test box relaxed to none)"),
                                  M("cpus", T_NUM, "CPU limit"),
                                  M("timeout_s", T_NUM, "PyBox's deadline"),
                                  M("box_timer_s", T_NUM, "the box's own timer"),
                                  M("tmp_bytes", T_INT, "size of /tmp"),
                                  M("open_files", T_INT, "open files at most"),
                                  M("file_size_bytes", T_INT, "largest file the program may write"),
                                  END};
static const node_t input_m[] = {M("name", T_STR, "its name under /box/in, escaped"), M("bytes", T_INT, NULL),
                                 M("sha256", T_STR, NULL), END};
static const node_t input_item = OBJ("", T_OBJ, input_m, NULL);
static const node_t policy_m[] = {
    M("sha256", T_STR, "SHA-256 of the exact specification the backend made the box from"),
    M("seccomp_sha256", T_STR, "SHA-256 of PyBox's seccomp profile"),
    M("user", T_STR, "the program's uid:gid"),
    M("program_uid", T_INT, "the program's uid (and gid): the run's own"),
    M("user_of_its_own", T_BOOL, "false only for a relaxed test box"),
    M("init_user", T_STR, "the box's PID 1"),
    M("network", T_STR, NULL),
    M("read_only_root", T_BOOL, NULL),
    M("capabilities", T_STR, "the program's"),
    M("no_new_privileges", T_BOOL, NULL),
    OPT("seccomp", T_STR, "\"unconfined\" for a relaxed test box"),
    M("host_mounts", T_BOOL, NULL),
    OPT("RELAXED_FOR_A_TEST", T_STR, "the protections removed for a test, comma-separated"),
    END};
static const node_t asked_m[] = {M("at", T_STR, "when the run started (UTC)"),
                                 OBJ("program", T_OBJ, program_m, NULL),
                                 OBJ("image", T_OBJ, image_m, NULL),
                                 OBJ("limits", T_OBJ, limits_m, NULL),
                                 ARR("inputs", &input_item, "files put read-only in /box/in"),
                                 OPT("inputs_bytes", T_INT, "the inputs' bytes in all"),
                                 OBJ("policy", T_OBJ, policy_m, NULL),
                                 END};
static const char *const collector_words[] = {"ran", "not_seen", "not_run", NULL};
static const node_t held_item = WORDS("", pybox_held_words, NULL);
static const node_t after_end_m[] = {
    ARR("held", &held_item, "what outlived the box's last process, held by descriptors in flight"),
    WORDS("collector", collector_words,
          "the kernel's collector of descriptors in flight, run by PyBox after the box's end: a pass seen, none "
          "seen in time, or not run (relaxed for a test)"),
    M("collector_ms", T_NUM,
      "from the collector's start, once the box's end was read, to its pass seen (the box's removal runs in between)"),
    ARR("still_held", &held_item, "what was still there after it"),
    M("mount_namespace_checked", T_BOOL, "whether this kernel could say if the box's mount namespace was there"),
    END};
static const node_t box_m[] = {
    M("id", T_STR, "the box's id in the backend"),
    M("name", T_STR, NULL),
    M("created", T_BOOL, NULL),
    M("verified", T_BOOL, "read back and compared before start"),
    M("settings_checked", T_INT, NULL),
    M("started", T_BOOL, NULL),
    M("removed", T_BOOL, NULL),
    M("confirmed_gone", T_BOOL,
      "looked up again after removal (native: its init reaped, its cgroup counting no "
      "process, then removed)"),
    OPT_OBJ("after_end", T_OBJ, after_end_m, "what the backend saw outlive the box's last process (native)"),
    END};
static const node_t backend_record_m[] = {M("exit_code", T_INT, "the box's exit status as the backend recorded it"),
                                          M("oom_killed", T_BOOL, "something in the box was killed for lack of memory"),
                                          M("started_at", T_STR, NULL),
                                          M("finished_at", T_STR, NULL),
                                          OPT("error", T_STR, "the backend's own error for the box"),
                                          END};
static const node_t init_record_m[] = {
    M("exit_code", T_INT, NULL),
    M("signal", T_INT, NULL),
    M("box_timer_fired", T_BOOL, NULL),
    M("stopped_on_request", T_BOOL, NULL),
    M("program_ms", T_INT, NULL),
    M("other_processes_reaped", T_INT, NULL),
    M("stopped_from_outside_by_signal", T_INT, NULL),
    OPT("end", T_STR, "a box made ahead: how it ended, the init's word (docs/guest-protocol.md)"),
    OPT("calls", T_INT, "a box made ahead: the programs or calls it was handed"),
    END};
static const node_t cgroup_m[] = {
    {"version", T_STR, false, NULL, NULL, cg_words, NULL, NULL}, M("path", T_STR, NULL), END};
static const node_t reading_m[] = {M("taken", T_BOOL, "true: the final reading, taken while the box was held"),
                                   M("memory_peak_bytes", T_INT | T_NULL, NULL),
                                   M("memory_bytes", T_INT | T_NULL, NULL),
                                   M("oom_kills", T_INT | T_NULL, NULL),
                                   M("pids_peak", T_INT | T_NULL, NULL),
                                   OPT_WORDS("pids_peak_source", pids_source_words, NULL),
                                   M("pids_refused", T_INT | T_NULL, NULL),
                                   M("cpu_ns", T_INT | T_NULL, NULL),
                                   M("cpu_periods", T_INT | T_NULL, NULL),
                                   M("cpu_throttled_periods", T_INT | T_NULL, NULL),
                                   M("cpu_throttled_ns", T_INT | T_NULL, NULL),
                                   END};
static const node_t samples_m[] = {M("count", T_INT, NULL), M("interval_ms", T_INT, NULL),
                                   ARR("columns", &string_item, NULL), ARR("rows", &row_item, NULL), END};
static const node_t kernel_m[] = {OBJ("cgroup", T_OBJ | T_NULL, cgroup_m, "null when the box's cgroup was not read"),
                                  OPT("not_read", T_STR, "why not"),
                                  OPT("armed_ms", T_NUM, NULL),
                                  OPT("final_read_ms", T_NUM, "how long the final reading took"),
                                  OPT_OBJ("final", T_OBJ, reading_m, NULL),
                                  OPT_OBJ("samples", T_OBJ, samples_m, NULL),
                                  END};
static const node_t returned_m[] = {M("name", T_STR, NULL), M("bytes", T_INT, NULL), M("sha256", T_STR, NULL), END};
static const node_t returned_item = OBJ("", T_OBJ, returned_m, NULL);
static const node_t not_returned_m[] = {
    M("name", T_STR, NULL), {"kind", T_STR, false, NULL, NULL, kind_words, NULL, NULL}, M("reason", T_STR, NULL), END};
static const node_t not_returned_item = OBJ("", T_OBJ, not_returned_m, NULL);
static const node_t files_m[] = {WORDS("status", files_words, NULL),
                                 OPT("folder", T_STR, "where the files came back"),
                                 OPT("reason", T_STR, NULL),
                                 OPT("returned_files", T_INT, NULL),
                                 OPT("returned_bytes", T_INT, NULL),
                                 OPT("not_returned", T_INT, NULL),
                                 OPT_ARR("returned", &returned_item, NULL),
                                 OPT_ARR("not_returned_entries", &not_returned_item, NULL),
                                 OPT("not_returned_unlisted", T_INT, NULL),
                                 END};
static const node_t oom_m[] = {M("backend_flag", T_BOOL | T_NULL, NULL), M("kernel_oom_kills", T_INT | T_NULL, NULL),
                               WORDS("finding", finding_words, NULL), END};
static const node_t timings_m[] = {M("before", T_NUM, NULL),
                                   M("housekeeping", T_NUM, NULL),
                                   M("create", T_NUM, NULL),
                                   M("verify", T_NUM, NULL),
                                   M("files_in", T_NUM, NULL),
                                   M("attach", T_NUM, NULL),
                                   M("start", T_NUM, NULL),
                                   M("arm", T_NUM, NULL),
                                   M("run", T_NUM, NULL),
                                   M("files_out", T_NUM, NULL),
                                   M("collect", T_NUM, NULL),
                                   M("remove", T_NUM, NULL),
                                   M("total", T_NUM, "from PyBox's own start to the receipt"),
                                   END};
static const char *const start_words[] = {"cold", "warm", "session", NULL};
static const node_t box_timings_m[] = {M("create", T_NUM, NULL),
                                       M("verify", T_NUM, NULL),
                                       M("attach", T_NUM, NULL),
                                       M("start", T_NUM, NULL),
                                       M("arm", T_NUM, NULL),
                                       M("ready", T_NUM, "from the box's start to its init's ready record"),
                                       END};
static const node_t preload_m[] = {
    M("said_by", T_STR, "who said it, and when: before any program existed"),
    ARR("modules", &string_item, "what the image's preload names (/pybox/preload)"),
    ARR("imported", &string_item, "what the bootstrap said it imported"),
    M("failed", T_STR | T_NULL, "the module that failed to import, and why (a box whose preload failed is never used)"),
    M("ms", T_NUM, "the imports' time, as the bootstrap measured it"),
    M("output_bytes", T_INT, "what the imports printed (kept from the program's streams)"),
    END};
static const node_t since_arrival_m[] = {
    M("cpu_ns", T_INT | T_NULL, "the box's CPU time at the end less that at the program's arrival"),
    M("oom_kills", T_INT | T_NULL, NULL), M("pids_refused", T_INT | T_NULL, NULL),
    M("memory_peak_bytes", T_INT | T_NULL,
      "the box's memory peak, when it rose after the program's arrival (null: it did not pass the peak before)"),
    END};
static const node_t session_m[] = {
    M("id", T_STR, "the session's id, made by PyBox"),
    M("call", T_INT, "the call's number in the session (0: the session's own receipt)"),
    M("state", T_STR, "what of the session the call saw: state from its earlier calls"),
    M("goes_on", T_BOOL, "the interpreter still runs after this call, and the box is kept for the next"),
    OPT("init_call_ms", T_INT, "the box's init: from the call's arrival to its end"),
    OPT("files", T_STR, "a call: what of /box/in and /box/out, both kept for the session, it had and returned"),
    OPT("lifetime_cut_timeout_ms", T_INT,
        "the call's deadline was cut to what was left of the session's lifetime (ttl_s): the deadline it would "
        "have had, in ms (asked.limits.timeout_s is the one it got)"),
    END};
static const node_t start_m[] = {
    WORDS("kind", start_words,
          "cold: the interpreter started once the program came; warm: the box was made, verified and its "
          "interpreter started before the program arrived"),
    OPT("why_cold", T_STR, "why this start was cold"),
    OPT("box_made_at", T_STR, "when the box was made (UTC)"),
    OPT_OBJ("box_timings_ms", T_OBJ, box_timings_m, "the box's own phases, before the program"),
    OPT("waited_ms", T_NUM, "from the box's ready record to the program's arrival"),
    OPT("init_ready_ms", T_INT, "the box's init: from the interpreter's start to its report"),
    OPT_OBJ("preload", T_OBJ, preload_m, NULL),
    OPT_OBJ("at_arrival", T_OBJ | T_NULL, reading_m, "the kernel's counters when the program was handed over"),
    OPT_OBJ("session", T_OBJ, session_m, "a session's box: which session, which call, whose state it saw"),
    OPT_OBJ("since_arrival", T_OBJ, since_arrival_m,
            "the program's own share: the final counters less those at its arrival"),
    END};
static const node_t host_m[] = {
    M("kernel", T_STR, "the kernel's release (uname -r)"),
    {"cgroup", T_STR | T_NULL, false, NULL, NULL, cg_words, NULL,
     "the cgroup hierarchy boxes' cgroups are in (v1 also on a hybrid host); null: neither"},
    {"cgroup_manager", T_STR, false, NULL, NULL, manager_words, NULL,
     "systemd when systemd is the init and manages the cgroup tree, else none"},
    END};
static const node_t seen_m[] = {
    M("backend", T_STR, "the backend that built the box"),
    M("backend_description", T_STR, "the backend's own description and version"),
    OBJ("host", T_OBJ, host_m, "the host PyBox ran on (docs/cgroups.md)"),
    OBJ("box", T_OBJ, box_m, NULL),
    OBJ("backend_record", T_OBJ | T_NULL, backend_record_m, "the backend's account of the box's end"),
    OBJ("init_record", T_OBJ | T_NULL, init_record_m, "the box's PID 1's account, authenticated"),
    OBJ("start", T_OBJ, start_m, "cold or warm, and what was ready before the program"),
    OBJ("kernel", T_OBJ, kernel_m, "read from the box's cgroup on the host"),
    OBJ("files", T_OBJ, files_m, NULL),
    OBJ("oom", T_OBJ, oom_m, NULL),
    WORDS("clock", clock_words, "which clock ended the program"),
    M("host_deadline_passed", T_BOOL, NULL),
    M("box_killed_through_backend", T_BOOL, NULL),
    M("program_input_complete", T_BOOL, NULL),
    OBJ("timings_ms", T_OBJ, timings_m, NULL),
    END};
static const node_t stream_m[] = {M("total_bytes", T_INT, "every byte the program wrote"),
                                  M("kept_bytes", T_INT, NULL),
                                  M("truncated", T_BOOL, NULL),
                                  M("sha256", T_STR, "of the kept bytes"),
                                  M("utf8_valid", T_BOOL, NULL),
                                  M("text", T_STR, "the kept bytes as UTF-8 (U+FFFD for what was not)"),
                                  OPT("base64", T_STR, "the exact kept bytes, when text could not hold them"),
                                  END};
static const node_t said_m[] = {{"trust", T_STR, false, NULL, NULL, NULL, "untrusted: written by the program", NULL},
                                OBJ("stdout", T_OBJ, stream_m, NULL),
                                OBJ("stderr", T_OBJ, stream_m, NULL),
                                OPT("session_report", T_STR,
                                    "a session's call: the interpreter's report of it (JSON: the exception, the last "
                                    "expression's value), escaped; it ran with the agent's code"),
                                END};
static const node_t error_m[] = {
    {"kind", T_STR, false, NULL, NULL, error_words, NULL, NULL}, M("message", T_STR, NULL), END};
/* sign.h: made over the receipt's canonical JSON without this member. */
static const node_t signature_m[] = {
    {"alg", T_STR, false, NULL, NULL, NULL, "Ed25519", NULL},
    M("key_id", T_STR, "the signing key's id: the first 32 hex digits of the SHA-256 of its raw public key"),
    M("value", T_STR,
      "base64 of the 64-byte Ed25519 signature of the receipt's RFC 8785 canonical JSON without "
      "\"signature\""),
    END};
#define SIGNATURE_MEMBERS                                                                                              \
    OPT_OBJ("signature", T_OBJ, signature_m, "by the installation's receipt key (docs/receipt.md)"),                   \
        OPT("unsigned", T_STR, "why the receipt carries no signature")

static const node_t run_m[] = {{"schema", T_STR, false, NULL, NULL, NULL, PYBOX_RECEIPT_SCHEMA, NULL},
                               M("pybox_version", T_STR, NULL),
                               M("run_id", T_STR, NULL),
                               {"status", T_STR, false, NULL, NULL, status_words, NULL, "docs/receipt.md"},
                               M("exit_code", T_INT, "PyBox's own exit code"),
                               OBJ("asked", T_OBJ, asked_m, NULL),
                               OBJ("seen", T_OBJ, seen_m, NULL),
                               OBJ("said", T_OBJ, said_m, "untrusted: what the program wrote"),
                               ARR("unknown", &string_item, "what could not be established"),
                               OPT_OBJ("error", T_OBJ, error_m, "when PyBox failed"),
                               SIGNATURE_MEMBERS,
                               END};
static const node_t refusal_m[] = {{"schema", T_STR, false, NULL, NULL, NULL, PYBOX_RECEIPT_SCHEMA, NULL},
                                   M("pybox_version", T_STR, NULL),
                                   {"status", T_STR, false, NULL, NULL, refusal_words, NULL, NULL},
                                   M("exit_code", T_INT, NULL),
                                   OBJ("error", T_OBJ, error_m, NULL),
                                   M("box_built", T_BOOL, "always false: refused before any box"),
                                   SIGNATURE_MEMBERS,
                                   END};
static const node_t run_root = OBJ("", T_OBJ, run_m, NULL);
static const node_t refusal_root = OBJ("", T_OBJ, refusal_m, NULL);

/* ---- as JSON Schema ---- */

static cJSON *schema_of(const node_t *n, bool strict);

static cJSON *type_of(unsigned t)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{T_STR, "string"}, {T_INT, "integer"}, {T_NUM, "number"}, {T_BOOL, "boolean"},
                 {T_NULL, "null"},  {T_OBJ, "object"},  {T_ARR, "array"}};
    cJSON *a = cJSON_CreateArray();
    int n = 0;
    const char *one = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (t & names[i].bit) {
            cJSON_AddItemToArray(a, cJSON_CreateString(names[i].name));
            one = names[i].name;
            n++;
        }
    }
    if (n == 1) {
        cJSON_Delete(a);
        return cJSON_CreateString(one);
    }
    return a;
}

static cJSON *schema_of(const node_t *n, bool strict)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddItemToObject(s, "type", type_of(n->type));
    if (n->description)
        cJSON_AddStringToObject(s, "description", n->description);
    if (n->constant)
        cJSON_AddStringToObject(s, "const", n->constant);
    if (n->words) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        for (const char *const *w = n->words; *w; w++)
            cJSON_AddItemToArray(e, cJSON_CreateString(*w));
        if (n->type & T_NULL)
            cJSON_AddItemToArray(e, cJSON_CreateNull());
    }
    if (n->members) {
        cJSON *props = cJSON_AddObjectToObject(s, "properties");
        cJSON *req = cJSON_AddArrayToObject(s, "required");
        for (const node_t *m = n->members; m->name; m++) {
            cJSON_AddItemToObject(props, m->name, schema_of(m, strict));
            if (!m->optional)
                cJSON_AddItemToArray(req, cJSON_CreateString(m->name));
        }
        if (strict)
            cJSON_AddBoolToObject(s, "additionalProperties", 0);
    }
    if (n->items)
        cJSON_AddItemToObject(s, "items", schema_of(n->items, strict));
    return s;
}

cJSON *pybox_receipt_run_schema(bool strict)
{
    cJSON *s = schema_of(&run_root, strict);
    cJSON_AddStringToObject(s, "title", "PyBox receipt of a run");
    return s;
}

cJSON *pybox_receipt_schema(bool strict)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "$schema", "https://json-schema.org/draft/2020-12/schema");
    cJSON_AddStringToObject(s, "$id", PYBOX_RECEIPT_SCHEMA_ID);
    cJSON_AddStringToObject(s, "title", "PyBox receipt (" PYBOX_RECEIPT_SCHEMA ")");
    cJSON_AddStringToObject(s, "description",
                            "What was asked, what the backend and the kernel observed, what the program said "
                            "(untrusted), and what is not known; or a refusal before any box. docs/receipt.md.");
    cJSON *one = cJSON_AddArrayToObject(s, "oneOf");
    cJSON_AddItemToArray(one, schema_of(&run_root, strict));
    cJSON *r = schema_of(&refusal_root, strict);
    cJSON_AddStringToObject(r, "title", "PyBox refusal");
    cJSON_AddItemToArray(one, r);
    return s;
}

/* JSON text indented by two spaces per level; each scalar as cJSON writes it. */
static void indented(pybox_buf_t *o, const cJSON *v, int depth)
{
    bool obj = cJSON_IsObject(v);
    if ((obj || cJSON_IsArray(v)) && v->child != NULL) {
        pybox_buf_adds(o, obj ? "{\n" : "[\n");
        for (const cJSON *c = v->child; c != NULL; c = c->next) {
            pybox_buf_addf(o, "%*s", 2 * (depth + 1), "");
            if (obj) {
                cJSON *name = cJSON_CreateString(c->string);
                char *t = name ? cJSON_PrintUnformatted(name) : NULL;
                if (t == NULL)
                    pybox_buf_fail(o);
                pybox_buf_addf(o, "%s: ", t ? t : "");
                free(t);
                cJSON_Delete(name);
            }
            indented(o, c, depth + 1);
            pybox_buf_adds(o, c->next ? ",\n" : "\n");
        }
        pybox_buf_addf(o, "%*s%s", 2 * depth, "", obj ? "}" : "]");
        return;
    }
    char *t = cJSON_PrintUnformatted(v);
    if (t == NULL)
        pybox_buf_fail(o);
    pybox_buf_adds(o, t ? t : "");
    free(t);
}

int pybox_receipt_schema_text(pybox_buf_t *out)
{
    cJSON *s = pybox_receipt_schema(true);
    if (s == NULL)
        return -1;
    indented(out, s, 0);
    pybox_buf_adds(out, "\n");
    cJSON_Delete(s);
    return pybox_buf_ok(out) ? 0 : -1;
}

/* ---- checking a receipt ---- */

static bool is_type(const cJSON *v, unsigned t)
{
    if ((t & T_NULL) && cJSON_IsNull(v))
        return true;
    if ((t & T_STR) && cJSON_IsString(v))
        return true;
    if ((t & T_BOOL) && cJSON_IsBool(v))
        return true;
    if ((t & T_OBJ) && cJSON_IsObject(v))
        return true;
    if ((t & T_ARR) && cJSON_IsArray(v))
        return true;
    if ((t & T_NUM) && cJSON_IsNumber(v) && isfinite(v->valuedouble))
        return true;
    if ((t & T_INT) && cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble))
        return true;
    return false;
}

static int check(const node_t *n, const cJSON *v, const char *where, char *why, size_t len)
{
    if (!is_type(v, n->type)) {
        snprintf(why, len, "%s: not of its type", where);
        return -1;
    }
    if (cJSON_IsString(v) && n->constant && strcmp(v->valuestring, n->constant) != 0) {
        snprintf(why, len, "%s: must be \"%s\"", where, n->constant);
        return -1;
    }
    if (cJSON_IsString(v) && n->words) {
        bool ok = false;
        for (const char *const *w = n->words; *w && !ok; w++)
            ok = strcmp(*w, v->valuestring) == 0;
        if (!ok) {
            snprintf(why, len, "%s: \"%.64s\" is not one of its words", where, v->valuestring);
            return -1;
        }
    }
    char sub[256];
    if (cJSON_IsObject(v) && n->members) {
        for (const node_t *m = n->members; m->name; m++) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, m->name);
            snprintf(sub, sizeof sub, "%s.%s", where, m->name);
            if (c == NULL) {
                if (m->optional)
                    continue;
                snprintf(why, len, "%s: missing", sub);
                return -1;
            }
            if (check(m, c, sub, why, len) < 0)
                return -1;
        }
        const cJSON *c;
        cJSON_ArrayForEach (c, v) {
            bool known = false;
            for (const node_t *m = n->members; m->name && !known; m++)
                known = strcmp(m->name, c->string) == 0;
            if (!known) {
                snprintf(why, len, "%s.%.64s: not a member of the receipt", where, c->string);
                return -1;
            }
        }
    }
    if (cJSON_IsArray(v) && n->items) {
        int i = 0;
        const cJSON *c;
        cJSON_ArrayForEach (c, v) {
            snprintf(sub, sizeof sub, "%s[%d]", where, i++);
            if (check(n->items, c, sub, why, len) < 0)
                return -1;
        }
    }
    return 0;
}

int pybox_receipt_conforms(const cJSON *receipt, char *why, size_t len)
{
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(receipt, "status");
    bool refusal = cJSON_IsString(status) && cJSON_GetObjectItemCaseSensitive(receipt, "box_built") != NULL;
    return check(refusal ? &refusal_root : &run_root, receipt, "receipt", why, len);
}
