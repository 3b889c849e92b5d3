#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An N-node cluster on one machine: each node a network namespace on a bridge, running its own
# corosync in its own mount namespace (private /run, /var/lib/corosync, /dev/shm).
#
#   cluster.sh up N            start nodes 1..N, wait until all are members and quorate
#   cluster.sh down            stop everything and remove namespaces, links and state
#   cluster.sh kill NODE       kill -9 the node's corosync
#   cluster.sh pid NODE        the node's corosync process (a test freezes it with SIGSTOP)
#   cluster.sh abort NODE      end the FUSE connections of mounts made in the node (after a
#                              test kills a daemon there: see abort_fuse)
#   cluster.sh start NODE      start a killed node's corosync again
#   cluster.sh partition NODE...   cut those nodes off from the rest (they still see each other)
#   cluster.sh heal            join all nodes again
#   cluster.sh exec NODE CMD...    run CMD inside the node (its network and mount namespaces)
#   cluster.sh wait-quorum NODE yes|no [SECONDS]
#   cluster.sh status
#
# Env: CLUSTER_ID (default "cfs", at most 6 characters: names namespaces and links, so that
# several clusters can coexist), CLUSTER_STATE (default /tmp/cfs-cluster-$CLUSTER_ID),
# CLUSTER_TRANSPORT (corosync's: knet, the default, or udpu; benchmarks compare them),
# CLUSTER_TOKEN (corosync's token timeout in ms, default 1000: tests see a silent node gone
# soon; corosync's own default, 3000, beats less often: benchmarks use it),
# CLUSTER_IDLE_ROTATIONS (corosync's seqno_unchanged_const: how many times the token goes
# round with nothing sent before the ring's representative holds it; default 1, as the admin
# guide advises, where corosync's own is 30).
# Needs root, iproute2, util-linux and corosync.  See tests/cluster/README.
set -euo pipefail
ID=${CLUSTER_ID:-cfs}
STATE=${CLUSTER_STATE:-/tmp/cfs-cluster-$ID} # not under /run: each node mounts its own /run
SUBNET=10.213.0
TRANSPORT=${CLUSTER_TRANSPORT:-knet}
TOKEN=${CLUSTER_TOKEN:-1000}
IDLE_ROTATIONS=${CLUSTER_IDLE_ROTATIONS:-1}
[[ $IDLE_ROTATIONS =~ ^[1-9][0-9]*$ ]] || { echo "cluster: CLUSTER_IDLE_ROTATIONS=$IDLE_ROTATIONS: a count, 1 or more" >&2; exit 2; }
[[ $TOKEN =~ ^[0-9]+$ ]] && [ "$TOKEN" -ge 200 ] || { echo "cluster: CLUSTER_TOKEN=$TOKEN: milliseconds, 200 or more" >&2; exit 2; }
case $TRANSPORT in knet | udpu) ;; *) echo "cluster: CLUSTER_TRANSPORT=$TRANSPORT: knet or udpu" >&2; exit 2 ;; esac

die() { echo "cluster: $*" >&2; exit 1; }
ns() { echo "$ID-n$1"; }
hostif() { echo "$ID-v$1"; }
nodes() { cat "$STATE/nodes" 2>/dev/null || echo 0; }
pid_of() { cat "$STATE/n$1/pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

write_conf() { # node count
	local n=$1 count=$2 dir=$STATE/n$1
	mkdir -p "$dir"
	{
		echo "totem {"
		echo "  version: 2"
		echo "  cluster_name: $ID"
		echo "  transport: $TRANSPORT"
		echo "  crypto_cipher: none"
		echo "  crypto_hash: none"
		echo "  token: $TOKEN"
		echo "  token_coefficient: 0"
		echo "  seqno_unchanged_const: $IDLE_ROTATIONS"
		echo "  cancel_token_hold_on_retransmit: yes"
		echo "  join: 50"
		echo "}"
		echo "nodelist {"
		for i in $(seq 1 "$count"); do
			printf '  node {\n    ring0_addr: %s\n    nodeid: %s\n    name: n%s\n  }\n' \
				"$SUBNET.$i" "$i" "$i"
		done
		echo "}"
		printf 'quorum {\n  provider: corosync_votequorum\n}\n'
		printf 'logging {\n  to_stderr: yes\n  to_logfile: no\n  to_syslog: no\n  timestamp: on\n}\n'
	} >"$dir/corosync.conf"
}

start_node() {
	local n=$1 dir=$STATE/n$1
	# The node's own mount namespace: corosync's run and state directories and the shared
	# memory of its IPC are private to it, as on a real machine.  It starts as a copy of this
	# machine's mounts: the FUSE mounts among them (another test's, running at the same time)
	# are dropped from it, or the copy would keep each one's filesystem alive after that test
	# unmounts it, and its daemon would wait for ever for the end of a connection.
	mkdir -p /var/lib/corosync
	ip netns exec "$(ns "$n")" unshare --mount --propagation private bash -c '
		awk '\''$3 == "fuse" || $3 == "fuseblk" || $3 ~ /^fuse\./ { print $2 }'\'' /proc/self/mounts | sort -r |
			while read -r m; do umount -l "$m"; done
		mount -t tmpfs cfs-run /run && mkdir /run/corosync &&
		mount -t tmpfs cfs-lib /var/lib/corosync &&
		mount -t tmpfs cfs-shm /dev/shm &&
		exec corosync -f -c "$1"' _ "$dir/corosync.conf" >>"$dir/corosync.log" 2>&1 &
	echo $! >"$dir/pid"
}

node_exec() {
	local n=$1
	shift
	alive "$n" || die "node $n: corosync is not running (cluster.sh start $n)"
	# In the caller's directory, as a command run here would be (the README's block runs
	# build/bin/cfs on a node).
	nsenter -t "$(pid_of "$n")" -n -m --wd="$PWD" -- "$@"
}

quorate() { # node -> "yes" / "no"
	local out
	out=$(node_exec "$1" corosync-quorumtool -s 2>/dev/null || true)
	if grep -q '^Quorate: *Yes' <<<"$out"; then echo yes; else echo no; fi
}

wait_quorum() { # node yes|no seconds
	local n=$1 want=$2 secs=${3:-30} end
	end=$((SECONDS + secs))
	while [ $SECONDS -lt $end ]; do
		[ "$(quorate "$n")" = "$want" ] && return 0
		sleep 0.2
	done
	die "node $n: quorate is not '$want' after $secs s (log: $STATE/n$n/corosync.log)"
}

cmd_up() {
	local count=${1:-3}
	[ "$(id -u)" -eq 0 ] || die "needs root"
	command -v corosync >/dev/null || die "corosync is missing: run scripts/deps.sh"
	[ "$count" -ge 1 ] && [ "$count" -le 16 ] || die "N must be 1..16"
	[ ! -e "$STATE" ] || die "a cluster '$ID' exists ($STATE): cluster.sh down first"
	mkdir -p "$STATE"
	echo "$count" >"$STATE/nodes"
	for b in 0 1; do
		ip link add "$ID-br$b" type bridge
		ip link set "$ID-br$b" up
	done
	for i in $(seq 1 "$count"); do
		ip netns add "$(ns "$i")"
		ip link add "$(hostif "$i")" type veth peer name eth0 netns "$(ns "$i")"
		ip link set "$(hostif "$i")" master "$ID-br0" up
		ip -n "$(ns "$i")" addr add "$SUBNET.$i/24" dev eth0
		ip -n "$(ns "$i")" link set eth0 up
		ip -n "$(ns "$i")" link set lo up
		write_conf "$i" "$count"
	done
	for i in $(seq 1 "$count"); do start_node "$i"; done
	for i in $(seq 1 "$count"); do wait_quorum "$i" yes 60; done
	echo "cluster $ID: $count nodes up and quorate"
}

# The node's FUSE mounts lose their connection first: a daemon killed while one of its threads
# waits in the kernel on its own connection (a page invalidation waiting for a page that a
# request to the daemon holds) would never die otherwise, and the process that made that
# request would wait for ever (seen in test_cfs_recovery.sh: a writer on the killed node).
fuse_minors() { # mountinfo files -> the device minors of their FUSE mounts
	awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) ~ /^fuse(\.|$)/) { split($3, d, ":"); print d[2] } break } }' \
		"$@" 2>/dev/null | sort -u
}
abort_fuse() { # node: only mounts made in the node, not those it saw of this machine's
	local p files=() ctl=/sys/fs/fuse/connections mounted=
	for p in $(ip netns pids "$(ns "$1")" 2>/dev/null); do files+=("/proc/$p/mountinfo"); done
	[ ${#files[@]} -gt 0 ] && [ -d $ctl ] || return 0
	if ! mountpoint -q $ctl; then mount -t fusectl none $ctl 2>/dev/null && mounted=1 || return 0; fi
	for p in $(comm -23 <(fuse_minors "${files[@]}") <(fuse_minors /proc/self/mountinfo)); do
		echo 1 >"$ctl/$p/abort" 2>/dev/null || true
	done
	[ -z "$mounted" ] || umount $ctl
}

# The nodes to take down: those the state names, and any namespace of this cluster besides
# (the state may be gone already: a run stopped from outside, its temporary directory removed).
down_nodes() {
	{
		seq 1 "$(nodes)"
		ip netns list 2>/dev/null | awk -v p="^$ID-n[0-9]+\$" '$1 ~ p { sub(/^.*-n/, "", $1); print $1 }'
	} | sort -nu
}

cmd_down() {
	local ids
	ids=$(down_nodes)
	for i in $ids; do abort_fuse "$i"; done
	for i in $ids; do
		# Everything running in the node: corosync and whatever tests started there.
		for p in $(ip netns pids "$(ns "$i")" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	done
	for i in $ids; do
		ip netns del "$(ns "$i")" 2>/dev/null || true
		ip link del "$(hostif "$i")" 2>/dev/null || true
	done
	for b in 0 1; do ip link del "$ID-br$b" 2>/dev/null || true; done
	rm -rf "$STATE"
}

cmd_partition() {
	[ $# -ge 1 ] || die "partition needs at least one node"
	for n in "$@"; do ip link set "$(hostif "$n")" master "$ID-br1"; done
}

cmd_heal() {
	for i in $(seq 1 "$(nodes)"); do ip link set "$(hostif "$i")" master "$ID-br0"; done
}

cmd_status() {
	for i in $(seq 1 "$(nodes)"); do
		if alive "$i"; then echo "n$i: corosync running, quorate: $(quorate "$i")"
		else echo "n$i: corosync not running"; fi
	done
}

cmd=${1:-}
shift || true
case "$cmd" in
up) # in a child, so that any failure (set -e or die) is followed by a full cleanup
	bash "$0" __up "$@" || { echo "cluster: up failed, cleaning up" >&2; cmd_down; exit 1; } ;;
__up) cmd_up "$@" ;;
down) cmd_down ;;
kill) [ $# -eq 1 ] || die "kill NODE"; alive "$1" && kill -9 "$(pid_of "$1")"; true ;;
abort) [ $# -eq 1 ] || die "abort NODE"; abort_fuse "$1" ;;
pid) [ $# -eq 1 ] || die "pid NODE"; alive "$1" && pid_of "$1" ;;
start) [ $# -eq 1 ] || die "start NODE"; alive "$1" && die "node $1 is running"; start_node "$1" ;;
partition) cmd_partition "$@" ;;
heal) cmd_heal ;;
exec) [ $# -ge 2 ] || die "exec NODE CMD..."; node_exec "$@" ;;
wait-quorum) [ $# -ge 2 ] || die "wait-quorum NODE yes|no [SECONDS]"; wait_quorum "$@" ;;
status) cmd_status ;;
*) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || [ "$cmd" = help ] || exit 2 ;;
esac
