#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/locks: libcfslock's speed on the netns cluster of tests/cluster (3 nodes), and on the
# local backend for comparison.  Prints the JSON lines of each lockbench run and a summary.
# Targets (issue 4): cached re-acquire <= 2 us; EX ping-pong between two nodes p50 <= 1 ms.
# Issue 9: <= 1 KiB per cached lock in each member, and a cache limit that holds.
# Usage: run.sh [BUILD]; needs root.  Env: BENCH_N (default 2000), BENCH_TIME (default 5),
# BENCH_CACHE (locks cached in the memory run, default 100000).
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
trap 'exit 1' INT TERM # a run stopped from outside still takes its cluster down
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
"$here/cluster.sh" exec 1 "$bench" lease 10000000 | tee -a "$out"
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

# Memory of cached locks: every member keeps every node's locks.  lockbench on node 1 keeps
# $ncache locks cached, without a limit and then with one; the members' growth is read while
# it holds them.
ncache=${BENCH_CACHE:-100000}
members=$(pgrep -f "cfslock -s bench shell" | tr '\n' ' ')
rss_sum() { local p kb=0; for p in $members; do kb=$((kb + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $kb; }
cache_run() { # LIMIT
	local before after
	before=$(rss_sum)
	"$here/cluster.sh" exec 1 "$bench" -l "$1" -w 3 cache "$ncache" >"$out.cache" &
	local pid=$!
	for _ in $(seq 600); do [ -s "$out.cache" ] && break; sleep 0.5; done
	sleep 1
	after=$(rss_sum)
	wait "$pid"
	python3 - "$(cat "$out.cache")" "$before" "$after" "$1" <<'PY' | tee -a "$out"
import json, sys
r, before, after, limit = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r.update(bench="cache_members", limit=int(limit), members_rss_growth_kb=after - before,
         bytes_per_lock_per_member=round((after - before) * 1024 / 3 / max(r["table_entries"], 1)))
print(json.dumps(r))
PY
}
cache_run 0
cache_run $((ncache / 10))
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ops = sum(r["ops_per_s"] for r in rows if r["bench"] == "ops")
print(f"\nsummary: 3-node lock ops/s, each node on its own lock: {ops:.0f}")
for r in rows:
    if r["bench"] == "lease":
        print(f"  the membership lease looked at before every write: {r['mean_ns']} ns a look "
              f"(lease {r['lease_ms']} ms, fresh {r['fresh']} of {r['n']} looks)")
for r in rows:
    if r["bench"] != "cache_members":
        continue
    if not r["limit"]:
        print(f"  {r['n']} locks cached on node 1, no limit: {r['table_entries']} in the table, "
              f"{r['bytes_per_lock_per_member']} bytes per lock in each member (target <= 1024); "
              f"the holder grew {r['rss_growth_kb'] * 1024 // r['n']} bytes per lock")
    else: # the members reuse what the run before freed: their growth says nothing here
        print(f"  {r['n']} locks taken on node 1, limit {r['limit']}: {r['cached']} cached, "
              f"{r['given_back']} given back, {r['table_entries']} in the table (the limit holds "
              f"if about {r['limit']})")
PY
rm -f "$out" "$out".*
