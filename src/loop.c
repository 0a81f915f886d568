/* The agent's loop on the engine (loop.h). */
#include "loop.h"

#include <errno.h>

#include "error.h"

BmEngineOptions bm_loop_engine_options(bool dry_run, bool monitor_only)
{
    return (BmEngineOptions){.dry_run = dry_run || monitor_only,
                             .probe_features = !monitor_only,
                             .probe_later = true,
                             .log_decisions = true,
                             .cache_xml = true};
}

void bm_loop_init(BmLoop *l, BmEngine *e, unsigned interval_s, bool monitor_only,
                  const BmLoopHooks *hooks, uint64_t now_ms)
{
    *l = (BmLoop){.e = e, .monitor_only = monitor_only};
    if (hooks)
        l->hooks = *hooks;
    bm_schedule_init(&l->sched, now_ms, interval_s);
}

void bm_loop_event(BmLoop *l, BmEvent ev, uint64_t now_ms)
{
    bm_schedule_event(&l->sched, ev, now_ms);
}

#define HOOK(l, name, ...) ((l)->hooks.name ? (l)->hooks.name((l)->hooks.ctx, ##__VA_ARGS__) : (void)0)

/* A reading of the domains found the connection lost. Returns whether it did. */
static bool lost(BmLoop *l, int r)
{
    if (r != -ECONNRESET)
        return false;
    HOOK(l, lost);
    return true;
}

static void run_job(BmLoop *l, BmJob j, uint64_t now_ms)
{
    BmEngine *e = l->e;
    bool on = l->sched.connected;
    BmJobResult r = {0};
    bm_error_reset();
    switch (j) {
    case BM_JOB_PASS:
        if (!on)
            break;
        r.ran = true;
        int pr = bm_engine_pass(e);
        l->passes++;
        HOOK(l, passed, pr);
        lost(l, pr);
        r.in_flight = bm_engine_in_flight(e);
        r.probes_left = bm_engine_probe(e, 0);
        break;
    case BM_JOB_POLL:
        r.in_flight_before = bm_engine_in_flight(e);
        r.in_flight = bm_engine_poll(e);
        if (r.in_flight != r.in_flight_before)
            HOOK(l, publish);
        break;
    case BM_JOB_HOST_WATCH:
        /* pressure starts a pass at once */
        r.ran = on && !bm_engine_reclaiming(e);
        r.host_pressure = r.ran && bm_engine_host_under_pressure(e);
        break;
    case BM_JOB_GUEST_WATCH: {
        /* while a balloon is inflated: stop an inflate in flight that hurts its guest (the
         * refault rule of the pass that follows gives back what it took), and a pass at once
         * when a ballooned guest grew short of memory or came under pressure */
        if (!on || l->monitor_only || !bm_engine_any_ballooned(e))
            break;
        int rr = bm_engine_refresh(e);
        if (lost(l, rr))
            break;
        r.ran = true;
        if (rr == 0)
            l->stopped += bm_engine_stop_hurting(e);
        r.guest_need = rr == 0 && bm_engine_guest_in_need(e);
        HOOK(l, publish);
        break;
    }
    case BM_JOB_REFRESH:
        if (!on)
            break;
        r.ran = true;
        lost(l, bm_engine_refresh(e));
        r.probes_left = bm_engine_probe(e, 0);
        HOOK(l, publish);
        break;
    case BM_JOB_SAVE: HOOK(l, save); break;
    case BM_JOB_PROBE:
        r.ran = on;
        r.probes_left = on ? bm_engine_probe(e, BM_LOOP_PROBE_BATCH) : 0;
        if (!r.probes_left)
            HOOK(l, publish);
        break;
    case BM_JOB_COUNT: break;
    }
    bm_schedule_done(&l->sched, j, &r, now_ms);
}

uint64_t bm_loop_turn(BmLoop *l, uint64_t now_ms)
{
    unsigned due = bm_schedule_due(&l->sched, now_ms);
    for (int j = 0; j < BM_JOB_COUNT; j++)
        if (due & (1u << j))
            run_job(l, (BmJob)j, now_ms);
    return bm_schedule_next_ms(&l->sched);
}
