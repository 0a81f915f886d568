/* row-runner: balloonmgr's main (src/main.c, compiled in with BM_MAIN_ENTRY=bm_main) in a fork
 * per request, for tests/test-bad-input.sh. A row's process is then a fork of this one instead
 * of an exec of the binary: the same code on the same arguments, without the start-up (the
 * dynamic loader, libvirt's libraries, ASan's shadow memory: 60 ms of the 150 a row took under
 * ASan here). What the process does from main on, its exit, LeakSanitizer's check at the exit
 * and a sanitizer's report on its stderr are those of the binary.
 *
 * Requests on stdin, each field ending in a NUL byte:
 *   AS_USER OUT ERR NENV ENV... NARG ARG...
 * AS_USER 1: the row runs as uid/gid 65534 without supplementary groups (setpriv --reuid=65534
 * --regid=65534 --clear-groups); OUT and ERR: files its stdout and stderr replace (created or
 * truncated); ENV: NAME=VALUE words added to the environment; ARG: balloonmgr's arguments after
 * argv[0]. Its stdin is /dev/null. Answer on stdout, one line per request: the exit status,
 * 128 + N for signal N, 124 when it ran for 20 s (then SIGTERM, SIGKILL 2 s later: timeout(1)'s
 * status). Exits 0 at the end of its stdin, 2 on a malformed request, 1 when a fork fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

int bm_main(int argc, char **argv);

#define ROW_TIMEOUT_S 20

/* The request being served: the child's argv and environment point into it. Static, so that
 * LeakSanitizer in the child sees it reachable. */
static char *buf;
static size_t buf_len, buf_cap, buf_pos;
static char **fields;
static size_t n_fields, fields_cap;

/* Reads fd 0 into buf until it holds a whole request (read(2), not stdio: a child must not find
 * the parent's read-ahead in its stdin buffer). Returns 1 when it does, 0 at the end of the
 * input before any byte of one, -1 on a malformed or truncated request. */
static int read_request(void)
{
    if (buf_pos) {
        memmove(buf, buf + buf_pos, buf_len - buf_pos);
        buf_len -= buf_pos;
        buf_pos = 0;
    }
    for (;;) {
        /* split what is there into fields and check whether they make a request */
        n_fields = 0;
        size_t start = 0;
        for (size_t i = 0; i < buf_len; i++) {
            if (buf[i])
                continue;
            if (n_fields == fields_cap) {
                fields_cap = fields_cap ? 2 * fields_cap : 64;
                fields = realloc(fields, fields_cap * sizeof(*fields));
                if (!fields)
                    abort();
            }
            fields[n_fields++] = buf + start;
            start = i + 1;
            /* AS_USER OUT ERR NENV ENV... NARG ARG... */
            if (n_fields >= 4) {
                size_t nenv = strtoul(fields[3], NULL, 10);
                if (n_fields >= 5 + nenv &&
                    n_fields == 5 + nenv + strtoul(fields[4 + nenv], NULL, 10)) {
                    buf_pos = start;
                    return 1;
                }
            }
        }
        if (buf_cap - buf_len < 65536) {
            buf_cap = buf_cap ? 2 * buf_cap : 1 << 20;
            buf = realloc(buf, buf_cap);
            if (!buf)
                abort();
        }
        ssize_t n = read(0, buf + buf_len, buf_cap - buf_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return buf_len == 0 ? 0 : -1;
        buf_len += n;
    }
}

static void replace_fd(int fd, const char *path, int flags)
{
    int f = open(path, flags | O_CLOEXEC, 0644);
    if (f < 0 || dup2(f, fd) < 0) {
        dprintf(2, "row-runner: %s: %s\n", path, strerror(errno));
        _exit(125);
    }
    close(f);
}

/* In the child: the row's stdin, stdout, stderr, environment and user, then balloonmgr. */
static void run_child(const sigset_t *old_mask)
{
    size_t nenv = strtoul(fields[3], NULL, 10);
    size_t narg = strtoul(fields[4 + nenv], NULL, 10);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    replace_fd(0, "/dev/null", O_RDONLY);
    replace_fd(1, fields[1], O_WRONLY | O_CREAT | O_TRUNC);
    replace_fd(2, fields[2], O_WRONLY | O_CREAT | O_TRUNC);
    for (size_t i = 0; i < nenv; i++)
        if (putenv(fields[4 + i]) != 0)
            _exit(125);
    if (strcmp(fields[0], "1") == 0 &&
        (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
         setresuid(65534, 65534, 65534) < 0)) {
        dprintf(2, "row-runner: cannot become uid 65534: %s\n", strerror(errno));
        _exit(125);
    }
    static char *argv[4096];
    if (narg + 2 > sizeof(argv) / sizeof(*argv))
        _exit(125);
    argv[0] = (char *)"balloonmgr";
    for (size_t i = 0; i < narg; i++)
        argv[1 + i] = fields[5 + nenv + i];
    argv[narg + 1] = NULL;
    /* exit(), not _exit(): atexit handlers and LeakSanitizer's check run as at the binary's end */
    exit(bm_main((int)narg + 1, argv));
}

/* Waits for pid, at most ROW_TIMEOUT_S seconds (SIGCHLD is blocked). Returns its status as a
 * shell reports it, or 124 when it had to be stopped. */
static int wait_child(pid_t pid)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    struct timespec deadline, now;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ROW_TIMEOUT_S;
    int status, killed = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return 125;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms =
            (deadline.tv_sec - now.tv_sec) * 1000 + (deadline.tv_nsec - now.tv_nsec) / 1000000;
        if (left_ms <= 0) {
            kill(pid, killed ? SIGKILL : SIGTERM);
            killed = 1;
            deadline = now;
            deadline.tv_sec += 2;
            continue;
        }
        struct timespec ts = {left_ms / 1000, (left_ms % 1000) * 1000000};
        sigtimedwait(&chld, NULL, &ts);
    }
    if (killed)
        return 124;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void)
{
#ifdef __SANITIZE_ADDRESS__
    /* LeakSanitizer's check at a child's exit scans 13 MB of globals here, most of them the
     * sanitizer runtimes' untouched .bss (libasan's and libubsan's 6 MB each): one check now
     * maps those pages, the forks inherit them, and a child's check no longer faults them in
     * (20 ms of a row's 85) */
    __lsan_do_recoverable_leak_check();
#endif
    sigset_t chld, old_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    int r;
    while ((r = read_request()) > 0) {
        pid_t pid = fork();
        if (pid < 0) {
            dprintf(2, "row-runner: fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid == 0)
            run_child(&old_mask);
        char line[16];
        int n = snprintf(line, sizeof(line), "%d\n", wait_child(pid));
        if (write(1, line, n) != n)
            return 1;
    }
    free(buf);
    free(fields);
    if (r < 0) {
        dprintf(2, "row-runner: a truncated or malformed request on stdin\n");
        return 2;
    }
    return 0;
}
