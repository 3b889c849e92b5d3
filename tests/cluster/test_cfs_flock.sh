#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# flock(2) and fcntl(2) record locks across the nodes of a cluster mount: counters
# incremented under LOCK_EX and under F_SETLKW by two processes on each of 3 nodes end exact;
# LOCK_NB and F_SETLK fail while another node holds the lock; shared locks and disjoint
# ranges coexist between nodes; F_GETLK names the holder; a lock goes with its holder's close
# or exit, and with its node's death once the node is recovered; a waiting lock is
# interrupted by a signal and leaves nothing behind; a record lock wait that would deadlock
# fails with EDEADLK, across nodes and on one; open file description locks go with their
# file; SQLite transactions from every node at once keep its database whole.  A node that locks a file alone owns its
# record locks and sends no message for them; another node's call takes them over.
. "$(dirname "$0")/cfs_lib.sh" "cfs flock and fcntl locks across nodes"
INCREMENTS=${INCREMENTS:-100}
PL_INCREMENTS=${PL_INCREMENTS:-50}

C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 256
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
# The held fence agent keeps node 3's recovery pending for as long as the checks need.
check "node 1 mounts with lock_cache=16" mount_on 1 "lock_cache=16,fence=$(held_fence)"
for n in 2 3; do check "node $n mounts" mount_on $n "fence=$(held_fence)"; done
# With CFS_TRANSPORT=io_uring or dev (test_cfs_uring.sh), the mounts must use that transport.
for n in 1 2 3; do
	[ -z "${CFS_TRANSPORT:-}" ] ||
		check "node $n: requests come through $CFS_TRANSPORT" [ "$(status_of $n fuse_transport)" = "$CFS_TRANSPORT" ]
done

on 1 bash -c "echo 0 >'$(M 1)/counter' && touch '$(M 1)/lock'"
# counted NODE LOCKFILE COUNTER N KIND: two processes on NODE, N increments each under KIND.
counted() {
	local pids=() i
	for i in 1 2; do
		on "$1" python3 "$HERE/flock_counter.py" "$(M "$1")/$2" "$(M "$1")/$3" "$4" "$5" &
		pids+=($!)
	done
	wait "${pids[@]}"
}
# counter_is NAME WANT: every node reads WANT in file NAME.
counter_is() {
	local n
	for n in 1 2 3; do
		check "node $n reads $1 at $2" on $n bash -c "[ \"\$(cat '$(M $n)/$1')\" = $2 ]"
	done
}
counter() { counted "$1" lock counter "$INCREMENTS" flock; }
at_once "$INCREMENTS increments by each of 2 processes under LOCK_EX" counter
counter_is counter $((3 * 2 * INCREMENTS))

# A program that relies on fcntl locks for all of it: SQLite with a rollback journal (its
# default; WAL mode shares memory through a mapped file, which cfs(8) says is not coherent
# across nodes), a transaction per increment from each node at once.
sqlite_db() { on "$1" python3 "$HERE/sqlite_counter.py" "$2" "$(M "$1")/counter.db" "${@:3}"; }
sqlite_db 1 make "${SQLITE_JOURNAL:-delete}"
sqlite_run() { sqlite_db "$1" run "$1" "$INCREMENTS"; }
at_once "$INCREMENTS SQLite transactions from each node" sqlite_run
want="ok $((3 * INCREMENTS)) $((3 * INCREMENTS)) $((3 * INCREMENTS))"
for n in 1 2 3; do
	got=$(sqlite_db $n check 2>&1 | tail -1)
	check "node $n: the database is whole, its counter and rows at $((3 * INCREMENTS)) ($got)" \
		[ "$got" = "$want" ]
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
# What a DBA sees: cfs locks on a third node names the file, its holder and its waiter.
on 2 flock -x "$(M 2)/lock" true &
waiter=$!
node_id() { on "$1" "$BIN/cfs" status --json "$(M "$1")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["node_id"])'; }
# shows_holder_and_waiter: cfs locks on node 3 names node 1 holding /lock EX and node 2 waiting
# for it (node 2's request may reach node 3's table some time after flock started).
shows_holder_and_waiter() {
	python3 - "$(on 3 "$BIN/cfs" locks --json "$(M 3)")" "$(node_id 1)" "$(node_id 2)" <<'PY'
import json, sys
locks, holder, waiter = json.loads(sys.argv[1])['locks'], int(sys.argv[2]), int(sys.argv[3])
mine = [l for l in locks if l.get('path') == '/lock' and l['object'].startswith('flock')]
assert any(l['node_id'] == holder and l['state'] == 'granted' and l['granted'] == 'EX'
           for l in mine), mine
assert any(l['node_id'] == waiter and l['state'] != 'granted' and l['requested'] == 'EX'
           for l in mine), mine
assert any(l['resource'] == 'meta' for l in locks), locks
PY
}
check_soon 120 "cfs locks on node 3: /lock held EX by node 1, node 2 waiting for EX" shows_holder_and_waiter
release
check "node 2's waiting flock got the lock once node 1 let go" wait $waiter
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

# The lock cache's limit holds: node 1 (lock_cache=16) keeps 40 descriptions open that each
# took and let go of a flock.  At most 16 grants stay cached there (and in every node's
# table); the others went back, and node 2 takes those at once.
on 1 python3 -c "
import fcntl, os, sys, time
fds = []
for i in range(40):
    fd = os.open(f'{sys.argv[1]}/many{i}', os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.flock(fd, fcntl.LOCK_UN)
    fds.append(fd)
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
" "$(M 1)" "$T/many.ready" "$T/release" &
many=$!
check "node 1 opened 40 files and took their flocks" \
	bash -c "for i in \$(seq 600); do [ -e '$T/many.ready' ] && exit 0; sleep 0.05; done; exit 1"
cached=$(status_of 1 locks_cached) given_back=$(status_of 1 locks_given_back)
check "node 1 keeps $cached lock grants cached (limit 16), gave $given_back back" \
	test "$cached" -le 16 -a "$given_back" -ge 24
check "node 3's table holds at most 16 of node 1's flocks of those files" \
	python3 - "$(on 3 "$BIN/cfs" locks --json "$(M 3)")" "$(node_id 1)" <<'PY'
import json, sys
locks, node = json.loads(sys.argv[1])['locks'], int(sys.argv[2])
mine = [l for l in locks if (l.get('path') or '').startswith('/many') and l['node_id'] == node
        and l['resource'].startswith('f')]  # not the open locks its inode locks' let-go took
assert 0 < len(mine) <= 16, mine
PY
check "node 2 takes LOCK_NB of the first file, whose grant node 1 gave back" \
	on 2 flock -n -x "$(M 2)/many0" true
touch "$T/release"; wait $many; rm -f "$T/release"

# ---- fcntl record locks ----
on 1 bash -c "echo 0 >'$(M 1)/pcounter' && touch '$(M 1)/plock0' '$(M 1)/plock' '$(M 1)/plock3'"
pcounter() { counted "$1" plock0 pcounter "$PL_INCREMENTS" fcntl; }
at_once "$PL_INCREMENTS increments by each of 2 processes under F_SETLKW" pcounter
counter_is pcounter $((3 * 2 * PL_INCREMENTS))
P() { local n=$1; shift; on "$n" python3 "$HERE/plock_tool.py" "$1" "$(M "$n")/plock" "${@:2}"; }
P2() { local n=$1; shift; on "$n" timeout 20 python3 "$HERE/plock_tool.py" "$1" "$(M "$n")/plock2" "${@:2}"; }
# pholds NODE START LEN r|w: a process on NODE holds the range until $T/release appears.
pholds() {
	on "$1" python3 "$HERE/plock_tool.py" hold "$(M "$1")/plock" "$2" "$3" "$4" "$T/held.p$1" "$T/release" &
	holder=$!
	for _ in $(seq 600); do [ -e "$T/held.p$1" ] && return 0; sleep 0.05; done
	return 1
}
# A file only node 1 locks is node 1's: its locks and unlocks send no message (one to claim
# it).  Node 2's calls below then take the locks node 1 holds over from it.
m0=$(status_of 1 lock_messages)
on 1 python3 -c "
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for _ in range(2000):
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fcntl.lockf(fd, fcntl.LOCK_UN)
" "$(M 1)/plock"
m1=$(status_of 1 lock_messages)
check "2000 fcntl lock+unlock pairs on node 1 alone sent $((m1 - m0)) lock messages (want at most 3)" \
	test $((m1 - m0)) -le 3
check "node 1 write-locks bytes 0-99" pholds 1 0 100 w
# A node that joins learns who owns what from the others' snapshot.  Node 2 owns plock2 when
# it unmounts: a clean unmount holds no lock for a recovery to find, so its files go at once.
on 1 touch "$(M 1)/plock2"
check "node 2 locks plock2 alone (and so owns it)" bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P2 2 try 0 1 w)"
remount() { umount_on "$1" && mount_on "$1"; }
check "node 2 mounts again while node 1 owns the file's locks" remount 2
check "node 3 write-locks plock2, which node 2 owned when it unmounted" \
	bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P2 3 try 0 0 w)"
check "F_SETLK of byte 50 on node 2 fails while node 1 holds it" bash -c "[ \"\$(cat)\" = busy ]" <<<"$(P 2 try 50 1 r)"
check "F_SETLK of bytes 100-199 on node 2 is granted (disjoint)" bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P 2 try 100 100 w)"
check "F_GETLK on node 3 names node 1's write lock, pid 0 (another node's)" \
	bash -c "[ \"\$(cat)\" = 'w 0 100 0' ]" <<<"$(P 3 get 10 5 r)"
pid1=$(pgrep -f "bin/python3 $HERE/plock_tool.py hold $(M 1)/" | head -1)
check "F_GETLK on node 1 names the holder's pid ($pid1)" \
	bash -c "[ \"\$(cat)\" = 'w 0 100 $pid1' ]" <<<"$(P 1 get 10 5 r)"
check "cfs locks on node 3 shows node 1's fcntl write lock of /plock, bytes 0-99, its pid" \
	python3 - "$(on 3 "$BIN/cfs" locks --json "$(M 3)")" "$(node_id 1)" "$pid1" <<'PY'
import json, sys
locks, node, pid = json.loads(sys.argv[1])['locks'], int(sys.argv[2]), sys.argv[3]
assert any(l['resource'] == 'fcntl' and l.get('path') == '/plock' and l['node_id'] == node
           and l['granted'] == 'EX' and f'bytes 0-99' in l['object'] and f'pid {pid}' in l['object']
           for l in locks), locks
PY
t0=$(ms)
check "a waiting F_SETLKW on node 2 is interrupted by a signal" bash -c "[ \"\$(cat)\" = interrupted ]" <<<"$(P 2 interrupted)"
ok "... after $(($(ms) - t0)) ms (alarm at 2000 ms)"
release
check "the holder's exit let go: F_SETLK on node 3 is granted (node 2's interrupted wait left nothing)" \
	bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P 3 try 0 0 w)"
check "node 2 read-locks the whole file" pholds 2 0 0 r
check "node 3 read-locks it too (shared)" bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P 3 try 0 0 r)"
check "node 1 cannot write-lock it" bash -c "[ \"\$(cat)\" = busy ]" <<<"$(P 1 try 0 0 w)"
release
# Closing any descriptor of the file drops the process's record locks (POSIX).
check "a lock goes at the holder's close of another descriptor of the file" bash -c "[ \"\$(cat)\" = granted ]" <<<"$(on 1 python3 -c "
import fcntl, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
os.close(os.open(sys.argv[1], os.O_RDONLY))
print(subprocess.run(sys.argv[2:], capture_output=True, text=True).stdout.strip())
" "$(M 1)/plock" "$HERE/cluster.sh" exec 2 python3 "$HERE/plock_tool.py" try "$(M 2)/plock" 0 0 w)"
# Deadlocks: two processes each holding a file's lock and asking for the other's; the one
# whose request closes the cycle gets EDEADLK (which comes second is up to the scheduler),
# the other the lock once the refused one exits.  Across nodes (each file first claimed by
# its node, so both leave their owners for the shared table) and on one node (two files only
# it locks, checked in its own copy).
# deadlock_pair WHAT NODE_A NODE_B: processes on NODE_A and NODE_B, files $WHAT.a and .b.
deadlock_pair() {
	local what=$1 a=$2 b=$3 pa pb
	on "$a" touch "$(M "$a")/$what.a" "$(M "$a")/$what.b"
	on "$a" timeout 20 python3 "$HERE/plock_tool.py" cross "$(M "$a")/$what.a" "$(M "$a")/$what.b" \
		"$T/$what.ready.a" "$T/$what.go" >"$T/$what.out.a" 2>&1 &
	pa=$!
	on "$b" timeout 20 python3 "$HERE/plock_tool.py" cross "$(M "$b")/$what.b" "$(M "$b")/$what.a" \
		"$T/$what.ready.b" "$T/$what.go" >"$T/$what.out.b" 2>&1 &
	pb=$!
	for _ in $(seq 400); do [ -e "$T/$what.ready.a" ] && [ -e "$T/$what.ready.b" ] && break; sleep 0.05; done
	touch "$T/$what.go"
	wait "$pa" "$pb"
	[ "$(sort "$T/$what.out.a" "$T/$what.out.b" | tr '\n' ' ')" = "deadlock granted " ] ||
		{ echo "node $a: $(cat "$T/$what.out.a"); node $b: $(cat "$T/$what.out.b")"; return 1; }
}
check "a record lock deadlock across nodes 1 and 2: one gets EDEADLK, the other the lock" \
	deadlock_pair pdl 1 2
check "a record lock deadlock of two processes on node 1: one gets EDEADLK" deadlock_pair ldl 1 1

# Open file description locks belong to the open file: the kernel does not tell the daemon
# of its last close, cfs drops them at its release (they stayed for ever before).
check "node 1 takes an OFD write lock (F_OFD_SETLKW) of the whole file" pholds 1 0 0 ow
check "node 2's OFD lock is refused meanwhile" [ "$(P 2 try 0 0 ow)" = busy ]
check "node 2's classic lock too" [ "$(P 2 try 0 0 w)" = busy ]
release
check "node 1's OFD lock went with its file: node 2 takes one" [ "$(P 2 try 0 0 ow)" = granted ]
check "and node 2's went with its file: node 1 takes a classic one" [ "$(P 1 try 0 0 w)" = granted ]

# A holder killed -9: the kernel closes its files, and its locks go.
check "node 1 write-locks the whole file" pholds 1 0 0 w
kill -9 "$(pgrep -f "bin/python3 $HERE/plock_tool.py hold $(M 1)/" | head -1)"
wait "$holder" 2>/dev/null; rm -f "$T"/held.*
check "a holder killed -9 let go: F_SETLK on node 2 is granted" bash -c "[ \"\$(cat)\" = granted ]" <<<"$(P 2 try 0 0 w)"
on 3 python3 "$HERE/plock_tool.py" hold "$(M 3)/plock3" 10 10 w "$T/held.p3" "$T/release" &
pholder=$!
check "node 3 write-locks bytes 10-19 of a file of its own before it dies" \
	bash -c "for i in \$(seq 600); do [ -e '$T/held.p3' ] && exit 0; sleep 0.05; done; exit 1"

# A dead node's flock goes once the node is recovered.
check "node 3 takes LOCK_EX" holds 3 -x
pid=$(status_of 3 pid)
touch "$T/fence.hold"
C kill 3; kill -9 "$pid"; C abort 3
t0=$(ms)
wait_until 120 recovering || not_ok "node 1 did not see node 3's recovery pending within 120 s"
check "F_SETLK on node 2 of the dead node's file fails until it is recovered" \
	bash -c "[ \"\$(cat)\" = busy ]" <<<"$(on 2 python3 "$HERE/plock_tool.py" try "$(M 2)/plock3" 0 0 w)"
rm -f "$T/fence.hold"
check "node 1 gets LOCK_EX after node 3 died" on 1 flock -w 60 -x "$(M 1)/lock" true
ok "node 1 got it $(($(ms) - t0)) ms after node 3 died (token 1000 ms, and the recovery held for the check before)"
check "node 2 gets node 3's record lock after its recovery" on 2 bash -c "
	for i in \$(seq 120); do
		[ \"\$(python3 '$HERE/plock_tool.py' try '$(M 2)/plock3' 10 10 w)\" = granted ] && exit 0
		sleep 0.5
	done; exit 1"
touch "$T/release"; wait "$holder" "$pholder" 2>/dev/null; rm -f "$T/release"

for n in 1 2; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the flock tests"
finish
