/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcfs: the CFS filesystem on a CVM volume, for cfsd, mkfs.cfs, fsck.cfs and cfs.
 *
 * The calls below work on inode numbers like the FUSE low-level API does, so cfsd is a thin
 * translation and the unit tests drive the filesystem without a mount.  Errors are negative
 * errno values; those a person must act on also leave a message in cfs_last_error().
 */
#ifndef CFS_H
#define CFS_H

#include "cvm/cvm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

struct cfs_fs;

const char *cfs_last_error(void);
/* Every log line also to fd (-1: no more), as well as to stderr: a daemon's log file while it
 * mounts, when its stderr is still the terminal of whoever mounts (a journal replayed then
 * belongs in the log too). */
void cfs_log_copy(int fd);
void cfs_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- mkfs ---- */
struct cfs_mkfs_opts {
	uint32_t block_size;     /* 0: 4096 */
	uint32_t slots;          /* 0: 4 */
	uint32_t journal_blocks; /* per slot; 0: 4 MiB worth */
	const char *label;
	const char *lockproto;   /* NULL: "local" */
	bool force;              /* overwrite an existing filesystem */
	/* Features (cfs(5)): those of feature_level (max-compat: none, readable by every
	 * release; default; max-features; NULL: default), then the changes of features
	 * ("a,^b": a on, b off) */
	const char *feature_level, *features;
};
typedef void (*cfs_progress_fn)(void *arg, const char *what, unsigned long long done,
				unsigned long long total);
/* Everything is checked before the first write. */
int cfs_mkfs(struct cvm_volume *vol, const struct cfs_mkfs_opts *o, cfs_progress_fn progress,
	     void *arg);

/* ---- format and features (cfs(5)) ---- */
/* What the superblock says, for 'cfs show': read only, also while mounted. */
struct cfs_info {
	char label[64], fs_uuid[37], lockproto[16];
	uint32_t format, block_size, nslots, journal_blocks, nags;
	uint64_t total_blocks, generation, ctime, mtime;
	uint32_t features[3];   /* compat, ro_compat, incompat */
	char feature_list[512]; /* their names, comma-separated (unknown ones say so) */
	/* what this release may do with it: "read-write", "read-only: ..." or "none: ..." */
	char usable[512];
};
int cfs_info(struct cvm_volume *vol, struct cfs_info *out);
/* Turn features on or off ("a,^b") on a filesystem unmounted everywhere, crash-safely: an
 * in-progress bit stops every mount until the same tune is run again (or fsck.cfs -y rolls
 * it back).  Refused, with the error set, where this release cannot.  progress (may be NULL)
 * hears of the count of the files' usage that turning quotas on takes. */
int cfs_tune(struct cvm_volume *vol, const char *features, cfs_progress_fn progress, void *arg);

/* ---- fsck ---- */
struct cfs_fsck_report {
	unsigned problems, repaired;
	uint64_t inodes, directories, files, blocks_used;
};
typedef void (*cfs_print_fn)(void *arg, const char *line);
int cfs_fsck(struct cvm_volume *vol, bool repair, cfs_print_fn print, void *arg,
	     cfs_progress_fn progress, struct cfs_fsck_report *report);

/* ---- the check of a mounted filesystem (check.c; fsck.cfs -n through cfsd) ---- */
struct cfs_check_progress {
	uint64_t inodes, directories; /* checked so far */
	uint32_t groups, groups_total; /* group headers checked (after the tree) */
	uint64_t problems;
	/* suspicions another node's changes kept from being confirmed or cleared (a group it
	 * took back before its header could be read here) */
	uint64_t unconfirmed;
};
struct cfs_check_opts {
	uint64_t rate;            /* inodes a second at most; 0: no limit */
	const volatile int *stop; /* set: stop after the inode in hand (-ECANCELED) */
	cfs_print_fn problem;     /* a line per problem (each is logged too) */
	void (*progress)(void *arg, const struct cfs_check_progress *p);
	void *arg;
};
/* Check the mounted filesystem read-only while it is in use, one object per operation under
 * the locks a reader takes.  0 when the walk is done (p->problems says what it found). */
int cfs_check_mounted(struct cfs_fs *fs, const struct cfs_check_opts *o,
		      struct cfs_check_progress *p);

/* ---- mounting ---- */
#define CFS_SLOT_ANY UINT32_MAX
struct cfs_mount_opts {
	uint32_t slot;       /* CFS_SLOT_ANY: the first free one (cluster), 0 (local) */
	bool ro;
	bool dboptimized;
	const char *cluster; /* lock backend; NULL: the one recorded at mkfs */
	/* cluster: an absolute path run to fence a dead node before its journal is replayed,
	 * instead of waiting the fence interval (cfs(8), "Fencing"); NULL: none */
	const char *fence_program;
	/* cluster: most lock grants kept cached once unused (0: CFS_LOCK_CACHE_DEFAULT); past
	 * it the oldest go back to the lock manager, whose tables every member keeps */
	uint32_t lock_cache;
	/* cluster with quotas: seconds between folds of this node's charges into the ids'
	 * records, which is how far what other nodes show lags (0: CFS_QUOTA_FOLD_DEFAULT,
	 * CFS_QUOTA_FOLD_NEVER: only when an exact figure or a refusal needs it) */
	uint32_t quota_fold;
	/* Called once the lock manager is up, before anything past the superblock is read: a
	 * cluster node joins a restripe another node runs (cfsd/restripe_cluster.c).  An error
	 * fails the mount. */
	int (*locks_ready)(void *arg, struct cfs_fs *fs);
	/* And once its I/O is over, before the lock manager goes (also when the mount fails). */
	void (*locks_closing)(void *arg, struct cfs_fs *fs);
	/* Around this node's replay of dead node's journal (before: it is fenced, this node
	 * alone recovers it; after: the replay is done, its locks not yet given back). */
	void (*recovering)(void *arg, struct cfs_fs *fs, uint32_t node, bool before);
	void *locks_arg;
	/* Where it is being mounted (absolute; NULL: not through FUSE): a mount of the volume
	 * there already is waited for, as an unmount finishing (generic/604). */
	const char *mountpoint;
	/* cluster, not dboptimized: buffered writes are kept in memory under the inode's glock
	 * EX, at most this many MiB, and written at the next commit (0: written through) */
	uint32_t writebehind_mib;
};
#define CFS_WRITEBEHIND_DEFAULT_MIB 64
#define CFS_WRITEBEHIND_MAX_MIB 65536
#define CFS_LOCK_CACHE_DEFAULT 50000
#define CFS_LOCK_CACHE_MIN 16
#define CFS_QUOTA_FOLD_DEFAULT 10
#define CFS_QUOTA_FOLD_MAX 3600
#define CFS_QUOTA_FOLD_NEVER UINT32_MAX
/* Is name a lock protocol: local, corosync or dlm? */
bool cfs_lockproto_valid(const char *name);
/* Record another lock protocol; refused unless every slot's journal is empty (the filesystem
 * is unmounted everywhere and no node died with it mounted). */
int cfs_set_lockproto(struct cvm_volume *vol, const char *proto);
int cfs_get_lockproto(struct cvm_volume *vol, char *out, size_t len);
int cfs_mount(struct cvm_volume *vol, const struct cfs_mount_opts *o, struct cfs_fs **out);
/* Commit, free the orphans nobody holds, release everything.  The volume stays open. */
int cfs_unmount(struct cfs_fs *fs);
/* What the kernel caches of a cluster mount, to forget when this node gives up the right to
 * cache it.  Called with the filesystem's lock held, before the lock goes to another node;
 * ino as the kernel knows it.  Any of them may be NULL. */
struct cfs_kernel_caches {
	/* A regular file's pages: only queue the work (dropping pages waits for page locks
	 * that a request blocked on this lock may hold). */
	void (*pages)(void *arg, uint64_t ino);
	/* An inode's attributes and ACLs, every inode the kernel knows: done before the call
	 * returns. */
	void (*attrs)(void *arg, uint64_t ino);
	/* Names: called once for a let-go that covers a directory the kernel may hold names
	 * of (and for the metadata glock's); done before the call returns. */
	void (*names)(void *arg);
	void *arg;
};
void cfs_set_kernel_caches(struct cfs_fs *fs, const struct cfs_kernel_caches *k);
/* On a cluster, another node grew the filesystem: open the volume again (its config now
 * names the new space) and give the handle in *vol; the filesystem uses it from then on.
 * The caller closes every handle it gave after cfs_unmount.  Called with the filesystem's
 * lock held: open, nothing more. */
typedef int (*cfs_reopen_fn)(void *arg, struct cvm_volume **vol);
void cfs_set_reopen(struct cfs_fs *fs, cfs_reopen_fn fn, void *arg);
/* May the kernel keep the pages it cached of this file at this open?  (No other node can
 * have changed it since the last open here.)  Call after cfs_open, at every open without
 * O_DIRECT: it also records that the kernel may now cache pages of the file. */
bool cfs_keep_cache(struct cfs_fs *fs, uint64_t ino);
/* Has the file been opened without O_DIRECT since the kernel last forgot it?  If not, a
 * direct write leaves no page of it in the kernel to drop. */
bool cfs_kernel_may_cache(struct cfs_fs *fs, uint64_t ino);
/* Take in the space a grown volume added. */
int cfs_grow(struct cfs_fs *fs, struct cvm_volume *grown, uint64_t *added_blocks);
/* On a cluster: take in another node's grow now, if this node has not yet (it does at its
 * next use of the metadata glock; an idle node may not for a long time). */
int cfs_growth_catch_up(struct cfs_fs *fs);

/* Stop the filesystem's I/O on its volume (hold) and let it go on again: nothing of it is in
 * flight while a restripe running on this node switches how the volume maps. */
void cfs_volume_hold(struct cfs_fs *fs, bool hold);
/* Add count node slots (journals) while mounted; *nslots: how many there are now (also
 * after a failure part way, which cfs_last_error describes). */
int cfs_add_slots(struct cfs_fs *fs, uint32_t count, uint32_t *nslots);

struct cfs_stats {
	uint64_t commits, commit_blocks, anchors, reads, writes, read_bytes, write_bytes, direct_writes;
	uint64_t home_blocks; /* committed blocks written in place by checkpoints */
	uint64_t flushes;     /* of the LUNs' caches (the volume's, cvm_volume_flushes) */
	/* write-behind: writes kept, bytes of whole blocks written out since, kept now */
	uint64_t behind_writes, behind_flushed, behind_kept;
	uint64_t inodes_read_ahead; /* inode blocks cached from the read of another's */
};
#define CFS_STATUS_MAX_NODES 64
struct cfs_status {
	uint64_t total_blocks, free_blocks, block_size;
	uint32_t nags, slot, nslots;
	char lockproto[16];
	uint32_t node_id;                /* this node's cluster id (0 with local locks) */
	uint64_t lock_messages;          /* lock messages this mount sent to other nodes */
	uint64_t lock_waits, lock_wait_ms; /* waits for glock grants (one for a batch asked together) */
	uint64_t locks_cached, locks_given_back; /* grants kept now (inode glocks too); given back past the limit */
	uint32_t lock_cache_limit;
	uint32_t writebehind_mib; /* written data it may keep behind (0: writes go through) */
	uint32_t nmounted;               /* nodes that have it mounted, by slot */
	uint32_t mounted_slot[CFS_STATUS_MAX_NODES], mounted_node[CFS_STATUS_MAX_NODES];
	uint32_t nrecovering; /* dead nodes not recovered yet, by slot */
	uint32_t recovering_slot[CFS_STATUS_MAX_NODES], recovering_node[CFS_STATUS_MAX_NODES];
	bool fenced;                /* this node lost quorum: every call fails with EIO */
	uint32_t fence_interval_ms; /* survivors wait this long after a death before a replay */
	uint32_t lease_ms, evict_ms; /* the membership lease; a silent member evicted after */
	uint32_t beat_gap_max_ms;    /* the longest wait for one of its beats (cfslock.h) */
	bool evicted;                /* fenced since the cluster removed it while it stalled */
	char label[64];
	char fs_uuid[37];
	char features[256]; /* as cfs_info's feature_list */
	struct cfs_stats stats;
};
void cfs_status(struct cfs_fs *fs, struct cfs_status *st);

/* ---- operations (inode numbers: CFS_ROOT is the root) ---- */
#define CFS_ROOT 1u
struct cfs_cred {
	uint32_t uid, gid;
	uint32_t umask; /* the caller's, applied to a new file's mode unless its directory has a
			 * default ACL (POSIX.1e); 0 if the kernel applied it already */
	/* For the set-user-ID and set-group-ID rules of the calls that change a file: whether
	 * the caller has CAP_FSETID and whether gid is one of its groups.  Asked only about files
	 * with those bits, so a daemon can look the answers up then.  NULL: uid 0 has the
	 * capability, and gid is the caller's group only if it is cr->gid. */
	unsigned (*privileges)(const struct cfs_cred *cr, uint32_t gid);
	void *ctx; /* the privileges function's */
	/* The calling thread (0: unknown), looked at only to tell whether the rest of a write
	 * it began is still on its way (CFS_W_MORE). */
	uint32_t tid;
};
#define CFS_CRED_FSETID 1u
#define CFS_CRED_IN_GROUP 2u
int cfs_getattr(struct cfs_fs *fs, uint64_t ino, struct stat *st);
/* May cr access ino for mask (R_OK, W_OK, X_OK or'ed), by its mode and POSIX ACL?  0 or
 * -EACCES.  For callers the kernel does not check (ODM clients); cr->privileges tells the
 * caller's other groups. */
int cfs_access(struct cfs_fs *fs, uint64_t ino, int mask, const struct cfs_cred *cr);
/* lookup and the calls that make an object count a reference, dropped with cfs_forget. */
int cfs_lookup(struct cfs_fs *fs, uint64_t parent, const char *name, struct stat *st);
/* How long (ms) the kernel may keep a name that a call begun at since_ns (CLOCK_MONOTONIC)
 * looked up or made in directory parent, on a cluster: 0 if this node gave the directory up
 * since, or in the second before, or another node asks for it (on one node 0: the kernel
 * keeps names for good there). */
unsigned cfs_name_lease(struct cfs_fs *fs, uint64_t parent, uint64_t since_ns);
void cfs_forget(struct cfs_fs *fs, uint64_t ino, uint64_t n);
/* The generation of an inode the kernel holds a reference on (FUSE's entry generation). */
uint64_t cfs_generation(struct cfs_fs *fs, uint64_t ino);
/* Inode numbers in this API are handles: on a cluster mount the block number carries a tag of
 * the inode's generation in its top bits, so an inode another node freed and made anew in the
 * same block has another number.  This is the block number, what stat(2) shows. */
uint64_t cfs_handle_ino(uint64_t handle);
int cfs_mknod(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
	      const struct cfs_cred *cr, struct stat *st);
int cfs_mkdir(struct cfs_fs *fs, uint64_t parent, const char *name, mode_t mode,
	      const struct cfs_cred *cr, struct stat *st);
int cfs_symlink(struct cfs_fs *fs, uint64_t parent, const char *name, const char *target,
		const struct cfs_cred *cr, struct stat *st);
int cfs_readlink(struct cfs_fs *fs, uint64_t ino, char *buf, size_t size);
int cfs_link(struct cfs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
	     struct stat *st);
int cfs_unlink(struct cfs_fs *fs, uint64_t parent, const char *name);
int cfs_rmdir(struct cfs_fs *fs, uint64_t parent, const char *name);
#define CFS_RENAME_NOREPLACE 1u
#define CFS_RENAME_EXCHANGE 2u
#define CFS_RENAME_WHITEOUT 4u /* leave a whiteout (char device 0:0 owned by cr) at name */
int cfs_rename(struct cfs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags, const struct cfs_cred *cr);
#define CFS_SET_MODE 1u
#define CFS_SET_UID 2u
#define CFS_SET_GID 4u
#define CFS_SET_SIZE 8u
#define CFS_SET_ATIME 16u
#define CFS_SET_MTIME 32u
#define CFS_SET_CTIME 64u
/* With exactly CFS_SET_MTIME | CFS_SET_CTIME: the times a write-back cache kept of writes
 * it sent since (CFS_W_CACHED), taken as those writes were. */
#define CFS_SET_CACHED_TIMES 128u
/* The atime and mtime set are the time of the call (utime(NULL), UTIME_NOW), which an
 * append-only file takes (fs/attr.c notify_change: not a time of the caller's choosing). */
#define CFS_SET_TIMES_NOW 256u
/* cr NULL, here and below: the filesystem itself asks, set-ID bits stay. */
int cfs_setattr(struct cfs_fs *fs, uint64_t ino, const struct stat *attr, unsigned to_set,
		const struct cfs_cred *cr, struct stat *out);
/* chattr(1) flags, as Linux's FS_*_FL: immutable, append-only, nodump, noatime.  Setting
 * others: -EOPNOTSUPP; by neither the owner nor root, or immutable or append-only by anyone
 * but root: -EPERM.  cr NULL: the filesystem itself. */
int cfs_get_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t *flags);
int cfs_set_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t flags, const struct cfs_cred *cr);
/* The same with the project id (FS_IOC_FSGETXATTR, FSSETXATTR: chattr -p, xfs_io chproj):
 * FS_PROJINHERIT_FL, kept on directories, and a project id need the feature 'project'
 * (-EOPNOTSUPP without it); only root changes a project id (-EPERM). */
int cfs_get_fsattr(struct cfs_fs *fs, uint64_t ino, uint32_t *flags, uint32_t *projid);
int cfs_set_fsattr(struct cfs_fs *fs, uint64_t ino, uint32_t flags, uint32_t projid,
		   const struct cfs_cred *cr);
/* Quotas (the feature 'quota'): usage and limits per user, group and project id.  Sizes in
 * bytes; a limit of 0 is none; grace: seconds a soft limit may be passed; *_over_since: when
 * it was (seconds since the epoch), 0 while under it. */
enum { CFS_QUOTA_USER, CFS_QUOTA_GROUP, CFS_QUOTA_PROJECT, CFS_QUOTA_TYPES };
struct cfs_quota_rec {
	unsigned type;
	uint32_t id;
	uint64_t used_bytes, used_inodes;
	uint64_t soft_bytes, hard_bytes, soft_inodes, hard_inodes, grace;
	int64_t bytes_over_since, inodes_over_since;
};
const char *cfs_quota_type_name(unsigned type);
int cfs_quota_get(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_quota_rec *out);
/* The limits of want that set names; refused (cfs_last_error says why) if a soft limit would
 * be above its hard one or a hard limit below what is used. */
#define CFS_QUOTA_SET_SOFT_BYTES 1u
#define CFS_QUOTA_SET_HARD_BYTES 2u
#define CFS_QUOTA_SET_SOFT_INODES 4u
#define CFS_QUOTA_SET_HARD_INODES 8u
#define CFS_QUOTA_SET_GRACE 16u
int cfs_quota_set(struct cfs_fs *fs, const struct cfs_quota_rec *want, unsigned set);
/* Every id of type with a use or a limit, in id order (free *out).  wait false: -EAGAIN at
 * once where the records cannot be read now (another node holds the metadata glock EX, or
 * is being recovered: cfs status must answer all the same). */
int cfs_quota_report(struct cfs_fs *fs, unsigned type, bool wait, struct cfs_quota_rec **out,
		     size_t *n);
/* Has one of the ids ino is charged to less than bytes left of a block limit, soft or hard?
 * (cfsd opens such a file past the kernel's write-back cache, whose writes would otherwise
 * find the limit only at write-back.) */
bool cfs_quota_near(struct cfs_fs *fs, uint64_t ino, uint64_t bytes);
/* flags: open(2)'s; -EPERM if the inode flags forbid them (writes to an immutable file). */
int cfs_open(struct cfs_fs *fs, uint64_t ino, int flags);
int cfs_release(struct cfs_fs *fs, uint64_t ino);
/* flock(2) on a cluster mount, for the open file description owner (flock.c).  Returns 1 if
 * it is done at once, 0 if done(arg, status) will say how it ended (status 0, -EAGAIN for
 * LOCK_NB when it is held elsewhere, -EINTR once interrupted), or -errno (-EOPNOTSUPP on a
 * one-node mount, whose flocks the kernel keeps). */
typedef void (*cfs_flock_done_fn)(void *arg, int status);
int cfs_flock(struct cfs_fs *fs, uint64_t ino, uint64_t owner, int op, cfs_flock_done_fn done,
	      void *arg);
/* Give up the waiting request whose done argument is arg: it ends with -EINTR (or granted). */
void cfs_flock_interrupt(struct cfs_fs *fs, void *arg);
/* The open file description owner is closed: its flock goes. */
int cfs_flock_close(struct cfs_fs *fs, uint64_t owner);

/* ETXTBSY across the nodes of a cluster mount (text_busy.c), after cfs_open: -ETXTBSY if
 * the open runs a program (flags with the kernel's __FMODE_EXEC) that is open for writing
 * on another node, or writes an executable file that another node runs; 1 if the open
 * counts (cfs_text_release with the same flags at its release), 0 if not. */
int cfs_text_open(struct cfs_fs *fs, uint64_t ino, int flags);
/* The same for the open that made the file (O_CREAT, O_TMPFILE): counted, and guarded only
 * once another node could run it (the file's glock let go here). */
int cfs_text_made(struct cfs_fs *fs, uint64_t ino);
void cfs_text_release(struct cfs_fs *fs, uint64_t ino, int flags);
/* Before a truncate (also an open's O_TRUNC): -ETXTBSY if another node runs the program. */
int cfs_text_truncate(struct cfs_fs *fs, uint64_t ino);

/* fcntl(2) record locks on a cluster mount (plock.c), for the kernel's lock owner owner; fl
 * as FUSE gives it (l_whence SEEK_SET, l_len 0: to the end).  cfs_plock_set: 0 if done(arg,
 * status) will say how it ended (0, -EAGAIN, -EINTR), or -errno (-EOPNOTSUPP on a one-node
 * mount, whose record locks the kernel keeps). */
struct flock;
int cfs_plock_set(struct cfs_fs *fs, uint64_t ino, uint64_t owner, uint64_t open_id,
		  const struct flock *fl, bool wait, cfs_flock_done_fn done, void *arg);
void cfs_plock_interrupt(struct cfs_fs *fs, void *arg);
/* F_GETLK: *fl becomes the first lock in its way (l_pid 0 if its holder is on another node),
 * or its l_type F_UNLCK. */
int cfs_plock_get(struct cfs_fs *fs, uint64_t ino, uint64_t owner, struct flock *fl);
/* The open file description open_id (the caller's number for it, given to cfs_plock_set)
 * is released: the locks of the owners that locked through it go (its OFD locks). */
void cfs_plock_release(struct cfs_fs *fs, uint64_t open_id);
/* The lock owner closed the file here: 1 if it held nothing (done is not called), 0 if done
 * will say, or -errno. */
int cfs_plock_close(struct cfs_fs *fs, uint64_t ino, uint64_t owner, cfs_flock_done_fn done,
		    void *arg);
/* Drop open and lookup references at once. */
int cfs_put(struct cfs_fs *fs, uint64_t ino, uint32_t opens, uint64_t lookups);
/* Returns bytes read (short at end of file). */
int64_t cfs_read(struct cfs_fs *fs, uint64_t ino, void *buf, uint64_t size, uint64_t off);
#define CFS_W_SYNC 1u   /* O_SYNC: data and metadata durable on return; times alone within
			 * the commit interval (as with lazytime) */
#define CFS_W_DIRECT 2u /* O_DIRECT: the allocation and size it changed committed on return */
#define CFS_W_DSYNC 4u  /* O_DSYNC: data, allocation and size durable on return */
/* Pages a write-back cache sends: their write(2) was allowed when it was made, so inode
 * flags set since (chattr +a or +i) do not refuse them, and no set-ID bits go (cr NULL). */
#define CFS_W_CACHED 8u
/* The caller expects the rest of this write(2) in its next write (FUSE sends a buffered write
 * that starts inside a page the kernel does not have as that page, then the rest): on a
 * cluster the inode's glock stays here a few milliseconds for it, so that another node's
 * write cannot land between the two. */
#define CFS_W_MORE 16u
/* Never kept behind (writebehind.c): the data is on the LUNs when the call returns, though
 * the map change that makes it readable waits for the next commit. */
#define CFS_W_THROUGH 32u
int64_t cfs_write(struct cfs_fs *fs, uint64_t ino, const void *buf, uint64_t size,
		  uint64_t off, unsigned flags, const struct cfs_cred *cr);
/* O_APPEND: cfs_write at the end of the file as it is when the write takes the inode (EX on a
 * cluster), said in *at; two appends, on this node or two, never land on one end. */
int64_t cfs_append(struct cfs_fs *fs, uint64_t ino, const void *buf, uint64_t size,
		   unsigned flags, const struct cfs_cred *cr, uint64_t *at);
int cfs_fallocate(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len,
		  const struct cfs_cred *cr);
int cfs_fsync(struct cfs_fs *fs, uint64_t ino);
/* The error of a write kept behind (mount option writebehind) that failed since the last
 * fsync or call of this, else 0: for a close, as the kernel reports one there. */
int cfs_write_error(struct cfs_fs *fs, uint64_t ino);
/* fdatasync(2): the file's data and what reading it needs (size, allocation) durable; the
 * times of overwrites wait for the next commit, as cfs_write's lazytime rule says. */
int cfs_fdatasync(struct cfs_fs *fs, uint64_t ino);
/* lseek SEEK_DATA (hole false) or SEEK_HOLE: the offset, or -ENXIO at or past the end (and
 * for SEEK_DATA with no data after off).  Unwritten (fallocated) space is a hole. */
int64_t cfs_seek_data(struct cfs_fs *fs, uint64_t ino, uint64_t off, bool hole);
int cfs_statfs(struct cfs_fs *fs, struct statvfs *st);
/* statfs(2) of a path in the filesystem, inode ino: in a directory that passes on a project
 * with limits (quotas), that project's limits and what is left of them, as XFS and ext4 say. */
int cfs_statfs_at(struct cfs_fs *fs, uint64_t ino, struct statvfs *st);
int cfs_setxattr(struct cfs_fs *fs, uint64_t ino, const char *name, const void *value,
		 size_t size, int flags, const struct cfs_cred *cr);
/* size 0: the size needed; else bytes copied or -ERANGE. */
int cfs_getxattr(struct cfs_fs *fs, uint64_t ino, const char *name, void *value, size_t size);
int cfs_listxattr(struct cfs_fs *fs, uint64_t ino, char *list, size_t size);
int cfs_removexattr(struct cfs_fs *fs, uint64_t ino, const char *name);

struct cfs_dirent {
	uint64_t ino;
	uint8_t type; /* DT_* */
	char name[256];
};
/* Every entry of a directory ("." and ".." first), as of now: a stable list for readdir. */
int cfs_readdir_all(struct cfs_fs *fs, uint64_t ino, struct cfs_dirent **out, size_t *n);
/* Commit the running transaction now. */
int cfs_sync(struct cfs_fs *fs);
/* remount,ro: commit, empty the journal, refuse changes with EROFS from now on; remount,rw:
 * take them again (nothing to replay).  -EROFS for rw on a filesystem mounted read-only or
 * made read-only by an I/O error: only a new mount clears those. */
int cfs_set_read_only(struct cfs_fs *fs, bool ro);

/* ---- the lock table, named for people (locks.c) ---- */
struct cfs_lock_info {
	const char *resource; /* the lock manager's name */
	char object[96];      /* what it protects */
	uint64_t ino;         /* the inode it is about (its number in stat), 0 if none */
	const char *path;     /* where that inode is, NULL if not found */
	uint32_t node;        /* the cluster node holding or asking */
	uint64_t owner;       /* the lock manager's owner: node << 32 | process incarnation */
	int granted, requested; /* CFSLOCK_* modes, -1 none */
	char state[16];       /* granted, converting, waiting */
	bool recovering;      /* its node failed and is not recovered yet */
};
typedef void (*cfs_lock_visit_fn)(void *arg, const struct cfs_lock_info *l);
/* Every lock of the filesystem's lockspace as this node's lock manager sees it (every node's,
 * on a cluster), with paths found by walking the tree from the root (its first 100,000
 * entries at most). */
int cfs_locks(struct cfs_fs *fs, cfs_lock_visit_fn fn, void *arg);

/* ---- direct I/O whose LUN part the caller submits (cfsd's io_uring data threads) ---- */
#define CFS_DIRECT_IO_PIECES 8
struct cfs_lun_io {
	uint32_t lun;
	int fd;                   /* its O_DIRECT descriptor */
	uint64_t offset, len;     /* bytes on it */
	uint64_t buf_offset;      /* where they go in, or come from, the caller's buffer */
};
struct cfs_inode;
/* The membership lease as libodm's processes see it: a page cfsd shares with them (control
 * op ODM_LEASE), written by the lock manager's thread and by the fence. */
struct cfs_lease_page {
	uint64_t until;  /* fresh while CLOCK_BOOTTIME is before it; UINT64_MAX: no lease */
	uint32_t fenced; /* the node fenced itself: no write may go, ever */
	uint32_t unused;
};
/* A read-only descriptor of the page for one client (the caller closes it), or -ENOENT on a
 * mount without a cluster. */
int cfs_lease_fd(struct cfs_fs *fs);

struct cfs_direct_io {
	struct cfs_fs *fs;
	struct cfs_inode *ip;
	bool write;
	bool flush;     /* an O_SYNC or O_DSYNC write: each piece's LUN flushed before the answer */
	uint64_t bytes; /* what the answer carries: a read stops at the end of the file */
	unsigned n;
	struct cfs_lun_io io[CFS_DIRECT_IO_PIECES];
	unsigned nranges; /* the volume ranges counted in by a restripe's gate until the end */
	struct cfs_vol_range { uint64_t at, len; } range[CFS_DIRECT_IO_PIECES];
	bool volume_let_go; /* by an end that found fs->lock busy */
};
/* An open file's direct read or write of [off, off+size), buf and both aligned to
 * CVM_IO_ALIGN, mapped to LUN pieces for the caller to submit (a read's holes zeroed in buf;
 * n may be 0); the locks it takes are held until cfs_direct_io_end.  A write's flags
 * (CFS_W_SYNC, CFS_W_DSYNC) may ask for d->flush.  -EAGAIN when it must go through cfs_read
 * or cfs_write instead: anything to allocate, convert, grow, commit or check there (set-ID
 * bits, an O_SYNC write on a cluster, ...).  may_wait false: the caller has LUN I/O of its own
 * in flight and must not wait for a lock (on a cluster: -EAGAIN, the glocks may wait). */
/* Just before the caller submits the pieces: 0, or the -errno the I/O fails with (a write
 * of a node whose membership lease is out and does not come back, see cfs/fence.c). */
int cfs_direct_io_may_submit(const struct cfs_direct_io *d);
int cfs_direct_io_begin(struct cfs_fs *fs, uint64_t ino, bool write, unsigned flags, void *buf,
			uint64_t size, uint64_t off, bool may_wait, struct cfs_direct_io *d);
/* Once every piece is done (and flushed, if asked), result 0 or the first piece's error,
 * moved the bytes the pieces moved: *answer, the answer's bytes or -errno (-EIO if the pieces
 * moved less than they were given: a LUN file that ends early).  may_wait false: the caller
 * has other direct I/O in flight, whose ends must not wait while it waits for fs->lock (a
 * grow holds it while it waits for them to let the volume go); then on a cluster, with
 * fs->lock busy, only the volume is let go and it returns false: the caller calls it again
 * later, with the same arguments, and answers then (the kernel keeps the file open till). */
bool cfs_direct_io_end(struct cfs_direct_io *d, int result, uint64_t moved, bool may_wait,
		       int64_t *answer);
/* d's pieces moved by the caller's thread: each read into or written from buf, and for a
 * d->flush write its LUN flushed after; 0 or the first -errno, the bytes moved in *moved. */
int cfs_direct_io_now(const struct cfs_direct_io *d, void *buf, uint64_t *moved);
/* A piece of d the caller submitted failed with err (or moved less: -EIO): logged and
 * counted against its LUN (cvm_volume_io_failed). */
void cfs_direct_io_failed(const struct cfs_direct_io *d, unsigned piece, int err);

/* ---- kernel bypass (ODM clients write straight to the LUNs) ---- */
/* A regular file without a name (O_TMPFILE): open once (cfs_release frees it) and on the
 * orphan list, so a crash frees it at the next mount, until cfs_link names it. */
int cfs_tmpfile(struct cfs_fs *fs, uint64_t parent, mode_t mode, const struct cfs_cred *cr,
		struct stat *st);
struct cfs_bypass_extent {
	uint64_t file_off, vol_off, len; /* bytes */
};
struct cfs_bypass_map {
	uint64_t size, generation;
	struct cfs_bypass_extent *ext; /* covering [0, size) in file order; free() it */
	size_t n;
};
/* Of an open regular file: every block below its size made allocated and written (zeros over
 * holes and unwritten ranges), committed, and mapped to volume offsets. */
int cfs_bypass_map(struct cfs_fs *fs, uint64_t ino, struct cfs_bypass_map *map);
/* Set an open file's size: shrinking frees the blocks past it, growing preallocates. */
int cfs_bypass_resize(struct cfs_fs *fs, uint64_t ino, uint64_t size);

#endif
