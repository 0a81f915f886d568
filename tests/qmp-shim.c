/* LD_PRELOAD shim for the cli tests: a QEMU monitor on libvirt's test driver, which has none.
 * virDomainQemuMonitorCommand() answers a command whose "execute" is NAME with the contents of
 * $BM_QMP_SHIM_DIR/NAME.json when that file exists (a reply, or an error reply, as QEMU sends
 * it: what a hostile guest or QEMU can put there), and otherwise makes the real call. Every
 * command is appended to $BM_QMP_SHIM_DIR/log, one line each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt-qemu.h>

/* The value of "execute" in cmd, into buf (n bytes); "" when there is none. */
static void execute_of(const char *cmd, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *p = strstr(cmd, "\"execute\"");
    if (!p || !(p = strchr(p + 9, '"')))
        return;
    p++;
    size_t len = strcspn(p, "\"");
    if (len >= n)
        len = n - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char buf[4096];
    size_t got;
    while (m && (got = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, got, m);
    if (m)
        fclose(m);
    fclose(f);
    return text;
}

int virDomainQemuMonitorCommand(virDomainPtr domain, const char *cmd, char **result, unsigned int flags)
{
    static int (*real)(virDomainPtr, const char *, char **, unsigned int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "virDomainQemuMonitorCommand");
    const char *dir = getenv("BM_QMP_SHIM_DIR");
    char name[64], path[4096];
    execute_of(cmd, name, sizeof(name));
    if (dir && name[0] && !strchr(name, '/')) {
        snprintf(path, sizeof(path), "%s/log", dir);
        FILE *log = fopen(path, "ae");
        if (log) {
            fprintf(log, "%s\n", name);
            fclose(log);
        }
        snprintf(path, sizeof(path), "%s/%s.json", dir, name);
        char *reply = slurp(path);
        if (reply) {
            *result = reply;
            return 0;
        }
    }
    return real ? real(domain, cmd, result, flags) : -1;
}
