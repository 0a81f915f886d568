/* A domain's QEMU process as /proc shows it: how much of its resident memory is the guest's
 * RAM, and so how much is QEMU's own (its code and heap, TCG's translated code, device
 * buffers). The host-wide estimate of QEMU's own memory (yield.h) takes the smallest among
 * the domains; a guest running real software keeps more there (a Debian guest with a database
 * under TCG: its QEMU grew 1.3 MiB/s of translated code), and its free memory then looked
 * backed when it was not. Readers take the proc directory (tests feed a fake one); the parser
 * is pure. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* A mapping is the guest's RAM when it is readable and writable, not executable, and between a
 * quarter of the domain's maximum memory and this much above it (QEMU's alignment). */
#define BM_QEMUPROC_RAM_SLACK_BYTES (256ull << 20)

/* The resident size (Rss) of the guest RAM mapping in smaps text (/proc/PID/smaps) of a QEMU
 * process whose domain has ram_bytes of maximum memory: the largest mapping that qualifies
 * (BM_QEMUPROC_RAM_SLACK_BYTES). Returns 0 and *ret_bytes, -ENOENT when no mapping qualifies,
 * -EINVAL (with the line) when the text is not smaps. Pure. */
int bm_qemuproc_parse_smaps(const char *text, uint64_t ram_bytes, uint64_t *ret_bytes);

/* The PID of the QEMU process of the running domain called name, from libvirt's pid file
 * RUN_DIR/NAME.pid (the QEMU driver's state directory: /run/libvirt/qemu for qemu:///system).
 * Returns 0 and *ret, or -errno with the reason. */
int bm_qemuproc_pid(const char *run_dir, const char *name, pid_t *ret);

/* The resident size of the guest RAM of the QEMU process pid (PROC_DIR/PID/smaps, proc_dir
 * NULL: /proc), whose domain has ram_bytes of maximum memory. Reading another user's smaps
 * needs CAP_SYS_PTRACE (the agent's unit grants it). Returns 0 and *ret_bytes, or -errno with
 * the reason. */
int bm_qemuproc_ram_resident(const char *proc_dir, pid_t pid, uint64_t ram_bytes,
                             uint64_t *ret_bytes);
