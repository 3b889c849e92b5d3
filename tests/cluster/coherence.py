#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Coherence checker for a filesystem mounted on several nodes (run one per node).

    coherence.py DIR NODE NODES OPS [--replace]

Every node owns FILES files DIR/f<node>-<k>.  It rewrites one of its own files in place with a
self-describing record (node, file, version, a checksum over the padding), fsyncs and closes
it, then publishes the version in DIR/ann<node>-<k> (written, fsync'd, closed).  A reader may
meet a rewrite in progress (nothing orders that, on one node either): a torn record is read
again, for up to RETRY_S seconds (a rewrite may take long on a loaded machine), and counts
only if it stays torn.  With --replace each version is written to
a temporary name and renamed over the file instead (names and inodes replaced all the time).  Between its
writes it reads another node's file: it reads the announced version first, then the file, and
the file must be whole (checksum right, identity right) and at least that version: a stale or
torn read is counted.  Prints "ops N stale S torn T" and exits 1 if S or T is not 0.
"""
import errno
import hashlib
import os
import random
import struct
import sys
import time

RECORD = 8192
FILES = 4
RETRY_S = 5
HEAD = struct.Struct("<IIQ32s")  # node, file, version, sha256 of the padding


def record(node, k, version):
    pad = random.randbytes(RECORD - HEAD.size)
    return HEAD.pack(node, k, version, hashlib.sha256(pad).digest()) + pad


def parse(data):
    if len(data) != RECORD:
        return None
    node, k, version, digest = HEAD.unpack_from(data)
    if hashlib.sha256(data[HEAD.size:]).digest() != digest:
        return None
    return node, k, version


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path, data):
    write_file(path + ".new", data)
    os.rename(path + ".new", path)


def open_read(path):
    """open(2) for reading.  The open of a name whose inode another node has just replaced
    answers ESTALE, on which the kernel looks the name up once more and opens what it finds
    then; if that file is replaced too before its open lands (three nodes renaming over the
    same names as fast as they can), ESTALE reaches the caller, as on NFS (cfs(8), CLUSTER).  A
    program opens again, as this one does, a few times."""
    for _ in range(4):
        try:
            return os.open(path, os.O_RDONLY)
        except OSError as e:
            if e.errno != errno.ESTALE:
                raise
    return os.open(path, os.O_RDONLY)


def read_file(path):
    fd = open_read(path)
    try:
        return os.pread(fd, RECORD + 1, 0)
    finally:
        os.close(fd)


def main():
    top, node, nodes, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    put = replace_file if "--replace" in sys.argv[5:] else write_file
    versions = [0] * FILES
    for k in range(FILES):
        put(f"{top}/f{node}-{k}", record(node, k, 0))
        write_file(f"{top}/ann{node}-{k}", b"0")
    # Wait until every node has made its files.
    deadline = time.time() + 120
    while any(not os.path.exists(f"{top}/ann{n}-{FILES - 1}") for n in range(1, nodes + 1)):
        if time.time() > deadline:
            print("other nodes never made their files")
            return 2
        time.sleep(0.1)
    stale = torn = reads = 0
    for i in range(ops):
        if i % 2 == 0:
            k = random.randrange(FILES)
            versions[k] += 1
            put(f"{top}/f{node}-{k}", record(node, k, versions[k]))
            write_file(f"{top}/ann{node}-{k}", str(versions[k]).encode())
            continue
        other = random.choice([n for n in range(1, nodes + 1) if n != node] or [node])
        k = random.randrange(FILES)
        announced = int(read_file(f"{top}/ann{other}-{k}") or b"0")
        got = parse(read_file(f"{top}/f{other}-{k}"))
        until = time.monotonic() + RETRY_S
        while (got is None or got[:2] != (other, k)) and time.monotonic() < until:
            time.sleep(0.05)  # a rewrite in progress?  Again, once it may be done.
            got = parse(read_file(f"{top}/f{other}-{k}"))
        reads += 1
        if got is None or got[:2] != (other, k):
            torn += 1
            print(f"torn: f{other}-{k}", file=sys.stderr)
        elif got[2] < announced:
            stale += 1
            print(f"stale: f{other}-{k} version {got[2]} < announced {announced}",
                  file=sys.stderr)
    print(f"ops {ops} reads {reads} stale {stale} torn {torn}")
    return 1 if stale or torn else 0


if __name__ == "__main__":
    sys.exit(main())
