#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# CFS on a real FUSE mount: the POSIX a shared Oracle home needs, checked one behaviour at a
# time, then real workloads (fio with verify, a tar round trip, dbench, a random-operation
# exerciser against a tmpfs twin), then fsck.cfs must find the filesystem clean.
# With CFS_TRANSPORT=io_uring or dev (test_uring.sh), the mounts must use that FUSE transport.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$T/mnt
make_volume v 4 256
"$BIN/mkfs.cfs" -L posix v >/dev/null 2>&1 || { not_ok "mkfs.cfs"; finish; }
mount_cfs v "$M" || { not_ok "mount: $(cat "$T/v.log")"; finish; }
ok "mkfs.cfs and cfs mount"
# The rings start once the kernel has the INIT answer, which may be after the mount returns.
[ -z "${CFS_TRANSPORT:-}" ] || check_soon 60 "requests come through $CFS_TRANSPORT" transport_is "$M" "$CFS_TRANSPORT"
py() { timeout 120 python3 - "$@"; }
cd "$M" || exit 1

check "regular file write and read back" bash -c 'echo hello > f && [ "$(cat f)" = hello ]'
check "directories, nested, and their link counts" bash -c \
	'mkdir -p d/e/f && [ "$(stat -c %h d)" = 3 ] && rmdir d/e/f && [ "$(stat -c %h d/e)" = 2 ]'
check "symlink and readlink" bash -c 'ln -s f sl && [ "$(readlink sl)" = f ] && [ "$(cat sl)" = hello ]'
check "long symlink target" bash -c 't=$(printf "x%.0s" $(seq 1 1000)); ln -s "$t" lsl && [ "$(readlink lsl)" = "$t" ]'
check "hard link" bash -c 'ln f hl && [ "$(stat -c %h f)" = 2 ] && [ "$(stat -c %i f)" = "$(stat -c %i hl)" ]'
check "rename over a file" bash -c 'echo a > r1 && echo b > r2 && mv r1 r2 && [ "$(cat r2)" = a ] && [ ! -e r1 ]'
check "rename a directory across directories" bash -c \
	'mkdir -p ra rb && mkdir ra/x && mv ra/x rb/x && [ "$(stat -c %h ra)" = 2 ] && [ "$(stat -c %h rb)" = 3 ] && [ -d rb/x ]'
check "RENAME_NOREPLACE and RENAME_EXCHANGE" py <<'PY'
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
def renameat2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags):
        return ctypes.get_errno()
    return 0
open('x1', 'w').write('one'); open('x2', 'w').write('two')
assert renameat2('x1', 'x2', 1) == errno.EEXIST
assert renameat2('x1', 'x2', 2) == 0
assert open('x1').read() == 'two' and open('x2').read() == 'one'
assert renameat2('x1', 'x3', 1) == 0 and not os.path.exists('x1')
PY
check "RENAME_WHITEOUT leaves a character device 0:0 at the old name" py <<'PY'
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
open('wh1', 'w').write('moved')
assert libc.renameat2(-100, b'wh1', -100, b'wh2', 4) == 0, ctypes.get_errno()
st = os.lstat('wh1')
assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, st
assert open('wh2').read() == 'moved'
assert libc.renameat2(-100, b'wh2', -100, b'wh1', 4 | 2) == -1  # with EXCHANGE: refused
PY
check "O_TMPFILE: an unnamed file, named by linkat, or freed at its close" py <<'PY'
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH = 0x1000
os.mkdir('tmpf')
fd = os.open('tmpf', os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, b'unnamed' * 1000)
st = os.fstat(fd)
assert st.st_nlink == 0 and st.st_mode & 0o7777 == 0o640, st
assert os.listdir('tmpf') == []
assert libc.linkat(fd, b'', -100, b'tmpf/named', AT_EMPTY_PATH) == 0, ctypes.get_errno()
os.close(fd)
assert os.stat('tmpf/named').st_nlink == 1
assert open('tmpf/named', 'rb').read() == b'unnamed' * 1000
free = os.statvfs('.').f_bfree
fd = os.open('tmpf', os.O_TMPFILE | os.O_RDWR | os.O_EXCL, 0o600)
os.write(fd, b'x' * (4 << 20))
os.fsync(fd)
assert os.statvfs('.').f_bfree < free - 1000
assert libc.linkat(fd, b'', -100, b'tmpf/never', AT_EMPTY_PATH) == -1  # O_EXCL: never named
assert ctypes.get_errno() == errno.ENOENT, ctypes.get_errno()
os.close(fd)
for _ in range(100):  # freed once the kernel forgets the inode, just after the close
    if os.statvfs('.').f_bfree >= free - 16:
        break
    time.sleep(0.05)
assert os.statvfs('.').f_bfree >= free - 16, (os.statvfs('.').f_bfree, free)
assert os.listdir('tmpf') == ['named']
os.unlink('tmpf/named')
os.rmdir('tmpf')
PY
if grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null; then
	check "overlayfs with its upper and work directories on CFS" bash -c '
		mkdir -p ovl/upper ovl/work "$0/lower" "$0/ovl" && echo low >"$0/lower/f" && echo keep >"$0/lower/g" &&
		mount -t overlay overlay -o "lowerdir=$0/lower,upperdir=$PWD/ovl/upper,workdir=$PWD/ovl/work" "$0/ovl" &&
		rm "$0/ovl/f" && echo new >"$0/ovl/h" && mv "$0/ovl/h" "$0/ovl/i"; rc=$?
		listing=$(ls "$0/ovl" | tr "\n" " "); umount "$0/ovl"
		[ $rc = 0 ] && [ "$listing" = "g i " ] && [ -c ovl/upper/f ]' "$T"
else
	echo "skip - overlayfs: not in this kernel"
fi
check "under a default ACL the umask is not applied (POSIX.1e), elsewhere it is" bash -c '
	mkdir umacl && setfacl -d -m u::rwx,g::rwx,o::rx umacl &&
	(umask 722 && touch umacl/f plain && mkdir umacl/sub plaindir) &&
	[ "$(stat -c %a umacl/f)" = 664 ] && [ "$(stat -c %a umacl/sub)" = 775 ] &&
	getfacl -p umacl/f | grep -qx "user::rw-" && getfacl -p umacl/sub | grep -qx "group::rwx" &&
	[ "$(stat -c %a plain)" = 44 ] && [ "$(stat -c %a plaindir)" = 55 ]'
check "rewinddir shows names made and removed after opendir" py <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.readdir.restype = ctypes.c_void_p
libc.readdir.argtypes = libc.rewinddir.argtypes = libc.closedir.argtypes = [ctypes.c_void_p]
def names(d):
    out = set()
    while True:
        e = libc.readdir(d)
        if not e:
            return out - {'.', '..'}
        out.add(ctypes.string_at(e + 19).decode())  # d_name in struct dirent
os.mkdir('rw'); open('rw/old', 'w').close()
d = libc.opendir(b'rw')
assert names(d) == {'old'}
open('rw/new', 'w').close(); os.unlink('rw/old')
libc.rewinddir(d)
got = names(d)
libc.closedir(d)
assert got == {'new'}, got
PY
# One node lists directories without opening them: an entry's offset is a hash of its name
# (cfsd/dir_listing.c), so a listing goes on right however the directory changes meanwhile.
check "a listing while the directory changes: names there throughout exactly once; seekdir to a telldir" py <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.readdir.restype = ctypes.c_void_p
libc.telldir.restype = ctypes.c_long
libc.readdir.argtypes = libc.closedir.argtypes = libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
def next_name(d):
    e = libc.readdir(d)
    return ctypes.string_at(e + 19).decode() if e else None
os.mkdir('churn')
stable = {f's{i}' for i in range(4000)}
for n in stable:
    open('churn/' + n, 'w').close()
for i in range(2000):
    open(f'churn/v{i}', 'w').close()
d = libc.opendir(b'churn')
seen, made, steps = [], 0, 0
while (n := next_name(d)) is not None:
    seen.append(n)
    steps += 1
    if steps % 300 == 0:  # others change the directory between the reader's getdents calls
        for i in range(40):
            open(f'churn/new{made}', 'w').close(); made += 1
            try: os.unlink(f'churn/v{(steps + i * 7) % 2000}')
            except FileNotFoundError: pass
libc.closedir(d)
assert len(seen) == len(set(seen)), 'names shown twice: %s' % sorted({n for n in seen if seen.count(n) > 1})[:5]
missing = stable - set(seen)
assert not missing, 'names there throughout not shown: %s' % sorted(missing)[:5]
d = libc.opendir(b'churn')
for _ in range(2500):
    next_name(d)
at = libc.telldir(d)
after = [next_name(d) for _ in range(20)]
for _ in range(1000):
    next_name(d)
libc.seekdir(d, at)
again = [next_name(d) for _ in range(20)]
libc.closedir(d)
assert after == again, (after, again)
PY
# A buffered reader racing libaio writes may cache a block the write replaces just after; the
# kernel keeps it (asynchronous writes), and cfsd drops it before it answers the write (or, if
# a readahead holds the page, a moment after).  So once the writes complete, buffered reads
# see them (and at once: aio_cycle.py below).
check "buffered reads after asynchronous O_DIRECT writes see the new data" py "$HERE" <<'PY'
import mmap, os, sys, threading, time, traceback
sys.excepthook = lambda kind, e, tb: print(f'{kind.__name__}: {e}', traceback.format_tb(tb)[-1],
                                           file=sys.stderr)  # the error first: check shows 600 bytes
sys.path.insert(0, sys.argv[1])
from libaio import Aio
N = 64
aio = Aio(N)
with open('aio-coherent', 'wb') as f:
    f.write(b'@' * (N * 4096))
direct = os.open('aio-coherent', os.O_WRONLY | os.O_DIRECT)
buffered = os.open('aio-coherent', os.O_RDONLY)
stop = False
def reader():  # keeps caching pages while the writes are in flight
    while not stop:
        os.pread(buffered, N * 4096, 0)
t = threading.Thread(target=reader)
t.start()
bufs = [mmap.mmap(-1, 4096) for _ in range(N)]
stale = 0
for round in range(10):
    fill = bytes([ord('A') + round])
    for b in bufs:
        b.seek(0)
        b.write(fill * 4096)
    aio.write(direct, bufs, [i * 4096 for i in range(N)])
    time.sleep(0.2)  # cfsd's invalidations of the written range are done by now
    data = os.pread(buffered, N * 4096, 0)
    stale += sum(data[i * 4096] != fill[0] for i in range(N))
stop = True
t.join()
aio.close()
assert stale == 0, f'{stale} stale pages'
PY
check "unlink of an open file: still readable, space back at close" py "$M" <<'PY'
import os, sys
fd = os.open('open-unlinked', os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b'z' * (8 << 20))
os.fsync(fd)
before = os.statvfs('.').f_bfree
os.unlink('open-unlinked')
assert not os.path.exists('open-unlinked')
os.lseek(fd, 0, 0)
assert os.read(fd, 4) == b'zzzz'
os.close(fd)
import time
for _ in range(50):
    if os.statvfs('.').f_bfree >= before + 2000: break
    time.sleep(0.1)
assert os.statvfs('.').f_bfree >= before + 2000, (before, os.statvfs('.').f_bfree)
PY
check "permissions: others cannot read a 0600 file" bash -c \
	'echo s > secret && chmod 600 secret && ! setpriv --reuid=65534 --regid=65534 --clear-groups cat secret 2>/dev/null'
check "chown and chmod" bash -c 'touch o && chown 65534:65534 o && chmod 4751 o && [ "$(stat -c %u:%g:%a o)" = 65534:65534:4751 ]'
check "utimens" bash -c 'touch -d "2001-02-03 04:05:06.789" t && [ "$(stat -c %y t)" = "2001-02-03 04:05:06.789000000 +0000" ]'
check "xattrs: user, trusted, security" bash -c \
	'touch xa && setfattr -n user.a -v 1 xa && setfattr -n trusted.b -v 2 xa && setfattr -n security.c -v 3 xa &&
	 [ "$(getfattr --only-values -n user.a xa)" = 1 ] && [ "$(getfattr --only-values -n trusted.b xa)" = 2 ] &&
	 [ "$(getfattr --only-values -n security.c xa)" = 3 ] && setfattr -x user.a xa && ! getfattr -n user.a xa 2>/dev/null'
check "a 3000-byte xattr (in the xattr block)" py <<'PY'
import os
open('xb', 'w').close()
os.setxattr('xb', 'user.big', b'q' * 3000)
os.setxattr('xb', 'user.small', b's')
assert os.getxattr('xb', 'user.big') == b'q' * 3000
assert sorted(os.listxattr('xb')) == ['user.big', 'user.small']
PY
check "POSIX ACLs are kept and enforced" bash -c \
	'echo acl > acl && chmod 600 acl && setfacl -m u:65534:r acl && getfacl acl | grep -q "user:nobody:r--" &&
	 setpriv --reuid=65534 --regid=65534 --clear-groups cat acl >/dev/null'
check "default ACLs are inherited" bash -c \
	'mkdir dacl && setfacl -d -m u:65534:rwx dacl && touch dacl/child && getfacl dacl/child | grep -q "user:nobody:rwx"'
# chattr(1) flags: the kernel asks cfsd for them (FUSE ioctl) but enforces none, cfsd does.
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
export -f nobody
check "chattr +i: lsattr shows it; no write, truncate, rename, link, unlink, chmod or xattr" bash -c '
	echo frozen > imm && chattr +i imm && lsattr imm | grep -q "^----i" &&
	! sh -c "echo x >> imm" 2>/dev/null && ! truncate -s 0 imm 2>/dev/null &&
	! mv imm imm2 2>/dev/null && ! ln imm imm3 2>/dev/null && ! rm -f imm 2>/dev/null &&
	! chmod 600 imm 2>/dev/null && ! setfattr -n user.x -v 1 imm 2>/dev/null &&
	! fallocate -p -o 0 -l 4096 imm 2>/dev/null && [ "$(cat imm)" = frozen ] &&
	chattr -i imm && echo more >> imm && rm imm'
check "chattr +a: appends only; no overwrite, truncate or unlink" bash -c '
	echo one > app && chattr +a app && lsattr app | grep -q "^-----a" && echo two >> app &&
	! sh -c "echo x > app" 2>/dev/null && ! truncate -s 1 app 2>/dev/null && ! rm -f app 2>/dev/null &&
	! fallocate -n -o 4096 -l 4096 app 2>/dev/null && python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(\"app\", os.O_WRONLY | os.O_APPEND)
L = ctypes.c_long
assert libc.fallocate(fd, 3, L(0), L(4096)) != 0, \"a hole punched\"  # PUNCH_HOLE | KEEP_SIZE
assert libc.fallocate(fd, 1, L(4096), L(4096)) == 0, \"not grown\"    # KEEP_SIZE
" && [ "$(cat app)" = "$(printf "one\ntwo")" ] && chattr -a app && rm app'
check "chattr +a: touch sets its times to now; a chosen time, chmod and chown are refused" bash -c '
	echo one > app2 && chattr +a app2 && touch app2 && ! touch -d 2001-01-01 app2 2>/dev/null &&
	! chmod 600 app2 2>/dev/null && ! chown 65534 app2 2>/dev/null &&
	[ "$(stat -c %Y app2)" -gt 978307200 ] && chattr -a app2 && rm app2'
check "chattr +i: not even touch" bash -c '
	echo one > imm2 && chattr +i imm2 && ! touch imm2 2>/dev/null && chattr -i imm2 && rm imm2'
# (A regular file's ctime the kernel's write-back cache keeps itself: cfs(8), inode flags.)
check "chattr changes the ctime, and stat shows it at once" bash -c '
	mkdir ct && before=$(stat -c %z ct) && sleep 0.01 && chattr +d ct &&
	[ "$(stat -c %z ct)" != "$before" ] && chattr -d ct && rmdir ct'
check "chattr +i and +a on directories: names stay; +a takes new ones" bash -c '
	mkdir -p sealed drop && touch sealed/in drop/in && chattr +i sealed && chattr +a drop &&
	lsattr -d sealed | grep -q "^----i" && ! touch sealed/new 2>/dev/null && ! rm sealed/in 2>/dev/null &&
	echo still > sealed/in && touch drop/new && ! rm drop/new 2>/dev/null && ! mv drop/in drop/x 2>/dev/null &&
	chattr -i sealed && chattr -a drop && rm -r sealed drop'
# generic/079: a full directory under a flagged one is refused for the flag (EPERM), not for
# being full (the VFS checks the parent first).
check "rmdir of a full directory in a +i or +a directory: EPERM, not ENOTEMPTY" bash -c '
	mkdir -p imd/sub apd/sub && touch imd/sub/x apd/sub/x && chattr +i imd && chattr +a apd &&
	rmdir imd/sub 2>&1 | grep -q "Operation not permitted" &&
	rmdir apd/sub 2>&1 | grep -q "Operation not permitted" &&
	chattr -i imd && chattr -a apd && rm -r imd apd'
check "chattr as a user: +d on an own file works; +i, +a and a stranger's file are refused" bash -c '
	touch ufile && chown 65534 ufile && nobody chattr +d ufile && lsattr ufile | grep -q "^------d" &&
	! nobody chattr +i ufile 2>/dev/null && ! nobody chattr +a ufile 2>/dev/null &&
	touch rootfile && ! nobody chattr +d rootfile 2>/dev/null && rm ufile rootfile'
expect 1 "Operation not supported" "chattr of a flag CFS does not keep (+c) is refused" -- chattr +c "$M/f"
echo kept > "$M/keepflag" && chattr +a "$M/keepflag"
check "FS_IOC_FSGETXATTR and FSSETXATTR (xfs_io's) carry the same flags" py "$M" <<'PY'
import fcntl, os, struct, sys
FSGETXATTR, FSSETXATTR, GETFLAGS = 0x801c581f, 0x401c5820, 0x80086601
def xflags(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return struct.unpack('I', fcntl.ioctl(fd, FSGETXATTR, bytes(28))[:4])[0]
    finally:
        os.close(fd)
assert xflags(sys.argv[1] + '/keepflag') == 0x10, hex(xflags(sys.argv[1] + '/keepflag'))  # APPEND
p = sys.argv[1] + '/xfl'
open(p, 'w').close()
fd = os.open(p, os.O_RDONLY)
fcntl.ioctl(fd, FSSETXATTR, struct.pack('I', 0x80) + bytes(24))  # NODUMP
flags = struct.unpack('l', fcntl.ioctl(fd, GETFLAGS, bytes(8)))[0]
assert flags == 0x40, hex(flags)  # FS_NODUMP_FL
try:
    fcntl.ioctl(fd, FSSETXATTR, struct.pack('I', 0x80) + bytes(8) + struct.pack('I', 7) + bytes(12))
    sys.exit('a project id was taken')
except OSError:
    pass
os.close(fd)
os.unlink(p)
PY
check "fallocate, KEEP_SIZE and PUNCH_HOLE" bash -c \
	'fallocate -l 8M fa && [ "$(stat -c %s fa)" = 8388608 ] && [ "$(stat -c %b fa)" -ge 16384 ] &&
	 fallocate -n -o 8M -l 4M fa && [ "$(stat -c %s fa)" = 8388608 ] &&
	 yes | head -c 8M > fb && fallocate -p -o 4096 -l 1M fb && [ "$(stat -c %s fb)" = 8388608 ] &&
	 [ "$(head -c 8192 fb | tail -c 4096 | tr -d "\0" | wc -c)" = 0 ] && [ "$(head -c 1 fb)" = y ]'
check "fallocate ZERO_RANGE: zeros in the range, allocated, the rest kept, the size grown" py <<'PY'
import os
data = bytes(range(256)) * 4096  # 1 MiB
with open('fz', 'wb') as f:
    f.write(data)
fd = os.open('fz', os.O_RDWR)
import ctypes  # fallocate(2) with a mode
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
ZERO, KEEP = 0x10, 0x01
assert libc.fallocate(fd, ZERO, 1000, 300000) == 0, ctypes.get_errno()  # unaligned edges
got = os.pread(fd, len(data), 0)
assert got[:1000] == data[:1000] and got[301000:] == data[301000:]
assert got[1000:301000] == bytes(300000)
assert libc.fallocate(fd, ZERO | KEEP, len(data) - 4096, 1 << 20) == 0
assert os.fstat(fd).st_size == len(data) and os.pread(fd, 4096, len(data) - 4096) == bytes(4096)
assert libc.fallocate(fd, ZERO, len(data), 1 << 20) == 0
st = os.fstat(fd)
assert st.st_size == 2 << 20 and st.st_blocks * 512 >= 2 << 20, (st.st_size, st.st_blocks)
assert libc.fallocate(fd, ZERO | 0x02, 0, 4096) == -1  # with PUNCH_HOLE: refused
os.close(fd)
PY
cat >"$T/seek.py" <<'PY'
import errno, os, subprocess, sys
holes = sys.argv[1] == 'holes'   # else the kernel answers: no holes (a write-back cache)
fd = os.open('sk', os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
os.pwrite(fd, b'a' * 4096, 0)
os.pwrite(fd, b'b' * 5000, 1 << 20)           # data in [1 MiB, 1 MiB + 8 KiB)
os.posix_fallocate(fd, 2 << 20, 1 << 20)      # unwritten: a hole to lseek
os.ftruncate(fd, 4 << 20)
M = 1 << 20
if holes:
    assert os.lseek(fd, 0, os.SEEK_DATA) == 0 and os.lseek(fd, 0, os.SEEK_HOLE) == 4096
    assert os.lseek(fd, 4096, os.SEEK_DATA) == M and os.lseek(fd, M + 100, os.SEEK_DATA) == M + 100
    assert os.lseek(fd, M, os.SEEK_HOLE) == M + 8192
    assert os.lseek(fd, 3 * M, os.SEEK_HOLE) == 3 * M
else:
    assert os.lseek(fd, 4096, os.SEEK_DATA) == 4096 and os.lseek(fd, M, os.SEEK_HOLE) == 4 * M
for at in (M + 8192 if holes else 4 * M, 4 * M):
    try:
        os.lseek(fd, at, os.SEEK_DATA if at < 4 * M else os.SEEK_HOLE)
        raise AssertionError(f'no ENXIO at {at}')
    except OSError as e:
        assert e.errno == errno.ENXIO, e
for at in (-1, -(1 << 63)):  # negative: ENXIO, as the kernel's filesystems say (generic/448)
    for whence in (os.SEEK_DATA, os.SEEK_HOLE):
        try:
            os.lseek(fd, at, whence)
            raise AssertionError(f'no ENXIO at {at}')
        except OSError as e:
            assert e.errno == errno.ENXIO, (at, whence, e)
# Written and not yet sent: data, never a hole.
os.pwrite(fd, b'c' * 4096, 3 * M)
assert os.lseek(fd, 3 * M, os.SEEK_DATA) == 3 * M and os.lseek(fd, 3 * M, os.SEEK_HOLE) >= 3 * M + 4096
os.close(fd)
subprocess.run(['cp', 'sk', 'sk-copy'], check=True)
st = os.stat('sk-copy')
assert open('sk', 'rb').read() == open('sk-copy', 'rb').read()
assert st.st_blocks * 512 <= 64 * 1024, st.st_blocks  # the holes stayed holes
os.unlink('sk-copy')
PY
check "SEEK_DATA and SEEK_HOLE (the kernel's: no holes, with the write-back cache); cp keeps a sparse file sparse" \
	py nowb <"$T/seek.py"
check "truncate down and up reads zeros past the old end" bash -c \
	'yes | head -c 10000 > tr && truncate -s 5000 tr && truncate -s 10000 tr && [ "$(tail -c 5000 tr | tr -d "\0" | wc -c)" = 0 ]'
check "sparse files of 1 TiB" bash -c \
	'truncate -s 1T sp && echo end >> sp && [ "$(stat -c %s sp)" = 1099511627780 ] && [ "$(tail -c 4 sp)" = end ] && [ "$(stat -c %b sp)" -lt 100 ]'
check "mmap on a normal mount" py <<'PY'
import mmap, os
fd = os.open('mm', os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, 8192)
m = mmap.mmap(fd, 8192)
m[100:105] = b'mmapd'
m.flush(); m.close(); os.close(fd)
assert open('mm', 'rb').read()[100:105] == b'mmapd'
PY
# The kernel keeps a file's pages across this node's own writes (the daemon tells it what
# others change): a re-read after a 4 KiB write, once the attributes timed out, reads next to
# nothing from the daemon (libfuse's default, auto_inval_data, re-read the whole file).  The
# bound is a quarter of the file: the kernel may reclaim some of its pages meanwhile on a
# machine busy with other tests (a full run once read 1.1 MiB of the 32 back).
check "page cache: a re-read after this node's 4 KiB write is served from the page cache" \
	py "$BIN/cfs" "$M" <<'PY'
import json, os, subprocess, sys, time
def read_bytes():
    out = subprocess.run([sys.argv[1], 'status', '--json', sys.argv[2]], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)['read_bytes']
data = bytearray(os.urandom(32 << 20))
with open('pc', 'wb') as f:
    f.write(data)
assert open('pc', 'rb').read() == data        # cached now
before = read_bytes()
with open('pc', 'r+b') as f:
    f.seek(8 << 20); f.write(b'w' * 4096)
data[8 << 20:(8 << 20) + 4096] = b'w' * 4096
time.sleep(1.2)                               # past the attribute timeout: a fresh stat
os.stat('pc')
assert open('pc', 'rb').read() == data, 'the re-read is wrong'
delta = read_bytes() - before
assert delta < (8 << 20), f'{delta} bytes read from the daemon for a 32 MiB re-read'
PY
check "statfs" bash -c '[ "$(stat -f -c %S .)" = 4096 ] && [ "$(stat -f -c %a .)" -gt 0 ] && df . | grep -q cfs:v'
check "fsync and fdatasync" py <<'PY'
import os
fd = os.open('fs', os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b'durable'); os.fsync(fd); os.fdatasync(fd); os.close(fd)
PY
check "O_DIRECT read and write" bash -c \
	'dd if=/dev/urandom of=dsrc bs=1M count=4 status=none && dd if=dsrc of=dio bs=1M oflag=direct status=none &&
	 dd if=dio of=dback bs=1M iflag=direct status=none && cmp dsrc dback'
check "flock and fcntl locks exclude each other" bash -c \
	'touch lk && flock lk sh -c "touch held; until [ -e release ]; do sleep 0.05; done" &
	 for i in $(seq 1200); do [ -e held ] && break; sleep 0.05; done
	 ! flock -n lk true; r=$?; touch release; wait; rm -f held release; [ $r = 0 ] &&
	 python3 -c "
import fcntl, os, subprocess
fd = os.open(\"lk\", os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX)
r = subprocess.run([\"python3\", \"-c\", \"import fcntl,os; fd=os.open(\\\"lk\\\",os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB)\"])
assert r.returncode != 0"'
check "running an executable from the mount" bash -c 'cp /bin/echo ./echo-here && [ "$(./echo-here ran)" = ran ]'
check "a directory of 20000 entries" bash -c \
	'mkdir big && (cd big && seq 1 20000 | xargs touch) && [ "$(ls big | wc -l)" = 20000 ] && (cd big && seq 1 2 20000 | xargs rm) && [ "$(ls big | wc -l)" = 10000 ]'

# Workloads.
check "fio random writes with verify (direct)" timeout 300 fio --name=verify --directory="$M" --rw=randwrite \
	--bs=4k --size=32M --ioengine=libaio --iodepth=16 --direct=1 --verify=crc32c --do_verify=1 --output="$T/fio.out"
check "fio 4 jobs on one file with verify" timeout 300 fio --name=par --filename="$M/par" --rw=write --bs=64k \
	--size=64M --numjobs=1 --verify=md5 --output="$T/fio2.out"
check "tar round trip keeps every byte" bash -c \
	'tar -C /usr/include -cf - . | tar -C "'"$M"'" -xf - --one-top-level=inc && (cd /usr/include && find . -type f -print0 | sort -z | xargs -0 sha256sum) > "'"$T"'/a" &&
	 (cd "'"$M"'/inc" && find . -type f -print0 | sort -z | xargs -0 sha256sum) > "'"$T"'/b" && cmp "'"$T"'/a" "'"$T"'/b"'
if command -v dbench >/dev/null; then
	check "dbench, 4 clients, 10 s" timeout 120 dbench -D "$M" -t 10 4
fi
mkdir -p "$T/twin" && mount -t tmpfs cfs-twin "$T/twin"
check "random operations agree with a tmpfs twin" timeout 300 python3 "$HERE/exerciser.py" "$M/ex" "$T/twin/ex" 3000
[ -z "${CFS_TRANSPORT:-}" ] ||
	check "the workloads' requests came through $CFS_TRANSPORT" transport_is "$M" "$CFS_TRANSPORT" 10000

cd / || exit 1
umount_cfs "$M" && ok "cfs umount" || not_ok "cfs umount"
expect 0 "clean" "fsck.cfs finds the filesystem clean" -- "$BIN/fsck.cfs" -n v

# The write-back cache of a one-node normal mount (cfs(8), nowriteback): writes wait in the
# kernel until fsync, close or unmount; a write error (a full filesystem) comes from fsync.
cat >"$T/writeback.py" <<'PY'
import errno, json, os, subprocess, sys
cfs, mnt, want = sys.argv[1], sys.argv[2], sys.argv[3] == 'writeback'
def status():
    out = subprocess.run([cfs, 'status', '--json', mnt], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)
assert status()['writeback'] == want, f'cfs status says writeback {status()["writeback"]}'
before = status()['write_bytes']
# A process that holds the file open writes, then waits: an exec from a process that holds
# it (this one's cfs status) would close it there, and every close sends the dirty pages.
writer = subprocess.Popen([sys.executable, '-c', """
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b'w' * (2 << 20))
print('written', flush=True)
sys.stdin.readline()
os.fsync(fd)
print('synced', flush=True)
sys.stdin.readline()
""", mnt + '/wb'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert writer.stdout.readline() == 'written\n'
cached = status()['write_bytes'] - before
writer.stdin.write('\n'); writer.stdin.flush()
assert writer.stdout.readline() == 'synced\n'
sent = status()['write_bytes'] - before
writer.stdin.write('\n'); writer.stdin.flush()
assert writer.wait() == 0
assert sent >= 2 << 20, f'only {sent} bytes reached the daemon after fsync'
assert (cached < 1 << 20) == want, f'{cached} bytes reached the daemon before fsync'
# fdatasync of an overwrite commits nothing (the time waits, as with lazytime), fsync does.
def commits():
    return status()['commits']
fd = os.open(mnt + '/fds', os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b'x' * (32 * 4096))
os.fsync(fd)
c0 = commits()
for i in range(20):
    os.pwrite(fd, b'y' * 4096, i * 4096)
    os.fdatasync(fd)
c1 = commits()
os.pwrite(fd, b'z' * 4096, 0)
os.fsync(fd)
c2 = commits()
os.close(fd)
os.unlink(mnt + '/fds')
if not want:  # a write-back cache sends its times before an fdatasync too
    assert c1 - c0 <= 2, f'{c1 - c0} commits for 20 fdatasyncs of overwrites'
assert c2 > c1, 'no commit for the fsync after an overwrite'
# Written before chattr +a or +i, sent after it: the write was allowed when it was made.
import fcntl, struct
for flag in (0x20, 0x10):  # FS_APPEND_FL, FS_IMMUTABLE_FL
    fd = os.open(mnt + '/flagged', os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.pwrite(fd, b'before the flag', 0)
    ro = os.open(mnt + '/flagged', os.O_RDONLY)
    fcntl.ioctl(ro, 0x40086602, struct.pack('i', flag))  # FS_IOC_SETFLAGS
    os.close(fd)
    assert open(mnt + '/flagged', 'rb').read() == b'before the flag', hex(flag)
    fcntl.ioctl(ro, 0x40086602, struct.pack('i', 0))
    os.close(ro)
os.unlink(mnt + '/flagged')
# Past the end of the space: the error comes from the write through, from fsync with write-back.
fd = os.open(mnt + '/full', os.O_CREAT | os.O_WRONLY, 0o644)
failed_at = None
try:
    for i in range(200):
        os.write(fd, b'f' * (1 << 20))
    os.fsync(fd)
except OSError as e:
    assert e.errno == errno.ENOSPC, f'{e}, not ENOSPC'
    failed_at = 'write' if i < 199 else 'fsync'
try:
    os.close(fd)
except OSError as e:  # the error fsync reported is not reported twice
    sys.exit(f'close after the failed fsync: {e}')
assert failed_at == ('fsync' if want else 'write'), f'ENOSPC at {failed_at}'
os.unlink(mnt + '/full')
os.unlink(mnt + '/wb')
PY
make_volume small 1 64
"$BIN/mkfs.cfs" -L small small >/dev/null 2>&1 || not_ok "mkfs.cfs of a 64 MiB volume"
for mode in writeback nowriteback; do
	mount_cfs small "$T/small" "$mode" || { not_ok "$mode mount: $(tail -3 "$T/small.log")"; continue; }
	check "$mode: writes reach the daemon $([ $mode = writeback ] && echo at fsync || echo at once), also after a chattr +a or +i, fdatasync commits no time, ENOSPC at $([ $mode = writeback ] && echo fsync || echo the write)" \
		timeout 120 python3 "$T/writeback.py" "$BIN/cfs" "$T/small" "$mode"
	check "$mode: a buffered read after an AIO direct write completed reads it, with buffered readers beside (generic/451)" \
		timeout 300 python3 "$HERE/aio_cycle.py" "$T/small/cycle" 1000 2
	# cfsd stamps every time only without the write-back cache (cfs(8): generic/423)
	[ "$mode" = writeback ] || check "$mode: times in the order things were made (generic/423)" \
		timeout 300 python3 "$HERE/time_order.py" "$T/small/order" 200
	rm -f "$T/small/cycle"
	umount_cfs "$T/small"
	expect 0 "clean" "$mode: fsck.cfs clean after the full filesystem" -- "$BIN/fsck.cfs" -n small
done

# dboptimized: direct I/O on every open, parallel writers on one file, unaligned I/O still right.
mount_cfs v "$M" dboptimized || { not_ok "dboptimized mount: $(tail -3 "$T/v.log")"; finish; }
[ -z "${CFS_TRANSPORT:-}" ] ||
	check_soon 60 "dboptimized: requests come through $CFS_TRANSPORT" transport_is "$M" "$CFS_TRANSPORT"
check "dboptimized: shared and private mappings read and write what read(2) and write(2) do, as cfs(8) says" py "$M" <<'PY'
import errno, mmap, os, sys
fd = os.open(sys.argv[1] + '/mm', os.O_RDWR)
want = os.pread(fd, 4096, 0)
for prot in (mmap.PROT_READ, mmap.PROT_READ | mmap.PROT_WRITE):
    m = mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=prot)
    if m[:] != want:
        sys.exit('a private mapping reads other bytes than read(2)')
    m.close()
if tuple(map(int, os.uname().release.split('.')[:2])) < (6, 6):  # no FUSE_DIRECT_IO_ALLOW_MMAP
    try:
        mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED)
        sys.exit('a shared mapping was allowed by a kernel before 6.6')
    except OSError as e:
        sys.exit(0 if e.errno == errno.ENODEV else f'a shared mapping failed with {e}, not ENODEV')
m = mmap.mmap(fd, 8192, flags=mmap.MAP_SHARED)
if m[:4096] != want:
    sys.exit('a shared mapping reads other bytes than read(2)')
m[0:5] = b'mmap!'
m.flush()
if os.pread(fd, 5, 0) != b'mmap!':
    sys.exit('a direct read after msync does not see what the shared mapping wrote')
os.pwrite(fd, b'W' * 4096, 4096)
if m[4096:4101] != b'WWWWW':
    sys.exit('a shared mapping does not see a direct write made after it read the page')
m.close()
PY
check "dboptimized: SEEK_DATA and SEEK_HOLE find the holes; cp keeps a sparse file sparse" \
	bash -c 'cd "$1" && timeout 120 python3 - holes <"$2"' _ "$M" "$T/seek.py"
check "dboptimized: 4 writers on one file at once, verified" timeout 300 fio --name=par --filename="$M/db" \
	--rw=randwrite --bs=8k --size=16M --offset_increment=16M --numjobs=4 --ioengine=libaio --iodepth=8 \
	--direct=1 --verify=crc32c --do_verify=1 --output="$T/fio3.out"
check "dboptimized: unaligned writes and reads" bash -c \
	'head -c 100000 /dev/urandom > "'"$T"'/u" && dd if="'"$T"'/u" of="'"$M"'/u" bs=1000 status=none && cmp "'"$T"'/u" "'"$M"'/u"'
check "dboptimized: the append-only flag set before the remount is there" bash -c \
	'lsattr "'"$M"'/keepflag" | grep -q "^-----a" && chattr -a "'"$M"'/keepflag"'
check "dboptimized: what was written before is there" bash -c '[ "$(cat "'"$M"'/f")" = hello ] && cmp /usr/include/stdio.h "'"$M"'/inc/stdio.h"'
umount_cfs "$M"
mount_cfs v "$M" ro || { not_ok "ro mount"; finish; }
expect 1 "Read-only file system" "ro: writes are refused" -- touch "$M/new"
expect 0 "hello" "ro: reads work" -- cat "$M/f"
umount_cfs "$M"
expect 0 "clean" "fsck.cfs: clean at the end" -- "$BIN/fsck.cfs" -n v
finish
