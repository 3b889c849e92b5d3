#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The daemon's control socket trusts no client (issue 68, point 4): ODM requests made by hand
# (control_client.py), as root and as a member of odm_group, with fields libodm would never
# send, and root's control requests with an unknown op or a bad size.  Each is refused with EINVAL and a message naming the field, nothing is made, and the
# daemon goes on; fsck.cfs -n is clean after.
. "$(dirname "${BASH_SOURCE[0]}")/../cfs/lib.sh"
CLIENT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/control_client.py
make_volume req 2 128
"$BIN/mkfs.cfs" req >/dev/null
chmod o+x "$T"
mount_cfs req "$T/mnt" odm_group=nogroup || not_ok "mount with odm_group=nogroup: $(tail -3 "$T/req.log")"
mkdir "$T/mnt/db"
chown nobody:nogroup "$T/mnt/db"

for who in root nobody; do
	ask() {
		if [ "$who" = root ]; then python3 "$CLIENT" "$T/mnt" "$@"
		else setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$CLIENT" "$T/mnt" "$@"; fi
	}
	expect 0 "error 22: ODM create: block size 3: give a power of two" \
		"$who: ODM create with a block size of 3 is refused" -- ask create db/a.dbf 8192 3 0
	expect 0 "error 22: ODM create: block size 2097152" \
		"$who: ODM create with a block size of 2 MiB is refused" -- ask create db/a.dbf 8388608 2097152 0
	expect 0 "error 22: ODM create: file type 99: give one from 0 to" \
		"$who: ODM create with a file type of 99 is refused" -- ask create db/b.dbf 8192 8192 99
	expect 0 "error 22: ODM create: size 1000 is not a multiple of the block size 8192" \
		"$who: ODM create of a size that is no multiple of its block size is refused" -- \
		ask create db/c.dbf 1000 8192 0
	expect 0 "error 22: the request is not as it was sent: a string with a NUL byte" \
		"$who: ODM create of a path with a NUL byte in it is refused (not made shorter)" -- \
		ask create 'db/d.dbf\0.x' 8192 8192 0
	# Field 4 (size) twice: protobuf-c keeps the last, which is not what a checker of the
	# first would have seen.
	expect 0 "error 22: the request is not as it was sent" \
		"$who: a request with a field given twice is refused" -- \
		ask raw 0805120864622f652e646266208040208080013080403800
	expect 0 "error 22: ODM resize: size 12288 is not a multiple of the file's block size 8192" \
		"$who: ODM resize to a size that is no multiple of the file's block size is refused" -- \
		ask create db/e.dbf 16384 8192 0 resize 12288
	expect 0 "error 0: " "$who: a valid ODM create (then dropped uncommitted) is answered" -- \
		ask create db/ok.dbf 16384 8192 0
done
# Root's control requests: an op this daemon does not know was answered as done; a read-only
# switch of size 7 taken as 1.  Those that were checked already stay so.
expect 0 "error 22: request 99 is not one this daemon (release" \
	"an unknown request is refused, not answered as done" -- python3 "$CLIENT" "$T/mnt" raw 0863
expect 0 "error 22: read-only: size 1 (refuse changes) or 0" \
	"a read-only request of size 7 is refused" -- python3 "$CLIENT" "$T/mnt" raw 080c2007
# A restripe of width 3, or of a LUN not in the volume, was started and failed a moment later.
expect 0 "error 22: restripe: stripe width 3 is not a power of two" \
	"a restripe of stripe width 3 is refused" -- python3 "$CLIENT" "$T/mnt" raw 08112003
expect 0 "error 22: restripe: LUN 01010101-" \
	"a restripe naming a LUN not in the volume is refused" -- \
	python3 "$CLIENT" "$T/mnt" raw 08114a1001010101010101010101010101010101
check "... and none was started" bash -c "! grep -q 'restripe started' '$T/req.log'"
expect 0 "error 22: the filesystem has 4 node slots: give 1 to 60 more" \
	"adding 0 node slots is refused" -- python3 "$CLIENT" "$T/mnt" raw 080f2000
expect 0 "error 22: a quota request names a type and an id" \
	"a quota request without its record is refused" -- python3 "$CLIENT" "$T/mnt" raw 0813
check "the refused requests made nothing (the valid ones were never committed)" \
	test -z "$(ls -A "$T/mnt/db")"
expect 0 "error 74: not a control request" "bytes that are no request: the daemon says so (and closes the connection)" -- \
	python3 "$CLIENT" "$T/mnt" raw ffffffffff
grep -q "sent a malformed request (op 5): refused" "$T/req.log" &&
	ok "the daemon logged the malformed requests, naming the client" ||
	not_ok "no log line for the malformed requests: $(tail -3 "$T/req.log")"
check "the daemon goes on: cfs status answers" "$BIN/cfs" status "$T/mnt"
check "the daemon goes on: a file is written and read" bash -c \
	"echo after >'$T/mnt/after' && [ \"\$(cat '$T/mnt/after')\" = after ]"
umount_cfs "$T/mnt"
check "fsck.cfs -n: clean after the refused requests" "$BIN/fsck.cfs" -n req
finish
