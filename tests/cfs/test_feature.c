/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The format and its features (cfs/feature.c, cfs/tune.c): what mkfs chooses; what a mount,
 * fsck, a grow's take-in and a tune do with a format, an incompat, a ro_compat or a compat
 * feature this release does not know, and with an interrupted tune; journal format 3 beside
 * format 2, and a journal in a format this release does not know. */
#include "cfs_test.h"
#include "release.h"

static void fresh_volume(const char *level)
{
	test_dir_make();
	volume_make(1, 32);
	test_vol = volume_open();
	struct cfs_mkfs_opts o = {.label = "feat", .feature_level = level};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
}

static struct cfs_dsuper super_get(void)
{
	struct cfs_dsuper sb;
	cr_assert_eq(cfs_super_read(test_vol, &sb, NULL), 0);
	return sb;
}

/* A bit of a later release, named in the superblock as that release would name it. */
static void set_foreign(enum cfs_feature_word w, int bit, const char *name)
{
	struct cfs_dsuper sb = super_get();
	sb.features[w] |= 1u << bit;
	struct cfs_dfeature *e = &sb.feature_names[CFS_FEATURE_NAMES - 1];
	e->word = (uint8_t)w;
	e->bit = (uint8_t)bit;
	snprintf(e->name, sizeof e->name, "%s", name);
	memcpy(e->release, "0.9", 3);
	cr_assert_eq(cfs_super_write(test_vol, &sb), 0);
}

/* What a 'cfs tune -O journal_v3' killed after its first write leaves. */
static void interrupt_tune(void)
{
	struct cfs_dsuper sb = super_get();
	cfs_feature_tuning(&sb, "journal_v3", true);
	cr_assert_eq(cfs_super_write(test_vol, &sb), 0);
}

static int try_mount(bool ro, struct cfs_fs **fs)
{
	struct cfs_mount_opts o = {.ro = ro};
	*fs = NULL;
	return cfs_mount(test_vol, &o, fs);
}

static int fsck(bool repair, struct cfs_fsck_report *r)
{
	return cfs_fsck(test_vol, repair, fsck_print, NULL, NULL, r);
}

Test(feature, mkfs_levels_and_names)
{
	fresh_volume(NULL);
	struct cfs_dsuper sb = super_get();
	cr_expect_eq(sb.format, CFS_FORMAT);
	cr_expect(cfs_journal_v3(&sb), "journal_v3 is in the default level");
	char list[256];
	cfs_features_describe(&sb, list, sizeof list);
	cr_expect_str_eq(list, "journal_v3");
	struct cfs_mkfs_opts o = {.feature_level = "max-compat", .force = true};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0);
	sb = super_get();
	cr_expect_eq(sb.features[CFS_INCOMPAT], 0, "max-compat: nothing an older release misreads");
	o = (struct cfs_mkfs_opts){.feature_level = "max-compat", .features = "journal_v3",
				   .force = true};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0);
	sb = super_get();
	cr_expect(cfs_journal_v3(&sb), "-O over the level");
	fs_done(NULL);
}

Test(feature, mkfs_refuses_what_it_does_not_know_before_writing)
{
	fresh_volume(NULL);
	struct cfs_dsuper before = super_get();
	struct cfs_mkfs_opts bad[] = {{.features = "journal_v4", .force = true},
				      {.features = ",journal_v3", .force = true},
				      {.feature_level = "newest", .force = true}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect_eq(cfs_mkfs(test_vol, &bad[i], NULL, NULL), -EINVAL, "case %zu", i);
		cr_expect(strstr(cfs_last_error(), "feature"), "%s", cfs_last_error());
	}
	struct cfs_dsuper after = super_get();
	cr_expect_arr_eq(before.fs_uuid, after.fs_uuid, 16, "the filesystem is the one before");
	fs_done(NULL);
}

Test(feature, unknown_incompat_refuses_mount_fsck_tune_and_lockproto)
{
	fresh_volume(NULL);
	set_foreign(CFS_INCOMPAT, 5, "frobnicate");
	struct cfs_fs *fs;
	cr_expect_eq(try_mount(false, &fs), -EPROTONOSUPPORT);
	cr_expect(strstr(cfs_last_error(), "'frobnicate'") && strstr(cfs_last_error(), "0.9") &&
		  strstr(cfs_last_error(), CFS_RELEASE), "%s", cfs_last_error());
	cr_expect_eq(try_mount(true, &fs), -EPROTONOSUPPORT, "not even read-only");
	struct cfs_fsck_report r;
	cr_expect_eq(fsck(false, &r), -EPROTONOSUPPORT);
	cr_expect_eq(fsck(true, &r), -EPROTONOSUPPORT);
	cr_expect_eq(cfs_tune(test_vol, "^journal_v3", NULL, NULL), -EPROTONOSUPPORT);
	cr_expect_eq(cfs_set_lockproto(test_vol, "corosync"), -EPROTONOSUPPORT);
	struct cfs_dsuper sb = super_get();
	cr_expect_eq(sb.features[CFS_INCOMPAT], CFS_FEAT_JOURNAL_V3 | 1u << 5, "unchanged");
	cr_expect_str_eq(cfs_super_lockproto(&sb), "local");
	bool ro;
	cr_expect_eq(cfs_features_check(&sb, "vol", true, &ro), -EPROTONOSUPPORT,
		     "a grow's take-in refuses it too");
	struct cfs_info in;
	cr_assert_eq(cfs_info(test_vol, &in), 0, "show still reads it");
	cr_expect(strstr(in.feature_list, "incompat:5(unknown frobnicate)"), "%s", in.feature_list);
	cr_expect(!strncmp(in.usable, "none: ", 6), "%s", in.usable);
	fs_done(NULL);
}

Test(feature, unnamed_unknown_bit_and_later_format)
{
	fresh_volume(NULL);
	struct cfs_dsuper sb = super_get();
	sb.features[CFS_INCOMPAT] |= 1u << 9;
	cr_assert_eq(cfs_super_write(test_vol, &sb), 0);
	struct cfs_fs *fs;
	cr_expect_eq(try_mount(false, &fs), -EPROTONOSUPPORT);
	cr_expect(strstr(cfs_last_error(), "incompat bit 9"), "%s", cfs_last_error());
	sb.features[CFS_INCOMPAT] &= ~(1u << 9);
	sb.format = CFS_FORMAT + 1;
	cr_assert_eq(cfs_super_write(test_vol, &sb), 0);
	cr_expect_eq(try_mount(false, &fs), -EPROTONOSUPPORT);
	cr_expect(strstr(cfs_last_error(), "on-disk format 3"), "%s", cfs_last_error());
	sb.format = 0; /* as made before 0.2: the same as format 2 without features */
	memset(sb.features, 0, sizeof sb.features);
	memset(sb.feature_names, 0, sizeof sb.feature_names);
	cr_assert_eq(cfs_super_write(test_vol, &sb), 0);
	cr_assert_eq(try_mount(false, &fs), 0, "%s", cfs_last_error());
	fs_done(fs);
}

Test(feature, unknown_ro_compat_mounts_read_only)
{
	fresh_volume(NULL);
	set_foreign(CFS_RO_COMPAT, 2, "fancy_index");
	struct cfs_fs *fs;
	cr_assert_eq(try_mount(false, &fs), 0, "%s", cfs_last_error());
	cr_expect(fs->ro, "asked read-write, mounted read-only");
	struct stat st;
	cr_expect_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), -EROFS);
	uint64_t added;
	cr_expect_eq(cfs_grow(fs, test_vol, &added), -EROFS, "no grow");
	cr_assert_eq(cfs_unmount(fs), 0);
	struct cfs_fsck_report r;
	cr_expect_eq(fsck(false, &r), 0, "a check only reads");
	cr_expect_eq(fsck(true, &r), -EROFS, "repairs would write");
	cr_expect(strstr(cfs_last_error(), "'fancy_index'"), "%s", cfs_last_error());
	cr_expect_eq(cfs_tune(test_vol, "^journal_v3", NULL, NULL), -EROFS);
	struct cfs_dsuper sb = super_get();
	bool ro;
	cr_expect_eq(cfs_features_check(&sb, "vol", true, &ro), -EROFS,
		     "nor the take-in of another node's grow");
	fs_done(NULL);
}

Test(feature, unknown_compat_is_ignored)
{
	fresh_volume(NULL);
	set_foreign(CFS_COMPAT, 3, "hint");
	struct cfs_fs *fs;
	cr_assert_eq(try_mount(false, &fs), 0, "%s", cfs_last_error());
	cr_expect(!fs->ro);
	struct stat st;
	cr_expect_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	fs_done_fsck_clean(fs);
}

Test(feature, interrupted_tune_stops_mounts_until_run_again)
{
	fresh_volume("max-compat");
	interrupt_tune();
	struct cfs_dsuper sb;
	struct cfs_fs *fs;
	cr_expect_eq(try_mount(false, &fs), -EUCLEAN);
	cr_expect(strstr(cfs_last_error(), "cfs tune -O journal_v3") &&
		  strstr(cfs_last_error(), "run it again"), "%s", cfs_last_error());
	cr_assert_eq(cfs_tune(test_vol, "journal_v3", NULL, NULL), 0, "%s", cfs_last_error());
	sb = super_get();
	cr_expect_eq(sb.features[CFS_INCOMPAT], CFS_FEAT_JOURNAL_V3, "done, the bit gone");
	cr_assert_eq(try_mount(false, &fs), 0, "%s", cfs_last_error());
	fs_done(fs);
}

Test(feature, fsck_rolls_back_an_interrupted_tune)
{
	fresh_volume("max-compat");
	interrupt_tune();
	struct cfs_fsck_report r;
	cr_assert_eq(fsck(false, &r), 0);
	cr_expect_eq(r.problems, 1, "reported");
	cr_expect_eq(super_get().features[CFS_INCOMPAT], CFS_FEAT_TUNING, "-n changes nothing");
	cr_assert_eq(fsck(true, &r), 0);
	cr_expect_eq(r.repaired, 1);
	cr_expect_eq(super_get().features[CFS_INCOMPAT], 0, "rolled back");
	struct cfs_fs *fs;
	cr_assert_eq(try_mount(false, &fs), 0, "%s", cfs_last_error());
	fs_done(fs);
}

Test(feature, tune_refuses_a_mounted_filesystem_and_bad_names)
{
	fresh_volume(NULL);
	struct cfs_fs *fs;
	cr_assert_eq(try_mount(false, &fs), 0);
	cr_expect_eq(cfs_tune(test_vol, "^journal_v3", NULL, NULL), -EBUSY);
	cr_assert_eq(cfs_unmount(fs), 0);
	cr_expect_eq(cfs_tune(test_vol, "journal_v9", NULL, NULL), -EINVAL);
	cr_expect_eq(cfs_tune(test_vol, "", NULL, NULL), -EINVAL);
	cr_expect_eq(cfs_tune(test_vol, "^", NULL, NULL), -EINVAL);
	struct cfs_dsuper sb = super_get();
	cr_expect(cfs_journal_v3(&sb), "unchanged");
	cr_expect_eq(sb.features[CFS_INCOMPAT] & CFS_FEAT_TUNING, 0);
	cr_assert_eq(cfs_tune(test_vol, "^journal_v3", NULL, NULL), 0, "%s", cfs_last_error());
	sb = super_get();
	cr_expect_eq(sb.features[CFS_INCOMPAT], 0, "off again: what 0.1 reads");
	fs_done(NULL);
}

/* Commit a new inode, crash with it not home, mount: replayed?  Returns the commit's journal
 * format as written. */
static uint16_t crash_and_replay(void)
{
	struct cfs_fs *fs = fs_mount();
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	uint64_t commit = fs->sb.journal_start + fs->jlast_pos + fs->jlast_len - 1;
	cr_assert_eq(cvm_volume_read(fs->vol, old, 4096, commit * 4096), 0);
	uint16_t format = ((struct cfs_djcommit *)old)->h.version;
	free(old);
	fs_crash(fs);
	struct cfs_jlog log;
	struct cfs_dsuper sb = super_get();
	cr_assert_eq(cfs_journal_read(test_vol, &sb, 0, &log), 0);
	char when[96];
	cr_expect_eq(cfs_jlog_when(&log, when, sizeof when)[0] != 0, format == CFS_JOURNAL_V3,
		     "format %u: '%s'", format, when);
	cfs_jlog_free(&log);
	fs = fs_mount();
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_eq(cfs_iget(fs, ino, &ip), 0);
	cr_expect_eq(ip->d.uid, 7, "replayed");
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_unmount(fs), 0);
	return format;
}

Test(feature, both_journal_formats_replay)
{
	fresh_volume("max-compat");
	cr_expect_eq(crash_and_replay(), CFS_VERSION, "format 2 without journal_v3");
	cr_assert_eq(cfs_tune(test_vol, "journal_v3", NULL, NULL), 0, "%s", cfs_last_error());
	cr_expect_eq(crash_and_replay(), CFS_JOURNAL_V3);
	fs_done(NULL);
}

/* Rewrite, sealed again, the block `back` blocks before the newest transaction's commit. */
static void reseal_newest(struct cfs_fs *fs, uint32_t back, void (*change)(uint8_t *b))
{
	uint64_t blk = fs->sb.journal_start + fs->jlast_pos + fs->jlast_len - 1 - back;
	uint8_t *b;
	cr_assert_eq(posix_memalign((void **)&b, 4096, 4096), 0);
	cr_assert_eq(cvm_volume_read(fs->vol, b, 4096, blk * 4096), 0);
	change(b);
	cfs_block_seal(b, 4096);
	cr_assert_eq(cvm_volume_write(fs->vol, b, 4096, blk * 4096), 0);
	free(b);
}

static void to_format_9(uint8_t *b)
{
	((struct cfs_bhdr *)b)->version = 9;
}

Test(feature, a_journal_of_an_unknown_format_is_not_replayed_by_guess)
{
	fresh_volume(NULL);
	struct cfs_fs *fs = fs_mount();
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint32_t len = fs->jlast_len;
	reseal_newest(fs, len - 1, to_format_9); /* its descriptor */
	pthread_mutex_unlock(&fs->lock);
	fs_crash(fs);
	cr_expect_eq(try_mount(false, &fs), -EPROTONOSUPPORT);
	cr_expect(strstr(cfs_last_error(), "journal format 9") &&
		  strstr(cfs_last_error(), "slot 0"), "%s", cfs_last_error());
	struct cfs_fsck_report r;
	cr_expect_eq(fsck(false, &r), -EPROTONOSUPPORT, "fsck does not guess either");
	fs_done(NULL);
}

static void retarget(uint8_t *b)
{
	((struct cfs_djdesc *)b)->revokes = 1; /* names one more block than was proved */
}

Test(feature, a_format_3_commit_proves_its_descriptor)
{
	fresh_volume(NULL);
	struct cfs_fs *fs = fs_mount();
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t newest = fs->jseq - 1;
	reseal_newest(fs, fs->jlast_len - 1, retarget);
	pthread_mutex_unlock(&fs->lock);
	fs_crash(fs);
	struct cfs_jlog log;
	struct cfs_dsuper sb = super_get();
	cr_assert_eq(cfs_journal_read(test_vol, &sb, 0, &log), 0);
	cr_expect(log.ntxn == 0 || log.last_seq < newest,
		  "a descriptor its commit does not prove is no transaction (%u, %llu of %llu)",
		  log.ntxn, (unsigned long long)log.last_seq, (unsigned long long)newest);
	cfs_jlog_free(&log);
	fs_done(NULL);
}
