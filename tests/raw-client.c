/* Raw bytes to a server, for tests that send what no HTTP client would (test-bad-input).
 *   raw-client PORT           sends standard input on one connection to 127.0.0.1:PORT, then
 *                             ends its side (shutdown SHUT_WR: the server sees the request
 *                             end), and copies the answer, up to the server's close or 4096
 *                             bytes, to standard output. Gives up after 20 s without a byte or
 *                             the close (a guard against a server that never closes; no fixed
 *                             wait otherwise). Exit 0, or 1 when it cannot connect or send.
 *   raw-client --unix PATH    binds a Unix socket at PATH (a socket file for the tests' bad
 *                             paths; bash cannot make one) and exits. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CAP 4096
#define GUARD_MS 20000

static int unix_socket(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path)) {
        fprintf(stderr, "raw-client: %s: path too long for a Unix socket\n", path);
        return 1;
    }
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
        fprintf(stderr, "raw-client: %s: %s\n", path, strerror(errno));
        return 1;
    }
    close(s);
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--unix") == 0)
        return unix_socket(argv[2]);
    char *end;
    long port = argc == 2 ? strtol(argv[1], &end, 10) : 0;
    if (argc != 2 || *end || port < 1 || port > 65535) {
        fprintf(stderr, "usage: raw-client PORT < REQUEST | raw-client --unix PATH\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
        fprintf(stderr, "raw-client: 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return 1;
    }
    char buf[CAP];
    ssize_t r;
    /* a server may close before it has read everything: what it answered still counts */
    while ((r = read(0, buf, sizeof(buf))) > 0)
        if (write_all(s, buf, (size_t)r) < 0)
            break;
    shutdown(s, SHUT_WR);
    size_t got = 0;
    while (got < CAP) {
        struct pollfd p = {.fd = s, .events = POLLIN};
        int n = poll(&p, 1, GUARD_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        r = read(s, buf + got, CAP - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(s);
    return write_all(1, buf, got) < 0 ? 1 : 0;
}
