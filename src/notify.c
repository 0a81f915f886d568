#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

int bm_notify(const char *text)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
        return bm_error(-EINVAL, "NOTIFY_SOCKET '%s': not an absolute path or @abstract name", path);
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bm_error(-errno, "NOTIFY_SOCKET: %s", strerror(errno));
    ssize_t r = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    int err = errno;
    close(fd);
    if (r < 0)
        return bm_error(-err, "NOTIFY_SOCKET '%s': %s", path, strerror(err));
    return 1;
}

uint64_t bm_notify_watchdog_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!usec || !usec[0])
        return 0;
    char *end;
    if (pid && pid[0]) {
        errno = 0;
        long p = strtol(pid, &end, 10);
        if (errno || *end || p != (long)getpid())
            return 0;
    }
    errno = 0;
    unsigned long long v = strtoull(usec, &end, 10);
    return errno || *end || usec[0] == '-' ? 0 : (uint64_t)v;
}
