#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# CFS on 3 corosync nodes under concurrent load (after OCFS2's multi-node suite): a create
# racer on one directory from every node, a tree unpacked on one node while another removes
# it (both ways), a file open on two nodes removed on a third (read and written on, freed at
# the last close), a shared "Oracle home" of 20,000 files with links and programs read and run
# everywhere, and direct writes from a dboptimized node and a normal one to disjoint blocks of
# one preallocated file, verified from the third.  fsck.cfs -n clean after each part.
. "$(dirname "$0")/cfs_lib.sh" "cfs multi-node load tests"
RACE_SECONDS=${RACE_SECONDS:-60}
HOME_FILES=${HOME_FILES:-20000}
XDEL_FILES=${XDEL_FILES:-5000}

C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 512
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
check "node 1 mounts dboptimized" mount_on 1 dboptimized
check "node 2 mounts" mount_on 2
check "node 3 mounts" mount_on 3

# remount_all WHAT: unmount everywhere, fsck, mount again (node 1 dboptimized).
remount_all() {
	local n
	for n in 1 2 3; do umount_on $n || not_ok "$1: unmount on node $n"; done
	fsck_clean "$1"
	mount_on 1 dboptimized && mount_on 2 && mount_on 3 || not_ok "$1: mount again"
}

# ---- create racer ----
on 1 mkdir "$(M 1)/race"
# One level down too (RACE_DEPTH=1): renames also move directories between parents.
racer() { on "$1" env RACE_DEPTH="${RACE_DEPTH:-1}" python3 "$HERE/racer.py" "$(M "$1")/race" "$RACE_SECONDS" "$1"; }
at_once "create racer" racer
for n in 1 2 3; do
	on $n bash -c "cd '$(M $n)/race' && find . -mindepth 1 | sort | while read -r f; do stat -c '%n %F %h %s' \"\$f\"; done" >"$T/list$n" 2>&1
done
check "after the race every node lists the same names, types, link counts and sizes" \
	bash -c "cmp '$T/list1' '$T/list2' && cmp '$T/list1' '$T/list3'"
remount_all "after the create racer"

# ---- cross delete: unpack a generated tree on one node while another removes it ----
# A tree of the same size on every machine (a system directory's size varies).
src=$T/xdel
python3 "$HERE/make_home.py" "$src" "$XDEL_FILES" 3
cross_delete() { # maker remover
	local mk=$1 rm=$2 i
	on "$mk" mkdir "$(M "$mk")/x"
	for i in 1 2 3; do
		on "$mk" bash -c "mkdir -p '$(M "$mk")/x/t$i' && tar -C '$src' -cf - . | tar -C '$(M "$mk")/x/t$i' -xf - 2>/dev/null" &
		on "$rm" bash -c "sleep 0.$i; rm -rf '$(M "$rm")/x/t$i' 2>/dev/null; true"
		wait
		on "$rm" rm -rf "$(M "$rm")/x/t$i"
	done
	check "cross delete (unpack on node $mk, remove on node $rm): nothing left" \
		on "$mk" bash -c "[ -z \"\$(ls -A '$(M "$mk")/x')\" ]"
	on "$rm" rmdir "$(M "$rm")/x"
}
cross_delete 2 3
cross_delete 3 2

# ---- open delete: a file open on nodes 2 and 3 is removed on node 1 ----
free_on() { on "$1" stat -f -c %f "$(M "$1")"; }
wait_for() { local i; for i in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
before=$(free_on 3)
# In 500 pieces with holes between: a file of more than 16 extents is freed over several
# commits, on the freeing node's orphan list meanwhile; it must come off the unlinker's too.
on 1 python3 -c "
import os
with open('$(M 1)/od', 'wb') as f:
    for i in range(500):
        f.seek(i * 8192)
        f.write(os.urandom(4096))
    os.fsync(f.fileno())"
sum=$(on 1 sha256sum "$(M 1)/od" | cut -d' ' -f1)
with_file=$(free_on 3)
on 2 python3 "$HERE/open_delete.py" "$(M 2)/od" "$T/od" >"$T/od.out" 2>&1 &
opener=$!
on 3 bash -c "exec 9<'$(M 3)/od'; touch '$T/od3.opened'; while [ ! -e '$T/od3.close' ]; do sleep 0.05; done" &
holder=$!
wait_for "$T/od.opened" && wait_for "$T/od3.opened" && on 1 rm "$(M 1)/od" && touch "$T/od.removed"
wait_for "$T/od.written" || not_ok "open delete: node 2 did not go on: $(cat "$T/od.out")"
check "node 1's remove is seen on node 3 while nodes 2 and 3 have the file open" \
	on 3 bash -c "[ ! -e '$(M 3)/od' ]"
check "node 2 reads the whole file node 1 removed" grep -qx "read $sum" "$T/od.out"
check "node 2 writes on to it and reads it back, with no link left" grep -qx "wrote ok 0" "$T/od.out"
touch "$T/od.close"
wait $opener
held=$(free_on 3)
check "its space stays in use while node 3 still has it open ($with_file free blocks with it, $held now)" \
	test "$held" -le "$with_file"
touch "$T/od3.close"
wait $holder
# Freed at that last close, over several commits for a file of many extents: waited for (on a
# throttled disk the first look came before the last of them).
space_back() { [ "$(free_on 3)" -ge $((before - 16)) ]; }
check_soon 120 "its space comes back once node 3, the last to have it open, closes it ($before free blocks before)" \
	space_back
remount_all "after cross delete"

# ---- a shared Oracle home: unpacked on node 2, read and run everywhere ----
python3 "$HERE/make_home.py" "$T/home" "$HOME_FILES" 7
(cd "$T/home" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/home.sums"
# What a listing compares: type, mode, links, size (not of directories: each filesystem
# sizes them its own way) and link target; the racer's directory is not part of the home.
listing() { find . -mindepth 1 -path ./race -prune -o -type d -printf '%y %m %n - %P\n' -o -printf '%y %m %n %s %l %P\n' | sort; }
(cd "$T/home" && listing) >"$T/home.list"
check "a home of $HOME_FILES files unpacked on node 2" \
	on 2 bash -c "tar -C '$T/home' -cf - . | tar -C '$(M 2)' -xpf -"
for n in 1 3; do
	check "node $n: every file of the home has the sha256 it was made with" \
		on $n bash -c "cd '$(M $n)' && sha256sum --quiet -c '$T/home.sums'"
	check "node $n: types, modes, link counts, sizes and link targets as made" \
		on $n bash -c "$(declare -f listing); cd '$(M $n)' && listing | diff - '$T/home.list'"
done
check "node 3 runs programs from the home" on 3 bash -c "'$(M 3)/bin/true' && '$(M 3)/bin/env' true"
for n in 1 2 3; do
	on $n bash -c "cd '$(M $n)' && ls -lR --time-style=+ dir1 bin" >"$T/ls$n" 2>&1 &
done
wait
check "ls -lR on all nodes at once gives the same listing" \
	bash -c "cmp '$T/ls1' '$T/ls2' && cmp '$T/ls1' '$T/ls3' && [ -s '$T/ls1' ]"

# ---- dboptimized and normal nodes write disjoint blocks of one preallocated file ----
on 2 fallocate -l 8M "$(M 2)/datafile"
head -c 4M /dev/urandom >"$T/half1"
head -c 4M /dev/urandom >"$T/half2"
on 1 dd if="$T/half1" of="$(M 1)/datafile" bs=64k oflag=direct conv=notrunc status=none &
on 2 dd if="$T/half2" of="$(M 2)/datafile" bs=64k seek=64 oflag=direct conv=notrunc status=none &
wait
cat "$T/half1" "$T/half2" >"$T/whole"
check "direct writes from a dboptimized and a normal node, read back on node 3" \
	on 3 cmp "$(M 3)/datafile" "$T/whole"

for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "at the end"
no_damage_logged
finish
