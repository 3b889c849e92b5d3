#!/usr/bin/env bash
# Crash test: kill -9 cfsd at random points of a metadata-heavy workload (creates, renames,
# unlinks, writes, fsync), CRASH_POINTS times (default 50).  After each kill: remount (journal
# replay, orphans freed), every fsync'd file must be there with its content, and after a clean
# unmount fsck.cfs must find the filesystem clean.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
POINTS=${CRASH_POINTS:-50}
M=$T/mnt
make_volume v 2 128
"$BIN/mkfs.cfs" -J 2 v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
touch "$T/durable.log"
fails=0
fsck_dirty=0
for ((i = 1; i <= POINTS; i++)); do
	mount_cfs v "$M" || { not_ok "crash $i: mount: $(tail -3 "$T/v.log")"; fails=$((fails + 1)); break; }
	pid=$(daemon_pid "$M")
	timeout 120 python3 "$HERE/crash_workload.py" run "$M" "$T/durable.log" "$i" &
	work=$!
	sleep "0.$((RANDOM % 8 + 2))"
	kill -0 "$work" 2>/dev/null || { not_ok "crash $i: the workload ended before the kill"; fails=$((fails + 1)); }
	kill -9 "$pid"
	wait "$work" || { not_ok "crash $i: the workload failed before the kill"; fails=$((fails + 1)); }
	umount -l "$M" 2>/dev/null
	# Remount: the journal is replayed and the orphans freed.
	mount_cfs v "$M" || { not_ok "crash $i: remount: $(tail -3 "$T/v.log")"; fails=$((fails + 1)); break; }
	if ! timeout 60 python3 "$HERE/crash_workload.py" check "$M" "$T/durable.log" >"$T/check.out" 2>&1; then
		not_ok "crash $i: fsync'd data after replay: $(cat "$T/check.out")"
		fails=$((fails + 1))
	fi
	unmount_and_fsck v "$M" "crash $i"
	case $? in
	2) fails=$((fails + 1)); break ;;
	1) fsck_dirty=$((fsck_dirty + 1)) ;;
	esac
done
[ "$fsck_dirty" -eq 0 ] && ok "fsck.cfs found the filesystem clean after each of $POINTS crashes"
[ "$fails" -eq 0 ] && ok "$POINTS kill -9 points: every fsync'd file survived ($(tail -1 "$T/check.out"))"
finish
