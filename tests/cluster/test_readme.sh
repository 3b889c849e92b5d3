#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The README's "A cluster on one machine", run as a newcomer would paste it: the block as
# written, from a directory laid out as the checkout (build/bin the build under test,
# tests/cluster/cluster.sh), with its scratch paths in this test's directory (/var/tmp/luns,
# /var/tmp/u01-nN), no `make` (the build is there), and the cluster under this test's
# CLUSTER_ID.  Every command must succeed (a node's command runs in the caller's directory:
# build/bin/cfs is found there), node 3 must read what node 1 wrote, and the block must
# leave nothing mounted.
. "$(dirname "$0")/cfs_lib.sh" "the README's cluster"
README=$HERE/../../README.md
awk '/^## A cluster on one machine/ { on = 1 } on && /^```sh/ { inblock = 1; next }
	inblock && /^```/ { exit } inblock' "$README" >"$T/block.sh"
[ "$(grep -c 'cluster.sh' "$T/block.sh")" -ge 5 ] && ok "the README's cluster block found" ||
	{ not_ok "no cluster block in the README: $(cat "$T/block.sh")"; finish; }
sed -i -e "s|/var/tmp/|$T/|g" -e '/^make$/d' "$T/block.sh"
mkdir -p "$T/checkout/build" "$T/checkout/tests/cluster"
ln -s "$BIN" "$T/checkout/build/bin"
ln -s "$HERE/cluster.sh" "$T/checkout/tests/cluster/cluster.sh"
# A shell of its own with -e: inside `if ( ... )` this one would ignore set -e, and a
# failing command in the middle would pass unseen.
if (cd "$T/checkout" && bash -e "$T/block.sh") >"$T/out" 2>&1; then
	ok "every command of the block succeeds"
else
	not_ok "the block failed: $(tail -15 "$T/out")"
fi
check "node 3 printed what node 1 wrote" grep -qx hello "$T/out"
check "the block's status shows the 3 nodes" grep -q "mounted on.* node .* node .* node " "$T/out"
check "nothing of it is left mounted" bash -c "! grep -q '$T' /proc/mounts"
finish
