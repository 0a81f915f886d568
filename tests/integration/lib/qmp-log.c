/* LD_PRELOAD shim for the integration tests: logs every virDomainQemuMonitorCommand() call of
 * the process (domain name and command, one line each) to the file $BM_QMP_LOG, then makes the
 * call. It tells which QEMU monitor commands balloonmgr itself sent, whatever other processes
 * on the host send to the same domains. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <libvirt/libvirt-qemu.h>

int virDomainQemuMonitorCommand(virDomainPtr domain, const char *cmd, char **result, unsigned int flags)
{
    static int (*real)(virDomainPtr, const char *, char **, unsigned int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "virDomainQemuMonitorCommand");
    const char *path = getenv("BM_QMP_LOG");
    FILE *f = path ? fopen(path, "ae") : NULL;
    if (f) {
        fprintf(f, "%s %s\n", virDomainGetName(domain), cmd);
        fclose(f);
    }
    return real ? real(domain, cmd, result, flags) : -1;
}
