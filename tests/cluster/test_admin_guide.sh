#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# docs/admin-guide.md, run as written: every command of its console blocks, in order, on the
# node it names, and every file it shows written where it says, on a 4-node cluster of the
# harness (guide_steps.py says how the site's paths map to the test's: LUN files for
# /dev/mapper, a loop device for the SBD disk, a directory per node for its /etc and
# /var/log).  Each command must succeed.  Then the guide's corosync.conf and fstab lines are
# used for real: corosync -t checks the one (inside the nodes, whose addresses the guide's
# ring addresses are mapped to), and every node mounts the filesystems with the others' words.
. "$(dirname "$0")/cfs_lib.sh" "the admin guide"
GUIDE=$(cd "$HERE/../.." && pwd)/docs/admin-guide.md
LIB=$(cd "$BIN/../lib" && pwd)
for p in sbd losetup; do
	command -v $p >/dev/null || { echo "skip - the admin guide: $p is not installed"; exit 0; }
done
NODES=4
SUBNET=$(sed -n 's/^SUBNET=//p' "$HERE/cluster.sh")

# The site: LUNs (mpatha..g), the SBD disk, the fs.aio-max-nr the guide raises put back after.
mkdir -p "$T/dev" "$T/etc/corosync"
for l in a b c d e f; do truncate -s 96M "$T/dev/mpath$l"; done
truncate -s 160M "$T/dev/mpathg"
truncate -s 8M "$T/sbd.img"
sbd_dev=$(loop_device "$T/sbd.img") || { not_ok "losetup for the SBD disk"; finish; }
ln -s "$sbd_dev" "$T/dev/sbd"
echo "sysctl -qw fs.aio-max-nr=$(sysctl -n fs.aio-max-nr)" >>"$T/on_exit"
C up $NODES >/dev/null && ok "cluster of $NODES nodes up" || { not_ok "cluster up"; finish; }

# A command of the guide on node NODE, as root's login shell there would run it (the profile
# files the guide writes, the tools on PATH).  One that ends in & runs in the background,
# its output in the file it names.
node_env() {
	echo "export PATH='$BIN':\$PATH LD_LIBRARY_PATH='$LIB' CFS_FENCE_CONF='$T/n$1/etc/cfs/fence.conf'
for f in '$T/n$1/etc/profile.d'/*.sh; do [ -f \"\$f\" ] && . \"\$f\"; done"
}
step() { # NODE MAPPED AS-WRITTEN
	local out
	mkdir -p "$T/n$1"
	if out=$(on "$1" bash -c "$(node_env "$1")
$2" 2>&1); then
		ok "node$1# $3"
	else
		not_ok "node$1# $3: $out"
	fi
}
put_file() { # NODE PATH CONTENT AS-WRITTEN
	mkdir -p "$(dirname "$2")"
	printf '%s' "$3" >"$2"
	[ "$1" = 1 ] && ok "file $4 written"
	return 0
}
wait_step() { # NODE CMD: a program the guide started is up
	wait_until 120 on "$1" bash -c "$(node_env "$1")
$2" || not_ok "node$1: still not true after 120 s: $2"
}
python3 "$HERE/guide_steps.py" "$GUIDE" "$T" "$BIN" "$SUBNET" $NODES >"$T/steps" ||
	{ not_ok "guide_steps.py could not read the guide"; finish; }
[ "$(grep -c '^step ' "$T/steps")" -ge 40 ] && ok "the guide has $(grep -c '^step ' "$T/steps") command steps" ||
	not_ok "the guide's commands were not found: $(head -c 300 "$T/steps")"
# shellcheck disable=SC1091
. "$T/steps"

# The background instance the guide started and stopped is gone; nothing is left mounted.
odmload_gone() { ! pgrep -f "odmloa[d] --dir $T/u02/TEST" >/dev/null; }
check_soon 120 "the guide's odmload stopped at its stop file" odmload_gone
grep -q " 0 failed" "$T/n1/log/odmload.log" && ok "it ran without a failed process" ||
	not_ok "odmload: $(cat "$T/n1/log/odmload.log")"

# The fstab lines: every node mounts each with its options, then unmounts.
export CVM_SCAN=$T/dev # as the guide's profile.d file says
mounted_on_all() { # DIR
	[ "$(on 1 "$BIN/cfs" status --json "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["mounted"]))')" = $NODES ]
}
for n in $(seq $NODES); do on $n "$BIN/cfs" umount "$T/u02" >/dev/null 2>&1; done
while read -r vol dir type opts _; do
	[ "$type" = cfs ] || { not_ok "fstab line for $dir: type $type"; continue; }
	for n in $(seq $NODES); do
		opts_n=${opts//$T\/n1\//$T\/n$n\/}
		check "node $n mounts fstab's $vol at $dir" on $n "$BIN/cfs" mount "$vol" "$dir" -o "$opts_n"
	done
	check "node 1 sees $vol mounted on $NODES nodes" mounted_on_all "$dir"
	for n in $(seq $NODES); do check "node $n unmounts $dir" on $n "$BIN/cfs" umount "$dir"; done
done < <(grep -v '^#' "$T/n1/etc/fstab")

check "fsck.cfs -n orahome clean" "$BIN/fsck.cfs" -n orahome
check "fsck.cfs -n oradata clean" "$BIN/fsck.cfs" -n oradata
# The daemons' logs where the harness looks (no_damage_logged, finish's sanitizer reports,
# KEEP_LOGS).
for n in $(seq $NODES); do
	for f in "$T/n$n/log"/u0*.log; do cp "$f" "$T/cfsd$n-$(basename "$f")"; done
done
no_damage_logged
finish
