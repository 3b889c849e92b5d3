#!/usr/bin/env bash
# flock(2) across the nodes of a cluster mount: a counter incremented under LOCK_EX by two
# processes on each of 3 nodes ends exact; LOCK_NB fails while another node holds the lock;
# LOCK_SH is shared between nodes; a lock goes with its holder's exit, and with its node's
# death once the node is recovered; a waiting flock is interrupted by a signal and leaves
# nothing behind.
. "$(dirname "$0")/cfs_lib.sh" "cfs flock across nodes"
INCREMENTS=${INCREMENTS:-100}

C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 256
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done

on 1 bash -c "echo 0 >'$(M 1)/counter' && touch '$(M 1)/lock'"
counter() { # node
	local pids=() i
	for i in 1 2; do
		on "$1" python3 "$HERE/flock_counter.py" "$(M "$1")/lock" "$(M "$1")/counter" "$INCREMENTS" &
		pids+=($!)
	done
	wait "${pids[@]}"
}
at_once "$INCREMENTS increments by each of 2 processes under LOCK_EX" counter
want=$((3 * 2 * INCREMENTS))
for n in 1 2 3; do
	check "node $n reads the counter at $want" on $n bash -c "[ \"\$(cat '$(M $n)/counter')\" = $want ]"
done

# holds NODE MODE-FLAG: a flock(1) on node NODE that holds the lock until $T/release appears.
holds() {
	on "$1" flock "$2" "$(M "$1")/lock" bash -c "touch '$T/held.$1'; while [ ! -e '$T/release' ]; do sleep 0.05; done" &
	holder=$!
	for _ in $(seq 600); do [ -e "$T/held.$1" ] && return 0; sleep 0.05; done
	return 1
}
release() { touch "$T/release"; wait "$holder"; rm -f "$T/release" "$T"/held.*; }

check "node 1 takes LOCK_EX" holds 1 -x
if on 2 flock -n -x "$(M 2)/lock" true; then not_ok "LOCK_NB on node 2 succeeded while node 1 holds LOCK_EX"
else ok "LOCK_NB on node 2 fails while node 1 holds LOCK_EX"; fi
if on 3 flock -n -s "$(M 3)/lock" true; then not_ok "LOCK_NB of LOCK_SH on node 3 succeeded over LOCK_EX"
else ok "LOCK_NB of LOCK_SH on node 3 fails too"; fi
release
check "node 2's LOCK_NB succeeds once node 1 let go" on 2 flock -n -x "$(M 2)/lock" true

check "node 1 takes LOCK_SH" holds 1 -s
check "node 2 takes LOCK_SH at the same time" on 2 flock -n -s "$(M 2)/lock" true
if on 3 flock -n -x "$(M 3)/lock" true; then not_ok "LOCK_EX on node 3 granted over node 1's LOCK_SH"
else ok "LOCK_EX on node 3 waits for node 1's LOCK_SH"; fi
release

# A description that unlocked but stays open keeps its grant cached on its node: another
# node's LOCK_NB must still get the lock, at once or after a few message times.
on 1 python3 -c "
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
for _ in range(3):
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.flock(fd, fcntl.LOCK_UN)
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
" "$(M 1)/lock" "$T/unlocked" "$T/release" &
holder=$!
for _ in $(seq 600); do [ -e "$T/unlocked" ] && break; sleep 0.05; done
check "LOCK_NB on node 2 succeeds after node 1 unlocked (its file still open there)" \
	on 2 flock -n -x "$(M 2)/lock" true
check "and LOCK_NB of LOCK_SH on node 3" on 3 flock -n -s "$(M 3)/lock" true
release

# A waiting flock interrupted by a signal: EINTR, and its request is gone (the next one on
# another node is granted at once when the holder lets go).
check "node 1 takes LOCK_EX again" holds 1 -x
t0=$(ms)
on 2 python3 -c "
import fcntl, os, signal, sys
def alarm(*a): raise InterruptedError()
signal.signal(signal.SIGALRM, alarm)
signal.alarm(2)
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    print('granted')
except InterruptedError:
    print('interrupted')
" "$(M 2)/lock" >"$T/intr.out" 2>&1
t1=$(ms)
check "a waiting LOCK_EX on node 2 is interrupted by a signal (EINTR after $((t1 - t0)) ms)" grep -qx interrupted "$T/intr.out"
release
check "node 3 gets LOCK_EX at once after node 1 lets go (node 2's interrupted wait left nothing)" \
	on 3 flock -n -x "$(M 3)/lock" true

# A holder that exits (its description closed) lets go.
on 1 python3 -c "
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
os._exit(0)
" "$(M 1)/lock"
check "a lock goes when its holder exits without unlocking" on 2 flock -n -x "$(M 2)/lock" true

# A dead node's flock goes once the node is recovered.
check "node 3 takes LOCK_EX" holds 3 -x
pid=$(status_of 3 pid)
C kill 3; kill -9 "$pid"; C abort 3
t0=$(ms)
check "node 1 gets LOCK_EX after node 3 died" on 1 flock -w 60 -x "$(M 1)/lock" true
ok "node 1 got it $(($(ms) - t0)) ms after node 3 died (token 1000 ms)"
touch "$T/release"; wait "$holder" 2>/dev/null; rm -f "$T/release"

for n in 1 2; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the flock tests"
finish
