#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""What a node sees of a file, read over and over until another node has changed it.

    watch_change.py once KIND PATH          print what this node sees now
    watch_change.py watch KIND PATH MARK READY
        look at PATH in a loop (so the kernel keeps its name and attributes cached), touch
        READY after the first look; once the file MARK exists (written after the other node's
        change was done, with what that node saw after it), look once more: exit 0 if this
        node sees the same, else print both and exit 1.

KIND: exists, type, mode, owner, size, nlink, mtime, content, list, or xattr:NAME; or one
of mode, owner, size, nlink, mtime, xattr:NAME after "fd-": through a descriptor of the file
opened once (fstat, fgetxattr: no name looked up, only the attributes the kernel keeps); or
"cwd-list": the listing of ".", the directory PATH made the working directory once (no name
looked up either).
"""
import os
import stat
import sys
import time


def observe(kind, path, fd=None):
    try:
        if kind.startswith("fd-"):
            kind, path = kind[3:], fd if fd is not None else os.open(path, os.O_RDONLY)
        if kind == "exists":
            return "yes" if os.path.lexists(path) else "no"
        if kind == "content":
            with open(path, "rb") as f:
                return f.read().hex()
        if kind == "list":
            return " ".join(sorted(os.listdir(path)))
        if kind.startswith("xattr:"):
            return os.getxattr(path, kind[6:], follow_symlinks=isinstance(path, int)).hex()
        st = os.stat(path) if isinstance(path, int) else os.lstat(path)
        return {
            "type": lambda: "dir" if stat.S_ISDIR(st.st_mode) else "file",
            "mode": lambda: oct(st.st_mode & 0o7777),
            "owner": lambda: f"{st.st_uid}:{st.st_gid}",
            "size": lambda: str(st.st_size),
            "nlink": lambda: str(st.st_nlink),
            "mtime": lambda: str(st.st_mtime_ns),
        }[kind]()
    except OSError as e:
        return f"error {e.errno}"


def main():
    verb, kind, path = sys.argv[1:4]
    if kind.startswith("cwd-"):  # MARK and READY are absolute: the chdir leaves them be
        os.chdir(path)
        kind, path = kind[4:], "."
    if verb == "once":
        print(observe(kind, path))
        return 0
    mark, ready = sys.argv[4:6]
    fd = os.open(path, os.O_RDONLY) if kind.startswith("fd-") else None
    looks = 0
    deadline = time.time() + 120
    while not os.path.exists(mark):
        observe(kind, path, fd)
        looks += 1
        if looks == 1:
            open(ready, "w").close()
        if time.time() > deadline:
            print("the other node's change never came")
            return 2
        time.sleep(0.001)
    with open(mark) as f:
        want = f.read().strip()
    got = observe(kind, path, fd)
    if got != want:
        print(f"{kind} of {path}: this node sees '{got}', the changing node '{want}' "
              f"(after {looks} looks)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
