#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""fcntl(2) record locks from the shell, for the cluster tests.
  plock_tool.py hold FILE START LEN r|w READY RELEASE   F_SETLKW, touch READY, hold until
                                                       RELEASE exists, then exit (no unlock)
  plock_tool.py try FILE START LEN r|w                  F_SETLK: prints granted or busy
  plock_tool.py get FILE START LEN r|w                  F_GETLK: prints unlocked, or
                                                       "r|w START LEN PID" of the holder
  plock_tool.py interrupted FILE                        F_SETLKW of the whole file, SIGALRM
                                                       after 2 s: prints interrupted or granted
  plock_tool.py cross FILE WANTED READY GO              F_SETLKW of the whole FILE, touch READY,
                                                       wait until GO exists, then F_SETLKW of
                                                       the whole WANTED: prints granted, or
                                                       deadlock (EDEADLK); exits (no unlock)
LEN 0 means to the end of the file.  Kinds ow and or: open file description locks
(F_OFD_SETLK, F_OFD_SETLKW), which belong to the open file, not the process."""
import errno
import fcntl
import os
import signal
import struct
import sys
import time

TYPES = {"r": fcntl.F_RDLCK, "w": fcntl.F_WRLCK, "or": fcntl.F_RDLCK, "ow": fcntl.F_WRLCK}


def setlk(kind, wait):
    if kind.startswith("o"):
        return fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
    return fcntl.F_SETLKW if wait else fcntl.F_SETLK


def flock_struct(kind, start, length):
    # struct flock on x86_64/aarch64 Linux: short l_type, short l_whence, off_t l_start,
    # off_t l_len, pid_t l_pid (padded)
    return struct.pack("hhqqi4x", TYPES.get(kind, fcntl.F_UNLCK), os.SEEK_SET, start, length, 0)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    fd = os.open(path, os.O_RDWR)
    if cmd == "hold":
        start, length, kind, ready, release = sys.argv[3:8]
        fcntl.fcntl(fd, setlk(kind, True), flock_struct(kind, int(start), int(length)))
        open(ready, "w").close()
        while not os.path.exists(release):
            time.sleep(0.05)
    elif cmd == "try":
        start, length, kind = sys.argv[3:6]
        try:
            fcntl.fcntl(fd, setlk(kind, False), flock_struct(kind, int(start), int(length)))
            print("granted")
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            print("busy")
    elif cmd == "get":
        start, length, kind = sys.argv[3:6]
        out = fcntl.fcntl(fd, fcntl.F_GETLK, flock_struct(kind, int(start), int(length)))
        t, _, s, n, pid = struct.unpack("hhqqi4x", out)
        print("unlocked" if t == fcntl.F_UNLCK else
              "%s %d %d %d" % ("r" if t == fcntl.F_RDLCK else "w", s, n, pid))
    elif cmd == "cross":
        wanted, ready, go = sys.argv[3:6]
        fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct("w", 0, 0))
        open(ready, "w").close()
        while not os.path.exists(go):
            time.sleep(0.02)
        other = os.open(wanted, os.O_RDWR)
        try:
            fcntl.fcntl(other, fcntl.F_SETLKW, flock_struct("w", 0, 0))
            print("granted")
        except OSError as e:
            if e.errno != errno.EDEADLK:
                raise
            print("deadlock")
    elif cmd == "interrupted":
        def alarm(*_):
            raise InterruptedError()
        signal.signal(signal.SIGALRM, alarm)
        signal.alarm(2)
        try:
            fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct("w", 0, 0))
            print("granted")
        except InterruptedError:
            print("interrupted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
