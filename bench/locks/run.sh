#!/usr/bin/env bash
# bench/locks: libcfslock's speed on the netns cluster of tests/cluster (3 nodes), and on the
# local backend for comparison.  Prints the JSON lines of each lockbench run and a summary.
# Targets (issue 4): cached re-acquire <= 2 us; EX ping-pong between two nodes p50 <= 1 ms.
# Usage: run.sh [BUILD]; needs root.  Env: BENCH_N (default 2000), BENCH_TIME (default 5).
set -euo pipefail
build=${1:-build}
bench=$(cd "$build/bench" && pwd)/lockbench
cfslock=$(cd "$build/bin" && pwd)/cfslock
here=$(cd "$(dirname "$0")/../../tests/cluster" && pwd)
n=${BENCH_N:-2000}
secs=${BENCH_TIME:-5}
export CLUSTER_ID=lb$$
CLUSTER_ID=${CLUSTER_ID:0:6}
trap '"$here/cluster.sh" down >/dev/null 2>&1' EXIT
out=$(mktemp)

echo "local backend:"
"$bench" -b local cached 1000000 | tee -a "$out"
"$bench" -b local first "$n" | tee -a "$out"

"$here/cluster.sh" up 3
# A long-lived member per node keeps the replicated table, as cfsd will.
for i in 1 2 3; do
	"$here/cluster.sh" exec "$i" bash -c "sleep 3600 | '$cfslock' -s bench shell" >/dev/null &
done
sleep 1
echo "corosync backend, 3 nodes:"
"$here/cluster.sh" exec 1 "$bench" cached 1000000 | tee -a "$out"
"$here/cluster.sh" exec 1 "$bench" first "$n" | tee -a "$out"
"$here/cluster.sh" exec 1 "$bench" pingpong "$n" >"$out.p1" &
p1=$!
"$here/cluster.sh" exec 2 "$bench" pingpong "$n" | tee -a "$out"
wait "$p1"
cat "$out.p1" | tee -a "$out"
ops=()
for i in 1 2 3; do
	"$here/cluster.sh" exec "$i" "$bench" ops "$secs" >"$out.ops$i" &
	ops+=($!)
done
wait "${ops[@]}"
cat "$out.ops"* | tee -a "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ops = sum(r["ops_per_s"] for r in rows if r["bench"] == "ops")
print(f"\nsummary: 3-node lock ops/s, each node on its own lock: {ops:.0f}")
PY
rm -f "$out" "$out".*
