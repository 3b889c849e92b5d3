#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# symbolize.sh: a sanitizer report on stdin, its frames named on stdout.  The test scripts'
# daemons report with ASAN_OPTIONS=symbolize=0 (tests/lib.sh): a daemon a test kills moments
# after its error (kill -9 of a node) would die while the sanitizer symbolizes in-process,
# with only the report's first lines written.  A raw frame "#3 0x55d0... (/path/bin+0x1c1c9)"
# becomes "#3 0x55d0... in function file.c:123 (/path/bin+0x1c1c9)"; other lines pass as
# they are.
set -u
frame='^( *#[0-9]+ 0x[0-9a-f]+) +\(([^+()]+)\+(0x[0-9a-f]+)\)$'
while IFS= read -r line; do
	if [[ $line =~ $frame ]] && [ -r "${BASH_REMATCH[2]}" ]; then
		where=$(addr2line -f -i -p -C -e "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" 2>/dev/null |
			sed 's|[^ ]*/||g' | tr '\n' ' ')
		echo "${BASH_REMATCH[1]} in ${where:-?}(${BASH_REMATCH[2]##*/}+${BASH_REMATCH[3]})"
	else
		echo "$line"
	fi
done
