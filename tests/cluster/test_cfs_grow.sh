#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Growth while mounted on three nodes: the volume is nearly full; `cvm grow` adds a LUN and
# `cfs grow` on node 1 takes it in.  Nodes 2 and 3 see the new size and use the new space
# without a remount (each opens the volume again when it next takes the metadata lock), a
# file written there by node 3 reads back whole on node 2, an ODM instance on node 2 keeps
# writing through it all, and one on node 3 creates a file in the new space.  Node 3's
# unmount shows in odmstat --cluster as such (not as a death).  An ODM process started between
# `cvm grow` and `cfs grow` finds the new LUN.  Then slots: made with 3,
# all in use, a fourth node is refused until `cfs addslots` on node 1 adds one while three
# nodes have it mounted; the fourth node mounts, reads and writes.  fsck.cfs -n clean.
. "$(dirname "$0")/cfs_lib.sh" "cfs growth on a cluster"
ODM=$(dirname "$BIN")/tests/odm
export ODM_TEST_DB="GR$$"
C up 4 >/dev/null && ok "cluster of 4 nodes up" || { not_ok "cluster up"; finish; }
make_data 48
"$BIN/mkfs.cfs" -p corosync -J 3 data >/dev/null
for n in 1 2 3; do check "node $n mounts dboptimized" mount_on $n dboptimized; done
blocks() { on "$1" stat -f -c %b "$(M "$1")"; }
free_mib() { on "$1" stat -f -c '%a %S' "$(M "$1")" | awk '{print int($1 * $2 / 1048576)}'; }

on 2 "$ODM/odm_race" create "$(M 2)/w.dbf" 8 || not_ok "node 2 creates w.dbf"
on 3 "$ODM/odm_race" create "$(M 3)/between.dbf" 2 || not_ok "node 3 creates between.dbf"
on 2 "$ODM/odm_race" writer "$(M 2)/w.dbf" >"$T/writer.out" 2>&1 &
writer=$!
# Nearly full: what is left is less than node 3 writes later.
fill=$(($(free_mib 1) - 12))
check "node 1 fills the filesystem ($fill MiB)" \
	on 1 dd if=/dev/zero of="$(M 1)/fill" bs=1M count=$fill oflag=direct status=none
before=$(blocks 3)
head -c 40M /dev/urandom >"$T/big"
if on 3 dd if="$T/big" of="$(M 3)/big" bs=1M oflag=direct status=none 2>/dev/null; then
	not_ok "node 3 wrote 40 MiB into a filesystem with $(free_mib 3) MiB free"
else
	ok "node 3 cannot write 40 MiB before the growth (ENOSPC)"
fi
on 3 rm -f "$(M 3)/big"

truncate -s 128M "$T/lun4"
check "cvm grow adds a LUN while three nodes have it mounted" "$BIN/cvm" grow data "$T/lun4"
# The LUNs' labels now describe a volume with a LUN the daemons have not opened: a libodm
# process that opens the volume now finds it where its cfsd looks for LUNs.
on 3 "$ODM/odm_race" writer "$(M 3)/between.dbf" >"$T/between.out" 2>&1 &
between=$!
check_soon 120 "an ODM process started between cvm grow and cfs grow writes its file" \
	grep -q writing "$T/between.out"
stop_job "$between" "odm_race writer $(M 3)/between.dbf"
check "cfs grow on node 1" on 1 "$BIN/cfs" grow "$(M 1)"
for n in 2 3; do
	after=$(blocks $n)
	check "node $n sees the new size ($before -> $after blocks)" test "$after" -gt $((before + 20000))
done
check "node 3 writes 40 MiB into the new space" \
	on 3 dd if="$T/big" of="$(M 3)/big" bs=1M oflag=direct status=none
check "node 2 reads it back whole" on 2 cmp "$(M 2)/big" "$T/big"
check "node 1 reads it back whole" on 1 cmp "$(M 1)/big" "$T/big"
check "node 3 logged that it took in the growth" grep -q "another node grew the filesystem" "$T/cfsd3.log"
# One stripe set gives each LUN as much as the smallest: the 128 MiB LUN does not fit.
expect 1 "add LUNs as large as the others first" \
	"cvm restripe of the volume mounted on three nodes refuses a layout that does not fit" -- \
	on 1 "$BIN/cvm" restripe data
check "the refused restripe left no record" bash -c "'$BIN/cvm' show data --json | grep -q '\"restripe\":null'"
check "an ODM instance on node 3 creates a 32 MiB file in the new space" \
	on 3 "$ODM/odm_race" create "$(M 3)/new.dbf" 32
kill -0 $writer 2>/dev/null && ok "node 2's ODM instance kept writing through the growth" ||
	not_ok "node 2's ODM writer: $(cat "$T/writer.out")"
stop_job "$writer" "odm_race writer $(M 2)/"

# Node slots while mounted everywhere.
if mount_on 4 dboptimized >"$T/m4.out" 2>&1; then
	not_ok "node 4 mounted although all 3 slots are in use"
else
	check "node 4's mount is refused while all 3 slots are in use, saying what to do" \
		grep -q "all 3 node slots of data are in use.*cfs addslots" "$T/m4.out"
fi
check "cfs addslots on node 1 adds a slot while three nodes have it mounted" \
	on 1 "$BIN/cfs" addslots "$(M 1)" 1
check "node 4 mounts" mount_on 4 dboptimized
check "node 4 reads what node 3 wrote" on 4 cmp "$(M 4)/big" "$T/big"
check "node 4 writes 8 MiB" on 4 dd if="$T/big" of="$(M 4)/from4" bs=1M count=8 oflag=direct status=none
check "node 2 reads it back" on 2 cmp -n 8M "$(M 2)/from4" "$T/big"
check "node 2 counts 4 slots" test "$(status_of 2 slots)" = 4
check "node 2 logged the new slot" grep -q "another node added node slots: now 4" "$T/cfsd2.log"
# A node that dies in an added slot: a survivor finds its journal through the new superblock.
check "node 4 creates a file and fsyncs it" on 4 python3 -c "
import os, sys
fd = os.open(sys.argv[1] + '/fsynced4', os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b'written on node 4 in slot 3\n')
os.fsync(fd)
dfd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(dfd)" "$(M 4)"
pid4=$(status_of 4 pid)
C kill 4; kill -9 "$pid4"; C abort 4
check "node 1 reads node 4's fsync'd file after node 4 died" \
	on 1 grep -q "written on node 4 in slot 3" "$(M 1)/fsynced4"
check "a survivor replayed slot 3's journal" grep -q "recovery: journal of slot 3" "$T"/cfsd[123].log
# A node that unmounts says goodbye: odmstat --cluster shows it unmounted, not down.
id3=$(status_of 3 node_id)
check "unmount node 3" umount_on 3
shown_unmounted() { # node 1 has heard node 3's goodbye
	on 1 "$BIN/odmstat" --cluster="$(M 1)" --json >"$T/left.json" && python3 -c "
import json, sys
j, id3 = json.load(open(sys.argv[1])), int(sys.argv[2])
assert [n for n in j['nodes'] if n['node_id'] == id3 and n['unmounted'] and not n['alive']], j['nodes']" "$T/left.json" "$id3"
}
check_soon 60 "odmstat --cluster shows node 3 unmounted, not down" shown_unmounted
for n in 1 2; do check "unmount node $n" umount_on $n; done
fsck_clean "after the growth"
no_damage_logged
finish
