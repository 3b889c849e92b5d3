#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""aio_cycle.py FILE CYCLES READERS: xfstests' generic/451 in small.  READERS processes read
FILE through the page cache over and over; meanwhile CYCLES times a new byte fills 640 KiB
written with an asynchronous (Linux AIO) O_DIRECT write, and once it completes a buffered
read must return it, not what the readers cached before.  Exit 1 naming the first stale byte.
The AIO system calls are made directly (x86_64 numbers), without libaio."""
import ctypes, mmap, multiprocessing, os, sys

SIZE = 655360
IO_SETUP, IO_GETEVENTS, IO_SUBMIT = 206, 208, 209
IOCB_CMD_PWRITE = 1
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class Iocb(ctypes.Structure):
    _fields_ = [('data', ctypes.c_uint64), ('key', ctypes.c_uint32), ('rw_flags', ctypes.c_uint32),
                ('opcode', ctypes.c_uint16), ('reqprio', ctypes.c_int16), ('fildes', ctypes.c_uint32),
                ('buf', ctypes.c_uint64), ('nbytes', ctypes.c_uint64), ('offset', ctypes.c_int64),
                ('reserved2', ctypes.c_uint64), ('flags', ctypes.c_uint32), ('resfd', ctypes.c_uint32)]


class Event(ctypes.Structure):
    _fields_ = [('data', ctypes.c_uint64), ('obj', ctypes.c_uint64), ('res', ctypes.c_int64),
                ('res2', ctypes.c_int64)]


def call(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *args)
    if rc < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return rc


def reader(path, stop):
    while not stop.is_set():
        with open(path, 'rb') as f:
            f.read(SIZE)


def main():
    path, cycles, nreaders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, SIZE)  # page-aligned, as O_DIRECT wants
    ctx = ctypes.c_ulong(0)
    call(IO_SETUP, ctypes.c_uint(1), ctypes.byref(ctx))
    stop = multiprocessing.Event()
    readers = [multiprocessing.Process(target=reader, args=(path, stop)) for _ in range(nreaders)]
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    try:
        for p in readers:
            p.start()
        for c in range(cycles):
            want = bytes([ord('a') + c % 26])
            buf[:] = want * SIZE
            cb = Iocb(opcode=IOCB_CMD_PWRITE, fildes=fd, buf=addr, nbytes=SIZE, offset=0)
            cbs = (ctypes.POINTER(Iocb) * 1)(ctypes.pointer(cb))
            call(IO_SUBMIT, ctx, ctypes.c_long(1), cbs)
            ev = Event()
            call(IO_GETEVENTS, ctx, ctypes.c_long(1), ctypes.c_long(1), ctypes.byref(ev), None)
            if ev.res != SIZE:
                sys.exit(f'cycle {c}: the write returned {ev.res}')
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
    print(f'{cycles} cycles: every buffered read after a completed write read it')


if __name__ == '__main__':
    main()
