#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A rolling upgrade (docs/upgrading.md): a 3-node cluster of the previous release
# (tests/upgrade/previous-release, built by tests/upgrade/build.sh) upgraded to this one node
# by node, while the nodes not being upgraded keep writing and a libodm database of the
# previous release runs on one of them: no error on any of them, every file written by an old
# or a new node read back whole on old and new nodes alike, the coherence checks on the mixed
# cluster, then one node back to the previous release (the filesystem it made has no feature
# the previous release does not know), and fsck.cfs of both releases clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "rolling upgrade from the previous release"
PREV=$BIN/../compat/previous/build/bin
[ -x "$PREV/cfsd" ] || { not_ok "no build of the previous release in $PREV: run make check-build"; finish; }
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
for i in 0 1 2 3; do truncate -s 200M "$T/lun$i"; done
"$PREV/cvm" create data "$T"/lun0 "$T"/lun1 "$T"/lun2 "$T"/lun3 >/dev/null
"$PREV/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
BIN_1=$PREV BIN_2=$PREV BIN_3=$PREV
# dboptimized everywhere: libodm on a cluster needs every node's mount so.
for n in 1 2 3; do check "node $n mounts (previous release)" mount_on $n dboptimized; done
WRITER=$HERE/upgrade_writer.py
lists=()
check "a known tree written by node 1 (previous release)" \
	on 1 python3 "$WRITER" write "$(M 1)/tree" "$T/list.tree" "$T/never" 40
lists+=("$T/list.tree")

# start_writer NODE PHASE: files written on NODE until stop_writer; listed in $T/list.N.PHASE.
declare -A wpid
start_writer() {
	rm -f "$T/stop.$1"
	# (Not through on, whose limit is for one command's hang: a writer runs for minutes.)
	timeout 1800 "$HERE/cluster.sh" exec "$1" python3 "$WRITER" write "$(M "$1")/w$1-$2" \
		"$T/list.$1.$2" "$T/stop.$1" >"$T/writer.$1.out" 2>&1 &
	wpid[$1]=$!
	lists+=("$T/list.$1.$2")
}
stop_writer() {
	touch "$T/stop.$1"
	if wait "${wpid[$1]}"; then ok "node $1's writer ran without an error: $(cat "$T/writer.$1.out")"
	else not_ok "node $1's writer: $(head -c 400 "$T/writer.$1.out")"; fi
}
written() { cat "$T/list.$1.$2" 2>/dev/null | wc -l; }
has_written() { [ "$(written "$1" "$2")" -ge "$3" ]; } # NODE PHASE N
grew() { # NODE PHASE N: its writer has written N more files than when asked
	local from
	from=$(written "$1" "$2")
	wait_until 120 has_written "$1" "$2" $((from + $3))
}
verify_on() { on "$1" python3 "$WRITER" verify "$(M "$1")" "${lists[@]}"; }

for n in 1 2 3; do start_writer $n old; done
on 2 mkdir -p "$(M 2)/odm"
LIB_PREV=$PREV/../lib/libodm.so
timeout 1800 "$HERE/cluster.sh" exec 2 "$PREV/odmload" --lib "$LIB_PREV" --dir "$(M 2)/odm" --db UPG --instance UPG1 --procs 3 \
	--files 2 --file-mib 4 --redo-mib 2 --think-ms 20 --until "$T/odm.stop" --seed 7 >"$T/odm.out" 2>&1 &
odm_pid=$!
for n in 1 2 3; do check "node $n writes (previous release)" grew $n old 10; done

upgrade() { # NODE: its writer stops, it goes to this release, its writer starts again
	local n=$1 o
	stop_writer "$n"
	check "node $n unmounts (previous release)" umount_on "$n"
	eval "BIN_$n=\$BIN"
	check "node $n mounts this release beside nodes of the previous one" mount_on "$n" dboptimized
	cp "$T/check.out" "$T/mount.$n.out" # what it said while it joined
	start_writer "$n" "new$n"
	for o in 1 2 3; do
		if [ "$o" = "$n" ]; then check "node $n writes (this release)" grew "$n" "new$n" 10
		else check "node $o wrote on while node $n was upgraded" grew "$o" "${phase[$o]}" 5; fi
	done
	phase[$n]=new$n
}
declare -A phase=([1]=old [2]=old [3]=old)
upgrade 1
check "node 1 (this release) reads every file old and new nodes wrote" verify_on 1
check "node 2 (previous release) reads every file old and new nodes wrote" verify_on 2
check "node 1 logged that the node that let it in speaks lock protocol 1.0 and works with it" \
	grep -q "node [23] (pid [0-9]*) speaks lock protocol 1.0 (release 0.1), this node 1.1: they work together" "$T/mount.1.out"
# The coherence checks of test_cfs.sh on the mixed cluster (node 1 new, nodes 2 and 3 old).
on 1 mkdir -p "$(M 1)/coh"
coherent() {
	local n pids=() bad=0
	for n in 1 2 3; do
		timeout 900 "$HERE/cluster.sh" exec "$n" python3 "$HERE/coherence.py" "$(M "$n")/coh" "$n" 3 150 >"$T/coh.$n" 2>&1 &
		pids+=($!)
	done
	for n in 1 2 3; do wait "${pids[n - 1]}" || { bad=1; echo "node $n: $(cat "$T/coh.$n")"; }; done
	return $bad
}
check "coherence on the mixed cluster: no stale or torn read between old and new nodes" coherent
# The database on node 2 stops before node 2 is upgraded, as its DBA would stop it.
touch "$T/odm.stop"
if wait "$odm_pid"; then ok "the previous release's libodm database on node 2 ran through node 1's upgrade"
else not_ok "odmload (previous release) on node 2: $(grep -v " 0 failed" "$T/odm.out" | head -5 | tr '\n' ' ')"; fi
upgrade 2
upgrade 3
for n in 1 2 3; do check "node $n (this release) reads every file" verify_on $n; done

# And back: node 3 to the previous release, which the filesystem it made still suits.
stop_writer 3
check "node 3 unmounts (this release)" umount_on 3
BIN_3=$PREV
check "node 3 mounts the previous release again beside this one's" mount_on 3 dboptimized
start_writer 3 back
check "node 3 writes (previous release again)" grew 3 back 10
check "node 3 (previous release) reads every file" verify_on 3
for n in 1 2 3; do stop_writer $n; done
check "node 1 (this release) reads every file at the end" verify_on 1
for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the rolling upgrade (this release's fsck)"
check "the previous release's fsck.cfs finds it clean too" "$PREV/fsck.cfs" -n data
check "cfs show: format 2, no features (made by the previous release)" \
	bash -c "'$BIN/cfs' show data | grep -q 'format 2, features: none'"
finish
