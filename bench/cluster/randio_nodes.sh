#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/randio_nodes.sh: the seed's "randio test 1": one synchronous 4 KiB random read
# stream per node, all on ONE small CFS file, on 1, 2, 4, 8 and 14 nodes (BENCH_NODES), to show
# that no software serialisation comes with more nodes.  One cluster of the largest count, one
# volume of 4 LUNs striped at 256 KiB, `mkfs.cfs -p corosync -J N`, a dboptimized mount on
# every node; node 1 writes the file (BENCH_FILE_MIB, default 64) once.  Printed per count:
# the median over BENCH_ROUNDS rounds (default 3) of the aggregate reads/s and the rounds'
# lowest and highest, the per-node minimum, mean and maximum over every round, and min/mean.
# Targets: the aggregate never falls as nodes are added; no node gets less than half the mean.  On one
# machine every node shares its cores, so the aggregate flattens once they are busy.
# Usage: randio_nodes.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_NODES ("1 2 4 8 14"),
# BENCH_SECONDS (per count and round, default 10), BENCH_ROUNDS, BENCH_FILE_MIB.
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" rnodes rn
counts=${BENCH_NODES:-1 2 4 8 14} secs=${BENCH_SECONDS:-10} mib=${BENCH_FILE_MIB:-64}
rounds=${BENCH_ROUNDS:-3}
max=0
for c in $counts; do [ "$c" -gt "$max" ] && max=$c; done

echo "bench/cluster/randio_nodes: $(nproc) cores; LUN files in $dir; $max nodes; $rounds rounds of ${secs} s per count; a ${mib} MiB file"
luns 512
"$bin/cvm" create rn "$dir"/lun{0,1,2,3} >/dev/null
"$cluster" up "$max" >/dev/null
"$bin/mkfs.cfs" -p corosync -J "$max" --force rn >/dev/null 2>&1
for n in $(seq "$max"); do
	mkdir -p "$(M $n)"
	on $n "$bin/cfs" mount rn "$(M $n)" -o "dboptimized${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS},log=$dir/cfsd$n.log"
done
on 1 dd if=/dev/urandom of="$(M 1)/file" bs=1M count="$mib" oflag=direct status=none

[ -n "${BENCH_KEEP:-}" ] && trap 'cp "$dir"/r*.json "$dir"/*.log "$BENCH_KEEP"/ 2>/dev/null; cleanup' EXIT
# Rounds go through every count in turn (1 2 4 8 14 1 2 4 ...), so that a slow minute of the
# machine lands on one round of several counts, not on every round of one.
for ((r = 1; r <= rounds; r++)); do
	for c in $counts; do
		for n in $(seq "$c"); do
			on $n "$bin/randio" -r 100 -q 1 -b 4k -t "$secs" -S "${mib}M" --seed "$((r * 100 + n))" \
				--quiet --json "$(M $n)/file" >"$dir/r$c.$r.$n.json" &
		done
		wait
	done
done
python3 - "$dir" "$rounds" $counts <<'PY'
import json, statistics, sys
d, rounds, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
print("\n%6s %12s %15s %8s %8s %8s %9s" % ("nodes", "aggregate/s", "rounds' range", "min/s",
      "mean/s", "max/s", "min/mean"))
prev = 0
for c in counts:
    per_round = [[json.load(open("%s/r%d.%d.%d.json" % (d, c, r, n)))["iops"]
                  for n in range(1, c + 1)] for r in range(1, rounds + 1)]
    aggs = [sum(v) for v in per_round]
    agg = statistics.median(aggs)
    every = [x for v in per_round for x in v]
    mean = sum(every) / len(every)
    print("%6d %12.0f %7.0f-%-7.0f %8.0f %8.0f %8.0f %9.2f%s" % (c, agg, min(aggs), max(aggs),
          min(every), mean, max(every), min(every) / mean, "   FELL" if agg < prev else ""))
    prev = agg
PY
