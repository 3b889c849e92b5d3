#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Crash test: kill -9 cfsd at random points of a metadata-heavy workload (creates, renames,
# unlinks, writes, fsync) run by WORKERS processes at once (default 3: their fsyncs commit
# while others' are in flight), CRASH_POINTS times (default 50), then SMALL_JOURNAL_POINTS
# times (default 20) on a filesystem with the smallest journal, which every commit fills (a
# checkpoint after each) and whose big transactions void the log, then QUOTA_CRASH_POINTS
# times (default 10) with quotas on.  After each kill: remount
# (replay of the several transactions in the log, orphans freed), every fsync'd file must be
# there with its content, and after a clean unmount fsck.cfs must find the filesystem clean.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$T/mnt

# crash_points WHAT VOLUME POINTS [MKFS_OPTION...]
crash_points() {
	local what=$1 vol=$2 points=$3 i fails=0 fsck_dirty=0
	shift 3
	make_volume "$vol" 2 128
	"$BIN/mkfs.cfs" -J 2 "$@" "$vol" >/dev/null 2>&1 || { not_ok "$what: mkfs.cfs"; return; }
	local workers=${WORKERS:-3} k
	for ((k = 1; k <= workers; k++)); do : >"$T/durable$k.log"; done
	for ((i = 1; i <= points; i++)); do
		mount_cfs "$vol" "$M" || { not_ok "crash $i: mount: $(tail -3 "$T/$vol.log")"; fails=$((fails + 1)); break; }
		pid=$(daemon_pid "$M")
		local work=()
		for ((k = 1; k <= workers; k++)); do
			mkdir -p "$M/w$k"
			timeout 120 python3 "$HERE/crash_workload.py" run "$M/w$k" "$T/durable$k.log" "$((i * 10 + k))" &
			work+=($!)
		done
		sleep "0.$((RANDOM % 8 + 2))"
		for w in "${work[@]}"; do
			kill -0 "$w" 2>/dev/null || { not_ok "crash $i: a workload ended before the kill"; fails=$((fails + 1)); }
		done
		kill -9 "$pid"
		for w in "${work[@]}"; do
			wait "$w" || { not_ok "crash $i: a workload failed before the kill"; fails=$((fails + 1)); }
		done
		umount -l "$M" 2>/dev/null
		# Remount: the journal is replayed and the orphans freed.
		mount_cfs "$vol" "$M" || { not_ok "crash $i: remount: $(tail -3 "$T/$vol.log")"; fails=$((fails + 1)); break; }
		for ((k = 1; k <= workers; k++)); do
			# A worker's directory is durable with its first fsync (a commit takes all).
			[ -s "$T/durable$k.log" ] || continue
			if ! timeout 60 python3 "$HERE/crash_workload.py" check "$M/w$k" "$T/durable$k.log" >"$T/check.out" 2>&1; then
				not_ok "crash $i: worker $k: fsync'd data after replay: $(cat "$T/check.out")"
				fails=$((fails + 1))
			fi
		done
		unmount_and_fsck "$vol" "$M" "crash $i"
		case $? in
		2) fails=$((fails + 1)); break ;;
		1) fsck_dirty=$((fsck_dirty + 1)) ;;
		esac
	done
	[ "$fsck_dirty" -eq 0 ] && ok "$what: fsck.cfs found the filesystem clean after each of $points crashes"
	[ "$fails" -eq 0 ] && ok "$what: $points kill -9 points: every fsync'd file survived ($(tail -1 "$T/check.out"))"
}

crash_points "default journal" v "${CRASH_POINTS:-50}"
crash_points "smallest journal" small "${SMALL_JOURNAL_POINTS:-20}" --journal-size 256K
# Quotas: fsck.cfs checks every id's usage against the files after each crash.
crash_points "quotas" quota "${QUOTA_CRASH_POINTS:-10}" -O project,quota
finish
