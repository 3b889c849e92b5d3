#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""What one node writes, neither fsync'd nor closed, and what another node must read of it.

    writebehind.py write KIND FILE READY GATE   make KIND's content in FILE (buffered writes,
                                                 no fsync), create READY, then keep FILE open
                                                 until GATE is gone
    writebehind.py read KIND FILE [--mmap]      FILE must hold KIND's content, read by read(2)
                                                 or through a shared mapping
    writebehind.py turns FILE TURNS EVERY DIR   write EVERY records a turn, then create
                                                 DIR/turn<k> and wait for DIR/ack<k>
    writebehind.py follow FILE TURNS EVERY DIR  at each DIR/turn<k>: every record written so
                                                 far must be there; then create DIR/ack<k>
    writebehind.py log FILE FSYNCED MORE STARTED
                                                 FSYNCED records, fsync, MORE records without,
                                                 create STARTED, then wait to be killed
    writebehind.py logged FILE FSYNCED MORE     FILE holds at least the FSYNCED records, then
                                                 only whole records in order

KINDs: pieces (1 MiB and a bit in writes of odd sizes, one after another), small (the same
for 100 KiB and a bit: what a write-back cache hands over at a close in one write), scatter (writes at
random places over each other), append (O_APPEND records), truncate (a file cut short and
written past its new end, leaving a hole)."""
import mmap
import os
import random
import sys
import time

SIZES = [1, 511, 4096, 5000, 65543, 100, 8192, 3]
RECORD = 4000


def pieces(fd, model, size=(1 << 20) + 123):
    data = random.Random(1).randbytes(size)
    at = 0
    for k in range(10**6):
        if at >= len(data):
            break
        n = SIZES[k % len(SIZES)]
        os.pwrite(fd, data[at:at + n], at)
        at += n
    model[:] = data


def small(fd, model):
    pieces(fd, model, (100 << 10) + 123)


def scatter(fd, model):
    rnd = random.Random(2)
    model[:] = bytes(256 << 10)
    os.ftruncate(fd, len(model))
    for _ in range(300):
        n = rnd.randrange(1, 20000)
        at = rnd.randrange(0, len(model) - n)
        b = rnd.randbytes(n)
        os.pwrite(fd, b, at)
        model[at:at + n] = b


def record(i):
    return (f"{i:08d} " + chr(97 + i % 26) * (RECORD - 10) + "\n").encode()


def append(path, model):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    for i in range(100):
        os.write(fd, record(i))
        model += record(i)
    return fd


def truncate(fd, model):
    data = random.Random(3).randbytes(200000)
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, 70001)
    os.pwrite(fd, b"past the end", 150000)
    model[:] = data[:70001] + bytes(150000 - 70001) + b"past the end"


KINDS = {"pieces": pieces, "small": small, "scatter": scatter, "truncate": truncate}


def write(kind, path, ready, gate):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    model = bytearray()
    if kind == "append":
        keep = append(path, model)
    else:
        KINDS[kind](fd, model)
        keep = fd
    open(ready, "w").close()
    while os.path.exists(gate):
        time.sleep(0.05)
    os.close(keep)
    if keep != fd:
        os.close(fd)


def expected(kind):
    model = bytearray()
    if kind == "append":
        for i in range(100):
            model += record(i)
        return bytes(model)
    import tempfile
    with tempfile.TemporaryDirectory() as d:  # the same writes on a local file
        fd = os.open(os.path.join(d, "f"), os.O_RDWR | os.O_CREAT)
        KINDS[kind](fd, model)
        os.close(fd)
    return bytes(model)


def read(kind, path, use_mmap):
    want = expected(kind)
    with open(path, "rb") as f:
        if use_mmap:
            with mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ) as m:
                got = bytes(m)
        else:
            got = f.read()
    if got != want:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                     min(len(got), len(want)))
        sys.exit(f"{kind}: read {len(got)} bytes, want {len(want)}; first difference at "
                 f"byte {first}")
    print(f"{kind}: {len(got)} bytes as written")


def wait_for(path):
    for _ in range(6000):
        if os.path.exists(path):
            return
        time.sleep(0.02)
    sys.exit(f"{path} did not come within 120 s")


def turns(path, count, every, d):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    i = 0
    for k in range(count):
        for _ in range(every):
            os.pwrite(fd, record(i), i * RECORD)
            i += 1
        open(os.path.join(d, f"turn{k}"), "w").close()
        wait_for(os.path.join(d, f"ack{k}"))
    os.close(fd)


def follow(path, count, every, d):
    for k in range(count):
        wait_for(os.path.join(d, f"turn{k}"))
        n = (k + 1) * every
        with open(path, "rb") as f:
            got = f.read()
        want = b"".join(record(i) for i in range(n))
        if got != want:
            sys.exit(f"turn {k}: read {len(got)} bytes, want the {n} records written so far")
        open(os.path.join(d, f"ack{k}"), "w").close()
    print(f"{count} turns: every record written before each was read")


def log(path, fsynced, more, started):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(fsynced):
        os.write(fd, record(i))
    os.fsync(fd)
    for i in range(fsynced, fsynced + more):
        os.write(fd, record(i))
    open(started, "w").close()
    time.sleep(600)


def logged(path, fsynced, more):
    with open(path, "rb") as f:
        got = f.read()
    n = len(got) // RECORD
    if len(got) % RECORD or n < fsynced or n > fsynced + more:
        sys.exit(f"{len(got)} bytes: not {fsynced} to {fsynced + more} whole records")
    for i in range(n):
        if got[i * RECORD:(i + 1) * RECORD] != record(i):
            sys.exit(f"record {i} of {n} is not as written")
    print(f"{n} whole records ({fsynced} fsync'd)")


def main():
    a = sys.argv[1:]
    if a[0] == "write":
        write(a[1], a[2], a[3], a[4])
    elif a[0] == "read":
        read(a[1], a[2], "--mmap" in a)
    elif a[0] in ("turns", "follow"):
        (turns if a[0] == "turns" else follow)(a[1], int(a[2]), int(a[3]), a[4])
    elif a[0] == "log":
        log(a[1], int(a[2]), int(a[3]), a[4])
    elif a[0] == "logged":
        logged(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit(__doc__)


main()
