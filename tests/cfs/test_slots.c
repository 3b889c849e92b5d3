/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Node slots added while mounted: the new slots mount and journal, fsck knows their journals,
 * the addition survives a crash through the journal, and bad counts or no room change
 * nothing. */
#include "cfs_test.h"

static struct cfs_fs *fresh_with_slots(uint32_t slots)
{
	test_dir_make();
	volume_make(1, 64);
	test_vol = volume_open();
	struct cfs_mkfs_opts o = {.label = "slots", .slots = slots};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
	return fs_mount();
}

static struct cfs_fs *mount_slot(uint32_t slot)
{
	struct cfs_mount_opts o = {.slot = slot};
	struct cfs_fs *fs;
	cr_assert_eq(cfs_mount(test_vol, &o, &fs), 0, "mount slot %u: %s", slot, cfs_last_error());
	return fs;
}

static void fsck_clean(void)
{
	struct cfs_fsck_report r;
	cr_assert_eq(cfs_fsck(test_vol, false, NULL, NULL, NULL, &r), 0, "%s", cfs_last_error());
	cr_assert_eq(r.problems, 0, "fsck found %u problems", r.problems);
}

/* A directory made through the journal of the mount's slot. */
static uint64_t make_dir(struct cfs_fs *fs, const char *name)
{
	struct stat st;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, name, 0755, &root_cred, &st), 0, "%s",
		     cfs_last_error());
	cr_assert_eq(cfs_sync(fs), 0);
	return st.st_ino;
}

Test(slots, added_slots_mount_and_journal_and_fsck_knows_them)
{
	struct cfs_fs *fs = fresh_with_slots(2);
	uint32_t n = 0;
	cr_assert_eq(cfs_add_slots(fs, 2, &n), 0, "%s", cfs_last_error());
	cr_assert_eq(n, 4);
	cr_assert_eq(fs->sb.slot_journal[1], 0, "mkfs's slots keep their row");
	cr_assert_geq(fs->sb.slot_journal[2], fs->sb.ag_start);
	cr_assert_neq(fs->sb.slot_journal[3], fs->sb.slot_journal[2]);
	cr_assert_neq(fs->sb.orphan_dir[3], 0);
	make_dir(fs, "by-slot-0");
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();

	fs = mount_slot(3);
	make_dir(fs, "by-slot-3");
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs = mount_slot(0);
	struct stat st;
	cr_assert_eq(cfs_lookup(fs, CFS_ROOT, "by-slot-3", &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	fs_done(fs);
}

/* A node that mounts next reads the superblock before it takes any lock: the added slot is
 * in place at once (a checkpoint after its transaction), not only in the journal. */
Test(slots, an_added_slot_is_in_place_at_once)
{
	struct cfs_fs *fs = fresh_with_slots(2);
	uint32_t n;
	cr_assert_eq(cfs_add_slots(fs, 1, &n), 0, "%s", cfs_last_error());
	struct cfs_dsuper sb;
	cr_assert_eq(cfs_super_read(fs->vol, &sb, NULL), 0);
	cr_assert_eq(sb.nslots, 3, "the superblock on disk has the new slot");
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0, "nothing left in the journal for it");
	cfs_jlog_free(&log);
	fs_crash(fs);
	fs = fs_mount();
	cr_assert_eq(fs->sb.nslots, 3);
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs = mount_slot(2);
	make_dir(fs, "by-slot-2");
	fs_done(fs);
}

Test(slots, bad_counts_and_no_room_change_nothing)
{
	struct cfs_fs *fs = fresh_with_slots(2);
	uint32_t n = 0;
	cr_assert_eq(cfs_add_slots(fs, 0, &n), -EINVAL);
	cr_assert_eq(cfs_add_slots(fs, 63, &n), -EINVAL);
	cr_assert(strstr(cfs_last_error(), "give 1 to 62 more"), "%s", cfs_last_error());
	cr_assert_eq(fs->sb.nslots, 2);

	/* Every block taken: no journal fits. */
	pthread_mutex_lock(&fs->lock);
	for (uint64_t pblk; ;) {
		uint32_t got;
		if (cfs_alloc(fs, 0, 1024, &pblk, &got))
			break;
	}
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_add_slots(fs, 1, &n), -ENOSPC);
	cr_assert(strstr(cfs_last_error(), "no room for 1 more journal"), "%s", cfs_last_error());
	cr_assert_eq(n, 2);
	cr_assert_eq(fs->sb.nslots, 2);
	fs_done(fs);
}

/* On a cluster filesystem mkfs gives each slot's orphan directory an inode glock span of its
 * own, apart from the root's (unlinks on one node must not take the root's lock from the
 * others), and the group's bitmap and free count say so (fsck checks both).  Unlinks through
 * these directories on several nodes: tests/cluster/test_cfs_multi.sh. */
Test(slots, mkfs_puts_each_orphan_directory_in_its_own_span)
{
	test_dir_make();
	volume_make(1, 64);
	test_vol = volume_open();
	struct cfs_mkfs_opts mo = {.label = "spans", .slots = 4, .lockproto = "corosync"};
	cr_assert_eq(cfs_mkfs(test_vol, &mo, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
	struct cfs_dsuper sb;
	cr_assert_eq(cfs_super_read_primary(test_vol, &sb), 0);
	uint64_t span = CFS_IGLOCK_SPAN, root_span = sb.root_ino / span;
	for (uint32_t s = 0; s < 4; s++) {
		uint64_t o = sb.orphan_dir[s];
		cr_assert_neq(o / span, root_span, "slot %u's orphan dir in the root's span", s);
		cr_assert_eq((o + 1) / span, o / span, "slot %u: its bucket in another span", s);
		for (uint32_t t = 0; t < s; t++)
			cr_assert_neq(o / span, sb.orphan_dir[t] / span, "slots %u and %u", t, s);
	}
	fsck_clean();
	fs_done(NULL);
}
