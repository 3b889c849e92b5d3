#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/quota.sh: what quotas cost on a cluster.  One 3-node cluster, two volumes
# mounted on every node: one made without quotas, one with project,quota, where all the work
# is charged to one user, group and project at 95 % of their block limits.  The 5 % left is
# about what the work takes, so the work runs the ids up to their limits: the grants shrink
# to nothing on the way (quota_grant.c), the worst case for their cost.  The same work on each
# volume, on the three nodes at once, each node in a directory of its own: creates (create +
# 4 KiB write + close, for BENCH_SECONDS, default 5; at most 1,000 files per node; also on
# node 1 alone first) and 1 MiB writes with O_DIRECT into new space (BENCH_QUOTA_MB per node,
# default 16; the LUNs grow with it), then the same writes as another user, far from its
# limit.  Printed: the rates, their ratios quota/no-quota, the
# lock messages the nodes sent per 100 files and per MiB written; then the three append 64 KiB
# writes into the project until EDQUOT: how far under the limit the first refusal left the
# usage, and the lock messages per MiB meanwhile.  Issue 67's target is 0.97x.
# Usage: quota.sh [BUILD]; needs root.  Env: BENCH_DIR (default /var/tmp), BENCH_MOUNT_OPTS
# (more mount options for every mount, e.g. quota_fold=0).
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" cquota cq
secs=${BENCH_SECONDS:-5} mb=${BENCH_QUOTA_MB:-16}
# Room for the filler below (19 times the work) and the work, a fifth more for the maps.
lun_mib=$((12 * (48 + 3 * mb)))
lun_mib=$((lun_mib > 1536 ? lun_mib : 1536))
chmod 755 "$dir" # the work runs as user 1000

echo "bench/cluster/quota: $(nproc) cores; LUN files in $dir; 3 nodes, ${secs} s of creates, $mb MiB of writes per node"
for v in off on; do
	for i in 0 1; do dd if=/dev/zero of="$dir/$v.lun$i" bs=1M count="$lun_mib" oflag=direct status=none; done
	"$bin/cvm" create "q$v" "$dir/$v.lun0" "$dir/$v.lun1" >/dev/null
done
"$cluster" up 3 >/dev/null
"$bin/mkfs.cfs" -p corosync -J 4 --force qoff >/dev/null 2>&1
"$bin/mkfs.cfs" -p corosync -J 4 --force -O project,quota qon >/dev/null 2>&1
MV() { echo "$dir/$1$2"; } # volume (off, on), node: its mount point
for v in off on; do
	for n in 1 2 3; do
		mkdir -p "$(MV $v $n)"
		on $n "$bin/cfs" mount "q$v" "$(MV $v $n)" -o "log=$dir/cfsd$v$n.log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}"
	done
	on 1 bash -c "mkdir '$(MV $v 1)/w' && chown 1000:1000 '$(MV $v 1)/w'"
done
on 1 chattr +P -p 7 "$(MV on 1)/w"
# 95 % of each limit used before the work: files of the user's 19 times what the work takes
# (4,000 files of a data and an inode block, 3 x $mb MiB of writes, 16 MiB to append), the
# limit set from them.
# The same file on the volume without quotas, so that both have the same free space where.
# Each node holds a third of it, in its own share of the volume, as its own work would.
for v in off on; do
	for n in 1 2 3; do
		on $n setpriv --reuid 1000 --regid 1000 --clear-groups \
			fallocate -l $((19 * (32 + 3 * mb + 16) / 3))M "$(MV $v $n)/w/filler$n"
	done
done
used=$(on 1 "$bin/cfs" quota get "$(MV on 1)" -u 1000 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['used_bytes'])")
limit=$((used * 100 / 95))
for kind in -u -g -p; do
	id=1000
	[ "$kind" = -p ] && id=7
	on 1 "$bin/cfs" quota set "$(MV on 1)" "$kind" "$id" --blocks-hard "$limit" >/dev/null
done

# The work runs as user $quser (1000: the ids at 95 %) in directory $wdir of each volume.
quser=1000 wdir=w
as_user() { local n=$1; shift; on "$n" setpriv --reuid "$quser" --regid "$quser" --clear-groups "$@"; }
# creates VOLUME NODE: files a second made for $secs s in the node's own directory.
creates() {
	as_user "$2" /usr/bin/python3 - "$(MV "$1" "$2")/w/c$2" "$secs" <<'PY'
import os, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
os.makedirs(d, exist_ok=True)
i, t0 = 0, time.time()
while time.time() - t0 < secs and i < 1000: # at most 1,000: the room below is for that
    fd = os.open(f"{d}/{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"c" * 4096)
    os.close(fd)
    i += 1
print(int(i / (time.time() - t0)))
PY
}
# writes VOLUME NODE: MB/s of $mb MiB of 1 MiB O_DIRECT writes into a new file.
writes() {
	as_user "$2" dd if=/dev/zero of="$(MV "$1" "$2")/$wdir/d$2" bs=1M count="$mb" oflag=direct 2>&1 |
		awk '/copied/ { printf "%d\n", $(NF-1) * ($NF == "GB/s" ? 1000 : $NF == "kB/s" ? 0.001 : 1) }'
}
messages() { # VOLUME: lock messages the three nodes sent so far
	local n s=0
	for n in 1 2 3; do
		s=$((s + $(on $n "$bin/cfs" status --json "$(MV "$1" $n)" | python3 -c "import json,sys; print(json.load(sys.stdin)['lock_messages'])")))
	done
	echo $s
}
# at_once WORK VOLUME: WORK on the three nodes at once; the sum of their rates.
at_once() {
	local n sum=0
	for n in 1 2 3; do "$1" "$2" $n >"$dir/$1.$2.$n" & done
	wait
	for n in 1 2 3; do sum=$((sum + $(cat "$dir/$1.$2.$n"))); done
	echo $sum
}
declare -A rate msgs cmsgs fmsgs
for v in off on; do
	rate[alone$v]=$(creates $v 1)
	before=$(messages $v)
	rate[creates$v]=$(at_once creates $v)
	made=$(for n in 1 2 3; do on $n ls "$(MV $v $n)/w/c$n"; done | wc -l)
	cmsgs[$v]=$(( ($(messages $v) - before) * 100 / (made > 0 ? made : 1) ))
	before=$(messages $v)
	rate[writes$v]=$(at_once writes $v)
	msgs[$v]=$(( ($(messages $v) - before) / (3 * mb) ))
	# The same writes as user 1001, far from a limit of 20 times what they take.
	on 1 bash -c "mkdir '$(MV $v 1)/far' && chown 1001:1001 '$(MV $v 1)/far'"
	[ $v = on ] && on 1 "$bin/cfs" quota set "$(MV on 1)" -u 1001 --blocks-hard $((60 * mb))M >/dev/null
	before=$(messages $v)
	rate[far$v]=$(quser=1001 wdir=far at_once writes $v)
	fmsgs[$v]=$(( ($(messages $v) - before) / (3 * mb) ))
done
printf '%-44s %10s %10s %8s\n' "" "no quota" "quota 95%" "ratio"
printf '%-44s %10s %10s %8s\n' "node 1 alone: create + 4 KiB write + close" "${rate[aloneoff]}" "${rate[aloneon]}" "$(ratio "${rate[aloneon]}" "${rate[aloneoff]}")x"
echo "3 nodes at once:"
printf '%-44s %10s %10s %8s\n' "create + 4 KiB write + close (files/s)" "${rate[createsoff]}" "${rate[createson]}" "$(ratio "${rate[createson]}" "${rate[createsoff]}")x"
printf '%-44s %10s %10s\n' "lock messages per 100 files made" "${cmsgs[off]}" "${cmsgs[on]}"
printf '%-44s %10s %10s %8s\n' "1 MiB O_DIRECT writes, new space (MB/s)" "${rate[writesoff]}" "${rate[writeson]}" "$(ratio "${rate[writeson]}" "${rate[writesoff]}")x"
printf '%-44s %10s %10s\n' "lock messages per MiB written" "${msgs[off]}" "${msgs[on]}"
printf '%-44s %10s %10s %8s\n' "the same, another user far from its limit" "${rate[faroff]}" "${rate[faron]}" "$(ratio "${rate[faron]}" "${rate[faroff]}")x"
printf '%-44s %10s %10s\n' "lock messages per MiB written" "${fmsgs[off]}" "${fmsgs[on]}"
# How early a write is refused: the three nodes append 64 KiB writes into the project at once
# until EDQUOT; the distance of the usage from the limit then.
append_until_full() {
	as_user "$2" /usr/bin/python3 - "$(MV "$1" "$2")/w/a$2" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
done = 0
while True:
    try:
        done += os.write(fd, b"a" * (64 << 10))
    except OSError as e:
        if e.errno != errno.EDQUOT:
            raise
        break
print(done)
PY
}
before=$(messages on)
took=$(at_once append_until_full on)
per_mib=$(( ($(messages on) - before) / (took >> 20 > 0 ? took >> 20 : 1) ))
pused=$(on 1 "$bin/cfs" quota get "$(MV on 1)" -p 7 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['used_bytes'])")
echo "3 nodes appending to the project until EDQUOT: took $((took >> 20)) MiB, refused $(( (limit - pused) >> 10 )) KiB under the limit ($pused of $limit bytes), $per_mib lock messages per MiB"
for v in off on; do for n in 1 2 3; do on $n "$bin/cfs" umount "$(MV $v $n)"; done; done
