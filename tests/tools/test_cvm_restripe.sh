#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm restripe of an unmounted volume as a user runs it: a filesystem made on 2 LUNs and grown
# onto 2 more, spread over all 4 with its files intact, through kills at random moments, a
# pause and a resume; and each refusal with its message and nothing changed.
. "$(dirname "$0")/../cfs/lib.sh"
M=$T/mnt
cvm() { "$BIN/cvm" "$@"; }
sums() { (cd "$M" && sha256sum -- *); }

# Restriped must mean: one stripe set of 4, every file as written, fsck clean.
restriped() {
	cvm show v --json | python3 -c 'import json,sys; v=json.load(sys.stdin)["volumes"][0]; assert v["restripe"] is None and len(v["stripe_sets"])==1 and len(v["stripe_sets"][0]["luns"])==4, v' &&
		"$BIN/fsck.cfs" -n v >/dev/null 2>&1 && mount_cfs v "$M" && sums | cmp -s - "$T/sums" &&
		umount_cfs "$M"
}

under_way() { cvm show v | grep -q '% done'; }
progress_in_json() {
	cvm show v --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["volumes"][0]["restripe"]; assert r["target_stripe_width"]==262144 and 0<r["moves_done"]<r["moves_total"], r'
}

make_volume v 2 48
truncate -s 48M "$T/v.lun2" "$T/v.lun3"
"$BIN/mkfs.cfs" v >/dev/null 2>&1
mount_cfs v "$M"
for i in 1 2 3; do head -c 12M /dev/urandom >"$M/before$i"; done
umount_cfs "$M"
expect 0 "grown" "cvm grow by 2 LUNs" -- cvm grow v "$T/v.lun2" "$T/v.lun3"
mount_cfs v "$M"
"$BIN/cfs" grow "$M" >/dev/null
head -c 30M /dev/urandom >"$M/after"
sums >"$T/sums"

# Bad inputs refused with nothing changed (a mounted volume is restriped by its daemon:
# tests/cfs/test_restripe_online.sh).
umount_cfs "$M"
before=$(fingerprint)
expect 2 "--luns: 0 is neither a path nor a uuid" "a --luns naming no LUN is refused" -- cvm restripe v --luns 0,1
expect 2 "--rate 0: give megabytes a second" "a rate of 0 is refused" -- cvm restripe v --rate 0
expect 2 "--rate and --luns apply to 'restripe' only" "--rate with another command is refused" -- cvm show v --rate 5
expect 2 "power of two" "a bad stripe width is refused" -- cvm restripe v -w 100k
[ "$(fingerprint)" = "$before" ] && ok "refused restripes changed no LUN" || not_ok "a refused restripe changed a LUN"

# Paused with Ctrl-C (SIGINT) once under way; a second restripe meanwhile is refused.
"$BIN/cvm" restripe v --rate 5 >"$T/paused.out" 2>&1 & # not through cvm(): $! is the command
job=$!
check_soon 120 "a restripe is under way" under_way
expect 1 "another process on this node uses it" "a second restripe at once is refused" -- cvm restripe v
kill -INT $job
wait $job
code=$?
[ $code -eq 3 ] && grep -q "restripe paused" "$T/paused.out" && ok "Ctrl-C pauses it (exit 3)" ||
	not_ok "Ctrl-C: exit $code, $(cat "$T/paused.out")"

# A paused volume is used as it lies: mounted, its files read, a file written.
expect 0 "" "a volume in mid-restripe mounts" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
check "its files read back as written" bash -c "cd '$M' && sha256sum -- * | cmp -s - '$T/sums'"
head -c 8M /dev/urandom >"$M/during"
sums >"$T/sums"
umount_cfs "$M"
# What it refuses meanwhile, and what it says.
expect 0 "% done" "cvm show says where the restripe stands" -- cvm show v
check "cvm show --json gives the progress" progress_in_json
truncate -s 48M "$T/lun9"
expect 1 "is being restriped; let 'cvm restripe v' finish" "grow during a restripe is refused" -- \
	cvm grow v "$T/lun9"
expect 1 "being restriped to stripe width 262144; run the restripe again without --stripe-width" \
	"another width while one is paused is refused" -- cvm restripe v -w 64k

# Killed at random moments, then run again until it is done.
for round in 1 2 3 4; do
	"$BIN/cvm" restripe v --rate 40 >/dev/null 2>&1 &
	sleep "0.$((RANDOM % 10))"
	kill -9 $! 2>/dev/null
	wait $! 2>/dev/null
done
expect 0 "restriped: one stripe set of width 256.0 KiB over 4 LUNs" "restripe after kills finishes" -- cvm restripe v
check "after the pause and kills: one set of 4 LUNs, fsck clean, every file as written" restriped

# Another stripe width, in one go.
expect 0 "width 64.0 KiB over 4 LUNs" "restripe to another stripe width" -- cvm restripe v -w 64k
check "after a new width: one set of 4 LUNs, fsck clean, every file as written" restriped
expect 0 "nothing to do" "a restripe to what it is already has nothing to do" -- cvm restripe v -w 64k
finish
