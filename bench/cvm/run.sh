#!/usr/bin/env bash
# bench/cvm: the volume through libcvm against raw LUN files, in one run, as ratios.
#   (a) fio on the 4 raw LUN files          (the baseline the targets refer to)
#   (b) randio on one raw file of the same total size (same tool as (c), to separate tool
#       overhead from volume overhead)
#   (c) randio on a CVM volume striped (256 KiB) over the same 4 LUN files
# Workloads: 4 KiB random reads at queue depth 32; 1 MiB sequential writes at queue depth 4.
# Targets: (c)/(a) >= 0.95 for both.  Usage: run.sh [BUILD]; env BENCH_DIR, BENCH_TIME,
# BENCH_LUN_MB.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
secs=${BENCH_TIME:-15}
lun_mb=${BENCH_LUN_MB:-512}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cvm-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
command -v fio >/dev/null || { echo "bench: fio is missing: run scripts/deps.sh" >&2; exit 1; }

echo "bench/cvm: $(nproc) cores, LUN files in $dir on $(df --output=source "$dir" | tail -1)," \
	"4 x ${lun_mb} MiB, ${secs} s per run"
# Real blocks, not holes: reading a hole costs no disk I/O and would flatter every side.
for i in 0 1 2 3; do
	dd if=/dev/zero of="$dir/lun$i" bs=1M count=$((lun_mb + 1)) oflag=direct status=none
done
dd if=/dev/zero of="$dir/raw" bs=1M count=$((lun_mb * 4)) oflag=direct status=none
luns="$dir/lun0:$dir/lun1:$dir/lun2:$dir/lun3"

fio_iops() { # rw bs depth -> IOPS (reads or writes)
	fio --name=b --filename="$luns" --ioengine=libaio --direct=1 --rw="$1" --bs="$2" \
		--iodepth="$3" --time_based --runtime="$secs" --output-format=json --offset=1M |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["read"]["iops"]+j["write"]["iops"])'
}
randio_iops() { # target pattern bs depth read-pct [scan]
	"$bin/randio" --quiet --json -t "$secs" -p "$2" -b "$3" -q "$4" -r "$5" ${6:+--scan "$6"} "$1" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
}

echo "measuring 4 KiB random read, queue depth 32 ..."
a1=$(fio_iops randread 4k 32)
b1=$(randio_iops "$dir/raw" rand 4k 32 100)
echo "measuring 1 MiB sequential write, queue depth 4 ..."
a2=$(fio_iops write 1M 4)
b2=$(randio_iops "$dir/raw" seq 1M 4 0)
"$bin/cvm" --scan "$dir" create bench "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3" >/dev/null
echo "measuring the CVM volume ..."
c1=$(randio_iops vol:bench rand 4k 32 100 "$dir")
c2=$(randio_iops vol:bench seq 1M 4 0 "$dir")

python3 - "$a1" "$b1" "$c1" "$a2" "$b2" "$c2" <<'PY'
import sys
a1, b1, c1, a2, b2, c2 = map(float, sys.argv[1:])
print()
print(f"{'workload':34} {'fio raw':>10} {'randio raw':>11} {'randio cvm':>11} {'cvm/fio':>8} {'cvm/randio':>10}")
for name, a, b, c, unit in (("4k random read qd32 (IOPS)", a1, b1, c1, 1),
                            ("1M sequential write qd4 (MB/s)", a2, b2, c2, 1.048576)):
    print(f"{name:34} {a*unit:10.0f} {b*unit:11.0f} {c*unit:11.0f} {c/a:8.2f} {c/b:10.2f}")
print()
print("target: cvm/fio >= 0.95 on both rows")
PY
