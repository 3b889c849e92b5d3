#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm restripe --luns as a user runs it: a filesystem on 2 LUNs grown twice by 2 (three stripe
# sets); the last two sets made one (crashed, paused, resumed without --luns), then the first
# given another width while mounted (its daemon runs it), then all of it one set, then, grown
# while mounted, all again once cfs grow took the LUN in; every file as written and fsck clean
# after each.  Each refusal says what is wrong and changes nothing.
. "$(dirname "$0")/../cfs/lib.sh"
M=$T/mnt
cvm() { "$BIN/cvm" "$@"; }
sums() { (cd "$M" && sha256sum -- *); }
lun() { echo "$T/v.lun$1"; }

# The stripe sets as "LUNSxWIDTHk ...", and the restripe record as "first+count" or "-".
layout() {
	cvm show v --json | python3 -c 'import json,sys; v=json.load(sys.stdin)["volumes"][0]; r=v["restripe"]; print(" ".join("%dx%dk" % (len(s["luns"]), s["stripe_width"] // 1024) for s in v["stripe_sets"]), "%d+%d" % (r["first_set"], r["set_count"]) if r else "-")'
}
layout_is() { [ "$(layout)" = "$1" ] || { echo "layout $(layout), not $1"; return 1; }; }
files_intact() {
	"$BIN/fsck.cfs" -n v >/dev/null 2>&1 || { echo "fsck found problems"; return 1; }
	mount_cfs v "$M" && sums | cmp - "$T/sums" && umount_cfs "$M"
}

make_volume v 2 32
make_volume w 1 32
"$BIN/mkfs.cfs" v >/dev/null 2>&1
mount_cfs v "$M"
for i in 1 2 3; do head -c 8M /dev/urandom >"$M/before$i"; done
umount_cfs "$M"
truncate -s 32M "$(lun 2)" "$(lun 3)" "$(lun 4)" "$(lun 5)"
cvm grow v "$(lun 2)" "$(lun 3)" >/dev/null && cvm grow v "$(lun 4)" "$(lun 5)" >/dev/null
mount_cfs v "$M"
"$BIN/cfs" grow "$M" >/dev/null
head -c 40M /dev/urandom >"$M/after"
sums >"$T/sums"
umount_cfs "$M"
check "three stripe sets of 2 LUNs" layout_is "2x256k 2x256k 2x256k -"
uuid4=$(cvm show v --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["volumes"][0]["stripe_sets"][2]["luns"][0]["uuid"])')

# Refusals: each names what is wrong; no LUN changes.
before=$(fingerprint)
expect 1 "takes part of stripe set 0 (1 of its 2 LUNs)" "part of a stripe set is refused" -- \
	cvm restripe v --luns "$(lun 0),$(lun 2),$(lun 3)"
expect 1 "takes stripe sets 0 and 2 but not stripe set 1 between them" \
	"sets that are not adjacent are refused" -- cvm restripe v --luns "$(lun 0),$(lun 1),$(lun 4),$(lun 5)"
expect 1 "is not one of volume v's" "another volume's LUN is refused" -- cvm restripe v --luns "$T/w.lun0"
expect 1 "is given twice" "a LUN given twice is refused" -- cvm restripe v --luns "$(lun 0),$(lun 1),$(lun 0)"
expect 2 "--luns: $T/nothing is neither a path nor a uuid" "a LUN that does not exist is refused" -- \
	cvm restripe v --luns "$(lun 0),$T/nothing"
expect 2 "is not a LUN the scan found" "a file that is no LUN is refused" -- cvm restripe v --luns /etc/hostname
expect 2 "names no LUN" "an empty list is refused" -- cvm restripe v --luns ,
expect 1 "cannot be spread evenly over their 2 LUNs in stripes of 64.0 MiB, and stripe set 1 after them must keep its place" \
	"a width the first set cannot keep its size in is refused" -- cvm restripe v --luns "$(lun 0),$(lun 1)" -w 64M
expect 0 "nothing to do: stripe set 1 of volume v is one stripe set of width 262144 already" \
	"a set as it is already has nothing to do" -- cvm restripe v --luns "$(lun 2),$(lun 3)"
[ "$(fingerprint)" = "$before" ] && ok "refused restripes changed no LUN" || not_ok "a refused restripe changed a LUN"
mount_cfs v "$M"
expect 1 "takes part of stripe set 0" "refused while mounted, before the daemon is asked" -- \
	cvm restripe v --luns "$(lun 1)"
check "the daemon was not asked" bash -c "! grep -q 'restripe started' '$T/v.log'"
umount_cfs "$M"

# Sets 1-2 (a LUN named by uuid) become one: the power lost at its 40th write, then run again
# without --luns and paused with Ctrl-C, then finished.
expect 86 "" "the restripe of sets 1-2 loses power at its 40th write" -- \
	env CVM_FAULT_CRASH_AFTER=40 "$BIN/cvm" restripe v --luns "$(lun 2),$(lun 3),$uuid4,$(lun 5)"
check "the record says sets 1-2" layout_is "2x256k 2x256k 2x256k 1+2"
"$BIN/cvm" restripe v --rate 5 >"$T/paused.out" 2>&1 &
job=$!
# Its progress, not the record (the crashed run left one): its Ctrl-C handler is in place.
check_soon 120 "a restripe of sets 1-2 is under way" grep -q "cvm restripe: v: " "$T/paused.out"
kill -INT $job
wait $job
code=$?
[ $code -eq 3 ] && ok "Ctrl-C pauses it (exit 3)" || not_ok "Ctrl-C: exit $code, $(cat "$T/paused.out")"
expect 0 "of stripe sets 1-2 to one stripe set of width 256.0 KiB, 4 LUNs x 31.0 MiB" \
	"cvm show says which sets the restripe makes one" -- cvm show v
check "cvm show --json records sets 1-2" layout_is "2x256k 2x256k 2x256k 1+2"
expect 1 "is being restriped (stripe sets 1-2); run the restripe again without --luns" \
	"other LUNs while it is paused are refused" -- cvm restripe v --luns "$(lun 0),$(lun 1)"
check "paused: every file as written, fsck clean" files_intact
expect 0 "restriped: 2 stripe sets: width 256.0 KiB over 2 LUNs, width 256.0 KiB over 4 LUNs" \
	"the restripe goes on without --luns" -- cvm restripe v
check "set 0 as it was, sets 1-2 one set of 4 LUNs" layout_is "2x256k 4x256k -"
check "after sets 1-2: every file as written, fsck clean" files_intact

# Set 0 to another width while mounted: the daemon runs it; set 1 after it keeps its place.
mount_cfs v "$M"
expect 0 "restriped: 2 stripe sets: width 64.0 KiB over 2 LUNs, width 256.0 KiB over 4 LUNs" \
	"a mounted set gets another width" -- cvm restripe v --luns "$(lun 1),$(lun 0)" -w 64k
check "the daemon logged it" grep -q "restriped: 2 stripe sets" "$T/v.log"
check "mounted: every file reads back as written" bash -c "cd '$M' && sha256sum -- * | cmp -s - '$T/sums'"
umount_cfs "$M"
check "set 0 in 64 KiB stripes, set 1 as it was" layout_is "2x64k 4x256k -"
check "after set 0: every file as written, fsck clean" files_intact

# All of it, in the first set's width.
expect 0 "restriped: one stripe set of width 64.0 KiB over 6 LUNs" "then all LUNs one set" -- \
	cvm restripe v --luns all
check "one set of 6 LUNs" layout_is "6x64k -"
check "after all: every file as written, fsck clean" files_intact

# Mounted, a LUN added by cvm grow alone: the mount takes it in (cfs grow) before a restripe.
mount_cfs v "$M"
truncate -s 32M "$(lun 6)"
cvm grow v "$(lun 6)" >/dev/null
expect 1 "volume v has 7 LUNs, of which this mount uses 6: run 'cfs grow' on the mount first" \
	"a restripe of LUNs the mount has not taken in is refused, saying what to run" -- cvm restripe v
"$BIN/cfs" grow "$M" >/dev/null
expect 0 "restriped: one stripe set of width 64.0 KiB over 7 LUNs" "after cfs grow it runs" -- \
	cvm restripe v
umount_cfs "$M"
check "after the grow and restripe: every file as written, fsck clean" files_intact
finish
