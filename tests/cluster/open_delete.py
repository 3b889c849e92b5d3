#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Hold a file open while another node removes it, then read and write on (open delete).

open_delete.py FILE FLAG: opens FILE read-write, creates FLAG.opened, waits for FLAG.removed,
reads the whole file (prints "read SHA256"), appends 1 MB after it, fsyncs, reads it back
(prints "wrote ok|bad NLINK"), creates FLAG.written, waits for FLAG.close, closes.
"""
import hashlib
import os
import sys
import time


def wait(flag, name):
    while not os.path.exists(flag + "." + name):
        time.sleep(0.05)


def main():
    path, flag = sys.argv[1], sys.argv[2]
    fd = os.open(path, os.O_RDWR)
    size = os.fstat(fd).st_size
    open(flag + ".opened", "w").close()
    wait(flag, "removed")
    print("read", hashlib.sha256(os.pread(fd, size, 0)).hexdigest(), flush=True)
    more = b"z" * 1000000
    os.pwrite(fd, more, size)
    os.fsync(fd)
    back = os.pread(fd, len(more), size)
    print("wrote", "ok" if back == more else "bad", os.fstat(fd).st_nlink, flush=True)
    open(flag + ".written", "w").close()
    wait(flag, "close")
    os.close(fd)


main()
