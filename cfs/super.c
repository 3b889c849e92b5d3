/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The superblock and its backup, and the geometry they describe. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t cfs_ag_first(const struct cfs_dsuper *sb, uint32_t ag)
{
	return sb->ag_start + (uint64_t)ag * sb->ag_blocks;
}

uint32_t cfs_ag_size(const struct cfs_dsuper *sb, uint32_t ag)
{
	uint64_t first = cfs_ag_first(sb, ag);
	uint64_t left = sb->total_blocks > first ? sb->total_blocks - first : 0;
	return left < sb->ag_blocks ? (uint32_t)left : sb->ag_blocks;
}

/* mkfs's journals lie in a row before the first group; a slot added later has its own
 * journal inside the groups, and no slot past nslots has one. */
static bool journals_placed(const struct cfs_dsuper *sb)
{
	uint64_t row = sb->ag_start - sb->journal_start;
	if (sb->ag_start <= sb->journal_start || row % sb->journal_blocks)
		return false;
	uint64_t made = row / sb->journal_blocks;
	if (made == 0 || made > sb->nslots)
		return false;
	for (uint32_t s = 0; s < CFS_MAX_SLOTS; s++) {
		uint64_t at = sb->slot_journal[s];
		bool want = s >= made && s < sb->nslots;
		if (want != (at != 0) ||
		    (want && (at < sb->ag_start || at + sb->journal_blocks > sb->total_blocks)))
			return false;
	}
	return true;
}

/* An inode the superblock names: 0 where optional, or a block of a group that is not its
 * header. */
static bool names_inode(const struct cfs_dsuper *sb, uint64_t ino, bool optional)
{
	if (!ino)
		return optional;
	return ino >= sb->ag_start && ino < sb->total_blocks && (ino - sb->ag_start) % sb->ag_blocks;
}

/* Each inode the superblock names once, and no other object named by two of its fields. */
static bool named_once(const struct cfs_dsuper *sb)
{
	uint64_t named[1 + 2 * CFS_MAX_SLOTS + 3];
	unsigned n = 0;
	named[n++] = sb->root_ino;
	for (uint32_t s = 0; s < sb->nslots && s < CFS_MAX_SLOTS; s++) {
		named[n++] = sb->orphan_dir[s];
		named[n++] = sb->quota_slot_ino[s];
	}
	for (unsigned t = 0; t < 3; t++)
		named[n++] = sb->quota_ino[t];
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < i; j++)
			if (named[i] && named[i] == named[j])
				return false;
	return true;
}

static bool inodes_named(const struct cfs_dsuper *sb)
{
	if (!names_inode(sb, sb->root_ino, false) || !named_once(sb))
		return false;
	for (uint32_t s = 0; s < CFS_MAX_SLOTS; s++)
		if (!names_inode(sb, sb->orphan_dir[s], s >= sb->nslots) ||
		    (s >= sb->nslots && sb->orphan_dir[s]) ||
		    !names_inode(sb, sb->quota_slot_ino[s], true))
			return false;
	for (unsigned t = 0; t < 3; t++)
		if (!names_inode(sb, sb->quota_ino[t], true))
			return false;
	return true;
}

int cfs_super_check(const struct cfs_dsuper *sb, uint64_t volume_bytes, const char **why)
{
	uint32_t bs = sb->block_size;
	*why = NULL;
	if (bs < CFS_MIN_BLOCK || bs > CFS_MAX_BLOCK || (bs & (bs - 1)))
		*why = "block size is not a power of two between 4 KiB and 64 KiB";
	else if (sb->total_blocks * bs > volume_bytes)
		*why = "the filesystem is larger than its volume (a LUN missing from the volume?)";
	else if (sb->nslots == 0 || sb->nslots > CFS_MAX_SLOTS)
		*why = "number of node slots out of range";
	else if (sb->journal_start != 2 || sb->journal_blocks < 16 || !journals_placed(sb))
		*why = "journal geometry is inconsistent";
	else if (sb->ag_blocks < 16 || sb->ag_blocks > CFS_AG_MAX_BLOCKS(bs) || sb->nags == 0 ||
		 cfs_ag_first(sb, sb->nags - 1) >= sb->total_blocks ||
		 cfs_ag_first(sb, sb->nags) < sb->total_blocks)
		*why = "allocation group geometry is inconsistent";
	else if (!inodes_named(sb))
		*why = "an inode it names (root, orphan directory, quota) is no inode block";
	else if (sb->lockproto[0] && !cfs_super_lockproto(sb))
		*why = "unknown lock protocol";
	return *why ? -EUCLEAN : 0;
}

static int read_copy(struct cvm_volume *vol, uint64_t blkno, struct cfs_dsuper *sb)
{
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, CFS_MIN_BLOCK))
		return -ENOMEM;
	/* The block size is in the superblock: read 4 KiB, then the whole block if larger. */
	int rc = cvm_volume_read(vol, b, CFS_MIN_BLOCK, blkno * CFS_MIN_BLOCK);
	const struct cfs_dsuper *d = (const void *)b;
	uint32_t bs = d->block_size;
	if (!rc && (d->h.magic != CFS_MAGIC || d->h.type != CFS_B_SUPER))
		rc = -ENODATA;
	if (!rc && (bs < CFS_MIN_BLOCK || bs > CFS_MAX_BLOCK || (bs & (bs - 1))))
		rc = -EUCLEAN;
	if (!rc && bs != CFS_MIN_BLOCK) {
		uint8_t *big;
		if (posix_memalign((void **)&big, 4096, bs)) {
			free(b);
			return -ENOMEM;
		}
		rc = cvm_volume_read(vol, big, bs, blkno * bs);
		free(b);
		b = big;
	}
	const char *why;
	if (!rc && cfs_block_verify(b, bs, blkno, CFS_B_SUPER, 0, &why))
		rc = -EUCLEAN;
	if (!rc)
		memcpy(sb, b, sizeof *sb);
	free(b);
	return rc;
}

int cfs_super_read_primary(struct cvm_volume *vol, struct cfs_dsuper *sb)
{
	return read_copy(vol, 0, sb);
}

/* The backup, if it is sound (its checksum and cfs_super_check; else *why, if it got that
 * far).  It is block 1 in units of the primary's block size: every size is tried. */
static int read_backup(struct cvm_volume *vol, struct cfs_dsuper *sb, const char **why)
{
	for (uint32_t bs = CFS_MIN_BLOCK; bs <= CFS_MAX_BLOCK; bs *= 2) {
		uint8_t *b;
		if (posix_memalign((void **)&b, 4096, bs))
			return -ENOMEM;
		const char *w;
		if (!cvm_volume_read(vol, b, bs, bs) &&
		    !cfs_block_verify(b, bs, 1, CFS_B_SUPER, 0, &w) &&
		    ((struct cfs_dsuper *)b)->block_size == bs) {
			memcpy(sb, b, sizeof *sb);
			free(b);
			return cfs_super_check(sb, cvm_volume_size(vol), why);
		}
		free(b);
	}
	return -EUCLEAN;
}

static bool features_known(const struct cfs_dsuper *sb)
{
	bool ro;
	return !cfs_features_check(sb, "", false, &ro) && !ro;
}

/* Block blkno into b (bs bytes), sealed as a block of that type and owner. */
static bool read_sound(struct cvm_volume *vol, uint32_t bs, uint64_t blkno, uint16_t type,
		       uint64_t owner, uint8_t *b)
{
	const char *why;
	return !cvm_volume_read(vol, b, bs, blkno * bs) &&
	       !cfs_block_verify(b, bs, blkno, type, owner, &why);
}

/* Block ino is an inode of type S_IFMT bits type; with records, its first extent's first
 * block is one of its quota records.  b: room for a block. */
static bool inode_is(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint64_t ino,
		     uint32_t type, bool records, uint8_t *b)
{
	if (!ino)
		return true;
	uint32_t bs = sb->block_size;
	const struct cfs_dinode *d = (const void *)b;
	const struct cfs_dextent *e = (const void *)(b + CFS_INODE_EXT_OFF);
	if (!read_sound(vol, bs, ino, CFS_B_INODE, ino, b) || (d->mode & S_IFMT) != type)
		return false;
	uint64_t first = records && d->nextents ? e->pblk : 0;
	return !first || (first < sb->total_blocks && read_sound(vol, bs, first, CFS_B_QUOTA, ino, b));
}

static bool system_inodes_sound(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint8_t *b)
{
	bool sound = inode_is(vol, sb, sb->root_ino, S_IFDIR, false, b);
	for (uint32_t s = 0; s < sb->nslots && sound; s++)
		sound = inode_is(vol, sb, sb->orphan_dir[s], S_IFDIR, false, b) &&
			inode_is(vol, sb, sb->quota_slot_ino[s], S_IFREG, true, b);
	for (unsigned t = 0; t < 3 && sound; t++)
		sound = inode_is(vol, sb, sb->quota_ino[t], S_IFREG, true, b);
	return sound;
}

/* Of the entries of the root's first bucket, how many more hash to what they say under seed
 * a than under seed b. */
static long seed_fits_better(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t a,
			     uint32_t b_seed, uint8_t *b)
{
	uint32_t bs = sb->block_size;
	const struct cfs_dinode *d = (const void *)b;
	const struct cfs_dextent *e = (const void *)(b + CFS_INODE_EXT_OFF);
	if (!read_sound(vol, bs, sb->root_ino, CFS_B_INODE, sb->root_ino, b) || !d->nextents ||
	    e->lblk != 0 || e->pblk >= sb->total_blocks ||
	    !read_sound(vol, bs, e->pblk, CFS_B_BUCKET, sb->root_ino, b))
		return 0;
	const struct cfs_ddirb *h = (const void *)b;
	uint32_t used = h->used < bs - CFS_DIRB_OFF ? h->used : bs - CFS_DIRB_OFF;
	long better = 0;
	for (uint32_t o = 0; o + CFS_DIRENT_FIXED <= used;) {
		const uint8_t *p = b + CFS_DIRB_OFF + o;
		uint32_t hash;
		memcpy(&hash, p, 4);
		if (o + CFS_DIRENT_FIXED + p[13] > used)
			break;
		better += (hash == cvm_crc32c(a, p + CFS_DIRENT_FIXED, p[13])) -
			  (hash == cvm_crc32c(b_seed, p + CFS_DIRENT_FIXED, p[13]));
		o += CFS_DIRENT_FIXED + p[13];
	}
	return better;
}

/* A primary that passes cfs_super_check, yet differs from a sound backup (read into *backup)
 * in a way that the backup explains: it names a format or feature this release does not know
 * (a later release writes both copies alike), a directory hash seed the root's names do not
 * hash with, or inodes that are not what it says they are (the root a file, a quota inode
 * someone's file).  A bug wrote a field wrong: the backup is the truth. */
static bool primary_wrong(struct cvm_volume *vol, const struct cfs_dsuper *sb,
			  struct cfs_dsuper *backup)
{
	const char *why;
	if (read_backup(vol, backup, &why) ||
	    !memcmp((const uint8_t *)backup + sizeof backup->h, (const uint8_t *)sb + sizeof sb->h,
		    sizeof *sb - sizeof sb->h))
		return false;
	if (!features_known(sb) && features_known(backup))
		return true;
	uint8_t *b; /* a block of either copy's size */
	if (posix_memalign((void **)&b, 4096, CFS_MAX_BLOCK))
		return false;
	bool wrong = (backup->hash_seed != sb->hash_seed &&
		      seed_fits_better(vol, sb, backup->hash_seed, sb->hash_seed, b) > 0) ||
		     (!system_inodes_sound(vol, sb, b) && system_inodes_sound(vol, backup, b));
	free(b);
	return wrong;
}

int cfs_super_read(struct cvm_volume *vol, struct cfs_dsuper *sb, bool *used_backup)
{
	const char *why = NULL;
	struct cfs_dsuper backup;
	int rc = read_copy(vol, 0, sb);
	if (!rc && !cfs_super_check(sb, cvm_volume_size(vol), &why)) {
		bool wrong = primary_wrong(vol, sb, &backup);
		if (wrong)
			*sb = backup;
		if (used_backup)
			*used_backup = wrong;
		return 0;
	}
	int primary = rc ? rc : -EUCLEAN;
	if (!(rc = read_backup(vol, sb, &why))) {
		if (used_backup)
			*used_backup = true;
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	if (primary == -ENODATA && !why) {
		cfs_set_error("no CFS filesystem on volume %s: run mkfs.cfs first",
			      cvm_volume_config(vol)->name);
		return -ENODATA;
	}
	cfs_set_error("the superblock of volume %s is damaged (%s): run fsck.cfs",
		      cvm_volume_config(vol)->name, why ? why : "bad checksum in both copies");
	return -EUCLEAN;
}

int cfs_super_journal(struct cfs_fs *fs, const struct cfs_dsuper *sb)
{
	for (uint64_t blkno = 0; blkno < 2; blkno++) {
		struct cfs_buf *b;
		int rc = cfs_bnew(fs, blkno, CFS_B_SUPER, 0, &b);
		if (rc)
			return rc;
		size_t hdr = sizeof(struct cfs_bhdr);
		memcpy(b->data + hdr, (const uint8_t *)sb + hdr, sizeof *sb - hdr);
	}
	return 0;
}

int cfs_super_write(struct cvm_volume *vol, const struct cfs_dsuper *sb)
{
	uint32_t bs = sb->block_size;
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, bs))
		return -ENOMEM;
	int rc = 0;
	for (uint64_t blkno = 0; blkno < 2 && !rc; blkno++) {
		memset(b, 0, bs);
		memcpy(b, sb, sizeof *sb);
		struct cfs_dsuper *d = (void *)b;
		d->h.magic = CFS_MAGIC;
		d->h.type = CFS_B_SUPER;
		d->h.version = CFS_VERSION;
		d->h.blkno = blkno;
		cfs_block_seal(b, bs);
		rc = cvm_volume_write(vol, b, bs, blkno * bs);
	}
	free(b);
	return rc ? rc : cvm_volume_flush(vol);
}

/* ---- the lock protocol ---- */
static const char *const protocols[] = {"local", "corosync", "dlm"};

bool cfs_lockproto_valid(const char *name)
{
	for (size_t i = 0; i < sizeof protocols / sizeof *protocols; i++)
		if (!strcmp(name, protocols[i]))
			return true;
	return false;
}

int cfs_lockproto_check(const char *name)
{
	if (cfs_lockproto_valid(name))
		return 0;
	cfs_set_error("lock protocol '%s': give local, corosync or dlm", name);
	return -EINVAL;
}

const char *cfs_super_lockproto(const struct cfs_dsuper *sb)
{
	if (!sb->lockproto[0])
		return "local"; /* made before the protocol was recorded */
	size_t len = strnlen(sb->lockproto, CFS_LOCKPROTO_LEN);
	for (size_t i = 0; i < sizeof protocols / sizeof *protocols; i++)
		if (len == strlen(protocols[i]) && !memcmp(sb->lockproto, protocols[i], len))
			return protocols[i];
	return NULL;
}

/* A journal that holds a transaction belongs to a mounted node or one that died mounted:
 * the protocol must not change under either. */
static int check_journals_empty(struct cvm_volume *vol, const struct cfs_dsuper *sb)
{
	for (uint32_t slot = 0; slot < sb->nslots; slot++) {
		struct cfs_jlog log;
		int rc = cfs_journal_read(vol, sb, slot, &log);
		cfs_jlog_free(&log);
		if (rc) {
			cfs_set_error("journal of slot %u cannot be read: %s", slot, strerror(-rc));
			return rc;
		}
		if (log.ntxn) {
			cfs_set_error("the journal of slot %u is not empty: the filesystem on %s is "
				      "mounted on a node, or a node died with it mounted; unmount it "
				      "everywhere (or run fsck.cfs) first", slot,
				      cvm_volume_config(vol)->name);
			return -EBUSY;
		}
	}
	return 0;
}

int cfs_super_offline(struct cvm_volume *vol, const struct cfs_dsuper *sb, int *claim)
{
	const char *proto = cfs_super_lockproto(sb);
	int rc = 0;
	*claim = -1;
	/* A cluster filesystem: ask the lock manager whether any node has it mounted. */
	if (proto && strcmp(proto, "local"))
		rc = cfs_cluster_idle(vol, sb, proto);
	/* Claimed before the journals are read: mounted here, it says so whatever the journal
	 * holds at the moment. */
	if (!rc)
		rc = cfs_volume_claim(vol, true, claim);
	if (!rc)
		rc = check_journals_empty(vol, sb);
	return rc;
}

int cfs_get_lockproto(struct cvm_volume *vol, char *out, size_t len)
{
	struct cfs_dsuper sb;
	int rc = cfs_super_read(vol, &sb, NULL);
	const char *name = rc ? NULL : cfs_super_lockproto(&sb);
	if (!rc)
		snprintf(out, len, "%s", name ? name : "unknown");
	return rc;
}

int cfs_set_lockproto(struct cvm_volume *vol, const char *proto)
{
	if (cfs_lockproto_check(proto))
		return -EINVAL;
	struct cfs_dsuper sb;
	int claim = -1;
	int rc = cfs_super_read(vol, &sb, NULL);
	bool read_only;
	if (!rc)
		rc = cfs_features_check(&sb, cvm_volume_config(vol)->name, true, &read_only);
	if (!rc)
		rc = cfs_super_offline(vol, &sb, &claim);
	if (!rc) {
		memset(sb.lockproto, 0, sizeof sb.lockproto);
		snprintf(sb.lockproto, sizeof sb.lockproto, "%s", proto);
		sb.mtime = (uint64_t)time(NULL);
		rc = cfs_super_write(vol, &sb);
	}
	if (claim >= 0)
		close(claim);
	return rc;
}
