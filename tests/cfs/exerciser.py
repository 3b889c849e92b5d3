#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Apply the same random file operations to two directory trees (CFS and a tmpfs twin) and
check after every step that both give the same result or the same error, and every 100 steps
that the trees hold the same names, types, modes, link counts, sizes, contents, symlink
targets and xattrs.  Usage: exerciser.py CFS_DIR TWIN_DIR STEPS [SEED]"""
import errno, hashlib, os, random, stat, sys


def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            kind = stat.S_IFMT(st.st_mode)
            item = [kind, stat.S_IMODE(st.st_mode)]
            if stat.S_ISREG(kind):
                item += [st.st_nlink, st.st_size, hashlib.sha256(open(p, 'rb').read()).hexdigest()]
            elif stat.S_ISLNK(kind):
                item.append(os.readlink(p))
            if not stat.S_ISLNK(kind):
                item.append(sorted((k, os.getxattr(p, k)) for k in os.listxattr(p) if k.startswith('user.')))
            out[rel] = item
    return out


class Exerciser:
    def __init__(self, roots, seed):
        self.roots = roots
        self.rnd = random.Random(seed)
        self.names = ['a', 'b', 'c', 'd', 'e', 'f']

    def path(self, depth=2):
        parts = [self.rnd.choice(self.names) for _ in range(self.rnd.randint(1, depth))]
        return os.path.join(*parts)

    def op(self):
        r = self.rnd
        p, q = self.path(), self.path()
        data = bytes(r.getrandbits(8) for _ in range(r.choice([0, 1, 100, 4096, 5000])))
        off = r.choice([0, 1, 511, 4096, 70000])
        size = r.choice([0, 10, 4096, 9000])
        mode = r.choice([0o600, 0o644, 0o755])
        choices = [
            ('write', lambda root: self.write(root, p, data, off)),
            ('create', lambda root: open(os.path.join(root, p), 'wb').write(data)),
            ('truncate', lambda root: os.truncate(os.path.join(root, p), size)),
            ('mkdir', lambda root: os.mkdir(os.path.join(root, p))),
            ('rmdir', lambda root: os.rmdir(os.path.join(root, p))),
            ('unlink', lambda root: os.unlink(os.path.join(root, p))),
            ('rename', lambda root: os.rename(os.path.join(root, p), os.path.join(root, q))),
            ('link', lambda root: os.link(os.path.join(root, p), os.path.join(root, q))),
            ('symlink', lambda root: os.symlink(q, os.path.join(root, p))),
            ('chmod', lambda root: os.chmod(os.path.join(root, p), mode)),
            ('setxattr', lambda root: os.setxattr(os.path.join(root, p), 'user.k', data[:200])),
            ('read', lambda root: self.read(root, p, off, size)),
        ]
        name, fn = r.choice(choices)
        results = []
        for root in self.roots:
            try:
                results.append(('ok', fn(root)))
            except OSError as e:
                results.append(('err', e.errno))
        if results[0] != results[1]:
            raise AssertionError(f'{name} {p} {q}: cfs {results[0]} twin {results[1]}')

    def write(self, root, p, data, off):
        fd = os.open(os.path.join(root, p), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            return os.pwrite(fd, data, off)
        finally:
            os.close(fd)

    def read(self, root, p, off, size):
        fd = os.open(os.path.join(root, p), os.O_RDONLY)
        try:
            return hashlib.sha256(os.pread(fd, size, off)).hexdigest()
        finally:
            os.close(fd)


def main():
    a, b, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    for d in (a, b):
        os.makedirs(d, exist_ok=True)
    ex = Exerciser([a, b], seed)
    for i in range(steps):
        ex.op()
        if i % 100 == 99:
            ta, tb = tree(a), tree(b)
            if ta != tb:
                diff = {k: (ta.get(k), tb.get(k)) for k in set(ta) | set(tb) if ta.get(k) != tb.get(k)}
                diff = {k: [(x, y) for x, y in zip(*v)] if v[0] and v[1] else v for k, v in diff.items()}
                diff = {k: [(x, y) for x, y in v if x != y] if isinstance(v, list) else v for k, v in diff.items()}
                raise AssertionError(f'after step {i}: trees differ: {diff}')
    print(f'{steps} operations, trees agree')


if __name__ == '__main__':
    main()
