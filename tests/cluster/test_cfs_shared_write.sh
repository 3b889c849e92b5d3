#!/usr/bin/env bash
# Direct writes from two dboptimized nodes into one file at once, as RAC instances write a
# datafile: inside written blocks they go under the shared glock, with no lock message per
# write; the data is whole on every node; the times catch up at the close; a write that grows
# the file still works (under the glock EX).  A node that mounts normally (it caches pages)
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
