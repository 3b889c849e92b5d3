#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The lock protocol's versions (docs/upgrading.md): a node whose major version the cluster
# does not speak is refused at mount, with a message naming both versions, before it sees the
# lock table, and changes nothing: the others go on, their files as they were, and the
# refused node's cfsd is gone.  Both ways: a major-2 build (tests/upgrade/build.sh major2)
# meeting a cluster of this release, and this release meeting a cluster the major-2 build
# started.
. "$(dirname "$0")/cfs_lib.sh" "lock protocol versions"
MAJOR2=$BIN/../compat/major2/build/bin
[ -x "$MAJOR2/cfsd" ] || { not_ok "no major-2 build in $MAJOR2: run make check-build"; finish; }
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null 2>&1
for n in 1 2; do check "node $n mounts (this release)" mount_on $n; done
on 1 bash -c "seq 1 50000 >'$(M 1)/one' && sync '$(M 1)/one'"
sum_on() { on "$1" bash -c "md5sum <'$(M "$1")/$2'"; }
sum=$(sum_on 2 one)
mounted_nodes() { # NODE: the node ids its cfs status lists as mounted, in order
	on "$1" "$(node_bin "$1")/cfs" status --json "$(M "$1")" |
		python3 -c 'import json,sys; print(*sorted(m["node_id"] for m in json.load(sys.stdin)["mounted"]))'
}
lines_on() { on "$1" bash -c "wc -l <'$(M "$1")/$2'"; }

refused_mount() { # NODE BUILD: the mount fails, saying why; nothing of it stays running
	local out rc=0
	mkdir -p "$(M "$1")"
	out=$(on "$1" "$2/cfs" mount data "$(M "$1")" -o "log=$T/cfsd$1.log" 2>&1) || rc=$?
	echo "$out"
	[ "$rc" -ne 0 ] && ! on "$1" grep -q " $(M "$1") " /proc/self/mounts
}
BIN_3=$MAJOR2
check "a node of lock protocol 2.1 is refused" refused_mount 3 "$MAJOR2"
out=$(cat "$T/check.out")
[[ $out == *"the cluster speaks lock protocol 1.1 (release 0.2); this node speaks lock protocol 2.1 (release 0.2)"* ]] &&
	ok "its message names both versions" || not_ok "its message: $out"
check_soon 30 "its cfsd is gone" bash -c "! pgrep -f '^cfsd .*$(M 3)'"
check "node 1 logged that node 3 speaks 2.1 and was not admitted" \
	grep -q "lock manager: node 1: node 3 (pid [0-9]*) speaks lock protocol 2.1 (release 0.2), this node 1.1: it is not admitted" "$T/cfsd1.log"
check "the mounted nodes are still nodes 1 and 2" test "$(mounted_nodes 1)" = "1 2"
on 2 bash -c "seq 1 7000 >'$(M 2)/two'"
check "node 2 writes on, node 1 reads it" test "$(lines_on 1 two)" = 7000
check "the file node 1 wrote before is as it was" test "$(sum_on 2 one)" = "$sum"
for n in 1 2; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the refusal"

# The other way: a cluster of major 2 refuses this release.
BIN_1=$MAJOR2 BIN_2=$MAJOR2
for n in 1 2; do check "node $n mounts (major 2)" mount_on $n; done
BIN_3=$BIN
check "a node of this release (1.1) is refused by a cluster of 2.1" refused_mount 3 "$BIN"
out=$(cat "$T/check.out")
[[ $out == *"the cluster speaks lock protocol 2.1 (release 0.2); this node speaks lock protocol 1.1 (release 0.2)"* ]] &&
	ok "its message names both versions" || not_ok "its message: $out"
check "the major-2 nodes read on" test "$(lines_on 2 two)" = 7000
check "... and are the only ones mounted" test "$(mounted_nodes 2)" = "1 2"
for n in 1 2; do check "unmount on node $n" umount_on $n; done
fsck_clean "at the end"
finish
