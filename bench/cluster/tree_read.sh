#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cluster/tree_read.sh: reading a tree another node wrote (issue 69, point 3).  Node 1
# of 3 unpacks BENCH_TREE_SRC (default /usr/include); after sync and a drop of the kernel's
# caches node 2, which holds no grant of it, reads every file (find | xargs cat).  Then the
# same read again on node 2 (its grants and cfsd's block cache kept: what the locks cost is
# the difference) and on node 1; node 1 removes the tree.  Printed per build: seconds, the
# lock messages node 2 sent, and its waits for grants (cfs status --json's lock_waits, one
# per batch asked together); node 1's removal of the tree (after a drop of the caches), its
# time, lock messages and waits (and their time); BENCH_ROUNDS rounds (default 3) and their
# medians; then how long node 2 takes to unmount with the last round's removed inodes still
# in its memory (it reads each again under its glock EX).  Several builds compare in one run:
#   tree_read.sh build /tmp/old/build
# Usage: tree_read.sh [BUILD...]; env BENCH_DIR (default /var/tmp), BENCH_ROUNDS, BENCH_TREE_SRC.
builds=("${@:-build}")
build=${builds[0]}
. "$(dirname "$0")/lib.sh" tread ct
rounds=${BENCH_ROUNDS:-3}
tree_src=${BENCH_TREE_SRC:-/usr/include}
name=$(basename "$tree_src")
tar -C "$(dirname "$tree_src")" -cf "$dir/tree.tar" "$name"
nfiles=$(tar -tf "$dir/tree.tar" | grep -vc '/$')
luns $(($(du -sm "$dir/tree.tar" | cut -f1) * 2 + 256))
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
since() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$1"; }
read_on() { on "$1" sh -c "cd '$(M "$1")/$name' && find . -type f -print0 | xargs -0 cat >/dev/null"; }
lock_waits() { status_field "$1" lock_waits 2>/dev/null || echo 0; } # 0: a build before them

echo "bench/cluster/tree_read: $(nproc) cores; $nfiles files of $(du -sm "$dir/tree.tar" | cut -f1) MB; $rounds rounds"
"$bin/cvm" create tread "$dir"/lun{0,1,2,3} >/dev/null
"$cluster" up 3 >/dev/null
for b in "${builds[@]}"; do
	bin=$(cd "$b/bin" && pwd)
	"$bin/mkfs.cfs" -p corosync -J 3 --force tread >/dev/null 2>&1
	for n in 1 2 3; do mkdir -p "$(M $n)"; on $n "$bin/cfs" mount tread "$(M $n)" -o "log=$dir/cfsd$n.log"; done
	: >"$dir/rows"
	for r in $(seq "$rounds"); do
		on 1 tar -C "$(M 1)" -xf "$dir/tree.tar"
		drop
		m0=$(status_field 2 lock_messages) w0=$(lock_waits 2) t0=$(date +%s.%N)
		read_on 2
		cold=$(since "$t0") m1=$(status_field 2 lock_messages) w1=$(lock_waits 2)
		drop
		t0=$(date +%s.%N); read_on 2; warm=$(since "$t0")
		drop
		t0=$(date +%s.%N); read_on 1; writer=$(since "$t0")
		# Node 1 removes the tree node 2 holds grants of: each span's EX takes them back.
		drop
		rm0=$(status_field 1 lock_messages) rw0=$(lock_waits 1) rms0=$(status_field 1 lock_wait_ms)
		t0=$(date +%s.%N)
		on 1 rm -rf "$(M 1)/$name"
		removed=$(since "$t0") rm1=$(status_field 1 lock_messages) rw1=$(lock_waits 1)
		rms1=$(status_field 1 lock_wait_ms)
		echo "$cold $((m1 - m0)) $((w1 - w0)) $warm $writer $removed $((rm1 - rm0)) $((rw1 - rw0))" \
			"$((rms1 - rms0))" >>"$dir/rows"
	done
	# Node 2 still has the last round's inodes in memory, which node 1 removed: its unmount
	# reads each again under its glock EX.
	t0=$(date +%s.%N)
	on 2 "$bin/cfs" umount "$(M 2)"
	echo "$b: node 2 unmounts in $(since "$t0") s"
	for n in 1 3; do on $n "$bin/cfs" umount "$(M $n)"; done
	python3 - "$b" "$nfiles" "$dir/rows" <<'EOF'
import statistics, sys
b, nfiles, rows = sys.argv[1], int(sys.argv[2]), [l.split() for l in open(sys.argv[3])]
for r in rows:
    print(f'  {b}: node 2 cold {r[0]} s ({r[1]} lock messages, {r[2]} waits); node 2 again {r[3]} s; '
          f'node 1 {r[4]} s; node 1 removes it in {r[5]} s ({r[6]} lock messages, {r[7]} waits '
          f'of {r[8]} ms in all)')
med = [statistics.median(float(r[i]) for r in rows) for i in range(9)]
print(f'{b}: medians: node 2 cold {med[0]:.2f} s, {med[1] / nfiles:.3f} lock messages and '
      f'{med[2] / nfiles:.3f} waits per file; node 2 again {med[3]:.2f} s; node 1 {med[4]:.2f} s; '
      f'node 1 removes it in {med[5]:.2f} s, {med[6] / nfiles:.3f} lock messages and '
      f'{med[7] / nfiles:.3f} waits per file, {med[8] / max(med[7], 1):.1f} ms a wait')
EOF
done
