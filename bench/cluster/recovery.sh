#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/recovery.sh: node death to a survivor's blocked call completing (target <= 5 s)
# and the longest stall of a survivor's unrelated reads meanwhile (target <= 1 s),
# over BENCH_ROUNDS (default 20) kill -9 points of tests/cluster/test_cfs_recovery.sh (an
# fsync'd workload; odd rounds the node dies, even rounds only its cfsd), with the harness's
# corosync token settings.  Every round also checks the dead node's fsync'd changes and fsck.
# Then database failover: an ODM instance's node killed, the instance started at once on
# another node (tests/cluster/test_cfs_odm_failover.sh): kill to its first write, over
# BENCH_FAILOVERS (default 10) rounds (target <= 10 s).  Then stalls: a frozen node, a frozen
# cfsd, a frozen corosync (tests/cluster/test_cfs_stall.sh), freeze to a survivor's call.
# Usage: recovery.sh [BUILD]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${BENCH_ROUNDS:-20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
BIN=$(cd "$build/bin" && pwd) RECOVERY_ROUNDS=$rounds \
	bash "$here/../../tests/cluster/test_cfs_recovery.sh" | tee "$out" | grep -v "^ok" || true
echo "corosync (tests/cluster/cluster.sh): $(grep -o 'token: [0-9]*' "$here/../../tests/cluster/cluster.sh"), consensus 1.2 x token (corosync's default)"
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
pairs = [(int(r), int(t)) for r, t in
         re.findall(r"round (\d+): node \d+'s operation completed (\d+) ms", text)]
node = [t for r, t in pairs if r % 2 == 1]
daemon = [t for r, t in pairs if r % 2 == 0]
for what, v in (("node killed (corosync first)", node), ("only cfsd killed", daemon)):
    if v:
        print(f"{what}: {len(v)} deaths, survivor's call completed after p50 {statistics.median(v):.0f} ms, "
              f"max {max(v)} ms (target <= 5000 ms)")
stalls = [int(t) for t in re.findall(r"reading an unrelated file: longest stall (\d+) ms", text)]
if stalls:
    print(f"a survivor reading an unrelated file meanwhile: longest stall p50 "
          f"{statistics.median(stalls):.0f} ms, max {max(stalls)} ms over {len(stalls)} recoveries "
          f"(target <= 1000 ms)")
fails = len(re.findall(r"^not ok", text, re.M))
print(f"checks failed: {fails}")
sys.exit(1 if fails else 0)
PY
failovers=${BENCH_FAILOVERS:-10}
BIN=$(cd "$build/bin" && pwd) FAILOVER_ROUNDS=$failovers \
	bash "$here/../../tests/cluster/test_cfs_odm_failover.sh" | tee "$out" | grep -v "^ok" || true
failed=0
python3 - "$out" <<'PY' || failed=1
import re, statistics, sys
text = open(sys.argv[1]).read()
v = [int(t) for t in re.findall(r"resumed on node \d+ (\d+) ms after", text)]
if v:
    print(f"ODM failover: {len(v)} instance moves, kill to its first write on the new node p50 "
          f"{statistics.median(v):.0f} ms, max {max(v)} ms (target <= 10000 ms; PolyServe: 39 s)")
fails = len(re.findall(r"^not ok", text, re.M))
print(f"checks failed: {fails}")
sys.exit(1 if fails else 0)
PY
# Stalls: a node frozen (SIGSTOP) with its corosync, its cfsd alone, or its corosync alone;
# freeze to a survivor's call on what the frozen node held completing, over BENCH_STALLS
# (default 3) runs of tests/cluster/test_cfs_stall.sh.
: >"$out"
for _ in $(seq "${BENCH_STALLS:-3}"); do
	BIN=$(cd "$build/bin" && pwd) bash "$here/../../tests/cluster/test_cfs_stall.sh" >>"$out" || true
done
grep "^not ok" "$out" || true
python3 - "$out" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
times = {}
for t, kind in re.findall(r"completed (\d+) ms after the freeze \((\w+)\)", text):
    times.setdefault(kind, []).append(int(t))
names = {"all": "node frozen with its corosync", "cfsd": "cfsd frozen, its corosync running",
         "corosync": "corosync frozen, its cfsd running"}
for kind, v in times.items():
    print(f"{names.get(kind, kind)}: {len(v)} freezes, a survivor's call completed after p50 "
          f"{statistics.median(v):.0f} ms, max {max(v)} ms")
fails = len(re.findall(r"^not ok", text, re.M))
print(f"checks failed: {fails}")
sys.exit(1 if fails else 0)
PY
[ "$failed" -eq 0 ]
