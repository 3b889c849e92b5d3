#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Two nodes write the same bytes of a file at the same moments; each write(2) must stay whole.

    same_bytes.py write DIR NODE START ROUNDS
    same_bytes.py check DIR ROUNDS

Round i writes 8,000 bytes of the node's number at offset 100 of DIR/s<i> (made beforehand,
16 KiB) at START + i * 40 ms, a time both nodes were given.  The write starts inside a page
and crosses two more, so the kernel sends it in two parts.  check fails if a file holds
bytes of both nodes."""
import os
import sys


def write(top, node, start, rounds):
    import time
    for i in range(rounds):
        wait = start + i * 0.04 - time.time()
        if wait > 0:
            time.sleep(wait)
        fd = os.open(f"{top}/s{i}", os.O_WRONLY)
        os.pwrite(fd, str(node).encode() * 8000, 100)
        os.close(fd)
    print(f"wrote {rounds}")
    return 0


def check(top, rounds):
    mixed = 0
    for i in range(rounds):
        with open(f"{top}/s{i}", "rb") as f:
            if len(set(f.read()[100:8100])) != 1:
                mixed += 1
    print(f"{mixed} of {rounds} files hold parts of both writes")
    return 1 if mixed else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        sys.exit(write(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
    sys.exit(check(sys.argv[2], int(sys.argv[3])))
