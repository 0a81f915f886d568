/* virtio-mem arithmetic: a domain's total as a device's requested size, rounded to its block;
 * what the domain has now; what a device can still unplug and plug. */
#include <errno.h>
#include <string.h>

#include "error.h"
#include "tap.h"
#include "util.h"
#include "vmem.h"

#define MiB (1024ull * 1024)
#define GiB (1024 * MiB)

/* a domain of base MiB with one device of size, block, requested and current (BM_ABSENT: an
 * inactive XML) */
static BmBalloonConfig one_device(uint64_t base, uint64_t size, uint64_t block, uint64_t requested,
                                  uint64_t current)
{
    BmBalloonConfig c = {.base_memory_bytes = base, .n_virtio_mem = 1};
    c.virtio_mem[0] = (BmVirtioMem){.size_bytes = size, .block_bytes = block,
                                    .requested_bytes = requested, .current_bytes = current};
    return c;
}

static void test_target(void)
{
    BmBalloonConfig c = one_device(256 * MiB, 1 * GiB, 2 * MiB, 512 * MiB, 512 * MiB);
    BmVmemTarget t;
    ok(bm_vmem_target(&c, 0, 512 * MiB, &t) == 0, "512 MiB total");
    is_u64(t.requested_bytes, 256 * MiB, "requested: total less the base");
    ok(!t.rounded && t.total_bytes == 512 * MiB && t.others_bytes == 256 * MiB, "not rounded");

    ok(bm_vmem_target(&c, 0, 256 * MiB + 3 * MiB + 1024, &t) == 0 && t.rounded, "259 MiB + 1 KiB");
    is_u64(t.requested_bytes, 4 * MiB, "rounded to the nearest block: up past half a block");
    is_u64(t.asked_bytes, 3 * MiB + 1024, "what was asked kept");
    is_u64(t.total_bytes, 260 * MiB, "the domain's total as it will be");
    ok(bm_vmem_target(&c, 0, 256 * MiB + 2 * MiB + 1 * MiB, &t) == 0 &&
           t.requested_bytes == 4 * MiB, "half a block over: up");
    ok(bm_vmem_target(&c, 0, 256 * MiB + 2 * MiB + 1 * MiB - 1024, &t) == 0 &&
           t.requested_bytes == 2 * MiB && t.rounded, "half a block less 1 KiB over: down");
    ok(bm_vmem_target(&c, 0, 256 * MiB, &t) == 0 && t.requested_bytes == 0 && !t.rounded,
       "the base alone: requested 0");
    ok(bm_vmem_target(&c, 0, 256 * MiB + 1 * GiB, &t) == 0 && t.requested_bytes == 1 * GiB,
       "the most: the device's size");

    bm_error_reset();
    ok(bm_vmem_target(&c, 0, 255 * MiB, &t) == -ERANGE, "below the base refused");
    is_str(bm_error_detail(-ERANGE), "255 MiB is below what virtio-mem can unplug: the base memory "
           "of 256 MiB stays (the device unplugs only its own memory)", "with the base named");
    bm_error_reset();
    ok(bm_vmem_target(&c, 0, 256 * MiB + 1 * GiB + 1024, &t) == -ERANGE, "above its size refused");
    is_str(bm_error_detail(-ERANGE), "1.3 GiB is above what the virtio-mem device can plug: its "
           "size is 1 GiB (the domain's most with it: 1.3 GiB)", "with the size named");

    BmBalloonConfig odd = one_device(256 * MiB, 1 * GiB - 1 * MiB, 2 * MiB, 0, 0);
    ok(bm_vmem_target(&odd, 0, 256 * MiB + 1 * GiB - 1 * MiB, &t) == 0 &&
           t.requested_bytes == 1 * GiB - 2 * MiB,
       "rounding up never past the device's size");

    BmBalloonConfig none = one_device(BM_ABSENT, 1 * GiB, 2 * MiB, 0, 0);
    ok(bm_vmem_target(&none, 0, 512 * MiB, &t) == -EINVAL, "no base: refused");
    none = one_device(256 * MiB, 1 * GiB, BM_ABSENT, 0, 0);
    ok(bm_vmem_target(&none, 0, 512 * MiB, &t) == -EINVAL, "no block: refused");
    ok(bm_vmem_target(&c, 1, 512 * MiB, &t) == -EINVAL, "no such device: refused");
}

/* two devices: the other's requested size stays */
static void test_two_devices(void)
{
    BmBalloonConfig c = one_device(1 * GiB, 2 * GiB, 2 * MiB, 1 * GiB, 1 * GiB);
    c.n_virtio_mem = 2;
    c.virtio_mem[1] = (BmVirtioMem){.size_bytes = 2 * GiB, .block_bytes = 4 * MiB,
                                    .requested_bytes = 512 * MiB, .current_bytes = 256 * MiB};
    BmVmemTarget t;
    ok(bm_vmem_target(&c, 1, 3 * GiB, &t) == 0 && t.requested_bytes == 1 * GiB &&
           t.others_bytes == 2 * GiB,
       "second device: the total less the base and the first's requested 1 GiB");
    ok(bm_vmem_target(&c, 1, 2 * GiB - 1 * MiB, &t) == -ERANGE, "below base and the other: refused");
    is_u64(bm_vmem_domain_bytes(&c), 1 * GiB + 1 * GiB + 256 * MiB, "now: base and what is plugged");
    is_u64(bm_vmem_plugged_bytes(&c), 1 * GiB + 256 * MiB, "plugged: the sum of <current>");
    c.virtio_mem_more = 1;
    ok(!bm_present(bm_vmem_domain_bytes(&c)), "devices not read: not known");
}

static void test_now(void)
{
    BmBalloonConfig c = one_device(256 * MiB, 1 * GiB, 2 * MiB, 512 * MiB, 508 * MiB);
    is_u64(bm_vmem_domain_bytes(&c), 764 * MiB, "live: base + current");
    is_u64(bm_vmem_unpluggable_bytes(&c.virtio_mem[0]), 508 * MiB, "can unplug what is plugged");
    is_u64(bm_vmem_pluggable_bytes(&c.virtio_mem[0]), 516 * MiB, "can plug the rest of its size");
    c = one_device(256 * MiB, 1 * GiB, 2 * MiB, 512 * MiB, BM_ABSENT);
    is_u64(bm_vmem_domain_bytes(&c), 768 * MiB, "inactive: base + requested (the next boot's)");
    ok(!bm_present(bm_vmem_plugged_bytes(&c)) && !bm_present(bm_vmem_pluggable_bytes(&c.virtio_mem[0])),
       "inactive: nothing plugged known");
    BmBalloonConfig none = {.base_memory_bytes = 1 * GiB};
    ok(!bm_present(bm_vmem_domain_bytes(&none)), "no device: absent");
}

/* the wait for what a device plugs: reached exactly, stalled without a step closer, the
 * deadline; a timer's look without a reading decides by the clock alone */
static void test_wait(void)
{
    const uint64_t s = 1000000000ull;
    BmVmemWait w;
    bm_vmem_wait_init(&w, 512 * MiB, 256 * MiB, 100 * s, 120000, 10000);
    ok(bm_vmem_wait_step(&w, true, 512 * MiB, 100 * s) == BM_VMEM_WAITING, "the size before: waiting");
    ok(bm_vmem_wait_step(&w, true, 400 * MiB, 105 * s) == BM_VMEM_WAITING, "a step closer");
    ok(bm_vmem_wait_step(&w, false, 0, 114 * s) == BM_VMEM_WAITING,
       "9 s after the last step, no reading: waiting");
    ok(bm_vmem_wait_step(&w, true, 420 * MiB, 114 * s) == BM_VMEM_WAITING &&
           w.last_progress_ns == 105 * s,
       "a reading farther away is no progress");
    ok(bm_vmem_wait_step(&w, false, 0, 115 * s) == BM_VMEM_STALLED,
       "10 s without a step closer: stalled (a guest that unplugs no more)");

    bm_vmem_wait_init(&w, 512 * MiB, 256 * MiB, 0, 120000, 10000);
    ok(bm_vmem_wait_step(&w, true, 256 * MiB + 2 * MiB, 3 * s) == BM_VMEM_WAITING,
       "a block short: not reached (blocks, no tolerance)");
    ok(bm_vmem_wait_step(&w, true, 256 * MiB, 4 * s) == BM_VMEM_REACHED, "the requested size: reached");

    bm_vmem_wait_init(&w, 0, 256 * MiB, 0, 120000, 10000);
    ok(bm_vmem_wait_step(&w, false, 0, 10 * s) == BM_VMEM_STALLED,
       "nothing plugged for 10 s (no driver): stalled");

    bm_vmem_wait_init(&w, 0, 1024 * MiB, 0, 30000, 10000);
    for (uint64_t t = 1; t < 30; t++)
        bm_vmem_wait_step(&w, true, t * 32 * MiB, t * s);
    ok(bm_vmem_wait_step(&w, true, 30 * 32 * MiB, 30 * s) == BM_VMEM_TIMEOUT,
       "still coming closer at the deadline: timeout");
    ok(bm_vmem_wait_step(&w, true, 1024 * MiB, 31 * s) == BM_VMEM_REACHED,
       "reached outranks the deadline at the same look");

    bm_vmem_wait_init(&w, 256 * MiB, 256 * MiB, 0, 120000, 10000);
    ok(bm_vmem_wait_step(&w, true, 256 * MiB, 0) == BM_VMEM_REACHED,
       "already the requested size: reached at once");
}

int main(void)
{
    test_wait();
    test_target();
    test_two_devices();
    test_now();
    return tap_done();
}
