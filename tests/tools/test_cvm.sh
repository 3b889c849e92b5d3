#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The cvm command on sparse LUN files: the whole life of a volume, and every bad input refused
# with a message naming the thing and with no LUN changed.
. "$(dirname "$0")/../lib.sh"
cvm() { "$BIN/cvm" --scan "$T" "$@"; }

for i in 0 1 2 3 4 5; do truncate -s 64M "$T/lun$i"; done
truncate -s 8M "$T/small"
mkdir "$T/adir"
ln -s "$T/lun1" "$T/alias1"

expect 0 "Usage: cvm" "cvm --help" -- "$BIN/cvm" --help
expect 2 "unknown command" "unknown command is a usage error" -- cvm frobnicate
expect 2 "no command" "no command is a usage error" -- "$BIN/cvm"
expect 2 "--repair does not apply" "an option that does not fit is refused" -- cvm show --repair

# Bad inputs for create: each refused, nothing written.
before=$(fingerprint)
expect 1 "$T/nope: no such file" "create: missing path" -- cvm create v "$T/lun0" "$T/nope"
expect 1 "not a block device or regular file" "create: a directory" -- cvm create v "$T/adir"
expect 1 "not a block device or regular file" "create: a character device" -- cvm create v /dev/null
expect 1 "below the minimum LUN size" "create: LUN too small" -- cvm create v "$T/lun0" "$T/small"
expect 1 "same device" "create: same LUN twice" -- cvm create v "$T/lun0" "$T/lun0"
expect 1 "same device" "create: same LUN through two paths" -- cvm create v "$T/lun1" "$T/alias1"
expect 2 "power of two multiple of 4k" "create: stripe width 12k" -- cvm create v -w 12k "$T/lun0"
expect 2 "power of two multiple of 4k" "create: stripe width 1000" -- cvm create v -w 1000 "$T/lun0"
expect 1 "volume name" "create: bad name" -- cvm create 'a/b' "$T/lun0"
[ "$(fingerprint)" = "$before" ] && ok "refused creates wrote nothing" || not_ok "a refused create changed a LUN"

expect 0 "volume data created" "create 4-LUN volume" -- cvm create data -w 64k "$T/lun0" "$T/lun1" "$T/lun2" "$T/lun3"
expect 0 "state       complete" "show volume" -- cvm show data
json=$(cvm show data --json)
if python3 -c 'import json,sys; v=json.loads(sys.argv[1])["volumes"][0]; assert v["name"]=="data" and v["complete"] and v["stripe_sets"][0]["stripe_width"]==65536 and len(v["stripe_sets"][0]["luns"])==4' "$json"; then
	ok "show --json parses and describes the volume"
else
	not_ok "show --json: $json"
fi
expect 0 "volume data" "discover finds the volume" -- "$BIN/cvm" discover "$T"

before=$(fingerprint)
expect 1 "already belongs to volume data" "create over a labelled LUN names its volume" -- cvm create w "$T/lun4" "$T/lun2"
expect 1 "already exists" "create with a name in use" -- cvm create data "$T/lun4"
[ "$(fingerprint)" = "$before" ] && ok "refused creates wrote nothing" || not_ok "a refused create changed a LUN"

# A crash in the middle of grow (after both labels and one config copy): the new config wins.
CVM_FAULT_CRASH_AFTER=3 "$BIN/cvm" --scan "$T" grow data "$T/lun4" "$T/lun5" >/dev/null 2>&1
[ $? -eq 86 ] && ok "grow stopped by the fault hook" || not_ok "fault hook did not stop grow"
expect 0 "generation  2" "interrupted grow: new generation in force" -- cvm show data
expect 4 "config copy stale" "check sees the copies the crash left stale" -- cvm check data
expect 1 "repaired" "check --repair finishes the grow" -- cvm check --repair data
expect 0 "clean" "check is clean after that" -- cvm check data

# Write data, and remove refuses without --force.
"$BIN/randio" --scan "$T" -N 1 -p seq -r 0 --quiet vol:data >/dev/null
expect 1 "holds data" "remove refuses a volume holding data" -- cvm remove data

# A missing LUN is named by uuid and last path.
mv "$T/lun2" "$T.hidden"
expect 0 "missing" "show marks the missing LUN" -- cvm show data
expect 1 "last seen at $T/lun2" "randio names the missing LUN" -- "$BIN/randio" --scan "$T" -N 10 vol:data
expect 4 "missing" "check reports the missing LUN" -- cvm check data
mv "$T.hidden" "$T/lun2"

# A damaged label: named, pointed to cvm check, repaired by it.
printf 'garbage!' | dd of="$T/lun3" bs=1 seek=64 conv=notrunc status=none
expect 0 "label-damaged" "show marks the damaged label" -- cvm show data
expect 1 "run 'cvm check data'" "open of a volume with a damaged label points to cvm check" -- "$BIN/randio" --scan "$T" -N 10 vol:data
expect 4 "label damaged" "check finds the damaged label" -- cvm check data
expect 1 "repaired" "check --repair rewrites it" -- cvm check --repair data
expect 0 "clean" "check is clean after repair" -- cvm check data

expect 0 "volume data removed" "remove --force" -- cvm remove --force data
expect 0 "no volumes found" "no volume after remove" -- cvm show
expect 0 "volume again created" "LUNs are reusable after remove" -- cvm create again "$T/lun0"
head -c 2M /dev/urandom > "$T/lun5" && truncate -s 64M "$T/lun5"
expect 0 "volume other created" "a LUN holding foreign data is not mistaken for a damaged label" -- cvm create other "$T/lun5"
finish
