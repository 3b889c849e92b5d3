#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cfs-fence(8), the fence agent for the fence= mount option.  SBD for real: a survivor of a
# 3-node cluster runs cfs-fence for the dead node, fence_sbd writes "off" into the node's slot
# on an SBD disk (a loop device here) and waits SBD's msgwait; only then is the journal
# replayed.  fence_scsi and fence_ipmilan need SCSI-3 LUNs and BMCs this machine has not: their
# command lines (--check) are checked against the agents' own metadata (every option exists),
# and cfs-fence is run with stand-ins on PATH that record what they were given.  Bad
# configurations are refused with the setting named.
. "$(dirname "$0")/cfs_lib.sh" "cfs-fence"
FENCE=$BIN/cfs-fence
for p in fence_sbd fence_scsi fence_ipmilan sbd losetup; do
	command -v $p >/dev/null || { echo "skip - cfs-fence: $p is not installed"; exit 0; }
done
export CFS_FENCE_CONF=$T/fence.conf

# ---- refusals, before anything runs ----
conf() { printf '%s\n' "$@" >"$CFS_FENCE_CONF"; }
rm -f "$CFS_FENCE_CONF"
expect 1 "cannot read $CFS_FENCE_CONF" "no configuration: named" -- "$FENCE" 3
conf "SBD_DEVICES=/dev/null"
expect 1 "FENCE_AGENT is not set" "no agent: named" -- "$FENCE" 3
conf "FENCE_AGENT=nfs"
expect 1 "FENCE_AGENT=nfs: sbd, scsi or ipmilan" "an unknown agent: named, with the choices" -- "$FENCE" 3
conf "FENCE_AGENT=sbd"
expect 1 "needs SBD_DEVICES" "sbd without its disk" -- "$FENCE" 3
conf "FENCE_AGENT=scsi"
expect 1 "needs SCSI_DEVICES" "scsi without the LUNs" -- "$FENCE" 3
conf "FENCE_AGENT=ipmilan" "IPMI_USER=admin" "IPMI_PASSWORD_FILE=$T/nothing"
expect 1 "needs IPMI_PASSWORD_FILE" "ipmilan without a readable password file" -- "$FENCE" 3
conf "FENCE_AGENT=sbd" "SBD_DEVICES=/dev/null"
expect 1 "must be a corosync node id, not 'n3'" "a node given by name" -- "$FENCE" n3
expect 2 "usage:" "two arguments" -- "$FENCE" 1 2
expect 0 "fence_sbd, fence_scsi or fence_ipmilan" "--help" -- "$FENCE" --help
rm -f "$CFS_FENCE_CONF"
expect 0 "" "--unfence without a configuration (no fencing set up) does nothing" -- "$FENCE" --unfence

C up 3 >/dev/null && ok "cluster of 3 nodes up" || { not_ok "cluster up"; finish; }

# ---- the SBD disk: a loop device on a file, slots for the harness's node names ----
truncate -s 8M "$T/sbd.img"
sbd_dev=$(loop_device "$T/sbd.img") || { not_ok "losetup for the SBD disk"; finish; }
# Watchdog 2 s, msgwait 4 s: fence_sbd waits msgwait after its message.
sbd -d "$sbd_dev" -1 2 -4 4 create >/dev/null 2>&1 && ok "an SBD disk made on $sbd_dev" || not_ok "sbd create"
for n in 1 2 3; do sbd -d "$sbd_dev" allocate "n$n" >/dev/null 2>&1; done
conf "FENCE_AGENT=sbd" "SBD_DEVICES=$sbd_dev"
expect 0 "node 3 (n3): fence_sbd --devices=$sbd_dev --plug=n3 --action=off" \
	"--check prints the command for every node (names from corosync's node list)" -- on 1 "$FENCE" --check
expect 1 "node 9 is not in corosync's node list" "a node id corosync does not know" -- on 1 "$FENCE" 9

# ---- every option each agent is given exists in that agent (its metadata) ----
echo "$T/ipmi.pass" >"$T/ipmi.pass"
chmod 600 "$T/ipmi.pass"
agent_conf() {
	case $1 in
	sbd) conf "FENCE_AGENT=sbd" "SBD_DEVICES=$sbd_dev" ;;
	scsi) conf "FENCE_AGENT=scsi" "SCSI_DEVICES=$T/lun0,$T/lun1" ;;
	ipmilan) conf "FENCE_AGENT=ipmilan" "IPMI_USER=admin" "IPMI_PASSWORD_FILE=$T/ipmi.pass" \
		"IPMI_ADDR_n1=10.1.0.1" "IPMI_ADDR_n2=10.1.0.2" "IPMI_ADDR_n3=10.1.0.3" ;;
	esac
}
for a in sbd scsi ipmilan; do
	agent_conf $a
	on 1 "$FENCE" --check >"$T/check.$a" 2>&1
	"fence_$a" -o metadata 2>/dev/null | grep -o 'getopt mixed="[^"]*"' >"$T/meta.$a"
	missing=
	for opt in $(grep -o -- ' --[a-z-]*' "$T/check.$a" | sort -u); do
		grep -q -- "${opt}[=\"]" "$T/meta.$a" || missing="$missing $opt"
	done
	[ -s "$T/meta.$a" ] && [ -z "$missing" ] && grep -q "fence_$a " "$T/check.$a" &&
		ok "fence_$a knows every option cfs-fence gives it: $(grep -o -- ' --[a-z-]*' "$T/check.$a" | sort -u | tr -d '\n')" ||
		not_ok "fence_$a: options it does not know:$missing; --check said: $(cat "$T/check.$a")"
done
check "ipmilan: each node's BMC from IPMI_ADDR_<name>" grep -q "node 2 (n2): fence_ipmilan --ip=10.1.0.2 " "$T/check.ipmilan"

# ---- scsi and ipmilan run through stand-ins that record their arguments ----
mkdir -p "$T/standin"
for a in scsi ipmilan; do
	printf '#!/bin/sh\necho "$*" >>"%s/%s.args"\nexit "${STANDIN_RC:-0}"\n' "$T" "$a" >"$T/standin/fence_$a"
	chmod +x "$T/standin/fence_$a"
done
agent_conf scsi
expect 0 "node 2 (n2) fenced" "scsi: cfs-fence 2 runs fence_scsi and says so" -- on 1 env PATH="$T/standin:$PATH" "$FENCE" 2
check "scsi: fence_scsi was given the LUNs, node 2's name and off" \
	grep -qx -- "--devices=$T/lun0,$T/lun1 --plug=n2 --action=off" "$T/scsi.args"
expect 1 "fence_scsi failed for node 2 (n2): exit status 1" "scsi: the agent's failure is cfs-fence's" -- \
	on 1 env STANDIN_RC=1 PATH="$T/standin:$PATH" "$FENCE" 2
expect 0 "" "scsi: --unfence registers this node" -- on 3 env PATH="$T/standin:$PATH" "$FENCE" --unfence
check "scsi: fence_scsi registered node 3 (on)" grep -qx -- "--devices=$T/lun0,$T/lun1 --plug=n3 --action=on" "$T/scsi.args"
agent_conf ipmilan
expect 0 "node 3 (n3) fenced" "ipmilan: cfs-fence 3 runs fence_ipmilan" -- on 1 env PATH="$T/standin:$PATH" "$FENCE" 3
check "ipmilan: fence_ipmilan was given node 3's BMC, the user, the password file and off" \
	grep -qx -- "--ip=10.1.0.3 --username=admin --password-script=cat $T/ipmi.pass --lanplus --action=off" "$T/ipmilan.args"

# ---- SBD for real: node 3 dies, a survivor fences it through the SBD disk, then recovers it ----
agent_conf sbd
make_data 64
"$BIN/mkfs.cfs" -p corosync -J 4 data >/dev/null
for n in 1 2 3; do check "node $n mounts with fence=$FENCE" mount_on $n "fence=$FENCE"; done
check "node 3 writes and fsyncs a file" on 3 python3 -c "
import os
fd = os.open('$(M 3)/acked', os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b'fsynced on node 3\n'); os.fsync(fd)"
pid3=$(status_of 3 pid)
C kill 3
kill -9 "$pid3"
C abort 3
fenced_in_log() { grep -h "fence program $FENCE fenced node 3" "$T/cfsd1.log" "$T/cfsd2.log"; }
check_soon 120 "a survivor's cfs-fence fenced node 3 before its recovery" fenced_in_log
check "the SBD disk holds 'off' for n3" bash -c "sbd -d '$sbd_dev' list | grep -qP '^\d+\tn3\toff'"
check "nodes 1 and 2 were not fenced" bash -c "! sbd -d '$sbd_dev' list | grep -qP '\tn[12]\toff'"
check_soon 120 "node 3's recovery is done" recovery_done
check "node 1 reads what node 3's fsync acknowledged" on 1 grep -q "fsynced on node 3" "$(M 1)/acked"
for n in 1 2; do check "unmount node $n" umount_on $n; done
fsck_clean "after the fenced node's recovery"
no_damage_logged
finish
