/* SPDX-License-Identifier: MIT */
/* The installation's receipt key: an Ed25519 key pair (OpenSSL libcrypto) kept in the
 * state directory as receipt-key.pem (PKCS #8 PEM), readable by its owner only. Its id
 * is the first 32 hex digits of the SHA-256 of the raw 32-byte public key. A public key
 * alone can be read from a PEM file (SubjectPublicKeyInfo, what `pybox key` prints). */
#ifndef PYBOX_KEY_H
#define PYBOX_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "error.h"
#include "state.h"

#define PYBOX_KEY_FILE "receipt-key.pem"
/* Hex digits of a key's id. */
#define PYBOX_KEY_ID_LEN 32

typedef struct pybox_key pybox_key_t;

/* The installation's key. With create, one is made when there is none (concurrent
 * first makers agree on one: it is linked into place, never replaced). Refused (-1):
 * a key file that is not a regular file, a link, not owned by this user, readable or
 * writable by group or others, or not an Ed25519 private key. Returns 1 with *out (the
 * caller frees it with pybox_key_free), 0 when there is none and create is false. */
int pybox_key_load(const pybox_state_t *st, bool create, pybox_key_t **out, pybox_error_t *err);

/* A public key from PEM text (len bytes) or a PEM file: 0 with *out, else -1. */
int pybox_key_from_pem(const char *pem, size_t len, pybox_key_t **out, pybox_error_t *err);
int pybox_key_read_public(const char *path, pybox_key_t **out, pybox_error_t *err);

/* The key's id: PYBOX_KEY_ID_LEN hex digits. */
const char *pybox_key_id(const pybox_key_t *k);
/* Whether it can sign (it holds the private half). */
bool pybox_key_private(const pybox_key_t *k);

/* Append the public half as PEM. */
int pybox_key_public_pem(const pybox_key_t *k, pybox_buf_t *out, pybox_error_t *err);

/* Sign len bytes: the 64-byte signature into sig. */
int pybox_key_sign(const pybox_key_t *k, const void *data, size_t len, unsigned char sig[64], pybox_error_t *err);
/* Whether sig is k's signature of the bytes. */
bool pybox_key_verify(const pybox_key_t *k, const void *data, size_t len, const unsigned char sig[64]);

void pybox_key_free(pybox_key_t *k);
void pybox_key_freep(pybox_key_t **k);

#endif
