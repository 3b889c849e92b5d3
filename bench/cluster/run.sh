#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster: CFS mounted on 3 corosync nodes (tests/cluster/cluster.sh, all on this machine
# and the same LUN files) against CFS on one node, in one run.
#   1. lock messages per operation once warm: a read-only walk and read of a shared tree on 3
#      nodes at once, second pass (target 0); creates in each node's own directory, 3 nodes at
#      once (target <= 1)
#   2. create+stat+unlink of BENCH_FILES files: one node cluster=corosync vs cluster=local
#      (target >= 0.5x); 3 nodes each in its own directory together vs one node; 3 nodes in
#      one directory they share (a tenth of the files each) vs one node
#   3. untar of a BENCH_TREE-file tree on node 1, then read every file on node 2: time vs both
#      on one local mount; then lstat of every name of one directory of it by path, twice,
#      on node 2, and on node 3 remounted with namecache, vs on the local mount (names and
#      attributes the kernel keeps)
#   4. two nodes appending to one file in turns: hand-offs per second, p50 (target <= 1 ms);
#      node 1's creates in its own directory meanwhile vs alone
#   5. 4 KiB random direct writes (randio, QD 8) into one written file from 2 dboptimized
#      nodes at once vs from one of them alone: IOPS ratio and lock messages per write
#   6. uncontended flock lock+unlock pairs per second on one node (target >= 5000), and on 2
#      nodes at once on their own files, vs the kernel's flock on the one-node mount; the
#      same for fcntl record locks
#   7. 4 KiB overwrites, 4 KiB appends (each allocates a block) and chmods of each node's
#      own file, 2 nodes at once vs node 1 alone: rate ratio and lock messages per call
# Usage: run.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_FILES (default 5000: with a
# thousand, a second's work, the one-node ratio of row 2 read 0.47-0.57x, with 5000 0.73x),
# BENCH_TREE (default 50000), BENCH_TURNS (default 1000), CLUSTER_TRANSPORT
# (corosync's: knet, the default, or udpu, whose messages arrive sooner here: row 4).
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" cbench cb
nfiles=${BENCH_FILES:-5000}
ntree=${BENCH_TREE:-50000}
turns=${BENCH_TURNS:-1000}
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }
messages() { status_field "$1" lock_messages; } # node -> lock messages its mount sent
# statwalk DIR: lstat of every name under DIR by its whole path (as programs that open and stat
# by path do: each component is a name the kernel keeps or asks for), once to warm, then
# timed: names a second.
statwalk() { python3 - "$1" <<'EOF'
import os, sys, time
paths = [os.path.join(r, n) for r, ds, fs in os.walk(sys.argv[1]) for n in fs + ds]
for p in paths:
    os.lstat(p)
t = time.time()
for p in paths:
    os.lstat(p)
print(f"{len(paths) / (time.time() - t):.0f}")
EOF
}

echo "bench/cluster: $(nproc) cores; LUN files in $dir; $nfiles files churned, $ntree-file tree, $turns turns"
luns 1024
"$bin/cvm" create cb "$dir"/lun{0,1,2,3} >/dev/null
python3 "$here/../../tests/cluster/make_home.py" "$dir/tree" "$ntree" 1 >/dev/null

# ---- the baseline: one node, cluster=local ----
"$bin/mkfs.cfs" cb >/dev/null 2>&1
mkdir -p "$dir/local"
"$bin/cfs" mount cb "$dir/local" -o "log=$dir/local.log"
t0=$(now); churn "$dir/local/c" "$nfiles"; t1=$(now)
local_churn=$(secs "$t0" "$t1")
local_flock=$(python3 "$here/flockrate.py" "$dir/local/flock" 20000)
local_fcntl=$(python3 "$here/flockrate.py" "$dir/local/flock" 20000 fcntl)
t0=$(now); tar -C "$dir/tree" -cf - . | tar -C "$dir/local" -xf -; t1=$(now)
"$bin/cfs" umount "$dir/local"
"$bin/cfs" mount cb "$dir/local" -o "log=$dir/local.log" # cold caches, as another node's
t2=$(now); (cd "$dir/local" && find . -type f -print0 | xargs -0 cat >/dev/null); t3=$(now)
local_untar=$(secs "$t0" "$t1") local_read=$(secs "$t2" "$t3")
local_stats=$(statwalk "$dir/local/dir1")
"$bin/cfs" umount "$dir/local"

# ---- 3 nodes, cluster=corosync ----
"$cluster" up 3 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 4 --force cb >/dev/null 2>&1
for n in 1 2 3; do mkdir -p "$(M $n)"; on $n "$bin/cfs" mount cb "$(M $n)" -o "log=$dir/cfsd$n.log"; done

t0=$(now); churn_on 1 "$(M 1)/c" "$nfiles"; t1=$(now)
one_churn=$(secs "$t0" "$t1")
t0=$(now)
for n in 1 2 3; do churn_on $n "$(M $n)/own$n" "$nfiles" & done
wait
t1=$(now)
three_churn=$(secs "$t0" "$t1")
# The same in one directory all three share: its glock goes from node to node at each name.
nshared=$((nfiles / 10))
on 1 mkdir "$(M 1)/shared_dir"
t0=$(now)
for n in 1 2 3; do churn_on $n "$(M $n)/shared_dir" "$nshared" '' n$n & done
wait
t1=$(now)
shared_churn=$(secs "$t0" "$t1")

# Creates in each node's own directory, all at once: messages per create.
m0=$(( $(messages 1) + $(messages 2) + $(messages 3) ))
for n in 1 2 3; do on $n bash -c "mkdir -p '$(M $n)/mk$n' && cd '$(M $n)/mk$n' && for i in \$(seq 300); do : >f\$i; done" & done
wait
m1=$(( $(messages 1) + $(messages 2) + $(messages 3) ))
create_msgs=$(python3 -c "print(f'{($m1 - $m0) / 900:.2f}')")

t0=$(now); on 1 bash -c "tar -C '$dir/tree' -cf - . | tar -C '$(M 1)' -xf -"; t1=$(now)
t2=$(now); on 2 bash -c "cd '$(M 2)' && find . -path ./c -prune -o -type f -print0 | xargs -0 cat >/dev/null"; t3=$(now)
cl_untar=$(secs "$t0" "$t1") cl_read=$(secs "$t2" "$t3")
cl_stats=$(on 2 bash -c "$(declare -f statwalk); statwalk '$(M 2)/dir1'")
on 3 "$bin/cfs" umount "$(M 3)"
on 3 "$bin/cfs" mount cb "$(M 3)" -o "log=$dir/cfsd3.log,namecache"
nc_stats=$(on 3 bash -c "$(declare -f statwalk); statwalk '$(M 3)/dir1'")

# Read-only walk and read of the shared tree on 3 nodes: a first pass warms, the second counts.
walk() { for n in 1 2 3; do on $n bash -c "cd '$(M $n)' && find dir1 -type f -print0 | xargs -0 cat >/dev/null" & done; wait; }
walk
m0=$(( $(messages 1) + $(messages 2) + $(messages 3) ))
ops=$(on 1 bash -c "cd '$(M 1)' && find dir1 | wc -l")
walk
m1=$(( $(messages 1) + $(messages 2) + $(messages 3) ))
walk_msgs=$(python3 -c "print(f'{($m1 - $m0) / (3 * $ops):.3f}')")

flock1=$(on 1 python3 "$here/flockrate.py" "$(M 1)/flock1" 20000)
on 1 python3 "$here/flockrate.py" "$(M 1)/flock1" 20000 >"$dir/flock1" &
flock2=$(on 2 python3 "$here/flockrate.py" "$(M 2)/flock2" 20000)
wait
flock_both="$(cat "$dir/flock1") and $flock2"
fcntl1=$(on 1 python3 "$here/flockrate.py" "$(M 1)/fcntl1" 2000 fcntl)

on 1 bash -c ": >'$(M 1)/pp'"
m0=$(( $(messages 1) + $(messages 2) ))
on 2 python3 "$here/pingpong.py" "$(M 2)/pp" 1 "$turns" &
pp=$(on 1 python3 "$here/pingpong.py" "$(M 1)/pp" 0 "$turns")
wait
m1=$(( $(messages 1) + $(messages 2) ))
pp_msgs=$(python3 -c "print(f'{($m1 - $m0) / $turns:.1f}')")

# Node 1's own work while it takes turns at a file with node 2: creates, stats and unlinks in
# its own directory for 3 s, alone and during a ping-pong on a file node 1 made just before
# (among node 1's inodes; nothing else is shared).
churn_rate() { churn_on 1 "$(M 1)/own1" 0 3; }
busy_alone=$(churn_rate)
on 1 bash -c ": >'$(M 1)/pp2'"
on 2 timeout 6 python3 "$here/pingpong.py" "$(M 2)/pp2" 1 1000000 >/dev/null &
on 1 timeout 6 python3 "$here/pingpong.py" "$(M 1)/pp2" 0 1000000 >/dev/null &
sleep 1
busy_during=$(churn_rate)
wait || true

# Changes of one file each for 3 s: overwrites, appends (in the node's own group), chmods.
own_file_calls() { # node kind -> calls per second
	on "$1" python3 - "$(M "$1")/own-file$1" "$2" <<'PY'
import os, sys, time
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b'\0' * (1 << 20), 0)
n, t0, end = 0, time.time(), os.fstat(fd).st_size // 4096
while time.time() < t0 + 3:
    if kind == 'write':
        os.pwrite(fd, b'x' * 4096, (n % 256) * 4096)
    elif kind == 'append':
        os.pwrite(fd, b'a' * 4096, (end + n) * 4096)
    else:
        os.fchmod(fd, 0o600 | (n % 2) * 0o44)
    n += 1
print(int(n / (time.time() - t0)))
PY
}
own_file() { # kind -> rates alone and at once, lock messages a call
	own_file_calls 1 "$1" >/dev/null # warm: each node takes its own file's glock
	own_file_calls 2 "$1" >/dev/null
	local alone m0 m1 a b
	alone=$(own_file_calls 1 "$1")
	m0=$(( $(messages 1) + $(messages 2) ))
	own_file_calls 1 "$1" >"$dir/own1" & own_file_calls 2 "$1" >"$dir/own2"; wait
	m1=$(( $(messages 1) + $(messages 2) ))
	a=$(cat "$dir/own1") b=$(cat "$dir/own2")
	echo "$alone/s alone, $a/s and $b/s at once ($(ratio "$((a + b))" "$alone")x)," \
		"$(python3 -c "print(f'{($m1 - $m0) / (3 * ($a + $b)):.4f}')") messages a call"
}
own_writes=$(own_file write)
own_appends=$(own_file append)
own_chmods=$(own_file chmod)

# Shared direct writes: every node dboptimized (a normal mount stops them).
for n in 1 2 3; do on $n "$bin/cfs" umount "$(M $n)"; done
for n in 1 2; do on $n "$bin/cfs" mount cb "$(M $n)" -o "log=$dir/cfsd$n.log,dboptimized"; done
on 1 dd if=/dev/zero of="$(M 1)/datafile" bs=1M count=64 oflag=direct status=none
iops() { # node seconds -> write IOPS of randio on the datafile
	on "$1" "$bin/randio" -r 0 -q 8 -t "$2" -S 64M --quiet --json "$(M "$1")/datafile" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
}
iops 1 1 >/dev/null # warm: the locks this node keeps
alone=$(iops 1 5)
m0=$(( $(messages 1) + $(messages 2) ))
iops 1 5 >"$dir/iops1" & iops 2 5 >"$dir/iops2"; wait
m1=$(( $(messages 1) + $(messages 2) ))
both=$(python3 -c "print(f'{$(cat "$dir/iops1") + $(cat "$dir/iops2"):.1f}')")
dio_msgs=$(python3 -c "print(f'{($m1 - $m0) / ($both * 5):.4f}')")

echo
echo "lock messages per operation once warm (3 nodes):"
echo "  read-only walk + read of a shared tree ($ops names per node): $walk_msgs (target 0)"
echo "  creates, each node in its own directory, all at once:     $create_msgs (target <= 1)"
echo "create+stat+unlink of $nfiles files:"
echo "  one node, cluster=local:    ${local_churn} s"
echo "  one node, cluster=corosync: ${one_churn} s   rate vs local $(ratio "$local_churn" "$one_churn")x (target >= 0.5)"
echo "  3 nodes at once, own dirs:  ${three_churn} s for 3x the work: $(ratio "$(python3 -c "print(3 * $one_churn)")" "$three_churn")x one node's rate"
echo "  3 nodes at once, one dir:   ${shared_churn} s for 3 x $nshared files: $(ratio "$(python3 -c "print(3 * $nshared * $one_churn / $nfiles)")" "$shared_churn")x one node's rate"
echo "untar of $ntree files, then read every file:"
echo "  one local mount:            untar ${local_untar} s, read (remounted) ${local_read} s"
echo "  untar on node 1, read on 2: untar ${cl_untar} s, read ${cl_read} s   ($(ratio "$local_untar" "$cl_untar")x and $(ratio "$local_read" "$cl_read")x local speed)"
echo "lstat of every name of dir1 by its path, second pass (the kernel's caches):"
echo "  one local mount: $local_stats/s; after node 1's untar, node 2: $cl_stats/s ($(ratio "$cl_stats" "$local_stats")x),"
echo "  node 3 with namecache: $nc_stats/s ($(ratio "$nc_stats" "$local_stats")x)"
echo "two nodes appending in turns: $pp (target p50 <= 1 ms); lock messages per hand-off: $pp_msgs"
echo "  node 1's create+stat+unlink in its own directory meanwhile: $busy_during/s, alone $busy_alone/s ($(ratio "$busy_during" "$busy_alone")x)"
echo "each of 2 nodes changing its own file (node 1 alone, then both at once):"
echo "  4 KiB overwrites: $own_writes"
echo "  4 KiB appends:    $own_appends"
echo "  chmods:           $own_chmods"
echo "flock lock+unlock pairs per second, uncontended:"
echo "  one-node mount (the kernel's flock): $local_flock"
echo "  node 1 of the cluster:               $flock1 (target >= 5000)"
echo "  nodes 1 and 2 at once, own files:    $flock_both"
echo "fcntl record lock+unlock pairs per second, uncontended (the node owns the file: no messages):"
echo "  one-node mount (the kernel's):       $local_fcntl"
echo "  node 1 of the cluster:               $fcntl1 (target >= 5000)"
echo "4 KiB random direct writes into one file, dboptimized, QD 8:"
echo "  node 1 alone: $alone IOPS; nodes 1 and 2 at once: $both IOPS ($(ratio "$both" "$alone")x); lock messages per write $dio_msgs"
