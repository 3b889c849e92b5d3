#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# "Text file busy" across the nodes of a cluster mount (cfs/text_busy.c): a program running
# on one node cannot be opened for writing, overwritten or truncated on another, where before
# it was overwritten and the running program died of SIGBUS; a program open for writing on
# one node cannot be run on another, also when that open made the file (cp to a new name) or
# the file became a program while open (chmod +x); both work again once the other side has
# ended.  Other nodes run it at the same time; running it again on a node sends no lock
# message, and making programs takes no lock while no other node looks at them.
. "$(dirname "$0")/cfs_lib.sh" "cfs: programs busy across nodes"

C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 100
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts" mount_on $n; done

# busy WHAT NODE CMD...: CMD on NODE fails, saying "Text file busy".
busy() {
	local what=$1 out
	shift
	if out=$(on "$@" 2>&1); then not_ok "$what: it succeeded"
	elif [[ $out == *"Text file busy"* ]]; then ok "$what"
	else not_ok "$what: $out"; fi
}
all_messages() { echo $(( $(status_of 1 lock_messages) + $(status_of 2 lock_messages) + $(status_of 3 lock_messages) )); }

on 1 cp /bin/sleep "$(M 1)/prog"
want=$(sha256sum </bin/sleep | cut -d' ' -f1)
on 2 "$(M 2)/prog" 600 &
runner=$!
# The program itself (-x: the whole command line), not the wrappers that start it on node 2,
# whose command lines hold it too: once it runs, its exec took the program's lock.
check_soon 120 "node 2 runs the program" pgrep -fx "$(M 2)/prog 600"
node_id() { on "$1" "$BIN/cfs" status --json "$(M "$1")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["node_id"])'; }
runner_id=$(node_id 2)
program_lock_listed() {
	python3 - "$(on 1 "$BIN/cfs" locks --json "$(M 1)")" "$runner_id" <<'PY'
import json, sys
locks, runner = json.loads(sys.argv[1])['locks'], int(sys.argv[2])
assert any(l.get('path') == '/prog' and l['object'].startswith('program') and
           l['node_id'] == runner and l['granted'] == 'PR' for l in locks), locks
PY
}
# Node 1 applies the grant when corosync delivers it there, a moment after node 2 did.
check_soon 120 "cfs locks on node 1 names /prog as a program node 2 runs (PR)" program_lock_listed
busy "node 1 cannot open node 2's running program for writing" 1 bash -c "exec 3>>'$(M 1)/prog'"
busy "node 1's cp over it fails" 1 cp /bin/true "$(M 1)/prog"
busy "node 3 cannot truncate it" 3 truncate -s 0 "$(M 3)/prog"
check "node 3 runs it at the same time" on 3 "$(M 3)/prog" 0
check "its content is unchanged, read on node 3" [ "$(on 3 sha256sum "$(M 3)/prog" | cut -d' ' -f1)" = "$want" ]
check "node 2's program is still running" kill -0 $runner
pkill -f "$(M 2)/prog 600"
wait $runner
check "once it ended, node 1's cp over it succeeds" on 1 cp /bin/true "$(M 1)/prog"

on 1 bash -c "exec 3>>'$(M 1)/prog'; touch '$T/opened'; while [ ! -e '$T/close' ]; do sleep 0.05; done" &
writer=$!
check_soon 120 "node 1 holds the program open for writing" test -e "$T/opened"
busy "node 2 cannot run a program open for writing on node 1" 2 "$(M 2)/prog"
touch "$T/close"
wait $writer
check "after node 1's close node 2 runs it" on 2 "$(M 2)/prog"
m0=$(all_messages)
check "node 2 runs it 20 more times" on 2 bash -c "for _ in \$(seq 20); do '$(M 2)/prog' || exit 1; done"
m1=$(all_messages)
check "those 20 runs sent no lock message ($((m1 - m0)))" [ "$m1" -eq "$m0" ]
check "node 3 writes the program again once node 2 is done" on 3 cp /bin/sleep "$(M 3)/prog"

# half_written NODE NAME MODE [chmod]: NODE writes half of /bin/sleep to a new file NAME made
# with MODE (and then gives it execute bits if asked), and keeps it open until $T/close.
half_written() {
	rm -f "$T/opened" "$T/close"
	on "$1" python3 - "$(M "$1")/$2" "$3" "$T" "${4:-}" <<'PY' &
import os, sys, time
path, mode, tmp, chmod = sys.argv[1], int(sys.argv[2], 8), sys.argv[3], sys.argv[4]
data = open("/bin/sleep", "rb").read()
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, mode)
os.write(fd, data[: len(data) // 2])
if chmod:
    os.fchmod(fd, 0o755)
open(f"{tmp}/opened", "w").close()
while not os.path.exists(f"{tmp}/close"):
    time.sleep(0.05)
os.write(fd, data[len(data) // 2 :])
os.close(fd)
PY
	writer=$!
	check_soon 120 "node $1 holds $2 open, half written" test -e "$T/opened"
}
half_written 1 new 755
busy "node 2 cannot run a program node 1's open is making" 2 "$(M 2)/new" 0
touch "$T/close"
wait $writer
check "after node 1's close node 2 runs it" on 2 "$(M 2)/new" 0
half_written 3 plain 644 chmod
busy "node 2 cannot run a file given execute bits while open for writing on node 3" 2 "$(M 2)/plain" 0
touch "$T/close"
wait $writer
check "after node 3's close node 2 runs it" on 2 "$(M 2)/plain" 0
on 3 mkdir "$(M 3)/bin"
check "node 3 makes 20 programs" on 3 bash -c "for i in \$(seq 20); do cp /bin/true '$(M 3)/bin/p'\$i || exit 1; done"
check "making them took no program lock" python3 - "$(on 3 "$BIN/cfs" locks --json "$(M 3)")" <<'PY'
import json, sys
locks = json.loads(sys.argv[1])['locks']
assert not [l for l in locks if l.get('path', '').startswith('/bin/')
            and l['object'].startswith('program')], locks
PY

for n in 1 2 3; do check "unmount on node $n" umount_on $n; done
fsck_clean "after the programs"
finish
