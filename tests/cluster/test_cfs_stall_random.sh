#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Stalls at random moments of a mixed workload: STALL_ROUNDS rounds (default 20; STALL_SEED
# repeats a run), each freezing node 2 or 3 (SIGSTOP) while it creates, renames and removes
# files under fsync and rewrites a file with direct I/O: its corosync, cfsd and workload
# together, its cfsd and workload, or its corosync alone, after a random part of a second.
# The second half of the rounds runs on dboptimized mounts: the direct rewrites go to the
# LUNs from cfsd's libaio completion path (/dev/fuse; cluster mounts do not use io_uring).
# The freeze lasts until the survivors logged the node's slot recovered.  Then node 1 finds
# every change the frozen node's fsync acknowledged, empties its directory and writes a
# manifest; after the thaw the frozen node fences itself, logs no recovery, its daemon exits
# at the unmount, it mounts again, and the manifest reads back on every node.  fsck.cfs -n
# clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs stall at random moments"
. "$HERE/stall_lib.sh"
rounds=${STALL_ROUNDS:-20}
seed=${STALL_SEED:-$RANDOM}
RANDOM=$seed
ok "seed $seed (STALL_SEED=$seed repeats this run)"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 256
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done
fenced_count() { grep -c "FENCED:" "$T/cfsd$1.log"; }
more_fenced() { [ "$(fenced_count "$1")" -gt "$2" ]; }

kinds=(all cfsd corosync)
opts=
for r in $(seq "$rounds"); do
	if [ "$r" -eq $((rounds / 2 + 1)) ]; then
		opts=dboptimized
		for n in 1 2 3; do umount_on $n; check "round $r: node $n mounts dboptimized" mount_on $n $opts; done
	fi
	n=$((2 + RANDOM % 2))
	kind=${kinds[RANDOM % 3]}
	delay=0.$((RANDOM % 10))
	other=$((5 - n))
	slot=$(status_of "$n" slot)
	cfsd=$(status_of "$n" pid)
	coro=$(C pid "$n")
	on "$n" python3 "$HERE/fsync_log.py" run "$(M "$n")/d$r" "$T/log$r" >/dev/null 2>&1 &
	w1=$!
	on "$n" sh -c "while dd if=/dev/urandom of='$(M "$n")/b$r' bs=64k count=16 conv=notrunc \
		oflag=direct status=none; do :; done" >/dev/null 2>&1 &
	w2=$!
	wait_until 120 grep -q done "$T/log$r" || { not_ok "round $r: node $n's workload did not start"; break; }
	sleep "$delay"
	before=$(log_lines "$n")
	fenced_before=$(fenced_count "$n")
	done_before=$(recoveries "$slot" 1 "$other")
	work=$(pgrep -f "fsync_log.py run $(M "$n")/d$r|of=$(M "$n")/b$r" | tr '\n' ' ')
	case $kind in
	all) freeze "$coro" "$cfsd" $work ;;
	cfsd) freeze "$cfsd" $work ;;
	corosync) freeze "$coro" ;;
	esac
	what="round $r ($kind of node $n frozen after ${delay}s${opts:+, $opts})"
	wait_until 180 more_recoveries "$slot" 1 "$other" || not_ok "$what: not recovered within 180 s"
	check "$what: node 1 sees everything the frozen node's fsync acknowledged" \
		on 1 python3 "$HERE/fsync_log.py" check "$(M 1)/d$r" "$T/log$r"
	check "$what: node 1 writes the manifest" manifest "$r" 1
	thaw
	check_soon 60 "$what: node $n fenced itself after the thaw" more_fenced "$n" "$fenced_before"
	tail -n +"$((before + 1))" "$T/cfsd$n.log" | grep "recovery:" >"$T/own_recovery"
	check "$what: node $n logged no recovery" test ! -s "$T/own_recovery"
	check "$what: the manifest reads back on node $other" reads_back "$r" "$other"
	wait "$w1" "$w2" 2>/dev/null
	check "$what: node $n unmounts" umount_on "$n"
	check_soon 60 "$what: node $n's cfsd exited" gone "$cfsd"
	C wait-quorum "$n" yes 60 >/dev/null 2>&1
	check "$what: node $n mounts again" mount_on "$n" $opts
	check "$what: the manifest reads back on node $n" reads_back "$r" "$n"
done
# How close the busy nodes came to their lease running out (half the token timeout).
for n in 1 2 3; do ok "node $n's longest wait for one of its beats: $(status_of $n beat_gap_max_ms) ms (lease $(status_of $n lease_ms) ms)"; done
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after $rounds stalls"
no_damage_logged
finish
