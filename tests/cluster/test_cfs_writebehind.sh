#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind on a cluster mount (-o writebehind, cfs/writebehind.c): node 1's buffered
# writes return once its daemon keeps them under the file's glock EX; another node's read must
# still see every write that returned before it, with no fsync and no close in between: writes
# in pieces, over each other, O_APPEND records, a truncate with a write past the new end, read
# by read(2) and through mmap; a writer that node 2 interrupts every few writes; appends from
# two nodes at once.  On LUNs that run out of space (sparse files on a small tmpfs, as a thin
# LUN), fsync reports the failed write-behind and nothing else is damaged.  Then node 2 is
# killed with writes kept: after the recovery node 1 reads all it had fsync'd and, after that,
# only whole records.  And node 3's daemon stalls with writes kept until it is evicted: thawed,
# it writes none of them.  fsck clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs write-behind on a cluster"
# A thin LUN's filesystem: mounted before the nodes' mount namespaces copy the host's.
mkdir -p "$T/thin"
mount -t tmpfs -o size=24M cfs-thin "$T/thin" || { not_ok "mount a tmpfs"; finish; }
echo "umount -l '$T/thin'" >>"$T/on_exit"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
for n in 1 2 3; do check "node $n mounts with writebehind" mount_on $n "writebehind,fence=$(held_fence)"; done
check "cfs status says 64 MiB may be kept" test "$(status_of 1 writebehind_mib)" = 64
WB=$HERE/writebehind.py

# kept_then_read KIND: node 1 writes KIND and keeps the file open; node 2 reads it at once by
# read(2), node 3 through mmap.
kept_then_read() {
	local kind=$1 f=$1 writer kept
	touch "$T/gate"
	rm -f "$T/ready"
	kept=$(status_of 1 behind_writes)
	on 1 python3 "$WB" write "$kind" "$(M 1)/$f" "$T/ready" "$T/gate" >"$T/writer.out" 2>&1 &
	writer=$!
	wait_until 120 test -e "$T/ready" || not_ok "$kind: node 1 did not write within 120 s: $(cat "$T/writer.out")"
	check "$kind: node 1's writes were kept behind" test "$(status_of 1 behind_writes)" -gt "$kept"
	check "$kind: node 2 reads them at once, the file still open on node 1" \
		on 2 python3 "$WB" read "$kind" "$(M 2)/$f"
	check "$kind: node 3 reads them through mmap" on 3 python3 "$WB" read "$kind" "$(M 3)/$f" --mmap
	rm -f "$T/gate"
	check "$kind: node 1 closes the file" wait "$writer"
}
for kind in pieces scatter append truncate; do kept_then_read $kind; done

check "a writer on node 1 interrupted by node 2's reads every 5 writes" \
	bash -c "'$HERE/cluster.sh' exec 1 python3 '$WB' turns '$(M 1)/turns' 10 5 '$T' &
		 '$HERE/cluster.sh' exec 2 python3 '$WB' follow '$(M 2)/turns' 10 5 '$T' && wait \$!"

appender() { on "$1" python3 "$HERE/append_records.py" write "$(M "$1")/records" "$1" 200; }
appender 1 & a1=$!
appender 2 & a2=$!
check "node 1 appends with O_APPEND" wait $a1
check "node 2 appends with O_APPEND at the same time" wait $a2
check "node 3 reads both nodes' records whole, each once" \
	on 3 python3 "$HERE/append_records.py" check "$(M 3)/records" 2 200

# A kept write whose write-out joins two extents, so that the map needs one overflow block
# fewer: the write-out may not free it (node 2 holds no group for it then; before, the map
# stayed as it was on the LUNs, the block unwritten, and node 1 read zeros in place of the
# write: the torn records of test_cfs.sh).  Node 1 writes 285 blocks at every other block
# (117 extents in the inode and 168 in one overflow block, 4 KiB blocks: cfs/format.h), node
# 2 one block after the last, buffered and kept, allocated right after it on the volume.
check "the filesystem's blocks are 4 KiB (the extent counts below assume it)" \
	test "$(on 1 stat -f -c %S "$(M 1)")" = 4096
check "node 1 writes 285 blocks with holes between them, O_DIRECT" on 1 python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 4096)
for i in range(285):
    buf[:] = bytes([65 + i % 26]) * 4096
    os.pwrite(fd, buf, 2 * i * 4096)
os.close(fd)' "$(M 1)/sparse"
kept=$(status_of 2 behind_writes)
check "node 2 writes the block after the last, buffered" on 2 python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, b"k" * 4096, 569 * 4096)
os.close(fd)' "$(M 2)/sparse"
check "node 2 kept it behind" test "$(status_of 2 behind_writes)" -gt "$kept"
check "node 1 reads node 2's block" on 1 python3 -c '
import sys
with open(sys.argv[1], "rb") as f:
    f.seek(569 * 4096)
    got = f.read()
sys.exit(0 if got == b"k" * 4096 else f"read {len(got)} bytes, {got.count(0)} zeros")' "$(M 1)/sparse"
check "and every block node 1 wrote" on 1 python3 -c '
import sys
with open(sys.argv[1], "rb") as f:
    data = f.read()
bad = [i for i in range(285) if data[2 * i * 4096:(2 * i + 1) * 4096] != bytes([65 + i % 26]) * 4096]
sys.exit(f"blocks {bad[:5]} differ" if bad else 0)' "$(M 1)/sparse"
check "node 2 logged no refused allocation or free" bash -c "! grep 'refused' '$T/cfsd2.log'"

# A kept write inside a preallocated extent would have its write-out split that extent: such a
# write goes through instead.
check "node 1 preallocates 1 MiB" on 1 fallocate -l 1M "$(M 1)/prealloc"
kept=$(status_of 1 behind_writes)
check "node 1 writes 4 KiB inside it, buffered" on 1 python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, b"p" * 4096, 65536)
os.close(fd)' "$(M 1)/prealloc"
check "which went through, not kept" test "$(status_of 1 behind_writes)" = "$kept"
check "node 2 reads it, zeros around it" on 2 python3 -c '
import sys
data = open(sys.argv[1], "rb").read()
sys.exit(0 if data == bytes(65536) + b"p" * 4096 + bytes((1 << 20) - 69632) else "differs")' \
	"$(M 2)/prealloc"

# A file removed while its data is kept (git's config.lock renamed over config): the data is
# dropped with the file's blocks, not written out to blocks no longer its own.
kept=$(status_of 1 behind_writes)
check "node 1 writes a file buffered and removes it at once" on 1 python3 -c '
import os, sys
with open(sys.argv[1], "wb") as f:
    f.write(b"r" * 8192)
os.unlink(sys.argv[1])' "$(M 1)/removed"
check "the write was kept" test "$(status_of 1 behind_writes)" -gt "$kept"
nothing_kept() { test "$(status_of 1 behind_kept)" = 0; }
check_soon 30 "node 1 keeps nothing once the file is gone" nothing_kept
check "node 1 logged no kept data without blocks" \
	bash -c "! grep 'kept to be written but are not allocated' '$T/cfsd1.log'"

# A thin LUN runs out of space under kept writes: fsync reports it, the log names it, what was
# fsync'd before reads back intact (once the pool has room again), the filesystem is clean.
for i in 0 1; do truncate -s 96M "$T/thin/lun$i"; done
CVM_SCAN=$T/thin "$BIN/cvm" create thin "$T/thin/lun0" "$T/thin/lun1" >/dev/null &&
	CVM_SCAN=$T/thin "$BIN/mkfs.cfs" -p corosync -J 1 thin >/dev/null 2>&1 || not_ok "cvm create, mkfs.cfs on the thin LUNs"
mkdir -p "$T/mthin"
check "node 1 mounts the thin volume" on 1 "$BIN/cfs" mount thin "$T/mthin" -o "scan=$T/thin,log=$T/cfsd_thin.log"
head -c 1M /dev/urandom >"$T/kept"
check "a file fsync'd before the LUNs fill" on 1 dd if="$T/kept" of="$T/mthin/kept" bs=1M conv=fsync status=none
# The committer may write them out (and fail) while the writes go on: then a later write
# fails (the node withdrew when its journal could not commit either), else the fsync does.
check "kept writes past the thin LUNs' space: a later write or the fsync fails" on 1 python3 -c "
import errno, os
fd = os.open('$T/mthin/big', os.O_WRONLY | os.O_CREAT, 0o644)
try:
    for i in range(768):
        os.write(fd, os.urandom(64 << 10))
    os.fsync(fd)
except OSError as e:
    assert e.errno in (errno.ENOSPC, errno.EIO, errno.EROFS), e
    print('failed:', e.strerror)
else:
    raise SystemExit('every write and the fsync succeeded')
try:
    os.close(fd)
except OSError:
    pass
"
grep -q "write-behind of .* failed: No space left on device; fsync and close report it" "$T/cfsd_thin.log" &&
	ok "the daemon's log names the inode and the place of the failed write-behind" ||
	not_ok "no log line for the failed write-behind: $(tail -3 "$T/cfsd_thin.log")"
# The journal's next commit found no room either: node 1 withdrew (as a kernel filesystem
# aborts its journal).  The thin pool grows, and what node 1 had fsync'd is all there.
check "node 1 unmounts the thin volume" on 1 timeout 240 "$BIN/cfs" umount "$T/mthin"
check "the thin pool grows" mount -o remount,size=256M "$T/thin"
check "node 1 mounts the thin volume again" on 1 "$BIN/cfs" mount thin "$T/mthin" -o "scan=$T/thin,log=$T/cfsd_thin.log"
check "what was fsync'd before reads back intact" on 1 cmp "$T/kept" "$T/mthin/kept"
# Its create may have gone with the commit that failed: then the file is not there at all.
check "the file whose write-behind failed reads without an error, if its create was committed" \
	on 1 sh -c "[ ! -e '$T/mthin/big' ] || cat '$T/mthin/big' >/dev/null"
check "node 1 unmounts the thin volume again" on 1 timeout 240 "$BIN/cfs" umount "$T/mthin"
if CVM_SCAN=$T/thin "$BIN/fsck.cfs" -n thin >"$T/fsck.out" 2>&1; then ok "the thin volume: fsck.cfs -n clean"; else not_ok "the thin volume: fsck.cfs: $(tail -5 "$T/fsck.out")"; fi

# Node 3's cfsd stalls with writes kept (its committer held by a test gate, so that they stay
# kept) past its eviction; the others recover it and write files of their own; thawed, node 3
# fences itself and none of what it kept reaches the LUNs: node 1's files read back exactly.
. "$HERE/stall_lib.sh"
check "node 3 unmounts" umount_on 3
touch "$T/hold3"
check "node 3 mounts, its committer held" on 3 env CFSD_TEST_HOLD_COMMITTER="$T/hold3" \
	"$BIN/cfs" mount data "$(M 3)" -o "log=$T/cfsd3.log,fence=$(held_fence)"
check "node 3 writes 4 MiB without fsync" on 3 dd if=/dev/urandom of="$(M 3)/stalled" bs=64k count=64 status=none
check "node 3 keeps them behind" test "$(status_of 3 behind_kept)" -ge $((4 << 20))
slot=$(status_of 3 slot)
# shellcheck disable=SC2034 # read by more_recoveries (stall_lib.sh)
done_before=$(recoveries "$slot" 1 2)
freeze "$(status_of 3 pid)"
wait_until 120 more_recoveries "$slot" 1 2 || not_ok "nodes 1 and 2 did not recover node 3 within 120 s of its freeze"
manifest wb 1
thaw
rm -f "$T/hold3"
check_soon 60 "node 3 fenced itself after the thaw" grep -q "FENCED:" "$T/cfsd3.log"
check_soon 60 "node 3 logged that its kept writes did not go out" \
	grep -q "write-behind of .* failed" "$T/cfsd3.log"
check "node 1's files read back exactly after node 3's thaw" reads_back wb 1
check "node 2 reads them too" reads_back wb 2
check "node 3 unmounts" umount_on 3

# Node 2 dies with writes kept: what it fsync'd survives, and after it only whole records.
die_while 2 python3 "$WB" log "$(M 2)/log" 40 60 "$T/started"
rm -f "$T/fence.hold"
wait_until 120 recovery_done || not_ok "node 2's recovery still pending 120 s after its fence agent answered"
check "node 2's fsync'd records survive its death, then only whole records" \
	on 1 python3 "$WB" logged "$(M 1)/log" 40 60
check "node 1 unmounts" umount_on 1
fsck_clean "after node 2's death with writes kept"
no_damage_logged
finish
