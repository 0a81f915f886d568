/* The agent's loop on the engine (docs/design.md, "The agent"): the jobs of the schedule
 * (schedule.h) run on an engine, one turn at a time. The agent turns it from libvirt's event
 * loop (agent.c), the simulation from the model's clock (tests/sim): the same jobs, the same
 * schedule. What only the agent does around them (reporting, the state file, the metrics,
 * reconnecting) it does in the hooks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "schedule.h"

/* SG/ioeventfd of new domains are asked after a pass, this many per turn of the loop */
#define BM_LOOP_PROBE_BATCH 20

/* What the caller does around the jobs (each may be NULL):
 *   passed   after a pass, with bm_engine_pass()'s return (0 or -errno)
 *   save     the save job: the state file, then the metrics
 *   publish  the view changed: the metrics are rendered again
 *   lost     a reading found the connection lost (-ECONNRESET) */
typedef struct {
    void *ctx;
    void (*passed)(void *ctx, int r);
    void (*save)(void *ctx);
    void (*publish)(void *ctx);
    void (*lost)(void *ctx);
} BmLoopHooks;

typedef struct {
    BmSchedule sched;
    BmEngine *e;
    bool monitor_only;  /* the guest watch does nothing (nothing is changed) */
    BmLoopHooks hooks;
    size_t passes, stopped; /* passes run, inflates stopped in flight (bm_engine_stop_hurting()) */
} BmLoop;

/* The engine options of the agent's loop (monitoring only: never a change, no monitor). */
BmEngineOptions bm_loop_engine_options(bool dry_run, bool monitor_only);

/* A loop on e (its policy set) at now_ms with the policy's interval; not connected yet
 * (bm_loop_event(BM_EVENT_CONNECTED) starts the first pass). */
void bm_loop_init(BmLoop *l, BmEngine *e, unsigned interval_s, bool monitor_only,
                  const BmLoopHooks *hooks, uint64_t now_ms);

/* An event (schedule.h) at now_ms. */
void bm_loop_event(BmLoop *l, BmEvent ev, uint64_t now_ms);

/* One turn at now_ms: every job due then runs once, in BmJob order (one a job arms at once runs
 * at the next turn). Returns when the next job is due (monotonic ms; BM_SCHEDULE_OFF: none). */
uint64_t bm_loop_turn(BmLoop *l, uint64_t now_ms);
