#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/odm on a cluster: libodm on 3 corosync nodes at once (tests/cluster/cluster.sh, all on
# this machine and the same LUN files) against the same total load on one node, as a ratio.
# The load: odmbench, 8 KiB random 75:25 read/write at queue depth 32, three processes on one
# shared datafile; first all three on node 1, then one on each node.  Every node mounts
# dboptimized (ODM needs it on a cluster).  Also counts the lock messages the three nodes
# sent during their run (target: a handful, none per I/O).
# Usage: cluster.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per run, default
# 10), BENCH_GB (datafile size, default 1).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
odmbench=$(cd "$build/bench" && pwd)/odmbench
lib=$(cd "$build/lib" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../tests/cluster/cluster.sh
secs=${BENCH_TIME:-10}
gb=${BENCH_GB:-1}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/odm-cbench.XXXXXX")
export CVM_SCAN=$dir CLUSTER_ID=ob$$
CLUSTER_ID=${CLUSTER_ID:0:6}
cleanup() {
	"$cluster" down >/dev/null 2>&1 || true
	sleep 0.5
	rm -rf "$dir"
	rm -f /dev/shm/odm.BENCH.BENCH1
}
trap cleanup EXIT
trap 'exit 1' INT TERM
on() { local n=$1; shift; "$cluster" exec "$n" "$@"; }
M() { echo "$dir/m$1"; }
messages() { # all nodes' lock messages so far
	local n sum=0
	for n in 1 2 3; do
		sum=$((sum + $(on $n "$bin/cfs" status --json "$(M $n)" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["lock_messages"])')))
	done
	echo $sum
}
# load NODE...: one odmbench on each NODE given, at once; prints the summed IOPS.
load() {
	local n i=0 pids=()
	for n in "$@"; do
		on "$n" env LD_LIBRARY_PATH="$lib" "$odmbench" "$(M "$n")/odm.dbf" $((gb * 1024)) \
			8192 32 75 "$secs" >"$dir/out.$i" &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	cat "$dir"/out.* | awk '{s += $1} END {printf "%.0f\n", s}'
	rm -f "$dir"/out.*
}

echo "bench/odm cluster: $(nproc) cores; LUN files in $dir; ${gb} GiB datafile; $secs s per run"
for i in 0 1 2 3; do truncate -s $((gb * 256 + 256))M "$dir/lun$i"; done
"$bin/cvm" create odmc "$dir"/lun{0,1,2,3} >/dev/null
"$bin/mkfs.cfs" -p corosync -J 4 odmc >/dev/null 2>&1
"$cluster" up 3 >/dev/null
for n in 1 2 3; do
	mkdir -p "$(M $n)"
	on $n "$bin/cfs" mount odmc "$(M $n)" -o "dboptimized,log=$dir/cfsd$n.log"
done
# Create the datafile (zeroed: every block written, as a database's).
on 1 env LD_LIBRARY_PATH="$lib" "$odmbench" "$(M 1)/odm.dbf" $((gb * 1024)) 8192 1 100 0.1 >/dev/null

one=$(load 1 1 1)
m0=$(messages)
three=$(load 1 2 3)
m1=$(messages)
echo
printf '%-44s %10s\n' "8k random 75:25 read/write, 3 x qd32" "IOPS"
printf '%-44s %10s\n' "3 processes on node 1" "$one"
printf '%-44s %10s\n' "1 process on each of nodes 1, 2 and 3" "$three"
echo "3 nodes / 1 node: $(python3 -c "print(f'{$three / $one:.2f}')")"
echo "lock messages of the 3 nodes during their run: $((m1 - m0)) (none per I/O)"
for n in 1 2 3; do on $n "$bin/cfs" umount "$(M $n)"; done
