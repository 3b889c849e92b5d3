#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cvm restripe while the filesystem is mounted and in use on this node (cfsd/restripe.c): a
# filesystem made on 2 LUNs, grown onto 2 more, restriped while block verifiers write and
# check files (one with O_DIRECT) and an ODM instance runs; paused with Ctrl-C and resumed,
# still mounted; then every file as written and fsck clean.
. "$(dirname "$0")/lib.sh"
M=$T/mnt
cvm() { "$BIN/cvm" "$@"; }
sums() { (cd "$M" && sha256sum -- before*); }
under_way() { cvm show v | grep -q '% done'; }

make_volume v 2 48
# What a killed daemon leaves in /dev/shm (its restripe's gate) and the ODM instance's
# statistics go with the test.
uuid=$(cvm show v --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["volumes"][0]["uuid"])')
trap 'rm -f "/dev/shm/cvm-restripe-$uuid" /dev/shm/odm.rs$$.*; cfs_cleanup' EXIT
"$BIN/mkfs.cfs" v >/dev/null 2>&1
mount_cfs v "$M" dboptimized
for i in 1 2; do head -c 12M /dev/urandom >"$M/before$i"; done
sums >"$T/sums"
truncate -s 48M "$T/v.lun2" "$T/v.lun3"
expect 0 "grown" "cvm grow by 2 LUNs while mounted" -- cvm grow v "$T/v.lun2" "$T/v.lun3"
"$BIN/cfs" grow "$M" >/dev/null

# The daemon dies at a chosen write of its restripe (CVM_FAULT_CRASH_AFTER: config commits,
# staging, placing), an O_DIRECT verifier writing meanwhile; the batch it cut short is
# finished (cvm restripe unmounted, paused at once); then every write the verifier had
# acknowledged, and every file from before, is there.
crash_round() {
	local k=$1 code
	CVM_FAULT_CRASH_AFTER=$k "$BIN/cfs" mount v "$M" -o "log=$T/v.log,dboptimized"
	rm -f "$T/crash.out" # the last round's "ready" is not this one's
	python3 "$(dirname "$0")/block_verifier.py" "$M/crash" 4 "$T/crash-stop" 3 direct "$T/crash.state" \
		>"$T/crash.out" 2>&1 &
	local verifier=$! i
	for ((i = 0; i < 600; i++)); do
		grep -qs ready "$T/crash.out" && break
		kill -0 $verifier 2>/dev/null || break
		sleep 0.1
	done
	"$BIN/cvm" restripe v >"$T/crash-restripe.out" 2>&1
	touch "$T/crash-stop"
	wait $verifier
	code=$?
	rm -f "$T/crash-stop"
	# 0: the daemon lived; 3: it died under the verifier; 2: before the verifier began
	[ $code -eq 0 ] || [ $code -eq 2 ] || [ $code -eq 3 ] || not_ok "crash at write $k: verifier: $(cat "$T/crash.out")"
	if [ $code -ne 0 ]; then
		umount -l "$M"
		"$BIN/cvm" restripe v --rate 1 >/dev/null 2>&1 &
		local job=$!
		wait_until 120 ready_for_sigint $job || not_ok "crash at write $k: cvm restripe has no Ctrl-C handler"
		kill -INT $job
		wait $job
	else
		umount_cfs "$M"
	fi
	mount_cfs v "$M" || { not_ok "crash at write $k: no mount after: $(tail -3 "$T/v.log")"; return; }
	python3 "$(dirname "$0")/block_verifier.py" check "$M/crash" "$T/crash.state" >"$T/check.out" 2>&1 &&
		(cd "$M" && sha256sum -- before* | cmp -s - "$T/sums") &&
		ok "daemon killed at restripe write $k ($(case $code in 0) echo it lived ;; 2) echo before the writer began ;;
			*) echo under the writer ;; esac)): every acknowledged write and file is there" ||
		not_ok "daemon killed at restripe write $k: $(cat "$T/check.out")"
	umount_cfs "$M"
}
umount_cfs "$M"
for k in 1 2 3 5 8 13 $((20 + RANDOM % 40)) $((60 + RANDOM % 60)) $((120 + RANDOM % 120)) $((240 + RANDOM % 120)); do
	crash_round $k
done
# Unmounted while its daemon restripes: the daemon pauses it after the batch in hand and exits.
mount_cfs v "$M" dboptimized
"$BIN/cvm" restripe v --rate 4 >"$T/umount.out" 2>&1 &
job=$!
check_soon 120 "the daemon's restripe runs" bash -c "'$BIN/cfs' status --json '$M' | grep -q '\"state\": \"running\"'"
check "cfs umount while the daemon restripes" umount_cfs "$M"
wait $job
code=$?
[ $code -ne 0 ] && ok "cvm restripe says the daemon went (exit $code)" || not_ok "cvm restripe: exit 0: $(cat "$T/umount.out")"
check "the daemon logged the pause" grep -q "restripe paused at move" "$T/v.log"
check "the kills left the restripe under way, not done" bash -c "'$BIN/cvm' show v --json | python3 -c 'import json,sys; r=json.load(sys.stdin)[\"volumes\"][0][\"restripe\"]; assert r and r[\"moves_done\"] < r[\"moves_total\"], r'"
mount_cfs v "$M" dboptimized

# The users: two block verifiers (direct, buffered) and an ODM instance, until $T/stop.
python3 "$(dirname "$0")/block_verifier.py" "$M/direct" 8 "$T/stop" 1 direct >"$T/direct.out" 2>&1 &
v1=$!
python3 "$(dirname "$0")/block_verifier.py" "$M/buffered" 8 "$T/stop" 2 >"$T/buffered.out" 2>&1 &
v2=$!
mkdir "$M/db"
LD_LIBRARY_PATH="$BIN/../lib" "$BIN/odmload" --dir "$M/db" --db rs$$ --instance rs1 --files 2 \
	--file-mib 8 --until "$T/stop" --lib "$BIN/../lib/libodm.so" >"$T/odm.out" 2>&1 &
odm=$!

# Under way while mounted, paused with Ctrl-C, then resumed to the end, still mounted.
"$BIN/cvm" restripe v --rate 4 >"$T/paused.out" 2>&1 & # $! is the command
job=$!
check_soon 120 "a restripe of the mounted volume is under way" under_way
expect 1 "being restriped already" "a second restripe at once is refused" -- cvm restripe v
truncate -s 48M "$T/lun9"
expect 1 "is being restriped" "cvm grow during the restripe is refused" -- cvm grow v "$T/lun9"
kill -INT $job
wait $job
code=$?
[ $code -eq 3 ] && grep -q "restripe paused; the volume can be used" "$T/paused.out" &&
	ok "Ctrl-C pauses the daemon's restripe (exit 3)" || not_ok "Ctrl-C: exit $code, $(cat "$T/paused.out")"
expect 0 '"restripe": {"state": "paused"' "cfs status --json says the restripe paused" -- "$BIN/cfs" status --json "$M"
expect 0 "volume restripe paused" "cfs status says so" -- "$BIN/cfs" status "$M"
expect 0 "restriped: one stripe set of width 256.0 KiB over 4 LUNs" \
	"the restripe resumed while mounted finishes" -- cvm restripe v
expect 0 "restriped: one stripe set" "the daemon logged it" -- cat "$T/v.log"

touch "$T/stop"
for p in $v1 $v2; do wait $p || not_ok "a block verifier: $(cat "$T/direct.out" "$T/buffered.out")"; done
check "the O_DIRECT verifier read every block as written" grep -q "every read as written" "$T/direct.out"
check "the buffered verifier read every block as written" grep -q "every read as written" "$T/buffered.out"
wait $odm && ok "the ODM instance ran through the restripe without an error" ||
	not_ok "odmload: $(tail -5 "$T/odm.out")"
check "the files from before the grow read back as written" bash -c "cd '$M' && sha256sum -- before* | cmp -s - '$T/sums'"
unmount_and_fsck v "$M" "after the online restripe" && ok "after the online restripe: fsck.cfs -n clean"
check "one stripe set over the 4 LUNs" bash -c "'$BIN/cvm' show v --json | python3 -c 'import json,sys; v=json.load(sys.stdin)[\"volumes\"][0]; assert v[\"restripe\"] is None and len(v[\"stripe_sets\"])==1 and len(v[\"stripe_sets\"][0][\"luns\"])==4, v'"
mount_cfs v "$M"
check "after a new mount the files from before still read as written" bash -c "cd '$M' && sha256sum -- before* | cmp -s - '$T/sums'"
umount_cfs "$M"
[ ! -e "/dev/shm/cvm-restripe-$uuid" ] && ok "the restripe left no gate in /dev/shm" || not_ok "its gate was left in /dev/shm"
finish
