/* The agent's schedule (docs/design.md, "The agent"): which of its jobs on the engine are due
 * and when next, given the clock, what the last jobs found of the engine's state and the events
 * since. Pure: no I/O, no clock of its own; the agent runs it on libvirt's event loop
 * (agent.c), the simulation on the model's clock (tests/sim), both through loop.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The jobs, in the order a turn runs those due at once. */
typedef enum {
    BM_JOB_PASS,        /* a policy pass: every interval; at once after connecting, when the host
                         * watch sees pressure or the guest watch a new need */
    BM_JOB_POLL,        /* the changes in flight read: every 10 ms while there are any */
    BM_JOB_HOST_WATCH,  /* the host's memory read: every 250 ms */
    BM_JOB_GUEST_WATCH, /* the domains read while a balloon is inflated: every second */
    BM_JOB_REFRESH,     /* the domains read without deciding: after events, at most once a
                         * second; at once after a change ended or one was counted */
    BM_JOB_SAVE,        /* the state file and the metrics: once after each pass */
    BM_JOB_PROBE,       /* QEMU monitors of new domains asked, a batch a turn, until none left */
    BM_JOB_COUNT,
} BmJob;

#define BM_SCHEDULE_OFF UINT64_MAX      /* a job not due at all */
#define BM_SCHEDULE_POLL_MS 10
#define BM_SCHEDULE_HOST_WATCH_MS 250
#define BM_SCHEDULE_GUEST_WATCH_MS 1000
#define BM_SCHEDULE_REFRESH_MIN_MS 1000

typedef enum {
    BM_EVENT_CONNECTED,    /* a connection to libvirt: a pass at once */
    BM_EVENT_DISCONNECTED, /* the connection is gone (the changes in flight with it) */
    BM_EVENT_DOMAIN,       /* a lifecycle or balloon-change event: a reading within a second */
    BM_EVENT_COUNTED,      /* a change made by another process was counted: a reading at once */
} BmEvent;

/* What a job found (the engine's state after it). */
typedef struct {
    bool ran;               /* it did its work (connected, and for the guest watch: a balloon
                             * was inflated and the domains were read) */
    size_t in_flight_before;/* poll: the changes in flight before it */
    size_t in_flight;       /* pass, poll: the changes in flight after it */
    size_t probes_left;     /* pass, refresh, probe: domains still to probe */
    bool host_pressure;     /* host watch: the host crossed into pressure (not reclaiming) */
    bool guest_need;        /* guest watch: a ballooned guest is in need */
} BmJobResult;

typedef struct {
    uint64_t due_ms[BM_JOB_COUNT]; /* monotonic ms; BM_SCHEDULE_OFF */
    uint64_t interval_ms;          /* the policy's interval */
    uint64_t last_reading_ms;      /* the last reading of the domains (pass, refresh, guest
                                    * watch): events refresh at most once a second after it */
    bool connected;
    bool guest_in_need;            /* what the last guest watch saw: a pass once per episode */
} BmSchedule;

/* A schedule starting at now_ms with the policy's interval (seconds): the watches armed, the
 * rest off until the first connection. */
void bm_schedule_init(BmSchedule *s, uint64_t now_ms, unsigned interval_s);

/* The policy's interval changed (a reload): the pass after the next comes that much later. */
void bm_schedule_set_interval(BmSchedule *s, unsigned interval_s);

void bm_schedule_event(BmSchedule *s, BmEvent ev, uint64_t now_ms);

/* The jobs due at now_ms: bit j for BmJob j. */
unsigned bm_schedule_due(const BmSchedule *s, uint64_t now_ms);

/* Job j ran at now_ms and found r: when it and the others are due next. */
void bm_schedule_done(BmSchedule *s, BmJob j, const BmJobResult *r, uint64_t now_ms);

/* When the next job is due (monotonic ms; BM_SCHEDULE_OFF: none). */
uint64_t bm_schedule_next_ms(const BmSchedule *s);

/* "pass", "poll", "host-watch", "guest-watch", "refresh", "save", "probe". */
const char *bm_job_name(BmJob j);
