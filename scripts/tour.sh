#!/usr/bin/env bash
# The newcomer's tour on the embedded default: LUN files in a temporary directory, a striped
# volume over them, a look at it, randio on it, growth, and cleanup.  Usage: demo.sh [BUILD]
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/cfs-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export CVM_SCAN=$dir
if [ -t 1 ]; then bold=$(tput bold 2>/dev/null || true) plain=$(tput sgr0 2>/dev/null || true); else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

echo "demo: LUN files in $dir (sparse, 4 x 256 MiB)"
for i in 0 1 2 3; do truncate -s 256M "$dir/lun$i"; done
step "$bin/cvm" create oradata --stripe-width 256k "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3"
step "$bin/cvm" show oradata
step "$bin/randio" --time 3 --streams 2 vol:oradata
step "$bin/randio" --time 3 --iodepth 32 --read-pct 100 vol:oradata
for i in 4 5; do truncate -s 256M "$dir/lun$i"; done
step "$bin/cvm" grow oradata "$dir/lun4" "$dir/lun5"
step "$bin/cvm" check oradata
step "$bin/cvm" show oradata --json
step "$bin/cvm" remove --force oradata
echo
echo "demo: done; $dir removed.  Not yet in the tour: mkfs.cfs, mounting CFS, odmstat (see README)."
