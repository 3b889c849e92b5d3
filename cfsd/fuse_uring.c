/* SPDX-License-Identifier: GPL-2.0-or-later */
/* FUSE over io_uring (Linux 6.14 and later, where the fuse module's enable_uring is set):
 * requests reach cfsd, and its answers the kernel, through rings of shared buffers instead
 * of a read(2) and a writev(2) on /dev/fuse each.
 *
 * Why: on /dev/fuse every request costs two system calls and a wake-up of a thread on
 * whichever core, which at queue depth 32 is most of a core here (issue 12).  Over io_uring a
 * thread answers a request and fetches the next in one io_uring_enter(2), and the kernel
 * queues each request on the ring of the core the asking process runs on.  The threads are
 * not kept on their queue's core: on two cores a process's whole queue depth lands on one
 * queue, and its threads then shared that core with it while the other idled (4 KiB reads
 * of holes at depth 32: 83k/s pinned, 192k/s not, 164k/s through /dev/fuse).
 *
 * The protocol (include/uapi/linux/fuse.h, 7.42): after INIT, whose answer says cfsd wants
 * it (FUSE_OVER_IO_URING, added in dev_io.c), each thread registers one entry (a header
 * buffer and a payload buffer) on the queue of its core with FUSE_IO_URING_CMD_REGISTER;
 * the command completes when a request has been copied into the entry: its fuse_in_header in
 * the header's in_out, its first argument (the opcode's fuse_*_in, if any) in op_in, the rest
 * in the payload.  FUSE_IO_URING_CMD_COMMIT_AND_FETCH hands the answer back (fuse_out_header
 * in in_out, the rest in the payload) and waits for the next request.  The kernel switches
 * to the rings once every core's queue has an entry; FORGET and INTERRUPT still come on
 * /dev/fuse, read by workers.c's threads, and notifications still go there.
 *
 * libfuse 3.14 knows nothing of this, so each request is laid out as /dev/fuse would have
 * delivered it, header and first argument copied in front of the payload, and handed to
 * fuse_session_process_buf; its answer comes back through dev_io.c's writev hook, which
 * passes it to fuse_uring_take_reply.  The payload starts on a page, so a WRITE's data stays
 * page-aligned for the LUNs' O_DIRECT (as workers.c arranges), and a READ's data is read
 * straight into the payload (fuse_uring_reply_space).
 *
 * Data threads (dboptimized one-node mounts, where the caller gives fuse_uring_start a data
 * path): a thread blocked in one synchronous LUN write per request costs two context switches
 * a request, which at queue depth 32 is what held 4 KiB random I/O at a third to a half of
 * the raw LUNs' rate.  So on such a mount each queue has DATA_THREADS_PER_QUEUE threads of
 * DATA_ENTRIES entries each, and a direct READ or WRITE that cfs_direct_io_begin can map
 * without waiting goes to the LUNs through the thread's own ring (an O_SYNC or O_DSYNC write
 * from the thread itself, see write_through): the thread takes the next requests while the
 * I/O is in flight, and one io_uring_enter submits LUN I/O, answers and fetches for many
 * requests.
 * Every other request goes to a helper thread (libfuse's handlers may block: locks, the
 * journal, a kernel notification that waits for a page a request in this very thread's
 * entries would bring); its answer comes back to the entry's thread through an eventfd on
 * the ring, and that thread sends it.
 *
 * Cluster mounts (the caller says requests may be answered later): there a request may be
 * answered from the lock library's thread once another node lets a lock go (flock, setlk,
 * flush), minutes later.  A sync thread that waited for that answer would keep its thread
 * and entry, and a crowd of waiting lock requests would take every one of its core's
 * queue, the request that lets the lock go on this node among those left waiting in the
 * kernel.  So there a sync thread whose request is left to be answered later parks the
 * entry with the request, registers a new one, and from then on dispatches: its entries'
 * requests go to helper threads (the data threads' loop without a data path), and each
 * request parked adds an entry in its place, so that as many entries as before take new
 * requests.  It cannot go on answering requests itself: with more than one entry it could
 * block in one (a glock) while a request that the block waits for (a page lock the glock's
 * let-go waits for) sits in another.  A parked request costs its entry's header and the
 * address space of its payload, of which it touches a page.  Sync threads that never met
 * such a request answer as on one node: a hand-off to a helper and back costs two
 * wake-ups a request, a third more time for an unpack of small files. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_uring.h"

#include "cfs/internal.h"
#include "cfsd/fuse_ops.h"
#include "cfsd/ring_poke.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* From the kernel's uapi fuse.h (7.42); Debian 12's headers are older. */
#define URING_HEADER_IN_OUT 128
#define URING_HEADER_OP_IN 128
struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id; /* what COMMIT_AND_FETCH names the request by */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};
struct uring_req_header {
	char in_out[URING_HEADER_IN_OUT]; /* fuse_in_header, then the fuse_out_header */
	char op_in[URING_HEADER_OP_IN];   /* the request's first argument */
	struct uring_ent_in_out ent;
};
struct uring_cmd_req { /* in the SQE's command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };

/* Threads per core's queue: as many as workers.c's ceiling, started as requests find none
 * idle.  A thread blocked in a request (a lock, the journal) keeps its entry. */
#define THREADS_PER_QUEUE 16
/* On a mount with a data path: threads per queue and entries each, so that a process's
 * queue depth of 32 finds an entry for every request, spread over threads that both cores
 * can run (4 KiB random writes at depth 32: 77-82k/s with 2 threads of 16, 79-87k/s with 4
 * of 8, 67-73k/s with 1 of 32; reads alike). */
#define DATA_THREADS_PER_QUEUE 4
#define DATA_ENTRIES 8
#define HELPERS 16 /* threads for a data thread's other requests, started as needed */
/* A cluster mount's thread turned dispatching: its entries at most (parked requests beyond
 * leave new ones waiting in the kernel). */
#define MAX_ENTRIES 256
#define SQE_SIZE 128 /* IORING_SETUP_SQE128: the command area holds uring_cmd_req */
#define STOP_SIGNAL SIGUSR2

/* What a completion is about: the low bits of its user_data, the rest a pointer. */
enum { CQE_FUSE = 0, CQE_LUN = 1, CQE_WAKE = 2, CQE_TAGS = 3 };
/* A LUN piece's completion carries the piece's index in the user data's top byte (above any
 * user-space address), for the log line of one that failed. */
#define CQE_PIECE_SHIFT 56

struct ring_queue;
struct ring_thread;

/* An entry registered with the kernel: where it puts a request and takes its answer. */
struct ring_entry {
	struct ring_thread *thread;
	struct uring_req_header *header;
	void *region;  /* the payload buffer and a page in front of it */
	char *payload; /* page-aligned */
	uint64_t unique; /* the request being answered, 0 between requests (atomic) */
	/* its answer is in the entry (atomic; set under u->lock when not by its own answerer) */
	bool replied;
	/* On a data thread: the request's LUN I/O in flight, */
	struct cfs_direct_io io;
	unsigned io_pending;
	uint64_t io_bytes;
	int io_error;
	/* or its helper: done with it (u->lock), and the list it is on (the helpers' queue, then
	 * its thread's answered list; u->lock). */
	bool helper_done;
	struct ring_entry *next;
};

/* A thread, its ring and its entries (one, or DATA_ENTRIES on a data thread). */
struct ring_thread {
	struct ring_queue *queue;
	pthread_t thread;
	int ring_fd;
	void *sq_map, *cq_map, *sqes;
	size_t sq_map_len, cq_map_len, sqes_len;
	unsigned *sq_head, *sq_tail, *sq_array, sq_mask, sq_entries;
	unsigned *cq_head, *cq_tail, cq_mask;
	struct io_uring_cqe *cqes;
	/* entries registered (nentries; u->lock once the thread runs) of room for capacity, base
	 * of them from the start; a dispatching thread registers one more for each request
	 * parked beyond nentries - base (parked, u->lock) */
	unsigned nentries, capacity, base, parked;
	bool dispatching; /* entries' requests go to helpers or the LUNs: the thread never blocks */
	struct ring_entry *entries;
	struct iovec *buffers; /* each entry's header and payload, as registered */
	/* A data thread: helpers' answers wait on `answered` (u->lock) and wake_fd says so. */
	int wake_fd;
	uint64_t wake_count;
	struct ring_entry *answered;
	unsigned lun_inflight;
};

struct ring_queue {
	struct fuse_uring *u;
	unsigned qid; /* the core whose requests it gets */
	unsigned started, idle;
	struct ring_thread *threads[THREADS_PER_QUEUE];
};

struct fuse_uring {
	struct fuse_session *se;
	int dev_fd;
	size_t payload_size;
	unsigned nqueues;
	bool stopping;
	bool failed;       /* a registration was refused: logged once */
	bool answers_later; /* a request may be answered from another thread, later */
	bool full_logged;   /* a dispatcher's MAX_ENTRIES are taken: logged once */
	uint64_t answered; /* requests answered through the rings (atomic) */
	uint64_t direct;   /* of which by a data thread's own LUN I/O (atomic) */
	struct fuse_uring_data_path data; /* .begin NULL: no data threads */
	pthread_mutex_t lock;
	pthread_cond_t reply_came;
	struct ring_queue *queues;
	struct ring_poker *poker; /* cluster mounts: queues poked after entries are added */
	const char *hold_entries; /* CFSD_TEST_HOLD_ENTRIES */
	/* Helpers of the data threads: requests waiting for one (FIFO), and the threads. */
	struct ring_entry *jobs, *jobs_tail;
	pthread_cond_t job_came;
	unsigned nhelpers, helpers_idle;
	pthread_t helpers[HELPERS];
};

static _Thread_local struct ring_entry *answering; /* this thread's ring request */

static void *ring_thread_main(void *arg);

/* --- one ring ------------------------------------------------------------------------ */

static void ring_unmap(struct ring_thread *t)
{
	if (t->sqes)
		munmap(t->sqes, t->sqes_len);
	if (t->cq_map && t->cq_map != t->sq_map)
		munmap(t->cq_map, t->cq_map_len);
	if (t->sq_map)
		munmap(t->sq_map, t->sq_map_len);
	if (t->ring_fd >= 0)
		close(t->ring_fd);
}

/* errno of the call that just failed, never 0 */
static int failure(void) { return errno > 0 ? -errno : -EIO; }

static void *map_ring(int fd, size_t len, off_t what)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, what);
	return p == MAP_FAILED ? NULL : p;
}

/* A ring with room for what a thread has out at a time (a sync thread: its one command).
 * Only its thread submits and reaps, so the kernel runs the ring's completions only when that thread waits
 * (DEFER_TASKRUN); the ring is made disabled, and the thread that enables it is its
 * submitter (SINGLE_ISSUER): it can be made, and fail, before its thread starts. */
static int ring_setup(struct ring_thread *t, unsigned entries)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED};
	t->ring_fd = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (t->ring_fd < 0)
		return failure();
	t->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	t->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (t->cq_map_len > t->sq_map_len)
			t->sq_map_len = t->cq_map_len;
		t->sq_map = t->cq_map = map_ring(t->ring_fd, t->sq_map_len, IORING_OFF_SQ_RING);
	} else {
		t->sq_map = map_ring(t->ring_fd, t->sq_map_len, IORING_OFF_SQ_RING);
		t->cq_map = map_ring(t->ring_fd, t->cq_map_len, IORING_OFF_CQ_RING);
	}
	t->sqes_len = p.sq_entries * SQE_SIZE;
	t->sqes = map_ring(t->ring_fd, t->sqes_len, IORING_OFF_SQES);
	if (!t->sq_map || !t->cq_map || !t->sqes)
		return -ENOMEM;
	char *sq = t->sq_map, *cq = t->cq_map;
	t->sq_head = (unsigned *)(sq + p.sq_off.head);
	t->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	t->sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	t->sq_entries = p.sq_entries;
	t->sq_array = (unsigned *)(sq + p.sq_off.array);
	t->cq_head = (unsigned *)(cq + p.cq_off.head);
	t->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	t->cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
	t->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* The calling thread becomes the ring's one submitter. */
static int ring_enable(struct ring_thread *t)
{
	return syscall(__NR_io_uring_register, t->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0)
		       ? failure()
		       : 0;
}

/* Send what is queued; wait for min completions (with while_waiting as the signal mask). */
static int ring_enter(struct ring_thread *t, unsigned min, const sigset_t *while_waiting)
{
	unsigned unsent = *t->sq_tail - __atomic_load_n(t->sq_head, __ATOMIC_ACQUIRE);
	if (syscall(__NR_io_uring_enter, t->ring_fd, unsent, min, min ? IORING_ENTER_GETEVENTS : 0,
		    while_waiting, _NSIG / 8) < 0 &&
	    errno != EINTR && errno != EAGAIN && errno != EBUSY)
		return failure();
	return 0;
}

/* The next submission slot, cleared; ring_push queues it. */
static struct io_uring_sqe *ring_sqe(struct ring_thread *t, uint64_t user_data)
{
	/* set by ring_setup; clang-analyzer takes its failed syscall for one that left errno 0 */
	if (*t->sq_tail - __atomic_load_n(t->sq_head, __ATOMIC_ACQUIRE) == t->sq_entries) // NOLINT(clang-analyzer-core.NullDereference)
		ring_enter(t, 0, NULL); /* full: send what is there */
	unsigned index = *t->sq_tail & t->sq_mask;
	struct io_uring_sqe *sqe = (void *)((char *)t->sqes + (size_t)index * SQE_SIZE);
	memset(sqe, 0, SQE_SIZE);
	sqe->user_data = user_data;
	return sqe;
}

static void ring_push(struct ring_thread *t)
{
	unsigned tail = *t->sq_tail;
	t->sq_array[tail & t->sq_mask] = tail & t->sq_mask;
	__atomic_store_n(t->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Queue a FUSE command on entry e (sent at the next ring_enter). */
static void ring_queue_cmd(struct ring_thread *t, struct ring_entry *e, uint32_t cmd,
			   uint64_t commit_id, const struct iovec *iov)
{
	struct fuse_uring *u = t->queue->u;
	struct io_uring_sqe *sqe = ring_sqe(t, (uintptr_t)e | CQE_FUSE);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->dev_fd;
	sqe->cmd_op = cmd;
	if (iov) {
		sqe->addr = (uintptr_t)iov;
		sqe->len = 2;
	}
	struct uring_cmd_req req = {.commit_id = commit_id, .qid = (uint16_t)t->queue->qid};
	memcpy(sqe->cmd, &req, sizeof req);
	ring_push(t);
}

/* The next completion, if there is one. */
static bool ring_reap(struct ring_thread *t, struct io_uring_cqe *cqe)
{
	unsigned head = *t->cq_head;
	if (head == __atomic_load_n(t->cq_tail, __ATOMIC_ACQUIRE))
		return false;
	*cqe = t->cqes[head & t->cq_mask];
	__atomic_store_n(t->cq_head, head + 1, __ATOMIC_RELEASE);
	return true;
}

/* A sync thread: send what was queued and wait for its entry's command to complete: 0 when
 * a request has arrived in the entry, negative errno when the kernel ended it (ENOTCONN:
 * unmounted) or the thread is told to stop (ESHUTDOWN). */
static int ring_wait(struct ring_thread *t, const sigset_t *while_waiting)
{
	for (;;) {
		struct io_uring_cqe cqe;
		if (ring_reap(t, &cqe))
			return cqe.res;
		if (__atomic_load_n(&t->queue->u->stopping, __ATOMIC_ACQUIRE))
			return -ESHUTDOWN;
		int rc = ring_enter(t, 1, while_waiting);
		if (rc)
			return rc;
	}
}

/* --- threads ------------------------------------------------------------------------- */

static void thread_free(struct ring_thread *t)
{
	ring_unmap(t);
	for (unsigned i = 0; t->entries && i < t->nentries; i++) {
		free(t->entries[i].header);
		free(t->entries[i].region);
	}
	free(t->entries);
	free(t->buffers);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	free(t);
}

static int entry_init(struct ring_entry *e, struct ring_thread *t, size_t payload_size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	e->thread = t;
	if (posix_memalign((void **)&e->header, 64, sizeof *e->header) ||
	    posix_memalign(&e->region, page, page + payload_size)) {
		free(e->header);
		e->header = NULL;
		return -ENOMEM;
	}
	e->payload = (char *)e->region + page;
	return 0;
}

/* A thread's ring and entries, made before it starts: its thread cannot fail once the
 * kernel waits for it.  nentries 1: a sync thread; more: a dispatching thread. */
static int thread_new(struct ring_queue *q, unsigned nentries, struct ring_thread **out)
{
	struct fuse_uring *u = q->u;
	struct ring_thread *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->queue = q;
	t->ring_fd = -1;
	t->wake_fd = -1;
	t->dispatching = nentries > 1;
	t->base = nentries;
	t->capacity = u->answers_later ? MAX_ENTRIES : nentries;
	/* a data thread's ring: a command per entry, its LUN pieces, the eventfd's read */
	unsigned pieces = u->data.begin ? CFS_DIRECT_IO_PIECES : 0;
	int rc = ring_setup(t, t->capacity > 1 ? t->capacity * (pieces + 1) + 1 : 2);
	if (!rc && (!(t->entries = calloc(t->capacity, sizeof *t->entries)) ||
		    !(t->buffers = calloc(2 * (size_t)t->capacity, sizeof *t->buffers))))
		rc = -ENOMEM;
	for (; !rc && t->nentries < nentries; t->nentries++)
		rc = entry_init(&t->entries[t->nentries], t, u->payload_size);
	if (!rc && t->capacity > 1 && (t->wake_fd = eventfd(0, EFD_CLOEXEC)) < 0)
		rc = failure();
	if (rc) {
		thread_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* One more thread of nentries entries on queue q (u->lock held). */
static int queue_grow(struct ring_queue *q, unsigned nentries)
{
	struct ring_thread *t;
	int rc = thread_new(q, nentries, &t);
	if (!rc && (rc = -pthread_create(&t->thread, NULL, ring_thread_main, t)))
		thread_free(t);
	if (rc) {
		fprintf(stderr, "cfsd: cannot start an io_uring thread for core %u: %s\n", q->qid,
			strerror(-rc));
		return rc;
	}
	q->threads[q->started++] = t;
	q->idle++;
	return 0;
}

/* A sync thread starts answering a request or is done with it; as in workers.c, the queue
 * grows when a request finds none of its threads idle. */
static void set_busy(struct ring_queue *q, bool busy)
{
	struct fuse_uring *u = q->u;
	pthread_mutex_lock(&u->lock);
	if (!busy)
		q->idle++;
	else if (!--q->idle && q->started < THREADS_PER_QUEUE && !u->stopping)
		queue_grow(q, 1); /* on failure the others go on */
	pthread_mutex_unlock(&u->lock);
}

/* An answer of error, or of the payload's first bytes, in e. */
static void answer_in_place(struct ring_entry *e, uint64_t unique, int error, size_t payload)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof out + payload), .error = error, .unique = unique};
	memcpy(e->header->in_out, &out, sizeof out);
	e->header->ent.payload_sz = (uint32_t)payload;
}

/* The request in e, in *in, if it fits its entry; one that does not is answered EIO. */
static bool request_fits(struct ring_entry *e, struct fuse_in_header *in)
{
	memcpy(in, e->header->in_out, sizeof *in);
	size_t rest = e->header->ent.payload_sz, first = in->len - sizeof *in - rest;
	if (in->len >= sizeof *in + rest && first <= URING_HEADER_OP_IN &&
	    rest <= e->thread->queue->u->payload_size)
		return true;
	fprintf(stderr, "cfsd: io_uring request %llu (opcode %u) of %u bytes does not fit its "
			"entry: answered EIO\n",
		(unsigned long long)in->unique, in->opcode, in->len);
	answer_in_place(e, in->unique, -EIO, 0);
	return false;
}

/* libfuse answers the request in e, laid out as /dev/fuse delivers it: header, first
 * argument, rest. */
static void process(struct ring_entry *e, const struct fuse_in_header *in)
{
	size_t first = in->len - sizeof *in - e->header->ent.payload_sz;
	char *start = e->payload - sizeof *in - first;
	memcpy(start, in, sizeof *in);
	memcpy(start + sizeof *in, e->header->op_in, first);
	dev_io_as_libfuse_knows((struct fuse_in_header *)start, in->len);
	__atomic_store_n(&e->replied, false, __ATOMIC_RELEASE);
	__atomic_store_n(&e->unique, in->unique, __ATOMIC_RELEASE);
	answering = e;
	fuse_session_process_buf(e->thread->queue->u->se,
				 &(struct fuse_buf){.mem = start, .size = in->len});
	answering = NULL;
}

/* Wake thread t's wait on its ring (its eventfd's read): it has work from another thread. */
static void wake(struct ring_thread *t)
{
	uint64_t one = 1;
	if (write(t->wake_fd, &one, sizeof one) != sizeof one)
		fprintf(stderr, "cfsd: io_uring thread of core %u not woken: %s\n",
			t->queue->qid, strerror(errno));
}

/* e's request is to be answered later, from elsewhere (its helper_done set, its answer not
 * in): its thread adds an entry in its place (add_entries; u->lock held). */
static void park(struct ring_entry *e)
{
	e->thread->parked++;
	wake(e->thread);
}

/* Register entry e of t: it takes requests from now on. */
static void register_entry(struct ring_thread *t, struct ring_entry *e)
{
	struct iovec *buffers = &t->buffers[2 * (e - t->entries)];
	buffers[0] = (struct iovec){e->header, sizeof *e->header};
	buffers[1] = (struct iovec){e->payload, t->queue->u->payload_size};
	ring_queue_cmd(t, e, URING_CMD_REGISTER, 0, buffers);
}

/* A sync thread answers the request in its entry; false if the answer is to come from
 * another thread later (answers_later): the entry is parked. */
static bool answer(struct ring_entry *e)
{
	struct fuse_uring *u = e->thread->queue->u;
	struct fuse_in_header in;
	if (request_fits(e, &in)) {
		process(e, &in);
		if (!__atomic_load_n(&e->replied, __ATOMIC_ACQUIRE)) { /* by another thread */
			pthread_mutex_lock(&u->lock);
			if (u->answers_later && !e->replied) {
				e->helper_done = true; /* fuse_uring_take_reply hands it back */
				park(e);
				pthread_mutex_unlock(&u->lock);
				return false;
			}
			while (!e->replied)
				pthread_cond_wait(&u->reply_came, &u->lock);
			pthread_mutex_unlock(&u->lock);
		}
	}
	__atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
	__atomic_add_fetch(&u->answered, 1, __ATOMIC_RELAXED);
	return true;
}

/* Tell the kernel the connection goes without io_uring: a REGISTER it refuses turns it off
 * (fuse_uring_cmd), and the requests it held for the rings to be complete go to /dev/fuse. */
static void refuse_rings(struct fuse_uring *u)
{
	struct ring_queue q = {.u = u};
	struct ring_thread t = {.queue = &q, .ring_fd = -1, .wake_fd = -1};
	int rc = ring_setup(&t, 2);
	if (!rc && !(rc = ring_enable(&t))) {
		ring_queue_cmd(&t, NULL, URING_CMD_REGISTER, 0, NULL); /* no buffers: EINVAL */
		rc = ring_wait(&t, NULL);
	}
	ring_unmap(&t);
	if (rc != -EINVAL)
		fprintf(stderr, "cfsd: cannot turn io_uring off (%s): requests may wait for good\n",
			strerror(-rc));
}

static int data_thread_run(struct ring_thread *t, const sigset_t *while_waiting);

/* Requests one at a time, each answered by this thread itself, until one is to be answered
 * later: then the thread goes on dispatching (data_thread_run), its entries' requests to
 * helpers, because a thread that answered requests itself with more than one entry could
 * block in one while a request that it waits for sits in another. */
static int sync_thread_run(struct ring_thread *t, const sigset_t *while_waiting)
{
	struct ring_entry *e = &t->entries[0];
	register_entry(t, e);
	int rc;
	while (!(rc = ring_wait(t, while_waiting))) {
		set_busy(t->queue, true);
		if (!answer(e)) { /* counted busy from now on: the queue grows as if it were */
			t->dispatching = true;
			return data_thread_run(t, while_waiting);
		}
		set_busy(t->queue, false);
		ring_queue_cmd(t, e, URING_CMD_COMMIT_AND_FETCH, e->header->ent.commit_id, NULL);
	}
	return rc;
}

/* --- data threads -------------------------------------------------------------------- */

/* Send e's answer and fetch its next request. */
static void send_answer(struct ring_thread *t, struct ring_entry *e)
{
	__atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
	__atomic_add_fetch(&t->queue->u->answered, 1, __ATOMIC_RELAXED);
	ring_queue_cmd(t, e, URING_CMD_COMMIT_AND_FETCH, e->header->ent.commit_id, NULL);
}

/* A helper's answer is in e: its thread is to send it (u->lock held). */
static void hand_back(struct ring_entry *e)
{
	struct ring_thread *t = e->thread;
	e->next = t->answered;
	t->answered = e;
	wake(t);
}

static void *helper_main(void *arg)
{
	struct fuse_uring *u = arg;
	pthread_mutex_lock(&u->lock);
	for (;;) {
		while (!u->jobs && !u->stopping)
			pthread_cond_wait(&u->job_came, &u->lock);
		struct ring_entry *e = u->jobs;
		if (!e)
			break;
		u->jobs = e->next;
		u->helpers_idle--;
		pthread_mutex_unlock(&u->lock);
		struct fuse_in_header in;
		memcpy(&in, e->header->in_out, sizeof in);
		process(e, &in);
		pthread_mutex_lock(&u->lock);
		u->helpers_idle++;
		e->helper_done = true;
		if (e->replied) /* else by whichever thread answers it (fuse_uring_take_reply) */
			hand_back(e);
		else
			park(e);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* A helper thread more (u->lock held). */
static int helper_start(struct fuse_uring *u)
{
	int rc = -pthread_create(&u->helpers[u->nhelpers], NULL, helper_main, u);
	if (!rc) {
		u->nhelpers++;
		u->helpers_idle++;
	}
	return rc;
}

/* Give the request in e to a helper, started if none is idle (there is always one). */
static void to_helper(struct ring_entry *e)
{
	struct fuse_uring *u = e->thread->queue->u;
	pthread_mutex_lock(&u->lock);
	e->helper_done = false;
	e->next = NULL;
	if (u->jobs)
		u->jobs_tail->next = e;
	else
		u->jobs = e;
	u->jobs_tail = e;
	if (!u->helpers_idle && u->nhelpers < HELPERS && !u->stopping)
		helper_start(u); /* on failure the others take it */
	pthread_cond_signal(&u->job_came);
	pthread_mutex_unlock(&u->lock);
}

/* All of e's LUN I/O is done: its answer goes. */
static void finish_direct(struct ring_thread *t, struct ring_entry *e)
{
	/* On a cluster a thread has one request at the LUNs at most (cfs_direct_io_begin): it
	 * may wait for the filesystem's lock. */
	int64_t n;
	cfs_direct_io_end(&e->io, e->io_error, e->io_bytes, true, &n);
	uint64_t unique = __atomic_load_n(&e->unique, __ATOMIC_ACQUIRE);
	if (n < 0) {
		answer_in_place(e, unique, (int)n, 0);
	} else if (e->io.write) {
		struct fuse_write_out out = {.size = (uint32_t)n};
		memcpy(e->payload, &out, sizeof out);
		answer_in_place(e, unique, 0, sizeof out);
	} else {
		answer_in_place(e, unique, 0, (size_t)n);
	}
	__atomic_add_fetch(&t->queue->u->direct, 1, __ATOMIC_RELAXED);
	send_answer(t, e);
}

/* Send the LUN pieces cfs_direct_io_begin mapped e's request to. */
static void submit_lun_io(struct ring_thread *t, struct ring_entry *e)
{
	e->io_pending = e->io.n;
	e->io_bytes = 0;
	e->io_error = 0;
	t->lun_inflight += e->io.n;
	for (unsigned i = 0; i < e->io.n; i++) {
		const struct cfs_lun_io *piece = &e->io.io[i];
		struct io_uring_sqe *sqe =
			ring_sqe(t, (uintptr_t)e | CQE_LUN | (uint64_t)i << CQE_PIECE_SHIFT);
		sqe->opcode = e->io.write ? IORING_OP_WRITE : IORING_OP_READ;
		sqe->fd = piece->fd;
		sqe->addr = (uintptr_t)(e->payload + piece->buf_offset);
		sqe->len = (uint32_t)piece->len;
		sqe->off = piece->offset;
		ring_push(t);
	}
	if (!e->io.n) /* a read of holes, or past the end */
		finish_direct(t, e);
}

static void lun_done(struct ring_thread *t, struct ring_entry *e, unsigned piece, int res)
{
	t->lun_inflight--;
	if (res < 0 || (uint64_t)res < e->io.io[piece].len)
		cfs_direct_io_failed(&e->io, piece, res < 0 ? res : -EIO);
	if (res < 0 && !e->io_error)
		e->io_error = res;
	else if (res > 0)
		e->io_bytes += (uint64_t)res;
	if (!--e->io_pending)
		finish_direct(t, e);
}

/* An O_SYNC or O_DSYNC write: its pieces written and their LUNs flushed by this thread, as
 * the sync threads do, before it takes anything else.  A redo log writes so, one at a time,
 * and there the ring's round trips cost: 8 KiB O_DSYNC writes at depth 1 went at 3.9-5.4k/s
 * through the ring (its fdatasync run by io_uring's workers), 7.5-7.9k/s so, 7.4-8.2k/s
 * through the sync threads. */
static void write_through(struct ring_thread *t, struct ring_entry *e)
{
	e->io_error = cfs_direct_io_now(&e->io, e->payload, &e->io_bytes);
	finish_direct(t, e);
}

/* A request arrived in e: to the LUNs from here if it can go so, else to a helper. */
static void take_request(struct ring_thread *t, struct ring_entry *e)
{
	struct fuse_uring *u = t->queue->u;
	struct fuse_in_header in;
	if (!request_fits(e, &in)) {
		send_answer(t, e);
		return;
	}
	__atomic_store_n(&e->unique, in.unique, __ATOMIC_RELEASE);
	if ((in.opcode == FUSE_READ || in.opcode == FUSE_WRITE) && u->data.begin &&
	    !u->data.begin(u->data.arg, &in, e->header->op_in, e->payload, u->payload_size,
			   t->lun_inflight == 0, &e->io)) {
		int rc = e->io.flush ? 0 : cfs_direct_io_may_submit(&e->io);
		if (rc) {
			e->io_error = rc;
			e->io_bytes = 0;
			finish_direct(t, e);
		} else if (e->io.flush) {
			write_through(t, e);
		} else {
			submit_lun_io(t, e);
		}
		return;
	}
	to_helper(e);
}

/* Wait for a helper's answer on the eventfd. */
static void arm_wake(struct ring_thread *t)
{
	struct io_uring_sqe *sqe = ring_sqe(t, (uintptr_t)t | CQE_WAKE);
	sqe->opcode = IORING_OP_READ;
	sqe->fd = t->wake_fd;
	sqe->addr = (uintptr_t)&t->wake_count;
	sqe->len = sizeof t->wake_count;
	ring_push(t);
}

static void send_helpers_answers(struct ring_thread *t)
{
	struct fuse_uring *u = t->queue->u;
	pthread_mutex_lock(&u->lock);
	struct ring_entry *e = t->answered;
	t->answered = NULL;
	pthread_mutex_unlock(&u->lock);
	while (e) {
		struct ring_entry *next = e->next;
		send_answer(t, e);
		e = next;
	}
}

/* An entry more if a request parked beyond those added before wants one and there is room:
 * whether one was added. */
static bool add_entry(struct ring_thread *t)
{
	struct fuse_uring *u = t->queue->u;
	pthread_mutex_lock(&u->lock);
	unsigned n = t->nentries;
	bool wanted = n - t->base < t->parked && !u->stopping;
	bool full = wanted && n == t->capacity && u->answers_later && !u->full_logged;
	u->full_logged |= full;
	pthread_mutex_unlock(&u->lock);
	if (full)
		fprintf(stderr, "cfsd: io_uring: %u requests of core %u's queue wait for answers "
				"from elsewhere (locks held on other nodes); its new requests wait "
				"in the kernel for one of them\n",
			t->parked, t->queue->qid);
	if (!wanted || n == t->capacity)
		return false;
	/* Test hook (test_cfs_uring.sh): requests come while every entry of their queue is taken. */
	cfs_test_gate(u->hold_entries);
	int rc = entry_init(&t->entries[n], t, u->payload_size);
	if (rc) {
		fprintf(stderr, "cfsd: io_uring: no entry more for core %u: %s\n", t->queue->qid,
			strerror(-rc));
		return false;
	}
	register_entry(t, &t->entries[n]);
	pthread_mutex_lock(&u->lock);
	t->nentries++;
	pthread_mutex_unlock(&u->lock);
	return true;
}

/* An entry more for each parked request, then the queue poked for the requests the kernel
 * queued while none was free, which a new entry does not take (ring_poke.c). */
static void add_entries(struct ring_thread *t)
{
	bool added = false;
	while (add_entry(t))
		added = true;
	if (added && !ring_enter(t, 0, NULL)) /* the REGISTERs in before the poke */
		ring_poker_want(t->queue->u->poker, t->queue->qid);
}

/* One completion on a data thread's ring; a FUSE command's error ends the thread (*ended). */
static void data_completion(struct ring_thread *t, const struct io_uring_cqe *cqe, int *ended)
{
	uint64_t tagged = cqe->user_data & ((1ull << CQE_PIECE_SHIFT) - 1);
	void *of = (void *)(uintptr_t)(tagged & ~(uint64_t)CQE_TAGS);
	switch (cqe->user_data & CQE_TAGS) {
	case CQE_FUSE:
		if (cqe->res >= 0)
			take_request(t, of);
		else if (!*ended)
			*ended = cqe->res;
		break;
	case CQE_LUN:
		lun_done(t, of, (unsigned)(cqe->user_data >> CQE_PIECE_SHIFT), cqe->res);
		break;
	default:
		if (!*ended)
			arm_wake(t);
		send_helpers_answers(t);
		if (!*ended)
			add_entries(t);
	}
}

/* Until the kernel ends the entries or the thread is stopped, and its LUN I/O is done (it
 * holds locks). */
static int data_thread_run(struct ring_thread *t, const sigset_t *while_waiting)
{
	struct fuse_uring *u = t->queue->u;
	arm_wake(t);
	int ended = 0;
	for (;;) {
		struct io_uring_cqe cqe;
		while (ring_reap(t, &cqe))
			data_completion(t, &cqe, &ended);
		if (!ended && __atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE))
			ended = -ESHUTDOWN;
		if (ended && !t->lun_inflight)
			break;
		int rc = ring_enter(t, 1, while_waiting);
		if (rc) {
			ended = ended ? ended : rc;
			break;
		}
	}
	return ended;
}

static void *ring_thread_main(void *arg)
{
	struct ring_thread *t = arg;
	struct ring_queue *q = t->queue;
	struct fuse_uring *u = q->u;
	int rc = ring_enable(t);
	if (rc) {
		fprintf(stderr, "cfsd: io_uring ring of core %u: %s (requests go through "
				"/dev/fuse)\n", q->qid, strerror(-rc));
		refuse_rings(u);
	}
	sigset_t stop, while_waiting;
	sigemptyset(&stop);
	sigaddset(&stop, STOP_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &stop, &while_waiting); /* STOP_SIGNAL only wakes ring_enter */
	sigdelset(&while_waiting, STOP_SIGNAL);
	for (unsigned i = 0; !rc && t->dispatching && i < t->nentries; i++)
		register_entry(t, &t->entries[i]);
	if (!rc)
		rc = t->dispatching ? data_thread_run(t, &while_waiting)
				    : sync_thread_run(t, &while_waiting);
	pthread_mutex_lock(&u->lock);
	if (rc != -ENOTCONN && rc != -ESHUTDOWN && !u->stopping && !u->failed) {
		u->failed = true; /* the kernel turns io_uring off when a REGISTER fails */
		fprintf(stderr, "cfsd: io_uring thread of core %u ended: %s\n", q->qid,
			strerror(-rc));
	}
	if (!t->dispatching || t->base > 1) /* one turned dispatching stays counted busy */
		q->idle--;
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* --- the whole ------------------------------------------------------------------------ */

/* The kernel makes a queue for every possible core (num_possible_cpus). */
static unsigned possible_cores(void)
{
	unsigned last = 0;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	if (f) {
		char line[256] = "";
		if (fgets(line, sizeof line, f)) {
			char *dash = strrchr(line, '-'), *comma = strrchr(line, ',');
			const char *tail = dash > comma ? dash + 1 : comma ? comma + 1 : line;
			last = (unsigned)strtoul(tail, NULL, 10);
		}
		fclose(f);
	}
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	return last + 1 > (unsigned)conf ? last + 1 : (unsigned)conf;
}

static void no_op(int sig) { (void)sig; }

int fuse_uring_start(struct fuse_session *se, size_t payload_size,
		     const struct fuse_uring_data_path *data, const char *answers_later,
		     struct fuse_uring **out)
{
	struct sigaction wake = {.sa_handler = no_op}; /* no SA_RESTART: io_uring_enter returns */
	sigemptyset(&wake.sa_mask);
	if (sigaction(STOP_SIGNAL, &wake, NULL))
		return -errno;
	struct fuse_uring *u = calloc(1, sizeof *u);
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->dev_fd = fuse_session_fd(se);
	u->payload_size = payload_size;
	u->answers_later = answers_later != NULL;
	u->hold_entries = getenv("CFSD_TEST_HOLD_ENTRIES");
	u->nqueues = possible_cores();
	int rc = answers_later ? ring_poker_new(answers_later, u->nqueues, &u->poker) : 0;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->reply_came, NULL);
	pthread_cond_init(&u->job_came, NULL);
	if (data)
		u->data = *data;
	u->queues = calloc(u->nqueues, sizeof *u->queues);
	if (!rc && !u->queues)
		rc = -ENOMEM;
	pthread_mutex_lock(&u->lock);
	if (!rc && (data || answers_later))
		rc = helper_start(u); /* dispatching threads count on one being there */
	for (unsigned i = 0; !rc && i < u->nqueues; i++) {
		struct ring_queue *q = &u->queues[i];
		*q = (struct ring_queue){.u = u, .qid = i};
		if (data)
			for (unsigned j = 0; !rc && j < DATA_THREADS_PER_QUEUE; j++)
				rc = queue_grow(q, DATA_ENTRIES);
		else
			rc = queue_grow(q, 1);
	}
	pthread_mutex_unlock(&u->lock);
	if (rc)
		refuse_rings(u);
	*out = u;
	return rc;
}

bool fuse_uring_possible(void)
{
	struct ring_thread t = {.ring_fd = -1, .wake_fd = -1};
	int rc = ring_setup(&t, 2);
	ring_unmap(&t);
	return !rc;
}

/* The entry whose request has this unique and no answer yet (u->lock held). */
static struct ring_entry *entry_of(struct fuse_uring *u, uint64_t unique)
{
	for (unsigned i = 0; i < u->nqueues; i++)
		for (unsigned j = 0; j < u->queues[i].started; j++) {
			struct ring_thread *t = u->queues[i].threads[j];
			for (unsigned k = 0; k < t->nentries; k++) {
				struct ring_entry *e = &t->entries[k];
				if (__atomic_load_n(&e->unique, __ATOMIC_ACQUIRE) == unique &&
				    !__atomic_load_n(&e->replied, __ATOMIC_ACQUIRE))
					return e;
			}
		}
	return NULL;
}

ssize_t fuse_uring_take_reply(struct fuse_uring *u, const struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct ring_entry *e = answering;
	bool own = e && iov[0].iov_len >= sizeof *out && out->unique == e->unique;
	if (!own) {
		if (!u || iov[0].iov_len < sizeof *out || !out->unique)
			return -1;
		pthread_mutex_lock(&u->lock);
		if (!(e = entry_of(u, out->unique))) {
			pthread_mutex_unlock(&u->lock);
			return -1; /* a request read from /dev/fuse */
		}
	}
	size_t n = 0, room = e->thread->queue->u->payload_size;
	bool fits = true;
	for (int i = 1; fits && i < count; i++) {
		fits = n + iov[i].iov_len <= room;
		if (fits && iov[i].iov_base != e->payload + n) /* not read into place */
			memcpy(e->payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	n = fits ? n : 0;
	answer_in_place(e, out->unique, fits ? out->error : -EIO, n);
	__atomic_store_n(&e->replied, true, __ATOMIC_RELEASE);
	if (!own) {
		if (e->thread->wake_fd < 0) {
			pthread_cond_broadcast(&u->reply_came);
		} else if (e->helper_done) { /* parked (park); else its helper hands it back */
			e->thread->parked--;
			hand_back(e);
		}
		pthread_mutex_unlock(&u->lock);
	}
	return (ssize_t)(sizeof *out + n);
}

void *fuse_uring_reply_space(size_t size)
{
	struct ring_entry *e = answering;
	return e && size <= e->thread->queue->u->payload_size ? e->payload : NULL;
}

uint64_t fuse_uring_direct(const struct fuse_uring *u)
{
	return u ? __atomic_load_n(&u->direct, __ATOMIC_RELAXED) : 0;
}

uint64_t fuse_uring_waiting(struct fuse_uring *u)
{
	if (!u)
		return 0;
	uint64_t n = 0;
	pthread_mutex_lock(&u->lock);
	for (unsigned i = 0; i < u->nqueues; i++)
		for (unsigned j = 0; j < u->queues[i].started; j++)
			n += u->queues[i].threads[j]->parked;
	pthread_mutex_unlock(&u->lock);
	return n;
}

uint64_t fuse_uring_answered(const struct fuse_uring *u)
{
	return u ? __atomic_load_n(&u->answered, __ATOMIC_RELAXED) : 0;
}

void fuse_uring_stop(struct fuse_uring *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock); /* no thread starts after this */
	__atomic_store_n(&u->stopping, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&u->job_came);
	pthread_mutex_unlock(&u->lock);
	for (unsigned i = 0; i < u->nhelpers; i++) /* before the threads whose answers they hand */
		pthread_join(u->helpers[i], NULL);
	for (unsigned i = 0; i < u->nqueues; i++)
		for (unsigned j = 0; j < u->queues[i].started; j++) {
			struct ring_thread *t = u->queues[i].threads[j];
			pthread_kill(t->thread, STOP_SIGNAL);
			pthread_join(t->thread, NULL);
			thread_free(t);
		}
	ring_poker_stop(u->poker); /* after the threads that ask it for pokes */
	pthread_cond_destroy(&u->reply_came);
	pthread_cond_destroy(&u->job_came);
	pthread_mutex_destroy(&u->lock);
	free(u->queues);
	free(u);
}
