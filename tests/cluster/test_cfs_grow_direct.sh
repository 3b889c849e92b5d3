#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cfs grow on a cluster node with direct reads and writes in flight through /dev/fuse (libaio
# at depth 32: cfsd/dev_direct.c, whose completion thread ends each request while others are
# still in flight).  The grow holds the filesystem's lock while it waits for the data I/O in
# flight to end; an end that waited for that lock held up the others' ends for ever.  The
# completions are held (CFSD_TEST_HOLD_COMPLETIONS) until the grow says it waits, then let go.
. "$(dirname "$0")/cfs_lib.sh" "cfs grow under direct I/O"
C up 1 >/dev/null && ok "cluster of 1 node up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 2 data >/dev/null
mkdir -p "$(M 1)"
on 1 env CFSD_TEST_HOLD_COMPLETIONS="$T/hold" "$BIN/cfs" mount data "$(M 1)" -o "log=$T/cfsd1.log,dboptimized,nouring" &&
	ok "node 1 mounts dboptimized, its completions held on demand" || { not_ok "node 1 mounts"; finish; }
check "node 1 writes a file of 16 MiB" \
	on 1 dd if=/dev/urandom of="$(M 1)/f" bs=1M count=16 oflag=direct status=none
d0=$(status_of 1 dev_direct)
on 1 "$BIN/randio" -q 32 -r 50 -t 300 --quiet --force "$(M 1)/f" >"$T/randio.out" 2>&1 &
io=$!
through_dev_direct() { [ "$(status_of 1 dev_direct)" -gt $((d0 + 100)) ]; }
check_soon 120 "direct I/O at depth 32 goes through /dev/fuse's direct path" through_dev_direct

touch "$T/hold"
check_soon 120 "the daemon holds the completions of requests in flight" test -e "$T/hold.held"
truncate -s 64M "$T/lun4"
check "cvm grow adds a LUN" "$BIN/cvm" grow data "$T/lun4"
on 1 "$BIN/cfs" grow "$(M 1)" >"$T/grow.out" 2>&1 &
grow=$!
check_soon 120 "cfs grow waits for the data I/O in flight" \
	grep -q "grow: waiting for the data I/O in flight" "$T/cfsd1.log"
rm "$T/hold"
ended() { ! kill -0 "$grow" 2>/dev/null; }
check_soon 120 "cfs grow ends once the completions come" ended
ended || hung "cfs grow under direct I/O"
wait "$grow" && ok "cfs grow succeeds: $(cat "$T/grow.out")" || not_ok "cfs grow: $(cat "$T/grow.out")"
stop_job "$io" "randio -q 32"
check "direct I/O goes on after the grow" on 1 "$BIN/randio" -q 32 -N 2000 --quiet --force "$(M 1)/f"
no_damage_logged
check "node 1 unmounts" umount_on 1
fsck_clean "after the grow under direct I/O"
finish
