#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Times in the order things were made (generic/423 in small), on a mount whose times cfsd
stamps (nowriteback: with the write-back cache the kernel stamps buffered writes itself, from
its own clock, sometimes a tick behind, sometimes exact, so no clock of the daemon's orders
its stamps against the kernel's: a FUSE limit, cfs(8)):

  time_order.py DIR ROUNDS   (DIR is made, and removed at the end)

Each round makes, one after another and as fast as it can, a fifo, a character device, a
directory, a file written with buffered writes, a symlink and a hard link; then each one's mtime must be no earlier than the
one made before it, and no later than its own ctime.  Exit 1 naming the first pair out of
order."""
import os, stat, sys


def made(top):
    """The objects of one round, in the order they are made."""
    os.mkdir(top)
    paths = [os.path.join(top, n) for n in ('fifo', 'null', 'dir', 'file', 'sym')]
    os.mkfifo(paths[0], 0o600)
    os.mknod(paths[1], 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.mkdir(paths[2])
    with open(paths[3], 'wb') as f:
        for _ in range(20):
            f.write(b'\0' * 1024)
    os.symlink(paths[3] + '-nowhere', paths[4])
    return paths


def main(top, rounds):
    os.mkdir(top)
    for r in range(rounds):
        d = os.path.join(top, f'round{r}')
        paths = made(d)
        before = None
        for p in paths:
            st = os.lstat(p)
            if st.st_mtime_ns > st.st_ctime_ns:
                sys.exit(f'round {r}: {p}: mtime {st.st_mtime_ns} after ctime {st.st_ctime_ns}')
            if before and st.st_mtime_ns < before[1]:
                sys.exit(f'round {r}: {p}: mtime {st.st_mtime_ns} before that of {before[0]}, '
                         f'made before it ({before[1]})')
            before = (p, st.st_mtime_ns)
        os.link(paths[3], paths[3] + '-link')
        st, link = os.lstat(paths[3]), os.lstat(paths[4])
        if st.st_ctime_ns < link.st_mtime_ns:
            sys.exit(f'round {r}: the link\'s ctime {st.st_ctime_ns} before the symlink\'s mtime '
                     f'{link.st_mtime_ns}, made before it')
        for p in (paths[3] + '-link', *paths):
            (os.rmdir if os.path.isdir(p) and not os.path.islink(p) else os.unlink)(p)
        os.rmdir(d)
    os.rmdir(top)


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]))
