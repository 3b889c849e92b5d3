#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Quotas on a cluster (quota_grant.c: charges against each node's grants, in the journal of
# the node that makes them; refusals after the grants are taken back): a limit set on one node
# applies on every node;
# three nodes writing, and creating, as one user at once never take it past its hard block
# or inode limit, not by one block, and stop at it; every node shows the same usage; a chown
# on one node moves the charge for all; three nodes appending into one project at once stop
# at its limit, and its usage is what du counts of its files; a project's limit holds
# against a preallocation; a node
# killed while it writes and fsyncs leaves usage equal to the files once it is recovered;
# with a node frozen whole while it writes, the others recover it and fill the rest of the
# limit, no more, and the thawed node fences itself; a node writing far from its limit sends
# no lock message, and a lower limit set elsewhere holds at once; a node killed at random steps
# of a quota-heavy workload leaves usage equal to the files; what a node charged reaches the
# others' figures within its fold interval (fsck.cfs -n, which counts every id's usage, is
# clean at the end, and after fsck.cfs -y folds the grants).
. "$(dirname "$0")/cfs_lib.sh" "cfs quotas on a cluster"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
chmod 755 "$T" # the user of the checks reaches the mounts
make_data 64
check "mkfs.cfs -p corosync -O quota,project" "$BIN/mkfs.cfs" -p corosync -J 4 -O quota,project data
# No fold on a timer until the end (quota_fold=0): the checks that count lock messages would
# race it.  Node 3, mounted again after each kill below, folds every 10 s (the default).
for n in 1 2 3; do check "node $n mounts" mount_on $n "fence=$(held_fence),quota_fold=0"; done

as_user() { # NODE UID CMD...
	local n=$1 u=$2
	shift 2
	on "$n" setpriv --reuid "$u" --regid "$u" --clear-groups "$@"
}
# The workers of a round start together: each says it is ready, and waits for the go that
# open_gate gives once all three are (in a directory the user writes in).
mkdir -m 1777 "$T/gate"
open_gate() {
	rm -f "$T"/gate/*
	(wait_until 120 sh -c '[ "$(ls "$1" | wc -l)" = 3 ]' _ "$T/gate"; touch "$T/gate/go") &
}
GATE="
import os, sys, time
open('$T/gate/ready.' + sys.argv[2], 'w').close()
while not os.path.exists('$T/gate/go'):
    time.sleep(0.01)
"
# quota_field NODE -u|-g|-p ID FIELD: one field of cfs quota get --json on NODE.
quota_field() {
	on "$1" "$BIN/cfs" quota get "$(M "$1")" "$2" "$3" --json |
		python3 -c "import json,sys; print(json.load(sys.stdin)['$4'])"
}
# python3 -c "$ACKED" FILE COUNT HOLD: COUNT writes of 8 KiB to FILE, each fsync'd, then
# counted in $T/acked ($T/started after the first); then HOLD seconds of waiting to be killed.
ACKED="
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
for i in range(int(sys.argv[2])):
    os.write(fd, b'k' * 8192)
    os.fsync(fd)
    with open('$T/acked.tmp', 'w') as f:
        f.write(str(i + 1))
    os.rename('$T/acked.tmp', '$T/acked')
    if i == 0:
        open('$T/started', 'w').close()
time.sleep(int(sys.argv[3]))
"

on 1 mkdir "$(M 1)/home"
on 1 chown 1000:1000 "$(M 1)/home"
check "cfs quota set on node 1: user 1000, 24 MiB hard" \
	on 1 "$BIN/cfs" quota set "$(M 1)" -u 1000 --blocks-hard 24M
for n in 2 3; do
	check "node $n sees the limit set on node 1" test "$(quota_field $n -u 1000 hard_bytes)" = 25165824
done

# until_edquot NODE UID FILE KIB: after the gate, appends of KIB KiB to FILE as UID until
# EDQUOT; prints the bytes the writes took.  A cluster mount writes through, so EDQUOT comes
# in write(2).  No limit here is 64 MiB: taking more fails.
until_edquot() {
	as_user "$1" "$2" /usr/bin/python3 -c "$GATE$(cat <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
chunk, done = b'q' * (int(sys.argv[3]) << 10), 0
while True:
    try:
        done += os.write(fd, chunk)
    except OSError as e:
        if e.errno != errno.EDQUOT:
            raise
        break
    if done > 64 << 20:
        sys.exit(f'{done} bytes taken: no limit here is that high')
os.fsync(fd)
os.close(fd)
print(f'EDQUOT after {done} bytes')
PY
)" "$3" "$1" "$4"
}
writer() { until_edquot "$1" 1000 "$(M "$1")/home/w$1" 256; }
open_gate
at_once "three writers as user 1000 at once" writer
used=$(quota_field 1 -u 1000 used_bytes)
check "usage never passed the hard limit: $used of 25165824 bytes" test "$used" -le 25165824
check "... and the writers stopped at it, not early: within 1 MiB ($used bytes)" \
	test "$used" -ge $((25165824 - (1 << 20)))
for n in 2 3; do
	check "node $n shows the same usage" test "$(quota_field $n -u 1000 used_bytes)" = "$used"
done
sizes=$(on 2 sh -c "cd '$(M 2)/home' && du -B1 --apparent-size -c w1 w2 w3 | tail -1 | cut -f1")
taken=$(cat "$T"/writer.{1,2,3} | awk '{ s += $3 } END { print s }')
check "node 2 reads the three files at the sizes their writes took ($sizes, $taken bytes)" \
	test "$sizes" = "$taken"

# One project, three nodes appending at once until EDQUOT (root is held by limits too): the
# usage never over the limit, and what the files hold (du of the project's tree).
on 1 mkdir "$(M 1)/co"
check "project 9 on a directory, 12 MiB hard" on 1 sh -c \
	"chattr +P -p 9 '$(M 1)/co' && '$BIN/cfs' quota set '$(M 1)' -p 9 --blocks-hard 12M"
appender() { until_edquot "$1" 0 "$(M "$1")/co/a$1" 64; }
open_gate
at_once "three nodes appending into project 9 at once" appender
used=$(quota_field 2 -p 9 used_bytes)
check "project 9's usage never passed its limit: $used of 12582912 bytes" test "$used" -le 12582912
check "... and they stopped at it, within 1 MiB" test "$used" -ge $((12582912 - (1 << 20)))
check "... which is what its files hold, counted on node 3" \
	test "$(on 3 du -s -B1 "$(M 3)/co" | cut -f1)" = "$used"

# Inodes: the limit 40 above what the user has; three nodes create at once until EDQUOT.
inodes=$(quota_field 1 -u 1000 used_inodes)
check "cfs quota set on node 2: user 1000, $((inodes + 40)) inodes hard" \
	on 2 "$BIN/cfs" quota set "$(M 2)" -u 1000 --inodes-hard $((inodes + 40))
creator() {
	as_user "$1" 1000 /usr/bin/python3 -c "$GATE$(cat <<'PY'
import errno, os, sys
made = 0
for i in range(1000):
    try:
        os.close(os.open(f'{sys.argv[1]}/c{sys.argv[2]}.{i}', os.O_CREAT | os.O_WRONLY, 0o644))
    except OSError as e:
        if e.errno != errno.EDQUOT:
            raise
        break
    made += 1
print(f'EDQUOT after {made} files')
PY
)" "$(M "$1")/home" "$1"
}
open_gate
at_once "three nodes creating as user 1000 at once" creator
made=$(cat "$T"/creator.{1,2,3} | awk '{ s += $3 } END { print s }')
check "they made exactly the 40 files the limit left ($made)" test "$made" = 40
check "node 3 counts $((inodes + 40)) inodes for user 1000" \
	test "$(quota_field 3 -u 1000 used_inodes)" = $((inodes + 40))
check "node 3 lists all 40" test "$(on 3 sh -c "ls '$(M 3)/home' | grep -c '^c'")" = 40

# A chown on one node moves the charge for every node.
before=$(quota_field 3 -u 1001 used_bytes)
check "root's chown of w1 to user 1001 on node 2" on 2 chown 1001 "$(M 2)/home/w1"
w1=$(on 3 stat -c %b "$(M 3)/home/w1")
check "node 3 charges w1's $((w1 * 512)) bytes to user 1001" \
	test "$(quota_field 3 -u 1001 used_bytes)" = $((before + w1 * 512))
check "... and user 1000 has room again on node 1" as_user 1 1000 \
	dd if=/dev/zero of="$(M 1)/home/again" bs=64k count=1 status=none

# A project: a directory passing on id 7, 4 MiB hard; node 2 takes 3 MiB, node 3 asks for 2.
on 1 mkdir "$(M 1)/tenant"
check "project 7 on a directory (chattr +P -p 7)" on 1 chattr +P -p 7 "$(M 1)/tenant"
check "cfs quota set -p 7 --blocks-hard 4M on node 3" \
	on 3 "$BIN/cfs" quota set "$(M 3)" -p 7 --blocks-hard 4M
check "node 2 preallocates 3 MiB in the project" on 2 fallocate -l 3M "$(M 2)/tenant/a"
expect 1 "Disk quota exceeded" "node 3's 2 MiB more: EDQUOT" -- on 3 fallocate -l 2M "$(M 3)/tenant/b"
check "... keeping no block" test "$(on 1 stat -c %b "$(M 1)/tenant/b")" = 0

# A node killed while it writes and fsyncs user 1002's file: its charges are in its journal
# with its allocations, and the survivor's replay keeps both.
on 1 mkdir "$(M 1)/k"
on 1 chown 1002:1002 "$(M 1)/k"
as_user 1 1002 touch "$(M 1)/k/dying"
check "cfs quota set -u 1002 --blocks-hard 48M" on 1 "$BIN/cfs" quota set "$(M 1)" -u 1002 --blocks-hard 48M
die_while 3 python3 -c "$ACKED" "$(M 3)/k/dying" 4000 600
check "node 1 sees node 3 dead, its recovery pending" recovering
come_back 3
size=$(on 1 stat -c %s "$(M 1)/k/dying")
blocks=$(on 1 stat -c %b "$(M 1)/k/dying")
check "after the recovery user 1002 is charged the dying file's blocks ($((blocks * 512)) bytes)" \
	test "$(quota_field 1 -u 1002 used_bytes)" -ge $((blocks * 512))
acked=$(cat "$T/acked")
check "... its file kept all that its fsyncs acknowledged: $size bytes, $acked writes of 8 KiB" \
	test "$size" -ge $((acked * 8192))

# A node frozen whole (corosync, cfsd and its writer: a VM pause) while it writes user 1003's
# file: the others recover it, its charges with its allocations, and node 1 then fills the
# rest of the limit, no more; thawed, the frozen node fences itself and writes nothing.
. "$HERE/stall_lib.sh"
on 1 mkdir "$(M 1)/f"
on 1 sh -c "chown 1003:1003 '$(M 1)/f' && : >'$(M 1)/f/frozen' && chown 1003:1003 '$(M 1)/f/frozen'"
check "cfs quota set -u 1003 --blocks-hard 16M" on 1 "$BIN/cfs" quota set "$(M 1)" -u 1003 --blocks-hard 16M
slot=$(status_of 2 slot)
cfsd=$(status_of 2 pid)
done_before=$(recoveries "$slot" 1 3)
rm -f "$T/acked"
on 2 python3 -c "$ACKED" "$(M 2)/f/frozen" 1024 0 >/dev/null 2>&1 &
writer=$!
wait_until 120 test -e "$T/acked" || not_ok "node 2's writer did not start"
freeze "$(C pid 2)" "$cfsd" $(pgrep -f "$(M 2)/f/frozen")
if wait_until 180 more_recoveries "$slot" 1 3; then ok "node 2 frozen: the others recovered its slot $slot"
else not_ok "node 2's slot $slot not recovered within 180 s"; fi
acked=$(cat "$T/acked")
check "node 1 sees all that node 2's fsyncs acknowledged ($acked writes of 8 KiB)" \
	test "$(on 1 stat -c %s "$(M 1)/f/frozen")" -ge $((acked * 8192))
expect 1 "Disk quota exceeded" "node 1 fills the rest of user 1003's limit: EDQUOT" -- \
	as_user 1 1003 dd if=/dev/zero of="$(M 1)/f/rest" bs=64k count=512 oflag=direct status=none
used=$(quota_field 1 -u 1003 used_bytes)
check "user 1003's usage stays within its limit: $used of 16777216 bytes" test "$used" -le 16777216
check "... and reached it, within 1 MiB" test "$used" -ge $((16777216 - (1 << 20)))
thaw
check_soon 60 "node 2 fenced itself after the thaw" grep -q "FENCED:" "$T/cfsd2.log"
check_soon 60 "node 2's writer ended" gone "$writer"
check "user 1003's usage is the same after the thaw" test "$(quota_field 3 -u 1003 used_bytes)" = "$used"
check "node 2 unmounts" umount_on 2
check_soon 60 "node 2's fenced cfsd exited" gone "$cfsd"
C wait-quorum 2 yes 60 >/dev/null 2>&1
check "node 2 mounts again" mount_on 2 "fence=$(held_fence),quota_fold=0"
check "node 2 shows the same usage" test "$(quota_field 2 -u 1003 used_bytes)" = "$used"

# Grants: a node far from its limit charges its own grant, in its own journal, without a lock
# message; a limit set on another node takes the grants back first, so it holds at once.
on 1 mkdir "$(M 1)/g"
on 1 chown 1004:1004 "$(M 1)/g"
check "cfs quota set -u 1004 --blocks-hard 60M" on 1 "$BIN/cfs" quota set "$(M 1)" -u 1004 --blocks-hard 60M
check "node 2 writes 1 MiB as user 1004 (its grant taken)" as_user 2 1004 \
	dd if=/dev/zero of="$(M 2)/g/f" bs=1M count=1 oflag=direct status=none
m0=$(status_of 2 lock_messages)
check "node 2 writes 8 MiB more" as_user 2 1004 \
	dd if=/dev/zero of="$(M 2)/g/f" bs=1M count=8 seek=1 oflag=direct conv=notrunc status=none
m1=$(status_of 2 lock_messages)
check "... against its grant: $((m1 - m0)) lock messages" test "$m1" = "$m0"
used=$(quota_field 1 -u 1004 used_bytes)
check "node 1 shows node 2's 9 MiB (the grant taken back for it: $used bytes)" \
	test "$used" -ge $((9 << 20))
check "cfs quota set on node 1: user 1004 at its usage + 1 MiB" \
	on 1 "$BIN/cfs" quota set "$(M 1)" -u 1004 --blocks-hard $((used + (1 << 20)))
expect 1 "Disk quota exceeded" "node 2's next 2 MiB: EDQUOT, the old grant gone" -- \
	as_user 2 1004 dd if=/dev/zero of="$(M 2)/g/f2" bs=1M count=2 oflag=direct status=none
check "user 1004's usage within the new limit" \
	test "$(quota_field 3 -u 1004 used_bytes)" -le $((used + (1 << 20)))

# kill -9 at random moments: node 3 runs creates, writes, fsyncs, fallocates and removes as
# user 1005, and dies (corosync and cfsd killed) at a random step of it; once it is
# recovered, the usage is what the files hold, every round.
on 1 mkdir "$(M 1)/r"
on 1 chown 1005:1005 "$(M 1)/r"
check "cfs quota set -u 1005 --blocks-hard 20M --inodes-hard 400" \
	on 1 "$BIN/cfs" quota set "$(M 1)" -u 1005 --blocks-hard 20M --inodes-hard 400
CHURN="
import errno, os, sys
d, at = sys.argv[1], int(sys.argv[2])
for i in range(100000):
    try:
        p = f'{d}/f{i % 300}'
        if os.path.exists(p):
            os.unlink(p)
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b'r' * (4096 * (1 + i % 17)))
        if i % 5 == 0:
            os.posix_fallocate(fd, 0, 65536 * (1 + i % 3))
        if i % 7 == 0:
            os.fsync(fd)
        os.close(fd)
    except OSError as e:
        if e.errno != errno.EDQUOT:
            raise
    if i == at:
        open('$T/gate/at', 'w').close()
"
for round in 1 2 3; do
	at=$((RANDOM % 200))
	on 3 mkdir -p "$(M 3)/r/$round"
	on 3 chown 1005:1005 "$(M 3)/r/$round"
	rm -f "$T/gate/at" # the user's step there; die_while waits for $T/started, root's
	die_while 3 sh -c 'setpriv --reuid 1005 --regid 1005 --clear-groups /usr/bin/python3 -c "$1" "$2" "$3" &
		while [ ! -e "$4/gate/at" ]; do sleep 0.05; done; touch "$4/started"; wait' _ \
		"$CHURN" "$(M 3)/r/$round" "$at" "$T"
	come_back 3
	used=$(quota_field 1 -u 1005 used_bytes)
	held=$(on 1 du -s -B1 "$(M 1)/r" | cut -f1)
	check "round $round, killed after step $at: user 1005's usage is what its files hold ($used, $held bytes)" \
		test "$used" = "$held"
	inodes=$(on 1 find "$(M 1)/r" | wc -l)
	check "... and its inodes ($(quota_field 1 -u 1005 used_inodes), $inodes)" \
		test "$(quota_field 1 -u 1005 used_inodes)" = "$inodes"
done

# The fold: what node 3 charged to its grant reaches the records every node shows (df in a
# project directory on node 1, which takes no grant back) within its interval, 10 s.  Node 3's
# first write takes the grant under the metadata glock EX, charged in the records at once;
# node 1's df takes the glock PR, so node 3's next writes go under PR, against the grant, and
# reach the records only with the fold.
on 1 mkdir "$(M 1)/fold"
check "project 11 on a directory, limit 48 MiB" on 1 bash -c \
	"chattr +P -p 11 '$(M 1)/fold' && '$BIN/cfs' quota set '$(M 1)' -p 11 --blocks-hard 48M"
check "node 3 writes 1 MiB into project 11 (its grant taken)" \
	on 3 dd if=/dev/zero of="$(M 3)/fold/f" bs=1M count=1 oflag=direct status=none
df_used() { on 1 df -B1 --output=used "$(M 1)/fold" | tail -1; }
before=$(df_used)
# (What df shows there is the project's, the filesystem having more room than the limit.)
check "node 1's df of project 11 shows node 3's first MiB ($before bytes)" \
	test "$before" -ge $((1 << 20)) -a "$before" -lt $((2 << 20))
check "node 3 writes 8 MiB more" on 3 dd if=/dev/zero of="$(M 3)/fold/f" bs=1M count=8 seek=1 \
	oflag=direct conv=notrunc status=none
folded() { [ "$(df_used)" -ge $((before + (8 << 20))) ]; }
check_soon 60 "node 1's df of project 11 shows node 3's 8 MiB more once node 3 folded its charges" folded
grep -q "quota: folding" "$T/cfsd3.log" && not_ok "node 3 failed to fold: $(grep "quota: folding" "$T/cfsd3.log")"
# A report folds every node's charges first: node 3's next MiB, not folded yet, is in it.
check "node 3 writes 1 MiB more" on 3 dd if=/dev/zero of="$(M 3)/fold/f" bs=1M count=1 seek=9 \
	oflag=direct conv=notrunc status=none
reported=$(on 1 "$BIN/cfs" quota report "$(M 1)" -p --json |
	python3 -c "import json,sys; print([r['used_bytes'] for r in json.load(sys.stdin) if r['id'] == 11][0])")
held=$(on 1 du -s -B1 "$(M 1)/fold" | cut -f1)
check "cfs quota report on node 1: project 11 uses what its files hold ($reported, $held bytes)" \
	test "$reported" = "$held"

u1004=$(quota_field 1 -u 1004 used_bytes)
for n in 1 2 3; do check "node $n unmounts" umount_on $n; done
fsck_clean "usage counted from the files equals the records, with the nodes' grants"
check "fsck.cfs -y folds the grants into the records" "$BIN/fsck.cfs" -y data
fsck_clean "after the fold"
check "node 1 mounts again" mount_on 1
check "user 1004's usage is the same after the fold ($u1004 bytes)" \
	test "$(quota_field 1 -u 1004 used_bytes)" = "$u1004"
check "node 1 unmounts" umount_on 1
no_damage_logged
finish
