#!/usr/bin/env bash
# The end of the fixture guests (lib.sh's bm_fixture_guest): stops, by their names, the ones of
# this run (meson test: BM_FIXTURE_SHARE=1, the guests belong to the runner) and any left by a
# run that ended. Ordered after the last test that takes one.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
bm_require_root
bm_cleanup_at_exit
_bm_libvirt_answers || bm_skip "libvirt does not answer on $BM_URI: no fixture guest can run"
bm_fixture_stop
owner=$(_bm_fixture_owner)
mine() { [[ $1 == "$BM_FIXTURE_PREFIX${owner%% *}-"* ]] || ! _bm_fixture_owner_alive "$1"; }
left=$(_bm_fixture_doms | while read -r d; do mine "$d" && echo "$d"; done)
[ -z "$left" ] || bm_fail "fixture guests still defined: $left"
bm_pass "stopped $BM_FIXTURE_STOPPED fixture guest(s); none of an ended run left"
