#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# scripts/check-spdx.sh (make lint): the tree passes; a source file without an SPDX line, or
# naming the other license than its directory's, fails and is named; a script's line after
# its shebang and a manual page's comment count; a file that is not source is not looked at.
# scripts/check-copyright.py (make lint): debian/copyright agrees with every SPDX line; one
# that gives the libraries the GPL, or names a license it gives no text for, fails.
. "$(dirname "$0")/../lib.sh"
CHECK=$(cd "$(dirname "$0")/../../scripts" && pwd)/check-spdx.sh
spdx() { (cd "$T" && "$CHECK" "$@") >"$T/out" 2>&1; }
if command -v git >/dev/null && git -C "$(dirname "$CHECK")" rev-parse >/dev/null 2>&1; then
	if "$CHECK" >"$T/out" 2>&1; then ok "every tracked source file names its license"
	else not_ok "the tree: $(head -c 2000 "$T/out")"; fi
fi
mkdir -p "$T/cfs" "$T/tools" "$T/man"
printf '/* SPDX-License-Identifier: LGPL-2.1-or-later */\nint x;\n' >"$T/cfs/good.c"
printf '#!/bin/sh\n# SPDX-License-Identifier: GPL-2.0-or-later\ntrue\n' >"$T/tools/good.sh"
printf '.\\" SPDX-License-Identifier: GPL-2.0-or-later\n.TH X 8\n' >"$T/man/x.8"
printf 'no license here\n' >"$T/tools/notes.txt"
if spdx cfs/good.c tools/good.sh man/x.8 tools/notes.txt; then ok "good files pass (after a shebang, in a man page; a .txt is not source)"
else not_ok "good files: $(cat "$T/out")"; fi
printf '/* the file */\nint y;\n' >"$T/cfs/none.c"
if spdx cfs/good.c cfs/none.c; then not_ok "a C file without an SPDX line passes"
else ok "a C file without an SPDX line fails"; fi
check "... named, with the line to add" grep -q "^cfs/none.c: no SPDX-License-Identifier.*LGPL-2.1-or-later" "$T/out"
check "... and only it" test "$(wc -l <"$T/out")" = 1
printf '/* SPDX-License-Identifier: GPL-2.0-or-later */\nint z;\n' >"$T/cfs/wrong.c"
if spdx cfs/wrong.c; then not_ok "a library file under the GPL passes"
else ok "a library file naming GPL-2.0-or-later fails"; fi
check "... named, with its directory's license" grep -q "^cfs/wrong.c: .*is GPL-2.0-or-later.*LGPL-2.1-or-later" "$T/out"
printf '#!/bin/sh\ntrue\n# SPDX-License-Identifier: GPL-2.0-or-later\n' >"$T/tools/late.sh"
printf '#!/bin/sh\ntrue\n\n# SPDX-License-Identifier: GPL-2.0-or-later\n' >"$T/tools/later.sh"
if spdx tools/late.sh; then ok "a line within the first three counts"; else not_ok "line 3: $(cat "$T/out")"; fi
if spdx tools/later.sh; then not_ok "an SPDX line on line 4 passes"; else ok "an SPDX line on line 4 does not count"; fi
COPYRIGHT=$(dirname "$CHECK")/check-copyright.py
DEBIAN=$(dirname "$CHECK")/../debian/copyright
if [ -n "$(git -C "$(dirname "$CHECK")" ls-files 2>/dev/null | head -1)" ]; then
	check "debian/copyright says what every file's SPDX line says" "$COPYRIGHT"
	sed 's|^Files: cvm/\* dlm-client/\* cfs/\*|Files: cvm/* dlm-client/*|' "$DEBIAN" >"$T/libcfs-gpl"
	expect 1 "cfs/fs.c: its SPDX line says LGPL-2.1-or-later" "a copyright file giving libcfs the GPL fails" -- \
		"$COPYRIGHT" "$T/libcfs-gpl"
	tac "$DEBIAN" | sed '1,/^License: LGPL-2.1-or-later$/d' | tac >"$T/no-text" # its last paragraph
	expect 1 "License LGPL-2.1-or-later (Files: cvm" "one without the LGPL's text fails" -- \
		"$COPYRIGHT" "$T/no-text"
fi
finish
