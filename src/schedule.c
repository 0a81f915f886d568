/* The agent's schedule (schedule.h). */
#include "schedule.h"

#include "util.h"

void bm_schedule_init(BmSchedule *s, uint64_t now_ms, unsigned interval_s)
{
    *s = (BmSchedule){.interval_ms = (uint64_t)interval_s * 1000, .last_reading_ms = now_ms};
    for (int j = 0; j < BM_JOB_COUNT; j++)
        s->due_ms[j] = BM_SCHEDULE_OFF;
    s->due_ms[BM_JOB_HOST_WATCH] = now_ms + BM_SCHEDULE_HOST_WATCH_MS;
    s->due_ms[BM_JOB_GUEST_WATCH] = now_ms + BM_SCHEDULE_GUEST_WATCH_MS;
}

void bm_schedule_set_interval(BmSchedule *s, unsigned interval_s)
{
    s->interval_ms = (uint64_t)interval_s * 1000;
}

/* A reading soon: at once, or a second after the last one. */
static void refresh_soon(BmSchedule *s, bool at_once, uint64_t now_ms)
{
    uint64_t since = now_ms - s->last_reading_ms;
    s->due_ms[BM_JOB_REFRESH] = at_once || since >= BM_SCHEDULE_REFRESH_MIN_MS
                                    ? now_ms
                                    : now_ms + BM_SCHEDULE_REFRESH_MIN_MS - since;
}

void bm_schedule_event(BmSchedule *s, BmEvent ev, uint64_t now_ms)
{
    switch (ev) {
    case BM_EVENT_CONNECTED:
        s->connected = true;
        s->due_ms[BM_JOB_PASS] = now_ms;
        break;
    case BM_EVENT_DISCONNECTED:
        s->connected = false;
        s->due_ms[BM_JOB_POLL] = BM_SCHEDULE_OFF;
        break;
    case BM_EVENT_DOMAIN: refresh_soon(s, false, now_ms); break;
    case BM_EVENT_COUNTED: refresh_soon(s, true, now_ms); break;
    }
}

unsigned bm_schedule_due(const BmSchedule *s, uint64_t now_ms)
{
    unsigned due = 0;
    for (int j = 0; j < BM_JOB_COUNT; j++)
        if (s->due_ms[j] != BM_SCHEDULE_OFF && s->due_ms[j] <= now_ms)
            due |= 1u << j;
    return due;
}

void bm_schedule_done(BmSchedule *s, BmJob j, const BmJobResult *r, uint64_t now_ms)
{
    uint64_t *due = s->due_ms;
    switch (j) {
    case BM_JOB_PASS:
        due[BM_JOB_PASS] = now_ms + s->interval_ms;
        if (!r->ran)
            break;
        s->last_reading_ms = now_ms;
        due[BM_JOB_REFRESH] = BM_SCHEDULE_OFF; /* the pass read the domains */
        if (r->in_flight)
            due[BM_JOB_POLL] = now_ms + BM_SCHEDULE_POLL_MS;
        due[BM_JOB_SAVE] = now_ms;
        if (r->probes_left)
            due[BM_JOB_PROBE] = now_ms;
        break;
    case BM_JOB_POLL:
        due[BM_JOB_POLL] = r->in_flight ? now_ms + BM_SCHEDULE_POLL_MS : BM_SCHEDULE_OFF;
        if (r->in_flight != r->in_flight_before)
            refresh_soon(s, true, now_ms); /* a change ended: the domains read again */
        break;
    case BM_JOB_HOST_WATCH:
        due[BM_JOB_HOST_WATCH] = now_ms + BM_SCHEDULE_HOST_WATCH_MS;
        if (r->ran && r->host_pressure && s->connected)
            due[BM_JOB_PASS] = now_ms;
        break;
    case BM_JOB_GUEST_WATCH:
        due[BM_JOB_GUEST_WATCH] = now_ms + BM_SCHEDULE_GUEST_WATCH_MS;
        if (!r->ran)
            break;
        s->last_reading_ms = now_ms;
        /* once per episode: a guest the host cannot help now waits for the interval */
        if (r->guest_need && !s->guest_in_need)
            due[BM_JOB_PASS] = now_ms;
        s->guest_in_need = r->guest_need;
        break;
    case BM_JOB_REFRESH:
        due[BM_JOB_REFRESH] = BM_SCHEDULE_OFF;
        if (!r->ran)
            break;
        s->last_reading_ms = now_ms;
        if (r->probes_left)
            due[BM_JOB_PROBE] = now_ms;
        break;
    case BM_JOB_SAVE: due[BM_JOB_SAVE] = BM_SCHEDULE_OFF; break;
    case BM_JOB_PROBE:
        /* a batch a turn of the loop, until none is left */
        due[BM_JOB_PROBE] = r->ran && r->probes_left ? now_ms : BM_SCHEDULE_OFF;
        break;
    case BM_JOB_COUNT: break;
    }
}

uint64_t bm_schedule_next_ms(const BmSchedule *s)
{
    uint64_t next = BM_SCHEDULE_OFF;
    for (int j = 0; j < BM_JOB_COUNT; j++)
        if (s->due_ms[j] < next)
            next = s->due_ms[j];
    return next;
}

const char *bm_job_name(BmJob j)
{
    static const char *const names[BM_JOB_COUNT] = {
        [BM_JOB_PASS] = "pass",
        [BM_JOB_POLL] = "poll",
        [BM_JOB_HOST_WATCH] = "host-watch",
        [BM_JOB_GUEST_WATCH] = "guest-watch",
        [BM_JOB_REFRESH] = "refresh",
        [BM_JOB_SAVE] = "save",
        [BM_JOB_PROBE] = "probe",
    };
    return (unsigned)j < BM_JOB_COUNT ? names[j] : "?";
}
