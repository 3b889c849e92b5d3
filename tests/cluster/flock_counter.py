#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Increment a counter file N times under a lock of a lock file, as cooperating processes on
several nodes do: lock, open the counter (close-to-open: an open after the lock sees the last
holder's closed write), read, write the next value, close, unlock.  KIND: flock (flock(2),
the default) or fcntl (F_SETLKW on the whole file, released with F_SETLK F_UNLCK).
Usage: flock_counter.py LOCKFILE COUNTER N [KIND]"""
import fcntl
import os
import sys

lockfile, counter, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
kind = sys.argv[4] if len(sys.argv) > 4 else "flock"
lock, unlock = {"flock": (lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
                          lambda fd: fcntl.flock(fd, fcntl.LOCK_UN)),
                "fcntl": (lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX),
                          lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN))}[kind]
fd = os.open(lockfile, os.O_RDWR | os.O_CREAT, 0o644)
for _ in range(n):
    lock(fd)
    with open(counter, "r+") as f:
        value = int(f.read() or "0")
        f.seek(0)
        f.write("%d\n" % (value + 1))
    unlock(fd)
os.close(fd)
print("incremented %d times" % n)
