#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Direct writes from two dboptimized nodes into one file at once, as RAC instances write a
# datafile: inside written blocks they go under the shared glock, with no lock message per
# write; the data is whole on every node; the times catch up at the close; a write that grows
# the file still works (under the glock EX).  At queue depth 32 (the daemons send such I/O to
# the LUNs without holding a thread): one node's writes read back verified on the other, both
# nodes at once, and one node's I/O while the other truncates the file and grows it back (the
# glocks held for the I/O in flight).  A node that mounts normally (it caches pages)
# stops the shared writes, and then sees every later write.  fsck.cfs -n clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs shared direct writes"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 128
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
check "node 1 mounts dboptimized" mount_on 1 dboptimized
check "node 2 mounts dboptimized" mount_on 2 dboptimized
f1=$(M 1)/datafile
# 8 MiB of written blocks (fallocate would leave them unwritten: the first write converts).
on 1 dd if=/dev/zero of="$f1" bs=1M count=8 oflag=direct status=none
head -c 4M /dev/urandom >"$T/half1"
head -c 4M /dev/urandom >"$T/half2"
# Warm: each node's first shared write asks for the locks it keeps.
on 1 dd if="$T/half1" of="$f1" bs=4k count=1 oflag=direct conv=notrunc status=none
on 2 dd if="$T/half2" of="$(M 2)/datafile" bs=4k count=1 seek=1024 oflag=direct conv=notrunc status=none
before_mtime=$(on 1 stat -c %Y "$f1")
sleep 1.1
m0=$(( $(status_of 1 lock_messages) + $(status_of 2 lock_messages) ))
on 1 dd if="$T/half1" of="$f1" bs=4k oflag=direct conv=notrunc status=none &
on 2 dd if="$T/half2" of="$(M 2)/datafile" bs=4k seek=1024 oflag=direct conv=notrunc status=none &
wait
m1=$(( $(status_of 1 lock_messages) + $(status_of 2 lock_messages) ))
check "2048 direct 4 KiB writes from 2 nodes at once sent $((m1 - m0)) lock messages (want under 20)" \
	test $((m1 - m0)) -lt 20
cat "$T/half1" "$T/half2" >"$T/whole"
for n in 1 2; do
	check "node $n reads back both nodes' writes" on $n cmp "$(M $n)/datafile" "$T/whole"
done
after_mtime=$(on 2 stat -c %Y "$(M 2)/datafile")
check "the file's mtime moved on after the writes closed ($before_mtime, then $after_mtime)" \
	test "$after_mtime" -gt "$before_mtime"
head -c 1M /dev/urandom >"$T/tail"
check "a direct write that grows the file, from node 2" \
	on 2 dd if="$T/tail" of="$(M 2)/datafile" bs=64k seek=128 oflag=direct conv=notrunc status=none
check "node 1 sees the new size" bash -c "[ \"\$('$HERE/cluster.sh' exec 1 stat -c %s '$f1')\" = 9437184 ]"

# At queue depth 32 (fio, libaio): direct I/O inside written blocks goes to the LUNs without
# holding a daemon thread (cfsd/dev_direct.c), its glocks held until it is done.
f2=$(M 2)/datafile
fio_at_32() { # node rw file extra...: fio at depth 32 over the file's first 8 MiB, verified
	local n=$1 rw=$2 file=$3
	shift 3
	on "$n" timeout 300 fio --name="qd32-$n" --filename="$file" --size=8M --bs=4k --rw="$rw" \
		--ioengine=libaio --iodepth=32 --direct=1 --verify=crc32c --verify_state_save=0 \
		--output="$T/fio-$n.out" "$@" || { cat "$T/fio-$n.out" >&2; return 1; }
}
d0=$(($(status_of 1 dev_direct) + $(status_of 2 dev_direct)))
check "node 1 writes 8 MiB at depth 32" fio_at_32 1 randwrite "$f1" --do_verify=0
check "node 2 reads all of it back at depth 32, verified" fio_at_32 2 randwrite "$f2" --verify_only
fio_at_32 1 randrw "$f1" --offset=0 --size=4M >"$T/both.1" 2>&1 &
both1=$!
fio_at_32 2 randrw "$f2" --offset=4M --size=4M >"$T/both.2" 2>&1 &
both2=$!
wait $both1 && wait $both2 && ok "both nodes write and verify their halves of the file at depth 32 at once" ||
	not_ok "both nodes at depth 32 at once: $(cat "$T/both.1" "$T/both.2" | grep -m5 -i "err\|verify")"
d1=$(($(status_of 1 dev_direct) + $(status_of 2 dev_direct)))
check "those went to the LUNs without holding a thread ($((d1 - d0)) of them)" test $((d1 - d0)) -gt 4096

# Node 2 truncates the file and grows it back while node 1 has direct I/O in flight on it:
# the glocks change hands between the I/Os, writes past the end take the ordinary path, and
# nothing hangs or fails.
race=$HERE/../cfs/direct_race.py
on 1 timeout 120 python3 "$race" io "$f1" 5 >"$T/race.1" 2>&1 &
race1=$!
on 2 timeout 120 python3 "$race" truncate "$f2" 5 9437184 >"$T/race.2" 2>&1 &
race2=$!
wait $race1 && wait $race2 && ok "node 1's direct I/O by 8 threads while node 2 truncates the file and grows it back" ||
	not_ok "direct I/O against another node's truncates: $(cat "$T/race.1" "$T/race.2" | tail -5)"
on 1 cat "$f1" >"$T/seen1"
check "node 2 reads what node 1 reads" bash -c "$(declare -f on hung); HERE='$HERE'; ON_LIMIT=$ON_LIMIT; on 2 cat '$f2' | cmp - '$T/seen1'"
on 1 dd if="$T/whole" of="$f1" bs=1M oflag=direct conv=notrunc status=none

# A normal mount caches pages: shared writes stop, and it sees every write made after.
check "node 3 mounts normally" mount_on 3
check "node 3 reads the file" on 3 cmp -n 8388608 "$(M 3)/datafile" "$T/whole"
head -c 4M /dev/urandom >"$T/again"
on 1 dd if="$T/again" of="$f1" bs=4k oflag=direct conv=notrunc status=none
check "node 3, page cache warm, sees node 1's later direct writes" \
	on 3 cmp -n 4194304 "$(M 3)/datafile" "$T/again"
for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "at the end"
no_damage_logged
finish
