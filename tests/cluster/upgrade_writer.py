#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Files whose content follows from their name, for the upgrade tests.

    upgrade_writer.py write DIR LIST STOP [COUNT]
                                              write DIR/<n> (n = 0, 1, ...), each fsync'd, its
                                              name appended to LIST once durable, until the
                                              file STOP exists (or COUNT are written); exit 1
                                              at the first error
    upgrade_writer.py verify ROOT LIST...     every name in the LISTs (relative to ROOT) reads
                                              back whole; prints how many, exit 1 if any is not

Each file is 1 KiB to 16 KiB of a pattern seeded by its path under ROOT, so a file read back
whole and right proves that the node that reads it sees what the node that wrote it wrote,
whatever releases the two run.  A writer writes some 10 a second, so that a test's volume
holds what it writes for as long as the test runs.
"""
import hashlib
import os
import sys
import time


def content(rel):
    seed = hashlib.sha256(rel.encode()).digest()
    size = 1024 + int.from_bytes(seed[:4], "little") % (15 * 1024)
    block = hashlib.sha256(seed + b"block").digest() * 128  # 4 KiB
    return (block * (size // len(block) + 1))[:size]


def write(top, listing, stop, count=None):
    os.makedirs(top, exist_ok=True)
    root = os.path.dirname(top)
    n = 0
    while not os.path.exists(stop) and (count is None or n < count):
        path = os.path.join(top, str(n))
        rel = os.path.relpath(path, root)
        try:
            with open(path, "wb") as f:
                f.write(content(rel))
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            print(f"upgrade_writer: {path}: {e}", file=sys.stderr)
            return 1
        with open(listing, "a") as f:
            f.write(rel + "\n")
        n += 1
        time.sleep(0.1)
    print(f"wrote {n}")
    return 0


def verify(root, listings):
    bad = checked = 0
    for listing in listings:
        if not os.path.exists(listing):  # its writer has not made a file yet
            continue
        with open(listing) as f:
            for rel in f.read().split():
                checked += 1
                try:
                    with open(os.path.join(root, rel), "rb") as g:
                        ok = g.read() == content(rel)
                except OSError as e:
                    print(f"{rel}: {e}", file=sys.stderr)
                    ok = False
                if not ok:
                    bad += 1
                    if bad <= 5:
                        print(f"{rel}: not what was written", file=sys.stderr)
    print(f"checked {checked}, bad {bad}")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        sys.exit(write(sys.argv[2], sys.argv[3], sys.argv[4],
                       int(sys.argv[5]) if len(sys.argv) > 5 else None))
    sys.exit(verify(sys.argv[2], sys.argv[3:]))
