/* The state file of timer runs and the agent (json-c): the persistent part of the ledger (the
 * previous pass's readings for rates, its host mode for hysteresis, the per-domain records and
 * the cumulative counters). Written atomically (temporary file, fsync,
 * rename), so a crash leaves the old or the new file, never a torn one. */
#pragma once

#include "ledger.h"

#include "config.h" /* BM_STATE_DEFAULT_PATH: LOCALSTATEDIR/lib/balloonmgr/state.json */

/* The most domains a state file describes (a host runs a few thousand at most): a file with
 * more is corrupt, and what a load takes is bounded by it. */
#define BM_STATE_MAX_DOMAINS 16384

/* The scalar fields of the state file: a table per object they are in, one row per field
 * (its key, its type, where it is in its struct), from which both the writer and the reader
 * work, so that a new field is one row. */
typedef enum {
    BM_STATE_OPTIONAL,             /* uint64_t: a value or null (BM_ABSENT); a value out of
                                    * range (not a whole number from 0 to 2^63-1) is an error */
    BM_STATE_OPTIONAL_BEST_EFFORT, /* the same, but such a value is ignored (left as it was) */
    BM_STATE_TIME,                 /* uint64_t epoch seconds, 0 none: then left out */
    BM_STATE_COUNT,                /* uint64_t, written saturated at BM_COUNT_MAX; missing: 0 */
    BM_STATE_SECONDS,              /* double from 0, at most a year; < 0: none (-1) */
    BM_STATE_BOOL,                 /* bool */
    BM_STATE_DIRECTION,            /* int: a BM_DIR_*, -1 none */
} BmStateFieldType;

typedef struct {
    const char *key;
    BmStateFieldType type;
    size_t offset, size; /* where the field is in its table's struct, and its size */
} BmStateField;

/* The structs whose fields the tables describe: a domain's previous reading ("domains"), its
 * record and the yield in it ("counters"."domains"), the counters ("counters"). */
typedef enum {
    BM_STATE_IN_READING,  /* BmPrevReading */
    BM_STATE_IN_ENTRY,    /* BmLedgerEntry */
    BM_STATE_IN_YIELD,    /* BmYield */
    BM_STATE_IN_COUNTERS, /* BmCounters */
    BM_STATE_IN_COUNT
} BmStateStruct;

/* The table of the fields in the struct in: *ret_n rows. */
const BmStateField *bm_state_fields(BmStateStruct in, size_t *ret_n);

/* Parses state text into the ledger *ret (initialised first; a state without counters leaves
 * them at zero). Returns 0 (free with bm_ledger_clear()), or -EINVAL with the reason (*ret
 * empty). Pure. */
int bm_state_parse(const char *text, BmLedger *ret);

/* The text of a state file for l, written at now_s. Caller frees. Pure. */
char *bm_state_format(const BmLedger *l, uint64_t now_s);

/* The temporary files of bm_state_save(): PATH.tmp.balloonmgr-XXXXXX (a name an operator's
 * copy such as state.json.backup or state.json.tmp.backup never has, so that
 * bm_state_cleanup() can only remove ours). */
#define BM_STATE_TMP_SUFFIX ".tmp.balloonmgr-XXXXXX"
/* bm_state_cleanup() leaves temporary files changed in the last seconds alone. */
#define BM_STATE_TMP_MIN_AGE_S 2

/* Reads path. Returns 0 and *ret, -ENOENT when there is none, -EINVAL (not a state file: the
 * reason) or -EFBIG (larger than 64 MiB) when it is corrupt, or -errno when it cannot be read.
 * The detail does not name path: the caller does ("state 'PATH': REASON") and starts fresh. */
int bm_state_load(const char *path, BmLedger *ret);

/* Writes path atomically (bm_file_write_atomic()), creating its directory if needed. Returns 0 or
 * -errno with the reason ("cannot write: No space left on device (previous state kept)"; the
 * detail does not name path); on failure the previous file is untouched and no temporary
 * file is left. */
int bm_state_save(const char *path, const BmLedger *l, uint64_t now_s);

/* Renames a corrupt state file to PATH.corrupt (replacing an older one, a regular file), so
 * that it is kept for a post-mortem and not read again. A PATH.corrupt that is anything else
 * (a directory, FIFO, symbolic link) is never replaced: the file goes to the first free
 * PATH.corrupt.N (N from 1 to BM_STATE_ASIDE_MAX) instead. Returns 0 and the new name in
 * *ret_path (caller frees), or -errno with the reason (then path is where it was). */
#define BM_STATE_ASIDE_MAX 99
int bm_state_set_aside(const char *path, char **ret_path);

/* Removes the temporary files writers killed in the middle of bm_state_save() left beside
 * path (bm_file_atomic_cleanup(): not those of a writer at work). Returns how many, 0 when the
 * directory does not exist, or -errno with the reason. */
int bm_state_cleanup(const char *path);

/* The lock file beside a state file: PATH.lock, locked (flock) by the process that writes
 * PATH for as long as it may write it, holding its PID as text. */
#define BM_STATE_LOCK_SUFFIX ".lock"

/* Takes the exclusive lock on path's lock file (created if needed, with path's directory),
 * without waiting. Returns 0 and the locked file's descriptor in *ret_fd (close it to
 * unlock; -1 when nothing can be locked because the directory cannot be written: then no
 * save can work either, and the save reports that), -EBUSY when another process holds it
 * (the detail names its PID and command line), or -errno with the reason (a lock file
 * that is not a regular file: -ENODEV). */
int bm_state_lock(const char *path, int *ret_fd);

/* The saves of the agent: a failure is reported once, not every pass. */
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
BmSaveOutcome bm_state_save_tracked(BmStateWriter *w, const char *path, const BmLedger *l,
                                    uint64_t now_s);
