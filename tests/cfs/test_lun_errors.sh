#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A failing LUN is named (issue 68, point 5): two sparse LUN files on a tmpfs too small for
# them (a thin-provisioned LUN that runs out of space).  A writer filling the filesystem gets
# an error; the daemon's log names the LUN, the byte and the errno of each failed I/O (at most
# 10 lines per 10 s, the rest counted); cfs status (text, --json and --prometheus) counts the
# failures per LUN; what was fsync'd before reads back intact; the mount unmounts and
# fsck.cfs -n is clean.
# Once on a normal mount (the daemon's own writes) and once on a dboptimized one (direct
# writes its threads send to the LUNs); then a database's reads through libodm.
. "$(dirname "$0")/lib.sh"
M=$T/mnt
mkdir -p "$T/thin"
mount -t tmpfs -o size=24M cfs-thin "$T/thin" || { not_ok "mount a tmpfs"; finish; }
trap 'umount -l "$T/thin" 2>/dev/null; cfs_cleanup' EXIT
for i in 0 1; do truncate -s 96M "$T/thin/lun$i"; done
export CVM_SCAN="$T/thin"
"$BIN/cvm" create thin "$T/thin/lun0" "$T/thin/lun1" >/dev/null &&
	"$BIN/mkfs.cfs" -J 1 thin >/dev/null 2>&1 || { not_ok "cvm create, mkfs.cfs"; finish; }

json_luns() { # path errors, one LUN a line
	"$BIN/cfs" status --json "$M" | python3 -c '
import json, sys
for l in json.load(sys.stdin)["luns"]: print(l["path"], l["io_errors"])'
}

fill() { # MOUNT_OPTIONS WHAT
	local what=$2 out
	mount_cfs thin "$M" "$1" || { not_ok "$what: mount: $(tail -3 "$T/thin.log")"; return; }
	head -c 1M /dev/urandom >"$T/kept"
	dd if="$T/kept" of="$M/kept-$what" bs=1M conv=fsync status=none
	[ "$(json_luns | awk '{ s += $2 } END { print s }')" = 0 ] && ok "$what: no LUN has failed yet" ||
		not_ok "$what: failed I/O before the fill: $(json_luns)"
	out=$(dd if=/dev/urandom of="$M/fill-$what" bs=1M count=200 oflag=direct 2>&1)
	grep -Eq "Input/output error|No space left" <<<"$out" && ok "$what: the writer gets an error" ||
		not_ok "$what: filling the thin LUNs: $out"
	json_luns >"$T/luns"
	local failed total lines
	failed=$(awk '$2 > 0 { print $1 }' "$T/luns")
	total=$(awk '{ s += $2 } END { print s }' "$T/luns")
	[ -n "$failed" ] && ok "$what: cfs status --json counts failed I/O per LUN ($total)" ||
		not_ok "$what: no LUN counts a failure: $(cat "$T/luns")"
	for path in $failed; do
		grep -Eq "volume thin: LUN [01] \($path\): (write|flush) of [0-9]+ bytes at byte [0-9]+ failed: No space left on device" "$T/thin.log" &&
			ok "$what: the log names $path, the byte and the errno" ||
			not_ok "$what: no log line names $path: $(grep -i lun "$T/thin.log" | tail -3)"
	done
	lines=$(grep -c "failed I/O on this LUN" "$T/thin.log")
	if [ "${total:-0}" -gt 10 ]; then
		[ "$lines" -lt "$total" ] && ok "$what: the lines are rate-limited ($lines for $total failures)" ||
			not_ok "$what: $lines lines for $total failures"
	fi
	expect 0 "failed reads, writes or flushes" "$what: cfs status names the failing LUN" -- "$BIN/cfs" status "$M"
	"$BIN/cfs" status "$M" --prometheus="$T/cfs.prom"
	for path in $failed; do
		grep -q "^cfs_lun_io_errors_total{.*path=\"$path\"} [1-9]" "$T/cfs.prom" &&
			ok "$what: cfs status --prometheus=FILE counts $path's failures" ||
			not_ok "$what: --prometheus: $(cat "$T/cfs.prom")"
	done
	check "$what: what was fsync'd reads back intact" cmp "$T/kept" "$M/kept-$what"
	# The fill's last commits may have failed too (the filesystem went read-only): the
	# unmount then says its write-back failed, and the journal holds what was committed.
	timeout 240 "$BIN/cfs" umount "$M" >"$T/umount.out" 2>&1 ||
		grep -q "writing back to the LUNs of thin failed" "$T/umount.out" ||
		not_ok "$what: unmount: $(cat "$T/umount.out")"
	! mountpoint -q "$M" && ! pgrep -f "^cfsd .*$M" >/dev/null && ok "$what: unmounted" ||
		not_ok "$what: still mounted"
	expect 0 "clean" "$what: fsck.cfs -n clean after" -- "$BIN/fsck.cfs" -n thin
	: >"$T/thin.log"
}
fill "" normal
mount -o remount,size=64M "$T/thin" # room for the next fill, as an admin would add
fill dboptimized dboptimized

# A database's reads through libodm go to the LUNs from its own processes: their failures
# (the LUN files cut short under a running load) are logged in its log, reported to cfsd,
# logged there naming the client and counted with the daemon's own in cfs status.
export CVM_SCAN=$T
make_volume odm 2 64
"$BIN/mkfs.cfs" odm >/dev/null 2>&1 || { not_ok "odm: mkfs.cfs"; finish; }
mount_cfs odm "$T/odm" dboptimized || { not_ok "odm: mount: $(tail -3 "$T/odm.log")"; finish; }
mkdir "$T/odm/db"
S=$(($$ % 10000))
trap 'rm -f /dev/shm/odm.LE$$.*; umount -l "$T/thin" 2>/dev/null; cfs_cleanup' EXIT
"$BIN/odmload" --dir "$T/odm/db" --db LE$$ --instance LE$S --until "$T/odm.stop" --files 2 \
	--file-mib 8 --lib "$(dirname "$BIN")/lib/libodm.so" >"$T/odmload.out" 2>&1 &
load=$!
# A foreground has read through libodm: it has the LUNs open, and reads them from then on.
read_done() {
	"$BIN/odmstat" --instance "LE$S" --prometheus 2>/dev/null |
		grep -Eq "^odm_io_operations_total\{.*ptype=\"foreground\",op=\"read\",mode=\"sync\"\} [1-9]"
}
wait_until 120 read_done || not_ok "odm: no read through libodm: $(tail -3 "$T/odmload.out")"
truncate -s 1M "$T/odm.lun0" "$T/odm.lun1"
wait_until 120 grep -q "failed I/O of ODM client" "$T/odm.log"
touch "$T/odm.stop"
wait "$load"
grep -Eq "libodm: $T/odm: volume odm: LUN [01] \(.*\): read of [0-9]+ bytes at byte [0-9]+ failed: Input/output error" "$T/odmload.out" &&
	ok "odm: the database's log names the LUN, the byte and the errno" ||
	not_ok "odm: the load's output: $(tail -5 "$T/odmload.out")"
grep -Eq "LUN [01] \(.*\): [0-9]+ failed I/O of ODM client LE$$/LE$S" "$T/odm.log" &&
	ok "odm: the daemon's log names the LUN and the ODM client" ||
	not_ok "odm: the daemon's log: $(tail -5 "$T/odm.log")"
total=$("$BIN/cfs" status --json "$T/odm" | python3 -c '
import json, sys
print(sum(l["io_errors"] for l in json.load(sys.stdin)["luns"]))')
[ "${total:-0}" -gt 0 ] && ok "odm: cfs status --json counts libodm's failed I/O per LUN ($total)" ||
	not_ok "odm: no LUN counts a failure"
umount -l "$T/odm" # its LUNs are gone: nothing to write back
finish
