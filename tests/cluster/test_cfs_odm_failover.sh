#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Failover of a database: an instance writing its datafile through libodm on node 2 dies with
# its node (the writer, cfsd and corosync killed -9 at once).  The same instance is started
# on node 1 on the same file and resumes; the time from the kill to its first completed write
# is printed (the seeds' PolyServe failover took 39 s; target 10 s with the harness's 1 s
# token).  Every write the dead instance had seen complete is there, read from both
# survivors.  FAILOVER_ROUNDS rounds, the instance moving node 2 -> 1 -> 3 -> 2 ...
. "$(dirname "$0")/cfs_lib.sh" "cfs ODM failover"
ODM=$(dirname "$BIN")/tests/odm
export ODM_TEST_DB="FO$$"
ROUNDS=${FAILOVER_ROUNDS:-2}
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
# The held fence agent: odd rounds hold the dead node's recovery until the new instance is
# seen waiting for it (on any machine, fast or slow); even rounds let it run, and time it.
for n in 1 2 3; do check "node $n mounts dboptimized" mount_on $n "dboptimized,fence=$(held_fence)"; done
# write NODE: the instance's writer on NODE, in the background ($writer), logging to
# $T/log$g; each start has a generation of its own (odm_crash's ROUND): later ones are newer.
g=0
write() {
	g=$((g + 1))
	on "$1" "$ODM/odm_crash" write "$(M "$1")" "$T/log$g" "$g" >"$T/writer$g.out" 2>&1 &
	writer=$!
}
stop_writer() { stop_job "$writer" "odm_crash write $(M "$1") "; } # NODE
# The node after n in the ring 2 -> 1 -> 3 -> 2.
next_of() { case $1 in 2) echo 1 ;; 1) echo 3 ;; *) echo 2 ;; esac; }

# writing: the current writer has seen writes complete.
writing() { [ -s "$T/log$g" ]; }
node=2
write $node
for r in $(seq 1 "$ROUNDS"); do
	to=$(next_of $node)
	pid=$(status_of $node pid)
	wait_until 120 writing && sleep 1 # a second more of writes in flight when the node dies
	writing && ok "round $r: the instance writes on node $node" ||
		not_ok "round $r: the instance on node $node: $(cat "$T/writer$g.out")"
	# The third node changes the metadata and looks at every file (inode glocks PR): the
	# dying node keeps only its maps and shared grants, so what the new instance waits for is
	# its map lock (cfsd/odm_cluster.c: a dead holder's writes).
	third=$((6 - node - to))
	on $third bash -c "touch '$(M $third)/moved$r' && find '$(M $third)' -exec stat {} + >/dev/null"
	held=$((r % 2))
	[ $held = 1 ] && touch "$T/fence.hold"
	t0=$(ms)
	C kill $node; kill -9 "$pid"; stop_writer $node; C abort $node
	write $to # at once: its identify waits for the recovery of the dead node's locks
	since="node $node died (token 1000 ms)"
	if [ $held = 1 ]; then
		check "round $r: node $to's new map of the file waits for node $node's recovery" \
			wait_until 120 grep -q "odm-map-.*a node that held it died" "$T/cfsd$to.log"
		rm -f "$T/fence.hold"
		t0=$(ms) since="node $node's held recovery was let go"
	fi
	if wait_until 120 writing; then
		ok "round $r: the instance resumed on node $to $(($(ms) - t0)) ms after $since"
	else
		not_ok "round $r: the instance did not resume on node $to within 120 s: $(cat "$T/writer$g.out")"
	fi
	sleep 1 # the new instance writes a while before it stops
	stop_writer $to # a block read while it is written could look torn
	cat "$T"/log[0-9]* >"$T/log"
	for n in 1 2 3; do
		[ $n = $node ] && continue
		check "round $r: node $n reads every write the instance saw complete, before and after the failover" \
			on $n "$ODM/odm_crash" check "$(M $n)" "$T/log"
	done
	check "round $r: node $node's corosync starts again" C start $node
	C wait-quorum $node yes 30 >/dev/null 2>&1
	check "round $r: node $node mounts again" mount_on $node "dboptimized,fence=$(held_fence)"
	node=$to
	write $node
done
stop_writer $node
for n in 1 2 3; do check "unmount node $n" umount_on $n; done
fsck_clean "after the failovers"
no_damage_logged
finish
