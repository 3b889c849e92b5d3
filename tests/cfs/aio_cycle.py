#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""aio_cycle.py FILE CYCLES READERS: xfstests' generic/451 in small.  READERS processes read
FILE through the page cache over and over; meanwhile CYCLES times a new byte fills 640 KiB
written with an asynchronous (Linux AIO) O_DIRECT write, and once it completes a buffered
read must return it, not what the readers cached before.  Exit 1 naming the first stale byte."""
import mmap, multiprocessing, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from libaio import Aio  # noqa: E402

SIZE = 655360


def reader(path, stop):
    while not stop.is_set():
        with open(path, 'rb') as f:
            f.read(SIZE)


def main():
    path, cycles, nreaders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, SIZE)  # page-aligned, as O_DIRECT wants
    aio = Aio(1)
    stop = multiprocessing.Event()
    readers = [multiprocessing.Process(target=reader, args=(path, stop)) for _ in range(nreaders)]
    try:
        for p in readers:
            p.start()
        for c in range(cycles):
            want = bytes([ord('a') + c % 26])
            buf[:] = want * SIZE
            aio.write(fd, [buf], [0])
            with open(path, 'rb') as f:
                got = f.read(SIZE)
            if got != want * SIZE:
                at = next(i for i in range(SIZE) if got[i:i + 1] != want)
                sys.exit(f'cycle {c}: a buffered read after the write completed returned '
                         f'{got[at:at + 1]!r} at byte {at}, not {want!r}')
    finally:
        stop.set()
        for p in readers:
            p.join()
        aio.close()
    print(f'{cycles} cycles: every buffered read after a completed write read it')


if __name__ == '__main__':
    main()
