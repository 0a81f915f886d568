/* Progress of balloon changes on a terminal: one line rewritten in place (current size, rate,
 * ETA), on stderr only when it is a terminal; nothing at all otherwise. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;                /* NULL: disabled */
    bool shown;             /* a line is on the terminal */
    uint64_t last_mono_ns;  /* when it was last drawn */
} BmProgress;

/* Enables p when f is a terminal (isatty), else leaves it disabled. */
void bm_progress_init(BmProgress *p, FILE *f);

/* "web1: inflate 4 GiB -> 2 GiB: at 3 GiB, 512 MiB/s, ETA 2.0 s" into buf (size n): the rate
 * is the movement so far over elapsed_ns; no rate or ETA before the balloon moved. Pure. */
const char *bm_progress_format(const char *name, uint64_t from_bytes, uint64_t target_bytes,
                               uint64_t actual_bytes, uint64_t elapsed_ns, char *buf, size_t n);

/* Draws text as the progress line (at most 10 times a second unless force). */
void bm_progress_show(BmProgress *p, const char *text, bool force);

/* Erases the progress line, if one is shown, before other output. */
void bm_progress_clear(BmProgress *p);

/* Erases the line of whichever progress is shown (the last one drawn), so that a log line
 * does not land in the middle of it; it is drawn again at its next update. bm_log() calls
 * it. */
void bm_progress_interrupt(void);
