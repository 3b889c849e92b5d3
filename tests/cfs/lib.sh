# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by the cfs integration scripts: lib.sh's temp dir and checks, a volume of LUN files
# there, and mounts that are taken down on exit, also when a check fails or the script dies.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
export CVM_SCAN=$T
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	echo "skip - $(basename "$0"): FUSE mounts need root and /dev/fuse"
	rm -rf "$T"
	exit 0
fi

cfs_cleanup() {
	local m
	for m in $(awk -v t="$T" 'index($2, t) == 1 { print $2 }' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	pkill -9 -f "^cfsd .*$T" 2>/dev/null
	[ -n "${MOUNT_HELPER:-}" ] && rm -f "$MOUNT_HELPER"
	[ -n "${UMOUNT_HELPER:-}" ] && rm -f "$UMOUNT_HELPER"
	[ -n "${PATH_HELPER:-}" ] && rm -f "$PATH_HELPER"
	rm -rf "$T"
}
trap cfs_cleanup EXIT
trap 'exit 1' INT TERM # a test stopped from outside still takes its mounts down

# make_volume NAME NLUNS MIB: LUN files $T/NAME.lunI and a CVM volume NAME over them.
make_volume() {
	local i luns=()
	for ((i = 0; i < $2; i++)); do
		truncate -s "$3M" "$T/$1.lun$i"
		luns+=("$T/$1.lun$i")
	done
	"$BIN/cvm" create "$1" "${luns[@]}" >/dev/null
}

# mount_cfs VOLUME DIR [OPTIONS]: mounted in the background, logging to $T/VOLUME.log.
mount_cfs() {
	mkdir -p "$2"
	"$BIN/cfs" mount "$1" "$2" -o "log=$T/$1.log${3:+,$3}"
}

# transport_is DIR WHAT [MORE_THAN]: the mount's FUSE requests come through WHAT (io_uring or
# dev) as cfs status says, and (if given) more than MORE_THAN through io_uring so far.
transport_is() {
	local j n
	j=$("$BIN/cfs" status --json "$1") || return 1
	grep -q "\"fuse_transport\": \"$2\"" <<<"$j" || { echo "cfs status: $j" >&2; return 1; }
	[ -n "${3:-}" ] || return 0
	n=$(sed -n 's/.*"uring_requests": \([0-9]*\).*/\1/p' <<<"$j")
	[ "${n:-0}" -gt "$3" ] || { echo "only ${n:-0} requests through io_uring" >&2; return 1; }
}

# umount_cfs DIR: on failure, what the daemon's threads are doing goes to stderr.
umount_cfs() {
	timeout 240 "$BIN/cfs" umount "$1" && return 0
	local pid
	for pid in $(pgrep -f "^cfsd .*$1"); do
		ps -L -o tid,stat,wchan:32,comm -p "$pid" >&2
		command -v gdb >/dev/null && gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null | grep -E "^#|^Thread" >&2
	done
	return 1
}

# unmount_and_fsck VOLUME DIR WHAT: unmount, then fsck.cfs -n, a not_ok about WHAT for each
# failure.  Returns 2 if the unmount failed, 1 if fsck.cfs found problems.
unmount_and_fsck() {
	umount_cfs "$2" || { not_ok "$3: unmount: $(tail -3 "$T/$1.log")"; return 2; }
	"$BIN/fsck.cfs" -n "$1" >"$T/fsck.out" 2>&1 && return 0
	not_ok "$3: fsck.cfs: $(cat "$T/fsck.out")"
	return 1
}

# status_of DIR FIELD: a field of the mount's cfs status --json.
status_of() {
	"$BIN/cfs" status --json "$1" | python3 -c "import json, sys; print(json.load(sys.stdin)['$2'])"
}

# daemon_pid DIR: the pid of the cfsd serving DIR.
daemon_pid() { status_of "$1" pid; }

