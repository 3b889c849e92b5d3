/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The restripe gate: how the processes of one node that use a volume keep out of the batch a
 * restripe is moving (docs/restripe.md, "Online").
 *
 * It is a shared memory segment, /dev/shm/cvm-restripe-<volume uuid>, made by the process
 * that runs the restripe (the owner) and attached by every process that opens the volume
 * while it exists.  It holds where each chunk is (a bit per chunk: moved; the parked chunk),
 * the batch in motion, and a slot per process counting that process's I/O in flight, by
 * chunk, in GATE_BUCKETS buckets (chunk modulo GATE_BUCKETS).
 *
 * A batch goes through three phases:
 *   open      everyone maps by the bitmap and does I/O anywhere;
 *   draining  the batch's chunks are published: I/O that touches them waits, except a
 *             synchronous one from a process that has I/O of its own in flight there (the
 *             owner waits for that I/O anyway, so the chunk is not moving yet; making it
 *             wait could wait for ever for an I/O only it would reap).  The owner waits
 *             until no live process counts I/O in the batch's buckets;
 *   moving    the owner copies the batch; its chunks' I/O waits.  The bits and the parked
 *             chunk change, then the gate opens again.
 * A user counts its I/O before it looks at the phase, and the owner sets the phase before it
 * looks at the counts (both sequentially consistent), so one of them always sees the other.
 * Asynchronous submissions never wait in the gate (their caller reaps its own I/O): they are
 * told to come back (-EBUSY). */
#include "restripe.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GATE_MAGIC 0x43564d47u /* "CVMG" */
#define GATE_VERSION 3u
#define GATE_SLOTS 4096u
#define GATE_BUCKETS 256u
#define WAIT_CHECK_MS 50 /* a waiter looks whether the owner still lives this often */

/* idle: no run here now; the gate stays, for this node's next run or follow, as long as
 * its owner (the daemon) has the volume open, so that every process that attached to it
 * keeps mapping through it (gone: its owner closed the volume or died). */
enum { PHASE_OPEN, PHASE_DRAINING, PHASE_MOVING, PHASE_IDLE, PHASE_GONE, PHASE_BROKEN };

struct gate_slot {
	int32_t pid;          /* 0: free */
	uint32_t pad;
	uint64_t start_time;  /* the process's start time (/proc), against a reused pid */
	uint32_t inflight[GATE_BUCKETS];
};

struct gate_header {
	uint32_t magic, version;
	cvm_uuid vol_uuid;
	uint64_t target_width, target_lun_bytes; /* the restripe this gate is for */
	uint64_t chunk_bytes, nchunks;
	int32_t owner;
	uint32_t seq;   /* futex word: changes with every phase */
	uint32_t phase;
	uint32_t nbatch;
	uint64_t parked;
	uint64_t waits, wait_max_ns; /* synchronous I/O that met a batch in motion, and its wait */
	uint64_t held;               /* asynchronous submissions told to come back */
	uint64_t batch[CVM_GATE_BATCH_MAX];
	uint64_t bitmap_off, slots_off, bytes;
	uint32_t first_set, set_count; /* with target_*: the restripe this gate is for */
};

struct cvm_gate {
	struct gate_header *h;
	uint64_t *moved;
	struct gate_slot *slots, *mine;
	size_t bytes;
	bool owner;
	char name[64];
};

static uint64_t process_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return 0;
	char state = p[2];
	if (state == 'Z' || state == 'X') /* its I/O was finished as its memory went */
		return 0;
	p += 2;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static bool slot_live(const struct gate_slot *s)
{
	int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
	return pid > 0 && process_start_time(pid) == s->start_time && s->start_time;
}

/* The gate is for cfg's restripe. */
static bool gate_of(const struct gate_header *h, const struct cvm_config *cfg)
{
	const struct cvm_restripe *r = &cfg->restripe;
	return h->target_width == r->target_width && h->target_lun_bytes == r->target_lun_bytes &&
	       h->first_set == r->first_set && h->set_count == r->set_count;
}

static void gate_name(const cvm_uuid *u, char *buf, size_t len)
{
	char us[CVM_UUID_STR];
	cvm_uuid_format(u, us);
	snprintf(buf, len, "/cvm-restripe-%s", us);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void futex_wait(uint32_t *word, uint32_t seen, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void bump(struct gate_header *h, uint32_t phase)
{
	__atomic_store_n(&h->phase, phase, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&h->seq, 1, __ATOMIC_SEQ_CST);
	futex_wake(&h->seq);
}

static int map_segment(struct cvm_gate *g, int fd, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	g->h = p;
	g->bytes = bytes;
	g->moved = (uint64_t *)((uint8_t *)p + g->h->bitmap_off);
	g->slots = (struct gate_slot *)((uint8_t *)p + g->h->slots_off);
	return 0;
}

static int claim_slot(struct cvm_gate *g)
{
	int32_t me = (int32_t)getpid();
	uint64_t start = process_start_time(me);
	for (uint32_t i = 0; i < GATE_SLOTS; i++) {
		struct gate_slot *s = &g->slots[i];
		int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
		if (pid == me && s->start_time == start) { /* this process's other handle */
			g->mine = s;
			return 0;
		}
		if ((pid == 0 || !slot_live(s)) &&
		    __atomic_compare_exchange_n(&s->pid, &pid, -1, false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST)) {
			memset(s->inflight, 0, sizeof s->inflight); /* a dead process's counts */
			s->start_time = start;
			__atomic_store_n(&s->pid, me, __ATOMIC_RELEASE);
			g->mine = s;
			return 0;
		}
	}
	return -ENOSPC;
}

int cvm_gate_create(const struct cvm_config *cfg, const struct cvm_restripe_view *view,
		    const struct cvm_move *closed, uint32_t nclosed, struct cvm_gate **out)
{
	struct cvm_gate *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->owner = true;
	gate_name(&cfg->vol_uuid, g->name, sizeof g->name);
	uint64_t nchunks = view->nchunks;
	uint64_t bitmap_bytes = (nchunks / 64 + 1) * 8;
	uint64_t slots_off = (4096 + bitmap_bytes + 4095) / 4096 * 4096;
	uint64_t bytes = slots_off + (uint64_t)GATE_SLOTS * sizeof(struct gate_slot);
	shm_unlink(g->name); /* one left by an owner that died: the config says where things are */
	int fd = shm_open(g->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (!rc && ftruncate(fd, (off_t)bytes))
		rc = -errno;
	if (!rc) {
		struct gate_header h = {.magic = GATE_MAGIC, .version = GATE_VERSION,
					.vol_uuid = cfg->vol_uuid,
					.target_width = cfg->restripe.target_width,
					.target_lun_bytes = cfg->restripe.target_lun_bytes,
					.first_set = cfg->restripe.first_set,
					.set_count = cfg->restripe.set_count,
					.chunk_bytes = view->chunk_bytes, .nchunks = nchunks,
					.owner = (int32_t)getpid(), .phase = PHASE_OPEN,
					.parked = view->parked, .bitmap_off = 4096,
					.slots_off = slots_off, .bytes = bytes};
		for (uint32_t i = 0; i < nclosed && i < CVM_GATE_BATCH_MAX; i++)
			h.batch[h.nbatch++] = closed[i].chunk;
		if (h.nbatch)
			h.phase = PHASE_MOVING;
		if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
		    pwrite(fd, view->moved, bitmap_bytes, 4096) != (ssize_t)bitmap_bytes)
			rc = -EIO;
	}
	if (!rc)
		rc = map_segment(g, fd, bytes);
	if (!rc)
		rc = claim_slot(g); /* the owner's own handle uses the volume too */
	if (fd >= 0)
		close(fd);
	if (rc) {
		cvm_set_error("volume %s: cannot make the restripe's shared memory %s: %s",
			      cfg->name, g->name, strerror(-rc));
		shm_unlink(g->name);
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int cvm_gate_attach(const struct cvm_config *cfg, struct cvm_gate **out)
{
	struct cvm_gate *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	gate_name(&cfg->vol_uuid, g->name, sizeof g->name);
	int fd = shm_open(g->name, O_RDWR | O_CLOEXEC, 0);
	struct gate_header h;
	int rc = fd < 0 ? -ENOENT : 0;
	if (!rc && pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		rc = -ENOENT;
	if (!rc && (h.magic != GATE_MAGIC || h.version != GATE_VERSION ||
		    memcmp(&h.vol_uuid, &cfg->vol_uuid, sizeof h.vol_uuid) || !gate_of(&h, cfg) ||
		    h.phase >= PHASE_GONE || process_start_time(h.owner) == 0))
		rc = -ENOENT; /* not this restripe's, or nobody runs it any more */
	if (!rc)
		rc = map_segment(g, fd, h.bytes);
	if (fd >= 0)
		close(fd);
	if (!rc && (rc = claim_slot(g))) {
		cvm_set_error("volume %s: more than %u processes use it during its restripe",
			      cfg->name, GATE_SLOTS);
		munmap(g->h, g->bytes);
	}
	if (rc) {
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void cvm_gate_idle(struct cvm_gate *g)
{
	/* A batch cut short: its chunks stay where nobody may use them until a run finishes
	 * it (their I/O fails). */
	if (__atomic_load_n(&g->h->nbatch, __ATOMIC_SEQ_CST))
		cvm_gate_close(g);
	else
		bump(g->h, PHASE_IDLE);
}

bool cvm_gate_resume(struct cvm_gate *g, const struct cvm_config *cfg,
		     const struct cvm_restripe_view *view)
{
	struct gate_header *h = g->h;
	if (!gate_of(h, cfg) || h->nchunks != view->nchunks || h->chunk_bytes != view->chunk_bytes)
		return false;
	for (uint64_t w = 0; w <= view->nchunks / 64; w++)
		__atomic_store_n(&g->moved[w], view->moved[w], __ATOMIC_RELEASE);
	__atomic_store_n(&h->parked, view->parked, __ATOMIC_RELEASE);
	__atomic_store_n(&h->nbatch, 0, __ATOMIC_SEQ_CST);
	bump(h, PHASE_OPEN);
	return true;
}

void cvm_gate_close(struct cvm_gate *g)
{
	/* A batch cut short leaves its chunks where nobody may use them until a new run
	 * finishes it: their I/O fails from now on. */
	uint32_t nbatch = __atomic_load_n(&g->h->nbatch, __ATOMIC_SEQ_CST);
	bump(g->h, nbatch ? PHASE_BROKEN : PHASE_GONE);
	shm_unlink(g->name);
}

bool cvm_gate_owned(const struct cvm_gate *g)
{
	return g && g->owner && __atomic_load_n(&g->h->phase, __ATOMIC_SEQ_CST) < PHASE_GONE;
}

bool cvm_gate_closed(const struct cvm_gate *g)
{
	return __atomic_load_n(&g->h->nbatch, __ATOMIC_SEQ_CST) != 0;
}

void cvm_gate_detach(struct cvm_gate *g)
{
	if (!g)
		return;
	if (g->owner && g->h->owner == (int32_t)getpid() && g->h->phase < PHASE_GONE)
		cvm_gate_close(g); /* its owner's handle goes: nobody keeps it up to date now */
	munmap(g->h, g->bytes);
	free(g);
}

/* ---- users ---- */

static void chunks_of(const struct cvm_gate *g, uint64_t off, uint64_t len, uint64_t *first,
		      uint64_t *last)
{
	*first = off / g->h->chunk_bytes;
	*last = (off + (len ? len : 1) - 1) / g->h->chunk_bytes;
}

/* The buckets of chunks [first, last], each once. */
static uint64_t last_bucket_chunk(uint64_t first, uint64_t last)
{
	return last - first >= GATE_BUCKETS ? first + GATE_BUCKETS - 1 : last;
}

static void count(struct cvm_gate *g, uint64_t first, uint64_t last, int by)
{
	for (uint64_t c = first, end = last_bucket_chunk(first, last); c <= end; c++)
		__atomic_add_fetch(&g->mine->inflight[c % GATE_BUCKETS], (uint32_t)by,
				   __ATOMIC_SEQ_CST);
}

static bool in_batch(const struct gate_header *h, uint64_t first, uint64_t last)
{
	uint32_t n = __atomic_load_n(&h->nbatch, __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < n && i < CVM_GATE_BATCH_MAX; i++)
		if (h->batch[i] >= first && h->batch[i] <= last)
			return true;
	return false;
}

/* During draining: has this process I/O in flight in every batch bucket this range touches,
 * besides the count just added for it? */
static bool own_inflight_there(const struct cvm_gate *g, uint64_t first, uint64_t last)
{
	const struct gate_header *h = g->h;
	uint32_t n = __atomic_load_n(&h->nbatch, __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < n && i < CVM_GATE_BATCH_MAX; i++)
		if (h->batch[i] >= first && h->batch[i] <= last &&
		    __atomic_load_n(&g->mine->inflight[h->batch[i] % GATE_BUCKETS],
				    __ATOMIC_SEQ_CST) < 2)
			return false;
	return true;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A wait that began at since (0: none) is over. */
static void waited(struct gate_header *h, uint64_t since)
{
	if (!since)
		return;
	uint64_t ns = now_ns() - since, max = __atomic_load_n(&h->wait_max_ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->waits, 1, __ATOMIC_RELAXED);
	while (ns > max && !__atomic_compare_exchange_n(&h->wait_max_ns, &max, ns, true,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

int cvm_gate_enter(struct cvm_gate *g, uint64_t off, uint64_t len, bool wait)
{
	uint64_t first, last, since = 0;
	chunks_of(g, off, len, &first, &last);
	for (;;) {
		count(g, first, last, 1);
		uint32_t seq = __atomic_load_n(&g->h->seq, __ATOMIC_SEQ_CST);
		uint32_t phase = __atomic_load_n(&g->h->phase, __ATOMIC_SEQ_CST);
		if (phase == PHASE_OPEN || phase == PHASE_IDLE || phase == PHASE_GONE ||
		    !in_batch(g->h, first, last)) {
			waited(g->h, since);
			return 0;
		}
		if (phase == PHASE_BROKEN) {
			count(g, first, last, -1);
			cvm_set_error("the volume's restripe stopped in the middle of a batch that "
				      "holds this range; run 'cvm restripe' again");
			return -EIO;
		}
		if (phase == PHASE_DRAINING && wait && own_inflight_there(g, first, last)) {
			waited(g->h, since);
			return 0;
		}
		count(g, first, last, -1);
		if (!wait) {
			__atomic_add_fetch(&g->h->held, 1, __ATOMIC_RELAXED);
			return -EBUSY;
		}
		if (!since)
			since = now_ns();
		futex_wait(&g->h->seq, seq, WAIT_CHECK_MS);
		if (__atomic_load_n(&g->h->seq, __ATOMIC_SEQ_CST) == seq &&
		    process_start_time(g->h->owner) == 0) {
			cvm_set_error("the process restriping the volume (pid %d) died in the "
				      "middle of a batch; run 'cvm restripe' again",
				      (int)g->h->owner);
			return -EIO;
		}
	}
}

void cvm_gate_leave(struct cvm_gate *g, uint64_t off, uint64_t len)
{
	uint64_t first, last;
	chunks_of(g, off, len, &first, &last);
	count(g, first, last, -1);
}

void cvm_gate_waits(const struct cvm_gate *g, uint64_t *waits, uint64_t *wait_max_ns,
		    uint64_t *held)
{
	*waits = __atomic_load_n(&g->h->waits, __ATOMIC_RELAXED);
	*wait_max_ns = __atomic_load_n(&g->h->wait_max_ns, __ATOMIC_RELAXED);
	*held = __atomic_load_n(&g->h->held, __ATOMIC_RELAXED);
}

uint32_t cvm_gate_seq(const struct cvm_gate *g)
{
	return __atomic_load_n(&g->h->seq, __ATOMIC_SEQ_CST);
}

void cvm_gate_wait_change(struct cvm_gate *g, uint32_t seen, int ms)
{
	futex_wait(&g->h->seq, seen, ms);
}

bool cvm_gate_moved(const struct cvm_gate *g, uint64_t c)
{
	return __atomic_load_n(&g->moved[c / 64], __ATOMIC_ACQUIRE) >> (c % 64) & 1;
}

uint64_t cvm_gate_parked(const struct cvm_gate *g)
{
	return __atomic_load_n(&g->h->parked, __ATOMIC_ACQUIRE);
}

/* ---- the owner ---- */

static bool batch_drained(const struct cvm_gate *g)
{
	for (uint32_t i = 0; i < GATE_SLOTS; i++) {
		const struct gate_slot *s = &g->slots[i];
		if (__atomic_load_n(&s->pid, __ATOMIC_ACQUIRE) <= 0)
			continue;
		bool busy = false;
		for (uint32_t k = 0; k < g->h->nbatch && !busy; k++)
			busy = __atomic_load_n(&s->inflight[g->h->batch[k] % GATE_BUCKETS],
					       __ATOMIC_SEQ_CST) != 0;
		if (busy && slot_live(s))
			return false;
	}
	return true;
}

void cvm_gate_batch_begin(struct cvm_gate *g, const struct cvm_move *moves, uint32_t n)
{
	struct gate_header *h = g->h;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n && k < CVM_GATE_BATCH_MAX; i++)
		h->batch[k++] = moves[i].chunk;
	__atomic_store_n(&h->nbatch, k, __ATOMIC_SEQ_CST);
	bump(h, PHASE_DRAINING);
	for (;;) {
		if (batch_drained(g)) {
			bump(h, PHASE_MOVING);
			if (batch_drained(g)) /* nobody counted itself in as the phase changed */
				return;
			bump(h, PHASE_DRAINING);
		}
		nanosleep(&(struct timespec){0, 100000}, NULL);
	}
}

void cvm_gate_batch_end(struct cvm_gate *g, const struct cvm_move *moves, uint32_t n)
{
	struct gate_header *h = g->h;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t c = moves[i].chunk;
		if (moves[i].kind == CVM_MOVE_PARK) {
			__atomic_store_n(&h->parked, c, __ATOMIC_RELEASE);
			continue;
		}
		__atomic_or_fetch(&g->moved[c / 64], 1ull << (c % 64), __ATOMIC_RELEASE);
		if (moves[i].kind == CVM_MOVE_UNPARK)
			__atomic_store_n(&h->parked, CVM_NO_CHUNK, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&h->nbatch, 0, __ATOMIC_SEQ_CST);
	bump(h, PHASE_OPEN);
}
