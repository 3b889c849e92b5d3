#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind on a one-node mount (cfs/writebehind.c; the cluster's is
# tests/cluster/test_cfs_writebehind.sh).  The kernel's write-back cache hands a file's dirty
# pages to cfsd at its close, those of a small file in one write, which cfsd keeps (the committer held by a test gate, so that they
# stay kept) and a read after the kernel dropped its pages gets them from cfsd's memory, by
# read(2) and through mmap.  A kill -9 of cfsd with writes kept loses only what no fsync took:
# the fsync'd records read back, then only whole records; a file closed but never fsync'd is
# gone or whole.  On LUNs that run out of space (sparse files on a small tmpfs, as a thin LUN),
# an fsync reports the failed write-out and what was fsync'd before is intact.  nowritebehind
# keeps nothing.  fsck clean after each part.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
WB=$HERE/../cluster/writebehind.py
M=$T/mnt

# drop_pages FILE: the kernel lets go of FILE's pages (clean once written back at its close),
# so that the next read asks cfsd.
drop_pages() {
	python3 -c "import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$1" &&
		test "$(fincore --bytes --noheadings --output RES "$1" | tr -d ' ')" = 0
}

make_volume data 2 128
"$BIN/mkfs.cfs" data >/dev/null 2>&1 || not_ok "mkfs.cfs"
touch "$T/hold"
export CFSD_TEST_HOLD_COMMITTER=$T/hold
check "one-node mount, its committer held" mount_cfs data "$M"
unset CFSD_TEST_HOLD_COMMITTER
check "cfs status says 64 MiB may be kept" test "$(status_of "$M" writebehind_mib)" = 64

# (A file of 128 KiB or more goes out at its close in writes that large, which go through.)
for kind in small truncate; do
	writes=$(status_of "$M" behind_writes)
	check "$kind: written and closed" python3 "$WB" write "$kind" "$M/$kind" "$T/ready" "$T/no-gate"
	check "$kind: the pages written back at the close were kept" \
		test "$(status_of "$M" behind_writes)" -gt "$writes"
	check "$kind: the kernel lets go of the file's pages" drop_pages "$M/$kind"
	check "$kind: read back from what cfsd keeps" python3 "$WB" read "$kind" "$M/$kind"
	drop_pages "$M/$kind"
	check "$kind: read back through mmap" python3 "$WB" read "$kind" "$M/$kind" --mmap
done
check "the data is still kept (nothing committed)" test "$(status_of "$M" behind_kept)" -gt 0

# kill -9 with writes kept: records 0-39 fsync'd, 40-99 not, and a closed file never fsync'd.
python3 "$WB" log "$M/log" 40 60 "$T/started" &
writer=$!
wait_until 120 test -e "$T/started" || not_ok "the log's writer did not start within 120 s"
kept=$(status_of "$M" behind_kept)
check "a file closed, never fsync'd" python3 "$WB" write small "$M/unsynced" "$T/ready" "$T/no-gate"
check "its data is kept" test "$(status_of "$M" behind_kept)" -gt "$kept"
kill -9 "$(daemon_pid "$M")"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
umount -l "$M"
rm -f "$T/hold"
check "mounted again after the kill" mount_cfs data "$M"
check "the fsync'd records read back, then only whole records" python3 "$WB" logged "$M/log" 40 60
check "the file never fsync'd is gone or whole" \
	sh -c "[ ! -e '$M/unsynced' ] || python3 '$WB' read small '$M/unsynced'"
unmount_and_fsck data "$M" "after the kill with writes kept" && ok "fsck.cfs -n clean after the kill"

# nowritebehind: every write reaches the LUNs before its answer.
check "mounted with nowritebehind" mount_cfs data "$M" nowritebehind
check "nowritebehind: cfs status says nothing may be kept" test "$(status_of "$M" writebehind_mib)" = 0
check "nowritebehind: a file written and closed" python3 "$WB" write small "$M/through" "$T/ready" "$T/no-gate"
check "nowritebehind: nothing kept" test "$(status_of "$M" behind_writes)" = 0
unmount_and_fsck data "$M" "nowritebehind" && ok "fsck.cfs -n clean after nowritebehind"

# A thin LUN runs out of space under kept writes: an fsync reports it, the log names it, what
# was fsync'd before reads back intact once the pool has room again.
mkdir -p "$T/thin"
mount -t tmpfs -o size=24M cfs-thin "$T/thin" || not_ok "mount a tmpfs"
for i in 0 1; do truncate -s 96M "$T/thin/lun$i"; done
CVM_SCAN=$T/thin "$BIN/cvm" create thin "$T/thin/lun0" "$T/thin/lun1" >/dev/null &&
	CVM_SCAN=$T/thin "$BIN/mkfs.cfs" thin >/dev/null 2>&1 || not_ok "cvm create, mkfs.cfs on the thin LUNs"
check "the thin volume mounts" mount_cfs thin "$T/mthin" "scan=$T/thin"
head -c 1M /dev/urandom >"$T/kept"
check "a file fsync'd before the LUNs fill" dd if="$T/kept" of="$T/mthin/kept" bs=1M conv=fsync status=none
# Files of 64 KiB, closed one after another (each kept at its close), then fsync'd: the
# committer may write them out (and fail) meanwhile, and the node withdraws when its journal
# cannot commit either; then a later create or write fails, else one of the fsyncs does.
check "kept writes past the thin LUNs' space: a create, a write or an fsync fails" python3 -c "
import errno, os
d = '$T/mthin'
try:
    for i in range(600):
        with open(f'{d}/f{i}', 'wb') as f:
            f.write(os.urandom(64 << 10))
    for i in range(600):
        fd = os.open(f'{d}/f{i}', os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
except OSError as e:
    assert e.errno in (errno.ENOSPC, errno.EIO, errno.EROFS), e
    print('failed:', e.strerror)
else:
    raise SystemExit('every write and fsync succeeded')
"
grep -q "write-behind of .* failed: No space left on device; fsync and close report it" "$T/thin.log" &&
	ok "the daemon's log names the inode and the place of the failed write-out" ||
	not_ok "no log line for the failed write-out: $(tail -3 "$T/thin.log")"
# Its unmount may report the failed write-back; it unmounts all the same.
umount_cfs "$T/mthin" 2>/dev/null
check "the thin volume is unmounted" sh -c "! mountpoint -q '$T/mthin'"
check "the thin pool grows" mount -o remount,size=256M "$T/thin"
check "the thin volume mounts again" mount_cfs thin "$T/mthin" "scan=$T/thin"
check "what was fsync'd before reads back intact" cmp "$T/kept" "$T/mthin/kept"
check "the files whose write-out failed read without an error, if their creates were committed" \
	sh -c "for f in '$T/mthin'/f*; do [ ! -e \"\$f\" ] || cat \"\$f\" >/dev/null || exit 1; done"
umount_cfs "$T/mthin" || not_ok "the thin volume unmounts again"
if CVM_SCAN=$T/thin "$BIN/fsck.cfs" -n thin >"$T/fsck.out" 2>&1; then ok "the thin volume: fsck.cfs -n clean"; else not_ok "the thin volume: fsck.cfs: $(tail -5 "$T/fsck.out")"; fi
umount -l "$T/thin"
finish
