#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Direct reads and writes from /dev/fuse's workers sent to the LUNs without holding a worker
# (cfsd/dev_direct.c), on a one-node dboptimized mount with nouring (every kernel without FUSE
# over io_uring takes this path): the checks io_uring's data threads pass too, sizes that
# take both paths at once, what a kill -9 with such I/O in flight leaves, and a stop.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$T/mnt
make_volume v 4 128
"$BIN/mkfs.cfs" -L devdirect v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }

v=v opts=dboptimized,nouring counter=dev_direct who="/dev/fuse's workers"
. "$HERE/direct_io_checks.sh"

mount_cfs v "$M" dboptimized,nouring || { not_ok "mount: $(tail -3 "$T/v.log")"; finish; }
check "cfs status says so" bash -c '"$1/cfs" status "$2" | grep -q "sent to the LUNs without holding a worker"' _ "$BIN" "$M"
sent=$(direct_count "$M" dev_direct)
# 4 KiB to 1 MiB at once: up to 128 KiB without a worker, larger ones by their worker.
check "4 KiB to 1 MiB direct writes and reads mixed at depth 32, verified" \
	timeout 300 fio --name=mixed --filename="$M/dt" --size=64M --bsrange=4k-1m --rw=randwrite \
	--ioengine=libaio --iodepth=32 --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--verify_state_save=0 --output="$T/fio-mixed.out"
check "some of those without a worker" direct_more_than "$M" dev_direct "$sent"

# kill -9 with direct writes in flight: every write the kernel acknowledged is on the LUNs.
# Eight threads overwrite 4 KiB blocks of a laid-out file with (block, sequence) records and
# log each acknowledged one; after the kill each block holds its last logged record or a
# later one.
before=$(direct_count "$M" dev_direct)
python3 - "$M/dt" "$T/acked" <<'PY' &
import mmap, os, random, sys, threading
path, log = sys.argv[1], sys.argv[2]
def writer(k):
    rnd = random.Random(k)
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    with open(f"{log}.{k}", "w", buffering=1) as acked:
        for seq in range(1, 1 << 30):
            block = rnd.randrange(k * 1024, (k + 1) * 1024)  # each thread its own blocks
            buf[:32] = f"{block:15d} {seq:15d}\n".encode()
            try:
                os.pwrite(fd, buf, block * 4096)
            except OSError:
                return
            acked.write(f"{block} {seq}\n")
threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
PY
load=$!
# Killed once the load has sent 1,000 writes without a worker, however long that takes here.
wait_until 300 direct_more_than "$M" dev_direct $((${before:-0} + 1000))
sent=$(( $(direct_count "$M" dev_direct) - ${before:-0} ))
pid=$(daemon_pid "$M")
kill -9 "$pid"
wait "$load"
umount -l "$M" 2>/dev/null
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
check "the $sent writes before the kill went without a worker" test "$sent" -gt 1000
mount_cfs v "$M" dboptimized,nouring || { not_ok "mount after the kill: $(tail -3 "$T/v.log")"; finish; }
check "every acknowledged direct write is there after the kill" python3 - "$M/dt" "$T/acked" <<'PY'
import glob, sys
path, log = sys.argv[1], sys.argv[2]
last = {}
for name in glob.glob(log + ".*"):
    for line in open(name):
        if line.endswith("\n"):
            block, seq = map(int, line.split())
            last[block] = seq
assert len(last) > 100, f"only {len(last)} blocks written"
with open(path, "rb") as f:
    for block, seq in last.items():
        f.seek(block * 4096)
        got_block, got_seq = map(int, f.read(32).split())
        assert got_block == block and got_seq >= seq, (block, seq, got_block, got_seq)
PY

# Stopped by a signal with direct I/O in flight: what is in flight is answered, the daemon
# exits.
timeout 120 fio --name=load --filename="$M/dt" --size=64M --rw=randrw --bs=4k --ioengine=libaio \
	--iodepth=32 --direct=1 --time_based --runtime=60 --output=/dev/null >/dev/null 2>&1 &
load=$!
direct_under_way dev_direct
pid=$(daemon_pid "$M")
kill -TERM "$pid"
wait_until 60 gone "$pid" && ok "cfsd stops on SIGTERM with direct I/O in flight" ||
	not_ok "cfsd still running 60 s after SIGTERM"
check "and drops its mount's note in /run/mount/utab" bash -c "! grep -s 'TARGET=$(realpath "$M") ' /run/mount/utab"
wait "$load"
umount -l "$M" 2>/dev/null
expect 0 "clean" "fsck.cfs: clean at the end" -- "$BIN/fsck.cfs" -n v

# Lone requests (depth 1) are moved by the worker that read them, the rest by the completion
# thread: both verified, and both fail alike where a LUN ends early (its file cut short under
# the mount): EIO and a log line naming the inode and the LUN, and the daemon serves on.
make_volume w 2 64
"$BIN/mkfs.cfs" -L cut w >/dev/null 2>&1 || { not_ok "mkfs.cfs w"; finish; }
mount_cfs w "$T/w" dboptimized,nouring || { not_ok "mount w: $(tail -3 "$T/w.log")"; finish; }
check "a file laid out" timeout 120 dd if=/dev/zero of="$T/w/f" bs=1M count=32 status=none
sent=$(direct_count "$T/w" dev_direct)
check "4 KiB direct writes and reads at depth 1, verified" \
	timeout 300 fio --name=lone --filename="$T/w/f" --size=32M --bs=4k --rw=randwrite \
	--ioengine=libaio --iodepth=1 --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--verify_state_save=0 --output="$T/fio-lone.out"
check "those went to the LUNs from $who" direct_more_than "$T/w" dev_direct $((sent + 16000))
truncate -s 1M "$T/w.lun0" "$T/w.lun1"
check "a LUN cut short: a direct read at depth 1 of what lay past its end fails with EIO" \
	bash -c '! dd if="$1" of=/dev/null bs=4k count=64 iflag=direct 2>"$2" && grep -q "Input/output error" "$2"' \
	_ "$T/w/f" "$T/dd-cut.err"
check "... and at depth 32" bash -c '! timeout 60 fio --name=cut --filename="$1" --size=32M --bs=4k \
	--rw=randread --ioengine=libaio --iodepth=32 --direct=1 --io_size=4M --output="$2" &&
	grep -q "Input/output error" "$2"' _ "$T/w/f" "$T/fio-cut.out"
check "the log names the inode and the LUN" grep -q "inode [0-9]*: direct read of 4096 bytes (LUN [01], byte" "$T/w.log"
check "the daemon serves on" "$BIN/cfs" status "$T/w"
umount_cfs "$T/w" || not_ok "unmount of the cut volume"
finish
