#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# xfstests' generic tests on CFS (`make xfstests`; not part of `make check`):
#
#   tests/xfstests/run.sh [BIN]        BIN: the build's bin directory (default build/bin)
#
# XFSTESTS_DIR (needed): an xfstests tree already built (this script builds nothing and
#   fetches nothing; docs/testing.md says how to get one).
# XFSTESTS_KINDS: which mounts, of "normal dboptimized cluster" (all three by default): a
#   one-node normal mount, a one-node dboptimized mount, node 1 of a 3-node cluster whose
#   nodes 2 and 3 have the test volume mounted too.
# XFSTESTS_GROUP: the group to run (default quick); XFSTESTS_TESTS: these tests instead
#   ("generic/001 generic/002").
# XFSTESTS_LUN_MIB: the size of each of the two LUN files of a kind's test and scratch volume
#   (default 2048; sparse).
#
# xfstests runs CFS in its FUSE mode (FSTYP=fuse, FUSE_SUBTYP=.cfs): its mounts go through
# a /sbin/mount.fuse.cfs this script puts there for the run and removes after (with
# /sbin/umount.cfs where none is installed), and its "mkfs" of the scratch volume empties it.
# That mode expects a mount's type to be "fuse", where a CFS mount's is "fuse.cfs": the df
# xfstests reads types with (DF_PROG) is given a wrapper that shows it as "fuse".
# Every result is compared with tests/xfstests/expected (which lists what fails or does not
# run, and why, and what is not to be run at all: check's -E); any other result, a test
# failing or not running that should pass or one listed as failing that passes, names the
# test and makes the exit code 1.  The users the tests run commands as (fsgqa, fsgqa2,
# 123456-fsgqa) are added for the run where missing and removed after; the fs.protected_*
# sysctls some tests change are put back as they were.  Exit: 0 every result
# as expected, 1 not, 2 could not run.
set -uo pipefail
exec 3>&1 # the progress lines, while each kind's report goes to a file
HERE=$(cd "$(dirname "$0")" && pwd)
EXPECTED=$HERE/expected
KINDS=${XFSTESTS_KINDS:-normal dboptimized cluster}
GROUP=${XFSTESTS_GROUP:-quick}
TESTS=${XFSTESTS_TESTS:-}
LUN_MIB=${XFSTESTS_LUN_MIB:-2048}
MOUNT_HELPER=/sbin/mount.fuse.cfs
UMOUNT_HELPER=/sbin/umount.cfs

die() { echo "xfstests: $*" >&2; exit 2; }

BIN=${1:-$HERE/../../build/bin}
[ -x "$BIN/cfs" ] && [ -x "$BIN/mkfs.cfs" ] && [ -x "$BIN/cvm" ] ||
	die "$BIN: no cfs, mkfs.cfs and cvm there: build them first (make)"
BIN=$(cd "$BIN" && pwd)
[ "$(id -u)" -eq 0 ] || die "run as root: xfstests mounts, and runs commands as other users"
[ -c /dev/fuse ] || die "no /dev/fuse: load the fuse module (modprobe fuse)"
[ -n "${XFSTESTS_DIR:-}" ] ||
	die "set XFSTESTS_DIR to a built xfstests tree (docs/testing.md, \"xfstests\", says how to get one)"
XFSTESTS_DIR=$(cd "$XFSTESTS_DIR" 2>/dev/null && pwd) || die "XFSTESTS_DIR: no such directory"
[ -x "$XFSTESTS_DIR/check" ] && [ -x "$XFSTESTS_DIR/ltp/fsstress" ] ||
	die "$XFSTESTS_DIR: not a built xfstests tree (no check, or no ltp/fsstress: run make there)"
for kind in $KINDS; do
	case $kind in normal | dboptimized) ;; cluster)
		command -v corosync >/dev/null || die "the cluster kind needs corosync (apt-get install corosync)" ;;
	*) die "XFSTESTS_KINDS: '$kind' is none of normal, dboptimized, cluster" ;;
	esac
done
[ -e "$MOUNT_HELPER" ] &&
	die "$MOUNT_HELPER exists already (another run of this script, or an install of its own): remove it"
[ -r "$EXPECTED" ] || die "$EXPECTED: missing"

T=$(mktemp -d /var/tmp/cfs-xfstests.XXXXXX)
chmod 755 "$T" # the tests' users (fsgqa) go through it to the mounts
CLUSTER=$HERE/../cluster/cluster.sh
export CLUSTER_ID=xf$((RANDOM % 10000)) CLUSTER_STATE=$T/corosync
declare -A job
cleanup() {
	trap "" INT TERM
	local m j
	# Each kind's job is a process group of its own (set -m below): all of it goes, also what
	# an ended job left running.  KILL: xfstests' check answers TERM by waiting for its test.
	for j in "${job[@]}"; do kill -KILL -- "-$j" 2>/dev/null; done
	wait
	[ -d "$CLUSTER_STATE" ] && "$CLUSTER" down >/dev/null 2>&1
	for m in $(awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r); do
		"$BIN/cfs" umount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null
	done
	[ -s "$T/helpers" ] && xargs rm -f <"$T/helpers"
	[ -s "$T/users" ] && while read -r u; do userdel -r "$u" >/dev/null 2>&1; done <"$T/users"
	[ -s "$T/groups" ] && while read -r g; do groupdel "$g" >/dev/null 2>&1; done <"$T/groups"
	[ -s "$T/sysctls" ] && sysctl -q -p "$T/sysctls" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 2' INT TERM
# The machine-wide settings generic/597 and 598 change and put back as they found them: with
# the kinds at once, one may find another's setting and put that back.  So as they were now.
sysctl fs.protected_regular fs.protected_fifos fs.protected_hardlinks fs.protected_symlinks \
	>"$T/sysctls" 2>/dev/null

printf '#!/bin/sh\n# Made by CFS tests/xfstests/run.sh for one run (%s), removed at its end.\nexec %s "$@"\n' \
	"$T" "$BIN/cfs" >"$MOUNT_HELPER" && chmod +x "$MOUNT_HELPER" || die "cannot write $MOUNT_HELPER"
echo "$MOUNT_HELPER" >>"$T/helpers"
if [ ! -e "$UMOUNT_HELPER" ]; then
	ln -s "$BIN/cfs" "$UMOUNT_HELPER" && echo "$UMOUNT_HELPER" >>"$T/helpers"
fi
for g in fsgqa fsgqa2; do
	getent group "$g" >/dev/null || { groupadd "$g" && echo "$g" >>"$T/groups"; }
done
for u in fsgqa fsgqa2 123456-fsgqa; do
	getent passwd "$u" >/dev/null || { useradd -m -g fsgqa "$u" && echo "$u" >>"$T/users"; }
done

# expected_of TEST KIND: "fail REASON", "notrun REASON", "any REASON", "skip REASON" or
# "pass".
expected_of() {
	awk -v t="$1" -v k="$2" '
		/^[ \t]*(#|$)/ { next }
		$1 == t && ($2 == "all" || index("," $2 ",", "," k ",")) {
			r = $3; $1 = $2 = $3 = ""; sub(/^ +/, ""); print r, $0; found = 1; exit
		}
		END { if (!found) print "pass" }' "$EXPECTED"
}

# make_volumes KIND DIR NODES: volumes KIND-test and KIND-scratch of two LUN files each in
# DIR/luns (xfstests tells mounts apart by their source, cfs:VOLUME), CFS on both (on
# corosync for a cluster of NODES > 1).
make_volumes() {
	local kind=$1 dir=$2 nodes=$3 v proto=()
	[ "$nodes" -gt 1 ] && proto=(-p corosync)
	mkdir -p "$dir/luns"
	for v in "$kind-test" "$kind-scratch"; do
		truncate -s "${LUN_MIB}M" "$dir/luns/$v.0" "$dir/luns/$v.1" &&
			CVM_SCAN=$dir/luns "$BIN/cvm" create "$v" "$dir/luns/$v.0" "$dir/luns/$v.1" >/dev/null &&
			"$BIN/mkfs.cfs" "${proto[@]}" -s "$dir/luns" "$v" >>"$dir/mkfs.out" 2>&1 || return 1
	done
}

# skipped KIND: the tests the expected list has this kind not run at all.
skipped() {
	awk -v k="$1" '!/^[ \t]*(#|$)/ && $3 == "skip" &&
		($2 == "all" || index("," $2 ",", "," k ",")) { print $1 }' "$EXPECTED"
}

# run_check KIND DIR: xfstests' check with DIR's config, its output in DIR/check.out.
run_check() {
	local kind=$1 dir=$2 sel=(-g "$GROUP")
	[ -n "$TESTS" ] && read -r -a sel <<<"$TESTS"
	skipped "$kind" >"$dir/skipped"
	sel=(-E "$dir/skipped" "${sel[@]}") # check takes its options before the tests
	local cmd=(env HOST_OPTIONS="$dir/local.config" bash -c 'cd "$1" && shift && exec ./check "$@"'
		check "$XFSTESTS_DIR" "${sel[@]}")
	if [ "$kind" = cluster ]; then
		"$CLUSTER" exec 1 "${cmd[@]}"
	else
		"${cmd[@]}"
	fi >"$dir/check.out" 2>&1 </dev/null
}

# the tests of one "Ran:", "Not run:" or "Failures:" line of check's output
listed() { sed -n "s/^$1: //p" "$2" | tail -1 | tr ' ' '\n' | grep -v '^$'; }

# compare KIND DIR: each result of the run against the expected one; prints the summary.
compare() {
	local kind=$1 dir=$2 t want reason ran=0 failed=0 notrun=0 unexpected=0 got
	listed Ran "$dir/check.out" >"$dir/ran"
	listed Failures "$dir/check.out" >"$dir/failed"
	listed "Not run" "$dir/check.out" >"$dir/notrun"
	for t in $(sort -u "$dir/ran" "$dir/notrun"); do # check's "Ran:" has the not run too
		if grep -qx "$t" "$dir/failed"; then got=fail; failed=$((failed + 1))
		elif grep -qx "$t" "$dir/notrun"; then got=notrun; notrun=$((notrun + 1))
		else got=pass
		fi
		[ "$got" = notrun ] || ran=$((ran + 1))
		read -r want reason <<<"$(expected_of "$t" "$kind")"
		[ "$want" = "$got" ] || [ "$want" = any ] && continue
		unexpected=$((unexpected + 1))
		echo "  UNEXPECTED $t: $got, expected $want${reason:+ ($reason)}"
		case $got in
		fail) [ -f "$dir/results/$t.out.bad" ] &&
			diff -u "$XFSTESTS_DIR/tests/$t.out" "$dir/results/$t.out.bad" 2>/dev/null |
			sed -n '3,14s/^/      /p' ;;
		notrun) sed 's/^/      not run: /' "$dir/results/$t.notrun" 2>/dev/null ;;
		esac
	done
	echo "$kind: $((ran - failed)) passed, $failed failed, $notrun not run; $unexpected not as expected"
	[ "$unexpected" -eq 0 ]
}

# one_kind KIND: volumes, config, mounts of the other nodes, the run, the comparison.
one_kind() {
	local kind=$1 dir=$T/$1 extra="" nodes=1 n
	[ "$kind" = dboptimized ] && extra=,dboptimized
	[ "$kind" = cluster ] && nodes=3
	mkdir -p "$dir/test" "$dir/scratch" "$dir/results"
	if [ "$nodes" -gt 1 ]; then
		"$CLUSTER" up "$nodes" >/dev/null || { echo "$kind: the cluster did not come up"; return 2; }
	fi
	make_volumes "$kind" "$dir" "$nodes" || { echo "$kind: making the volumes failed"; return 2; }
	for n in $(seq 2 "$nodes"); do
		mkdir -p "$dir/test-n$n"
		"$CLUSTER" exec "$n" "$BIN/cfs" mount "$kind-test" "$dir/test-n$n" \
			-o "scan=$dir/luns,log=$dir/cfsd-n$n.log" || { echo "$kind: node $n's mount failed"; return 2; }
	done
	cat >"$dir/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.cfs
export TEST_DEV=cfs:$kind-test
export TEST_DIR=$dir/test
export SCRATCH_DEV=cfs:$kind-scratch
export SCRATCH_MNT=$dir/scratch
export TEST_FS_MOUNT_OPTS="-o scan=$dir/luns,log=$dir/cfsd-test.log$extra"
export MOUNT_OPTIONS="-o scan=$dir/luns,log=$dir/cfsd-scratch.log$extra"
export RESULT_BASE=$dir/results
export DF_PROG="$dir/df -T -P"
EOF
	printf '#!/bin/sh\n%s "$@" | sed "s/ fuse\\.cfs / fuse     /"\n' "$(type -P df)" >"$dir/df"
	chmod +x "$dir/df"
	echo "$kind: running xfstests ${TESTS:-group $GROUP} (output: $dir/check.out while it runs)" >&3
	local start=$SECONDS
	run_check "$kind" "$dir"
	if ! grep -q "^Ran: \|^Not run: " "$dir/check.out"; then
		echo "$kind: xfstests ran no test:"
		tail -20 "$dir/check.out" | sed 's/^/  /'
		return 2
	fi
	echo "$kind: $((SECONDS - start)) s"
	compare "$kind" "$dir"
}

# The kinds run at the same time, each on its own volumes and mount points (xfstests' own
# run is mostly waiting: three after another took over 5 hours on a 2-core machine); each
# one's report is printed as it ends.
finish_kind() {
	local kind=$1 m
	if [ "$kind" = cluster ]; then "$CLUSTER" down >/dev/null 2>&1; fi
	for m in $(awk -v t="$T/$kind/" 'index($2, t) == 1 { print $2 }' /proc/mounts); do
		"$BIN/cfs" umount "$m" >/dev/null 2>&1
	done
}
set -m
for kind in $KINDS; do
	(one_kind "$kind" >"$T/$kind.report" 2>&1; r=$?; finish_kind "$kind"; cat "$T/$kind.report"; exit $r) &
	job[$kind]=$!
done
rc=0
for kind in $KINDS; do
	wait "${job[$kind]}"
	r=$?
	[ "$r" -gt "$rc" ] && rc=$r
done
exit "$rc"
