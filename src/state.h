/* The state file of timer runs and the agent (json-c): what the previous pass saw, for rates
 * and hysteresis, and the cumulative counters. Written atomically (temporary file, fsync,
 * rename), so a crash leaves the old or the new file, never a torn one. */
#pragma once

#include "export.h"
#include "policy-eval.h"

#include "config.h" /* BM_STATE_DEFAULT_PATH: LOCALSTATEDIR/lib/balloonmgr/state.json */

/* Parses state text into *ret and, when counters is not NULL, the cumulative counters of timer
 * runs (initialised first; a state without counters leaves them at zero). Returns 0 (free with
 * bm_previous_clear() / bm_counters_clear()), or -EINVAL with the reason. Pure. */
int bm_state_parse(const char *text, BmPrevious *ret, BmCounters *counters);

/* The text of a state file for prev (and counters, may be NULL), written at now_s. Caller
 * frees. Pure. */
char *bm_state_format(const BmPrevious *prev, const BmCounters *counters, uint64_t now_s);

/* The temporary files of bm_state_save(): PATH.tmp.balloonmgr-XXXXXX (a name an operator's
 * copy such as state.json.backup or state.json.tmp.backup never has, so that
 * bm_state_cleanup() can only remove ours). */
#define BM_STATE_TMP_SUFFIX ".tmp.balloonmgr-XXXXXX"
/* bm_state_cleanup() leaves temporary files changed in the last seconds alone. */
#define BM_STATE_TMP_MIN_AGE_S 2

/* Reads path. Returns 0 and *ret, -ENOENT when there is none, -EINVAL (not a state file: the
 * reason) or -EFBIG (larger than 64 MiB) when it is corrupt, or -errno when it cannot be read.
 * The detail does not name path: the caller does ("state 'PATH': REASON") and starts fresh. */
int bm_state_load(const char *path, BmPrevious *ret, BmCounters *counters);

/* Writes path atomically (bm_write_atomic()), creating its directory if needed. Returns 0 or
 * -errno with the reason ("cannot write: No space left on device (previous state kept)"; the
 * detail does not name path); on failure the previous file is untouched and no temporary
 * file is left. */
int bm_state_save(const char *path, const BmPrevious *prev, const BmCounters *counters,
                  uint64_t now_s);

/* Renames a corrupt state file to PATH.corrupt (replacing an older one), so that it is kept
 * for a post-mortem and not read again. Returns 0 and the new name in *ret_path (caller
 * frees), or -errno with the reason. */
int bm_state_set_aside(const char *path, char **ret_path);

/* Removes the temporary files writers killed in the middle of bm_state_save() left beside
 * path (bm_atomic_cleanup(): not those of a writer at work). Returns how many, 0 when the
 * directory does not exist, or -errno with the reason. */
int bm_state_cleanup(const char *path);

/* The saves of a loop (agent, run without --once): a failure is reported once, not every pass. */
typedef struct {
    unsigned failures;      /* consecutive failed saves */
    unsigned failed_before; /* after BM_SAVE_RECOVERED: how many failed before it */
    char reported[512];     /* the reason reported last, "" when none */
} BmStateWriter;

typedef enum {
    BM_SAVE_OK,           /* saved */
    BM_SAVE_RECOVERED,    /* saved, after w->failed_before failures: say so */
    BM_SAVE_FAILED,       /* the first failure, or one for another reason: report it */
    BM_SAVE_FAILED_QUIET, /* failed again for the same reason: count it, do not report */
} BmSaveOutcome;

/* bm_state_save() and what the caller should report (the detail holds the reason on failure).
 * w starts zeroed. */
BmSaveOutcome bm_state_save_tracked(BmStateWriter *w, const char *path, const BmPrevious *prev,
                                    const BmCounters *counters, uint64_t now_s);

/* What to remember of this pass: counters of every running domain and the host mode.
 * Caller frees with bm_previous_clear(). */
void bm_previous_from(const BmSnapshot *snap, BmHostMode mode, uint64_t now_s, BmPrevious *ret);

void bm_previous_clear(BmPrevious *p);
