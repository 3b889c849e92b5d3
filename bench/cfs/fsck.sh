#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs/fsck.sh: fsck.cfs's time and peak memory on a one-node filesystem of many inodes
# (files of 1 KiB in directories of 1000), fsck.cfs -n and then fsck.cfs -y, against the bound
# fsck.cfs(8) states: at most 150 bytes per inode plus a bit per block of the filesystem, plus
# the block cache.  Also e2fsck -n's time on ext4 of the same files, for scale.  Then the check
# of the mounted filesystem (fsck.cfs -n through the daemon): its time, and what it costs a
# writer (create, write 4 KiB, fsync) beside it: the writer's rate and longest call alone and
# during the check.
# Usage: fsck.sh [BUILD]; needs root.  Env: BENCH_DIR (default /var/tmp), BENCH_FSCK_INODES
# (default 1000000).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
n=${BENCH_FSCK_INODES:-1000000}
dirs=$(((n + 999) / 1000))
gb=$(((n * 12 / 1000 + 1023) / 1024 + 2)) # 3 blocks an inode (inode, data, room) and more
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cfs-fsck.XXXXXX")
export CVM_SCAN=$dir/luns
loop=
cleanup() {
	mountpoint -q "$dir/cfs" 2>/dev/null && "$bin/cfs" umount "$dir/cfs"
	mountpoint -q "$dir/ext4" 2>/dev/null && umount "$dir/ext4"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$dir/luns" "$dir/cfs" "$dir/ext4"
for i in 0 1; do truncate -s "$((gb / 2 + 1))G" "$dir/luns/lun$i"; done
"$bin/cvm" create fsckbench "$dir"/luns/lun{0,1} >/dev/null
"$bin/mkfs.cfs" -J 1 fsckbench >/dev/null 2>&1
"$bin/cfs" mount fsckbench "$dir/cfs" -o "log=$dir/cfsd.log"
truncate -s "${gb}G" "$dir/ext4.img"
loop=$(losetup --find --show "$dir/ext4.img")
mkfs.ext4 -q -N $((n + dirs + 1000)) "$loop"
mount "$loop" "$dir/ext4"
echo "bench/cfs/fsck: $n files in $dirs directories, ${gb} GiB filesystems in $dir ($(nproc) cores)"

fill() {
	python3 - "$1" "$n" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
data = b'x' * 1024
for i in range(n):
    d = os.path.join(top, 'd%05d' % (i // 1000))
    if i % 1000 == 0:
        os.mkdir(d)
    with open(os.path.join(d, 'f%03d' % (i % 1000)), 'wb') as f:
        f.write(data)
PY
}
start=$(date +%s.%N)
fill "$dir/cfs"
echo "filled CFS in $(echo "$(date +%s.%N) - $start" | bc) s"
fill "$dir/ext4"
"$bin/cfs" umount "$dir/cfs"
umount "$dir/ext4"
blocks=$("$bin/cfs" show fsckbench --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_blocks"])')

# run WHAT CMD...: seconds and peak RSS (KiB) of CMD, printed.
run() {
	local what=$1 secs kib
	shift
	/usr/bin/time -o "$dir/time" -f "%e %M" "$@" >/dev/null 2>"$dir/err" || true
	read -r secs kib < <(tail -1 "$dir/time")
	local bound=$(((n + dirs) * 150 / 1024 + blocks / 8 / 1024))
	printf '%-16s %8.1f s  %7d KiB peak  (%d bytes per inode; bound without the cache %d KiB)\n' \
		"$what" "$secs" "$kib" $((kib * 1024 / (n + dirs))) "$bound"
}
run "fsck.cfs -n" "$bin/fsck.cfs" -n fsckbench
run "fsck.cfs -y" "$bin/fsck.cfs" -y fsckbench
run "e2fsck -fn ext4" e2fsck -fn "$loop"

# The mounted check, and a writer beside it.
"$bin/cfs" mount fsckbench "$dir/cfs" -o "log=$dir/cfsd.log"
mkdir "$dir/cfs/w"
writer() { # the writer until $dir/stop exists: "calls seconds longest_ms p99_ms p50_ms"
	python3 - "$dir/cfs/w" "$dir/stop" <<'PY'
import os, sys, time
top, stop = sys.argv[1], sys.argv[2]
lat, start, i = [], time.monotonic(), 0
while not os.path.exists(stop):
    t = time.monotonic()
    fd = os.open(os.path.join(top, f"f{i % 2000}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"y" * 4096)
    os.fsync(fd)
    os.close(fd)
    lat.append(time.monotonic() - t)
    i += 1
lat.sort()
print(len(lat), round(time.monotonic() - start, 1), round(lat[-1] * 1000, 1),
      round(lat[int(len(lat) * 0.99)] * 1000, 1), round(lat[len(lat) // 2] * 1000, 2))
PY
}
rm -f "$dir/stop"
writer >"$dir/alone" & w=$!
sleep 20
touch "$dir/stop"
wait $w
rm -f "$dir/stop"
writer >"$dir/beside" & w=$!
sleep 1
run "fsck.cfs -n mounted" "$bin/fsck.cfs" -n fsckbench
touch "$dir/stop"
wait $w
read -r c1 s1 max1 p1 m1 <"$dir/alone"
read -r c2 s2 max2 p2 m2 <"$dir/beside"
echo "writer alone:         $c1 calls in $s1 s, p50 $m1 ms, p99 $p1 ms, longest $max1 ms"
echo "writer beside check:  $c2 calls in $s2 s, p50 $m2 ms, p99 $p2 ms, longest $max2 ms"
echo "writer rate beside the check / alone: $(echo "scale=2; ($c2 / $s2) / ($c1 / $s1)" | bc)"
# What the check's settling of blocks in use cost (cfs/check_leaks.c), as the daemon logs it.
grep -o "check: [0-9]* blocks in use the walk did not meet.*" "$dir/cfsd.log" | tail -1
