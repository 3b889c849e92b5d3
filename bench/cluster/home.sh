#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/home.sh: the work of a shared software home (issue 69), step by step, on the
# disk's own filesystem, libfuse's passthrough_ll over it, a one-node CFS mount and node 1 of
# a 3-node CFS cluster mount (normal mounts), each step after sync and a drop of the kernel's
# caches, the median of BENCH_ROUNDS rounds (default 3):
#   unpack    tar x of a tarball of BENCH_TREE_SRC (default /usr/include: some 8,000 files)
#   read      every file of it read back, cold: on the cluster by node 2, which did not write
#             it; on one node after the caches are dropped (and CFS remounted)
#   clone     git clone (no hard links) of a local repository of 500 commits
#   compile   gcc -O2 -c of the project's cvm/*.c, copied in
#   log       BENCH_LOG_MB (default 1024) MiB written in 1 MiB writes and fsync'd
#   gzip      gzip -1 of that log
#   remove    rm -rf of the unpacked tree
# Where the kernel has FUSE over io_uring, the fuse module's enable_uring is set for the run
# (and put back after; BENCH_URING=0: not): CFS mounts then take their requests through the
# rings, and the cluster's rounds are run a second time with -o nouring (/dev/fuse).  The
# cluster's rounds run once more with -o nowritebehind (each write to the LUNs before it
# returns; BENCH_WRITETHROUGH=0: not), and so do the one-node mount's.
# Printed: seconds per step and side; the ratios one node / passthrough_ll and cluster / one
# node; the control bg/disk: the disk's rounds run again while the cluster is mounted (idle)
# against the disk's alone, what the other simulated nodes take from this machine; and the
# lock messages node 2 sent per file of the read.
# BENCH_CLUSTER=0: the disk, passthrough_ll and the one-node mount only (no cluster at all).
# Usage: home.sh [BUILD]; env BENCH_DIR (default /var/tmp), BENCH_ROUNDS, BENCH_TREE_SRC,
# BENCH_LOG_MB, BENCH_URING, BENCH_WRITETHROUGH, BENCH_ALONE, BENCH_CLUSTER, CLUSTER_TOKEN.
build=${1:-build}
# The cluster's corosync token timeout: 3000 ms, corosync 3's default and what the admin guide
# advises (tests use 1000 to see dead nodes soon).  The members' lease beats come every
# quarter token, and each keeps the ring passing its token at once instead of holding it:
# some 450 times a second with a 1000 ms token, 230 with 3000 (5 with no member), which on
# this busy 2-core machine cost each corosync 0.8 s and 0.37 s of CPU in a cluster unpack of
# some 7 s.  CLUSTER_TOKEN overrides it.
export CLUSTER_TOKEN=${CLUSTER_TOKEN:-3000}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh" home ch
rounds=${BENCH_ROUNDS:-3}
tree_src=${BENCH_TREE_SRC:-/usr/include}
log_mb=${BENCH_LOG_MB:-1024}
steps=(unpack read clone compile log gzip remove)
pt_pid=
uring_param=/sys/module/fuse/parameters/enable_uring
uring_was=
cleanup_home() {
	mountpoint -q "$dir/pt" && umount -l "$dir/pt"
	mountpoint -q "$dir/local" && "$bin/cfs" umount "$dir/local"
	cleanup
	[ -z "$uring_was" ] || echo "$uring_was" >"$uring_param"
}
trap cleanup_home EXIT
with_cluster=${BENCH_CLUSTER:-1}
sides="disk pt local"
[ "$with_cluster" = 0 ] || sides="$sides cluster"
if [ "${BENCH_URING:-1}" != 0 ] && [ -w "$uring_param" ]; then
	uring_was=$(cat "$uring_param")
	echo Y >"$uring_param"
	[ "$with_cluster" = 0 ] || sides="$sides cluster-dev"
fi

# The inputs, on the disk: the tarball, a repository of 500 commits, the C files.
tar -C "$(dirname "$tree_src")" -cf "$dir/tree.tar" "$(basename "$tree_src")"
nfiles=$(tar -tf "$dir/tree.tar" | grep -vc '/$')
git init -q --bare "$dir/src.git"
python3 - <<'EOF' | git -C "$dir/src.git" fast-import --quiet
import sys
out = sys.stdout
for i in range(500):
    body = ''.join(f'line {j} of commit {i}\n' for j in range(i % 50 + 1))
    msg = f'commit {i}\n'
    out.write(f'commit refs/heads/main\ncommitter bench <bench@example> {1700000000 + i} +0000\n'
              f'data {len(msg)}\n{msg}')
    out.write(f'M 644 inline file{i % 40}.txt\ndata {len(body)}\n{body}\n')
EOF
git -C "$dir/src.git" symbolic-ref HEAD refs/heads/main

# libfuse's passthrough_ll, built from the source Debian ships in libfuse3-dev.
pt=$build/bench/passthrough_ll
if [ ! -x "$pt" ]; then
	mkdir -p "$build/bench"
	cc -O2 -I/usr/include/fuse3 -I/usr/share/doc/libfuse3-dev/examples -o "$pt" \
		/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c -lfuse3 -lpthread
fi
ulimit -n "$(ulimit -Hn)" # passthrough_ll holds an fd per inode it knows
mkdir -p "$dir/disk" "$dir/pt-src" "$dir/pt" "$dir/local"
"$pt" -o "source=$dir/pt-src,cache=auto" "$dir/pt"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# timed PREFIX COMMAND...: the seconds COMMAND took, measured where PREFIX runs it: entering a
# node's namespaces (cluster.sh exec) costs some 50 ms, which a step as short as the clone
# would otherwise count as the cluster's.
timed() {
	local run=$1
	shift
	$run python3 -c 'import subprocess, sys, time
t0 = time.monotonic()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(f"{time.monotonic() - t0:.3f}")' "$@"
}
host() { "$@"; }
# round SIDE WRITER READER DIR COLD [READ_DIR]: one round of the steps, WRITER and READER the
# prefixes that run a command where it writes and where it reads (host, on1, on2), DIR the
# side's directory as the writer sees it (READ_DIR as the reader does, if not the same), COLD
# what makes the read cold.  The seconds go to $dir/SIDE.STEP, a line a round; on the cluster
# the lock messages node 2 sent for the read, to $dir/messages.
round() {
	local side=$1 w=$2 r=$3 d=$4 cold=$5 rd=${6:-$4} m0
	drop
	echo "$(timed $w tar -C "$d" -xf "$dir/tree.tar")" >>"$dir/$side.unpack"
	$cold
	drop
	[ "$side" != cluster ] || m0=$(status_field 2 lock_messages)
	echo "$(timed $r sh -c "cd '$rd/$(basename "$tree_src")' && find . -type f -print0 | xargs -0 cat >/dev/null")" >>"$dir/$side.read"
	[ "$side" != cluster ] || echo $(($(status_field 2 lock_messages) - m0)) >>"$dir/messages"
	drop
	echo "$(timed $w git clone -q --no-hardlinks "$dir/src.git" "$d/clone")" >>"$dir/$side.clone"
	$w mkdir -p "$d/src"
	$w cp -r "$root/cvm" "$d/src/"
	drop
	echo "$(timed $w sh -c "cd '$d/src' && gcc -std=c17 -D_GNU_SOURCE -O2 -I. -I'$root' -c cvm/*.c")" >>"$dir/$side.compile"
	echo "$(timed $w dd if=/dev/zero of="$d/log" bs=1M count="$log_mb" conv=fsync status=none)" >>"$dir/$side.log"
	drop
	echo "$(timed $w sh -c "gzip -1 -c '$d/log' >'$d/log.gz'")" >>"$dir/$side.gzip"
	drop
	echo "$(timed $w rm -rf "$d/$(basename "$tree_src")")" >>"$dir/$side.remove"
	$w rm -rf "$d/clone" "$d/src" "$d/log" "$d/log.gz"
}
nothing() { :; }
local_opts="log=$dir/cfsd-local.log"
mount_local() { "$bin/cfs" mount home "$dir/local" -o "$local_opts"; }
remount_local() { "$bin/cfs" umount "$dir/local" && mount_local; }
transport() { # NODE: how its mount's requests come
	on "$1" "$bin/cfs" status --json "$(M "$1")" | python3 -c "import json,sys; print(json.load(sys.stdin)['fuse_transport'])"
}

echo "bench/cluster/home: $(nproc) cores; files in $dir on $(df --output=source "$dir" | tail -1); $nfiles files of $(du -sm "$dir/tree.tar" | cut -f1) MB; a $log_mb MiB log; $rounds rounds; fuse enable_uring $(cat "$uring_param" 2>/dev/null || echo absent)"
luns $(((log_mb * 3 + 2048) / 4))
# The cluster's three corosync daemons (real-time priority) run through every side's rounds:
# on a real cluster nodes 2 and 3 are other machines, here they share node 1's cores, and
# beside them a one-node mount's rm -rf took 1.25 s instead of 0.96 s.  BENCH_ALONE=1: the
# one-node sides without them.
[ "${BENCH_ALONE:-0}" = 1 ] || [ "$with_cluster" = 0 ] || "$cluster" up 3 >/dev/null
"$bin/cvm" create home "$dir"/lun{0,1,2,3} >/dev/null
"$bin/mkfs.cfs" home >/dev/null 2>&1
mount_local
echo "one-node mount: requests through $("$bin/cfs" status --json "$dir/local" | python3 -c "import json,sys; print(json.load(sys.stdin)['fuse_transport'])")"
for i in $(seq "$rounds"); do
	round disk host host "$dir/disk" nothing
	round pt host host "$dir/pt" nothing
	round local host host "$dir/local" remount_local
done
"$bin/cfs" umount "$dir/local"
if [ "${BENCH_WRITETHROUGH:-1}" != 0 ]; then
	sides="$sides local-wt"
	local_opts="$local_opts,nowritebehind"
	mount_local
	for _ in $(seq "$rounds"); do
		round local-wt host host "$dir/local" remount_local
	done
	"$bin/cfs" umount "$dir/local"
fi

[ "${BENCH_ALONE:-0}" != 1 ] || "$cluster" up 3 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 3 --force home >/dev/null 2>&1
on1() { on 1 "$@"; }
on2() { on 2 "$@"; }
cluster_rounds() { # SIDE [MOUNT_OPTIONS]
	local n
	for n in 1 2 3; do mkdir -p "$(M $n)"; on $n "$bin/cfs" mount home "$(M $n)" -o "log=$dir/cfsd$n.log${2:+,$2}"; done
	echo "$1: requests through $(transport 1)"
	for _ in $(seq "$rounds"); do
		round "$1" on1 on2 "$(M 1)" nothing "$(M 2)"
		# The control: the disk's rounds again beside the cluster's mounts, idle.  What
		# they lose is what three nodes' daemons (and corosyncs passing the token for
		# their beats) take from this one machine's two cores, which a real cluster's
		# node 1 shares with none of nodes 2 and 3.
		[ "$1" != cluster ] || round disk-bg host host "$dir/disk" nothing
	done
	for n in 1 2 3; do on $n "$bin/cfs" umount "$(M $n)"; done
}
if [ "$with_cluster" != 0 ]; then
	sides="$sides disk-bg"
	cluster_rounds cluster
	[[ $sides != *cluster-dev* ]] || cluster_rounds cluster-dev nouring
	if [ "${BENCH_WRITETHROUGH:-1}" != 0 ]; then
		sides="$sides cluster-wt"
		cluster_rounds cluster-wt nowritebehind
	fi
fi

# shellcheck disable=SC2086 # the sides, a word each
python3 - "$dir" "$nfiles" "${#steps[@]}" "${steps[@]}" $sides <<'EOF'
import statistics, sys
d, nfiles, nsteps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps, sides = sys.argv[4:4 + nsteps], sys.argv[4 + nsteps:]
med = {(s, st): statistics.median(float(x) for x in open(f'{d}/{s}.{st}')) for s in sides for st in steps}
names = {'disk': 'disk', 'pt': 'passthru', 'local': 'cfs 1', 'local-wt': 'cfs 1 wt', 'cluster': 'cfs 3',
         'disk-bg': 'disk+cl', 'cluster-dev': 'cfs 3 dev', 'cluster-wt': 'cfs 3 wt'}
ratios = [(h, s, base) for h, s, base in (('1/pt', 'local', 'pt'), ('1wt/pt', 'local-wt', 'pt'),
                                            ('3/1', 'cluster', 'local'),
                                            ('3dev/1', 'cluster-dev', 'local'),
                                            ('3wt/1', 'cluster-wt', 'local'),
                                            ('bg/disk', 'disk-bg', 'disk')) if s in sides]
print(f"{'step (median s)':<16}" + ''.join(f'{names[s]:>10}' for s in sides) +
      ''.join(f'{h:>8}' for h, _, _ in ratios))
for st in steps:
    v = {s: med[(s, st)] for s in sides}
    print(f'{st:<16}' + ''.join(f'{v[s]:10.2f}' for s in sides) +
          ''.join(f'{v[s] / v[base]:8.2f}' for _, s, base in ratios))
if 'cluster' not in sides:
    sys.exit(0)
msgs = [int(x) for x in open(f'{d}/messages')]
print(f'lock messages node 2 sent per file it read: {statistics.median(msgs) / nfiles:.3f} '
      f'(median of {msgs})')
EOF
