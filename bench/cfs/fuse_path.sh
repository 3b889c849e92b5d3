#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs/fuse_path.sh: what the FUSE path itself costs a 4 KiB direct read on this machine,
# beside what the LUN files cost, so that issue 12's target for 4 KiB random I/O at depth 32
# (0.9x the raw LUN files) can be judged against what the kernel's FUSE path allows here.
#   raw    fio reads of raw files on the LUN files' disk: at depth 1, at depth 32 from one
#          process, and at depth 32 from 4 processes of 8 each (cfsd's threads submit to the
#          LUNs from several threads: a disk may serve one submitter better than several)
#   holes  fio reads of files never written on a dboptimized CFS mount: cfsd answers zeros
#          without going to the LUNs, so these rows are the FUSE path alone (the request,
#          cfsd's threads, the answer)
#   cfs    fio reads of written files on the same mount: the FUSE path and the LUNs
#   cores  reads of holes at depth 1 through /dev/fuse with cfsd's threads and fio pinned to
#          one core, then to two different cores: what it costs the FUSE path here that a
#          request wakes a thread on another core (a virtual machine's idle core may have to
#          be woken by its host first; the cpuidle driver and its halt polling are printed)
# The CFS rows through /dev/fuse (-o nouring) and, where the kernel has it, FUSE over io_uring
# (the fuse module's enable_uring set for the run and put back; BENCH_URING=0 skips it).
# Per row: reads a second, mean completion latency, busy cores (from /proc/stat, the whole
# machine) and CPU time per read.  Then what the rows say: the latency the FUSE path adds at
# depth 1, and the depth at which raw reads go as fast as cfs's at depth 32.
# Usage: fuse_path.sh [BUILD]; needs root.  Env: BENCH_DIR (default /var/tmp), BENCH_TIME (s
# per fio run, default 6), BENCH_HALT_POLL_NS (lib.sh).
build=${1:-build}
. "$(dirname "$0")/lib.sh" fuse-path
secs=${BENCH_TIME:-6}
trap put_back_and_clean EXIT
trap 'exit 1' INT TERM # so that the EXIT trap runs when the bench is stopped
mkdir -p "$dir/luns" "$dir/raw" "$dir/cfs"

new_volume fusepath 768
for i in 0 1 2 3; do dd if=/dev/zero of="$dir/raw/f$i" bs=1M count=512 oflag=direct status=none; done
mount_cfs() { mount_as fusepath "$dir/cfs" dboptimized "$1"; }
mount_cfs dev
for i in 0 1 2 3; do
	dd if=/dev/zero of="$dir/cfs/f$i" bs=1M count=512 oflag=direct status=none
	truncate -s 512M "$dir/cfs/h$i"
done

# read_row LABEL FILES DEPTH [JOBS]: 4 KiB O_DIRECT random reads, DEPTH each from JOBS
# processes (1), a row of the table (on fd 3, the output); its reads a second in rate[LABEL].
# With fio_core set, fio runs on that core only.
exec 3>&1
declare -A rate
read_row() {
	local label=$1 files=$2 depth=$3 jobs=${4:-1} stat0 stat1 json
	sync
	stat0=$(head -1 /proc/stat)
	json=$(${fio_core:+taskset -c "$fio_core"} fio --name=r --filename="$files" --size=2048M --ioengine=libaio --direct=1 \
		--rw=randread --bs=4k --iodepth="$depth" --numjobs="$jobs" --group_reporting \
		--time_based --runtime="$secs" --output-format=json)
	stat1=$(head -1 /proc/stat)
	rate[$label]=$(python3 - "$label" "$stat0" "$stat1" "$(nproc)" "$json" <<'PY'
import json, sys
label, s0, s1, cores, out = sys.argv[1], sys.argv[2].split()[1:], sys.argv[3].split()[1:], int(sys.argv[4]), sys.argv[5]
d = [int(b) - int(a) for a, b in zip(s0, s1)][:8]     # user nice system idle iowait irq softirq steal
busy = cores * (sum(d) - d[3] - d[4]) / sum(d)
r = json.loads(out)["jobs"][0]["read"]
iops, lat_us = r["iops"], r["clat_ns"]["mean"] / 1000
with open(3, "w", closefd=False) as row:
    print(f"{label:<38} {iops:10.0f} {lat_us:10.0f} {busy:8.2f} {1e6 * busy / iops:10.1f}", file=row)
print(f"{iops:.0f}")
PY
)
}
raw_files="$dir/raw/f0:$dir/raw/f1:$dir/raw/f2:$dir/raw/f3"
cfs_files="$dir/cfs/f0:$dir/cfs/f1:$dir/cfs/f2:$dir/cfs/f3"
hole_files="$dir/cfs/h0:$dir/cfs/h1:$dir/cfs/h2:$dir/cfs/h3"

echo "bench/cfs/fuse_path: $(nproc) cores; files in $dir on $(df --output=source "$dir" | tail -1); $secs s per fio run"
printf '\n%-38s %10s %10s %8s %10s\n' "4 KiB O_DIRECT random reads" "reads/s" "lat us" "busy" "cpu us/op"
for depth in 1 4 8 16 32; do read_row "raw, depth $depth" "$raw_files" "$depth"; done
read_row "raw, depth 32 as 4 processes of 8" "$raw_files" 8 4
for t in $transports; do
	mount_cfs "$t"
	for depth in 1 32; do
		read_row "holes ($t), depth $depth" "$hole_files" "$depth"
		read_row "cfs ($t), depth $depth" "$cfs_files" "$depth"
	done
done
# The cores rows: every thread of cfsd on core 0 (those it starts later inherit it), fio on
# core 0, then on core 1; then cfsd's threads free again.
cores_rows=$(nproc)
if [ "$cores_rows" -ge 2 ]; then
	mount_cfs dev
	cfsd_pid=$("$bin/cfs" status --json "$dir/cfs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
	taskset -a -p -c 0 "$cfsd_pid" >/dev/null
	fio_core=0 read_row "holes (dev), depth 1, one core" "$hole_files" 1
	fio_core=1 read_row "holes (dev), depth 1, two cores" "$hole_files" 1
	taskset -a -p -c "0-$((cores_rows - 1))" "$cfsd_pid" >/dev/null
fi
idle_driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
halt_poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo -)

# What the rows say.  The depth raw needs to match cfs at 32: interpolated between the raw
# rows' depths (reads a second grow with depth up to where the disk is busy).
python3 - "$transports" "${rate[raw, depth 1]}" "${rate[raw, depth 4]}" "${rate[raw, depth 8]}" \
	"${rate[raw, depth 16]}" "${rate[raw, depth 32]}" "${rate[raw, depth 32 as 4 processes of 8]}" \
	"${rate[holes (dev), depth 1]}" "${rate[cfs (dev), depth 1]}" "${rate[cfs (dev), depth 32]}" \
	"${rate[holes (io_uring), depth 1]:-0}" "${rate[cfs (io_uring), depth 1]:-0}" "${rate[cfs (io_uring), depth 32]:-0}" \
	"${rate[holes (dev), depth 1, one core]:-0}" "${rate[holes (dev), depth 1, two cores]:-0}" \
	"$idle_driver" "$halt_poll" <<'PY'
import sys
transports = sys.argv[1].split()
idle_driver, halt_poll = sys.argv[-2:]
r1, r4, r8, r16, r32, r32x4, *cfs, one_core, two_cores = map(float, sys.argv[2:-2])
depths = [(1, r1), (4, r4), (8, r8), (16, r16), (32, r32)]
def raw_depth_for(rate):
    for (d0, a), (d1, b) in zip(depths, depths[1:]):
        if a <= rate <= b:
            return d0 + (d1 - d0) * (rate - a) / (b - a) if b > a else d1
    return None if rate > r32 else 1
print(f"\nraw at depth 32: {r32:.0f}/s from one process, {r32x4:.0f}/s ({r32x4 / r32:.2f}x) from four")
for t, (h1, c1, c32) in zip(["dev", "io_uring"], [cfs[0:3], cfs[3:6]]):
    if t not in transports:
        continue
    d = raw_depth_for(c32)
    print(f"{t}: a read through the FUSE path alone (holes) {1e6 / h1:.0f} us at depth 1; cfs adds "
          f"{1e6 / c1 - 1e6 / r1:.0f} us to the raw read's {1e6 / r1:.0f} us; at depth 32 cfs is "
          f"{c32 / r32:.2f}x raw, " + (f"what raw reads do at depth {d:.0f}" if d else "above raw"))
if one_core and two_cores:
    print(f"cores: a read of a hole at depth 1 takes {1e6 / one_core:.0f} us with cfsd and fio on one "
          f"core, {1e6 / two_cores:.0f} us on two: {(1e6 / two_cores - 1e6 / one_core) / 2:.0f} us for "
          f"each wake-up of a thread on the other core (cpuidle {idle_driver}, "
          f"guest_halt_poll_ns {halt_poll})")
PY
"$bin/cfs" umount "$dir/cfs"
"$bin/fsck.cfs" -n fusepath | tail -1
