/* The agent's loop and the timer's pass in simulated time on the model, and the measures of a
 * run (sim.h). */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "once.h"
#include "policy-eval.h"
#include "state.h"
#include "util.h"

/* the model's step while nothing runs (before the agent starts, a control, between timer
 * passes): the measures' resolution */
#define IDLE_STEP_MS 250
/* the policy's one-reversal rule holds for a pressure episode of at most 10 minutes */
#define EPISODE_MAX_S 600.0

static void observe(Sim *s, double dt);

static void on_advance(void *ctx, double dt)
{
    observe(ctx, dt);
}

void sim_init(Sim *s, SimHost *h, const BmPolicy *policy)
{
    *s = (Sim){.h = h, .policy = policy, .step_guest = -1, .t_below = -1, .t_back = -1,
               .t_comfort = -1, .t_all_back = -1, .t_room = -1, .min_avail = INFINITY,
               .rss_min = INFINITY, .episode_start = -1};
    h->observer = on_advance;
    h->observer_ctx = s;
    s->below_run_s = bm_malloc0((h->n + 1) * sizeof(double));
    s->keep_free_bytes = bm_malloc0((h->n + 1) * sizeof(double));
    s->deadband_bytes = bm_malloc0((h->n + 1) * sizeof(double));
    s->max_step_bytes = bm_malloc0((h->n + 1) * sizeof(double));
    s->last_dir = bm_malloc0((h->n + 1) * sizeof(int));
    s->reversals = bm_malloc0((h->n + 1) * sizeof(unsigned));
    s->min_actual = bm_malloc0((h->n + 1) * sizeof(double));
    for (size_t i = 0; i < h->n; i++) {
        BmGuestRules r;
        bm_policy_rules_for(policy, h->g[i].name, &r);
        uint64_t max = (uint64_t)h->g[i].max;
        s->keep_free_bytes[i] = (double)bm_amount_bytes(r.keep_free, max);
        s->deadband_bytes[i] = (double)bm_amount_bytes(r.deadband, max);
        s->max_step_bytes[i] = (double)bm_amount_bytes(r.max_step, max);
        s->min_actual[i] = h->g[i].max;
    }
}

void sim_clear(Sim *s)
{
    bm_engine_free(s->e);
    free(s->state);
    s->h->observer = NULL;
    free(s->changes);
    free(s->below_run_s);
    free(s->keep_free_bytes);
    free(s->deadband_bytes);
    free(s->max_step_bytes);
    free(s->last_dir);
    free(s->reversals);
    free(s->min_actual);
    *s = (Sim){0};
}

static double total_rss(const SimHost *h)
{
    double r = 0;
    for (size_t i = 0; i < h->n; i++)
        r += sim_rss(&h->g[i]);
    return r;
}

static double ballooned(const SimHost *h)
{
    double b = 0;
    for (size_t i = 0; i < h->n; i++)
        b += h->g[i].max - h->g[i].actual;
    return b;
}

/* Memory the guests could give without going below keep_free and a deadband: their backed free
 * memory and page cache. */
static double takeable(const Sim *s)
{
    double sum = 0;
    for (size_t i = 0; i < s->h->n; i++) {
        const SimGuest *g = &s->h->g[i];
        if (g->vmem_hugepages) /* what it gives goes to the huge-page pool, not MemAvailable */
            continue;
        double room = sim_usable(g) - s->keep_free_bytes[i] - s->deadband_bytes[i];
        double backed = g->free_backed + g->cold + g->hot;
        sum += fmax(0, fmin(room, backed));
    }
    return sum;
}

/* One change the pass started: recorded, and counted as a reversal when it goes against the
 * domain's last one in this episode. */
static void note_change(Sim *s, size_t i, const BmDecision *d, BmHostMode mode)
{
    double t = s->h->t;
    int dir = d->action == BM_ACT_INFLATE ? -1 : 1;
    s->changes = bm_reallocarray(s->changes, s->n_changes + 1, sizeof(SimChange));
    s->changes[s->n_changes++] = (SimChange){.t = t, .guest = i, .dir = dir,
                                             .from = (double)d->current_bytes,
                                             .target = (double)d->target_bytes, .pass = s->passes,
                                             .code = d->cause.code, .why = bm_reason_why(d),
                                             .mode = mode};
    if (t < s->t_hog)
        s->steady_changes++;
    if (s->last_dir[i] && s->last_dir[i] != dir) {
        s->reversals[i]++;
        if (s->reversals[i] > s->reversals_max)
            s->reversals_max = s->reversals[i];
    }
    s->last_dir[i] = dir;
}

/* A pass of the agent or the timer ended: what it started is recorded. */
static void record_pass(Sim *s)
{
    s->passes++;
    const BmPlan *plan = bm_engine_plan(s->e);
    const BmApplied *ap = bm_engine_applied(s->e);
    /* an episode starts with a pass in reclaim and lasts until a comfortable pass (whose
     * changes still count in it) or 10 minutes, the span of the policy's one-reversal rule */
    double t = s->h->t;
    /* BM_SIM_DEBUG=1: each reclaiming pass's host reason and decisions on stderr (2: every pass) */
    const char *debug = getenv("BM_SIM_DEBUG");
    if (debug && (plan->mode == BM_HOST_RECLAIM || strcmp(debug, "2") == 0)) {
        char why[BM_HOST_REASON_MAX];
        bm_host_reason_format(plan, why, sizeof(why));
        fprintf(stderr, "PASS t=%.1f %s\n", t, why);
        for (size_t k = 0; k < plan->n_decisions; k++) {
            bm_reason_format(plan, &plan->decisions[k], why, sizeof(why));
            fprintf(stderr, "   %s %s: %s\n", plan->decisions[k].name,
                    bm_action_name(plan->decisions[k].action), why);
        }
    }
    if (plan->mode == BM_HOST_RECLAIM && (s->episode_start < 0 || t - s->episode_start > EPISODE_MAX_S)) {
        for (size_t i = 0; i < s->h->n; i++)
            s->last_dir[i] = 0;
        s->episode_start = t;
    }
    for (size_t k = 0; k < plan->n_decisions; k++) {
        const BmDecision *d = &plan->decisions[k];
        s->busy_skips += ap[k].busy;
        if (!ap[k].applied)
            continue;
        /* the model's guests are in the snapshot's (name) order: decision k is guest k */
        note_change(s, k, d, plan->mode);
    }
    if (plan->mode == BM_HOST_RELEASE)
        s->episode_start = -1;
}

/* After a step of dt: the measures that are read all along. */
static void observe(Sim *s, double dt)
{
    SimHost *h = s->h;
    double t = h->t, avail = sim_available(h);
    uint64_t total = (uint64_t)h->total;
    double reclaim_below = (double)bm_amount_bytes(s->policy->reclaim_below, total);
    double release_above = (double)bm_amount_bytes(s->policy->release_above, total);
    bool pressure = t >= s->t_hog && t < s->t_hog_end;
    for (size_t i = 0; i < h->n; i++) {
        const SimGuest *g = &h->g[i];
        bool starved = g->growing && g->actual < g->max - SIM_MIB && sim_usable(g) < s->keep_free_bytes[i];
        s->below_run_s[i] = starved ? s->below_run_s[i] + dt : 0;
        if (s->below_run_s[i] > s->keep_free_worst_s) {
            s->keep_free_worst_s = s->below_run_s[i];
            s->keep_free_worst_guest = i;
        }
        if (g->hot_ws > 0) {
            if (t >= s->t_steady && t < s->t_hog) {
                s->hot_work_before += g->work_rate * dt;
                s->hot_time_before += dt;
            } else if (pressure) {
                s->hot_work_pressure += g->work_rate * dt;
                s->hot_time_pressure += dt;
            }
        }
    }
    if (t >= s->t_steady && t < s->t_hog)
        s->rss_rest = total_rss(h);
    if (pressure) {
        s->min_avail = fmin(s->min_avail, avail);
        s->rss_min = fmin(s->rss_min, total_rss(h));
        for (size_t i = 0; i < h->n; i++)
            s->min_actual[i] = fmin(s->min_actual[i], h->g[i].actual);
        if (s->t_below < 0 && avail < reclaim_below) {
            s->t_below = t;
            s->passes_below = s->passes;
            s->takeable_at_below = takeable(s);
            s->need_at_below = reclaim_below - avail;
        } else if (s->t_below >= 0 && s->t_back < 0 && avail >= reclaim_below) {
            s->t_back = t;
            s->passes_back = s->passes;
        }
    }
    if (t >= s->t_hog_end && s->t_comfort < 0 && avail > release_above) {
        s->t_comfort = t;
        s->passes_comfort = s->passes;
        s->ballooned_at_comfort = ballooned(h);
        s->back_bound_passes = 0;
        for (size_t i = 0; i < h->n; i++) {
            double need = ceil((h->g[i].max - h->g[i].actual) / fmax(SIM_MIB, s->max_step_bytes[i]) - 1e-9);
            if (need > s->back_bound_passes)
                s->back_bound_passes = (size_t)need;
        }
    }
    if (s->t_comfort >= 0 && s->t_all_back < 0 && ballooned(h) < SIM_MIB) {
        s->t_all_back = t;
        s->passes_all_back = s->passes;
    }
    if (s->step_guest >= 0 && t >= s->t_step) {
        const SimGuest *g = &h->g[s->step_guest];
        if (s->step_actual <= 0)
            s->step_actual = g->actual;
        if (s->t_room < 0 && g->actual >= s->step_actual + s->deadband_bytes[s->step_guest])
            s->t_room = t;
    }
}

static uint64_t ms_of(double t_s)
{
    return (uint64_t)llround(t_s * 1000);
}

static uint64_t now_s(const Sim *s)
{
    return bm_clock_real_ns(&s->h->clock) / 1000000000ull;
}

static void on_passed(void *ctx, int r)
{
    if (r == 0)
        record_pass(ctx);
}

/* The agent's save on the way out: the state file's text. (Its save job after each pass writes
 * the same file; only the last one is read, at the restart.) */
static void save_state(Sim *s)
{
    free(s->state);
    s->state = bm_state_format(bm_engine_ledger(s->e), now_s(s));
}

/* The agent starts at now_ms (bm_agent_run()'s engine and loop): its state loaded, connected. */
static void start_agent(Sim *s, uint64_t now_ms)
{
    BmEngineOptions o = bm_loop_engine_options(false, false);
    o.host = &s->h->ops;
    s->e = bm_engine_new(&o);
    bm_engine_set_policy(s->e, s->policy);
    if (s->state && bm_state_parse(s->state, bm_engine_ledger(s->e)) < 0)
        fprintf(stderr, "sim: the saved state does not parse: %s\n", bm_error_detail(-EINVAL));
    BmLoopHooks hooks = {.ctx = s, .passed = on_passed};
    bm_loop_init(&s->loop, s->e, s->policy->interval_s, false, &hooks, now_ms);
    bm_loop_event(&s->loop, BM_EVENT_CONNECTED, now_ms);
    s->running = true;
}

void sim_restart(Sim *s)
{
    if (!s->running)
        return;
    save_state(s); /* the agent's stop: its state saved once more */
    s->stopped_before += s->loop.stopped;
    bm_engine_free(s->e);
    s->e = NULL;
    s->running = false;
    s->restarts++;
    start_agent(s, ms_of(s->h->t));
}

void sim_run(Sim *s, double until_s)
{
    SimHost *h = s->h;
    uint64_t now = ms_of(h->t), until = ms_of(until_s), start = ms_of(s->t_steady);
    while (now < until) {
        if (!s->no_agent && !s->running && now >= start)
            start_agent(s, now);
        uint64_t next = now + IDLE_STEP_MS;
        if (s->running) {
            next = bm_loop_turn(&s->loop, now);
            s->stopped = s->stopped_before + s->loop.stopped;
        } else if (!s->no_agent && now < start && next > start) {
            next = start;
        }
        if (next > until)
            next = until;
        if (next > now) {
            sim_advance(h, (double)(next - now) / 1000);
            now = next;
        }
    }
}

static void on_once_passed(void *ctx, const BmEngine *e)
{
    (void)e;
    record_pass(ctx);
}

void sim_run_timer(Sim *s, double until_s)
{
    SimHost *h = s->h;
    uint64_t now = ms_of(h->t), until = ms_of(until_s), start = ms_of(s->t_steady);
    uint64_t every = (uint64_t)s->policy->timer_interval_s * 1000;
    uint64_t next_run = start;
    while (now < until) {
        if (now >= next_run) {
            /* one run of `run --once`: a new process, its state file read and written */
            BmEngineOptions o = bm_once_engine_options(false, false);
            o.host = &h->ops;
            s->e = bm_engine_new(&o);
            bm_engine_set_policy(s->e, s->policy);
            if (bm_state_load(s->state_path, bm_engine_ledger(s->e)) < 0)
                bm_error_reset(); /* the first run: no file yet */
            BmOnceOptions oo = {.state_path = s->state_path};
            BmOnceHooks hooks = {.ctx = s, .passed = on_once_passed};
            bm_once_run(s->e, s->policy, &oo, &hooks);
            bm_engine_free(s->e);
            s->e = NULL;
            next_run += every;
            now = ms_of(h->t); /* the run waited for its changes */
            continue;
        }
        uint64_t next = now + IDLE_STEP_MS;
        if (next > next_run)
            next = next_run;
        if (next > until)
            next = until;
        sim_advance(h, (double)(next - now) / 1000);
        now = next;
    }
}

/* Fills *ret; see sim.h. */
void sim_result(const Sim *s, SimResult *ret)
{
    const SimHost *h = s->h;
    *ret = (SimResult){.keep_free_worst_s = s->keep_free_worst_s,
                       .reversals_max = s->reversals_max,
                       .steady_changes = s->steady_changes,
                       .back_bound_passes = s->back_bound_passes,
                       .rss_rest_bytes = s->rss_rest,
                       .rss_min_bytes = isfinite(s->rss_min) ? s->rss_min : s->rss_rest,
                       .passes = s->passes,
                       .changes = s->n_changes,
                       .relief_s = -1,
                       .back_passes = -1,
                       .give_back_s = -1,
                       .hot_work_ratio = -1};
    for (size_t i = 0; i < h->n; i++) {
        ret->oom_kills += h->g[i].oom_kills;
        ret->ballooned_bytes += h->g[i].max - s->min_actual[i];
    }
    ret->rss_dropped_bytes = ret->rss_rest_bytes - ret->rss_min_bytes;
    ret->relief_due = s->t_below >= 0 && s->takeable_at_below >= s->need_at_below;
    if (s->t_below >= 0 && s->t_back >= 0) {
        ret->relief_s = s->t_back - s->t_below;
        ret->relief_passes = s->passes_back - s->passes_below;
    }
    if (s->t_comfort >= 0 && s->t_all_back >= 0)
        ret->back_passes = (double)(s->passes_all_back - s->passes_comfort);
    if (s->t_room >= 0)
        ret->give_back_s = s->t_room - s->t_step;
    if (s->hot_time_before > 0 && s->hot_time_pressure > 0)
        ret->hot_work_ratio = (s->hot_work_pressure / s->hot_time_pressure) /
                              (s->hot_work_before / s->hot_time_before);
    for (size_t i = 0; i < h->n; i++)
        ret->hot_rd_bytes += h->g[i].hot_ws > 0 ? h->g[i].rd_bytes : 0;
}

void sim_print(const char *title, const SimResult *r, double run_s)
{
    printf("# %s: %zu passes, %zu changes, %.2f s of CPU\n", title, r->passes, r->changes, run_s);
    printf("#   guest OOM kills %u; longest a ballooned growing guest was below keep_free %.2f s\n",
           r->oom_kills, r->keep_free_worst_s);
    printf("#   relief %.1f s in %zu passes (%s); reversals/domain max %u; steady changes %zu\n",
           r->relief_s, r->relief_passes, r->relief_due ? "memory to take" : "not due", r->reversals_max,
           r->steady_changes);
    printf("#   balloons %.0f MiB, QEMU RSS %.0f -> %.0f MiB (dropped %.0f MiB); back %.0f passes after "
           "comfortable (max_step allows %zu); give-back %.1f s\n",
           r->ballooned_bytes / SIM_MIB, r->rss_rest_bytes / SIM_MIB, r->rss_min_bytes / SIM_MIB,
           r->rss_dropped_bytes / SIM_MIB, r->back_passes, r->back_bound_passes, r->give_back_s);
    if (r->hot_work_ratio >= 0)
        printf("#   hot cache: work rate under pressure %.2f of before, %.0f MiB read from disk\n",
               r->hot_work_ratio, r->hot_rd_bytes / SIM_MIB);
}
