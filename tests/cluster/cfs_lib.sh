# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by the CFS cluster tests: the cluster lib (a cluster of our own, always taken down),
# then helpers to run commands on a node and mount CFS there.  Each node has its own mount
# namespace, so node N's mount point $T/mN is only mounted inside node N.
# Usage: . cfs_lib.sh WHAT
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$1"
export CVM_SCAN=$T
if [ ! -c /dev/fuse ]; then
	echo "skip - $1: no /dev/fuse"
	exit 0
fi
# on NODE CMD...: CMD inside node NODE.  In the background and waited for: a TERM or INT then
# runs the traps at once (bash runs them only after a foreground command ends, and a command
# stuck on a hung mount never would).  A command still running after ON_LIMIT seconds means
# the cluster hangs: every later command would wait as long, so the script stops there (see
# hung) rather than spend the test run's time limit.  ON_LIMIT=0: no limit, for a job that
# runs until told to stop (its stop is then what the script bounds).
ON_LIMIT=${ON_LIMIT:-300}
on() {
	local n=$1 start=$SECONDS rc
	shift
	timeout "$ON_LIMIT" "$HERE/cluster.sh" exec "$n" "$@" <&0 &
	wait $!
	rc=$?
	# 124 is also what a "timeout" inside CMD returns: only the outer limit counts here.
	[ "$rc" -eq 124 ] && [ "$ON_LIMIT" -gt 0 ] && [ $((SECONDS - start)) -ge "$ON_LIMIT" ] &&
		hung "node $n: '$*' still running after $ON_LIMIT s"
	return "$rc"
}
# hung WHY: a failed check naming WHY, every cfsd's threads (where gdb is installed) to the
# test's output, then the script ends through its traps (cluster down, temp dir removed).
# Called from subshells too, hence the TERM to the script itself.
hung() {
	local pid
	echo "not ok - the cluster hangs: $1" >&"$TAP_FD"
	for pid in $(pgrep -f "^cfsd .*$T/" || true); do
		echo "# cfsd $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline)" >&"$TAP_FD"
		command -v gdb >/dev/null &&
			timeout -k 5 60 gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null |
			grep -E '^(Thread|#)' | sed 's/^/# /' | head -300 >&"$TAP_FD"
	done
	# What each daemon did last says more than idle threads: the lock or batch it waits for.
	for log in "$T"/cfsd*.log; do
		[ -f "$log" ] || continue
		echo "# last lines of $(basename "$log"):" >&"$TAP_FD"
		tail -n 25 "$log" | sed 's/^/#   /' >&"$TAP_FD"
	done
	kill -TERM $$
	exit 1
}
# stopped WHO PID...: jobs started with ON_LIMIT=0 have ended within 300 s of being told to
# stop, or the cluster hangs.
stopped() {
	local who=$1 pid
	shift
	for pid in "$@"; do
		wait_until 300 gone "$pid" || hung "$who still running 300 s after it was told to stop"
	done
}
M() { echo "$T/m$1"; }
# restripe_json FIELD: that field of the restripe record of volume "data" (cvm show --json), 0
# when none runs.
restripe_json() { "$BIN/cvm" show data --json | python3 -c "import json,sys; r=json.load(sys.stdin)['volumes'][0]['restripe']; print(r.get('$1', '?') if r else 0)"; }
# restripe_on NODE ARGS...: `cvm restripe ARGS` of volume "data" on node NODE, its output and
# exit code as its own.  A whole run is not bounded by ON_LIMIT: its length goes with the
# machine's speed (CI's machine took over 300 s for a --luns run of 760 batches that takes 20
# here).  Its moves are: none in 300 s means the cluster hangs.
restripe_on() {
	local n=$1 job last=-1 at since=$SECONDS rc
	shift
	ON_LIMIT=0 on "$n" "$BIN/cvm" restripe data "$@" >"$T/restripe_on.out" 2>&1 &
	job=$!
	while ! gone "$job"; do
		at=$(restripe_json moves_done 2>/dev/null) || at=$last
		if [ "$at" != "$last" ]; then
			last=$at since=$SECONDS
		elif [ $((SECONDS - since)) -ge 300 ]; then
			hung "node $n: 'cvm restripe data $*' made no move in 300 s (at move $last)"
		fi
		sleep 1
	done
	wait "$job"
	rc=$?
	cat "$T/restripe_on.out"
	return "$rc"
}
# stop_job PID PATTERN: ends the background `on` PID and the processes matching PATTERN (the
# command it runs on a node) with kill -9, and reaps PID.  One pkill is not enough: a job
# started a moment ago may not have exec'ed its command yet, and would then run on unkilled.
stop_job() {
	while ! gone "$1" || pgrep -f "$2" >/dev/null; do
		pkill -9 -f "$2"
		sleep 0.1
	done
	wait "$1" 2>/dev/null
	return 0
}
# node_bin NODE: the build node NODE runs, $BIN_<NODE> if set (a mixed-release cluster), else
# $BIN.
node_bin() { local v="BIN_$1"; echo "${!v:-$BIN}"; }
mount_on() { # node [options]
	mkdir -p "$(M "$1")"
	on "$1" "$(node_bin "$1")/cfs" mount data "$(M "$1")" -o "log=$T/cfsd$1.log${2:+,$2}"
}
# status_of NODE FIELD: a field of `cfs status --json` of node NODE's mount.
status_of() { on "$1" "$(node_bin "$1")/cfs" status --json "$(M "$1")" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
ms() { date +%s%3N; } # now, in milliseconds
messages() { echo $(( $(status_of 1 lock_messages) + $(status_of "$1" lock_messages) )); }
# sent NODE CMD...: the lock messages nodes 1 and NODE send while CMD runs.
sent() {
	local n=$1 m0
	shift
	m0=$(messages "$n")
	"$@" >&2
	echo $(( $(messages "$n") - m0 ))
}
# settled_free: the free blocks df shows once nodes 1, 2 and 3 agree (each counts another
# node's allocations after that node's commit and its own refresh, a second each), or what
# they show after 10 s, and failure.
settled_free() {
	local n
	for _ in $(seq 50); do
		for n in 1 2 3; do on $n stat -f -c '%f' "$(M $n)"; done >"$T/df"
		[ "$(sort -u "$T/df" | wc -l)" -eq 1 ] && { head -1 "$T/df"; return 0; }
		sleep 0.2
	done
	tr '\n' ' ' <"$T/df"
	return 1
}
recovering() { # on node 1: is a dead node's recovery pending?
	[ "$(status_of 1 recovering | tr -d '[] ')" != "" ]
}
recovery_done() { ! recovering; }
# A fence agent the test holds (mount with fence=$(held_fence)): while $T/fence.hold exists it
# does not answer, so a dead node's recovery is pending for as long as the test needs, on any
# machine, fast or slow; it answers "fenced" once the hold is gone.  (Without a fence program
# the survivors replay after the fence interval, and a check that the recovery "is still
# pending" would race that timer.)  After 50 s it gives up (cfsd runs it again at its next
# try, before its own 60 s limit).
held_fence() {
	local agent=$T/held_fence.sh
	[ -x "$agent" ] || {
		cat >"$agent" <<'AGENT'
#!/bin/sh
dir=$(dirname "$0")
echo "$1" >>"$dir/held_fence.log"
i=0
while [ -e "$dir/fence.hold" ]; do
	i=$((i + 1))
	[ $i -lt 500 ] || exit 1
	sleep 0.1
done
exit 0
AGENT
		chmod +x "$agent"
	}
	echo "$agent"
}
# die_while NODE CMD...: CMD runs on NODE in the background; once it has made $T/started (its
# first step done), NODE's cfsd and corosync are killed with the held fence agent holding the
# recovery (the mounts use fence=$(held_fence)); back once node 1 sees it pending.
die_while() {
	local n=$1 pid
	shift
	pid=$(status_of "$n" pid)
	rm -f "$T/started"
	touch "$T/fence.hold"
	on "$n" "$@" >/dev/null 2>&1 &
	wait_until 120 test -e "$T/started" || not_ok "node $n's work did not start within 120 s"
	C kill "$n"
	kill -9 "$pid"
	C abort "$n"
	wait_until 120 recovering || not_ok "node 1 did not see node $n's recovery pending within 120 s"
}
# come_back NODE: the held recovery goes on; once it is done, NODE's corosync starts and NODE
# mounts again.
come_back() {
	rm -f "$T/fence.hold"
	wait_until 120 recovery_done || not_ok "node $1's recovery still pending 120 s after its fence agent answered"
	check "node $1's corosync starts again" C start "$1"
	C wait-quorum "$1" yes 30 >/dev/null 2>&1
	check "node $1 mounts again" mount_on "$1" "fence=$(held_fence)"
}
umount_on() { on "$1" timeout 240 "$(node_bin "$1")/cfs" umount "$(M "$1")"; } # as long as the LUNs are slow
fsck_clean() { # what
	if "$BIN/fsck.cfs" -n data >"$T/fsck.out" 2>&1; then ok "$1: fsck.cfs -n clean"; else not_ok "$1: fsck.cfs: $(cat "$T/fsck.out")"; fi
}
# make_data MIB: a 4-LUN volume "data" of MIB MiB LUN files.
make_data() {
	local i
	for i in 0 1 2 3; do truncate -s "$1M" "$T/lun$i"; done
	"$BIN/cvm" create data "$T"/lun0 "$T"/lun1 "$T"/lun2 "$T"/lun3 >/dev/null
}
# no_damage_logged: no daemon logged EIO or damage (sanitizer reports: see finish).  A node
# that fenced itself says its calls fail with EIO: that is no damage.
no_damage_logged() {
	grep -h "EIO\|damaged" "$T"/cfsd*.log 2>/dev/null | grep -v "FENCED:" >"$T/bad.log"
	[ ! -s "$T/bad.log" ] && ok "no daemon logged damage" || not_ok "daemons logged: $(head -5 "$T/bad.log")"
}
# at_once WHAT FN: "FN N" for nodes 1, 2 and 3 at the same time (output in $T/FN.N); ok with
# its last line, or not_ok with its last lines, for each node.
at_once() {
	local what=$1 fn=$2 n pids=()
	for n in 1 2 3; do
		"$fn" $n >"$T/$fn.$n" 2>&1 &
		pids[n]=$!
	done
	for n in 1 2 3; do
		if wait "${pids[n]}"; then ok "$what on node $n: $(tail -1 "$T/$fn.$n")"
		else not_ok "$what on node $n: $(tail -5 "$T/$fn.$n" | tr '\n' ' ')"; fi
	done
}
