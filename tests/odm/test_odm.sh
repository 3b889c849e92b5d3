#!/usr/bin/env bash
# libodm on a real CFS mount: the API tests (tests/odm/odm_api.c, criterion, as TAP), two
# instances of odmload at once with the profiles odmstat must show, odmstat's bad inputs.
. "$(dirname "${BASH_SOURCE[0]}")/../cfs/lib.sh"
API=$(dirname "$BIN")/tests/odm/odm_api
LIB=$(dirname "$BIN")/lib/libodm.so
export ODM_TEST_DB="IT$$"
S=$(($$ % 10000)) # instance names short enough for 15-character process names
odm_cleanup() {
	rm -f /dev/shm/odm."$ODM_TEST_DB".* /dev/shm/odm.OLTP$$.* /dev/shm/odm.DSS$$.*
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
sleep 3
"$BIN/odmstat" -l --json >"$T/list.json"
check "odmload oltp ran" wait $p1
check "odmload scan ran" wait $p2
check "odmstat -l lists the Oracle-named processes of both instances" python3 - "$T/list.json" <<PY
import json, sys
procs = json.load(open(sys.argv[1]))
got = {(p["instance"], p["ptype"]) for p in procs}
want = {("OL$S", "foreground"), ("OL$S", "lgwr"), ("OL$S", "dbwr"), ("DS$S", "pq"), ("DS$S", "dbwr")}
assert want <= got, (want - got, procs)
assert any(p["name"] == "ora_lgwr_OL$S" for p in procs), procs
PY
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

expect 2 "interval" "odmstat: bad interval" -- "$BIN/odmstat" -i 0
expect 2 "one of instance" "odmstat: bad --by" -- "$BIN/odmstat" --by disk
expect 2 "needs -i" "odmstat: -c without -i" -- "$BIN/odmstat" -c 3
expect 1 "no instance NOPE$$" "odmstat: unknown instance" -- "$BIN/odmstat" --instance NOPE$$
expect 1 "not on a CFS mount" "odmload: not on CFS" -- "$BIN/odmload" --lib "$LIB" --dir "$T"
expect 2 "oltp or scan" "odmload: bad profile" -- "$BIN/odmload" --dir "$T" --profile x
check "odmstat and odmload have --help" sh -c "'$BIN/odmstat' --help && '$BIN/odmload' --help"

umount_cfs "$T/mnt"
check "fsck.cfs: clean after the ODM tests" "$BIN/fsck.cfs" -n odm
finish
