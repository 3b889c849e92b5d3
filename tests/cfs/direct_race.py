#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Direct I/O racing truncates (tests/cfs/direct_io_checks.sh on one node,
tests/cluster/test_cfs_shared_write.sh across two).

  direct_race.py io PATH SECONDS             8 threads of 4 KiB O_DIRECT reads and writes at
                                             random blocks of PATH's first 8 MiB; any error fails
  direct_race.py truncate PATH SECONDS SIZE  PATH truncated to 4 MiB and grown back to SIZE
                                             bytes, again and again"""
import mmap, os, random, sys, threading, time


def io(path, stop, seed, errors):
    rnd = random.Random(seed)
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    buf.write(os.urandom(4096))
    while time.time() < stop:
        try:
            (os.pwritev if rnd.random() < 0.5 else os.preadv)(fd, [buf], rnd.randrange(2048) * 4096)
        except OSError as e:
            errors.append(e)
    os.close(fd)


def main():
    what, path, stop = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
    if what == "truncate":
        fd = os.open(path, os.O_RDWR)
        while time.time() < stop:
            os.ftruncate(fd, 4 << 20)
            os.ftruncate(fd, int(sys.argv[4]))
        return
    errors = []
    threads = [threading.Thread(target=io, args=(path, stop, i, errors)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


main()
