#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Format and features as people use them (cfs(5)): every tool's --version, mkfs.cfs -O and
# --feature-level, cfs show, cfs status and fsck.cfs printing the features, cfs tune turning
# journal_v3 off and on with data kept across, and what it refuses (a mounted filesystem, a
# name it does not know) changing nothing.  The bits a release does not know, the interrupted
# tune and the journal formats are in test_feature.c.
. "$(dirname "$0")/lib.sh"
M=$T/mnt
make_volume v 1 64

for tool in mkfs.cfs fsck.cfs cfs cfsd cvm cfslock odmstat odmload randio; do
	expect 0 "$tool (cfs) 0.2 (built from " "$tool --version" -- "$BIN/$tool" --version
done

before=$(fingerprint)
expect 1 "feature 'bogus': this release (0.2) knows journal_v3" "mkfs.cfs -O with an unknown feature" -- "$BIN/mkfs.cfs" -O bogus v
expect 1 "feature level 'newest': give max-compat, default or max-features" "mkfs.cfs: an unknown level" -- "$BIN/mkfs.cfs" --feature-level newest v
[ "$(fingerprint)" = "$before" ] && ok "refused mkfs changed no LUN" || not_ok "a refused mkfs changed a LUN"

expect 0 "format 2, features: journal_v3" "mkfs.cfs: the default level has journal_v3" -- "$BIN/mkfs.cfs" -L tune v
expect 0 "format 2, features: journal_v3" "cfs show" -- "$BIN/cfs" show v
expect 0 "can use it read-write" "cfs show: what this release can do" -- "$BIN/cfs" show v
json=$("$BIN/cfs" show v --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["features"]=="journal_v3" and d["incompat"]==1 and d["format"]==2, d' "$json" \
	&& ok "cfs show --json" || not_ok "cfs show --json: $json"

mount_cfs v "$M"
seq 1 20000 >"$M/before"
expect 0 "features: journal_v3" "cfs status prints the features" -- "$BIN/cfs" status "$M"
expect 0 '"release": "0.2", "features": "journal_v3"' "cfs status --json" -- "$BIN/cfs" status --json "$M"
expect 0 "format 2, features: journal_v3" "cfs show while mounted" -- "$BIN/cfs" show v
expect 1 "in use on this node" "cfs tune of a mounted filesystem is refused" -- "$BIN/cfs" tune v -O ^journal_v3
expect 0 "features: journal_v3" "... and changed nothing" -- "$BIN/cfs" show v
umount_cfs "$M"

before=$(fingerprint)
expect 2 "feature 'journal_v9' is not one this release knows" "cfs tune: an unknown feature" -- "$BIN/cfs" tune v -O journal_v9
expect 2 "give the features to change with -O" "cfs tune without -O" -- "$BIN/cfs" tune v
[ "$(fingerprint)" = "$before" ] && ok "refused tunes changed no LUN" || not_ok "a refused tune changed a LUN"

expect 0 "now has features: none" "cfs tune -O ^journal_v3" -- "$BIN/cfs" tune v -O ^journal_v3
expect 0 "features: none" "fsck.cfs prints the features" -- "$BIN/fsck.cfs" -n v
mount_cfs v "$M"
seq 1 30000 >"$M/between"
umount_cfs "$M"
expect 0 "now has features: journal_v3" "cfs tune -O journal_v3" -- "$BIN/cfs" tune v -O journal_v3
mount_cfs v "$M"
cmp -s "$M/before" <(seq 1 20000) && cmp -s "$M/between" <(seq 1 30000) \
	&& ok "files written before and between the tunes read back whole" || not_ok "a file changed across the tunes"
umount_cfs "$M"
expect 0 "clean" "fsck.cfs after the tunes" -- "$BIN/fsck.cfs" -n v
finish
