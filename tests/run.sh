#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run every test of a build directory: the criterion unit tests and the integration scripts
# (which drive the installed-style binaries in BUILD/bin, each within SCRIPT_LIMIT seconds).
# Counts test cases, prints "N passed, N failed" last (", N skipped" for checks whose needs
# are missing), and exits non-zero if anything failed.
#
# Two lanes run at once: one runs the unit tests and the one-node scripts (tests/cfs, odm,
# tools), the other the cluster scripts (tests/cluster), which the first one then helps with.
# A cluster script spends most of its time waiting (token timeouts, fence agents, daemons'
# periodic work), so the other lane has the cores meanwhile.  The lanes share nothing: a
# cluster script's nodes have their own network and mount namespaces and /dev/shm, every
# script its own scratch directory (TMPDIR) and cluster name.  Scripts that change the
# machine's settings for their run (ALONE) run by themselves first.  TEST_LANES=1 runs
# everything in one lane, one script after another; TEST_SCRIPTS="GLOB..." only the scripts
# it names (and no unit tests).  See docs/testing.md.
#
# After every script, the harness looks for what it left behind (tests/leftovers.py: processes
# about its scratch directory, mounts and loop devices there; its cluster's network namespaces
# and links; new /dev/shm/odm.* segments), fails the script that did, and clears it away.
#
# A script still running after SCRIPT_LIMIT seconds is stopped (TERM: its traps take its
# cluster and mounts down; KILL two minutes later) and counts as failed, so that one hang
# cannot spend CI's whole time limit.  The longest script takes about 5 minutes here.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 1
SCRIPT_LIMIT=${SCRIPT_LIMIT:-1200}
LANES=${TEST_LANES:-2}
# fuse enable_uring, io_uring_disabled; fs.aio-max-nr; the packages' /sbin/mount.cfs and /usr/bin;
# the kernel's caches of every mount (drop_caches)
ALONE="tests/cfs/test_uring.sh tests/cluster/test_cfs_uring.sh tests/odm/test_odm_scale.sh tests/packaging/test_deb.sh"
ALONE+=" tests/cluster/test_cfs_forgotten.sh"
LONGEST="tests/cluster/test_cfs_recovery.sh tests/cluster/test_cfs.sh tests/cluster/test_cfs_multi.sh"
work=$(mktemp -d "${TMPDIR:-/var/tmp}/cfs-run.XXXXXX")
chmod 755 "$work" # the scripts' directories are under it, and some run checks as nobody
trap 'rm -rf "$work"' EXIT
n_script=0
# Two characters of this run's own in every cluster name, so that two runs on one machine
# (two checkouts, a stress run beside a check) do not take each other's namespaces.
b36=0123456789abcdefghijklmnopqrstuvwxyz
RUN_TAG=${b36:$(($$ / 36 % 36)):1}${b36:$(($$ % 36)):1}

# say FILE: FILE's lines to the output whole, not mixed with the other lane's.
say() { flock "$work/out.lock" cat "$1"; }

odm_segments() { ls /dev/shm 2>/dev/null | grep '^odm\.' | sort; }

# run_units: every criterion test binary; its counts in $work/units.res.
run_units() {
	local t rc line p f fl cr passed=0 failed=0 out=$work/units.out
	for t in "$build"/tests/*/test_*; do
		[ -x "$t" ] || continue
		{ echo "== unit: $t"; "$t" --jobs 2 2>&1; } >"$out"
		rc=$?
		say "$out"
		line=$(grep -a 'Synthesis:' "$out" | tail -1)
		p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
		f=$(sed -n 's/.*Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2/p' <<<"$line")
		read -r fl cr <<<"${f:-0 0}"
		passed=$((passed + ${p:-0}))
		failed=$((failed + fl + cr))
		if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
			echo "$t" >>"$work/failures"
			[ $((fl + cr)) -eq 0 ] && failed=$((failed + 1))
		fi
	done
	echo "$passed $failed 0" >"$work/units.res"
}

# leaks SCRATCH ID SHM_BEFORE: what the script left, one line each; cleared away after.
# Processes get LEFTOVER_GRACE seconds (30) to exit: a lazily unmounted daemon ends once its
# last user has.
leaks() {
	local scratch=$1 id=$2 shm_before=$3 ns links shm end=$((SECONDS + ${LEFTOVER_GRACE:-30}))
	until python3 tests/leftovers.py "$scratch" >/dev/null || [ "$SECONDS" -ge "$end" ]; do sleep 0.2; done
	python3 tests/leftovers.py "$scratch" --kill
	ns=$(ip netns list 2>/dev/null | awk -v p="$id-" 'index($1, p) == 1 { print $1 }')
	links=$(ip -o link show 2>/dev/null | awk -F': ' -v p="$id-" 'index($2, p) == 1 { sub(/@.*/, "", $2); print $2 }')
	for x in $ns; do echo "network namespace $x"; ip netns del "$x" 2>/dev/null; done
	for x in $links; do echo "network link $x"; ip link del "$x" 2>/dev/null; done
	if [ -n "$shm_before" ]; then
		shm=$(comm -13 "$shm_before" <(odm_segments))
		for x in $shm; do echo "ODM segment /dev/shm/$x"; rm -f "/dev/shm/$x"; done
	fi
}

# run_script SCRIPT CHECK_SHM: one integration script in a scratch directory of its own; its
# output, then its counts in $work/N.res.
run_script() {
	local s=$1 check_shm=$2 i id scratch out rc p f left shm_before= start=$SECONDS
	i=$(printf '%03d' "$3")
	id=t$RUN_TAG$i # the cluster's name: its namespaces and links start with it ("tk7042-")
	scratch=$work/s$i
	out=$work/$i.out
	mkdir -m 755 "$scratch"
	if [ "$check_shm" = 1 ]; then shm_before=$work/$i.shm; odm_segments >"$shm_before"; fi
	echo "== integration: $s" >"$out"
	TMPDIR=$scratch CLUSTER_ID=$id BIN="$build/bin" timeout -k 120 "$SCRIPT_LIMIT" bash "$s" >>"$out" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] && echo "not ok - $s still running after $SCRIPT_LIMIT s: stopped" >>"$out"
	left=$(leaks "$scratch" "$id" "$shm_before")
	if [ -n "$left" ]; then
		echo "not ok - $s left behind (cleared now): $(tr '\n' ';' <<<"$left")" >>"$out"
		rc=1
	fi
	rm -rf "$scratch"
	echo "$((SECONDS - start)) $s" >>"$work/durations"
	say "$out"
	p=$(grep -ac '^ok ' "$out")
	f=$(grep -ac '^not ok ' "$out")
	if [ "$rc" -ne 0 ]; then
		echo "$s" >>"$work/failures"
		[ "$f" -eq 0 ] && f=1
	fi
	echo "$p $f $(grep -ac '^skip ' "$out")" >"$work/$i.res"
}

# lane CHECK_SHM SCRIPT...: the scripts one after another.
lane() {
	local check_shm=$1 s
	shift
	for s in "$@"; do
		n_script=$((n_script + 1))
		run_script "$s" "$check_shm" "$n_script"
	done
}

# from_queue: the cluster scripts no lane has taken yet ("NUMBER SCRIPT" lines), one at a
# time, to whichever lane is free first (they balance the lanes).
from_queue() {
	local next
	while next=$(flock "$work/queue.lock" sh -c 'head -1 "$1" && sed -i 1d "$1"' _ "$work/queue") &&
		[ -n "$next" ]; do
		run_script "${next#* }" 0 "${next%% *}"
	done
}

alone=() one_node=() cluster=()
for s in ${TEST_SCRIPTS:-tests/*/test_*.sh}; do
	case " $ALONE " in *" $s "*) alone+=("$s"); continue ;; esac
	case $s in tests/cluster/*) cluster+=("$s") ;; *) one_node+=("$s") ;; esac
done

lane 1 "${alone[@]}"
if [ "$LANES" -ge 2 ]; then
	# The longest first, so that neither lane is left with one at the end.
	: >"$work/queue"
	[ ${#cluster[@]} -eq 0 ] || printf '%s\n' $LONGEST "${cluster[@]}" |
		grep -xF -f <(printf '%s\n' "${cluster[@]}") | awk '!seen[$0]++ { print 100 + NR, $0 }' >"$work/queue"
	from_queue &
	cluster_lane=$!
	# The one-node scripts in this lane only, one after another: the host's /dev/shm/odm.*
	# segments are theirs alone (a cluster node has its own /dev/shm), so each is checked.
	n_script=200
	[ -n "${TEST_SCRIPTS:-}" ] || run_units
	lane 1 "${one_node[@]}"
	from_queue
	wait "$cluster_lane"
else
	[ -n "${TEST_SCRIPTS:-}" ] || run_units
	lane 1 "${one_node[@]}" "${cluster[@]}"
fi

passed=0 failed=0 skipped=0
for r in "$work"/*.res; do
	read -r p f k <"$r"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
done
# The slowest scripts, so that a run that grows shows where.
echo "slowest scripts (s):"
sort -rn "$work/durations" 2>/dev/null | head -12 | sed 's/^/  /'
echo "whole run: $SECONDS s"
[ -s "$work/failures" ] && sed 's/^/failed: /' "$work/failures"
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ ! -s "$work/failures" ]
