#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Damaged metadata, field by field (fuzz_fields.py): on a one-LUN filesystem with a big
# directory, fragmented and sparse files, xattrs in the inode and in an xattr block, ACLs,
# links, a project and quota records, one field of one metadata block is set to a hostile
# value and sealed again; fsck.cfs and the daemon must agree on it, fsck.cfs -y must repair it
# in one pass, and the repaired filesystem must read without EIO and stay clean after use.
# FUZZ_SEEDS (default "1 2") and FUZZ_CASES (cases per seed, default 40) choose the cases;
# `make soak` runs thousands.  A failing case runs again alone with
#   FUZZ_ONLY="S/K" TEST_SCRIPTS=tests/cfs/test_fuzz.sh tests/run.sh build/asan
. "$(dirname "$0")/lib.sh"
M=$T/mnt
make_volume v 1 64
"$BIN/mkfs.cfs" -J 2 -O quota,project v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
mount_cfs v "$M" || { not_ok "mount"; finish; }
(
	set -e
	cd "$M"
	mkdir -p big proj/sub deep/a/b/c
	for i in $(seq 1 400); do echo "file $i" >"big/entry-with-a-longer-name-$i"; done
	# Every other block written: one extent each, more than an inode holds inline.
	for i in $(seq 0 2 400); do
		dd if=/dev/urandom of=sparse bs=4096 seek="$i" count=1 conv=notrunc status=none
	done
	dd if=/dev/urandom of=deep/a/b/c/data bs=1M count=2 status=none
	for i in $(seq 1 40); do setfattr -n "user.attr$i" -v "$(printf 'v%.0s' $(seq 1 60))" xattrs; done
	touch acl && setfacl -m u:1000:rw,g:100:r acl
	ln big/entry-with-a-longer-name-1 hardlink
	ln -s deep/a/b/c/data symlink
	mkfifo fifo
	chown 1000:1000 deep/a/b/c/data proj
	chattr +P -p 7 proj
	echo in a project >proj/sub/file
) >"$T/populate.out" 2>&1 || not_ok "populate: $(cat "$T/populate.out")"
"$BIN/cfs" quota set "$M" -u 1000 --blocks-hard 100M >/dev/null 2>&1 ||
	not_ok "cfs quota set"
umount_cfs "$M"
expect 0 "clean" "fsck.cfs: the populated filesystem is clean" -- "$BIN/fsck.cfs" -n v
cp "$T/v.lun0" "$T/pristine"
# Exit 1: cases failed, each said on its "not ok" line; anything else: the fuzzer itself.
fuzz() {
	python3 "$(dirname "$0")/fuzz_fields.py" --bin "$BIN" --lun "$T/v.lun0" \
		--pristine "$T/pristine" --volume v --mnt "$M" --log "$T/v.log" "$@" 2>"$T/fuzz.err"
	local rc=$?
	[ "$rc" -le 1 ] || not_ok "fuzz_fields.py $*: exit $rc: $(tail -5 "$T/fuzz.err")"
	[ -z "${FUZZ_ONLY:-}" ] || cat "$T/fuzz.err" >&2
}
if [ -n "${FUZZ_ONLY:-}" ]; then # "S/K ...": those cases alone, with their commands' output
	for c in $FUZZ_ONLY; do fuzz --seed "${c%/*}" --case "${c#*/}" --verbose; done
else
	for seed in ${FUZZ_SEEDS:-1 2}; do fuzz --seed "$seed" --cases "${FUZZ_CASES:-40}"; done
fi
finish
