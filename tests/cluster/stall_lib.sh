# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by the stall tests (test_cfs_stall.sh, test_cfs_stall_random.sh), sourced after
# cfs_lib.sh: freezing processes (SIGSTOP, let go by the EXIT trap too), counting a slot's
# recoveries in the survivors' logs, and a manifest the survivors write after a recovery.
freeze() { echo "$*" >>"$T/frozen"; kill -STOP "$@" 2>/dev/null; } # a process may just have ended
thaw() { kill -CONT $(cat "$T/frozen") 2>/dev/null; rm -f "$T/frozen"; }
log_lines() { wc -l <"$T/cfsd$1.log"; }
# recoveries SLOT NODE...: how many times those nodes logged SLOT recovered.
recoveries() {
	local slot=$1
	shift
	for n in "$@"; do grep -c "recovery: slot $slot done" "$T/cfsd$n.log"; done | awk '{ s += $1 } END { print s + 0 }'
}
more_recoveries() { [ "$(recoveries "$@")" -gt "$done_before" ]; } # since done_before
evicted_on() { [ "$(status_of "$1" evicted)" = True ]; }
# manifest ROUND NODE: NODE empties the frozen node's directory and writes 200 files with a
# manifest of their checksums ($T/manifest.ROUND, outside the filesystem), fsync'd.
manifest() {
	local round=$1 n=$2
	on "$n" sh -c "rm -rf '$(M "$n")/d$round' && mkdir '$(M "$n")/m$round' && cd '$(M "$n")/m$round' &&
		for i in \$(seq 200); do head -c \$((i * 97)) /dev/urandom >f\$i; done && sync -f . &&
		sha256sum f* >'$T/manifest.$round'"
}
reads_back() { on "$2" sh -c "cd '$(M "$2")/m$1' && sha256sum --quiet -c '$T/manifest.$1'"; }

