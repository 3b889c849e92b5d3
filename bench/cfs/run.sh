#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs: CFS against raw LUN files and libfuse's passthrough_ll, in one run, as ratios.
#   raw    fio on 4 raw LUN files of the same total size            (the data baseline)
#   pt     fio on libfuse's passthrough_ll example over a directory on the same disk, mounted
#          cache=never (no page cache on the FUSE side).  passthrough_ll cannot pass O_DIRECT
#          through (its buffers are not aligned: the backing write fails with EINVAL), so its fio
#          runs without O_DIRECT and the backing ext4's page cache serves it, dropped before
#          each run; that flatters pt, most of all for writes.  For dbench it is mounted again
#          with the kernel's caches on (writeback, cache=always), as cfs's normal mount has them.
#   cfs    fio on CFS mounted dboptimized on a CVM volume over 4 LUN files, requests through
#          /dev/fuse (-o nouring)
#   uring  the same with requests through FUSE over io_uring (cfs(8) nouring), where the kernel
#          has it: the fuse module's enable_uring is set for the run and put back after it
#          (BENCH_URING=0 leaves it alone and skips these columns)
# Data (fio, libaio, O_DIRECT): 4 KiB random read and write at queue depth 32, 4 KiB O_SYNC
# random writes at depth 1, 8 KiB O_DSYNC sequential writes at depth 1 (a redo log's),
# 1 MiB sequential read and write at depth 4, 8 KiB O_DSYNC appends to new files (each write
# allocates) by 1 and 8 processes.
# Metadata (a normal CFS mount, passthrough_ll, the backing ext4): create+stat+unlink of
# BENCH_FILES files (default 100000), and untar of a generated tree of BENCH_TREE files (50000).
# Then a database-like load through the page cache of a normal mount against ext4, with the
# page cache hit rate (also with -o nowriteback), and dbench with 8 clients against ext4.
# Targets (issue 12): 4 KiB random I/O at depth 32 >= 0.9x raw; 4 KiB O_SYNC and 8 KiB O_DSYNC
# writes at depth 1 >= 0.8x raw; 1 MiB sequential >= 0.95x raw; metadata times <= 1.0x
# passthrough_ll's; the database load >= 0.8x ext4; dbench >= 0.5x ext4.
# Usage: run.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per fio run, default
# 10), BENCH_GB (data size, default 2), BENCH_FILES, BENCH_TREE, BENCH_DBENCH_TIME (s, 60),
# BENCH_HALT_POLL_NS (lib.sh).
build=${1:-build}
. "$(dirname "$0")/lib.sh" bench
secs=${BENCH_TIME:-10}
gb=${BENCH_GB:-2}
nfiles=${BENCH_FILES:-100000}
ntree=${BENCH_TREE:-50000}
dbench_secs=${BENCH_DBENCH_TIME:-60}
cleanup() {
	settings_put_back
	for m in "$dir/cfs" "$dir/pt"; do
		mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	sleep 0.5
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # so that the EXIT trap runs when the bench is stopped
mkdir -p "$dir/luns" "$dir/raw" "$dir/pt" "$dir/pt-src" "$dir/cfs"
lun_mb=$((gb * 1024 / 4 + 256))

# libfuse's passthrough_ll, built from the source Debian ships in libfuse3-dev.
src=/usr/share/doc/libfuse3-dev/examples
pt=$build/bench/passthrough_ll
if [ ! -x "$pt" ]; then
	mkdir -p "$build/bench"
	cc -O2 -I/usr/include/fuse3 -I"$src" -o "$pt" "$src/passthrough_ll.c" -lfuse3 -lpthread
fi

echo "bench/cfs: $(nproc) cores; files in $dir on $(df --output=source "$dir" | tail -1); ${gb} GiB of data; $secs s per fio run"
new_volume bench "$lun_mb"
mount_as bench "$dir/cfs" dboptimized dev
# remount OPTIONS TRANSPORT: the cfs side mounted again (OPTIONS may be empty), its requests
# through TRANSPORT (dev or io_uring).
remount() { mount_as bench "$dir/cfs" "$1" "$2"; }
ulimit -n "$(ulimit -Hn)" # passthrough_ll holds an fd per inode it knows
"$pt" -o "source=$dir/pt-src,cache=never" "$dir/pt"

size_each=$((gb * 1024 / 4))M
fio_job() { # name target-kind rw bs depth extra... -> "iops MB/s"
	local kind=$1 rw=$2 bs=$3 depth=$4
	shift 4
	local files
	local files="$dir/$kind/f0:$dir/$kind/f1:$dir/$kind/f2:$dir/$kind/f3" direct=1
	# The disk idle first: pt's buffered writes leave gigabytes for the kernel to write back,
	# which slowed the next side's reads to a tenth.
	sync
	if [ "$kind" = pt ]; then
		direct=0
		echo 3 >/proc/sys/vm/drop_caches
	fi
	fio --name=b --filename="$files" --size=$((gb * 1024))M --ioengine=libaio --direct=$direct --rw="$rw" --bs="$bs" \
		--iodepth="$depth" --time_based --runtime="$secs" --output-format=json "$@" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; r,w=j["read"],j["write"]; print("%.0f %.1f" % (r["iops"]+w["iops"], (r["bw_bytes"]+w["bw_bytes"])/1e6))'
}
# Lay the files out first (written, not holes) on every side.
for kind in raw pt cfs; do
	flag=oflag=direct
	[ $kind = pt ] && flag=conv=fsync
	for i in 0 1 2 3; do dd if=/dev/zero of="$dir/$kind/f$i" bs=1M count=$((gb * 1024 / 4)) $flag status=none; done
done

# Appends that allocate and must be durable when they return (a log file's growth): JOBS
# processes each append 8 KiB O_DIRECT|O_DSYNC writes to a new file of its own.
append_job() { # kind jobs -> "iops MB/s"
	local kind=$1 direct=1
	[ "$kind" = pt ] && direct=0
	sync # as fio_job
	mkdir -p "$dir/$kind/app"
	fio --name=a --directory="$dir/$kind/app" --numjobs="$2" --rw=write --bs=8k --size=256M \
		--sync=dsync --direct=$direct --ioengine=psync --fallocate=none --time_based \
		--runtime="$secs" --group_reporting --output-format=json |
		python3 -c 'import json,sys; w=json.load(sys.stdin)["jobs"][0]["write"]; print("%.0f %.1f" % (w["iops"], w["bw_bytes"]/1e6))'
	rm -rf "$dir/$kind/app"
}
# Each row: label, then the job and its arguments, run on each side ("iops MB/s" from each).
rows=(
	"4k randread qd32 IOPS|fio_job randread 4k 32"
	"4k randwrite qd32 IOPS|fio_job randwrite 4k 32"
	"4k randwrite O_SYNC qd1 IOPS|fio_job randwrite 4k 1 --sync=1"
	"8k write O_DSYNC qd1 IOPS|fio_job write 8k 1 --sync=dsync"
	"1M read qd4 MB/s|fio_job read 1M 4"
	"1M write qd4 MB/s|fio_job write 1M 4"
	"8k O_DSYNC appends, 1 job|append_job 1"
	"8k O_DSYNC appends, 8 jobs|append_job 8"
)
# Each row on raw, then on cfs through each transport, back to back: this disk's speed drifts
# (raw 4 KiB writes at depth 32 from 88k to 170k/s across runs), so each ratio compares runs
# a minute apart.  pt's rows come last: its gigabytes of buffered writes slowed whatever ran
# after them (cfs's depth-32 reads to a tenth), sync or not.
declare -A got
measure() { # column kind row: row's job on the files of kind, its figures in got[column,label]
	local job
	read -ra job <<<"${3#*|}"
	got[$1,${3%%|*}]=$("${job[0]}" "$2" "${job[@]:1}")
}
declare -A side_of=([dev]=cfs [io_uring]=uring)
for r in "${rows[@]}"; do
	measure raw raw "$r"
	for t in $transports; do
		remount dboptimized "$t"
		measure "${side_of[$t]}" cfs "$r"
	done
done
for r in "${rows[@]}"; do measure pt pt "$r"; done
printf '\n%-28s %10s %10s %10s %10s %8s %8s %8s\n' "workload" "raw" "pt" "cfs" "uring" "cfs/raw" "cfs/pt" "uring/raw"
for r in "${rows[@]}"; do
	l=${r%%|*}
	python3 - "$l" "${got[raw,$l]}" "${got[pt,$l]}" "${got[cfs,$l]}" "${got[uring,$l]:-}" <<'PY'
import sys
label, r, p, c = sys.argv[1], *[tuple(map(float, x.split())) for x in sys.argv[2:5]]
u = tuple(map(float, sys.argv[5].split())) if sys.argv[5] else None
i = 1 if 'MB/s' in label else 0
fmt = lambda v: f"{v[i]:10.1f}" if i else f"{v[0]:10.0f}"
print(f"{label:<28} {fmt(r)} {fmt(p)} {fmt(c)} {fmt(u) if u else '-':>10} {c[i]/r[i]:8.2f} "
      f"{c[i]/p[i]:8.2f} {f'{u[i]/r[i]:8.2f}' if u else '-':>8}")
PY
done

# Metadata on a normal (page cache) CFS mount, with the data files gone; from here on each
# cfs figure is taken through each transport (cfs: /dev/fuse, uring: io_uring).
rm -f "$dir"/raw/f? "$dir"/pt/f? "$dir"/cfs/f?
mkdir -p "$dir/ext4" "$dir/pt/m" "$dir/tree"
python3 - "$dir/tree" "$ntree" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 500:03d}", f"s{i // 50 % 10}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"file{i}"), "wb") as f:
        f.write(os.urandom(i % 2048))
PY
tar -C "$dir/tree" -cf "$dir/tree.tar" .
meta() { # dir -> seconds for create+stat+unlink of nfiles
	python3 - "$1" "$nfiles" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
t = time.monotonic()
for i in range(n):
    os.close(os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
for i in range(n):
    os.stat(f"{d}/f{i}")
for i in range(n):
    os.unlink(f"{d}/f{i}")
print(f"{time.monotonic() - t:.2f}")
PY
}
untar() { local t0; t0=$(date +%s.%N); tar -C "$1" -xf "$dir/tree.tar"; python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$(date +%s.%N)"; }
# passthrough_ll keeps an fd open for every inode the kernel knows, and this machine's hard
# limit on open files (ulimit -Hn) is below the file counts: the kernel's dentry and inode
# caches are dropped every 0.2 s during the metadata runs, on every side alike, so it forgets.
( while :; do echo 2 >/proc/sys/vm/drop_caches; sleep 0.2; done ) &
dropper=$!
trap 'kill $dropper 2>/dev/null; cleanup' EXIT
# against LABEL EXT4 PT DEV [URING]: a row of seconds, or of MB/s if LABEL says so, with the
# ratios of each cfs figure to the figure of pt (seconds) or ext4 (MB/s) that the header names.
against() {
	python3 - "$@" <<'PY'
import sys
label, e, p, c, u = sys.argv[1], *map(float, sys.argv[2:5]), (float(sys.argv[5]) if len(sys.argv) > 5 else None)
base = e if 'MB/s' in label or 'dbench' in label else p
ratio = lambda v: f"{v / base:8.2f}" if v is not None else f"{'-':>8}"
print(f"{label:<36} {e:10.2f} {p:10.2f} {c:10.2f} {f'{u:10.2f}' if u is not None else '-':>10} "
      f"{ratio(c)} {ratio(u)}")
PY
}
metadata_times() { # transport -> "create+stat+unlink-seconds untar-seconds" on the cfs side
	remount "" "$1"
	mkdir -p "$dir/cfs/m" "$dir/cfs/t-$1"
	echo "$(meta "$dir/cfs/m") $(untar "$dir/cfs/t-$1")"
}
declare -A meta_s untar_s
for t in $transports; do read -r "meta_s[$t]" "untar_s[$t]" < <(metadata_times "$t"); done
mkdir -p "$dir/ext4/t" "$dir/pt/t"
e_meta=$(meta "$dir/ext4"); p_meta=$(meta "$dir/pt/m")
e_untar=$(untar "$dir/ext4/t"); p_untar=$(untar "$dir/pt/t")
kill $dropper
printf '\n%-36s %10s %10s %10s %10s %8s %8s\n' "metadata (seconds, lower is better)" "ext4" "pt" "cfs" "uring" "cfs/pt" "uring/pt"
against "create+stat+unlink $nfiles files" "$e_meta" "$p_meta" "${meta_s[dev]}" ${meta_s[io_uring]:-}
against "untar of $ntree files" "$e_untar" "$p_untar" "${untar_s[dev]}" ${untar_s[io_uring]:-}

# A database on a normal mount (no ODM, no dboptimized): 8 KiB random reads and writes, 70/30,
# to a 256 MiB file that fits in the page cache, warm, against ext4 on the same disk.  The page
# cache hit rate is the share of fio's reads the daemon did not have to serve.
dbprep() { dd if=/dev/zero of="$1" bs=1M count=256 conv=fsync status=none; cat "$1" >/dev/null; }
dbload() { # file -> "iops read-bytes"
	fio --name=db --filename="$1" --size=256M --ioengine=psync --rw=randrw --rwmixread=70 --bs=8k \
		--invalidate=0 --time_based --runtime="$secs" --output-format=json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.0f %d" % (j["read"]["iops"]+j["write"]["iops"], j["read"]["io_bytes"]))'
}
daemon_read_bytes() { "$bin/cfs" status --json "$dir/cfs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["read_bytes"])'; }
dbprep "$dir/ext4/db"
read -r e _ < <(dbload "$dir/ext4/db")
dbrow() { # label: the load on cfs as mounted now, against ext4's $e
	dbprep "$dir/cfs/db"
	local r0 r1 c fio_read
	r0=$(daemon_read_bytes)
	read -r c fio_read < <(dbload "$dir/cfs/db")
	r1=$(daemon_read_bytes)
	python3 -c 'import sys; l, e, c, fr, d = sys.argv[1], *map(float, sys.argv[2:]); print("%-36s %10.0f %10.0f %8.2f %11.1f%%" % (l, e, c, c / e, 100 * (1 - min(d, fr) / fr) if fr else 0))' \
		"$1" "$e" "$c" "$fio_read" "$((r1 - r0))"
	rm -f "$dir/cfs/db"
}
printf '\n%-36s %10s %10s %8s %12s\n' "database load, normal mount (IOPS)" "ext4" "cfs" "cfs/ext4" "cache hits"
for t in $transports; do
	remount "" "$t"
	dbrow "8k randrw 70/30, 256 MiB ($t)"
	# The same through a mount that writes through (cfs(8) nowriteback), as a cluster mount does.
	remount nowriteback "$t"
	dbrow "  the same, -o nowriteback ($t)"
done

# A many-client file server load (dbench's default loadfile: creates, writes, reads, renames,
# deletes, locks across 8 clients) on the same normal mount against ext4.
dbench_mb() { dbench -D "$1" -t "$dbench_secs" 8 2>/dev/null | awk '/^Throughput/ {print $2}'; }
mkdir -p "$dir/ext4/dbench" "$dir/pt/dbench"
declare -A dbench_rate
for t in $transports; do
	remount "" "$t"
	mkdir -p "$dir/cfs/dbench-$t"
	dbench_rate[$t]=$(dbench_mb "$dir/cfs/dbench-$t")
done
# passthrough_ll here with the kernel's caches on (write-back, attributes and names kept), as
# cfs's normal mount has them: what a FUSE daemon that does nothing but pass calls on gets.
umount "$dir/pt"
"$pt" -o "source=$dir/pt-src,cache=always,writeback" "$dir/pt"
e=$(dbench_mb "$dir/ext4/dbench"); p=$(dbench_mb "$dir/pt/dbench")
printf '\n%-36s %10s %10s %10s %10s %8s %8s\n' "file server load (MB/s)" "ext4" "pt" "cfs" "uring" "cfs/ext4" "uring/ext4"
against "dbench, 8 clients, $dbench_secs s" "$e" "$p" "${dbench_rate[dev]}" ${dbench_rate[io_uring]:-}
python3 -c 'import sys; print("  (pt: passthrough_ll with write-back and cache=always, %.2fx ext4)" % (float(sys.argv[1]) / float(sys.argv[2])))' "$p" "$e"
"$bin/cfs" umount "$dir/cfs"
"$bin/fsck.cfs" -n bench | tail -1
trap - EXIT
cleanup
