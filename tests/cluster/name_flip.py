#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A name renamed back and forth on one node, looked up over and over on another: the looking
node must see each rename as soon as the renaming node's rename has returned.

    name_flip.py flip DIR SYNC ROUNDS GAP   rename DIR/x to DIR/y and back, ROUNDS times, GAP
                                            seconds apart; after each, write the round's number
                                            to SYNC/done and wait for it in SYNC/seen
    name_flip.py watch DIR SYNC ROUNDS      look up DIR/x and DIR/y in a loop (the kernel keeps
                                            the names it may); at each number in SYNC/done,
                                            check at once which of the two exists, write the
                                            number to SYNC/seen; exit 1 if any was wrong

SYNC is a directory outside the filesystem under test, seen by both nodes.
"""
import os
import sys
import time


def read_number(path):
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return -1


def write_number(path, n):
    with open(path + ".new", "w") as f:
        f.write(str(n))
    os.rename(path + ".new", path)


def flip(d, sync, rounds, gap):
    for k in range(rounds):
        time.sleep(gap)
        src, dst = ("x", "y") if k % 2 == 0 else ("y", "x")
        os.rename(f"{d}/{src}", f"{d}/{dst}")
        write_number(f"{sync}/done", k)
        while read_number(f"{sync}/seen") < k:
            time.sleep(0.001)
    return 0


def watch(d, sync, rounds):
    wrong = 0
    for k in range(rounds):
        while read_number(f"{sync}/done") < k:
            os.path.exists(f"{d}/x")
            os.path.exists(f"{d}/y")
        seen = (os.path.exists(f"{d}/x"), os.path.exists(f"{d}/y"))
        want = (k % 2 == 1, k % 2 == 0)
        if seen != want:
            wrong += 1
            print(f"round {k}: x exists {seen[0]}, y exists {seen[1]}, after the rename "
                  f"{'x to y' if k % 2 == 0 else 'y to x'}")
        write_number(f"{sync}/seen", k)
    print(f"{rounds} renames, {wrong} seen late")
    return 1 if wrong else 0


if __name__ == "__main__":
    if sys.argv[1] == "flip":
        sys.exit(flip(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    sys.exit(watch(sys.argv[2], sys.argv[3], int(sys.argv[4])))
