/* SPDX-License-Identifier: MIT */
/* Images in the Docker engine: imported from a root filesystem tar, pinned by the ID the
 * engine gave them, named pybox-<name>:<fingerprint> (an ordinary user's: -u<uid> after
 * it), removed never forced (box.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../archive_api.h"
#include "../bounds.h"
#include "../buf.h"
#include "../state.h"
#include "../util.h"
#include "docker.h"

/* The engine's name for a pinned image, repository and tag: pybox-<name> and the first 12
 * of the fingerprint, for an ordinary user (a member of the docker group, with an
 * installation of their own) followed by -u<uid>. The engine's names are shared by all
 * who reach it: a user's build would otherwise take root's name (an import is a new ID),
 * and root's installation would refuse its own image as tampered with; and the reverse. */
static void repo_tag_of(const char *name, const char *fingerprint, char *repo, size_t rlen, char *tag, size_t tlen)
{
    /* (each fits: a name is at most PYBOX_NAME_MAX) */
    (void)pybox_fmt(repo, rlen, "pybox-%s", name);
    if (geteuid() == 0)
        (void)pybox_fmt(tag, tlen, "%.12s", fingerprint);
    else
        (void)pybox_fmt(tag, tlen, "%.12s-u%u", fingerprint, (unsigned)geteuid());
}

static void tag_of(const pybox_pin_t *pin, char *out, size_t len)
{
    char repo[PYBOX_NAME_MAX + 8], tag[32];
    repo_tag_of(pin->name, pin->recipe_sha256, repo, sizeof repo, tag, sizeof tag);
    (void)pybox_fmt(out, len, "%s:%s", repo, tag);
}

/* Where the engine's name for the image points now: 1 the pinned ID, 0 nowhere (the
 * name was removed: the ID still decides), -1 another image (*other filled). */
static int tag_points_to_pin(pybox_engine_t *e, const pybox_pin_t *pin, char *other, size_t olen, pybox_error_t *err)
{
    char tag[PYBOX_NAME_MAX + 32], path[PYBOX_NAME_MAX + 64];
    tag_of(pin, tag, sizeof tag);
    PYBOX_DOCKER_PATH(path, -2, "/images/%s/json", tag);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call(e, "GET", path, NULL, &status, &reply, err) < 0)
        return -2;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    int r = status == 404 ? 0 : (cJSON_IsString(id) && strcmp(id->valuestring, pin->id) == 0 ? 1 : -1);
    if (r == -1)
        snprintf(other, olen, "%s", cJSON_IsString(id) ? id->valuestring : "?");
    cJSON_Delete(reply);
    return r;
}

/* The names the engine knows the image by: 1 none but PyBox's own for it (only then is it
 * PyBox's to remove), 0 others too, -1 the engine no longer has the image, -2 its names
 * could not be read. */
static int image_names(pybox_engine_t *e, const char *id, const char *tag)
{
    char path[PYBOX_ID_MAX + 32];
    if (pybox_fmt(path, sizeof path, "/images/%s/json", id) < 0)
        return -2;
    long status = 0;
    cJSON *reply = NULL;
    pybox_error_t ignored = {0};
    if (pybox_engine_call(e, "GET", path, NULL, &status, &reply, &ignored) < 0 || status != 200) {
        cJSON_Delete(reply);
        return status == 404 ? -1 : -2;
    }
    int ours = 1;
    const cJSON *t;
    cJSON_ArrayForEach (t, cJSON_GetObjectItemCaseSensitive(reply, "RepoTags")) {
        if (cJSON_IsString(t) && strcmp(t->valuestring, tag) != 0 && strcmp(t->valuestring, "<none>:<none>") != 0)
            ours = 0;
    }
    cJSON_Delete(reply);
    return ours;
}

/* Whether the engine's reply to DELETE /images/... (a list of {"Untagged"} and
 * {"Deleted"} entries) says the image id itself was deleted. */
static bool reply_deleted(const cJSON *reply, const char *id)
{
    const cJSON *entry;
    cJSON_ArrayForEach (entry, reply) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(entry, "Deleted");
        if (cJSON_IsString(d) && strcmp(d->valuestring, id) == 0)
            return true;
    }
    return false;
}

/* The image ID from the import reply (JSON lines; the last "status" names it). */
static int import_id(const pybox_buf_t *reply, char *id, size_t idlen, pybox_error_t *err)
{
    id[0] = '\0';
    const char *p = reply->data ? reply->data : "";
    const char *end = p + reply->len;
    while (p < end) {
        cJSON *j = cJSON_ParseWithOpts(p, &p, 0);
        if (j == NULL)
            break;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
        if (cJSON_IsString(e)) {
            pybox_error_set(err, PYBOX_ERR_ENGINE, 0, "image import: the engine said: %s", e->valuestring);
            cJSON_Delete(j);
            return -1;
        }
        if (cJSON_IsString(s) && strncmp(s->valuestring, "sha256:", 7) == 0)
            snprintf(id, idlen, "%s", s->valuestring);
        cJSON_Delete(j);
        while (p < end && (*p == '\n' || *p == '\r' || *p == ' '))
            p++;
    }
    if (id[0] == '\0')
        return pybox_error_set(err, PYBOX_ERR_PROTOCOL, 0, "image import: no image ID in the engine's reply");
    return 0;
}

/* The manifest inside an image: a box created from it (never started), one file read. */
static int image_manifest(pybox_engine_t *e, const char *install_id, const pybox_pin_t *pin, cJSON **manifest,
                          pybox_error_t *err)
{
    *manifest = NULL;
    char run[33];
    if (pybox_random_hex(16, run, err) < 0)
        return -1;
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "Image", pin->id);
    const char *cmd[] = {"/pybox/init", "--timer-ms=1000", "--program-uid=65534"};
    cJSON_AddItemToObject(body, "Entrypoint", cJSON_CreateStringArray(cmd, 2));
    cJSON_AddBoolToObject(body, "NetworkDisabled", 1);
    cJSON *labels = cJSON_AddObjectToObject(body, "Labels");
    char expires[32];
    snprintf(expires, sizeof expires, "%lld", (long long)pybox_wall_s() + 60);
    cJSON_AddStringToObject(labels, "pybox.install", install_id);
    cJSON_AddStringToObject(labels, "pybox.run", run);
    cJSON_AddStringToObject(labels, "pybox.expires", expires);
    cJSON *h = cJSON_AddObjectToObject(body, "HostConfig");
    cJSON_AddStringToObject(h, "NetworkMode", "none");
    long status = 0;
    cJSON *reply = NULL;
    int rc = pybox_engine_call(e, "POST", "/containers/create", body, &status, &reply, err);
    cJSON_Delete(body);
    if (rc < 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    if (status != 201 || !cJSON_IsString(id)) {
        pybox_engine_fail(err, "reading the image's manifest", status, reply);
        cJSON_Delete(reply);
        return -1;
    }
    char cid[PYBOX_ID_MAX], path[PYBOX_ID_MAX + 64];
    snprintf(cid, sizeof cid, "%s", id->valuestring);
    cJSON_Delete(reply);
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s/archive?path=/pybox/manifest.json", cid);
    pybox_buf_t tar;
    pybox_buf_init(&tar, 1024 * 1024);
    rc = pybox_engine_call_raw(e, "GET", path, NULL, &status, &tar, err);
    if (rc == 0 && status == 200) {
        struct archive *a = archive_read_new();
        struct archive_entry *ent;
        if (a != NULL && archive_read_support_format_tar(a) == ARCHIVE_OK &&
            archive_read_open_memory(a, tar.data, tar.len) == ARCHIVE_OK &&
            archive_read_next_header(a, &ent) == ARCHIVE_OK) {
            char buf[65536];
            la_ssize_t n = archive_read_data(a, buf, sizeof buf - 1);
            if (n > 0)
                *manifest = cJSON_ParseWithLength(buf, (size_t)n);
        }
        archive_read_free(a);
    }
    pybox_buf_free(&tar);
    PYBOX_DOCKER_PATH(path, -1, "/containers/%s?force=1&v=1", cid);
    cJSON *gone = NULL;
    pybox_error_t ignored = {0};
    pybox_engine_call(e, "DELETE", path, NULL, &status, &gone, &ignored);
    cJSON_Delete(gone);
    return rc;
}

static int d_import(pybox_backend_t *be, int tar_fd, const pybox_pin_t *pin, char *id, size_t id_len,
                    pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    char path[256], repo[PYBOX_NAME_MAX + 8], tag[32];
    repo_tag_of(pin->name, pin->recipe_sha256, repo, sizeof repo, tag, sizeof tag);
    if (pybox_fmt(path, sizeof path, "/images/create?fromSrc=-&repo=%s&tag=%s", repo, tag) < 0)
        return pybox_error_set(err, PYBOX_ERR_USAGE, ENAMETOOLONG, "image name");
    pybox_buf_t reply;
    pybox_buf_init(&reply, PYBOX_ENGINE_REPLY_MAX);
    long status = 0;
    int rc = pybox_engine_upload(e, path, tar_fd, "application/x-tar", &status, &reply, err);
    if (rc == 0 && status != 200) {
        cJSON *j = cJSON_ParseWithLength(reply.data ? reply.data : "", reply.len);
        pybox_engine_fail(err, "image import", status, j);
        cJSON_Delete(j);
        rc = -1;
    }
    if (rc == 0)
        rc = import_id(&reply, id, id_len, err);
    pybox_buf_free(&reply);
    return rc;
}

static int d_resolve(pybox_backend_t *be, const pybox_pin_t *pin, pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    char path[200];
    PYBOX_DOCKER_PATH(path, -1, "/images/%s/json", pin->id);
    long status = 0;
    cJSON *reply = NULL;
    if (pybox_engine_call(e, "GET", path, NULL, &status, &reply, err) < 0)
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "Id");
    int ok = status == 200 && cJSON_IsString(id) && strcmp(id->valuestring, pin->id) == 0;
    cJSON_Delete(reply);
    if (!ok)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s' is pinned to %s, which the engine no longer has (HTTP %ld): "
                               "rebuild it with `pybox image build %s`; it is never re-pinned by itself",
                               pin->name, pin->id, status, pin->name);
    /* Someone gave the pinned name to another image: runs would still use the pinned ID,
     * but the engine's view of "this image" has been tampered with. Refuse, and say so. */
    char other[PYBOX_ID_MAX];
    int t = tag_points_to_pin(e, pin, other, sizeof other, err);
    if (t == -2)
        return -1;
    if (t < 0) {
        char tag[PYBOX_NAME_MAX + 32];
        tag_of(pin, tag, sizeof tag);
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0,
                               "image '%s': the engine's name %s now points to %.19s..., not the pinned %.19s...: "
                               "refused (rebuild with `pybox image build %s --force`)",
                               pin->name, tag, other, pin->id, pin->name);
    }
    return 0;
}

static int d_check(pybox_backend_t *be, const char *install_id, const pybox_pin_t *pin, char *problem, size_t len,
                   pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    problem[0] = '\0';
    char other[PYBOX_ID_MAX];
    pybox_error_t perr = {0};
    int t = tag_points_to_pin(e, pin, other, sizeof other, &perr);
    if (t == -2)
        return pybox_error_set(err, perr.kind, perr.errnum, "%s", perr.msg);
    if (t == 0) {
        snprintf(problem, len, "the engine's name for the image is missing (runs still use the pinned ID)");
        return 0;
    }
    cJSON *m = NULL;
    if (image_manifest(e, install_id, pin, &m, &perr) < 0) {
        snprintf(problem, len, "%s", perr.msg);
        return 0;
    }
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(m, "recipe_sha256");
    if (!cJSON_IsString(fp) || strcmp(fp->valuestring, pin->recipe_sha256) != 0)
        snprintf(problem, len, "the manifest inside the image does not name the pinned recipe");
    cJSON_Delete(m);
    return 0;
}

/* Untag only when the name is still ours; delete the image only when no other name uses
 * it, never forced (the engine refuses while a box uses it). The engine removes the image
 * with its last name: its reply then says the image was deleted. */
static int d_remove(pybox_backend_t *be, const pybox_pin_t *pin, pybox_image_removal_t *what, char *why, size_t len,
                    pybox_error_t *err)
{
    pybox_engine_t *e = pybox_docker_engine(be);
    why[0] = '\0';
    char tag[PYBOX_NAME_MAX + 32], path[PYBOX_ID_MAX + PYBOX_NAME_MAX + 64];
    tag_of(pin, tag, sizeof tag);
    long status = 0;
    cJSON *reply = NULL;
    char other[PYBOX_ID_MAX];
    pybox_error_t ignored = {0};
    bool deleted = false;
    if (tag_points_to_pin(e, pin, other, sizeof other, &ignored) == 1) {
        PYBOX_DOCKER_PATH(path, -1, "/images/%s", tag);
        if (pybox_engine_call(e, "DELETE", path, NULL, &status, &reply, err) < 0)
            return -1;
        deleted = status == 200 && reply_deleted(reply, pin->id);
        cJSON_Delete(reply);
    }
    int names = deleted ? -1 : image_names(e, pin->id, tag);
    if (deleted) {
        *what = PYBOX_IMAGE_REMOVED;
        return 0;
    }
    if (names != 1) {
        *what = names == -1 ? PYBOX_IMAGE_WAS_GONE : names == 0 ? PYBOX_IMAGE_KEPT_NAMED : PYBOX_IMAGE_KEPT_UNKNOWN;
        return 0;
    }
    PYBOX_DOCKER_PATH(path, -1, "/images/%s", pin->id);
    if (pybox_engine_call(e, "DELETE", path, NULL, &status, &reply, err) < 0)
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");
    if (status == 200 || status == 404) {
        *what = PYBOX_IMAGE_REMOVED;
    } else {
        *what = PYBOX_IMAGE_KEPT_IN_USE;
        snprintf(why, len, "%s", cJSON_IsString(m) ? m->valuestring : "in use");
    }
    cJSON_Delete(reply);
    return 0;
}

const pybox_image_ops_t pybox_docker_image_ops = {
    .import = d_import,
    .resolve = d_resolve,
    .check = d_check,
    .remove = d_remove,
};
