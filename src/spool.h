/* Changes measured by other balloonmgr processes (`set --wait`), handed to the agent and the
 * timer runs so their latency is counted too: one small JSON file per change in
 * $BALLOONMGR_RUNTIME_DIR/changes (default /run/balloonmgr/changes), written atomically.
 * The directory exists while an agent or timer uses it; without it nothing is written. */
#pragma once

#include <stddef.h>

#include "balloon.h"
#include "ledger.h"

/* The spool directory (caller frees). */
char *bm_spool_dir(void);

/* Creates the spool directory (agent and timer runs). Returns 0 or -errno. */
int bm_spool_create(void);

/* Records a measured change if the spool directory exists. Returns 1 when written, 0 when
 * there is no spool, -errno on failure. */
int bm_spool_write(const BmTracked *t);

/* Counts every spooled change into l (the SG label from l's entry of the domain) and removes
 * the files. Malformed files are removed and skipped. Returns the number counted. */
size_t bm_spool_ingest(BmLedger *l, uint64_t now_s);
