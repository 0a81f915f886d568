/* The process_* metrics of the official Prometheus client libraries, read from /proc/self:
 * CPU time, resident and virtual memory, open and maximum file descriptors, start time. */
#pragma once

#include <stdint.h>

#include "metrics.h"

typedef struct {
    double cpu_seconds;         /* user + system */
    uint64_t resident_bytes;
    uint64_t virtual_bytes;
    uint64_t open_fds;
    uint64_t max_fds;           /* soft RLIMIT_NOFILE; BM_ABSENT when unlimited or unknown */
    double start_time_seconds;  /* Unix time */
} BmProcess;

/* Reads the calling process from PROC/self/stat, PROC/self/fd, PROC/self/limits and PROC/stat
 * (btime), PROC being proc_dir (NULL: "/proc"; tests pass a fake one). Returns 0, or -errno
 * with the reason in bm_error_detail() (-ENOENT a file missing, -EINVAL one malformed). */
int bm_process_read(const char *proc_dir, BmProcess *ret);

/* Declares the six process_* families in r and adds p's samples (max_fds only when known).
 * Returns 0 or -EINVAL (a bug). */
int bm_process_export(BmRegistry *r, const BmProcess *p);

/* bm_process_read() of /proc and bm_process_export() rendered alone: what the agent appends to
 * /metrics at each scrape. Caller frees; an empty string when /proc cannot be read. */
char *bm_process_render(void);
