/* The agent's schedule (schedule.h), pure: which jobs are due and when next, from the clock,
 * what the last jobs found and the events. */
#include "schedule.h"
#include "tap.h"

#define T0 100000 /* ms */

static BmJobResult ran(void)
{
    return (BmJobResult){.ran = true};
}

static bool due(const BmSchedule *s, BmJob j, uint64_t now)
{
    return bm_schedule_due(s, now) & (1u << j);
}

int main(void)
{
    BmSchedule s;
    bm_schedule_init(&s, T0, 10);
    is_u64(bm_schedule_next_ms(&s), T0 + 250, "at start: the host watch first, 250 ms on");
    ok(s.due_ms[BM_JOB_GUEST_WATCH] == T0 + 1000 && s.due_ms[BM_JOB_PASS] == BM_SCHEDULE_OFF,
       "  the guest watch a second on, no pass before a connection");
    BmJobResult r = ran();
    r.host_pressure = true;
    bm_schedule_done(&s, BM_JOB_HOST_WATCH, &r, T0 + 250);
    ok(!due(&s, BM_JOB_PASS, T0 + 250), "pressure without a connection starts no pass");
    bm_schedule_event(&s, BM_EVENT_CONNECTED, T0 + 300);
    ok(due(&s, BM_JOB_PASS, T0 + 300), "connected: a pass at once");

    /* a pass that started changes and left domains to probe */
    r = ran();
    r.in_flight = 2;
    r.probes_left = 30;
    bm_schedule_done(&s, BM_JOB_PASS, &r, T0 + 300);
    is_u64(s.due_ms[BM_JOB_PASS], T0 + 10300, "the next pass an interval on");
    is_u64(s.due_ms[BM_JOB_POLL], T0 + 310, "  changes in flight: polled 10 ms on");
    ok(due(&s, BM_JOB_SAVE, T0 + 300) && due(&s, BM_JOB_PROBE, T0 + 300),
       "  the state saved and the new domains probed at once");
    bm_schedule_done(&s, BM_JOB_SAVE, &r, T0 + 300);
    ok(s.due_ms[BM_JOB_SAVE] == BM_SCHEDULE_OFF, "  saved once");
    r.probes_left = 10;
    bm_schedule_done(&s, BM_JOB_PROBE, &r, T0 + 300);
    ok(due(&s, BM_JOB_PROBE, T0 + 300), "  10 left: probed again at the next turn");
    r.probes_left = 0;
    bm_schedule_done(&s, BM_JOB_PROBE, &r, T0 + 300);
    ok(s.due_ms[BM_JOB_PROBE] == BM_SCHEDULE_OFF, "  none left: the probe stops");

    /* the poll: a change ended, a reading at once; none left, no more polling */
    r = (BmJobResult){.in_flight_before = 2, .in_flight = 1};
    bm_schedule_done(&s, BM_JOB_POLL, &r, T0 + 310);
    ok(due(&s, BM_JOB_REFRESH, T0 + 310) && s.due_ms[BM_JOB_POLL] == T0 + 320,
       "a change ended: the domains read at once, the other still polled");
    r = (BmJobResult){.in_flight_before = 1, .in_flight = 1};
    bm_schedule_done(&s, BM_JOB_POLL, &r, T0 + 320);
    bm_schedule_done(&s, BM_JOB_REFRESH, &(BmJobResult){.ran = true}, T0 + 320);
    r = (BmJobResult){.in_flight_before = 1, .in_flight = 0};
    bm_schedule_done(&s, BM_JOB_POLL, &r, T0 + 400);
    ok(s.due_ms[BM_JOB_POLL] == BM_SCHEDULE_OFF && due(&s, BM_JOB_REFRESH, T0 + 400),
       "the last change ended: no more polling, a reading at once");
    bm_schedule_done(&s, BM_JOB_REFRESH, &(BmJobResult){.ran = true}, T0 + 400);

    /* events: a reading at most once a second after the last */
    bm_schedule_event(&s, BM_EVENT_DOMAIN, T0 + 600);
    is_u64(s.due_ms[BM_JOB_REFRESH], T0 + 1400, "a lifecycle event 200 ms after a reading: a second after it");
    bm_schedule_event(&s, BM_EVENT_COUNTED, T0 + 700);
    is_u64(s.due_ms[BM_JOB_REFRESH], T0 + 700, "a change counted from the spool: at once");
    bm_schedule_done(&s, BM_JOB_REFRESH, &(BmJobResult){.ran = true}, T0 + 700);
    bm_schedule_event(&s, BM_EVENT_DOMAIN, T0 + 2000);
    is_u64(s.due_ms[BM_JOB_REFRESH], T0 + 2000, "an event a second after the last reading: at once");

    /* the host watch: pressure starts a pass at once */
    r = ran();
    bm_schedule_done(&s, BM_JOB_HOST_WATCH, &r, T0 + 2250);
    is_u64(s.due_ms[BM_JOB_PASS], T0 + 10300, "the host watch, no pressure: the pass stays");
    is_u64(s.due_ms[BM_JOB_HOST_WATCH], T0 + 2500, "  the watch 250 ms on");
    r.host_pressure = true;
    bm_schedule_done(&s, BM_JOB_HOST_WATCH, &r, T0 + 2500);
    ok(due(&s, BM_JOB_PASS, T0 + 2500), "pressure: a pass at once");
    bm_schedule_done(&s, BM_JOB_PASS, &(BmJobResult){.ran = true}, T0 + 2500);
    is_u64(s.due_ms[BM_JOB_PASS], T0 + 12500, "  then an interval on");

    /* the guest watch: a pass once per episode of need */
    r = ran();
    r.guest_need = true;
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &r, T0 + 3000);
    ok(due(&s, BM_JOB_PASS, T0 + 3000), "a ballooned guest in need: a pass at once");
    bm_schedule_done(&s, BM_JOB_PASS, &(BmJobResult){.ran = true}, T0 + 3000);
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &r, T0 + 4000);
    ok(!due(&s, BM_JOB_PASS, T0 + 4000), "  still in need a second later: no pass a second");
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &(BmJobResult){.ran = false}, T0 + 5000);
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &r, T0 + 6000);
    ok(!due(&s, BM_JOB_PASS, T0 + 6000), "  a watch with nothing ballooned ends no episode");
    BmJobResult plain = ran();
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &plain, T0 + 7000);
    bm_schedule_done(&s, BM_JOB_GUEST_WATCH, &r, T0 + 8000);
    ok(due(&s, BM_JOB_PASS, T0 + 8000), "  in need again after a watch without: a pass at once");

    /* the connection lost */
    bm_schedule_done(&s, BM_JOB_PASS, &(BmJobResult){.ran = true, .in_flight = 1}, T0 + 8000);
    bm_schedule_event(&s, BM_EVENT_DISCONNECTED, T0 + 8005);
    ok(s.due_ms[BM_JOB_POLL] == BM_SCHEDULE_OFF, "disconnected: nothing polled");
    bm_schedule_done(&s, BM_JOB_PASS, &(BmJobResult){0}, T0 + 18000);
    is_u64(s.due_ms[BM_JOB_PASS], T0 + 28000, "  a pass due without a connection: the next an interval on");
    bm_schedule_set_interval(&s, 2);
    bm_schedule_done(&s, BM_JOB_PASS, &(BmJobResult){0}, T0 + 28000);
    is_u64(s.due_ms[BM_JOB_PASS], T0 + 30000, "a reloaded policy's interval: from the next pass on");
    is_str(bm_job_name(BM_JOB_GUEST_WATCH), "guest-watch", "the jobs' names");
    return tap_done();
}
