#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""stall.py FILE SECONDS: read and stat FILE in a loop for SECONDS; print the longest time
one read+stat took (a survivor's unrelated work while another node is recovered)."""
import os
import sys
import time

path, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
longest = ops = 0
while time.monotonic() < end:
    t = time.monotonic()
    with open(path, "rb") as f:
        f.read()
    os.stat(path)
    longest = max(longest, time.monotonic() - t)
    ops += 1
print(f"longest stall {longest * 1000:.0f} ms over {ops} reads")
