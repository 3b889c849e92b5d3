#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm restripe while CFS is mounted on three nodes (cfsd/restripe_cluster.c): a filesystem made
# on 2 LUNs, grown onto 2 more, restriped from node 1 while every node runs an ODM instance
# writing and reading back stamped blocks (odm_race stamp), a block verifier (O_DIRECT) and an
# odmload database, and node 3 reads files written before the grow.  Node 2 unmounts and
# mounts again in the middle (it joins the run); the run is paused with Ctrl-C on node 1 and
# finished from node 3.  Grown by 2 LUNs more, the first set's 4 are restriped to another
# width from node 2 (--luns).  Then every file as written, fsck.cfs -n clean.
. "$(dirname "$0")/cfs_lib.sh" "cfs restripe on a cluster"
ODM=$(dirname "$BIN")/tests/odm
export ODM_TEST_DB="RS$$"
VERIFIER=$HERE/../cfs/block_verifier.py
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
# Each node's /dev/shm is its own (cluster.sh): the gates and ODM segments go with the nodes.
truncate -s 64M "$T/lun0" "$T/lun1"
"$BIN/cvm" create data "$T/lun0" "$T/lun1" >/dev/null
"$BIN/mkfs.cfs" -p corosync -J 3 data >/dev/null
# Node 1's daemon runs its restripe: the test's gate (below) goes in its environment.
mkdir -p "$(M 1)"
check "node 1 mounts dboptimized" on 1 env CVM_RESTRIPE_HOLD="$T/hold" "$BIN/cfs" mount data "$(M 1)" \
	-o "log=$T/cfsd1.log,dboptimized"
for n in 2 3; do check "node $n mounts dboptimized" mount_on $n dboptimized; done
check "node 1 writes two files before the grow" on 1 bash -c \
	"head -c 16M /dev/urandom >'$(M 1)/before1' && head -c 16M /dev/urandom >'$(M 1)/before2'"
on 1 bash -c "cd '$(M 1)' && sha256sum before1 before2" >"$T/sums"
truncate -s 64M "$T/lun2" "$T/lun3"
check "cvm grow by 2 LUNs while three nodes have it mounted" "$BIN/cvm" grow data "$T/lun2" "$T/lun3"
check "cfs grow on node 1" on 1 "$BIN/cfs" grow "$(M 1)"
for n in 1 2 3; do
	check "node $n: an ODM file of 8 MiB" on $n "$ODM/odm_race" create "$(M $n)/s$n.dbf" 8
done

# The users, until $T/stop (node N's own: $T/stopN): on every node a stamping ODM instance and a block verifier, and an
# odmload database on nodes 1 and 3; node 3 also reads the files from before, over and over.
# They run as long as the restripe does, however long that is on this machine (ON_LIMIT=0);
# what bounds them is their stop (stopped, cfs_lib.sh).
start_users() { # node round
	local n=$1 r=${2:-1}
	ON_LIMIT=0 on $n "$ODM/odm_race" stamp "$(M $n)/s$n.dbf" "$T/stop$n" >"$T/stamp$n.out" 2>&1 &
	eval "stamp$n=\$!"
	ON_LIMIT=0 on $n python3 "$VERIFIER" "$(M $n)/v$n.$r" 4 "$T/stop$n" $n direct >"$T/verifier$n.out" 2>&1 &
	eval "verifier$n=\$!"
}
for n in 1 2 3; do start_users $n; done
for n in 1 3; do
	on $n mkdir -p "$(M $n)/db$n"
	ON_LIMIT=0 on $n env LD_LIBRARY_PATH="$BIN/../lib" "$BIN/odmload" --dir "$(M $n)/db$n" --db "rs$$n" \
		--instance "rs$n" --files 2 --file-mib 4 --until "$T/stop" \
		--lib "$BIN/../lib/libodm.so" >"$T/odmload$n.out" 2>&1 &
	eval "odmload$n=\$!"
done
ON_LIMIT=0 on 3 bash -c "until [ -e '$T/stop' ]; do cd '$(M 3)' && sha256sum before1 before2 | cmp -s - '$T/sums' || exit 1; done" \
	>"$T/reader.out" 2>&1 &
reader=$!
for n in 1 2 3; do check_soon 120 "node $n's ODM instance stamps its file" grep -q writing "$T/stamp$n.out"; done

under_way() { "$BIN/cvm" show data | grep -q '% done'; }
moved_past() { [ "$(restripe_json moves_done)" -ge "$1" ]; }
# The run waits before a batch while $T/hold says that many moves are done (CVM_RESTRIPE_HOLD
# of the daemon that runs it, cvm/restripe.c): here after its first, so that it is still under
# way for the checks below however fast the machine moves the data and however slowly it
# remounts node 2.
echo 1 >"$T/hold"
ON_LIMIT=0 on 1 "$BIN/cvm" --scan "$T" restripe data --rate 2 \
	>"$T/restripe1.out" 2>&1 &
job=$!
check_soon 120 "node 1's restripe of the volume mounted on three nodes is under way" under_way
expect 1 "is being restriped by node" "a second restripe from node 2 is refused, naming the node" -- \
	on 2 "$BIN/cvm" restripe data
expect 1 "being restriped" "cfs grow on node 3 meanwhile is refused" -- on 3 "$BIN/cfs" grow "$(M 3)"
check "node 2 logged that it follows node 1's restripe" grep -q "following the restripe run by node" "$T/cfsd2.log"

# Node 2 leaves and comes back in the middle: its mount joins the run before it reads.
touch "$T/stop2"
stopped "node 2's users" "$stamp2" "$verifier2"
wait "$stamp2"
s=$?
wait "$verifier2" && [ $s -eq 0 ] && grep -q "every read as written" "$T/verifier2.out" &&
	ok "node 2's ODM instance and block verifier read every block as written before its unmount" ||
	not_ok "node 2's users before its unmount: $(tail -n 2 "$T/stamp2.out" "$T/verifier2.out")"
rm "$T/stop2"
check "node 2 unmounts during the restripe" umount_on 2
check "node 2 mounts again during the restripe" mount_on 2 dboptimized
check "node 2's mount joined the run" test "$(grep -c 'following the restripe run by node' "$T/cfsd2.log")" -ge 2
start_users 2 2
check_soon 120 "node 2's new ODM instance stamps its file" grep -q writing "$T/stamp2.out"
check "the restripe is still under way" under_way
# One batch more with node 2's new mount following it, then held again.
at=$(($(restripe_json moves_done) + 1))
echo "$at" >"$T/hold"
check_soon 120 "node 1's restripe moved on with node 2 following it (past move $at of $(restripe_json moves_total))" \
	moved_past "$at"

pkill -INT -f "^$BIN/cvm --scan $T restripe data"
stopped "node 1's restripe" "$job"
wait $job
code=$?
[ $code -eq 3 ] && ok "Ctrl-C on node 1 pauses the restripe (exit 3)" ||
	not_ok "Ctrl-C: exit $code, $(cat "$T/restripe1.out")"
rm "$T/hold"
check "node 3 logged that it no longer follows it" grep -q "no longer following a restripe" "$T/cfsd3.log"
expect 0 "restriped: one stripe set of width 256.0 KiB over 4 LUNs" \
	"node 3 finishes the paused restripe, all three nodes still mounted" -- restripe_on 3

# Grown again; then only the first set's LUNs (all the data) to 128 KiB stripes, from node 2
# (a third fewer batches than 64 KiB: about 500, each a few lock messages per node).
truncate -s 64M "$T/lun4" "$T/lun5"
check "cvm grow by 2 more LUNs" "$BIN/cvm" grow data "$T/lun4" "$T/lun5"
check "cfs grow on node 3" on 3 "$BIN/cfs" grow "$(M 3)"
expect 0 "restriped: 2 stripe sets: width 128.0 KiB over 4 LUNs, width 256.0 KiB over 2 LUNs" \
	"node 2 restripes the first set's LUNs (--luns) while three nodes use the volume" -- \
	restripe_on 2 --luns "$T/lun0,$T/lun1,$T/lun2,$T/lun3" -w 128k
check "node 1 followed node 2's restripe" grep -q "following the restripe run by node 2" "$T/cfsd1.log"

touch "$T/stop" "$T/stop1" "$T/stop2" "$T/stop3"
stopped "the users" "$stamp1" "$stamp2" "$stamp3" "$verifier1" "$verifier2" "$verifier3" "$odmload1" "$odmload3" "$reader"
for n in 1 2 3; do
	p=stamp$n
	wait "${!p}" && ok "node $n's ODM instance: $(tail -1 "$T/stamp$n.out")" ||
		not_ok "node $n's ODM instance: $(tail -3 "$T/stamp$n.out")"
	p=verifier$n
	wait "${!p}" && grep -q "every read as written" "$T/verifier$n.out" &&
		ok "node $n's block verifier read every block as written" ||
		not_ok "node $n's block verifier: $(tail -3 "$T/verifier$n.out")"
done
for n in 1 3; do
	p=odmload$n
	wait "${!p}" && ok "node $n's odmload ran through without an error" ||
		not_ok "node $n's odmload: $(tail -3 "$T/odmload$n.out")"
done
wait $reader && ok "node 3 read the files from before as written all along" || not_ok "node 3's reader: $(cat "$T/reader.out")"
for n in 1 2 3; do
	check "node $n reads the files from before as written" on $n bash -c "cd '$(M $n)' && sha256sum before1 before2 | cmp -s - '$T/sums'"
done
no_damage_logged
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after the restripe on a cluster"
check "the 4 LUNs in one set of 128 KiB stripes, then the 2 added" bash -c "'$BIN/cvm' show data --json | python3 -c 'import json,sys; v=json.load(sys.stdin)[\"volumes\"][0]; assert v[\"restripe\"] is None and [(len(s[\"luns\"]), s[\"stripe_width\"]) for s in v[\"stripe_sets\"]]==[(4, 131072), (2, 262144)], v'"
check "node 2 mounts after it" mount_on 2
check "node 2 reads the files from before as written" on 2 bash -c "cd '$(M 2)' && sha256sum before1 before2 | cmp -s - '$T/sums'"
check "node 2 unmounts" umount_on 2
finish
