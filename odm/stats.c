/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The instance statistics segment (see stats.h). */
#include "odm/stats.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

const char *const odm_ptype_names[ODM_PT_COUNT] = {
	"other", "foreground", "lgwr", "dbwr", "ckpt", "arch", "pq",
};

bool odm_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > ODM_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_$#-", *p))
			return false;
	return true;
}

/* "ora_lgwr_ORCL", "ora_dbw0_ORCL", "ora_p012_ORCL", "oracleORCL" (a dedicated server). */
enum odm_ptype odm_ptype_from_name(const char *comm)
{
	static const struct {
		const char *prefix;
		enum odm_ptype type;
	} known[] = {{"ora_lgwr_", ODM_PT_LGWR}, {"ora_lg0", ODM_PT_LGWR}, {"ora_dbw", ODM_PT_DBWR},
		     {"ora_ckpt_", ODM_PT_CKPT},  {"ora_arc", ODM_PT_ARCH},  {"ora_p", ODM_PT_PQ},
		     {"oracle", ODM_PT_FOREGROUND}};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		size_t n = strlen(known[i].prefix);
		if (strncmp(comm, known[i].prefix, n))
			continue;
		if (known[i].type == ODM_PT_PQ && !(isdigit((unsigned char)comm[n]) &&
						    isdigit((unsigned char)comm[n + 1])))
			continue;
		return known[i].type;
	}
	return ODM_PT_OTHER;
}

uint64_t odm_hist_upper(unsigned bin)
{
	if (bin < ODM_HIST_SUB)
		return bin + 1;
	unsigned log = bin / ODM_HIST_SUB + 1, sub = bin % ODM_HIST_SUB;
	return (uint64_t)(ODM_HIST_SUB + sub + 1) << (log - 2);
}

uint64_t odm_hist_percentile(const uint64_t *hist, double pct)
{
	uint64_t total = 0, seen = 0;
	for (unsigned i = 0; i < ODM_HIST_BINS; i++)
		total += hist[i];
	if (!total)
		return 0;
	for (unsigned i = 0; i < ODM_HIST_BINS; i++) {
		seen += hist[i];
		if ((double)seen >= (double)total * pct / 100.0)
			return odm_hist_upper(i);
	}
	return odm_hist_upper(ODM_HIST_BINS - 1);
}

static int map_fd(int fd, bool writable, struct odm_segment **out)
{
	void *p = mmap(NULL, sizeof(struct odm_segment), PROT_READ | (writable ? PROT_WRITE : 0),
		       MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static int init_segment(struct odm_segment *seg, const char *database, const char *instance)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int rc = -pthread_mutex_init(&seg->lock, &a);
	pthread_mutexattr_destroy(&a);
	struct utsname u;
	snprintf(seg->database, sizeof seg->database, "%s", database);
	snprintf(seg->instance, sizeof seg->instance, "%s", instance);
	const char *node = uname(&u) ? "?" : u.nodename;
	size_t nlen = strnlen(node, sizeof seg->node - 1);
	memcpy(seg->node, node, nlen);
	seg->node[nlen] = 0;
	seg->created = (int64_t)time(NULL);
	seg->version = ODM_SEG_VERSION;
	seg->size = (uint32_t)offsetof(struct odm_segment, bucket); /* the header */
	for (unsigned i = 0; i < ODM_PT_COUNT; i++)
		seg->retired[i].ptype = i;
	__atomic_store_n(&seg->magic, ODM_SEG_MAGIC, __ATOMIC_RELEASE); /* ready */
	return rc;
}

/* Created under a temporary name and linked into place whole, so nobody maps half of one. */
static int create_segment(const char *path, const char *database, const char *instance)
{
	char tmp[300];
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	struct odm_segment *seg = NULL;
	int rc = ftruncate(fd, sizeof *seg) ? -errno : map_fd(fd, true, &seg);
	if (!rc && seg)
		rc = init_segment(seg, database, instance);
	if (seg)
		munmap(seg, sizeof *seg);
	if (!rc && link(tmp, path) && errno != EEXIST) /* EEXIST: another process won */
		rc = -errno;
	unlink(tmp);
	close(fd);
	return rc;
}

int odm_segment_open_path(const char *path, bool writable, struct odm_segment **out)
{
	int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && (uint64_t)st.st_size != sizeof(struct odm_segment))
		rc = -EPROTO; /* another version of libodm made it */
	if (!rc)
		rc = map_fd(fd, writable, out);
	close(fd);
	if (!rc && ((*out)->magic != ODM_SEG_MAGIC || (*out)->version != ODM_SEG_VERSION)) {
		munmap(*out, sizeof **out);
		rc = -EPROTO;
	}
	return rc;
}

int odm_segment_open(const char *database, const char *instance, bool create,
		     struct odm_segment **out)
{
	if (!odm_name_ok(database) || !odm_name_ok(instance))
		return -EINVAL;
	char path[200];
	snprintf(path, sizeof path, "%s/%s%s.%s", ODM_SEG_DIR, ODM_SEG_PREFIX, database, instance);
	int rc = odm_segment_open_path(path, create, out);
	if (rc == -ENOENT && create && (rc = create_segment(path, database, instance)) == 0)
		rc = odm_segment_open_path(path, true, out);
	return rc;
}

void odm_segment_close(struct odm_segment *seg)
{
	if (seg)
		munmap(seg, sizeof *seg);
}

int odm_segment_lock(struct odm_segment *seg)
{
	int rc = pthread_mutex_lock(&seg->lock);
	if (rc == EOWNERDEAD) /* a process died holding it: the table is changed whole or not */
		rc = pthread_mutex_consistent(&seg->lock);
	return -rc;
}

void odm_segment_unlock(struct odm_segment *seg)
{
	pthread_mutex_unlock(&seg->lock);
}

/* The process's start time (it tells a pid from a later process with the same one), or 0 if
 * it is gone, or exited and waits for its parent to reap it: its counts are final then. */
static uint64_t starttime_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name may hold spaces */
	unsigned long long st = 0;
	char state = 0;
	if (p && sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			"%*d %*d %*d %llu", &state, &st) != 2)
		st = 0;
	return state == 'Z' || state == 'X' ? 0 : st;
}

bool odm_slot_alive(const struct odm_proc_slot *slot)
{
	return slot->state == ODM_SLOT_LIVE && (kill(slot->pid, 0) == 0 || errno == EPERM) &&
	       starttime_of(slot->pid) == slot->starttime;
}

static void fold(struct odm_proc_slot *into, const struct odm_proc_slot *from)
{
	const uint64_t *src = (const uint64_t *)&from->total;
	uint64_t *dst = (uint64_t *)&into->total;
	size_t n = (sizeof *from - offsetof(struct odm_proc_slot, total)) / sizeof(uint64_t);
	for (size_t i = 0; i < n; i++)
		if (src[i])
			dst[i] += src[i];
}

/* Counts of a process that is gone go to its type's retired totals (segment locked). */
static void retire_locked(struct odm_segment *seg, struct odm_proc_slot *slot)
{
	fold(&seg->retired[slot->ptype < ODM_PT_COUNT ? slot->ptype : ODM_PT_OTHER], slot);
	memset(slot, 0, sizeof *slot);
}

uint64_t odm_string_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

static uint32_t path_bucket(const char *path)
{
	return (uint32_t)(odm_string_hash(path) % ODM_FILE_BUCKETS);
}

int odm_table_find(struct odm_segment *seg, const char *path, unsigned *index)
{
	for (uint32_t i = seg->bucket[path_bucket(path)]; i; i = seg->files[i - 1].next)
		if (seg->files[i - 1].state == ODM_FILE_USED && !strcmp(seg->files[i - 1].path, path)) {
			*index = i - 1;
			return 0;
		}
	return -ENOENT;
}

int odm_table_add(struct odm_segment *seg, const char *path, uint32_t state, pid_t creator,
		  unsigned *index)
{
	uint32_t i;
	if (seg->free_files) {
		i = seg->free_files - 1;
		seg->free_files = seg->files[i].next;
	} else if (seg->nfiles < ODM_MAX_FILES) {
		i = seg->nfiles++;
	} else {
		return -ENFILE;
	}
	struct odm_file_slot *f = &seg->files[i];
	uint32_t gen = f->gen + 1;
	*f = (struct odm_file_slot){.gen = gen + (gen == 0), .creator = (int32_t)creator};
	snprintf(f->path, sizeof f->path, "%s", path);
	uint32_t *head = &seg->bucket[path_bucket(path)];
	f->next = *head;
	*head = i + 1;
	seg->creating += state == ODM_FILE_CREATING;
	__atomic_store_n(&f->state, state, __ATOMIC_RELEASE);
	*index = i;
	return 0;
}

void odm_table_free(struct odm_segment *seg, unsigned index)
{
	struct odm_file_slot *f = &seg->files[index];
	if (f->state == ODM_FILE_FREE)
		return;
	for (uint32_t *p = &seg->bucket[path_bucket(f->path)]; *p; p = &seg->files[*p - 1].next)
		if (*p == index + 1) {
			*p = f->next;
			break;
		}
	seg->creating -= f->state == ODM_FILE_CREATING;
	__atomic_store_n(&f->state, ODM_FILE_FREE, __ATOMIC_RELEASE);
	f->gen++;
	f->next = seg->free_files;
	seg->free_files = index + 1;
}

void odm_table_commit(struct odm_segment *seg, unsigned index)
{
	struct odm_file_slot *f = &seg->files[index];
	if (f->state != ODM_FILE_CREATING)
		return;
	seg->creating--;
	__atomic_store_n(&f->state, ODM_FILE_USED, __ATOMIC_RELEASE);
}

/* A free slot: one given back below the high-water mark, else a new one above it.  Every
 * SWEEP_EVERY new ones, and when every slot is taken, the slots of processes that died
 * without giving theirs back are retired first (segment locked): slots in use follow the
 * live processes, not every process the instance ever had. */
#define SWEEP_EVERY 64u
static struct odm_proc_slot *free_slot(struct odm_segment *seg)
{
	for (unsigned i = 0; i < seg->nprocs; i++)
		if (seg->procs[i].state == ODM_SLOT_FREE)
			return &seg->procs[i];
	if (seg->nprocs < ODM_MAX_PROCS && seg->nprocs % SWEEP_EVERY)
		return &seg->procs[seg->nprocs++];
	struct odm_proc_slot *mine = NULL;
	for (unsigned i = 0; i < seg->nprocs; i++) {
		struct odm_proc_slot *s = &seg->procs[i];
		if (s->state == ODM_SLOT_LIVE && !odm_slot_alive(s))
			retire_locked(seg, s);
		if (s->state == ODM_SLOT_FREE && !mine)
			mine = s;
	}
	if (!mine && seg->nprocs < ODM_MAX_PROCS)
		mine = &seg->procs[seg->nprocs++];
	return mine;
}

/* Files a dead process was creating go (segment locked). */
static void free_dead_creations(struct odm_segment *seg)
{
	for (unsigned i = 0; i < seg->nfiles && seg->creating; i++) {
		struct odm_file_slot *f = &seg->files[i];
		if (f->state == ODM_FILE_CREATING && kill(f->creator, 0) && errno == ESRCH)
			odm_table_free(seg, i);
	}
}

int odm_slot_take(struct odm_segment *seg, enum odm_ptype ptype, struct odm_proc_slot **out)
{
	int rc = odm_segment_lock(seg);
	if (rc)
		return rc;
	free_dead_creations(seg);
	struct odm_proc_slot *mine = free_slot(seg);
	if (mine) {
		mine->pid = getpid();
		mine->starttime = starttime_of(mine->pid);
		mine->ptype = ptype;
		FILE *f = fopen("/proc/self/comm", "re");
		if (f) {
			if (!fgets(mine->name, sizeof mine->name, f))
				mine->name[0] = 0;
			mine->name[strcspn(mine->name, "\n")] = 0;
			fclose(f);
		}
		mine->state = ODM_SLOT_LIVE;
	}
	odm_segment_unlock(seg);
	*out = mine;
	return mine ? 0 : -EUSERS;
}

void odm_slot_retire(struct odm_segment *seg, struct odm_proc_slot *slot)
{
	if (odm_segment_lock(seg) == 0) {
		retire_locked(seg, slot);
		odm_segment_unlock(seg);
	}
}
