/* Where the engine and the tracker take time and sleeping from: the system's clocks, or an
 * injected clock (tests/sim: a model of a host runs the real engine in simulated time). */
#pragma once

#include <stdint.h>

#include "util.h"

/* An injected clock: monotonic and wall-clock nanoseconds, and a sleep that advances them.
 * The functions get ctx. */
typedef struct {
    void *ctx;
    uint64_t (*mono_ns)(void *ctx);
    uint64_t (*real_ns)(void *ctx);
    void (*sleep_ms)(void *ctx, unsigned ms);
} BmClock;

/* bm_now_mono_ns(), bm_now_real_ns() and bm_sleep_ms() of clock c; NULL: the system's. */
static inline uint64_t bm_clock_mono_ns(const BmClock *c)
{
    return c ? c->mono_ns(c->ctx) : bm_now_mono_ns();
}

static inline uint64_t bm_clock_real_ns(const BmClock *c)
{
    return c ? c->real_ns(c->ctx) : bm_now_real_ns();
}

static inline void bm_clock_sleep_ms(const BmClock *c, unsigned ms)
{
    if (c)
        c->sleep_ms(c->ctx, ms);
    else
        bm_sleep_ms(ms);
}
