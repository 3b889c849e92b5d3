#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# randio on a file and on a CVM volume, sync and async, with its bad inputs.
. "$(dirname "$0")/../lib.sh"
R=$BIN/randio

truncate -s 64M "$T/file"
for i in 0 1; do truncate -s 64M "$T/lun$i"; done
"$BIN/cvm" --scan "$T" create v "$T/lun0" "$T/lun1" >/dev/null

expect 0 "Usage: randio" "randio --help" -- "$R" --help
expect 2 "--read-pct" "read percentage over 100" -- "$R" -r 101 "$T/file"
expect 2 "--bs" "I/O size not a multiple of 512" -- "$R" -b 1000 "$T/file"
expect 2 "--iodepth" "queue depth 0" -- "$R" -q 0 "$T/file"
expect 2 "--pattern" "unknown pattern" -- "$R" -p zigzag "$T/file"
expect 2 "exactly one TARGET" "no target" -- "$R"
expect 1 "No such file" "missing target" -- "$R" "$T/none"
expect 1 "no volume 'nov'" "unknown volume" -- "$R" --scan "$T" vol:nov
expect 1 "is a LUN of a CVM volume" "writes to a labelled LUN are refused" -- "$R" -N 10 "$T/lun0"

check_json() { # what json-text
	if python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["ios"] == r["reads"] + r["writes"] and r["ios"] > 0, r
assert r["iops"] > 0 and r["latency_us"]["p50"] > 0 and r["latency_us"]["p99"] >= r["latency_us"]["p50"], r
assert r["latency_us"]["max"] >= r["latency_us"]["p99"] * 0.97, r
' "$2"; then ok "$1"; else not_ok "$1: $2"; fi
}
check_json "sync on a file" "$("$R" -N 500 --json --quiet "$T/file")"
check_json "async on a file, 2 streams" "$("$R" -N 500 -q 8 -n 2 --json --quiet "$T/file")"
check_json "sync on a volume" "$("$R" --scan "$T" -N 500 --json --quiet vol:v)"
check_json "async on a volume, 64k I/O" "$("$R" --scan "$T" -N 300 -q 16 -b 64k --json --quiet vol:v)"
check_json "sequential on a volume" "$("$R" --scan "$T" -N 300 -p seq -b 1M -r 0 --json --quiet vol:v)"
out=$("$R" --scan "$T" -N 1000 -r 100 --json --quiet vol:v)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["writes"]==0 and r["ios"]==1000' "$out" \
	&& ok "read-only run does only reads, exactly -N of them" || not_ok "read-only run: $out"
expect 0 "IOPS" "text output" -- "$R" --scan "$T" -t 1.5 vol:v
finish
