#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/cfs/fuse_trace.sh: where a 4 KiB direct read's time goes at depth 32 on a dboptimized
# mount through /dev/fuse, traced with perf while fio reads (issue 12's target for that depth
# is 0.9x the raw LUN files; fuse_path.sh gives the rates, this the stages):
#   queue     from the kernel's queueing the request (fuse:fuse_request_send) to a cfsd
#             reader's read of it: time-averaged length of the pending queue over the rate
#             (the queue is known empty whenever a reader blocks in read(2))
#   disk      the LUN files' disk: its time per read (/proc/diskstats; the block tracepoints
#             miss completions)
#   answer    from the completion thread's reaping of a batch to the answer of each request in
#             it (fuse:fuse_request_end): the answers of a batch are written one by one
#   cfsd      the rest of the request's time in FUSE: the mapping, io_submit, the LUN files'
#             filesystem and the completion's wake-up
#   fio       the rest of fio's latency: its io_submit and reaping, and the kernel's aio
# perf's tracing slows the run: the rates are lower than fuse_path.sh's, but the stages are
# those of the traced run.
# Usage: fuse_trace.sh [BUILD]; needs root and perf (Debian: linux-perf).  Env: BENCH_DIR
# (default /var/tmp), BENCH_TIME (s of the traced fio run, default 3), BENCH_HALT_POLL_NS (lib.sh).
build=${1:-build}
if ! command -v perf >/dev/null || ! perf list 2>/dev/null | grep -q fuse:fuse_request_send; then
	echo "bench/cfs/fuse_trace: needs perf (Debian: apt-get install linux-perf) and the fuse module's tracepoints; skipped"
	exit 0
fi
. "$(dirname "$0")/lib.sh" fuse-trace
secs=${BENCH_TIME:-3}
trap put_back_and_clean EXIT
trap 'exit 1' INT TERM # so that the EXIT trap runs when the bench is stopped
mkdir -p "$dir/luns" "$dir/cfs"

new_volume fusetrace 384
mount_as fusetrace "$dir/cfs" dboptimized dev
dd if=/dev/zero of="$dir/cfs/f" bs=1M count=1024 oflag=direct status=none

# fio runs under perf, which traces FUSE requests and cfsd's and fio's system calls machine-wide
# but its own (they would swamp the rest).  The disk's reads come from /proc/diskstats: the
# block tracepoints miss completions.
disk=$(basename "$(df --output=source "$dir" | tail -1)")
diskstats() { awk -v d="$disk" '$3 == d {print $4, $7}' /proc/diskstats; }
disk0=$(diskstats)
sh -c 'not_perf="common_pid != $$"; exec perf record -q -m 4096 -o "$1/calls.data" -a \
	-e fuse:fuse_request_send -e fuse:fuse_request_end \
	-e syscalls:sys_enter_read --filter "$not_perf" -e syscalls:sys_exit_read --filter "$not_perf" \
	-e syscalls:sys_exit_io_getevents --filter "$not_perf" -- \
	fio --name=r --filename="$1/cfs/f" --size=1024M --ioengine=libaio --direct=1 --rw=randread \
	--bs=4k --iodepth=32 --time_based --runtime="$2" --output-format=json --output="$1/fio.json"' \
	sh "$dir" "$secs" 2>/dev/null
disk1=$(diskstats)
perf script -i "$dir/calls.data" -F comm,tid,time,event,trace >"$dir/calls.txt" 2>/dev/null

python3 - "$dir" "$disk0" "$disk1" <<'PY'
import json, re, sys, statistics
d, disk0, disk1 = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
fio = json.load(open(f"{d}/fio.json"))["jobs"][0]["read"]
fio_us, fio_rate = fio["lat_ns"]["mean"] / 1000, fio["iops"]
line = re.compile(r"^\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
unique = re.compile(r"req (\d+)")
sent, fuse_us, answer_us, last_reap = {}, [], [], {}
queued = taken = 0  # READ requests the kernel queued, and cfsd's readers took, since the trace began
offset = None       # queued - taken + offset is the pending queue; known once a reader blocks
entered = {}
area = span = 0.0
prev = None
for raw in open(f"{d}/calls.txt"):
    m = line.match(raw)
    if not m:
        continue
    comm, tid, t, event, rest = m.group(1), m.group(2), float(m.group(3)), m.group(4), m.group(5)
    if prev is not None and offset is not None:
        area += max(queued - taken + offset, 0) * (t - prev)
        span += t - prev
    prev = t
    if event == "fuse:fuse_request_send" and "FUSE_READ" in rest:
        queued += 1
        sent[unique.search(rest).group(1)] = t
    elif event == "fuse:fuse_request_end":
        u = unique.search(rest).group(1)
        if u in sent:
            fuse_us.append((t - sent.pop(u)) * 1e6)
            if tid in last_reap:
                answer_us.append((t - last_reap[tid]) * 1e6)
    elif comm != "cfsd":
        continue
    elif event == "syscalls:sys_enter_read":
        entered[tid] = (t, queued - taken)
    elif event == "syscalls:sys_exit_read" and rest.strip() == "0x50":
        taken += 1      # a READ request's header and fuse_read_in: 80 bytes
        t0, q = entered.pop(tid, (None, None))
        if t0 is not None and t - t0 > 50e-6:
            offset = -q  # the reader slept: the queue was empty when it came
    elif event == "syscalls:sys_exit_io_getevents":
        last_reap[tid] = t
if len(fuse_us) < 1000 or not answer_us or not span:
    sys.exit("bench/cfs/fuse_trace: the trace holds too few events (perf lost them?)")
reads = int(disk1[0]) - int(disk0[0]) if disk0 and disk1 else 0
disk = 1000 * (int(disk1[1]) - int(disk0[1])) / reads if reads else float("nan")
mean = statistics.mean
fuse, answer = mean(fuse_us), mean(answer_us)
queue = area / span / fio_rate * 1e6
print(f"bench/cfs/fuse_trace: 4 KiB O_DIRECT random reads at depth 32 on a dboptimized mount "
      f"through /dev/fuse, traced: {fio_rate:.0f} reads/s, {fio_us:.0f} us each (fio)")
print(f"  queue   {queue:5.0f} us  waiting for a cfsd reader (the pending queue held {area / span:.1f})")
print(f"  cfsd    {fuse - queue - disk - answer:5.0f} us  mapping, io_submit, the LUN files' filesystem, the completion's wake-up")
print(f"  disk    {disk:5.0f} us  the LUN files' disk (/proc/diskstats: {reads} reads)")
print(f"  answer  {answer:5.0f} us  from the reaping of a batch of completions to the request's answer")
print(f"  fio     {fio_us - fuse:5.0f} us  fio and the kernel's aio outside FUSE")
print(f"  requests away from the disk: {(fio_us - disk) * fio_rate / 1e6:.1f} of 32 on average")
PY
"$bin/cfs" umount "$dir/cfs"
