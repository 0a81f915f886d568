#define _GNU_SOURCE
#include "emulator.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

#define HELP_TIMEOUT_MS 10000
#define HELP_MAX_BYTES (256 * 1024)

int bm_emulator_parse_device_help(const char *text, const char *prop, bool *ret_has)
{
    size_t n_props = 0, len = strlen(prop);
    *ret_has = false;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (l[0] != ' ' || l[1] != ' ')
            continue;
        const char *name = l + 2, *eq = strchr(name, '='), *nl = strchr(name, '\n');
        if (!eq || (nl && eq > nl) || eq == name)
            continue;
        n_props++;
        if ((size_t)(eq - name) == len && memcmp(name, prop, len) == 0)
            *ret_has = true;
    }
    return n_props ? 0 : bm_error(-EBADMSG, "no property list in its output");
}

/* The first line of text, for a message. */
static void first_line(const char *text, char *buf, size_t n)
{
    size_t k = strcspn(text, "\n");
    snprintf(buf, n, "%.*s", (int)(k < n ? k : n - 1), text);
}

/* Reads fd until EOF, at most HELP_MAX_BYTES, until deadline_ns. Returns 0 and *ret_text, or
 * -ETIMEDOUT / -errno. */
static int read_all(int fd, uint64_t deadline_ns, char **ret_text)
{
    size_t len = 0, cap = 4096;
    _cleanup_free_ char *buf = bm_malloc0(cap + 1);
    for (;;) {
        uint64_t now = bm_now_mono_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((deadline_ns - now) / 1000000 + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            continue;
        if (len == cap) {
            if (cap >= HELP_MAX_BYTES)
                break; /* enough: the property list is short */
            buf = bm_reallocarray(buf, cap * 2 + 1, 1);
            cap *= 2;
        }
        ssize_t k = read(fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            break;
        len += (size_t)k;
    }
    buf[len] = '\0';
    *ret_text = TAKE_PTR(buf);
    return 0;
}

int bm_emulator_device_has_property(const char *emulator, const char *type, const char *prop,
                                    bool *ret_has)
{
    if (emulator[0] != '/')
        return bm_error(-EINVAL, "'%s' is not an absolute path", emulator);
    if (access(emulator, X_OK) < 0)
        return bm_error(-errno, "cannot run '%s': %s", emulator, strerror(errno));
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return bm_error(-errno, "pipe: %s", strerror(errno));
    _cleanup_free_ char *arg = bm_asprintf("%s,help", type);
    char *argv[] = {(char *)emulator, "-device", arg, NULL};
    /* as libvirt starts QEMU: a clean environment (no LD_PRELOAD of this process, C locale) */
    char *envp[] = {"LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int r = posix_spawn(&pid, emulator, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (r != 0) {
        close(fds[0]);
        return bm_error(-r, "cannot run '%s': %s", emulator, strerror(r));
    }
    _cleanup_free_ char *text = NULL;
    r = read_all(fds[0], bm_now_mono_ns() + HELP_TIMEOUT_MS * 1000000ull, &text);
    close(fds[0]);
    if (r < 0)
        kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (r == -ETIMEDOUT)
        return bm_error(r, "'%s -device %s' did not answer within %d s", emulator, arg,
                        HELP_TIMEOUT_MS / 1000);
    if (r < 0)
        return bm_error(r, "reading the output of '%s': %s", emulator, strerror(-r));
    char line[200];
    first_line(text, line, sizeof(line));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return bm_error(-EIO, "'%s -device %s' failed (%s %d): %s", emulator, arg,
                        WIFEXITED(status) ? "exit status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                        line[0] ? line : "(nothing)");
    r = bm_emulator_parse_device_help(text, prop, ret_has);
    if (r < 0) /* QEMU 7.2 exits 0 after "Device 'x' not found" */
        return bm_error(r, "'%s -device %s' printed no property list: %s", emulator, arg,
                        line[0] ? line : "(nothing)");
    return 0;
}
