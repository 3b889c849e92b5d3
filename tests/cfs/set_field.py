#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Set one field of one metadata block of a one-LUN CFS volume and seal the block's crc32c
again, as a bug (not a torn write) would leave it:

  set_field.py LUNFILE BLOCK OFFSET SIZE VALUE

Block b of the filesystem is at 1 MiB + b * 4096 in the LUN file; OFFSET and SIZE (bytes)
name the field in the block (cfs/format.h), VALUE is written little-endian."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_fields import BS, LUN_META, seal  # noqa: E402


def main(lun, blk, off, size, value):
    with open(lun, "r+b") as f:
        f.seek(LUN_META + blk * BS)
        b = bytearray(f.read(BS))
        b[off:off + size] = value.to_bytes(size, "little")
        seal(b)
        f.seek(LUN_META + blk * BS)
        f.write(b)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(sys.argv[1], *map(int, sys.argv[2:]))
