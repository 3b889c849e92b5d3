/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Namespace operations: lookup, create, link, unlink, rename, attributes and xattrs.
 * Every operation does its checks and reads first, then its changes, so a refusal changes
 * nothing. */
#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LINK_MAX_CFS 65000u
/* A namespace change may need a few blocks: refused early, above the maps' reserve. */
#define RESERVE_BLOCKS (CFS_META_RESERVE + 64u)

static uint8_t dtype(uint32_t mode) { return (uint8_t)((mode & S_IFMT) >> 12); }

void cfs_fill_stat(const struct cfs_fs *fs, const struct cfs_inode *ip, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = cfs_handle(fs, ip);
	st->st_mode = ip->d.mode;
	st->st_nlink = ip->d.nlink;
	st->st_uid = ip->d.uid;
	st->st_gid = ip->d.gid;
	st->st_rdev = ip->d.rdev;
	st->st_size = (off_t)ip->d.size;
	st->st_blksize = fs->bs;
	st->st_blocks = (blkcnt_t)(ip->d.nblocks * (fs->bs / 512));
	st->st_atim = (struct timespec){ip->d.atime, ip->d.atime_ns};
	st->st_mtim = (struct timespec){ip->d.mtime, ip->d.mtime_ns};
	st->st_ctim = (struct timespec){ip->d.ctime, ip->d.ctime_ns};
}

static int get_dir(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **dir)
{
	int rc = cfs_iget(fs, ino, dir);
	if (!rc && !S_ISDIR((*dir)->d.mode))
		rc = -ENOTDIR;
	return rc;
}

/* A directory removed (on another node, while this node's kernel still names it) takes no
 * new entry: it would go with the directory. */
static int takes_entries(const struct cfs_inode *dir)
{
	return dir->d.nlink ? 0 : -ENOENT;
}

static int check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	return len > CFS_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* What an operation on names holds in memory while it may wait for more glocks (fs->lock
 * released): the committer forgets the in-memory inodes of a glock that goes unless they are
 * pinned.  *ip is read here, after the call that set it (rc, returned) is done. */
static int pinned(int rc, struct cfs_inode **ip)
{
	if (*ip)
		(*ip)->pins++;
	return rc;
}

/* The pinned inodes of v, put back. */
static void release_inodes(struct cfs_fs *fs, struct cfs_inode **v, int n)
{
	for (int i = 0; i < n; i++)
		if (v[i]) {
			v[i]->pins--;
			cfs_iput_check(fs, v[i]);
		}
}

int cfs_getattr(struct cfs_fs *fs, uint64_t ino, struct stat *st)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		cfs_fill_stat(fs, ip, st);
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

int cfs_access(struct cfs_fs *fs, uint64_t ino, int mask, const struct cfs_cred *cr)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		rc = cfs_acl_permission(fs, ip, (unsigned)mask & 7, cr);
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

unsigned cfs_name_lease(struct cfs_fs *fs, uint64_t parent, uint64_t since_ns)
{
	if (!fs->cluster)
		return 0;
	pthread_mutex_lock(&fs->lock);
	const struct cfs_inode *dir = cfs_icache_find(fs, parent);
	unsigned ms = dir && !dir->dead ? cfs_iglock_lease_names(fs, dir->ino, since_ns) : 0;
	pthread_mutex_unlock(&fs->lock);
	return ms;
}

int cfs_lookup(struct cfs_fs *fs, uint64_t parent, const char *name, struct stat *st)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *dir, *ip = NULL;
	uint64_t ino = 0;
	if (!strcmp(name, ".")) { /* any inode by its handle: how an NFS file handle is opened */
		if (!(rc = cfs_iget(fs, parent, &ip))) {
			ip->nlookup++;
			cfs_fill_stat(fs, ip, st);
		}
		cfs_op_end(fs);
		return rc;
	}
	rc = get_dir(fs, parent, &dir);
	if (!rc && strlen(name) > CFS_NAME_MAX)
		rc = -ENAMETOOLONG;
	if (!rc && !strcmp(name, ".."))
		ino = dir->ino == fs->sb.root_ino ? dir->ino : dir->d.parent;
	else if (!rc)
		rc = cfs_dir_lookup(fs, dir, name, &ino, NULL);
	if (!rc) {
		dir->pins++; /* the child's glock may be asked for with fs->lock released */
		rc = cfs_iget_entry(fs, ino, &ip);
		dir->pins--;
	}
	if (!rc) {
		ip->nlookup++;
		cfs_fill_stat(fs, ip, st);
	}
	/* An entry pointing at no inode is damage on one node; on a cluster it can also be a
	 * new inode in the block of one still open here. */
	if (rc == -ESTALE && !fs->cluster)
		rc = -EIO;
	cfs_iput_check(fs, dir);
	cfs_op_end(fs);
	return rc;
}

void cfs_forget(struct cfs_fs *fs, uint64_t ino, uint64_t n)
{
	cfs_put(fs, ino, 0, n);
}

/* What a name's reservation says to its operation: -EAGAIN, fs->lock was released, start
 * over; -ENOSPC, do it under the metadata glock EX. */
static int reserve_answer(int rc)
{
	return rc == -EAGAIN ? -CFS_ERETRY : rc == -ENOSPC ? -CFS_ENEEDMETA : rc;
}

/* A change of names on a cluster runs under the metadata glock PR with the glocks of what it
 * changes EX, asked for before anything changes; one that had to wait for any starts over
 * (another thread or node may have taken an earlier one back meanwhile), up to `most` times.
 * Start over? */
static bool retry_shared(const struct cfs_fs *fs, int rc, unsigned tries, unsigned most)
{
	return fs->cluster && rc == -CFS_ERETRY && tries <= most;
}

/* Then, or if what it needs cannot be had so, under the metadata glock EX. */
static bool needs_ex(int rc)
{
	return rc == -CFS_ERETRY || rc == -CFS_ENEEDMETA;
}

/* Do other nodes change this directory too (cfs_iglock_contended)?  Then a link or rename
 * in it goes under the metadata glock EX at once: its tries under PR would mostly wait for
 * the directory's glock and start over, where EX, kept a moment, lets a node do a run of
 * them (create racer, 3 nodes in one directory one level deep, 30 s: 22,700-26,900
 * operations with tries in every directory, 28,300-32,000 this way).  In a directory other
 * nodes only read, the tries go through: a rename there no longer stops every node. */
static bool dir_contended(struct cfs_fs *fs, uint64_t handle)
{
	pthread_mutex_lock(&fs->lock);
	bool busy = fs->cluster && cfs_iglock_contended(fs, cfs_handle_block(fs, handle));
	pthread_mutex_unlock(&fs->lock);
	return busy;
}

/* Under PR: did the operation wait since `waits` (cfs_op_waits)? */
static int waited(const struct cfs_fs *fs, unsigned waits)
{
	return !cfs_may_allocate(fs) && cfs_op_waits != waits ? -CFS_ERETRY : 0;
}

/* A new inode that nothing names goes, with what it holds: also under the metadata glock PR,
 * where cfs_iput_check leaves unlinked inodes to their last node, since no other node knows
 * of this one. */
static int discard_new(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (cfs_may_allocate(fs))
		return cfs_iput_check(fs, ip);
	int rc = cfs_ifree(fs, ip);
	cfs_iforget(fs, ip);
	return rc;
}

/* make_node inside an operation, dir held: *st is filled, and the kernel's reference counted
 * if referenced. */
static int make_in(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, mode_t mode,
		   dev_t rdev, const struct cfs_cred *cr, const char *target, bool referenced,
		   struct stat *st)
{
	size_t tlen = target ? strlen(target) : 0;
	struct cfs_inode *ip = NULL;
	uint64_t exists;
	bool named = false, counted = false; /* what to undo if it fails half way */
	int rc = takes_entries(dir);
	if (!rc && S_ISDIR(mode) && dir->d.nlink >= LINK_MAX_CFS)
		rc = -EMLINK;
	if (!rc && name)
		rc = cfs_iflags_may_add_entry(dir);
	if (!rc && !cfs_free_above(fs, RESERVE_BLOCKS + (target ? 1 : 0) - 1))
		rc = -ENOSPC;
	if (!rc && name) {
		rc = cfs_dir_lookup(fs, dir, name, &exists, NULL);
		rc = rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
	}
	uint32_t gid = cr->gid;
	if (!rc && (dir->d.mode & S_ISGID)) { /* BSD group semantics under a setgid directory */
		gid = dir->d.gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	if (!rc) { /* the new inode's ids, and a directory's bucket or a symlink's block */
		struct cfs_inode would = {.d = {.mode = (uint32_t)mode, .uid = cr->uid, .gid = gid}};
		cfs_project_inherit(fs, dir, &would);
		rc = cfs_quota_may_create(fs, &would.d, S_ISDIR(mode) || target ? 1 : 0);
	}
	/* + the inode, a directory's bucket or a symlink's block, an inherited ACL's block */
	if (!rc && name)
		rc = reserve_answer(cfs_dir_add_reserve(fs, dir, 3));
	if (!rc && !name && !cfs_may_allocate(fs)) { /* on this node's orphan list instead */
		unsigned waits = cfs_op_waits;
		rc = reserve_answer(cfs_orphan_add_reserve(fs, 2));
		if (!rc)
			rc = waited(fs, waits);
	}
	if (!rc && (rc = cfs_ialloc_in(fs, dir, (uint32_t)mode, cr->uid, gid, &ip)) == -EAGAIN)
		rc = -CFS_ERETRY;
	if (!rc) {
		ip->d.nlink = S_ISDIR(mode) ? 2 : 1;
		ip->d.rdev = rdev;
		if (S_ISDIR(mode)) {
			ip->d.parent = dir->ino;
			rc = cfs_dir_init(fs, ip);
			dir->d.nlink++;
			counted = true;
		}
	}
	if (!rc && !target)
		rc = cfs_acl_inherit(fs, dir, ip, cr->umask);
	if (!rc && target) { /* the target is the symlink's data block */
		rc = cfs_ext_fill(fs, ip, 0, 1);
		if (!rc)
			rc = cfs_ext_mark_written(ip, 0, 1);
		uint8_t *blk = NULL;
		if (!rc && posix_memalign((void **)&blk, 4096, fs->bs))
			rc = -ENOMEM;
		if (!rc) {
			bool unwritten;
			memset(blk, 0, fs->bs);
			memcpy(blk, target, tlen + 1);
			rc = cvm_volume_write(fs->vol, blk, fs->bs,
					      cfs_ext_bmap(ip, 0, &unwritten) * fs->bs);
			ip->d.size = tlen;
		}
		free(blk);
	}
	if (!rc && !name) {
		ip->d.nlink = 0;
		ip->nopen = 1;
		rc = cfs_orphan_add(fs, ip);
	}
	if (!rc && name)
		named = !(rc = cfs_dir_add(fs, dir, name, ip->ino, dtype((uint32_t)mode)));
	if (!rc && name) {
		cfs_itouch(dir, true, true);
		rc = cfs_iwrite(fs, dir);
	}
	if (!rc)
		rc = cfs_iwrite(fs, ip);
	if (!rc) {
		ip->nlookup += referenced;
		cfs_fill_stat(fs, ip, st);
		if (!referenced && name) /* nobody holds it: it leaves memory */
			rc = cfs_iput_check(fs, ip);
	} else if (ip && !named) { /* nothing names it: it goes, with what it holds */
		if (counted)
			dir->d.nlink--;
		ip->d.nlink = 0;
		ip->nopen = 0;
		int frc = discard_new(fs, ip);
		if (frc)
			cfs_log(fs, "create %s in inode %llu failed half way (%s), and freeing inode "
				"%llu too (%s): fsck.cfs will reclaim it", name ? name : "(unnamed)",
				(unsigned long long)dir->ino, strerror(-rc),
				(unsigned long long)ip->ino, strerror(-frc));
	} else if (ip) {
		cfs_log(fs, "create %s in inode %llu failed after naming inode %llu (%s)", name,
			(unsigned long long)dir->ino, (unsigned long long)ip->ino, strerror(-rc));
		cfs_iput_check(fs, ip);
	}
	return rc;
}

static int make_node_as(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode,
			dev_t rdev, const struct cfs_cred *cr, const char *target, struct stat *st,
			bool shared)
{
	int rc = shared ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_inode *dir = NULL;
	rc = pinned(get_dir(fs, parent, &dir), &dir);
	if (!rc)
		rc = make_in(fs, dir, name, mode, rdev, cr, target, name != NULL, st);
	release_inodes(fs, &dir, 1);
	cfs_op_end(fs);
	return rc;
}

/* make_node_as under the metadata glock PR, then if it must, EX. */
static int make_node_tries(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode,
			   dev_t rdev, const struct cfs_cred *cr, const char *target, struct stat *st)
{
	/* The directory's and the new inode's glocks EX and the groups it reserves (an unnamed
	 * file's: this node's orphan list's), so that nodes making files in their own
	 * directories need not take turns. */
	int rc = -CFS_ERETRY;
	for (unsigned tries = 0; retry_shared(fs, rc, tries, CFS_GROUP_FETCHES); tries++)
		rc = make_node_as(fs, parent, name, mode, rdev, cr, target, st, true);
	return needs_ex(rc) ? make_node_as(fs, parent, name, mode, rdev, cr, target, st, false)
			    : rc;
}

/* Make an inode of mode under dir/name.  target: a symlink's.  name NULL: an unnamed file,
 * open, on the orphan list until cfs_link names it. */
static int make_node(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode,
		     dev_t rdev, const struct cfs_cred *cr, const char *target, struct stat *st)
{
	int rc = name ? check_name(name) : 0;
	if (rc)
		return rc;
	size_t tlen = target ? strlen(target) : 0;
	if (target && (tlen == 0 || tlen >= fs->bs || tlen >= 4096))
		return tlen ? -ENAMETOOLONG : -ENOENT;
	rc = make_node_tries(fs, parent, name, mode, rdev, cr, target, st);
	return cfs_alloc_retry(fs, rc) ? make_node_tries(fs, parent, name, mode, rdev, cr, target, st)
				       : rc;
}

int cfs_mknod(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
	      const struct cfs_cred *cr, struct stat *st)
{
	if (S_ISDIR(mode) || S_ISLNK(mode))
		return -EINVAL;
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	return make_node(fs, parent, name, mode, rdev, cr, NULL, st);
}

int cfs_tmpfile(struct cfs_fs *fs, uint64_t parent, mode_t mode, const struct cfs_cred *cr,
		struct stat *st)
{
	return make_node(fs, parent, NULL, (mode & 07777) | S_IFREG, 0, cr, NULL, st);
}

int cfs_mkdir(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode,
	      const struct cfs_cred *cr, struct stat *st)
{
	return make_node(fs, parent, name, (mode & 07777) | S_IFDIR, 0, cr, NULL, st);
}

int cfs_symlink(struct cfs_fs *fs, uint64_t parent, const char *name, const char *target,
		const struct cfs_cred *cr, struct stat *st)
{
	return make_node(fs, parent, name, S_IFLNK | 0777, 0, cr, target, st);
}

int cfs_readlink(struct cfs_fs *fs, uint64_t ino, char *buf, size_t size)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	uint8_t *blk = NULL;
	rc = cfs_iget(fs, ino, &ip);
	if (!rc && !S_ISLNK(ip->d.mode))
		rc = -EINVAL;
	bool unwritten;
	uint64_t pblk = rc ? 0 : cfs_ext_bmap(ip, 0, &unwritten);
	if (!rc && (!pblk || ip->d.size == 0 || ip->d.size >= fs->bs))
		rc = -EIO;
	if (!rc && posix_memalign((void **)&blk, 4096, fs->bs))
		rc = -ENOMEM;
	if (!rc)
		rc = cvm_volume_read(fs->vol, blk, fs->bs, pblk * fs->bs);
	if (!rc) {
		size_t n = ip->d.size < size - 1 ? ip->d.size : size - 1;
		memcpy(buf, blk, n);
		buf[n] = '\0';
	}
	free(blk);
	if (ip)
		cfs_iput_check(fs, ip);
	cfs_op_end(fs);
	return rc;
}

static int link_as(struct cfs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
		   struct stat *st, bool shared)
{
	int rc = shared ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_inode *v[2] = {0};
	uint64_t exists;
	rc = pinned(cfs_iget(fs, ino, &v[0]), &v[0]);
	unsigned waits = cfs_op_waits;
	if (!rc && S_ISDIR(v[0]->d.mode))
		rc = -EPERM;
	if (!rc)
		rc = cfs_iflags_may_change(v[0]);
	if (!rc && v[0]->d.nlink >= LINK_MAX_CFS)
		rc = -EMLINK;
	if (!rc && v[0]->d.nlink == 0 && !v[0]->in_orphans)
		rc = -ENOENT;
	if (!rc)
		rc = pinned(get_dir(fs, parent, &v[1]), &v[1]);
	if (!rc)
		rc = takes_entries(v[1]);
	if (!rc)
		rc = cfs_iflags_may_add_entry(v[1]);
	if (!rc)
		rc = cfs_project_may_name(fs, v[1], v[0]);
	if (!rc && !cfs_free_above(fs, RESERVE_BLOCKS - 1))
		rc = -ENOSPC;
	if (!rc) {
		rc = cfs_dir_lookup(fs, v[1], name, &exists, NULL);
		rc = rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
	}
	/* Naming an unnamed file (cfs_tmpfile) takes it off this node's orphan list too. */
	if (!rc && !cfs_may_allocate(fs))
		rc = reserve_answer(cfs_dir_add_reserve(fs, v[1], 0));
	if (!rc && !cfs_may_allocate(fs) && v[0]->d.nlink == 0)
		rc = cfs_orphan_remove_reserve(fs);
	if (!rc)
		rc = waited(fs, waits);
	if (!rc)
		rc = cfs_dir_add(fs, v[1], name, v[0]->ino, dtype(v[0]->d.mode));
	if (!rc && v[0]->d.nlink == 0) /* naming an unnamed file (cfs_tmpfile) */
		rc = cfs_orphan_remove(fs, v[0]);
	if (!rc) {
		v[0]->d.nlink++;
		cfs_itouch(v[0], false, true);
		cfs_itouch(v[1], true, true);
		rc = cfs_iwrite(fs, v[0]);
		if (!rc)
			rc = cfs_iwrite(fs, v[1]);
	}
	if (!rc) {
		v[0]->nlookup++;
		cfs_fill_stat(fs, v[0], st);
	}
	release_inodes(fs, v, 2);
	cfs_op_end(fs);
	return rc;
}

int cfs_link(struct cfs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
	     struct stat *st)
{
	int rc = check_name(name);
	if (rc)
		return rc;
	/* The file's and the directory's glocks EX, so that nodes linking their own files need
	 * not take turns, and a link in a directory other nodes only read does not stop them
	 * all (metadata glock EX). */
	rc = dir_contended(fs, parent) ? -CFS_ENEEDMETA : -CFS_ERETRY;
	for (unsigned tries = 0; retry_shared(fs, rc, tries, CFS_GROUP_FETCHES); tries++)
		rc = link_as(fs, ino, parent, name, st, true);
	return needs_ex(rc) ? link_as(fs, ino, parent, name, st, false) : rc;
}

/* One link fewer: an inode nobody names any more is freed, or kept as an orphan while the
 * kernel still holds it. */
static int drop_link(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (S_ISDIR(ip->d.mode))
		ip->d.nlink = 0;
	else if (ip->d.nlink)
		ip->d.nlink--;
	cfs_itouch(ip, false, true);
	if (!ip->d.nlink) {
		fs->unlinked_ns = cfs_now_ns();
		fs->unlinked_ino = cfs_handle(fs, ip);
	}
	int rc = 0;
	/* On a cluster always: another node may have it open, and then it outlives this op. */
	bool kept = ip->nlookup || ip->nopen || fs->cluster;
	if (ip->d.nlink == 0 && kept && !ip->in_orphans)
		rc = cfs_orphan_add(fs, ip);
	return rc ? rc : cfs_iwrite(fs, ip);
}

/* Under the metadata glock PR: what a removal takes besides the directory and the inode, all
 * asked for before anything changes: this node's orphan list, which an inode losing its last
 * link joins.  One that nothing here refers to would be freed at once: under EX. */
static int reserve_for_remove(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (cfs_may_allocate(fs) || (ip->d.nlink > 1 && !S_ISDIR(ip->d.mode)))
		return 0;
	if (!ip->nlookup && !ip->nopen)
		return -CFS_ENEEDMETA;
	return reserve_answer(cfs_orphan_add_reserve(fs, 0));
}

static int remove_entry_as(struct cfs_fs *fs, uint64_t parent, const char *name, bool want_dir,
			   bool shared)
{
	int rc = shared ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_inode *v[2] = {0};
	uint64_t ino;
	rc = pinned(get_dir(fs, parent, &v[0]), &v[0]);
	unsigned waits = cfs_op_waits;
	if (!rc && (!strcmp(name, ".") || !strcmp(name, "..")))
		rc = want_dir ? -EINVAL : -EISDIR;
	if (!rc)
		rc = cfs_dir_lookup(fs, v[0], name, &ino, NULL);
	if (!rc)
		rc = pinned(cfs_iget_entry(fs, ino, &v[1]), &v[1]);
	if (!rc && want_dir && !S_ISDIR(v[1]->d.mode))
		rc = -ENOTDIR;
	if (!rc && !want_dir && S_ISDIR(v[1]->d.mode))
		rc = -EISDIR;
	if (!rc) /* before ENOTEMPTY, as fs/namei.c's may_delete comes before the rmdir */
		rc = cfs_iflags_may_remove_entry(v[0], v[1]);
	if (!rc && want_dir && v[1]->d.dir_entries)
		rc = -ENOTEMPTY;
	if (!rc)
		rc = reserve_for_remove(fs, v[1]);
	if (!rc)
		rc = waited(fs, waits);
	if (!rc)
		rc = cfs_dir_remove(fs, v[0], name);
	if (!rc) {
		if (want_dir)
			v[0]->d.nlink--;
		cfs_itouch(v[0], true, true);
		rc = cfs_iwrite(fs, v[0]);
	}
	if (!rc)
		rc = drop_link(fs, v[1]);
	release_inodes(fs, v, 2);
	cfs_op_end(fs);
	return rc;
}

/* The directory's and the inode's glocks EX and this node's orphan list, so that nodes
 * removing files in their own directories need not take turns. */
static int remove_entry(struct cfs_fs *fs, uint64_t parent, const char *name, bool want_dir)
{
	int rc = -CFS_ERETRY;
	for (unsigned tries = 0; retry_shared(fs, rc, tries, CFS_GROUP_FETCHES); tries++)
		rc = remove_entry_as(fs, parent, name, want_dir, true);
	return needs_ex(rc) ? remove_entry_as(fs, parent, name, want_dir, false) : rc;
}

int cfs_unlink(struct cfs_fs *fs, uint64_t parent, const char *name)
{
	return remove_entry(fs, parent, name, false);
}

int cfs_rmdir(struct cfs_fs *fs, uint64_t parent, const char *name)
{
	return remove_entry(fs, parent, name, true);
}

static int ancestor_walk(struct cfs_fs *fs, uint64_t a, uint64_t b)
{
	if (!cfs_may_allocate(fs))
		cfs_op_imode = CFSLOCK_PR;
	for (unsigned depth = 0; depth < 4096; depth++) {
		if (a == b)
			return 1;
		if (b == fs->sb.root_ino)
			return 0;
		struct cfs_inode *ip;
		int rc = cfs_iget_entry(fs, b, &ip);
		if (rc)
			return rc;
		uint64_t up = ip->d.parent;
		cfs_iput_check(fs, ip);
		b = up;
	}
	return -ELOOP;
}

/* Is dir `a` the same as or an ancestor of `b`?  Under the metadata glock PR the ancestors'
 * glocks are taken PR, not in the operation's mode.  That suffices, with no lock for all
 * directory moves as GFS2's rename glock: an operation that did not wait (one that did starts
 * over) holds every glock it took from its first look to its end, so no other node can move
 * any of these ancestors (that takes the moved directory's glock EX) between this look and
 * this move, and one that moves our directory's ancestors later sees our move in its look. */
static int is_ancestor(struct cfs_fs *fs, uint64_t a, uint64_t b)
{
	int imode = cfs_op_imode;
	int rc = ancestor_walk(fs, a, b);
	cfs_op_imode = imode;
	return rc;
}

struct rename_ctx {
	struct cfs_inode *from_dir, *to_dir, *src, *dst;
	const char *name, *newname;
	unsigned flags;
};

/* fs/namei.c may_delete and may_create: a flagged file keeps its name, a flagged directory
 * its entries (an append-only one takes new names). */
static int rename_flags_allow(const struct rename_ctx *r)
{
	int rc = cfs_iflags_may_remove_entry(r->from_dir, r->src);
	if (!rc && r->dst)
		rc = cfs_iflags_may_remove_entry(r->to_dir, r->dst);
	if (!rc)
		rc = r->dst ? 0 : cfs_iflags_may_add_entry(r->to_dir);
	return rc;
}

/* Would dir go under itself as a child of `parent`?  -EINVAL if so. */
static int goes_under_itself(struct cfs_fs *fs, const struct cfs_inode *dir,
			     const struct cfs_inode *parent)
{
	int a = S_ISDIR(dir->d.mode) ? is_ancestor(fs, dir->ino, parent->ino) : 0;
	return a ? (a < 0 ? a : -EINVAL) : 0;
}

/* An exchange between two parents moves each under the other's parent: the look both ways. */
static int exchange_checks(struct cfs_fs *fs, const struct rename_ctx *r)
{
	if (!r->dst)
		return -ENOENT;
	int rc = cfs_project_may_name(fs, r->to_dir, r->src);
	if (!rc)
		rc = cfs_project_may_name(fs, r->from_dir, r->dst);
	if (!rc && r->from_dir != r->to_dir && !(rc = goes_under_itself(fs, r->src, r->to_dir)))
		rc = goes_under_itself(fs, r->dst, r->from_dir);
	return rc ? rc : rename_flags_allow(r);
}

static int rename_checks(struct cfs_fs *fs, struct rename_ctx *r)
{
	bool src_dir = S_ISDIR(r->src->d.mode);
	int rc = takes_entries(r->to_dir);
	if (rc)
		return rc;
	if (r->flags & CFS_RENAME_EXCHANGE)
		return exchange_checks(fs, r);
	if ((rc = cfs_project_may_name(fs, r->to_dir, r->src)))
		return rc;
	if (r->dst && (r->flags & CFS_RENAME_NOREPLACE))
		return -EEXIST;
	if (r->dst && src_dir && !S_ISDIR(r->dst->d.mode))
		return -ENOTDIR;
	if (r->dst && !src_dir && S_ISDIR(r->dst->d.mode))
		return -EISDIR;
	if (r->from_dir != r->to_dir && (rc = goes_under_itself(fs, r->src, r->to_dir)))
		return rc;
	if ((rc = rename_flags_allow(r))) /* EPERM before ENOTEMPTY, as the VFS orders them */
		return rc;
	if (r->dst && S_ISDIR(r->dst->d.mode) && r->dst->d.dir_entries)
		return -ENOTEMPTY;
	if (!r->dst && !cfs_free_above(fs, RESERVE_BLOCKS - 1))
		return -ENOSPC;
	return 0;
}

/* A directory moved from one parent to another: its ".." and both parents' link counts. */
static void reparent(struct cfs_inode *moved, struct cfs_inode *from, struct cfs_inode *to)
{
	if (!S_ISDIR(moved->d.mode) || from == to)
		return;
	moved->d.parent = to->ino;
	from->d.nlink--;
	to->d.nlink++;
}

static int rename_apply(struct cfs_fs *fs, struct rename_ctx *r)
{
	int rc;
	uint8_t st = dtype(r->src->d.mode);
	if (r->flags & CFS_RENAME_EXCHANGE) {
		rc = cfs_dir_replace(fs, r->from_dir, r->name, r->dst->ino, dtype(r->dst->d.mode));
		if (!rc)
			rc = cfs_dir_replace(fs, r->to_dir, r->newname, r->src->ino, st);
		reparent(r->src, r->from_dir, r->to_dir);
		reparent(r->dst, r->to_dir, r->from_dir);
		cfs_itouch(r->dst, false, true);
	} else if (r->dst) {
		rc = cfs_dir_replace(fs, r->to_dir, r->newname, r->src->ino, st);
		if (!rc)
			rc = cfs_dir_remove(fs, r->from_dir, r->name);
		if (!rc && S_ISDIR(r->dst->d.mode))
			r->to_dir->d.nlink--; /* the replaced directory's ".." */
		reparent(r->src, r->from_dir, r->to_dir);
		if (!rc)
			rc = drop_link(fs, r->dst);
	} else {
		rc = cfs_dir_add(fs, r->to_dir, r->newname, r->src->ino, st);
		if (!rc)
			rc = cfs_dir_remove(fs, r->from_dir, r->name);
		reparent(r->src, r->from_dir, r->to_dir);
	}
	cfs_itouch(r->src, false, true);
	cfs_itouch(r->from_dir, true, true);
	cfs_itouch(r->to_dir, true, true);
	if (!rc)
		rc = cfs_iwrite(fs, r->src);
	if (!rc)
		rc = cfs_iwrite(fs, r->from_dir);
	if (!rc && r->to_dir != r->from_dir)
		rc = cfs_iwrite(fs, r->to_dir);
	if (!rc && r->dst && (r->flags & CFS_RENAME_EXCHANGE))
		rc = cfs_iwrite(fs, r->dst);
	return rc;
}

/* Under the metadata glock PR: a rename in one directory, or between two, with what it adds
 * or removes reserved (a directory moved to another parent too: see is_ancestor; an
 * exchange changes entries in place).  A whiteout, which makes an inode, under EX. */
static int reserve_for_rename(struct cfs_fs *fs, const struct rename_ctx *r)
{
	if (cfs_may_allocate(fs))
		return 0;
	bool dirs = S_ISDIR(r->src->d.mode) || (r->dst && S_ISDIR(r->dst->d.mode));
	bool moves_dir = dirs && r->from_dir != r->to_dir;
	if ((r->flags & CFS_RENAME_WHITEOUT) ||
	    (moves_dir && !(r->flags & CFS_RENAME_EXCHANGE) && !S_ISDIR(r->src->d.mode)))
		return -CFS_ENEEDMETA;
	if (r->flags & CFS_RENAME_EXCHANGE)
		return 0;
	return r->dst ? reserve_for_remove(fs, r->dst)
		      : reserve_answer(cfs_dir_add_reserve(fs, r->to_dir, 0));
}

static int rename_as(struct cfs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname, unsigned flags, const struct cfs_cred *cr, bool shared)
{
	int rc = shared ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct rename_ctx r = {.name = name, .newname = newname, .flags = flags};
	uint64_t sino, dino;
	rc = pinned(get_dir(fs, parent, &r.from_dir), &r.from_dir);
	unsigned waits = cfs_op_waits;
	if (!rc)
		rc = pinned(get_dir(fs, newparent, &r.to_dir), &r.to_dir);
	if (!rc)
		rc = cfs_dir_lookup(fs, r.from_dir, name, &sino, NULL);
	if (!rc)
		rc = pinned(cfs_iget_entry(fs, sino, &r.src), &r.src);
	if (!rc) {
		rc = cfs_dir_lookup(fs, r.to_dir, newname, &dino, NULL);
		if (!rc)
			rc = pinned(cfs_iget_entry(fs, dino, &r.dst), &r.dst);
		else if (rc == -ENOENT)
			rc = 0;
	}
	if (!rc && r.dst && r.dst == r.src) { /* two names of one inode: nothing to do */
		r.dst->pins--;
		r.dst = NULL, rc = 1;
	}
	if (!rc)
		rc = reserve_for_rename(fs, &r);
	if (!rc)
		rc = rename_checks(fs, &r);
	if (!rc)
		rc = waited(fs, waits);
	if (!rc)
		rc = rename_apply(fs, &r);
	/* The whiteout overlayfs asks for, in the same transaction: a character device 0:0. */
	struct stat st;
	if (!rc && (flags & CFS_RENAME_WHITEOUT))
		rc = make_in(fs, r.from_dir, name, S_IFCHR, 0, cr, NULL, false, &st);
	struct cfs_inode *v[4] = {r.src, r.dst, r.from_dir, r.to_dir};
	release_inodes(fs, v, 4);
	cfs_op_end(fs);
	return rc > 0 ? 0 : rc;
}

int cfs_rename(struct cfs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags, const struct cfs_cred *cr)
{
	if ((flags & CFS_RENAME_EXCHANGE) && (flags & (CFS_RENAME_NOREPLACE | CFS_RENAME_WHITEOUT)))
		return -EINVAL;
	int rc = check_name(name);
	if (!rc)
		rc = check_name(newname);
	if (rc)
		return rc;
	/* Both directories' and both inodes' glocks EX, so that nodes renaming their own files
	 * (an editor's save, a log's rotation) need not take turns, and a rename in directories
	 * other nodes only read does not stop them all (metadata glock EX).  A try that waited
	 * for a glock starts over with it cached (the ancestors' too, for a move). */
	bool contended = dir_contended(fs, parent) || dir_contended(fs, newparent);
	rc = contended ? -CFS_ENEEDMETA : -CFS_ERETRY;
	for (unsigned tries = 0; retry_shared(fs, rc, tries, CFS_GROUP_FETCHES); tries++)
		rc = rename_as(fs, parent, name, newparent, newname, flags, cr, true);
	return needs_ex(rc) ? rename_as(fs, parent, name, newparent, newname, flags, cr, false)
			    : rc;
}

static void set_time(int64_t *sec, uint32_t *nsec, const struct timespec *ts)
{
	*sec = ts->tv_sec;
	*nsec = (uint32_t)ts->tv_nsec;
}

/* A truncate that frees blocks, under the metadata glock PR: in the groups it reserves, or
 * again under EX. */
static int frees_under_pr(struct cfs_fs *fs, struct cfs_inode *ip, off_t size)
{
	if ((uint64_t)size >= ip->d.size || cfs_may_allocate(fs))
		return 0;
	int rc = cfs_ext_reserve_frees(fs, ip, ((uint64_t)size + fs->bs - 1) / fs->bs, UINT64_MAX);
	return reserve_answer(rc);
}

static int setattr_as(struct cfs_fs *fs, uint64_t ino, const struct stat *a, unsigned set,
		      const struct cfs_cred *cr, struct stat *out, bool inode_only)
{
	int rc = inode_only ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	rc = cfs_iget(fs, ino, &ip);
	if (rc) {
		cfs_op_end(fs);
		return rc;
	}
	bool cached_times = (set & ~CFS_SET_TIMES_NOW) ==
				    (CFS_SET_MTIME | CFS_SET_CTIME | CFS_SET_CACHED_TIMES) &&
			    ip->cached_data;
	rc = cached_times ? 0 : cfs_iflags_may_setattr(ip, set);
	if (!rc && ((set & CFS_SET_UID && a->st_uid != ip->d.uid) ||
		    (set & CFS_SET_GID && a->st_gid != ip->d.gid)) && cfs_quota_needs_meta_ex(fs))
		rc = -CFS_ENEEDMETA; /* the charge moves to other ids */
	if (!rc && (set & CFS_SET_SIZE)) {
		if (S_ISDIR(ip->d.mode))
			rc = -EISDIR;
		else if ((uint64_t)a->st_size > CFS_MAX_FILE_BYTES)
			rc = -EFBIG;
		if (!rc) {
			/* Blocks may be freed: wait for this file's I/O (lock order: io, fs). */
			ip->pins++;
			pthread_mutex_unlock(&fs->lock);
			pthread_rwlock_wrlock(&ip->io);
			pthread_mutex_lock(&fs->lock);
			/* Held, the glock stayed; the inode may have been read again. */
			rc = cfs_irefresh(fs, ip);
			ip->pins--;
			if (!rc)
				rc = cfs_iflags_may_change(ip);
			if (!rc) /* it may have grown meanwhile */
				rc = frees_under_pr(fs, ip, a->st_size);
			cfs_op_may_yield = true;
			if (!rc)
				rc = cfs_truncate_locked(fs, ip, (uint64_t)a->st_size);
			cfs_op_may_yield = false;
			pthread_rwlock_unlock(&ip->io);
		}
	}
	if (!rc && (set & (CFS_SET_UID | CFS_SET_GID)) && cr && cr->uid != 0) {
		/* A user's chgrp into a group without room for the file: refused, as XFS does
		 * (root's chown passes, and leaves the new owner over its limit). */
		struct cfs_dinode now = ip->d;
		now.uid = set & CFS_SET_UID ? a->st_uid : now.uid;
		now.gid = set & CFS_SET_GID ? a->st_gid : now.gid;
		rc = cfs_quota_may_move(fs, ip, &now);
	}
	int caps = !rc && (set & (CFS_SET_UID | CFS_SET_GID | CFS_SET_SIZE))
			   ? cfs_setid_caps_go(fs, ip, cr) : 0;
	rc = caps < 0 ? caps : rc;
	if (!rc) {
		/* What a chown or truncate takes is decided on the file as it was (fs/attr.c). */
		mode_t drop = set & (CFS_SET_UID | CFS_SET_GID) ? cfs_setid_drop_on_chown(ip, cr) : 0;
		if (set & CFS_SET_SIZE)
			drop |= cfs_setid_drop_on_change(ip, cr);
		if (caps)
			rc = cfs_setid_drop_caps(fs, ip);
		if (!rc && (set & CFS_SET_MODE)) {
			uint32_t gid = set & CFS_SET_GID ? a->st_gid : ip->d.gid;
			mode_t mode = cfs_setid_chmod(a->st_mode & 07777, gid, cr);
			ip->d.mode = (ip->d.mode & S_IFMT) | mode;
			rc = cfs_acl_chmod(fs, ip);
		}
		if (!rc && (set & CFS_SET_UID))
			ip->d.uid = a->st_uid;
		if (set & CFS_SET_GID)
			ip->d.gid = a->st_gid;
		ip->d.mode &= ~drop;
		if (set & CFS_SET_ATIME)
			set_time(&ip->d.atime, &ip->d.atime_ns, &a->st_atim);
		if (set & CFS_SET_MTIME)
			set_time(&ip->d.mtime, &ip->d.mtime_ns, &a->st_mtim);
		cfs_itouch(ip, false, true);
		if (set & CFS_SET_CTIME)
			set_time(&ip->d.ctime, &ip->d.ctime_ns, &a->st_ctim);
		if (set & CFS_SET_CACHED_TIMES)
			ip->cached_data = false;
		int w = cfs_iwrite(fs, ip);
		rc = rc ? rc : w;
	}
	if (!rc)
		cfs_fill_stat(fs, ip, out);
	cfs_iput_check(fs, ip);
	cfs_op_end(fs);
	return rc;
}

int cfs_setattr(struct cfs_fs *fs, uint64_t ino, const struct stat *a, unsigned set,
		const struct cfs_cred *cr, struct stat *out)
{
	/* Only a truncate down frees (a chmod rewrites an ACL in its place, a truncate up leaves
	 * a hole): tried with the metadata glock PR and the groups it frees in, done again with
	 * it EX if those cannot be had. */
	int rc = -CFS_ERETRY;
	for (unsigned tries = 0; tries <= CFS_GROUP_FETCHES && rc == -CFS_ERETRY; tries++)
		rc = setattr_as(fs, ino, a, set, cr, out, true);
	if (rc == -CFS_ERETRY || rc == -CFS_ENEEDMETA)
		rc = setattr_as(fs, ino, a, set, cr, out, false);
	return rc;
}

int cfs_statfs(struct cfs_fs *fs, struct statvfs *st)
{
	return cfs_statfs_at(fs, 0, st);
}

int cfs_statfs_at(struct cfs_fs *fs, uint64_t ino, struct statvfs *st)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	memset(st, 0, sizeof *st);
	cfs_alloc_refresh(fs);
	uint64_t free_blocks = cfs_free_blocks(fs);
	st->f_bsize = st->f_frsize = fs->bs;
	st->f_blocks = fs->sb.total_blocks - fs->sb.ag_start;
	/* What users can have: the reserve is for the maps of what they have (cfs_alloc_meta). */
	uint64_t avail = free_blocks > CFS_META_RESERVE ? free_blocks - CFS_META_RESERVE : 0;
	st->f_bfree = free_blocks;
	st->f_bavail = avail;
	st->f_files = st->f_blocks; /* an inode is a block */
	st->f_ffree = st->f_favail = avail;
	st->f_namemax = CFS_NAME_MAX;
	struct cfs_inode *ip;
	if (ino && cfs_quota_on(fs) && !(rc = cfs_iget(fs, ino, &ip)))
		rc = cfs_quota_statfs(fs, ip, st);
	cfs_op_end(fs);
	return rc;
}

/* ---- xattrs ---- */
typedef int (*xattr_fn)(struct cfs_fs *, struct cfs_inode *, void *);

enum xattr_access { XA_LOOK, XA_CHANGE_INODE, XA_CHANGE_ALLOCATING };

static int xattr_op_as(struct cfs_fs *fs, uint64_t ino, enum xattr_access how, xattr_fn fn,
		       void *arg)
{
	bool change = how != XA_LOOK;
	int rc = how == XA_CHANGE_INODE ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, change);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	rc = cfs_iget(fs, ino, &ip);
	if (!rc) {
		rc = change ? cfs_iflags_may_change(ip) : 0;
		if (!rc)
			rc = fn(fs, ip, arg);
		if (rc >= 0 && change) {
			cfs_itouch(ip, false, true);
			int w = cfs_iwrite(fs, ip);
			rc = w ? w : rc;
		}
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

/* A change allocates only when the inline area overflows into a new xattr block: tried with
 * the metadata glock PR, done again with it EX if it must allocate. */
static int xattr_op(struct cfs_fs *fs, uint64_t ino, bool change, xattr_fn fn, void *arg)
{
	int rc = xattr_op_as(fs, ino, change ? XA_CHANGE_INODE : XA_LOOK, fn, arg);
	return rc == -CFS_ENEEDMETA ? xattr_op_as(fs, ino, XA_CHANGE_ALLOCATING, fn, arg) : rc;
}

struct xa {
	const char *name;
	void *value;
	size_t size;
	int flags;
	const struct cfs_cred *cr;
};

static int xa_set(struct cfs_fs *fs, struct cfs_inode *ip, void *arg)
{
	struct xa *x = arg;
	if (cfs_acl_is_access(x->name))
		return cfs_acl_set_access(fs, ip, x->value, x->size, x->cr);
	return cfs_xattr_set(fs, ip, x->name, x->value, x->size, x->flags);
}
static int xa_get(struct cfs_fs *fs, struct cfs_inode *ip, void *arg)
{
	struct xa *x = arg;
	return cfs_xattr_get(fs, ip, x->name, x->value, x->size);
}
static int xa_list(struct cfs_fs *fs, struct cfs_inode *ip, void *arg)
{
	struct xa *x = arg;
	return cfs_xattr_list(fs, ip, x->value, x->size);
}
static int xa_remove(struct cfs_fs *fs, struct cfs_inode *ip, void *arg)
{
	struct xa *x = arg;
	return cfs_xattr_remove(fs, ip, x->name);
}

int cfs_setxattr(struct cfs_fs *fs, uint64_t ino, const char *name, const void *value,
		 size_t size, int flags, const struct cfs_cred *cr)
{
	struct xa x = {name, (void *)value, size, flags, cr};
	return xattr_op(fs, ino, true, xa_set, &x);
}

int cfs_getxattr(struct cfs_fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	struct xa x = {name, value, size, 0, NULL};
	return xattr_op(fs, ino, false, xa_get, &x);
}

int cfs_listxattr(struct cfs_fs *fs, uint64_t ino, char *list, size_t size)
{
	struct xa x = {NULL, list, size, 0, NULL};
	return xattr_op(fs, ino, false, xa_list, &x);
}

int cfs_removexattr(struct cfs_fs *fs, uint64_t ino, const char *name)
{
	struct xa x = {name, NULL, 0, 0, NULL};
	return xattr_op(fs, ino, true, xa_remove, &x);
}

/* ---- readdir ---- */
struct dir_list {
	struct cfs_dirent *v;
	size_t n, cap;
};

static int list_add(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type)
{
	struct dir_list *l = arg;
	if (cfs_reserve((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))
		return -ENOMEM;
	struct cfs_dirent *e = &l->v[l->n++];
	e->ino = ino;
	e->type = type;
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	return 0;
}

/* A listing is most often followed by a look at what it lists (ls -l, find, a tree read
 * or copied): on a cluster the entries' glocks are asked for together now, one round trip
 * for the directory instead of one for each span of inodes as each is looked up. */
static void prefetch_entries(struct cfs_fs *fs, struct cfs_inode *dir, const struct dir_list *l)
{
	uint64_t *blks = malloc(l->n * sizeof *blks);
	if (!blks)
		return;
	size_t n = 0;
	for (size_t i = 2; i < l->n; i++) /* past . and .. */
		blks[n++] = l->v[i].ino;
	dir->pins++; /* fs->lock may be released */
	cfs_iglock_prefetch(fs, blks, n, CFSLOCK_PR);
	dir->pins--;
	free(blks);
}

int cfs_readdir_all(struct cfs_fs *fs, uint64_t ino, struct cfs_dirent **out, size_t *n)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *dir;
	struct dir_list l = {0};
	rc = get_dir(fs, ino, &dir);
	if (!rc) {
		uint64_t up = dir->ino == fs->sb.root_ino ? CFS_ROOT : dir->d.parent;
		rc = list_add(&l, ".", 1, ino, DT_DIR);
		if (!rc)
			rc = list_add(&l, "..", 2, up == fs->sb.root_ino ? CFS_ROOT : up, DT_DIR);
		if (!rc)
			rc = cfs_dir_walk(fs, dir, list_add, &l);
		if (!rc && fs->cluster)
			prefetch_entries(fs, dir, &l);
		cfs_iput_check(fs, dir);
	}
	cfs_op_end(fs);
	if (rc) {
		free(l.v);
		return rc;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}
