#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Mark one free block of a one-LUN CFS volume in use, as a bug that loses an extent leaves
it: the last free block of allocation group G, its bit set and the group's free count kept
in step, the header's crc32c sealed again.  Prints the block's number.

  leak_block.py LUNFILE [GROUP]"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_fields import BS, LUN_META, seal  # noqa: E402

SB_AG_BLOCKS, SB_AG_START = 156, 160  # struct cfs_dsuper (cfs/format.h)
AGH_NBLOCKS, AGH_NFREE, AGH_BITMAP = 40, 44, 64  # struct cfs_dagh


def main(lun, group=0):
    with open(lun, "r+b") as f:
        f.seek(LUN_META)
        sb = f.read(BS)
        ag_blocks, = struct.unpack_from("<I", sb, SB_AG_BLOCKS)
        ag_start, = struct.unpack_from("<Q", sb, SB_AG_START)
        header = ag_start + group * ag_blocks
        f.seek(LUN_META + header * BS)
        b = bytearray(f.read(BS))
        nblocks, nfree = struct.unpack_from("<II", b, AGH_NBLOCKS)
        bit = next(i for i in range(nblocks - 1, 0, -1)
                   if not b[AGH_BITMAP + i // 8] >> (i % 8) & 1)
        b[AGH_BITMAP + bit // 8] |= 1 << (bit % 8)
        struct.pack_into("<I", b, AGH_NFREE, nfree - 1)
        seal(b)
        f.seek(LUN_META + header * BS)
        f.write(b)
    print(header + bit)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], *map(int, sys.argv[2:]))
