#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""File handles as NFS uses them: `file_handle.py get PATH` prints PATH's handle in hex
(name_to_handle_at); `file_handle.py read MOUNT HEX` opens it (open_by_handle_at) and prints
what the file holds, or exits 1 with the errno's name."""
import ctypes, errno, os, sys

libc = ctypes.CDLL(None, use_errno=True)


class FileHandle(ctypes.Structure):
    _fields_ = [('bytes', ctypes.c_uint), ('type', ctypes.c_int), ('f', ctypes.c_ubyte * 128)]


def main():
    if sys.argv[1] == 'get':
        fh, mount_id = FileHandle(128, 0), ctypes.c_int()
        if libc.name_to_handle_at(-100, sys.argv[2].encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0):
            sys.exit(f'name_to_handle_at: {errno.errorcode[ctypes.get_errno()]}')
        print(bytes(fh).hex())
        return
    fh = FileHandle.from_buffer_copy(bytes.fromhex(sys.argv[3]))
    mount_fd = os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.open_by_handle_at(mount_fd, ctypes.byref(fh), os.O_RDONLY)
    if fd < 0:
        sys.exit(errno.errorcode[ctypes.get_errno()])
    print(os.read(fd, 4096).decode(), end='')


if __name__ == '__main__':
    main()
