/* The one way paths are opened and read (src/file.c): what is not a regular file is refused
 * by kind without blocking, a file is read to its end up to the cap whatever its size says,
 * NUL bytes and short reads included, and writers never replace what is not a regular file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "file.h"
#include "tap.h"
#include "util.h"

static char dir[] = "/tmp/bm-test-file.XXXXXX";

static char *at(const char *name)
{
    return bm_asprintf("%s/%s", dir, name);
}

static void write_bytes(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "we");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* bm_file_read(path) is refused with want and the detail why. */
static void refused(const char *path, int want, const char *why, const char *what)
{
    char *buf = NULL;
    size_t len = 0;
    bm_error_reset();
    int r = bm_file_read(path, 1024, &buf, &len);
    ok(r == want && buf == NULL, "%s: refused with %d (got %d)", what, want, r);
    is_str(bm_error_detail(r), why, "%s: says so", what);
    free(buf);
}

/* the files the tests use, in dir; returns the bound socket */
static int make_files(void)
{
    _cleanup_free_ char *fifo = at("fifo"), *sock = at("sock"), *sub = at("sub"),
                        *zero = at("zero-link"), *reg = at("regular"), *nul = at("nul"),
                        *reglink = at("regular-link");
    mkfifo(fifo, 0600);
    mkdir(sub, 0700);
    symlink("/dev/zero", zero);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    ok(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "a socket file");
    write_bytes(reg, "0123456789", 10);
    write_bytes(nul, "a\0b\n", 4);
    symlink(reg, reglink);
    return s;
}

/* every kind that is not a regular file, without blocking (a FIFO with no writer) */
static void test_not_regular_refused(void)
{
    _cleanup_free_ char *fifo = at("fifo"), *sock = at("sock"), *sub = at("sub"),
                        *zero = at("zero-link"), *missing = at("missing");
    alarm(10);
    refused(fifo, -ENODEV, "is a FIFO", "FIFO");
    refused(sub, -EISDIR, "is a directory", "directory");
    refused("/dev/null", -ENODEV, "is a character device", "/dev/null");
    refused(zero, -ENODEV, "is a character device", "link to /dev/zero");
    refused(sock, -ENODEV, "is a socket", "socket");
    refused(missing, -ENOENT, "cannot read: No such file or directory", "missing");
    refused("", -ENOENT, "empty file name", "empty name");
    alarm(0);
}

/* O_NOFOLLOW where asked: the link itself is named */
static void test_nofollow(void)
{
    _cleanup_free_ char *reglink = at("regular-link");
    bm_error_reset();
    int fd = bm_file_open(AT_FDCWD, reglink, true, NULL);
    ok(fd == -ELOOP, "nofollow: a link to a regular file is refused (%d)", fd);
    is_str(bm_error_detail(fd), "is a symbolic link", "  says so");
    fd = bm_file_open(AT_FDCWD, reglink, false, NULL);
    ok(fd >= 0, "followed otherwise");
    if (fd >= 0)
        close(fd);
}

/* the cap: exactly the cap reads, one byte more is refused */
static void test_cap(void)
{
    _cleanup_free_ char *reg = at("regular");
    char *buf = NULL;
    size_t len = 0;
    ok(bm_file_read(reg, 10, &buf, &len) == 0 && len == 10 && strcmp(buf, "0123456789") == 0,
       "a file of exactly the cap reads");
    free(buf);
    buf = NULL;
    bm_error_reset();
    int r = bm_file_read(reg, 9, &buf, &len);
    ok(r == -EFBIG && !buf, "one byte over the cap: -EFBIG");
    is_str(bm_error_detail(r), "larger than 9 bytes", "  says so");
    r = bm_file_read(reg, 0, &buf, &len);
    ok(r == -EFBIG, "cap 0: anything is too large");
}

/* the true length: a parser sees the NUL */
static void test_nul_kept(void)
{
    _cleanup_free_ char *nul = at("nul"), *buf = NULL;
    size_t len = 0;
    ok(bm_file_read(nul, 64, &buf, &len) == 0 && len == 4 && strlen(buf) == 1 && buf[4] == '\0',
       "NUL bytes kept: length 4, strlen 1, NUL-terminated");
}

/* bm_file_read_text(): a NUL byte refused, every failure naming the path */
static void test_text(void)
{
    _cleanup_free_ char *nul = at("nul"), *reg = at("regular"), *gone = at("gone"), *buf = NULL;
    bm_error_reset();
    int r = bm_file_read_text(nul, 64, &buf);
    _cleanup_free_ char *want = bm_asprintf("%s: contains a NUL byte", nul);
    ok(r == -EINVAL && buf == NULL, "text with a NUL byte: refused (%d)", r);
    is_str(bm_error_detail(r), want, "  naming the file");
    bm_error_reset();
    r = bm_file_read_text(gone, 64, &buf);
    ok(r == -ENOENT && strncmp(bm_error_detail(r), gone, strlen(gone)) == 0, "a missing file: %s",
       bm_error_detail(r));
    bm_error_reset();
    ok(bm_file_read_text(reg, 64, &buf) == 0 && strcmp(buf, "0123456789") == 0, "a text file read");
}

/* a file that says size 0 (as /proc files do) is read to its end */
static void test_size_zero_read_to_end(void)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    ok(bm_file_read("/proc/self/status", 64 * 1024, &buf, &len) == 0 && len > 0 &&
           strncmp(buf, "Name:", 5) == 0,
       "/proc/self/status (st_size 0) reads (%zu bytes)", len);
}

/* short reads: a writer that hands the data over in pieces */
static void test_short_reads(void)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int p[2];
    ok(pipe(p) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        close(p[0]);
        for (int i = 0; i < 5; i++) {
            char piece[1000];
            memset(piece, 'a' + i, sizeof(piece));
            if (write(p[1], piece, sizeof(piece)) != (ssize_t)sizeof(piece))
                _exit(1);
            /* the next piece once the reader has taken this one: a short read each time */
            int queued;
            while (ioctl(p[1], FIONREAD, &queued) == 0 && queued > 0)
                sched_yield();
        }
        _exit(0);
    }
    close(p[1]);
    ok(bm_file_read_fd(p[0], 5000, &buf, &len) == 0 && len == 5000 && buf[0] == 'a' &&
           buf[4999] == 'e' && buf[5000] == '\0',
       "five short reads make one whole read of 5000 bytes");
    close(p[0]);
    waitpid(child, NULL, 0);
}

/* writers: missing or regular may be replaced; nothing else */
static void test_writers_replace_only_regular(void)
{
    _cleanup_free_ char *fifo = at("fifo"), *sub = at("sub"), *zero = at("zero-link"),
                        *reg = at("regular"), *reglink = at("regular-link"), *missing = at("missing");
    ok(bm_file_check_replaceable(missing) == 0, "replaceable: missing");
    ok(bm_file_check_replaceable(reg) == 0, "replaceable: regular file");
    ok(bm_file_check_replaceable(reglink) == -ELOOP, "not replaceable: a link (to a regular file)");
    ok(bm_file_check_replaceable(fifo) == -ENODEV, "not replaceable: FIFO");
    ok(bm_file_check_replaceable("/dev/null") == -ENODEV, "not replaceable: /dev/null");
    ok(bm_file_check_replaceable(sub) == -EISDIR, "not replaceable: directory");
    ok(bm_file_write_atomic("/dev/null", "/tmp/bm-test-file-null.XXXXXX", "x") == -ENODEV,
       "bm_file_write_atomic does not replace /dev/null");
    struct stat st;
    ok(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "  /dev/null is still a device");
    ok(bm_file_write_atomic(zero, "/tmp/bm-test-file-zero.XXXXXX", "x") == -ELOOP &&
           lstat(zero, &st) == 0 && S_ISLNK(st.st_mode),
       "bm_file_write_atomic does not replace a link");
    ok(bm_file_check_dir(sub) == 0 && bm_file_check_dir(fifo) == -ENOTDIR &&
           bm_file_check_dir(missing) == -ENOENT,
       "check_dir: directory, FIFO, missing");
}

int main(void)
{
    ok(mkdtemp(dir) != NULL, "temporary directory");
    int s = make_files();
    test_not_regular_refused();
    test_nofollow();
    test_cap();
    test_nul_kept();
    test_text();
    test_size_zero_read_to_end();
    test_short_reads();
    test_writers_replace_only_regular();

    close(s);
    const char *names[] = {"fifo", "sock", "zero-link", "regular", "nul", "regular-link"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *x = at(names[i]);
        unlink(x);
    }
    _cleanup_free_ char *sub = at("sub");
    rmdir(sub);
    rmdir(dir);
    return tap_done();
}
