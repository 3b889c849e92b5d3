/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The FUSE low-level operations of cfsd: each one a thin translation onto libcfs.
 *
 * Inode numbers are libcfs's (the root is FUSE_ROOT_ID); a lookup reference the kernel holds
 * is a cfs_lookup that cfs_forget drops.  An open file's fh carries its open flags.  A
 * directory handle carries the directory's entries as of opendir (or the last rewind), so
 * readdir offsets are stable while other threads change the directory. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"
#include "cfsd/fuse_uring.h"
#include "cfsd/odm_server.h"
#include "cfsd/ring_poke.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fs.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static struct cfsd *D(fuse_req_t req) { return fuse_req_userdata(req); }

/* The kernel keeps attributes CFSD_CACHE_SECONDS: on a cluster, this node gives up the glock
 * of an inode another node changes, and the kernel forgets them first (kernel_inval.c).
 * Names too, on a cluster for good only if asked for (namecache): forgetting them has the
 * kernel drop every name, which a process's working directory notices (kernel_inval.c);
 * without it, for a moment in directories no other node changes (cfs_name_lease). */
static double entry_timeout(struct cfsd *d)
{
	if (!d->cluster)
		return CFSD_CACHE_SECONDS;
	return __atomic_load_n(&d->names_cached, __ATOMIC_ACQUIRE) ? CFSD_CACHE_SECONDS : 0.0;
}

static void reply_err(fuse_req_t req, int rc) { fuse_reply_err(req, rc < 0 ? -rc : rc); }

/* libcfs's inode numbers are the kernel's node ids; stat(2) shows the block number (see
 * cfs_handle_ino). */
static struct stat shown(struct stat st)
{
	st.st_ino = cfs_handle_ino(st.st_ino);
	return st;
}

static void reply_attr(fuse_req_t req, int rc, const struct stat *st)
{
	if (rc) {
		reply_err(req, rc);
		return;
	}
	struct stat out = shown(*st);
	fuse_reply_attr(req, &out, CFSD_CACHE_SECONDS);
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* How long the kernel keeps a name looked up or made in parent by a call begun at since
 * (now_ns). */
static double name_timeout(struct cfsd *d, fuse_ino_t parent, uint64_t since)
{
	double keep = entry_timeout(d);
	return keep > 0.0 ? keep : cfs_name_lease(d->fs, parent, since) / 1000.0;
}

static void reply_entry(fuse_req_t req, int rc, const struct stat *st, fuse_ino_t parent,
			uint64_t since)
{
	if (rc) {
		reply_err(req, rc);
		return;
	}
	struct cfsd *d = D(req); /* req is gone once answered */
	struct fuse_entry_param e = {.ino = st->st_ino, .attr = shown(*st),
				     .generation = cfs_generation(d->fs, st->st_ino),
				     .attr_timeout = CFSD_CACHE_SECONDS,
				     .entry_timeout = name_timeout(d, parent, since)};
	if (fuse_reply_entry(req, &e) == -ENOENT) /* the kernel gave up: drop the reference */
		cfs_forget(d->fs, st->st_ino, 1);
}

static struct cfs_cred cred_of(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	return (struct cfs_cred){.uid = c->uid, .gid = c->gid, .umask = c->umask};
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct cfsd *d = userdata;
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL; /* ACLs kept as system.posix_acl_* xattrs */
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV; /* the kernel clears suid bits itself */
	/* Lookups of "." (any inode by number) and "..": file handles (open_by_handle_at, NFS
	 * export) stay valid while the inode lives, also across remounts. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK; /* umask is ours to apply: not under a default ACL */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;   /* O_TRUNC arrives as a setattr */
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR; /* chattr of directories */
	/* The kernel would drop a file's pages whenever it sees another mtime, our own writes'
	 * too.  It is told instead: on a cluster, pages of files another node may have changed
	 * go at the open (keep_cache) or when the glock leaves (kernel_inval.c); this node's
	 * direct writes drop their range; truncate and hole punch the kernel handles itself. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (!d->cluster) /* the kernel keeps a one-node mount's flocks and record locks */
		conn->want &= ~(FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_POSIX_LOCKS);
	/* A write-back page cache where nothing but this kernel changes files: the kernel then
	 * keeps each file's size and times itself and sends dirty pages later (fi->writepage).
	 * Not on a cluster: a lock another node asks for could not make the kernel's dirty
	 * pages go out before it is given up. */
	d->writeback = !d->cluster && !d->fs_dboptimized && !d->nowriteback &&
		       (conn->capable & FUSE_CAP_WRITEBACK_CACHE);
	if (d->writeback) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		d->dirty_bound = dirty_limit_bytes();
	}
	/* FUSE_NOTIFY_INC_EPOCH: protocol 7.44 (kernel_inval.c). */
	bool epochs = conn->proto_major > 7 || (conn->proto_major == 7 && conn->proto_minor >= 44);
	__atomic_store_n(&d->names_cached, d->cluster && d->namecache && epochs, __ATOMIC_RELEASE);
	if (d->cluster && d->namecache && !epochs)
		fprintf(stderr, "cfsd: %s: namecache: this kernel cannot be told to forget names "
				"(FUSE protocol 7.%u, 7.44 needed): every name is looked up here\n",
			d->mount_abs, conn->proto_minor);
	__atomic_store_n(&d->kernel_ready, true, __ATOMIC_RELEASE);
	conn->max_write = 1u << 20;
	/* Asynchronous direct I/O (a database's libaio) goes as background requests: the
	 * default 12 in flight would cap a queue depth of 32 (cfsd has 16 threads). */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->max_readahead = d->fs_dboptimized ? 0 : 1u << 20;
	conn->time_gran = 1;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	struct cfsd *d = D(req);
	uint64_t since = now_ns();
	int rc = cfs_lookup(d->fs, parent, name, &st);
	/* A missing name is kept too on one node: every name is made by this kernel, which
	 * drops what it keeps of it then, or by ODM, which tells it (odm_server.c). */
	if (rc == -ENOENT && !d->cluster) {
		struct fuse_entry_param none = {.ino = 0, .entry_timeout = CFSD_CACHE_SECONDS};
		fuse_reply_entry(req, &none);
		return;
	}
	reply_entry(req, rc, &st, parent, since);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	cfs_forget(D(req)->fs, ino, n);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *v)
{
	for (size_t i = 0; i < count; i++)
		cfs_forget(D(req)->fs, v[i].ino, v[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	int rc = cfs_getattr(D(req)->fs, ino, &st);
	reply_attr(req, rc, &st);
}

/* An open file's fh: its open flags, whether its I/O bypasses the kernel's pages, whether it
 * runs or writes a program (cfs_text_open), and above those a number of its own (OPEN_ID),
 * which names the open file description to cfs_plock_set and cfs_plock_release. */
#define FH_DIRECT_IO (1ull << 32)
#define FH_TEXT (1ull << 33)
#define FH_ID_SHIFT 34
#define OPEN_ID(fh) ((fh) >> FH_ID_SHIFT)

static bool about_now(const struct timespec *t, const struct timespec *now)
{
	int64_t ns = (int64_t)(t->tv_sec - now->tv_sec) * 1000000000 + (t->tv_nsec - now->tv_nsec);
	return ns > -1000000000 && ns < 1000000000;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	unsigned set = 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & FUSE_SET_ATTR_MODE)
		set |= CFS_SET_MODE;
	if (to_set & FUSE_SET_ATTR_UID)
		set |= CFS_SET_UID;
	if (to_set & FUSE_SET_ATTR_GID)
		set |= CFS_SET_GID;
	if (to_set & FUSE_SET_ATTR_SIZE)
		set |= CFS_SET_SIZE;
	if (to_set & FUSE_SET_ATTR_ATIME)
		set |= CFS_SET_ATIME;
	if (to_set & FUSE_SET_ATTR_MTIME)
		set |= CFS_SET_MTIME;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		attr->st_atim = now;
		set |= CFS_SET_ATIME;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		attr->st_mtim = now;
		set |= CFS_SET_MTIME;
	}
	/* A write-back cache keeps the times in the kernel, which sends a touch's "now" as a
	 * time like any other: one within a second of ours is taken as now (and setting it
	 * gives nobody more than a touch would). */
	bool atime_chosen = (to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW) &&
			    !about_now(&attr->st_atim, &now);
	bool mtime_chosen = (to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW) &&
			    !about_now(&attr->st_mtim, &now);
	if ((set & (CFS_SET_ATIME | CFS_SET_MTIME)) && !atime_chosen && !mtime_chosen)
		set |= CFS_SET_TIMES_NOW;
	if (to_set & FUSE_SET_ATTR_CTIME) /* only a write-back cache sends ctime */
		set |= CFS_SET_CTIME | (d->writeback ? CFS_SET_CACHED_TIMES : 0);
	struct stat st;
	char msg[256];
	/* Truncating a program another node runs is refused, as on one node (an open's
	 * O_TRUNC comes as this, before the open).  A size change may free blocks an ODM client
	 * writes to: its map goes first. */
	bool texts = (set & CFS_SET_SIZE) && !(fi && (fi->fh & FH_TEXT));
	int rc = texts ? cfs_text_truncate(d->fs, ino) : 0;
	if (!rc && (set & CFS_SET_SIZE))
		rc = odm_revoke_begin(d->odm, ino, NULL, msg, sizeof msg);
	struct caller who;
	struct cfs_cred c = caller_cred(req, &who);
	if (!rc) {
		rc = cfs_setattr(d->fs, ino, attr, set, &c, &st);
		if (set & CFS_SET_SIZE)
			odm_revoke_end(d->odm, ino);
	}
	reply_attr(req, rc, &st);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4096];
	int rc = cfs_readlink(D(req)->fs, ino, buf, sizeof buf);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct stat st;
	struct cfs_cred c = cred_of(req);
	uint64_t since = now_ns();
	reply_entry(req, cfs_mknod(D(req)->fs, parent, name, mode, rdev, &c, &st), &st, parent,
		    since);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct stat st;
	struct cfs_cred c = cred_of(req);
	uint64_t since = now_ns();
	reply_entry(req, cfs_mkdir(D(req)->fs, parent, name, mode, &c, &st), &st, parent, since);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct stat st;
	struct cfs_cred c = cred_of(req);
	uint64_t since = now_ns();
	reply_entry(req, cfs_symlink(D(req)->fs, parent, name, link, &c, &st), &st, parent, since);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct stat st;
	uint64_t since = now_ns();
	reply_entry(req, cfs_link(D(req)->fs, ino, parent, name, &st), &st, parent, since);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, cfs_unlink(D(req)->fs, parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, cfs_rmdir(D(req)->fs, parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned flags)
{
	unsigned f = 0;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		f |= CFS_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= CFS_RENAME_EXCHANGE;
	if (flags & RENAME_WHITEOUT)
		f |= CFS_RENAME_WHITEOUT;
	struct cfs_cred c = cred_of(req);
	reply_err(req, cfs_rename(D(req)->fs, parent, name, newparent, newname, f, &c));
}

/* Under a write-back cache the kernel writes whole pages, also the part of the last one
 * that is already in the file: an append-only file's writes must reach cfsd as they were
 * made, so its opens bypass the cache. */
static bool append_only(struct cfsd *d, fuse_ino_t ino)
{
	uint32_t flags = 0;
	return !cfs_get_iflags(d->fs, ino, &flags) && (flags & FS_APPEND_FL);
}

/* Which opens bypass the kernel's pages: all on dboptimized; files ODM clients hold (they
 * are written behind the kernel's back); O_DIRECT ones, unless the kernel has a write-back
 * cache, whose own O_DIRECT path writes out the dirty pages of the range before it.
 * Without one, O_APPEND ones for writing too: a buffered write reaches cfsd in pieces cut
 * at the page boundaries of where the kernel thinks it goes, cfsd puts each piece of an
 * append at the end of the file as it is then (op_write), and another node's append could
 * land between two pieces of one write(2).  A direct write comes whole (up to max_write).
 * With one, opens for writing of append-only files, and of files whose quota has less room
 * left than the cache may hold dirty (cfs(8), "Quotas"). */
static bool bypasses_pages(struct cfsd *d, fuse_ino_t ino, int flags)
{
	if (d->fs_dboptimized || odm_held(d->odm, ino))
		return true;
	bool writes = (flags & O_ACCMODE) != O_RDONLY;
	if (!d->writeback)
		return (flags & O_DIRECT) || (writes && (flags & O_APPEND));
	return writes && (append_only(d, ino) || cfs_quota_near(d->fs, ino, d->dirty_bound));
}

static void set_open(struct cfsd *d, fuse_ino_t ino, struct fuse_file_info *fi)
{
	static uint64_t opens;
	uint64_t id = __atomic_add_fetch(&opens, 1, __ATOMIC_RELAXED);
	fi->direct_io = bypasses_pages(d, ino, fi->flags);
	fi->fh = (uint64_t)(unsigned)fi->flags | (fi->direct_io ? FH_DIRECT_IO : 0) |
		 id << FH_ID_SHIFT;
	/* On a cluster the pages are kept only if no other node can have changed the file since
	 * the last open here (close-to-open: a file closed elsewhere is read anew). */
	fi->keep_cache = !fi->direct_io && cfs_keep_cache(d->fs, ino);
}

/* libfuse 3.14 cannot say FOPEN_PARALLEL_DIRECT_WRITES, without which the kernel lets one
 * direct write at a time into a file; the open reply is only this structure, so it is built
 * here, as libfuse's fuse_reply_open would, plus that flag for direct I/O files.  cfsd takes
 * parallel writes (the inode's I/O lock is shared for in-place aligned writes); the kernel
 * still serialises writes that extend the file. */
static int reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct fuse_open_out out = {.fh = fi->fh};
	if (fi->direct_io)
		out.open_flags |= FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
	if (fi->keep_cache)
		out.open_flags |= FOPEN_KEEP_CACHE;
	return fuse_reply_buf(req, (const char *)&out, sizeof out);
}

static int release(struct cfsd *d, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	if (d->cluster)
		cfs_plock_release(d->fs, OPEN_ID(fi->fh));
	if (fi->fh & FH_TEXT)
		cfs_text_release(d->fs, ino, (int)(unsigned)fi->fh);
	return cfs_release(d->fs, ino);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	int rc = cfs_open(d->fs, ino, fi->flags), text = 0;
	if (!rc && (text = cfs_text_open(d->fs, ino, fi->flags)) < 0)
		cfs_release(d->fs, ino);
	if (rc || text < 0) {
		reply_err(req, rc ? rc : text);
		return;
	}
	set_open(d, ino, fi);
	fi->fh |= text ? FH_TEXT : 0;
	if (reply_open(req, fi) == -ENOENT)
		release(d, ino, fi);
}

/* A regular file made and opened, with the kernel's lookup reference to it. */
static int make_open(struct cfsd *d, fuse_ino_t parent, const char *name, mode_t mode,
		     const struct cfs_cred *c, int flags, struct stat *st)
{
	if (!strcmp(name, CFSD_UNNAMED)) { /* an O_TMPFILE open (dev_io.c) */
		int rc = cfs_tmpfile(d->fs, parent, mode, c, st); /* made open */
		if (!rc && (rc = cfs_lookup(d->fs, st->st_ino, ".", st)))
			cfs_release(d->fs, st->st_ino);
		return rc;
	}
	int rc = cfs_mknod(d->fs, parent, name, (mode & 07777) | S_IFREG, 0, c, st);
	/* Made by another node since the kernel looked the name up: without O_EXCL that open
	 * must open what is there now, which the kernel does itself, with the permission checks
	 * and O_TRUNC of an open, when told its lookup is stale (its open retries once). */
	if (rc == -EEXIST && !(flags & O_EXCL))
		return -ESTALE;
	if (!rc && (rc = cfs_open(d->fs, st->st_ino, flags)))
		cfs_forget(d->fs, st->st_ino, 1);
	return rc;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	struct stat st;
	struct cfs_cred c = cred_of(req);
	uint64_t since = now_ns();
	int rc = make_open(d, parent, name, mode, &c, fi->flags, &st), text = 0;
	if (!rc && (text = cfs_text_made(d->fs, st.st_ino)) < 0) {
		cfs_release(d->fs, st.st_ino);
		cfs_forget(d->fs, st.st_ino, 1);
	}
	if (rc || text < 0) {
		reply_err(req, rc ? rc : text);
		return;
	}
	set_open(d, st.st_ino, fi);
	fi->fh |= text ? FH_TEXT : 0;
	struct fuse_entry_param e = {.ino = st.st_ino, .attr = shown(st),
				     .generation = cfs_generation(d->fs, st.st_ino),
				     .attr_timeout = CFSD_CACHE_SECONDS,
				     .entry_timeout = name_timeout(d, parent, since)};
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		release(d, st.st_ino, fi);
		cfs_forget(d->fs, st.st_ino, 1);
	}
}

/* A buffered read runs beside direct writes to the same file: it may read a block just
 * before a write replaces it, and if its answer reached the kernel after the write's, the
 * kernel would keep the old block (it drops a direct write's range when the write is
 * answered; older kernels hear it from kernel_inval_range, later).  So a buffered read during
 * which such a write was done reads again; one that keeps losing that race answers and has
 * its range dropped once the answer is in. */
#define READ_RETRIES 3
#define DROP_WAIT_MS 100u /* a direct write's answer waits for its range's drop at most */

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	void *own = NULL, *buf = fuse_uring_reply_space(size); /* read into the ring's entry */
	if (!buf && posix_memalign(&own, 4096, size ? size : 1)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!buf)
		buf = own;
	bool buffered = !(fi->fh & FH_DIRECT_IO), raced = false;
	uint64_t writes = __atomic_load_n(&d->direct_writes_done, __ATOMIC_ACQUIRE);
	int64_t n;
	for (int tries = 0;; tries++) {
		n = cfs_read(d->fs, ino, buf, size, (uint64_t)off);
		uint64_t now = __atomic_load_n(&d->direct_writes_done, __ATOMIC_ACQUIRE);
		raced = buffered && n > 0 && now != writes;
		if (!raced || tries == READ_RETRIES)
			break;
		writes = now;
	}
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(own);
	if (raced)
		kernel_inval_range(d, ino, off, n);
}

/* What an open file's flags ask of each write. */
static unsigned write_mode(int flags)
{
	unsigned w = 0;
	if ((flags & O_SYNC) == O_SYNC) /* O_SYNC includes the O_DSYNC bit */
		w |= CFS_W_SYNC;
	else if (flags & O_DSYNC)
		w |= CFS_W_DSYNC;
	if (flags & O_DIRECT)
		w |= CFS_W_DIRECT;
	return w;
}

/* Does this buffered write look like the first part of a longer write(2)?  The kernel sends
 * a write that starts inside a page it does not have up to date as that page alone, then
 * the rest (fuse_fill_write_pages); a write that really ends there is taken for one too,
 * which costs another node wanting the file at that moment a few milliseconds. */
static bool rest_follows(off_t off, size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	return off % page != 0 && (off + (off_t)size) % page == 0;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	int flags = (int)(unsigned)fi->fh;
	struct caller who;
	struct cfs_cred c = caller_cred(req, &who);
	struct cfsd *d = D(req);
	/* Dirty pages the kernel writes back, through whichever open file: their write(2) has
	 * returned, its set-ID bits were dropped then, and an O_SYNC one's fsync follows. */
	unsigned w = fi->writepage ? CFS_W_CACHED : write_mode(flags);
	/* O_APPEND without a write-back cache is ours (libfuse's open(2) notes): the kernel
	 * puts the write at the size it cached, which another node's append may have passed
	 * since.  Its pages of where it thought the write went are dropped after the answer.
	 * The request carries the file's flags as they are now (fcntl F_SETFL included). */
	bool append = (fi->flags & O_APPEND) && !fi->writepage && !d->writeback;
	if (!fi->writepage && !(fi->fh & FH_DIRECT_IO) && rest_follows(off, size))
		w |= CFS_W_MORE;
	uint64_t at = (uint64_t)off;
	int64_t n = append ? cfs_append(d->fs, ino, buf, size, w, &c, &at)
			   : cfs_write(d->fs, ino, buf, size, (uint64_t)off, w, fi->writepage ? NULL : &c);
	if (who.asked) /* set-ID bits taken away: not to be shown, nor granted at an exec */
		kernel_forget_attrs(d, ino);
	if (n < 0) {
		reply_err(req, (int)n);
		return;
	}
	/* Pages a buffered open cached meanwhile (none on dboptimized: no open is buffered):
	 * counted before the answer, for the reads in flight (op_read), and dropped before it,
	 * so that a buffered read after the write's completion reads the new data (xfstests'
	 * generic/451; the kernel drops them itself after synchronous writes only).  Not always:
	 * a readahead may hold the pages locked while it waits for a slot among the kernel's
	 * background requests, which unanswered writes such as this one hold.  So the answer
	 * waits DROP_WAIT_MS for the drop at most, and a drop still stuck then lands after it. */
	bool direct = !fi->writepage && ((fi->fh & FH_DIRECT_IO) || (flags & O_DIRECT));
	bool cached = direct && !d->fs_dboptimized && cfs_kernel_may_cache(d->fs, ino);
	if (cached) {
		__atomic_add_fetch(&d->direct_writes_done, 1, __ATOMIC_RELEASE);
		kernel_inval_range_wait(d, ino, (off_t)at, n, DROP_WAIT_MS);
	}
	fuse_reply_write(req, (size_t)n);
	if (!cached && at != (uint64_t)off)
		kernel_inval_range(d, ino, (off_t)at, n);
	if (at != (uint64_t)off)
		kernel_inval_range(d, ino, off, n);
}

/* A direct READ or WRITE that an io_uring data thread may send to the LUNs itself
 * (fuse_uring.c): what op_read and op_write would do for it comes to cfs_read or cfs_write
 * alone, with nothing before or after (no buffered open's pages to drop, no append, no
 * set-ID bits: cfs_direct_io_begin sends those back). */
int cfsd_direct_begin(void *arg, const struct fuse_in_header *in, const void *op_in,
		      void *payload, size_t room, bool may_wait, struct cfs_direct_io *io)
{
	struct cfsd *d = arg;
	if (in->opcode == FUSE_READ) {
		const struct fuse_read_in *r = op_in;
		if (!(r->fh & FH_DIRECT_IO) || r->size > room)
			return -EAGAIN;
		return cfs_direct_io_begin(d->fs, in->nodeid, false, 0, payload, r->size, r->offset,
					   may_wait, io);
	}
	const struct fuse_write_in *w = op_in;
	if (in->opcode != FUSE_WRITE || !(w->fh & FH_DIRECT_IO) || w->write_flags & FUSE_WRITE_CACHE ||
	    w->flags & O_APPEND)
		return -EAGAIN;
	return cfs_direct_io_begin(d->fs, in->nodeid, true, write_mode((int)(unsigned)w->fh), payload,
				   w->size, w->offset, may_wait, io);
}

/* The answer to a request left waiting for the cluster (flush, flock, setlk): arg is req. */
static void reply_later(void *arg, int status) { reply_err(arg, status); }

/* A close: on a cluster mount the closing owner's record locks on the file go (the kernel
 * leaves that to the daemon's flush), answered once the cluster has applied it.  One node
 * has nothing to do at a close (the kernel keeps the locks, see op_init), and ENOSYS makes
 * the kernel stop asking: a round trip less per close(2).  The kernel still writes a
 * write-back file's dirty pages and reports their errors at close without FLUSH. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	int rc = d->cluster ? cfs_plock_close(d->fs, ino, fi->lock_owner, reply_later, req)
			    : -ENOSYS;
	if (!rc)
		return; /* answered by the cluster; a failed write-behind waits for the next */
	int kept = d->cluster ? cfs_write_error(d->fs, ino) : 0; /* a write kept behind failed */
	reply_err(req, kept ? kept : rc > 0 ? 0 : rc);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfsd *d = D(req);
	int rc = fi->flock_release && d->cluster
			 ? cfs_flock_close(d->fs, fi->lock_owner) : 0;
	int rc2 = release(d, ino, fi);
	reply_err(req, rc ? rc : rc2);
}

/* flock(2) on a cluster mount (one-node mounts leave flocks to the kernel, see op_init): a
 * request that waits is answered from the lock library's thread when it ends. */
static void flock_interrupted(fuse_req_t req, void *arg)
{
	(void)arg;
	cfs_flock_interrupt(D(req)->fs, req);
}

/* fcntl record locks on a cluster mount (one-node mounts leave them to the kernel, see
 * op_init).  A waiting F_SETLKW is answered from the lock library's thread. */
static void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock)
{
	int rc = cfs_plock_get(D(req)->fs, ino, fi->lock_owner, lock);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_lock(req, lock);
}

static void plock_interrupted(fuse_req_t req, void *arg)
{
	(void)arg;
	cfs_plock_interrupt(D(req)->fs, req);
}

static void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock, int sleep)
{
	fuse_req_interrupt_func(req, plock_interrupted, NULL); /* before: req is done's after */
	int rc = cfs_plock_set(D(req)->fs, ino, fi->lock_owner, OPEN_ID(fi->fh), lock, sleep != 0,
			       reply_later, req);
	if (rc)
		reply_err(req, rc);
}

static void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	/* Before the request: once it waits, req is flock_done's (it may be answered at once). */
	fuse_req_interrupt_func(req, flock_interrupted, NULL);
	int rc = cfs_flock(D(req)->fs, ino, fi->lock_owner, op, reply_later, req);
	if (rc)
		reply_err(req, rc > 0 ? 0 : rc);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	struct cfs_fs *fs = D(req)->fs;
	reply_err(req, datasync ? cfs_fdatasync(fs, ino) : cfs_fsync(fs, ino));
}

/* An open directory's entries (cluster mounts), read at its first READDIR: a stable list
 * for the stream.  One-node mounts open no directories (dir_listing.c). */
struct dir_handle {
	struct cfs_dirent *v;
	size_t n;
	bool served; /* v was read: a readdir from offset 0 again is a rewinddir(3) */
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (!D(req)->cluster) { /* the kernel opens directories itself from now on */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	struct dir_handle *h = calloc(1, sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		free(h);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dir_handle *h = (struct dir_handle *)(uintptr_t)fi->fh;
	if (!h) {
		dir_listing_reply(D(req), req, ino, size, off);
		return;
	}
	if (off == 0 || !h->served) { /* a rewound stream shows the directory as it is now */
		struct cfs_dirent *v;
		size_t n;
		int rc = cfs_readdir_all(D(req)->fs, ino, &v, &n);
		if (rc) {
			reply_err(req, rc);
			return;
		}
		free(h->v);
		h->v = v;
		h->n = n;
	}
	h->served = true;
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	for (size_t i = (size_t)off; i < h->n; i++) {
		struct stat st = {.st_ino = h->v[i].ino, .st_mode = (mode_t)h->v[i].type << 12};
		size_t need = fuse_add_direntry(req, buf + used, size - used, h->v[i].name, &st,
						(off_t)(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dir_handle *h = (struct dir_handle *)(uintptr_t)fi->fh;
	if (h)
		free(h->v);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync, (void)fi;
	reply_err(req, cfs_fsync(D(req)->fs, ino));
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;
	int rc = cfs_statfs_at(D(req)->fs, ino, &st);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_statfs(req, &st);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct caller who;
	struct cfs_cred c = caller_cred(req, &who);
	reply_err(req, cfs_setxattr(D(req)->fs, ino, name, value, size, flags, &c));
}

/* getxattr and listxattr: size 0 asks for the size, else for the bytes. */
static void reply_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	struct cfs_fs *fs = D(req)->fs;
	int rc = size && !buf ? -ENOMEM
		 : name       ? cfs_getxattr(fs, ino, name, buf, size)
			      : cfs_listxattr(fs, ino, buf, size);
	if (rc < 0)
		reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	if (ino == FUSE_ROOT_ID && !strcmp(name, RING_POKE_XATTR)) { /* no lock: ring_poke.c */
		if (size)
			fuse_reply_buf(req, "1", 1);
		else
			fuse_reply_xattr(req, 1);
		return;
	}
	reply_xattr(req, ino, name, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	reply_xattr(req, ino, NULL, size);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	reply_err(req, cfs_removexattr(D(req)->fs, ino, name));
}

/* The kernel answers SEEK_SET, SEEK_CUR and SEEK_END itself.  With a write-back cache it
 * would ask about holes without sending its dirty pages first, and data not yet written
 * back would show as a hole (cp(1) would copy it as one): ENOSYS has it answer every later
 * SEEK_DATA and SEEK_HOLE itself, the whole file data (cfs(8)). */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	(void)fi;
	if (D(req)->writeback) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) { /* as the kernel's own filesystems answer (xfstests' generic/448) */
		fuse_reply_err(req, ENXIO);
		return;
	}
	int64_t at = cfs_seek_data(D(req)->fs, ino, (uint64_t)off, whence == SEEK_HOLE);
	if (at < 0)
		reply_err(req, (int)at);
	else
		fuse_reply_lseek(req, at);
}

/* chattr(1) and lsattr(1): the kernel asks through FS_IOC_GETFLAGS/SETFLAGS, or the
 * FS_IOC_FSGETXATTR/FSSETXATTR pair that xfs_io uses (and chattr -p, lsattr -p), both
 * carrying the same few flags; the pair also the project id. */
static const struct {
	uint32_t fl, xflag;
} xflags_of[] = {{FS_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE},
		 {FS_APPEND_FL, FS_XFLAG_APPEND},
		 {FS_NODUMP_FL, FS_XFLAG_NODUMP},
		 {FS_NOATIME_FL, FS_XFLAG_NOATIME},
		 {FS_PROJINHERIT_FL, FS_XFLAG_PROJINHERIT}};

static uint32_t xflags_from_flags(uint32_t flags)
{
	uint32_t x = 0;
	for (size_t i = 0; i < sizeof xflags_of / sizeof *xflags_of; i++)
		x |= flags & xflags_of[i].fl ? xflags_of[i].xflag : 0;
	return x;
}

/* The flags for an fsxattr, or UINT32_MAX if it asks for what CFS does not keep. */
static uint32_t flags_from_fsxattr(const struct fsxattr *fa)
{
	uint32_t flags = 0, x = fa->fsx_xflags;
	for (size_t i = 0; i < sizeof xflags_of / sizeof *xflags_of; i++)
		if (x & xflags_of[i].xflag) {
			flags |= xflags_of[i].fl;
			x &= ~xflags_of[i].xflag;
		}
	bool other = x || fa->fsx_extsize || fa->fsx_cowextsize;
	return other ? UINT32_MAX : flags;
}

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in, size_t in_size,
		     size_t out_size)
{
	(void)arg, (void)fi, (void)flags;
	struct cfsd *d = D(req);
	struct cfs_cred c = cred_of(req);
	uint32_t fl = 0, projid = 0;
	int rc;
	switch (cmd) {
	case FS_IOC_GETFLAGS:
	case FS_IOC_FSGETXATTR:
		if ((rc = cfs_get_fsattr(d->fs, ino, &fl, &projid)))
			break;
		if (cmd == FS_IOC_GETFLAGS && out_size >= sizeof fl) {
			fuse_reply_ioctl(req, 0, &fl, sizeof fl);
			return;
		}
		struct fsxattr fa = {.fsx_xflags = xflags_from_flags(fl), .fsx_projid = projid};
		if (cmd == FS_IOC_FSGETXATTR && out_size >= sizeof fa) {
			fuse_reply_ioctl(req, 0, &fa, sizeof fa);
			return;
		}
		rc = -EINVAL;
		break;
	case FS_IOC_SETFLAGS:
	case FS_IOC_FSSETXATTR:
		if (cmd == FS_IOC_SETFLAGS && in_size >= sizeof fl) {
			memcpy(&fl, in, sizeof fl);
			rc = cfs_set_iflags(d->fs, ino, fl, &c);
		} else if (cmd == FS_IOC_FSSETXATTR && in_size >= sizeof(struct fsxattr)) {
			struct fsxattr fa;
			memcpy(&fa, in, sizeof fa);
			fl = flags_from_fsxattr(&fa);
			rc = fl == UINT32_MAX ? -EOPNOTSUPP
					      : cfs_set_fsattr(d->fs, ino, fl, fa.fsx_projid, &c);
		} else {
			rc = -EOPNOTSUPP;
		}
		if (!rc) {
			/* The kernel would show the ctime it cached from before the change. */
			kernel_forget_attrs(d, ino);
			fuse_reply_ioctl(req, 0, NULL, 0);
			return;
		}
		break;
	default: rc = -ENOTTY; break;
	}
	reply_err(req, rc);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)fi;
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct cfsd *d = D(req);
	char msg[256];
	bool frees = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int rc = frees ? odm_revoke_begin(d->odm, ino, NULL, msg, sizeof msg) : 0;
	struct caller who;
	struct cfs_cred c = caller_cred(req, &who);
	if (!rc) {
		rc = cfs_fallocate(d->fs, ino, mode, (uint64_t)off, (uint64_t)len, &c);
		if (frees)
			odm_revoke_end(d->odm, ino);
	}
	if (who.asked) /* set-ID bits taken away: not to be shown, nor granted at an exec */
		kernel_forget_attrs(d, ino);
	reply_err(req, rc);
}

const struct fuse_lowlevel_ops cfsd_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.lseek = op_lseek,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.flock = op_flock,
	.getlk = op_getlk,
	.setlk = op_setlk,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.ioctl = op_ioctl,
};
