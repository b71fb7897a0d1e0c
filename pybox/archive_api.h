/* SPDX-License-Identifier: MIT */
/* libarchive, opened when PyBox first makes an archive object rather than when it starts:
 * with what it links (libxml2, ICU, the C++ runtime, compressors) it costs every process
 * milliseconds, and most runs (a program with no files in or out) never use it. Include
 * this instead of <archive.h> and <archive_entry.h>; calls read as libarchive's own. An
 * archive object is made only by the four constructors, which return NULL (as when out
 * of memory) when the library cannot be opened, and every caller checks for NULL before
 * any other call, so none meets an unopened library; pybox_archive_why() says which. */
#ifndef PYBOX_ARCHIVE_API_H
#define PYBOX_ARCHIVE_API_H

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>

#include "dl.h"

/* The libarchive functions PyBox calls, listed once (dl.h): the table, the names looked
 * up, and below the calls read as libarchive's own. */
#define PYBOX_ARCHIVE_FUNCS(X)                                                                                         \
    X(archive_read_new)                                                                                                \
    X(archive_write_new)                                                                                               \
    X(archive_entry_new)                                                                                               \
    X(archive_write_disk_new)                                                                                          \
    X(archive_entry_copy_pathname)                                                                                     \
    X(archive_entry_copy_stat)                                                                                         \
    X(archive_entry_filetype)                                                                                          \
    X(archive_entry_free)                                                                                              \
    X(archive_entry_hardlink)                                                                                          \
    X(archive_entry_pathname)                                                                                          \
    X(archive_entry_pathname_utf8)                                                                                     \
    X(archive_entry_set_filetype)                                                                                      \
    X(archive_entry_set_gid)                                                                                           \
    X(archive_entry_set_gname)                                                                                         \
    X(archive_entry_set_hardlink)                                                                                      \
    X(archive_entry_set_mtime)                                                                                         \
    X(archive_entry_set_pathname)                                                                                      \
    X(archive_entry_set_pathname_utf8)                                                                                 \
    X(archive_entry_set_perm)                                                                                          \
    X(archive_entry_set_size)                                                                                          \
    X(archive_entry_set_symlink)                                                                                       \
    X(archive_entry_set_uid)                                                                                           \
    X(archive_entry_set_uname)                                                                                         \
    X(archive_entry_size)                                                                                              \
    X(archive_entry_size_is_set)                                                                                       \
    X(archive_entry_symlink)                                                                                           \
    X(archive_errno)                                                                                                   \
    X(archive_error_string)                                                                                            \
    X(archive_read_data)                                                                                               \
    X(archive_read_data_block)                                                                                         \
    X(archive_read_data_skip)                                                                                          \
    X(archive_read_free)                                                                                               \
    X(archive_read_next_header)                                                                                        \
    X(archive_read_open_fd)                                                                                            \
    X(archive_read_open_filename)                                                                                      \
    X(archive_read_open_memory)                                                                                        \
    X(archive_read_support_format_tar)                                                                                 \
    X(archive_read_support_format_zip)                                                                                 \
    X(archive_write_close)                                                                                             \
    X(archive_write_data)                                                                                              \
    X(archive_write_data_block)                                                                                        \
    X(archive_write_disk_set_options)                                                                                  \
    X(archive_write_finish_entry)                                                                                      \
    X(archive_write_free)                                                                                              \
    X(archive_write_header)                                                                                            \
    X(archive_write_open)                                                                                              \
    X(archive_write_open2)                                                                                             \
    X(archive_write_open_fd)                                                                                           \
    X(archive_write_set_bytes_in_last_block)                                                                           \
    X(archive_write_set_format_option)                                                                                 \
    X(archive_write_set_format_pax_restricted)
struct pybox_archive_api {
    PYBOX_ARCHIVE_FUNCS(PYBOX_DL_FIELD)
};
extern struct pybox_archive_api pybox_archive_fn;

/* Opens libarchive once per process (thread-safe); false when it cannot be, with why in
 * pybox_archive_failure(). */
bool pybox_archive_open(void);
const char *pybox_archive_failure(void);
/* Why a constructor returned NULL: the library's failure to open, else "out of memory". */
const char *pybox_archive_why(void);

#ifndef PYBOX_ARCHIVE_API_IMPL
#define archive_read_new() (pybox_archive_open() ? pybox_archive_fn.archive_read_new() : NULL)
#define archive_write_new() (pybox_archive_open() ? pybox_archive_fn.archive_write_new() : NULL)
#define archive_entry_new() (pybox_archive_open() ? pybox_archive_fn.archive_entry_new() : NULL)
#define archive_write_disk_new() (pybox_archive_open() ? pybox_archive_fn.archive_write_disk_new() : NULL)
#define archive_entry_copy_pathname (pybox_archive_fn.archive_entry_copy_pathname)
#define archive_entry_copy_stat (pybox_archive_fn.archive_entry_copy_stat)
#define archive_entry_filetype (pybox_archive_fn.archive_entry_filetype)
#define archive_entry_free (pybox_archive_fn.archive_entry_free)
#define archive_entry_hardlink (pybox_archive_fn.archive_entry_hardlink)
#define archive_entry_pathname (pybox_archive_fn.archive_entry_pathname)
#define archive_entry_pathname_utf8 (pybox_archive_fn.archive_entry_pathname_utf8)
#define archive_entry_set_filetype (pybox_archive_fn.archive_entry_set_filetype)
#define archive_entry_set_gid (pybox_archive_fn.archive_entry_set_gid)
#define archive_entry_set_gname (pybox_archive_fn.archive_entry_set_gname)
#define archive_entry_set_hardlink (pybox_archive_fn.archive_entry_set_hardlink)
#define archive_entry_set_mtime (pybox_archive_fn.archive_entry_set_mtime)
#define archive_entry_set_pathname (pybox_archive_fn.archive_entry_set_pathname)
#define archive_entry_set_pathname_utf8 (pybox_archive_fn.archive_entry_set_pathname_utf8)
#define archive_entry_set_perm (pybox_archive_fn.archive_entry_set_perm)
#define archive_entry_set_size (pybox_archive_fn.archive_entry_set_size)
#define archive_entry_set_symlink (pybox_archive_fn.archive_entry_set_symlink)
#define archive_entry_set_uid (pybox_archive_fn.archive_entry_set_uid)
#define archive_entry_set_uname (pybox_archive_fn.archive_entry_set_uname)
#define archive_entry_size (pybox_archive_fn.archive_entry_size)
#define archive_entry_size_is_set (pybox_archive_fn.archive_entry_size_is_set)
#define archive_entry_symlink (pybox_archive_fn.archive_entry_symlink)
#define archive_errno (pybox_archive_fn.archive_errno)
#define archive_error_string (pybox_archive_fn.archive_error_string)
#define archive_read_data (pybox_archive_fn.archive_read_data)
#define archive_read_data_block (pybox_archive_fn.archive_read_data_block)
#define archive_read_data_skip (pybox_archive_fn.archive_read_data_skip)
#define archive_read_free (pybox_archive_fn.archive_read_free)
#define archive_read_next_header (pybox_archive_fn.archive_read_next_header)
#define archive_read_open_fd (pybox_archive_fn.archive_read_open_fd)
#define archive_read_open_filename (pybox_archive_fn.archive_read_open_filename)
#define archive_read_open_memory (pybox_archive_fn.archive_read_open_memory)
#define archive_read_support_format_tar (pybox_archive_fn.archive_read_support_format_tar)
#define archive_read_support_format_zip (pybox_archive_fn.archive_read_support_format_zip)
#define archive_write_close (pybox_archive_fn.archive_write_close)
#define archive_write_data (pybox_archive_fn.archive_write_data)
#define archive_write_data_block (pybox_archive_fn.archive_write_data_block)
#define archive_write_disk_set_options (pybox_archive_fn.archive_write_disk_set_options)
#define archive_write_finish_entry (pybox_archive_fn.archive_write_finish_entry)
#define archive_write_free (pybox_archive_fn.archive_write_free)
#define archive_write_header (pybox_archive_fn.archive_write_header)
#define archive_write_open (pybox_archive_fn.archive_write_open)
#define archive_write_open2 (pybox_archive_fn.archive_write_open2)
#define archive_write_open_fd (pybox_archive_fn.archive_write_open_fd)
#define archive_write_set_bytes_in_last_block (pybox_archive_fn.archive_write_set_bytes_in_last_block)
#define archive_write_set_format_option (pybox_archive_fn.archive_write_set_format_option)
#define archive_write_set_format_pax_restricted (pybox_archive_fn.archive_write_set_format_pax_restricted)
#endif

#endif
