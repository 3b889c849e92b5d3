#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Field fuzzer for CFS metadata: one field of one metadata block set to a hostile value and
the block's crc32c sealed again (as a bug, not a torn write, would leave it), then

  fsck.cfs -n;  mount, read everything, unmount;  fsck.cfs -y;  fsck.cfs -n;
  mount, read everything, use it (create, write, rename, remove), unmount;  fsck.cfs -n

and each case must give: no crash, sanitizer report or hang of cfsd or fsck.cfs; fsck.cfs -n
exits 0 (clean) or 4 (found); what it calls clean the daemon serves without EIO; -y exits 0
or 1 and -n is clean after it; the repaired filesystem mounts, reads without EIO and is still
clean after use.

  fuzz_fields.py --bin BIN --lun LUNFILE --pristine COPY --volume NAME --mnt DIR
                 --log LOG --seed S --cases N [--case K]

LUNFILE is the volume's one LUN (block b of the filesystem at 1 MiB + b * 4096) and COPY a
copy of it, taken unmounted, that every case starts from.  Prints a TAP line per case
("ok - fuzz S/K: TYPE field = VALUE"), and what went wrong on a "not ok" line.  A case is
named by the seed and its number, so --seed S --case K runs that one case again.
"""
import argparse, errno, os, random, shutil, struct, subprocess, sys

LUN_META = 1 << 20
BS = 4096
MAGIC = 0x42534643
TYPES = {1: 'super', 2: 'group', 3: 'inode', 4: 'bucket', 5: 'dirovf', 6: 'extents',
         7: 'xattr', 8: 'jdesc', 9: 'jcommit', 10: 'quota'}
STEP_TIMEOUT = 300  # a step still running after this is a hang


def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def seal(block):
    block[8:12] = b'\0\0\0\0'
    block[8:12] = struct.pack('<I', crc32c(bytes(block)))


def u(block, off, size):
    return int.from_bytes(block[off:off + size], 'little')


# The fields of each block type (cfs/format.h): name, offset, size.
HEADER = [('h.version', 6, 2), ('h.owner', 24, 8)]
SUPER = [('block_size', 128, 4), ('nslots', 132, 4), ('total_blocks', 136, 8),
         ('journal_start', 144, 8), ('journal_blocks', 152, 4), ('ag_blocks', 156, 4),
         ('ag_start', 160, 8), ('nags', 168, 4), ('hash_seed', 172, 4), ('root_ino', 176, 8),
         ('generation', 200, 8), ('orphan_dir[0]', 208, 8), ('lockproto', 720, 8),
         ('format', 1248, 4), ('features[0]', 1252, 4), ('features[1]', 1256, 4),
         ('quota_ino[0]', 2800, 8), ('quota_ino[2]', 2816, 8), ('quota_slot_ino[0]', 2824, 8)]
GROUP = [('start', 32, 8), ('nblocks', 40, 4), ('nfree', 44, 4), ('bitmap[0]', 64, 8),
         ('bitmap[end]', BS - 8, 8)]
INODE = [('mode', 32, 4), ('uid', 36, 4), ('gid', 40, 4), ('nlink', 44, 4), ('size', 48, 8),
         ('nblocks', 56, 8), ('mtime', 72, 8), ('mtime_ns', 100, 4), ('generation', 112, 8),
         ('parent', 120, 8), ('rdev', 128, 8), ('flags', 136, 4), ('nextents', 140, 4),
         ('ext_next', 144, 8), ('xattr_block', 152, 8), ('xattr_len', 160, 4),
         ('dir_level', 164, 4), ('dir_split', 168, 4), ('projid', 172, 4),
         ('dir_entries', 176, 8)]
EXTENT = [('lblk', 0, 8), ('pblk', 8, 8), ('len', 16, 4), ('flags', 20, 4)]
INODE_EXT_OFF, EXTB_OFF, DIRB_OFF, DQUOT_OFF = 1280, 64, 64, 64
DIRB = [('next', 32, 8), ('count', 40, 4), ('used', 44, 4)]
EXTB = [('next', 32, 8), ('count', 40, 4)]
JDESC = [('seq', 32, 8), ('count', 40, 4), ('log_id', 44, 4), ('revokes', 48, 4)]
# A limit may be any value (one of 1 byte is a limit, not damage): usage and grants only.
QUOTA = [('used_bytes', 0, 8), ('used_inodes', 8, 8), ('granted_bytes', 72, 8),
         ('granted_inodes', 80, 8)]


def dir_entries(block):
    """(offset, name length) of each entry of a directory block."""
    out, o, end = [], DIRB_OFF, DIRB_OFF + u(block, 44, 4)
    while o + 14 <= min(end, BS):
        n = block[o + 13]
        out.append(o)
        o += 14 + n
    return out


def xattr_entries(block, start, used):
    out, o = [], start
    while o + 4 <= start + used:
        out.append(o)
        o += 4 + block[o] + u(block, o + 2, 2)
    return out


def fields_of(block, btype):
    """Every fuzzable field of a block: (name, offset, size)."""
    f = list(HEADER)
    if btype == 1:
        f += SUPER
    elif btype == 2:
        f += GROUP
    elif btype == 3:
        f += INODE
        inline = min(u(block, 140, 4), (BS - INODE_EXT_OFF) // 24)
        for i in range(inline):
            f += [(f'ext[{i}].{n}', INODE_EXT_OFF + 24 * i + o, s) for n, o, s in EXTENT]
        for o in xattr_entries(block, 256, min(u(block, 160, 4), 1024)):
            f += [(f'xattr@{o}.name_len', o, 1), (f'xattr@{o}.value_len', o + 2, 2)]
    elif btype in (4, 5):
        f += DIRB
        for o in dir_entries(block):
            f += [(f'entry@{o}.hash', o, 4), (f'entry@{o}.ino', o + 4, 8),
                  (f'entry@{o}.type', o + 12, 1), (f'entry@{o}.name_len', o + 13, 1),
                  (f'entry@{o}.name[0]', o + 14, 1)]
    elif btype == 6:
        f += EXTB
        for i in range(min(u(block, 40, 4), (BS - EXTB_OFF) // 24)):
            f += [(f'ext[{i}].{n}', EXTB_OFF + 24 * i + o, s) for n, o, s in EXTENT]
    elif btype == 7:
        f += [('used', 32, 4)]
        for o in xattr_entries(block, 40, min(u(block, 32, 4), BS - 40)):
            f += [(f'xattr@{o}.name_len', o, 1), (f'xattr@{o}.value_len', o + 2, 2)]
    elif btype in (8, 9):
        f += JDESC
    elif btype == 10:
        for r in range(3):
            f += [(f'rec[{r}].{n}', DQUOT_OFF + 128 * r + o, s) for n, o, s in QUOTA]
    return f


def scan(lun):
    """Block number and type of every sealed metadata block of the LUN."""
    blocks = {}
    with open(lun, 'rb') as fh:
        fh.seek(LUN_META)
        b = 0
        while True:
            data = fh.read(BS)
            if len(data) < BS:
                break
            if u(data, 0, 4) == MAGIC and u(data, 16, 8) == b:
                t = u(data, 4, 2)
                blk = bytearray(data)
                crc = u(blk, 8, 4)
                seal(blk)
                if t in TYPES and u(blk, 8, 4) == crc:
                    blocks[b] = t
            b += 1
    return blocks


def hostile(rng, old, size, blocks):
    """A value for a field of size bytes that was old, and what to call it."""
    top = (1 << (8 * size)) - 1
    kind = rng.choice(['zero', 'ones', 'random', 'block', 'bitflip', 'plus1', 'minus1'])
    v = {'zero': 0, 'ones': top, 'random': rng.getrandbits(8 * size),
         'block': rng.choice(sorted(blocks)) & top, 'bitflip': old ^ (1 << rng.randrange(8 * size)),
         'plus1': (old + 1) & top, 'minus1': (old - 1) & top}[kind]
    return kind, v


class Case:
    def __init__(self, a, k):
        self.a, self.k, self.log = a, k, []
        self.problems = []

    def run(self, *argv, timeout=STEP_TIMEOUT):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, errors='replace',
                               timeout=timeout,
                               env=dict(os.environ, ASAN_OPTIONS='detect_leaks=0'))
        except subprocess.TimeoutExpired:
            self.problems.append(f'hang: {" ".join(argv)}')
            return 124, ''
        out = p.stdout + p.stderr
        self.log.append(f'$ {" ".join(argv)} -> {p.returncode}\n{out[-1500:]}')
        if 'AddressSanitizer' in out or 'runtime error:' in out or p.returncode < 0:
            self.problems.append(f'crash: {" ".join(argv)}: {out[-800:]}')
        return p.returncode, out

    def fsck(self, flag):
        return self.run(f'{self.a.bin}/fsck.cfs', flag, self.a.volume)[0]

    def mount(self):
        os.makedirs(self.a.mnt, exist_ok=True)
        rc, _ = self.run(f'{self.a.bin}/cfs', 'mount', self.a.volume, self.a.mnt,
                         '-o', f'log={self.a.log}')
        return rc == 0

    def umount(self):
        rc, _ = self.run(f'{self.a.bin}/cfs', 'umount', self.a.mnt)
        if rc:
            subprocess.run(['umount', '-l', self.a.mnt], capture_output=True)
            self.problems.append('unmount failed')
        try:
            text = open(self.a.log, errors='replace').read()
            os.unlink(self.a.log)
        except OSError:
            text = ''
        if 'AddressSanitizer' in text or 'runtime error:' in text:
            self.problems.append(f'cfsd: {text[-800:]}')
        self.log.append(f'cfsd log:\n{text[-1500:]}')

    def walk(self):
        """Read everything the mount shows; the paths that gave EIO."""
        eio = []

        def note(path, e):
            if e.errno == errno.EIO:
                eio.append(path)
            elif e.errno not in (errno.ENODATA, errno.ENOTSUP, errno.ENOENT, errno.ESTALE):
                eio.append(f'{path} ({os.strerror(e.errno)})')

        def visit(path):
            try:
                st = os.lstat(path)
                for x in os.listxattr(path, follow_symlinks=False):
                    os.getxattr(path, x, follow_symlinks=False)
                if os.path.islink(path):
                    os.readlink(path)
                elif os.path.isfile(path):
                    with open(path, 'rb') as fh:
                        while fh.read(1 << 20):
                            pass
                return st
            except OSError as e:
                note(path, e)
                return None

        for top, dirs, files in os.walk(self.a.mnt, onerror=lambda e: note(e.filename, e)):
            for name in dirs + files:
                visit(os.path.join(top, name))
        return eio

    def use(self):
        """Change the repaired filesystem: the changes must leave it clean."""
        d = os.path.join(self.a.mnt, 'fuzz-use')
        try:
            os.makedirs(d, exist_ok=True)
            for i in range(20):
                with open(os.path.join(d, f'f{i}'), 'wb') as fh:
                    fh.write(os.urandom(5000 * (i + 1)))
            for i in range(0, 20, 2):
                os.rename(os.path.join(d, f'f{i}'), os.path.join(d, f'g{i}'))
            for i in range(0, 20, 3):
                os.unlink(os.path.join(d, f'f{i}' if i % 2 else f'g{i}'))
            for top, dirs, files in os.walk(self.a.mnt):
                regular = [n for n in files if os.path.isfile(os.path.join(top, n)) and
                           not os.path.islink(os.path.join(top, n))]
                for name in regular[:3]:
                    with open(os.path.join(top, name), 'ab') as fh:
                        fh.write(b'appended after the repair\n')
        except OSError as e:
            self.problems.append(f'use of the repaired filesystem: {e}')

    def execute(self, what):
        rc_n = self.fsck('-n')
        if rc_n not in (0, 4):
            self.problems.append(f'fsck.cfs -n of the damage exited {rc_n}')
        mounted = self.mount()
        if mounted:
            eio = self.walk()
            self.umount()
            if eio and rc_n == 0:
                self.problems.append(f'fsck.cfs -n clean, the daemon gives EIO: {eio[:5]}')
        elif rc_n == 0:
            self.problems.append('fsck.cfs -n clean, the mount is refused')
        rc_y = self.fsck('-y')
        if rc_y not in ((0, 1) if rc_n else (0,)):
            self.problems.append(f'fsck.cfs -y exited {rc_y}')
        if self.fsck('-n'):
            self.problems.append('fsck.cfs -n not clean after -y')
        if not self.mount():
            self.problems.append('the repaired filesystem does not mount')
        else:
            eio = self.walk()
            if eio:
                self.problems.append(f'EIO after the repair: {eio[:5]}')
            self.use()
            self.umount()
            if self.fsck('-n'):
                self.problems.append('not clean after use of the repaired filesystem')
        name = f'fuzz {self.a.seed}/{self.k}: {what} (fsck -n {rc_n})'
        if self.problems:
            print(f'not ok - {name}: ' + '; '.join(self.problems), flush=True)
            if self.a.verbose:
                print('\n'.join(self.log), file=sys.stderr)
            return False
        print(f'ok - {name}', flush=True)
        return True


def pick(rng, blocks, k, lun):
    """Case k's damage: (description, block number, block bytes with the field changed)."""
    by_type = {}
    for b, t in blocks.items():
        if b != 1:  # the backup superblock is what repairs the primary
            by_type.setdefault(t, []).append(b)
    kinds = sorted(by_type)
    with open(lun, 'rb') as fh:
        for _ in range(100):
            t = kinds[k % len(kinds)] if rng.random() < 0.7 else rng.choice(kinds)
            b = rng.choice(by_type[t])
            fh.seek(LUN_META + b * BS)
            block = bytearray(fh.read(BS))
            name, off, size = rng.choice(fields_of(block, t))
            old = u(block, off, size)
            kind, v = hostile(rng, old, size, blocks)
            if v == old:
                continue
            block[off:off + size] = v.to_bytes(size, 'little')
            seal(block)
            return f'{TYPES[t]} {b} {name} {old:#x} -> {v:#x} ({kind})', b, block
    raise SystemExit('no field to fuzz')


def main():
    p = argparse.ArgumentParser()
    for opt in ('bin', 'lun', 'pristine', 'volume', 'mnt', 'log'):
        p.add_argument('--' + opt, required=True)
    p.add_argument('--seed', type=int, required=True)
    p.add_argument('--cases', type=int, default=1)
    p.add_argument('--case', type=int)
    p.add_argument('--verbose', action='store_true')
    a = p.parse_args()
    blocks = scan(a.pristine)
    failed = 0
    for k in range(a.cases) if a.case is None else [a.case]:
        rng = random.Random(a.seed * 1000003 + k)
        shutil.copyfile(a.pristine, a.lun)
        what, b, block = pick(rng, blocks, k, a.pristine)
        with open(a.lun, 'r+b') as fh:
            fh.seek(LUN_META + b * BS)
            fh.write(block)
        failed += not Case(a, k).execute(what)
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
