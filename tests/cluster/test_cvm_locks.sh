#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm config changes under the volume's cluster lock, on a 3-node corosync cluster: while one
# node holds the change lock of a volume, another node's grow is refused with a clear message
# and changes nothing; once released, the grow goes through and every node sees it.
. "$(dirname "$0")/lib.sh" "cvm cluster locks"
on() { local n=$1; shift; timeout 60 "$HERE/cluster.sh" exec "$n" "$@"; }
cvm() { local n=$1; shift; on "$n" "$BIN/cvm" --locks corosync --scan "$T" "$@"; }

C up 3 >/dev/null && ok "cluster up" || { not_ok "cluster up"; finish; }
for i in 1 2 3; do # a long-lived lock member per node, as cfsd will be
	"$HERE/cluster.sh" exec "$i" bash -c "sleep 600 | '$BIN/cfslock' -s cvm shell" >/dev/null 2>&1 &
done
for i in 0 1 2 3; do truncate -s 64M "$T/lun$i"; done
expect 0 "volume data created" "create on node 1 under the cluster lock" -- cvm 1 create data "$T/lun0" "$T/lun1"

# Node 3 is "in the middle of a change": it holds the volume's change lock.
on 3 "$BIN/cfslock" -s cvm lock cvm:data EX >"$T/holder.out" 2>&1 &
for _ in $(seq 300); do grep -q granted "$T/holder.out" && break; sleep 0.1; done
# Without the lock granted the grow below would rightly go through: say so, not that it did.
grep -q granted "$T/holder.out" && ok "node 3 holds the volume's change lock" ||
	{ not_ok "node 3 was not granted the change lock in 30 s: $(cat "$T/holder.out")"; finish; }
before=$(fingerprint)
expect 1 "being changed by another node" "grow on node 2 is refused while node 3 changes the volume" -- cvm 2 grow data "$T/lun2" "$T/lun3"
[ "$(fingerprint)" = "$before" ] && ok "the refused grow wrote nothing" || not_ok "the refused grow changed a LUN"
expect 1 "being changed by another node" "check --repair waits its turn too" -- cvm 1 check --repair data
expect 0 "clean" "a read-only check needs no lock" -- cvm 1 check data
pkill -f "^$BIN/cfslock -s cvm lock cvm:data EX"
# The lock goes once the lock service has seen its holder go: until then a grow is refused
# (and changes nothing, as above), so it is tried again until it goes through.
grows() { cvm 2 grow data "$T/lun2" "$T/lun3" 2>&1 | grep -q "volume data grown"; }
check_soon 60 "grow on node 2 after the release" grows
expect 0 "generation  2" "node 3 sees the new generation" -- cvm 3 show data
finish
