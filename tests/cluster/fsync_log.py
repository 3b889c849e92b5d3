#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Work in DIR until killed, logging to LOG (outside the filesystem) every change that fsync
has made durable: "begin OP ARGS" before it, "done" after its fsync returned.  At most the
last "begin" has no "done" (the kill came during it).  check() replays such a log against
the directory as another node sees it.

  fsync_log.py run DIR LOG        creates, appends, renames, unlinks, each fsync'd
  fsync_log.py check DIR LOG...   every durable change is there; exit 1 with what is not
"""
import hashlib
import os
import random
import sys


def content(i):
    return (f"{i}:" * random.randint(1, 6000)).encode()


def run(d, log):
    os.makedirs(d, exist_ok=True)
    out = open(log, "a", buffering=1)
    dfd = os.open(d, os.O_RDONLY)
    i = 0
    while True:
        data = content(i)
        out.write(f"begin create f{i} {hashlib.sha256(data).hexdigest()}\n")
        fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.fsync(dfd)
        out.write("done\n")
        out.write(f"begin append {i}\n")
        fd = os.open(f"{d}/append", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        os.write(fd, f"line {i}\n".encode())
        os.fsync(fd)
        os.close(fd)
        out.write("done\n")
        if i % 3 == 2:
            out.write(f"begin rename f{i - 1} r{i - 1}\n")
            os.rename(f"{d}/f{i - 1}", f"{d}/r{i - 1}")
            os.fsync(dfd)
            out.write("done\n")
        if i % 5 == 4:
            out.write(f"begin unlink f{i - 4}\n")
            os.unlink(f"{d}/f{i - 4}") if os.path.exists(f"{d}/f{i - 4}") else None
            os.fsync(dfd)
            out.write("done\n")
        i += 1


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check(d, log):
    files, appends, inflight, errors = {}, -1, None, []
    for line in open(log):
        w = line.split()
        if w[0] == "begin":
            inflight = w[1:]
            continue
        op, inflight = inflight, None
        if op[0] == "create":
            files[op[1]] = op[2]
        elif op[0] == "append":
            appends = int(op[1])
        elif op[0] == "rename":
            files[op[2]] = files.pop(op[1])
        elif op[0] == "unlink":
            files.pop(op[1], None)
    # The change in flight at the kill may or may not be there: either outcome is right.
    maybe_gone = set()
    if inflight and inflight[0] == "rename" and inflight[1] in files:
        moved = files.pop(inflight[1])
        name = inflight[1] if os.path.exists(f"{d}/{inflight[1]}") else inflight[2]
        files[name] = moved
    elif inflight and inflight[0] == "unlink":
        maybe_gone.add(inflight[1])
    for name, want in sorted(files.items()):
        p = f"{d}/{name}"
        if not os.path.exists(p):
            if name not in maybe_gone:
                errors.append(f"{name}: fsync'd, missing")
        elif sha(p) != want:
            errors.append(f"{name}: fsync'd, content differs")
    if appends >= 0:
        got = open(f"{d}/append").read().splitlines() if os.path.exists(f"{d}/append") else []
        want = [f"line {k}" for k in range(appends + 1)]
        if got[: len(want)] != want:
            errors.append(f"append: {len(want)} fsync'd lines, the file starts with "
                          f"{len(got)} lines that differ")
    return files, appends, errors


def main():
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    files, appends, errors = check(sys.argv[2], sys.argv[3])
    if errors:
        print("; ".join(errors[:10]))
        sys.exit(1)
    print(f"{len(files)} fsync'd files and {appends + 1} fsync'd appends all there")


if __name__ == "__main__":
    main()
