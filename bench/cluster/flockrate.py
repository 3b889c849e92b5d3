#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Uncontended lock + unlock pairs per second on one open file: flock(2) LOCK_EX/LOCK_UN, or
(fcntl) an F_SETLKW write lock of the whole file and its F_SETLK unlock.
Usage: flockrate.py FILE PAIRS [flock|fcntl]"""
import fcntl
import os
import sys
import time

fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
n = int(sys.argv[2])
if len(sys.argv) > 3 and sys.argv[3] == "fcntl":
    lock, unlock = (lambda: fcntl.lockf(fd, fcntl.LOCK_EX)), (lambda: fcntl.lockf(fd, fcntl.LOCK_UN))
else:
    lock, unlock = (lambda: fcntl.flock(fd, fcntl.LOCK_EX)), (lambda: fcntl.flock(fd, fcntl.LOCK_UN))
lock()  # warm: the first grant asks the cluster
unlock()
t = time.perf_counter()
for _ in range(n):
    lock()
    unlock()
print(f"{n / (time.perf_counter() - t):.0f}")
