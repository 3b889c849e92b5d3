#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The test run under pressure, to show that no check depends on the machine's speed:
#
#   tests/stress.sh MODE [BUILD]     (make stress; root)
#
#   cpu       a busy loop on every core, at the tests' own priority, for the whole run
#   onecore   every test process on one core (taskset -c 0)
#   slowdisk  the I/O of every test process throttled on the disk under TMPDIR (where the
#             LUN files are): STRESS_IOPS reads and writes a second each (default 300),
#             through the blkio cgroup (v1) or io.max (v2); skipped where neither is there
#
# Runs tests/run.sh BUILD (default build/asan) as it is, so TEST_SCRIPTS="GLOB..." narrows it
# (e.g. to tests/cluster/test_*.sh) and SCRIPT_LIMIT lengthens each script's limit (default
# 2400 s here), ON_LIMIT a cluster command's (900 s here).  Exits as tests/run.sh does; the
# pressure goes with it, also on failure.
set -u
mode=${1:-}
build=${2:-build/asan}
cd "$(dirname "$0")/.." || exit 1
export SCRIPT_LIMIT=${SCRIPT_LIMIT:-2400}
# A cluster script's command that runs longer than ON_LIMIT is taken for a hang (cfs_lib.sh's
# on): 300 s by default, which a 20,000-file tar on a throttled disk can need.
export ON_LIMIT=${ON_LIMIT:-900}
hogs=() cgroup=
cleanup() {
	[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null
	if [ -n "$cgroup" ]; then
		# Back to the root group, then the group goes.
		for p in $(cat "$cgroup/cgroup.procs" 2>/dev/null); do echo "$p" >"$(dirname "$cgroup")/cgroup.procs" 2>/dev/null; done
		rmdir "$cgroup" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The device that holds DIR, as MAJOR:MINOR of the whole disk (throttling is per disk).
disk_of() {
	local dev sys
	dev=$(stat -c '%d' "$1")
	sys=$(readlink -f "/sys/dev/block/$((dev >> 8)):$((dev & 255))")
	[ -e "$sys/partition" ] && sys=$(dirname "$sys")
	cat "$sys/dev" 2>/dev/null
}

case $mode in
cpu)
	for _ in $(seq "$(nproc)"); do
		sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	echo "stress: ${#hogs[@]} busy loops running (pids ${hogs[*]})"
	tests/run.sh "$build"
	;;
onecore)
	echo "stress: every test process on CPU 0"
	taskset -c 0 tests/run.sh "$build"
	;;
slowdisk)
	iops=${STRESS_IOPS:-300}
	disk=$(disk_of "${TMPDIR:-/var/tmp}")
	[ -n "$disk" ] || { echo "skip - stress slowdisk: no block device under ${TMPDIR:-/var/tmp}"; exit 0; }
	if [ -w /sys/fs/cgroup/blkio/cgroup.procs ]; then
		cgroup=/sys/fs/cgroup/blkio/cfs-stress.$$
		mkdir "$cgroup" || exit 1
		for f in read_iops_device write_iops_device; do echo "$disk $iops" >"$cgroup/blkio.throttle.$f"; done
	elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		cgroup=/sys/fs/cgroup/cfs-stress.$$
		echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		mkdir "$cgroup" || exit 1
		echo "$disk riops=$iops wiops=$iops" >"$cgroup/io.max"
	else
		echo "skip - stress slowdisk: no blkio or io cgroup controller to throttle with"
		exit 0
	fi
	echo "stress: I/O of the tests throttled to $iops reads and $iops writes a second on disk $disk"
	echo $$ >"$cgroup/cgroup.procs"
	tests/run.sh "$build"
	;;
*)
	sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
