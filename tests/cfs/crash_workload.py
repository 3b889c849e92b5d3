#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Metadata-heavy workload for the crash test, and its checker.

  crash_workload.py run DIR LOG SEED    creates, renames, unlinks and writes in DIR until it is
                                        killed; what it made durable (fsync) goes to LOG, which
                                        lives on another filesystem and is fsync'd after each line
  crash_workload.py check DIR LOG       every durable file must be there with its content

Durable files are never changed in place: they are made, fsync'd, logged ("F name sha"), and
later renamed or unlinked with an intent line before ("r"/"u") and a done line after ("R"/"U")
the directory fsync, so a crash in between allows either outcome.  One file is: osync, blocks
overwritten through O_SYNC (O_DSYNC in runs of odd seeds), each write logged when it returned ("W block seq"); every block
must hold its last logged write or a later one.  Another, appends, grows by O_DIRECT
appends (O_DIRECT|O_DSYNC in runs of odd seeds), each logged when it returned ("A block"):
each allocates, and its map and size must be durable then; every block up to the file's size
must hold its own number.  Scratch files, directories, links and
unnamed files (O_TMPFILE, some named by linkat) churn around them, never made durable."""
import ctypes, errno, hashlib, mmap, os, random, sys

LIBC = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH = 0x1000


def log_line(log_fd, line):
    os.write(log_fd, (line + '\n').encode())
    os.fsync(log_fd)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def present(path):
    """Whether path exists.  Unlike os.path.exists, an error other than ENOENT is raised: an
    ENOTCONN from a cfsd killed under us is not evidence that a file is gone."""
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


def settle(d, log, log_fd):
    """A rename or unlink the last crash interrupted: say how it came out ("C": it did not).
    The kill of this run may come while we look, so only a definite answer is logged."""
    pending = {}
    for line in open(log):
        w = line.split()
        if not line.endswith('\n'):
            break
        if w[0] in ('r', 'u'):
            pending[w[1]] = w
        elif w[0] in ('R', 'U', 'C'):
            pending.pop(w[1], None)
    for old, w in pending.items():
        if w[0] == 'r':
            done = present(os.path.join(d, w[2]))
            log_line(log_fd, f'R {old} {w[2]}' if done else f'C {old}')
        else:
            done = not present(os.path.join(d, old))
            log_line(log_fd, f'U {old}' if done else f'C {old}')


OSYNC_BLOCKS = 64


def osync_block(block, seq):
    return (b'%08d %08d ' % (block, seq)) * (4096 // 18) + b'\n' * (4096 % 18)


def osync_file(d, log, log_fd, seed):
    """The O_SYNC file, made (and logged "O") by the first run; its next sequence number."""
    path = os.path.join(d, 'osync')
    if not any(l.startswith('O') for l in open(log)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b''.join(osync_block(b, 0) for b in range(OSYNC_BLOCKS)))
        os.fsync(fd)
        os.close(fd)
        fsync_dir(d)
        log_line(log_fd, 'O')
    seqs = [int(l.split()[2]) for l in open(log) if l.startswith('W ') and l.endswith('\n')]
    # O_DSYNC in every other run: the overwrite's data durable, its time not yet committed.
    sync = os.O_DSYNC if seed % 2 else os.O_SYNC
    return os.open(path, os.O_WRONLY | sync), max(seqs, default=0) + 1


def append_block(block):
    return (b'%08d ' % block) * (4096 // 9) + b'\n' * (4096 % 9)


def append_blocks(d, seed, count):
    """O_DIRECT appends to the appends file: each block holds its own number."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_DIRECT | (os.O_DSYNC if seed % 2 else 0)
    fd = os.open(os.path.join(d, 'appends'), flags, 0o644)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
    blocks = []
    for _ in range(count):
        block = os.fstat(fd).st_size // 4096
        buf[:] = append_block(block)
        if os.write(fd, buf) != 4096:
            raise OSError(errno.EIO, 'short O_DIRECT append')
        blocks.append(block)
    os.close(fd)
    return blocks


def unnamed_file(d, name, unnamed, rnd):
    """O_TMPFILE files, up to 3 kept open (a crash leaves them to the next mount to free); one
    in three is given a name, the rest go at their close."""
    if len(unnamed) >= 3:
        os.close(unnamed.pop(0))
        return
    fd = os.open(os.path.join(d, 'scratch'), os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, os.urandom(rnd.choice([100, 9000, 70000])))
    unnamed.append(fd)
    if rnd.random() < 1 / 3 and LIBC.linkat(fd, b'', -100, name.encode(), AT_EMPTY_PATH):
        if ctypes.get_errno() != errno.EEXIST:
            raise OSError(ctypes.get_errno(), 'linkat', name)


def run(d, log, seed):
    rnd = random.Random(seed)
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    settle(d, log, log_fd)
    for sub in ('d0', 'd1', 'd2', 'scratch'):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    osync_fd, seq = osync_file(d, log, log_fd, seed)
    durable = [l.split()[1] for l in open(log) if l.startswith('F ')]
    gone = set()
    for l in open(log):
        w = l.split()
        if w[0] in ('R', 'U'):
            gone.add(w[1])
        if w[0] == 'R':
            durable.append(w[2])
    live = [n for n in durable if n not in gone]
    unnamed = []
    n = 0
    while True:
        n += 1
        op = rnd.random()
        crowded = len(live) > 150  # keeps the check after each crash short
        if op < 0.35 and not crowded or len(live) < 5:
            name = f'd{rnd.randrange(3)}/f{seed}-{n}'
            data = os.urandom(rnd.choice([0, 100, 4096, 10000, 70000]))
            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            log_line(log_fd, f'F {name} {hashlib.sha256(data).hexdigest()}')
            live.append(name)
        elif op < 0.5 and not crowded:
            old = live.pop(rnd.randrange(len(live)))
            new = f'd{rnd.randrange(3)}/r{seed}-{n}'
            log_line(log_fd, f'r {old} {new}')
            os.rename(os.path.join(d, old), os.path.join(d, new))
            fsync_dir(os.path.join(d, os.path.dirname(new)))
            log_line(log_fd, f'R {old} {new}')
            live.append(new)
        elif op < 0.6 or crowded and op < 0.5:
            old = live.pop(rnd.randrange(len(live)))
            log_line(log_fd, f'u {old}')
            os.unlink(os.path.join(d, old))
            fsync_dir(os.path.join(d, os.path.dirname(old)))
            log_line(log_fd, f'U {old}')
        elif op < 0.68:  # O_SYNC overwrites: durable when the write returns
            for _ in range(8):
                block = rnd.randrange(OSYNC_BLOCKS)
                os.pwrite(osync_fd, osync_block(block, seq), block * 4096)
                log_line(log_fd, f'W {block} {seq}')
                seq += 1
        elif op < 0.71:  # O_DIRECT appends: durable when the write returns
            for block in append_blocks(d, seed, 4):
                log_line(log_fd, f'A {block}')
        else:  # churn nobody made durable: scratch files, directories, hard links
            s = os.path.join(d, 'scratch', f's{n % 50}')
            try:
                if op < 0.75:
                    with open(s, 'ab') as f:
                        f.write(os.urandom(rnd.choice([1, 5000, 40000])))
                elif op < 0.83:
                    os.mkdir(s + 'd')
                    open(os.path.join(s + 'd', 'x'), 'w').close()
                elif op < 0.87:
                    unnamed_file(d, s + 't', unnamed, rnd)
                elif op < 0.9:
                    os.link(s, s + 'l')
                else:
                    for p in (s, s + 'l', s + 't', os.path.join(s + 'd', 'x'), s + 'd'):
                        (os.rmdir if p.endswith('d') else os.unlink)(p)
            except FileNotFoundError:
                pass
            except FileExistsError:
                pass


def sha(path):
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def check_osync(d, written):
    """Every block of the O_SYNC file holds its last logged write, or one after it."""
    data = open(os.path.join(d, 'osync'), 'rb').read()
    bad = 0
    for block in range(OSYNC_BLOCKS):
        head = data[block * 4096:block * 4096 + 18].split()
        if len(head) != 2 or int(head[0]) != block or int(head[1]) < written.get(block, 0):
            print(f'osync block {block}: holds {head}, its last O_SYNC write was '
                  f'{written.get(block, 0)}')
            bad += 1
    return bad


def check_appends(d, appended):
    """The appends file holds every block an append returned for, each its own number."""
    data = open(os.path.join(d, 'appends'), 'rb').read()
    if len(data) % 4096 or len(data) // 4096 <= appended:
        print(f'appends: {len(data)} bytes, but block {appended} was appended')
        return 1
    bad = [b for b in range(len(data) // 4096) if data[b * 4096:(b + 1) * 4096] != append_block(b)]
    if bad:
        print(f'appends: blocks {bad[:10]} do not hold their numbers')
    return len(bad)


def check(d, log):
    content, maybe, written = {}, {}, {}
    appended = -1
    bad, made = 0, False
    for line in open(log):
        w = line.split()
        if not line.endswith('\n'):
            break  # the log's last line was cut by the kill
        if w[0] == 'O':
            made = True
        elif w[0] == 'W':
            written[int(w[1])] = int(w[2])
        elif w[0] == 'A':
            appended = max(appended, int(w[1]))
        elif w[0] == 'F':
            content[w[1]] = w[2]
        elif w[0] == 'r':
            maybe[w[1]] = ('rename', w[2])
        elif w[0] == 'R':
            content[w[2]] = content.pop(w[1])
            maybe.pop(w[1], None)
        elif w[0] == 'u':
            maybe[w[1]] = ('unlink', None)
        elif w[0] == 'U':
            content.pop(w[1])
            maybe.pop(w[1], None)
        elif w[0] == 'C':
            maybe.pop(w[1], None)
    for name, digest in content.items():
        p = os.path.join(d, name)
        m = maybe.get(name)
        if m and m[0] == 'rename':
            q = os.path.join(d, m[1])
            there = [x for x in (p, q) if present(x)]
            if len(there) != 1 or sha(there[0]) != digest:
                print(f'{name}: renamed to {m[1]} when the crash came; found {there}')
                bad += 1
            continue
        if m and m[0] == 'unlink' and not present(p):
            continue
        if not present(p):
            print(f'{name}: fsync\'d, but missing after the crash')
            bad += 1
        elif sha(p) != digest:
            print(f'{name}: fsync\'d, but its content changed')
            bad += 1
    bad += check_osync(d, written) if made else 0
    bad += check_appends(d, appended) if appended >= 0 else 0
    print(f'{len(content)} durable files, {len(written)} O_SYNC blocks and {appended + 1} '
          f'O_DIRECT appends checked, {bad} bad')
    return 1 if bad else 0


if __name__ == '__main__':
    if sys.argv[1] == 'run':
        try:
            run(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        except OSError as e:
            # ENOTCONN, ECONNABORTED, EIO: the kill; ECANCELED: the kill, when the request
            # was in an io_uring entry of the dead cfsd (cfsd/fuse_uring.c)
            if e.errno not in (107, 103, 5, 125):
                print(f'workload: unexpected {e!r}', file=sys.stderr)
                sys.exit(2)
    else:
        try:
            sys.exit(check(sys.argv[2], sys.argv[3]))
        except OSError as e:
            print(f'check: {e.filename}: {e.strerror}')
            sys.exit(1)
