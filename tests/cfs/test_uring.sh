#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
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

v=v opts=dboptimized counter=uring_direct who="the data threads"
. "$HERE/direct_io_checks.sh"

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
direct_under_way uring_direct # requests in the rings
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
wait_until 60 gone "$pid" && ok "cfsd stops on SIGTERM with its rings' threads" ||
	not_ok "cfsd still running 60 s after SIGTERM"
check "and drops its mount's note in /run/mount/utab" bash -c "! grep -s 'TARGET=$(realpath "$M") ' /run/mount/utab"
umount -l "$M" 2>/dev/null
expect 0 "clean" "fsck.cfs: clean at the end" -- "$BIN/fsck.cfs" -n v
finish
