#!/usr/bin/env python3
"""Device-side self-test of the lab's patched virtio-balloon (no guest kernel).

Usage: sg-selftest.py [QEMU_BINARY]   (default /var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64)

Runs QEMU with -accel qtest and plays the driver itself over the qtest protocol: programs
the virtio-balloon-pci legacy I/O BAR, acks VIRTIO_BALLOON_F_SG (bit 6), builds the
inflate/deflate vrings in guest RAM and submits elements as lab/PROTOCOL.md describes
(device-writable descriptors, one per guest-physical range). Checks, for ioeventfd=on and
ioeventfd=off:

  - bit 6 is offered with sg=on, not with sg=off; QMP decodes it as VIRTIO_BALLOON_F_SG
    (host-features when offered, guest-features once acked); qom-get ioeventfd;
  - one 64 MiB range inflated with ONE descriptor is discarded (reads back as zeros,
    QEMU's RSS drops by ~64 MiB) and the element comes back with used length 0;
  - a multi-range element; a deflate element;
  - bad input is skipped without harm: unaligned address/length (the RAM under them keeps
    its contents), a range outside RAM, a range in the BIOS ROM; QEMU keeps running and
    the device keeps working; what QEMU's virtqueue_pop() itself refuses (zero-length
    descriptor, a range running past RAM, two non-RAM ranges in one element) breaks the
    device as for any virtio device, but nothing is discarded and QEMU keeps running;
  - without SG acked, the PFN-array path still discards the listed 4 KiB pages;
  - ioeventfd=on gives the balloon's virtqueues host notifiers (more eventfds in QEMU).
Exit status 0 when every check passed.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

QEMU = sys.argv[1] if len(sys.argv) > 1 else \
    "/var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64"

PCI_SLOT = 4
BAR0 = 0xC000
# legacy virtio-pci I/O registers
HOST_FEATURES, GUEST_FEATURES, QUEUE_PFN, QUEUE_NUM, QUEUE_SEL, QUEUE_NOTIFY, STATUS = \
    0x00, 0x04, 0x08, 0x0C, 0x0E, 0x10, 0x12
S_ACK, S_DRIVER, S_DRIVER_OK, S_NEEDS_RESET = 1, 2, 4, 0x40
F_SG = 6
DESC_NEXT, DESC_WRITE = 1, 2
MiB = 1 << 20

failures = []
EVENTFDS = {}                                       # ioeventfd=on/off -> eventfds after DRIVER_OK


def check(cond, what):
    print(("PASS: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


class Qemu:
    def __init__(self, props, ram_mib=256):
        self.dir = tempfile.mkdtemp(prefix="sg-selftest-")
        self.qmp_path = os.path.join(self.dir, "qmp.sock")
        self.log_path = os.path.join(self.dir, "qemu.log")
        args = [QEMU, "-machine", "pc", "-accel", "qtest", "-m", str(ram_mib),
                "-display", "none", "-nodefaults", "-qtest", "stdio",
                "-qmp", "unix:%s,server=on,wait=off" % self.qmp_path,
                "-trace", "virtio_balloon_sg_*", "-d", "guest_errors",
                "-device", "virtio-balloon-pci,id=balloon0,addr=0x%x,%s" % (PCI_SLOT, props)]
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, bufsize=1)
        for _ in range(100):
            if os.path.exists(self.qmp_path):
                break
            time.sleep(0.05)
        self.qmp = socket.socket(socket.AF_UNIX)
        self.qmp.connect(self.qmp_path)
        self.qf = self.qmp.makefile("rw")
        json.loads(self.qf.readline())                      # greeting
        self.qmp_cmd("qmp_capabilities")

    # -- qtest ----------------------------------------------------------------------------
    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        while True:
            r = self.p.stdout.readline()
            if not r:
                raise RuntimeError("QEMU exited (qtest: %s)" % line)
            r = r.strip()
            if r.startswith("IRQ"):
                continue
            if not r.startswith("OK"):
                raise RuntimeError("qtest %r -> %r" % (line, r))
            return r[3:]

    def out(self, size, port, val):
        self.cmd("out%s 0x%x 0x%x" % (size, port, val))

    def inp(self, size, port):
        return int(self.cmd("in%s 0x%x" % (size, port)), 16)

    def w(self, size, addr, val):
        self.cmd("write%s 0x%x 0x%x" % (size, addr, val))

    def r(self, size, addr):
        return int(self.cmd("read%s 0x%x" % (size, addr)), 16)

    def memset(self, addr, n, byte):
        self.cmd("memset 0x%x 0x%x 0x%x" % (addr, n, byte))

    def read(self, addr, n):
        return bytes.fromhex(self.cmd("read 0x%x 0x%x" % (addr, n))[2:])

    # -- QMP ------------------------------------------------------------------------------
    def qmp_cmd(self, name, **args):
        self.qf.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.qf.flush()
        while True:
            m = json.loads(self.qf.readline())
            if "return" in m:
                return m["return"]
            if "error" in m:
                raise RuntimeError("QMP %s: %s" % (name, m["error"]))

    def rss_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def eventfds(self):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.p.pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (self.p.pid, fd)) == "anon_inode:[eventfd]"
            except OSError:
                pass
        return n

    def alive(self):
        return self.p.poll() is None

    def close(self):
        try:
            self.qf.close()
            self.qmp.close()
        except OSError:
            pass
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
        self.log.close()
        with open(self.log_path) as f:
            self.log_text = f.read()
        shutil.rmtree(self.dir, ignore_errors=True)


class Balloon:
    """A minimal legacy virtio-balloon driver living in qtest commands."""

    def __init__(self, q, features):
        self.q = q
        cfg = lambda reg: 0x80000000 | (PCI_SLOT << 11) | reg
        q.out("l", 0xCF8, cfg(0))
        ident = q.inp("l", 0xCFC)
        if ident != 0x10021AF4:
            raise RuntimeError("slot %d is 0x%08x, not a transitional virtio-balloon" %
                               (PCI_SLOT, ident))
        q.out("l", 0xCF8, cfg(0x10))
        q.out("l", 0xCFC, BAR0)
        q.out("l", 0xCF8, cfg(0x04))
        q.out("w", 0xCFC, 0x0005)                   # I/O space + bus master
        q.out("b", BAR0 + STATUS, 0)                # reset
        q.out("b", BAR0 + STATUS, S_ACK | S_DRIVER)
        self.host_features = q.inp("l", BAR0 + HOST_FEATURES)
        q.out("l", BAR0 + GUEST_FEATURES, features & self.host_features)
        self.vq = {}
        base = 0x100000                             # rings at 1 MiB .. 1 MiB + 2 * 16 KiB
        for idx in (0, 1):                          # 0 inflate, 1 deflate (no stats vq)
            q.out("w", BAR0 + QUEUE_SEL, idx)
            num = q.inp("w", BAR0 + QUEUE_NUM)
            avail = base + 16 * num
            used = (avail + 4 + 2 * num + 2 + 4095) & ~4095
            q.memset(base, 0x4000, 0)
            q.out("l", BAR0 + QUEUE_PFN, base >> 12)
            self.vq[idx] = dict(num=num, desc=base, avail=avail, used=used,
                                avail_idx=0, used_idx=0)
            base += 0x4000
        q.out("b", BAR0 + STATUS, S_ACK | S_DRIVER | S_DRIVER_OK)

    def status(self):
        return self.q.inp("b", BAR0 + STATUS)

    def submit(self, idx, bufs, timeout=20):
        """bufs: [(gpa, len, writable)]. Returns the used length, None on timeout."""
        q, vq = self.q, self.vq[idx]
        for i, (gpa, ln, wr) in enumerate(bufs):
            d = vq["desc"] + 16 * i
            flags = (DESC_WRITE if wr else 0) | (DESC_NEXT if i + 1 < len(bufs) else 0)
            q.w("q", d, gpa)
            q.w("l", d + 8, ln)
            q.w("w", d + 12, flags)
            q.w("w", d + 14, i + 1 if i + 1 < len(bufs) else 0)
        q.w("w", vq["avail"] + 4 + 2 * (vq["avail_idx"] % vq["num"]), 0)
        vq["avail_idx"] = (vq["avail_idx"] + 1) & 0xFFFF
        q.w("w", vq["avail"] + 2, vq["avail_idx"])
        q.out("w", BAR0 + QUEUE_NOTIFY, idx)
        t0 = time.time()
        while time.time() - t0 < timeout:           # each qtest command is a main-loop turn
            if q.r("w", vq["used"] + 2) != vq["used_idx"]:
                e = vq["used"] + 4 + 8 * (vq["used_idx"] % vq["num"])
                used_len = q.r("l", e + 4)
                vq["used_idx"] = (vq["used_idx"] + 1) & 0xFFFF
                return used_len
            time.sleep(0.01)
        return None


def feature_names(status, side):
    return status[side]["dev-features"]


def run(ioeventfd):
    tag = "[ioeventfd=%s] " % ioeventfd
    # -- offered or not ------------------------------------------------------------------
    q = Qemu("sg=off,ioeventfd=%s" % ioeventfd)
    try:
        b = Balloon(q, 0)
        check(not (b.host_features >> F_SG) & 1, tag + "sg=off: bit 6 not offered "
              "(host features 0x%08x)" % b.host_features)
    finally:
        q.close()

    q = Qemu("sg=on,ioeventfd=%s" % ioeventfd)
    try:
        path = "/machine/peripheral/balloon0"
        io = q.qmp_cmd("qom-get", path=path, property="ioeventfd")
        check(io == (ioeventfd == "on"), tag + "qom-get %s ioeventfd = %s" % (path, io))
        check(q.qmp_cmd("qom-get", path=path, property="sg") is True,
              tag + "qom-get %s sg = true" % path)
        b = Balloon(q, 1 << F_SG)
        EVENTFDS[ioeventfd] = q.eventfds()
        check((b.host_features >> F_SG) & 1, tag + "sg=on: bit 6 offered "
              "(host features 0x%08x)" % b.host_features)
        st = q.qmp_cmd("x-query-virtio-status", path=path + "/virtio-backend")
        name = [n for n in feature_names(st, "host-features") if "F_SG" in n]
        check(name == ["VIRTIO_BALLOON_F_SG: Inflate/deflate pages as scatter-gather ranges"],
              tag + "host-features decodes bit 6: %s" % name)
        check(any(n.startswith("VIRTIO_BALLOON_F_SG:")
                  for n in feature_names(st, "guest-features")),
              tag + "guest-features has VIRTIO_BALLOON_F_SG once acked (negotiated)")

        # -- one 64 MiB range, one descriptor ---------------------------------------------
        base, size = 64 * MiB, 64 * MiB
        rss0 = q.rss_kib()
        q.memset(base, size, 0xAB)
        rss1 = q.rss_kib()
        t0 = time.time()
        used = b.submit(0, [(base, size, True)])
        dt = time.time() - t0
        rss2 = q.rss_kib()
        check(used == 0, tag + "64 MiB inflate element used with length %s (want 0)" % used)
        samples = [q.read(base + off, 16) for off in (0, 4096, size // 2, size - 16)]
        check(all(s == bytes(16) for s in samples), tag + "inflated range reads back as zeros")
        check(rss1 - rss2 > 60 * 1024, tag + "QEMU RSS %d -> %d -> %d KiB (fill, inflate): "
              "-%d KiB in %.3f s" % (rss0, rss1, rss2, rss1 - rss2, dt))

        # -- several ranges in one element --------------------------------------------------
        ranges = [(16 * MiB, 2 * MiB), (20 * MiB + 4096, 8192), (30 * MiB, 4 * MiB)]
        for gpa, ln in ranges:
            q.memset(gpa, ln, 0xCD)
        q.memset(20 * MiB, 16384, 0xCD)             # range 2 plus a page on each side
        used = b.submit(0, [(g, ln, True) for g, ln in ranges])
        ok = all(q.read(g, 8) == bytes(8) and q.read(g + ln - 8, 8) == bytes(8)
                 for g, ln in ranges)
        check(used == 0 and ok, tag + "3-range element: each range discarded, used length 0")
        check(q.read(20 * MiB, 8) == b"\xcd" * 8 and q.read(20 * MiB + 12288, 8) == b"\xcd" * 8,
              tag + "the pages around range 2 were kept")

        # -- deflate ------------------------------------------------------------------------
        used = b.submit(1, [(base, size, True)])
        q.w("l", base + 4096, 0x12345678)
        check(used == 0 and q.r("l", base + 4096) == 0x12345678,
              tag + "deflate element used with length 0, range usable again")

        # -- bad input ------------------------------------------------------------------------
        bad_base = 100 * MiB
        q.memset(bad_base, 4 * MiB, 0xEE)
        rom = q.read(0xFFFFF000, 64)
        cases = [
            ("unaligned address", [(bad_base + 16, 8192, True)]),
            ("unaligned length", [(bad_base + MiB, 4097, True)]),
            ("outside RAM (3 GiB)", [(0xC0000000, 4096, True)]),
            ("BIOS ROM (0xfffff000)", [(0xFFFFF000, 4096, True)]),
            ("good range + unaligned one", [(bad_base + 2 * MiB, MiB, True),
                                            (bad_base + 3 * MiB + 100, 4096, True)]),
        ]
        for what, bufs in cases:
            used = b.submit(0, bufs, timeout=10)
            check(used == 0 and q.alive() and not b.status() & S_NEEDS_RESET,
                  tag + "bad input (%s): skipped, element completed, device fine" % what)
        kept = [q.read(bad_base + off, 4) for off in (16, MiB, 3 * MiB + 100)]
        check(all(k == b"\xee" * 4 for k in kept),
              tag + "RAM under the rejected ranges kept its contents")
        check(q.read(bad_base + 2 * MiB, 4) == bytes(4),
              tag + "the good range of the mixed element was discarded")
        check(q.read(0xFFFFF000, 64) == rom and rom != bytes(64),
              tag + "BIOS ROM unchanged")
    finally:
        q.close()
    skips = [l for l in q.log_text.splitlines() if "ignored:" in l]
    check(len(skips) >= 5, tag + "bad ranges were logged (%d lines), e.g. %s" %
          (len(skips), skips[:1]))
    ranges = [l for l in q.log_text.splitlines() if "virtio_balloon_sg_range" in l]
    check(any("len 0x4000000" in l for l in ranges),
          tag + "trace shows the 64 MiB range handled whole: %s" %
          [l for l in ranges if "len 0x4000000" in l][:1])

    # -- input virtqueue_pop() itself rejects (QEMU's virtio core, not the patch): the device
    #    is marked broken (virtio_error), the element is never completed, QEMU keeps running.
    for what, bufs, msg in [
            ("zero-length descriptor", [(8 * MiB, 0, True)], "zero sized buffers"),
            ("range running 64 KiB past the end of RAM", [(256 * MiB - MiB, MiB + 0x10000, True)],
             "bogus descriptor"),
            ("two non-RAM ranges in one element", [(0xC0000000, 4096, True),
                                                   (0xC0001000, 4096, True)], "bogus descriptor")]:
        q = Qemu("sg=on,ioeventfd=%s" % ioeventfd)
        try:
            b = Balloon(q, 1 << F_SG)
            q.memset(255 * MiB, MiB, 0x55)
            used = b.submit(0, bufs, timeout=2)
            alive = q.alive() and q.qmp_cmd("query-status")["status"] == "running"
            kept = q.read(255 * MiB, 8) == b"\x55" * 8
        finally:
            q.close()
        check(used is None and alive and kept and msg in q.log_text,
              tag + "%s: virtqueue_pop refuses it (%r logged), nothing discarded, QEMU runs on" %
              (what, msg))

    # -- PFN path without SG ----------------------------------------------------------------
    q = Qemu("sg=on,ioeventfd=%s" % ioeventfd)
    try:
        b = Balloon(q, 0)                         # offered, not acked
        st = q.qmp_cmd("x-query-virtio-status", path="/machine/peripheral/balloon0/virtio-backend")
        check(not any("F_SG" in n for n in feature_names(st, "guest-features")),
              tag + "sg offered but not acked: not in guest-features")
        pages = [200 * MiB + i * 4096 for i in (0, 1, 5)]
        for p in pages:
            q.memset(p, 4096, 0x77)
        q.memset(200 * MiB + 2 * 4096, 4096, 0x77)
        pfns = 0x300000                             # PFN array (driver-readable) at 3 MiB
        for i, p in enumerate(pages):
            q.w("l", pfns + 4 * i, p >> 12)
        used = b.submit(0, [(pfns, 4 * len(pages), False)])
        ok = all(q.read(p, 8) == bytes(8) for p in pages)
        check(used == 0 and ok and q.read(200 * MiB + 2 * 4096, 8) == b"\x77" * 8,
              tag + "PFN path: the 3 listed pages discarded, the unlisted one kept")
    finally:
        q.close()


def main():
    if not os.access(QEMU, os.X_OK):
        print("SKIP: no QEMU binary at %s" % QEMU)
        return 77
    for io in ("on", "off"):
        try:
            run(io)
        except Exception as e:                      # a crash of QEMU lands here
            check(False, "[ioeventfd=%s] exception: %s" % (io, e))
    if len(EVENTFDS) == 2:
        # With ioeventfd the device starts a host notifier (an eventfd) per virtqueue at
        # DRIVER_OK: inflate, deflate, stats.
        check(EVENTFDS["on"] - EVENTFDS["off"] >= 2,
              "eventfds of QEMU after DRIVER_OK: ioeventfd=on %d, ioeventfd=off %d" %
              (EVENTFDS["on"], EVENTFDS["off"]))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
