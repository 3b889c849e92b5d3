#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A randomized soak of one filesystem: rounds of mount (normal or dboptimized), a random mix of
# every operation kind (soak_workload.py), clean unmount, then fsck.cfs -n, which must find
# nothing (a block in use that belongs to nothing is a leak).  make check runs a short one;
# `make soak` a long one (SOAK_ROUNDS, SOAK_STEPS, SOAK_SEED).  A failing round prints the
# seed that replays it.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${SOAK_ROUNDS:-8}
STEPS=${SOAK_STEPS:-300}
SEED=${SOAK_SEED:-$RANDOM}
M=$T/mnt

# Full filesystems are where the first soak found a leak: data took the last block, its extent
# map could not be written, and the block stayed in use belonging to nothing (the exact case is
# tests/cfs/test_extent.c's a_full_filesystem_...).  Here a whole mount is filled that way.
make_volume full 1 64
"$BIN/mkfs.cfs" full >/dev/null 2>&1 && mount_cfs full "$M" || { not_ok "full: mkfs or mount"; finish; }
check "a fragmented file fills the filesystem: ENOSPC" python3 - "$M/frag" <<'PY'
import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
block = mmap.mmap(-1, 4096)
full = 0
for i in range(1 << 20):  # every other block: one extent each, the map overflows the inode
    try:
        os.pwritev(fd, [block], 8192 * i)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        full += 1
        if full == 50:
            break
os.close(fd)
assert full == 50
PY
unmount_and_fsck full "$M" "a filesystem filled by a fragmented file" && ok "fsck.cfs clean after filling it"

make_volume v 2 256
"$BIN/mkfs.cfs" -L soak v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
echo "# seed $SEED, $ROUNDS rounds of $STEPS operations"
bad=0
for ((round = 0; round < ROUNDS && !bad; round++)); do
	seed=$((SEED * 1000 + round))
	opts=$( ((round % 3 == 2)) && echo dboptimized)
	mount_cfs v "$M" "$opts" || { not_ok "round $round: mount: $(tail -3 "$T/v.log")"; break; }
	if ! timeout 600 python3 "$HERE/soak_workload.py" "$M" "$STEPS" "$seed" >"$T/work.out" 2>&1; then
		not_ok "round $round (seed $seed${opts:+, $opts}): the workload failed: $(tail -5 "$T/work.out")"
		bad=1
	fi
	unmount_and_fsck v "$M" "round $round (seed $seed${opts:+, $opts})" || bad=1
done
((bad)) || ok "$ROUNDS rounds of $STEPS random operations, fsck.cfs clean after each (seed $SEED)"
finish
