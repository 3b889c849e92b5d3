#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Attributes and names the kernel keeps of a cluster mount (cfsd/kernel_inval.c): a node looks
# at a file over and over, so its kernel answers from its caches; node 2 changes the file (a
# rename, a replace, chmod, chown, utimes, an append, a link, an xattr, an ACL, a remove, a
# directory moved or replaced; attributes also through a descriptor opened before) and then
# says what it sees; the looking node's next look must see the same.  Node 1 mounts with
# namecache (the kernel keeps names too), node 3 without (attributes, and names for 0.1 s).  A directory
# mounted over inside node 1's mount stays mounted while names change (cfsd stops having names
# kept there, rather than have the kernel drop the mount point); on node 3 a process's
# working directory stays its own while another node changes the directory above it; listings
# after a change, also of a working directory's ".".
. "$(dirname "$0")/cfs_lib.sh" "cfs kernel caches on a cluster"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
check "node 1 mounts with namecache" mount_on 1 namecache
for n in 2 3; do check "node $n mounts" mount_on $n; done
WATCH=$HERE/watch_change.py
# Linux 6.16 and later let the kernel keep names of a cluster mount (FUSE_NOTIFY_INC_EPOCH).
epochs=$([ "$(printf '%s\n' 6.16 "$(uname -r)" | sort -V | head -1)" = 6.16 ] && echo True || echo False)
check "cfs status: node 1's kernel keeps names ($epochs), node 3's not" \
	test "$(status_of 1 kernel_names) $(status_of 3 kernel_names)" = "$epochs False"

# seen_after WHAT KIND PATH CHANGE [NODE]: NODE (default 1) watches KIND of PATH (relative to
# the mount) while node 2 runs CHANGE (bash, in its mount); NODE must then see what node 2
# sees.
round=0
seen_after() {
	local what=$1 kind=$2 path=$3 change=$4 n=${5:-1} watcher
	round=$((round + 1))
	local mark=$T/mark$round ready=$T/ready$round
	on "$n" python3 "$WATCH" watch "$kind" "$(M "$n")/$path" "$mark" "$ready" >"$T/watch$round" 2>&1 &
	watcher=$!
	wait_until 120 test -e "$ready"
	on 2 bash -c "cd '$(M 2)' && $change" >"$T/change$round" 2>&1 || { not_ok "$what: node 2: $(cat "$T/change$round")"; kill $watcher; return; }
	on 2 python3 "$WATCH" once "$kind" "$(M 2)/$path" >"$mark.tmp" && mv "$mark.tmp" "$mark"
	if wait $watcher; then ok "$what: node $n sees it at once"; else not_ok "$what: $(cat "$T/watch$round")"; fi
}

on 2 bash -c "mkdir '$(M 2)/w' && echo hello >'$(M 2)/w/a' && echo old >'$(M 2)/w/c' && mkdir -p '$(M 2)/w/s' '$(M 2)/w/d' && touch '$(M 2)/w/s/x'"
seen_after "a rename: the old name goes" exists w/a "mv w/a w/b"
seen_after "a rename: the new name comes" content w/b "mv w/b w/b2 && mv w/b2 w/b"
seen_after "a file replaced by a rename over it" content w/c "echo new >w/c.new && mv w/c.new w/c"
seen_after "chmod" mode w/b "chmod 640 w/b"
seen_after "chown" owner w/b "chown 123:456 w/b"
seen_after "utimes" mtime w/b "touch -m -d '2001-02-03 04:05:06' w/b"
seen_after "an append: the size" size w/b "echo more >>w/b"
seen_after "a hard link: the link count" nlink w/b "ln w/b w/b.link"
seen_after "an xattr" xattr:user.k w/b "setfattr -n user.k -v v1 w/b"
seen_after "an ACL" xattr:system.posix_acl_access w/b "setfacl -m u:77:rw w/b"
seen_after "an unlink" exists w/b.link "rm w/b.link"
# Through a descriptor opened once: only the attributes the kernel keeps, no name looked up.
seen_after "chmod, seen by fstat" fd-mode w/b "chmod 604 w/b"
seen_after "chown, seen by fstat" fd-owner w/b "chown 321:654 w/b"
seen_after "utimes, seen by fstat" fd-mtime w/b "touch -m -d '2002-03-04 05:06:07' w/b"
seen_after "an append, seen by fstat" fd-size w/b "echo again >>w/b"
seen_after "a link, seen by fstat" fd-nlink w/b "ln w/b w/b.l2"
seen_after "an ACL, seen by fgetxattr" fd-xattr:system.posix_acl_access w/b "setfacl -m u:78:r w/b"
seen_after "chmod (no namecache)" mode w/b "chmod 606 w/b" 3
seen_after "chmod, seen by fstat (no namecache)" fd-mode w/b "chmod 646 w/b" 3
seen_after "an append, seen by fstat (no namecache)" fd-size w/b "echo yet >>w/b" 3
seen_after "an ACL, seen by fgetxattr (no namecache)" fd-xattr:system.posix_acl_access w/b "setfacl -m u:79:r w/b" 3
seen_after "a rename (no namecache)" exists w/b.l2 "mv w/b.l2 w/b.l3" 3
# Without namecache the kernel keeps a name for 0.1 s in a directory no node changed in the
# last second (cfs_lookup_lease): another node's change there waits until those names have
# expired.  Node 3 looks two names up in a loop while node 2 renames one to the other and
# back, 1.2 s apart (so the names are kept each time), and checks right after each rename
# (before the wait, 10 of 10 were seen late).
on 2 bash -c "mkdir '$(M 2)/w/flip' && touch '$(M 2)/w/flip/x'"
mkdir "$T/flip"
on 3 python3 "$HERE/name_flip.py" watch "$(M 3)/w/flip" "$T/flip" 10 >"$T/flip.out" 2>&1 &
watcher=$!
on 2 python3 "$HERE/name_flip.py" flip "$(M 2)/w/flip" "$T/flip" 10 1.2 >/dev/null
if wait $watcher; then ok "names kept a moment (no namecache): $(tail -1 "$T/flip.out")"
else not_ok "names kept a moment (no namecache): $(tr '\n' ' ' <"$T/flip.out")"; fi
seen_after "a directory moved: names under its old path go" exists w/s/x "mv w/s w/t"
seen_after "a directory replaced by a file of its name" type w/d "rmdir w/d && echo f >w/d"
seen_after "a name made in a directory listed" list w "touch w/new"
# A listing after another node's change shows it, on both kinds of mount, also where no name
# is looked up on the way (the working directory's "."): what a kernel that kept listings
# from one opendir to the next would have to be told.
seen_after "a name removed from a directory listed" list w "rm w/new"
seen_after "a name made in the working directory listed" cwd-list w "touch w/r0"
seen_after "a name renamed in a directory listed (no namecache)" list w "touch w/r1 && mv w/r1 w/r2" 3
seen_after "a name removed from the working directory listed (no namecache)" cwd-list w "rm w/r2 w/r0" 3

# Something mounted inside node 1's mount: the kernel drops a name it is told to forget all
# of, and a mount point with it (the mount goes).  So cfsd stops that and waits out the names
# it handed; names stay coherent.
on 1 bash -c "mkdir '$(M 1)/w/mnt' && mount -t tmpfs cfs-test '$(M 1)/w/mnt' && touch '$(M 1)/w/mnt/on-tmpfs'"
seen_after "with a mount inside node 1's mount: a rename" exists w/c "mv w/c w/c2"
seen_after "and a name made in the mounted-on directory's parent" list w "touch w/newer"
check "the mount inside node 1's mount is still there" on 1 bash -c "mountpoint -q '$(M 1)/w/mnt' && [ -e '$(M 1)/w/mnt/on-tmpfs' ]"
check "node 1's cfsd said it keeps no names from then on" grep -q "w/mnt is mounted inside" "$T/cfsd1.log"
check "cfs status says node 1's kernel keeps no names now" test "$(status_of 1 kernel_names)" = False
seen_after "after that: chmod" mode w/c2 "chmod 600 w/c2"
on 1 umount "$(M 1)/w/mnt"

# Without namecache a working directory stays reachable: getcwd in a loop on node 3 while
# another process there walks through it and node 2 makes names in the directory above (with
# namecache, the kernel drops that directory's name at each change and getcwd fails with
# ENOENT until the walk finds it again: about 5,000 of 3.6 million calls, tried by hand).
on 3 mkdir -p "$(M 3)/w/cwd"
on 3 python3 -c '
import os, sys, time
os.chdir(sys.argv[1]); bad = n = 0; t = time.time()
while time.time() < t + 4:
    try:
        os.getcwd()
    except OSError:
        bad += 1
    n += 1
print(f"{n} getcwd calls, {bad} failed")
sys.exit(bad != 0)' "$(M 3)/w/cwd" >"$T/getcwd.out" 2>&1 &
getcwd=$!
on 3 python3 -c '
import os, sys, time
t = time.time()
while time.time() < t + 4:
    os.path.exists(sys.argv[1] + "/x")' "$(M 3)/w/cwd" &
walker=$!
on 2 bash -c "for i in \$(seq 150); do touch '$(M 2)/w/g\$i'; sleep 0.02; done"
wait $walker
if wait $getcwd; then ok "getcwd never fails on node 3 while node 2 changes the directory above: $(cat "$T/getcwd.out")"
else not_ok "getcwd on node 3: $(cat "$T/getcwd.out")"; fi

# A file node 1 has written (its kernel looked for set-ID bits and capabilities once and
# marked the file as having none: FUSE_HANDLE_KILLPRIV_V2) gets both from node 2; node 1's
# next write, truncate and chown take them as a kernel filesystem's would (cfsd does,
# cfs/setid.c): the capability whoever writes, set-user-ID on a chown and from a writer
# without CAP_FSETID.
on 1 bash -c "printf x >'$(M 1)/w/exe' && printf y >>'$(M 1)/w/exe'"
as_user="setpriv --reuid=1000 --regid=1000 --clear-groups"
while IFS='|' read -r what change want; do
	on 2 bash -c "chmod 4757 '$(M 2)/w/exe' && setcap cap_net_raw+ep '$(M 2)/w/exe'" </dev/null
	on 1 bash -c "cd '$(M 1)/w' && $change" </dev/null
	got=$(on 2 bash -c "getcap '$(M 2)/w/exe'; stat -c %a '$(M 2)/w/exe'" </dev/null 2>&1)
	check "node 2 gives a file node 1 wrote set-user-ID and a capability; after node 1's $what, node 2 sees: $(echo $got)" \
		test "$(echo $got)" = "$want"
done <<EOF2
write|printf z >>exe|4757
write as a user|$as_user sh -c 'printf z >>exe'|757
truncate|truncate -s 1 exe|4757
chown|chown 5:5 exe|757
read and time change|cat exe >/dev/null && touch -m exe|$(M 2)/w/exe cap_net_raw=ep 4757
EOF2

for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the changes"
no_damage_logged
finish
