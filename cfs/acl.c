/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POSIX ACLs, kept as the system.posix_acl_access and system.posix_acl_default xattrs in the
 * kernel's format.  With FUSE's POSIX ACL support the kernel checks them, but keeping the mode
 * and the ACL in step, and inheriting default ACLs, is the filesystem's job: as posix_acl
 * chmod, update_mode and create do in the kernel for local filesystems. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"
#define ACL_VERSION 2u
#define ACL_MAX_BYTES 4000u

enum { USER_OBJ = 0x01, USER = 0x02, GROUP_OBJ = 0x04, GROUP = 0x08, MASK = 0x10, OTHER = 0x20 };

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

static int valid(const uint8_t *acl, int len)
{
	uint32_t version;
	if (len < 4 || (len - 4) % 8)
		return 0;
	memcpy(&version, acl, 4);
	return version == ACL_VERSION;
}

static struct acl_entry *entry(uint8_t *acl, int i) { return (struct acl_entry *)(acl + 4 + 8 * i); }

/* The mode bits an ACL implies, and whether it says more than the mode can. */
static mode_t acl_mode(uint8_t *acl, int len, bool *extended)
{
	mode_t mode = 0, group = 0, mask = 0;
	bool has_mask = false;
	*extended = false;
	for (int i = 0; i < (len - 4) / 8; i++) {
		struct acl_entry *e = entry(acl, i);
		switch (e->tag) {
		case USER_OBJ: mode |= (mode_t)(e->perm & 7) << 6; break;
		case GROUP_OBJ: group = e->perm & 7; break;
		case OTHER: mode |= e->perm & 7; break;
		case MASK: mask = e->perm & 7; has_mask = true; *extended = true; break;
		default: *extended = true; break;
		}
	}
	return mode | (has_mask ? mask : group) << 3;
}

/* A new access ACL: the mode follows it; one the mode says all of is not stored. */
int cfs_acl_set_access(struct cfs_fs *fs, struct cfs_inode *ip, const void *value, size_t size,
		       const struct cfs_cred *cr)
{
	uint8_t *acl = (uint8_t *)value;
	if (!valid(acl, (int)size))
		return -EINVAL;
	bool extended;
	mode_t mode = (ip->d.mode & ~0777u) | acl_mode(acl, (int)size, &extended);
	int rc = extended ? cfs_xattr_set(fs, ip, ACL_ACCESS, value, size, 0)
			  : cfs_xattr_remove(fs, ip, ACL_ACCESS);
	if (rc == -ENODATA)
		rc = 0;
	if (!rc)
		ip->d.mode = cfs_setid_chmod(mode, ip->d.gid, cr);
	return rc;
}

/* chmod: the ACL's owner, mask (or group) and other entries take the new bits. */
int cfs_acl_chmod(struct cfs_fs *fs, struct cfs_inode *ip)
{
	uint8_t acl[ACL_MAX_BYTES];
	int len = cfs_xattr_get(fs, ip, ACL_ACCESS, acl, sizeof acl);
	if (len == -ENODATA)
		return 0;
	if (len < 0 || !valid(acl, len))
		return len < 0 ? len : -EIO;
	bool has_mask = false;
	for (int i = 0; i < (len - 4) / 8; i++)
		has_mask |= entry(acl, i)->tag == MASK;
	mode_t m = ip->d.mode;
	for (int i = 0; i < (len - 4) / 8; i++) {
		struct acl_entry *e = entry(acl, i);
		if (e->tag == USER_OBJ)
			e->perm = (m >> 6) & 7;
		else if (e->tag == OTHER)
			e->perm = m & 7;
		else if (e->tag == (has_mask ? MASK : GROUP_OBJ))
			e->perm = (m >> 3) & 7;
	}
	return cfs_xattr_set(fs, ip, ACL_ACCESS, acl, (size_t)len, 0);
}

/* A new inode under a directory with a default ACL: it inherits it (directories keep it as
 * their own default too), and the mode is cut down to what the ACL allows.  Without one, the
 * creator's umask cuts it (POSIX.1e: under a default ACL the umask does not apply). */
int cfs_acl_inherit(struct cfs_fs *fs, struct cfs_inode *dir, struct cfs_inode *ip,
		    uint32_t umask)
{
	uint8_t acl[ACL_MAX_BYTES];
	int len = cfs_xattr_get(fs, dir, ACL_DEFAULT, acl, sizeof acl);
	if (len == -ENODATA) {
		ip->d.mode &= ~(umask & 0777u);
		return 0;
	}
	if (len < 0 || !valid(acl, len))
		return len < 0 ? len : -EIO;
	int rc = 0;
	if (S_ISDIR(ip->d.mode))
		rc = cfs_xattr_set(fs, ip, ACL_DEFAULT, acl, (size_t)len, 0);
	bool has_mask = false;
	for (int i = 0; i < (len - 4) / 8; i++)
		has_mask |= entry(acl, i)->tag == MASK;
	mode_t m = ip->d.mode;
	for (int i = 0; !rc && i < (len - 4) / 8; i++) {
		struct acl_entry *e = entry(acl, i);
		if (e->tag == USER_OBJ)
			e->perm &= (m >> 6) & 7;
		else if (e->tag == OTHER)
			e->perm &= m & 7;
		else if (e->tag == (has_mask ? MASK : GROUP_OBJ))
			e->perm &= (m >> 3) & 7;
	}
	return rc ? rc : cfs_acl_set_access(fs, ip, acl, (size_t)len, NULL);
}

bool cfs_acl_is_access(const char *name) { return !strcmp(name, ACL_ACCESS); }

/* The caller's own group needs no look at its other groups. */
static bool in_group(const struct cfs_cred *cr, uint32_t gid)
{
	return cr->gid == gid || (cfs_cred_privileges(cr, gid) & CFS_CRED_IN_GROUP);
}

/* The permission bits (rwx) the access ACL grants cr, POSIX.1e's algorithm: the owner entry,
 * else a named user entry, else every group entry that matches (owning group, named groups:
 * granted if one of them grants it all), else other; named entries and groups are masked.
 * want: the bits asked for, which a matching group entry must hold. */
static unsigned acl_grants(uint8_t *acl, int len, const struct cfs_inode *ip,
			   const struct cfs_cred *cr, unsigned want)
{
	int n = (len - 4) / 8;
	unsigned mask = 7, other = 0;
	for (int i = 0; i < n; i++) {
		const struct acl_entry *e = entry(acl, i);
		if (e->tag == MASK)
			mask = e->perm & 7;
		else if (e->tag == OTHER)
			other = e->perm & 7;
	}
	for (int i = 0; i < n; i++) {
		const struct acl_entry *e = entry(acl, i);
		if (e->tag == USER_OBJ && cr->uid == ip->d.uid)
			return e->perm & 7;
	}
	for (int i = 0; i < n; i++) {
		const struct acl_entry *e = entry(acl, i);
		if (e->tag == USER && e->id == cr->uid)
			return e->perm & mask;
	}
	bool matched = false;
	for (int i = 0; i < n; i++) {
		const struct acl_entry *e = entry(acl, i);
		uint32_t gid = e->tag == GROUP_OBJ ? ip->d.gid : e->id;
		if ((e->tag != GROUP_OBJ && e->tag != GROUP) || !in_group(cr, gid))
			continue;
		matched = true;
		if ((e->perm & mask & want) == want)
			return e->perm & mask;
	}
	return matched ? 0 : other;
}

int cfs_acl_permission(struct cfs_fs *fs, struct cfs_inode *ip, unsigned want,
		       const struct cfs_cred *cr)
{
	mode_t m = ip->d.mode;
	if (cr->uid == 0) /* CAP_DAC_OVERRIDE: all but running what nobody may run */
		return (want & 1) && !S_ISDIR(m) && !(m & 0111) ? -EACCES : 0;
	uint8_t acl[ACL_MAX_BYTES];
	int len = cfs_xattr_get(fs, ip, ACL_ACCESS, acl, sizeof acl);
	unsigned granted;
	if (len > 0 && valid(acl, len))
		granted = acl_grants(acl, len, ip, cr, want);
	else if (cr->uid == ip->d.uid)
		granted = (m >> 6) & 7;
	else if (in_group(cr, ip->d.gid))
		granted = (m >> 3) & 7;
	else
		granted = m & 7;
	return (granted & want) == want ? 0 : -EACCES;
}

