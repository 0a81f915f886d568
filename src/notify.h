/* The service manager's notification protocol through libsystemd: sd_notify(3) sends
 * "READY=1", "STATUS=...", "WATCHDOG=1", "STOPPING=1" to $NOTIFY_SOCKET, sd_watchdog_enabled(3)
 * reads $WATCHDOG_USEC and $WATCHDOG_PID. Without $NOTIFY_SOCKET every call does nothing. */
#pragma once

#include <stdint.h>

/* Sends text (one or more "KEY=VALUE" lines) to $NOTIFY_SOCKET (sd_notify(3)). Returns 1 when
 * sent, 0 when there is no $NOTIFY_SOCKET, or -errno with the reason (error.h's detail names
 * the socket). */
int bm_notify(const char *text);

/* The watchdog interval systemd asks of this process (sd_watchdog_enabled(3): $WATCHDOG_USEC,
 * only when $WATCHDOG_PID is unset or this process), in microseconds; 0 when none or when the
 * variables do not parse. */
uint64_t bm_notify_watchdog_usec(void);
