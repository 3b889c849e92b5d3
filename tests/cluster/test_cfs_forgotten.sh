#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A node lets go of the inode glocks of files it only read once its kernel has forgotten them
# (cfs/iglock.c, "Spans read here that nothing here uses any more"): node 2 reads a tree node 1
# wrote, the kernel's caches are dropped, and node 2 gives its spans back at its committer's
# next round, so node 1's removal of the tree waits for no let-go of node 2's (kept, node 2
# let 671 spans go one batch at a time during node 1's rm -rf of /usr/include: bench/cluster/
# home.sh).  Node 1 keeps the spans it wrote.  Runs alone (tests/run.sh's ALONE):
# drop_caches empties every mount's caches on the machine, which other scripts' checks of
# page-cache reads and cached grants would see.
. "$(dirname "$0")/cfs_lib.sh" "cfs: grants of forgotten files given back"

C up 2 >/dev/null && ok "cluster of 2 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 2 data >/dev/null 2>&1
for n in 1 2; do check "node $n mounts" mount_on $n; done

check "node 1 writes a tree of 400 files" on 1 python3 -c '
import os, sys
for d in range(2):
    os.makedirs(f"{sys.argv[1]}/{d}")
    for i in range(200):
        with open(f"{sys.argv[1]}/{d}/{i}", "w") as f:
            f.write("y" * 5000)
os.sync()' "$(M 1)/tree"
check "node 2 reads it" on 2 bash -c "ls -lR '$(M 2)/tree' >/dev/null && cat '$(M 2)'/tree/*/* >/dev/null"
read_cached=$(status_of 2 locks_cached) wrote_cached=$(status_of 1 locks_cached)
echo 2 >/proc/sys/vm/drop_caches
let_go() { test "$(status_of 2 locks_cached)" -le $((read_cached - 5)); }
check_soon 30 "node 2 gives back the spans of the tree ($read_cached grants) once its kernel forgot the files" let_go
check "node 1 keeps the grants of what it wrote ($wrote_cached)" \
	test "$(status_of 1 locks_cached)" -ge $((wrote_cached - 2))
m0=$(status_of 2 lock_messages)
check "node 1 removes the tree" on 1 rm -rf "$(M 1)/tree"
m1=$(status_of 2 lock_messages)
check "node 2 sent $((m1 - m0)) lock messages meanwhile (want 2 at most)" [ $((m1 - m0)) -le 2 ]
check "node 2 sees the tree gone" on 2 test ! -e "$(M 2)/tree"
check "node 2 makes and reads a file there again" \
	on 2 bash -c "echo again >'$(M 2)/again' && test \"\$(cat '$(M 2)/again')\" = again"

for n in 1 2; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the let-go"
finish
