/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libodm against a mounted CFS (ODM_TEST_DIR, set by test_odm.sh): every call and its errors,
 * data both ways between ODM and the mount, create/abort and cleanup after a crash, resize
 * racing with I/O, exact statistics.  Criterion runs each test in a process of its own. */
#include "odm/odm.h"
#include "odm/stats.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define BS 8192u
#define MIB (1u << 20)

static const char *dir(void)
{
	const char *d = getenv("ODM_TEST_DIR");
	cr_assert(d, "ODM_TEST_DIR must name a CFS mount (run tests/odm/test_odm.sh)");
	return d;
}

/* The script's run gets a database name of its own, so it can remove its segments after. */
static const char *db(void)
{
	const char *d = getenv("ODM_TEST_DB");
	return d ? d : "TESTDB";
}

static pid_t test_pid; /* names stay the test's in its children */

static char *path_of(const char *name)
{
	static char p[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%d_%s", dir(), (int)(test_pid ? test_pid : getpid()), name);
	return p[k];
}

/* Whether a listing of the directory shows the file at path (the kernel may keep listings
 * of a one-node mount: ODM's creates and deletes must make it forget them). */
static bool listed(const char *path)
{
	const char *name = strrchr(path, '/') + 1;
	DIR *d = opendir(dir());
	cr_assert_not_null(d);
	bool found = false;
	for (struct dirent *e; !found && (e = readdir(d));)
		found = strcmp(e->d_name, name) == 0;
	closedir(d);
	return found;
}

static void init(void)
{
	test_pid = getpid();
	char inst[32];
	snprintf(inst, sizeof inst, "T%d", (int)getpid());
	cr_assert_eq(odm_init(db(), inst), 0);
}

static void *buf_of(size_t n, int fill)
{
	void *b;
	cr_assert_eq(posix_memalign(&b, 4096, n), 0);
	memset(b, fill, n);
	return b;
}

static int sync_io(int op, odm_fid fid, uint64_t block, void *buf, uint32_t size)
{
	struct odm_ioc ioc = {.op = op, .fid = fid, .block = block, .buf = buf, .size = size};
	struct odm_ioc *p = &ioc;
	int rc = odm_io(&p, 1, &p, 1, NULL, 0, NULL, -1);
	cr_assert_eq(rc, ODM_IO_WAITED, "odm_io: %d", rc);
	return ioc.status;
}

static odm_fid make_file(const char *name, uint64_t size)
{
	odm_fid fid;
	cr_assert_eq(odm_create(path_of(name), size, BS, ODM_FT_DATA, &fid), 0);
	cr_assert_eq(odm_commit(fid), 0);
	return fid;
}

Test(odm, calls_before_init_and_bad_names)
{
	odm_fid fid;
	cr_assert_eq(odm_identify(path_of("x"), &fid, NULL), -ENXIO);
	cr_assert_eq(odm_io(NULL, 0, NULL, 0, NULL, 0, NULL, 0), -ENXIO);
	cr_assert_eq(odm_fini(), -ENXIO);
	cr_assert_eq(odm_init("bad/name", "I"), -EINVAL);
	cr_assert_eq(odm_init("DB", ""), -EINVAL);
	init();
	cr_assert_eq(odm_init(db(), "again"), -EALREADY);
	cr_assert_eq(odm_set_ptype(ODM_PT_COUNT), -EINVAL);
	cr_assert_eq(odm_set_ptype(ODM_PT_DBWR), 0);
	cr_assert_eq(odm_fini(), 0);
}

Test(odm, discover_and_files_not_on_cfs)
{
	init();
	cr_assert_eq(odm_discover(dir()), 1);
	cr_assert_eq(odm_discover(path_of("not-yet")), 1);
	cr_assert_eq(odm_discover("/proc/self"), 0);
	odm_fid fid;
	cr_assert_eq(odm_identify("/etc/hostname", &fid, NULL), -EXDEV);
	cr_assert_eq(odm_create("/tmp/odm-not-cfs.dbf", MIB, BS, ODM_FT_DATA, &fid), -EXDEV);
	cr_assert_eq(odm_identify(path_of("missing"), &fid, NULL), -ENOENT);
	cr_assert_eq(odm_identify(dir(), &fid, NULL), -EISDIR);
}

Test(odm, create_is_invisible_until_commit)
{
	init();
	struct stat st;
	odm_fid fid;
	const char *p = path_of("c.dbf");
	cr_assert_eq(odm_create(p, 3 * BS, 1000, ODM_FT_DATA, &fid), -EINVAL); /* block size */
	cr_assert_eq(odm_create(p, 3 * BS + 512, BS, ODM_FT_DATA, &fid), -EINVAL);
	cr_assert_eq(odm_create(p, 3 * BS, BS, ODM_FT_COUNT, &fid), -EINVAL);
	char nodir[600];
	snprintf(nodir, sizeof nodir, "%s/no-such-dir/x.dbf", dir());
	cr_assert_eq(odm_create(nodir, BS, BS, ODM_FT_DATA, &fid), -ENOENT);
	cr_assert_eq(odm_create(p, 4 * MIB, BS, ODM_FT_REDO, &fid), 0);
	cr_assert_not(listed(p), "an uncommitted file is listed");
	cr_assert_eq(stat(p, &st), -1, "an uncommitted file is visible");
	cr_assert_eq(errno, ENOENT);
	void *b = buf_of(BS, 'c');
	cr_assert_eq(sync_io(ODM_WRITE, fid, 5, b, BS), 0, "I/O before commit");
	cr_assert_eq(odm_commit(fid), 0);
	cr_assert_eq(odm_commit(fid), -EINVAL);
	cr_assert(listed(p), "the committed file is not listed");
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_size, 4 * MIB);
	struct odm_fileinfo fi;
	cr_assert_eq(odm_getfileinfo(fid, &fi), 0);
	cr_assert_eq(fi.block_size, BS);
	cr_assert_eq(fi.type, ODM_FT_REDO);
	cr_assert_eq(fi.size, 4 * MIB);
	cr_assert(fi.committed);
	cr_assert_eq(fi.ino, st.st_ino);
	cr_assert_str_eq(fi.path, p);
	cr_assert_eq(odm_create(p, BS, BS, ODM_FT_DATA, &fid), -EEXIST);
	char back[BS];
	int fd = open(p, O_RDONLY);
	cr_assert_eq(pread(fd, back, BS, 5 * BS), BS);
	close(fd);
	cr_assert_eq(memcmp(back, b, BS), 0, "the write before commit is not in the file");
}

Test(odm, abort_and_death_leave_nothing)
{
	init();
	struct statvfs before, after;
	cr_assert_eq(statvfs(dir(), &before), 0);
	odm_fid fid;
	const char *p = path_of("a.dbf");
	cr_assert_eq(odm_create(p, 32 * MIB, BS, ODM_FT_DATA, &fid), 0);
	cr_assert_eq(odm_abort(fid), 0);
	cr_assert_eq(odm_getfileinfo(fid, &(struct odm_fileinfo){0}), -EBADF);
	cr_assert_eq(odm_abort(fid), -EBADF);
	pid_t child = fork();
	if (child == 0) { /* creates, then dies without a word */
		char inst[32];
		snprintf(inst, sizeof inst, "C%d", (int)getpid());
		if (odm_init(db(), inst) || odm_create(p, 32 * MIB, BS, ODM_FT_DATA, &fid))
			_exit(1);
		kill(getpid(), SIGKILL);
	}
	int st;
	waitpid(child, &st, 0);
	cr_assert(WIFSIGNALED(st), "the child failed before it was killed");
	struct stat sb;
	cr_assert_eq(stat(p, &sb), -1);
	for (int i = 0; i < 50; i++) { /* cfsd notices the closed connection */
		cr_assert_eq(statvfs(dir(), &after), 0);
		if (after.f_bfree >= before.f_bfree)
			break;
		usleep(100000);
	}
	cr_assert_geq(after.f_bfree, before.f_bfree, "the dead process's file kept its space");
	cr_assert_eq(odm_create(p, MIB, BS, ODM_FT_DATA, &fid), 0, "the name stayed taken");
}

Test(odm, data_both_ways_with_the_mount)
{
	init();
	odm_fid fid = make_file("d.dbf", 8 * MIB);
	const char *p = path_of("d.dbf");
	void *w = buf_of(3 * BS, 0), *r = buf_of(3 * BS, 0);
	for (size_t i = 0; i < 3 * BS; i++)
		((unsigned char *)w)[i] = (unsigned char)(i * 7 + 3);
	cr_assert_eq(sync_io(ODM_WRITE, fid, 100, w, 3 * BS), 0);
	int fd = open(p, O_RDWR | O_DIRECT);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, r, 3 * BS, 100 * BS), 3 * BS);
	cr_assert_eq(memcmp(r, w, 3 * BS), 0, "the mount does not see what ODM wrote");
	memset(w, 'm', BS);
	cr_assert_eq(pwrite(fd, w, BS, 7 * MIB), BS);
	close(fd);
	cr_assert_eq(sync_io(ODM_READ, fid, 7 * MIB / BS, r, BS), 0);
	cr_assert_eq(memcmp(r, w, BS), 0, "ODM does not see what the mount wrote");
	/* never written: zeros, not another file's old blocks */
	cr_assert_eq(sync_io(ODM_READ, fid, 2, r, BS), 0);
	for (size_t i = 0; i < BS; i++)
		cr_assert_eq(((unsigned char *)r)[i], 0);
}

Test(odm, request_errors)
{
	init();
	odm_fid fid = make_file("e.dbf", MIB);
	char *b = buf_of(2 * BS, 1);
	cr_assert_eq(sync_io(ODM_READ, fid, 0, b + 1, BS), -EINVAL, "misaligned buffer");
	cr_assert_eq(sync_io(ODM_READ, fid, 0, b, 100), -EINVAL, "misaligned size");
	cr_assert_eq(sync_io(ODM_READ, fid, 0, b, 0), -EINVAL, "empty");
	cr_assert_eq(sync_io(7, fid, 0, b, BS), -EINVAL, "unknown op");
	cr_assert_eq(sync_io(ODM_WRITE, fid, MIB / BS, b, BS), -ERANGE, "past the end");
	cr_assert_eq(sync_io(ODM_WRITE, fid, MIB / BS - 1, b, 2 * BS), -ERANGE, "across the end");
	cr_assert_eq(sync_io(ODM_READ, fid + 1, 0, b, BS), -EBADF, "unknown file");
	cr_assert_eq(sync_io(ODM_READ, (fid & 0xffffffffu) | (uint64_t)77 << 32, 0, b, BS), -EBADF,
		     "stale generation");
	struct odm_ioc ioc = {.op = ODM_READ, .fid = fid, .buf = b, .size = BS}, *p = &ioc;
	cr_assert_eq(odm_io(&p, 1, NULL, 0, NULL, 0, NULL, 0), ODM_IO_POSTED);
	cr_assert_eq(odm_io(&p, 1, NULL, 0, NULL, 0, NULL, 0), -EINVAL, "submitted twice");
	cr_assert_eq(odm_cancel(&ioc), 0);
	cr_assert_neq(ioc.status, ODM_PENDING);
	struct odm_ioc *got[2];
	unsigned n = 0;
	cr_assert_eq(odm_io(NULL, 0, NULL, 0, got, 2, &n, -1), ODM_IO_WAITED);
	cr_assert_eq(n, 1);
	cr_assert_eq(got[0], &ioc);
	cr_assert_eq(odm_io(NULL, 0, NULL, 0, got, 2, &n, 1000), ODM_IO_NOTHING);
	cr_assert_eq(odm_io(NULL, 1, NULL, 0, NULL, 0, NULL, 0), -EINVAL);
}

Test(odm, async_batches_wait_and_reap)
{
	init();
	odm_fid fid = make_file("q.dbf", 16 * MIB);
	enum { N = 64 };
	struct odm_ioc ioc[N], *p[N], *got[N];
	char *b = buf_of((size_t)N * BS, 0);
	for (int i = 0; i < N; i++) {
		memset(b + (size_t)i * BS, 'A' + i % 26, BS);
		ioc[i] = (struct odm_ioc){.op = ODM_WRITE, .fid = fid, .block = (uint64_t)i * 3,
					  .buf = b + (size_t)i * BS, .size = BS};
		p[i] = &ioc[i];
	}
	cr_assert_eq(odm_io(p, N, p, 8, NULL, 0, NULL, -1), ODM_IO_WAITED); /* 8 sync, 56 async */
	for (int i = 0; i < 8; i++)
		cr_assert_eq(ioc[i].status, 0);
	unsigned total = 0, n;
	while (total < N - 8) {
		cr_assert_geq(odm_io(NULL, 0, NULL, 0, got, N, &n, -1), 0);
		for (unsigned i = 0; i < n; i++)
			cr_assert_eq(got[i]->status, 0);
		total += n;
	}
	char *r = buf_of(BS, 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(sync_io(ODM_READ, fid, (uint64_t)i * 3, r, BS), 0);
		cr_assert_eq(r[0], 'A' + i % 26);
		cr_assert_eq(r[BS - 1], 'A' + i % 26);
	}
}

Test(odm, resize_and_delete)
{
	init();
	odm_fid fid = make_file("r.dbf", MIB);
	char *b = buf_of(BS, 'r');
	cr_assert_eq(odm_resize(fid, MIB + 100), -EINVAL);
	cr_assert_eq(odm_resize(fid, 4 * MIB), 0);
	cr_assert_eq(sync_io(ODM_WRITE, fid, 3 * MIB / BS, b, BS), 0);
	cr_assert_eq(odm_resize(fid, MIB), 0);
	cr_assert_eq(sync_io(ODM_WRITE, fid, 3 * MIB / BS, b, BS), -ERANGE);
	struct stat st;
	cr_assert_eq(stat(path_of("r.dbf"), &st), 0);
	cr_assert_eq(st.st_size, MIB);

	int go[2], ready[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(ready), 0);
	pid_t child = fork();
	if (child == 0) { /* another process of another instance holds the file */
		char inst[32], c;
		snprintf(inst, sizeof inst, "H%d", (int)getpid());
		odm_fid f2;
		int rc = odm_init(db(), inst) || odm_identify(path_of("r.dbf"), &f2, NULL);
		if (write(ready[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
			rc = 1;
		_exit(rc);
	}
	char c;
	cr_assert_eq(read(ready[0], &c, 1), 1);
	cr_assert(listed(path_of("r.dbf")));
	cr_assert_eq(odm_delete(path_of("r.dbf")), -EBUSY);
	cr_assert_eq(write(go[1], "x", 1), 1);
	int ws;
	waitpid(child, &ws, 0);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	int rc;
	for (int i = 0; i < 50 && (rc = odm_delete(path_of("r.dbf"))) == -EBUSY; i++)
		usleep(100000); /* cfsd drops the dead holder's map */
	cr_assert_eq(rc, 0, "delete: %d", rc);
	cr_assert_not(listed(path_of("r.dbf")), "a deleted file is listed");
	cr_assert_eq(stat(path_of("r.dbf"), &st), -1);
	cr_assert_eq(sync_io(ODM_READ, fid, 0, b, BS), -EBADF, "a deleted file's id still works");
	cr_assert_eq(odm_delete(path_of("r.dbf")), -ENOENT);
}

static uint64_t free_bytes(void)
{
	struct statvfs sv;
	cr_assert_eq(statvfs(dir(), &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize / BS * BS;
}

/* A create or resize refused for space keeps none of it, at once: the next create of what is
 * free goes through (it was refused until the next commit, and the refused file's blocks held
 * until it went). */
Test(odm, refused_create_and_resize_give_the_space_back)
{
	init();
	uint64_t free0 = free_bytes();
	odm_fid fid;
	cr_assert_eq(odm_create(path_of("huge.dbf"), 2 * free0, BS, ODM_FT_DATA, &fid), -ENOSPC);
	cr_assert_not(listed(path_of("huge.dbf")));
	cr_assert_geq(free_bytes(), free0 - 8 * MIB, "after a refused create: %llu of %llu free",
		      (unsigned long long)free_bytes(), (unsigned long long)free0);
	uint64_t most = free0 / 4 * 3 / BS * BS;
	odm_fid big = make_file("most.dbf", most);
	uint64_t free1 = free_bytes();
	cr_assert_eq(odm_resize(big, most + 2 * free1), -ENOSPC);
	struct odm_fileinfo info;
	cr_assert_eq(odm_getfileinfo(big, &info), 0);
	cr_assert_eq(info.size, most, "a refused resize changed the size to %llu",
		     (unsigned long long)info.size);
	cr_assert_geq(free_bytes(), free1 - 8 * MIB, "after a refused resize: %llu of %llu free",
		      (unsigned long long)free_bytes(), (unsigned long long)free1);
	odm_fid rest = make_file("rest.dbf", free1 / 2 / BS * BS);
	cr_assert_eq(odm_resize(rest, free1 / 2 / BS * BS + 8 * MIB), 0);
	cr_assert_eq(odm_delete(path_of("rest.dbf")), 0);
	cr_assert_eq(odm_delete(path_of("most.dbf")), 0);
	cr_assert_eq(odm_create(path_of("again.dbf"), most, BS, ODM_FT_DATA, &fid), 0,
		     "a create right after the delete of as much");
	cr_assert_eq(odm_abort(fid), 0);
}

/* Run by tests/cfs/test_quota.sh in a directory of a project with a hard limit of
 * ODM_TEST_QUOTA_BYTES (skipped elsewhere): ODM's create and resize are charged when the space
 * is reserved, and refused with EDQUOT past the limit, keeping nothing. */
Test(odm, a_create_or_resize_over_a_quota_is_refused_with_edquot)
{
	const char *limit_s = getenv("ODM_TEST_QUOTA_BYTES");
	if (!limit_s)
		cr_skip_test("needs a project directory with a limit (tests/cfs/test_quota.sh)");
	uint64_t limit = strtoull(limit_s, NULL, 10);
	init();
	odm_fid fid;
	cr_assert_eq(odm_create(path_of("over.dbf"), limit + MIB, BS, ODM_FT_DATA, &fid), -EDQUOT);
	cr_assert_not(listed(path_of("over.dbf")));
	odm_fid half = make_file("half.dbf", limit / 2);
	cr_assert_eq(odm_resize(half, limit + MIB), -EDQUOT);
	struct odm_fileinfo info;
	cr_assert_eq(odm_getfileinfo(half, &info), 0);
	cr_assert_eq(info.size, limit / 2);
	cr_assert_eq(odm_resize(half, limit / 4 * 3), 0, "within the limit");
	cr_assert_eq(odm_delete(path_of("half.dbf")), 0);
	cr_assert_eq(odm_create(path_of("most.dbf"), limit / 4 * 3, BS, ODM_FT_DATA, &fid), 0,
		     "the space of a deleted file is the project's again");
	cr_assert_eq(odm_abort(fid), 0);
}

/* One process writes all over a file while another shrinks it and hands the freed space to
 * a new file: the new file must keep exactly what was written to it. */
Test(odm, resize_racing_with_io_never_touches_another_file, .timeout = 120)
{
	init();
	odm_fid victim = make_file("v.dbf", 32 * MIB);
	int started[2];
	cr_assert_eq(pipe(started), 0);
	pid_t writer = fork();
	if (writer == 0) {
		char inst[32];
		snprintf(inst, sizeof inst, "W%d", (int)getpid());
		if (odm_init(db(), inst))
			_exit(2);
		odm_fid f;
		if (odm_identify(path_of("v.dbf"), &f, NULL))
			_exit(3);
		enum { D = 16 };
		struct odm_ioc ioc[D], *p[D];
		char *b = buf_of((size_t)D * BS, 'W');
		unsigned seed = 7;
		for (int round = 0;; round++) {
			for (int i = 0; i < D; i++) {
				ioc[i] = (struct odm_ioc){.op = ODM_WRITE, .fid = f,
							  .block = rand_r(&seed) % (32 * MIB / BS),
							  .buf = b + (size_t)i * BS, .size = BS};
				p[i] = &ioc[i];
			}
			if (odm_io(p, D, NULL, 0, NULL, 0, NULL, 0) < 0 ||
			    odm_io(NULL, 0, p, D, NULL, 0, NULL, -1) < 0)
				_exit(4);
			for (int i = 0; i < D; i++)
				if (ioc[i].status && ioc[i].status != -ERANGE)
					_exit(5);
			if (round == 10 && write(started[1], "x", 1) != 1)
				_exit(6);
		}
	}
	char c;
	cr_assert_eq(read(started[0], &c, 1), 1);
	char *zb = buf_of(MIB, 'Z');
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(odm_resize(victim, (uint64_t)(8 - 2 * i) * MIB), 0);
		char name[32];
		snprintf(name, sizeof name, "z%d.dbf", i);
		odm_fid z = make_file(name, 4 * MIB); /* likely on the blocks just freed */
		for (unsigned k = 0; k < 4; k++)
			cr_assert_eq(sync_io(ODM_WRITE, z, k * MIB / BS, zb, MIB), 0);
	}
	usleep(300000);
	kill(writer, SIGKILL);
	int ws;
	waitpid(writer, &ws, 0);
	cr_assert(WIFSIGNALED(ws), "the writer failed: exit %d", WEXITSTATUS(ws));
	char *r = buf_of(MIB, 0);
	for (int i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof name, "z%d.dbf", i);
		int fd = open(path_of(name), O_RDONLY | O_DIRECT);
		cr_assert_geq(fd, 0);
		for (unsigned k = 0; k < 4; k++) {
			cr_assert_eq(pread(fd, r, MIB, (off_t)k * MIB), MIB);
			cr_assert_eq(memcmp(r, zb, MIB), 0, "%s MiB %u was written by the other file's I/O",
				     name, k);
		}
		close(fd);
	}
}

/* A known workload counts exactly: operations, bytes, sync/async, per file and in total. */
Test(odm, statistics_are_exact)
{
	init();
	cr_assert_eq(odm_set_ptype(ODM_PT_CKPT), 0);
	odm_fid a = make_file("s1.dbf", MIB), b = make_file("s2.dbf", MIB);
	char *buf = buf_of(4 * BS, 's');
	for (int i = 0; i < 5; i++)
		cr_assert_eq(sync_io(ODM_WRITE, a, (uint64_t)i, buf, BS), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sync_io(ODM_READ, b, (uint64_t)i, buf, 4 * BS), 0);
	struct odm_ioc ioc[2] = {{.op = ODM_READ, .fid = b, .buf = buf, .size = BS},
				 {.op = ODM_WRITE, .fid = b, .block = 9, .buf = buf + BS, .size = BS}};
	struct odm_ioc *p[2] = {&ioc[0], &ioc[1]};
	cr_assert_eq(odm_io(p, 2, NULL, 0, NULL, 0, NULL, 0), ODM_IO_POSTED);
	cr_assert_eq(odm_io(NULL, 0, p, 2, NULL, 0, NULL, -1), ODM_IO_WAITED);
	char inst[32];
	snprintf(inst, sizeof inst, "T%d", (int)getpid());
	struct odm_segment *seg;
	cr_assert_eq(odm_segment_open(db(), inst, false, &seg), 0);
	const struct odm_proc_slot *me = NULL;
	for (unsigned i = 0; i < seg->nprocs; i++)
		if (seg->procs[i].state == ODM_SLOT_LIVE && seg->procs[i].pid == getpid())
			me = &seg->procs[i];
	cr_assert(me);
	cr_assert_eq(me->ptype, ODM_PT_CKPT);
	cr_assert_eq(me->total[ODM_DIR_WRITE][ODM_MODE_SYNC].ops, 5);
	cr_assert_eq(me->total[ODM_DIR_WRITE][ODM_MODE_SYNC].bytes, 5 * BS);
	cr_assert_eq(me->total[ODM_DIR_READ][ODM_MODE_SYNC].ops, 3);
	cr_assert_eq(me->total[ODM_DIR_READ][ODM_MODE_SYNC].bytes, 12 * BS);
	cr_assert_eq(me->total[ODM_DIR_READ][ODM_MODE_ASYNC].ops, 1);
	cr_assert_eq(me->total[ODM_DIR_WRITE][ODM_MODE_ASYNC].ops, 1);
	uint32_t ia = (uint32_t)a - 1, ib = (uint32_t)b - 1;
	cr_assert_eq(seg->files[ia].count[ODM_DIR_WRITE][ODM_MODE_SYNC].ops, 5);
	cr_assert_eq(seg->files[ib].count[ODM_DIR_WRITE][ODM_MODE_SYNC].ops, 0);
	cr_assert_eq(seg->files[ib].count[ODM_DIR_READ][ODM_MODE_SYNC].ops, 3);
	cr_assert_eq(seg->files[ib].count[ODM_DIR_WRITE][ODM_MODE_ASYNC].bytes, BS);
	uint64_t h = 0;
	for (unsigned k = 0; k < ODM_HIST_BINS; k++)
		h += me->hist[ODM_DIR_WRITE][ODM_MODE_SYNC][k];
	cr_assert_eq(h, 5);
	cr_assert_str_eq(seg->files[ia].path, path_of("s1.dbf"));
	cr_assert_eq(odm_fini(), 0);
	cr_assert_eq(seg->retired[ODM_PT_CKPT].total[ODM_DIR_WRITE][ODM_MODE_SYNC].ops, 5,
		     "fini lost the counts");
	odm_segment_close(seg);
}

Test(odm, another_process_of_the_instance_uses_the_fid)
{
	init();
	odm_fid fid = make_file("shared.dbf", MIB);
	char *b = buf_of(BS, 'p');
	cr_assert_eq(sync_io(ODM_WRITE, fid, 4, b, BS), 0);
	pid_t child = fork();
	if (child == 0) { /* same instance: the number alone is enough */
		char inst[32];
		snprintf(inst, sizeof inst, "T%d", (int)getppid());
		char *r = buf_of(BS, 0);
		if (odm_init(db(), inst))
			_exit(1);
		struct odm_ioc ioc = {.op = ODM_READ, .fid = fid, .block = 4, .buf = r, .size = BS};
		struct odm_ioc *p = &ioc;
		if (odm_io(&p, 1, &p, 1, NULL, 0, NULL, -1) != ODM_IO_WAITED || ioc.status)
			_exit(2);
		_exit(memcmp(r, b, BS) ? 3 : 0);
	}
	int st;
	waitpid(child, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", WEXITSTATUS(st));
}

/* More files than an instance could once identify (512), each one its own: what is written
 * through one fid reads back through it alone, also after the files are identified again. */
Test(odm, an_instance_identifies_more_than_512_files, .timeout = 300)
{
	init();
	enum { N = 600 };
	static odm_fid fid[N];
	char name[32];
	void *b = buf_of(BS, 0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof name, "many%u.dbf", i);
		fid[i] = make_file(name, BS);
		memset(b, (int)(i % 251), BS);
		cr_assert_eq(sync_io(ODM_WRITE, fid[i], 0, b, BS), 0, "%s", name);
	}
	for (unsigned i = 0; i < N; i += 7) {
		snprintf(name, sizeof name, "many%u.dbf", i);
		odm_fid again;
		cr_assert_eq(odm_identify(path_of(name), &again, NULL), 0, "%s", name);
		cr_assert_eq(again, fid[i], "%s: identified as another file", name);
		cr_assert_eq(sync_io(ODM_READ, again, 0, b, BS), 0);
		cr_assert_eq(((unsigned char *)b)[BS - 1], i % 251, "%s reads another's data", name);
	}
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof name, "many%u.dbf", i);
		cr_assert_eq(odm_delete(path_of(name)), 0, "%s", name);
	}
	free(b);
	cr_assert_eq(odm_fini(), 0);
}
