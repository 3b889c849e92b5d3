#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Records appended to one file by several nodes at once, each by one write(2) through O_APPEND.

    append_records.py write FILE NODE COUNT
    append_records.py check FILE NODES COUNT

Record i of node n is "n i " and a run of x's (0 to 8,999 of them, so records cross pages)
and a newline.  check reads FILE back: every node's COUNT records, each whole, each once,
each node's in the order it wrote them; prints what it found and fails on anything else."""
import os
import re
import sys


def record(node, i):
    return f"{node} {i} {'x' * (i * 7919 % 9000)}\n"


def write(path, node, count):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for i in range(count):
        data = record(node, i).encode()
        if os.write(fd, data) != len(data):
            sys.exit(f"node {node}: a short write of record {i}")
    os.close(fd)
    print(f"appended {count}")
    return 0


def describe(line, at):
    """What a bad line holds and where, to tell a torn write from zeros written over data."""
    starts = [m.start() for m in re.finditer(r"[1-9] [0-9]+ ", line)]
    zeros = line.find("\0")
    where = f"{line.count(chr(0))} zero bytes from byte {at + zeros}" if zeros >= 0 else "no zeros"
    return f"{line[:40]!r} at byte {at}, {len(line)} bytes, records start at {starts[:4]}, {where}"


def check(path, nodes, count):
    with open(path, "rb") as f:
        lines = f.read().decode("latin-1").split("\n")[:-1]
    last = {n: -1 for n in range(1, nodes + 1)}
    bad = 0
    at = 0  # the line's byte offset in the file
    for line in lines:
        parts = line.split(" ")
        try:
            node, i = int(parts[0]), int(parts[1])
            whole = len(parts) == 3 and line + "\n" == record(node, i) and i == last[node] + 1
        except (ValueError, KeyError, IndexError):
            whole = False
        if whole:
            last[node] = i
        else:
            bad += 1
            if bad <= 3:
                print(f"not a whole record in its place: {describe(line, at)}", file=sys.stderr)
        at += len(line) + 1
    print(f"{len(lines)} lines, {bad} not whole or out of order")
    return 0 if bad == 0 and all(i == count - 1 for i in last.values()) else 1


if __name__ == "__main__":
    what, path, n, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.exit(write(path, n, count) if what == "write" else check(path, n, count))
