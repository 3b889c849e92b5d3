#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Self-fencing: node 3, writing under fsync, is cut off from the others by the network.  It
# loses quorum and fences itself: its calls fail with EIO, and from the fence on nothing it
# does reaches the LUNs (the LUN files' checksums do not change while it keeps trying to
# write and the majority is idle).  The majority waits the fence interval, replays node 3's
# journal and goes on; every change node 3's fsync acknowledged is there.  After the heal
# node 3's mount stays fenced (EIO, and cfs status says so) until it is unmounted and mounted
# again.  fsck.cfs -n clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs fencing"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done
interval=$(status_of 1 fence_interval_ms)
ok "fence interval $interval ms"

on 3 python3 "$HERE/fsync_log.py" run "$(M 3)/w" "$T/log3" >/dev/null 2>&1 &
work=$!
# Partitioned once node 3 has acknowledged a few fsyncs, however long it takes to start.
wait_until 120 bash -c "[ \$(grep -c '^done' '$T/log3' 2>/dev/null) -ge 6 ]" ||
	not_ok "node 3's fsync log did not start within 120 s"
C partition 3
t0=$(ms)
# Node 3's next call fails once it knows it is cut off (or waits till then for a lock).
failed=
for _ in $(seq 100); do
	if ! on 3 timeout 20 touch "$(M 3)/probe" 2>/dev/null; then failed=$(ms); break; fi
	sleep 0.1
done
check "node 3's calls fail after the partition ($((${failed:-0} - t0)) ms after it)" test -n "$failed"
wait $work 2>/dev/null
check "node 1 creates a directory once node 3 is recovered" on 1 timeout 60 mkdir "$(M 1)/after"
t1=$(ms)
ok "node 1's operation completed $((t1 - t0)) ms after the partition"
check "node 3 had fenced itself before the majority replayed its journal" test "${failed:-$t1}" -lt "$t1"
check "node 1 sees everything node 3's fsync acknowledged" \
	on 1 python3 "$HERE/fsync_log.py" check "$(M 1)/w" "$T/log3"
# Only node 3 may write while the checksums are compared: the majority's daemons (idle by
# now) are stopped, so nothing of theirs (a late step of the recovery, a commit) counts.
for _ in $(seq 300); do grep -q "recovery: slot .* done" "$T"/cfsd[12].log && break; sleep 0.1; done
on 1 sync -f "$(M 1)"
majority=$(for n in 1 2; do status_of $n pid; done)
kill -STOP $majority
sleep 0.5
sha256sum "$T"/lun[0-9] >"$T/luns.before"
late=0
for i in $(seq 20); do
	on 3 timeout 5 sh -c "echo late >'$(M 3)/late$i'" 2>/dev/null && late=$((late + 1))
	sleep 0.1
done
check "node 3's 20 writes after the fence all failed ($late succeeded)" test "$late" -eq 0
sha256sum "$T"/lun[0-9] >"$T/luns.after"
kill -CONT $majority
check "nothing reached the LUNs after the fence (checksums of every LUN file unchanged)" \
	cmp "$T/luns.before" "$T/luns.after"
C heal
C wait-quorum 3 yes 30 >/dev/null 2>&1
if on 3 ls "$(M 3)" >/dev/null 2>&1; then not_ok "after the heal node 3's mount answers again"
else ok "after the heal node 3's mount still fails its calls"; fi
check "cfs status on node 3 says it is fenced" test "$(status_of 3 fenced)" = True
check "node 3 unmounts" umount_on 3
check "node 3 mounts again" mount_on 3
check "node 3 sees node 1's directory made after the partition" on 3 test -d "$(M 3)/after"
check "node 3 writes again" on 3 sh -c "echo back >'$(M 3)/back'"
check "node 2 reads it" on 2 grep -q back "$(M 2)/back"
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after the partition"
no_damage_logged
finish
