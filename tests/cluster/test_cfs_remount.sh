#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remount,ro and back to rw on one node of a cluster while the others go on: the read-only
# node still sees the others' changes and refuses writes; back to rw it writes again, with
# nothing replayed, and the others see it.  fsck.cfs -n clean at the end.
. "$(dirname "$0")/cfs_lib.sh" "cfs remount on a cluster"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done
check "node 1 writes a file" on 1 sh -c "echo one >'$(M 1)/f1'"
check "node 1 remounts read-only" on 1 "$BIN/cfs" mount data "$(M 1)" -o remount,ro
check "node 2 writes on" on 2 sh -c "echo two >'$(M 2)/f2' && echo more >>'$(M 2)/f1'"
check "read-only node 1 sees node 2's changes" \
	on 1 sh -c "[ \"\$(cat '$(M 1)/f2')\" = two ] && [ \"\$(cat '$(M 1)/f1')\" = \"\$(printf 'one\nmore')\" ]"
if on 1 sh -c "echo x >'$(M 1)/f3'" 2>"$T/ro.err"; then not_ok "read-only node 1 wrote a file"
else check "read-only node 1 refuses a write" grep -q "Read-only file system" "$T/ro.err"; fi
check "node 1 remounts read-write" on 1 "$BIN/cfs" mount data "$(M 1)" -o remount,rw
check "node 1 writes again" on 1 sh -c "echo three >'$(M 1)/f3'"
check "node 3 reads it" on 3 sh -c "[ \"\$(cat '$(M 3)/f3')\" = three ]"
check "node 1 replayed nothing at the remounts" bash -c "! grep -q 'replayed' '$T/cfsd1.log'"
for n in 1 2 3; do check "unmount node $n" umount_on $n; done
fsck_clean "after the remounts"
no_damage_logged
finish
