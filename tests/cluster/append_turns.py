#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Appends to one file through a descriptor each node keeps open, in turns.

    append_turns.py FILE TOKEN ROLE NODES TURNS

The file is opened O_APPEND once; each turn waits for TOKEN (a file outside the cluster
filesystem, so nothing here looks at FILE in between) to say it is this role's turn, appends
one line "ROLE TURN", and passes the token on.  The kernel keeps the size it last saw of FILE,
which the other nodes' appends have passed: each line must still land at the end."""
import os
import sys
import time


def main():
    path, token, role, nodes, turns = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    deadline = time.monotonic() + 120
    for turn in range(role, turns, nodes):
        while True:
            try:
                with open(token) as f:
                    now = f.read().strip()
            except FileNotFoundError:
                now = "0"  # nobody has appended yet
            if now == str(turn):
                break
            if time.monotonic() > deadline:
                sys.exit(f"role {role}: turn {turn} never came")
            time.sleep(0.002)
        os.write(fd, f"{role} {turn}\n".encode())
        with open(token + ".new", "w") as f:
            f.write(str(turn + 1))
        os.replace(token + ".new", token)
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
