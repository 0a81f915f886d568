/* Fuzzes the metrics endpoint (src/http.h): bm_http_parse_listen on the input, and the input
 * sent as a raw HTTP request to a server started once (bm_http_start on 127.0.0.1:0, a free
 * loopback port, in LLVMFuzzerInitialize). An answer must be HTTP and complete within a deadline; a complete,
 * well-formed request must get one; and after every input the server must still answer a
 * scrape on another connection. libmicrohttpd itself is not instrumented, so coverage guides
 * only our handler: the request path is a robustness check.
 * BM_FUZZ_HTTP_SERVER=0 skips the server (only the listen parser is fuzzed); when the server
 * cannot start (no loopback), the request path is skipped with a note. */
#define _GNU_SOURCE /* strcasestr, memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fuzz.h"
#include "http.h"

#define METRICS "# HELP fuzz_up 1\n# TYPE fuzz_up gauge\nfuzz_up 1\n"
#define DEADLINE_MS 5000

static BmHttp *server;
static struct sockaddr_in server_addr;

static void stop_server(void)
{
    bm_http_stop(server);
    server = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *env = getenv("BM_FUZZ_HTTP_SERVER");
    if (env && strcmp(env, "0") == 0)
        return 0;
    /* port 0: the kernel's pick, read back from the address served ("127.0.0.1:PORT") */
    char addrs[64];
    unsigned port = 0;
    if (bm_http_start("127.0.0.1:0", NULL, &server) == 0) {
        const char *colon = strrchr(bm_http_addresses(server, addrs, sizeof(addrs)), ':');
        port = colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
        if (!port)
            stop_server();
    }
    if (server) {
        server_addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        bm_http_set_metrics(server, METRICS);
        atexit(stop_server);
    }
    if (!server)
        fprintf(stderr, "fuzz-http: no loopback server (%s): fuzzing the listen parser only\n",
                bm_error_detail(-EADDRNOTAVAIL));
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A connection to the server that close() resets: libmicrohttpd 0.9.75 takes a plain FIN
 * (even shutdown(SHUT_WR)) for a client still sending and keeps the connection until its
 * 10 s timeout, which would soon use up the 16 connections per IP. */
static int connect_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    fuzz_assert(fd >= 0, "socket: %s", strerror(errno));
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    if (connect(fd, (struct sockaddr *)&server_addr, sizeof(server_addr)) < 0) {
        /* libFuzzer's SIGALRM (for -timeout) interrupts it; it goes on in the background */
        fuzz_assert(errno == EINTR, "connect: %s", strerror(errno));
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        while (poll(&p, 1, DEADLINE_MS) < 0 && errno == EINTR)
            ;
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        fuzz_assert(err == 0, "connect: %s", strerror(err));
    }
    return fd;
}

/* Sends what the socket takes without blocking: the server may stop reading (a request it
 * refused, or one larger than its memory limit). */
static void send_some(int fd, const void *data, size_t size)
{
    for (size_t off = 0; off < size;) {
        ssize_t w = send(fd, (const char *)data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

/* Reads one response: until its headers and Content-Length bytes of body (none for HEAD)
 * are in, or the server closes; interim 1xx responses (100 Continue) are skipped. The first
 * up to n - 1 bytes land in buf (NUL-terminated). wait_ms: how long to wait for the first
 * byte; 0 returns at once when none is there. Aborts when a response that has begun does not
 * end within DEADLINE_MS. Returns the bytes read. */
static size_t read_response(int fd, bool head, char *buf, size_t n, int wait_ms, bool *closed)
{
    size_t got = 0, want = SIZE_MAX, from = 0; /* from: where the final response starts */
    long start = now_ms();
    char sink[4096];
    *closed = false;
    buf[0] = '\0';
    while (got < want) {
        bool begun = got > from; /* the final response has begun (after 100 Continue, the
                                  * server may wait for a body it was promised) */
        long left = (begun ? start + DEADLINE_MS : start + wait_ms) - now_ms();
        if (begun)
            fuzz_assert(left > 0, "response not complete in %d ms: '%.60s'", DEADLINE_MS, buf);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, left > 0 ? (int)left : 0);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0 && !begun)
            break; /* nothing (more) came: the server waits for more of the request */
        if (pr == 0)
            continue;
        bool in_buf = got < n - 1;
        ssize_t r = recv(fd, in_buf ? buf + got : sink, in_buf ? n - 1 - got : sizeof(sink), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            *closed = true; /* closed, or reset: it refused the rest of what we sent */
            break;
        }
        got += (size_t)r;
        buf[got < n - 1 ? got : n - 1] = '\0';
        while (want == SIZE_MAX && from < got && from < n - 1) {
            const char *resp = buf + from, *end = strstr(resp, "\r\n\r\n");
            if (!end)
                break;
            if (strncmp(resp, "HTTP/1.1 1", 10) == 0) { /* interim: the real one follows */
                from = (size_t)(end + 4 - buf);
                start = now_ms();
                continue;
            }
            const char *cl = strcasestr(resp, "\r\nContent-Length:");
            if (cl && cl < end)
                want = (size_t)(end + 4 - buf) + (head ? 0 : strtoull(cl + 17, NULL, 10));
            else if (head)
                want = (size_t)(end + 4 - buf);
            break; /* no length: the body ends when the server closes */
        }
        if (from >= n - 1)
            break; /* interim responses filled the buffer: enough checked */
    }
    buf[got < n - 1 ? got : n - 1] = '\0';
    return got;
}

/* Whether data is one complete request that libmicrohttpd accepts for parsing: a request line
 * "METHOD /TARGET HTTP/1.x" of plain tokens, header lines with a name and a colon, the blank
 * line, and all of the Content-Length body (no Transfer-Encoding or Expect). Such a request
 * must be answered; what MHD drops without a word (a request line it cannot read) need not. */
static bool well_formed(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size, *p = s;
    while (p < end && *p >= 'A' && *p <= 'Z')
        p++;
    if (p == s || p + 2 > end || p[0] != ' ' || p[1] != '/')
        return false;
    for (p++; p<end && * p> ' ' && *p < 0x7f; p++)
        ;
    if ((size_t)(end - p) < 11 || memcmp(p, " HTTP/1.", 8) != 0 || (p[8] != '0' && p[8] != '1') ||
        memcmp(p + 9, "\r\n", 2) != 0)
        return false;
    p += 11;
    unsigned long long length = 0;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol)
            return false;
        if (eol == p) { /* the blank line: the body follows */
            p += 2;
            return (unsigned long long)(end - p) >= length;
        }
        const char *colon = p;
        while (colon < eol &&
               ((*colon >= 'a' && *colon <= 'z') || (*colon >= 'A' && *colon <= 'Z') ||
                (*colon >= '0' && *colon <= '9') || *colon == '-'))
            colon++;
        if (colon == p || colon == eol || *colon != ':')
            return false;
        for (const char *c = colon + 1; c < eol; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                return false;
        size_t name = (size_t)(colon - p);
        if ((name == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) ||
            (name == 6 && strncasecmp(p, "Expect", 6) == 0))
            return false;
        if (name == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
            const char *v = colon + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            if (v == eol || eol - v > 9)
                return false;
            length = 0;
            for (; v < eol && *v >= '0' && *v <= '9'; v++)
                length = length * 10 + (unsigned)(*v - '0');
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            if (v != eol)
                return false;
        }
        p = eol + 2;
    }
    return false;
}

/* The server still answers a plain scrape. */
static void check_alive(void)
{
    static const char scrape[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char answer[512];
    bool closed;
    int fd = connect_server();
    send_some(fd, scrape, sizeof(scrape) - 1);
    read_response(fd, false, answer, sizeof(answer), DEADLINE_MS, &closed);
    close(fd);
    fuzz_assert(strncmp(answer, "HTTP/1.1 200", 12) == 0 && strstr(answer, METRICS),
                "the server no longer answers a scrape: '%.60s'", answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    struct sockaddr_storage ss;
    unsigned len = 0;
    int r = bm_http_parse_listen(s, &ss, &len);
    fuzz_assert(r == 0 || r == -EINVAL, "bm_http_parse_listen returned %d", r);
    if (r == 0) {
        /* port 0 is a free port the kernel picks */
        fuzz_assert((ss.ss_family == AF_INET && len == sizeof(struct sockaddr_in)) ||
                        (ss.ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6)),
                    "'%s': family %d, length %u", s, ss.ss_family, len);
    }
    free(s);

    if (!server)
        return 0;
    /* The input as a raw request. Whether the server has answered is known once a scrape
     * on a second connection, sent after it, has been answered (it reads in order); no
     * answer by then means it waits for more of the request, which is fine. */
    int fd = connect_server();
    send_some(fd, data, size);
    check_alive();
    char answer[512];
    bool closed;
    /* A HEAD answer has a Content-Length and no body. Which method libmicrohttpd read out of
     * mangled bytes is not always clear (it skips lines before the request line), so any
     * "HEAD" makes an answer without its body complete. */
    bool head = memmem(data, size, "HEAD", 4) != NULL;
    bool complete = well_formed(data, size);
    size_t got =
        read_response(fd, head, answer, sizeof(answer), complete ? DEADLINE_MS : 0, &closed);
    close(fd);
    if (got > 0)
        fuzz_assert(strncmp(answer, "HTTP/1.", 7) == 0, "answer is not HTTP: '%.40s'", answer);
    else if (complete)
        fuzz_assert(0, "a complete request (%zu bytes) was dropped without an answer (%s)", size,
                    closed ? "closed" : "no answer");
    return 0;
}
