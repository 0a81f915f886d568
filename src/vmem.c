#include "vmem.h"

#include <errno.h>

#include "error.h"
#include "size.h"
#include "util.h"

/* what device m has plugged: <current>, else (an inactive XML) <requested> */
static uint64_t plugged(const BmVirtioMem *m)
{
    return bm_present(m->current_bytes) ? m->current_bytes : m->requested_bytes;
}

uint64_t bm_vmem_plugged_bytes(const BmBalloonConfig *c)
{
    uint64_t sum = 0;
    if (c->n_virtio_mem == 0 || c->virtio_mem_more)
        return BM_ABSENT;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        uint64_t p = c->virtio_mem[i].current_bytes;
        if (!bm_present(p) || sum > BM_COUNT_MAX - p)
            return BM_ABSENT;
        sum += p;
    }
    return sum;
}

uint64_t bm_vmem_domain_bytes(const BmBalloonConfig *c)
{
    if (c->n_virtio_mem == 0 || c->virtio_mem_more || !bm_present(c->base_memory_bytes))
        return BM_ABSENT;
    uint64_t sum = c->base_memory_bytes;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        uint64_t p = plugged(&c->virtio_mem[i]);
        if (!bm_present(p) || sum > BM_COUNT_MAX - p)
            return BM_ABSENT;
        sum += p;
    }
    return sum;
}

uint64_t bm_vmem_unpluggable_bytes(const BmVirtioMem *m)
{
    return m->current_bytes;
}

uint64_t bm_vmem_pluggable_bytes(const BmVirtioMem *m)
{
    if (!bm_present(m->size_bytes) || !bm_present(m->current_bytes))
        return BM_ABSENT;
    return m->size_bytes > m->current_bytes ? m->size_bytes - m->current_bytes : 0;
}

bool bm_vmem_moves_domain(const BmBalloonConfig *c)
{
    return c->n_virtio_mem > 0 && (!c->present || bm_domxml_no_return_reason(c));
}

uint64_t bm_vmem_domain_max_bytes(const BmBalloonConfig *c)
{
    if (c->n_virtio_mem == 0 || c->virtio_mem_more || !bm_present(c->base_memory_bytes))
        return BM_ABSENT;
    uint64_t sum = c->base_memory_bytes;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        uint64_t z = c->virtio_mem[i].size_bytes;
        if (!bm_present(z) || sum > BM_COUNT_MAX - z)
            return BM_ABSENT;
        sum += z;
    }
    return sum;
}

int bm_vmem_pick(const BmBalloonConfig *c, bool unplug)
{
    int best = -1;
    uint64_t best_bytes = 0;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        const BmVirtioMem *m = &c->virtio_mem[i];
        uint64_t room = bm_vmem_pluggable_bytes(m);
        if (!bm_present(room) || !bm_present(m->block_bytes) || m->block_bytes == 0)
            continue;
        uint64_t can = unplug ? m->current_bytes : room;
        if (can >= m->block_bytes && can > best_bytes) {
            best = (int)i;
            best_bytes = can;
        }
    }
    return best;
}

uint64_t bm_vmem_round_unplug(uint64_t take_bytes, uint64_t block_bytes, uint64_t plugged_bytes)
{
    if (block_bytes == 0 || !bm_present(plugged_bytes))
        return 0;
    uint64_t take = take_bytes < plugged_bytes ? take_bytes : plugged_bytes;
    return take / block_bytes * block_bytes;
}

uint64_t bm_vmem_round_plug(uint64_t give_bytes, uint64_t block_bytes, uint64_t room_bytes)
{
    if (block_bytes == 0 || !bm_present(room_bytes) || give_bytes == 0)
        return 0;
    uint64_t room = room_bytes / block_bytes * block_bytes;
    uint64_t blocks = give_bytes / block_bytes + (give_bytes % block_bytes != 0);
    if (blocks > room / block_bytes)
        return room;
    return blocks * block_bytes;
}

int bm_vmem_target(const BmBalloonConfig *c, size_t index, uint64_t target_bytes,
                   BmVmemTarget *ret)
{
    *ret = (BmVmemTarget){0};
    if (index >= c->n_virtio_mem)
        return bm_error(-EINVAL, "the domain has no virtio-mem device %zu", index);
    const BmVirtioMem *m = &c->virtio_mem[index];
    if (!bm_present(c->base_memory_bytes))
        return bm_error(-EINVAL, "its base memory is unknown (<memory> less its memory devices)");
    if (!bm_present(m->size_bytes) || !bm_present(m->block_bytes) || m->block_bytes == 0)
        return bm_error(-EINVAL, "its virtio-mem device has no readable <size> or <block>");
    uint64_t others = c->base_memory_bytes;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        uint64_t r = c->virtio_mem[i].requested_bytes;
        if (i == index)
            continue;
        if (!bm_present(r) || others > BM_COUNT_MAX - r)
            return bm_error(-EINVAL, "another virtio-mem device has no readable <requested>");
        others += r;
    }
    ret->others_bytes = others;
    if (target_bytes < others)
        return bm_error(-ERANGE, "%s is below what virtio-mem can unplug: the base memory of %s%s"
                        " stays (the device unplugs only its own memory)",
                        BM_SZ(target_bytes), BM_SZ(c->base_memory_bytes),
                        others > c->base_memory_bytes ? " and the other devices' requested sizes"
                                                      : "");
    uint64_t asked = target_bytes - others, block = m->block_bytes;
    if (asked > m->size_bytes)
        return bm_error(-ERANGE, "%s is above what the virtio-mem device can plug: its size is %s "
                        "(the domain's most with it: %s)", BM_SZ(target_bytes),
                        BM_SZ(m->size_bytes), BM_SZ(others + m->size_bytes));
    uint64_t req = asked / block * block;
    if (asked - req >= block - block / 2 && req + block <= m->size_bytes)
        req += block; /* the nearest multiple, half a block up */
    ret->asked_bytes = asked;
    ret->requested_bytes = req;
    ret->total_bytes = others + req;
    ret->rounded = req != asked;
    return 0;
}

void bm_vmem_wait_init(BmVmemWait *w, uint64_t from_plugged_bytes, uint64_t requested_bytes,
                       uint64_t now_ns, unsigned timeout_ms, unsigned stall_ms)
{
    *w = (BmVmemWait){.requested_bytes = requested_bytes,
                      .closest_bytes = bm_distance(from_plugged_bytes, requested_bytes),
                      .started_ns = now_ns, .last_progress_ns = now_ns,
                      .timeout_ns = (uint64_t)timeout_ms * 1000000ull,
                      .stall_ns = (uint64_t)stall_ms * 1000000ull};
}

BmVmemWaitState bm_vmem_wait_step(BmVmemWait *w, bool have_reading, uint64_t plugged_bytes,
                                  uint64_t now_ns)
{
    if (have_reading) {
        uint64_t d = bm_distance(plugged_bytes, w->requested_bytes);
        if (d == 0)
            return BM_VMEM_REACHED;
        if (d < w->closest_bytes) {
            w->closest_bytes = d;
            w->last_progress_ns = now_ns;
        }
    }
    if (now_ns - w->started_ns >= w->timeout_ns)
        return BM_VMEM_TIMEOUT;
    if (now_ns - w->last_progress_ns >= w->stall_ns)
        return BM_VMEM_STALLED;
    return BM_VMEM_WAITING;
}
