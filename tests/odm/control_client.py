#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Hand-made requests to a CFS mount's daemon over its control socket, as any program of
root's or of odm_group's could send them, not only libodm: what cfsd must check itself
(tests/odm/test_odm_requests.sh).  The protobuf encoding of proto/control.proto is written
here by hand, so that a request can be what no protobuf library would make.

  control_client.py MOUNTPOINT create PATH SIZE BLOCK_SIZE FILE_TYPE [resize SIZE]
  control_client.py MOUNTPOINT raw HEX

PATH may hold \\0 for a NUL byte.  Prints the daemon's answer to each request as
"error N: MESSAGE" (N an errno value, 0 for none); exits 0 when every request was answered,
1 when the daemon closed the connection instead."""
import os, socket, struct, sys

OP_CREATE, OP_RESIZE = 5, 8
CONTROL_DIR = '/run/cfs'


def socket_path(mountpoint):
    h = 0xcbf29ce484222325  # FNV-1a of the real path, as cfs_control_path has it
    for b in os.path.realpath(mountpoint).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f'{CONTROL_DIR}/{h:016x}.sock'


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(number, value):
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    return varint(number << 3) + varint(value)


def fields(data):
    """(number, value) of each field: an int or bytes."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, i = read_varint(data, i)
        elif kind == 2:
            n, i = read_varint(data, i)
            value, i = data[i:i + n], i + n
        elif kind in (1, 5):
            n = 8 if kind == 1 else 4
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f'wire type {kind}')
        yield number, value


def read_varint(data, i):
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def exchange(sock, request):
    """The answer to request (bytes), notices skipped; None if the daemon closed."""
    sock.sendall(struct.pack('<I', len(request)) + request)
    while True:
        head = recv_all(sock, 4)
        if head is None:
            return None
        body = recv_all(sock, struct.unpack('<I', head)[0])
        if body is None:
            return None
        answer = dict(fields(body))
        if not answer.get(7):  # a notice (revoke) is no answer
            return answer


def recv_all(sock, n):
    data = b''
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            return None
        data += part
    return data


def say(answer):
    error = answer.get(1, 0)
    error = error - (1 << 64) if error >= 1 << 63 else error
    print(f"error {error}: {answer.get(2, b'').decode(errors='replace')}")


def main():
    mountpoint, what = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path(mountpoint))
    if what == 'raw':
        request = bytes.fromhex(sys.argv[3])
    else:
        path, size, block, ftype = sys.argv[3].replace('\\0', '\0'), *map(int, sys.argv[4:7])
        request = (field(1, OP_CREATE) + field(2, path.encode()) + field(4, size) +
                   field(6, block) + field(7, ftype))
    answer = exchange(sock, request)
    if answer is None:
        print('closed')
        return 1
    say(answer)
    if what == 'create' and sys.argv[7:8] == ['resize'] and 5 in answer:
        ino = dict(fields(answer[5]))[1]
        answer = exchange(sock, field(1, OP_RESIZE) + field(3, ino) + field(4, int(sys.argv[8])))
        if answer is None:
            print('closed')
            return 1
        say(answer)
    return 0


if __name__ == '__main__':
    sys.exit(main())
