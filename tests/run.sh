#!/usr/bin/env bash
# Run every test of a build directory: the criterion unit tests, then the integration scripts
# (which drive the installed-style binaries in BUILD/bin, each within SCRIPT_LIMIT seconds).
# Counts test cases, prints "N passed, N failed" last (", N skipped" for checks whose needs
# are missing), and exits non-zero if anything failed.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 1
passed=0
failed=0
skipped=0
failures=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for t in "$build"/tests/*/test_*; do
	[ -x "$t" ] || continue
	echo "== unit: $t"
	"$t" --jobs 2 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -a 'Synthesis:' "$log" | tail -1)
	p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
	f=$(sed -n 's/.*Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2/p' <<<"$line")
	p=${p:-0}
	read -r fl cr <<<"${f:-0 0}"
	passed=$((passed + p))
	failed=$((failed + fl + cr))
	if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
		failures+=("$t")
		[ $((fl + cr)) -eq 0 ] && failed=$((failed + 1))
	fi
done

# A script still running after SCRIPT_LIMIT seconds is stopped (TERM: its traps take its
# cluster and mounts down; KILL two minutes later) and counts as failed, so that one hang
# cannot spend CI's whole time limit.  The longest script takes about 8 minutes here.
SCRIPT_LIMIT=${SCRIPT_LIMIT:-1200}
for s in tests/*/test_*.sh; do
	echo "== integration: $s"
	BIN="$build/bin" timeout -k 120 "$SCRIPT_LIMIT" bash "$s" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 124 ] && echo "not ok - $s still running after $SCRIPT_LIMIT s: stopped" | tee -a "$log"
	p=$(grep -ac '^ok ' "$log")
	f=$(grep -ac '^not ok ' "$log")
	skipped=$((skipped + $(grep -ac '^skip ' "$log")))
	passed=$((passed + p))
	failed=$((failed + f))
	if [ "$rc" -ne 0 ]; then
		failures+=("$s")
		[ "$f" -eq 0 ] && failed=$((failed + 1))
	fi
done

[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
