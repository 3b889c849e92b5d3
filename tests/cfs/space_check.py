#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A refused allocation gives back every block it took, at once (tests/cfs/test_enospc.sh).

Usage: space_check.py DIR.  DIR is an empty directory on a CFS mount of its own.  It fills the
filesystem with fallocate, then for each way to allocate (fallocate, a direct write, a create,
a mkdir) checks that a refusal keeps nothing and that what a remove frees can be allocated
again at once, not only after the next commit.  Prints TAP lines; exit 1 on any failure."""
import errno
import mmap
import os
import sys

MIB = 1 << 20
fails = 0


def ok(cond, what):
    global fails
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    fails += 0 if cond else 1


def free_bytes(d):
    st = os.statvfs(d)
    return st.f_bavail * st.f_frsize


def fallocate(path, size):
    """0, or the errno of the refusal (of the create or of the fallocate)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    except OSError as e:
        return e.errno
    try:
        os.posix_fallocate(fd, 0, size)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def blocks_bytes(path):
    return os.stat(path).st_blocks * 512


def fill(d):
    """Files of 64 MiB, then smaller, until nothing more fits: their names."""
    names, size, i = [], 64 * MIB, 0
    while size >= 64 * 1024:
        p = os.path.join(d, "fill%d" % i)
        i += 1
        rc = fallocate(p, size)
        if rc == 0:
            names.append(p)
            continue
        if rc != errno.ENOSPC:
            ok(False, "fallocate of %d bytes: %s" % (size, os.strerror(rc)))
        if os.path.exists(p):
            os.unlink(p)
        size //= 2
    return names


def direct_write_until_refused(path):
    """Write 1 MiB at a time with O_DIRECT until refused: (bytes written, errno)."""
    buf = mmap.mmap(-1, MIB)
    buf.write(b"w" * MIB)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
    done = 0
    try:
        while True:
            n = os.pwrite(fd, buf, done)
            if n != MIB:
                return done + n, 0
            done += n
    except OSError as e:
        return done, e.errno
    finally:
        os.close(fd)


def main(d):
    names = fill(d)
    ok(len(names) > 2, "filled with fallocate: %d files, %d bytes free" % (len(names), free_bytes(d)))
    slack = 2 * MIB  # the metadata a create or a map may take

    # A file removed: its space is taken again at once (it is free only once the remove's
    # transaction is committed: the allocation commits it).
    first = os.path.getsize(names[0])
    os.unlink(names[0])
    again = os.path.join(d, "again")
    rc = fallocate(again, first - slack)
    ok(rc == 0, "fallocate right after a remove takes its space: %s" % os.strerror(rc))
    os.unlink(again)
    names.pop(0)

    free0 = free_bytes(d)
    big = os.path.join(d, "big")
    rc = fallocate(big, 10 << 30)
    ok(rc == errno.ENOSPC, "fallocate of 10 GiB refused with ENOSPC: %s" % os.strerror(rc))
    ok(blocks_bytes(big) == 0, "the refused fallocate kept %d bytes" % blocks_bytes(big))
    ok(free_bytes(d) >= free0 - slack, "free after the refusal: %d of %d" % (free_bytes(d), free0))
    os.unlink(big)
    for kind in ("create", "mkdir", "fallocate of 8 MiB"):
        p = os.path.join(d, "after_" + kind.split()[0])
        try:
            if kind == "create":
                os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
            elif kind == "mkdir":
                os.mkdir(p)
            else:
                rc = fallocate(p, 8 * MIB)
                if rc:
                    raise OSError(rc, os.strerror(rc))
            ok(True, "%s right after the refused fallocate's file was removed" % kind)
        except OSError as e:
            ok(False, "%s right after the refused fallocate's file was removed: %s" % (kind, e))
    os.rmdir(os.path.join(d, "after_mkdir"))
    os.unlink(os.path.join(d, "after_create"))
    os.unlink(os.path.join(d, "after_fallocate"))

    # A write that does not fit: refused with ENOSPC, the file holds what was written and no
    # more, and once removed its space is taken again at once.
    w = os.path.join(d, "written")
    free1 = free_bytes(d)
    done, rc = direct_write_until_refused(w)
    ok(rc == errno.ENOSPC, "direct writes until refused: %d bytes, then %s" % (done, os.strerror(rc)))
    ok(done >= free1 - 2 * slack, "direct writes took %d of %d free" % (done, free1))
    ok(blocks_bytes(w) == done, "the refused write left %d bytes allocated for %d written"
       % (blocks_bytes(w), done))
    os.unlink(w)
    rc = fallocate(again, done - slack)
    ok(rc == 0, "fallocate of the written file's space right after its remove: %s" % os.strerror(rc))
    os.unlink(again)

    # Inodes until refused: a create refused keeps no inode, and a remove makes room at once.
    tiny = os.path.join(d, "tiny")
    os.mkdir(tiny)
    rc = fallocate(again, free_bytes(d) - slack)
    ok(rc == 0 or rc == errno.ENOSPC, "nearly all the rest preallocated: %s" % os.strerror(rc))
    made = 0
    try:
        while made < 100000:
            os.close(os.open(os.path.join(tiny, "f%d" % made), os.O_CREAT | os.O_WRONLY, 0o644))
            made += 1
        ok(False, "creates were never refused")
    except OSError as e:
        ok(e.errno == errno.ENOSPC, "creates refused after %d: %s" % (made, e))
    if os.path.exists(again):
        os.unlink(again)
    try:
        os.close(os.open(os.path.join(tiny, "after"), os.O_CREAT | os.O_WRONLY, 0o644))
        ok(True, "a create right after a big file's remove")
    except OSError as e:
        ok(False, "a create right after a big file's remove: %s" % e)
    for n in os.listdir(tiny):
        os.unlink(os.path.join(tiny, n))
    os.rmdir(tiny)
    for n in names:
        os.unlink(n)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
