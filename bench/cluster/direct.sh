#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/direct.sh: a database's direct I/O on a dboptimized cluster mount against the
# same on a one-node mount, in one run.  fio (libaio, O_DIRECT) on a written 1 GiB file: 4 KiB
# random reads and writes at queue depth 32, 8 KiB O_DSYNC sequential writes at depth 1 (a
# redo log's), 1 MiB sequential reads at depth 4.  The one-node mount's requests go through
# /dev/fuse (-o nouring), as a cluster mount's always do, so the ratio is what the cluster
# costs: its locks, held for each I/O.  Then both nodes of a 2-node cluster at once on files
# of their own (the sum, against node 1 alone).
# Usage: direct.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_TIME (s per fio run, 10).
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" dbench cd
secs=${BENCH_TIME:-10}
mkdir -p "$dir/local"
luns 700
"$bin/cvm" create cd "$dir"/lun{0,1,2,3} >/dev/null

# job FILE RW BS DEPTH [fio options]: IOPS of one fio run on FILE (run where the caller is).
job() {
	local file=$1 rw=$2 bs=$3 depth=$4
	shift 4
	fio --name=d --filename="$file" --size=1G --ioengine=libaio --direct=1 --rw="$rw" --bs="$bs" \
		--iodepth="$depth" --time_based --runtime="$secs" --output-format=json "$@" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.0f" % (j["read"]["iops"]+j["write"]["iops"]))'
}
rows=("4k randread depth 32|randread 4k 32" "4k randwrite depth 32|randwrite 4k 32"
	"8k O_DSYNC write depth 1|write 8k 1 --sync=dsync" "1M read depth 4|read 1M 4")
# all_rows FILE [NODE]: each row's IOPS on FILE, on NODE if given.
all_rows() {
	local r args
	for r in "${rows[@]}"; do
		read -r -a args <<<"${r#*|}"
		if [ -n "${2:-}" ]; then
			on "$2" bash -c "$(declare -f job); secs=$secs; job $1 ${args[*]}"
		else
			job "$1" "${args[@]}"
		fi
	done
}

"$bin/mkfs.cfs" cd >/dev/null 2>&1
"$bin/cfs" mount cd "$dir/local" -o "dboptimized,nouring,log=$dir/local.log"
dd if=/dev/zero of="$dir/local/f" bs=1M count=1024 oflag=direct status=none
mapfile -t local_iops < <(all_rows "$dir/local/f")
"$bin/cfs" umount "$dir/local"

"$cluster" up 2 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 2 --force cd >/dev/null 2>&1
for n in 1 2; do mkdir -p "$(M $n)"; on $n "$bin/cfs" mount cd "$(M $n)" -o "dboptimized,log=$dir/cfsd$n.log"; done
for n in 1 2; do on $n dd if=/dev/zero of="$(M $n)/f$n" bs=1M count=1024 oflag=direct status=none; done
mapfile -t node1_iops < <(all_rows "$(M 1)/f1" 1)
all_rows "$(M 1)/f1" 1 >"$dir/both1" &
all_rows "$(M 2)/f2" 2 >"$dir/both2"
wait
mapfile -t both1 <"$dir/both1"
mapfile -t both2 <"$dir/both2"

echo "bench/cluster/direct: $(nproc) cores; LUN files in $dir; $secs s per fio run; IOPS"
printf '%-28s %10s %10s %8s %12s %8s\n' "" "one node" "cluster" "ratio" "2 nodes sum" "ratio"
for i in "${!rows[@]}"; do
	sum=$((both1[i] + both2[i]))
	printf '%-28s %10s %10s %8s %12s %8s\n' "${rows[i]%%|*}" "${local_iops[i]}" "${node1_iops[i]}" \
		"$(ratio "${node1_iops[i]}" "${local_iops[i]}")" "$sum" "$(ratio "$sum" "${node1_iops[i]}")"
done
for n in 1 2; do on $n "$bin/cfs" umount "$(M $n)"; done
"$bin/fsck.cfs" -n cd | tail -1
