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
    /* free pages on the kernel's per-CPU lists (/proc/zoneinfo "pagesets"), which MemFree and
     * MemAvailable do not count; BM_ABSENT when zoneinfo was not read or has no pagesets */
    uint64_t percpu_free_bytes;
    /* what those lists hold at most at rest (the sum of their high_min, Linux >= 6.8, whose
     * lists grow up to 1/8 of a zone while a CPU frees much: the memory a balloon returned can
     * sit there for minutes); BM_ABSENT before 6.8, whose lists do not grow so */
    uint64_t percpu_rest_bytes;
    /* the pool of huge pages of the default size (HugePages_Total, HugePages_Free times
     * Hugepagesize): where a huge-page guest's unplugged virtio-mem blocks go, not MemAvailable;
     * 0 when the host has none (or its meminfo says nothing of it) */
    uint64_t hugepages_total_bytes;
    uint64_t hugepages_free_bytes;
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

/* Parses /proc/meminfo text into mem_total/mem_available and the huge-page pool's total and
 * free (0 without one; other fields untouched).
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

/* Parses /proc/zoneinfo text: the pagesets' "count:" (pages on a per-CPU free list) and
 * "high_min:" lines of every zone and CPU, in pages of page_bytes, into percpu_free_bytes and
 * percpu_rest_bytes (BM_ABSENT when there are none). Returns 0, or -EINVAL (naming the line)
 * when such a line's value is not a number. */
int bm_hostmem_parse_zoneinfo(const char *text, uint64_t page_bytes, BmHost *ret);

/* The most of proc_dir/zoneinfo read (about 1.5 KiB a zone and 170 bytes a zone and CPU). */
#define BM_HOSTMEM_ZONEINFO_MAX_BYTES (4u * 1024 * 1024)

/* Reads proc_dir/zoneinfo (proc_dir NULL: "/proc") into percpu_free_bytes and
 * percpu_rest_bytes. Returns 0 or -errno with the reason naming the file (then both are
 * BM_ABSENT). */
int bm_hostmem_read_percpu(const char *proc_dir, BmHost *ret);

/* The free pages on per-CPU lists above their rest, in bytes (0 when unknown). */
uint64_t bm_hostmem_percpu_excess(const BmHost *h);

/* Below this excess the lists are left alone. */
#define BM_HOSTMEM_PERCPU_DRAIN_MIN_BYTES (64ull * 1024 * 1024)

/* Gives the free pages on the per-CPU lists above their rest back to the kernel's free lists,
 * where MemFree and MemAvailable count them: the kernel trims every CPU's list one step (up to
 * 8 MiB a CPU) on each write to proc_dir/sys/vm/stat_refresh, which is what it does by itself
 * once a second. Starts from *h's reading of the lists (bm_hostmem_read_percpu(); none: nothing
 * written) and writes until the excess is under 16 MiB, it stopped falling for 3 writes, 4096
 * writes or 1 s; re-reads zoneinfo after each. *h holds the last reading (percpu fields only);
 * *ret_drained_bytes what the lists lost. Returns the number of writes, or -errno with the
 * reason naming the file (not root, a read-only /proc/sys). */
int bm_hostmem_drain_percpu(const char *proc_dir, BmHost *h, uint64_t *ret_drained_bytes);

/* The host's boot id (proc_dir/sys/kernel/random/boot_id, proc_dir NULL: "/proc") into buf:
 * with a domain's id it names one start of the domain (bm_ledger_boot_key()). "-" when it
 * cannot be read (then every start of a domain id looks the same). Returns buf. */
const char *bm_hostmem_read_boot_id(const char *proc_dir, char *buf, size_t n);
