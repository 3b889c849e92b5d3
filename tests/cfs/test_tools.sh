#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# mkfs.cfs, fsck.cfs, cfs and cfsd as people use them: help, mount -t cfs, online grow, and every
# bad input refused with a message naming the thing, with nothing on the LUNs changed.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$T/mnt
mkdir -p "$M"
make_volume v 2 64
make_volume other 1 64

for tool in mkfs.cfs fsck.cfs cfs cfsd; do
	expect 0 "usage:" "$tool --help" -- "$BIN/$tool" --help
done
expect 2 "not a command I know" "cfs: unknown command" -- "$BIN/cfs" frob x

# Bad inputs, before there is a filesystem: nothing may change.
before=$(fingerprint)
expect 1 "volume nope" "mkfs.cfs: unknown volume" -- "$BIN/mkfs.cfs" nope
expect 1 "power of two" "mkfs.cfs: block size 3000" -- "$BIN/mkfs.cfs" -b 3000 v
expect 2 "out of range" "mkfs.cfs: 65 slots" -- "$BIN/mkfs.cfs" -J 65 v
expect 2 "give one volume" "mkfs.cfs: no volume" -- "$BIN/mkfs.cfs"
expect 1 "longer than 63" "mkfs.cfs: label too long" -- "$BIN/mkfs.cfs" -L "$(printf 'x%.0s' $(seq 1 70))" v
expect 1 "too small" "mkfs.cfs: 64 slots do not fit a small volume" -- "$BIN/mkfs.cfs" -J 64 --journal-size 64M other
expect 1 "no CFS filesystem on volume v: run mkfs.cfs" "mount of an unformatted volume" -- "$BIN/cfs" mount v "$M"
expect 8 "no CFS filesystem" "fsck.cfs of an unformatted volume" -- "$BIN/fsck.cfs" v
[ "$(fingerprint)" = "$before" ] && ok "refused commands changed no LUN" || not_ok "a refused command changed a LUN"

expect 0 "made a CFS filesystem" "mkfs.cfs" -- "$BIN/mkfs.cfs" -L tools -J 2 v
expect 0 "made a CFS filesystem" "mkfs.cfs of a second volume" -- "$BIN/mkfs.cfs" other
before=$(fingerprint)
expect 1 "already holds a CFS filesystem (label 'tools'" "mkfs.cfs refuses a formatted volume" -- "$BIN/mkfs.cfs" v
expect 2 "unknown mount option 'bogus'" "mount: bad option" -- "$BIN/cfs" mount v "$M" -o bogus
expect 2 "not supported: open files with O_SYNC" "mount: sync is refused, saying what to use" -- "$BIN/cfs" mount v "$M" -o sync
expect 2 "node=x" "mount: bad slot number" -- "$BIN/cfs" mount v "$M" -o node=x
expect 2 "lock_cache=5: give a number of locks from 16" "mount: a lock cache below the minimum" -- "$BIN/cfs" mount v "$M" -o lock_cache=5
expect 2 "quota_fold=1h: give a number of seconds from 0" "mount: a fold interval that is no number" -- "$BIN/cfs" mount v "$M" -o quota_fold=1h
expect 2 "quota_fold=3601: give a number of seconds from 0" "mount: a fold interval past an hour" -- "$BIN/cfs" mount v "$M" -o quota_fold=3601
expect 1 "slot 5 does not exist" "mount: a slot beyond the filesystem's" -- "$BIN/cfs" mount v "$M" -o node=5
expect 2 "give local, corosync or dlm" "mount: an unknown lock protocol" -- "$BIN/cfs" mount v "$M" -o cluster=gfs
expect 1 "a fence program is for cluster mounts" "mount: fence= on a local filesystem" -- "$BIN/cfs" mount v "$M" -o fence=/bin/true
expect 1 "made for cluster=local, not cluster=corosync" "mount: another protocol than the recorded one" -- "$BIN/cfs" mount v "$M" -o cluster=corosync
expect 2 "give local, corosync or dlm" "mkfs.cfs -p: an unknown lock protocol" -- "$BIN/mkfs.cfs" -p gfs --force v
expect 2 "give local, corosync or dlm" "cfs lockproto: an unknown lock protocol" -- "$BIN/cfs" lockproto v gfs
expect 1 "not a directory" "mount: mount point is a file" -- "$BIN/cfs" mount v "$T/v.lun0"
expect 1 "volume nope" "mount: unknown volume" -- "$BIN/cfs" mount nope "$M"
expect 16 "contradict" "fsck.cfs -n -y" -- "$BIN/fsck.cfs" -n -y v
[ "$(fingerprint)" = "$before" ] && ok "refused mounts changed no LUN" || not_ok "a refused mount changed a LUN"

# A missing LUN: named, and nothing changes on the others.
mkdir -p "$T/hide" && mv "$T/v.lun1" "$T/hide/"  # scans do not look into subdirectories
before=$(fingerprint)
expect 1 "missing" "mount: a LUN of the volume is missing" -- "$BIN/cfs" mount v "$M"
expect 8 "missing" "fsck.cfs: a LUN of the volume is missing" -- "$BIN/fsck.cfs" v
[ "$(fingerprint)" = "$before" ] && ok "a volume missing a LUN was not touched" || not_ok "changed with a LUN missing"
mv "$T/hide/v.lun1" "$T/v.lun1"

# Mounted: a second mount of it on this node, mkfs and fsck are refused.
expect 0 "" "cfs mount" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
mkdir -p "$T/m2"
expect 1 "mounted on this node already, at $M: a node mounts a volume once (mount --bind" \
	"a second mount on this node is refused and says how to show it at a second place" -- \
	"$BIN/cfs" mount v "$T/m2" -o node=1
expect 1 "mount point already" "a mount on the same directory" -- "$BIN/cfs" mount other "$M"
expect 0 "volume v (mounted): clean" "fsck.cfs of a mounted volume checks it through its daemon" -- "$BIN/fsck.cfs" v
expect 8 "repairs only a filesystem unmounted on every node" "fsck.cfs -y of a mounted volume" -- "$BIN/fsck.cfs" -y v
expect 1 "in use on this node" "mkfs.cfs --force of a mounted volume" -- "$BIN/mkfs.cfs" --force v
expect 0 "label 'tools'" "cfs status" -- "$BIN/cfs" status "$M"
check "cfs status --json" bash -c '"$0" status --json "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"label\"]==\"tools\" and d[\"slots\"]==2"' "$BIN/cfs" "$M"
check "cfs status --json counts the LUNs' flushes (three O_DSYNC writes: three at least)" bash -c '
	flushes() { "$0" status --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"flushes\"])"; }
	before=$(flushes "$1") && dd if=/dev/zero of="$1/dsync" bs=4k count=3 oflag=dsync status=none &&
	after=$(flushes "$1") && rm "$1/dsync" && [ $((after - before)) -ge 3 ]' "$BIN/cfs" "$M"
expect 0 "metadata (the whole filesystem)" "cfs locks names the metadata lock" -- "$BIN/cfs" locks "$M"
check "cfs locks --json" bash -c '"$0" locks --json "$1" | python3 -c "import json,sys; l=json.load(sys.stdin)[\"locks\"]; assert [x[\"granted\"] for x in l if x[\"resource\"]==\"meta\"]==[\"EX\"], l"' "$BIN/cfs" "$M"
expect 1 "not a mounted CFS filesystem" "cfs locks of a directory that is not CFS" -- "$BIN/cfs" locks "$T"
expect 2 "not a command I know" "cfs locks without a directory" -- "$BIN/cfs" locks
expect 1 "run cvm grow first" "cfs grow with nothing to grow" -- "$BIN/cfs" grow "$M"
expect 1 "not a mounted CFS filesystem" "cfs grow of a directory that is not CFS" -- "$BIN/cfs" grow "$T"

# Online growth: fill, grow the volume, grow the filesystem, fill on.
check "fill the filesystem" bash -c 'dd if=/dev/zero of="$0/fill" bs=1M count=100 status=none; [ -s "$0/fill" ]' "$M"
size_before=$(stat -f -c %b "$M")
truncate -s 64M "$T/v.lun2" "$T/v.lun3"
"$BIN/cvm" grow v "$T/v.lun2" "$T/v.lun3" >/dev/null
expect 0 "grown by" "cfs grow after cvm grow" -- "$BIN/cfs" grow "$M"
size_after=$(stat -f -c %b "$M")
[ "$size_after" -gt "$size_before" ] && ok "statfs shows the new size ($size_before -> $size_after blocks)" ||
	not_ok "statfs after grow: $size_before -> $size_after"
check "the new space can be written" dd if=/dev/zero of="$M/more" bs=1M count=80 status=none
# Node slots added while mounted.
expect 2 "give how many node slots to add, from 1 to 63" "cfs addslots 0" -- "$BIN/cfs" addslots "$M" 0
expect 2 "give how many node slots to add" "cfs addslots of no number" -- "$BIN/cfs" addslots "$M" two
expect 1 "give 1 to 62 more" "cfs addslots past the most a filesystem has" -- "$BIN/cfs" addslots "$M" 63
check "cfs addslots --json adds two slots" bash -c '"$0" addslots "$1" 2 --json | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"slots\"]==4, d"' "$BIN/cfs" "$M"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "clean" "fsck.cfs after grow and added slots" -- "$BIN/fsck.cfs" v
expect 0 "" "mount with an added slot (node=3)" -- "$BIN/cfs" mount v "$M" -o "node=3,log=$T/v.log"
check "a file written through the added slot's journal" bash -c 'echo x >"$0/by-slot-3" && sync -f "$0"' "$M"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "clean" "fsck.cfs after using the added slot" -- "$BIN/fsck.cfs" v

# A mount right after umount(8), whose daemon may not have let the volume go yet (generic/604):
# it waits for the claim, then for its slot.  A gate holds a byte of the first LUN (cfs/fs.c:
# 16 the claim, 32 + N slot N) as a daemon finishing its unmount would, until told.
hold_byte() { # BYTE: held when this returns, until let_go
	rm -f "$T/gate" "$T/gate.held"
	python3 - "$T/v.lun0" "$T/gate" "$1" <<'EOF' &
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[3]))
open(sys.argv[2] + ".held", "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
EOF
	gate=$!
	wait_until 60 test -e "$T/gate.held"
}
let_go() { touch "$T/gate" && wait "$gate"; }
# mount_waits BYTE LOGGED WHAT: with BYTE held, a mount logs LOGGED and waits; once let go
# it mounts and serves.
mount_waits() {
	hold_byte "$1"
	"$BIN/cfs" mount v "$M" -o "log=$T/v.log" >"$T/waiting.out" 2>&1 &
	local waiting=$!
	wait_until 60 grep -q "$2" "$T/v.log" &&
		ok "a mount whose $3 is held here waits" || not_ok "no wait logged: $(tail -3 "$T/v.log")"
	let_go
	wait "$waiting" && ok "it mounts once the $3 is let go" || not_ok "the waiting mount: $(cat "$T/waiting.out")"
	expect 0 "x" "and serves" -- cat "$M/by-slot-3"
}
mount_waits 16 "not mounted elsewhere here (an unmount finishing, a check or a format): waiting" "volume's claim"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
mount_waits 32 "slot 0 of volume v is in use on this node (an unmount finishing): waiting" slot
# generic/604 itself: files written, umount(8) in the background and a mount of the same
# directory at once; whichever comes first, the mount must succeed.
for round in 1 2 3; do
	for i in $(seq 100); do echo "$round" >"$M/race-$i"; done
	umount "$M" &
	um=$!
	if "$BIN/cfs" mount v "$M" -o "log=$T/v.log" >"$T/again.out" 2>&1 && wait "$um" &&
		[ "$(cat "$M/race-100")" = "$round" ]; then
		ok "umount(8) in the background and a mount at once, round $round"
	else
		not_ok "round $round: $(cat "$T/again.out")"
		wait "$um"
	fi
done
rm -f "$M"/race-*
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"

# Root mounts with suid and dev, as a kernel filesystem: a set-user-ID copy of id run by
# nobody says uid 0; with -o nosuid it says nobody's.
suid_uid() { setpriv --reuid=65534 --regid=65534 --clear-groups "$M/suid-id" -u 2>&1; }
chmod 711 "$T" # nobody reaches the mount point
expect 0 "" "mount for the set-user-ID checks" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
cp "$(command -v id)" "$M/suid-id" && chmod 4755 "$M/suid-id"
check "a set-user-ID program runs with its owner's uid (suid by default)" test "$(suid_uid)" = 0
check "the mount is neither nosuid nor nodev" bash -c "! grep ' $M fuse.cfs ' /proc/self/mounts | grep -qE 'nosuid|nodev'"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "" "mount -o nosuid" -- "$BIN/cfs" mount v "$M" -o "nosuid,log=$T/v.log"
check "with nosuid it runs with the caller's uid" test "$(suid_uid)" = 65534
rm -f "$M/suid-id"

# What a user without CAP_FSETID changes loses its set-ID bits as on Linux's own filesystems:
# setuid always, setgid when group-executable or when the user is outside the file's group.
# setid_case WHAT OWNER MODE WANT CMD...: a file of OWNER (and OWNER's group) with MODE; CMD
# is run by nobody with $F the file; the mode must then read WANT, also after a stat.
setid_case() {
	local what=$1 owner=$2 mode=$3 want=$4 got
	shift 4
	rm -f "$M/setid"
	head -c 8192 /dev/zero >"$M/setid" && chown "$owner:$owner" "$M/setid" && chmod "$mode" "$M/setid"
	F=$M/setid setpriv --reuid=65534 --regid=65534 --clear-groups "$@" >"$T/setid.out" 2>&1
	got=$(stat -c %a "$M/setid")
	[ "$got" = "$want" ] && ok "$what: $mode -> $want" ||
		not_ok "$what: $mode -> $got, expected $want ($(cat "$T/setid.out"))"
}
chmod 1777 "$M"
setid_case "a direct write by the owner" 65534 6644 2644 \
	bash -c 'dd if=/dev/zero of="$F" bs=4096 count=1 oflag=direct conv=notrunc status=none'
setid_case "a buffered write by an outsider" 0 6666 666 \
	bash -c 'dd if=/dev/zero of="$F" bs=100 count=1 conv=notrunc status=none'
setid_case "fallocate" 0 6666 666 fallocate -l 65536 "$M/setid"
setid_case "a punched hole" 0 2666 666 fallocate -p -o 0 -l 4096 "$M/setid"
setid_case "truncate" 0 6666 666 truncate -s 100 "$M/setid"
head -c 10 /dev/zero >"$M/setid" && chown 65534:0 "$M/setid" && chmod 755 "$M/setid"
check "chmod g+s by an owner outside the file's group is ignored" bash -c \
	"setpriv --reuid=65534 --regid=65534 --clear-groups chmod 2755 '$M/setid' && [ \$(stat -c %a '$M/setid') = 755 ]"
chmod 2755 "$M/setid"
check "setfacl by an owner outside the file's group drops setgid" bash -c \
	"setpriv --reuid=65534 --regid=65534 --clear-groups setfacl -m u:0:r '$M/setid' && [ \$(stat -c %a '$M/setid') = 755 ]"
chmod 6755 "$M/setid"
check "a write by root keeps them" bash -c "echo x >>'$M/setid' && [ \$(stat -c %a '$M/setid') = 6755 ]"
rm -f "$M/setid"
chmod 755 "$M"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "clean" "fsck.cfs after the set-ID checks" -- "$BIN/fsck.cfs" -n v
chmod 700 "$T"

# The access-time words of fstab are accepted; a read never changes the access time.
expect 0 "" "mount with relatime,strictatime,lazytime,nodiratime,async" -- \
	"$BIN/cfs" mount v "$M" -o "relatime,strictatime,lazytime,nodiratime,async,log=$T/v.log"
check "a read leaves the access time set by touch -a" bash -c "
	echo data >'$M/atime' && touch -a -d '2001-02-03 04:05:06' '$M/atime' && cat '$M/atime' >/dev/null &&
	[ \"\$(stat -c %X '$M/atime')\" = \"\$(date -d '2001-02-03 04:05:06' +%s)\" ]"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"

# File handles (open_by_handle_at, what an NFS server exports) stay valid across an unmount
# and mount; a removed file's handle is stale.
expect 0 "" "mount for the file handle checks" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
mkdir -p "$M/fh" && echo handled >"$M/fh/file"
FH=$(python3 "$HERE/file_handle.py" get "$M/fh/file")
expect 0 "handled" "open_by_handle_at" -- python3 "$HERE/file_handle.py" read "$M" "$FH"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "" "mount again" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
expect 0 "handled" "the handle after a remount" -- python3 "$HERE/file_handle.py" read "$M" "$FH"
rm "$M/fh/file"
expect 1 "ESTALE" "the handle of a removed file" -- python3 "$HERE/file_handle.py" read "$M" "$FH"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"

# remount,ro commits and refuses writes (EBUSY while a file is open for writing); back to rw
# they work again with nothing replayed; the mount's other flags stay.
expect 0 "" "mount for the remount checks" -- "$BIN/cfs" mount v "$M" -o "nosuid,log=$T/v.log"
echo before >"$M/remount"
exec {held}>>"$M/remount"
expect 1 "close them first" "remount,ro with a file open for writing" -- "$BIN/cfs" mount v "$M" -o remount,ro
exec {held}>&-
expect 0 "" "remount,ro" -- "$BIN/cfs" mount v "$M" -o remount,ro
check "read-only and still nosuid" bash -c "grep ' $M fuse.cfs ' /proc/self/mounts | grep -q ' ro,nosuid'"
expect 1 "Read-only file system" "a write after remount,ro" -- bash -c "echo x >>'$M/remount'"
expect 2 "say ro or rw" "a remount that says neither" -- "$BIN/cfs" mount v "$M" -o remount
expect 0 "" "remount,rw" -- "$BIN/cfs" mount v "$M" -o remount,rw
check "writes work again, the data is there" bash -c "echo after >>'$M/remount' && [ \"\$(cat '$M/remount')\" = \"\$(printf 'before\nafter')\" ]"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "" "mount -o ro" -- "$BIN/cfs" mount v "$M" -o "ro,log=$T/v.log"
expect 1 "mount it again" "remount,rw of a filesystem mounted read-only" -- "$BIN/cfs" mount v "$M" -o remount,rw
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
expect 0 "clean" "fsck.cfs after the remounts" -- "$BIN/fsck.cfs" v

# The entry in util-linux's userspace mount table that has umount(8) run umount.cfs.
# Has the daemon of the mount at $M (pid in $T/pid) ended?  A zombie counts as ended.
daemon_ended() {
	local state
	state=$(awk '{ print $3 }' "/proc/$(cat "$T/pid")/stat" 2>/dev/null || echo X)
	[ "$state" = Z ] || [ "$state" = X ]
}
expect 0 "" "cfs mount" -- "$BIN/cfs" mount v "$M" -o "log=$T/v.log"
check "cfs mount notes helper=cfs in /run/mount/utab" bash -c "grep -s 'TARGET=$(realpath "$M") .*helper=cfs' /run/mount/utab"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
check "cfs umount leaves no entry in /run/mount/utab" bash -c "! grep -s 'TARGET=$(realpath "$M") ' /run/mount/utab"

# mount -t cfs through the mount helper, and plain umount through the unmount helper.
if [ ! -e /sbin/mount.cfs ] && [ ! -e /sbin/umount.cfs ] && [ -w /sbin ]; then
	MOUNT_HELPER=/sbin/mount.cfs
	UMOUNT_HELPER=/sbin/umount.cfs
	ln -s "$BIN/cfs" "$MOUNT_HELPER"
	ln -s "$BIN/cfs" "$UMOUNT_HELPER"
fi
if [ -n "${MOUNT_HELPER:-}" ]; then
	expect 0 "" "mount -t cfs" -- mount -t cfs v "$M" -o "dboptimized,log=$T/v.log"
	grep -q " $M fuse.cfs " /proc/self/mounts && ok "mounted as fuse.cfs" || not_ok "mount -t cfs: not in /proc/self/mounts"
	expect 0 "dboptimized" "the mount is dboptimized" -- "$BIN/cfs" status "$M"
	# mount(8) sends a remount to FUSE's mount.fuse, which runs the type's program, cfs, by
	# name from the standard PATH.
	if [ ! -e /usr/local/bin/cfs ] && [ -w /usr/local/bin ]; then
		PATH_HELPER=/usr/local/bin/cfs
		ln -s "$BIN/cfs" "$PATH_HELPER"
		expect 0 "" "mount -o remount,ro" -- mount -o remount,ro "$M"
		check "the mount is read-only" bash -c "grep ' $M fuse.cfs ' /proc/self/mounts | grep -q ' ro,'"
		expect 0 "" "mount -o remount,rw" -- mount -o remount,rw "$M"
		check "writes work again" bash -c "echo x >'$M/after-remount'"
		rm -f "$PATH_HELPER"
	else
		echo "skip - mount -o remount: /usr/local/bin/cfs exists already or is read-only"
	fi
	# What has umount(8) run umount.cfs (tools/utab.c): an entry of the mount point, which the
	# remounts must have left.
	check "/run/mount/utab notes helper=cfs before the plain umount" bash -c "grep -s 'TARGET=$(realpath "$M") .*helper=cfs' /run/mount/utab"
	# Something for the daemon to do after the kernel lets go: a file written back at close.
	dd if=/dev/zero of="$M/unmount-work" bs=1M count=16 status=none
	"$BIN/cfs" status --json "$M" | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])' >"$T/pid"
	expect 0 "" "umount" -- umount "$M"
	check "plain umount returns once the daemon has ended (umount.cfs)" daemon_ended
	check "umount leaves no entry in /run/mount/utab" bash -c "! grep -s 'TARGET=$(realpath "$M") ' /run/mount/utab"
	expect 0 "" "mount -t cfs" -- mount -t cfs v "$M" -o "log=$T/v.log"
	expect 0 "" "umount -l" -- umount -l "$M"
	check "umount -l detaches the mount" bash -c "! mountpoint -q '$M'"
	for _ in $(seq 100); do pgrep -f "^cfsd .*$M" >/dev/null || break; sleep 0.1; done
else
	echo "skip - mount -t cfs: /sbin/mount.cfs or umount.cfs exists already or /sbin is read-only"
fi

# Without log=, the daemon logs to syslog (CFS_SYSLOG_SOCKET stands in for /dev/log).
export CFS_SYSLOG_SOCKET=$T/log.sock
python3 "$HERE/syslog_listener.py" "$CFS_SYSLOG_SOCKET" "$T/syslog" "$T" &
wait_until 60 test -S "$CFS_SYSLOG_SOCKET" || not_ok "the syslog listener did not start"
expect 1 "log=$T/no/such/dir/x.log: No such file or directory: give a file" \
	"mount: a log= file that cannot be made is refused" -- "$BIN/cfs" mount v "$M" -o "log=$T/no/such/dir/x.log"
check "the refused mount left nothing mounted" bash -c "! mountpoint -q '$M'"
expect 0 "" "mount without log=" -- "$BIN/cfs" mount v "$M"
check_soon 60 "its log lines reach syslog, tagged cfsd[PID], facility daemon" \
	grep -qE "^<29>cfsd\[[0-9]+\]: mounted volume v slot 0 at " "$T/syslog"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
check_soon 60 "the daemon's last line reaches syslog as it exits" grep -q "unmounted volume v" "$T/syslog"
rm -f "$CFS_SYSLOG_SOCKET" # syslog gone: the daemon logs nowhere and works on
expect 0 "" "mount without log= and without syslog" -- "$BIN/cfs" mount v "$M"
check "it works without syslog" bash -c "echo x >'$M/no-syslog' && cat '$M/no-syslog' >/dev/null"
expect 0 "" "cfs umount" -- "$BIN/cfs" umount "$M"
unset CFS_SYSLOG_SOCKET
finish
