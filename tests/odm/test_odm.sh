#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# libodm on a real CFS mount: the API tests (tests/odm/odm_api.c, criterion, as TAP), two
# instances of odmload at once with the profiles odmstat must show, odmstat's bad inputs.
. "$(dirname "${BASH_SOURCE[0]}")/../cfs/lib.sh"
API=$(dirname "$BIN")/tests/odm/odm_api
LIB=$(dirname "$BIN")/lib/libodm.so
export ODM_TEST_DB="IT$$"
S=$(($$ % 10000)) # instance names short enough for 15-character process names
odm_cleanup() {
	rm -f /dev/shm/odm."$ODM_TEST_DB".* /dev/shm/odm.OLTP$$.* /dev/shm/odm.DSS$$.* \
		/dev/shm/odm.NB$$.* /dev/shm/odm.RT$$.*
	cfs_cleanup
}
trap odm_cleanup EXIT

make_volume odm 2 1024
"$BIN/mkfs.cfs" odm >/dev/null
mount_cfs odm "$T/mnt"
mkdir -p "$T/mnt/api" "$T/mnt/load"

# The API tests print TAP lines ("ok N - ..."), counted like ours.
ODM_TEST_DIR=$T/mnt/api timeout 600 "$API" --jobs 1 --tap=- 2>"$T/api.err" |
	sed -n "s/^\(not ok\|ok\) \([0-9]* \)\{0,1\}- /\1 - odm_api: /p"
[ "${PIPESTATUS[0]}" -eq 0 ] || { not_ok "odm_api exit status"; tail -40 "$T/api.err"; }

# Two instances at once: OLTP (steady sync single-block reads, async writes) and DSS (large
# async reads, bursts of async writes).
"$BIN/odmload" --lib "$LIB" --dir "$T/mnt/load" --db OLTP$$ --instance OL$S --profile oltp \
	--seconds 6 --file-mib 32 --seed 1 >"$T/oltp.out" 2>&1 &
p1=$!
"$BIN/odmload" --lib "$LIB" --dir "$T/mnt/load" --db DSS$$ --instance DS$S --profile scan \
	--seconds 6 --file-mib 32 --seed 2 >"$T/dss.out" 2>&1 &
p2=$!
"$BIN/odmstat" -i 0.5 -c 5 --plot "$T/odm.svg" >/dev/null 2>"$T/plot.err" &
p3=$!
# lists_both: odmstat -l lists the Oracle-named processes of both instances.  Asked until it
# does while the loads run (their processes may start late on a loaded machine).
lists_both() {
	"$BIN/odmstat" -l --json >"$T/list.json" && python3 - "$T/list.json" <<PY
import json, sys
procs = json.load(open(sys.argv[1]))
got = {(p["instance"], p["ptype"]) for p in procs}
want = {("OL$S", "foreground"), ("OL$S", "lgwr"), ("OL$S", "dbwr"), ("DS$S", "pq"), ("DS$S", "dbwr")}
assert want <= got, (want - got, procs)
assert any(p["name"] == "ora_lgwr_OL$S" for p in procs), procs
PY
}
check_soon 60 "odmstat -l lists the Oracle-named processes of both instances" lists_both
wait $p1 && ok "odmload oltp ran" || not_ok "odmload oltp ran: $(tail -3 "$T/oltp.out")"
wait $p2 && ok "odmload scan ran" || not_ok "odmload scan ran: $(tail -3 "$T/dss.out")"
"$BIN/odmstat" --by ptype --instance OL$S --json >"$T/oltp.json"
"$BIN/odmstat" --by ptype --instance DS$S --json >"$T/dss.json"
check "odmstat shows OLTP: sync single-block reads, async writes, sync redo" python3 - "$T/oltp.json" <<'PY'
import json, sys
rows = {r["key"]: r for r in json.load(open(sys.argv[1]))["rows"]}
fg, dbw, lg = rows["foreground"], rows["dbwr"], rows["lgwr"]
assert fg["sync"]["reads"] > 100 and fg["async"]["reads"] == 0 and fg["sync"]["writes"] == 0, fg
assert fg["sync"]["read_bytes"] == 8192 * fg["sync"]["reads"], fg       # single blocks
assert dbw["async"]["writes"] > 0 and dbw["sync"]["writes"] == 0, dbw
assert lg["sync"]["writes"] > 0 and lg["async"]["writes"] == 0, lg
assert "pq" not in rows, rows
PY
check "odmstat shows DSS: large async reads, async write bursts, no sync I/O" python3 - "$T/dss.json" <<'PY'
import json, sys
rows = {r["key"]: r for r in json.load(open(sys.argv[1]))["rows"]}
pq, dbw = rows["pq"], rows["dbwr"]
assert pq["async"]["reads"] > 10 and pq["sync"]["reads"] == 0, pq
assert pq["async"]["read_bytes"] == (1 << 20) * pq["async"]["reads"], pq   # 1 MiB reads
assert dbw["async"]["writes"] >= 256 and dbw["sync"]["writes"] == 0, dbw  # bursts of 256
assert "foreground" not in rows and "lgwr" not in rows, rows
PY
check "odmstat --by file names the datafiles" grep -q "OL${S}_data01.dbf" \
	<("$BIN/odmstat" --by file --instance OL$S)
check "odmstat --by database sums both" python3 -c "
import json, sys
rows = json.load(sys.stdin)['rows']
assert {'OLTP$$', 'DSS$$'} <= {r['key'] for r in rows}, rows" < <("$BIN/odmstat" --by database --json)
check "odmstat -i 0.2 -c 2: a cumulative report, then an interval" python3 -c "
import json, sys
reps = [json.loads(l) for l in sys.stdin]
assert len(reps) == 2 and reps[0]['cumulative'] and not reps[1]['cumulative'], reps
assert all(r['sync']['reads'] == 0 for r in reps[1]['rows']), reps[1]   # nothing runs now" \
	< <("$BIN/odmstat" -i 0.2 -c 2 --instance OL$S --json)

"$BIN/odmstat" --json --instance OL$S >"$T/ol.json"
check "odmstat --prometheus: valid text format, the same counts as --json, histograms whole" \
	python3 - "$BIN/odmstat" OL$S "$T/ol.json" "$T/ol.prom" <<'PY'
import json, re, subprocess, sys
odmstat, inst, js, path = sys.argv[1:]
text = subprocess.run([odmstat, '--prometheus', '--instance', inst], check=True,
                      capture_output=True, text=True).stdout
subprocess.run([odmstat, f'--prometheus={path}', '--instance', inst], check=True)
assert open(path).read().count('# TYPE') == text.count('# TYPE') == 4
sample = re.compile(r'^([a-z_]+)\{((?:[a-z_]+="[^"\\]*",?)+)\} ([0-9.e+-]+)$')
ops, buckets, counts = {}, {}, {}
for line in text.splitlines():
    if line.startswith('#'):
        assert re.match(r'^# (HELP|TYPE) odm_[a-z_]+ ', line), line
        continue
    m = sample.match(line)
    assert m, line
    name, labels, value = m[1], dict(re.findall(r'([a-z_]+)="([^"]*)"', m[2])), float(m[3])
    assert labels['instance'] == inst, labels
    if name == 'odm_io_operations_total':
        ops[labels['mode']] = ops.get(labels['mode'], 0) + value
    elif name == 'odm_io_latency_seconds_bucket':
        key = (labels['ptype'], labels['mode'])
        assert value >= buckets.get(key, 0), line  # cumulative
        buckets[key] = value
    elif name == 'odm_io_latency_seconds_count':
        counts[labels['mode']] = counts.get(labels['mode'], 0) + value
row = json.load(open(js))['rows'][0]
for mode in ('sync', 'async'):
    want = row[mode]['reads'] + row[mode]['writes']
    assert ops.get(mode, 0) == want == counts.get(mode, 0), (mode, ops, counts, want)
assert sum(ops.values()) > 0
PY
expect 2 "own labels" "odmstat: --prometheus with --json" -- "$BIN/odmstat" --prometheus --json
check "odmstat --plot ran" wait $p3
check "odmstat --plot: IOPS, MB/s and p99 panels, a line per instance over 4 intervals" \
	python3 - "$T/odm.svg" OLTP$$/OL$S DSS$$/DS$S <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {'s': 'http://www.w3.org/2000/svg'}
svg = ET.parse(sys.argv[1]).getroot()
w, h = float(svg.get('width')), float(svg.get('height'))
panels = svg.findall('s:g', ns)
assert [p.find('s:text', ns).text for p in panels] == \
    ['IOPS (reads and writes)', 'MB/s', 'p99 latency (ms)'], panels
for p in panels:
    lines = {l.find('s:title', ns).text: l.get('points').split() for l in p.findall('s:polyline', ns)}
    for inst in sys.argv[2:]:
        assert len(lines[inst]) == 4, (inst, lines)
        for x, y in (map(float, pt.split(',')) for pt in lines[inst]):
            assert 0 <= x <= w and 0 <= y <= h, (x, y)
    assert any(float(pt.split(',')[1]) < float(p.find('s:rect', ns).get('y')) +
               float(p.find('s:rect', ns).get('height')) for pt in lines[sys.argv[2]]), 'flat at 0'
PY
expect 2 "give -i SEC" "odmstat: --plot without -i" -- "$BIN/odmstat" --plot "$T/x.svg"
expect 2 "interval" "odmstat: bad interval" -- "$BIN/odmstat" -i 0
expect 2 "one of instance" "odmstat: bad --by" -- "$BIN/odmstat" --by disk
expect 2 "needs -i" "odmstat: -c without -i" -- "$BIN/odmstat" -c 3
expect 1 "no instance NOPE$$" "odmstat: unknown instance" -- "$BIN/odmstat" --instance NOPE$$
expect 1 "not on a CFS mount" "odmload: not on CFS" -- "$BIN/odmload" --lib "$LIB" --dir "$T"
expect 2 "oltp or scan" "odmload: bad profile" -- "$BIN/odmload" --dir "$T" --profile x
check "odmstat and odmload have --help" sh -c "'$BIN/odmstat' --help && '$BIN/odmload' --help"

# A process with asynchronous I/O in flight that it has not reaped keeps asking cfsd for a
# map: a grow revokes every map first, which waits for that I/O, while the process's request
# waits for the revoke.  libodm reaps what completed while it waits for an answer, so the
# grow goes through (before, the revoke gave up after 10 s and the grow failed).
RACE=$(dirname "$BIN")/tests/odm/odm_race
"$RACE" create "$T/mnt/api/unreaped.dbf" 4 && "$RACE" create "$T/mnt/api/other.dbf" 4 ||
	not_ok "odm_race create"
"$RACE" unreaped "$T/mnt/api/unreaped.dbf" "$T/mnt/api/other.dbf" "$T/unreaped.stop" \
	>"$T/unreaped.out" 2>&1 &
unreaped=$!
check_soon 60 "an ODM process has a write out that it does not reap" grep -q unreaped "$T/unreaped.out"
truncate -s 1024M "$T/odm.lun2"
check "cvm grow by a LUN" "$BIN/cvm" grow odm "$T/odm.lun2"
expect 0 "grown by" "cfs grow while that process asks cfsd for maps, its write unreaped" -- \
	timeout 120 "$BIN/cfs" grow "$T/mnt"
touch "$T/unreaped.stop"
wait $unreaped && ok "the process then reaps its write: $(tail -1 "$T/unreaped.out")" ||
	not_ok "the unreaped process: $(tail -3 "$T/unreaped.out")"

# A revoke that reaches a process between cfsd's answer to its first request for a file's
# map and its use of that map: the process did not know the file's inode yet, so it
# acknowledged at once; the map it then installs is void (a restripe's revoke before, then
# a stale volume handle for ever).  ODM_TEST_PAUSE_INSTALL holds the process there (hold.N
# before its Nth map); the grow revokes every map; let go, it must ask again (hold.2).
"$RACE" create "$T/mnt/api/late.dbf" 4 || not_ok "odm_race create late.dbf"
ODM_TEST_PAUSE_INSTALL=$T/hold "$RACE" writer "$T/mnt/api/late.dbf" >"$T/late.out" 2>&1 &
late=$!
check_soon 60 "an ODM process holds cfsd's first map of a file before using it" test -e "$T/hold.1"
truncate -s 1024M "$T/odm.lun3"
check "cvm grow by another LUN" "$BIN/cvm" grow odm "$T/odm.lun3"
expect 0 "grown by" "cfs grow meanwhile (a revoke of every map)" -- timeout 120 "$BIN/cfs" grow "$T/mnt"
touch "$T/hold"
check_soon 60 "let go, the process writes its file" grep -q writing "$T/late.out"
check "the process asked for the map again: the revoke voided the one it held" test -e "$T/hold.2"
kill "$late"
wait "$late" 2>/dev/null

# Database users are not root.  Without odm_group the control socket is root's; with it the
# group reaches libodm, within its file permissions, and nothing else.  Its members need the
# LUNs too (udev rules do that for real disks).
chmod o+x "$T"
mkdir -p "$T/mnt/nobody" "$T/mnt/rootfiles"
chown nobody:nogroup "$T/mnt/nobody"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
odmload_as_nobody() { # DIR [DB INSTANCE]: a 1-second odmload as nobody
	as_nobody "$BIN/odmload" --lib "$LIB" --dir "$1" --db "${2:-NB$$}" --instance "${3:-NB$S}" \
		--seconds 1 --file-mib 4 --procs 1
}
expect 1 "Permission denied" "ODM: without odm_group a non-root client is refused" -- \
	odmload_as_nobody "$T/mnt/nobody"
"$BIN/odmload" --lib "$LIB" --dir "$T/mnt/rootfiles" --db RT$$ --instance RT$S --seconds 1 \
	--file-mib 4 --procs 1 >/dev/null 2>&1 || not_ok "ODM: root's odmload in rootfiles"
chmod 777 "$T/mnt/rootfiles" # nobody may search and write it, not open root's 0640 files
rm -f /dev/shm/odm.RT$$.* # root's instance statistics: the same instance name as nobody next
umount_cfs "$T/mnt"
expect 2 "odm_group=no-such-group$$: no such group" "mount: odm_group naming no group is refused" -- \
	"$BIN/cfs" mount odm "$T/mnt" -o "odm_group=no-such-group$$"
mount_cfs odm "$T/mnt" odm_group=nogroup || not_ok "mount with odm_group=nogroup: $(tail -3 "$T/odm.log")"
chgrp nogroup "$T"/odm.lun* && chmod 660 "$T"/odm.lun*
check "ODM: with odm_group a member creates, writes and reads its own files" odmload_as_nobody "$T/mnt/nobody"
check "ODM: the member's files are its own" bash -c \
	'[ "$(stat -c %U:%G "$1"/*.dbf | sort -u)" = nobody:nogroup ]' _ "$T/mnt/nobody"
expect 1 "Permission denied" "ODM: a member cannot open root's 0640 datafiles" -- \
	odmload_as_nobody "$T/mnt/rootfiles" RT$$ RT$S
expect 1 "Permission denied" "ODM: a member cannot create files in root's 0755 directory" -- \
	odmload_as_nobody "$T/mnt"
expect 1 "only root may do this" "cfs grow by a member of odm_group is refused" -- \
	as_nobody "$BIN/cfs" grow "$T/mnt"
expect 1 "only root may do this" "cfs locks by a member of odm_group is refused" -- \
	as_nobody "$BIN/cfs" locks "$T/mnt"
check "cfs status by a member of odm_group works" as_nobody "$BIN/cfs" status "$T/mnt"
check "odmstat --cluster by a member of odm_group works (this node's instances)" \
	as_nobody "$BIN/odmstat" --cluster="$T/mnt"
rm -f /dev/shm/odm.NB$$.* /dev/shm/odm.RT$$.*
umount_cfs "$T/mnt"
check "fsck.cfs: clean after the ODM tests" "$BIN/fsck.cfs" -n odm
finish
