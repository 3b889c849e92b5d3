#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs/quota.sh: what quotas cost on one node.  The same work on two CFS mounts in one
# run, one made without quotas, one with project,quota and the work charged to a user, a group
# and a project that each have limits far above it: creates (create + 4 KiB write + close of
# BENCH_QUOTA_FILES files, default 20000, in 4 directories by 4 processes) and 1 MiB
# sequential writes with O_DIRECT into new space (fio, BENCH_QUOTA_MB, default 1024).  Median
# of BENCH_ROUNDS (default 3) runs each, printed as ratios quota/no-quota.  Target (issue 67):
# >= 0.97x for both.
# Usage: quota.sh [BUILD]; needs root.  Env: BENCH_DIR (default /var/tmp).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
files=${BENCH_QUOTA_FILES:-20000} mb=${BENCH_QUOTA_MB:-1024} rounds=${BENCH_ROUNDS:-3}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cfs-quota.XXXXXX")
chmod 755 "$dir" # the work runs as user 1000
export CVM_SCAN=$dir
cleanup() {
	for m in "$dir/off" "$dir/on"; do
		mountpoint -q "$m" 2>/dev/null && "$bin/cfs" umount "$m"
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
for v in off on; do
	for i in 0 1; do truncate -s 3G "$dir/$v.lun$i"; done
	"$bin/cvm" create "q$v" "$dir/$v.lun0" "$dir/$v.lun1" >/dev/null
done
"$bin/mkfs.cfs" qoff >/dev/null 2>&1
"$bin/mkfs.cfs" -O project,quota qon >/dev/null 2>&1
mkdir -p "$dir/off" "$dir/on"
"$bin/cfs" mount qoff "$dir/off" -o "log=$dir/off.log,nowriteback"
"$bin/cfs" mount qon "$dir/on" -o "log=$dir/on.log,nowriteback"
for m in "$dir/off" "$dir/on"; do mkdir "$m/w" && chown 1000:1000 "$m/w"; done
chattr +P -p 7 "$dir/on/w"
for kind in -u -g -p; do
	id=1000
	[ "$kind" = -p ] && id=7
	"$bin/cfs" quota set "$dir/on" "$kind" "$id" --blocks-hard 100G --inodes-hard 10000000 >/dev/null
done
echo "bench/cfs/quota: quotas on against off, $(nproc) cores, $rounds rounds, in $dir"

# creates M: seconds for $files creates with a 4 KiB write each, by 4 processes of user 1000.
creates() {
	local start end
	start=$(date +%s.%N)
	setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 - "$1/w" "$files" <<'PY'
import os, sys
from multiprocessing import Pool
top, n = sys.argv[1], int(sys.argv[2])
def work(k):
    d = os.path.join(top, "c%d" % k)
    os.mkdir(d)
    for i in range(n // 4):
        fd = os.open(os.path.join(d, str(i)), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * 4096)
        os.close(fd)
with Pool(4) as p:
    p.map(work, range(4))
PY
	end=$(date +%s.%N)
	awk -v a="$start" -v b="$end" 'BEGIN {print b - a}'
	rm -rf "$1/w"/c*
}
# writes M: MB/s of 1 MiB O_DIRECT sequential writes into new space.
writes() {
	setpriv --reuid 1000 --regid 1000 --clear-groups fio --name=w --directory="$1/w" --rw=write \
		--bs=1M --size="${mb}M" --direct=1 --ioengine=libaio --iodepth=4 --output-format=terse \
		--minimal 2>/dev/null | awk -F';' '{print $48 / 1024}'
	rm -f "$1/w"/w.*
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
declare -A c w
for v in off on; do c[$v]=; w[$v]=; done
for ((r = 1; r <= rounds; r++)); do
	for v in off on; do
		c[$v]+="$(creates "$dir/$v") "
		w[$v]+="$(writes "$dir/$v") "
	done
done
for v in off on; do
	c[$v]=$(tr ' ' '\n' <<<"${c[$v]}" | grep . | median)
	w[$v]=$(tr ' ' '\n' <<<"${w[$v]}" | grep . | median)
done
printf '%-34s %10s %10s %8s\n' "" "off" "on" "on/off"
printf '%-34s %9.2fs %9.2fs %7.2fx\n' "creates of $files files (rate)" "${c[off]}" "${c[on]}" \
	"$(awk -v a="${c[off]}" -v b="${c[on]}" 'BEGIN {print a / b}')"
printf '%-34s %7.0fMB/s %7.0fMB/s %7.2fx\n' "1 MiB O_DIRECT writes, new space" "${w[off]}" "${w[on]}" \
	"$(awk -v a="${w[on]}" -v b="${w[off]}" 'BEGIN {print a / b}')"
"$bin/cfs" quota get "$dir/on" -u 1000
