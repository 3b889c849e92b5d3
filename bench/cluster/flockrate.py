#!/usr/bin/env python3
"""Uncontended flock(2) LOCK_EX + LOCK_UN pairs per second on one open file.
Usage: flockrate.py FILE PAIRS"""
import fcntl
import os
import sys
import time

fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
n = int(sys.argv[2])
fcntl.flock(fd, fcntl.LOCK_EX)  # warm: the first grant asks the cluster
fcntl.flock(fd, fcntl.LOCK_UN)
t = time.perf_counter()
for _ in range(n):
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.flock(fd, fcntl.LOCK_UN)
print(f"{n / (time.perf_counter() - t):.0f}")
