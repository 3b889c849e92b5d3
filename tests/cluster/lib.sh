# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by the cluster test scripts: tests/lib.sh, then a cluster of our own that is always
# taken down.  Usage: . lib.sh WHAT (WHAT names the tests in the skip line).
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v corosync >/dev/null; then
	echo "skip - $1: need root and corosync"
	exit 0
fi
# The cluster's name: tests/run.sh gives each script its own; by hand, one from our pid.  Its
# state (corosync's configs and logs) goes in TMPDIR, where tests/run.sh looks for leftovers.
export CLUSTER_ID=${CLUSTER_ID:-c$$}
CLUSTER_ID=${CLUSTER_ID:0:6}
export CLUSTER_STATE=${CLUSTER_STATE:-${TMPDIR:-/tmp}/cfs-cluster-$CLUSTER_ID}
# The cleanup ignores further INT and TERM: several checks that found the cluster hung each
# stop the script (see hung in cfs_lib.sh), and one TERM more cut the cleanup short.
# KEEP_LOGS=DIR keeps the daemons' logs there (the temporary directory goes).
# Processes a test froze (SIGSTOP) are listed in $T/frozen: they are let go first, or they
# would outlive their cluster.  $T/on_exit holds commands that undo what the script changed on
# the machine (loop devices, settings).
trap 'trap "" INT TERM; [ -s "$T/frozen" ] && kill -CONT $(cat "$T/frozen") 2>/dev/null
      "$HERE/cluster.sh" down >/dev/null 2>&1
      [ -s "$T/on_exit" ] && bash "$T/on_exit" 2>/dev/null
      [ -n "${KEEP_LOGS:-}" ] && mkdir -p "$KEEP_LOGS" && cp "$T"/*.log "$KEEP_LOGS"/ 2>/dev/null
      rm -rf "$T"' EXIT
trap 'exit 1' INT TERM # a test stopped from outside still takes its cluster down
C() { "$HERE/cluster.sh" "$@"; }
# loop_device FILE: a loop device on FILE, detached when the script ends.
loop_device() {
	local l
	l=$(losetup --find --show "$1") || return 1
	echo "losetup -d $l" >>"$T/on_exit"
	echo "$l"
}
