/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfsd's side of libodm (see odm_server.h). */
#define FUSE_USE_VERSION 312
#include "cfsd/odm_server.h"
#include "cfsd/odm_cluster.h"
#include "cfs/control.h"
#include "cfsd/fuse_ops.h"
#include "cfs/internal.h"
#include "tools/common.h"
#include "odm/odm.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ODM_XATTR "user.odm"
#define MAX_BARRIERS 32

struct odm_hold {
	uint64_t ino;
	struct odm_client *c;
	bool mapped;      /* the client may be doing I/O with a map of it */
	bool revoking;    /* asked to drop that map, no answer yet */
	bool uncommitted; /* created and not named yet: parent and name say where it goes */
	uint64_t parent;
	char *name;
	struct odm_hold *next;
};

struct odm_client {
	struct odm_server *s;
	int fd;
	pthread_mutex_t *send_lock;
	pid_t pid;
	struct cfs_cred cred;
	char owner[160];
	bool gone;
	bool hello; /* an ODM process, not `cfs status` */
};

struct odm_server {
	struct cfsd *d;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* holds, barriers or mappings changed */
	struct odm_hold *holds;
	uint64_t barrier[MAX_BARRIERS]; /* inodes being revoked; 0: every inode */
	unsigned nbarriers;
	uint64_t mapping[MAX_BARRIERS * 4]; /* inodes whose map is being made right now */
	unsigned nmapping;
	unsigned nclients;
	struct odm_cluster *cl; /* the maps' cluster locks; NULL on a mount of one node */
	struct odm_share *share; /* every node's counts, for odmstat */
};

int odm_server_create(struct cfsd *d, struct odm_server **out)
{
	struct odm_server *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->d = d;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->changed, &ca);
	pthread_condattr_destroy(&ca);
	int rc = odm_cluster_create(s, d->fs, &s->cl);
	if (!rc)
		rc = odm_share_start(d->fs, &s->share);
	if (rc) {
		odm_server_destroy(s);
		return rc;
	}
	*out = s;
	return 0;
}

void odm_server_destroy(struct odm_server *s)
{
	if (!s)
		return;
	odm_share_stop(s->share);
	odm_cluster_destroy(s->cl);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->changed);
	free(s);
}

/* An ODM client's other groups, for the permission checks: from /proc, as for FUSE callers. */
static unsigned peer_privileges(const struct cfs_cred *cr, uint32_t gid)
{
	const struct odm_client *c = cr->ctx;
	return pid_privileges(c->pid, cr, gid);
}

uint32_t odm_client_uid(const struct odm_client *c) { return c->cred.uid; }
const char *odm_client_owner(const struct odm_client *c) { return c->owner; }

struct odm_client *odm_client_new(struct odm_server *s, int fd, pthread_mutex_t *send_lock)
{
	struct odm_client *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->s = s;
	c->fd = fd;
	c->send_lock = send_lock;
	struct ucred uc;
	socklen_t len = sizeof uc;
	/* Unknown: nobody's rights.  The mode of a new file is the one asked for, unmasked. */
	c->cred = (struct cfs_cred){.uid = UINT32_MAX, .gid = UINT32_MAX};
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0) {
		c->pid = uc.pid;
		c->cred = (struct cfs_cred){.uid = uc.uid, .gid = uc.gid};
	}
	c->cred.privileges = peer_privileges;
	c->cred.ctx = c;
	snprintf(c->owner, sizeof c->owner, "pid %d", (int)c->pid);
	return c;
}

static void free_hold(struct odm_hold *h)
{
	free(h->name);
	free(h);
}

/* The client no longer writes through h's map (s->lock held). */
static void set_unmapped(struct odm_server *s, struct odm_hold *h)
{
	if (!h->mapped)
		return;
	h->mapped = false;
	odm_cluster_map_end(s->cl, h->ino);
}

void odm_client_gone(struct odm_client *c)
{
	struct odm_server *s = c->s;
	struct odm_hold *mine = NULL;
	pthread_mutex_lock(&s->lock);
	c->gone = true;
	for (struct odm_hold **p = &s->holds; *p;) {
		struct odm_hold *h = *p;
		if (h->c == c) {
			*p = h->next;
			h->next = mine;
			mine = h;
			set_unmapped(s, h);
		} else {
			p = &h->next;
		}
	}
	s->nclients -= c->hello;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	while (mine) {
		struct odm_hold *h = mine;
		mine = h->next;
		if (h->uncommitted)
			cfs_log(s->d->fs, "ODM %s went away: its uncommitted file %s (inode %llu) is "
				"removed", c->owner, h->name, (unsigned long long)h->ino);
		cfs_release(s->d->fs, h->ino); /* an uncommitted file is freed here */
		odm_cluster_use_end(s->cl, h->ino);
		free_hold(h);
	}
	if (c->hello)
		cfs_shared_write_unhold(s->d->fs);
	free(c);
}

/* ---- the registry (s->lock held) ---- */
static struct odm_hold *find_hold(struct odm_server *s, uint64_t ino, const struct odm_client *c)
{
	for (struct odm_hold *h = s->holds; h; h = h->next)
		if (h->ino == ino && h->c == c)
			return h;
	return NULL;
}

static bool in_list(const uint64_t *v, unsigned n, uint64_t ino)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == ino || v[i] == 0 || ino == 0)
			return true;
	return false;
}

static void list_remove(uint64_t *v, unsigned *n, uint64_t ino)
{
	for (unsigned i = 0; i < *n; i++)
		if (v[i] == ino) {
			v[i] = v[--*n];
			return;
		}
}

/* Wait until ino may be mapped, then mark it being mapped (revoke_begin waits for that). */
static int mapping_begin(struct odm_server *s, uint64_t ino)
{
	pthread_mutex_lock(&s->lock);
	while (in_list(s->barrier, s->nbarriers, ino) ||
	       s->nmapping == sizeof s->mapping / sizeof s->mapping[0])
		pthread_cond_wait(&s->changed, &s->lock);
	s->mapping[s->nmapping++] = ino;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void mapping_end(struct odm_server *s, uint64_t ino, struct odm_hold *h, bool mapped)
{
	pthread_mutex_lock(&s->lock);
	list_remove(s->mapping, &s->nmapping, ino);
	if (h && mapped && h->mapped) /* a new map for one still out: one count on the lock */
		odm_cluster_map_end(s->cl, ino);
	if (h && mapped)
		h->mapped = true;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
}

bool odm_held(struct odm_server *s, uint64_t ino)
{
	if (!s)
		return false;
	pthread_mutex_lock(&s->lock);
	bool held = false;
	for (struct odm_hold *h = s->holds; h && !held; h = h->next)
		held = h->ino == ino;
	pthread_mutex_unlock(&s->lock);
	return held;
}

void odm_counts(struct odm_server *s, uint32_t *clients, uint32_t *files)
{
	*clients = *files = 0;
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	*clients = s->nclients;
	for (struct odm_hold *h = s->holds; h; h = h->next) {
		bool seen = false;
		for (struct odm_hold *o = s->holds; o != h && !seen; o = o->next)
			seen = o->ino == h->ino;
		*files += !seen;
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---- revoking ---- */
static void send_notice(struct odm_client *c, const uint64_t *inos, size_t n)
{
	ControlReply r = CONTROL_REPLY__INIT;
	r.has_notice = r.notice = true;
	r.n_revoke = n;
	r.revoke = (uint64_t *)inos;
	cfs_control_send_message(c->fd, c->send_lock, &r.base);
}

/* Tell every holder to drop (s->lock held on entry and exit; dropped to send). */
static int notify_holders(struct odm_server *s, uint64_t ino, const struct odm_client *except)
{
	struct odm_hold *h;
	uint64_t *inos = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (;;) { /* one client at a time, all its files in one notice */
		struct odm_client *c = NULL;
		n = 0;
		for (h = s->holds; h; h = h->next) {
			if (!h->mapped || h->revoking || h->c == except || h->c->gone ||
			    (ino && h->ino != ino) || (c && h->c != c))
				continue;
			c = h->c;
			if (cfs_reserve((void **)&inos, &cap, n + 1, sizeof *inos)) {
				rc = -ENOMEM;
				break;
			}
			inos[n++] = h->ino;
			h->revoking = true;
		}
		if (!c || rc)
			break;
		pthread_mutex_unlock(&s->lock);
		send_notice(c, inos, n);
		pthread_mutex_lock(&s->lock);
	}
	free(inos);
	return rc;
}

static struct odm_hold *unanswered(struct odm_server *s, uint64_t ino,
				   const struct odm_client *except)
{
	for (struct odm_hold *h = s->holds; h; h = h->next)
		if (h->revoking && !h->c->gone && h->c != except && (!ino || h->ino == ino))
			return h;
	return NULL;
}

static void revoke_end_here(struct odm_server *s, uint64_t ino)
{
	pthread_mutex_lock(&s->lock);
	list_remove(s->barrier, &s->nbarriers, ino);
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
}

/* Revoke the maps given out here; on success the barrier stays until revoke_end_here. */
static int revoke_begin_here(struct odm_server *s, uint64_t ino, const struct odm_client *except,
			     char *msg, size_t msglen)
{
	pthread_mutex_lock(&s->lock);
	while (s->nbarriers == MAX_BARRIERS)
		pthread_cond_wait(&s->changed, &s->lock);
	s->barrier[s->nbarriers++] = ino;
	while (in_list(s->mapping, s->nmapping, ino)) /* maps being made now are handed out */
		pthread_cond_wait(&s->changed, &s->lock);
	int rc = notify_holders(s, ino, except);
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ODM_REVOKE_TIMEOUT_S;
	while (!rc && unanswered(s, ino, except)) {
		if (pthread_cond_timedwait(&s->changed, &s->lock, &deadline) != ETIMEDOUT)
			continue;
		struct odm_hold *h = unanswered(s, ino, except);
		if (h) {
			snprintf(msg, msglen, "ODM %s did not release inode %llu within %d s "
				 "(I/O in flight that it does not reap?)", h->c->owner,
				 (unsigned long long)h->ino, ODM_REVOKE_TIMEOUT_S);
			rc = -EBUSY;
		}
	}
	/* The maps of except go too on a cluster: its own PR would keep the change's EX off. */
	struct odm_hold *own = s->cl && ino && except ? find_hold(s, ino, except) : NULL;
	if (!rc && own)
		set_unmapped(s, own);
	pthread_mutex_unlock(&s->lock);
	if (rc == -EBUSY)
		cfs_log(s->d->fs, "%s", msg);
	if (rc)
		revoke_end_here(s, ino);
	return rc;
}

int odm_revoke_here(struct odm_server *s, uint64_t ino, char *msg, size_t msglen)
{
	int rc = revoke_begin_here(s, ino, NULL, msg, msglen);
	if (!rc)
		revoke_end_here(s, ino);
	return rc;
}

int odm_revoke_begin(struct odm_server *s, uint64_t ino, const struct odm_client *except,
		     char *msg, size_t msglen)
{
	if (!s)
		return 0;
	int rc = revoke_begin_here(s, ino, except, msg, msglen);
	if (!rc && ino && (rc = odm_cluster_change_begin(s->cl, ino))) {
		snprintf(msg, msglen, "inode %llu: asking the other nodes to revoke their ODM maps: "
			 "%s", (unsigned long long)ino, strerror(-rc));
		revoke_end_here(s, ino);
	}
	return rc;
}

void odm_revoke_end(struct odm_server *s, uint64_t ino)
{
	if (!s)
		return;
	if (ino)
		odm_cluster_change_end(s->cl, ino);
	revoke_end_here(s, ino);
}

void odm_revoked(struct odm_client *c, uint64_t ino)
{
	struct odm_server *s = c->s;
	pthread_mutex_lock(&s->lock);
	struct odm_hold *h = find_hold(s, ino, c);
	if (h) {
		set_unmapped(s, h);
		h->revoking = false;
		pthread_cond_broadcast(&s->changed);
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---- requests ---- */
/* The inode of a path inside the mount (no "..", no symlinks: clients resolve those), each
 * directory on the way searchable by cr, as the kernel would check it for a system call. */
static int resolve(struct cfs_fs *fs, const char *path, const struct cfs_cred *cr,
		   bool want_parent, uint64_t *ino, const char **last)
{
	char *copy = strdup(path ? path : "");
	if (!copy)
		return -ENOMEM;
	uint64_t cur = CFS_ROOT;
	int rc = 0;
	char *save = NULL, *next;
	char *name = strtok_r(copy, "/", &save);
	if (!name && want_parent)
		rc = -EINVAL;
	for (; name && !rc; name = next) {
		next = strtok_r(NULL, "/", &save);
		if (!strcmp(name, ".."))
			rc = -EINVAL;
		else if (want_parent && !next)
			*last = path + (name - copy);
		else if (strcmp(name, ".") && !(rc = cfs_access(fs, cur, X_OK, cr))) {
			struct stat st;
			if (!(rc = cfs_lookup(fs, cur, name, &st))) {
				cfs_forget(fs, st.st_ino, 1);
				cur = st.st_ino;
			}
		}
	}
	free(copy);
	*ino = cur;
	return rc;
}

/* Hold ino for c, open in the filesystem; an existing hold is reused. */
static int hold(struct odm_client *c, uint64_t ino, struct odm_hold **out)
{
	struct odm_server *s = c->s;
	int rc = odm_cluster_use_begin(s->cl, ino);
	if (rc)
		return rc;
	if ((rc = cfs_open(s->d->fs, ino, O_RDWR))) {
		odm_cluster_use_end(s->cl, ino);
		return rc;
	}
	struct odm_hold *fresh = calloc(1, sizeof *fresh);
	bool added = false;
	pthread_mutex_lock(&s->lock);
	struct odm_hold *h = find_hold(s, ino, c);
	if (!h && fresh) {
		*fresh = (struct odm_hold){.ino = ino, .c = c, .next = s->holds};
		s->holds = h = fresh;
		added = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!added) { /* already held (the hold has its open and count), or no memory */
		cfs_release(s->d->fs, ino);
		odm_cluster_use_end(s->cl, ino);
		free(fresh);
	}
	*out = h;
	return h ? 0 : -ENOMEM;
}

static void unhold(struct odm_client *c, struct odm_hold *h)
{
	struct odm_server *s = c->s;
	pthread_mutex_lock(&s->lock);
	for (struct odm_hold **p = &s->holds; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	set_unmapped(s, h);
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	cfs_release(s->d->fs, h->ino);
	odm_cluster_use_end(s->cl, h->ino);
	free_hold(h);
}

static struct odm_hold *held_by(struct odm_client *c, uint64_t ino)
{
	pthread_mutex_lock(&c->s->lock);
	struct odm_hold *h = find_hold(c->s, ino, c);
	pthread_mutex_unlock(&c->s->lock);
	return h;
}

static int fill_layout(struct cfsd *d, struct odm_reply_mem *m)
{
	pthread_rwlock_rdlock(&d->fs->vol_lock); /* grow swaps the volume under this lock */
	const struct cvm_config *cfg = cvm_volume_config(d->fs->vol);
	int rc = 0;
	m->lun_paths = calloc(cfg->nluns ? cfg->nluns : 1, sizeof *m->lun_paths);
	for (uint32_t i = 0; m->lun_paths && i < cfg->nluns && !rc; i++)
		if (!(m->lun_paths[i] = strdup(cvm_volume_lun_path(d->fs->vol, i))))
			rc = -ENOMEM;
	cvm_uuid_format(&cfg->vol_uuid, m->vol_uuid);
	m->layout.generation = cfg->generation;
	m->layout.size = cvm_volume_size(d->fs->vol);
	m->layout.n_lun_paths = cfg->nluns;
	pthread_rwlock_unlock(&d->fs->vol_lock);
	m->layout.vol_uuid = m->vol_uuid;
	m->layout.lun_paths = m->lun_paths;
	m->layout.n_scan_paths = d->scan->n; /* they live as long as the mount */
	m->layout.scan_paths = (char **)d->scan->paths;
	return m->lun_paths ? rc : -ENOMEM;
}

/* The map of a held file, with the volume layout. */
/* The block size and file type odm_create gave the file (ODM_XATTR); false if it has none. */
static bool odm_attr(struct cfs_fs *fs, uint64_t ino, uint32_t *block_size, uint32_t *type)
{
	uint8_t attr[8];
	if (cfs_getxattr(fs, ino, ODM_XATTR, attr, sizeof attr) != sizeof attr)
		return false;
	memcpy(block_size, attr, 4);
	memcpy(type, attr + 4, 4);
	return true;
}

static int fill_map(struct odm_client *c, struct odm_hold *h, ControlReply *reply,
		    struct odm_reply_mem *m)
{
	struct cfsd *d = c->s->d;
	struct cfs_bypass_map map;
	mapping_begin(c->s, h->ino);
	int rc = odm_cluster_map_begin(c->s->cl, h->ino);
	if (rc) {
		mapping_end(c->s, h->ino, NULL, false);
		return rc;
	}
	do
		rc = cfs_bypass_map(d->fs, h->ino, &map);
	while (rc == -EAGAIN);
	if (rc)
		odm_cluster_map_end(c->s->cl, h->ino);
	mapping_end(c->s, h->ino, h, rc == 0);
	if (rc)
		return rc;
	if (!(m->ext = calloc(map.n ? map.n : 1, sizeof *m->ext)) ||
	    !(m->extp = calloc(map.n ? map.n : 1, sizeof *m->extp))) {
		free(map.ext);
		return -ENOMEM;
	}
	for (size_t i = 0; i < map.n; i++) {
		odm_extent__init(&m->ext[i]);
		m->ext[i].file_off = map.ext[i].file_off;
		m->ext[i].vol_off = map.ext[i].vol_off;
		m->ext[i].len = map.ext[i].len;
		m->extp[i] = &m->ext[i];
	}
	free(map.ext);
	odm_map__init(&m->map);
	m->map.ino = h->ino;
	m->map.key = map.generation;
	m->map.size = map.size;
	m->map.n_extents = map.n;
	m->map.extents = m->extp;
	m->map.has_block_size = m->map.has_file_type =
		odm_attr(d->fs, h->ino, &m->map.block_size, &m->map.file_type);
	odm_layout__init(&m->layout);
	if ((rc = fill_layout(d, m)))
		return rc;
	reply->map = &m->map;
	reply->layout = &m->layout;
	return 0;
}

static int identify(struct odm_client *c, const ControlRequest *req, ControlReply *reply,
		    struct odm_reply_mem *m)
{
	uint64_t ino;
	struct stat st;
	struct odm_hold *h;
	int rc = resolve(c->s->d->fs, req->path, &c->cred, false, &ino, NULL);
	if (!rc && !(rc = cfs_getattr(c->s->d->fs, ino, &st)) && !S_ISREG(st.st_mode))
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	if (!rc) /* ODM opens its files for reading and writing */
		rc = cfs_access(c->s->d->fs, ino, R_OK | W_OK, &c->cred);
	if (rc)
		return rc;
	if ((rc = hold(c, ino, &h)))
		return rc;
	uint64_t now = 0; /* another node may have removed it before the hold (odm_cluster.h) */
	if (c->s->cl && (resolve(c->s->d->fs, req->path, &c->cred, false, &now, NULL) || now != ino))
		rc = -ENOENT;
	if (rc || (rc = fill_map(c, h, reply, m)))
		unhold(c, h);
	else if (c->s->d->se) /* pages the kernel cached of it are stale from now on */
		fuse_lowlevel_notify_inval_inode(c->s->d->se, ino, 0, 0);
	return rc;
}

/* What odm_create(3) checks, checked again: the client may be any program of root's or
 * odm_group's, not libodm. */
static int create_fields_valid(const ControlRequest *req, char *msg, size_t len)
{
	uint32_t bs = req->block_size;
	if (!req->has_block_size || bs < ODM_ALIGN || bs > (1u << 20) || (bs & (bs - 1)))
		snprintf(msg, len, "ODM create: block size %u: give a power of two from %u to "
			 "1048576", bs, ODM_ALIGN);
	else if (!req->has_file_type || req->file_type >= ODM_FT_COUNT)
		snprintf(msg, len, "ODM create: file type %u: give one from 0 to %d (odm.h)",
			 req->file_type, ODM_FT_COUNT - 1);
	else if (req->size % bs)
		snprintf(msg, len, "ODM create: size %llu is not a multiple of the block size %u",
			 (unsigned long long)req->size, bs);
	else
		return 0;
	return -EINVAL;
}

static int create(struct odm_client *c, const ControlRequest *req, ControlReply *reply,
		  struct odm_reply_mem *m)
{
	struct cfs_fs *fs = c->s->d->fs;
	uint64_t parent;
	const char *name = NULL;
	struct stat st;
	int rc = create_fields_valid(req, m->message, sizeof m->message);
	if (rc)
		return rc;
	rc = resolve(fs, req->path, &c->cred, true, &parent, &name);
	if (!rc && !name)
		rc = -EINVAL;
	if (!rc)
		rc = cfs_access(fs, parent, W_OK | X_OK, &c->cred);
	if (rc)
		return rc; /* a missing directory too */
	if ((rc = cfs_lookup(fs, parent, name, &st)) == 0) {
		cfs_forget(fs, st.st_ino, 1);
		return -EEXIST;
	}
	if (rc != -ENOENT || (rc = cfs_tmpfile(fs, parent, 0640, &c->cred, &st)))
		return rc;
	struct odm_hold *h = calloc(1, sizeof *h);
	char *nm = strdup(name);
	if (!h || !nm || (rc = odm_cluster_use_begin(c->s->cl, st.st_ino))) {
		free(h);
		free(nm);
		cfs_release(fs, st.st_ino);
		return rc ? rc : -ENOMEM;
	}
	*h = (struct odm_hold){.ino = st.st_ino, .c = c, .uncommitted = true, .parent = parent,
			       .name = nm};
	pthread_mutex_lock(&c->s->lock);
	h->next = c->s->holds;
	c->s->holds = h;
	pthread_mutex_unlock(&c->s->lock);
	uint32_t attr[2] = {req->block_size, req->file_type};
	rc = cfs_setxattr(fs, h->ino, ODM_XATTR, attr, sizeof attr, 0, NULL);
	if (!rc && req->size)
		rc = cfs_bypass_resize(fs, h->ino, req->size);
	if (!rc)
		rc = fill_map(c, h, reply, m);
	if (rc)
		unhold(c, h); /* frees the file */
	return rc;
}

static int commit(struct odm_client *c, const ControlRequest *req)
{
	struct cfs_fs *fs = c->s->d->fs;
	struct odm_hold *h = held_by(c, req->ino);
	if (!h || !h->uncommitted)
		return -ENOENT;
	struct stat st;
	int rc = cfs_link(fs, h->ino, h->parent, h->name, &st);
	if (!rc) {
		cfs_forget(fs, h->ino, 1);
		h->uncommitted = false;
		rc = cfs_fsync(fs, h->ino);
		if (c->s->d->se) { /* a lookup that failed before may be cached, and a listing */
			fuse_lowlevel_notify_inval_entry(c->s->d->se, h->parent, h->name,
							 strlen(h->name));
			fuse_lowlevel_notify_inval_inode(c->s->d->se, h->parent, 0, 0);
		}
	}
	return rc;
}

static int resize(struct odm_client *c, const ControlRequest *req, ControlReply *reply,
		  struct odm_reply_mem *m)
{
	struct odm_server *s = c->s;
	struct odm_hold *h = held_by(c, req->ino);
	if (!h)
		return -ENOENT;
	uint32_t bs, type;
	if (!odm_attr(s->d->fs, h->ino, &bs, &type))
		bs = ODM_ALIGN; /* files made otherwise than by odm_create have none: 512 */
	if (!bs || req->size % bs) {
		snprintf(m->message, sizeof m->message, "ODM resize: size %llu is not a multiple of "
			 "the file's block size %u", (unsigned long long)req->size, bs);
		return -EINVAL;
	}
	int rc = odm_revoke_begin(s, h->ino, c, m->message, sizeof m->message);
	if (!rc) {
		rc = cfs_bypass_resize(s->d->fs, h->ino, req->size);
		odm_revoke_end(s, h->ino);
	}
	if (!rc && s->d->se) /* the size the kernel caches */
		kernel_size_changed(s->d, h->ino, req->size);
	if (!rc)
		rc = fill_map(c, h, reply, m);
	return rc;
}

/* unlink(2)'s rules: write and search on the directory; in a sticky one, only the owner of
 * the file or of the directory (or root). */
static int may_remove(struct cfs_fs *fs, uint64_t parent, uint64_t ino, const struct cfs_cred *cr)
{
	struct stat dir, file;
	int rc = cfs_access(fs, parent, W_OK | X_OK, cr);
	if (!rc && cr->uid != 0 && !(rc = cfs_getattr(fs, parent, &dir)) && (dir.st_mode & S_ISVTX) &&
	    !(rc = cfs_getattr(fs, ino, &file)) && cr->uid != file.st_uid && cr->uid != dir.st_uid)
		rc = -EPERM;
	return rc;
}

static int delete(struct odm_client *c, const ControlRequest *req, struct odm_reply_mem *m)
{
	struct cfs_fs *fs = c->s->d->fs;
	uint64_t parent, ino;
	const char *name = NULL;
	int rc = resolve(fs, req->path, &c->cred, true, &parent, &name);
	if (!rc)
		rc = resolve(fs, req->path, &c->cred, false, &ino, NULL);
	if (!rc)
		rc = may_remove(fs, parent, ino, &c->cred);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->s->lock);
	struct odm_hold *other = NULL, *mine = NULL;
	for (struct odm_hold *h = c->s->holds; h; h = h->next)
		if (h->ino == ino) {
			if (h->c == c)
				mine = h;
			else
				other = h;
		}
	if (other)
		snprintf(m->message, sizeof m->message, "%s is in use by ODM %s", req->path,
			 other->c->owner);
	pthread_mutex_unlock(&c->s->lock);
	if (other)
		return -EBUSY;
	if (mine)
		unhold(c, mine);
	if ((rc = odm_cluster_may_delete(c->s->cl, ino, m->message, sizeof m->message)))
		return rc;
	rc = cfs_unlink(fs, parent, name);
	if (!rc && c->s->d->se) { /* the kernel's cached name and listing go too */
		fuse_lowlevel_notify_delete(c->s->d->se, parent, ino, name, strlen(name));
		fuse_lowlevel_notify_inval_inode(c->s->d->se, parent, 0, 0);
	}
	return rc;
}

bool odm_is_request(const ControlRequest *req)
{
	switch (req->op) { /* the ODM ops are not one range: SYNC, READ_ONLY and LOCKS are root's */
	case CONTROL_REQUEST__OP__ODM_HELLO:
	case CONTROL_REQUEST__OP__ODM_IDENTIFY:
	case CONTROL_REQUEST__OP__ODM_UNIDENTIFY:
	case CONTROL_REQUEST__OP__ODM_CREATE:
	case CONTROL_REQUEST__OP__ODM_COMMIT:
	case CONTROL_REQUEST__OP__ODM_ABORT:
	case CONTROL_REQUEST__OP__ODM_RESIZE:
	case CONTROL_REQUEST__OP__ODM_DELETE:
	case CONTROL_REQUEST__OP__ODM_REVOKED:
	case CONTROL_REQUEST__OP__ODM_STATS:
	case CONTROL_REQUEST__OP__ODM_LEASE:
		return true;
	default:
		return false;
	}
}

void odm_handle(struct odm_client *c, const ControlRequest *req, ControlReply *reply,
		struct odm_reply_mem *m)
{
	int rc = 0;
	struct odm_hold *h;
	switch (req->op) {
	case CONTROL_REQUEST__OP__ODM_HELLO:
		if (c->hello)
			break;
		if ((rc = cfs_shared_write_hold(c->s->d->fs))) { /* no page cache anywhere */
			snprintf(m->message, sizeof m->message, "%s", cfs_last_error());
			break;
		}
		snprintf(c->owner, sizeof c->owner, "%s (pid %d)", req->owner ? req->owner : "?",
			 (int)c->pid);
		pthread_mutex_lock(&c->s->lock);
		c->s->nclients += !c->hello;
		c->hello = true;
		pthread_mutex_unlock(&c->s->lock);
		break;
	case CONTROL_REQUEST__OP__ODM_IDENTIFY:
		rc = identify(c, req, reply, m);
		break;
	case CONTROL_REQUEST__OP__ODM_UNIDENTIFY:
	case CONTROL_REQUEST__OP__ODM_ABORT:
		h = held_by(c, req->ino);
		if (!h || (req->op == CONTROL_REQUEST__OP__ODM_ABORT && !h->uncommitted))
			rc = -ENOENT;
		else
			unhold(c, h);
		break;
	case CONTROL_REQUEST__OP__ODM_CREATE:
		rc = create(c, req, reply, m);
		break;
	case CONTROL_REQUEST__OP__ODM_COMMIT:
		rc = commit(c, req);
		break;
	case CONTROL_REQUEST__OP__ODM_RESIZE:
		rc = resize(c, req, reply, m);
		break;
	case CONTROL_REQUEST__OP__ODM_DELETE:
		rc = delete(c, req, m);
		break;
	case CONTROL_REQUEST__OP__ODM_STATS:
		rc = odm_share_fill(c->s->share, reply, &m->share);
		break;
	default:
		rc = -EOPNOTSUPP;
	}
	reply->error = -rc;
	if (rc && m->message[0])
		reply->message = m->message;
}

void odm_reply_mem_free(struct odm_reply_mem *m)
{
	for (size_t i = 0; m->lun_paths && i < m->layout.n_lun_paths; i++)
		free(m->lun_paths[i]);
	free(m->lun_paths);
	free(m->ext);
	free(m->extp);
	odm_share_mem_free(&m->share);
}
