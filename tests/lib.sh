# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by the integration scripts: a unique temp dir removed on exit, and TAP-style checks
# ("ok - ..." / "not ok - ...", counted by tests/run.sh).
set -u
BIN=${BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
T=$(mktemp -d "${TMPDIR:-/var/tmp}/cfs-it.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
# Sanitizer reports unsymbolized, fast (finish names the frames): see symbolize.sh.
export ASAN_OPTIONS=${ASAN_OPTIONS:-symbolize=0}

# A check's line ends with the seconds since the script started: where a slow or hung run
# spent its time shows in CI's output.  TAP_FD is the script's own output, for lines written
# from inside a redirected command.
exec {TAP_FD}>&1
ok() { echo "ok - $* [${SECONDS}s]"; }
not_ok() { echo "not ok - $* [${SECONDS}s]"; FAILS=$((FAILS + 1)); }

# expect CODE NEEDLE DESCRIPTION -- CMD...: exit status CODE and NEEDLE in stdout+stderr.
expect() {
	local code=$1 needle=$2 what=$3
	shift 4
	local out rc
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$code" ]; then
		not_ok "$what: exit $rc, expected $code; output: $out"
	elif [ -n "$needle" ] && ! grep -qF -- "$needle" <<<"$out"; then
		not_ok "$what: output lacks '$needle': $out"
	else
		ok "$what"
	fi
}

# wait_until SECONDS CMD...: CMD run every 0.1 s until it succeeds (0), or 1 after SECONDS.
# For checks that wait for a condition: the bound is generous, since a loaded or slow machine
# may take many times longer than this one, and it costs nothing when the condition comes.
wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# ready_for_sigint PID: PID has its own SIGINT handler in place, or has ended (a background
# job of a script starts with SIGINT ignored: a Ctrl-C sent before its handler is lost).
ready_for_sigint() {
	local mask
	mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	[ -z "$mask" ] || (((0x$mask >> 1) & 1))
}
# gone PID: the process has ended (for wait_until).
gone() { ! kill -0 "$1" 2>/dev/null; }
# check_soon SECONDS WHAT CMD...: ok once CMD succeeds, not_ok with its output if it still
# fails after SECONDS.
# check DESCRIPTION CMD...: ok if CMD succeeds, not_ok with the start of its output if not.
check() {
	local what=$1
	shift
	if "$@" >"$T/check.out" 2>&1; then ok "$what"; else not_ok "$what: $(head -c 600 "$T/check.out")"; fi
}
check_soon() {
	local secs=$1 what=$2
	shift 2
	if wait_until "$secs" "$@"; then ok "$what"
	else "$@" >"$T/check.out" 2>&1; not_ok "$what (still not after $secs s): $(head -c 600 "$T/check.out")"; fi
}

# fingerprint: a hash of every LUN file in $T (lunN, or VOLUME.lunN of make_volume); with none
# there, a different word each time, so that a comparison of two cannot pass by accident.
fingerprint() {
	local luns=("$T"/*lun[0-9]*)
	[ -e "${luns[0]}" ] || { echo "fingerprint: no LUN files in $T" >&2; echo "none-$RANDOM$RANDOM"; return 1; }
	sha256sum "${luns[@]}" | sha256sum
}

# finish: fails the script if a daemon's log ($T/*.log: a daemon's stderr is its log) holds a
# sanitizer report, which an ASan build's memory error or leak leaves there and nothing else
# would show.
finish() {
	local san
	san=$(grep -h -A60 "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$T"/*.log 2>/dev/null |
		"$(dirname "${BASH_SOURCE[0]}")/symbolize.sh")
	[ -z "$san" ] || not_ok "a daemon hit a sanitizer error: $(head -c 8000 <<<"$san")"
	# A failed check on a cluster: what the lock managers said (quorum, evictions) tells why
	# a call failed with EIO, and the logs go with the scratch directory.
	[ "$FAILS" -eq 0 ] || grep -h "lock manager: \|FENCED" "$T"/*.log 2>/dev/null | head -20 | sed 's/^/# /'
	[ "$FAILS" -eq 0 ]
	exit $?
}
