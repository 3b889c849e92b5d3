#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Node failure: a node working under fsync (creates, appends, renames, unlinks) loses its cfsd
# and its corosync to kill -9 at a random moment (in both orders).  The survivors notice through membership,
# one of them replays the dead node's journal and frees its locks: a survivor's operation that
# needs the metadata glock completes (its wait is printed), every change the dead node's fsync
# acknowledged is there as seen from both survivors, and the node comes back and mounts again.
# RECOVERY_ROUNDS rounds (12 kill points in make check, each victim twice in each order;
# make soak runs 60; the killed node changes each round); fsck.cfs -n clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs node recovery"
ROUNDS=${RECOVERY_ROUNDS:-12}
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done
others() { local n; for n in 1 2 3; do [ "$n" = "$1" ] || echo "$n"; done; }

for r in $(seq 1 "$ROUNDS"); do
	victim=$(( (r - 1) % 3 + 1 ))
	read -r a b <<<"$(others $victim | tr '\n' ' ')"
	pid=$(status_of $victim pid)
	on $victim python3 "$HERE/fsync_log.py" run "$(M $victim)/w$r" "$T/log$r" >/dev/null 2>&1 &
	work=$!
	# Unrelated work on a survivor across the death: how long its calls stall.
	on $b sh -c "echo unrelated >'$(M $b)/unrelated$r'"
	on $b python3 "$HERE/stall.py" "$(M $b)/unrelated$r" 12 >"$T/stall$r" 2>&1 &
	stall=$!
	sleep "$(python3 -c 'import random; print(round(random.uniform(1.0, 3.0), 2))')"
	# Odd rounds: the node dies (corosync first: the others notice at the token timeout);
	# even rounds: cfsd dies first (its corosync tells the others at once).
	if [ $((r % 2)) -eq 1 ]; then C kill $victim; kill -9 "$pid"; else kill -9 "$pid"; C kill $victim; fi
	C abort $victim # a writer there may wait on a page the dead daemon was invalidating
	t0=$(ms)
	wait $work 2>/dev/null
	# Needs the glock EX, which the dead node may have held: waits for the recovery.
	check "round $r: node $a creates a directory after node $victim was killed mid-work" \
		on $a timeout 60 mkdir "$(M $a)/after$r"
	t1=$(ms)
	ok "round $r: node $a's operation completed $((t1 - t0)) ms after node $victim died (token 1000 ms)"
	for n in $a $b; do
		check "round $r: node $n sees everything node $victim's fsync acknowledged" \
			on $n python3 "$HERE/fsync_log.py" check "$(M $n)/w$r" "$T/log$r"
	done
	wait $stall && ok "round $r: node $b reading an unrelated file: $(cat "$T/stall$r") (a call waits for the recovery only if it needs what the dead node held)" \
		|| not_ok "round $r: node $b's unrelated reads failed: $(cat "$T/stall$r")"
	check "round $r: node $victim's corosync starts again" C start $victim
	C wait-quorum $victim yes 30 >/dev/null 2>&1
	check "round $r: node $victim mounts again" mount_on $victim
	check "round $r: node $victim reads what it wrote before it died" \
		on $victim python3 "$HERE/fsync_log.py" check "$(M $victim)/w$r" "$T/log$r"
done

# A fence program instead of the fence interval: it fails at its first call (an agent that
# cannot reach its switch at first); the journal waits for it, then it is replayed.  Its
# second call succeeds once the test opens the gate, so the recovery is pending for as long
# as the test needs.
cat >"$T/fence_agent.sh" <<'AGENT'
#!/bin/sh
dir=$(dirname "$0")
echo "$1 $CFS_FENCE_NODE $CFS_FENCE_SLOT $CFS_FS_LABEL" >>"$dir/fenced.log"
[ "$(grep -c "^$1 " "$dir/fenced.log")" -ge 2 ] || exit 1
for _ in $(seq 500); do [ -e "$dir/gate" ] && exit 0; sleep 0.1; done
exit 1
AGENT
chmod +x "$T/fence_agent.sh"
for n in 1 2 3; do umount_on $n; done
if mount_on 1 fence=fence_agent.sh >"$T/refused.out" 2>&1; then not_ok "fence= with a relative path was accepted"
else check "fence= with a relative path is refused and says why" grep -q "absolute path of an executable" "$T/refused.out"; fi
for n in 1 2 3; do check "node $n mounts with fence=PROGRAM" mount_on $n "fence=$T/fence_agent.sh"; done
slot2=$(status_of 2 slot)
pid=$(status_of 2 pid)
on 2 python3 "$HERE/fsync_log.py" run "$(M 2)/wf" "$T/logf" >/dev/null 2>&1 &
work=$!
logged() { cat "$T/logf" 2>/dev/null | wc -l; }
wait_until 120 test -s "$T/logf" # node 2 made its directory and works in it
# Made after node 2 made its directory there, so node 2 holds the root's glock only PR (its
# lookups) when it dies, not EX (its create); node 2 then works on a while.
on 3 sh -c "echo unrelated >'$(M 3)/unrelated-fence'"
n0=$(logged)
more_logged() { [ "$(logged)" -gt $((n0 + 5)) ]; }
wait_until 120 more_logged
C kill 2; kill -9 "$pid"; C abort 2
t0=$(ms)
wait $work 2>/dev/null
# Node 1's mkdir in the root wants the root's glock EX, which waits for node 2's PR of it
# (node 2 looked names up there) until node 2 is fenced and recovered.  Node 3 reading a
# file through the root meanwhile is not held up behind that request.
on 1 timeout -s KILL 180 mkdir "$(M 1)/after-fence" >"$T/mkdir.out" 2>&1 &
mkdir_pid=$!
fenced_twice() { [ "$(cat "$T/fenced.log" 2>/dev/null | grep -c "^2 ")" -ge 2 ]; }
wait_until 120 fenced_twice # its first call failed: the second holds the recovery
sleep 0.5
check "node 3 reads a file through the root while node 1's mkdir there waits for node 2's fence" \
	on 3 timeout -s KILL 60 cat "$(M 3)/unrelated-fence"
check "and node 1's mkdir was still waiting then" kill -0 $mkdir_pid
check "and node 2's recovery was still pending then (its fence agent holds it)" recovering
touch "$T/gate"
if wait $mkdir_pid; then ok "fence program: node 1 creates a directory after node 2 died"
else not_ok "fence program: node 1's mkdir after node 2 died: $(cat "$T/mkdir.out")"; fi
ok "fence program: node 1's operation completed $(($(ms) - t0)) ms after node 2 died"
check "the fence program was called twice for node 2, slot $slot2 (it failed once)" \
	test "$(grep -c "^2 2 $slot2 " "$T/fenced.log")" -eq 2
check "fence program: node 3 sees everything node 2's fsync acknowledged" \
	on 3 python3 "$HERE/fsync_log.py" check "$(M 3)/wf" "$T/logf"
check "node 2's corosync starts again" C start 2
C wait-quorum 2 yes 30 >/dev/null 2>&1
check "node 2 mounts again" mount_on 2
ROUNDS=$((ROUNDS + 1))
replays=$(cat "$T"/cfsd*.log | grep -c "recovery: journal of slot .*: replayed" || true)
recovered=$(cat "$T"/cfsd*.log | grep -c "recovery: node .* recovered" || true)
check "every dead node was recovered once ($recovered of $ROUNDS; $replays with a journal to replay)" \
	test "$recovered" -eq "$ROUNDS"
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after $ROUNDS node deaths"
no_damage_logged
finish
