#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A node whose writes to the LUNs start failing (a lost path: CVM_FAULT_EIO_AFTER, cvm/volume.c)
# while it holds glocks EX withdraws (cfs_withdraw): its journal's failed commit makes it
# read-only, it fences itself and stops beating, the others evict it and replay its journal,
# and they go on with what it held: its directory lists on node 1, every file whose fsync it
# acknowledged is there, and node 1 writes in it.  (Before, the read-only node kept its glocks
# for ever, and every node that needed one of them hung.)  fsck.cfs -n is clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs withdraw on a failed journal"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
check "node 1 mounts" mount_on 1
check "node 3 mounts" mount_on 3
mkdir -p "$(M 2)"
check "node 2 mounts, its writes to fail after the first 300" \
	on 2 env CVM_FAULT_EIO_AFTER=300 "$BIN/cfs" mount data "$(M 2)" -o "log=$T/cfsd2.log"
slot=$(status_of 2 slot)
cfsd=$(status_of 2 pid)

# Node 2 makes files in a directory of its own, each fsync'd, until its writes fail; the
# last one acknowledged is noted where the test reads it.
on 2 python3 -c "
import os
d = '$(M 2)/d2'
os.mkdir(d)
for i in range(100000):
    try:
        fd = os.open(f'{d}/f{i}', os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b'%d\n' % i)
        os.fsync(fd)
        os.close(fd)
    except OSError as e:
        print(f'failed at file {i}: {e}')
        break
    with open('$T/acked.tmp', 'w') as f:
        f.write(str(i + 1))
    os.rename('$T/acked.tmp', '$T/acked')
" >"$T/writer.out" 2>&1
check "node 2's writes failed: $(cat "$T/writer.out")" grep -q "failed at file" "$T/writer.out"
check "node 2 logged its withdraw" grep -q "FENCED: withdrawn from the cluster" "$T/cfsd2.log"
check_soon 120 "nodes 1 and 3 evicted node 2 and recovered its slot $slot" \
	grep -q "recovery: slot $slot done" "$T/cfsd1.log" "$T/cfsd3.log"
acked=$(cat "$T/acked" 2>/dev/null || echo 0)
check "node 1 lists node 2's directory: the $acked files node 2 acknowledged, at least" \
	test "$(on 1 timeout 120 ls "$(M 1)/d2" | wc -l)" -ge "$acked"
check "... each as written" on 1 python3 -c "
for i in range($acked):
    assert open('$(M 1)/d2/f%d' % i).read() == '%d\n' % i, i"
check "node 1 writes in node 2's directory" on 1 sh -c "echo after >'$(M 1)/d2/after' && sync '$(M 1)/d2/after'"
check "node 3 reads it" test "$(on 3 cat "$(M 3)/d2/after")" = after
check "cfs status on node 2 says it was evicted" test "$(status_of 2 evicted)" = True
check "node 2 unmounts" umount_on 2
check_soon 60 "node 2's cfsd exited" gone "$cfsd"
for n in 1 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "after the withdraw"
finish
