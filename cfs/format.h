/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The on-disk format of CFS, documented for people in man/cfs.5.
 *
 * The filesystem lives on a CVM volume, addressed in blocks of block_size bytes (4 KiB to
 * 64 KiB).  Every metadata block starts with struct cfs_bhdr: a magic, its type, a crc32c of
 * the whole block, and its identity (its own block number and the object it belongs to), so a
 * misdirected or torn write is caught on read.  Integers are little-endian (the build refuses
 * big-endian hosts).
 *
 *   block 0                    superblock
 *   block 1                    backup superblock
 *   journal_start ...          one journal of journal_blocks per node slot made by mkfs
 *   ag_start + i * ag_blocks   allocation group i: a header block holding the group's bitmap,
 *                              then the blocks it hands out (inodes, directory buckets,
 *                              extent and xattr blocks, file data)
 *
 * An inode is one block; its number is its block number.  Directories are linear-hashed:
 * bucket b is logical block b of the directory, entries that do not fit chain into overflow
 * blocks.
 */
#ifndef CFS_FORMAT_H
#define CFS_FORMAT_H

#include <assert.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "CFS's on-disk structures are little-endian; this host is not"
#endif

#define CFS_MAGIC 0x42534643u /* "CFSB" */
#define CFS_VERSION 1 /* of every block header; journal blocks say their journal format */
#define CFS_MIN_BLOCK 4096u
#define CFS_MAX_BLOCK 65536u
#define CFS_MAX_SLOTS 64u
#define CFS_LABEL_MAX 63u
#define CFS_NAME_MAX 255u
#define CFS_MAX_FILE_BYTES (1ull << 50) /* 1 PiB of logical size */
#define CFS_FORMAT 2 /* the superblock's format this release writes; 0 and 1 read as 2 */
enum cfs_feature_word { CFS_COMPAT, CFS_RO_COMPAT, CFS_INCOMPAT, CFS_FEATURE_WORDS };
#define CFS_FEATURE_NAMES 48u
/* incompat: journals are written in journal format 3 (struct cfs_djcommit) */
#define CFS_FEAT_JOURNAL_V3 (1u << 0)
/* ro_compat: inodes carry project ids that new files inherit (cfs/project.c) */
#define CFS_FEAT_PROJECT (1u << 0)
/* ro_compat: usage and limits per user, group and project (cfs/quota.c, superblock quota_ino) */
#define CFS_FEAT_QUOTA (1u << 1)
/* incompat: a 'cfs tune' was interrupted; its name entry names the feature it was turning on */
#define CFS_FEAT_TUNING (1u << 31)

enum cfs_block_type {
	CFS_B_SUPER = 1,
	CFS_B_AGH = 2,     /* allocation group header and bitmap */
	CFS_B_INODE = 3,
	CFS_B_BUCKET = 4,  /* directory bucket */
	CFS_B_DIROVF = 5,  /* directory overflow */
	CFS_B_EXTENTS = 6, /* extent map overflow */
	CFS_B_XATTR = 7,
	CFS_B_JDESC = 8,   /* journal descriptor */
	CFS_B_JCOMMIT = 9, /* journal commit */
	CFS_B_QUOTA = 10,  /* quota records (owner: the quota inode) */
};

struct cfs_bhdr {
	uint32_t magic;
	uint16_t type;
	uint16_t version;
	uint32_t crc;   /* crc32c of the whole block with this field zero */
	uint32_t reserved;
	uint64_t blkno; /* where this block belongs */
	uint64_t owner; /* inode number, group index or journal slot */
};
static_assert(sizeof(struct cfs_bhdr) == 32, "block header is 32 bytes");

struct cfs_dsuper {
	struct cfs_bhdr h;
	uint8_t fs_uuid[16];
	uint8_t vol_uuid[16];   /* the CVM volume it was made on */
	char label[CFS_LABEL_MAX + 1];
	uint32_t block_size;
	uint32_t nslots;
	uint64_t total_blocks;  /* blocks of the volume the filesystem covers */
	uint64_t journal_start;
	uint32_t journal_blocks; /* per slot */
	uint32_t ag_blocks;      /* blocks per group; the last group may be shorter */
	uint64_t ag_start;
	uint32_t nags;
	uint32_t hash_seed;      /* directory name hashing */
	uint64_t root_ino;
	uint64_t ctime, mtime;
	uint64_t generation;     /* bumped by every grow and every slot added */
	uint64_t orphan_dir[CFS_MAX_SLOTS]; /* per slot: unlinked inodes still open */
	/* The lock protocol every mount must use ("local", "corosync", "dlm"); all zeros, as on
	 * filesystems made before it was recorded, means "local". */
	char lockproto[16];
	/* Where the journal of a slot added while mounted starts (journal_blocks blocks taken
	 * from an allocation group); 0 for the slots mkfs made, whose journals lie in a row
	 * from journal_start up to ag_start. */
	uint64_t slot_journal[CFS_MAX_SLOTS];
	/* From release 0.2 on: the format, and what of it this filesystem uses (cfs(5),
	 * "Format and features").  A release mounts a filesystem only if it knows every
	 * incompat feature set, and mounts it read-only if it does not know a ro_compat one.
	 * Filesystems made before 0.2 have zeros here, the same as format 2 without features:
	 * so has a superblock that a 0.1 node rewrote (it writes only the fields above). */
	uint32_t format;
	uint32_t features[CFS_FEATURE_WORDS];
	/* Every feature bit set is named here, with the release that knows it first, so that a
	 * release that does not can say which feature and which release to run instead. */
	struct cfs_dfeature {
		uint8_t word, bit;
		char name[22];
		char release[8];
	} feature_names[CFS_FEATURE_NAMES];
	/* With the feature 'quota': the inodes holding the user, group and project records
	 * (struct cfs_dquot), named by nothing else. */
	uint64_t quota_ino[3];
	/* With 'quota', per slot: the inode of the grants its node holds and what it charged
	 * against them since the last fold (struct cfs_dquot_change; quota_grant.c); 0 until
	 * the slot's node first takes a grant. */
	uint64_t quota_slot_ino[CFS_MAX_SLOTS];
};
#define CFS_LOCKPROTO_LEN 16u
static_assert(sizeof(struct cfs_dsuper) <= CFS_MIN_BLOCK, "superblock fits a block");

/* Allocation group header; the bitmap (bit set = used) follows at CFS_AGH_BITMAP_OFF and covers
 * the group's blocks, the header block included. */
struct cfs_dagh {
	struct cfs_bhdr h;
	uint64_t start;   /* first block */
	uint32_t nblocks;
	uint32_t nfree;
};
#define CFS_AGH_BITMAP_OFF 64u
#define CFS_AG_MAX_BLOCKS(bs) (((bs) - CFS_AGH_BITMAP_OFF) * 8u)

struct cfs_dextent {
	uint64_t lblk;  /* first logical block of the file */
	uint64_t pblk;  /* first block on the volume */
	uint32_t len;   /* blocks */
	uint32_t flags; /* CFS_EXT_UNWRITTEN: allocated, reads as zeros */
};
#define CFS_EXT_UNWRITTEN 1u
static_assert(sizeof(struct cfs_dextent) == 24, "extent is 24 bytes");

struct cfs_dinode {
	struct cfs_bhdr h; /* owner = blkno = inode number */
	uint32_t mode, uid, gid, nlink;
	uint64_t size;
	uint64_t nblocks; /* data and map blocks held */
	int64_t atime, mtime, ctime, btime;
	uint32_t atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint64_t generation;
	uint64_t parent;   /* directories: the ".." inode */
	uint64_t rdev;
	uint32_t flags;
	uint32_t nextents; /* in all: inline first, then the overflow chain */
	uint64_t ext_next; /* first extent overflow block, 0 if none */
	uint64_t xattr_block;
	uint32_t xattr_len; /* bytes used in the inline xattr area */
	uint32_t dir_level; /* directories: 2^level buckets, plus dir_split split ones */
	uint32_t dir_split;
	uint32_t projid;    /* the feature 'project': its project (project.c); else 0 */
	uint64_t dir_entries;
};
#define CFS_INODE_XATTR_OFF 256u
#define CFS_INODE_XATTR_LEN 1024u
#define CFS_INODE_EXT_OFF (CFS_INODE_XATTR_OFF + CFS_INODE_XATTR_LEN)
#define CFS_INODE_EXTENTS(bs) (((bs) - CFS_INODE_EXT_OFF) / sizeof(struct cfs_dextent))
static_assert(sizeof(struct cfs_dinode) <= CFS_INODE_XATTR_OFF, "inode fields fit");

/* Extent map overflow block: extents follow at CFS_EXTB_OFF. */
struct cfs_dextb {
	struct cfs_bhdr h;
	uint64_t next;
	uint32_t count;
	uint32_t reserved;
};
#define CFS_EXTB_OFF 64u
#define CFS_EXTB_EXTENTS(bs) (((bs) - CFS_EXTB_OFF) / sizeof(struct cfs_dextent))

/* Directory bucket or overflow block.  Entries follow at CFS_DIRB_OFF, packed:
 * hash (4), inode (8), type (1, DT_*), name length (1), name. */
struct cfs_ddirb {
	struct cfs_bhdr h;
	uint64_t next;  /* overflow chain */
	uint32_t count;
	uint32_t used;  /* bytes of entries */
};
#define CFS_DIRB_OFF 64u
#define CFS_DIRENT_FIXED 14u

/* Quota block: logical block L of a quota inode holds the records of ids L * R to
 * L * R + R - 1 (R = CFS_DQUOTS_PER_BLOCK), from CFS_DQUOT_OFF.  A hole reads as records of
 * zeros: no use, no limit.  Sizes in bytes; a limit of 0 is none. */
struct cfs_dquot {
	uint64_t used_bytes, used_inodes;
	uint64_t soft_bytes, hard_bytes, soft_inodes, hard_inodes;
	uint64_t grace;            /* seconds a soft limit may be passed; 0: CFS_QUOTA_GRACE */
	int64_t bytes_over_since;  /* when usage passed the soft limit (seconds); 0: under */
	int64_t inodes_over_since;
	/* Of the limit, what the slots' grants hold (the sum of their grant_bytes and
	 * grant_inodes that are not CFS_QUOTA_UNLIMITED). */
	uint64_t granted_bytes, granted_inodes;
	uint8_t reserved[40];
};
static_assert(sizeof(struct cfs_dquot) == 128, "quota record is 128 bytes");
#define CFS_DQUOT_OFF 64u
#define CFS_DQUOTS_PER_BLOCK(bs) (((bs) - CFS_DQUOT_OFF) / sizeof(struct cfs_dquot))
#define CFS_QUOTA_GRACE (7u * 24 * 3600)

/* A slot's grant of one id (block type CFS_B_QUOTA, owner: the slot's quota_slot_ino).  Block
 * T * CFS_QCHANGE_TYPE_SPAN + N / R of that inode holds the records of type T's ids N, N % R
 * the slot (R = CFS_QCHANGES_PER_BLOCK).  Only the slot's node changes them, in its own
 * journal, except a node holding the metadata glock EX that folds them (quota_grant.c). */
struct cfs_dquot_change {
	int64_t delta_bytes, delta_inodes;  /* charged here since the last fold */
	uint64_t grant_bytes, grant_inodes; /* what may be charged here: at most this delta */
};
static_assert(sizeof(struct cfs_dquot_change) == 32, "quota change record is 32 bytes");
#define CFS_QUOTA_UNLIMITED UINT64_MAX /* a grant of an id with no limit of that kind */
#define CFS_QCHANGES_PER_BLOCK(bs) (((bs) - CFS_DQUOT_OFF) / sizeof(struct cfs_dquot_change))
#define CFS_QCHANGE_TYPE_SPAN (1ull << 26) /* blocks: 2^32 ids at 126 per 4 KiB block */

/* Xattr entry: name length (1), reserved (1), value length (2), name, value.  Xattr block:
 * the same entry list as the inline area, from CFS_XATTRB_OFF. */
#define CFS_XATTR_FIXED 4u
#define CFS_XATTRB_OFF 32u

/* Journal: a circular log of transactions.  Block 0 of a slot's journal is its anchor, a
 * descriptor with count 0: the sequence number the next transaction takes and the log_id
 * every transaction written after it carries (chosen anew at each anchor, so that nothing
 * written before it, by an earlier log or an earlier filesystem on the same LUNs, can pass
 * for a transaction of this log).  A transaction is its descriptor (count > 0, the targets)
 * at any block from 1 on, count block images, and a commit block whose images_crc proves they
 * were all written; it never wraps past the journal's end (it starts at block 1 instead).
 * Replay applies the longest run of consecutive sequence numbers that ends at the newest
 * whole transaction of the anchor's log.  A format-1 journal that still holds its one
 * transaction at block 0 (count > 0, log_id 0) is replayed as such. */
struct cfs_djdesc {
	struct cfs_bhdr h; /* owner = slot */
	uint64_t seq;
	uint32_t count;    /* 0: the anchor */
	uint32_t log_id;
	/* Blocks this transaction frees that it or an earlier transaction of its log holds an
	 * image of: a replay puts none of those images home (the blocks may hold data since). */
	uint32_t revokes;
	/* uint64_t target[count], then uint64_t revoked[revokes], at CFS_JDESC_OFF */
};
#define CFS_JDESC_OFF 64u
static_assert(sizeof(struct cfs_djdesc) <= CFS_JDESC_OFF, "journal descriptor header fits");
#define CFS_JDESC_MAX(bs) (((bs) - CFS_JDESC_OFF) / 8u)

/* The journal format of a transaction is its blocks' header version: CFS_VERSION (format 2,
 * the one above) or CFS_JOURNAL_V3, written while the feature journal_v3 is on.  Format 3's
 * commit proves its descriptor too (the targets and revokes it names), and says which node
 * committed it and when, for the log lines of a replay. */
#define CFS_JOURNAL_V3 3
struct cfs_djcommit {
	struct cfs_bhdr h;
	uint64_t seq;
	uint32_t count;
	uint32_t images_crc; /* crc32c of the images in order; format 3: of descriptor, images */
	uint32_t log_id;
	uint32_t node;       /* format 3: the committing node's cluster id (0: local locks) */
	uint64_t time_ns;    /* format 3: CLOCK_REALTIME at the commit */
};

#endif
