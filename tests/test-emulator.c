/* Asking a QEMU binary about a device's properties (`-device TYPE,help`): recorded listings
 * of stock QEMU 7.2 and of the lab QEMU 7.2 and 10.0 (tests/data/qemu-help/), the real QEMU of this machine
 * when it is installed, and binaries that fail or print no listing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emulator.h"
#include "error.h"
#include "tap.h"
#include "util.h"

#define STOCK_QEMU "/usr/bin/qemu-system-x86_64"

static char *slurp(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/qemu-help/%s", SOURCE_ROOT, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = bm_malloc0(1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void has(const char *fixture, const char *prop, bool want)
{
    _cleanup_free_ char *text = slurp(fixture);
    bool got = !want;
    int r = text ? bm_emulator_parse_device_help(text, prop, &got) : -ENOENT;
    ok(r == 0 && got == want, "%s: property '%s' %s (r=%d)", fixture, prop,
           want ? "listed" : "not listed", r);
}

int main(void)
{
    has("stock-7.2.txt", "sg", false);
    has("stock-7.2.txt", "ioeventfd", false);
    has("stock-7.2.txt", "deflate-on-oom", true);
    has("stock-7.2.txt", "free-page-reporting", true);
    has("lab.txt", "sg", true);
    has("lab.txt", "ioeventfd", true);
    has("lab.txt", "s", false); /* a prefix of a name is not the name */
    /* QEMU 10.0's own ioeventfd comes with vectors; the lab's 7.2 patch has no vectors */
    has("lab.txt", "vectors", false);
    has("lab-10.0.txt", "sg", true);
    has("lab-10.0.txt", "ioeventfd", true);
    has("lab-10.0.txt", "vectors", true);

    bool got = true;
    int r = bm_emulator_parse_device_help("qemu-system-x86_64: -device nosuch,help: Device "
                                          "'nosuch' not found\n", "sg", &got);
    ok(r == -EBADMSG, "a message without a property list: -EBADMSG (r=%d)", r);
    r = bm_emulator_parse_device_help("", "sg", &got);
    ok(r == -EBADMSG, "no output: -EBADMSG (r=%d)", r);

    if (access(STOCK_QEMU, X_OK) == 0) {
        bool sg = true, dm = false;
        r = bm_emulator_device_has_property(STOCK_QEMU, "virtio-balloon-pci", "sg", &sg);
        int r2 = bm_emulator_device_has_property(STOCK_QEMU, "virtio-balloon-pci", "deflate-on-oom", &dm);
        ok(r == 0 && r2 == 0 && !sg && dm,
               STOCK_QEMU " run: no 'sg', has 'deflate-on-oom' (r=%d %d: %s)", r, r2,
               r < 0 || r2 < 0 ? bm_error_detail(r < 0 ? r : r2) : "ok");
        r = bm_emulator_device_has_property(STOCK_QEMU, "nosuch-device", "sg", &sg);
        ok(r == -EBADMSG && strstr(bm_error_detail(r), "Device 'nosuch-device' not found"),
               "unknown device type: -EBADMSG with QEMU's message (%s)", bm_error_detail(r));
    } else {
        for (int i = 0; i < 2; i++)
            ok(true, "# SKIP " STOCK_QEMU " not installed");
    }
    r = bm_emulator_device_has_property("/bin/false", "virtio-balloon-pci", "sg", &got);
    ok(r == -EIO && strstr(bm_error_detail(r), "exit status 1"), "a binary that fails: -EIO (%s)",
           bm_error_detail(r));
    r = bm_emulator_device_has_property("/bin/true", "virtio-balloon-pci", "sg", &got);
    ok(r == -EBADMSG && strstr(bm_error_detail(r), "printed no property list: (nothing)"),
           "a binary that prints nothing: -EBADMSG (%s)", bm_error_detail(r));
    r = bm_emulator_device_has_property("/nonexistent/qemu", "virtio-balloon-pci", "sg", &got);
    ok(r == -ENOENT && strstr(bm_error_detail(r), "cannot run '/nonexistent/qemu'"),
           "a missing binary: -ENOENT (%s)", bm_error_detail(r));
    r = bm_emulator_device_has_property("qemu-system-x86_64", "virtio-balloon-pci", "sg", &got);
    ok(r == -EINVAL, "a relative path: -EINVAL (%s)", bm_error_detail(r));
    return tap_done();
}
