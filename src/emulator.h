/* Asking a QEMU binary (not a running QEMU) about its devices: `EMULATOR -device TYPE,help`.
 * No QEMU monitor command is sent, so no domain is marked "tainted" by libvirt, and no domain
 * needs to be running. */
#pragma once

#include <stdbool.h>

/* Whether the help text of `-device TYPE,help` (lines "  NAME=<TYPE> ...") lists property
 * prop. Returns 0 and *ret_has, or -EBADMSG when text is not such a listing. */
int bm_emulator_parse_device_help(const char *text, const char *prop, bool *ret_has);

/* Runs emulator (an absolute path) with `-device type,help` (stdin /dev/null, a clean
 * environment as libvirt gives QEMU: LC_ALL=C and PATH only; at most 10 s) and says whether
 * type has property prop. Returns 0 and *ret_has, or -errno with the reason
 * (-ENOENT: no such binary; -EBADMSG: it printed no property list; -ETIMEDOUT). */
int bm_emulator_device_has_property(const char *emulator, const char *type, const char *prop,
                                    bool *ret_has);
