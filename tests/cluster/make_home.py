#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Make a tree shaped like a shared Oracle home: FILES small files in nested directories,
some executable, symbolic links (to files and directories, some dangling) and hard links, and
a bin/ of real programs copied from this machine.  Deterministic for a given seed.

    make_home.py DIR FILES SEED
"""
import os
import random
import shutil
import sys


def main():
    top, files, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(seed)
    dirs = [top]
    os.makedirs(top, exist_ok=True)
    made = []
    for i in range(files):
        if i % 40 == 0:  # a new directory under one we have
            d = os.path.join(rnd.choice(dirs), f"dir{len(dirs)}")
            os.mkdir(d)
            dirs.append(d)
        path = os.path.join(rnd.choice(dirs), f"file{i}")
        with open(path, "wb") as f:
            f.write(rnd.randbytes(rnd.choice([0, 17, 300, 4096, 5000, 20000])))
        os.chmod(path, 0o755 if i % 7 == 0 else 0o644)
        made.append(path)
    for i in range(files // 50):
        target = rnd.choice(made)
        os.symlink(os.path.relpath(target, os.path.dirname(target)),
                   os.path.join(os.path.dirname(target), f"sym{i}"))
        os.link(rnd.choice(made), os.path.join(rnd.choice(dirs), f"hard{i}"))
    os.symlink("nowhere/at/all", os.path.join(top, "dangling"))
    os.symlink("dir1", os.path.join(top, "dirlink"))
    bin_dir = os.path.join(top, "bin")
    os.mkdir(bin_dir)
    for prog in ("true", "env", "sha256sum"):
        shutil.copy2(shutil.which(prog), bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
