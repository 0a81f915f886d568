/* The timer's pass (docs/design.md, "One pass"): what `run --once` does after its options, its
 * policy, its state file and its connection are in place: one pass, the wait for its changes
 * (the policy's apply_timeout), a reading of the domains after them, the export (a textfile, a
 * Pushgateway) and the state file's save. As the agent (agent.c) is the agent's loop: the verb
 * (cmd-run.c) parses the options and prints what happened, through the hooks below, at the
 * moment it happens; the problems are reported here, as the verb "run". */
#pragma once

#include <signal.h>
#include <stdbool.h>

#include "engine.h"
#include "policy.h"

typedef struct {
    bool dry_run;              /* decide, change nothing: no wait, no save */
    const char *state_path;    /* saved after the pass (not in a dry run) */
    const char *textfile_dir;  /* --textfile DIR, NULL: none */
    const char *push_url;      /* --push URL, NULL: none */
    const volatile sig_atomic_t *stop; /* set by SIGTERM or SIGINT (the signal): the wait ends */
} BmOnceOptions;

/* What the verb shows, each called once at its moment (NULL: nothing shown):
 *   passed    the pass decided and started its changes (bm_engine_plan(), bm_engine_applied());
 *   waited    the wait for the changes ended, before anything is reported about it (a
 *             terminal's progress line is cleared here);
 *   observed  the domains were read again after the changes: how each one ended is in the
 *             ledger (bm_engine_ledger()). Only when the pass started changes. */
typedef struct {
    void *ctx;
    void (*passed)(void *ctx, const BmEngine *e);
    void (*waited)(void *ctx);
    void (*observed)(void *ctx, const BmEngine *e);
} BmOnceHooks;

/* The engine options of the timer's pass (a dry run: never a change; readonly: a read-only
 * connection, no QEMU monitor asked). */
BmEngineOptions bm_once_engine_options(bool dry_run, bool readonly);

/* Runs the timer's pass on e (its connection and policy set, its ledger loaded) with policy pol
 * (for apply_timeout). A pass that could not read the host or the domains is reported and
 * still exports and saves (its error counted). Returns the exit status: BM_EXIT_OK, or
 * BM_EXIT_FAILURE when the pass could not read, a domain's change failed, the metrics could
 * not be exported or the state could not be saved (each reported). */
int bm_once_run(BmEngine *e, const BmPolicy *pol, const BmOnceOptions *o, const BmOnceHooks *h);
