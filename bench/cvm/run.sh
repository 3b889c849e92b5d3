#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cvm: the volume through libcvm against raw LUN files, in one run, as ratios.
#   fio raw     fio on the 4 raw LUN files               (the baseline the targets refer to)
#   randio raw  randio on one raw file of the same total size (same tool as the volume runs,
#               to tell tool overhead from volume overhead)
#   randio cvm  randio on a CVM volume striped over the same 4 LUN files (256 KiB width; the
#               1 MiB sequential write is also run on a 1 MiB-width volume)
# Workloads: 4 KiB random reads at queue depth 32; 1 MiB sequential writes at queue depth 4.
# The sides run back to back, ROUNDS times; ratios are medians of per-round ratios, because this
# machine's disk drifts during a run.  Target: cvm/fio >= 0.95 on both workloads.
# Usage: run.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per run, default 5),
# BENCH_ROUNDS (default 3), BENCH_LUN_MB (default 512).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
secs=${BENCH_TIME:-5}
rounds=${BENCH_ROUNDS:-3}
lun_mb=${BENCH_LUN_MB:-512}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cvm-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
command -v fio >/dev/null || { echo "bench: fio is missing: run scripts/deps.sh" >&2; exit 1; }
cvm() { "$bin/cvm" --scan "$dir" "$@" >/dev/null; }

echo "bench/cvm: $(nproc) cores; LUN files in $dir on $(df --output=source "$dir" | tail -1);" \
	"4 x ${lun_mb} MiB; $rounds rounds of $secs s per side"
# Real blocks, not holes: reading a hole costs no disk I/O and would flatter every side.
for i in 0 1 2 3; do
	dd if=/dev/zero of="$dir/lun$i" bs=1M count=$((lun_mb + 1)) oflag=direct status=none
done
dd if=/dev/zero of="$dir/raw" bs=1M count=$((lun_mb * 4)) oflag=direct status=none
luns="$dir/lun0:$dir/lun1:$dir/lun2:$dir/lun3"

fio_rate() { # rw bs depth -> IOPS
	fio --name=b --filename="$luns" --ioengine=libaio --direct=1 --rw="$1" --bs="$2" \
		--iodepth="$3" --time_based --runtime="$secs" --output-format=json --offset=1M |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["read"]["iops"]+j["write"]["iops"])'
}
randio_rate() { # target pattern bs depth read-pct -> IOPS
	"$bin/randio" --quiet --json --scan "$dir" -t "$secs" -p "$2" -b "$3" -q "$4" -r "$5" "$1" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
}

results=$dir/results
: >"$results"
record() { echo "$r $1 $2" >>"$results"; }
# Sides of one workload run back to back in each round, and ratios are taken per round, so the
# disk's drift during the run (seen here: the same fio job from 31k to 18k IOPS) cancels out.
cvm create bench "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3"
for r in $(seq 1 "$rounds"); do
	echo "round $r/$rounds ..."
	record fio_rr "$(fio_rate randread 4k 32)"
	record cvm_rr "$(randio_rate vol:bench rand 4k 32 100)"
	record raw_rr "$(randio_rate "$dir/raw" rand 4k 32 100)"
	record fio_sw "$(fio_rate write 1M 4)"
	record cvm_sw "$(randio_rate vol:bench seq 1M 4 0)"
	record raw_sw "$(randio_rate "$dir/raw" seq 1M 4 0)"
	cvm remove --force bench
	cvm create bench1m --stripe-width 1M "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3"
	record cvm1m_sw "$(randio_rate vol:bench1m seq 1M 4 0)"
	cvm remove --force bench1m
	cvm create bench "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3"
done

python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, k, v = line.split()
    runs.setdefault(k, {})[int(r)] = float(v)
def med(k):
    return statistics.median(runs[k].values())
def ratio(a, b):
    return statistics.median(runs[a][r] / runs[b][r] for r in runs[a])
MB = 1048576 / 1e6
print()
print(f"{'workload':38} {'fio raw':>9} {'randio raw':>11} {'randio cvm':>11} {'cvm/fio':>8} {'cvm/randio':>11}")
rows = (("4k random read qd32, IOPS", "rr", 1, "cvm_rr"),
        ("1M seq write qd4, MB/s, 256k stripe", "sw", MB, "cvm_sw"),
        ("1M seq write qd4, MB/s, 1M stripe", "sw", MB, "cvm1m_sw"))
for name, w, unit, c in rows:
    print(f"{name:38} {med('fio_'+w)*unit:9.0f} {med('raw_'+w)*unit:11.0f} {med(c)*unit:11.0f}"
          f" {ratio(c, 'fio_'+w):8.2f} {ratio(c, 'raw_'+w):11.2f}")
print()
print(f"values: medians of {len(runs['fio_rr'])} rounds; ratios: medians of per-round ratios")
for k in sorted(runs):
    print(f"  {k:9} " + " ".join(f"{v:9.0f}" for _, v in sorted(runs[k].items())))
print("target: cvm/fio >= 0.95 for 4k random reads and 1M sequential writes")
PY
