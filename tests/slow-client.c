/* A slowloris client for tests: opens N connections from SRC_ADDR to ADDR:PORT, sends a request
 * line, then trickles one header byte per connection every INTERVAL_MS (0: sends nothing more)
 * for SECONDS, and prints how many connections the server accepted and how many it closed.
 * Usage: slow-client SRC_ADDR ADDR PORT N INTERVAL_MS SECONDS
 * Output (one line): "opened N refused N closed_by_server N still_open N" */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: slow-client SRC_ADDR ADDR PORT N INTERVAL_MS SECONDS\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int n = atoi(argv[4]), interval_ms = atoi(argv[5]);
    double seconds = atof(argv[6]);
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 || inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1 ||
        n < 1 || n > 1000) {
        fprintf(stderr, "slow-client: bad address or count\n");
        return 2;
    }
    dst.sin_port = htons((uint16_t)atoi(argv[3]));
    int *fd = calloc((size_t)n, sizeof(int));
    int opened = 0, refused = 0;
    static const char line[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < n; i++) {
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&src, sizeof(src)) < 0 ||
            connect(fd[i], (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
            write(fd[i], line, sizeof(line) - 1) < 0) {
            if (fd[i] >= 0)
                close(fd[i]);
            fd[i] = -1;
            refused++;
            continue;
        }
        opened++;
    }
    int closed = 0;
    double end = now_s() + seconds;
    while (now_s() < end) {
        for (int i = 0; i < n; i++) {
            if (fd[i] < 0)
                continue;
            /* closed by the server? (readable with EOF or reset) */
            struct pollfd p = {.fd = fd[i], .events = POLLIN};
            char buf[512];
            bool gone = false;
            if (poll(&p, 1, 0) > 0) {
                ssize_t k = read(fd[i], buf, sizeof(buf));
                gone = k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) || k > 0;
            }
            if (!gone && interval_ms > 0 && write(fd[i], "X", 1) < 0)
                gone = true;
            if (gone) {
                close(fd[i]);
                fd[i] = -1;
                closed++;
            }
        }
        struct timespec ts = {.tv_sec = (interval_ms > 0 ? interval_ms : 200) / 1000,
                              .tv_nsec = (long)((interval_ms > 0 ? interval_ms : 200) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    printf("opened %d refused %d closed_by_server %d still_open %d\n", opened, refused, closed,
           opened - closed);
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    free(fd);
    return 0;
}
