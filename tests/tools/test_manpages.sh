#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every command has a manual page that groff formats without a warning, and every page says
# what it names in its NAME line; every command answers --help and --version.
. "$(dirname "$0")/../lib.sh"
MAN=$(cd "$(dirname "$0")/../../man" && pwd)
command -v groff >/dev/null || { echo "skip - manual pages: no groff"; exit 0; }
# cfsd, mount.cfs and umount.cfs are in cfs(8); odmload and the others have pages of their own.
page_of() {
	case $1 in
	cfsd | mount.cfs | umount.cfs) echo "$MAN/cfs.8" ;;
	*) ls "$MAN/$1".[158] 2>/dev/null | head -1 ;;
	esac
}
for tool in "$BIN"/*; do
	t=$(basename "$tool")
	page=$(page_of "$t")
	if [ -z "$page" ]; then
		not_ok "$t has no manual page in man/"
		continue
	fi
	check_name() { sed -n '/^\.SH NAME/,/^\.SH/p' "$page" | grep -q -- "$(sed 's/-/\\\\-/g' <<<"$t")"; }
	check_name && ok "$t: $(basename "$page") names it" || not_ok "$t: the NAME section of $(basename "$page") does not name it"
	[ "$t" = cfsd ] && continue # the daemon is started by cfs mount; cfs(8) documents it
	"$tool" --help >"$T/help" 2>&1 && grep -qi "usage" "$T/help" && ok "$t --help" || not_ok "$t --help: $(head -3 "$T/help")"
	"$tool" --version >"$T/version" 2>&1 && grep -q "[0-9]" "$T/version" && ok "$t --version" ||
		not_ok "$t --version: $(head -3 "$T/version")"
done
for page in "$MAN"/*.[1358]; do
	out=$(LC_ALL=C groff -ww -man -z "$page" 2>&1)
	[ -z "$out" ] && ok "$(basename "$page") formats without a warning" || not_ok "$(basename "$page"): $out"
done
finish
