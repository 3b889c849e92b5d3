#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm and randio on block devices: loop devices over files stand in for SAN LUNs.  Needs root
# and /dev/loop-control; says "skip" (not counted as passed) where they are missing.
. "$(dirname "$0")/../lib.sh"
loops=()
cleanup() {
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
if [ "$(id -u)" -ne 0 ] || ! command -v losetup >/dev/null || [ ! -e /dev/loop-control ]; then
	echo "skip - block devices: needs root and loop devices"
	exit 0
fi
for i in 0 1; do
	truncate -s 48M "$T/backing$i"
	l=$(losetup --find --show --direct-io=on "$T/backing$i" 2>/dev/null) || {
		echo "skip - block devices: losetup failed"; exit 0; }
	loops+=("$l")
done
mkdir "$T/by-id"
ln -s "${loops[0]}" "$T/by-id/lun-a"
ln -s "${loops[1]}" "$T/by-id/lun-b"
cvm() { "$BIN/cvm" --scan "$T/by-id" "$@"; }

expect 1 "same device" "the same device through a link and its node is refused" -- cvm create v "${loops[0]}" "$T/by-id/lun-a"
expect 0 "volume v created: 94.0 MiB" "create on two block devices (size from BLKGETSIZE64)" -- cvm create v "$T/by-id/lun-a" "$T/by-id/lun-b"
expect 0 "complete" "show finds the volume through /dev/disk/by-id style links" -- cvm show v
out=$("$BIN/randio" --scan "$T/by-id" -N 400 -q 8 --json --quiet vol:v)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["ios"]==400 and r["target_bytes"]==94*2**20' "$out" \
	&& ok "randio on a volume of block devices" || not_ok "randio on block devices: $out"
expect 1 "is a LUN of a CVM volume" "randio refuses to write to a member device" -- "$BIN/randio" -N 10 "${loops[1]}"
expect 0 "IOPS" "randio reads a member device directly" -- "$BIN/randio" -N 100 -r 100 "${loops[1]}"
expect 0 "removed" "remove" -- cvm remove --force v
finish
