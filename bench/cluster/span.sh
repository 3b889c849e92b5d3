#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/span.sh: a node's own work beside a file other nodes write, when that file is
# one of its own inodes.  On a fresh 3-node cluster node 1 makes a directory, BENCH_PAD files
# (default 80: past the directory's span of 64 inodes), then a file; nodes 1 and 2 append to
# that file in turns (pingpong.py) while node 1 creates, stats and unlinks files in its
# directory.  Printed: node 1's rate alone and during the ping-pong, node 3's during one (it
# shares only the CPU), and the ping-pong's hand-offs.  Before new inodes went past spans
# other nodes change files in (cfs/inode.c), node 1's files went into the file's span.
# Usage: span.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_PAD, BENCH_SECONDS (3).
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" sbench cs
pad=${BENCH_PAD:-80} secs=${BENCH_SECONDS:-3}

echo "bench/cluster/span: $(nproc) cores; LUN files in $dir; $pad files between the directory and the shared file"
luns 1024
"$bin/cvm" create cs "$dir"/lun{0,1,2,3} >/dev/null
"$cluster" up 3 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 4 --force cs >/dev/null 2>&1
for n in 1 2 3; do mkdir -p "$(M $n)"; on $n "$bin/cfs" mount cs "$(M $n)" -o "log=$dir/cfsd$n.log"; done
on 1 bash -c "mkdir '$(M 1)/own' '$(M 1)/pad' && for i in \$(seq $pad); do : >'$(M 1)/pad/'\$i; done && : >'$(M 1)/shared'"
on 3 mkdir "$(M 3)/own3"

rate() { churn_on "$1" "$(M "$1")/$2" 0 "$secs"; }
# during NODE DIR: NODE's rate while nodes 1 and 2 take turns at the shared file.
during() {
	on 2 timeout $((secs + 3)) python3 "$here/pingpong.py" "$(M 2)/shared" 1 100000000 >/dev/null &
	on 1 timeout $((secs + 3)) python3 "$here/pingpong.py" "$(M 1)/shared" 0 100000000 >/dev/null &
	sleep 1
	rate "$1" "$2"
	wait || true
	on 1 bash -c ": >'$(M 1)/shared'"
}
alone=$(rate 1 own)
busy=$(during 1 own)
other=$(during 3 own3)
on 2 python3 "$here/pingpong.py" "$(M 2)/shared" 1 1000 &
pp=$(on 1 python3 "$here/pingpong.py" "$(M 1)/shared" 0 1000)
wait
echo "node 1's create+stat+unlink in its own directory:"
echo "  alone: $alone/s; while it takes turns at the shared file with node 2: $busy/s ($(ratio "$busy" "$alone")x)"
echo "  node 3 meanwhile (the CPU shared, no lock): $other/s ($(ratio "$other" "$alone")x node 1 alone)"
echo "the ping-pong alone: $pp"
