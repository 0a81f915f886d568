/* The service manager's notification protocol (sd_notify(3)) without libsystemd: datagrams
 * "READY=1", "STATUS=...", "WATCHDOG=1", "STOPPING=1" to the unix socket $NOTIFY_SOCKET (a
 * path, or '@' for the abstract namespace). Without $NOTIFY_SOCKET every call does nothing. */
#pragma once

#include <stdint.h>

/* Sends text (one or more "KEY=VALUE" lines) to $NOTIFY_SOCKET. Returns 1 when sent, 0 when
 * there is no $NOTIFY_SOCKET, or -errno with the reason. */
int bm_notify(const char *text);

/* The watchdog interval systemd asks for ($WATCHDOG_USEC, for this process when
 * $WATCHDOG_PID is set), in microseconds; 0 when none. */
uint64_t bm_notify_watchdog_usec(void);
