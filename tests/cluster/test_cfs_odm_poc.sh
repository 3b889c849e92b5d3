#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The seed's proof of concept in miniature: POC_NODES nodes (5 here; `make poc` runs the seed's
# 14), one volume of 4 LUNs striped at 256 KiB, `mkfs.cfs -p corosync -J N`, a dboptimized
# mount on each, POC_INSTANCES database instances (10 here, 60 in `make poc`) of POC_PROCS
# processes (10) spread round robin over the nodes, all running at once through libodm;
# `odmstat --cluster` on every node shows them all; then the last node dies (its corosync,
# cfsd and instances killed) and the instances on the others go on without an error through
# its recovery; fsck clean.  Prints each node's cfsd and corosync memory and the lock messages
# a second while the instances run.
. "$(dirname "$0")/cfs_lib.sh" "cfs ODM proof of concept"
NODES=${POC_NODES:-5} INSTANCES=${POC_INSTANCES:-10} PROCS=${POC_PROCS:-10}
FGS=$((PROCS - 3)) # + dbw0, lgwr and the instance's own process
LIB=$(dirname "$BIN")/lib/libodm.so
C up "$NODES" >/dev/null && ok "cluster of $NODES nodes up" || { not_ok "cluster up"; finish; }
make_data 1024
"$BIN/mkfs.cfs" -p corosync -J "$NODES" data >/dev/null 2>&1
# The test's fence agent holds a dead node's recovery while it looks at the survivors.
for n in $(seq "$NODES"); do mount_on "$n" "dboptimized,fence=$(held_fence)" || not_ok "node $n mounts"; done

# Round robin: instance i on node (i - 1) % NODES + 1, each node's started by one odmload.
per=() i=0
for n in $(seq "$NODES"); do per[n]=0; done
for i in $(seq "$INSTANCES"); do n=$(((i - 1) % NODES + 1)); per[n]=$((per[n] + 1)); done
for n in $(seq "$NODES"); do
	[ "${per[n]}" -gt 0 ] || continue
	on $n mkdir -p "$(M $n)/db$n"
	on $n "$BIN/odmload" --lib "$LIB" --dir "$(M $n)/db$n" --db "P$$n" --instance "N${n}x" \
		--instances "${per[n]}" --procs "$FGS" --files 2 --file-mib 4 --redo-mib 2 \
		--think-ms 100 --until "$T/gate" --seed "$n" >"$T/load$n.out" 2>&1 &
	load[n]=$!
done
running_here() { # node: its instances' processes all listed by its odmstat -l
	on "$1" "$BIN/odmstat" -l --json >"$T/list$1.json" &&
		python3 -c "import json, sys; n = len(json.load(open(sys.argv[1]))); assert n == int(sys.argv[2]), n" \
			"$T/list$1.json" $((per[$1] * PROCS))
}
all_running() { for n in $(seq "$NODES"); do running_here "$n" || return 1; done; }
check_soon 900 "$INSTANCES instances of $PROCS processes running at once on $NODES nodes" all_running
shows_all() { # node: odmstat --cluster there lists every instance
	on "$1" "$BIN/odmstat" --cluster="$(M "$1")" --by instance --json >"$T/inst$1.json" &&
		python3 -c "
import json, sys
keys = {r['key'] for r in json.load(open(sys.argv[1]))['rows'] if '/N' in r['key']}
assert len(keys) == int(sys.argv[2]), (len(keys), sorted(keys))" "$T/inst$1.json" "$INSTANCES"
}
for n in $(seq "$NODES"); do check_soon 60 "odmstat --cluster on node $n shows the $INSTANCES instances" shows_all "$n"; done

# What a node costs while they run.
m0=0
for n in $(seq "$NODES"); do m0=$((m0 + $(status_of "$n" lock_messages))); done
t0=$(ms)
sleep 5
m1=0
for n in $(seq "$NODES"); do m1=$((m1 + $(status_of "$n" lock_messages))); done
echo "# lock messages while the instances run: $(((m1 - m0) * 1000 / ($(ms) - t0))) a second, all nodes"
for n in $(seq "$NODES"); do
	cpid=$(status_of "$n" pid)
	echo "# node $n: cfsd $(awk '/VmRSS/ {print $2}' /proc/"$cpid"/status) KiB," \
		"corosync $(awk '/VmRSS/ {print $2}' /proc/"$(C pid "$n")"/status) KiB"
done

# The last node dies with its instances; the others' go on while its recovery is pending and
# after it.
dead=$NODES
dpid=$(status_of "$dead" pid)
touch "$T/fence.hold"
C kill "$dead"
kill -9 "$dpid"
pkill -9 -f "odmload .*$(M "$dead")/" || true
C abort "$dead"
wait "${load[dead]}" 2>/dev/null
check_soon 120 "node 1 sees node $dead's recovery pending" recovering
reads_now() { # node: its instances' reads so far
	on "$1" "$BIN/odmstat" --json | python3 -c "import json,sys; print(sum(r['sync']['reads'] for r in json.load(sys.stdin)['rows']))"
}
reads_grew() { [ "$(reads_now 1)" -gt "$1" ]; }
check_soon 60 "node 1's instances read on while node $dead's recovery is pending" reads_grew "$(reads_now 1)"
rm -f "$T/fence.hold"
check_soon 120 "node $dead's recovery done on the survivors" recovery_done
check_soon 60 "node 1's instances read on after it" reads_grew "$(reads_now 1)"
touch "$T/gate"
for n in $(seq $((NODES - 1))); do
	[ -n "${load[n]:-}" ] || continue
	if wait "${load[n]}"; then ok "node $n's ${per[n]} instances ran without an error through node $dead's death"
	else not_ok "node $n's instances: $(grep -v " 0 failed" "$T/load$n.out" | head -5 | tr '\n' ' ')"; fi
done
for n in $(seq $((NODES - 1))); do umount_on "$n" || not_ok "node $n unmounts"; done
fsck_clean "after the proof of concept"
no_damage_logged
finish
