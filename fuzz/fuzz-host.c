/* Fuzzes the host readers' parsers (src/hostmem.h) on the same text: /proc/meminfo, PSI
 * (/proc/pressure/memory) and /proc/zoneinfo. Errors must be -EINVAL with a reason; what a
 * parser accepts must keep its promises (MemAvailable at most MemTotal, PSI within 0..100, the
 * per-CPU lists' bytes whole pages, the excess no more than the free pages). */
#include <errno.h>
#include <inttypes.h>

#include "error.h"
#include "fuzz.h"
#include "hostmem.h"
#include "util.h"

static void check_code(int r, const char *what)
{
    fuzz_assert(r == 0 || r == -EINVAL, "%s returned %d", what, r);
    if (r < 0)
        fuzz_assert(bm_error_detail(r)[0], "%s failed without a reason", what);
    bm_error_reset();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    BmHost h = {.mem_total_bytes = BM_ABSENT, .mem_available_bytes = BM_ABSENT};

    int r = bm_hostmem_parse_meminfo(s, &h);
    check_code(r, "bm_hostmem_parse_meminfo");
    if (r == 0) {
        fuzz_assert(bm_present(h.mem_total_bytes) && h.mem_total_bytes > 0, "MemTotal %" PRIu64,
                    h.mem_total_bytes);
        fuzz_assert(!bm_present(h.mem_available_bytes) || h.mem_available_bytes <= h.mem_total_bytes,
                    "MemAvailable %" PRIu64 " above MemTotal %" PRIu64, h.mem_available_bytes,
                    h.mem_total_bytes);
    }

    r = bm_hostmem_parse_psi(s, &h);
    check_code(r, "bm_hostmem_parse_psi");
    if (r == 0)
        fuzz_assert(h.psi_present && h.psi_some_avg10 >= 0 && h.psi_some_avg10 <= 100 &&
                        h.psi_some_avg60 >= 0 && h.psi_some_avg60 <= 100 && h.psi_full_avg10 >= 0 &&
                        h.psi_full_avg10 <= 100 && h.psi_full_avg60 >= 0 && h.psi_full_avg60 <= 100,
                    "PSI out of 0..100");

    static const uint64_t pages[] = {4096, 65536};
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        h.percpu_free_bytes = h.percpu_rest_bytes = 0x5a5a;
        r = bm_hostmem_parse_zoneinfo(s, pages[i], &h);
        check_code(r, "bm_hostmem_parse_zoneinfo");
        if (r < 0)
            continue;
        fuzz_assert(!bm_present(h.percpu_free_bytes) || h.percpu_free_bytes % pages[i] == 0,
                    "free %" PRIu64 " not whole pages", h.percpu_free_bytes);
        fuzz_assert(!bm_present(h.percpu_rest_bytes) || h.percpu_rest_bytes % pages[i] == 0,
                    "rest %" PRIu64 " not whole pages", h.percpu_rest_bytes);
        uint64_t x = bm_hostmem_percpu_excess(&h);
        fuzz_assert(x == 0 || (bm_present(h.percpu_free_bytes) && x <= h.percpu_free_bytes),
                    "excess %" PRIu64 " of free %" PRIu64, x, h.percpu_free_bytes);
    }
    free(s);
    return 0;
}
