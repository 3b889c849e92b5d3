#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# libodm at a database node's scale, on one node: 1,000 processes at once (50 instances of 20,
# as odmload starts them: dbw0 and lgwr, then the foregrounds), every one identifying, reading
# and writing its instance's files, all listed by odmstat; cfsd serves them without a thread
# per client.  Then fs.aio-max-nr set low on purpose: a process that cannot get an AIO context
# says so in one line naming the setting, writes nothing, and the setting is put back.
# (Only asynchronous I/O takes an AIO context: the foregrounds' and lgwr's synchronous calls
# are preads and pwrites.)
# Changes a machine setting, so tests/run.sh runs it alone.
. "$(dirname "${BASH_SOURCE[0]}")/../cfs/lib.sh"
LIB=$(dirname "$BIN")/lib/libodm.so
DB="SC$$"
INSTANCES=${ODM_SCALE_INSTANCES:-50}
FGS=${ODM_SCALE_FGS:-17} # + dbw0, lgwr and the instance's own process: 20 each
PER=$((FGS + 3))
AIO_MAX=$(cat /proc/sys/fs/aio-max-nr)
scale_cleanup() {
	echo "$AIO_MAX" >/proc/sys/fs/aio-max-nr
	[ -n "${LOAD:-}" ] && kill "$LOAD" 2>/dev/null
	pkill -f "odmload .*--db $DB" 2>/dev/null
	rm -f /dev/shm/odm."$DB"*
	cfs_cleanup
}
trap scale_cleanup EXIT

make_volume sc 2 1024
"$BIN/mkfs.cfs" sc >/dev/null 2>&1
mount_cfs sc "$T/mnt" dboptimized
mkdir -p "$T/mnt/db"

# Every process runs until the gate file appears: the checks below see all of them at once
# however long the machine takes to start 1,000 processes.
"$BIN/odmload" --lib "$LIB" --dir "$T/mnt/db" --db "$DB" --instance S --instances "$INSTANCES" \
	--procs "$FGS" --files 2 --file-mib 2 --redo-mib 2 --think-ms 200 --until "$T/gate" \
	>"$T/load.out" 2>&1 &
LOAD=$!
all_listed() {
	"$BIN/odmstat" -l --json >"$T/list.json" && python3 - "$T/list.json" "$DB" "$INSTANCES" "$PER" <<'PY'
import collections, json, sys
procs, db, n, per = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
by = collections.Counter(p["instance"] for p in procs if p["database"].startswith(db))
assert len(by) == n and set(by.values()) == {per}, (len(by), sorted(by.items())[:5])
PY
}
check_soon 600 "$((INSTANCES * PER)) libodm processes ($INSTANCES instances of $PER) listed by odmstat -l at once" all_listed
cfsd=$(pgrep -f "^cfsd .*$T" | head -1)
threads=$(ls "/proc/$cfsd/task" | wc -l)
echo "# while $((INSTANCES * PER)) processes run: fs.aio-nr $(cat /proc/sys/fs/aio-nr) of $AIO_MAX," \
	"cfsd $threads threads, $(awk '/VmRSS/ { print $2 " kB" }' "/proc/$cfsd/status")"
what="cfsd serves $((INSTANCES * PER)) clients with $threads threads (no thread per client)"
[ "$threads" -lt 200 ] && ok "$what" || not_ok "$what"
touch "$T/gate"
check "every process of every instance ran without an error" wait "$LOAD"
check "odmload reports all $INSTANCES instances" grep -q "^odmload: $INSTANCES instances, 0 failed" "$T/load.out"
check "odmstat counts every instance's reads, async writes and redo writes" python3 - "$DB" "$INSTANCES" "$FGS" <<PY
import json, subprocess, sys
db, n, fgs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(1, n + 1):
    out = subprocess.run(["$BIN/odmstat", "--by", "ptype", "--instance", f"S{i}", "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = {r["key"]: r for r in json.loads(out)["rows"]}
    fg, dbw, lg = rows["foreground"], rows["dbwr"], rows["lgwr"]
    assert fg["sync"]["reads"] >= fgs, (i, fg)       # at least one read by each foreground
    assert dbw["async"]["writes"] >= 16, (i, dbw)    # at least one batch
    assert lg["sync"]["writes"] >= 1, (i, lg)
PY

# No AIO context left: the machine's limit just above what is in use now; the scan profile's
# processes (query slaves, dbw0) do only asynchronous I/O.
sum_files() { cat "$T"/mnt/db/S1_* | sha256sum; }
before=$(sum_files)
echo $(($(cat /proc/sys/fs/aio-nr) + 4)) >/proc/sys/fs/aio-max-nr
"$BIN/odmload" --lib "$LIB" --dir "$T/mnt/db" --db "${DB}1" --instance S1 --procs 1 --files 2 \
	--file-mib 2 --redo-mib 2 --seconds 1 --profile scan >"$T/low.out" 2>&1
rc=$?
echo "$AIO_MAX" >/proc/sys/fs/aio-max-nr
what="fs.aio-max-nr used up: the load fails (exit $rc)"
[ "$rc" -ne 0 ] && ok "$what" || not_ok "$what"
check "the error names fs.aio-max-nr and how to raise it" grep -q "fs.aio-max-nr.*sysctl -w fs.aio-max-nr=" "$T/low.out"
check "no libodm line ends with a colon" python3 -c "
import sys
bad = [l for l in open('$T/low.out') if l.startswith('libodm') and l.rstrip().endswith(':')]
assert not bad, bad"
check "nothing was written to the instance's files" test "$(sum_files)" = "$before"
cat "$T/low.out" | sed "s/^/# /"
check "fs.aio-max-nr is back to $AIO_MAX" test "$(cat /proc/sys/fs/aio-max-nr)" = "$AIO_MAX"
"$BIN/cfs" umount "$T/mnt"
check "fsck.cfs: clean after the scale run" "$BIN/fsck.cfs" -n sc
finish
