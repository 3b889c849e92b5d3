#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fsck.cfs -n on a mounted filesystem (issue 68, point 3): the mount's daemon checks it while
# it is in use, read-only; clean while a writer runs; damage made on the LUNs behind the
# daemon's back (blocks it holds in its cache) is found and named, by fsck's lines, its JSON
# report and the daemon's log; -y is refused while mounted; Ctrl-C stops the check.
. "$(dirname "$0")/lib.sh"
M=$T/mnt
make_volume v 1 64
"$BIN/mkfs.cfs" -J 2 v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
mount_cfs v "$M" || { not_ok "mount"; finish; }

# A tree with what the check walks: directories with overflow blocks, a file of many extents
# (an overflow extent block), xattrs, links, a symlink.
mkdir -p "$M/a/b" "$M/big"
for i in $(seq 300); do echo "$i" >"$M/big/file-with-a-long-name-$i"; done
for i in $(seq 0 2 400); do dd if=/dev/urandom of="$M/sparse" bs=4096 seek="$i" count=1 conv=notrunc status=none; done
echo data >"$M/a/b/file" && ln "$M/a/b/file" "$M/a/link" && ln -s b/file "$M/a/sym"
for i in $(seq 30); do setfattr -n "user.attr$i" -v "value-$i-$(printf '%0100d' 0)" "$M/a/b/file"; done
echo victim >"$M/victim"
echo alone >"$M/lonely"
sync

expect 0 "volume v (mounted): clean" "fsck.cfs -n checks the mounted filesystem: clean" -- \
	"$BIN/fsck.cfs" -n v
"$BIN/fsck.cfs" -n --json v >"$T/clean.json" 2>"$T/clean.err"
python3 - "$T/clean.json" <<'EOF' && ok "fsck.cfs -n --json: the mounted check's report" || not_ok "json: $(cat "$T/clean.json" "$T/clean.err")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["online"] and r["clean"] and r["exit"] == 0 and r["problems"] == 0, r
assert r["inodes"] >= 305 and r["directories"] >= 4 and r["groups"] >= 1, r
assert r["state"] == "done" and r["lines"] == [], r
EOF
grep -q "check: done after" "$T/v.log" && ok "the daemon logs the check's end" ||
	not_ok "no 'check: done' in the log: $(tail -5 "$T/v.log")"

# Clean while another process changes the tree: creates, appends, renames, removes, hard
# links made and removed, and directories made, moved and removed (files' link counts are
# counted again until a count sees the tree hold still: none may be called wrong).
python3 - "$M/busy" "$T/writer.stop" >"$T/writer.out" 2>&1 <<'EOF' &
import os, sys
top, stop = sys.argv[1], sys.argv[2]
os.makedirs(top, exist_ok=True)
n = 0
while not os.path.exists(stop):
    d = os.path.join(top, f"d{n % 7}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{n}"), "ab") as f:
        f.write(os.urandom(4096 * (n % 5 + 1)))
    if n % 3 == 0:
        os.rename(os.path.join(d, f"f{n}"), os.path.join(top, f"moved{n}"))
    if n % 6 == 0:  # a second name in another directory, removed six steps on
        os.makedirs(os.path.join(top, f"d{(n + 3) % 7}"), exist_ok=True)
        os.link(os.path.join(top, f"moved{n}"), os.path.join(top, f"d{(n + 3) % 7}", f"link{n}"))
        if n >= 6 and os.path.exists(os.path.join(top, f"d{(n - 3) % 7}", f"link{n - 6}")):
            os.unlink(os.path.join(top, f"d{(n - 3) % 7}", f"link{n - 6}"))
    if n % 4 == 0 and n >= 8:
        for name in (os.path.join(top, f"moved{n - 6}"), os.path.join(top, f"d{(n - 8) % 7}", f"f{n - 8}")):
            if os.path.exists(name):
                os.unlink(name)
    if n % 5 == 0:  # directories made, moved to another parent, removed: link counts change
        os.mkdir(os.path.join(d, f"sub{n}"))
        if n >= 10:
            os.rename(os.path.join(top, f"d{(n - 5) % 7}", f"sub{n - 5}"), os.path.join(d, f"moved-sub{n - 5}"))
            if n >= 15:  # moved into d{(n - 5) % 7} five steps ago
                os.rmdir(os.path.join(top, f"d{(n - 5) % 7}", f"moved-sub{n - 10}"))
    n += 1
print("writes", n)
EOF
writer=$!
wait_until 60 test -d "$M/busy/d6"
for round in 1 2 3; do
	expect 0 "clean" "fsck.cfs -n of the mounted filesystem while it changes: clean (round $round)" -- \
		"$BIN/fsck.cfs" -n v
done
touch "$T/writer.stop"
wait "$writer" && grep -q writes "$T/writer.out" && ok "the writer went on meanwhile: $(cat "$T/writer.out")" ||
	not_ok "the writer: $(cat "$T/writer.out")"
sync

# A directory removed while open stays in the orphan directory, whose entries say DT_REG
# whatever they name: no type mismatch.
mkdir "$M/gone-dir"
exec {held}<"$M/gone-dir"
rmdir "$M/gone-dir"
expect 0 "clean" "fsck.cfs -n: clean with a removed directory still open (an orphan)" -- \
	"$BIN/fsck.cfs" -n v
exec {held}<&-

expect 8 "fsck.cfs -y repairs only a filesystem unmounted on every node" \
	"fsck.cfs -y is refused on a mounted filesystem" -- "$BIN/fsck.cfs" -y v
expect 16 "give a number of inodes a second" "fsck.cfs --rate with no number: usage" -- \
	"$BIN/fsck.cfs" -n --rate x v

# Ctrl-C stops the daemon's check (exit 32, as fsck(8)); the mount goes on.
"$BIN/fsck.cfs" -n --rate 20 v >"$T/slow.out" 2>&1 &
slow=$!
wait_until 60 grep -q "checks it while it is in use" "$T/slow.out"
kill -INT "$slow"
wait "$slow"
rc=$?
[ "$rc" = 32 ] && grep -q "stopped" "$T/slow.out" && ok "Ctrl-C stops the check (exit 32)" ||
	not_ok "after Ctrl-C: exit $rc: $(cat "$T/slow.out")"
expect 0 "victim" "the mount serves on" -- cat "$M/victim"

# Damage made behind the daemon's back, to blocks it holds clean in its cache: mounted again,
# so that nothing is waiting to be written in place over it.
umount_cfs "$M" && mount_cfs v "$M" || not_ok "mount again"
BS=4096
at() { echo $((1048576 + $1 * BS + $2)); }
set_field() { # BLOCK OFFSET SIZE VALUE: the field set, the block's crc32c sealed again
	python3 "$(dirname "$0")/set_field.py" "$T/v.lun0" "$@"
}
get_field() { # BLOCK OFFSET SIZE
	od -An -t u"$3" -j "$(at "$1" "$2")" -N "$3" "$T/v.lun0" | tr -d ' '
}
victim=$(stat -c %i "$M/victim")
cat "$M/victim" "$M/a/b/file" >/dev/null && df "$M" >/dev/null
# 1. A field no inode may hold, sealed as a bug would: size beyond the largest file.
set_field "$victim" 48 8 18446744073709551615
# 2. A data block of a file marked free in its group's bitmap (the count kept in step).
file=$(stat -c %i "$M/a/b/file")
pblk=$(get_field "$file" $((1280 + 8)) 8)
ag0=$((2 + 2 * 1024))
bit=$((pblk - ag0))
byte=$(get_field "$ag0" $((64 + bit / 8)) 1)
set_field "$ag0" $((64 + bit / 8)) 1 $((byte & ~(1 << (bit % 8))))
set_field "$ag0" 44 4 $(($(get_field "$ag0" 44 4) + 1))
# 3. A directory's link count (a: 2 and b's ".." make 3).
a=$(stat -c %i "$M/a")
set_field "$a" 44 4 5
# 4. Files' link counts: a file of two names (a/b/file, a/link) says 1, one of one name 3.
set_field "$file" 44 4 1
lonely=$(stat -c %i "$M/lonely")
set_field "$lonely" 44 4 3
# 5. A free block marked in use (the count kept in step): what a lost extent leaves.
leaked=$(python3 "$(dirname "$0")/leak_block.py" "$T/v.lun0") || not_ok "leak a block"
"$BIN/fsck.cfs" -n v >"$T/found.out" 2>&1
rc=$?
[ "$rc" = 4 ] && ok "fsck.cfs -n of the mounted filesystem finds the damage (exit 4)" ||
	not_ok "exit $rc: $(cat "$T/found.out")"
grep -q "/victim (inode $victim): .*size beyond the largest file" "$T/found.out" &&
	ok "it names the file and the field" || not_ok "no line for /victim: $(cat "$T/found.out")"
grep -q "/a/b/file (inode $file): its extent at block $pblk is free in its group's bitmap" "$T/found.out" &&
	ok "it names a block in use that the bitmap calls free" || not_ok "no line for block $pblk: $(cat "$T/found.out")"
grep -q "/a (inode $a): link count 5, should be 3 (2 and its 1 subdirectories)" "$T/found.out" &&
	ok "it names a directory whose link count is not its subdirectories'" || not_ok "no line for /a: $(cat "$T/found.out")"
grep -Eq "/a/(b/file|link) \(inode $file\): link count 1, but 2 names \(also /a/(b/file|link)\)" "$T/found.out" &&
	ok "it names a file of two names whose link count says 1, with both names" ||
	not_ok "no line for the file of two names: $(cat "$T/found.out")"
grep -q "/lonely (inode $lonely): link count 3, but 1 name$" "$T/found.out" &&
	ok "it names a file of one name whose link count says 3" || not_ok "no line for /lonely: $(cat "$T/found.out")"
# (The damaged inode's data block is named too: its extents cannot be read.)
grep -Eq "allocation group 0: 2 blocks marked in use belong to nothing readable \(a damaged inode above may hold some\) \(([0-9]+, )?${leaked}[,)]" "$T/found.out" &&
	ok "it names a block marked in use that nothing uses" || not_ok "no line for the leaked block: $(cat "$T/found.out")"
grep -q "check: /victim (inode $victim)" "$T/v.log" && ok "the daemon logs each problem" ||
	not_ok "no check line in the log: $(tail -5 "$T/v.log")"
"$BIN/fsck.cfs" -n --json v >"$T/found.json" 2>/dev/null
python3 - "$T/found.json" "$victim" <<'EOF' && ok "--json lists the problems" || not_ok "json: $(cat "$T/found.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert not r["clean"] and r["exit"] == 4 and r["problems"] == len(r["lines"]) >= 2, r
assert any(f"inode {sys.argv[2]}" in l for l in r["lines"]), r
EOF
expect 0 "" "the daemon still serves after the check" -- "$BIN/cfs" status "$M"

umount_cfs "$M"
expect 1 "" "fsck.cfs -y of the unmounted filesystem repairs what the mounted check found" -- "$BIN/fsck.cfs" -y v
expect 0 "clean" "fsck.cfs -n: clean after the repair" -- "$BIN/fsck.cfs" -n v
finish
