#!/usr/bin/env python3
"""Increment a counter file N times under flock(2) of a lock file, as cooperating processes
on several nodes do: lock, open the counter (close-to-open: an open after the lock sees the
last holder's closed write), read, write the next value, close, unlock.
Usage: flock_counter.py LOCKFILE COUNTER N"""
import fcntl
import os
import sys

lockfile, counter, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(lockfile, os.O_RDWR | os.O_CREAT, 0o644)
for _ in range(n):
    fcntl.flock(fd, fcntl.LOCK_EX)
    with open(counter, "r+") as f:
        value = int(f.read() or "0")
        f.seek(0)
        f.write("%d\n" % (value + 1))
    fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
print("incremented %d times" % n)
