#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A node that stalls and comes back never writes again (the membership lease, cfslock.h).
# Rounds on a 3-node cluster, each a freeze (SIGSTOP) long enough for the others to
# remove the frozen node and recover it, and a thaw after the survivors changed what it had:
#   1. node 2's corosync, cfsd and writer together (a VM pause): the others see it leave;
#   2. node 3's cfsd and writer, its corosync running (a hung daemon): the others evict it
#      when its beats stop;
#   3. node 2's corosync alone: its cfsd, still running, stops writing when its lease runs
#      out and is evicted when it sees the membership change;
#   4. the same as 3 on dboptimized mounts with a libodm process on node 2 writing all over a
#      datafile: its writes wait for the lease (a page cfsd shares) and fail once its node is
#      evicted; the datafile as the survivors rewrote it stays so;
#   5. a libodm process alone, holding its map while node 1 shrinks the file and reuses
#      the space: the shrink waits for it, and none of its writes lands in that space;
#   6. node 2's cfsd again, with only nodes 1 and 2 mounted (nothing confirms node 1's lease
#      meanwhile: it evicts node 2 all the same).
# Every freeze lasts until the survivors logged the recovery (no timer raced): then they
# remove what the frozen node made, write a manifest and fsync it; after the thaw the frozen
# node fences itself (FENCED in its log, `cfs status` says evicted), never logs a recovery
# of its own, the manifest reads back exactly on every node (also on the frozen node once it
# is mounted again), and fsck.cfs -n is clean after each round.
. "$(dirname "$0")/cfs_lib.sh" "cfs stall"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done
interval=$(status_of 1 fence_interval_ms)
lease=$(status_of 1 lease_ms)
evict=$(status_of 1 evict_ms)
ok "fence interval $interval ms, lease $lease ms, eviction after $evict ms of silence"
check "the lease is shorter than the fence interval" test "$lease" -lt "$interval"

. "$HERE/stall_lib.sh"

# round ROUND NODE KIND: the freeze of NODE (KIND: all, cfsd, corosync), the checks after it.
round() {
	local r=$1 n=$2 kind=$3 slot cfsd coro before others
	others=$(for o in $nodes; do [ "$o" != "$n" ] && echo "$o"; done)
	slot=$(status_of "$n" slot)
	cfsd=$(status_of "$n" pid)
	coro=$(C pid "$n")
	on "$n" python3 "$HERE/fsync_log.py" run "$(M "$n")/d$r" "$T/log$r" >/dev/null 2>&1 &
	wait_until 120 grep -q done "$T/log$r" || not_ok "round $r: node $n's writer did not start"
	before=$(log_lines "$n")
	# shellcheck disable=SC2086
	done_before=$(recoveries "$slot" $others)
	case $kind in
	all) freeze "$coro" "$cfsd" $(pgrep -f "fsync_log.py run $(M "$n")/d$r") ;;
	cfsd) freeze "$cfsd" $(pgrep -f "fsync_log.py run $(M "$n")/d$r") ;;
	corosync) freeze "$coro" ;;
	esac
	local t0 first=${others%%$'\n'*}
	t0=$(ms)
	# A call that needs what the frozen node holds (its directory) waits for its recovery.
	check "round $r: node $first lists node $n's directory" on "$first" timeout 120 ls -l "$(M "$first")/d$r"
	ok "round $r: node $first's call on node $n's directory completed $(($(ms) - t0)) ms after the freeze ($kind)"
	# shellcheck disable=SC2086
	if wait_until 180 more_recoveries "$slot" $others; then
		ok "round $r ($kind frozen on node $n): the others recovered its slot $slot"
	else
		not_ok "round $r: node $n's slot $slot not recovered within 180 s"
	fi
	check "round $r: node $first sees everything node $n's fsync acknowledged" \
		on "$first" python3 "$HERE/fsync_log.py" check "$(M "$first")/d$r" "$T/log$r"
	check "round $r: node $first writes the manifest" manifest "$r" "$first"
	thaw
	check_soon 60 "round $r: node $n fenced itself after the thaw" grep -q "FENCED:" "$T/cfsd$n.log"
	check_soon 60 "round $r: cfs status on node $n says it was evicted" evicted_on "$n"
	if on "$n" ls "$(M "$n")" >/dev/null 2>&1; then not_ok "round $r: node $n's calls still work"
	else ok "round $r: node $n's calls fail"; fi
	tail -n +"$((before + 1))" "$T/cfsd$n.log" | grep "recovery:" >"$T/own_recovery"
	check "round $r: node $n logged no recovery after the freeze" test ! -s "$T/own_recovery"
	for o in $others; do check "round $r: the manifest reads back on node $o" reads_back "$r" "$o"; done
	# Its daemon goes with the mount, also a lazy unmount's (round 2).
	if [ "$kind" = cfsd ]; then check "round $r: node $n unmounts lazily" on "$n" umount -l "$(M "$n")"
	else check "round $r: node $n unmounts" umount_on "$n"; fi
	check_soon 60 "round $r: node $n's fenced cfsd exited" gone "$cfsd"
	C wait-quorum "$n" yes 60 >/dev/null 2>&1
	check "round $r: node $n mounts again" mount_on "$n"
	check "round $r: the manifest reads back on node $n" reads_back "$r" "$n"
	for o in $nodes; do check "round $r: node $o unmounts" umount_on "$o"; done
	fsck_clean "round $r"
	for o in $nodes; do check "round $r: node $o mounts again" mount_on "$o"; done
}

nodes="1 2 3" # mounted
round 1 2 all
round 2 3 cfsd
round 3 2 corosync

# Round 4: libodm.  Its process keeps its map and writes to the LUNs itself while node 2's
# corosync stands still; without the lease it would write all through the freeze and after.
ODM=$(dirname "$BIN")/tests/odm
export ODM_TEST_DB="ST$$"
for n in 1 2 3; do umount_on $n; check "round 4: node $n mounts dboptimized" mount_on $n dboptimized; done
check "round 4: node 2 creates a datafile through libodm" on 2 "$ODM/odm_race" create "$(M 2)/w.dbf" 8
on 2 "$ODM/odm_race" writer "$(M 2)/w.dbf" >"$T/writer.out" 2>&1 &
writer=$!
wait_until 120 grep -q writing "$T/writer.out" ||
	{ not_ok "round 4: the libodm writer did not start: $(cat "$T/writer.out")"; finish; }
slot=$(status_of 2 slot)
done_before=$(recoveries "$slot" 1 3)
freeze "$(C pid 2)"
if wait_until 180 more_recoveries "$slot" 1 3; then ok "round 4: the others recovered node 2"
else not_ok "round 4: node 2 not recovered within 180 s"; fi
# Node 1 rewrites the datafile whole (direct, as every I/O of a dboptimized mount).
check "round 4: node 1 rewrites the datafile" on 1 dd if=/dev/zero of="$(M 1)/w.dbf" bs=1M count=8 \
	conv=notrunc,fsync oflag=direct status=none
dbf_sum() { on "$1" sh -c "sha256sum <'$(M "$1")/w.dbf'"; }
dbf_as_rewritten() { dbf_sum "$1" | cmp - "$T/dbf.sum"; }
dbf_sum 1 >"$T/dbf.sum"
thaw
check_soon 60 "round 4: node 2 fenced itself after the thaw" grep -q "FENCED:" "$T/cfsd2.log"
check_soon 60 "round 4: node 2's libodm writer stopped, its writes failing" gone "$writer"
check "round 4: the datafile is as node 1 rewrote it, on node 1" dbf_as_rewritten 1
check "round 4: and on node 3" dbf_as_rewritten 3
for n in 1 2 3; do check "round 4: node $n unmounts" umount_on $n; done
fsck_clean "round 4"

# Round 5: a libodm process frozen alone, with its map, while node 1 shrinks the file and
# reuses the space: the shrink waits for the frozen process (cfs locks shows node 2 holding
# the file's ODM maps, node 2's log names the process); thawed, it lets go, and none of its
# writes reaches the freed space (odm_race shrink reads it back).
for n in 1 2 3; do mount_on $n dboptimized; done
check "round 5: node 2 creates a datafile" on 2 "$ODM/odm_race" create "$(M 2)/f.dbf" 16
on 2 "$ODM/odm_race" writer "$(M 2)/f.dbf" >"$T/writer6.out" 2>&1 &
writer=$!
wait_until 120 grep -q writing "$T/writer6.out" ||
	{ not_ok "round 5: the libodm writer did not start: $(cat "$T/writer6.out")"; finish; }
freeze $(pgrep -f "odm_race writer $(M 2)/f.dbf")
on 1 mkdir "$(M 1)/reuse"
on 1 "$ODM/odm_race" shrink "$(M 1)/f.dbf" "$(M 1)/reuse" 1 >"$T/shrink.out" 2>&1 &
shrink=$!
node2=$(status_of 2 node_id)
maps_held_by_node2() {
	on 1 "$BIN/cfs" locks --json "$(M 1)" | python3 -c "
import json, sys
locks = json.load(sys.stdin)['locks']
assert any(l['object'].startswith('ODM maps') and l['node_id'] == $node2 and
           l['state'] == 'granted' for l in locks), locks
assert any(l['object'].startswith('ODM maps') and l['state'] != 'granted' for l in locks), locks"
}
check_soon 120 "round 5: cfs locks shows node 2 holding the file's ODM maps and the shrink waiting" maps_held_by_node2
check_soon 120 "round 5: node 2's log names the frozen process" grep -q "did not release inode" "$T/cfsd2.log"
check "round 5: the shrink still waits for it" kill -0 "$shrink"
thaw
check_soon 120 "round 5: the shrink completes once the process is thawed" gone "$shrink"
check "round 5: no write of the thawed process reached the freed space" wait "$shrink"
stop_job "$writer" "odm_race writer $(M 2)/f.dbf"
for n in 1 2 3; do check "round 5: node $n unmounts" umount_on $n; done
fsck_clean "round 5"
# Round 6: node 2's cfsd frozen while only nodes 1 and 2 mount: nothing of another node
# confirms node 1's beats, so its lease runs out; it must evict node 2 all the same.
nodes="1 2"
for n in $nodes; do mount_on $n; done
round 6 2 cfsd
for n in $nodes; do check "node $n unmounts" umount_on $n; done
no_damage_logged
finish
