#define _GNU_SOURCE
#include "file.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

const char *bm_file_kind(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

bool bm_file_not_regular(int r)
{
    return r == -EISDIR || r == -ENODEV || r == -ELOOP;
}

/* The -errno and detail for a path of this mode that should have been a regular file. */
static int refuse_kind(mode_t mode)
{
    int r = S_ISDIR(mode) ? -EISDIR : S_ISLNK(mode) ? -ELOOP : -ENODEV;
    const char *kind = bm_file_kind(mode);
    return bm_error(r, "%s%s", strncmp(kind, "a", 1) == 0 ? "is " : "", kind);
}

const char *bm_file_size_text(size_t bytes, char *buf, size_t n)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, n, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, n, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, n, "%zu bytes", bytes);
    return buf;
}

int bm_file_open(int dir_fd, const char *path, bool nofollow, struct stat *ret_st)
{
    if (!path || !*path)
        return bm_error(-ENOENT, "empty file name");
    int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
    int fd = openat(dir_fd, path, flags);
    if (fd < 0) {
        int err = errno;
        struct stat st;
        /* O_NOFOLLOW on a symbolic link; a socket cannot be opened (ENXIO): say what they are */
        if ((err == ELOOP || err == ENXIO) &&
            fstatat(dir_fd, path, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) == 0 &&
            !S_ISREG(st.st_mode))
            return refuse_kind(st.st_mode);
        return bm_error(-err, "cannot read: %s", strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        return bm_error(-err, "cannot read: %s", strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse_kind(st.st_mode);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (ret_st)
        *ret_st = st;
    return fd;
}

int bm_file_read_fd(int fd, size_t max_bytes, char **ret_buf, size_t *ret_len)
{
    size_t cap = max_bytes < 4096 ? max_bytes + 1 : 4096, n = 0;
    char *buf = bm_malloc0(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) {
                free(buf);
                char sz[32];
                return bm_error(-EFBIG, "larger than %s",
                                bm_file_size_text(max_bytes, sz, sizeof(sz)));
            }
            cap = cap * 2 > max_bytes ? max_bytes + 1 : cap * 2;
            buf = bm_reallocarray(buf, cap + 1, 1);
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int err = errno;
            free(buf);
            return bm_error(-err, "cannot read: %s", strerror(err));
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    *ret_buf = buf;
    if (ret_len)
        *ret_len = n;
    return 0;
}

int bm_file_read(const char *path, size_t max_bytes, char **ret_buf, size_t *ret_len)
{
    int fd = bm_file_open(AT_FDCWD, path, false, NULL);
    if (fd < 0)
        return fd;
    int r = bm_file_read_fd(fd, max_bytes, ret_buf, ret_len);
    close(fd);
    return r;
}

int bm_file_read_text(const char *path, size_t max_bytes, char **ret_buf)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = bm_file_read(path, max_bytes, &buf, &len);
    if (r < 0)
        return bm_error_prefix(r, "%s", path);
    if (strlen(buf) != len)
        return bm_error(-EINVAL, "%s: contains a NUL byte", path);
    *ret_buf = TAKE_PTR(buf);
    return 0;
}

int bm_file_check_replaceable(const char *path)
{
    if (!path || !*path)
        return bm_error(-ENOENT, "empty file name");
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0; /* missing, or the write will say why it cannot */
    return S_ISREG(st.st_mode) ? 0 : refuse_kind(st.st_mode);
}

int bm_file_check_dir(const char *path)
{
    if (!path || !*path)
        return bm_error(-ENOENT, "empty file name");
    struct stat st;
    if (stat(path, &st) < 0)
        return bm_error(-errno, "%s", strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return bm_error(-ENOTDIR, "is %s, not a directory", bm_file_kind(st.st_mode));
    return 0;
}

int bm_file_write_atomic(const char *path, const char *tmp_template, const char *text)
{
    /* what it would replace must be a regular file (or nothing): never a device or a link */
    int rc = bm_file_check_replaceable(path);
    if (rc < 0)
        return rc;
    char *tmp = bm_strdup(tmp_template);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int r = -errno;
        free(tmp);
        return r;
    }
    /* held while writing: bm_file_atomic_cleanup() leaves a locked temporary file alone (a live
     * writer's); the lock goes with a killed writer's process */
    flock(fd, LOCK_EX | LOCK_NB);
    size_t len = strlen(text), off = 0;
    int r = 0;
    while (off < len && r == 0) {
        ssize_t k = write(fd, text + off, len - off);
        if (k < 0 && errno != EINTR)
            r = -errno;
        else if (k == 0)
            r = -EIO; /* a regular file that takes nothing: never spin */
        else if (k > 0)
            off += (size_t)k; /* a short write: the next one reports why (ENOSPC, EDQUOT) */
    }
    /* delayed allocation: ENOSPC, EDQUOT and EIO may only show at fsync or close */
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && fchmod(fd, 0644) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    if (r == 0) {
        char *dircopy = bm_strdup(path);
        int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dircopy);
    }
    free(tmp);
    return r;
}

int bm_file_atomic_cleanup(const char *tmp_template, unsigned min_age_s)
{
    _cleanup_free_ char *dircopy = bm_strdup(tmp_template), *basecopy = bm_strdup(tmp_template);
    const char *dir = dirname(dircopy), *base = basename(basecopy);
    size_t n = strlen(base);
    if (n < 6 || strcmp(base + n - 6, "XXXXXX") != 0)
        return -EINVAL;
    size_t prefix = n - 6;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (strlen(name) != n || strncmp(name, base, prefix) != 0)
            continue;
        bool random = true;
        for (size_t i = prefix; i < n; i++)
            random &= isascii((unsigned char)name[i]) && isalnum((unsigned char)name[i]);
        if (!random)
            continue;
        int fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        /* a regular file no writer holds and nobody wrote for min_age_s: a killed writer's */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime >= (time_t)min_age_s &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(dirfd(d), name, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}
