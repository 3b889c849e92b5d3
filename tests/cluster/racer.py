#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Create racer (after ocfs2-test's create_racer): for SECONDS, create, link, rename, unlink,
mkdir and rmdir a small set of names in one directory, at random, as fast as it can.  Run it on
several nodes at once on the same directory.  Expected errors (the name is there, or not, or a
directory is not empty) are part of the game; anything else is printed and counted.  ESTALE is
counted apart: in this version a file another node removed and replaced between this node's
lookup and its operation is gone here (no iopen lock yet), as on NFS.  With RACE_DEPTH=1 in
the environment one name in four is in a directory of that name, so renames also move
directories between parents (test_cfs_multi.sh races at depth 1).

    racer.py DIR SECONDS SEED
"""
import errno
import os
import random
import sys
import time

NAMES = [f"n{i}" for i in range(10)]
EXPECTED = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR,
            errno.EINVAL, errno.EPERM}
DEPTH = int(os.environ.get("RACE_DEPTH", "0"))


def path(top, rnd):
    if DEPTH and rnd.randrange(4) == 0:
        return f"{top}/{rnd.choice(NAMES)}/{rnd.choice(NAMES)}"
    return f"{top}/{rnd.choice(NAMES)}"


def step(top, rnd):
    a, b = path(top, rnd), path(top, rnd)
    op = rnd.randrange(7)
    if op == 0:
        fd = os.open(a, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * rnd.randrange(1, 9000))
        os.close(fd)
    elif op == 1:
        os.link(a, b)
    elif op == 2:
        os.rename(a, b)
    elif op == 3:
        os.unlink(a)
    elif op == 4:
        os.mkdir(a)
    elif op == 5:
        os.rmdir(a)
    else:
        os.symlink("target", a)


def main():
    top, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(seed)
    end = time.time() + seconds
    done = odd = stale = 0
    while time.time() < end:
        try:
            step(top, rnd)
        except OSError as e:
            if e.errno == errno.ESTALE:
                stale += 1
            elif e.errno not in EXPECTED:
                odd += 1
                print(f"unexpected: {e}", file=sys.stderr)
        done += 1
    print(f"operations {done} unexpected errors {odd} stale {stale}")
    return 1 if odd else 0


if __name__ == "__main__":
    sys.exit(main())
