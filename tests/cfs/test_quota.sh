#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Quotas as an admin uses them on one node: cfs quota set, get and report (text and --json)
# for users, groups and projects; EDQUOT for write, fallocate, create and mkdir by a user
# over a hard limit, for a user's chgrp into a full group, and for ODM's create and resize in
# a project over its limit (odm_api on a dboptimized mount); a soft limit past its grace; a
# log line when an id goes over its soft limit; every bad input of cfs quota refused with a
# message, changing nothing; cfs tune -O quota on a filled filesystem (usage counted from the
# files); fsck.cfs clean at the end.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
API=$(dirname "$BIN")/tests/odm/odm_api
export ODM_TEST_DB="QT$$"
trap 'rm -f /dev/shm/odm."$ODM_TEST_DB".*; cfs_cleanup' EXIT
M=$T/mnt
chmod 755 "$T" # the user of the checks reaches the mount
as_user() { setpriv --reuid 1000 --regid 1000 --clear-groups "$@"; }
json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

make_volume q 1 512
"$BIN/mkfs.cfs" -J 1 q >/dev/null 2>&1 || not_ok "mkfs.cfs"
mount_cfs q "$M"
mkdir "$M/home" && chown 1000:1000 "$M/home"
as_user sh -c "dd if=/dev/zero of='$M/home/old' bs=1M count=3 status=none && touch '$M/home/empty'"
expect 1 "the filesystem has no quotas: turn them on with 'cfs tune VOLUME -O quota'" \
	"cfs quota on a filesystem without the feature" -- "$BIN/cfs" quota get "$M" -u 1000
umount_cfs "$M"
"$BIN/cfs" tune q -O quota >"$T/tune.out" 2>&1 || not_ok "cfs tune -O quota: $(cat "$T/tune.out")"
check "cfs tune -O quota of a filled filesystem turns it on" grep -q "now has features: journal_v3,quota" "$T/tune.out"
check "... showing the progress of its count" grep -q "cfs tune: quota usage: allocation groups 5/5 (100%)" "$T/tune.out"
expect 0 "clean" "fsck.cfs -n after the tune" -- "$BIN/fsck.cfs" -n q
expect 1 "project quotas need project ids" "... project quotas before project ids" -- bash -c "
	'$BIN/cfs' mount q '$M' -o log=$T/q.log && '$BIN/cfs' quota get '$M' -p 5; rc=\$?; '$BIN/cfs' umount '$M'; exit \$rc"
"$BIN/cfs" tune q -O project >/dev/null 2>&1 || not_ok "cfs tune -O project"
mount_cfs q "$M"
j=$("$BIN/cfs" quota get "$M" -u 1000 --json)
check "the tune counted the files there: 3 MiB and a block, 3 inodes for user 1000 ($j)" \
	test "$(json_field "$j" used_bytes) $(json_field "$j" used_inodes)" = "3149824 3"

# Limits, and the writes they refuse.
expect 0 "" "cfs quota set -u 1000 --blocks-hard 8M --inodes-hard 4" -- "$BIN/cfs" quota set "$M" -u 1000 --blocks-hard 8M --inodes-hard 4
expect 0 '"hard_bytes": 8388608' "cfs quota get --json shows the limit" -- "$BIN/cfs" quota get "$M/home" -u 1000 --json
expect 1 "$M" "a user does not set its own limit (the control socket is root's)" -- as_user "$BIN/cfs" quota set "$M" -u 1000 --blocks-hard 1G
expect 1 "Disk quota exceeded" "fallocate over the hard limit: EDQUOT" -- as_user fallocate -l 6M "$M/home/big"
check "... and it kept no block" test "$(stat -c %b "$M/home/big")" = 0
expect 1 "Disk quota exceeded" "direct writes stop at the limit with EDQUOT" -- as_user dd if=/dev/zero of="$M/home/w" bs=1M count=8 oflag=direct status=none
j=$("$BIN/cfs" quota get "$M" -u 1000 --json)
check "usage never passes the hard limit: $(json_field "$j" used_bytes) of 8388608 bytes" test "$(json_field "$j" used_bytes)" -le 8388608
expect 1 "Disk quota exceeded" "a create past the inode limit: EDQUOT" -- as_user touch "$M/home/one_more"
expect 1 "Disk quota exceeded" "a mkdir past it: EDQUOT" -- as_user mkdir "$M/home/dir"
rm -f "$M/home/w" "$M/home/big"
# Near its limit a file is opened past the kernel's write-back cache: EDQUOT in write(2).
check "buffered writes near the limit: EDQUOT in the write that goes over" as_user /usr/bin/python3 -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
try:
    for i in range(12):
        os.write(fd, b"x" * (1 << 20))
    sys.exit("12 MiB written under an 8 MiB limit")
except OSError as e:
    assert e.errno == errno.EDQUOT, e
os.close(fd)' "$M/home/wb"
rm -f "$M/home/wb"
check "removing files makes room at once" as_user sh -c "touch '$M/home/now' && fallocate -l 2M '$M/home/now'"
check "cfs quota report lists the user" bash -c "'$BIN/cfs' quota report '$M' | grep -Eq '^user +1000 +'"
check "cfs quota report --json parses, with usage and limits of every id" python3 -c '
import json, subprocess, sys
r = json.loads(subprocess.check_output([sys.argv[1], "quota", "report", sys.argv[2], "--json"]))
u = [x for x in r if x["type"] == "user" and x["id"] == 1000][0]
assert u["hard_bytes"] == 8 << 20 and u["hard_inodes"] == 4 and u["used_inodes"] == 4, u
assert any(x["type"] == "group" and x["id"] == 1000 for x in r), r' "$BIN/cfs" "$M"

# A chgrp into a group without room: refused for the user, as XFS does; root's passes.
"$BIN/cfs" quota set "$M" -g 2000 --blocks-hard 1M >/dev/null || not_ok "cfs quota set -g 2000"
expect 1 "Disk quota exceeded" "a user's chgrp of 2 MiB into a group with 1 MiB: EDQUOT" -- \
	setpriv --reuid 1000 --regid 1000 --groups 1000,2000 chgrp 2000 "$M/home/now"
check "... and the file kept its group" test "$(stat -c %g "$M/home/now")" = 1000
check "root's chgrp passes, the group is then over its limit" bash -c "chgrp 2000 '$M/home/now' &&
	'$BIN/cfs' quota get '$M' -g 2000 --json | grep -q '\"used_bytes\": 2097152,'"
chgrp 1000 "$M/home/now"
"$BIN/cfs" quota set "$M" -g 2000 --blocks-hard 0 >/dev/null

# A soft limit: a log line when passed; refused once the grace is over.
"$BIN/cfs" quota set "$M" -u 1000 --inodes-hard 0 --blocks-hard 0 >/dev/null
"$BIN/cfs" quota set "$M" -g 1000 --blocks-soft 1M --grace 3600 >/dev/null
check "a write over the soft limit within its grace" as_user fallocate -l 1M "$M/home/soft"
check "a log line names the group over its soft limit" grep -q "quota: group 1000 is over its soft block limit" "$T/q.log"
"$BIN/cfs" quota set "$M" -g 1000 --grace 1 >/dev/null
sleep 2 # time only moves on: the one-second grace is over after it, whatever the machine
expect 1 "Disk quota exceeded" "past the grace the soft limit refuses" -- as_user fallocate -l 1M "$M/home/soft2"
expect 0 "grace over: refused" "cfs quota get says the grace is over" -- "$BIN/cfs" quota get "$M" -g 1000
"$BIN/cfs" quota set "$M" -g 1000 --blocks-soft 0 >/dev/null

# Projects: a hosted company's tree.
mkdir "$M/acme" && chattr +P -p 77 "$M/acme"
"$BIN/cfs" quota set "$M" -p 77 --blocks-hard 16M >/dev/null || not_ok "cfs quota set -p 77"
check "what is made in the project is charged to it" bash -c "
	fallocate -l 4M '$M/acme/a' && mkdir '$M/acme/sub' && fallocate -l 4M '$M/acme/sub/b' &&
	'$BIN/cfs' quota get '$M/acme/sub' -p 77 --json | grep -q '\"used_bytes\": $(((8 << 20) + 8192)),'"
expect 1 "Disk quota exceeded" "root too is held by a project's limit" -- fallocate -l 9M "$M/acme/c"
check "df in the project directory shows its limit and what is left" bash -c "
	df -B1M '$M/acme/sub' | awk 'NR == 2 && \$2 == 16 && \$4 <= 8 { ok = 1 } END { exit !ok }' &&
	df -B1M '$M' | awk 'NR == 2 && \$2 > 400 { ok = 1 } END { exit !ok }'"
check "cfs status names the project at 90 % of its limit" bash -c "
	fallocate -l 7M '$M/acme/n' && '$BIN/cfs' status '$M' | grep -q 'quota: project 77 uses' &&
	'$BIN/cfs' status --json '$M' | python3 -c '
import json, sys
q = json.load(sys.stdin)[\"quotas\"]
assert [x for x in q if x[\"type\"] == \"project\" and x[\"id\"] == 77 and x[\"hard_bytes\"] == 16 << 20], q'"
check "cfs quota report --prometheus=FILE writes the gauges of every id" bash -c "
	'$BIN/cfs' quota report '$M' --prometheus='$T/quota.prom' &&
	grep -q '^cfs_quota_hard_bytes{fs=\"$M\",type=\"project\",id=\"77\"} 16777216\$' '$T/quota.prom' &&
	grep -q '^cfs_quota_used_inodes{fs=\"$M\",type=\"user\",id=\"1000\"} ' '$T/quota.prom'"
rm -f "$M/acme/n"
# A file opened with room (its writes cached), and then the limit set: EDQUOT at fsync.
mkdir "$M/beta" && chattr +P -p 78 "$M/beta"
check "buffered writes of a file opened before its limit: EDQUOT at fsync at the latest" /usr/bin/python3 -c '
import errno, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
subprocess.check_call([sys.argv[2], "quota", "set", sys.argv[3], "-p", "78", "--blocks-hard", "4M"])
try:
    for i in range(12):
        os.write(fd, b"x" * (1 << 20))
    os.fsync(fd)
    sys.exit("12 MiB written and fsynced under a 4 MiB limit")
except OSError as e:
    assert e.errno == errno.EDQUOT, e
try:
    os.close(fd)
except OSError:
    pass' "$M/beta/wb" "$BIN/cfs" "$M"
check "... and the project never went over its limit" bash -c "
	'$BIN/cfs' quota get '$M' -p 78 --json | python3 -c 'import json,sys; q=json.load(sys.stdin); assert q[\"used_bytes\"] <= 4 << 20, q'"
rm -rf "$M/beta"
rm -rf "$M/acme/a" "$M/acme/sub" "$M/acme/c"

# Every bad input: a message, exit 2 (or 1 from the daemon), nothing changed.
"$BIN/cfs" quota set "$M" -u 1000 --blocks-hard 8M >/dev/null || not_ok "cfs quota set -u 1000 --blocks-hard 8M"
before=$("$BIN/cfs" quota get "$M" -u 1000 --json)
expect 2 "no user 'no_such_user_q' on this node" "an unknown user" -- "$BIN/cfs" quota set "$M" -u no_such_user_q --blocks-hard 1G
expect 2 "no group 'no_such_group_q' on this node" "an unknown group" -- "$BIN/cfs" quota set "$M" -g no_such_group_q --blocks-hard 1G
expect 2 "give a project id" "a project that is no number" -- "$BIN/cfs" quota set "$M" -p acme --blocks-hard 1G
expect 2 "is not a size" "a size that is none" -- "$BIN/cfs" quota set "$M" -u 1000 --blocks-hard lots
expect 2 "--blocks-soft is above --blocks-hard" "a soft limit above the hard one" -- "$BIN/cfs" quota set "$M" -u 1000 --blocks-soft 2G --blocks-hard 1G
expect 1 "above the hard one" "... also against the limit already set" -- "$BIN/cfs" quota set "$M" -u 1000 --blocks-soft 2G
expect 1 "bytes already, more than the hard limit 1048576: remove files first" "a limit below what is used" -- "$BIN/cfs" quota set "$M" -u 1000 --blocks-hard 1M
expect 2 "give a limit to set" "set without a limit" -- "$BIN/cfs" quota set "$M" -u 1000
expect 2 "give -u USER, -g GROUP or -p ID" "get without an id" -- "$BIN/cfs" quota get "$M"
expect 2 "give one of -u, -g and -p" "two kinds at once" -- "$BIN/cfs" quota get "$M" -u 1000 -g 1000
expect 1 "" "a directory outside any CFS mount" -- "$BIN/cfs" quota get "$T" -u 1000
check "... and none of them changed the record" test "$("$BIN/cfs" quota get "$M" -u 1000 --json)" = "$before"
expect 0 "usage: cfs quota set DIR" "cfs quota --help" -- "$BIN/cfs" quota --help
umount_cfs "$M"

# ODM's create and resize on a dboptimized mount, in a project with a limit.
mount_cfs q "$M" dboptimized
mkdir "$M/acme/odm"
if [ -x "$API" ]; then
	ODM_TEST_QUOTA_BYTES=$((16 << 20)) ODM_TEST_DIR=$M/acme/odm timeout 300 "$API" --jobs 1 \
		--filter 'odm/a_create_or_resize_over_a_quota*' --tap=- 2>"$T/api.err" |
		sed -n "s/^\(not ok\|ok\) \([0-9]* \)\{0,1\}- /\1 - odm_api: /p" | grep -v SKIP
	[ "${PIPESTATUS[0]}" -eq 0 ] || { not_ok "odm_api exit status"; tail -20 "$T/api.err"; }
else
	not_ok "odm_api is not built ($API)"
fi
unmount_and_fsck q "$M" "quotas" && ok "fsck.cfs -n clean at the end: every id's usage equals its files'"
expect 0 "features: journal_v3" "cfs tune -O ^quota,^project" -- "$BIN/cfs" tune q -O ^quota,^project
expect 0 "clean" "fsck.cfs -n after quotas went" -- "$BIN/fsck.cfs" -n q
exit $((FAILS > 0))
