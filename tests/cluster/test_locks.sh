#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# libcfslock's corosync backend on real corosync clusters of 3 and 5 nodes (tests/cluster):
# (a) mutual exclusion of a counter on a shared LUN file, (b) PR everywhere at once, (c) the
# blocking callback, (d) value blocks between nodes, (e) a killed holder (client, then corosync)
# stays recovering until recovery is declared done, (f) a partitioned minority loses quorum and
# its calls fail while the majority goes on, and heal rejoins it, (g) every grant and release is
# logged and checked for incompatible overlaps.  Needs root; says "skip" otherwise.
. "$(dirname "$0")/lib.sh" "cluster lock tests"
# Every client call is bounded in time, so a hang fails its check instead of the whole run.
L() { local n=$1; shift; timeout "${LONG:-120}" "$HERE/cluster.sh" exec "$n" "$BIN/cfslock" --log "$T/events" "$@"; }
holder_pid() { pgrep -f "^$BIN/cfslock --log $T/events $1" | head -1; }
# wait_done PID SECONDS: the background call finished in time and succeeded.
wait_done() {
	local end=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt "$end" ]; do sleep 0.1; done
	kill -0 "$1" 2>/dev/null && { kill "$1"; return 1; }
	wait "$1"
}
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }

# Run `cfslock shell` on a node with a FIFO as input; its output goes to $T/shell.NAME.
start_shell() { # name node
	rm -f "$T/in.$1" "$T/shell.$1"
	mkfifo "$T/in.$1"
	C exec "$2" "$BIN/cfslock" --log "$T/events" shell <"$T/in.$1" >"$T/shell.$1" 2>&1 &
	exec {fd}>"$T/in.$1"
	eval "SHELL_FD_$1=$fd"
	wait_for "$T/shell.$1" "ready" 60
}
say() { local v="SHELL_FD_$1"; echo "$2" >&"${!v}"; }
wait_for() { # file text seconds
	local end=$((SECONDS + $3))
	while [ $SECONDS -lt "$end" ]; do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
check() { if "$@"; then ok "$what"; else not_ok "$what"; fi; }
quiet() { "$@" >/dev/null; }
recovering_locks_become() { # count: node 3's dump shows that many recovering locks, soon
	local end=$((SECONDS + 60))
	while [ $SECONDS -lt "$end" ]; do
		[ "$(L 3 dump | grep -c '^ *(recovering')" -eq "$1" ] && return 0
		sleep 0.5
	done
	return 1
}

run_cluster() {
	local n=$1 minority
	C up "$n" >/dev/null || { not_ok "$n nodes: cluster up"; return; }
	ok "$n nodes: cluster up and quorate"
	: >"$T/events"
	# This run's outputs start empty: a wait that reads one before its writer has started
	# must not find the last run's (a 3-node run's "granted" had the 5-node run look for a
	# holder that was not running yet, kill its node's corosync before it asked, and see
	# the lock granted to another).
	rm -f "$T"/*.hold "$T"/*.out "$T"/b.* "$T"/h.dump*
	# A long-lived member on every node, as cfsd will be: the replicated table lives in the
	# members, so short-lived test clients need someone to keep it.
	for node in $(seq 1 "$n"); do start_shell "d$node" "$node"; done

	# (a) K processes on every node, 6,000 increments in all, under EX.  Each increment is a
	# lock round trip between nodes: on one loaded core with the sanitizers the 5-node run
	# made 4,500 of 10,000 in the two minutes every other call gets, so these calls get 15.
	local k=2 procs=$((n * 2)) total=6000
	dd if=/dev/zero of="$T/counter" bs=4096 count=1 status=none
	local i=0 pids=()
	for node in $(seq 1 "$n"); do
		for _ in $(seq 1 $k); do
			local rounds=$((total / procs + (i < total % procs ? 1 : 0)))
			LONG=900 L "$node" counter cnt "$T/counter" "$rounds" &
			pids+=($!)
			i=$((i + 1))
		done
	done
	local failed=0
	for p in "${pids[@]}"; do wait_done "$p" 900 || failed=1; done
	local value
	value=$(python3 -c 'import struct,sys; print(struct.unpack("<Q", open(sys.argv[1],"rb").read(8))[0])' "$T/counter")
	what="$n nodes (a): $procs processes, $total increments under EX: counter $value"
	check [ "$failed$value" = "0$total" ]

	# (b) PR held on all nodes at once.
	pids=()
	for node in $(seq 1 "$n"); do
		L "$node" --hold 60 lock rb PR >"$T/b.$node" &
		pids+=($!)
	done
	for node in $(seq 1 "$n"); do wait_for "$T/b.$node" granted 30; done
	local granted
	granted=$(L 1 dump | grep -c '^rb .*granted *PR')
	what="$n nodes (b): PR granted on all $n nodes at once ($granted)"
	check [ "$granted" -eq "$n" ]
	pkill -TERM -f "^$BIN/cfslock --log $T/events --hold 60 lock rb PR"
	for p in "${pids[@]}"; do wait_done "$p" 20; done

	# (c) blocking callback, (d) value block.
	start_shell a 1
	say a "lock rc EX"
	wait_for "$T/shell.a" "done rc ok EX" 60
	L 2 --hold 0.1 lock rc PR >"$T/c.out" &
	local waiter=$!
	what="$n nodes (c): the EX holder on node 1 gets the blocking callback for PR"
	check wait_for "$T/shell.a" "blocking rc PR" 60
	sleep 0.3
	what="$n nodes (c): PR is not granted while EX is held"
	check [ ! -s "$T/c.out" ]
	say a "lvb rc hello-from-1"
	say a "unlock rc"
	what="$n nodes (c): PR granted after the release"
	check wait_done "$waiter" 60
	start_shell b 2
	say b "lock rc PR"
	wait_for "$T/shell.b" "done rc ok PR" 60
	say b "show rc"
	what="$n nodes (d): the value block written on release from EX reaches node 2"
	check wait_for "$T/shell.b" "show rc PR lvb valid hello-from-1" 60
	say b "unlock rc"
	eval "exec ${SHELL_FD_a}>&- ${SHELL_FD_b}>&-"

	# (e) kill -9 the client holding EX: recovering until recovery is declared done.
	L 1 lock re EX >"$T/e.hold" 2>&1 &
	wait_for "$T/e.hold" granted 60
	local holder
	holder=$(holder_pid "lock re EX")
	kill -9 "$holder"
	echo "$(mono_ns) 1 $holder release re EX" >>"$T/events"
	L 2 --hold 0.1 lock re EX >"$T/e.out" &
	waiter=$!
	sleep 2
	what="$n nodes (e): EX of a killed client is not granted to another before recovery"
	check [ ! -s "$T/e.out" ]
	what="$n nodes (e): the dump shows it recovering"
	check bash -c "timeout 30 '$HERE/cluster.sh' exec 3 '$BIN/cfslock' dump | grep -q recovering"
	L 3 recovery-done 1
	what="$n nodes (e): granted once recovery of node 1 is done"
	check wait_done "$waiter" 60

	# ... and kill -9 of corosync on a node whose client holds EX.
	L "$n" lock re2 EX >"$T/e2.hold" 2>&1 &
	wait_for "$T/e2.hold" granted 60
	holder=$(holder_pid "lock re2 EX")
	C kill "$n"
	echo "$(mono_ns) $n $holder release re2 EX" >>"$T/events"
	L 1 --hold 0.1 lock re2 EX >"$T/e2.out" &
	waiter=$!
	sleep 3
	what="$n nodes (e): EX of a node whose corosync died is held until recovery"
	check [ ! -s "$T/e2.out" ]
	what="$n nodes: the other nodes' clients hear that node $n left"
	check wait_for "$T/shell.d1" "member $n left" 60
	L 2 recovery-done "$n"
	what="$n nodes (e): granted after recovery of node $n"
	check wait_done "$waiter" 60
	kill -9 "$holder" 2>/dev/null
	C start "$n"
	C wait-quorum "$n" yes 60

	# (f) partition a minority.
	if [ "$n" -ge 5 ]; then minority="4 5"; else minority="2"; fi
	C partition $minority
	for m in $minority; do C wait-quorum "$m" no 30; done
	what="$n nodes (f): the minority's clients get the quorum event"
	check wait_for "$T/shell.d${minority%% *}" "quorum no" 60
	L "${minority%% *}" --hold 0.1 lock rf EX >/dev/null 2>&1
	local rc=$?
	what="$n nodes (f): a minority node's lock call fails with 'no quorum' (exit 4, got $rc)"
	check [ "$rc" -eq 4 ]
	what="$n nodes (f): the majority goes on"
	check quiet L 1 --hold 0.1 lock rf EX
	C heal
	for m in $minority; do C wait-quorum "$m" yes 60; done
	what="$n nodes (f): after heal the minority node locks again"
	check quiet L "${minority%% *}" --hold 0.1 lock rf EX
	what="$n nodes (f): a long-lived member of the minority rejoined and locks again"
	say "d${minority%% *}" "lock rk EX"
	check wait_for "$T/shell.d${minority%% *}" "done rk ok EX" 60
	say "d${minority%% *}" "unlock rk"

	for node in $(seq 1 "$n"); do eval "exec {SHELL_FD_d$node}>&-"; done

	# Several members join at once and each gets the whole table; several leave at once and
	# all their locks are recovering.
	L 1 lock rh1 EX >"$T/h1.hold" 2>&1 &
	L 2 lock rh2 PR >"$T/h2.hold" 2>&1 &
	wait_for "$T/h1.hold" granted 60
	wait_for "$T/h2.hold" granted 60
	pids=()
	for node in $(seq 1 "$n"); do
		L "$node" dump >"$T/h.dump$node" 2>&1 &
		pids+=($!)
	done
	local seen=0
	for i in "${!pids[@]}"; do
		if wait_done "${pids[$i]}" 60 && grep -q '^rh1 .*granted *EX' "$T/h.dump$((i + 1))" &&
			grep -q '^rh2 .*granted *PR' "$T/h.dump$((i + 1))"; then
			seen=$((seen + 1))
		else
			echo "# the dump of node $((i + 1)) lacks rh1 or rh2:"
			sed 's/^/#   /' "$T/h.dump$((i + 1))"
		fi
	done
	what="$n nodes: $n members joining at once each got the whole table ($seen)"
	check [ "$seen" -eq "$n" ]
	local h1 h2
	h1=$(holder_pid "lock rh1 EX")
	h2=$(holder_pid "lock rh2 PR")
	kill -9 "$h1" "$h2"
	echo "$(mono_ns) 1 $h1 release rh1 EX" >>"$T/events"
	echo "$(mono_ns) 2 $h2 release rh2 PR" >>"$T/events"
	what="$n nodes: two members leaving at once both leave recovering locks"
	check recovering_locks_become 2
	L 3 recovery-done 1
	L 3 recovery-done 2

	# (g) no two incompatible grants overlapped in anything above.
	what="$n nodes (g): no incompatible grants overlapped ($(python3 "$HERE/check_overlap.py" "$T/events" | tail -1))"
	check python3 "$HERE/check_overlap.py" "$T/events"
	C down
}

# The checker itself must catch an overlap, or (g) proves nothing.
printf '%s\n' "1 1 10 grant r EX" "2 2 20 grant r PR" "3 1 10 release r EX" "4 2 20 release r PR" \
	"5 1 10 grant r PR" "6 2 20 grant r CR" "7 1 10 release r PR" "8 2 20 release r CR" >"$T/bad"
what="the overlap checker finds a planted EX/PR overlap and accepts PR/CR"
check [ "$(python3 "$HERE/check_overlap.py" "$T/bad" | grep -c '^overlap')" -eq 1 ]

for n in ${CLUSTER_SIZES:-3 5}; do run_cluster "$n"; done
finish
