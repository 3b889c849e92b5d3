#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The newcomer's tour on the embedded default (one node, local locks): LUN files in a
# temporary directory, a striped volume over them, randio on it, a CFS filesystem made and
# mounted, used as a shared Oracle home would be, remounted dboptimized for database files,
# grown online, two database instances run through libodm and shown by odmstat, unmounted,
# checked, and everything cleaned up.  Usage: tour.sh [BUILD | --installed]
# (--installed: the tools on PATH and libodm.so where the loader finds it, as the Debian
# packages install them).
set -euo pipefail
build=${1:-build}
if [ "$build" = --installed ]; then
	command -v cvm >/dev/null || { echo "tour: cvm is not installed (apt-get install cfs-utils)" >&2; exit 1; }
	bin=$(dirname "$(command -v cvm)") lib=libodm.so
else
	bin=$(cd "$build/bin" && pwd) lib=$(cd "$build/lib" && pwd)/libodm.so
fi
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/cfs-demo.XXXXXX")
cleanup() {
	for m in "$dir/home" "$dir/oradata"; do
		mountpoint -q "$m" 2>/dev/null && { "$bin/cfs" umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	rm -rf "$dir"
	rm -f /dev/shm/odm.DEMO.DEMO1 /dev/shm/odm.DEMO.DEMO2
}
trap cleanup EXIT
trap 'exit 1' INT TERM
export CVM_SCAN=$dir
if [ -t 1 ]; then bold=$(tput bold 2>/dev/null || true) plain=$(tput sgr0 2>/dev/null || true); else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

echo "demo: LUN files in $dir (sparse, 4 x 512 MiB)"
for i in 0 1 2 3; do truncate -s 512M "$dir/lun$i"; done
step "$bin/cvm" create oradata --stripe-width 256k "$dir/lun0" "$dir/lun1" "$dir/lun2" "$dir/lun3"
step "$bin/cvm" show oradata
step "$bin/randio" --time 2 --iodepth 32 --read-pct 100 --quiet vol:oradata

step "$bin/mkfs.cfs" -L demo -J 4 oradata
mkdir -p "$dir/home" "$dir/oradata"
step "$bin/cfs" mount oradata "$dir/home" -o "log=$dir/cfsd.log"
echo "demo: an Oracle-home-like workload: a tree of files, a program run from the mount, links"
step tar -C /usr/include -cf "$dir/home/include.tar" .
step mkdir -p "$dir/home/product/bin" "$dir/home/product/lib"
step tar -C "$dir/home/product/lib" -xf "$dir/home/include.tar"
step cp /bin/ls "$dir/home/product/bin/ls"
step "$dir/home/product/bin/ls" "$dir/home/product"
step ln -s product/bin/ls "$dir/home/ls"
step du -sh "$dir/home/product"
step "$bin/cfs" status "$dir/home"
step "$bin/cfs" umount "$dir/home"

echo
echo "demo: database files go on a dboptimized mount: no page cache, direct I/O to the volume"
step "$bin/cfs" mount oradata "$dir/oradata" -o "dboptimized,log=$dir/cfsd.log"
step fallocate -l 256M "$dir/oradata/users01.dbf"
step "$bin/randio" --time 3 --streams 2 --bs 8k --quiet "$dir/oradata/users01.dbf"
step df -h "$dir/oradata"
for i in 4 5; do truncate -s 512M "$dir/lun$i"; done
step "$bin/cvm" grow oradata "$dir/lun4" "$dir/lun5"
step "$bin/cfs" grow "$dir/oradata"
step df -h "$dir/oradata"
step "$bin/cfs" status "$dir/oradata" --json
echo
echo "demo: two database instances through libodm (kernel bypass: libaio straight to the LUNs)"
step "$bin/odmload" --lib "$lib" --dir "$dir/oradata" --db DEMO --instance DEMO1 --profile oltp \
	--seconds 4 --file-mib 64 &
oltp=$!
step "$bin/odmload" --lib "$lib" --dir "$dir/oradata" --db DEMO --instance DEMO2 --profile scan \
	--seconds 4 --file-mib 64 &
scan=$!
for _ in $(seq 100); do "$bin/odmstat" -l >/dev/null 2>&1 && break; sleep 0.2; done # started
step "$bin/odmstat" -l
wait $oltp $scan
step "$bin/odmstat" --by instance
step "$bin/odmstat" --by ptype --instance DEMO1
step "$bin/odmstat" --by file --instance DEMO2
rm -f /dev/shm/odm.DEMO.DEMO1 /dev/shm/odm.DEMO.DEMO2
step "$bin/cfs" umount "$dir/oradata"
step "$bin/fsck.cfs" oradata
step "$bin/cvm" remove --force oradata
echo
echo "demo: done; $dir removed."
