#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Project ids on a mount, with the tools an admin knows: chattr +P -p and lsattr -p, xfs_io's
# chproj and lsproj (FS_IOC_FSSETXATTR and FSGETXATTR through FUSE), what a project directory
# passes on, EXDEV for a link or rename into another project (mv copies instead), root alone
# changing an id, and the feature 'project': refused without it with a log line naming it,
# turned on by cfs tune for an existing filesystem, kept across a remount; fsck clean after.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

make_volume p 1 256
"$BIN/mkfs.cfs" -J 1 p >/dev/null 2>&1 || not_ok "mkfs.cfs"
M=$T/mnt
mount_cfs p "$M"
mkdir "$M/acme"
expect 1 "Operation not supported" "chattr -p without the feature 'project' is refused" -- chattr -p 42 "$M/acme"
check "... with a log line naming the feature" grep -q "need the feature 'project' (cfs tune -O project" "$T/p.log"
expect 1 "Operation not supported" "chattr +P without the feature is refused" -- chattr +P "$M/acme"
expect 0 "    0 -" "... and changed nothing" -- lsattr -pd "$M/acme"
touch "$M/acme/before"
umount_cfs "$M"
expect 0 "now has features: journal_v3,project" "cfs tune -O project on a filesystem with files" -- "$BIN/cfs" tune p -O project
mount_cfs p "$M"
cd "$M" || exit 1

check "chattr +P -p 42 on a directory; lsattr -pd shows both" bash -c '
	chattr +P -p 42 acme && lsattr -pd acme | grep -q "^ *42 -*P-* acme$"'
check "what is made in it takes the id, a directory the flag too; what was there keeps its own" bash -c '
	mkdir acme/sub && touch acme/f acme/sub/g &&
	lsattr -pd acme/sub | grep -q "^ *42 -*P-* acme/sub$" &&
	for f in acme/f acme/sub/g; do lsattr -pd "$f" | grep -q "^ *42 " || exit 1; done &&
	lsattr -pd acme/before | grep -q "^ *0 "'
check "xfs_io chproj and lsproj" bash -c '
	mkdir globex && xfs_io -c "chproj 7" globex && xfs_io -c "chattr +P" globex &&
	xfs_io -c lsproj globex | grep -q "projid = 7" && touch globex/g &&
	xfs_io -c lsproj globex/g | grep -q "projid = 7"'
mkdir plain
touch plain/p
check "link and rename into another project: EXDEV; within one and out of one: allowed" python3 - <<'PY'
import errno, os
def refused(f, *a):
    try:
        f(*a)
    except OSError as e:
        assert e.errno == errno.EXDEV, (f, a, e)
        return
    raise AssertionError(f"{f.__name__}{a} was not refused")
refused(os.link, "plain/p", "acme/p")
refused(os.rename, "plain/p", "acme/p")
refused(os.rename, "acme/f", "globex/f")
refused(os.link, "acme/f", "globex/f")
os.link("acme/f", "acme/f2")
os.rename("acme/f2", "acme/sub/f2")
os.rename("acme/sub/f2", "plain/f2")
os.unlink("plain/f2")
PY
check "mv into another project copies: the file takes the directory's id" bash -c '
	echo data >plain/moved && mv plain/moved acme/ && lsattr -p acme/moved | grep -q "^ *42 " &&
	[ "$(cat acme/moved)" = data ] && [ ! -e plain/moved ]'
check "a user changes neither an id nor, on its own file, loses the flags it may set" bash -c '
	touch plain/mine && chown 65534:65534 plain/mine &&
	! setpriv --reuid 65534 --regid 65534 --clear-groups chattr -p 9 plain/mine 2>/dev/null &&
	lsattr -p plain/mine | grep -q "^ *0 " &&
	setpriv --reuid 65534 --regid 65534 --clear-groups chattr +d plain/mine &&
	lsattr -p plain/mine | grep -q "^ *0 -*d"'
check "chattr +P on a file is kept only on directories, as ext4 keeps it" bash -c '
	chattr +P plain/p && ! lsattr -p plain/p | grep -q P'
cd / || exit 1
umount_cfs "$M"
mount_cfs p "$M"
check "after a remount the ids and flags are there" bash -c "
	lsattr -pd '$M/acme' | grep -q '^ *42 -*P' && lsattr -p '$M/acme/sub/g' | grep -q '^ *42 ' &&
	xfs_io -c lsproj '$M/globex/g' | grep -q 'projid = 7'"
unmount_and_fsck p "$M" "projects" && ok "fsck.cfs -n clean after"
exit $((FAILS > 0))
