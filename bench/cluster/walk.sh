#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/walk.sh: what a big walk on one node costs every node.  A tree of BENCH_WALK
# files (default 200,000; some 40 a directory) is made on node 1 of 3, then node 2, mounted
# with lock_cache=BENCH_LOCK_CACHE (default: the mount's default), walks it (stat of every
# name).  Printed for each node before and after the walk: cfsd's and corosync's resident
# size, the grants its mount keeps cached and has given back; then the growth per cached lock.
# Usage: walk.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_WALK, BENCH_LOCK_CACHE.
build=${1:-build}
. "$(dirname "$0")/lib.sh" wbench cw
nfiles=${BENCH_WALK:-200000}
rss_kib() { # node program -> resident KiB of that program in the node's namespace
	local pid
	for pid in $(ip netns pids "$CLUSTER_ID-n$1"); do
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then
			awk '/^VmRSS/ {print $2}' "/proc/$pid/status"
			return
		fi
	done
	echo 0
}
snapshot() { # label -> one line per node, and "node cfsd_kib corosync_kib cached" in $dir/$label
	: >"$dir/$1"
	for n in 1 2 3; do
		local c k cached back
		c=$(rss_kib "$n" cfsd) k=$(rss_kib "$n" corosync)
		cached=$(status_field "$n" locks_cached) back=$(status_field "$n" locks_given_back)
		echo "$n $c $k $cached" >>"$dir/$1"
		printf '  node %s: cfsd %7s KiB, corosync %7s KiB, grants cached %7s, given back %7s\n' \
			"$n" "$c" "$k" "$cached" "$back"
	done
}

echo "bench/cluster/walk: $(nproc) cores; LUN files in $dir; $nfiles files"
# Sparse LUN files: this measures memory, not speed, and 16 GiB written would take minutes.
for i in 0 1 2 3; do truncate -s 4G "$dir/lun$i"; done
"$bin/cvm" create cw "$dir"/lun{0,1,2,3} >/dev/null
"$cluster" up 3 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 4 --force cw >/dev/null 2>&1
opt2=${BENCH_LOCK_CACHE:+,lock_cache=$BENCH_LOCK_CACHE}
for n in 1 2 3; do
	mkdir -p "$(M $n)"
	o="log=$dir/cfsd$n.log"
	[ "$n" = 2 ] && o="$o$opt2"
	on $n "$bin/cfs" mount cw "$(M $n)" -o "$o"
done
t0=$(date +%s.%N)
on 1 python3 - "$(M 1)/tree" "$nfiles" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    if i % 40 == 0:
        d = os.path.join(top, f"d{i // 40 // 100}", f"d{i // 40}")
        os.makedirs(d, exist_ok=True)
    open(os.path.join(d, f"f{i}"), "w").close()
PY
t1=$(date +%s.%N)
echo "made on node 1 in $(python3 -c "print(f'{$t1 - $t0:.0f}')") s; before node 2's walk:"
snapshot before
t0=$(date +%s.%N)
on 2 bash -c "cd '$(M 2)/tree' && find . -printf '%s\n' >/dev/null"
t1=$(date +%s.%N)
echo "node 2 walked every name in $(python3 -c "print(f'{$t1 - $t0:.0f}')") s; after:"
snapshot after
python3 - "$dir/before" "$dir/after" <<'PY'
import sys
before = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[1])}
after = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[2])}
locks = after['2'][2] - before['2'][2]
print(f"node 2 keeps {locks} more grants; growth per grant node 2 keeps:")
for n in sorted(after):
    c = (after[n][0] - before[n][0]) * 1024
    k = (after[n][1] - before[n][1]) * 1024
    per = lambda b: f"{b / locks:.0f}" if locks > 0 else "-"
    print(f"  node {n}: cfsd {per(c)} bytes, corosync {per(k)} bytes "
          f"(cfsd {c // 1024} KiB, corosync {k // 1024} KiB in all)")
PY
