#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ODM on several nodes at once, as RAC instances share every datafile (cfsd/odm_cluster.c):
# a file created and committed on one node is identified on the others, an uncommitted one
# is seen nowhere else and goes with its node; three nodes write one datafile through libodm
# at once and every write that completed is there; a node that fences itself stops its ODM
# I/O; a shrink on one node revokes the other
# nodes' maps first, so no write of theirs lands in the space it freed (the single-node
# "resize racing with I/O" test, across nodes); a delete is refused while another node holds
# the file; a normal mount and ODM exclude each other, with messages; odmstat --cluster sums
# every node's counts and keeps a dead node's.  fsck.cfs -n clean.
. "$(dirname "$0")/cfs_lib.sh" "cfs ODM across nodes"
ODM=$(dirname "$BIN")/tests/odm
export ODM_TEST_DB="CL$$"
C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }
make_data 256
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null

# A node that caches pages would miss ODM's writes: ODM needs dboptimized everywhere.
check "node 3 mounts normally" mount_on 3
if on 3 "$ODM/odm_race" create "$(M 3)/x.dbf" 4 >"$T/normal.out" 2>&1; then
	not_ok "ODM on a normal cluster mount was accepted"
else
	check "ODM on a normal cluster mount is refused and says why" grep -q "dboptimized" "$T/normal.out"
fi
# A mount whose daemon died, listed on node 1 before its live one: odmstat --cluster without
# DIR must pass over it.
truncate -s 64M "$T/dead.lun0" && "$BIN/cvm" create dead "$T/dead.lun0" >/dev/null &&
	"$BIN/mkfs.cfs" dead >/dev/null 2>&1 && mkdir "$T/dead" &&
	on 1 "$BIN/cfs" mount dead "$T/dead" -o "log=$T/cfsd-dead.log" &&
	kill -9 "$(on 1 "$BIN/cfs" status --json "$T/dead" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')" ||
	not_ok "a dead mount on node 1"
check "node 1 mounts dboptimized" mount_on 1 dboptimized
if on 1 "$ODM/odm_race" create "$(M 1)/x.dbf" 4 >"$T/mixed.out" 2>&1; then
	not_ok "ODM was accepted while node 3 mounts normally"
else
	check "ODM is refused while another node mounts normally, naming it" \
		grep -q "node [0-9]* mounts this filesystem without dboptimized" "$T/mixed.out"
fi
check "unmount node 3" umount_on 3
for n in 2 3; do check "node $n mounts dboptimized" mount_on $n dboptimized; done

# Created and committed on node 1, identified on nodes 2 and 3; three writers at once.
on 1 "$ODM/odm_race" create "$(M 1)/data.dbf" 32 && ok "node 1 creates and commits data.dbf (32 MiB)" ||
	not_ok "node 1 creates data.dbf"
for n in 1 2 3; do
	on $n "$ODM/odm_crash" write "$(M $n)" "$T/log$n" $n $((n - 1)) 3 >"$T/writer$n.out" 2>&1 &
	wpid[n]=$!
done
# Warm once every writer has logged writes (each took the locks it keeps); then counted over
# at least 2 s and 1,000 writes, however long those take here.
logged() { cat "$T/log$1" 2>/dev/null | wc -l; }
warm() { [ "$(logged 1)" -gt 0 ] && [ "$(logged 2)" -gt 0 ] && [ "$(logged 3)" -gt 0 ]; }
wait_until 120 warm || not_ok "the ODM writers did not all write within 120 s"
msgs() { echo $(( $(status_of 1 lock_messages) + $(status_of 2 lock_messages) + $(status_of 3 lock_messages) )); }
m0=$(msgs) w0=$(cat "$T"/log[123] | wc -l) s0=$SECONDS
sleep 2
thousand_more() { [ "$(cat "$T"/log[123] | wc -l)" -gt $((w0 + 1000)) ]; }
wait_until 120 thousand_more
m1=$(msgs) w1=$(cat "$T"/log[123] | wc -l)
check "$((w1 - w0)) ODM writes from 3 nodes in $((SECONDS - s0)) s sent $((m1 - m0)) lock messages (want under 20)" \
	test $((m1 - m0)) -lt 20 -a $((w1 - w0)) -gt 1000
check "node 2 does not see node 1's uncommitted scratch file" \
	bash -c "! '$HERE/cluster.sh' exec 2 ls '$(M 2)' | grep -q scratch"
for n in 1 2 3; do
	stop_job "${wpid[n]}" "odm_crash write $(M $n) "
	[ "$(wc -l <"$T/log$n")" -gt 100 ] && ok "node $n wrote data.dbf: $(wc -l <"$T/log$n") writes completed" ||
		not_ok "node $n's writer: $(cat "$T/writer$n.out")"
done
cat "$T"/log1 "$T"/log2 "$T"/log3 >"$T/log"
for n in 1 2 3; do
	check "node $n reads every block that any node's ODM write completed" \
		on $n "$ODM/odm_crash" check "$(M $n)" "$T/log"
done
# The writers were killed: their uncommitted files went with their processes.
check "no uncommitted file was left behind" bash -c "! '$HERE/cluster.sh' exec 1 ls '$(M 1)' | grep -q scratch"

# odmstat --cluster: 10 instances of 20 processes on each node (instances I11..I310; the
# race test's CRn came before) (odmload --instances), all
# running at once until the test has seen every one of them; node 1's view of the cluster
# then sums exactly what each node shows of itself (a node's counts reach the others within
# a second), and every node's lists all 30 instances.
LIB=$(dirname "$BIN")/lib/libodm.so
for n in 1 2 3; do
	on $n mkdir -p "$(M $n)/load$n"
	on $n "$BIN/odmload" --lib "$LIB" --dir "$(M $n)/load$n" --db "$ODM_TEST_DB" --instance "I$n" \
		--instances 10 --procs 17 --files 1 --file-mib 2 --redo-mib 2 --think-ms 200 \
		--until "$T/loads.gate" --seed $n >"$T/load$n.out" 2>&1 &
	lpid[n]=$!
done
all_running() {
	for n in 1 2 3; do
		on $n "$BIN/odmstat" -l --json >"$T/list$n.json" || return 1
		python3 -c "
import json, sys
procs = json.load(open(sys.argv[1]))
assert len(procs) == 200, len(procs)" "$T/list$n.json" || return 1
	done
}
check_soon 600 "200 libodm processes (10 instances of 20) running on each of the 3 nodes" all_running
touch "$T/loads.gate"
for n in 1 2 3; do
	if wait "${lpid[n]}"; then ok "odmload's 10 instances ran on node $n"
	else not_ok "odmload ran on node $n: $(grep -h "odmload\|libodm" "$T/load$n.out" | grep -v " 0 failed" | head -5 | tr '\n' ' ')"; fi
done
# Each node sends its counts to the others once a second: node 1's sum of them matches what
# each node counts itself once those of the end of the loads have come (asked until then).
sum_py='
import json, sys
def total(path):
    t = [0, 0, 0, 0]
    for r in json.load(open(path))["rows"]:
        for i, m in enumerate(("sync", "async")):
            t[2 * i] += r[m]["reads"] + r[m]["writes"]
            t[2 * i + 1] += r[m]["read_bytes"] + r[m]["write_bytes"]
    return t
'
cluster_sums_own() {
	for n in 1 2 3; do on $n "$BIN/odmstat" --json >"$T/own$n.json"; done
	on 1 "$BIN/odmstat" --cluster="$(M 1)" --json >"$T/cluster.json"
	python3 -c "$sum_py
own = [sum(x) for x in zip(*(total(p) for p in sys.argv[2:]))]
got = total(sys.argv[1])
assert got == own and own[0] + own[2] > 0, (got, own)
print(got)" "$T/cluster.json" "$T"/own[123].json
}
check_soon 60 "odmstat --cluster on node 1 sums each node's own view exactly" cluster_sums_own
lists_30() {
	for n in 1 2 3; do
		on $n "$BIN/odmstat" --cluster="$(M $n)" --by instance --json >"$T/inst$n.json" || return 1
		python3 -c "
import json, sys
keys = {r['key'] for r in json.load(open(sys.argv[1]))['rows'] if '/I' in r['key']}
assert len(keys) == 30, (len(keys), sorted(keys))" "$T/inst$n.json" || return 1
	done
}
check_soon 60 "odmstat --cluster on every node lists the 30 instances" lists_30
on 1 "$BIN/odmstat" --cluster="$(M 1)" --by node --json >"$T/bynode.json"
on 1 "$BIN/odmstat" --cluster --by node >"$T/bynode.txt"
check "odmstat --cluster --by node shows 3 nodes, all up" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j['rows']) == 3 and len(j['nodes']) == 3, j
assert all(n['alive'] for n in j['nodes']), j['nodes']" "$T/bynode.json"
check "odmstat --cluster without DIR passes over a dead mount and finds the live one" \
	test "$(grep -c '#' "$T/bynode.txt")" -ge 6
if on 1 "$BIN/odmstat" --cluster --by file >"$T/byfile.out" 2>&1; then not_ok "odmstat --cluster --by file was accepted"
else check "odmstat --cluster --by file is refused and says why" grep -q "not with -l or --by file" "$T/byfile.out"; fi

# A shrink on node 1 while nodes 2 and 3 write all over the file.
on 1 "$ODM/odm_race" create "$(M 1)/v.dbf" 32 || not_ok "node 1 creates v.dbf"
for n in 2 3; do
	on $n "$ODM/odm_race" writer "$(M $n)/v.dbf" >"$T/race$n.out" 2>&1 &
	rpid[n]=$!
done
for n in 2 3; do
	wait_until 120 grep -q writing "$T/race$n.out" || not_ok "node $n's writer: $(cat "$T/race$n.out")"
done
check "cfs locks on node 2 names the ODM map lock of v.dbf" \
	bash -c "'$HERE/cluster.sh' exec 2 '$BIN/cfs' locks '$(M 2)' | grep 'ODM maps of inode' | grep -q v.dbf"
check "node 1 shrinks v.dbf 4 times under writes from nodes 2 and 3, and its new files keep their data" \
	on 1 "$ODM/odm_race" shrink "$(M 1)/v.dbf" "$(M 1)" 4
head -c 4194304 /dev/zero | tr '\0' Z >"$T/zzz"
for i in 0 1 2 3; do
	check "node 3 reads n$i.dbf: only its own data" on 3 cmp "$(M 3)/n$i.dbf" "$T/zzz"
done
for n in 2 3; do
	kill -0 "${rpid[n]}" 2>/dev/null && ok "node $n's writer kept going through the shrinks" ||
		not_ok "node $n's writer: $(cat "$T/race$n.out")"
done

# A file in use on another node is not deleted; once its holders are gone, it is.
if on 1 "$ODM/odm_race" delete "$(M 1)/v.dbf" >"$T/delete.out" 2>&1; then
	not_ok "odm_delete removed a file that nodes 2 and 3 hold"
else
	check "odm_delete of a file another node holds is refused, naming the node" \
		grep -q "in use by ODM on node" "$T/delete.out"
fi
for n in 2 3; do stop_job "${rpid[n]}" "odm_race writer $(M $n)/"; done
check "odm_delete once nobody holds it" on 1 "$ODM/odm_race" delete "$(M 1)/v.dbf"
check "node 2 no longer sees v.dbf" bash -c "! '$HERE/cluster.sh' exec 2 test -e '$(M 2)/v.dbf'"

# A node that fences itself stops its clients' ODM I/O: their maps are revoked and no new
# one is given out.
on 1 "$ODM/odm_race" create "$(M 1)/f.dbf" 8 || not_ok "node 1 creates f.dbf"
on 3 "$ODM/odm_race" writer "$(M 3)/f.dbf" >"$T/fenced.out" 2>&1 &
fpid=$!
wait_until 120 grep -q writing "$T/fenced.out" || not_ok "node 3's writer: $(cat "$T/fenced.out")"
C partition 3
t0=$(ms)
if ! wait_until 60 gone $fpid; then
	not_ok "node 3's ODM writer still writes 60 s after it was cut off"
	pkill -9 -f "odm_race writer $(M 3)/" || true
else
	check "node 3's ODM writes fail once it fenced itself ($(($(ms) - t0)) ms after the partition)" \
		grep -q "Input/output error" "$T/fenced.out"
fi
wait $fpid 2>/dev/null
C heal
C wait-quorum 3 yes 30 >/dev/null 2>&1
check "node 1 works on after node 3 was cut off" on 1 timeout 60 mkdir "$(M 1)/after-fence"

# An uncommitted file is seen nowhere else.  A normal mount waits for ODM on the other nodes
# (30 s), then gives up with a message.
on 2 "$ODM/odm_race" uncommitted "$(M 2)/u.dbf" >"$T/unc.out" 2>&1 &
upid=$!
for _ in $(seq 50); do grep -q created "$T/unc.out" 2>/dev/null && break; sleep 0.1; done
check "node 2 holds an uncommitted file" grep -q created "$T/unc.out"
check "node 1 does not see it" bash -c "! '$HERE/cluster.sh' exec 1 test -e '$(M 1)/u.dbf'"
check "unmount node 3" umount_on 3
if mount_on 3 >"$T/wait.out" 2>&1; then
	not_ok "node 3 mounted normally while node 2 serves ODM"
	umount_on 3
else
	check "a normal mount gives up while a node serves ODM, naming it" \
		grep -q "node [0-9]* mounts data dboptimized and keeps files in use for ODM" "$T/wait.out"
fi

# Node 2 dies with its uncommitted file: the survivors free it.
pid2=$(status_of 2 pid)
id2=$(status_of 2 node_id)
C kill 2; kill -9 "$pid2"; C abort 2
stop_job "$upid" "odm_race uncommitted $(M 2)/"
check "node 1 works on after node 2 died" on 1 timeout 60 mkdir "$(M 1)/after"
shown_down() {
	on 1 "$BIN/odmstat" --cluster="$(M 1)" --by node --json >"$T/dead.json" && python3 -c "
import json, sys
j, id2 = json.load(open(sys.argv[1])), int(sys.argv[2])
assert [n for n in j['nodes'] if n['node_id'] == id2 and not n['alive'] and not n['unmounted']], j['nodes']
assert any(r['key'].endswith('#%d (down)' % id2) for r in j['rows']), j['rows']" "$T/dead.json" "$id2"
}
check_soon 60 "odmstat --cluster keeps node 2's last counts, marked down" shown_down
check "node 1 can create u.dbf, which node 2 never committed" on 1 "$ODM/odm_race" create "$(M 1)/u.dbf" 4
check "unmount node 1" umount_on 1
fsck_clean "at the end (node 2's uncommitted file freed by its recovery)"
no_damage_logged
finish
