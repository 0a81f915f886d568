/* bm-mem-hog: real host memory pressure for the scenario (bench/scenario.sh, test-pressure.sh),
 * made safe for a machine that other work shares.
 *
 * Usage: bm-mem-hog --target-available SIZE [--size SIZE] [--floor SIZE] [--rate MIB_S]
 *                   [--retouch SECS] [--proc DIR]
 *   --target-available SIZE  grow until the host's MemAvailable is down to SIZE (bytes, or
 *                            K/M/G suffix, or N% of MemTotal)
 *   --size SIZE              hold at most SIZE; default: what it holds when MemAvailable
 *                            first reaches the target (then fixed)
 *   --floor SIZE             safety floor (default 1.5G): whenever MemAvailable is below it,
 *                            give memory back at once, down to floor + 256 MiB
 *   --rate MIB_S             growth rate (default 1024 MiB/s)
 *   --retouch SECS           write every held page again every SECS s (default 30; 0: never)
 * MemAvailable is read every 100 ms. The hog grows only while it holds less than its size AND
 * MemAvailable is above the target. Its size is fixed once reached, so memory the host gets
 * back later (balloons) is not taken again, and other work on the machine is never pushed
 * below the target by the hog; after giving memory back at the floor it may grow again up to
 * its size while MemAvailable is above the target. It sets its own oom_score_adj to 1000 (the kernel's first choice)
 * and dies with its parent (PR_SET_PDEATHSIG). SIGTERM/SIGINT end it.
 *
 * stdout, one line per event: "hog: t=SECS held MIB MiB, MemAvailable MIB MiB: EVENT". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ULL * 1024ULL)
#define CHUNK (16 * MIB)
#define MAX_CHUNKS (1 << 16) /* 1 TiB */

static void *chunks[MAX_CHUNKS];
static size_t n_chunks;
static const char *proc = "/proc";
static double t0;
static volatile sig_atomic_t stop;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* MemAvailable or MemTotal (KEY) in bytes; 0 when unreadable. */
static uint64_t meminfo(const char *key)
{
    char path[512], line[256];
    size_t klen = strlen(key);
    uint64_t v = 0;
    FILE *f;
    snprintf(path, sizeof(path), "%s/meminfo", proc);
    f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            v = strtoull(line + klen + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

static void say(uint64_t avail, const char *fmt, ...)
{
    va_list ap;
    printf("hog: t=%.1f held %zu MiB, MemAvailable %llu MiB: ", mono() - t0,
           n_chunks * (size_t)(CHUNK / MIB), (unsigned long long)(avail / MIB));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* SIZE: bytes, K/M/G (1024-based) or N% of MemTotal. 0 on error. */
static uint64_t parse_size(const char *s, uint64_t total)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return 0;
    switch (*end) {
    case '%':
        v = v / 100 * total;
        end++;
        break;
    case 'K': case 'k': v *= 1024; end++; break;
    case 'M': case 'm': v *= MIB; end++; break;
    case 'G': case 'g': v *= 1024 * MIB; end++; break;
    default: break;
    }
    return *end ? 0 : (uint64_t)v;
}

static int grow_one(void)
{
    void *c;
    if (n_chunks == MAX_CHUNKS)
        return -ENOSPC;
    c = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
             -1, 0);
    if (c == MAP_FAILED)
        return -errno;
    /* MAP_POPULATE of a private writable mapping write-faults every page: resident now */
    chunks[n_chunks++] = c;
    return 0;
}

static void shrink_by(size_t n)
{
    while (n-- > 0 && n_chunks > 0)
        munmap(chunks[--n_chunks], CHUNK);
}

static void on_signal(int sig)
{
    stop = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bm-mem-hog --target-available SIZE [--size SIZE] [--floor SIZE] "
                    "[--rate MIB_S] [--retouch SECS] [--proc DIR]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *target_s = NULL, *size_s = NULL, *floor_s = "1.5G";
    double rate = 1024, retouch = 30, last_grow_log = 0;
    size_t touch_next = 0;
    uint64_t total, target, floor_b, size, avail;
    int i, fd, grow_reported = 0;
    struct sigaction sa = {.sa_handler = on_signal};

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--target-available") == 0)
            target_s = v;
        else if (strcmp(a, "--size") == 0)
            size_s = v;
        else if (strcmp(a, "--floor") == 0)
            floor_s = v;
        else if (strcmp(a, "--rate") == 0)
            rate = atof(v);
        else if (strcmp(a, "--retouch") == 0)
            retouch = atof(v);
        else if (strcmp(a, "--proc") == 0)
            proc = v;
        else
            usage();
        i++;
    }
    if (!target_s || rate <= 0 || retouch < 0)
        usage();
    total = meminfo("MemTotal");
    avail = meminfo("MemAvailable");
    if (!total || !avail) {
        fprintf(stderr, "bm-mem-hog: cannot read MemTotal/MemAvailable from %s/meminfo\n", proc);
        return 1;
    }
    target = parse_size(target_s, total);
    floor_b = parse_size(floor_s, total);
    if (!target || !floor_b) {
        fprintf(stderr, "bm-mem-hog: --target-available '%s' / --floor '%s': not a size\n",
                target_s, floor_s);
        return 2;
    }
    if (target < floor_b + 256 * MIB) {
        fprintf(stderr, "bm-mem-hog: --target-available %llu MiB is not 256 MiB above the floor "
                        "%llu MiB\n", (unsigned long long)(target / MIB),
                (unsigned long long)(floor_b / MIB));
        return 2;
    }
    size = size_s ? parse_size(size_s, total) : total; /* fixed below when reached */

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1;
    fd = open("/proc/self/oom_score_adj", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "1000", 4) < 0)
            perror("bm-mem-hog: oom_score_adj");
        close(fd);
    }
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    t0 = mono();
    say(avail, "start: size %llu MiB%s, target MemAvailable %llu MiB, floor %llu MiB, %.0f MiB/s",
        (unsigned long long)(size / MIB), size_s ? "" : " at most (fixed at the target)",
        (unsigned long long)(target / MIB),
        (unsigned long long)(floor_b / MIB), rate);
    while (!stop) {
        double tick = mono();
        size_t budget = (size_t)(rate * MIB * 0.1 / CHUNK) + 1;
        avail = meminfo("MemAvailable");
        if (avail && avail < floor_b) {
            size_t give = (floor_b + 256 * MIB - avail + CHUNK - 1) / CHUNK;
            shrink_by(give);
            say(meminfo("MemAvailable"), "below the floor: gave back %zu MiB",
                give * (size_t)(CHUNK / MIB));
            grow_reported = 0;
        } else {
            while (budget-- > 0 && n_chunks * CHUNK + CHUNK <= size && avail > target + CHUNK) {
                int r = grow_one();
                if (r < 0) {
                    say(avail, "allocation failed: %s", strerror(-r));
                    break;
                }
                avail -= CHUNK;
                grow_reported = 0;
            }
            if (!size_s && !grow_reported && avail <= target + CHUNK) {
                size = n_chunks * CHUNK; /* the size is what it took to reach the target */
                size_s = "reached";
            }
            if (!grow_reported && (n_chunks * CHUNK + CHUNK > size || avail <= target + CHUNK)) {
                say(avail, "holding (%s)", n_chunks * CHUNK + CHUNK > size
                                               ? "size reached" : "MemAvailable at the target");
                grow_reported = 1;
            }
        }
        if (retouch > 0 && n_chunks > 0) {
            /* a share of the chunks each tick, so that the floor check never waits */
            size_t n = (size_t)(n_chunks / (retouch * 10)) + 1;
            while (n-- > 0) {
                volatile char *p = chunks[touch_next++ % n_chunks];
                size_t off;
                for (off = 0; off < CHUNK; off += 4096)
                    p[off]++;
            }
        }
        if (mono() - last_grow_log >= 10) {
            say(meminfo("MemAvailable"), "tick");
            last_grow_log = mono();
        }
        {
            double left = 0.1 - (mono() - tick);
            if (left > 0) {
                struct timespec ts = {0, (long)(left * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
    }
    say(meminfo("MemAvailable"), "stopping");
    return 0;
}
