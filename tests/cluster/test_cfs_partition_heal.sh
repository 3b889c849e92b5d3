#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Partitions that heal, both sides writing: node 3 is cut off while it and node 1 both write
# under fsync.  Round 1 heals while node 3's recovery is still pending (the fence agent the
# test holds keeps it so: a heal shorter than the fence interval, on any machine); round 2
# heals after the recovery.  Each time node 3 fences itself, never recovers anyone, and stays
# fenced after the heal until it is mounted again; every change either side's fsync
# acknowledged is there; fsck.cfs -n clean.
. "$(dirname "$0")/cfs_lib.sh" "cfs partitions that heal"
. "$HERE/stall_lib.sh"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
fence=$(held_fence)
for n in 1 2 3; do check "node $n mounts" mount_on $n "fence=$fence"; done
fenced_since() { tail -n +"$1" "$T/cfsd3.log" | grep -q "FENCED:"; }

# round ROUND EARLY: EARLY yes heals while the recovery is held pending.
round() {
	local r=$1 early=$2 slot before w1 w3
	slot=$(status_of 3 slot)
	before=$(log_lines 3)
	done_before=$(recoveries "$slot" 1 2)
	[ "$early" = yes ] && touch "$T/fence.hold"
	on 3 python3 "$HERE/fsync_log.py" run "$(M 3)/p3.$r" "$T/log3.$r" >/dev/null 2>&1 &
	w3=$!
	on 1 python3 "$HERE/fsync_log.py" run "$(M 1)/p1.$r" "$T/log1.$r" >/dev/null 2>&1 &
	w1=$!
	both() { grep -q done "$T/log3.$r" && grep -q done "$T/log1.$r"; }
	wait_until 120 both || not_ok "round $r: the writers did not start"
	C partition 3
	check_soon 120 "round $r: node 3 fenced itself (cut off)" fenced_since "$((before + 1))"
	if [ "$early" = yes ]; then
		check_soon 120 "round $r: node 1 sees node 3's recovery pending" recovering
		C heal
		C wait-quorum 3 yes 60 >/dev/null 2>&1
		ok "round $r: healed with node 3's recovery still pending"
		rm -f "$T/fence.hold"
	fi
	check_soon 120 "round $r: node 3's slot recovered by the others" more_recoveries "$slot" 1 2
	if [ "$early" != yes ]; then
		C heal
		C wait-quorum 3 yes 60 >/dev/null 2>&1
	fi
	kill "$w1" 2>/dev/null
	pkill -f "fsync_log.py run $(M 1)/p1.$r"
	wait "$w1" "$w3" 2>/dev/null
	check "round $r: node 1 sees everything node 3's fsync acknowledged" \
		on 1 python3 "$HERE/fsync_log.py" check "$(M 1)/p3.$r" "$T/log3.$r"
	check "round $r: node 2 sees everything node 1's fsync acknowledged" \
		on 2 python3 "$HERE/fsync_log.py" check "$(M 2)/p1.$r" "$T/log1.$r"
	if on 3 ls "$(M 3)" >/dev/null 2>&1; then not_ok "round $r: node 3's mount answers after the heal"
	else ok "round $r: node 3's mount still fails its calls after the heal"; fi
	tail -n +"$((before + 1))" "$T/cfsd3.log" | grep "recovery:" >"$T/own_recovery"
	check "round $r: node 3 logged no recovery" test ! -s "$T/own_recovery"
	check "round $r: node 3 unmounts" umount_on 3
	check "round $r: node 3 mounts again" mount_on 3 "fence=$fence"
	check "round $r: node 3 sees node 1's changes" \
		on 3 python3 "$HERE/fsync_log.py" check "$(M 3)/p1.$r" "$T/log1.$r"
	for n in 1 2 3; do check "round $r: node $n unmounts" umount_on $n; done
	fsck_clean "round $r"
	for n in 1 2 3; do mount_on $n "fence=$fence"; done
}
round 1 yes
round 2 no
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
no_damage_logged
finish
