# SPDX-License-Identifier: GPL-2.0-or-later
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
	[ -n "${BENCH_KEEP_LOGS:-}" ] && cp "$dir"/*.log "$BENCH_KEEP_LOGS"/ 2>/dev/null
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
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
# luns MIB: $dir/lun0..3 of MIB MiB each, every block written, as bench/cfs's are: a SAN LUN
# allocates nothing at a first write, where a sparse file's host filesystem does (a fifth to
# a quarter of the rate of writes that allocate, bench/cfs/run.sh).
luns() {
	for i in 0 1 2 3; do dd if=/dev/zero of="$dir/lun$i" bs=1M count="$1" oflag=direct status=none; done
}

# churn DIR N [SECONDS [PREFIX]]: create, stat and unlink N files (named PREFIX, if given,
# and a number); or, if SECONDS is not empty, as many as SECONDS allow, and print how many a
# second.
churn() { python3 - "$@" <<'EOF'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
end = time.time() + float(sys.argv[3]) if sys.argv[3:4] not in ([], [""]) else None
prefix = sys.argv[4] if len(sys.argv) > 4 else "f"
os.makedirs(d, exist_ok=True)
i, t0 = 0, time.time()
while (time.time() < end) if end else i < n:
    p = f"{d}/{prefix}{i}"
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    os.stat(p)
    os.unlink(p)
    i += 1
if end:
    print(int(i / (time.time() - t0)))
EOF
}
churn_on() { local n=$1; shift; on "$n" bash -c "$(declare -f churn); churn $(printf '%q ' "$@")"; }
