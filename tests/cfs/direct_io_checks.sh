# SPDX-License-Identifier: GPL-2.0-or-later
# Sourced by test_uring.sh and test_dev_direct.sh after lib.sh, with v, M, opts, counter and
# who set: on volume v (4 LUNs, $T/$v.lun4 free for a grow) mounted at M with opts
# (dboptimized), direct reads and writes that who send to the LUNs without holding a thread
# each (cfs status --json's counter counts them), verified, and where they meet the ordinary
# path: O_DSYNC, holes, a truncate, a grow.
direct_count() { "$BIN/cfs" status --json "$1" | sed -n "s/.*\"$2\": \\([0-9]*\\).*/\\1/p"; }
direct_more_than() { # DIR COUNTER N
	local n
	n=$(direct_count "$1" "$2")
	[ "${n:-0}" -gt "$3" ] || { echo "only ${n:-0} direct requests counted in $2" >&2; return 1; }
}
# direct_under_way COUNTER: back once 100 more requests were counted in COUNTER (a load
# started just before is moving data).
direct_under_way() {
	local n0
	n0=$(direct_count "$M" "$1")
	wait_until 120 direct_more_than "$M" "$1" $((${n0:-0} + 100))
}
mount_cfs "$v" "$M" "$opts" || { not_ok "mount: $(tail -3 "$T/$v.log")"; finish; }
check "dboptimized: a file laid out" timeout 120 dd if=/dev/zero of="$M/dt" bs=1M count=64 status=none
check "dboptimized: 4 KiB random writes and reads at depth 32 through $who, verified" \
	timeout 300 fio --name=dt --filename="$M/dt" --size=64M --bs=4k --rw=randwrite --ioengine=libaio \
	--iodepth=32 --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
	--output="$T/fio-dt.out"
check "those went straight to the LUNs from $who" direct_more_than "$M" "$counter" 25000
head -c 2M /dev/urandom >"$T/sync"
sent=$(direct_count "$M" "$counter")
check "dboptimized: 8 KiB O_DSYNC writes over written blocks read back" bash -c \
	'dd if="$1/sync" of="$2/dt" bs=8k oflag=direct,dsync conv=notrunc status=none &&
	 dd if="$2/dt" bs=8k count=256 iflag=direct status=none | cmp - "$1/sync"' _ "$T" "$M"
check "those went from $who" direct_more_than "$M" "$counter" $((sent + 256))
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
# The ordinary path meets these on one file: a truncate waits for their I/O, writes past the
# new end take the ordinary path (the size grows), and nothing waits for good.
head -c 8M /dev/urandom >"$M/race"
timeout 120 python3 "$HERE/direct_race.py" truncate "$M/race" 5 $((8 << 20)) &
truncates=$!
check "dboptimized: direct I/O by 8 threads while the file is truncated and grown again" \
	timeout 120 python3 "$HERE/direct_race.py" io "$M/race" 5
wait "$truncates" || not_ok "the truncates beside that direct I/O"
# Grown with such I/O in flight: grow holds the filesystem lock while it waits for that I/O
# to let go of the volume, so what finishes it must not wait for that lock meanwhile.
truncate -s 128M "$T/$v.lun4"
timeout 120 fio --name=grow --filename="$M/dt" --size=64M --bs=4k --rw=randrw --ioengine=libaio \
	--iodepth=32 --direct=1 --time_based --runtime=15 --output="$T/fio-grow.out" >/dev/null 2>&1 &
load=$!
direct_under_way "$counter"
check "cvm grow and cfs grow at depth 32 through $who" \
	timeout 60 bash -c '"$1/cvm" grow "$4" "$2/$4.lun4" >/dev/null && "$1/cfs" grow "$3"' _ "$BIN" "$T" "$M" "$v"
wait "$load" && ok "the load beside the grow ends without an error" ||
	not_ok "the load beside the grow: $(grep -m3 -i err "$T/fio-grow.out")"
umount_cfs "$M" || not_ok "dboptimized unmount"
