#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Opens names with O_CREAT at the same moments as the other nodes do.

    open_create.py DIR ROUNDS START [excl]

Round i opens DIR/c<i> (O_WRONLY|O_CREAT, and O_EXCL with "excl") at START + i * 20 ms, a
time every node was given, so the nodes' opens of one name meet.  Without O_EXCL every open
must succeed, whichever node made the file; with it, a name some other node made must say
EEXIST.  Prints how many files this node made (with O_EXCL) or opened; any other error fails."""
import errno
import os
import sys
import time


def main():
    top, rounds, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    excl = sys.argv[4:] == ["excl"]
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if excl else 0)
    done = 0
    for i in range(rounds):
        wait = start + i * 0.02 - time.time()
        if wait > 0:
            time.sleep(wait)
        try:
            os.close(os.open(f"{top}/c{i}", flags, 0o644))
            done += 1
        except OSError as e:
            if not (excl and e.errno == errno.EEXIST):
                sys.exit(f"open of c{i}: {e}")
    print(f"{'made' if excl else 'opened'} {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
