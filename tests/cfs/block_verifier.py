#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""fsx-style block writer and checker: random 4 KiB writes and reads of a file, each block
stamped with its offset and generation, every read checked against what was last written;
at the end every block checked.  Runs until STOP_FILE exists (and at least 200 steps).

  block_verifier.py PATH MIB STOP_FILE SEED [direct [STATE]]
  block_verifier.py check PATH STATE

Exit 0 when every read was as written, 1 with the first difference otherwise.  With STATE
(O_DIRECT writes, acknowledged durable), an I/O error (its daemon killed) saves what was
acknowledged, and the block being written, to STATE and exits 3 (2 if it came before the
first write, leaving STATE as it was); `check` then reads the
file (mounted again) and wants every block as acknowledged, that one as before or after."""
import json, mmap, os, random, struct, sys

BLOCK = 4096


def stamp(off, gen):
    return struct.pack('<QQ', off, gen) * (BLOCK // 16)


def check_state(path, state):
    gens, pending = json.load(open(state))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, BLOCK)
    for blk, gen in enumerate(gens):
        if os.preadv(fd, [buf], blk * BLOCK) != BLOCK:
            sys.exit(f'{path}: block {blk}: short read')
        ok = [stamp(blk * BLOCK, gen)] if gen else [buf[:]]
        if blk == pending:
            ok.append(stamp(blk * BLOCK, gen + 1))
        if buf[:] not in ok:
            got = struct.unpack('<QQ', buf[:16])
            sys.exit(f'{path}: block {blk} reads offset {got[0]} generation {got[1]}, '
                     f'acknowledged generation {gen}')
    print(f'{path}: every acknowledged write is there')


def main():
    if sys.argv[1] == 'check':
        return check_state(sys.argv[2], sys.argv[3])
    path, mib, stop, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    direct = len(sys.argv) > 5 and sys.argv[5] == 'direct'
    state = sys.argv[6] if len(sys.argv) > 6 else None
    nblocks = mib * 256
    rnd = random.Random(seed)
    buf = mmap.mmap(-1, BLOCK)
    gens = [0] * nblocks
    fd = -1

    def write(blk):
        gens[blk] += 1
        buf.seek(0)
        buf.write(stamp(blk * BLOCK, gens[blk]))
        if os.pwritev(fd, [buf], blk * BLOCK) != BLOCK:
            raise OSError('short write')

    def check(blk):
        if os.preadv(fd, [buf], blk * BLOCK) != BLOCK or buf[:] != stamp(blk * BLOCK, gens[blk]):
            got = struct.unpack('<QQ', buf[:16])
            print(f'{path}: block {blk} reads offset {got[0]} generation {got[1]}, '
                  f'wrote generation {gens[blk]}', file=sys.stderr)
            sys.exit(1)

    pending, ready = -1, False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_DIRECT if direct else 0), 0o644)
        if os.fstat(fd).st_size < nblocks * BLOCK:  # allocated once, durably: then overwrites
            for blk in range(nblocks):
                write(blk)
            os.fsync(fd)
        elif state and os.path.exists(state):  # a round after a crash: go on from it
            gens, pending = json.load(open(state))
            if pending >= 0:  # either generation may be there: make it the next one
                write(pending)
                pending = -1
        print('ready', flush=True)
        ready = True
        steps = 0
        while steps < 200 or not os.path.exists(stop):
            blk = rnd.randrange(nblocks)
            if rnd.random() < 0.5:
                pending = blk
                write(blk)
                pending = -1
            else:
                check(blk)
            steps += 1
    except OSError as e:
        if not state:
            raise
        if not ready:  # nothing written: the state stays as the last round left it
            print(f'{path}: {e} before it began')
            sys.exit(2)
        if pending >= 0:
            gens[pending] -= 1  # not acknowledged
        json.dump([gens, pending], open(state, 'w'))
        print(f'{path}: {e}; acknowledged writes saved to {state}')
        sys.exit(3)
    for blk in range(nblocks):
        check(blk)
    os.close(fd)
    if state:
        json.dump([gens, -1], open(state, 'w'))
    print(f'{path}: {steps} steps, every read as written')


main()
