/* The progress line of set --wait and run --once on a terminal: its text, and that nothing is
 * drawn when the stream is not a terminal. */
#include <stdio.h>
#include <string.h>

#include "progress.h"
#include "tap.h"
#include "util.h"

#define MiB (1024ull * 1024)

int main(void)
{
    char buf[256];
    is_str(bm_progress_format("web1", 4096 * MiB, 2048 * MiB, 3072 * MiB, 2000000000ull, buf, sizeof(buf)),
           "web1: inflate 4 GiB -> 2 GiB: at 3 GiB, 512 MiB/s, ETA 2.0 s", "inflate: size, rate, ETA");
    is_str(bm_progress_format("db1", 1024 * MiB, 2048 * MiB, 1536 * MiB, 500000000ull, buf, sizeof(buf)),
           "db1: deflate 1 GiB -> 2 GiB: at 1.5 GiB, 1 GiB/s, ETA 0.5 s", "deflate");
    is_str(bm_progress_format("web1", 4096 * MiB, 2048 * MiB, 4096 * MiB, 10000000ull, buf, sizeof(buf)),
           "web1: inflate 4 GiB -> 2 GiB: at 4 GiB", "not moved yet: no rate, no ETA");
    is_str(bm_progress_format("a\nb", 2 * MiB, MiB, 2 * MiB, 0, buf, sizeof(buf)),
           "a\\x0ab: inflate 2 MiB -> 1 MiB: at 2 MiB", "a name is made printable");

    /* not a terminal: nothing is written */
    FILE *f = tmpfile();
    BmProgress p;
    bm_progress_init(&p, f);
    ok(p.f == NULL, "a file is not a terminal: progress disabled");
    bm_progress_show(&p, "web1: something", true);
    bm_progress_clear(&p);
    bm_progress_interrupt();
    ok(ftell(f) == 0, "nothing written to a non-terminal");
    fclose(f);
    return tap_done();
}
