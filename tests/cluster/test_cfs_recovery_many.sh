#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Node failures on five nodes: (a) two nodes die at once while both work under fsync: the
# three survivors recover both; (b) the survivor recovering a dead node dies during the
# recovery (its fence agent hangs): another survivor recovers both.  Every change the dead
# nodes' fsync acknowledged is there; fsck.cfs -n clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs recovery of several nodes"
C up 5 >/dev/null && ok "cluster of 5 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 6 data >/dev/null
recovered() { cat "$T"/cfsd*.log | grep -c "recovery: node .* recovered" || true; }
for n in 1 2 3 4 5; do check "node $n mounts" mount_on $n; done

# (a) Nodes 4 and 5 die at once.
declare -A pid
for n in 4 5; do
	pid[$n]=$(status_of $n pid)
	on $n python3 "$HERE/fsync_log.py" run "$(M $n)/w$n" "$T/log$n" >/dev/null 2>&1 &
done
both_write() { [ -s "$T/log4" ] && [ -s "$T/log5" ]; }
wait_until 120 both_write && sleep 1 # dying with more in flight
C kill 4; C kill 5; kill -9 "${pid[4]}" "${pid[5]}"; C abort 4; C abort 5
t0=$(ms)
check "node 1 creates a directory after nodes 4 and 5 died at once" on 1 timeout 60 mkdir "$(M 1)/after-a"
ok "node 1's operation completed $(($(ms) - t0)) ms after the deaths"
for n in 4 5; do
	check "node 2 sees everything node $n's fsync acknowledged" \
		on 2 python3 "$HERE/fsync_log.py" check "$(M 2)/w$n" "$T/log$n"
done
# The log line comes once the recovery's locks are given back, maybe after the reads above.
recovered_two() { [ "$(recovered)" -ge 2 ]; }
wait_until 60 recovered_two
check "both dead nodes were recovered once ($(recovered) recoveries logged)" test "$(recovered)" -eq 2
wait
for n in 4 5; do
	C start $n >/dev/null
	C wait-quorum $n yes 30 >/dev/null 2>&1
	check "node $n mounts again" mount_on $n
done

# (b) The recovering survivor dies: its fence agent hangs at the first call.
cat >"$T/fence_agent.sh" <<'AGENT'
#!/bin/sh
dir=$(dirname "$0")
echo "$1 $PPID" >>"$dir/agent.log"
if [ -e "$dir/hang" ]; then rm -f "$dir/hang"; exec sleep 600; fi
exit 0
AGENT
chmod +x "$T/fence_agent.sh"
touch "$T/hang"
for n in 1 2 3 4 5; do umount_on $n; done
for n in 1 2 3 4 5; do check "node $n mounts with a fence agent" mount_on $n "fence=$T/fence_agent.sh"; done
for n in 1 2 3 4 5; do pid[$n]=$(status_of $n pid); done
before=$(recovered)
on 5 python3 "$HERE/fsync_log.py" run "$(M 5)/wb" "$T/logb" >/dev/null 2>&1 &
wait_until 120 test -s "$T/logb" && sleep 0.5
C kill 5; kill -9 "${pid[5]}"; C abort 5
wait
wait_until 120 test -s "$T/agent.log"
hung=$(awk 'NR == 1 { print $2 }' "$T/agent.log" 2>/dev/null)
recoverer=
for n in 1 2 3 4; do [ "${pid[$n]}" = "$hung" ] && recoverer=$n; done
check "a survivor (node ${recoverer:-?}) runs the fence agent for node 5, which hangs" test -n "$recoverer"
[ -n "$recoverer" ] || finish
C kill "$recoverer"; kill -9 "${pid[$recoverer]}"; C abort "$recoverer"
t0=$(ms)
other=1; [ "$recoverer" = 1 ] && other=2
check "node $other creates a directory after the recovering node $recoverer died too" \
	on $other timeout 90 mkdir "$(M $other)/after-b"
ok "node $other's operation completed $(($(ms) - t0)) ms after node $recoverer died"
check "node $other sees everything node 5's fsync acknowledged" \
	on $other python3 "$HERE/fsync_log.py" check "$(M $other)/wb" "$T/logb"
check "the fence agent was run again for node 5 and for node $recoverer" \
	sh -c "grep -q '^5 ' '$T/agent.log' && grep -q '^$recoverer ' '$T/agent.log' && [ \$(grep -c '^5 ' '$T/agent.log') -ge 2 ]"
two_more() { [ $(($(recovered) - before)) -ge 2 ]; }
wait_until 60 two_more
check "both were recovered ($(($(recovered) - before)) recoveries logged)" test $(($(recovered) - before)) -eq 2
for n in 1 2 3 4; do [ "$n" = "$recoverer" ] || check "node $n unmounts" umount_on $n; done
fsck_clean "after three node deaths"
no_damage_logged
finish
