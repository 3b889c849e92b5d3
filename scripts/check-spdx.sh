#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# check-spdx.sh [FILE...]: every source file (default: the checkout's tracked ones; FILEs are
# paths from a tree's root) names its license in an SPDX line within its first three lines,
# and the right one: what other programs load or link (libcvm, libcfslock, libcfs, libodm,
# and the protocols and release header they build from) is LGPL-2.1-or-later, the rest
# GPL-2.0-or-later (COPYING).
# Exit 1 naming each file that does not.
set -u
case ${1:-} in -h | --help) sed -n '3,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
is_source() {
	case $1 in
	*.c | *.h | *.sh | *.py | *.proto | *.[1358] | Makefile | */Makefile | debian/rules | \
		.ci/run | tools/cfs-fence) return 0 ;;
	esac
	return 1
}
license_of() {
	case $1 in
	cvm/* | dlm-client/* | cfs/* | odm/* | proto/* | release.h) echo LGPL-2.1-or-later ;;
	*) echo GPL-2.0-or-later ;;
	esac
}
if [ $# -eq 0 ]; then
	cd "$(dirname "$0")/.." || exit 2
	mapfile -t files < <(git ls-files)
else
	files=("$@")
fi
bad=0
for f in "${files[@]}"; do
	is_source "$f" || continue
	want=$(license_of "$f")
	got= l1= l2= l3=
	{ IFS= read -r l1; IFS= read -r l2; IFS= read -r l3; } <"$f"
	for l in "$l1" "$l2" "$l3"; do
		[[ $l =~ SPDX-License-Identifier:\ ([A-Za-z0-9.+-]+) ]] && { got=${BASH_REMATCH[1]}; break; }
	done
	if [ -z "$got" ]; then
		echo "$f: no SPDX-License-Identifier line in its first 3 lines: add \"SPDX-License-Identifier: $want\" in a comment at its top" >&2
		bad=1
	elif [ "$got" != "$want" ]; then
		echo "$f: SPDX-License-Identifier is $got, but files under $(dirname "$f")/ are $want (COPYING)" >&2
		bad=1
	fi
done
exit $bad
