#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# tests/run.sh itself: a script that leaves a process, a network namespace and an ODM segment
# behind fails, each is named, and each is cleared away; a script that leaves nothing passes;
# the counts add up.  Runs tests/run.sh on two planted scripts (one lane, no grace).
. "$(dirname "$0")/../lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
	echo "skip - the test harness's leftover checks: need root and iproute2"
	finish
fi
mkdir "$T/planted"
cat >"$T/planted/test_clean.sh" <<'EOF'
echo "ok - a clean script"
EOF
nap=600.$$ # a sleep no other test runs
cat >"$T/planted/test_leaky.sh" <<EOF
mkdir -p "\$TMPDIR/busy"
(cd "\$TMPDIR/busy" && exec sleep $nap) >/dev/null 2>&1 &
ip netns add "\$CLUSTER_ID-n1"
: >"/dev/shm/odm.LEAK$$.I1"
echo "ok - a leaky script"
EOF
TEST_LANES=1 LEFTOVER_GRACE=0 TEST_SCRIPTS="$T/planted/test_*.sh" \
	"$HERE/../run.sh" "$(dirname "$BIN")" >"$T/run.out" 2>&1
rc=$?
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what: $(tr '\n' ' ' <"$T/run.out" | head -c 800)"; fi; }
check "a run with a leaky script fails" test "$rc" -ne 0
check "the leaky script is named as failed" grep -q "^failed: $T/planted/test_leaky.sh" "$T/run.out"
check "the clean one is not" bash -c "! grep -q '^failed: .*test_clean.sh' '$T/run.out'"
check "its process is named" grep -q "left behind.*process [0-9]*: sleep $nap (working directory there)" "$T/run.out"
check "its network namespace is named" grep -q "left behind.*network namespace t..00[12]-n1" "$T/run.out"
check "its ODM segment is named" grep -q "left behind.*ODM segment /dev/shm/odm.LEAK$$.I1" "$T/run.out"
check "the counts add up: 2 passed, 1 failed" grep -qx "2 passed, 1 failed" "$T/run.out"
check "the process is gone" bash -c "! pgrep -xf 'sleep $nap'"
check "the namespace is gone" bash -c "! ip netns list | grep -q '^t..00[12]-n1'"
check "the segment is gone" test ! -e "/dev/shm/odm.LEAK$$.I1"
finish
