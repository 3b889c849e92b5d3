#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# From the previous release to this one on one node (docs/upgrading.md): a filesystem made and
# filled by the previous release (tests/upgrade/build.sh previous), its tree read back whole by
# this release, also from a journal the previous release left behind when killed; this
# release's files read back by the previous release (the filesystem still has no feature it
# does not know); then journal_v3 turned on, quotas turned on (and what 0.1 allocates
# uncharged counted again by fsck.cfs), and a max-compat filesystem of this release mounted
# by the previous one.
. "$(dirname "$0")/../cfs/lib.sh"
PREV=$BIN/../compat/previous/build/bin
[ -x "$PREV/cfsd" ] || { not_ok "no build of the previous release in $PREV: run make check-build"; finish; }
M=$T/mnt
mkdir -p "$M"
for i in 0 1; do truncate -s 128M "$T/v.lun$i"; done
"$PREV/cvm" create v "$T/v.lun0" "$T/v.lun1" >/dev/null
"$PREV/mkfs.cfs" -L old v >/dev/null 2>&1

# manifest DIR: every name under DIR with its type, mode, owner, size, content hash, link
# target and user xattrs, sorted.
manifest() {
	python3 - "$1" <<'PY'
import hashlib, os, sys
top = sys.argv[1]
for dirpath, dirs, files in os.walk(top):
    for name in sorted(dirs + files):
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        line = [os.path.relpath(p, top), oct(st.st_mode), str(st.st_uid), str(st.st_gid), str(st.st_nlink)]
        if os.path.islink(p):
            line.append("-> " + os.readlink(p))
        elif os.path.isfile(p):
            line += [str(st.st_size), hashlib.sha256(open(p, "rb").read()).hexdigest()]
            line += sorted(f"{k}={os.getxattr(p, k).hex()}" for k in os.listxattr(p))
        print(" ".join(line))
PY
}
# a tree of what a shared Oracle home holds: directories, files small and large (one sparse),
# a symlink, a hard link, modes, owners, xattrs
write_tree() {
	python3 - "$1" <<'PY'
import os, sys
top = sys.argv[1]
os.makedirs(f"{top}/bin/sub", exist_ok=True)
for i in range(60):
    with open(f"{top}/bin/f{i}", "wb") as f:
        f.write(os.urandom(100 + i * 997))
with open(f"{top}/big", "wb") as f:
    f.write(os.urandom(3 << 20))
with open(f"{top}/sparse", "wb") as f:
    f.seek(40 << 20)
    f.write(b"end")
os.symlink("bin/f1", f"{top}/link")
os.link(f"{top}/bin/f2", f"{top}/bin/sub/hard")
os.chmod(f"{top}/bin/f3", 0o4750)
os.chown(f"{top}/bin/f4", 54321, 54322)
os.setxattr(f"{top}/bin/f5", "user.owner", b"oracle")
os.sync()
PY
}

# crash: cfsd of $M killed, gone, its mount taken down, as after a kill -9 of the node's daemon.
crash() {
	local pid
	pid=$(daemon_pid "$M")
	kill -9 "$pid"
	wait_until 60 bash -c "! kill -0 $pid 2>/dev/null"
	umount -l "$M" 2>/dev/null
}
mount_with() { # BUILD: mount v at $M with that build's cfs; what it said in $T/mount.out
	"$1/cfs" mount v "$M" -o "log=$T/v.log" >"$T/mount.out" 2>&1
	local rc=$?
	cat "$T/mount.out"
	return $rc
}
check "the previous release mounts the filesystem it made" mount_with "$PREV"
write_tree "$M/home"
manifest "$M" >"$T/manifest.prev"
check "the previous release unmounts" "$PREV/cfs" umount "$M"
check "this release mounts it" mount_with "$BIN"
check "this release reads the tree the previous one wrote, whole" diff "$T/manifest.prev" <(manifest "$M")
write_tree "$M/new"
manifest "$M/new" >"$T/manifest.new"
check "this release unmounts" "$BIN/cfs" umount "$M"
check "this release's fsck.cfs finds it clean" "$BIN/fsck.cfs" -n v

# What the previous release left in its journal when killed, replayed by this one.
check "the previous release mounts it again" mount_with "$PREV"
python3 - "$M/crash" <<'PY'
import os, sys
with open(sys.argv[1], "wb") as f:
    f.write(b"fsync'd before the kill\n" * 1000)
    os.fsync(f.fileno())
os.rename(sys.argv[1], sys.argv[1] + ".renamed")
fd = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
os.fsync(fd)
PY
crash
check "this release mounts what the killed previous release left" mount_with "$BIN"
# (What the daemon logs while it mounts, a replay too, goes to the one who mounts.)
check "its journal was replayed" grep -q "journal: replayed transactions" "$T/mount.out"
check "this release reads what it wrote before" diff "$T/manifest.new" <(manifest "$M/new")
check "the file it fsync'd and renamed before the kill is there, whole" \
	cmp "$M/crash.renamed" <(python3 -c "import sys; sys.stdout.buffer.write(b\"fsync'd before the kill\\n\" * 1000)")
check "this release unmounts" "$BIN/cfs" umount "$M"
check "fsck.cfs of the previous release finds it clean" "$PREV/fsck.cfs" -n v

# journal_v3 on: only this release from now on.
check "cfs tune -O journal_v3" "$BIN/cfs" tune v -O journal_v3
check "cfs show says so" bash -c "'$BIN/cfs' show v | grep -q 'features: journal_v3'"
check "this release mounts it" mount_with "$BIN"
echo more >"$M/after-tune"
sync "$M/after-tune"
crash
check "a journal of format 3 replays" mount_with "$BIN"
check "... saying when and by whom it was committed" grep -q "committed by node 0 from" "$T/mount.out"
check "what was written before the kill is there" grep -qx more "$M/after-tune"
check "this release unmounts" "$BIN/cfs" umount "$M"
check "cfs tune -O ^journal_v3 (for the previous release again)" "$BIN/cfs" tune v -O ^journal_v3
check "the previous release mounts it again" mount_with "$PREV"
reads_what_this_release_wrote() { grep -qx more "$M/after-tune" && diff "$T/manifest.new" <(manifest "$M/new"); }
check "and reads what this release wrote" reads_what_this_release_wrote
check "the previous release unmounts" "$PREV/cfs" umount "$M"

# Quotas on.  Release 0.1 reads no feature bits (docs/upgrading.md): it is the one release
# that mounts such a filesystem anyway, and allocates without charging; fsck.cfs -y of this
# release counts the usage again.  With the feature off again, 0.1 is at home.
check "cfs tune -O quota of the filled filesystem" "$BIN/cfs" tune v -O quota
check "fsck.cfs -n: the usage the tune counted is right" "$BIN/fsck.cfs" -n v
check "this release mounts it" mount_with "$BIN"
check "... and charges what is written" bash -c "head -c 1M /dev/urandom >'$M/charged' && sync '$M/charged' &&
	'$BIN/cfs' quota get '$M' -u 0 --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"used_bytes\"] >= 1 << 20'"
check "this release unmounts" "$BIN/cfs" umount "$M"
check "release 0.1 mounts it all the same (it reads no feature bits)" mount_with "$PREV"
head -c 1M /dev/urandom >"$M/uncharged"
check "release 0.1 unmounts" "$PREV/cfs" umount "$M"
expect 4 "quota" "this release's fsck.cfs -n finds what 0.1 allocated uncharged" -- "$BIN/fsck.cfs" -n v
expect 1 "repaired" "fsck.cfs -y counts it again" -- "$BIN/fsck.cfs" -y v
check "fsck.cfs -n clean after it" "$BIN/fsck.cfs" -n v
check "cfs tune -O ^quota (for 0.1 again)" "$BIN/cfs" tune v -O ^quota
check "release 0.1's fsck.cfs finds it clean" "$PREV/fsck.cfs" -n v

# A max-compat filesystem of this release, for a cluster that still runs the previous one.
for i in 0; do truncate -s 64M "$T/w.lun$i"; done
"$BIN/cvm" create w "$T/w.lun0" >/dev/null
check "mkfs.cfs --feature-level max-compat" "$BIN/mkfs.cfs" --feature-level max-compat w
check "the previous release mounts it" "$PREV/cfs" mount w "$M" -o "log=$T/w.log"
echo from-prev >"$M/x"
check "the previous release unmounts it" "$PREV/cfs" umount "$M"
check "this release reads what the previous one wrote on it" bash -c "'$BIN/cfs' mount w '$M' -o log=$T/w.log && grep -qx from-prev '$M/x' && '$BIN/cfs' umount '$M'"
finish
