/* SPDX-License-Identifier: MIT */
/* libarchive opened on first use (see archive_api.h). */
#define PYBOX_ARCHIVE_API_IMPL
#include "archive_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* The name Debian's libarchive13 gives the library (its ABI). */
#define PYBOX_ARCHIVE_SONAME "libarchive.so.13"

struct pybox_archive_api pybox_archive_fn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256]; /* empty once the library is open */
static bool opened;

static void open_once(void)
{
    void *lib = dlopen(PYBOX_ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "%s", why != NULL ? why : PYBOX_ARCHIVE_SONAME);
        return;
    }
    /* Every function found, or none used: a partial table is never published. */
    struct pybox_archive_api t;
    void *f;
#define TAKE(name)                                                                                                     \
    if ((f = dlsym(lib, #name)) == NULL) {                                                                             \
        snprintf(failure, sizeof failure, "%s has no %s", PYBOX_ARCHIVE_SONAME, #name);                                \
        return;                                                                                                        \
    }                                                                                                                  \
    t.name = (__typeof__(t.name))f;
    TAKE(archive_read_new)
    TAKE(archive_write_new)
    TAKE(archive_entry_new)
    TAKE(archive_write_disk_new)
    TAKE(archive_entry_copy_pathname)
    TAKE(archive_entry_copy_stat)
    TAKE(archive_entry_filetype)
    TAKE(archive_entry_free)
    TAKE(archive_entry_hardlink)
    TAKE(archive_entry_pathname)
    TAKE(archive_entry_pathname_utf8)
    TAKE(archive_entry_set_filetype)
    TAKE(archive_entry_set_gid)
    TAKE(archive_entry_set_gname)
    TAKE(archive_entry_set_hardlink)
    TAKE(archive_entry_set_mtime)
    TAKE(archive_entry_set_pathname)
    TAKE(archive_entry_set_pathname_utf8)
    TAKE(archive_entry_set_perm)
    TAKE(archive_entry_set_size)
    TAKE(archive_entry_set_symlink)
    TAKE(archive_entry_set_uid)
    TAKE(archive_entry_set_uname)
    TAKE(archive_entry_size)
    TAKE(archive_entry_size_is_set)
    TAKE(archive_entry_symlink)
    TAKE(archive_errno)
    TAKE(archive_error_string)
    TAKE(archive_read_data)
    TAKE(archive_read_data_block)
    TAKE(archive_read_data_skip)
    TAKE(archive_read_free)
    TAKE(archive_read_next_header)
    TAKE(archive_read_open_fd)
    TAKE(archive_read_open_filename)
    TAKE(archive_read_open_memory)
    TAKE(archive_read_support_format_tar)
    TAKE(archive_read_support_format_zip)
    TAKE(archive_write_close)
    TAKE(archive_write_data)
    TAKE(archive_write_data_block)
    TAKE(archive_write_disk_set_options)
    TAKE(archive_write_finish_entry)
    TAKE(archive_write_free)
    TAKE(archive_write_header)
    TAKE(archive_write_open)
    TAKE(archive_write_open2)
    TAKE(archive_write_open_fd)
    TAKE(archive_write_set_bytes_in_last_block)
    TAKE(archive_write_set_format_option)
    TAKE(archive_write_set_format_pax_restricted)
#undef TAKE
    pybox_archive_fn = t; /* the library stays open for the process's life */
    opened = true;
}

bool pybox_archive_open(void)
{
    pthread_once(&once, open_once);
    return opened;
}

const char *pybox_archive_failure(void)
{
    pthread_once(&once, open_once);
    return failure;
}

const char *pybox_archive_why(void)
{
    const char *f = pybox_archive_failure();
    return f[0] != '\0' ? f : "out of memory";
}
