#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Random operations of every kind a mount serves, for tests/cfs/soak.sh: buffered, direct and
asynchronous (libaio) writes, reads, fallocate (plain, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE),
truncate, small and large xattrs, access and default ACLs, files unlinked while open, renames,
links, directories.  It checks nothing itself: fsck.cfs after the unmount does.  Errors the
random choices cause (ENOENT, ENOTEMPTY, ...) are expected and skipped; EIO is not.
Usage: soak_workload.py DIR STEPS SEED"""
import ctypes, errno, mmap, os, random, struct, sys

from libaio import Aio

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
KEEP, PUNCH, ZERO = 0x01, 0x02, 0x10
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 1, 2, 4, 0x10, 0x20


def acl(extra_user):
    entries = [(ACL_USER_OBJ, 7, 0xFFFFFFFF), (ACL_GROUP_OBJ, 5, 0xFFFFFFFF), (ACL_OTHER, 4, 0xFFFFFFFF)]
    if extra_user:
        entries += [(ACL_USER, 6, 65534), (ACL_MASK, 7, 0xFFFFFFFF)]
    entries.sort(key=lambda e: (e[0], e[2]))
    return struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in entries)


class Workload:
    def __init__(self, root, seed):
        self.root, self.rnd = root, random.Random(seed)
        self.aio = Aio()
        self.held = []  # fds of files unlinked while open, closed later

    def path(self):
        r = self.rnd
        depth = r.choice([1, 1, 1, 2, 2, 3])
        return os.path.join(self.root, *[r.choice('abcde') for _ in range(depth)])

    def aligned(self, nblocks):
        b = mmap.mmap(-1, 4096 * nblocks)
        b.write(self.rnd.randbytes(4096 * nblocks))
        return b

    def op(self):
        r = self.rnd
        p, q = self.path(), self.path()
        off = r.choice([0, 1, 4095, 4096, 65536, 1 << 20, 3 << 20])
        n = r.choice([1, 100, 4096, 8192, 70000, 1 << 20])
        ops = [self.write, self.write_direct, self.write_aio, self.read, self.falloc,
               self.truncate, self.xattr, self.acl, self.unlink_open, self.rename, self.link,
               self.mkdir, self.rmdir, self.unlink, self.close_held, self.fragment]
        fn = r.choice(ops)
        fn(p, q, off, n)
        return fn.__name__

    def write(self, p, q, off, n):
        with open(p, 'r+b' if os.path.exists(p) else 'wb') as f:
            f.seek(off)
            f.write(self.rnd.randbytes(n))
            if self.rnd.random() < 0.2:
                os.fsync(f.fileno())

    def write_direct(self, p, q, off, n):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            os.pwritev(fd, [self.aligned(self.rnd.randint(1, 8))], off // 4096 * 4096)
        finally:
            os.close(fd)

    def write_aio(self, p, q, off, n):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            k = self.rnd.randint(1, 8)
            self.aio.write(fd, [self.aligned(1) for _ in range(k)],
                           [off // 4096 * 4096 + 4096 * self.rnd.randint(0, 64) for _ in range(k)])
        finally:
            os.close(fd)

    def fragment(self, p, q, off, n):
        """Enough scattered blocks (written, fallocated or punched out) that the extent map
        overflows the inode into map blocks, or shrinks back."""
        r = self.rnd
        fd = os.open(p, os.O_RDWR | os.O_CREAT | (os.O_DIRECT if r.random() < 0.5 else 0), 0o644)
        try:
            block = self.aligned(1)
            for _ in range(r.randint(50, 300)):
                at = 4096 * 2 * r.randrange(2048)
                kind = r.random()
                if kind < 0.6:
                    os.pwritev(fd, [block], at)
                elif kind < 0.8:
                    libc.fallocate(fd, KEEP, at, 4096)
                else:
                    libc.fallocate(fd, PUNCH | KEEP, at, 4096 * r.randint(1, 64))
        finally:
            os.close(fd)

    def read(self, p, q, off, n):
        with open(p, 'rb') as f:
            f.seek(off)
            f.read(n)

    def falloc(self, p, q, off, n):
        mode = self.rnd.choice([0, KEEP, PUNCH | KEEP, ZERO, ZERO | KEEP])
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if libc.fallocate(fd, mode, off, n) != 0:
                raise OSError(ctypes.get_errno(), 'fallocate')
        finally:
            os.close(fd)

    def truncate(self, p, q, off, n):
        os.truncate(p, self.rnd.choice([0, 1, 4096, 5000, off + n]))

    def xattr(self, p, q, off, n):
        name = self.rnd.choice(['user.a', 'user.b', 'user.big'])
        if self.rnd.random() < 0.3:
            os.removexattr(p, name)
        else:
            os.setxattr(p, name, self.rnd.randbytes(self.rnd.choice([1, 100, 1000, 3000])))

    def acl(self, p, q, off, n):
        r = self.rnd.random()
        if r < 0.2:
            os.removexattr(p, 'system.posix_acl_access')
        elif r < 0.4 and os.path.isdir(p):
            os.setxattr(p, 'system.posix_acl_default', acl(True))
        else:
            os.setxattr(p, 'system.posix_acl_access', acl(self.rnd.random() < 0.7))

    def unlink_open(self, p, q, off, n):
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, self.rnd.randbytes(n), off)
        os.unlink(p)
        self.held.append(fd)

    def close_held(self, p, q, off, n):
        if self.held:
            os.close(self.held.pop(self.rnd.randrange(len(self.held))))

    def rename(self, p, q, off, n):
        os.rename(p, q)

    def link(self, p, q, off, n):
        os.link(p, q)

    def mkdir(self, p, q, off, n):
        os.mkdir(p)

    def rmdir(self, p, q, off, n):
        os.rmdir(p)

    def unlink(self, p, q, off, n):
        os.unlink(p)


def main():
    root, steps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    w = Workload(root, seed)
    done = {}
    for i in range(steps):
        try:
            name = w.op()
            done[name] = done.get(name, 0) + 1
        except OSError as e:
            if e.errno in (errno.EIO, errno.ESTALE, errno.EFAULT):
                raise SystemExit(f'step {i}: {e}')
    while w.held:
        os.close(w.held.pop())
    print('done:', ' '.join(f'{k} {v}' for k, v in sorted(done.items())))


if __name__ == '__main__':
    main()
