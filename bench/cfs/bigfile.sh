#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs/bigfile.sh: a big file made and dropped (a datafile added with fallocate, truncated,
# removed), on CFS and on ext4 of the same size on the same disk (a loop device over a sparse
# file): how long each step takes, and the longest a mkdir + rmdir of another process waits
# meanwhile (what the filesystem's other users feel while the change holds its locks).
# Neither side writes the file's data: both allocate unwritten extents.  CFS frees a removed
# file when the kernel forgets it, just after rm returns: the probe goes on 0.5 s past each step.
# Target: no wait of the other process over 100 ms.
# Usage: bigfile.sh [BUILD]; needs root.  Env: BENCH_DIR (default /var/tmp), BENCH_BIG_GB
# (the file, default 600; the filesystems are 4/3 of it, sparse).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
gb=${BENCH_BIG_GB:-600}
fs_gb=$((gb * 4 / 3 + 4))
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cfs-bigfile.XXXXXX")
export CVM_SCAN=$dir/luns
loop=
cleanup() {
	mountpoint -q "$dir/cfs" 2>/dev/null && "$bin/cfs" umount "$dir/cfs"
	mountpoint -q "$dir/ext4" 2>/dev/null && umount "$dir/ext4"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # so that the EXIT trap runs when the bench is stopped
mkdir -p "$dir/luns" "$dir/cfs" "$dir/ext4"

for i in 0 1 2 3; do truncate -s "$((fs_gb / 4))G" "$dir/luns/lun$i"; done
"$bin/cvm" create bigfile "$dir"/luns/lun{0,1,2,3} >/dev/null
"$bin/mkfs.cfs" -L bigfile bigfile >/dev/null 2>&1
"$bin/cfs" mount bigfile "$dir/cfs" -o "log=$dir/cfsd.log"
truncate -s "${fs_gb}G" "$dir/ext4.img"
loop=$(losetup --find --show "$dir/ext4.img")
mkfs.ext4 -q -E lazy_itable_init=1,lazy_journal_init=1 "$loop"
mount "$loop" "$dir/ext4"
echo "bench/cfs/bigfile: a ${gb} GiB file on ${fs_gb} GiB filesystems in $dir ($(nproc) cores)"

# Runs "$@" while another process does mkdir + rmdir in the same filesystem without pause:
# prints "seconds worst_wait_ms".
timed() {
	local mnt=$1
	shift
	python3 - "$mnt" "$@" <<'PY'
import os, subprocess, sys, threading, time
mnt, cmd = sys.argv[1], sys.argv[2:]
worst, stop = [0.0], threading.Event()
def probe():
    d = os.path.join(mnt, "probe")
    while not stop.is_set():
        t = time.perf_counter()
        os.mkdir(d)
        os.rmdir(d)
        worst[0] = max(worst[0], time.perf_counter() - t)
p = threading.Thread(target=probe)
p.start()
time.sleep(0.2)
t = time.perf_counter()
subprocess.run(cmd, check=True)
took = time.perf_counter() - t
time.sleep(0.5)  # a free at the last reference may come after rm returns
stop.set()
p.join()
print(f"{took:.2f} {worst[0] * 1000:.1f}")
PY
}

printf '\n%-24s %10s %10s %8s %16s %16s\n' step "cfs s" "ext4 s" cfs/ext4 "cfs worst ms" "ext4 worst ms"
row() { # label, command with @ for the mount point
	local label=$1 c e
	shift
	c=$(timed "$dir/cfs" "${@//@/$dir/cfs}")
	e=$(timed "$dir/ext4" "${@//@/$dir/ext4}")
	python3 - "$label" $c $e <<'PY'
import sys
label, ct, cw, et, ew = sys.argv[1], *map(float, sys.argv[2:])
print(f"{label:<24} {ct:10.2f} {et:10.2f} {ct / max(et, 0.01):8.2f} {cw:16.1f} {ew:16.1f}")
PY
}
row "fallocate ${gb}G" fallocate -l "${gb}G" @/big
row "truncate to 0" truncate -s 0 @/big
row "fallocate ${gb}G again" fallocate -l "${gb}G" @/big
row "rm" rm @/big
