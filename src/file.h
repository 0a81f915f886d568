/* Opening the files users name: every path the program reads (policy, state, --proc files, web
 * config, TLS files, spool entries) is opened without blocking, checked with fstat() to be a
 * regular file, and read up to a cap whatever its size says; every file it replaces is checked
 * to be a regular file first and written atomically. A FIFO never hangs a command, a device is
 * never read or replaced. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* What a file of this mode is, for messages: "a directory", "a FIFO", "a character device",
 * "a block device", "a socket", "a symbolic link", "a regular file". */
const char *bm_file_kind(mode_t mode);

/* Whether r (from the functions below) says the path is not a regular file: -EISDIR (a
 * directory), -ENODEV (a FIFO, device or socket) or -ELOOP (a symbolic link, when refused). */
bool bm_file_not_regular(int r);

/* Opens path (relative to dir_fd unless absolute; AT_FDCWD for the working directory) for
 * reading: O_NONBLOCK (a FIFO does not block the open), O_NOCTTY, O_CLOEXEC, and O_NOFOLLOW
 * when nofollow (a symbolic link is refused). Checks with fstat() that what was opened is a
 * regular file, then clears O_NONBLOCK. Returns the descriptor (*ret_st filled when not NULL),
 * or -errno with the detail (bm_error(), not naming the path): "is a directory" (-EISDIR),
 * "is a FIFO" / "is a character device" / ... (-ENODEV), "is a symbolic link" (-ELOOP), or
 * "cannot read: REASON" (-ENOENT, -EACCES, ...). */
int bm_file_open(int dir_fd, const char *path, bool nofollow, struct stat *ret_st);

/* Reads fd to its end, at most max_bytes, whatever fstat() says (a /proc file says 0, a file
 * may grow while read). Returns 0 with *ret_buf (caller frees) NUL-terminated and *ret_len its
 * true length (larger than strlen() when the data has NUL bytes: a parser that must read the
 * whole file checks), or -EFBIG ("larger than N KiB/MiB") or -errno ("cannot read: REASON"). */
int bm_file_read_fd(int fd, size_t max_bytes, char **ret_buf, size_t *ret_len);

/* bm_file_open(AT_FDCWD, path, false) and bm_file_read_fd(). ret_len may be NULL. An empty
 * path is -ENOENT "empty file name". The detail never names path: callers say "PATH: DETAIL". */
int bm_file_read(const char *path, size_t max_bytes, char **ret_buf, size_t *ret_len);

/* bm_file_read() of a text file whose parser reads to the first NUL byte (/proc files): one
 * with a NUL byte is refused (-EINVAL "contains a NUL byte": what follows it would be ignored).
 * Unlike bm_file_read(), the detail of every failure names the path ("PATH: DETAIL"). */
int bm_file_read_text(const char *path, size_t max_bytes, char **ret_buf);

/* For writers that replace path (rename over it): 0 when path does not exist or is a regular
 * file (not following a symbolic link: renaming would replace the link, not what it points
 * to, or cannot be looked at: the write says why); -ELOOP "is a symbolic link", -EISDIR,
 * -ENODEV as bm_file_open(). An empty path is -ENOENT. */
int bm_file_check_replaceable(const char *path);

/* 0 when path is a directory (following symbolic links), else -ENOTDIR ("is a FIFO", "is a
 * regular file", ...), -ENOENT or -errno with the detail. */
int bm_file_check_dir(const char *path);

/* "N MiB", "N KiB" or "N bytes" into buf (for "larger than ..."). Returns buf. */
const char *bm_file_size_text(size_t bytes, char *buf, size_t n);

/* Replaces path with text atomically: writes a temporary file created from tmp_template (in
 * the same directory, ending in XXXXXX; two writers never share one), locked (flock) while it
 * is written, fsyncs it, makes it mode 0644, closes it and renames it over path, then fsyncs
 * the directory. A reader sees the old or the new file, never a torn one. Returns 0 or -errno
 * (a failed write, short write, fsync or close included: ENOSPC, EDQUOT, EIO, EROFS, EACCES);
 * on failure path is untouched and the temporary file removed. Only a writer killed before
 * the rename leaves its temporary file behind: see bm_file_atomic_cleanup(). When path exists
 * and is not a regular file (a symbolic link, device, FIFO, directory:
 * bm_file_check_replaceable()) nothing is written: -ELOOP, -ENODEV, -EISDIR with the detail
 * "is a ...". */
int bm_file_write_atomic(const char *path, const char *tmp_template, const char *text);

/* Removes what writers killed inside bm_file_write_atomic(tmp_template) left: regular files
 * named like tmp_template with XXXXXX replaced by six letters or digits, that no writer holds
 * locked and that nobody wrote to for min_age_s seconds (mtime). Returns how many were
 * removed, or -errno when the directory cannot be read (-EINVAL: not a template). */
int bm_file_atomic_cleanup(const char *tmp_template, unsigned min_age_s);
