/* The state file of timer runs (json-c): what the previous pass saw, for rates and hysteresis.
 * Written atomically (temporary file, fsync, rename), so a crash leaves the old or the new
 * file, never a torn one. */
#pragma once

#include "export.h"
#include "policy-eval.h"

#define BM_STATE_DEFAULT_PATH "/var/lib/balloonmgr/state.json"

/* Parses state text into *ret and, when counters is not NULL, the cumulative counters of timer
 * runs (initialised first; a state without counters leaves them at zero). Returns 0 (free with
 * bm_previous_clear() / bm_counters_clear()), or -EINVAL with the reason. Pure. */
int bm_state_parse(const char *text, BmPrevious *ret, BmCounters *counters);

/* The text of a state file for prev (and counters, may be NULL), written at now_s. Caller
 * frees. Pure. */
char *bm_state_format(const BmPrevious *prev, const BmCounters *counters, uint64_t now_s);

/* Reads path. Returns 0 and *ret, -ENOENT when there is none, or -errno/-EINVAL with the
 * reason (the caller warns and starts fresh). */
int bm_state_load(const char *path, BmPrevious *ret, BmCounters *counters);

/* Writes path atomically, creating its directory if needed. Returns 0 or -errno with the
 * reason; on failure the previous file is untouched. */
int bm_state_save(const char *path, const BmPrevious *prev, const BmCounters *counters,
                  uint64_t now_s);

/* What to remember of this pass: counters of every running domain and the host mode.
 * Caller frees with bm_previous_clear(). */
void bm_previous_from(const BmSnapshot *snap, BmHostMode mode, uint64_t now_s, BmPrevious *ret);

void bm_previous_clear(BmPrevious *p);
