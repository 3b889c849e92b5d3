#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Allocation group glocks (cfs/agglock.c): writes that allocate and truncates go under the
# metadata glock PR and the groups they allocate or free in, so two nodes appending to their
# own files in their own groups send no lock message once warm, nor does a node truncating,
# preallocating, punching holes in or zeroing its own file meanwhile; a truncate of another node's file fetches that node's group; two
# nodes whose slots share the one group take turns with it and never hand out a block twice
# (every record reads back whole on a third node, fsck clean); df on every node counts every
# node's allocations within a few seconds; a node that dies while appending leaves the others
# working while it is recovered; a node's new inodes go in no span of inodes whose files
# another node is writing.
. "$(dirname "$0")/cfs_lib.sh" "cfs allocation group glocks"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
# 4 LUNs of 40 MiB: 2 groups, slots 0 and 1 start in group 0 (126 MiB), slots 2 and 3 in
# group 1 (14 MiB: node 3's writes here stay under 12 MiB, or they would spill into group 0).
make_data 40
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
# The held fence agent keeps node 3's recovery pending below for as long as the checks need.
for n in 1 2 3; do check "node $n mounts" mount_on $n "fence=$(held_fence)"; done
slots=$(for n in 1 2 3; do status_of $n slot; done | tr '\n' ' ')
check "nodes 1, 2 and 3 hold slots 0, 1 and 2 (got: $slots)" test "$slots" = "0 1 2 "

# append NODE FILE COUNT: COUNT 4 KiB records "NODE FILE SEQ", each an append that allocates.
append() {
	on "$1" python3 - "$(M "$1")/$2" "$1" "$3" <<'PY'
import os, sys
path, node, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
start = os.fstat(fd).st_size // 4096
for i in range(start, start + count):
    head = f"{node} {os.path.basename(path)} {i}\n".encode()
    os.write(fd, head + bytes([i % 251]) * (4096 - len(head)))
os.close(fd)
PY
}
# verify NODE FILE WRITER COUNT: every record of FILE, as read on NODE, is the one written.
verify() {
	on "$1" python3 - "$(M "$1")/$2" "$3" "$4" <<'PY'
import os, sys
path, node, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(path, 'rb').read()
assert len(data) == count * 4096, f"{len(data)} bytes, want {count * 4096}"
for i in range(count):
    head = f"{node} {os.path.basename(path)} {i}\n".encode()
    want = head + bytes([i % 251]) * (4096 - len(head))
    assert data[i * 4096:(i + 1) * 4096] == want, f"record {i} differs"
PY
}

# Nodes 1 and 3: their own groups.  The first appends warm: each node creates its file and
# takes its group, then both look the names up again (the metadata glock PR on both).
append 1 own1 50
append 3 own3 50
append 1 own1 1
append 3 own3 1
own_appends() { append 1 own1 1500 & append 3 own3 1500 & wait; }
n=$(sent 3 own_appends)
check "3,000 appends on nodes 1 and 3 at once, in their own groups, sent $n lock messages (want at most 2)" \
	test "$n" -le 2
check "cfs locks names node 3's group" \
	on 1 bash -c "'$BIN/cfs' locks '$(M 1)' | grep -q 'allocation group 1 (EX'"
check "node 2 reads node 1's appends whole" verify 2 own1 1 1551
check "node 2 reads node 3's appends whole" verify 2 own3 3 1551

# Truncates free under the metadata glock PR too, in the groups of what they free: node 3
# empties its own file 100 times (an append, then a truncate to 0, as log rotation does)
# while node 1 appends to its own.
churn_truncate() {
	on "$1" python3 - "$(M "$1")/$2" "$3" <<'PY'
import os, sys
path, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b'z' * 8192)
    os.close(fd)
    os.truncate(path, 0)
PY
}
churn_truncate 3 trunc3 2 # warm: node 3 creates its file, node 1 looks its own up again
append 1 own1 1
truncates() { churn_truncate 3 trunc3 100 & append 1 own1 300 & wait; }
n=$(sent 3 truncates)
check "100 truncates on node 3 while node 1 appends sent $n lock messages (want at most 2)" \
	test "$n" -le 2
check "node 2 reads node 1's file whole after them" verify 2 own1 1 1852
check "node 1 sees node 3's file empty" on 1 test ! -s "$(M 1)/trunc3"
# Preallocation (fallocate, as ODM's resize grows a datafile) reserves a group as an append.
preallocate() {
	on 3 python3 -c "
import os
fd = os.open('$(M 3)/prealloc3', os.O_WRONLY | os.O_CREAT, 0o644)
for i in range($1):
    os.posix_fallocate(fd, i * 131072, 131072)
os.close(fd)"
}
# beside_appends FN ARG: "FN ARG" (on node 3) while node 1 appends 100 records, after a warm
# "FN 1" (as above: node 3 takes its file and group, node 1 looks its own up again).
beside_appends() {
	"$1" 1 >&2
	append 1 own1 1 >&2
	sent 3 run_beside_appends "$@"
}
run_beside_appends() { "$1" "$2" & append 1 own1 100 & wait; }
n=$(beside_appends preallocate 16)
check "16 preallocations of 128 KiB on node 3 while node 1 appends sent $n lock messages (want at most 2)" \
	test "$n" -le 2
check "node 1 sees node 3's preallocated file at 2 MiB" \
	on 1 bash -c "[ \$(stat -c %s '$(M 1)/prealloc3') = $((16 * 131072)) ]"
# Hole punches and zeroing (a database giving back space, a VM image's discard) free in the
# groups of what they free, zeroing allocates again: the metadata glock PR as well.  Node 3
# punches every other 128 KiB out of its preallocated file, writes there, and zeroes it.
punch() {
	on 3 python3 - "$(M 3)/prealloc3" "$1" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PUNCH, KEEP, ZERO = 0x02, 0x01, 0x10
path, rounds = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR)
for r in range(rounds):
    for i in range(0, 16, 2):
        off = i * 131072 + 1536 * (r % 3)  # edges on block boundaries and inside blocks
        for mode in (PUNCH | KEEP, ZERO | KEEP):
            if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(65536)) != 0:
                sys.exit(f"fallocate mode {mode:#x} at {off}: {os.strerror(ctypes.get_errno())}")
        os.pwrite(fd, bytes([i + 1]) * 4096, i * 131072 + 65536 + 8192)
os.close(fd)
PY
}
n=$(beside_appends punch 10)
check "160 hole punches and 160 zeroings on node 3 while node 1 appends sent $n lock messages (want at most 2)" \
	test "$n" -le 2
check "node 1 reads node 3's punched file: zeros but for its 8 records, size kept" \
	on 1 python3 -c "
data = open('$(M 1)/prealloc3', 'rb').read()
assert len(data) == 16 * 131072, len(data)
for i in range(16):
    chunk = data[i * 131072:(i + 1) * 131072]
    at = 65536 + 8192
    want = bytes(at) + bytes([i + 1]) * 4096 + bytes(131072 - at - 4096) if i % 2 == 0 else bytes(131072)
    assert chunk == want, f'chunk {i} differs'"
check "node 2 reads node 1's file whole after them" verify 2 own1 1 2054
# A truncate of another node's file frees in that node's group: it fetches it.
on 2 truncate -s $((1000 * 4096)) "$(M 2)/own1"
append 1 own1 200
check "node 1 appended after node 2 cut its file to 1,000 records: node 3 reads all 1,200" \
	verify 3 own1 1 1200

# Nodes 1 and 2 start in the same group: they take turns with it.
append 1 shared1 20 & append 2 shared2 20 & wait
shared_appends() { append 1 shared1 1500 & append 2 shared2 1500 & wait; }
ok "3,000 appends on nodes 1 and 2 at once, sharing a group, sent $(sent 2 shared_appends) lock messages"
check "node 3 reads node 1's appends whole" verify 3 shared1 1 1520
check "node 3 reads node 2's appends whole" verify 3 shared2 2 1520

# df: each node's count of free blocks includes the others' allocations (a commit and a
# refresh, a second each, after the last write).
append 1 own1 256
check "free blocks agree on every node after 1 MiB more on node 1" settled_free
# A node that dies while appending held the metadata glock only PR: the others read and
# append on while it is still being recovered (before, its appends took the metadata glock
# EX, and every call that needed it waited for the recovery).
on 3 sh -c ": >'$(M 3)/dying3'"
on 1 ls "$(M 1)" >/dev/null # node 3's EX of the root from that create goes down to PR
die_while 3 python3 -c "
import os, time
fd = os.open('$(M 3)/dying3', os.O_WRONLY | os.O_APPEND)
for i in range(300):
    os.write(fd, b'd' * 4096)
    os.fsync(fd)
    if i == 0:
        open('$T/started', 'w').close()
time.sleep(600)"
check "node 1 sees node 3 dead, its recovery pending" recovering
append 1 own1 10
check "node 1 read and appended to its file meanwhile" verify 1 own1 1 1466
check "and node 3's recovery was still pending then" recovering
come_back 3
# ---- a node's new inodes go in no span another node is changing files of ----
# Node 1 makes a file in a directory of its own, and node 2 then writes that file over and
# over: the glock of the span of node 1's inodes that holds it goes back and forth.  Node 1's
# next files go past that span (stat shows an inode's block; a span is 64 blocks), or every
# create of node 1 there would wait for node 2's writes, and theirs for its creates.
on 1 mkdir "$(M 1)/spans"
on 1 sh -c ": >'$(M 1)/spans/busy'"
# It writes until node 1 is done (a gate, not a time: on a slow disk node 1's 30 creates took
# longer than the 4 s the writer once ran, and the last ones went into the span it had left).
rm -f "$T/spans.done"
on 2 python3 -c "
import os, time
fd = os.open('$(M 2)/spans/busy', os.O_WRONLY)
while not os.path.exists('$T/spans.done'):
    os.pwrite(fd, b'w' * 512, 0)
    time.sleep(0.005)" &
writer=$!
# Node 2 has written it (node 1 gave the span up for that) before node 1 makes files: a
# loaded machine may start node 2's writer late.
on 1 timeout 60 sh -c "until [ \$(stat -c %s '$(M 1)/spans/busy') = 512 ]; do sleep 0.05; done"
on 1 python3 -c "
import os, time
for i in range(30):
    p = '$(M 1)/spans/f%d' % i
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    print(os.stat(p).st_ino)
    time.sleep(0.03)" >"$T/spans.ino"
touch "$T/spans.done"
wait $writer
busy=$(on 1 stat -c %i "$(M 1)/spans/busy")
in_busy=$(awk -v s=$((busy / 64)) 'int($1 / 64) == s' "$T/spans.ino" | wc -l)
check "node 1's 30 new files went past the span node 2 writes a file of (in it: $in_busy)" \
	test "$(wc -l <"$T/spans.ino")" = 30 -a "$in_busy" = 0

# Thousands of files written between two commits: their times go into the journal in parts
# (cfs/journal.c, flush_times).  In one transaction they once outgrew it (4,700 inode blocks
# for a journal of 504) and the filesystem went read-only at the next commit.
small_files() { # NODE COUNT
	on "$1" python3 -c "
import os
d = '$(M "$1")/small$1'
os.makedirs(d, exist_ok=True)
for i in range($2):
    fd = os.open(f'{d}/{i}', os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b's' * 4096)
    os.close(fd)
print('$2 files')"
}
# They also go into spans nobody holds, one after another: asked for a few ahead at a time
# (cfs/iglock.c, "Fresh spans ahead"), not one lock round trip each.
waits0=$(status_of 1 lock_waits)
check "node 1 creates and writes 4,000 small files" small_files 1 4000
waits=$(($(status_of 1 lock_waits) - waits0))
spans=$(on 1 find "$(M 1)/small1" -type f -printf '%i\n' | awk '{print int($1 / 64)}' | sort -u | wc -l)
check "node 1 waited $waits times for grants for the $spans spans of its new files (want a quarter at most)" \
	test "$spans" -ge 60 -a $((waits * 4)) -le "$spans"
many() { small_files "$1" 1500; }
at_once "1,500 more on each node at once" many
check "a 1 MiB direct write and fsync on node 1 after them" on 1 dd if=/dev/zero of="$(M 1)/after_small" bs=1M count=1 oflag=direct conv=fsync status=none
check "no transaction outgrew the journal" bash -c "! grep -h 'exceeds the journal' '$T'/cfsd*.log"

for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the appends"
no_damage_logged
finish
