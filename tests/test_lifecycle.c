/* SPDX-License-Identifier: MIT */
/* Crash safety and cleanup: pybox killed at each step, expiry, what cleanup must never
 * touch, and many runs and cleanups at once. */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../pybox/image/image.h"
#include "../pybox/journal.h"
#include "../pybox/policy.h"
#include "../pybox/prepare.h"
#include "../pybox/run.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

typedef struct {
    const char *target;
    int fd;
} kill_at_t;

static void die_at(const char *step, const char *run_id, void *arg)
{
    kill_at_t *k = arg;
    if (strcmp(step, k->target) != 0)
        return;
    ssize_t w = write(k->fd, run_id, 32);
    (void)w;
    raise(SIGKILL);
}

/* Run program through the library in a child that SIGKILLs itself at step; returns
 * the run's id (33 bytes). */
static void run_killed_at(const char *step, const char *program, int64_t timeout_ms, char *run_id)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        kill_at_t k = {.target = step, .fd = p[1]};
        pybox_request_t rq = {.program = program,
                              .program_len = strlen(program),
                              .image = "stdlib",
                              .timeout_ms = timeout_ms,
                              .hook = die_at,
                              .hook_arg = &k};
        pybox_ready_t rd;
        pybox_ready_init(&rd);
        pybox_error_t err = {0};
        if (pybox_prepare(&rq, &rd, &err) < 0)
            _exit(3);
        rd.run.housekeeping = false;
        pybox_run_result_t res;
        pybox_ready_run(&rd, &res);
        _exit(4); /* the step never came */
    }
    close(p[1]);
    ck_assert_int_eq(read(p[0], run_id, 32), 32);
    run_id[32] = '\0';
    close(p[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the run was not killed at %s", step);
}

static bool note_exists(const char *run_id)
{
    char path[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "%s/runs/%s.json", itest_state()->dir, run_id), 0);
    return access(path, F_OK) == 0;
}

/* The one box of a run, or NULL; fills its state and expiry. */
static cJSON *box_of(pybox_engine_t *e, const char *run_id)
{
    cJSON *list = NULL;
    int n = itest_list(e, "pybox.run", run_id, &list);
    ck_assert_int_le(n, 1);
    cJSON *box = n == 1 ? cJSON_DetachItemFromArray(list, 0) : NULL;
    cJSON_Delete(list);
    return box;
}

static long expires_of(const cJSON *box)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(itest_get(box, "Labels"), "pybox.expires");
    ck_assert(cJSON_IsString(l));
    return strtol(l->valuestring, NULL, 10);
}

static cJSON *cleanup_json(const char *const *extra)
{
    const char *args[8] = {"cleanup", "--json"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 7; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    itest_run_t r;
    itest_pybox("", 0, args, NULL, &r);
    ck_assert_msg(r.status == 0 && r.receipt, "pybox cleanup failed (%d): %s", r.status, r.err);
    cJSON *j = r.receipt;
    r.receipt = NULL;
    itest_run_free(&r);
    return j;
}

/* The action cleanup reported for a run's item of a kind, or NULL. */
static const char *action_for(const cJSON *rep, const char *what, const char *run_id)
{
    const cJSON *it;
    cJSON_ArrayForEach (it, itest_get(rep, "items")) {
        if (strcmp(itest_str(it, "what"), what) == 0 && strcmp(itest_str(it, "run_id"), run_id) == 0)
            return itest_str(it, "action");
    }
    return NULL;
}

static void wait_until(long wall)
{
    while (itest_wall() < (double)wall) {
        struct timespec ts = {0, 100 * 1000 * 1000}; /* waiting for the clock itself: expiry */
        nanosleep(&ts, NULL);
    }
}

START_TEST(killed_at_every_step_then_cleaned_after_expiry)
{
    static const char *const steps[] = {PYBOX_STEP_NOTED, PYBOX_STEP_CREATED, PYBOX_STEP_STARTED, PYBOX_STEP_RUNNING,
                                        PYBOX_STEP_REMOVING};
    enum { N = 5 };
    char runs[N][33];
    for (int i = 0; i < N; i++)
        run_killed_at(steps[i], "import time\ntime.sleep(8)\n", 1000, runs[i]);

    pybox_engine_t *e = itest_engine();
    long latest = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_msg(note_exists(runs[i]), "killed at %s: no run note left", steps[i]);
        cJSON *box = box_of(e, runs[i]);
        if (i == 0) {
            ck_assert_ptr_null(box); /* killed before anything was created */
            continue;
        }
        ck_assert_msg(box != NULL, "killed at %s: no box", steps[i]);
        long ex = expires_of(box);
        latest = ex > latest ? ex : latest;
        if (i >= 2) {
            /* A box that ran ends by itself, with nobody calling stop. */
            char path[200];
            snprintf(path, sizeof path, "/containers/%s/wait", itest_str(box, "Id"));
            long status = 0;
            cJSON *reply = NULL;
            pybox_error_t err = {0};
            ck_assert(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0);
            ck_assert_int_eq(status, 200);
            cJSON_Delete(reply);
        } else {
            ck_assert_str_eq(itest_str(box, "State"), "created");
        }
        cJSON_Delete(box);
    }

    /* Before expiry: everything is left alone. */
    cJSON *rep = cleanup_json(NULL);
    for (int i = 1; i < N; i++) {
        const char *a = action_for(rep, "box", runs[i]);
        ck_assert_msg(a && strcmp(a, "kept") == 0, "before expiry, the box killed at %s was %s", steps[i],
                      a ? a : "not seen");
        ck_assert(note_exists(runs[i]));
    }
    cJSON_Delete(rep);

    /* After expiry: a dry run lists, then cleanup removes boxes, volumes and notes. */
    wait_until(latest + 1);
    const char *dry[] = {"--dry-run", NULL};
    rep = cleanup_json(dry);
    for (int i = 1; i < N; i++)
        ck_assert_str_eq(action_for(rep, "box", runs[i]), "would remove");
    cJSON_Delete(rep);
    for (int i = 1; i < N; i++)
        ck_assert_int_eq(itest_list(e, "pybox.run", runs[i], NULL), 1);

    rep = cleanup_json(NULL);
    for (int i = 0; i < N; i++) {
        if (i > 0)
            ck_assert_str_eq(action_for(rep, "box", runs[i]), "removed");
        ck_assert_str_eq(action_for(rep, "note", runs[i]), "removed");
        ck_assert_int_eq(itest_list(e, "pybox.run", runs[i], NULL), 0);
        ck_assert_msg(!note_exists(runs[i]), "the note of the run killed at %s is still there", steps[i]);
    }
    cJSON_Delete(rep);
    pybox_engine_free(e);
}
END_TEST

/* Create a container directly (no network, never a pull), with the given labels. */
static char *create_raw(pybox_engine_t *e, const char *name, const char *labels_json, bool start)
{
    pybox_pin_t pin;
    pybox_error_t err = {0};
    ck_assert(itest_resolve("stdlib", &pin, &err) == 0);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"Image\":\"%s\",\"Entrypoint\":[\"/bin/sleep\",\"30\"],\"User\":\"65534\",\"NetworkDisabled\":true,"
             "\"Labels\":%s,\"HostConfig\":{\"NetworkMode\":\"none\",\"ReadonlyRootfs\":true,\"CapDrop\":[\"ALL\"]}}",
             pin.id, labels_json);
    cJSON *body = cJSON_Parse(text);
    char path[200];
    snprintf(path, sizeof path, "/containers/create?name=%s", name);
    long status = 0;
    cJSON *reply = NULL;
    ck_assert(pybox_engine_call(e, "POST", path, body, &status, &reply, &err) == 0);
    cJSON_Delete(body);
    ck_assert_msg(status == 201, "create: %ld", status);
    char *id = strdup(itest_str(reply, "Id"));
    cJSON_Delete(reply);
    if (start) {
        snprintf(path, sizeof path, "/containers/%s/start", id);
        ck_assert(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0);
        ck_assert_int_eq(status, 204);
        cJSON_Delete(reply);
    }
    return id;
}

static void remove_raw(pybox_engine_t *e, const char *id)
{
    char path[200];
    snprintf(path, sizeof path, "/containers/%s?force=1&v=1", id);
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert(pybox_engine_call(e, "DELETE", path, NULL, &status, &reply, &err) == 0);
    cJSON_Delete(reply);
    ck_assert_int_eq(itest_box_status(e, id), 404);
}

START_TEST(cleanup_never_touches_what_is_not_its_own)
{
    pybox_engine_t *e = itest_engine();
    const char *mine = itest_state()->install_id;
    char rnd[33], rnd2[33], name[80], labels[512];
    pybox_random_hex(16, rnd, NULL);
    pybox_random_hex(16, rnd2, NULL);

    /* Another installation's expired, stopped box. */
    char other_home[64], other_id[33];
    ck_assert_int_eq(itest_new_home(other_home, sizeof other_home, other_id), 0);
    snprintf(labels, sizeof labels, "{\"pybox.install\":\"%s\",\"pybox.run\":\"%s\",\"pybox.expires\":\"1\"}", other_id,
             rnd);
    snprintf(name, sizeof name, "pybox-%s", rnd);
    char *other = create_raw(e, name, labels, false);
    /* An unrelated container with PyBox-like labels and name but no installation label. */
    snprintf(labels, sizeof labels, "{\"pybox.run\":\"%s\",\"pybox.expires\":\"1\",\"pybox.itest\":\"unrelated\"}",
             rnd2);
    snprintf(name, sizeof name, "pybox-%s", rnd2);
    char *unrelated = create_raw(e, name, labels, false);
    /* This installation's own box, expired long ago, but running. */
    char rnd3[33];
    pybox_random_hex(16, rnd3, NULL);
    snprintf(labels, sizeof labels, "{\"pybox.install\":\"%s\",\"pybox.run\":\"%s\",\"pybox.expires\":\"1\"}", mine,
             rnd3);
    snprintf(name, sizeof name, "pybox-%s", rnd3);
    char *running = create_raw(e, name, labels, true);

    cJSON *rep = cleanup_json(NULL);
    ck_assert_str_eq(action_for(rep, "box", rnd3), "kept");
    ck_assert_ptr_null(action_for(rep, "box", rnd));
    ck_assert_ptr_null(action_for(rep, "box", rnd2));
    cJSON_Delete(rep);
    ck_assert_int_eq(itest_box_status(e, other), 200);
    ck_assert_int_eq(itest_box_status(e, unrelated), 200);
    ck_assert_int_eq(itest_box_status(e, running), 200);

    remove_raw(e, other);
    remove_raw(e, unrelated);
    remove_raw(e, running);
    free(other);
    free(unrelated);
    free(running);
    itest_remove_home(other_home);
    pybox_engine_free(e);
}
END_TEST

START_TEST(many_runs_and_cleanups_at_once)
{
    enum { RUNS = 16, CLEANUPS = 4 };
    itest_job_t runs[RUNS], cleanups[CLEANUPS];
    char progs[RUNS][64];
    const char *exec_args[] = {"exec", "--json", "--timeout", "20", NULL};
    const char *clean_args[] = {"cleanup", "--json", NULL};
    for (int i = 0; i < RUNS; i++) {
        snprintf(progs[i], sizeof progs[i], "print('run %d')\n", i);
        itest_start(progs[i], strlen(progs[i]), exec_args, NULL, &runs[i]);
        if (i % 4 == 1)
            itest_start("", 0, clean_args, NULL, &cleanups[i / 4]);
    }
    for (int i = 0; i < RUNS; i++) {
        itest_run_t r;
        itest_finish(&runs[i], &r);
        ck_assert_msg(r.status == 0 && r.receipt, "run %d: exit %d: %s", i, r.status, r.err);
        char want[32];
        snprintf(want, sizeof want, "run %d\n", i);
        ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), want);
        ck_assert_str_eq(itest_str(r.receipt, "status"), "TARGET_EXIT_OBSERVED");
        ck_assert_int_eq(itest_bool(r.receipt, "seen.box.confirmed_gone"), 1);
        itest_run_free(&r);
    }
    for (int i = 0; i < CLEANUPS; i++) {
        itest_run_t r;
        itest_finish(&cleanups[i], &r);
        ck_assert_msg(r.status == 0, "cleanup %d: exit %d: %s", i, r.status, r.err);
        /* No cleanup removed anything a run was using. */
        ck_assert_int_eq((int)itest_num(r.receipt, "removed"), 0);
        itest_run_free(&r);
    }
    pybox_engine_t *e = itest_engine();
    ck_assert_int_eq(itest_list(e, "pybox.install", itest_state()->install_id, NULL), 0);
    pybox_engine_free(e);
    pybox_journal_info_t *notes = NULL;
    size_t n = 0;
    pybox_error_t err = {0};
    ck_assert(pybox_journal_list(itest_state(), &notes, &n, &err) == 0);
    ck_assert_uint_eq(n, 0);
    free(notes);
}
END_TEST

/* What a pybox killed while writing an output folder leaves: its note (unlocked, as after
 * its death, and long expired), the note's pointer to the hidden folder, and the folder,
 * made in outdir (a mkdtemp template) for a run of a new id. */
static void dead_run_output(char run[33], char *outdir, char hidden[PATH_MAX], char note[PATH_MAX], char ptr[PATH_MAX])
{
    pybox_random_hex(16, run, NULL);
    ck_assert_ptr_nonnull(mkdtemp(outdir));
    ck_assert_int_eq(pybox_fmt(hidden, PATH_MAX, "%s/.pybox-out-%s.tmp", outdir, run), 0);
    ck_assert_int_eq(mkdir(hidden, 0700), 0);
    ck_assert_int_eq(pybox_fmt(note, PATH_MAX, "%s/runs/%s.json", itest_state()->dir, run), 0);
    ck_assert_int_eq(pybox_fmt(ptr, PATH_MAX, "%s/runs/%s.out", itest_state()->dir, run), 0);
    FILE *f = fopen(note, "we");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"run_id\":\"%s\",\"expires\":1}\n", run);
    fclose(f);
    f = fopen(ptr, "we");
    ck_assert_ptr_nonnull(f);
    fputs(hidden, f);
    fclose(f);
}

START_TEST(output_left_by_a_dead_run_is_removed)
{
    /* What a pybox killed while writing an output folder leaves: its note (unlocked, as
     * after its death), the note's pointer to the hidden folder, and the folder. */
    char run[33], outdir[64] = "/tmp/pybox-deadout-XXXXXX", hidden[PATH_MAX], note[PATH_MAX], ptr[PATH_MAX];
    dead_run_output(run, outdir, hidden, note, ptr);
    char file[PATH_MAX + 16];
    ck_assert_int_eq(pybox_fmt(file, sizeof file, "%s/half.csv", hidden), 0);
    FILE *f = fopen(file, "we");
    fputs("partial", f);
    fclose(f);
    /* A folder of the same shape that no note points to stays. */
    char other[PATH_MAX];
    ck_assert_int_eq(pybox_fmt(other, sizeof other, "%s/.pybox-out-%032d.tmp", outdir, 0), 0);
    ck_assert_int_eq(mkdir(other, 0700), 0);

    cJSON *rep = cleanup_json(NULL);
    ck_assert_str_eq(action_for(rep, "output", run), "removed");
    cJSON_Delete(rep);
    ck_assert_int_ne(access(hidden, F_OK), 0);
    ck_assert_int_ne(access(ptr, F_OK), 0);
    ck_assert_int_ne(access(note, F_OK), 0);
    ck_assert_int_eq(access(other, F_OK), 0);
    rmdir(other);
    rmdir(outdir);
}
END_TEST

/* The same, when the dead run also left a volume (its box was not confirmed gone): the
 * volume goes first and takes the run's note with it; the trail to the hidden folder must
 * be followed then too, not lost with the note. */
START_TEST(output_left_by_a_dead_run_with_a_leftover_is_removed)
{
    char run[33], outdir[64] = "/tmp/pybox-deadout-XXXXXX", hidden[PATH_MAX], note[PATH_MAX], ptr[PATH_MAX];
    dead_run_output(run, outdir, hidden, note, ptr);
    /* an expired volume of that run, labelled as the run would have labelled it */
    pybox_engine_t *e = itest_engine();
    cJSON *body = cJSON_CreateObject();
    char vname[64];
    ck_assert_int_eq(pybox_fmt(vname, sizeof vname, "pybox-review-%s", run), 0);
    cJSON_AddStringToObject(body, "Name", vname);
    cJSON *labels = cJSON_AddObjectToObject(body, "Labels");
    cJSON_AddStringToObject(labels, "pybox.install", itest_state()->install_id);
    cJSON_AddStringToObject(labels, "pybox.run", run);
    cJSON_AddStringToObject(labels, "pybox.expires", "1");
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t err = {0};
    ck_assert_msg(pybox_engine_call(e, "POST", "/volumes/create", body, &status, &reply, &err) == 0, "%s", err.msg);
    cJSON_Delete(body);
    cJSON_Delete(reply);
    ck_assert_int_eq(status, 201);

    cJSON *rep = cleanup_json(NULL);
    ck_assert_str_eq(action_for(rep, "volume", run), "removed");
    ck_assert_str_eq(action_for(rep, "output", run), "removed");
    cJSON_Delete(rep);
    ck_assert_int_ne(access(hidden, F_OK), 0);
    ck_assert_int_ne(access(ptr, F_OK), 0);
    ck_assert_int_ne(access(note, F_OK), 0);
    char path[128];
    ck_assert_int_eq(pybox_fmt(path, sizeof path, "/volumes/%s", vname), 0);
    ck_assert_int_eq(pybox_engine_call(e, "GET", path, NULL, &status, &reply, &err), 0);
    cJSON_Delete(reply);
    ck_assert_int_eq(status, 404);
    pybox_engine_free(e);
    rmdir(hidden);
    rmdir(outdir);
}
END_TEST

Suite *itest_suite_lifecycle(void)
{
    Suite *s = suite_create("lifecycle");
    itest_tcase(s, "crash safety", 180,
                ITEST_TESTS(killed_at_every_step_then_cleaned_after_expiry, cleanup_never_touches_what_is_not_its_own,
                            many_runs_and_cleanups_at_once, output_left_by_a_dead_run_is_removed,
                            output_left_by_a_dead_run_with_a_leftover_is_removed));
    return s;
}
