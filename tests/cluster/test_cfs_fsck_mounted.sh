#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fsck.cfs -n on a cluster mount (issue 68, point 3): node 1's daemon checks the filesystem
# while node 2 creates, appends to, renames and removes files and directories in directories
# both nodes use, under the cluster locks readers take: clean every round, and node 2's work
# goes on (its writes are never refused and it finishes).  Node 3, which has not mounted it, mounts it
# read-only for its check and unmounts it after; with no node mounting it, the check there is
# the offline one.  Then damage made on the LUN behind the
# daemon's back is found from node 1, in a file node 2 wrote; fsck.cfs -y after the unmounts repairs it.
. "$(dirname "$0")/cfs_lib.sh" "cfs fsck.cfs -n on a cluster mount"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
truncate -s 128M "$T/lun0" && "$BIN/cvm" create data "$T/lun0" >/dev/null # one LUN: block b at 1 MiB + b * 4096
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
for n in 1 2; do check "node $n mounts" mount_on $n; done
check "node 1 makes a tree" on 1 sh -c "mkdir -p '$(M 1)/shared/sub' && for i in \$(seq 200); do echo \$i >'$(M 1)/shared/f'\$i; done"

# Node 2 works in node 1's directories (their inode glocks go back and forth) until told.
on 2 python3 - "$(M 2)/shared" "$T/stop" >"$T/writer.out" 2>&1 <<'EOF' &
import os, sys, time
top, stop = sys.argv[1], sys.argv[2]
n, longest = 0, 0.0
while not os.path.exists(stop):
    t = time.monotonic()
    with open(os.path.join(top, f"w{n}"), "ab") as f:
        f.write(os.urandom(4096 * (n % 4 + 1)))
    if n % 3 == 0:
        os.rename(os.path.join(top, f"w{n}"), os.path.join(top, "sub", f"w{n}"))
    if n % 5 == 0 and n >= 10 and os.path.exists(os.path.join(top, f"w{n - 10}")):
        os.unlink(os.path.join(top, f"w{n - 10}"))
    if n % 7 == 0 and os.path.exists(os.path.join(top, f"f{n % 200 + 1}")):
        os.unlink(os.path.join(top, f"f{n % 200 + 1}"))
    if n % 4 == 0:  # directories made, moved under sub, removed: link counts change
        os.mkdir(os.path.join(top, f"dir{n}"))
        if n >= 8:
            os.rename(os.path.join(top, f"dir{n - 4}"), os.path.join(top, "sub", f"dir{n - 4}"))
            if n >= 12:  # moved there four steps ago
                os.rmdir(os.path.join(top, "sub", f"dir{n - 8}"))
    longest = max(longest, time.monotonic() - t)
    n += 1
print("writes", n, "longest %.0f ms" % (longest * 1000))  # a figure, not a check
EOF
writer=$!
wait_until 120 on 2 test -e "$(M 2)/shared/sub/w30"
for round in 1 2 3; do
	check "round $round: fsck.cfs -n on node 1 while node 2 writes: clean" \
		on 1 "$BIN/fsck.cfs" -n data
done
if on 3 "$BIN/fsck.cfs" -n data >"$T/node3.out" 2>&1; then rc=0; else rc=$?; fi
[ "$rc" = 0 ] && grep -q "mounted on other nodes: mounted here read-only" "$T/node3.out" &&
	grep -q "volume data (mounted): clean" "$T/node3.out" &&
	ok "fsck.cfs -n on node 3, which has not mounted it, checks through a read-only mount: clean" ||
	not_ok "node 3: exit $rc: $(cat "$T/node3.out")"
check "node 3 has no mount left" on 3 sh -c "! grep -q fuse.cfs /proc/self/mounts"
touch "$T/stop"
check "node 2 gives a file a second name" on 2 sh -c "echo two >'$(M 2)/shared/sub/pair' && ln '$(M 2)/shared/sub/pair' '$(M 2)/shared/pair2'"
wait "$writer" && grep -q writes "$T/writer.out" && ok "node 2's writer went on and ended: $(cat "$T/writer.out")" ||
	not_ok "node 2's writer: $(cat "$T/writer.out")"

# Damage, sealed as a bug would write it, to an inode node 2 made: found from node 1.
check "unmount node 2" umount_on 2
check "unmount node 1" umount_on 1
if on 3 "$BIN/fsck.cfs" -n data >"$T/node3.out" 2>&1; then rc=0; else rc=$?; fi
[ "$rc" = 0 ] && grep -q "volume data: clean" "$T/node3.out" &&
	! grep -q "(mounted)" "$T/node3.out" &&
	ok "with no node mounting it, fsck.cfs -n on node 3 checks it unmounted" ||
	not_ok "node 3, nothing mounted: exit $rc: $(cat "$T/node3.out")"
check "node 1 mounts again" mount_on 1
victim=$(on 1 stat -c %i "$(M 1)/shared/w1")
check "node 1 reads the file" on 1 cat "$(M 1)/shared/w1"
pair=$(on 1 stat -c %i "$(M 1)/shared/sub/pair")
# Node 2 allocates again, then node 1's check takes the groups from it: clean.
check "node 2 mounts again" mount_on 2
check "node 2 writes" on 2 sh -c "for i in \$(seq 20); do head -c 20000 /dev/urandom >'$(M 2)/shared/sub/late'\$i; done"
if on 1 "$BIN/fsck.cfs" -n data >"$T/taken.out" 2>&1; then rc=0; else rc=$?; fi
[ "$rc" = 0 ] && ok "fsck.cfs -n on node 1 after node 2's writes: clean" || not_ok "exit $rc: $(cat "$T/taken.out")"
# A free block marked in use, as a lost extent leaves it (in a group node 2 had).
leaked=$(python3 "$HERE/../cfs/leak_block.py" "$T/lun0") || not_ok "leak a block"
# Its mode set to no file type, sealed again; a file of two names made on node 2 says 1.
python3 "$HERE/../cfs/set_field.py" "$T/lun0" "$victim" 32 4 $((0xffffffff)) || not_ok "damage inode $victim"
python3 "$HERE/../cfs/set_field.py" "$T/lun0" "$pair" 44 4 1 || not_ok "damage inode $pair"
if on 1 "$BIN/fsck.cfs" -n data >"$T/found.out" 2>&1; then rc=0; else rc=$?; fi
[ "$rc" = 4 ] && grep -q "/shared/w1 (inode $victim): .*mode is no file type" "$T/found.out" &&
	ok "fsck.cfs -n on node 1 finds the damaged inode and names it" ||
	not_ok "exit $rc: $(cat "$T/found.out")"
grep -Eq "/shared/(sub/)?pair2? \(inode $pair\): link count 1, but 2 names" "$T/found.out" &&
	ok "and the file of two names whose link count says 1" || not_ok "no line for inode $pair: $(cat "$T/found.out")"
grep -Eq "allocation group 0: [0-9]+ blocks? marked in use belongs? to nothing.* \(([0-9]+, )*${leaked}[,)]" "$T/found.out" &&
	ok "and the block marked in use that nothing uses" || not_ok "no line for block $leaked: $(cat "$T/found.out")"
check "unmount node 2" umount_on 2
check "unmount node 1" umount_on 1
if "$BIN/fsck.cfs" -y data >"$T/fix.out" 2>&1; then rc=0; else rc=$?; fi
[ "$rc" = 1 ] && ok "fsck.cfs -y repairs it unmounted" || not_ok "fsck.cfs -y: exit $rc: $(cat "$T/fix.out")"
fsck_clean "after the repair"
finish
