#include "progress.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "balloon.h"
#include "size.h"
#include "util.h"

#define REDRAW_NS 100000000ull

/* the progress whose line is on the terminal (one process draws one at a time) */
static BmProgress *shown_progress;

void bm_progress_init(BmProgress *p, FILE *f)
{
    *p = (BmProgress){0};
    if (f && isatty(fileno(f)))
        p->f = f;
}

const char *bm_progress_format(const char *name, uint64_t from_bytes, uint64_t target_bytes,
                               uint64_t actual_bytes, uint64_t elapsed_ns, char *buf, size_t n)
{
    char shown[128], from[32], target[32], at[32], rate[40] = "", eta[32] = "";
    uint64_t moved = bm_distance(actual_bytes, from_bytes);
    uint64_t left = bm_distance(actual_bytes, target_bytes);
    if (moved > 0 && elapsed_ns > 0) {
        double bps = (double)moved / (elapsed_ns / 1e9);
        char r[32];
        snprintf(rate, sizeof(rate), ", %s/s", bm_size_format((uint64_t)bps, r, sizeof(r)));
        snprintf(eta, sizeof(eta), ", ETA %.1f s", left / bps);
    }
    snprintf(buf, n, "%s: %s %s -> %s: at %s%s%s", bm_printable(name, shown, sizeof(shown)),
             bm_change_direction(from_bytes, target_bytes),
             bm_size_format(from_bytes, from, sizeof(from)),
             bm_size_format(target_bytes, target, sizeof(target)),
             bm_size_format(actual_bytes, at, sizeof(at)), rate, eta);
    return buf;
}

void bm_progress_show(BmProgress *p, const char *text, bool force)
{
    if (!p->f)
        return;
    uint64_t now = bm_now_mono_ns();
    if (!force && p->shown && now - p->last_mono_ns < REDRAW_NS)
        return;
    p->last_mono_ns = now;
    /* carriage return, the text, erase to the end of the line */
    fprintf(p->f, "\r%s\033[K", text);
    fflush(p->f);
    p->shown = true;
    shown_progress = p;
}

void bm_progress_clear(BmProgress *p)
{
    if (!p->f || !p->shown)
        return;
    fputs("\r\033[K", p->f);
    fflush(p->f);
    p->shown = false;
    if (shown_progress == p)
        shown_progress = NULL;
}

void bm_progress_interrupt(void)
{
    if (shown_progress)
        bm_progress_clear(shown_progress);
}
