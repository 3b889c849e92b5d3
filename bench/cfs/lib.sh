# SPDX-License-Identifier: GPL-2.0-or-later
# What bench/cfs's scripts share, sourced as `. lib.sh NAME` with $build set: strict mode,
# bin (the tools), dir (the run's temporary directory, named after NAME) with the LUN files'
# directory in it for cvm to scan, and the helpers below.
set -euo pipefail
bin=$(cd "$build/bin" && pwd)
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/cfs-$1.XXXXXX")
export CVM_SCAN=$dir/luns

# BENCH_HALT_POLL_NS=N: on a virtual machine whose idle cores halt through cpuidle-haltpoll,
# they poll N ns first, for the run (put back after): to see what this machine's wake-ups of
# an idle core cost the rows (fuse_path.sh's cores rows print the setting).
halt_param=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_was=
if [ -n "${BENCH_HALT_POLL_NS:-}" ]; then
	if ! [[ $BENCH_HALT_POLL_NS =~ ^[0-9]+$ ]] || [ ! -w "$halt_param" ]; then
		echo "bench/cfs: BENCH_HALT_POLL_NS needs a number of ns and cpuidle-haltpoll's $halt_param (root); unset it to run as the machine is" >&2
		rm -rf "$dir"
		exit 2
	fi
	halt_was=$(cat "$halt_param")
	echo "$BENCH_HALT_POLL_NS" >"$halt_param"
fi

# FUSE over io_uring where the kernel has it: the fuse module's enable_uring is set for the
# run (settings_put_back puts it back; BENCH_URING=0 leaves it alone), and transports lists what
# to measure: dev (/dev/fuse), then io_uring if it was set.
uring_param=/sys/module/fuse/parameters/enable_uring
uring_was=
transports=dev
if [ "${BENCH_URING:-1}" != 0 ] && [ -w "$uring_param" ]; then
	uring_was=$(cat "$uring_param")
	echo Y >"$uring_param"
	transports="dev io_uring"
fi

# What the run changed on the machine, put back (the scripts' EXIT traps call it).
settings_put_back() {
	[ -z "$uring_was" ] || echo "$uring_was" >"$uring_param"
	[ -z "$halt_was" ] || echo "$halt_was" >"$halt_param"
}

# The EXIT trap of a script whose one mount is $dir/cfs: the settings put back, the mount and
# the run's directory gone.
put_back_and_clean() {
	settings_put_back
	mountpoint -q "$dir/cfs" 2>/dev/null && { "$bin/cfs" umount "$dir/cfs" || umount -l "$dir/cfs"; }
	rm -rf "$dir"
}

# new_volume NAME MIB: the CVM volume NAME over four LUN files of MIB MiB in $dir/luns, made
# with mkfs.cfs.  The LUN files are written through, not sparse: a SAN LUN allocates nothing at
# a first write, where a sparse file's filesystem allocates and journals at the next flush.
# That cost cfs's appends (which write where the LUN files were never written) a fifth to a
# quarter: 8 jobs of 8 KiB O_DSYNC appends, 10 s, 4.5k/s on sparse LUN files, 5.9k/s on
# written ones.
new_volume() {
	mkdir -p "$dir/luns"
	for i in 0 1 2 3; do
		dd if=/dev/zero of="$dir/luns/lun$i" bs=1M count="$2" oflag=direct status=none
	done
	"$bin/cvm" create "$1" "$dir"/luns/lun{0,1,2,3} >/dev/null
	"$bin/mkfs.cfs" -L "$1" "$1" >/dev/null 2>&1
}

# mount_as VOLUME DIR OPTIONS TRANSPORT: VOLUME mounted at DIR (unmounted first if it was)
# with OPTIONS (may be empty), its requests through TRANSPORT (checked), logging to
# $dir/cfsd.log.
mount_as() {
	local opts=$3
	[ "$4" = dev ] && opts=$opts${opts:+,}nouring
	if mountpoint -q "$2"; then "$bin/cfs" umount "$2"; fi
	"$bin/cfs" mount "$1" "$2" -o "$opts${opts:+,}log=$dir/cfsd.log"
	"$bin/cfs" status --json "$2" | grep -q "\"fuse_transport\": \"$4\"" ||
		{ echo "bench/cfs: the cfs mount does not use $4" >&2; exit 1; }
}
