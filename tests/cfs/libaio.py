# SPDX-License-Identifier: GPL-2.0-or-later
"""libaio through ctypes, for the tests' asynchronous direct writes (soak_workload.py,
test_posix.sh): one context, writes submitted together and reaped."""
import ctypes, errno


class Iocb(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('key', ctypes.c_uint32), ('rw_flags', ctypes.c_uint32),
                ('opcode', ctypes.c_int16), ('prio', ctypes.c_int16), ('fd', ctypes.c_int32),
                ('buf', ctypes.c_void_p), ('nbytes', ctypes.c_uint64), ('offset', ctypes.c_int64),
                ('pad', ctypes.c_int64), ('flags', ctypes.c_uint32), ('resfd', ctypes.c_uint32)]


class Event(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('obj', ctypes.c_void_p), ('res', ctypes.c_long),
                ('res2', ctypes.c_long)]


IOCB_CMD_PWRITE = 1


class Aio:
    def __init__(self, depth=64):
        self.lib = ctypes.CDLL('libaio.so.1')
        self.ctx = ctypes.c_void_p()
        if self.lib.io_setup(depth, ctypes.byref(self.ctx)) != 0:
            raise OSError(errno.EIO, 'io_setup')

    def write(self, fd, bufs, offsets):
        """Write each aligned buffer (an mmap) at its offset, all in flight at once; raise the
        first error a write completed with."""
        n = len(bufs)
        cbs, ptrs = (Iocb * n)(), (ctypes.POINTER(Iocb) * n)()
        for i, (b, off) in enumerate(zip(bufs, offsets)):
            addr = ctypes.addressof(ctypes.c_char.from_buffer(b))
            cbs[i] = Iocb(None, 0, 0, IOCB_CMD_PWRITE, 0, fd, addr, len(b), off, 0, 0, 0)
            ptrs[i] = ctypes.pointer(cbs[i])
        if self.lib.io_submit(self.ctx, n, ptrs) != n:
            raise OSError(errno.EIO, 'io_submit')
        events, done, failed = (Event * n)(), 0, 0
        while done < n:  # every one reaped before an error is raised
            got = self.lib.io_getevents(self.ctx, 1, n - done, events, None)
            if got < 0:
                raise OSError(-got, 'io_getevents')
            failed = failed or next((-events[j].res for j in range(got) if events[j].res < 0), 0)
            done += got
        if failed:
            raise OSError(failed, 'aio write')

    def close(self):
        self.lib.io_destroy(self.ctx)
