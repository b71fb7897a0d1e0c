/* SPDX-License-Identifier: MIT */
/* The installation's receipt key (see key.h). */
#include "key.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"
#include "util.h"

/* A key file is a few hundred bytes; anything this large is not one. */
#define KEY_FILE_MAX 16384

struct pybox_key {
    EVP_PKEY *pkey;
    bool private_half;
    char id[PYBOX_KEY_ID_LEN + 1];
};

void pybox_key_free(pybox_key_t *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

void pybox_key_freep(pybox_key_t **k)
{
    pybox_key_free(*k);
    *k = NULL;
}

const char *pybox_key_id(const pybox_key_t *k)
{
    return k->id;
}

bool pybox_key_private(const pybox_key_t *k)
{
    return k->private_half;
}

/* OpenSSL's own reason for the last failure, for a message. */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0)
        return "no reason given";
    ERR_error_string_n(e, buf, len);
    return buf;
}

/* Never ask a terminal for a passphrase: a key PyBox reads has none. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* Wrap an Ed25519 key and work out its id. */
static int wrap(EVP_PKEY *pkey, bool private_half, pybox_key_t **out, const char *what, pybox_error_t *err)
{
    if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(pkey);
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s: not an Ed25519 key", what);
    }
    unsigned char raw[32];
    size_t rl = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(pkey, raw, &rl) != 1 || rl != sizeof raw) {
        EVP_PKEY_free(pkey);
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s: its public half cannot be read", what);
    }
    pybox_key_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        EVP_PKEY_free(pkey);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "calloc");
    }
    char digest[65];
    pybox_sha256_hex(raw, sizeof raw, digest);
    memcpy(k->id, digest, PYBOX_KEY_ID_LEN);
    k->id[PYBOX_KEY_ID_LEN] = '\0';
    k->pkey = pkey;
    k->private_half = private_half;
    *out = k;
    return 0;
}

int pybox_key_from_pem(const char *pem, size_t len, pybox_key_t **out, pybox_error_t *err)
{
    if (len > KEY_FILE_MAX)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "a public key: larger than %d bytes", KEY_FILE_MAX);
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (bio == NULL)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, ENOMEM, "BIO_new_mem_buf");
    EVP_PKEY *pkey = PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        char why[256];
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "no PEM public key (%s)", ssl_reason(why, sizeof why));
    }
    return wrap(pkey, false, out, "the public key", err);
}

int pybox_key_read_public(const char *path, pybox_key_t **out, pybox_error_t *err)
{
    char shown[160];
    pybox_escape_short(shown, sizeof shown, path, 96);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_file(path, O_NOCTTY, KEY_FILE_MAX, &text, &len, &over, err) < 0)
        return err->kind != PYBOX_ERR_NONE ? -1 : pybox_error_set(err, PYBOX_ERR_USAGE, errno, "open(%s)", shown);
    if (over)
        return pybox_error_set(err, PYBOX_ERR_USAGE, 0, "%s: larger than a public key (%d bytes)", shown, KEY_FILE_MAX);
    if (pybox_key_from_pem(text, len, out, err) < 0) {
        pybox_error_prefix(err, "%s: ", shown);
        return -1;
    }
    return 0;
}

/* Read the private key at path: 1 loaded, 0 not there, -1 refused or failed. */

/* The private key in a PEM text. The keys PyBox writes (PKCS#8, Ed25519) are read as
 * their structure says, straight into a raw Ed25519 key: libcrypto's general reader asks
 * every decoder it has, which costs more than the rest of a receipt's signing. Any other
 * PEM goes to the general reader, whose errors are the ones reported. */
static EVP_PKEY *read_private(const char *text, size_t len)
{
    EVP_PKEY *pkey = NULL;
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    /* the DER in secure memory, cleared when freed (as the structure read from it is) */
    unsigned char *der = NULL;
    long der_len = 0;
    PKCS8_PRIV_KEY_INFO *p8 = NULL;
    if (bio != NULL &&
        PEM_bytes_read_bio_secmem(&der, &der_len, NULL, PEM_STRING_PKCS8INF, bio, no_passphrase, NULL) == 1) {
        const unsigned char *at = der;
        p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &at, der_len);
        OPENSSL_secure_clear_free(der, (size_t)der_len);
    }
    const ASN1_OBJECT *oid = NULL;
    const unsigned char *inner = NULL;
    int inner_len = 0;
    const X509_ALGOR *alg = NULL;
    if (p8 != NULL && PKCS8_pkey_get0(&oid, &inner, &inner_len, &alg, p8) == 1 && OBJ_obj2nid(oid) == NID_ED25519) {
        ASN1_OCTET_STRING *raw = d2i_ASN1_OCTET_STRING(NULL, &inner, inner_len);
        if (raw != NULL)
            pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, ASN1_STRING_get0_data(raw),
                                                (size_t)ASN1_STRING_length(raw));
        if (raw != NULL)
            OPENSSL_cleanse(raw->data, (size_t)raw->length);
        ASN1_OCTET_STRING_free(raw);
    }
    PKCS8_PRIV_KEY_INFO_free(p8);
    ERR_clear_error();
    if (pkey == NULL && bio != NULL && BIO_reset(bio) == 1)
        pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
    BIO_free(bio);
    return pkey;
}

static int load_private(const char *path, pybox_key_t **out, pybox_error_t *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno == ELOOP)
            return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is a symbolic link: refused", path);
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", path);
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, errno, "fstat(%s)", path);
    if (!S_ISREG(sb.st_mode))
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is not a regular file: refused", path);
    if (sb.st_uid != geteuid())
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s belongs to uid %u, not to this user (uid %u): refused",
                               path, (unsigned)sb.st_uid, (unsigned)geteuid());
    if ((sb.st_mode & 077) != 0)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0,
                               "%s can be read or written by group or others (mode %04o): refused; only its owner "
                               "may (chmod 600 it, or remove it to make a new key)",
                               path, (unsigned)(sb.st_mode & 07777));
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    bool over = false;
    if (pybox_read_bounded(fd, KEY_FILE_MAX, &text, &len, &over, err) < 0)
        return -1;
    if (over) {
        OPENSSL_cleanse(text, len);
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s is larger than a key (%d bytes)", path, KEY_FILE_MAX);
    }
    EVP_PKEY *pkey = read_private(text, len);
    OPENSSL_cleanse(text, len);
    if (pkey == NULL) {
        char why[256];
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s holds no PEM private key (%s)", path,
                               ssl_reason(why, sizeof why));
    }
    if (wrap(pkey, true, out, path, err) < 0)
        return -1;
    return 1;
}

/* Make a key and link it into place at path, unless one is there already. */
static int make_key(const char *path, pybox_error_t *err)
{
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    bool made = pc != NULL && EVP_PKEY_keygen_init(pc) == 1 && EVP_PKEY_keygen(pc, &pkey) == 1;
    EVP_PKEY_CTX_free(pc);
    char why[256];
    if (!made)
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "making an Ed25519 key: %s", ssl_reason(why, sizeof why));
    BIO *mem = BIO_new(BIO_s_mem());
    bool written = mem != NULL && PEM_write_bio_PrivateKey(mem, pkey, NULL, NULL, 0, NULL, NULL) == 1;
    EVP_PKEY_free(pkey);
    char *pem = NULL;
    long plen = written ? BIO_get_mem_data(mem, &pem) : 0;
    if (!written || plen <= 0) {
        BIO_free(mem);
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the key as PEM: %s", ssl_reason(why, sizeof why));
    }
    char rnd[17], tmp[PATH_MAX];
    int rc = pybox_random_hex(8, rnd, err);
    if (rc == 0 && pybox_fmt(tmp, sizeof tmp, "%s.new-%s", path, rnd) < 0)
        rc = pybox_error_set(err, PYBOX_ERR_STATE, ENAMETOOLONG, "%s", path);
    int fd = rc == 0 ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    if (rc == 0 && fd < 0)
        rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "open(%s)", tmp);
    if (rc == 0 && (pybox_write_all(fd, pem, (size_t)plen) < 0 || fsync(fd) < 0))
        rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "write(%s)", tmp);
    OPENSSL_cleanse(pem, (size_t)plen);
    BIO_free(mem);
    bool created = fd >= 0;
    if (created)
        close(fd);
    if (rc == 0) {
        /* link() never replaces: of concurrent first makers, one key wins and all use it */
        if (link(tmp, path) < 0 && errno != EEXIST)
            rc = pybox_error_set(err, PYBOX_ERR_STATE, errno, "link(%s)", path);
    }
    if (created)
        unlink(tmp);
    return rc;
}

int pybox_key_load(const pybox_state_t *st, bool create, pybox_key_t **out, pybox_error_t *err)
{
    char path[PATH_MAX];
    if (pybox_state_path(st, PYBOX_KEY_FILE, path, sizeof path, err) < 0)
        return -1;
    int r = load_private(path, out, err);
    if (r != 0 || !create)
        return r;
    if (make_key(path, err) < 0)
        return -1;
    r = load_private(path, out, err);
    return r != 0 ? r : pybox_error_set(err, PYBOX_ERR_STATE, 0, "%s vanished after it was made", path);
}

int pybox_key_public_pem(const pybox_key_t *k, pybox_buf_t *out, pybox_error_t *err)
{
    BIO *mem = BIO_new(BIO_s_mem());
    char *pem = NULL;
    long n = mem != NULL && PEM_write_bio_PUBKEY(mem, k->pkey) == 1 ? BIO_get_mem_data(mem, &pem) : 0;
    int rc = n > 0 ? pybox_buf_append(out, pem, (size_t)n) : -1;
    BIO_free(mem);
    if (rc < 0) {
        char why[256];
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "writing the public key as PEM: %s",
                               ssl_reason(why, sizeof why));
    }
    return 0;
}

int pybox_key_sign(const pybox_key_t *k, const void *data, size_t len, unsigned char sig[64], pybox_error_t *err)
{
    if (!k->private_half)
        return pybox_error_set(err, PYBOX_ERR_STATE, 0, "a public key cannot sign");
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t sl = 64;
    /* Ed25519 hashes the whole message itself: no digest of PyBox's choosing (NULL) */
    bool ok = md != NULL && EVP_DigestSignInit(md, NULL, NULL, NULL, k->pkey) == 1 &&
              EVP_DigestSign(md, sig, &sl, data, len) == 1 && sl == 64;
    EVP_MD_CTX_free(md);
    if (!ok) {
        char why[256];
        return pybox_error_set(err, PYBOX_ERR_SYSTEM, 0, "signing: %s", ssl_reason(why, sizeof why));
    }
    return 0;
}

bool pybox_key_verify(const pybox_key_t *k, const void *data, size_t len, const unsigned char sig[64])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, k->pkey) == 1 &&
              EVP_DigestVerify(md, sig, 64, data, len) == 1;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}
