/* bm-guest-load: the test guest's workload. Follows a schedule of memory demand and reports
 * every phase, allocation failure and OOM kill on stdout (the guest's serial console, where
 * the guest kernel's "Out of memory" lines land too). Built static by meson and put into the
 * guest's initramfs by build-guest.sh; /init starts it from the kernel command line
 * (bm.load=SCHEDULE) just before the guest prints BALLOONMGR-GUEST-READY.
 *
 * Usage: bm-guest-load SCHEDULE
 *   SCHEDULE   ITEM[,ITEM...], each from SECS seconds on (times ascending):
 *     SECS:MIB          hold MIB MiB of anonymous memory, every page written again each second
 *     SECS:MIB@RATE     the same, growing toward MIB at RATE MiB/s (shrinking is immediate)
 *     SECS:touch:MIB    write MIB MiB once and free it again, then hold nothing: the memory
 *                       stays resident in QEMU but is free in the guest
 *     SECS:cache:MIB    read the first MIB MiB of the guest's disk (/dev/vda, bm_define_guest
 *                       disk=MIB) once, with buffered reads: page cache, resident in QEMU; the
 *                       file descriptor stays open; then hold nothing (a later item's anonymous
 *                       memory comes on top of the cache, which stays until the kernel drops it)
 *     SECS:hot:MIB      re-read the first MIB MiB of the disk for ever, 1 MiB buffered read()s
 *                       in a loop (a HOT page cache: a database's or web server's working set;
 *                       a miss is a disk read, not a page fault); hold nothing else
 *     SECS:hotmap:MIB   the same through a shared read-only mmap of the disk, one byte of
 *                       every page (a miss is a major page fault)
 * SECS count from the program's start on the guest's monotonic clock. (Not the wall clock: a
 * TCG guest's wall clock was measured a minute ahead of the host's after a slow boot, while
 * its monotonic clock kept the host's pace: 10.0 s per 10 s.) The first line,
 * "schedule ...", marks t=0 on the host's side.
 * No schedule item before the first SECS: hold nothing. Memory that was never touched is
 * never written (a guest without bm.load never touches its free memory).
 *
 * Console lines (all start with "bm-load: t=SECS"):
 *   phase N: hold MIB MiB [at RATE MiB/s] (was MIB MiB)
 *   phase N: touch MIB MiB, then free it
 *   holding MIB MiB (reached in S s)
 *   touched and freed MIB MiB in S s
 *   phase N: cache MIB MiB of DEVICE
 *   cached MIB MiB of DEVICE in S s (kept open)
 *   cache read FAILED at MIB of MIB MiB of DEVICE: ERROR
 *   allocation FAILED at MIB of MIB MiB: ERROR
 *   status: holding MIB MiB, touch pass MS ms           (every 30 s)
 *   hot: RATE MiB/s over S s, MIB MiB in all             (every 5 s of a hot phase: its work)
 *   OOM: worker PID killed by SIGKILL (phase N, holding MIB MiB); restarting in 1 s
 *   worker PID exited with status N / killed by signal S
 * A supervisor process (oom_score_adj -1000) runs the schedule in a worker (oom_score_adj 0),
 * reports how the worker died and starts a new one, which continues the current phase. */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define MAX_ITEMS 64
#define MAX_CHUNKS 65536
#define CACHE_DEVICE "/dev/vda"

typedef struct {
    double at_s;
    unsigned long mib;
    double rate_mib_s; /* 0: as fast as possible */
    int touch_only;
    int cache_only; /* read the disk into the page cache */
    int hot;        /* re-read it for ever: 1 read(), 2 mmap */
} Item;

/* Shared between the supervisor and its worker (MAP_SHARED): what the worker is doing. */
typedef struct {
    int phase;
    unsigned long held_mib;
} Progress;

static Item items[MAX_ITEMS];
static int n_items;
static double start_mono;
static Progress *progress;
static void *chunks[MAX_CHUNKS];
static unsigned long n_chunks;
static int cache_fd = -1;

static double now(int clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seconds on the schedule's clock. */
static double sched_t(void)
{
    return now(CLOCK_MONOTONIC) - start_mono;
}

/* One console line, written at once (stdout is the console: no buffering). */
static void say(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "bm-load: t=%.1f ", sched_t());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    if (write(STDOUT_FILENO, buf, n) < 0)
        return;
}

static int parse_schedule(const char *s)
{
    char *copy = strdup(s), *save = NULL, *tok;
    double last = -1;
    if (!copy)
        return -ENOMEM;
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        Item it = {0};
        char *end;
        if (n_items == MAX_ITEMS)
            goto bad;
        it.at_s = strtod(tok, &end);
        if (end == tok || *end != ':' || it.at_s < 0 || it.at_s < last)
            goto bad;
        tok = end + 1;
        if (strncmp(tok, "touch:", 6) == 0) {
            it.touch_only = 1;
            tok += 6;
        } else if (strncmp(tok, "cache:", 6) == 0) {
            it.cache_only = 1;
            tok += 6;
        } else if (strncmp(tok, "hot:", 4) == 0) {
            it.cache_only = it.hot = 1;
            tok += 4;
        } else if (strncmp(tok, "hotmap:", 7) == 0) {
            it.cache_only = 1;
            it.hot = 2;
            tok += 7;
        }
        errno = 0;
        it.mib = strtoul(tok, &end, 10);
        if (end == tok || errno || it.mib > MAX_CHUNKS)
            goto bad;
        if (*end == '@' && !it.touch_only && !it.cache_only) {
            tok = end + 1;
            it.rate_mib_s = strtod(tok, &end);
            if (end == tok || it.rate_mib_s <= 0)
                goto bad;
        }
        if (*end)
            goto bad;
        last = it.at_s;
        items[n_items++] = it;
    }
    free(copy);
    return n_items > 0 ? 0 : -EINVAL;
bad:
    free(copy);
    return -EINVAL;
}

/* Index of the item in force at schedule time t, -1 before the first. */
static int phase_at(double t)
{
    int i, p = -1;
    for (i = 0; i < n_items; i++)
        if (items[i].at_s <= t)
            p = i;
    return p;
}

/* Writes one word in every page of the chunk. */
static void touch_chunk(void *c)
{
    volatile char *p = c;
    unsigned long off;
    for (off = 0; off < MIB; off += 4096)
        p[off] = (char)(off >> 12) + 1;
}

/* Grows by one chunk; 0 or a negative errno (already reported, once per phase). */
static int grow_one(unsigned long want, int *reported)
{
    void *c = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
        int e = errno;
        if (!*reported)
            say("allocation FAILED at %lu of %lu MiB: %s", n_chunks, want, strerror(e));
        *reported = 1;
        return -e;
    }
    touch_chunk(c);
    chunks[n_chunks++] = c;
    progress->held_mib = n_chunks;
    return 0;
}

static void shrink_to(unsigned long mib)
{
    while (n_chunks > mib) {
        munmap(chunks[--n_chunks], MIB);
        progress->held_mib = n_chunks;
    }
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Reads the first mib MiB of CACHE_DEVICE into the page cache (buffered reads into one 1 MiB
 * buffer) and keeps it open in cache_fd; reports the result. */
static void cache_disk(unsigned long mib)
{
    static char buf[MIB];
    double t0 = sched_t();
    unsigned long done = 0;
    if (cache_fd >= 0)
        close(cache_fd);
    cache_fd = open(CACHE_DEVICE, O_RDONLY);
    if (cache_fd < 0) {
        say("cache read FAILED at 0 of %lu MiB of %s: %s", mib, CACHE_DEVICE, strerror(errno));
        return;
    }
    while (done < mib) {
        size_t got = 0;
        while (got < MIB) {
            ssize_t n = read(cache_fd, buf + got, MIB - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                say("cache read FAILED at %lu of %lu MiB of %s: %s", done, mib, CACHE_DEVICE,
                    n < 0 ? strerror(errno) : "end of device");
                return;
            }
            got += (size_t)n;
        }
        done++;
    }
    say("cached %lu MiB of %s in %.1f s (kept open)", done, CACHE_DEVICE, sched_t() - t0);
}

/* The worker: runs the schedule forever. */
/* The hot working set: the disk re-read for ever (Item.hot), its position and what it read. */
static struct {
    int mode; /* 0 none, 1 read(), 2 mmap */
    int fd;
    unsigned char *map;
    unsigned long mib, pos_mib;
    double since, bytes, total;
} hot = {.fd = -1};

static void hot_start(int mode, unsigned long mib)
{
    if (hot.map)
        munmap(hot.map, hot.mib * MIB);
    if (hot.fd >= 0)
        close(hot.fd);
    hot.map = NULL;
    hot.mode = 0;
    hot.fd = open(CACHE_DEVICE, O_RDONLY);
    if (hot.fd < 0) {
        say("hot read FAILED: %s: %s", CACHE_DEVICE, strerror(errno));
        return;
    }
    if (mode == 2) {
        hot.map = mmap(NULL, mib * MIB, PROT_READ, MAP_SHARED, hot.fd, 0);
        if (hot.map == MAP_FAILED) {
            say("hot mmap FAILED: %s: %s", CACHE_DEVICE, strerror(errno));
            hot.map = NULL;
            return;
        }
    }
    hot.mode = mode;
    hot.mib = mib;
    hot.pos_mib = 0;
    hot.since = sched_t();
    hot.bytes = hot.total = 0;
}

/* Re-reads the working set for about s seconds (the loop's pause), reporting every 5 s. */
static void hot_for(double s)
{
    static char buf[MIB];
    double end = sched_t() + s;
    volatile unsigned sum = 0;
    while (sched_t() < end) {
        if (hot.mode == 1) {
            ssize_t n = pread(hot.fd, buf, MIB, (off_t)(hot.pos_mib * MIB));
            if (n <= 0) {
                say("hot read FAILED at %lu MiB: %s", hot.pos_mib, n < 0 ? strerror(errno) : "end of disk");
                hot.mode = 0;
                return;
            }
        } else {
            const unsigned char *p = hot.map + hot.pos_mib * MIB;
            for (unsigned long off = 0; off < MIB; off += 4096)
                sum += p[off];
        }
        hot.bytes += MIB;
        hot.total += MIB;
        hot.pos_mib = (hot.pos_mib + 1) % hot.mib;
    }
    double t = sched_t();
    if (t - hot.since >= 5) {
        say("hot: %.1f MiB/s over %.1f s, %.0f MiB in all", hot.bytes / MIB / (t - hot.since),
            t - hot.since, hot.total / MIB);
        hot.since = t;
        hot.bytes = 0;
    }
}

static void worker(void)
{
    int fd = open("/proc/self/oom_score_adj", O_WRONLY);
    int cur = -2, fail_reported = 0, reached = 0;
    double phase_start = 0, last_status = sched_t(), next_touch = 0;
    unsigned long start_held = 0;
    if (fd >= 0) {
        if (write(fd, "0", 1) < 0)
            say("cannot set oom_score_adj 0: %s", strerror(errno));
        close(fd);
    }
    for (;;) {
        double t = sched_t();
        int p = phase_at(t);
        if (p != cur) {
            cur = p;
            progress->phase = p + 1;
            phase_start = t;
            start_held = n_chunks;
            fail_reported = 0;
            reached = 0;
            if (p >= 0 && items[p].touch_only) {
                unsigned long want = items[p].mib;
                say("phase %d: touch %lu MiB, then free it", p + 1, want);
                shrink_to(0);
                while (n_chunks < want && grow_one(want, &fail_reported) == 0)
                    ;
                say("touched and freed %lu MiB in %.1f s", n_chunks, sched_t() - phase_start);
                shrink_to(0);
                reached = 1;
            } else if (p >= 0 && items[p].hot) {
                say("phase %d: re-read %lu MiB of %s for ever (%s)", p + 1, items[p].mib,
                    CACHE_DEVICE, items[p].hot == 2 ? "mmap" : "read");
                shrink_to(0);
                hot_start(items[p].hot, items[p].mib);
                reached = 1;
            } else if (p >= 0 && items[p].cache_only) {
                say("phase %d: cache %lu MiB of %s", p + 1, items[p].mib, CACHE_DEVICE);
                shrink_to(0);
                cache_disk(items[p].mib);
                reached = 1;
            } else if (p >= 0) {
                if (items[p].rate_mib_s > 0)
                    say("phase %d: hold %lu MiB at %.0f MiB/s (was %lu MiB)", p + 1, items[p].mib,
                        items[p].rate_mib_s, n_chunks);
                else
                    say("phase %d: hold %lu MiB (was %lu MiB)", p + 1, items[p].mib, n_chunks);
            }
        }
        if (p >= 0 && !items[p].touch_only && !items[p].cache_only) {
            unsigned long want = items[p].mib, allowed = want;
            if (items[p].rate_mib_s > 0 && n_chunks < want) {
                /* grow at the rate from where the phase started (or the worker restarted) */
                double t_ok = (sched_t() - phase_start) * items[p].rate_mib_s;
                allowed = start_held + (unsigned long)t_ok + 1;
                if (allowed > want)
                    allowed = want;
            }
            shrink_to(want);
            while (n_chunks < allowed && grow_one(want, &fail_reported) == 0)
                ;
            if (!reached && n_chunks == want) {
                say("holding %lu MiB (reached in %.1f s)", want, sched_t() - phase_start);
                reached = 1;
            }
        }
        if (sched_t() >= next_touch) {
            double t0 = now(CLOCK_MONOTONIC);
            unsigned long i;
            for (i = 0; i < n_chunks; i++)
                touch_chunk(chunks[i]);
            next_touch = sched_t() + 1;
            if (sched_t() - last_status >= 30) {
                say("status: holding %lu MiB, touch pass %.0f ms", n_chunks,
                    (now(CLOCK_MONOTONIC) - t0) * 1000);
                last_status = sched_t();
            }
        }
        if (hot.mode && p >= 0 && items[p].hot)
            hot_for(0.1);
        else
            sleep_s(0.1);
    }
}

int main(int argc, char **argv)
{
    int fd, i = 1;
    if (argc != i + 1 || parse_schedule(argv[i]) < 0) {
        fprintf(stderr, "bm-load: schedule '%s': expected SECS:MIB[@RATE], SECS:touch:MIB or "
                        "SECS:cache:MIB, SECS:hot:MIB or SECS:hotmap:MIB, comma-separated, times ascending\n", argc > i ? argv[i] : "");
        return 2;
    }
    start_mono = now(CLOCK_MONOTONIC);
    progress = mmap(NULL, sizeof(*progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
    if (progress == MAP_FAILED) {
        perror("bm-load: mmap");
        return 1;
    }
    fd = open("/proc/self/oom_score_adj", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "-1000", 5) < 0)
            say("cannot set oom_score_adj -1000: %s", strerror(errno));
        close(fd);
    }
    say("schedule %s", argv[i]);
    for (;;) {
        int status;
        pid_t pid = fork();
        if (pid < 0) {
            say("fork FAILED: %s; retrying in 1 s", strerror(errno));
            sleep_s(1);
            continue;
        }
        if (pid == 0) {
            worker();
            _exit(0);
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
            say("OOM: worker %d killed by SIGKILL (phase %d, holding %lu MiB); restarting in 1 s",
                (int)pid, progress->phase, progress->held_mib);
        else if (WIFSIGNALED(status))
            say("worker %d killed by signal %d; restarting in 1 s", (int)pid, WTERMSIG(status));
        else
            say("worker %d exited with status %d; restarting in 1 s", (int)pid,
                WEXITSTATUS(status));
        progress->held_mib = 0;
        sleep_s(1);
    }
}
