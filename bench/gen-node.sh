#!/usr/bin/env bash
# Writes a libvirt test-driver node file with N domains: mixed sizes (1-32 GiB), every tenth
# shut off, every domain with a virtio memballoon reporting stats. Usage: gen-node.sh N > FILE
set -euo pipefail
n=${1:?usage: gen-node.sh N}
awk -v n="$n" 'BEGIN {
    print "<node>"
    print "  <cpu><mhz>2400</mhz><model>x86_64</model><nodes>1</nodes><sockets>2</sockets><cores>32</cores><threads>2</threads><active>128</active></cpu>"
    print "  <memory>1073741824</memory>"
    split("1 2 4 8 16 32", sizes, " ")
    for (i = 0; i < n; i++) {
        max = sizes[(i % 6) + 1] * 1024 * 1024            # KiB
        cur = int(max * (50 + (i * 37) % 51) / 100)
        off = (i % 10 == 9)
        printf "  <domain type=\"test\" xmlns:test=\"http://libvirt.org/schemas/domain/test/1.0\"><name>vm%05d</name>", i
        printf "<uuid>%08x-0000-4000-8000-%012x</uuid>", i, i
        printf "<memory unit=\"KiB\">%d</memory><currentMemory unit=\"KiB\">%d</currentMemory>", max, cur
        printf "<vcpu>1</vcpu><os><type arch=\"x86_64\">hvm</type></os>"
        printf "<devices><memballoon model=\"virtio\"><stats period=\"5\"/></memballoon></devices>"
        if (off) printf "<test:runstate>5</test:runstate>"
        print "</domain>"
    }
    print "</node>"
}'
