/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals of libcfs shared between its source files and its unit tests; not installed. */
#ifndef CFS_INTERNAL_H
#define CFS_INTERNAL_H

#include "cfs/cfs.h"
#include "cfs/format.h"
#include "dlm-client/cfslock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define CFS_BCACHE_BUCKETS 65536u
#define CFS_ICACHE_BUCKETS 16384u
#define CFS_BCACHE_CLEAN_MAX 16384u /* clean metadata blocks kept in memory */
#define CFS_AIO_POOL 16u             /* idle libaio contexts kept for data I/O */

/* ---- metadata blocks (block.c) ---- */
struct cfs_buf {
	uint64_t blkno;
	uint8_t *data;
	bool dirty;                /* in the running transaction */
	bool pinned;               /* preloaded: not on the LRU */
	bool unhome;               /* committed, not yet written in place: not on the LRU */
	bool checked;              /* its fields verified since it was read (verify.c) */
	uint64_t read_in;          /* the stretch of fresh reads it was read in (block.c) */
	uint32_t unhome_at;        /* its index in fs->unhome */
	struct cfs_buf *hnext;     /* hash chain */
	struct cfs_buf *prev, *next; /* clean LRU */
};

void cfs_block_seal(void *block, uint32_t bs);
/* verify.c: what each structure's fields may hold (0, or -EIO and *why). */
int cfs_inode_verify(const struct cfs_dsuper *sb, const struct cfs_dinode *d, const char **why);
int cfs_extents_verify(const struct cfs_dsuper *sb, const struct cfs_dextent *e, uint32_t n,
		       const char **why);
/* fsck: set the fields of an inode that cfs_inode_verify refuses to what they can be (the
 * type, if known, S_IFMT bits, from its directory entry; a directory's parent): 0 if it passes
 * now (*what: the last field set), -EIO if not (its extents or directory geometry). */
int cfs_inode_mend(const struct cfs_dsuper *sb, uint8_t *block, uint32_t type, uint64_t parent,
		   const char **what);
int cfs_xattrs_verify(const uint8_t *p, uint32_t used); /* an entry list, used bytes long */
/* A group header's geometry; with bitmap, its free count against its bitmap too (once per
 * read from the LUNs is enough: this node's allocator keeps them together). */
int cfs_agh_verify(const struct cfs_dsuper *sb, const uint8_t *block, uint32_t ag, bool bitmap,
		   const char **why);
/* A file type (mode & S_IFMT) a CFS inode may have. */
bool cfs_ftype_valid(uint32_t mode);
/* 0, or -EIO with *why saying what is wrong. */
int cfs_block_verify(const void *block, uint32_t bs, uint64_t blkno, uint16_t type,
		     uint64_t owner, const char **why);
void cfs_block_init(void *block, uint32_t bs, uint64_t blkno, uint16_t type, uint64_t owner);

int cfs_bcache_init(struct cfs_fs *fs);
void cfs_bcache_destroy(struct cfs_fs *fs);
/* Read and verify a metadata block (owner 0: any).  -EIO (logged, naming the block) when it
 * is damaged.  The buffer stays valid until the filesystem lock is released. */
int cfs_bread(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
	      struct cfs_buf **out);
/* The block may have been freed and reused by another node since we last knew it: another
 * kind of block there is -ESTALE, not damage. */
#define CFS_BREAD_MAY_BE_REUSED 1u
/* Read without the lock of the block: another node may be writing it in place, so a block
 * that fails its checksum is read again a few times before it counts as damaged. */
#define CFS_BREAD_RACY 2u
int cfs_bread_flags(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
		    unsigned flags, struct cfs_buf **out);
/* This thread's reads (on: the check of a mounted filesystem, check.c) read a clean cached
 * block again from the LUNs; what cfs_log says meanwhile is kept in said (len bytes). */
void cfs_bcache_fresh(bool on, char *said, size_t len);
/* The header of block blkno as this node knows it (a copy newer here than on the LUNs, else
 * read from them): 0 if the block is sound metadata, -ENODATA if it is not (data, or
 * damaged), -EIO if it could not be read.  Nothing is cached. */
int cfs_bpeek(struct cfs_fs *fs, uint64_t blkno, struct cfs_bhdr *hdr);
/* A fresh zeroed block with its header, already in the transaction. */
int cfs_bnew(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
	     struct cfs_buf **out);
/* The block changed: it goes into the running transaction. */
void cfs_bdirty(struct cfs_fs *fs, struct cfs_buf *b);
/* Forget a cached block (freed), dirty or not. */
void cfs_bforget(struct cfs_fs *fs, uint64_t blkno);
/* A block whose committed image a checkpoint wrote in place leaves the checkpoint's list,
 * unless a transaction changed it since (its new image goes at the next one). */
void cfs_bcache_homed_block(struct cfs_fs *fs, uint64_t blkno);
/* The same for every block of n extents (one walk of the cache for many blocks). */
void cfs_bforget_extents(struct cfs_fs *fs, const struct cfs_dextent *e, uint32_t n);
/* Drop every clean block (the glock is going; nothing is dirty after the commit). */
void cfs_bcache_drop(struct cfs_fs *fs);
/* Drop one block if it is cached and clean (its glock went, or came: read it again). */
void cfs_bcache_drop_block(struct cfs_fs *fs, uint64_t blkno);
/* Drop the clean blocks of the inodes in [first, first + count) (their glock is going). */
void cfs_bcache_drop_owned(struct cfs_fs *fs, uint64_t first, uint64_t count);
/* The same (their glock came), and the clean blocks of every inode whose glock is not
 * granted here. */
void cfs_bcache_drop_ungranted(struct cfs_fs *fs, uint64_t first, uint64_t count);
/* Drop clean blocks beyond the cache's size. */
void cfs_bcache_trim(struct cfs_fs *fs);
/* The running transaction is in the log: its blocks are clean, and stay in the cache until a
 * checkpoint writes them in place (cfs_bcache_homed). */
void cfs_bcache_committed(struct cfs_fs *fs);
/* A checkpoint wrote every committed block in place: they may leave the cache again. */
void cfs_bcache_homed(struct cfs_fs *fs);
/* Put a block's content in the cache as if read (fsck -n: the journal's unreplayed blocks). */
int cfs_bcache_preload(struct cfs_fs *fs, uint64_t blkno, const void *data);

/* ---- journal (journal.c) ---- */
struct cfs_txn {
	struct cfs_buf **bufs;
	uint32_t n, cap;
	uint32_t limit; /* most blocks a transaction may hold */
};
/* A commit whose log write and flush are under way outside fs->lock (journal.c). */
struct cfs_jhome;
struct cfs_jflight {
	bool active; /* in flight, or done and not yet reaped */
	bool done;   /* atomic: its I/O is over */
	int rc;
	uint64_t seq;
	size_t nfrees; /* the first of pending_free: its frees, reusable once it is on disk */
	struct cfs_jhome *home; /* a checkpoint after it, or NULL (journal.c) */
};
/* What a slot's log holds from its anchor on: the last image of each block it changed. */
struct cfs_jlog {
	uint32_t ntxn, count;       /* transactions; blocks (targets, images of count * bs) */
	uint64_t first_seq, last_seq; /* of those transactions, if any */
	uint64_t next_seq;          /* the sequence the slot's next transaction takes */
	uint64_t first_ns, last_ns; /* journal format 3: when the first and last were committed */
	uint32_t node;              /* journal format 3: by which node (the last's) */
	uint64_t *targets;
	uint8_t *images;
};
/* Read a slot's log; -EIO if the volume cannot be read, -EPROTONOSUPPORT (error set) if the
 * log holds transactions in a journal format this release does not know. */
int cfs_journal_read(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		     struct cfs_jlog *log);
void cfs_jlog_free(struct cfs_jlog *log);
/* ", committed by node N from T1 to T2" for a log in journal format 3, else "": in buf. */
const char *cfs_jlog_when(const struct cfs_jlog *log, char *buf, size_t len);
/* Write a slot's log in place and flush (replay is idempotent); log says what it held, its
 * images already freed. */
int cfs_journal_apply(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      struct cfs_jlog *log);
/* Mount: replay this slot's log, then start a log of this mount's own. */
int cfs_journal_replay(struct cfs_fs *fs);
uint32_t cfs_journal_limit(const struct cfs_dsuper *sb);
/* Put the running transaction in the log (one flush).  Its blocks go in place at the next
 * checkpoint: when the log has no room for another transaction, or cfs_journal_empty. */
int cfs_journal_commit(struct cfs_fs *fs);
/* The same for a caller that holds nothing but fs->lock (fsync, the committer): fs->lock is
 * let go during the I/O, so operations go on meanwhile, and the fsyncs that come then are
 * committed together next.  Returns once everything changed before the call is on disk. */
int cfs_journal_sync(struct cfs_fs *fs);
/* After a commit (no running transaction): every committed block in place on disk and an
 * anchor saying so, so that nothing of this node's log can be replayed over what another node
 * changes next (a let-go, unmount). */
int cfs_journal_empty(struct cfs_fs *fs);
/* Half of it, for a glock going down from EX to PR: every committed block in place, so that
 * other nodes read them current.  The anchor is owed: nobody else may change those blocks
 * while this node holds PR, and a replay would put back only what is there.  It is written
 * before this node's next commit and before it lets any glock go (cfs_journal_settle), or
 * by the committer, which is woken for it, whichever comes first. */
int cfs_journal_home(struct cfs_fs *fs);
/* Write the owed anchor, if one is. */
int cfs_journal_settle(struct cfs_fs *fs);
/* What the journal holds in memory (at unmount). */
void cfs_journal_free(struct cfs_fs *fs);
/* Mark a slot's journal empty with an anchor (mkfs, fsck after repairs, a dead node's after
 * replay: anything written in place without the journal must not be overwritten by an old
 * transaction at the next mount). */
int cfs_journal_clear(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      uint64_t seq);
/* The anchor of a new slot's journal, in a block made by cfs_bnew (log_id 0: a new one). */
void cfs_journal_anchor_init(void *block, uint64_t seq, uint32_t log_id);

/* ---- superblock (super.c) ---- */
int cfs_super_read(struct cvm_volume *vol, struct cfs_dsuper *sb, bool *used_backup);
/* The primary copy as it is on disk, its checksum checked (not its size against vol). */
int cfs_super_read_primary(struct cvm_volume *vol, struct cfs_dsuper *sb);
/* Another node grew the filesystem: take in its superblock and volume (grow.c; fs->lock
 * and the metadata glock held, nobody using the volume). */
int cfs_growth_take_in(struct cfs_fs *fs);
int cfs_super_write(struct cvm_volume *vol, const struct cfs_dsuper *sb);
/* Both superblocks as sb says, in the running transaction (a grow, an added slot). */
int cfs_super_journal(struct cfs_fs *fs, const struct cfs_dsuper *sb);
int cfs_super_check(const struct cfs_dsuper *sb, uint64_t volume_bytes, const char **why);
/* The lock protocol a superblock records, in static storage ("local" for filesystems made
 * before it was recorded), or NULL if it names none we know. */
const char *cfs_super_lockproto(const struct cfs_dsuper *sb);
/* Is the filesystem unmounted everywhere, with every journal empty?  Then it is claimed for
 * this process alone (*claim: the fd to close after, also after a failure; -1 if not
 * claimed).  -EBUSY, error set, if not. */
int cfs_super_offline(struct cvm_volume *vol, const struct cfs_dsuper *sb, int *claim);
/* 0 if name is a lock protocol, else -EINVAL with the error set. */
int cfs_lockproto_check(const char *name);

/* ---- format and features (feature.c) ---- */
/* May this release use the filesystem sb describes (writing: change it, as a read-write
 * mount, fsck's repairs, a grow do)?  0, or -errno with the error set: -EPROTONOSUPPORT for a
 * format or incompat feature it does not know, -EUCLEAN for an interrupted tune, -EROFS for
 * writing with an unknown ro_compat feature.  *read_only: only read-only use is allowed. */
int cfs_features_check(const struct cfs_dsuper *sb, const char *volume, bool writing,
		       bool *read_only);
/* Turn a feature this release knows on or off, with its name entry; -ENOENT if unknown. */
int cfs_feature_set(struct cfs_dsuper *sb, const char *name, bool on);
bool cfs_feature_known(const char *name);
/* The in-progress bit of a tune, naming the feature being turned on. */
void cfs_feature_tuning(struct cfs_dsuper *sb, const char *name, bool on);
/* mkfs: the features of a level (max-compat, default, max-features; NULL: default), then
 * list's changes ("a,^b").  -EINVAL with the error set for a name or level it does not know. */
int cfs_features_choose(struct cfs_dsuper *sb, const char *level, const char *list);
/* The features set, comma-separated, unknown ones as word:bit(unknown name). */
void cfs_features_describe(const struct cfs_dsuper *sb, char *out, size_t len);
static inline bool cfs_journal_v3(const struct cfs_dsuper *sb)
{
	return sb->features[CFS_INCOMPAT] & CFS_FEAT_JOURNAL_V3;
}
uint64_t cfs_ag_first(const struct cfs_dsuper *sb, uint32_t ag);
uint32_t cfs_ag_size(const struct cfs_dsuper *sb, uint32_t ag);

/* ---- allocation groups (alloc.c) ---- */
struct cfs_ag {
	uint64_t start;
	uint32_t nblocks, nfree;
	uint64_t hint_seq; /* fs->grants when its header was last read without its glock */
	/* Blocks taken or freed here, and grants of its glock given up (after which another
	 * node may have changed it): unchanged, nothing in it changed hands (check_leaks.c). */
	uint64_t changes;
	/* When a new inode's search last found all its room in spans other nodes use (inode.c,
	 * past_costly_spans): reservations for new inodes pass it over for a while */
	uint64_t inode_room_costly_ns;
};
int cfs_alloc_load(struct cfs_fs *fs);
/* Up to want contiguous blocks near goal (0: this node's groups), for something new (data,
 * an inode, an xattr block): -ENOSPC once only CFS_META_RESERVE blocks are free. */
int cfs_alloc(struct cfs_fs *fs, uint64_t goal, uint32_t want, uint64_t *pblk, uint32_t *got);
/* cfs_alloc for a file's data from logical block lblk on: a request of CFS_DATA_ALIGN_BYTES
 * or more starts where the volume block and lblk agree modulo that (unless it continues the
 * file at goal), so a database's 8 KiB blocks never straddle a 64 KiB boundary of the volume,
 * nor a stripe's: one LUN I/O each, not two now and then. */
#define CFS_DATA_ALIGN_BYTES 65536u
int cfs_alloc_data(struct cfs_fs *fs, uint64_t goal, uint64_t lblk, uint32_t want,
		   uint64_t *pblk, uint32_t *got);
/* The same, for a block that makes what is allocated already reachable (an extent map or
 * directory block): it may take the reserve.  Without one a full filesystem could allocate
 * data whose map cannot be written: blocks in use that belong to nothing. */
#define CFS_META_RESERVE 256u
int cfs_alloc_meta(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk);
/* A new inode's block near goal: as cfs_alloc, but past the spans of the root and orphan
 * directories while there is room elsewhere. */
int cfs_alloc_inode(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk);
/* Is blk in one of the spans cfs_alloc_inode keeps new inodes out of? */
bool cfs_system_span(const struct cfs_fs *fs, uint64_t blk);
/* Under the metadata glock PR: the block one cfs_alloc_inode near goal would take now,
 * untaken. */
int cfs_alloc_peek(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk);
/* want blocks in a row, all of them or -ENOSPC (an added slot's journal). */
int cfs_alloc_run(struct cfs_fs *fs, uint32_t want, uint64_t *pblk);
int cfs_free(struct cfs_fs *fs, uint64_t pblk, uint32_t len);
/* cfs_free of each of n extents; *freed: how many were. */
int cfs_free_extents(struct cfs_fs *fs, const struct cfs_dextent *e, uint32_t n, uint32_t *freed);
/* May this operation allocate and free anywhere: the metadata glock EX (always on one node)?
 * Under PR it does only in the groups it reserved. */
bool cfs_may_allocate(const struct cfs_fs *fs);
/* Under the metadata glock PR, before changing anything: hold a group (agglock.c) with room
 * for need blocks, near goal; only >= 0: that group or none; new_inode: one is made (a group
 * whose room is all in spans other nodes use comes last).  0: held to the operation's end;
 * -EAGAIN: fs->lock was released to fetch one, look again; -ENOSPC: none to be had, do it
 * under the metadata glock EX. */
int cfs_alloc_reserve(struct cfs_fs *fs, uint64_t goal, uint32_t need, int64_t only,
		      bool new_inode);
/* A new inode's search found the group's room all in spans other nodes use: the next
 * cfs_alloc_reserve for a new inode passes it over, for a while (inode.c). */
#define CFS_INODE_ROOM_COSTLY_NS 1000000000ull
/* Read the free counts of the groups other nodes may have allocated in (statfs; at most once
 * a second). */
void cfs_alloc_refresh(struct cfs_fs *fs);
uint32_t cfs_ag_of(const struct cfs_fs *fs, uint64_t blk);
/* Internal: an operation begun with cfs_op_begin_inode must allocate after all; it changed
 * nothing and is done again under the metadata glock EX.  Never returned by cfs.h. */
#define CFS_ENEEDMETA 4096
/* Internal: fs->lock was released to fetch a group glock; the operation changed nothing and
 * starts over. */
#define CFS_ERETRY 4097
/* Times an operation fetches a group and starts over before it goes under the metadata
 * glock EX instead (another node keeps taking the groups back). */
#define CFS_GROUP_FETCHES 3u
uint64_t cfs_free_blocks(struct cfs_fs *fs);
/* An operation refused for space (rc -ENOSPC) that changed nothing, while blocks that
 * transactions not yet durable freed wait to be handed out (alloc.c's top): commit them,
 * outside any operation, and say whether to try it once more (as ext4 retries an allocation
 * after a journal commit).  Without it a file removed just before could not be reused for a
 * second, and a refused fallocate's own blocks not until the next commit. */
bool cfs_alloc_retry(struct cfs_fs *fs, int rc);
/* More than n blocks free?  Stops counting once there are: cheap unless nearly full. */
bool cfs_free_above(const struct cfs_fs *fs, uint64_t n);
/* Is the block allocated, as of the grant numbered since (a glock over the block the caller
 * holds: cfs_iglock_grant_seq)?  A damaged group header counts as yes. */
bool cfs_block_in_use(struct cfs_fs *fs, uint64_t blk, uint64_t since);
/* The check of a mounted filesystem (check.c): read group ag's header and verify it (its
 * bitmap against its count); -EIO, logged, if it is damaged. */
int cfs_group_check(struct cfs_fs *fs, uint32_t ag);
/* Group ag's bitmap (its header read as cfs_group_check does), valid in the operation. */
int cfs_group_bitmap(struct cfs_fs *fs, uint32_t ag, const uint8_t **bitmap);
/* Are blocks [blk, blk + len) marked in use?  0 yes; -ENOENT no, the first not in *unmarked;
 * -EAGAIN: only a hint says not (another node holds that group: fetch it and ask again). */
int cfs_blocks_marked(struct cfs_fs *fs, uint64_t blk, uint64_t len, uint64_t *unmarked);
/* Format the bitmap of a new group into a buffer (mkfs, grow). */
void cfs_agh_format(uint8_t *block, uint32_t bs, uint32_t index, uint64_t start,
		    uint32_t nblocks, uint32_t used_at_start);
/* Mark n free blocks from blk used in such a formatted group (mkfs's orphan directories). */
void cfs_agh_take(uint8_t *block, uint64_t blk, uint32_t n);
/* Bits of a group's bitmap, or of fsck's of the whole volume (past 2^32 blocks: 64-bit). */
bool cfs_bit_get(const uint8_t *bitmap, uint64_t bit);
void cfs_bit_set(uint8_t *bitmap, uint64_t bit, bool on);
/* Set (on) or clear n bits from bit. */
void cfs_bits_set(uint8_t *bitmap, uint64_t bit, uint32_t n, bool on);
/* How many bits from bit, at most max, are all set (on) or all clear. */
uint32_t cfs_bits_run(const uint8_t *bitmap, uint64_t bit, uint32_t max, bool on);

/* ---- inodes and extent maps (inode.c, extent.c) ---- */
struct cfs_inode {
	uint64_t ino;
	struct cfs_inode *hnext;
	uint64_t nlookup;
	uint32_t nopen;
	uint32_t text_unchecked; /* opens for writing here holding no text lock (text_busy.c) */
	uint32_t pins; /* kept in memory across a wait for a lock: not an open (iopen.c) */
	bool in_orphans;
	bool times_dirty; /* mtime/ctime changed by an overwrite, written at the next commit */
	bool times_listed; /* in fs->times_list */
	bool times_pending; /* written under the shared glock: stamp at the next EX use here */
	/* A write-back cache sent pages of it (CFS_W_CACHED) since it last sent their times:
	 * those times are taken even if chattr +a or +i came in between. */
	bool cached_data;
	struct cfs_dinode d;
	/* The inline xattr area (CFS_INODE_XATTR_LEN bytes), NULL while it holds nothing: most
	 * inodes have none, and a walk of a big tree keeps every inode it looked up. */
	uint8_t *xattr;
	struct cfs_dextent *ext;
	uint32_t next, ext_cap;
	pthread_rwlock_t io; /* data I/O shared; anything that frees blocks exclusive */
	bool stale; /* read under a glock grant given up since: read again before use */
	bool dead;  /* freed (or its block reused) by another node: ESTALE from now on */
	/* cluster: the open lock (iopen.c), PR while open here past a let-go of the glock */
	struct cfslock *iopen;
	int iopen_mode; /* granted mode, -1 none */
	uint64_t lock_gone;    /* times its glock went while it was in memory */
	uint64_t made_at;      /* made here: fs->grants then (its glock EX), else 0 */
	uint64_t kcache_epoch; /* lock_gone at the last open: the kernel's pages are valid */
	bool kernel_pages;     /* opened without O_DIRECT: the kernel may cache pages of it */
	struct cfs_wb *wb;     /* data written behind, not on the LUNs yet (writebehind.c) */
	int wb_error;          /* a write-behind that failed, for the next fsync or close */
	bool ext_unjoined;     /* a write-out marked extents written without joining them */
};

/* The inode a handle names (cfs.h's inode numbers: the block number, tagged with the
 * generation on a cluster; CFS_ROOT the root): ESTALE if another node freed it. */
int cfs_iget(struct cfs_fs *fs, uint64_t handle, struct cfs_inode **out);
/* The inode a directory entry (or parent pointer, or orphan list) names now, by block
 * number: if another node made a new inode in the block of one we knew, that one. */
int cfs_iget_entry(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **out);
/* Its block and extent chain read and verified into copy, as a first read does, beside the
 * in-memory inode (the check of a mounted filesystem, check.c); free with cfs_inode_copy_free. */
int cfs_inode_read_copy(struct cfs_fs *fs, uint64_t ino, struct cfs_inode *copy);
void cfs_inode_copy_free(struct cfs_inode *copy);
/* fn for each run of blocks the copy uses (what: "inode block", "extent", "extent block",
 * "xattr block"); a nonzero return of fn stops the walk and is returned. */
int cfs_inode_copy_blocks(struct cfs_fs *fs, const struct cfs_inode *copy,
			  int (*fn)(void *arg, uint64_t blk, uint64_t len, const char *what),
			  void *arg);
/* Read a stale inode again (see glock.c); ESTALE if it is dead. */
int cfs_irefresh(struct cfs_fs *fs, struct cfs_inode *ip);
uint64_t cfs_handle(const struct cfs_fs *fs, const struct cfs_inode *ip);
/* The inode's block (its number in stat) of a handle as cfs.h's calls take it. */
uint64_t cfs_handle_block(const struct cfs_fs *fs, uint64_t handle);
/* Write the in-memory inode (fields, xattrs, extent map) into its blocks. */
int cfs_iwrite(struct cfs_fs *fs, struct cfs_inode *ip);
/* A directory no quota counts, owned by root, its own parent (slots.c): an added slot's orphan
 * directory, or one fsck makes anew. */
int cfs_system_dir_new(struct cfs_fs *fs, uint32_t perm, uint64_t *ino);
/* A new inode near near (one node) or in this node's own groups.  Under the metadata glock
 * PR, in the reserved group: -EAGAIN (nothing changed, fs->lock was released) if its glock
 * had to be fetched first. */
/* An inode no quota counts (a slot's change file): mode, owner root, nlink 1, written. */
int cfs_ialloc_system(struct cfs_fs *fs, uint32_t mode, struct cfs_inode **out);
extern _Thread_local bool cfs_making_system_inode;
int cfs_ialloc(struct cfs_fs *fs, uint64_t near, uint32_t mode, uint32_t uid, uint32_t gid,
	       struct cfs_inode **out);
/* The same for a new inode of directory dir: near it, in the project it passes on. */
int cfs_ialloc_in(struct cfs_fs *fs, const struct cfs_inode *dir, uint32_t mode, uint32_t uid,
		  uint32_t gid, struct cfs_inode **out);
/* Drop the in-memory inode if nobody uses it; free it on disk if it is unlinked too.  NULL:
 * nothing (what a failed cfs_iget leaves). */
int cfs_iput_check(struct cfs_fs *fs, struct cfs_inode *ip);
int cfs_ifree(struct cfs_fs *fs, struct cfs_inode *ip);
/* Under the metadata glock PR, its glock EX: reserve what freeing the unlinked inode takes
 * (the groups of its blocks, this node's orphan list, which must hold it), so that
 * cfs_iput_check may free it here.  -EAGAIN: fs->lock was released, start over; -ENOSPC:
 * not to be had, free it under the metadata glock EX. */
int cfs_ifree_reserve(struct cfs_fs *fs, struct cfs_inode *ip);
/* Drop the in-memory inode, whatever its state (fsck). */
void cfs_iforget(struct cfs_fs *fs, struct cfs_inode *ip);
/* Call fn for every in-memory inode (fn must not take inodes out of memory). */
void cfs_icache_each(struct cfs_fs *fs, void (*fn)(struct cfs_fs *, struct cfs_inode *));
/* Up to max in-memory inodes of block blk (a dead one and the live one); how many. */
size_t cfs_icache_find_all(struct cfs_fs *fs, uint64_t blk, struct cfs_inode **v, size_t max);
/* The in-memory inode a handle names, dead or not, as it is (no read, no glock needed). */
struct cfs_inode *cfs_icache_find(struct cfs_fs *fs, uint64_t handle);
void cfs_icache_destroy(struct cfs_fs *fs);
void cfs_itouch(struct cfs_inode *ip, bool m, bool c);
/* Write the inodes whose times alone changed (before a commit), until the running
 * transaction holds more than bound blocks: then -EAGAIN, the rest still to write (commit,
 * and call again). */
int cfs_iflush_times(struct cfs_fs *fs, uint32_t bound);
/* ip's times changed and go with the next commit (fs->lock held). */
void cfs_itimes_later(struct cfs_fs *fs, struct cfs_inode *ip);

/* Index of the extent holding lblk, or of the first one after it (next if none). */
uint32_t cfs_ext_find(const struct cfs_inode *ip, uint64_t lblk);
int cfs_ext_insert(struct cfs_inode *ip, const struct cfs_dextent *e);
/* A change spread over many groups (a big file freed, truncated or preallocated) commits on
 * the way.  When this thread's operation sets this, those commits write and flush the log
 * with fs->lock let go, as fsync's do, so the node's other operations are not held up for
 * the whole change (a 600 GB file freed: 1.6 s).  Set only around calls whose caller keeps
 * no state a release of fs->lock could change: truncate, fallocate, the last put of an
 * inode.  Meanwhile ip is pinned, and its I/O lock (held EX by truncate and fallocate) keeps
 * its map to this thread; an inode being freed is dead to lookups by handle. */
extern _Thread_local bool cfs_op_may_yield;
/* Unmap [lblk, lblk+count); the blocks go back to the allocator. */
int cfs_ext_punch(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t count);
/* Clear the unwritten flag over [lblk, lblk+count). */
int cfs_ext_mark_written(struct cfs_inode *ip, uint64_t lblk, uint64_t count);
/* The same for a write-out of kept data (writebehind.c), which runs in whatever commit comes
 * and holds no group: the map keeps the number of extent blocks it has, since a new one or a
 * freed one would be an allocation or free there.  So nothing is joined (cfs_ext_join does
 * that later), and an end is split only if the extent blocks have room: -ENOSPC, nothing
 * changed, if not. */
int cfs_ext_mark_kept_written(const struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk,
			      uint64_t count);
/* Join the neighbours cfs_ext_mark_kept_written left apart, by an operation that reserved
 * the group of the map's extent blocks (cfs_ext_reserve) or holds the metadata glock EX. */
void cfs_ext_join(struct cfs_inode *ip);
/* Reserve the group (cfs_alloc_reserve) that filling bytes [off, off+len) and the longer map
 * allocate in, under the metadata glock PR; -ENOSPC also when the map's blocks lie in more
 * than one group. */
int cfs_ext_reserve(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, uint64_t len);
/* Reserve the groups that freeing the blocks of [lblk, end) (UINT64_MAX: to the end of the
 * file), and the extent blocks a shorter map no longer needs, frees in, under the metadata
 * glock PR: 0, -EAGAIN (fs->lock was released to fetch one: start over), -ENOSPC (more than
 * CFS_OP_GROUPS_MAX). */
int cfs_ext_reserve_frees(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t end);
/* The groups of the map's extent blocks, added to v (cfs_group_set_add): a map that changes
 * length may free its last ones. */
int cfs_ext_chain_groups(struct cfs_fs *fs, const struct cfs_inode *ip, uint32_t *v, unsigned *n);
/* Allocate every hole of [lblk, lblk+count) as unwritten extents. */
int cfs_ext_fill(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t count);
/* Physical block of a logical block, 0 if a hole; *unwritten says if it reads as zeros. */
uint64_t cfs_ext_bmap(const struct cfs_inode *ip, uint64_t lblk, bool *unwritten);

/* ---- who frees an unlinked inode on a cluster (iopen.c) ---- */
/* Its glock is about to go: take its open lock if it is open here (fs->iopen_error says if
 * that failed). */
void cfs_iopen_before_let_go(struct cfs_fs *fs, struct cfs_inode *ip);
/* The last open here ended: its open lock goes. */
void cfs_iopen_closed(struct cfs_fs *fs, struct cfs_inode *ip);
/* The inode leaves memory. */
void cfs_iopen_forget(struct cfs_fs *fs, struct cfs_inode *ip);
/* An unlinked inode nothing here holds (metadata glock EX): freed now if no node has it open,
 * else left on an orphan list for the last node to close it. */
int cfs_iopen_unlinked(struct cfs_fs *fs, struct cfs_inode *ip);
void cfs_iopen_free(struct cfs_fs *fs);

/* flock.c */
void cfs_flock_free(struct cfs_fs *fs);
/* Request lk in mode without waiting for anyone (an application lock's try): a holder
 * elsewhere that only keeps the grant cached is told by the refusal (NOQUEUEBAST) and its
 * library gives it back within a few message times, so a refusal is tried again a few
 * times over some 30 ms before it counts.  The library's status (-EAGAIN: held). */
int cfs_lock_now(struct cfslock *lk, int mode);
void cfs_text_free(struct cfs_fs *fs);
/* Before this node lets an inode's glock go (or converts it down): its opens for writing here
 * that hold no text lock take it if the file is a program by now.  fs->lock held. */
void cfs_text_before_let_go(struct cfs_fs *fs, struct cfs_inode *ip);
void cfs_plock_free(struct cfs_fs *fs);

/* What a lock call's status means to a filesystem call: a node without quorum has fenced
 * itself (EIO).  An application lock's request that was cancelled was interrupted (EINTR). */
static inline int cfs_lock_errno(int rc) { return rc == -CFSLOCK_ENOQUORUM ? -EIO : rc; }
static inline int cfs_applock_errno(int rc) { return rc == -ECANCELED ? -EINTR : cfs_lock_errno(rc); }

/* ---- directories (dir.c) ---- */
typedef int (*cfs_dir_visit_fn)(void *arg, const char *name, size_t len, uint64_t ino,
				uint8_t type);
uint32_t cfs_dir_hash(const struct cfs_fs *fs, const char *name, size_t len);
int cfs_dir_init(struct cfs_fs *fs, struct cfs_inode *dir);
int cfs_dir_lookup(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t *ino,
		   uint8_t *type);
int cfs_dir_add(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t ino,
		uint8_t type);
/* Under the metadata glock PR (dir EX): reserve the groups adding one name to dir may free
 * in, and one to allocate its blocks and `more` in (cfs_alloc_reserve's answers). */
int cfs_dir_add_reserve(struct cfs_fs *fs, struct cfs_inode *dir, uint32_t more);
int cfs_dir_remove(struct cfs_fs *fs, struct cfs_inode *dir, const char *name);
/* The groups of the overflow blocks chained to the buckets, added to the set v of *n. */
int cfs_dir_overflow_groups(struct cfs_fs *fs, struct cfs_inode *dir, uint32_t *v, unsigned *n);
/* Free the overflow blocks chained to the buckets (the buckets are in the extent map). */
int cfs_dir_free_overflow(struct cfs_fs *fs, struct cfs_inode *dir);
/* Point an existing entry at another inode (rename over, exchange). */
int cfs_dir_replace(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t ino,
		    uint8_t type);
int cfs_dir_walk(struct cfs_fs *fs, struct cfs_inode *dir, cfs_dir_visit_fn fn, void *arg);
/* fsck: every directory block (also overflow) and entry.  A damaged block (or a chain that
 * loops) is reported with the block before it in its chain (prev; 0: it is the bucket's
 * own), and its bucket's walk ends there.  misplaced: the bucket an entry is in, if its hash
 * or bucket is wrong or its name one the kernel refuses ('/', NUL, ".", ".."): lookups
 * cannot find it.  count: a block whose header counts other than its entries. */
struct cfs_dir_check {
	void (*block)(void *arg, uint64_t blkno);
	int (*entry)(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type,
		     const uint64_t *misplaced);
	void (*damaged)(void *arg, uint64_t bucket, uint64_t blkno, uint64_t prev);
	void (*count)(void *arg, struct cfs_buf *b, uint32_t entries);
	void *arg;
};
int cfs_dir_check(struct cfs_fs *fs, struct cfs_inode *dir, const struct cfs_dir_check *cb);
/* Mend what cfs_dir_check reported: end a bucket's chain after block prev (0: empty the
 * bucket); move a misplaced entry (the name's bytes, len long, in bucket) where lookups find
 * it, under name (its bytes with '/' and NUL made '_', or "#INODE" if that is taken; room
 * for CFS_NAME_MAX + 1). */
int cfs_dir_cut_chain(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, uint64_t prev);
int cfs_dir_rehome(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, const char *raw,
		   size_t len, char *name);
/* Take out the entry whose name is these bytes (in bucket, or else found in any). */
int cfs_dir_remove_bytes(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
			 const char *raw, size_t len);

/* ---- extended attributes (xattr.c) ---- */
int cfs_xattr_block_verify(const struct cfs_fs *fs, const struct cfs_buf *b);
int cfs_xattr_get(struct cfs_fs *fs, struct cfs_inode *ip, const char *name, void *value,
		  size_t size);
int cfs_xattr_set(struct cfs_fs *fs, struct cfs_inode *ip, const char *name,
		  const void *value, size_t size, int flags);
int cfs_xattr_list(struct cfs_fs *fs, struct cfs_inode *ip, char *list, size_t size);
int cfs_xattr_remove(struct cfs_fs *fs, struct cfs_inode *ip, const char *name);

/* ---- POSIX ACLs (acl.c) ---- */
int cfs_acl_set_access(struct cfs_fs *fs, struct cfs_inode *ip, const void *value, size_t size,
		       const struct cfs_cred *cr);
int cfs_acl_chmod(struct cfs_fs *fs, struct cfs_inode *ip);
int cfs_acl_inherit(struct cfs_fs *fs, struct cfs_inode *dir, struct cfs_inode *ip,
		    uint32_t umask);
bool cfs_acl_is_access(const char *name);
/* May cr have want (R 4, W 2, X 1) on ip, by its mode and access ACL?  0 or -EACCES. */
int cfs_acl_permission(struct cfs_fs *fs, struct cfs_inode *ip, unsigned want,
		       const struct cfs_cred *cr);

/* ---- set-user-ID and set-group-ID bits (setid.c); cr NULL: the filesystem itself ---- */
/* What cr's privileges function says of gid (CFS_CRED_*), or what its ids say without one. */
unsigned cfs_cred_privileges(const struct cfs_cred *cr, uint32_t gid);
/* The bits a write, truncate or fallocate by cr takes from ip. */
mode_t cfs_setid_drop_on_change(const struct cfs_inode *ip, const struct cfs_cred *cr);
/* The bits a chown by cr takes from ip (set-user-ID whoever asks). */
mode_t cfs_setid_drop_on_chown(const struct cfs_inode *ip, const struct cfs_cred *cr);
/* mode as cr may set it on a file of group gid: chmod and an access ACL. */
mode_t cfs_setid_chmod(mode_t mode, uint32_t gid, const struct cfs_cred *cr);
/* Does a write, truncate, fallocate or chown by cr take ip's file capabilities
 * (security.capability)?  1, 0, or -EIO (a damaged xattr area). */
int cfs_setid_caps_go(struct cfs_fs *fs, struct cfs_inode *ip, const struct cfs_cred *cr);
/* Take them (in the caller's transaction; the inode is to be written). */
int cfs_setid_drop_caps(struct cfs_fs *fs, struct cfs_inode *ip);

/* ---- inode flags: immutable, append-only (iflags.c) ---- */
/* The bits of flags that CFS does not know (fsck clears them). */
uint32_t cfs_iflags_unknown(uint32_t flags);
/* -EPERM if ip is immutable or append-only: attributes, xattrs, links, size. */
int cfs_iflags_may_change(const struct cfs_inode *ip);
int cfs_iflags_may_setattr(const struct cfs_inode *ip, unsigned set);
/* -EPERM for a write at off that the flags forbid (immutable; append-only below the end). */
int cfs_iflags_may_write(const struct cfs_inode *ip, uint64_t off);
/* 0 or -EPERM for open(2) with flags. */
int cfs_iflags_may_open(const struct cfs_inode *ip, int flags);
int cfs_iflags_may_add_entry(const struct cfs_inode *dir);
int cfs_iflags_may_remove_entry(const struct cfs_inode *dir, const struct cfs_inode *victim);

/* ---- quotas (quota.c) ---- */
bool cfs_quota_on(const struct cfs_fs *fs);
/* With quotas on a cluster, under the metadata glock PR: charges go to this node's grants
 * (quota_grant.c), and what moves a charge to other ids (chown, chgrp, a project change)
 * goes under EX.  True if this operation is under PR so. */
bool cfs_quota_needs_meta_ex(const struct cfs_fs *fs);
/* The quota inodes made and every id's usage counted from the files (mkfs, tune: fsck.cfs
 * -y does it). */
int cfs_quota_build(struct cvm_volume *vol, cfs_progress_fn progress, void *arg);
/* The inodes no quota counts: the quota inodes, the slots' change files, the orphan
 * directories, one being made by cfs_ialloc_system. */
bool cfs_quota_exempt(const struct cfs_fs *fs, uint64_t ino);
/* The ids d is charged to; UINT32_MAX for a type that does not apply. */
void cfs_quota_ids(const struct cfs_fs *fs, const struct cfs_dinode *d, uint32_t id[3]);
/* The global record of (type, id) in its block (made if create); *q NULL: none, all zeros. */
int cfs_quota_record(struct cfs_fs *fs, unsigned type, uint32_t id, bool create,
		     struct cfs_buf **b, struct cfs_dquot **q);
/* An inode's block goes from saying was to saying now (mode 0: no inode): charge the
 * difference to the ids of both, in the running transaction. */
int cfs_quota_charge(struct cfs_fs *fs, uint64_t ino, const struct cfs_dinode *was,
		     const struct cfs_dinode *now);
/* How many more blocks ip may take (UINT64_MAX: no limit), counting what it took since its
 * block was last written; want: what the caller would take (under EX, other nodes' grants are
 * recalled if less is left); -EDQUOT if none. */
int cfs_quota_room(struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t want,
		   uint64_t *blocks);
/* May a new inode of d's ids be made, with blocks blocks?  -EDQUOT if not; -CFS_ENEEDMETA if
 * this node's grants do not cover it (under the metadata glock PR). */
int cfs_quota_may_create(struct cfs_fs *fs, const struct cfs_dinode *d, uint64_t blocks);
/* -EDQUOT if ip's whole charge, moved to the ids of now (a chown, chgrp or project change),
 * would take one of them over its hard limit (or a soft one past its grace). */
int cfs_quota_may_move(struct cfs_fs *fs, const struct cfs_inode *ip, const struct cfs_dinode *now);
/* statfs in a directory that passes on a project with limits: the project's. */
int cfs_quota_statfs(struct cfs_fs *fs, const struct cfs_inode *dir, struct statvfs *st);
/* fn for every record of type with a use or a limit, in id order. */
int cfs_quota_each(struct cfs_fs *fs, unsigned type,
		   int (*fn)(void *arg, uint32_t id, const struct cfs_dquot *q), void *arg);
/* fsck: the usage of an id as counted from the files, nothing granted. */
int cfs_quota_set_usage(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t bytes,
			uint64_t inodes);

/* ---- quota grants (quota_grant.c) ---- */
/* Under the metadata glock PR: 0 if this node's grants of d's ids cover blocks and inodes
 * more (and frees: the ids have records here), else -ENOSPC (do it under EX).  ino: d's, for
 * the exempt ones; 0 for an inode still to be made. */
int cfs_quota_granted(struct cfs_fs *fs, const struct cfs_dinode *d, uint64_t ino,
		      uint64_t blocks, uint64_t inodes);
/* Under PR: what this node's grant of the id leaves of bytes (UINT64_MAX: no limit). */
int cfs_quota_grant_room(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t *bytes);
/* Under PR: a charge to this node's grant of the id. */
int cfs_quota_grant_charge(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t bytes,
			   int64_t inodes);
/* Under EX (or on one node), into the id's global record q, whose block the caller dirties:
 * this node's record folded; every slot's; this node's grant topped up after a charge. */
int cfs_quota_fold_own(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q);
int cfs_quota_recall(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q);
int cfs_quota_regrant(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q);
/* Under EX: every slot's records folded into the global ones (exact usage). */
int cfs_quota_fold_all(struct cfs_fs *fs);
/* This node's charges of the id not yet folded (for what it shows under PR). */
int cfs_quota_grant_delta(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t *bytes,
			  int64_t *inodes);
/* Cluster mounts with quotas: a thread folds what this node charged to its grants into the
 * records every fs->quota_fold_s seconds (none for CFS_QUOTA_FOLD_NEVER, read-only and
 * one-node mounts).  Stopped before the unmount lets the glocks go. */
int cfs_quota_folder_start(struct cfs_fs *fs);
void cfs_quota_folder_stop(struct cfs_fs *fs);
/* fn for every record in slot's change file that holds a grant or a charge (fsck). */
typedef int (*cfs_quota_change_fn)(void *arg, unsigned type, uint32_t id,
				   struct cfs_dquot_change *c, struct cfs_buf *b);
int cfs_quota_changes_each(struct cfs_fs *fs, uint32_t slot, cfs_quota_change_fn fn, void *arg);

/* ---- project ids (project.c) ---- */
bool cfs_project_on(const struct cfs_fs *fs);
/* A new inode ip made in dir takes dir's project if dir passes it on. */
void cfs_project_inherit(const struct cfs_fs *fs, const struct cfs_inode *dir,
			 struct cfs_inode *ip);
/* -EXDEV if dir passes on a project that ip, given a name in dir, is not in. */
int cfs_project_may_name(const struct cfs_fs *fs, const struct cfs_inode *dir,
			 const struct cfs_inode *ip);

/* ---- glocks (glock.c) ---- */
struct cfs_glock;
/* What a glock type keeps under its grant, as GFS2's glops. */
struct cfs_glock_ops {
	/* Before giving the grant up (not when converting down): may refuse. */
	int (*go_unlock)(struct cfs_fs *fs, struct cfs_glock *gl);
	/* Before converting EX down to PR (optional). */
	void (*go_demote)(struct cfs_fs *fs, struct cfs_glock *gl);
	/* The grant is gone: forget what was read under it. */
	void (*go_invalidate)(struct cfs_fs *fs, struct cfs_glock *gl);
	/* A grant came, over `was` (-1: nothing was held; PR: a conversion, which kept the
	 * caches): read again what went stale, and forget what was read without the grant. */
	int (*go_granted)(struct cfs_fs *fs, struct cfs_glock *gl, int was);
	/* Kept for a minimum hold time while in use, even when another node asks (glock.c). */
	bool min_hold;
};
struct cfs_glock {
	struct cfs_fs *fs;
	struct cfslock *lk;
	const struct cfs_glock_ops *ops;
	int mode;            /* granted mode, -1 none */
	int wanted;          /* mode another node asked for, -1 none (atomic) */
	unsigned holders;    /* operations and data I/O relying on the grant */
	bool requesting;     /* a thread waits for a grant, fs->lock released */
	bool ahead;          /* converted to EX ahead of its use, not used since (iglock.c) */
	bool changed_here;   /* granted EX since it was last given up */
	uint64_t granted_ns; /* when the grant came (cfs_now_ns) */
	uint64_t grant_seq;  /* fs->grants then */
	uint64_t last_use_ns; /* when a holder last let go */
	uint64_t keep_until_ns; /* not given up before, for the rest of a write (CFS_W_MORE) */
	uint64_t keep_for;      /* the inode whose write that is */
	uint32_t keep_tid;      /* the thread writing it, 0 unknown */
	bool names_changed; /* a directory's names changed under this grant: min_hold's rules */
	uint64_t names_lease_ns; /* names in a directory under it the kernel keeps expire then */
	uint64_t contested_ns;   /* when this node last gave it up, or set out to: 0 never */
	uint32_t ag; /* a group glock's group (agglock.c) */
	/* inode glocks (iglock.c) */
	bool inode;
	uint64_t blk;                         /* the first block it covers */
	struct cfs_glock *hnext;              /* the table's chain */
	struct cfs_glock *wnext;              /* wishes queued for the committer */
	struct cfs_glock *lru_prev, *lru_next; /* granted ones, least recently used first */
	bool queued;                          /* on the wish queue (atomic) */
	unsigned waiters; /* threads waiting for another's request, or names to expire */
	/* between cfs_glock_check_begin and _end: going to letting_go_to for letting_go_for */
	bool letting_go;
	int letting_go_to, letting_go_for;
};

/* ---- the mounted filesystem ---- */
struct cfs_fs {
	struct cvm_volume *vol;
	struct cfs_dsuper sb;
	uint32_t bs;
	uint32_t slot;
	bool ro, dboptimized;
	bool remounted_ro; /* ro by cfs_set_read_only, which may take it back */
	const char *who; /* log prefix: "cfsd" or "fsck.cfs" */
	bool checking;   /* fsck: read inodes whatever the bitmaps say */
	/* fsck: told of each run of blocks its repairs allocate, which its map of the blocks
	 * in use must keep */
	void (*taken)(void *arg, uint64_t blkno, uint32_t len);
	void *taken_arg;
	pthread_mutex_t lock; /* every metadata access */
	pthread_rwlock_t vol_lock; /* data I/O shared; swapping the volume (grow) exclusive */
	pthread_mutex_t aio_lock;  /* the pool of libaio contexts for large data I/O */
	struct cvm_aio *aio_free[CFS_AIO_POOL];
	unsigned aio_nfree;
	struct cvm_volume *aio_vol; /* the volume the pooled contexts belong to */

	struct cfs_buf **bhash;
	struct cfs_buf lru; /* clean blocks, least recently used first */
	uint32_t nclean;
	struct cfs_buf *spare_bufs; /* out of the cache, kept for reuse (block.c) */
	uint32_t nspare_bufs;
	struct cfs_txn txn;
	/* Write-behind (writebehind.c): the inodes with data not on the LUNs yet, its bytes,
	 * and the bound past which a write flushes them all (0: every write goes through). */
	struct cfs_inode *wb_dirty;
	uint64_t wb_bytes, wb_limit;
	uint64_t jseq;              /* the next transaction's */
	uint64_t jdurable;          /* the newest transaction known to be on disk */
	struct cfs_jflight jflight;
	pthread_mutex_t jio_lock;   /* held by the commit in flight during its I/O */
	uint32_t jlast_pos, jlast_len; /* the newest transaction since the anchor (len 0: none) */
	uint32_t jlog_id;           /* the anchor's */
	bool janchor_owed;          /* all in place, the log not yet voided (cfs_journal_home) */
	uint64_t *jlogged;          /* blocks the log holds images of, + 1 (journal.c) */
	struct cfs_buf **unhome;    /* committed blocks not yet written in place (checkpoint) */
	uint32_t nunhome;
	size_t unhome_cap;
	struct cvm_aio *home_aio;   /* the checkpoint's, on home_aio_vol */
	struct cvm_volume *home_aio_vol;
	size_t jlogged_cap, jlogged_n;
	uint64_t *pending_free; /* freed in the running transaction: not reusable before commit */
	size_t npending, pending_cap;

	struct cfs_ag *ags;
	uint32_t ags_n;     /* groups in it (fs->sb.nags may be ahead, in a grow) */
	uint64_t ags_loads; /* cfs_alloc_load calls: fs->ags made anew (changes from 0) */

	struct cfs_inode **ihash;
	/* The inodes whose times wait for the next commit (times_dirty), so a commit need not
	 * look at every cached inode; if the list could not grow, it does (times_list_lost). */
	struct cfs_inode **times_list;
	size_t ntimes, times_cap;
	bool times_list_lost;
	uint64_t next_generation;

	bool cluster;               /* a lock protocol other than local */
	struct cfslock_client *locks;
	struct cfslock_space *space;
	struct cfs_glock meta;      /* the namespace and inodes' lives, the superblock (glock.c) */
	struct cfs_glock **group_glocks; /* by group, made at first use (agglock.c) */
	uint32_t ngroup_glocks;
	size_t group_glocks_granted; /* count towards lock_cache_limit, never given back for it */
	uint64_t hints_ns;          /* when other nodes' groups' free counts were read */
	uint64_t grants;            /* glock grants so far: orders a grant and a read */
	uint64_t lock_waits, lock_wait_ns; /* waits for glock grants (one for a batch), and their time */
	/* Blocks read with no grant of their inode's glock here, and that count when the cache
	 * was last cleared of them (iglock.c, inode_go_granted) */
	uint64_t unlocked_reads, unlocked_reads_dropped;
	struct cfs_glock **iglocks; /* inode glocks by block (iglock.c) */
	struct cfs_glock iglock_lru; /* list head: granted inode glocks, oldest use first */
	size_t iglocks_granted;
	uint64_t iglocks_given_back; /* past lock_cache_limit */
	/* Spans read here whose last inode left memory, to let go (cfs_iglock_inode_gone) */
	uint64_t *idle_spans;
	size_t nidle_spans, idle_spans_cap;
	uint64_t idle_let_go_after_ns; /* the next batch of them, not before (paced) */
	/* Spans whose glock went to another node's EX lately, the oldest overwritten first
	 * (cfs_iglock_contended) */
	struct { uint64_t span, ns; } contended[16];
	unsigned contended_next;
	/* Conversions to EX asked for ahead (iglock.c, convert_ahead): the last span converted
	 * and when, how many spans the last batch might take, and how many the batches since the
	 * window opened took and how many of those were then used */
	uint64_t ahead_span, ahead_ns;
	unsigned ahead_window, ahead_taken, ahead_used;
	/* Fresh spans for new inodes asked for ahead (cfs_iglock_take_fresh): the first and
	 * last span of the last batch, and how many spans ahead it might take */
	uint64_t fresh_first, fresh_last;
	unsigned fresh_window;
	/* Where the last new inode's search for a span this node may take at once ended, and
	 * when (inode.c, past_costly_spans) */
	uint64_t ialloc_cursor, ialloc_cursor_ns;
	pthread_mutex_t wish_lock;  /* the wish queue and the committer's wake-up (fs.c) */
	struct cfs_glock *wishes;   /* filled by the lock manager's callbacks */
	bool wake_pending;
	struct cfslock *slot_lock;  /* EX while this node owns its slot's journal */
	bool caches_stale;          /* the group summaries must be read again */
	uint64_t hold_until_ns;     /* a wish waits for the minimum hold time till then */
	/* When a name's removal last left an inode with no link (CLOCK_MONOTONIC ns), which (its
	 * handle), and a wake for each last put of an inode: a full filesystem waits a moment for what the kernel
	 * still holds of a file just removed (cfs_alloc_retry). */
	uint64_t unlinked_ns, unlinked_ino;
	pthread_cond_t put_wake;
	pthread_cond_t glock_cond;  /* a glock's holders or request changed */
	pthread_t dispatch;
	bool dispatching;
	struct cfslock *opens;       /* PR: this node holds open locks; EX: nobody does */
	pthread_mutex_t flock_mutex; /* the list of flock users (flock.c) */
	struct cfs_flock *flocks;
	pthread_mutex_t text_mutex; /* programs run and written here (text_busy.c) */
	struct cfs_text *texts;
	void *flock_interrupted;     /* a request interrupted before it waited (flock.c) */
	struct pending *plocks_pending; /* record lock requests not answered yet (plock.c) */
	struct lock_user *plock_users;  /* who locked through which open file (plock.c) */
	bool opens_shared;
	uint64_t opens_refused_ns;   /* when "opens" EX was last refused (cfs_now_ns), 0 if not */
	unsigned iopen_count;        /* open locks held PR here */
	int iopen_error;
	struct cfslock *pagecache;   /* PR: normal mount; CW: shared direct writes (shared_write.c) */
	unsigned shared_writers;     /* writes in flight under the glock PR and pagecache CW */
	bool pagecache_wanted;       /* a normal mount asks for it (atomic) */
	uint64_t pagecache_refused;  /* when CW was last refused (cfs_now_ns), 0 if it was not */
	cfs_reopen_fn reopen;        /* cfsd: the volume again, after another node grew it */
	void *reopen_arg;
	struct cfs_kernel_caches kernel; /* cfsd: what the kernel must forget at a let-go */
	bool kernel_names_stale;         /* a let-go covers a directory the kernel knows */
	pthread_t committer;
	pthread_cond_t commit_wake;
	bool stopping;
	bool started; /* the own journal is replayed: others' orphans may be freed (atomic) */
	/* recovery of dead nodes (recovery.c) */
	pthread_t recoverer;
	bool recovery_running;
	pthread_mutex_t recovery_lock;
	pthread_cond_t recovery_wake;
	bool recovery_kicked, recovery_retry;
	bool recovery_stop; /* atomic */
	const char *fence_program; /* the mount options': see fence.c */
	void (*locks_closing)(void *arg, struct cfs_fs *fs); /* the mount options' */
	void (*recovering)(void *arg, struct cfs_fs *fs, uint32_t node, bool before);
	void *locks_arg;
	uint32_t lock_cache_limit; /* the most lock grants kept cached (cluster) */
	/* the quota folder (quota_grant.c): this node's charges into the records every
	 * quota_fold_s seconds, so that what every node shows lags by at most that */
	uint32_t quota_fold_s;
	bool quota_charged; /* under fs->lock: a charge to this node's grants since its fold */
	bool folder_running, folder_stop;
	pthread_t folder;
	pthread_mutex_t folder_lock;
	pthread_cond_t folder_wake;
	uint32_t failure_detection_ms; /* the lock manager's, asked once at mount (fence.c) */
	struct cfslock_events lock_events;
	struct cfs_lease_page *lease_page; /* shared with libodm's processes (fence.c) */
	int lease_memfd;
	int lockfd; /* holds the OFD locks saying this node uses the filesystem */
	struct cfs_stats stats;
};

/* ---- orphans and the metadata lock (fs.c, glock.c) ---- */
/* Wake the committer thread (any thread, fs->lock held or not). */
void cfs_committer_wake(struct cfs_fs *fs);
int cfs_orphan_add(struct cfs_fs *fs, struct cfs_inode *ip);
/* Under the metadata glock PR: this node's orphan list EX and what an addition to it takes,
 * and `more` blocks (cfs_dir_add_reserve). */
int cfs_orphan_add_reserve(struct cfs_fs *fs, uint32_t more);
int cfs_orphan_remove(struct cfs_fs *fs, struct cfs_inode *ip);
/* Under the metadata glock PR: this node's orphan list EX, before a change takes an inode
 * off it (which allocates and frees nothing). */
int cfs_orphan_remove_reserve(struct cfs_fs *fs);
/* Is this lock resource a slot lock ("slot-N")?  Then *slot is N. */
bool cfs_slot_lock(const char *resource, unsigned *slot);
/* Take block ino off slot's orphan list if it is there. */
int cfs_orphan_remove_from(struct cfs_fs *fs, uint32_t slot, uint64_t ino);
/* Free what slot's orphan list names and nobody has open (glock EX); then commit. */
int cfs_orphans_free(struct cfs_fs *fs, uint32_t slot);
/* Recovery of dead nodes (recovery.c): init before the lock client opens, start once the
 * caches exist, stop before the unmount lets go of anything. */
void cfs_recovery_init(struct cfs_fs *fs);
int cfs_recovery_start(struct cfs_fs *fs);
/* The membership changed: look at the lock table again (any thread; only signals). */
void cfs_recovery_kick(struct cfs_fs *fs);
void cfs_recovery_stop(struct cfs_fs *fs);
void cfs_recovery_destroy(struct cfs_fs *fs);
/* Self-fencing (fence.c): no I/O of this node reaches the volume from now on, every call
 * fails with EIO (logged once with why). */
#define FENCE_CHECK_MS 200u /* quorum is looked at least this often */
#define IO_GRACE_MS 500u    /* I/O in the kernel at the fence is done within this */
void cfs_fence(struct cfs_fs *fs, const char *why);
bool cfs_fenced(const struct cfs_fs *fs);
/* Run the fence program for a dead node: 0 once it says the node is fenced. */
int cfs_fence_node(struct cfs_fs *fs, uint32_t node, uint32_t slot);
/* How long survivors wait after a node left before they replay its journal. */
uint32_t cfs_fence_interval_ms(const struct cfs_fs *fs);
void cfs_fence_log_interval(const struct cfs_fs *fs);
/* The membership lease (fence.c): true on one node, or while the lock manager confirms it. */
bool cfs_lease_fresh(const struct cfs_fs *fs);
/* Make every write of vol wait for a fresh lease, or fence (a cluster mount's volumes). */
void cfs_fence_guard(struct cfs_fs *fs, struct cvm_volume *vol);
/* A volume handle the filesystem takes (its mount's, or a grown one): its writes behind the
 * fence's gate, its failed LUN I/O logged by cfs_log and counted on from the handle before. */
void cfs_volume_adopt(struct cfs_fs *fs, struct cvm_volume *vol);
/* The lock manager removed this node while it stalled. */
void cfs_fence_evicted(struct cfs_fs *fs, const char *why);
/* The journal failed (fs->ro set): on a cluster this node can no longer write what it changed
 * under the glocks it holds, and would keep them for ever (glock_sync keeps a lock whose
 * changes are not on disk).  So it fences itself and withdraws from the lock manager: the
 * others evict it, replay its journal (what it committed) and go on (GFS2's withdraw). */
void cfs_withdraw(struct cfs_fs *fs, const char *why);
/* The page libodm's processes read the lease from (cluster mounts; cfs_lease_fd). */
int cfs_lease_page_init(struct cfs_fs *fs);
void cfs_lease_page_free(struct cfs_fs *fs);
/* The lock manager, its lockspace and the metadata glock (glock.c).  Modes are CFSLOCK_*. */
int cfs_glock_init(struct cfs_fs *fs, const char *proto);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t cfs_now_ns(void);
/* Test hook (test_gate.c): while the file PATH exists (PATH NULL: never), wait, having made
 * PATH.held. */
void cfs_test_gate(const char *path);
/* ns from now, as pthread_cond_timedwait takes it (CLOCK_REALTIME). */
struct timespec cfs_deadline_after_ns(uint64_t ns);
/* Unlock (if held) and free a lock of the filesystem's lockspace; *lk becomes NULL. */
void cfs_lock_put(struct cfslock **lk);
/* Direct writes under the shared glock (shared_write.c).  Init takes "pagecache" PR on a
 * normal cluster mount; begin says if this write may go under the glock PR (fs->lock held). */
int cfs_shared_write_init(struct cfs_fs *fs);
void cfs_shared_write_free(struct cfs_fs *fs);
bool cfs_shared_write_begin(struct cfs_fs *fs);
void cfs_shared_write_end(struct cfs_fs *fs);
/* ODM on a cluster: pagecache CW until unhold (fs->lock not held).  -EOPNOTSUPP on a normal
 * mount, -EBUSY while a node mounts normally (cfs_set_error says which). */
int cfs_shared_write_hold(struct cfs_fs *fs);
void cfs_shared_write_unhold(struct cfs_fs *fs);
/* The node that holds resource granted (as this node's table says), 0 if none. */
uint32_t cfs_lock_holder(struct cfs_fs *fs, const char *resource);
/* Does a dead node (node; 0: any) still hold resource, its grant kept until its recovery is
 * done? */
bool cfs_lock_recovering(struct cfs_fs *fs, const char *resource, uint32_t node);
/* The in-memory inode of an open file; data calls come on open files only (file.c).  fs->lock
 * held: the metadata glock is held in `mode` and the inode's in imode (EX under the metadata
 * glock PR: a change of this inode alone), on success only, and the inode read again if
 * another node had it meanwhile.  Unhold gives both back (fs->lock held). */
int cfs_file_hold(struct cfs_fs *fs, uint64_t ino, int mode, int imode, struct cfs_inode **ip);
void cfs_file_unhold(struct cfs_fs *fs, struct cfs_inode *ip);
/* ---- write-behind of a cluster mount (writebehind.c), every call with fs->lock held ----
 * Buffered writes under 128 KiB that may wait (CFS_W_* flags none of SYNC, DSYNC, DIRECT,
 * CACHED). */
bool cfs_wb_wanted(const struct cfs_fs *fs, unsigned flags, uint64_t size);
/* Whether ip's write of [off, off+size) may be kept: its write-out, in whatever commit comes,
 * must not split an unwritten extent (cfs_ext_mark_kept_written), so each one the write
 * reaches, or a fill for it could join, lies in what this write and those kept before cover
 * (a preallocated one does not: that write goes through). */
bool cfs_wb_may_keep(const struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t off,
		     uint64_t size);
/* Keep [off, off+size) of ip, whose blocks are allocated, under its glock EX: the write's
 * data is in memory when this returns; it reaches the LUNs before the next commit. */
int cfs_wb_add(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, const void *src,
	       uint64_t size);
/* Copy what ip keeps behind of [off, off+len) over buf (the bytes of off). */
void cfs_wb_overlay(const struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t off,
		    void *buf, uint64_t len);
/* Write what ip (NULL: every inode) keeps behind where its map says, and mark the blocks it
 * filled written.  A failed write leaves its blocks unwritten and says so in ip->wb_error
 * and the log; the call fails only if the map could not be changed. */
int cfs_wb_flush(struct cfs_fs *fs, struct cfs_inode *ip);
/* The file is cut at size: what ip keeps past it goes (the tail of the last block zeroed). */
void cfs_wb_truncate(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t size);
/* A write-behind of ino that failed since the last call (-EIO...), else 0. */
int cfs_wb_take_error(struct cfs_fs *fs, uint64_t ino);
/* Stamp the times of writes made under the shared glock (glock EX held). */
void cfs_itimes_catch_up(struct cfs_fs *fs, struct cfs_inode *ip);
void cfs_glock_shutdown(struct cfs_fs *fs);
int cfs_glock_new(struct cfs_fs *fs, struct cfs_glock *gl, const char *name,
		  const struct cfs_glock_ops *ops);
void cfs_glock_free(struct cfs_glock *gl);
/* Hold gl in at least mode (fs->lock held): a held grant is not given up.  Waiting for
 * another node releases fs->lock meanwhile: read again what was read before, and change
 * nothing before a hold that may wait.  A node's holds never wait for each other, except a
 * hold of EX while PR is held here: never ask for EX while holding PR. */
int cfs_glock_hold(struct cfs_fs *fs, struct cfs_glock *gl, int mode);
void cfs_glock_unhold(struct cfs_fs *fs, struct cfs_glock *gl);
/* Before this node gives gl up for a change of its own: names the kernel keeps under it
 * (cfs_iglock_lease_names) must expire first, or another node could change them meanwhile.
 * Waits for that with fs->lock released and returns true (look again), or returns false. */
bool cfs_glock_wait_names(struct cfs_fs *fs, struct cfs_glock *gl);
/* The same, without waiting for another node: -EAGAIN if one holds it in the way (it is
 * asked to give it up if it only caches it). */
int cfs_glock_try_hold(struct cfs_fs *fs, struct cfs_glock *gl, int mode);
/* Act on another node's wish for gl if nothing here holds it. */
void cfs_glock_check(struct cfs_fs *fs, struct cfs_glock *gl);
/* The same in two steps (fs->lock held from one to the other): let-goes begun for many
 * glocks, then each ended, send their messages together. */
void cfs_glock_check_begin(struct cfs_fs *fs, struct cfs_glock *gl);
void cfs_glock_check_end(struct cfs_fs *fs, struct cfs_glock *gl);
/* Times this thread released fs->lock to wait for a grant (its own or another thread's): an
 * operation that saw it change re-reads what it read before, or starts over. */
extern _Thread_local unsigned cfs_op_waits;
/* Wait for a change of the glocks' states (fs->glock_cond), fs->lock released meanwhile. */
void cfs_glock_wait(struct cfs_fs *fs);
/* Ask for the grant (fs->lock held; released meanwhile if release). */
int cfs_glock_request(struct cfs_fs *fs, struct cfs_glock *gl, int mode, bool release);
/* Ask for the grants in v neither held here in mode (PR held, EX wanted: a conversion) nor
 * asked for, all at once, with fs->lock released while they come (so the caller reads again
 * what it read before); on return the ones granted have their mode.  What fails is left for
 * its next use. */
void cfs_glock_request_all(struct cfs_fs *fs, struct cfs_glock **v, size_t n, int mode,
			   unsigned flags);
/* PR granted here to EX as a conversion: the PR, and what is cached under it, stay while it
 * waits with fs->lock released.  -EDEADLK: another node converts too and goes first (the
 * caller lets the PR go and asks again). */
int cfs_glock_convert_up(struct cfs_fs *fs, struct cfs_glock *gl);
/* Give the grant up now (nothing here holds it): sync, forget, unlock. */
int cfs_glock_drop(struct cfs_fs *fs, struct cfs_glock *gl);
/* Hold the metadata glock in mode (cfs_glock_hold) and make imode this thread's inode glock
 * mode (EX under PR: a change of one inode, cfs_op_begin_inode). */
int cfs_meta_hold(struct cfs_fs *fs, int mode, int imode);

/* ---- allocation group glocks (agglock.c) ---- */
/* Does this node hold the group's glock EX (a header cached here is current)?  Always on one
 * node. */
bool cfs_group_is_ours(struct cfs_fs *fs, uint32_t ag);
/* May this operation change the group: its reserved group, or under the metadata glock EX
 * the group's glock, asked for with fs->lock held.  -EIO (logged) otherwise: a bug. */
int cfs_group_ensure(struct cfs_fs *fs, uint32_t ag);
/* Reserve a group this node holds for this operation (up to CFS_OP_GROUPS_MAX): -EAGAIN if
 * it does not hold it (or it is fenced), -ENOSPC past the most. */
#define CFS_OP_GROUPS_MAX 8u
int cfs_group_hold_cached(struct cfs_fs *fs, uint32_t ag);
/* Have the group's glock EX here, fs->lock released meanwhile: waiting for it, or (!wait)
 * only if nobody holds it (-EAGAIN).  Not held: the caller looks again. */
int cfs_group_fetch(struct cfs_fs *fs, uint32_t ag, bool wait);
/* Add the group of blk to the set v of *n (at most CFS_OP_GROUPS_MAX): -ENOSPC past that. */
int cfs_group_set_add(const struct cfs_fs *fs, uint64_t blk, uint32_t *v, unsigned *n);
/* Reserve every group of the set (cfs_group_hold_cached), or fetch the first this node lacks
 * holding none, and -EAGAIN: start over. */
int cfs_group_reserve_set(struct cfs_fs *fs, const uint32_t *v, unsigned n);
/* This thread's (first) reserved group, -1 none. */
int64_t cfs_group_reserved(void);
/* The reserved groups are those the inode's free needs (cfs_ifree_reserve); is that so? */
void cfs_group_reserved_for_free(uint64_t ino);
bool cfs_group_may_free(uint64_t ino);
/* Let the reserved groups go (an operation boundary, or the operation starts over). */
void cfs_group_unreserve(struct cfs_fs *fs);
void cfs_group_glocks_free(struct cfs_fs *fs);

/* ---- inode glocks (iglock.c) ---- */
/* Blocks one glock covers: inodes made together (a node allocates in its own groups, a file's
 * data near its inode) share a lock, so an untar, or another node's first look at the tree,
 * asks once per span rather than once per file.  The price is false sharing between the
 * files of a span, which mostly belong to one node. */
#define CFS_IGLOCK_SPAN 64u
/* The mode this thread's operation asks inode glocks in: its metadata glock mode. */
extern _Thread_local int cfs_op_imode;
int cfs_iglock_init(struct cfs_fs *fs);
void cfs_iglock_shutdown(struct cfs_fs *fs);
/* Have the glock covering inode blk granted here in at least mode (fs->lock held, the
 * metadata glock held).  EX under the metadata glock PR: the operation changes that inode
 * alone and allocates nothing.  It stays while fs->lock is held; past that, only while held
 * (cfs_iglock_hold). */
int cfs_iglock_get(struct cfs_fs *fs, uint64_t blk, int mode);
/* The glocks of the inodes in blks not granted here in mode yet, asked for together (a wait
 * for each CFS_IGLOCK_PREFETCH_MAX spans), fs->lock released meanwhile: the grants a walk of
 * many inodes would otherwise take one round trip each.  PR under the metadata glock PR, EX
 * under it EX; nothing otherwise. */
#define CFS_IGLOCK_PREFETCH_MAX 256u
void cfs_iglock_prefetch(struct cfs_fs *fs, const uint64_t *blks, size_t n, int mode);
/* A new inode's glock (blk's span, held nowhere here) EX under the metadata glock PR, with
 * spans where the next new inodes will go: how many cfs_iglock_fresh_window says for blk,
 * ahead[] (sorted, past blk) those of them with room; asked for together, those held
 * elsewhere left alone (fs->lock released meanwhile). */
#define CFS_IGLOCK_FRESH_MAX 32u
unsigned cfs_iglock_fresh_window(struct cfs_fs *fs, uint64_t blk);
int cfs_iglock_take_fresh(struct cfs_fs *fs, uint64_t blk, const uint64_t *ahead, size_t n);
/* The granted mode here, -1 none (CFSLOCK_EX on one node). */
int cfs_iglock_mode(struct cfs_fs *fs, uint64_t blk);
/* Did this node give the glock covering inode blk up to another node's EX in the last
 * second (another node changes what it covers too)?  gl went so just now: noted. */
bool cfs_iglock_contended(struct cfs_fs *fs, uint64_t blk);
/* Given to another node's change among the last such gifts, at any time: the other node may
 * be changing it still without asking us. */
bool cfs_iglock_away(struct cfs_fs *fs, uint64_t blk);
void cfs_iglock_given_to_change(struct cfs_fs *fs, const struct cfs_glock *gl);
/* The number (fs->grants) of the grant of the glock covering inode blk (0 on one node). */
uint64_t cfs_iglock_grant_seq(struct cfs_fs *fs, uint64_t blk);
/* Keep a granted inode glock across a stretch without fs->lock (data I/O). */
int cfs_iglock_hold(struct cfs_fs *fs, uint64_t blk);
void cfs_iglock_unhold(struct cfs_fs *fs, uint64_t blk);
/* cfs_iglock_unhold after a write of inode blk; more: its rest comes next (CFS_W_MORE). */
void cfs_iglock_unhold_write(struct cfs_fs *fs, uint64_t blk, bool more, uint32_t tid);
/* Is the rest of the write that keep_for's glock waits for still to come? (iglock.c) */
bool cfs_iglock_rest_due(const struct cfs_glock *gl);
/* A name of directory blk was added, removed or replaced, under its glock EX. */
void cfs_iglock_names_changed(struct cfs_fs *fs, uint64_t blk);
/* How long the kernel may keep a name read or made in directory blk by a call begun at
 * since_ns (ms, 0: not at all): its glock is then kept until the name has expired when
 * another node wants to change names there.  None if this node gave the glock up since, or
 * in the second before, or another node asks for it. */
unsigned cfs_iglock_lease_names(struct cfs_fs *fs, uint64_t blk, uint64_t since_ns);
/* Queue an inode glock another node wants for the committer, waking it if wake (any thread). */
void cfs_iglock_wanted(struct cfs_fs *fs, struct cfs_glock *gl, bool wake);
/* Act on queued wishes, and give up the oldest grants past the cache limit (fs->lock held). */
void cfs_iglock_act(struct cfs_fs *fs);
/* Inode blk left memory (fs->lock held). */
void cfs_iglock_inode_gone(struct cfs_fs *fs, uint64_t blk);
/* Queue for cfs_iglock_act the glocks of spans read here none of whose inodes is in memory
 * any more (the committer, fs->lock held). */
void cfs_iglock_let_idle_go(struct cfs_fs *fs);

/* Begin and end every public operation: the filesystem lock, a hold of the metadata glock
 * (PR to look, EX to change), the transaction's size, the cache's size.  An operation that
 * took its holds itself ends with cfs_op_boundary (everything but the unhold). */
int cfs_op_begin(struct cfs_fs *fs, bool change);
/* cfs_op_begin(fs, false), or -EAGAIN at once where that would wait for another node (an
 * answer that must come while a node holds the metadata glock EX or is being recovered). */
int cfs_op_begin_now(struct cfs_fs *fs);
/* An operation that changes one inode and allocates or frees nothing: the metadata glock
 * PR and that inode's EX, so that nodes changing different files need not take turns. */
int cfs_op_begin_inode(struct cfs_fs *fs);
void cfs_op_end(struct cfs_fs *fs);
void cfs_op_boundary(struct cfs_fs *fs);
/* Set a file's size, freeing or zeroing what lies past it; ip->io held exclusive. */
int cfs_truncate_locked(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t size);
void cfs_fill_stat(const struct cfs_fs *fs, const struct cfs_inode *ip, struct stat *st);

/* Make room for n elements of size bytes in *v (capacity *cap, grown by doubling). */
int cfs_reserve(void **v, size_t *cap, size_t n, size_t size);
/* A table of *n elements of size bytes, open addressing on a non-zero uint64_t key at each
 * element's start (0: a free slot): the element of key, added zeroed but for its key if there
 * was none (*added), the table grown as it fills.  NULL: out of memory.  Pointers into the
 * table last until the next element is added. */
void *cfs_table_slot(void **v, size_t *cap, size_t *n, size_t size, uint64_t key, bool *added);
/* The element of key in such a table, NULL if none. */
void *cfs_table_find(void *v, size_t cap, size_t size, uint64_t key);

void cfs_log(const struct cfs_fs *fs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* No node of the cluster holds a slot of this filesystem (every slot lock is free). */
int cfs_cluster_idle(struct cvm_volume *vol, const struct cfs_dsuper *sb, const char *proto);
/* Take the node-local lock on the volume: exclusive (mkfs, fsck, local mounts) or shared. */
int cfs_volume_claim(struct cvm_volume *vol, bool exclusive, int *fd_out);

#endif
