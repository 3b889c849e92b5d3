/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The statistics segment of an instance: /dev/shm/odm.DATABASE.INSTANCE, shared by its
 * processes, read by odmstat.
 *
 * Each process counts into its own slot, so counting takes no lock: one writer per slot,
 * readers may see a count a few I/Os old.  The lock guards only the file table and handing
 * out and retiring slots; a retiring process (or a dead one found later) adds its counts to
 * the retired totals of its process type, so sums stay whole.  A file's counts live in its
 * table entry, added to atomically by every process that does I/O on it.
 *
 * The segment is laid out for ODM_MAX_PROCS processes and ODM_MAX_FILES files (tens of MiB)
 * but is a sparse file in tmpfs: only the pages of slots in use take memory, and every scan
 * stops at the high-water marks nprocs and nfiles. */
#ifndef ODM_STATS_H
#define ODM_STATS_H

#include "odm/odm.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ODM_SEG_MAGIC 0x3154534d444f4443ull
#define ODM_SEG_VERSION 2u
#define ODM_SEG_DIR "/dev/shm"
#define ODM_SEG_PREFIX "odm."
#define ODM_MAX_PROCS 4096u
#define ODM_FILE_BUCKETS 65536u /* the file table's index by path */
#define ODM_NAME_MAX 31u
#define ODM_HIST_SUB 4u                      /* buckets per power of two */
#define ODM_HIST_BINS (32u * ODM_HIST_SUB)   /* microseconds, up to ~2^32 */

enum { ODM_DIR_READ, ODM_DIR_WRITE };
enum { ODM_MODE_SYNC, ODM_MODE_ASYNC };
enum { ODM_FILE_FREE, ODM_FILE_CREATING, ODM_FILE_USED };
enum { ODM_SLOT_FREE, ODM_SLOT_LIVE };

struct odm_count {
	uint64_t ops, bytes, usec;
};

struct odm_file_slot {
	uint32_t gen, state;
	int32_t creator;  /* pid, while CREATING */
	uint32_t block_size, type;
	uint32_t next;    /* index + 1 of the next entry of its bucket, or of the free list */
	uint64_t ino, key;
	struct odm_count count[2][2]; /* [dir][mode], of every process */
	char path[512];
};

struct odm_proc_slot {
	int32_t pid;
	uint32_t state, ptype;
	uint64_t starttime; /* /proc/PID/stat field 22: a reused pid is another process */
	char name[16];
	struct odm_count total[2][2];              /* [dir][mode] */
	uint64_t hist[2][2][ODM_HIST_BINS];        /* [dir][mode] latency, microseconds */
};

struct odm_segment {
	uint64_t magic;
	uint32_t version, size;
	char database[ODM_NAME_MAX + 1], instance[ODM_NAME_MAX + 1], node[64];
	int64_t created; /* seconds since the epoch */
	pthread_mutex_t lock; /* robust, process-shared */
	uint32_t nfiles, nprocs;  /* slots ever used: the rest is untouched */
	uint32_t free_files;      /* index + 1 of the first free file entry below nfiles */
	uint32_t creating;        /* file entries CREATING (a dead creator's are freed) */
	struct odm_proc_slot retired[ODM_PT_COUNT];
	uint32_t bucket[ODM_FILE_BUCKETS]; /* index + 1 of the first entry, by path hash */
	struct odm_file_slot files[ODM_MAX_FILES];
	struct odm_proc_slot procs[ODM_MAX_PROCS];
};

extern const char *const odm_ptype_names[ODM_PT_COUNT];

bool odm_name_ok(const char *name);
enum odm_ptype odm_ptype_from_name(const char *comm);
/* Map (creating if asked) an instance's segment.  -ENOENT if absent and !create. */
int odm_segment_open(const char *database, const char *instance, bool create,
		     struct odm_segment **out);
int odm_segment_open_path(const char *path, bool writable, struct odm_segment **out);
void odm_segment_close(struct odm_segment *seg);
int odm_segment_lock(struct odm_segment *seg);
void odm_segment_unlock(struct odm_segment *seg);
/* FNV-1a of a string: the file table's buckets, odmstat's index of rows. */
uint64_t odm_string_hash(const char *s);
/* The file table (segment locked): the USED entry of path (index), or -ENOENT; a new entry
 * for path in the given state (-ENFILE when full); an entry freed. */
int odm_table_find(struct odm_segment *seg, const char *path, unsigned *index);
int odm_table_add(struct odm_segment *seg, const char *path, uint32_t state, pid_t creator,
		  unsigned *index);
void odm_table_free(struct odm_segment *seg, unsigned index);
/* A CREATING entry becomes USED (its file was committed). */
void odm_table_commit(struct odm_segment *seg, unsigned index);
/* Take a slot for this process (retiring dead processes' slots when none is free). */
int odm_slot_take(struct odm_segment *seg, enum odm_ptype ptype, struct odm_proc_slot **out);
void odm_slot_retire(struct odm_segment *seg, struct odm_proc_slot *slot);
bool odm_slot_alive(const struct odm_proc_slot *slot);

/* Buckets 0-3 hold 0-3 us exactly; above, each power of two splits into ODM_HIST_SUB. */
static inline unsigned odm_hist_bin(uint64_t usec)
{
	if (usec < ODM_HIST_SUB)
		return (unsigned)usec;
	unsigned log = 63u - (unsigned)__builtin_clzll(usec);
	unsigned bin = (log - 1) * ODM_HIST_SUB + (unsigned)((usec >> (log - 2)) & 3);
	return bin < ODM_HIST_BINS ? bin : ODM_HIST_BINS - 1;
}
uint64_t odm_hist_upper(unsigned bin); /* the bucket's upper edge (exclusive), microseconds */
/* The latency under which pct percent of the counted operations completed. */
uint64_t odm_hist_percentile(const uint64_t *hist, double pct);

/* Count one completed I/O: the owner's slot only, no lock. */
static inline void odm_count_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}
static inline void odm_stats_count(struct odm_proc_slot *s, struct odm_file_slot *file,
				   int dir, int mode,
				   uint64_t bytes, uint64_t usec)
{
	struct odm_count *t = &s->total[dir][mode], *f = &file->count[dir][mode];
	odm_count_add(&t->ops, 1);
	odm_count_add(&t->bytes, bytes);
	odm_count_add(&t->usec, usec);
	odm_count_add(&s->hist[dir][mode][odm_hist_bin(usec)], 1);
	/* Shared with the instance's other processes: one atomic add each. */
	__atomic_fetch_add(&f->ops, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&f->bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&f->usec, usec, __ATOMIC_RELAXED);
}

#endif
