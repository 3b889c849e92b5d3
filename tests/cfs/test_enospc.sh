#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A full filesystem: each refused allocation (fallocate, direct write, create, mkdir; ODM's
# create and resize are in tests/odm/odm_api.c) gives back every block it took, at once, and
# what a remove frees is taken again at once, on a normal and on a dboptimized mount.  Then
# fsck.cfs finds the filesystem clean.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

make_volume full 2 256
"$BIN/mkfs.cfs" -J 1 full >/dev/null
for opts in "" dboptimized; do
	what=${opts:-normal}
	mount_cfs full "$T/mnt" "$opts"
	mkdir "$T/mnt/$what"
	python3 "$HERE/space_check.py" "$T/mnt/$what" | sed "s/^\(\(not \)\{0,1\}ok - \)/\1$what mount: /"
	if [ "${PIPESTATUS[0]}" -ne 0 ]; then # what the daemon said, and the machine's own room
		FAILS=$((FAILS + 1))
		tail -5 "$T/full.log" | sed 's/^/# /'
		df -h "$T" | sed 's/^/# /'
	fi
	rmdir "$T/mnt/$what"
	unmount_and_fsck full "$T/mnt" "$what mount" && ok "$what mount: fsck.cfs -n clean after"
done
exit $((FAILS > 0))
