# What bench/cluster's scripts share, sourced as `. lib.sh NAME ID` with $build set: a
# temporary directory for the LUN files and mounts (named after NAME), a cluster of their own
# (tests/cluster/cluster.sh, CLUSTER_ID from ID) taken down at exit, and helpers.
set -euo pipefail
bin=$(cd "$build/bin" && pwd)
cluster=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../../tests/cluster/cluster.sh
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cfs-$1.XXXXXX")
export CVM_SCAN=$dir CLUSTER_ID=$2$$
CLUSTER_ID=${CLUSTER_ID:0:6}
cleanup() {
	"$cluster" down >/dev/null 2>&1 || true
	mountpoint -q "$dir/local" 2>/dev/null && umount -l "$dir/local"
	sleep 0.5
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
on() { local n=$1; shift; "$cluster" exec "$n" "$@"; }
M() { echo "$dir/m$1"; }
status_field() { # node field -> that field of `cfs status --json` on the node's mount
	on "$1" "$bin/cfs" status --json "$(M "$1")" |
		python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"
}
