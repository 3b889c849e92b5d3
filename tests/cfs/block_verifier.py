#!/usr/bin/env python3
"""fsx-style block writer and checker: random 4 KiB writes and reads of a file, each block
stamped with its offset and generation, every read checked against what was last written;
at the end every block checked.  Runs until STOP_FILE exists (and at least 200 steps).

  block_verifier.py PATH MIB STOP_FILE SEED [direct]

Exit 0 when every read was as written, 1 with the first difference otherwise."""
import mmap, os, random, struct, sys

BLOCK = 4096


def stamp(off, gen):
    return struct.pack('<QQ', off, gen) * (BLOCK // 16)


def main():
    path, mib, stop, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    direct = len(sys.argv) > 5 and sys.argv[5] == 'direct'
    nblocks = mib * 256
    rnd = random.Random(seed)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_DIRECT if direct else 0), 0o644)
    buf = mmap.mmap(-1, BLOCK)
    gens = [0] * nblocks

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

    for blk in range(nblocks):
        write(blk)
    steps = 0
    while steps < 200 or not os.path.exists(stop):
        blk = rnd.randrange(nblocks)
        (write if rnd.random() < 0.5 else check)(blk)
        steps += 1
    for blk in range(nblocks):
        check(blk)
    os.close(fd)
    print(f'{path}: {steps} steps, every read as written')


main()
