/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Mounting and unmounting, the committer thread, the node-local claim on the volume, and the
 * orphan directories (unlinked inodes still open, freed at last close or at the next mount). */
#include "cfs/internal.h"
#include "cfs/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define COMMIT_INTERVAL_MS 1000
#define CLAIM_BYTE 16
#define SLOT_BYTE(s) (32 + (s))

/* OFD locks on the first LUN's metadata area, away from the bytes libcvm uses: one byte says
 * the filesystem is in use on this node (exclusive for local mounts, mkfs and fsck), one byte
 * per slot says which journal a daemon here owns. */
static int ofd_lock(int fd, short type, off_t at, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = len};
	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

int cfs_volume_claim(struct cvm_volume *vol, bool exclusive, int *fd_out)
{
	const char *path = cvm_volume_lun_path(vol, 0);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		cfs_set_error("LUN %s: %s", path, strerror(errno));
		return -errno;
	}
	int rc = ofd_lock(fd, exclusive ? F_WRLCK : F_RDLCK, CLAIM_BYTE, 1);
	if (rc == -EAGAIN || rc == -EACCES) {
		cfs_set_error("volume %s is in use on this node (mounted, or being checked or "
			      "formatted): unmount it or wait, then retry",
			      cvm_volume_config(vol)->name);
		rc = -EBUSY;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

/* An unmount returns before its daemon has let the volume go (umount(2) of a FUSE mount
 * does not wait for the daemon to finish), so a mount right after one finds the volume
 * claimed still, its slot too, and may find the old mount on its directory (generic/604).
 * Unless the volume is mounted at another place here (a node mounts it once: refused at
 * once), the claim and the slot are waited for, up to CLAIM_WAIT_MS; the wait is told (on the
 * mount's terminal too) only once it lasts CLAIM_TELL_MS, as a finishing unmount seldom does. */
#define CLAIM_WAIT_MS 30000
#define CLAIM_TELL_MS 1000
#define CLAIM_POLL_MS 20

static int claim_for_mount(struct cfs_fs *fs, struct cvm_volume *vol, const char *mountpoint)
{
	const struct cvm_config *cfg = cvm_volume_config(vol);
	char uuid[CVM_UUID_STR];
	cvm_uuid_format(&cfg->vol_uuid, uuid);
	for (int waited = 0;; waited += CLAIM_POLL_MS) {
		struct cfs_volume_mounts m;
		if (cfs_volume_mounts(cfg->name, uuid, mountpoint, &m))
			memset(&m, 0, sizeof m);
		if (m.elsewhere) {
			cfs_set_error("volume %s is mounted on this node already, at %s: a node mounts "
				      "a volume once (mount --bind %s DIR shows it at another place too)",
				      cfg->name, m.other, m.other);
			return -EBUSY;
		}
		int rc = cfs_volume_claim(vol, !fs->cluster, &fs->lockfd);
		if (!rc && m.at_dir) { /* a cluster mount's claim is shared: the old mount is there */
			close(fs->lockfd);
			fs->lockfd = -1;
			rc = -EBUSY;
		}
		if (rc != -EBUSY)
			return rc;
		if (waited >= CLAIM_WAIT_MS) {
			if (m.at_dir)
				cfs_set_error("volume %s is mounted at %s already", cfg->name, mountpoint);
			return rc; /* else what cfs_volume_claim said */
		}
		if (waited == CLAIM_TELL_MS && m.at_dir)
			cfs_log(fs, "volume %s is mounted at %s: waiting up to %d s for its unmount to "
				    "finish", cfg->name, mountpoint, CLAIM_WAIT_MS / 1000);
		else if (waited == CLAIM_TELL_MS)
			cfs_log(fs, "volume %s is in use on this node and not mounted elsewhere here (an "
				    "unmount finishing, a check or a format): waiting up to %d s for it",
				cfg->name, CLAIM_WAIT_MS / 1000);
		usleep(CLAIM_POLL_MS * 1000);
	}
}

/* The slot is this node's (the cluster lock, on a cluster); a daemon here holding its byte
 * still is one finishing an unmount (see claim_for_mount). */
static int claim_slot(struct cfs_fs *fs)
{
	const char *name = cvm_volume_config(fs->vol)->name;
	for (int waited = 0;; waited += CLAIM_POLL_MS) {
		int rc = ofd_lock(fs->lockfd, F_WRLCK, SLOT_BYTE(fs->slot), 1);
		if (rc != -EAGAIN && rc != -EACCES)
			return rc;
		if (waited >= CLAIM_WAIT_MS) {
			cfs_set_error("slot %u of volume %s is mounted on this node already",
				      fs->slot, name);
			return -EBUSY;
		}
		if (waited == CLAIM_TELL_MS)
			cfs_log(fs, "slot %u of volume %s is in use on this node (an unmount "
				    "finishing): waiting up to %d s for it",
				fs->slot, name, CLAIM_WAIT_MS / 1000);
		usleep(CLAIM_POLL_MS * 1000);
	}
}

/* ---- orphans ---- */
static void orphan_name(uint64_t ino, char name[17])
{
	snprintf(name, 17, "%016" PRIx64, ino);
}

static int orphan_dir(struct cfs_fs *fs, uint32_t slot, struct cfs_inode **dir)
{
	return cfs_iget(fs, fs->sb.orphan_dir[slot], dir);
}

int cfs_orphan_add_reserve(struct cfs_fs *fs, uint32_t more)
{
	struct cfs_inode *dir;
	int rc = orphan_dir(fs, fs->slot, &dir);
	return rc ? rc : cfs_dir_add_reserve(fs, dir, more);
}

int cfs_orphan_remove_reserve(struct cfs_fs *fs)
{
	struct cfs_inode *dir;
	return orphan_dir(fs, fs->slot, &dir);
}

int cfs_orphan_add(struct cfs_fs *fs, struct cfs_inode *ip)
{
	struct cfs_inode *dir;
	char name[17];
	orphan_name(ip->ino, name);
	int rc = orphan_dir(fs, fs->slot, &dir);
	if (!rc)
		rc = cfs_dir_add(fs, dir, name, ip->ino, DT_REG);
	if (!rc)
		rc = cfs_iwrite(fs, dir);
	if (!rc)
		ip->in_orphans = true;
	return rc;
}

int cfs_orphan_remove_from(struct cfs_fs *fs, uint32_t slot, uint64_t ino)
{
	struct cfs_inode *dir;
	char name[17];
	orphan_name(ino, name);
	int rc = orphan_dir(fs, slot, &dir);
	if (!rc)
		rc = cfs_dir_remove(fs, dir, name);
	if (rc == -ENOENT)
		return 0; /* not on this list */
	return rc ? rc : cfs_iwrite(fs, dir);
}

int cfs_orphan_remove(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = cfs_orphan_remove_from(fs, fs->slot, ip->ino);
	if (!rc)
		ip->in_orphans = false;
	return rc;
}

struct orphan_list {
	uint64_t *ino;
	size_t n, cap;
};

static int collect(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type)
{
	(void)name, (void)len, (void)type;
	struct orphan_list *l = arg;
	if (cfs_reserve((void **)&l->ino, &l->cap, l->n + 1, sizeof *l->ino))
		return -ENOMEM;
	l->ino[l->n++] = ino;
	return 0;
}

/* What the last daemon of a slot left unlinked but open: our own slot's at the mount, a dead
 * node's at its recovery. */
int cfs_orphans_free(struct cfs_fs *fs, uint32_t slot)
{
	struct cfs_inode *dir;
	struct orphan_list l = {0};
	int rc = orphan_dir(fs, slot, &dir);
	if (!rc)
		rc = cfs_dir_walk(fs, dir, collect, &l);
	for (size_t i = 0; i < l.n && !rc; i++) {
		struct cfs_inode *ip;
		rc = cfs_iget_entry(fs, l.ino[i], &ip);
		if (rc) {
			cfs_log(fs, "orphan inode %" PRIu64 ": %s; fsck.cfs will look at it", l.ino[i],
				strerror(-rc));
			rc = 0;
			continue;
		}
		ip->in_orphans = slot == fs->slot;
		if (ip->d.nlink == 0)
			rc = cfs_iput_check(fs, ip);
		if (!rc && fs->txn.n > fs->txn.limit / 2)
			rc = cfs_journal_commit(fs);
	}
	if (l.n)
		cfs_log(fs, "orphans of slot %u: %zu inode%s looked at", slot, l.n,
			l.n == 1 ? "" : "s");
	free(l.ino);
	return rc ? rc : cfs_journal_commit(fs);
}

/* ---- the committer: a transaction is on disk at most COMMIT_INTERVAL_MS after it began ---- */
void cfs_committer_wake(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->wish_lock);
	fs->wake_pending = true;
	pthread_cond_signal(&fs->commit_wake);
	pthread_mutex_unlock(&fs->wish_lock);
}

static void *committer(void *arg)
{
	struct cfs_fs *fs = arg;
	/* Test hook: while this file exists the committer holds before its rounds, so that
	 * written data stays behind (tests/cluster/test_cfs_writebehind.sh). */
	const char *hold = getenv("CFSD_TEST_HOLD_COMMITTER");
	pthread_mutex_lock(&fs->lock);
	while (!fs->stopping) {
		/* Back sooner if another node waits for the end of a glock's hold time. */
		uint64_t now = cfs_now_ns(), wait_ns = COMMIT_INTERVAL_MS * 1000000ull;
		if (fs->hold_until_ns > now && fs->hold_until_ns - now < wait_ns)
			wait_ns = fs->hold_until_ns - now;
		/* And for the next paced batch of idle spans' let-gos. */
		if (fs->nidle_spans) {
			uint64_t after = fs->idle_let_go_after_ns;
			uint64_t next = after > now ? after - now : 0;
			wait_ns = next < wait_ns ? next : wait_ns;
		}
		struct timespec until = cfs_deadline_after_ns(wait_ns);
		/* Woken under wish_lock, not fs->lock: the lock manager's callbacks, which wake
		 * it, cannot take fs->lock (a thread holding it may wait for their dispatch). */
		pthread_mutex_unlock(&fs->lock);
		pthread_mutex_lock(&fs->wish_lock);
		if (!fs->wake_pending) /* every wish that wants action now set it */
			pthread_cond_timedwait(&fs->commit_wake, &fs->wish_lock, &until);
		fs->wake_pending = false;
		pthread_mutex_unlock(&fs->wish_lock);
		cfs_test_gate(hold);
		pthread_mutex_lock(&fs->lock);
		if ((fs->txn.n || fs->wb_dirty) && !fs->ro) /* kept data no older than a round */
			cfs_journal_sync(fs);
		int rc = cfs_journal_settle(fs); /* the anchor a glock going down to PR owes */
		if (rc && !cfs_fenced(fs)) /* fenced: nothing reaches the LUNs any more */
			cfs_log(fs, "journal: anchor: %s (tried again at the next let-go)",
				strerror(-rc));
		cfs_bcache_trim(fs);
		cfs_iglock_let_idle_go(fs);
		cfs_iglock_act(fs); /* other nodes may be waiting for locks nobody here uses */
		cfs_glock_check(fs, &fs->meta);
	}
	pthread_mutex_unlock(&fs->lock);
	return NULL;
}

static void fs_free(struct cfs_fs *fs)
{
	if (fs->vol) /* the volume outlives fs (its caller closes it): its lines go elsewhere */
		cvm_volume_set_log(fs->vol, NULL, NULL);
	cfs_recovery_stop(fs);
	cfs_icache_destroy(fs);
	cfs_iopen_free(fs);
	cfs_flock_free(fs);
	cfs_text_free(fs);
	cfs_plock_free(fs);
	cfs_shared_write_free(fs);
	cfs_bcache_destroy(fs);
	cfs_lock_put(&fs->slot_lock);
	if (fs->locks_closing)
		fs->locks_closing(fs->locks_arg, fs);
	cfs_glock_shutdown(fs);
	cfs_lease_page_free(fs);
	if (fs->lockfd >= 0)
		close(fs->lockfd);
	free(fs->ags);
	free(fs->pending_free);
	cfs_journal_free(fs);
	while (fs->aio_nfree)
		cvm_aio_destroy(fs->aio_free[--fs->aio_nfree]);
	pthread_mutex_destroy(&fs->aio_lock);
	pthread_mutex_destroy(&fs->jio_lock);
	pthread_mutex_destroy(&fs->flock_mutex);
	pthread_mutex_destroy(&fs->text_mutex);
	pthread_mutex_destroy(&fs->folder_lock);
	pthread_cond_destroy(&fs->folder_wake);
	pthread_mutex_destroy(&fs->lock);
	pthread_rwlock_destroy(&fs->vol_lock);
	pthread_cond_destroy(&fs->commit_wake);
	pthread_cond_destroy(&fs->glock_cond);
	cfs_recovery_destroy(fs);
	free(fs);
}

static int check_identity(struct cfs_fs *fs, const struct cfs_mount_opts *o, const char **proto)
{
	const struct cvm_config *cfg = cvm_volume_config(fs->vol);
	if (memcmp(fs->sb.vol_uuid, cfg->vol_uuid.b, 16)) {
		cfs_set_error("the filesystem on volume %s was made on another volume (its LUNs "
			      "were copied?): check the LUN paths", cfg->name);
		return -EINVAL;
	}
	if (o->slot != CFS_SLOT_ANY && o->slot >= fs->sb.nslots) {
		cfs_set_error("node slot %u does not exist: the filesystem on %s has slots 0-%u",
			      o->slot, cfg->name, fs->sb.nslots - 1);
		return -EINVAL;
	}
	const char *name = cfs_super_lockproto(&fs->sb);
	if (!name) {
		cfs_set_error("the superblock of %s names an unknown lock protocol '%.16s': set it "
			      "with 'cfs lockproto'", cfg->name, fs->sb.lockproto);
		return -EUCLEAN;
	}
	if (o->cluster && strcmp(o->cluster, name)) {
		cfs_set_error("the filesystem on %s was made for cluster=%s, not cluster=%s: mount "
			      "it with cluster=%s (or change the protocol with 'cfs lockproto' while "
			      "it is unmounted everywhere)", cfg->name, name, o->cluster, name);
		return -EPROTO;
	}
	if (o->fence_program && !strcmp(name, "local")) {
		cfs_set_error("fence=%s: a fence program is for cluster mounts; the filesystem on %s "
			      "has the lock protocol local", o->fence_program, cfg->name);
		return -EINVAL;
	}
	if (o->fence_program && (o->fence_program[0] != '/' || access(o->fence_program, X_OK))) {
		cfs_set_error("fence=%s: give the absolute path of an executable program", o->fence_program);
		return -EINVAL;
	}
	*proto = name;
	return 0;
}

struct holder {
	const char *resource;
	uint32_t node;
};

static void find_holder(void *arg, const struct cfslock_dump_entry *e)
{
	struct holder *h = arg;
	if (!strcmp(e->resource, h->resource) && !strcmp(e->state, "granted"))
		h->node = e->node;
}

uint32_t cfs_lock_holder(struct cfs_fs *fs, const char *resource)
{
	struct holder h = {.resource = resource, .node = 0};
	cfslock_dump(fs->space, find_holder, &h);
	return h.node;
}

struct recovering_query {
	const char *resource;
	uint32_t node;
	bool found;
};

static void find_recovering(void *arg, const struct cfslock_dump_entry *e)
{
	struct recovering_query *q = arg;
	if ((!q->node || e->node == q->node) && e->recovering && !strcmp(e->resource, q->resource))
		q->found = true;
}

bool cfs_lock_recovering(struct cfs_fs *fs, const char *resource, uint32_t node)
{
	struct recovering_query q = {.resource = resource, .node = node};
	return !cfslock_dump(fs->space, find_recovering, &q) && q.found;
}

/* A cluster node owns a slot (its journal and orphans) while it holds "slot-N" EX. */
static int claim_cluster_slot(struct cfs_fs *fs, uint32_t want)
{
	const char *vname = cvm_volume_config(fs->vol)->name;
	uint32_t first = want == CFS_SLOT_ANY ? 0 : want;
	uint32_t last = want == CFS_SLOT_ANY ? fs->sb.nslots - 1 : want;
	for (uint32_t s = first; s <= last; s++) {
		char name[16];
		snprintf(name, sizeof name, "slot-%u", s);
		struct cfslock *lk = cfslock_new(fs->space, name, NULL, NULL, fs);
		if (!lk)
			return -ENOMEM;
		int rc = cfslock_request_sync(lk, CFSLOCK_EX, CFSLOCK_NOQUEUE);
		if (!rc) {
			fs->slot = s;
			fs->slot_lock = lk;
			return 0;
		}
		cfslock_free(lk);
		if (rc != -EAGAIN) {
			cfs_set_error("slot %u of %s: lock manager: %s", s, vname, strerror(-rc));
			return cfs_lock_errno(rc);
		}
	}
	if (want == CFS_SLOT_ANY) {
		cfs_set_error("all %u node slots of %s are in use: unmount it on a node, or add "
			      "slots (cfs addslots on a node that has it mounted)", fs->sb.nslots,
			      vname);
		return -EUSERS;
	}
	char name[16];
	snprintf(name, sizeof name, "slot-%u", want);
	cfs_set_error("slot %u of %s is in use by node %u: give another node= or none (a free "
		      "slot is taken)", want, vname, cfs_lock_holder(fs, name));
	return -EBUSY;
}

int cfs_cluster_idle(struct cvm_volume *vol, const struct cfs_dsuper *sb, const char *proto)
{
	struct cfs_fs probe = {.vol = vol, .sb = *sb, .cluster = true};
	const char *vname = cvm_volume_config(vol)->name;
	int rc = cfs_glock_init(&probe, proto);
	for (uint32_t s = 0; s < sb->nslots && !rc; s++) {
		rc = claim_cluster_slot(&probe, s);
		if (!rc) {
			cfs_lock_put(&probe.slot_lock);
		} else if (rc == -EBUSY) {
			char why[256];
			snprintf(why, sizeof why, "%s", cfs_last_error());
			cfs_set_error("the filesystem on %s is mounted on a node (%s): unmount it "
				      "everywhere first", vname, why);
		}
	}
	if (rc && rc != -EBUSY && !cfs_last_error()[0])
		cfs_set_error("cannot tell whether %s is mounted on another node: %s", vname,
			      strerror(-rc));
	cfs_glock_shutdown(&probe);
	return rc;
}

/* Which slot, under which lock: the cluster lock says who has it cluster-wide, the OFD lock
 * catches two daemons on one machine (the tests' nodes share the LUN files). */
static int take_slot(struct cfs_fs *fs, const struct cfs_mount_opts *o)
{
	int rc = 0;
	if (fs->cluster)
		rc = claim_cluster_slot(fs, o->slot);
	else
		fs->slot = o->slot == CFS_SLOT_ANY ? 0 : o->slot;
	return rc ? rc : claim_slot(fs);
}

/* A replayed grow or added slot wrote the superblock read before the replay: take it in. */
static int super_after_replay(struct cfs_fs *fs)
{
	struct cfs_dsuper sb;
	const char *why = "unreadable";
	int rc = cfs_super_read(fs->vol, &sb, NULL);
	if (!rc && sb.generation != fs->sb.generation &&
	    !(rc = cfs_super_check(&sb, cvm_volume_size(fs->vol), &why)))
		fs->sb = sb;
	if (rc)
		cfs_set_error("superblock after the journal's replay: %s", why);
	return rc;
}

/* Replay this slot's journal, read the groups, free the orphans: under the glock EX. */
static int start_fs(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	int rc = cfs_meta_hold(fs, CFSLOCK_EX, CFSLOCK_EX);
	bool held = !rc;
	if (rc)
		cfs_set_error("metadata lock: %s", strerror(-rc));
	if (!rc && (rc = cfs_journal_replay(fs)) && rc != -EPROTONOSUPPORT)
		cfs_set_error("journal of slot %u: replay failed: %s", fs->slot, strerror(-rc));
	if (!rc)
		rc = super_after_replay(fs);
	if (!rc)
		rc = cfs_alloc_load(fs);
	if (!rc && !fs->ro && (rc = cfs_orphans_free(fs, fs->slot)))
		cfs_set_error("orphans of slot %u: %s", fs->slot, strerror(-rc));
	__atomic_store_n(&fs->started, !rc, __ATOMIC_RELEASE);
	if (held)
		cfs_glock_unhold(fs, &fs->meta);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

/* Quotas need their inodes, which cfs tune and mkfs make. */
static int quota_mountable(const struct cfs_fs *fs, const char *volume)
{
	if (!cfs_quota_on(fs))
		return 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++)
		if (!fs->sb.quota_ino[t]) {
			cfs_set_error("the filesystem on %s has quotas but no %s quota inode: run "
				      "fsck.cfs -y %s", volume, cfs_quota_type_name(t), volume);
			return -EUCLEAN;
		}
	return 0;
}

static void lun_log(void *arg, const char *line)
{
	cfs_log(arg, "%s", line);
}

void cfs_volume_adopt(struct cfs_fs *fs, struct cvm_volume *vol)
{
	cvm_volume_set_log(vol, lun_log, fs);
	if (fs->vol && fs->vol != vol)
		cvm_volume_inherit_errors(vol, fs->vol);
	cfs_fence_guard(fs, vol);
}

int cfs_mount(struct cvm_volume *vol, const struct cfs_mount_opts *o, struct cfs_fs **out)
{
	struct cfs_fs *fs = calloc(1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	fs->vol = vol;
	fs->lockfd = -1;
	fs->lease_memfd = -1;
	fs->ro = o->ro;
	fs->dboptimized = o->dboptimized;
	fs->fence_program = o->fence_program;
	fs->locks_closing = o->locks_closing;
	fs->recovering = o->recovering;
	fs->locks_arg = o->locks_arg;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_rwlock_init(&fs->vol_lock, NULL);
	pthread_mutex_init(&fs->aio_lock, NULL);
	pthread_mutex_init(&fs->jio_lock, NULL);
	pthread_mutex_init(&fs->flock_mutex, NULL);
	pthread_mutex_init(&fs->text_mutex, NULL);
	pthread_mutex_init(&fs->folder_lock, NULL);
	pthread_cond_init(&fs->folder_wake, NULL);
	fs->aio_vol = vol;
	pthread_cond_init(&fs->commit_wake, NULL);
	pthread_cond_init(&fs->glock_cond, NULL);
	pthread_cond_init(&fs->put_wake, NULL);
	cfs_recovery_init(fs);
	const char *proto = "local";
	int rc = cfs_super_read(vol, &fs->sb, NULL);
	bool read_only = false;
	if (!rc)
		rc = cfs_features_check(&fs->sb, cvm_volume_config(vol)->name, false, &read_only);
	if (!rc && read_only && !fs->ro) {
		cfs_log(fs, "mounted read-only: %s", cfs_last_error());
		fs->ro = true;
	}
	if (!rc)
		rc = check_identity(fs, o, &proto);
	fs->cluster = strcmp(proto, "local") != 0;
	if (!rc)
		rc = quota_mountable(fs, cvm_volume_config(vol)->name);
	/* Local mounts have the volume to themselves on this machine; cluster nodes share it. */
	if (!rc)
		rc = claim_for_mount(fs, vol, o->mountpoint);
	if (!rc)
		rc = cfs_glock_init(fs, proto);
	if (!rc && (rc = cfs_lease_page_init(fs)) == 0)
		cfs_volume_adopt(fs, vol);
	if (!rc && o->locks_ready)
		rc = o->locks_ready(o->locks_arg, fs);
	if (!rc) {
		fs->lock_cache_limit = o->lock_cache ? o->lock_cache : CFS_LOCK_CACHE_DEFAULT;
		cfslock_set_cache_limit(fs->locks, fs->lock_cache_limit);
		rc = take_slot(fs, o);
	}
	if (!rc)
		rc = cfs_shared_write_init(fs);
	fs->bs = fs->sb.block_size;
	/* One node too: its kernel write-back cache hands dirty pages over at close, and a
	 * write-through there made every small file's close wait for the LUNs. */
	if (!o->dboptimized && !o->ro)
		fs->wb_limit = (uint64_t)o->writebehind_mib << 20;
	fs->ihash = calloc(CFS_ICACHE_BUCKETS, sizeof *fs->ihash);
	if (!rc)
		rc = fs->ihash ? cfs_bcache_init(fs) : -ENOMEM;
	uint32_t r = 0;
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (uint32_t)time(NULL);
	fs->next_generation = (uint64_t)r << 20;
	/* Before our own glock request: a dead node may hold it until somebody recovers it. */
	if (!rc)
		rc = cfs_recovery_start(fs);
	if (!rc)
		rc = start_fs(fs);
	if (!rc && (rc = pthread_create(&fs->committer, NULL, committer, fs)))
		rc = -rc;
	fs->quota_fold_s = o->quota_fold ? o->quota_fold : CFS_QUOTA_FOLD_DEFAULT;
	if (!rc && (rc = cfs_quota_folder_start(fs))) {
		cfs_set_error("quota folder: cannot start a thread");
		cfs_unmount(fs);
		return rc;
	}
	if (rc) {
		fs_free(fs);
		return rc;
	}
	*out = fs;
	return 0;
}

/* The unmount reads every in-memory inode again under its glock EX: those glocks asked for
 * together first.  (One at a time, a node that had looked at a tree another node then
 * removed took 10 ms a span to unmount: 7 s for /usr/include.) */
static void ask_for_every_inode(struct cfs_fs *fs)
{
	uint64_t *blks = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < CFS_ICACHE_BUCKETS; i++)
		for (struct cfs_inode *ip = fs->ihash[i]; ip; ip = ip->hnext)
			if (!cfs_reserve((void **)&blks, &cap, n + 1, sizeof *blks))
				blks[n++] = ip->ino;
	cfs_iglock_prefetch(fs, blks, n, CFSLOCK_EX);
	free(blks);
}

int cfs_unmount(struct cfs_fs *fs)
{
	cfs_quota_folder_stop(fs); /* it takes the glock to fold */
	cfs_recovery_stop(fs); /* it takes the glock for dead slots' orphans */
	pthread_mutex_lock(&fs->lock);
	/* The kernel's references are gone with the mount: unlinked inodes go now (on a cluster
	 * under the glock EX, read again: another node may have changed or freed them).  It is
	 * asked for before the committer and the lock dispatcher stop: while this waits, they
	 * still give up what other nodes ask for.  (A node holding the glock PR may be waiting
	 * for an inode glock cached here; with nobody left here to let it go, each waited for
	 * the other for ever.) */
	int rc = fs->ro ? 0 : cfs_meta_hold(fs, CFSLOCK_EX, CFSLOCK_EX);
	bool held = !fs->ro && !rc;
	fs->stopping = true;
	cfs_committer_wake(fs);
	pthread_mutex_unlock(&fs->lock);
	pthread_join(fs->committer, NULL);
	pthread_mutex_lock(&fs->lock);
	if (held)
		ask_for_every_inode(fs);
	for (size_t i = 0; i < CFS_ICACHE_BUCKETS && !rc; i++)
		for (struct cfs_inode *ip = fs->ihash[i], *n; ip && !rc; ip = n) {
			n = ip->hnext;
			ip->nlookup = 0;
			ip->nopen = 0;
			cfs_irefresh(fs, ip); /* ESTALE: dead, it just leaves memory */
			rc = cfs_iput_check(fs, ip);
			if (!rc && fs->txn.n > fs->txn.limit / 2)
				rc = cfs_journal_commit(fs);
		}
	int crc = cfs_journal_commit(fs);
	/* Clean: the next mount has nothing to replay. */
	if (!crc && !fs->ro)
		crc = cfs_journal_empty(fs);
	if (held)
		cfs_glock_unhold(fs, &fs->meta);
	pthread_mutex_unlock(&fs->lock);
	rc = rc ? rc : crc;
	fs_free(fs);
	return rc;
}

int cfs_set_read_only(struct cfs_fs *fs, bool ro)
{
	pthread_mutex_lock(&fs->lock);
	int rc = 0;
	if (ro && !fs->ro) {
		rc = cfs_journal_commit(fs);
		if (!rc)
			rc = cfs_journal_empty(fs);
		if (!rc) {
			fs->ro = fs->remounted_ro = true;
			cfs_log(fs, "remounted read-only");
		}
	} else if (!ro && fs->ro) {
		rc = fs->remounted_ro ? 0 : -EROFS;
		if (!rc) {
			fs->ro = fs->remounted_ro = false;
			cfs_log(fs, "remounted read-write");
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

bool cfs_slot_lock(const char *resource, unsigned *slot)
{
	char tail;
	return sscanf(resource, "slot-%u%c", slot, &tail) == 1;
}

/* Every granted "slot-N" lock is a node with the filesystem mounted, or a dead one whose
 * recovery is not done (its locks are recovering). */
static void add_mounted(void *arg, const struct cfslock_dump_entry *e)
{
	struct cfs_status *st = arg;
	unsigned slot;
	if (!cfs_slot_lock(e->resource, &slot) || strcmp(e->state, "granted"))
		return;
	if (e->recovering && st->nrecovering < CFS_STATUS_MAX_NODES) {
		st->recovering_slot[st->nrecovering] = slot;
		st->recovering_node[st->nrecovering++] = e->node;
	} else if (!e->recovering && st->nmounted < CFS_STATUS_MAX_NODES) {
		st->mounted_slot[st->nmounted] = slot;
		st->mounted_node[st->nmounted++] = e->node;
	}
}

void cfs_status(struct cfs_fs *fs, struct cfs_status *st)
{
	pthread_mutex_lock(&fs->lock);
	memset(st, 0, sizeof *st);
	st->total_blocks = fs->sb.total_blocks;
	cfs_alloc_refresh(fs);
	st->free_blocks = cfs_free_blocks(fs);
	st->block_size = fs->bs;
	st->nags = fs->sb.nags;
	st->slot = fs->slot;
	st->nslots = fs->sb.nslots;
	memcpy(st->label, fs->sb.label, sizeof st->label);
	snprintf(st->lockproto, sizeof st->lockproto, "%s", cfs_super_lockproto(&fs->sb));
	cfs_features_describe(&fs->sb, st->features, sizeof st->features);
	st->node_id = fs->cluster ? cfslock_node_id(fs->locks) : 0;
	st->lock_messages = cfslock_messages_sent(fs->locks);
	st->lock_waits = fs->lock_waits;
	st->lock_wait_ms = fs->lock_wait_ns / 1000000u;
	if (fs->cluster) {
		size_t cached;
		cfslock_cache_counts(fs->locks, &cached, &st->locks_given_back);
		st->locks_cached = cached + fs->iglocks_granted + fs->group_glocks_granted;
		st->locks_given_back += fs->iglocks_given_back;
		st->lock_cache_limit = fs->lock_cache_limit;
		cfslock_dump(fs->space, add_mounted, st);
		st->fenced = cfs_fenced(fs);
		st->fence_interval_ms = cfs_fence_interval_ms(fs);
		st->lease_ms = cfslock_lease_ms(fs->locks);
		st->evict_ms = cfslock_evict_ms(fs->locks);
		st->beat_gap_max_ms = cfslock_beat_gap_max_ms(fs->locks);
		st->evicted = cfslock_evicted(fs->locks);
	}
	cvm_uuid u;
	memcpy(u.b, fs->sb.fs_uuid, 16);
	cvm_uuid_format(&u, st->fs_uuid);
	st->stats = fs->stats;
	st->stats.behind_kept = fs->wb_bytes;
	st->writebehind_mib = (uint32_t)(fs->wb_limit >> 20);
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_rdlock(&fs->vol_lock);
	st->stats.flushes = cvm_volume_flushes(fs->vol);
	pthread_rwlock_unlock(&fs->vol_lock);
}
