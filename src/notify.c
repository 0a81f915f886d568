#include "notify.h"

#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "error.h"

int bm_notify(const char *text)
{
    int r = sd_notify(0, text);
    if (r >= 0)
        return r > 0;
    const char *path = getenv("NOTIFY_SOCKET");
    return bm_error(r, "NOTIFY_SOCKET '%s': %s", path ? path : "", strerror(-r));
}

uint64_t bm_notify_watchdog_usec(void)
{
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}
