/* SPDX-License-Identifier: MIT */
/* The Docker Engine API client: HTTP over the engine's Unix socket with libcurl, JSON
 * with cJSON, the API version negotiated at open, and attach as the raw upgraded
 * stream. Engine replies are bounded
 * (limits.h). The engine's own error message is carried into PyBox's error as data;
 * PyBox never decides anything by parsing the engine's English. */
#ifndef PYBOX_DOCKER_ENGINE_H
#define PYBOX_DOCKER_ENGINE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../buf.h"
#include "../error.h"

/* The API version PyBox speaks; the engine must support it (negotiated at open). */
#define PYBOX_ENGINE_API "1.41"

typedef struct pybox_engine pybox_engine_t;

/* Connect to the engine named by docker_host ("unix:///path"; NULL or "" means the
 * DOCKER_HOST environment variable, then /var/run/docker.sock) and negotiate the API
 * version. The caller frees the engine with pybox_engine_free. */
int pybox_engine_open(const char *docker_host, pybox_engine_t **out, pybox_error_t *err);
void pybox_engine_free(pybox_engine_t *e);
void pybox_engine_freep(pybox_engine_t **e);

const char *pybox_engine_socket(const pybox_engine_t *e);
/* The engine's own version string and API range, as it reported them at open. */
const char *pybox_engine_version(const pybox_engine_t *e);

/* One request. path starts with "/" and is appended to "/v<API>"; body may be NULL.
 * On a completed exchange returns 0 with *status set and *reply the parsed JSON body
 * (NULL when the body was empty; the caller frees it). Transport failures and replies
 * that are not JSON return -1. */
int pybox_engine_call(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, long *status,
                      cJSON **reply, pybox_error_t *err);

/* The same with its own time bound (a request that blocks in the engine, like wait).
 * Running out of time is a PYBOX_ERR_ENGINE error with errno ETIMEDOUT. */
int pybox_engine_call_timeout(pybox_engine_t *e, const char *method, const char *path, const cJSON *body,
                              long timeout_ms, long *status, cJSON **reply, pybox_error_t *err);

/* The same, for replies that are not one JSON document (streams of JSON lines). */
int pybox_engine_call_raw(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, long *status,
                          pybox_buf_t *reply, pybox_error_t *err);

/* PUT bytes held in memory (e.g. a tar into a box) and read the JSON reply, if any. */
int pybox_engine_put(pybox_engine_t *e, const char *path, const void *data, size_t len, const char *content_type,
                     long *status, cJSON **reply, pybox_error_t *err);

/* POST a file's content (e.g. a tar for image import) and read the raw reply. */
int pybox_engine_upload(pybox_engine_t *e, const char *path, int fd, const char *content_type, long *status,
                        pybox_buf_t *reply, pybox_error_t *err);

/* A reply's body as the calls above take it: JSON (*reply NULL when the body is empty;
 * the caller frees it); an error reply (HTTP 400 and above) that is not JSON becomes
 * {"message": its text, made valid UTF-8}; any other reply that is not JSON is -1. */
int pybox_engine_reply_parse(const char *method, const char *path, long status, const char *body, size_t len,
                             cJSON **reply, pybox_error_t *err);

/* The answer to GET /_ping (its status, its headers as one NUL-terminated text, its body)
 * judged as pybox_engine_open does: 0 with "<Server> (API <Api-Version>)" in version when
 * the engine speaks PyBox's API, else -1 with the engine's own message or what is
 * missing. socket_path names the engine in errors. */
int pybox_engine_negotiate(const char *socket_path, long status, const char *head, const char *body, size_t body_len,
                           char *version, size_t vlen, pybox_error_t *err);

/* Fill err from an engine error reply: "<what>: engine said (HTTP n): <message>". */
int pybox_engine_fail(pybox_error_t *err, const char *what, long status, const cJSON *reply);

/* A call whose answer must have one of the statuses ok (0-ended): *status gets it and
 * *reply (NULL: none wanted) its body; else -1 with the engine's own message for what
 * (pybox_engine_fail). */
int pybox_engine_call_ok(pybox_engine_t *e, const char *method, const char *path, const cJSON *body, const long *ok,
                         const char *what, long *status, cJSON **reply, pybox_error_t *err);

/* GET path, whose answer must be 200: *reply gets it; else -1 with the engine's own
 * message for what (pybox_engine_fail) and *reply NULL. */
int pybox_engine_get_200(pybox_engine_t *e, const char *path, const char *what, cJSON **reply, pybox_error_t *err);

/* URL-escape s (for query parameters). The caller frees the result. */
char *pybox_engine_escape(pybox_engine_t *e, const char *s);

/* An upgraded raw stream (attach). */
typedef struct pybox_engine_stream pybox_engine_stream_t;

/* POST path with Connection: Upgrade / Upgrade: tcp; succeeds only on 101. Bytes that
 * arrived after the headers are kept and returned first by pybox_engine_stream_read. */
int pybox_engine_upgrade(pybox_engine_t *e, const char *path, pybox_engine_stream_t **out, pybox_error_t *err);
void pybox_engine_stream_free(pybox_engine_stream_t *s);
/* The head of an answer to an upgrade request, from the bytes received so far (answer,
 * NUL-terminated): -1 while the head is not whole; else 0 with its status ("HTTP/1.x NNN";
 * -1 when it is not HTTP), the head's length and, unless it is 101, the Content-Length of
 * the error body that follows (0 when none is given). */
int pybox_engine_upgrade_head(const char *answer, long *status, size_t *head_len, size_t *body_len);
int pybox_engine_stream_fd(const pybox_engine_stream_t *s);
/* Non-blocking read. Returns bytes read, 0 at end of stream, -1 with errno EAGAIN when
 * nothing is ready, -1 with err filled on failure. */
ssize_t pybox_engine_stream_read(pybox_engine_stream_t *s, void *buf, size_t len, pybox_error_t *err);
/* Non-blocking write: bytes written, or -1 (errno EAGAIN when the socket is full). */
ssize_t pybox_engine_stream_write(pybox_engine_stream_t *s, const void *buf, size_t len, pybox_error_t *err);
/* Half-close: the box sees end of file on stdin. */
int pybox_engine_stream_close_write(pybox_engine_stream_t *s, pybox_error_t *err);

#endif
