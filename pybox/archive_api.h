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

/* The libarchive functions PyBox calls, each with its declared type. */
struct pybox_archive_api {
    __typeof__(archive_read_new) *archive_read_new;
    __typeof__(archive_write_new) *archive_write_new;
    __typeof__(archive_entry_new) *archive_entry_new;
    __typeof__(archive_write_disk_new) *archive_write_disk_new;
    __typeof__(archive_entry_copy_pathname) *archive_entry_copy_pathname;
    __typeof__(archive_entry_copy_stat) *archive_entry_copy_stat;
    __typeof__(archive_entry_filetype) *archive_entry_filetype;
    __typeof__(archive_entry_free) *archive_entry_free;
    __typeof__(archive_entry_hardlink) *archive_entry_hardlink;
    __typeof__(archive_entry_pathname) *archive_entry_pathname;
    __typeof__(archive_entry_pathname_utf8) *archive_entry_pathname_utf8;
    __typeof__(archive_entry_set_filetype) *archive_entry_set_filetype;
    __typeof__(archive_entry_set_gid) *archive_entry_set_gid;
    __typeof__(archive_entry_set_gname) *archive_entry_set_gname;
    __typeof__(archive_entry_set_hardlink) *archive_entry_set_hardlink;
    __typeof__(archive_entry_set_mtime) *archive_entry_set_mtime;
    __typeof__(archive_entry_set_pathname) *archive_entry_set_pathname;
    __typeof__(archive_entry_set_pathname_utf8) *archive_entry_set_pathname_utf8;
    __typeof__(archive_entry_set_perm) *archive_entry_set_perm;
    __typeof__(archive_entry_set_size) *archive_entry_set_size;
    __typeof__(archive_entry_set_symlink) *archive_entry_set_symlink;
    __typeof__(archive_entry_set_uid) *archive_entry_set_uid;
    __typeof__(archive_entry_set_uname) *archive_entry_set_uname;
    __typeof__(archive_entry_size) *archive_entry_size;
    __typeof__(archive_entry_size_is_set) *archive_entry_size_is_set;
    __typeof__(archive_entry_symlink) *archive_entry_symlink;
    __typeof__(archive_errno) *archive_errno;
    __typeof__(archive_error_string) *archive_error_string;
    __typeof__(archive_read_data) *archive_read_data;
    __typeof__(archive_read_data_block) *archive_read_data_block;
    __typeof__(archive_read_data_skip) *archive_read_data_skip;
    __typeof__(archive_read_free) *archive_read_free;
    __typeof__(archive_read_next_header) *archive_read_next_header;
    __typeof__(archive_read_open_fd) *archive_read_open_fd;
    __typeof__(archive_read_open_filename) *archive_read_open_filename;
    __typeof__(archive_read_open_memory) *archive_read_open_memory;
    __typeof__(archive_read_support_format_tar) *archive_read_support_format_tar;
    __typeof__(archive_read_support_format_zip) *archive_read_support_format_zip;
    __typeof__(archive_write_close) *archive_write_close;
    __typeof__(archive_write_data) *archive_write_data;
    __typeof__(archive_write_data_block) *archive_write_data_block;
    __typeof__(archive_write_disk_set_options) *archive_write_disk_set_options;
    __typeof__(archive_write_finish_entry) *archive_write_finish_entry;
    __typeof__(archive_write_free) *archive_write_free;
    __typeof__(archive_write_header) *archive_write_header;
    __typeof__(archive_write_open) *archive_write_open;
    __typeof__(archive_write_open2) *archive_write_open2;
    __typeof__(archive_write_open_fd) *archive_write_open_fd;
    __typeof__(archive_write_set_bytes_in_last_block) *archive_write_set_bytes_in_last_block;
    __typeof__(archive_write_set_format_option) *archive_write_set_format_option;
    __typeof__(archive_write_set_format_pax_restricted) *archive_write_set_format_pax_restricted;
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
