#!/usr/bin/env bash
# FUSE over io_uring (cfsd/fuse_uring.c), where the kernel has it: the whole POSIX script
# (test_posix.sh) with every request through the rings, then what only the rings have: the
# nouring option, io_uring turned off by sysctl after the fuse module offers it (the kernel
# would hold every request for rings that never come), and the daemon killed or stopped with
# requests in the rings.  The fuse module's enable_uring and kernel.io_uring_disabled are
# set for the test and put back after it.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
param=/sys/module/fuse/parameters/enable_uring
sysctl=/proc/sys/kernel/io_uring_disabled
if [ ! -w "$param" ] || [ ! -w "$sysctl" ]; then
	echo "skip - $(basename "$0"): this kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	exit 0
fi
param_was=$(cat "$param")
sysctl_was=$(cat "$sysctl")
restore() {
	cfs_cleanup
	echo "$param_was" >"$param"
	echo "$sysctl_was" >"$sysctl"
}
trap restore EXIT
echo Y >"$param"
echo 0 >"$sysctl"

if CFS_TRANSPORT=io_uring bash "$HERE/test_posix.sh"; then
	ok "the POSIX script passes with requests through io_uring"
else
	not_ok "the POSIX script with requests through io_uring (above)"
fi

M=$T/mnt
make_volume v 4 128
"$BIN/mkfs.cfs" -L uring v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }

mount_cfs v "$M" dboptimized || { not_ok "mount: $(tail -3 "$T/v.log")"; finish; }
check "1 MiB direct writes and reads through the rings keep every byte" bash -c \
	'head -c 48M /dev/urandom > "$1/big" && dd if="$1/big" of="$2/big" bs=1M oflag=direct status=none &&
	 dd if="$2/big" bs=1M iflag=direct status=none | cmp - "$1/big"' _ "$T" "$M"
check "those requests came through io_uring" transport_is "$M" io_uring 90
umount_cfs "$M" || not_ok "unmount"

# Data threads (dboptimized): direct reads and writes the rings' threads send to the LUNs
# themselves, many in flight on one thread; anything else through a helper thread.
direct_count() { "$BIN/cfs" status --json "$1" | sed -n 's/.*"uring_direct": \([0-9]*\).*/\1/p'; }
direct_more_than() {
	local n
	n=$(direct_count "$1")
	[ "${n:-0}" -gt "$2" ] || { echo "only ${n:-0} direct requests from the data threads" >&2; return 1; }
}
mount_cfs v "$M" dboptimized || { not_ok "mount: $(tail -3 "$T/v.log")"; finish; }
check "dboptimized: a file laid out" timeout 120 dd if=/dev/zero of="$M/dt" bs=1M count=64 status=none
check "dboptimized: 4 KiB random writes and reads at depth 32 through the data threads, verified" \
	timeout 300 fio --name=dt --filename="$M/dt" --size=64M --bs=4k --rw=randwrite --ioengine=libaio \
	--iodepth=32 --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
	--output="$T/fio-dt.out"
check "those went straight to the LUNs from the data threads" direct_more_than "$M" 25000
head -c 2M /dev/urandom >"$T/sync"
sent=$(direct_count "$M")
check "dboptimized: 8 KiB O_DSYNC writes over written blocks read back" bash -c \
	'dd if="$1/sync" of="$2/dt" bs=8k oflag=direct,dsync conv=notrunc status=none &&
	 dd if="$2/dt" bs=8k count=256 iflag=direct status=none | cmp - "$1/sync"' _ "$T" "$M"
check "those went from the data threads" direct_more_than "$M" $((sent + 256))
check "dboptimized: direct reads of holes, of a short last block and past the end" \
	timeout 60 python3 - "$M" <<'PY'
import mmap, os, sys
path = sys.argv[1] + "/holes"
with open(path, "wb") as f:  # holes around two written ranges, the last block short
    f.truncate(1000004)
    f.seek(300000); f.write(b"x" * 5000)
    f.seek(1000000); f.write(b"tail")
want = bytearray(1000004)
want[300000:305000] = b"x" * 5000
want[1000000:] = b"tail"
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
got = os.preadv(fd, [buf], 0)
assert got == len(want) and buf[:got] == want, ("whole file", got)
got = os.preadv(fd, [memoryview(buf)[:8192]], 999424)
assert got == 580 and buf[:580] == want[999424:], ("last block", got)
assert os.preadv(fd, [memoryview(buf)[:4096]], 1 << 20) == 0, "past the end"
PY
# The ordinary path meets the data threads on one file: a truncate waits for their I/O, their
# writes past the new end go to the helpers (the size grows), and nothing waits for good.
check "dboptimized: direct I/O by 8 threads while the file is truncated and grown again" \
	timeout 120 python3 - "$M" <<'PY'
import mmap, os, random, sys, threading, time
path = sys.argv[1] + "/race"
with open(path, "wb") as f:
    f.write(os.urandom(8 << 20))
stop = time.time() + 5
errors = []
def io(seed):
    rnd = random.Random(seed)
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    buf.write(os.urandom(4096))
    while time.time() < stop:
        off = rnd.randrange(2048) * 4096
        try:
            (os.pwritev if rnd.random() < 0.5 else os.preadv)(fd, [buf], off)
        except OSError as e:
            errors.append(e)
    os.close(fd)
threads = [threading.Thread(target=io, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
fd = os.open(path, os.O_RDWR)
while time.time() < stop:
    os.ftruncate(fd, 4 << 20)
    os.ftruncate(fd, 8 << 20)
for t in threads:
    t.join()
assert not errors, errors[:3]
PY
# Grown while the data threads have I/O in flight: grow holds the filesystem lock while it
# waits for that I/O to let go of the volume, so they must not wait for that lock meanwhile.
truncate -s 128M "$T/v.lun4"
timeout 120 fio --name=grow --filename="$M/dt" --size=64M --bs=4k --rw=randrw --ioengine=libaio \
	--iodepth=32 --direct=1 --time_based --runtime=15 --output="$T/fio-grow.out" >/dev/null 2>&1 &
load=$!
sleep 3
check "cvm grow and cfs grow at depth 32 through the data threads" \
	timeout 60 bash -c '"$1/cvm" grow v "$2/v.lun4" >/dev/null && "$1/cfs" grow "$3"' _ "$BIN" "$T" "$M"
wait "$load" && ok "the load beside the grow ends without an error" ||
	not_ok "the load beside the grow: $(grep -m3 -i err "$T/fio-grow.out")"
umount_cfs "$M" || not_ok "dboptimized unmount"

mount_cfs v "$M" nouring || { not_ok "nouring mount: $(tail -3 "$T/v.log")"; finish; }
check "nouring: requests come through /dev/fuse" transport_is "$M" dev
check "nouring: what the rings wrote reads back" bash -c 'cmp "$1/big" "$2/big"' _ "$T" "$M"
umount_cfs "$M" || not_ok "nouring unmount"

# io_uring_disabled=2: no process may make a ring.  Asking for io_uring at INIT anyway would
# leave the kernel holding every request for rings that cannot be made.
echo 2 >"$sysctl"
mount_cfs v "$M" || { not_ok "mount with io_uring disabled: $(tail -3 "$T/v.log")"; finish; }
check "io_uring disabled by sysctl: requests come through /dev/fuse and are answered" \
	timeout 60 bash -c 'cmp "$1/big" "$2/big" && echo x > "$2/x" && [ "$(cat "$2/x")" = x ] &&
	 "$3/cfs" status --json "$2" | grep -q "\"fuse_transport\": \"dev\""' _ "$T" "$M" "$BIN"
umount_cfs "$M" || not_ok "unmount with io_uring disabled"
echo 0 >"$sysctl"

# The daemon killed with requests in the rings: they end (ENOTCONN, ECANCELED), nothing waits
# for good.
mount_cfs v "$M" dboptimized || { not_ok "mount: $(tail -3 "$T/v.log")"; finish; }
timeout 120 fio --name=load --directory="$M" --rw=randrw --bs=4k --size=32M --ioengine=libaio \
	--iodepth=32 --direct=1 --time_based --runtime=60 --output=/dev/null >/dev/null 2>&1 &
load=$!
sleep 3
pkill -9 -f "^cfsd .*$M"
wait "$load"
rc=$?
[ "$rc" -ne 124 ] && ok "cfsd killed under load at depth 32: the load ends (fio exit $rc)" ||
	not_ok "cfsd killed under load: fio still waiting after 120 s"
umount -l "$M" 2>/dev/null

# Stopped by a signal: the rings' threads are woken and joined, the daemon exits.
mount_cfs v "$M" || { not_ok "mount after the kill: $(tail -3 "$T/v.log")"; finish; }
check "mounted again (the journal replayed) through io_uring" transport_is "$M" io_uring
pid=$(pgrep -f "^cfsd .*$M")
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && not_ok "cfsd still running 10 s after SIGTERM" ||
	ok "cfsd stops on SIGTERM with its rings' threads"
umount -l "$M" 2>/dev/null
expect 0 "clean" "fsck.cfs: clean at the end" -- "$BIN/fsck.cfs" -n v
finish
