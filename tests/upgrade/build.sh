#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The other builds the upgrade tests run beside this tree's (make check-build runs this):
#
#   tests/upgrade/build.sh previous DIR   the previous release (tests/upgrade/previous-release:
#                                         its tag, or its commit where the clone has no tags),
#                                         taken from git with git archive, built in DIR/build
#   tests/upgrade/build.sh major2 DIR     this tree with lock protocol major version 2: a node
#                                         that must be refused, built in DIR/build
#
# The previous release is built once (DIR/stamp names the commit); major2 as make sees fit.  Fails (exit 1) with a message if
# the previous release is not in this clone's history.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:?previous or major2} dir=${2:?directory}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case $what in
previous)
	read -r tag commit <tests/upgrade/previous-release
	ref=$commit
	git rev-parse -q --verify "refs/tags/$tag^{commit}" >/dev/null && ref=$tag
	id=$(git rev-parse -q --verify "$ref^{commit}") || {
		echo "tests/upgrade/build.sh: release $tag ($commit) is not in this clone's history: fetch it (git fetch --tags, or a full clone)" >&2
		exit 1
	}
	[ "$(cat "$dir/stamp" 2>/dev/null)" = "$id" ] && [ -x "$dir/build/bin/cfsd" ] && exit 0
	rm -rf "$dir/src" "$dir/build" "$dir/stamp"
	mkdir -p "$dir/src"
	git archive --format=tar "$id" | tar -x -C "$dir/src"
	# Some of that release's link rules take bin/ for granted (make -j may run them first).
	mkdir -p "$dir/build/bin"
	make -C "$dir/src" --no-print-directory -j"$(nproc)" BUILD="$dir/build" all >"$dir/make.log" 2>&1 || {
		tail -30 "$dir/make.log" >&2
		exit 1
	}
	echo "$id" >"$dir/stamp"
	;;
major2)
	mkdir -p "$dir/build/bin"
	# make knows what changed; the directory is this build's alone, so its CFLAGS never do.
	make --no-print-directory -j"$(nproc)" BUILD="$dir/build" CFLAGS=-DCFSLOCK_PROTO_MAJOR=2 \
		"$dir/build/bin/cfs" "$dir/build/bin/cfsd" >"$dir/make.log" 2>&1 || {
		tail -30 "$dir/make.log" >&2
		exit 1
	}
	;;
*)
	sed -n '3,13p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
