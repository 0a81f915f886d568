/* Changes measured by other balloonmgr processes (`set --wait`), handed to the agent and the
 * timer runs so their latency is counted too: one small JSON file per change in
 * $BALLOONMGR_RUNTIME_DIR/changes (default RUNDIR/balloonmgr/changes, config.h: /run/balloonmgr/changes), written atomically, named
 * XXXXXX.json (six letters or digits). The directory exists while an agent or timer uses it;
 * without it nothing is written. It must belong to the user (root for the system's) and be
 * writable by nobody else, or it is not used. Each entry records the libvirt URI the change
 * was made on; a reader counts only the changes of its own connection. */
#pragma once

#include <stddef.h>

#include "balloon.h"
#include "ledger.h"

/* The spool directory (caller frees). */
char *bm_spool_dir(void);

/* Creates the spool directory (agent and timer runs). Returns 0 or -errno. */
int bm_spool_create(void);

/* The largest entry read (bm_spool_write() writes about 400 bytes). */
#define BM_SPOOL_ENTRY_MAX_BYTES 4096
/* Another connection's changes are left for its reader this long, then removed. */
#define BM_SPOOL_STALE_S 3600

/* Records a change measured on the connection uri (bm_conn_uri()) if the spool directory
 * exists. Returns 1 when written, 0 when there is no spool, -errno on failure (a directory
 * writable by others or owned by another user included) with the reason. */
int bm_spool_write(const BmTracked *t, const char *uri);

/* Counts every spooled change made on the connection uri into l (the SG label from l's entry
 * of the domain) and removes those files; malformed ones (or of an older version, without a
 * URI) are removed too. Entries of other connections are left for their reader, removed after
 * BM_SPOOL_STALE_S. Anything that is not an entry file (another name, a link, a FIFO, a device,
 * a directory, a file larger than BM_SPOOL_ENTRY_MAX_BYTES) is skipped and left alone, names
 * before anything is opened (thousands of other files cost one directory read); *ret_skipped
 * says how many and the first few (caller frees; NULL when none), for the caller to report
 * when it changes. A call opens at most a bounded number of entry files (a flood of them is
 * counted over a few calls, and *ret_skipped says so).
 * Returns the number counted, or -errno with the reason when the directory is not usable
 * (0 when there is none). */
int bm_spool_ingest(BmLedger *l, const char *uri, uint64_t now_s, char **ret_skipped);
