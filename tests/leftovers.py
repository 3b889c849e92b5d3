#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""leftovers.py DIR [--kill]: what a test script left behind under its scratch directory DIR,
one line each: processes whose command line, working directory or open files name DIR (a
daemon that outlived its test, a LUN file's lock still held by an open description), mounts
under DIR and loop devices over files there.  Exit 0 when nothing is left, 1 otherwise.
With --kill, the processes are killed (-9), the mounts lazily unmounted and the loop devices
detached after they are listed, so that the next script starts clean.  Run by tests/run.sh
after every script; namespaces, network links and ODM segments it checks itself."""
import os
import signal
import subprocess
import sys


def names_dir(pid, top):
    """Why the process pid is about top, or None."""
    base = f"/proc/{pid}"
    try:
        cmd = open(f"{base}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if top in cmd:
        return cmd.strip()
    try:
        if os.readlink(f"{base}/cwd").startswith(top):
            return f"{cmd.strip()} (working directory there)"
        for fd in os.listdir(f"{base}/fd"):
            target = os.readlink(f"{base}/fd/{fd}")
            if target.startswith(top):
                return f"{cmd.strip()} (holds {target} open)"
    except OSError:
        pass
    return None


def processes(top):
    me = {os.getpid(), os.getppid()}
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in me:
            why = names_dir(int(entry), top)
            if why is not None:
                found.append((int(entry), why))
    return found


def mounts(top):
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(top):
                found.append(point)
    return sorted(found, reverse=True)


def loops(top):
    """Loop devices whose backing file is under top."""
    found = []
    for dev in sorted(os.listdir("/sys/block")):
        try:
            backing = open(f"/sys/block/{dev}/loop/backing_file").read().strip()
        except OSError:
            continue
        if backing.startswith(top):
            found.append((f"/dev/{dev}", backing))
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: leftovers.py DIR [--kill]")
    top = os.path.realpath(sys.argv[1])
    kill = "--kill" in sys.argv[2:]
    procs, points, devs = processes(top), mounts(top), loops(top)
    for pid, why in procs:
        print(f"process {pid}: {why}")
    for point in points:
        print(f"mount {point}")
    for dev, backing in devs:
        print(f"loop device {dev} over {backing}")
    if kill:
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for point in points:
            subprocess.run(["umount", "-l", point], stderr=subprocess.DEVNULL)
        for dev, _ in devs:
            subprocess.run(["losetup", "-d", dev], stderr=subprocess.DEVNULL)
    sys.exit(1 if procs or points or devs else 0)


if __name__ == "__main__":
    main()
