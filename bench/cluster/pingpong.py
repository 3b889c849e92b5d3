#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Two nodes append to one file in turns: ROLE 0 appends on even turns, ROLE 1 on odd ones;
each waits (polling the size) until the other's line is there.  Between two appends of role 0
the file went to the other node and back: half that interval is one hand-off.  Role 0 prints
hand-offs per second and their p50 and p90 in ms.

    pingpong.py FILE ROLE TURNS
"""
import os
import statistics
import sys
import time

LINE = 16


def main():
    path, role, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    handoffs = []
    start = last = time.monotonic()
    for turn in range(turns):
        if turn % 2 != role:
            continue
        while os.stat(path).st_size < turn * LINE:  # the other's line
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, f"{role}:{turn:013d}\n".encode())
        os.close(fd)
        now = time.monotonic()
        if turn >= 2:
            handoffs.append((now - last) / 2)
        last = now
    total = time.monotonic() - start
    if role == 0 and handoffs:
        q = statistics.quantiles(handoffs, n=10)
        print(f"handoffs {turns} in {total:.1f} s: {turns / total:.0f}/s, "
              f"p50 {statistics.median(handoffs) * 1000:.2f} ms, p90 {q[8] * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
