/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* 'cfs show' and 'cfs tune': the superblock's format and features, shown and changed.
 *
 * A tune works on a filesystem unmounted everywhere, with every journal empty (the lock
 * manager and the journals say so, as for 'cfs lockproto').  It first sets the in-progress
 * bit, naming the change, in both superblocks; then does the work; then writes the new
 * features and clears the bit.  A tune killed in between leaves the bit, which stops every
 * mount until the tune is run again, or fsck.cfs -y rolls it back. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cfs_info(struct cvm_volume *vol, struct cfs_info *out)
{
	struct cfs_dsuper sb;
	memset(out, 0, sizeof *out);
	int rc = cfs_super_read(vol, &sb, NULL);
	if (rc)
		return rc;
	snprintf(out->label, sizeof out->label, "%s", sb.label);
	cvm_uuid u;
	memcpy(u.b, sb.fs_uuid, 16);
	cvm_uuid_format(&u, out->fs_uuid);
	const char *proto = cfs_super_lockproto(&sb);
	snprintf(out->lockproto, sizeof out->lockproto, "%s", proto ? proto : "unknown");
	out->format = sb.format ? sb.format : CFS_FORMAT;
	out->block_size = sb.block_size;
	out->nslots = sb.nslots;
	out->journal_blocks = sb.journal_blocks;
	out->nags = sb.nags;
	out->total_blocks = sb.total_blocks;
	out->generation = sb.generation;
	out->ctime = sb.ctime;
	out->mtime = sb.mtime;
	memcpy(out->features, sb.features, sizeof out->features);
	cfs_features_describe(&sb, out->feature_list, sizeof out->feature_list);
	bool read_only;
	rc = cfs_features_check(&sb, cvm_volume_config(vol)->name, false, &read_only);
	snprintf(out->usable, sizeof out->usable, "%s%s%s",
		 rc ? "none" : read_only ? "read-only" : "read-write", rc || read_only ? ": " : "",
		 rc || read_only ? cfs_last_error() : "");
	return 0;
}

/* Both superblocks as sb says, flushed. */
static int super_put(struct cvm_volume *vol, struct cfs_dsuper *sb)
{
	sb->mtime = (uint64_t)time(NULL);
	return cfs_super_write(vol, sb);
}

/* The work of a change of journal format: every slot's log begins anew (a new log id), so
 * that no transaction written in the old format is ever taken for one of the new log. */
static int journals_anew(struct cvm_volume *vol, const struct cfs_dsuper *sb)
{
	int rc = 0;
	for (uint32_t s = 0; s < sb->nslots && !rc; s++) {
		struct cfs_jlog log;
		rc = cfs_journal_read(vol, sb, s, &log);
		cfs_jlog_free(&log);
		if (!rc)
			rc = cfs_journal_clear(vol, sb, s, log.next_seq);
	}
	return rc ? rc : cvm_volume_flush(vol);
}

/* Parse "a,^b" into the features to turn on and off, by name: checked before anything. */
static int parse_changes(const char *list, char names[][24], bool *on, int max, int *n)
{
	*n = 0;
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		bool off = *p == '^';
		if (*n == max || len - off == 0 || len - off >= 24) {
			cfs_set_error("features '%s': give names separated by commas, '^' before a "
				      "name to turn it off", list);
			return -EINVAL;
		}
		snprintf(names[*n], 24, "%.*s", (int)(len - off), p + off);
		on[*n] = !off;
		if (!cfs_feature_known(names[*n])) {
			cfs_set_error("feature '%s' is not one this release knows (see cfs(5))",
				      names[*n]);
			return -EINVAL;
		}
		(*n)++;
		p += len + (p[len] == ',');
	}
	if (!*n) {
		cfs_set_error("give the features to change (-O)");
		return -EINVAL;
	}
	return 0;
}

/* The superblock, if this release may tune it now: it knows every feature (an interrupted
 * tune's bit aside: running the tune again finishes it), and nobody has it mounted. */
static int tunable(struct cvm_volume *vol, struct cfs_dsuper *sb, int *claim)
{
	*claim = -1;
	int rc = cfs_super_read(vol, sb, NULL);
	if (rc)
		return rc;
	struct cfs_dsuper untuned = *sb;
	cfs_feature_tuning(&untuned, NULL, false);
	bool read_only;
	rc = cfs_features_check(&untuned, cvm_volume_config(vol)->name, true, &read_only);
	return rc ? rc : cfs_super_offline(vol, sb, claim);
}

int cfs_tune(struct cvm_volume *vol, const char *features, cfs_progress_fn progress, void *arg)
{
	char names[8][24];
	bool on[8];
	int n, claim = -1;
	struct cfs_dsuper sb;
	int rc = parse_changes(features, names, on, 8, &n);
	if (!rc)
		rc = tunable(vol, &sb, &claim);
	if (rc) {
		if (claim >= 0)
			close(claim);
		return rc;
	}
	struct cfs_dsuper tuned = sb;
	for (int i = 0; i < n && !rc; i++)
		rc = cfs_feature_set(&tuned, names[i], on[i]);
	/* The records change with the feature, and with project ids while it is on. */
	uint32_t changed = sb.features[CFS_RO_COMPAT] ^ tuned.features[CFS_RO_COMPAT];
	bool quota_changes = (changed & CFS_FEAT_QUOTA) ||
			     ((changed & CFS_FEAT_PROJECT) &&
			      (tuned.features[CFS_RO_COMPAT] & CFS_FEAT_QUOTA));
	if (rc) {
		close(claim);
		return rc;
	}
	cfs_feature_tuning(&sb, features, true);
	rc = super_put(vol, &sb);
	if (!rc)
		rc = journals_anew(vol, &sb); /* journal_v3's work; harmless for the others */
	for (int i = 0; i < n && !rc; i++)
		rc = cfs_feature_set(&sb, names[i], on[i]);
	if (!rc) {
		cfs_feature_tuning(&sb, NULL, false);
		sb.format = CFS_FORMAT;
		rc = super_put(vol, &sb);
	}
	close(claim);
	/* Quotas on (or project ids under them): the inodes made and the usage counted; off:
	 * the inodes go.  A tune stopped in between leaves a filesystem whose records fsck.cfs -n
	 * finds wrong (or that mounts refuse, no quota inodes) until fsck.cfs -y counts them. */
	if (!rc && quota_changes)
		rc = cfs_quota_build(vol, progress, arg);
	if (rc && !cfs_last_error()[0])
		cfs_set_error("volume %s: %s", cvm_volume_config(vol)->name, strerror(-rc));
	return rc;
}
