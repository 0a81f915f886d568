/* The closed loop in simulated time: the real engine and policy on the model of a host
 * (model.h), run by the agent's own loop (loop.h: its jobs and their schedule, schedule.h, on
 * the model's clock), or by the timer's pass (once.h: `run --once` a timer_interval apart, the
 * state file between them); the agent restarted mid-episode (its state saved on the way out
 * and loaded); and what test-pressure.sh checks of a real run, measured on it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "loop.h"
#include "model.h"
#include "policy-eval.h"
#include "policy.h"

typedef struct {
    double t;
    size_t guest;
    int dir; /* -1 inflate, +1 deflate */
    double from, target;
    size_t pass;
    int code;        /* the rule that decided it (BmReasonCode) */
    int mode;        /* the host's mode in the pass (BmHostMode) */
    const char *why; /* its record's one word (bm_reason_why()) */
} SimChange;

typedef struct {
    SimHost *h;
    BmEngine *e;            /* the agent's (while it runs), or the timer's pass's */
    BmLoop loop;            /* the agent's loop on e */
    bool running;           /* the agent runs */
    char *state;            /* the state file the agent saved last (bm_state_format()) */
    const BmPolicy *policy;
    bool no_agent;          /* a control: the engine never runs */
    const char *state_path; /* the timer's state file (sim_run_timer()) */
    /* phases (seconds of the model's time): steady from t_steady, pressure [t_hog, t_hog_end) */
    double t_steady, t_hog, t_hog_end;
    /* optional: a guest whose demand steps up at t_step (give-back latency) */
    long step_guest;
    double t_step;
    /* recorded */
    SimChange *changes;
    size_t n_changes;
    size_t passes;
    double *below_run_s, *keep_free_bytes, *deadband_bytes, *max_step_bytes;
    double keep_free_worst_s;
    size_t keep_free_worst_guest;
    double min_avail, t_below, t_back, t_comfort, t_all_back;
    size_t passes_below, passes_back, passes_comfort, passes_all_back;
    double takeable_at_below, need_at_below;
    double rss_rest, rss_min, ballooned_at_comfort;
    double *min_actual; /* per guest, under pressure */
    size_t back_bound_passes;
    double step_actual, t_room;
    double hot_work_before, hot_time_before, hot_work_pressure, hot_time_pressure, hot_rd_pressure;
    double episode_start;
    int *last_dir;
    unsigned *reversals;
    unsigned reversals_max;
    size_t steady_changes;
    size_t stopped;         /* inflates stopped in flight (bm_engine_stop_hurting()) */
    size_t stopped_before;  /* ... by the agent's runs before its restart */
    size_t restarts;
    size_t busy_skips;      /* decisions left alone: a long job held the domain */
    double cpu_s;
} Sim;

/* Sets up s on h under policy (the agent's engine, its clock and seam the model's). */
void sim_init(Sim *s, SimHost *h, const BmPolicy *policy);
void sim_clear(Sim *s);

/* Runs until the model's time reaches until_s: the agent's loop from t_steady on (unless
 * no_agent). */
void sim_run(Sim *s, double until_s);

/* The agent stops (SIGTERM: its state saved on the way out; the changes in flight forgotten, the
 * balloons go on to their targets) and starts again at once, its state loaded: a pass at once. */
void sim_restart(Sim *s);

/* Runs until until_s with the timer instead of the agent: `run --once` (bm_once_run(), its
 * engine options bm_once_engine_options()) every timer_interval from t_steady, its ledger
 * loaded from and saved to state_path. */
void sim_run_timer(Sim *s, double until_s);

/* What a scenario's checks read, after sim_run(). */
typedef struct {
    unsigned oom_kills;
    double keep_free_worst_s;     /* longest a ballooned guest whose load grew was below keep_free */
    bool relief_due;              /* the host went below reclaim_below with memory to take */
    double relief_s;              /* from below reclaim_below back to it (-1: never back) */
    size_t relief_passes;
    unsigned reversals_max;       /* per domain per episode */
    size_t steady_changes;
    double back_passes;           /* passes from comfortable until nothing is ballooned (-1: never) */
    size_t back_bound_passes;     /* what max_step allows: the most ballooned guest's share */
    double ballooned_bytes;       /* sum of each guest's most ballooned under pressure */
    double rss_dropped_bytes, rss_rest_bytes, rss_min_bytes; /* total QEMU RSS */
    double give_back_s;           /* the step guest's room (-1: none) */
    double hot_work_ratio;        /* hot guests' work rate under pressure / before (-1: none) */
    double hot_rd_bytes;          /* their disk reads under pressure */
    size_t passes, changes;
} SimResult;

void sim_result(const Sim *s, SimResult *ret);

/* Prints the numbers as a TAP comment (# ...) under a title. */
void sim_print(const char *title, const SimResult *r, double run_s);
