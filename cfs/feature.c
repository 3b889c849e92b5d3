/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The superblock's format and feature bits: which this release knows, what a mount, fsck or
 * grow may do with a filesystem that uses others, and the names recorded with them.
 *
 * As OCFS2 and ext4 do: a compat feature is one an older release may ignore, a ro_compat one
 * it may read past but must not write, an incompat one it would misread.  Every change of the
 * format from release 0.2 on comes with a bit.  The superblock names each bit set, with the
 * release that knows it first, so that a release that does not know a bit can still say what
 * it is and what to run (cfs(5), "Format and features"). */
#include "cfs/internal.h"
#include "release.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct known_feature {
	enum cfs_feature_word word;
	uint32_t bit;
	const char *name, *release;
	bool in_default; /* made by mkfs unless asked otherwise */
};

static const struct known_feature known[] = {
	{CFS_INCOMPAT, CFS_FEAT_JOURNAL_V3, "journal_v3", "0.2", true},
	{CFS_RO_COMPAT, CFS_FEAT_PROJECT, "project", "0.2", false},
	{CFS_RO_COMPAT, CFS_FEAT_QUOTA, "quota", "0.2", false},
};
#define NKNOWN (sizeof known / sizeof *known)

static const char *const word_names[CFS_FEATURE_WORDS] = {"compat", "ro_compat", "incompat"};

static const struct known_feature *known_named(const char *name, size_t len)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (strlen(known[i].name) == len && !strncmp(known[i].name, name, len))
			return &known[i];
	return NULL;
}

static bool is_known(enum cfs_feature_word w, uint32_t bit)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (known[i].word == w && known[i].bit == bit)
			return true;
	return w == CFS_INCOMPAT && bit == CFS_FEAT_TUNING;
}

static struct cfs_dfeature *name_entry(struct cfs_dsuper *sb, enum cfs_feature_word w,
				       uint32_t bit)
{
	for (uint32_t i = 0; i < CFS_FEATURE_NAMES; i++)
		if (sb->feature_names[i].name[0] && sb->feature_names[i].word == w &&
		    sb->feature_names[i].bit == (uint8_t)__builtin_ctz(bit))
			return &sb->feature_names[i];
	return NULL;
}

/* "'name' (from release R)" of a bit as the superblock records it, or "bit N". */
static void describe_bit(const struct cfs_dsuper *sb, enum cfs_feature_word w, uint32_t bit,
			 char *out, size_t len)
{
	const struct cfs_dfeature *e = name_entry((struct cfs_dsuper *)sb, w, bit);
	if (e)
		snprintf(out, len, "'%.*s' (%s, from release %.*s)", (int)sizeof e->name, e->name,
			 word_names[w], (int)sizeof e->release, e->release);
	else
		snprintf(out, len, "%s bit %d (not named in the superblock)", word_names[w],
			 __builtin_ctz(bit));
}

static uint32_t unknown_bits(const struct cfs_dsuper *sb, enum cfs_feature_word w)
{
	uint32_t unknown = 0;
	for (uint32_t m = sb->features[w]; m; m &= m - 1)
		if (!is_known(w, m & -m))
			unknown |= m & -m;
	return unknown;
}

int cfs_features_check(const struct cfs_dsuper *sb, const char *volume, bool writing,
		       bool *read_only)
{
	char what[96];
	*read_only = false;
	if (sb->format > CFS_FORMAT) {
		cfs_set_error("the filesystem on %s has on-disk format %u; this release (%s) knows "
			      "formats up to %u: use a later release", volume, sb->format,
			      CFS_RELEASE, CFS_FORMAT);
		return -EPROTONOSUPPORT;
	}
	uint32_t incompat = unknown_bits(sb, CFS_INCOMPAT);
	if (incompat) {
		describe_bit(sb, CFS_INCOMPAT, incompat & -incompat, what, sizeof what);
		cfs_set_error("the filesystem on %s uses feature %s, which this release (%s) does "
			      "not know: use a release that does", volume, what, CFS_RELEASE);
		return -EPROTONOSUPPORT;
	}
	if (sb->features[CFS_INCOMPAT] & CFS_FEAT_TUNING) {
		const struct cfs_dfeature *e =
			name_entry((struct cfs_dsuper *)sb, CFS_INCOMPAT, CFS_FEAT_TUNING);
		cfs_set_error("'cfs tune -O %.*s' of the filesystem on %s was interrupted: run it "
			      "again to finish it", e ? (int)sizeof e->name : 1, e ? e->name : "?",
			      volume);
		return -EUCLEAN;
	}
	uint32_t ro = unknown_bits(sb, CFS_RO_COMPAT);
	if (ro) {
		describe_bit(sb, CFS_RO_COMPAT, ro & -ro, what, sizeof what);
		cfs_set_error("the filesystem on %s uses feature %s, which this release (%s) can "
			      "read but not write: %s", volume, what, CFS_RELEASE,
			      writing ? "use a release that knows it" : "read-only");
		*read_only = true;
		return writing ? -EROFS : 0;
	}
	return 0;
}

int cfs_feature_set(struct cfs_dsuper *sb, const char *name, bool on)
{
	size_t len = strlen(name);
	const struct known_feature *k = known_named(name, len);
	if (!k)
		return -ENOENT;
	struct cfs_dfeature *e = name_entry(sb, k->word, k->bit);
	if (!on) {
		sb->features[k->word] &= ~k->bit;
		if (e)
			memset(e, 0, sizeof *e);
		return 0;
	}
	if (!e) {
		for (uint32_t i = 0; i < CFS_FEATURE_NAMES && !e; i++)
			if (!sb->feature_names[i].name[0])
				e = &sb->feature_names[i];
		if (!e)
			return -ENOSPC;
	}
	e->word = (uint8_t)k->word;
	e->bit = (uint8_t)__builtin_ctz(k->bit);
	memset(e->name, 0, sizeof e->name);
	memcpy(e->name, k->name, len < sizeof e->name ? len : sizeof e->name);
	memset(e->release, 0, sizeof e->release);
	memcpy(e->release, k->release, strnlen(k->release, sizeof e->release));
	sb->features[k->word] |= k->bit;
	return 0;
}

void cfs_feature_tuning(struct cfs_dsuper *sb, const char *name, bool on)
{
	struct cfs_dfeature *e = name_entry(sb, CFS_INCOMPAT, CFS_FEAT_TUNING);
	if (!on) {
		sb->features[CFS_INCOMPAT] &= ~CFS_FEAT_TUNING;
		if (e)
			memset(e, 0, sizeof *e);
		return;
	}
	for (uint32_t i = 0; i < CFS_FEATURE_NAMES && !e; i++)
		if (!sb->feature_names[i].name[0])
			e = &sb->feature_names[i];
	if (!e)
		return; /* the bit alone still stops mounts; its message then names no feature */
	memset(e, 0, sizeof *e);
	e->word = CFS_INCOMPAT;
	e->bit = (uint8_t)__builtin_ctz(CFS_FEAT_TUNING);
	snprintf(e->name, sizeof e->name, "%s", name);
	memcpy(e->release, CFS_RELEASE, strnlen(CFS_RELEASE, sizeof e->release));
	sb->features[CFS_INCOMPAT] |= CFS_FEAT_TUNING;
}

bool cfs_feature_known(const char *name)
{
	return known_named(name, strlen(name)) != NULL;
}

/* The names this release knows, for messages: "journal_v3, ...". */
static void known_list(char *out, size_t len)
{
	size_t used = 0;
	out[0] = 0;
	for (size_t i = 0; i < NKNOWN && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", known[i].name);
}

int cfs_features_choose(struct cfs_dsuper *sb, const char *level, const char *list)
{
	char names[256];
	known_list(names, sizeof names);
	bool all = level && !strcmp(level, "max-features");
	if (level && !all && strcmp(level, "default") && strcmp(level, "max-compat")) {
		cfs_set_error("feature level '%s': give max-compat, default or max-features", level);
		return -EINVAL;
	}
	bool none = level && !strcmp(level, "max-compat");
	for (size_t i = 0; i < NKNOWN; i++)
		if (all || (!none && known[i].in_default))
			cfs_feature_set(sb, known[i].name, true);
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ",");
		bool off = *p == '^';
		const char *name = p + off;
		size_t nlen = len - off;
		const struct known_feature *k = known_named(name, nlen);
		if (!k) {
			cfs_set_error("feature '%.*s': this release (%s) knows %s (a '^' before a "
				      "name turns it off)", (int)nlen, name, CFS_RELEASE, names);
			return -EINVAL;
		}
		cfs_feature_set(sb, k->name, !off);
		p += len + (p[len] == ',');
	}
	return 0;
}

void cfs_features_describe(const struct cfs_dsuper *sb, char *out, size_t len)
{
	size_t used = 0;
	out[0] = 0;
	for (int w = CFS_INCOMPAT; w >= CFS_COMPAT && used < len; w--)
		for (uint32_t m = sb->features[w]; m && used < len; m &= m - 1) {
			uint32_t bit = m & -m;
			const struct cfs_dfeature *e = name_entry((struct cfs_dsuper *)sb, w, bit);
			const char *sep = used ? "," : "";
			if (w == CFS_INCOMPAT && bit == CFS_FEAT_TUNING)
				used += (size_t)snprintf(out + used, len - used, "%stuning(%.*s)", sep,
							 e ? (int)sizeof e->name : 1, e ? e->name : "?");
			else if (e && is_known(w, bit))
				used += (size_t)snprintf(out + used, len - used, "%s%.*s", sep,
							 (int)sizeof e->name, e->name);
			else
				used += (size_t)snprintf(out + used, len - used, "%s%s:%d(unknown%s%.*s)",
							 sep, word_names[w], __builtin_ctz(bit),
							 e ? " " : "", e ? (int)sizeof e->name : 0,
							 e ? e->name : "");
		}
}
