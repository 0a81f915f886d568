/* An independent clock for balloon changes, used by the integration tests to check the
 * durations balloonmgr reports. It watches one domain by two means balloonmgr does not use:
 *   - QMP query-balloon sent through libvirt-qemu's monitor passthrough, every 5 ms;
 *   - QEMU's own BALLOON_CHANGE events, whose timestamps QEMU sets when it builds the event
 *     (QEMU throttles them to one per second but keeps the newest one's timestamp).
 * Usage: balloon-watch URI DOMAIN TARGET_KIB TIMEOUT_S
 * Prints one JSON object: initial_bytes, first_change_at, reached_at (poll: the middles of
 * the query's calls), first_change_by (the end of the call that first saw a change: it began
 * before then), last_unreached_from (the start of the last call that saw the target not yet
 * reached: it was reached after then), event_reached_at (QEMU timestamp of the first event
 * within 1 MiB of the target), polls, events.
 * Exit 0 when the target was seen reached, 1 otherwise. */
#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOLERANCE (1024 * 1024)

static uint64_t target_bytes;
static _Atomic int stop;
static double event_reached_at = -1;
static int events;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t dist(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

static void on_event(virConnectPtr c, virDomainPtr d, const char *event, long long sec,
                     unsigned int usec, const char *details, void *opaque)
{
    (void)c, (void)d, (void)opaque;
    if (strcmp(event, "BALLOON_CHANGE") != 0 || !details)
        return;
    json_object *o = json_tokener_parse(details), *a;
    if (o && json_object_object_get_ex(o, "actual", &a)) {
        uint64_t actual = (uint64_t)json_object_get_int64(a);
        pthread_mutex_lock(&lock);
        events++;
        if (event_reached_at < 0 && dist(actual, target_bytes) <= TOLERANCE)
            event_reached_at = sec + usec / 1e6;
        pthread_mutex_unlock(&lock);
    }
    json_object_put(o);
}

static void tick(int timer, void *opaque)
{
    (void)timer, (void)opaque;
}

static void *event_loop(void *arg)
{
    (void)arg;
    while (!stop)
        virEventRunDefaultImpl();
    return NULL;
}

static int query_actual(virDomainPtr dom, uint64_t *ret)
{
    char *reply = NULL;
    if (virDomainQemuMonitorCommand(dom, "{\"execute\":\"query-balloon\"}", &reply, 0) < 0)
        return -1;
    json_object *o = json_tokener_parse(reply), *r, *a;
    int ok = o && json_object_object_get_ex(o, "return", &r) &&
             json_object_object_get_ex(r, "actual", &a);
    if (ok)
        *ret = (uint64_t)json_object_get_int64(a);
    json_object_put(o);
    free(reply);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: balloon-watch URI DOMAIN TARGET_KIB TIMEOUT_S\n");
        return 2;
    }
    target_bytes = strtoull(argv[3], NULL, 10) * 1024;
    double timeout = atof(argv[4]);

    virEventRegisterDefaultImpl();
    virConnectPtr conn = virConnectOpen(argv[1]);
    virDomainPtr dom = conn ? virDomainLookupByName(conn, argv[2]) : NULL;
    if (!dom) {
        fprintf(stderr, "balloon-watch: cannot open %s / %s\n", argv[1], argv[2]);
        return 2;
    }
    int cb = virConnectDomainQemuMonitorEventRegister(conn, dom, "BALLOON_CHANGE", on_event,
                                                      NULL, NULL, 0);
    virEventAddTimeout(100, tick, NULL, NULL); /* wakes the loop so it sees stop */
    pthread_t th;
    pthread_create(&th, NULL, event_loop, NULL);

    uint64_t initial = 0, actual = 0;
    if (query_actual(dom, &initial) < 0) {
        fprintf(stderr, "balloon-watch: query-balloon failed\n");
        return 2;
    }
    /* tell the test we are watching */
    fprintf(stderr, "balloon-watch: watching, actual %llu\n", (unsigned long long)initial);

    double start = now_real(), first_change_at = -1, reached_at = -1, first_change_by = -1;
    double last_unreached_from = start;
    unsigned polls = 0;
    while (now_real() - start < timeout) {
        double before = now_real();
        if (query_actual(dom, &actual) < 0)
            break;
        double after = now_real(), at = (before + after) / 2;
        polls++;
        if (first_change_at < 0 && actual != initial) {
            first_change_at = at;
            first_change_by = after;
        }
        if (actual != initial && dist(actual, target_bytes) <= TOLERANCE) {
            reached_at = at;
            break;
        }
        last_unreached_from = before;
        usleep(5000);
    }
    /* the last BALLOON_CHANGE can come up to a second after the change (throttling) */
    for (int i = 0; i < 150; i++) {
        pthread_mutex_lock(&lock);
        double e = event_reached_at;
        pthread_mutex_unlock(&lock);
        if (e >= 0 || reached_at < 0)
            break;
        usleep(10000);
    }
    stop = 1;
    if (cb >= 0)
        virConnectDomainQemuMonitorEventDeregister(conn, cb);
    pthread_join(th, NULL);

    printf("{\"initial_bytes\": %llu, \"final_bytes\": %llu, \"first_change_at\": %.6f, "
           "\"reached_at\": %.6f, \"first_change_by\": %.6f, \"last_unreached_from\": %.6f, "
           "\"event_reached_at\": %.6f, \"polls\": %u, \"events\": %d}\n",
           (unsigned long long)initial, (unsigned long long)actual, first_change_at, reached_at,
           first_change_by, last_unreached_from, event_reached_at, polls, events);
    virDomainFree(dom);
    virConnectClose(conn);
    return reached_at >= 0 ? 0 : 1;
}
