/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lock table for people: every lock of the filesystem's lockspace, as this node's lock
 * manager sees it (every node's, on a cluster), named by what it protects, with the path of
 * the file it is about where a walk of the tree finds it: what a DBA looks at to see what a
 * hung process waits for (`cfs locks`). */
#include "cfs/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PATH_SEARCH 100000u /* directory entries looked at, at most, to find paths */

struct entry {
	struct cfs_lock_info info;
	char *resource;
	char *path;
};

struct table {
	struct cfs_fs *fs;
	struct entry *v;
	size_t n, cap;
	int error;
};

/* A new row, or NULL (t->error says why). */
static struct entry *new_entry(struct table *t, const char *resource)
{
	if (t->error || (t->error = cfs_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)))
		return NULL;
	struct entry *x = &t->v[t->n];
	*x = (struct entry){.resource = strdup(resource)};
	if (!x->resource) {
		t->error = -ENOMEM;
		return NULL;
	}
	t->n++;
	return x;
}

static void copy_entry(void *arg, const struct cfslock_dump_entry *e)
{
	struct entry *x = new_entry(arg, e->resource);
	if (!x)
		return;
	x->info = (struct cfs_lock_info){.node = e->node, .owner = e->owner, .granted = e->granted,
					 .requested = e->requested, .recovering = e->recovering};
	snprintf(x->info.state, sizeof x->info.state, "%s", e->state);
}

/* fcntl record locks: their own table, not the lock manager's resources (plock.c). */
static void copy_record_lock(void *arg, const struct cfslock_plock *p, uint32_t node, bool waiting)
{
	struct table *t = arg;
	struct entry *x = new_entry(t, "fcntl");
	if (!x)
		return;
	int mode = p->type == F_RDLCK ? CFSLOCK_PR : CFSLOCK_EX;
	x->info = (struct cfs_lock_info){.node = node, .owner = p->owner,
					 .ino = cfs_handle_block(t->fs, p->file),
					 .granted = waiting ? -1 : mode, .requested = mode};
	snprintf(x->info.state, sizeof x->info.state, "%s", waiting ? "waiting" : "granted");
	char end[24] = "EOF";
	if (p->end != UINT64_MAX)
		snprintf(end, sizeof end, "%" PRIu64, p->end);
	snprintf(x->info.object, sizeof x->info.object, "fcntl %s lock, bytes %" PRIu64 "-%s, "
		 "pid %u on its node", p->type == F_RDLCK ? "read" : "write", p->start, end, p->pid);
}

/* What a resource protects, and the inode it is about (see the files that name them). */
static void describe(struct cfs_fs *fs, const char *r, struct cfs_lock_info *l)
{
	uint64_t a, b;
	unsigned n;
	char tail;
	if (!strcmp(r, "fcntl"))
		return; /* described as it was copied */
	if (!strcmp(r, "meta"))
		snprintf(l->object, sizeof l->object, "metadata (the whole filesystem)");
	else if (sscanf(r, "slot-%u%c", &n, &tail) == 1)
		snprintf(l->object, sizeof l->object, "journal slot %u (mounted)", n);
	else if (sscanf(r, "recover-%u%c", &n, &tail) == 1)
		snprintf(l->object, sizeof l->object, "recovery of slot %u", n);
	else if (sscanf(r, "g%u%c", &n, &tail) == 1)
		snprintf(l->object, sizeof l->object, "allocation group %u (EX to allocate or free "
			 "in it)", n);
	else if (!strcmp(r, "pagecache"))
		snprintf(l->object, sizeof l->object, "page cache (PR normal mount, CW shared "
			 "direct writes)");
	else if (sscanf(r, "i%" SCNx64 "%c", &a, &tail) == 1) {
		snprintf(l->object, sizeof l->object, "inodes in blocks %" PRIu64 "-%" PRIu64
			 " (PR to read, EX to change)", a, a + CFS_IGLOCK_SPAN - 1);
	} else if (!strcmp(r, "opens"))
		snprintf(l->object, sizeof l->object, "open files of removed inodes");
	else if (sscanf(r, "f%" SCNx64 ".%" SCNx64 "%c", &a, &b, &tail) == 2) {
		l->ino = cfs_handle_block(fs, a);
		snprintf(l->object, sizeof l->object, "flock of inode %" PRIu64, l->ino);
	} else if (sscanf(r, "x%" SCNx64 ".%" SCNx64 "%c", &a, &b, &tail) == 2) {
		l->ino = cfs_handle_block(fs, a);
		snprintf(l->object, sizeof l->object, "program, inode %" PRIu64 " (PR while run, "
			 "CW while open for writing)", l->ino);
	} else if (sscanf(r, "odm-map-%" SCNx64 "%c", &a, &tail) == 1) {
		l->ino = cfs_handle_block(fs, a);
		snprintf(l->object, sizeof l->object, "ODM maps of inode %" PRIu64 " (PR while "
			 "mapped, EX to resize)", l->ino);
	} else if (sscanf(r, "odm-use-%" SCNx64 "%c", &a, &tail) == 1) {
		l->ino = cfs_handle_block(fs, a);
		snprintf(l->object, sizeof l->object, "ODM use of inode %" PRIu64 " (PR while "
			 "held, EX to delete)", l->ino);
	} else if (sscanf(r, "o%" SCNx64 ".%" SCNx64 "%c", &a, &b, &tail) == 2) {
		l->ino = a;
		snprintf(l->object, sizeof l->object, "open here, inode %" PRIu64 " (who frees "
			 "it once removed)", l->ino);
	} else
		snprintf(l->object, sizeof l->object, "%s", r);
}

static struct entry *wanting(struct table *t, uint64_t ino)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].info.ino == ino && !t->v[i].path)
			return &t->v[i];
	return NULL;
}

/* Breadth first from the root, until every inode asked about has a path or PATH_SEARCH
 * entries were looked at. */
static int find_paths(struct cfs_fs *fs, struct table *t)
{
	size_t left = 0;
	for (size_t i = 0; i < t->n; i++)
		left += t->v[i].info.ino != 0;
	struct dir { uint64_t ino; char *path; } *q = NULL;
	size_t qn = 0, qcap = 0, head = 0, seen = 0;
	int rc = cfs_reserve((void **)&q, &qcap, 1, sizeof *q);
	if (!rc && !(q[qn].path = strdup("")))
		rc = -ENOMEM;
	if (!rc)
		q[qn++].ino = CFS_ROOT;
	for (struct entry *e; !rc && (e = wanting(t, fs->sb.root_ino)); left--)
		if (!(e->path = strdup("/")))
			rc = -ENOMEM;
	while (!rc && head < qn && left && seen < PATH_SEARCH) {
		struct cfs_dirent *d;
		size_t n;
		if (cfs_readdir_all(fs, q[head].ino, &d, &n)) {
			head++; /* gone or damaged meanwhile: its subtree stays unknown */
			continue;
		}
		for (size_t i = 2; i < n && !rc; i++, seen++) {
			char *p;
			if (asprintf(&p, "%s/%s", q[head].path, d[i].name) < 0) {
				rc = -ENOMEM;
				break;
			}
			uint64_t ino = cfs_handle_ino(d[i].ino);
			for (struct entry *e; (e = wanting(t, ino)) && !rc; left--)
				if (!(e->path = strdup(p)))
					rc = -ENOMEM;
			if (d[i].type == DT_DIR && !rc &&
			    !(rc = cfs_reserve((void **)&q, &qcap, qn + 1, sizeof *q)))
				q[qn++] = (struct dir){d[i].ino, p};
			else
				free(p);
		}
		free(d);
		head++;
	}
	for (size_t i = 0; i < qn; i++)
		free(q[i].path);
	free(q);
	return rc;
}

/* The metadata lock for the walk, without waiting long: cfs locks is run when something
 * hangs, perhaps on that very lock.  Tries for about a second, then shows no paths. */
static bool hold_meta_briefly(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	cfs_op_imode = CFSLOCK_PR; /* the walk's inode glocks */
	int rc = -EAGAIN;
	for (int i = 0; i < 10 && rc == -EAGAIN; i++) {
		if (i) {
			pthread_mutex_unlock(&fs->lock);
			nanosleep(&(struct timespec){0, 100000000}, NULL);
			pthread_mutex_lock(&fs->lock);
		}
		rc = cfs_glock_try_hold(fs, &fs->meta, CFSLOCK_PR);
	}
	pthread_mutex_unlock(&fs->lock);
	return rc == 0;
}

static void unhold_meta(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	cfs_glock_unhold(fs, &fs->meta);
	pthread_mutex_unlock(&fs->lock);
}

int cfs_locks(struct cfs_fs *fs, cfs_lock_visit_fn fn, void *arg)
{
	struct table t = {.fs = fs};
	int rc = cfslock_dump(fs->space, copy_entry, &t);
	if (!rc && fs->cluster) /* one node: the kernel keeps them */
		if ((rc = cfslock_plock_dump(fs->space, copy_record_lock, &t)) == -EOPNOTSUPP)
			rc = 0; /* the kernel DLM's are dlm_controld's to show (dlm_tool plocks) */
	rc = rc ? rc : t.error;
	for (size_t i = 0; i < t.n && !rc; i++)
		describe(fs, t.v[i].resource, &t.v[i].info);
	if (!rc && hold_meta_briefly(fs)) { /* held, every lookup of the walk is at once */
		rc = find_paths(fs, &t);
		unhold_meta(fs);
	}
	for (size_t i = 0; i < t.n && !rc; i++) {
		t.v[i].info.resource = t.v[i].resource;
		t.v[i].info.path = t.v[i].path;
		fn(arg, &t.v[i].info);
	}
	for (size_t i = 0; i < t.n; i++) {
		free(t.v[i].resource);
		free(t.v[i].path);
	}
	free(t.v);
	return rc;
}
