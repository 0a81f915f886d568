/* The host's memory: /proc/meminfo and PSI (/proc/pressure/memory). Readers take the proc
 * directory so tests can feed a fake one; the parsers are pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t mem_total_bytes;     /* MemTotal, BM_ABSENT if missing */
    uint64_t mem_available_bytes; /* MemAvailable, BM_ABSENT if missing */
    bool psi_present;             /* the kernel has PSI and it could be read */
    double psi_some_avg10;        /* percent of time some task stalled on memory, 0..100 */
    double psi_some_avg60;
    double psi_full_avg10;        /* percent of time all non-idle tasks stalled */
    double psi_full_avg60;
} BmHost;

/* What the policy makes of the host's memory in a pass (policy-eval.h), kept by the ledger
 * from one pass to the next (hysteresis). */
typedef enum {
    BM_HOST_HOLD,    /* between the thresholds: take nothing, give only to guests in need */
    BM_HOST_RECLAIM, /* under pressure: take memory back until target_available */
    BM_HOST_RELEASE, /* comfortable: give memory back, to guests in need first, then to every
                      * ballooned guest toward its maximum at max_step per pass */
} BmHostMode;

/* "hold", "reclaim", "release". */
const char *bm_host_mode_name(BmHostMode m);

/* Parses /proc/meminfo text into mem_total/mem_available (other fields untouched).
 * Returns 0, or -EINVAL when MemTotal is missing or a value is malformed. */
int bm_hostmem_parse_meminfo(const char *text, BmHost *ret);

/* Parses /proc/pressure/memory text ("some avg10=... avg60=...", "full ..."); sets
 * psi_present. Returns 0, or -EINVAL when malformed. */
int bm_hostmem_parse_psi(const char *text, BmHost *ret);

/* The most read of a /proc file (meminfo is about 1.5 KiB, pressure/memory under 200 bytes). */
#define BM_HOSTMEM_FILE_MAX_BYTES (64u * 1024)

/* Reads proc_dir/meminfo and proc_dir/pressure/memory (proc_dir NULL: "/proc"). A missing or
 * unreadable PSI file is not an error (psi_present false: old kernel, psi=0); one that is not a
 * regular file or larger than 64 KiB is, as for meminfo (file.h: never blocks on a FIFO).
 * Returns 0 or -errno with the reason naming the file. */
int bm_hostmem_read(const char *proc_dir, BmHost *ret);

/* The host's boot id (proc_dir/sys/kernel/random/boot_id, proc_dir NULL: "/proc") into buf:
 * with a domain's id it names one start of the domain (bm_ledger_boot_key()). "-" when it
 * cannot be read (then every start of a domain id looks the same). Returns buf. */
const char *bm_hostmem_read_boot_id(const char *proc_dir, char *buf, size_t n);
