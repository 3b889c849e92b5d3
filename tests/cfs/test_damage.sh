#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Damaged metadata: chosen blocks of a one-LUN volume are overwritten; fsck.cfs -n finds them
# (exit 4), a mount returns EIO for the damaged object only and logs its block, cfsd does not
# crash, fsck.cfs -y repairs (exit 1) and then finds the filesystem clean (exit 0).
. "$(dirname "$0")/lib.sh"
M=$T/mnt
BS=4096
make_volume v 1 64
"$BIN/mkfs.cfs" -J 2 v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
# Block b of the filesystem is at 1 MiB (the LUN's metadata area) + b * 4096 in the LUN file.
smash() { head -c 64 /dev/urandom | dd of="$T/v.lun0" bs=1 seek=$((1048576 + $1 * BS + 200)) conv=notrunc status=none; }

mount_cfs v "$M" || { not_ok "mount"; finish; }
mkdir "$M/dir" && echo keep >"$M/keep" && echo lose >"$M/lose" && echo inner >"$M/dir/inner"
lose=$(stat -c %i "$M/lose") keep=$(stat -c %i "$M/keep")
dir=$(stat -c %i "$M/dir")
inner=$(stat -c %i "$M/dir/inner")
umount_cfs "$M"
expect 0 "clean" "fsck.cfs: clean before the damage" -- "$BIN/fsck.cfs" v

# 1. A file's inode block.
smash "$lose"
expect 4 "inode $lose which is damaged" "fsck.cfs -n finds the damaged inode" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
expect 1 "Input/output error" "stat of the damaged file gives EIO" -- stat "$M/lose"
grep -q "block $lose .*checksum" "$T/v.log" && ok "the daemon logged the damaged block" ||
	not_ok "no log line names block $lose: $(cat "$T/v.log")"
expect 0 "keep" "the other files are fine" -- cat "$M/keep"
expect 0 "" "the daemon is still serving" -- "$BIN/cfs" status "$M"
umount_cfs "$M"
expect 1 "fixed" "fsck.cfs -y repairs" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean after the repair" -- "$BIN/fsck.cfs" -n v

# 2. A directory's inode: its entry goes, what it held goes to /lost+found.
smash "$dir"
expect 4 "inode $dir which is damaged" "fsck.cfs -n finds the damaged directory" -- "$BIN/fsck.cfs" -n v
expect 4 "inode $inner (a file of 6 bytes, owner 0) is in no directory: it would go to /lost+found as #$inner" \
	"fsck.cfs -n names the file nothing reaches now" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
expect 2 "Input/output error" "ls of the damaged directory gives EIO" -- ls "$M/dir"
umount_cfs "$M"
expect 1 "put in /lost+found as #$inner" "fsck.cfs -y puts the directory's file in /lost+found" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
expect 0 "inner" "the file is whole in /lost+found" -- cat "$M/lost+found/#$inner"
expect 0 "drwx------" "/lost+found is root's alone" -- ls -ld "$M/lost+found"
rm -rf "$M/lost+found"
umount_cfs "$M"

# 2b. The root's inode: made anew; the tree it held (a directory with a file, a file) goes to
# /lost+found whole, the directory's file inside it.
mount_cfs v "$M"
mkdir "$M/top" && echo deep >"$M/top/deep" && echo flat >"$M/flat"
top=$(stat -c %i "$M/top") flat=$(stat -c %i "$M/flat")
umount_cfs "$M"
root_ino() { od -An -tu8 -j $((1048576 + 176)) -N 8 "$T/v.lun0" | tr -d ' '; } # the superblock's (cfs(5))
root=$(root_ino)
smash "$root"
expect 4 "the root directory inode $root is damaged beyond mending" "fsck.cfs -n finds the damaged root" -- "$BIN/fsck.cfs" -n v
expect 1 "put in /lost+found as #$top" "fsck.cfs -y makes the root anew and keeps what it held" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean after one pass" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
expect 0 "deep" "the directory keeps its file" -- cat "$M/lost+found/#$top/deep"
expect 0 "flat" "the root's file is there" -- cat "$M/lost+found/#$flat"
expect 0 "keep" "and so is every other file the root held" -- cat "$M/lost+found/#$keep"
[ "$(stat -c %h "$M/lost+found")" = 3 ] && ok "/lost+found counts its subdirectory" || not_ok "/lost+found: $(stat -c %h "$M/lost+found") links"
mv "$M/lost+found/#$top" "$M/top" && mv "$M/lost+found/#$keep" "$M/keep"
expect 0 "deep" "a directory moved back out of it works" -- cat "$M/top/deep"
rm -rf "$M/lost+found" "$M/top"
umount_cfs "$M"
expect 0 "clean" "fsck.cfs -n: clean after use" -- "$BIN/fsck.cfs" -n v

# 2c. Two lost directories, each the other's "..", as a bug could seal them: the loop is cut
# where the scan meets it, the other stays inside (one pass).
mount_cfs v "$M"
mkdir -p "$M/a/b" && echo in-b >"$M/a/b/f"
a=$(stat -c %i "$M/a") b=$(stat -c %i "$M/a/b")
umount_cfs "$M"
python3 "$(dirname "$0")/set_field.py" "$T/v.lun0" "$a" 120 8 "$b" # a's ".." (struct cfs_dinode)
smash "$(root_ino)" # made anew above: elsewhere
expect 1 "put in /lost+found as #$a" "fsck.cfs -y takes in a loop of lost directories" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean after one pass" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
expect 0 "in-b" "the loop's inner directory is inside the outer one" -- cat "$M/lost+found/#$a/b/f"
mv "$M/lost+found/#$keep" "$M/keep"
rm -rf "$M/lost+found"
umount_cfs "$M"

# 3. An allocation group header (group 0: right after the two slots' journals).
ag0=$((2 + 2 * 1024))
smash "$ag0"
expect 4 "group 0: header block $ag0 is damaged" "fsck.cfs -n finds the damaged group header" -- "$BIN/fsck.cfs" -n v
expect 1 "fixed" "fsck.cfs -y rebuilds it" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean" -- "$BIN/fsck.cfs" -n v

# 4. A file's extent pointing at another file's inode block, sealed as a bug would write it:
# the inode keeps its block, the extent goes (one pass), whichever of the two fsck meets first.
for order in thief-first victim-first; do
	mount_cfs v "$M"
	mkdir -p "$M/sub"
	if [ "$order" = thief-first ]; then thief=$M/thief victim=$M/sub/victim; else thief=$M/sub/thief victim=$M/victim; fi
	head -c 8192 /dev/urandom >"$thief" && echo "the victim" >"$victim"
	ti=$(stat -c %i "$thief") vi=$(stat -c %i "$victim")
	umount_cfs "$M"
	# ext[0].pblk of the thief's inode: the victim's inode block
	python3 "$(dirname "$0")/set_field.py" "$T/v.lun0" "$ti" $((1280 + 8)) 8 "$vi"
	expect 4 "" "$order: fsck.cfs -n finds an extent over another inode's block" -- "$BIN/fsck.cfs" -n v
	expect 1 "dropped" "$order: fsck.cfs -y drops the extent" -- "$BIN/fsck.cfs" -y v
	expect 0 "clean" "$order: fsck.cfs -n: clean after one pass" -- "$BIN/fsck.cfs" -n v
	mount_cfs v "$M"
	expect 0 "the victim" "$order: the inode whose block it was is whole" -- cat "$victim"
	rm -rf "$M/sub" "$M/thief" "$M/victim"
	umount_cfs "$M"
done

# 5. The superblock: the backup takes over, fsck puts it back.
smash 0
mount_cfs v "$M" && ok "mounts on the backup superblock" || not_ok "mount with a damaged superblock"
expect 0 "keep" "files are there" -- cat "$M/keep"
umount_cfs "$M"
expect 4 "primary superblock" "fsck.cfs -n finds the damaged superblock" -- "$BIN/fsck.cfs" -n v
expect 1 "fixed" "fsck.cfs -y rewrites it" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean" -- "$BIN/fsck.cfs" -n v
# Both copies gone: refused with a message, not a crash.
smash 0
smash 1
expect 1 "damaged" "mount with both superblocks damaged" -- "$BIN/cfs" mount v "$M"
expect 8 "damaged" "fsck.cfs with both superblocks damaged" -- "$BIN/fsck.cfs" -n v
finish
