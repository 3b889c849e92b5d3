#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Kills during a restripe of a volume mounted on three nodes, 9 rounds (make soak: up to 40),
# each from a random node R (the restriper), while every node runs an O_DIRECT block verifier
# that saves what was acknowledged when its mount dies:
#   - R's daemon dies at a chosen write of its restripe (CVM_FAULT_CRASH_AFTER: staging,
#     config records, placing), often in the middle of a batch: the survivor that recovers it
#     finishes the batch it left staged;
#   - another node dies (cfsd and corosync killed) while R restripes: R goes on once the
#     survivors have recovered it;
#   - the command is killed: R's daemon goes on with the restripe; R unmounts (which pauses it).
# After each: the dead node mounts again and finds every write it had acknowledged, the
# others' verifiers never saw a wrong block, and no batch is left staged.  At the end the
# restripe finishes, every file is as written, and fsck.cfs -n is clean.
# Before them, one round held open by test gates: the restriper's daemon is killed having
# recorded a batch done but not told the others, and the survivor that recovers it reads every
# file (the filesystem is full, so the batch moves file data) while its recovery is held
# between the restripe's hook and the journal replay.
. "$(dirname "$0")/cfs_lib.sh" "cfs restripe on a cluster, killed"
VERIFIER=$HERE/../cfs/block_verifier.py
ROUNDS=${RESTRIPE_KILL_ROUNDS:-9}
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
FENCE=fence=$(held_fence) # no hold: a dead node is fenced at once
truncate -s 64M "$T/lun0" "$T/lun1"
"$BIN/cvm" create data "$T/lun0" "$T/lun1" >/dev/null
"$BIN/mkfs.cfs" -p corosync -J 3 data >/dev/null
# The gates stay open until their files are made (held_round).
for n in 1 2 3; do
	mkdir -p "$(M $n)"
	check "node $n mounts" on $n env CFSD_TEST_HOLD_BATCH_END="$T/hold_batch$n" \
		CFSD_TEST_HOLD_RECOVERY="$T/hold_recovery$n" "$BIN/cfs" mount data "$(M $n)" \
		-o "log=$T/cfsd$n.log,dboptimized,$FENCE"
done
on 1 bash -c "head -c 24M /dev/urandom >'$(M 1)/before1' && head -c 24M /dev/urandom >'$(M 1)/before2'"
# The rest of the space (but 4 MiB) in a third file.
fill=$(( $(on 1 df --output=avail -B1M "$(M 1)" | tail -1) - 4 ))
on 1 bash -c "head -c ${fill}M /dev/urandom >'$(M 1)/before3'"
files="before1 before2 before3"
on 1 bash -c "cd '$(M 1)' && sha256sum $files" >"$T/sums"
as_written() { on "$1" bash -c "cd '$(M "$1")' && sha256sum $files | cmp -s - '$T/sums'"; }
truncate -s 64M "$T/lun2" "$T/lun3"
"$BIN/cvm" grow data "$T/lun2" "$T/lun3" >/dev/null
check "grown onto 2 more LUNs" on 1 "$BIN/cfs" grow "$(M 1)"

moves() { restripe_json moves_done; }
not_staged() { [ "$(restripe_json staged)" = 0 ]; }
past() { [ "$(moves)" -ge "$1" ]; }
# start_verifier NODE: node N's verifier, going on from what it had acknowledged.  It runs
# until its node dies or the end says stop, as long as the rounds take: no time limit of its
# own (a node that no round kills keeps its verifier the whole run, which on a slow machine
# took more than the 300 s of one command and was taken for a hang); its stop is bounded.
start_verifier() {
	local n=$1
	rm -f "$T/stop$n"
	ON_LIMIT=0 on $n python3 "$VERIFIER" "$(M $n)/v$n" 2 "$T/stop$n" $n direct "$T/state$n" >"$T/verifier$n.out" 2>&1 &
	eval "verifier$n=\$!"
	wait_until 120 grep -q ready "$T/verifier$n.out" || not_ok "node $n's verifier did not start: $(cat "$T/verifier$n.out")"
}
# gone_from S N: node S lists node N neither as mounted nor as recovering.
gone_from() {
	on "$1" "$BIN/cfs" status --json "$(M "$1")" | python3 -c "import json,sys; s=json.load(sys.stdin); sys.exit($2 in [m['node_id'] for m in s['mounted'] + s['recovering']])"
}
# dead NODE: its mount is gone; the survivors have recovered it; its verifier ended having
# saved what was acknowledged.
dead() {
	local n=$1 pid=verifier$1 code s
	s=$(( n % 3 + 1 ))
	wait "${!pid}"
	code=$?
	# 3: it saved what was acknowledged; 2: its mount died before its first write; 0: the stop
	# came first
	[ $code -le 3 ] && [ $code -ne 1 ] || not_ok "node $n's verifier as its mount died: exit $code: $(tail -2 "$T/verifier$n.out")"
	on "$n" umount -l "$(M "$n")" 2>/dev/null
	# Seen dead and recovered (a node mounting again before its death is seen would find its
	# own old locks in the way).
	wait_until 120 gone_from $s $n || not_ok "node $n still mounted or recovering on node $s after 120 s"
}
# back NODE: mounted again; every write it had acknowledged is there; its verifier goes on.
back() {
	local n=$1
	C pid "$n" >/dev/null 2>&1 || { C start "$n" >/dev/null && C wait-quorum "$n" yes 30 >/dev/null 2>&1; }
	mount_on "$n" "dboptimized,$FENCE" || { not_ok "node $n mounts again: $(tail -3 "$T/cfsd$n.log")"; return 1; }
	on $n python3 "$VERIFIER" check "$(M $n)/v$n" "$T/state$n" >"$T/check$n.out" 2>&1 ||
		not_ok "node $n after its death: $(cat "$T/check$n.out")"
	start_verifier "$n"
}
for n in 1 2 3; do start_verifier $n; done

# held_round: node 2's daemon records a batch done and is killed before it lets the batch's
# lock go (its value block would have told the others); the survivor that recovers it must
# read the batch's chunks in their new places.  Each node read the files first, so that the
# dead node holds none of their glocks in a mode that keeps the survivors' reads waiting.
held_round() {
	local job s pid
	for n in 1 2 3; do as_written $n || not_ok "node $n reads the files before the restripe"; done
	touch "$T/hold_recovery1" "$T/hold_recovery3"
	pid=$(status_of 2 pid)
	ON_LIMIT=0 on 2 "$BIN/cvm" restripe data --rate 1 >"$T/round.out" 2>&1 &
	job=$!
	# Past the first batches (the first is one park, which leaves its chunk where it was too).
	wait_until 120 past 10 || not_ok "held round: node 2's restripe did not reach move 10"
	touch "$T/hold_batch2"
	wait_until 300 test -e "$T/hold_batch2.held" || not_ok "held round: node 2 finished no batch"
	kill -9 "$pid"
	wait_until 120 bash -c "ls '$T'/hold_recovery[13].held" ||
		not_ok "held round: no survivor began recovering node 2"
	s=$(basename "$(ls "$T"/hold_recovery[13].held | head -1)" .held)
	s=${s#hold_recovery}
	check "held round: node $s, recovering node 2 (dead having moved a batch it told nobody of), reads every file as written" as_written "$s"
	rm -f "$T/hold_recovery1" "$T/hold_recovery3" "$T/hold_batch2"
	wait "$job"
	dead 2
	check_soon 120 "held round: the survivors left no batch staged" not_staged
	back 2
}
held_round

for ((i = 1; i <= ROUNDS; i++)); do
	# A run that took fewer rounds than ROUNDS to finish (a slower machine): no restripe left.
	if [ "$i" -gt 1 ] && [ "$(restripe_json state)" = 0 ]; then
		ok "the restripe ended after $((i - 1)) rounds of kills"
		break
	fi
	r=$((RANDOM % 3 + 1))
	kind=$((i % 3))
	from=$(moves)
	case $kind in
	0) # R's daemon dies at write k of its restripe
		k=$((1 + RANDOM % 200))
		touch "$T/stop$r"
		wait "$(eval echo \$verifier$r)" || not_ok "round $i: node $r's verifier: $(tail -2 "$T/verifier$r.out")"
		on $r "$BIN/cfs" umount "$(M $r)" || not_ok "round $i: node $r unmounts"
		on $r env CVM_FAULT_CRASH_AFTER=$k "$BIN/cfs" mount data "$(M $r)" -o "log=$T/cfsd$r.log,dboptimized,$FENCE" ||
			not_ok "round $i: node $r mounts with a crash point"
		start_verifier $r
		on $r "$BIN/cvm" restripe data >"$T/round.out" 2>&1
		dead $r
		check_soon 120 "round $i: node $r's daemon died at write $k of its restripe (move $from to $(moves)); the survivors left no batch staged" not_staged
		back $r
		;;
	1) # another node dies while R restripes
		o=$(( (r + RANDOM % 2) % 3 + 1 ))
		on $r "$BIN/cvm" --scan "$T" restripe data --rate 1 >"$T/round.out" 2>&1 &
		job=$!
		want=$((from + 10 + RANDOM % 30))
		wait_until 120 bash -c "[ \$('$BIN/cvm' show data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"volumes\"][0][\"restripe\"][\"moves_done\"])') -ge $want ]" ||
			not_ok "round $i: node $r's restripe did not reach move $want"
		pid=$(status_of $o pid)
		C kill $o
		kill -9 "$pid"
		C abort $o
		dead $o
		at=$(moves)
		wait_until 120 bash -c "[ \$('$BIN/cvm' show data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"volumes\"][0][\"restripe\"][\"moves_done\"])') -gt $((at + 5)) ]" &&
			ok "round $i: node $o died at move $at while node $r restriped; node $r went on" ||
			not_ok "round $i: node $r's restripe did not go on after node $o died at move $at: $(cat "$T/round.out")"
		pkill -INT -f "^$BIN/cvm --scan $T restripe data"
		wait $job
		back $o
		;;
	2) # the command dies; R's daemon goes on until R unmounts
		on $r "$BIN/cvm" --scan "$T" restripe data --rate 1 >"$T/round.out" 2>&1 &
		job=$!
		wait_until 120 bash -c "[ \$('$BIN/cvm' show data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"volumes\"][0][\"restripe\"][\"moves_done\"])') -gt $((from + 5 + RANDOM % 20)) ]"
		pkill -9 -f "^$BIN/cvm --scan $T restripe data"
		wait $job
		at=$(moves)
		wait_until 120 bash -c "[ \$('$BIN/cvm' show data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"volumes\"][0][\"restripe\"][\"moves_done\"])') -gt $((at + 5)) ]" ||
			not_ok "round $i: node $r's daemon did not go on after its command was killed at move $at"
		touch "$T/stop$r"
		wait "$(eval echo \$verifier$r)" || not_ok "round $i: node $r's verifier: $(tail -2 "$T/verifier$r.out")"
		check "round $i: the command killed at move $at, its daemon went on; node $r unmounts, which pauses it" umount_on $r
		back $r
		;;
	esac
	for n in 1 2 3; do
		p=verifier$n
		kill -0 "${!p}" 2>/dev/null || not_ok "round $i: node $n's verifier stopped: $(tail -2 "$T/verifier$n.out")"
	done
done

expect 0 "one stripe set" "the restripe finishes from node 2 (or had)" -- restripe_on 2
for n in 1 2 3; do
	touch "$T/stop$n"
	p=verifier$n
	stopped "node $n's verifier" "${!p}"
	wait "${!p}" && grep -q "every read as written" "$T/verifier$n.out" &&
		ok "node $n's verifier read every block as written" ||
		not_ok "node $n's verifier: $(tail -3 "$T/verifier$n.out")"
	check "node $n reads the files from before as written" as_written $n
done
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after $ROUNDS kills during the restripe"
check "one stripe set over the 4 LUNs" bash -c "'$BIN/cvm' show data --json | python3 -c 'import json,sys; v=json.load(sys.stdin)[\"volumes\"][0]; assert v[\"restripe\"] is None and len(v[\"stripe_sets\"])==1, v'"
finish
