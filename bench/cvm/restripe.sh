#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cvm/restripe.sh: what a restripe buys and what it costs (issue 55), in one run.
# Each LUN is a loop device over a file, held to BENCH_IOPS (default 2000) reads and writes a
# second by the block I/O controller (cgroup v2 io.max; v1 blkio throttling where v1 holds
# the controller), so that each LUN is its own limit, as on a SAN, though all the files share
# this machine's disk.  Every command that does LUN I/O (cfsd, cvm, dd) runs in that cgroup.
#   before   a volume on 2 LUNs, a filesystem, a datafile; randio 8 KiB random reads at
#            depth 32 on the datafile
#   grown    cvm grow by 2 LUNs + cfs grow: the same randio (the datafile is still on 2 LUNs)
#   online   cvm restripe while mounted (the daemon runs it; timed), with randio 8 KiB
#            synchronous reads of the datafile meanwhile: their latency against the same
#            randio before, and how long reads that met a batch in motion waited for it
#   restriped  the same randio as before
#   raw copy   dd of as many bytes between two LUN devices, 1 MiB and 64 KiB blocks
# Prints IOPS, restriped/grown (target >= 1.8), the restripe's rate against the raw copy, and
# the reads' latency during the restripe.
# Usage: restripe.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per randio,
# default 10), BENCH_IOPS, BENCH_LUN_MB (default 384), BENCH_FILE_MB (default 256).  Root.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
secs=${BENCH_TIME:-10}
iops=${BENCH_IOPS:-2000}
lun_mb=${BENCH_LUN_MB:-384}
file_mb=${BENCH_FILE_MB:-256}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/restripe-bench.XXXXXX")
loops=() cg=
cleanup() {
	mountpoint -q "$dir/m" 2>/dev/null && { "$bin/cfs" umount "$dir/m" || umount -l "$dir/m"; }
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	[ -n "$cg" ] && rmdir "$cg" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (loop devices, cgroups, FUSE)" >&2; exit 1; }

# The cgroup whose members' I/O to each LUN is held to $iops a second.
throttle_setup() {
	local root
	if grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then root=/sys/fs/cgroup
	elif grep -qw io /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null; then root=/sys/fs/cgroup/unified
	fi
	if [ -n "${root:-}" ]; then
		echo +io >"$root/cgroup.subtree_control"
		cg=$root/cfs-restripe-bench.$$
		mkdir "$cg"
		for l in "${loops[@]}"; do
			echo "$(lsblk -dno MAJ:MIN "$l" | tr -d ' ') riops=$iops wiops=$iops" >"$cg/io.max"
		done
		procs=$cg/cgroup.procs
	elif [ -d /sys/fs/cgroup/blkio ]; then
		cg=/sys/fs/cgroup/blkio/cfs-restripe-bench.$$
		mkdir "$cg"
		for l in "${loops[@]}"; do
			local dev
			dev=$(lsblk -dno MAJ:MIN "$l" | tr -d ' ')
			echo "$dev $iops" >"$cg/blkio.throttle.read_iops_device"
			echo "$dev $iops" >"$cg/blkio.throttle.write_iops_device"
		done
		procs=$cg/cgroup.procs
	else
		echo "bench: no block I/O controller (cgroup v2 io or v1 blkio) on this machine" >&2
		exit 1
	fi
}
limited() { (echo "$BASHPID" >"$procs" && exec "$@"); }
read_iops() {
	limited "$bin/randio" --quiet --json -r 100 -q 32 -b 8k -t "$secs" "$dir/m/data.dbf" |
		python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["iops"])'
}
# 8 KiB synchronous reads: "p50 p99 max" latency in ms.
read_latency() {
	limited "$bin/randio" --quiet --json -r 100 -q 1 -b 8k -t "$secs" "$dir/m/data.dbf" |
		python3 -c 'import json,sys; l=json.load(sys.stdin)["latency_us"]; print("%.2f %.2f %.2f" % (l["p50"]/1e3, l["p99"]/1e3, l["max"]/1e3))'
}

mkdir -p "$dir/m"
for i in 0 1 2 3; do
	fallocate -l "${lun_mb}M" "$dir/lun$i"
	loops+=("$(losetup --find --show --direct-io=on "$dir/lun$i")")
done
throttle_setup
export CVM_SCAN="${loops[0]}:${loops[1]}:${loops[2]}:${loops[3]}"
echo "bench/cvm/restripe: $(nproc) cores; 4 LUNs of $lun_mb MiB (loop devices over $dir), each" \
	"held to $iops IOPS; a $file_mb MiB datafile; $secs s per randio"

limited "$bin/cvm" create rs "${loops[0]}" "${loops[1]}" >/dev/null
"$bin/mkfs.cfs" rs >/dev/null 2>&1
limited "$bin/cfs" mount rs "$dir/m" -o "dboptimized,log=$dir/cfsd.log"
dd if=/dev/urandom of="$dir/m/data.dbf" bs=1M count="$file_mb" oflag=direct status=none
before=$(read_iops)
limited "$bin/cvm" grow rs "${loops[2]}" "${loops[3]}" >/dev/null
"$bin/cfs" grow "$dir/m" >/dev/null
grown=$(read_iops)
sum_before=$(sha256sum <"$dir/m/data.dbf")
lat_idle=$(read_latency)
start=$(date +%s.%N)
limited "$bin/cvm" restripe rs 2>"$dir/restripe.out" >/dev/null &
job=$!
lat_online=$(read_latency)
wait $job
took=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
moved=$(tail -1 "$dir/restripe.out" | sed -n 's/.*(\(.*\) of \(.*\)),.*/\2/p')
waits=$(tail -1 "$dir/restripe.out" | sed -n 's/.*; \(.*\) I\/Os waited for a batch, at most \(.*\) ms; \(.*\) asynchronous held/\1 \2 \3/p')
[ "$(sha256sum <"$dir/m/data.dbf")" = "$sum_before" ] || { echo "bench: the datafile changed in the restripe" >&2; exit 1; }
restriped=$(read_iops)
"$bin/cfs" umount "$dir/m"
# The raw copy: as many bytes as the restripe moved, from one LUN device to another.
bytes=$(python3 -c "import sys; n, u = sys.argv[1].split(); print(int(float(n) * {'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}[u]))" "$moved")
raw_copy() { # block size (bytes) -> MB/s
	local t0
	t0=$(date +%s.%N)
	limited dd if="${loops[0]}" of="${loops[3]}" bs="$1" count=$((bytes / $1)) skip=$((1048576 / $1)) \
		seek=$((1048576 / $1)) iflag=direct oflag=direct status=none
	python3 -c "import sys; print('%.1f' % (int(sys.argv[1]) / 1e6 / (float(sys.argv[3]) - float(sys.argv[2]))))" \
		"$bytes" "$t0" "$(date +%s.%N)"
}
copy1m=$(raw_copy 1048576)
copy64k=$(raw_copy 65536)
python3 - "$before" "$grown" "$restriped" "$took" "$bytes" "$copy1m" "$copy64k" $lat_idle $lat_online ${waits:-0 0 0} <<'PY'
import sys
before, grown, restriped, took, moved, c1m, c64k = map(float, sys.argv[1:8])
idle, online, waits = sys.argv[8:11], sys.argv[11:14], sys.argv[14:17]
print("\n%-46s %10s" % ("8 KiB random reads, depth 32, on the datafile", "IOPS"))
print("%-46s %10.0f" % ("2 LUNs", before))
print("%-46s %10.0f" % ("grown to 4 LUNs (data still on 2)", grown))
print("%-46s %10.0f" % ("restriped over 4 LUNs", restriped))
print("restriped/grown: %.2f (target >= 1.8)" % (restriped / grown))
rate = moved / 1e6 / took
print("\nrestripe while mounted: %.0f MiB moved in %.1f s: %.1f MB/s; raw copy (dd, direct) "
      "%.1f MB/s with 1 MiB blocks, %.1f MB/s with 64 KiB: restripe/raw %.2f and %.2f"
      % (moved / 2**20, took, rate, c1m, c64k, rate / c1m, rate / c64k))
print("8 KiB synchronous reads, latency ms p50/p99/max: idle %s/%s/%s, during the restripe "
      "%s/%s/%s" % (*idle, *online))
print("reads that met a batch in motion: %s waited, at most %s ms; %s asynchronous held"
      % tuple(waits))
PY
