#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# FUSE over io_uring on cluster mounts (cfsd/fuse_uring.c's dispatching threads), where the
# kernel has it: normal mounts of two nodes take their requests through the rings, a
# dboptimized one through /dev/fuse; what one node writes the other reads; a crowd of flock
# and fcntl waits for a lock the other node holds, more than a queue's first entries, keeps
# no thread and leaves the node's other requests answered; each wait gets its lock once the
# holder lets go, one interrupted by a signal ends and leaves nothing; a crowd that comes
# while no entry can be added is handed out once they can (the queue's pokes); then the whole
# flock and fcntl script (test_cfs_flock.sh) with the rings.  The fuse module's enable_uring
# and kernel.io_uring_disabled are set for the test and put back after it.
. "$(dirname "$0")/cfs_lib.sh" "cfs over io_uring on a cluster"
param=/sys/module/fuse/parameters/enable_uring
sysctl=/proc/sys/kernel/io_uring_disabled
if [ ! -w "$param" ] || [ ! -w "$sysctl" ]; then
	echo "skip - $(basename "$0"): this kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	exit 0
fi
echo "echo $(cat "$param") >$param; echo $(cat "$sysctl") >$sysctl" >>"$T/on_exit"
echo Y >"$param"
echo 0 >"$sysctl"
WAITERS=40 # more than a queue's first 16 entries, all from one core

C up 2 >/dev/null && ok "cluster of 2 nodes up" || { not_ok "cluster up"; finish; }
make_data 256
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2; do check "node $n mounts" mount_on $n; done
for n in 1 2; do
	check "node $n: requests come through io_uring" [ "$(status_of $n fuse_transport)" = io_uring ]
done

on 1 bash -c "head -c 3M /dev/urandom >'$T/data' && cp '$T/data' '$(M 1)/file' && mkdir '$(M 1)/dir'"
check "node 2 reads what node 1 wrote" on 2 cmp "$T/data" "$(M 2)/file"
on 2 bash -c "echo more >>'$(M 2)/file' && mv '$(M 2)/file' '$(M 2)/dir/moved'"
check "node 1 reads node 2's append under its new name" on 1 bash -c \
	"[ \$(stat -c %s '$(M 1)/dir/moved') = \$((3 * 1048576 + 5)) ] && tail -c 5 '$(M 1)/dir/moved' | grep -qx more"

# waiting: requests in node 1's rings waiting now for an answer from elsewhere.
waiting() { "$HERE/cluster.sh" exec 1 "$BIN/cfs" status --json "$(M 1)" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uring_waiting"])'; }
at_least_waiting() { local n; n=$(waiting); [ "$n" -ge "$1" ] || { echo "$n waiting"; return 1; }; }
none_waiting() { [ "$(waiting)" = 0 ]; }
# holds NODE TOOL: TOOL (flock or fcntl) on node NODE holds /lock until $T/release appears.
holds() {
	rm -f "$T/held"
	case $2 in
	flock) on "$1" flock -x "$(M "$1")/lock" bash -c "touch '$T/held'; while [ ! -e '$T/release' ]; do sleep 0.05; done" & ;;
	fcntl) on "$1" python3 -c "
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
" "$(M "$1")/lock" "$T/held" "$T/release" & ;;
	esac
	holder=$!
	for _ in $(seq 600); do [ -e "$T/held" ] && return 0; sleep 0.05; done
	return 1
}
# waiters TOOL: WAITERS processes on node 1's core 0 that wait for /lock with TOOL, each
# counting itself in $T/got once it has it.
waiters() {
	local i pids=()
	: >"$T/got"
	for i in $(seq "$WAITERS"); do
		case $1 in
		flock) on 1 taskset -c 0 flock -x "$(M 1)/lock" bash -c "echo $i >>'$T/got'" & ;;
		fcntl) on 1 taskset -c 0 python3 -c "
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
with open(sys.argv[2], 'a') as f:
    f.write(sys.argv[3] + '\n')
" "$(M 1)/lock" "$T/got" "$i" & ;;
		esac
		pids+=($!)
	done
	waiter_pids=${pids[*]}
}
# others_answered: while the waits keep their entries, node 1 still lists, reads, writes and
# removes from both cores.
others_answered() {
	local c
	for c in 0 1; do
		on 1 timeout 60 taskset -c $c bash -c "ls '$(M 1)/dir' >/dev/null && cmp -s '$T/data' <(head -c 3M '$(M 1)/dir/moved') &&
			echo $c >'$(M 1)/core$c' && [ \"\$(cat '$(M 1)/core$c')\" = $c ] && rm '$(M 1)/core$c'" || return 1
	done
}
# in_kernel N: node 1's FUSE connection has N requests or more outstanding (asked for and not
# answered: in cfsd, or queued in the kernel for a ring entry).
in_kernel() { local n; n=$(cat "$fusectl/$conn/waiting"); [ "$n" -ge "$1" ] || { echo "$n outstanding"; return 1; }; }
# crowd TOOL [held]: WAITERS waits with TOOL for a lock node 2 holds; held: they come while
# node 1's dispatching threads add no entry (its mount's CFSD_TEST_HOLD_ENTRIES, $T/hold),
# so that the kernel queues all it cannot give an entry, and the hold is let go once they
# are all outstanding.
crowd() {
	local what=$1${2:+, $2}
	check "node 2 takes the lock ($what)" holds 2 "$1"
	waiters "$1"
	if [ -n "${2-}" ]; then
		check_soon 120 "$what: node 1's $WAITERS waits are outstanding" in_kernel "$WAITERS"
		rm "$T/hold"
	fi
	check_soon 120 "$what: node 1's $WAITERS waits are in the rings, each keeping its entry" \
		at_least_waiting "$WAITERS"
	check "$what: node 1's other requests are answered meanwhile, on both cores" others_answered
	check "$what: none of the waits got the lock while node 2 holds it" [ ! -s "$T/got" ]
	touch "$T/release"
	wait "$holder"
	rm -f "$T/release"
	local p failed=0 got
	# shellcheck disable=SC2086 # a list of pids
	for p in $waiter_pids; do wait "$p" || failed=$((failed + 1)); done
	got=$(sort -u "$T/got" | wc -l)
	check "$what: every wait got the lock once node 2 let go ($got of $WAITERS, $failed failed)" \
		[ "$got/$failed" = "$WAITERS/0" ]
	check_soon 60 "$what: no request waits in node 1's rings after" none_waiting
}
on 1 touch "$(M 1)/lock"
crowd flock
crowd fcntl

# A wait interrupted by a signal ends with EINTR through its ring entry, and leaves no lock.
check "node 2 takes the lock again" holds 2 flock
on 1 flock -x "$(M 1)/lock" true &
interrupted=$!
check_soon 120 "node 1's wait is in a ring" at_least_waiting 1
pkill -INT -f "^flock -x $(M 1)/lock true"
if wait "$interrupted"; then not_ok "the interrupted wait got the lock"; else ok "the interrupted wait ended"; fi
touch "$T/release"
wait "$holder"
rm -f "$T/release"
check "node 1 takes the lock at once after (the interrupted wait left nothing)" \
	on 1 flock -n -x "$(M 1)/lock" true

# Requests that come while every entry of their queue is taken wait in the kernel, and a new
# entry takes none of them: the queue is poked for them (cfsd/ring_poke.c).  Without the
# pokes the waits queued in the kernel stay there until some other request of core 0 comes.
fusectl=/sys/fs/fuse/connections
if ! mountpoint -q $fusectl; then
	mount -t fusectl none $fusectl && echo "umount $fusectl" >>"$T/on_exit"
fi
check "node 1 unmounts" umount_on 1
touch "$T/hold"
check "node 1 mounts, its dispatching threads to add no entry until told" \
	on 1 env CFSD_TEST_HOLD_ENTRIES="$T/hold" "$BIN/cfs" mount data "$(M 1)" -o "log=$T/cfsd1.log"
conn=$(on 1 mountpoint -d "$(M 1)" | cut -d: -f2)
check "node 1's FUSE connection shows in $fusectl" [ -e "$fusectl/$conn/waiting" ]
crowd flock held

check "node 1 unmounts" umount_on 1
check "node 1 mounts dboptimized" mount_on 1 dboptimized
check "dboptimized on a cluster: requests come through /dev/fuse" [ "$(status_of 1 fuse_transport)" = dev ]
for n in 1 2; do check "node $n unmounts" umount_on $n; done
fsck_clean "after the crowds"
no_damage_logged
C down >/dev/null

if CLUSTER_ID=$(printf %.5s "${CLUSTER_ID:-cfs}")u CFS_TRANSPORT=io_uring bash "$HERE/test_cfs_flock.sh"; then
	ok "the flock and fcntl script passes with requests through io_uring"
else
	not_ok "the flock and fcntl script with requests through io_uring (above)"
fi
finish
