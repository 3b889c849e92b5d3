#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/odm: libodm against raw LUN files and against the FUSE path, in one run, as ratios.
#   raw   fio (libaio, O_DIRECT) on 4 raw LUN files of the same total size
#   odm   odmbench: libodm over CFS, one datafile striped over a CVM volume of 4 LUN files
#   fuse  fio (libaio, O_DIRECT) on 4 files of CFS mounted dboptimized (every I/O through cfsd)
# Workloads: 4 KiB random read at queue depth 32; 8 KiB random 75:25 read/write at depth 32;
# 8 KiB synchronous random reads by 1, 10, 100 and 1,000 processes (BENCH_PROCS), as a
# database's foregrounds do them, against fio with as many jobs (psync) on the raw files.
# Targets: odm/raw >= 0.95 (every row), odm/fuse >= 1.8.  Also prints what counting one I/O in the
# statistics costs (target <= 100 ns).
# Usage: run.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per run, default 10),
# BENCH_GB (data size, default 2).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
secs=${BENCH_TIME:-10}
gb=${BENCH_GB:-2}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/odm-bench.XXXXXX")
export CVM_SCAN=$dir/luns
cleanup() {
	mountpoint -q "$dir/cfs" 2>/dev/null && { "$bin/cfs" umount "$dir/cfs" || umount -l "$dir/cfs"; }
	rm -rf "$dir"
	rm -f /dev/shm/odm.BENCH.BENCH1 /dev/shm/odm.BENCH.BENCHP
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$dir/luns" "$dir/raw" "$dir/cfs"
mb_each=$((gb * 1024 / 4))

echo "bench/odm: $(nproc) cores; files in $dir on $(df --output=source "$dir" | tail -1); ${gb} GiB of data; $secs s per run"
# LUN files allocated in one piece, as a LUN is, not grown hole by hole between the raw files'
# writes: a scattered layout on the host disk cost libodm some 5% against the raw files.
for i in 0 1 2 3; do # room for the fuse row's files and the datafile
	fallocate -l "$((2 * mb_each + 256))M" "$dir/luns/lun$i" 2>/dev/null ||
		truncate -s "$((2 * mb_each + 256))M" "$dir/luns/lun$i"
done
"$bin/cvm" create bench "$dir"/luns/lun{0,1,2,3} >/dev/null
"$bin/mkfs.cfs" -L bench bench >/dev/null 2>&1
"$bin/cfs" mount bench "$dir/cfs" -o "dboptimized,log=$dir/cfsd.log"
for i in 0 1 2 3; do
	dd if=/dev/zero of="$dir/raw/f$i" bs=1M count=$mb_each oflag=direct status=none
	dd if=/dev/zero of="$dir/cfs/f$i" bs=1M count=$mb_each oflag=direct status=none
done
"$build/bench/odmbench" "$dir/cfs/odm.dbf" $((gb * 1024)) 8192 1 100 0.1 >/dev/null # create

fio_run() { # kind bs rw mix -> "iops MB/s"
	fio --name=b --filename="$dir/$1/f0:$dir/$1/f1:$dir/$1/f2:$dir/$1/f3" --size=$((gb * 1024))M \
		--ioengine=libaio --direct=1 --rw="$3" --rwmixread="$4" --bs="$2" --iodepth=32 \
		--time_based --runtime="$secs" --output-format=json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; r,w=j["read"],j["write"]; print("%.0f %.1f" % (r["iops"]+w["iops"], (r["bw_bytes"]+w["bw_bytes"])/1e6))'
}
printf '\n%-34s %10s %10s %10s %8s %8s\n' workload "raw IOPS" "odm IOPS" "fuse IOPS" odm/raw odm/fuse
row() { # label bs rw mix
	local raw odm fuse
	raw=$(fio_run raw "$2" "$3" "$4")
	odm=$(LD_LIBRARY_PATH=$build/lib "$build/bench/odmbench" "$dir/cfs/odm.dbf" $((gb * 1024)) "$2" 32 "$4" "$secs")
	fuse=$(fio_run cfs "$2" "$3" "$4")
	python3 - "$1" "${raw%% *}" "${odm%% *}" "${fuse%% *}" <<'PY'
import sys
label, raw, odm, fuse = sys.argv[1], *map(float, sys.argv[2:])
print("%-34s %10.0f %10.0f %10.0f %8.2f %8.2f" % (label, raw, odm, fuse, odm / raw, odm / fuse))
PY
}
row "4k random read, qd32" 4096 randread 100
row "8k random 75:25 read/write, qd32" 8192 randrw 75

# Synchronous 8 KiB reads by many processes: fio's jobs each read the 4 raw files; odmbench's
# processes each identify the datafile (libodm), then all read at once: both are timed from when
# every job has its files open; "odm setup" is how long the processes took to get there.
# Runs of one count differ by 5% from each other here, as much as the gap being measured, so
# each count runs BENCH_ROUNDS times (default 3), fio and libodm taking turns, and the row gives
# the median of each and the lowest and highest ratio of a round.
sync_raw() { # processes -> IOPS
	fio --name=b --filename="$dir/raw/f0:$dir/raw/f1:$dir/raw/f2:$dir/raw/f3" \
		--size=$((gb * 1024))M --ioengine=psync --direct=1 --rw=randread --bs=8k \
		--numjobs="$1" --group_reporting --time_based --runtime="$secs" --output-format=json |
		python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["jobs"][0]["read"]["iops"])'
}
printf '\n%-30s %10s %10s %8s %12s %10s\n' "8k sync random read, processes" "raw IOPS" "odm IOPS" \
	odm/raw "round range" "odm setup"
for n in ${BENCH_PROCS:-1 10 100 1000}; do
	rounds=()
	for ((r = 0; r < ${BENCH_ROUNDS:-3}; r++)); do
		raw=$(sync_raw "$n")
		odm=$(LD_LIBRARY_PATH=$build/lib "$build/bench/odmbench" --procs "$n" "$dir/cfs/odm.dbf" 8192 "$secs")
		rounds+=("$raw ${odm%% *} ${odm##* }")
	done
	python3 - "$n" "${rounds[@]}" <<'PY'
import statistics, sys
rounds = [tuple(map(float, r.split())) for r in sys.argv[2:]]
raw = statistics.median(r[0] for r in rounds)
odm = statistics.median(r[1] for r in rounds)
ratios = [r[1] / r[0] for r in rounds]
print("%-30s %10.0f %10.0f %8.2f %5.2f-%-6.2f %9.2fs" % (sys.argv[1], raw, odm, odm / raw,
      min(ratios), max(ratios), max(r[2] for r in rounds)))
PY
done
echo
echo "counting one I/O in the statistics: $("$build/bench/odmbench" --count-cost 50000000) ns (target <= 100)"
