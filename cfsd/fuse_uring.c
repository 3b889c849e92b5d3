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
 * One-node mounts only: on a cluster a request may be answered later from the lock library's
 * thread (flock, setlk, flush), and here a thread with an unanswered request keeps its entry
 * until the answer comes (fuse_uring_take_reply wakes it): a crowd of waiting lock requests
 * would hold a thread and a megabyte each. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_uring.h"

#include "cfsd/fuse_ops.h"

#include <errno.h>
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
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
#define SQE_SIZE 128 /* IORING_SETUP_SQE128: the command area holds uring_cmd_req */
#define STOP_SIGNAL SIGUSR2

struct ring_queue;

/* A thread, its ring and the one entry it registered. */
struct ring_thread {
	struct ring_queue *queue;
	pthread_t thread;
	int ring_fd;
	void *sq_map, *cq_map, *sqes;
	size_t sq_map_len, cq_map_len, sqes_len;
	unsigned *sq_head, *sq_tail, *sq_array, sq_mask;
	unsigned *cq_head, *cq_tail, cq_mask;
	struct io_uring_cqe *cqes;
	struct uring_req_header *header;
	void *region;  /* the payload buffer and a page in front of it */
	char *payload; /* page-aligned */
	uint64_t unique; /* the request being answered, 0 between requests (atomic) */
	/* its answer is in the entry (atomic; set under u->lock when not by its thread) */
	bool replied;
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
	uint64_t answered; /* requests answered through the rings (atomic) */
	pthread_mutex_t lock;
	pthread_cond_t reply_came;
	struct ring_queue *queues;
};

static _Thread_local struct ring_thread *answering; /* this thread's ring request */

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

/* A ring with room for the one command a thread has out at a time.  Only its thread submits
 * and reaps, so the kernel runs the ring's completions only when that thread waits
 * (DEFER_TASKRUN); the ring is made disabled, and the thread that enables it is its
 * submitter (SINGLE_ISSUER): it can be made, and fail, before its thread starts. */
static int ring_setup(struct ring_thread *t)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED};
	t->ring_fd = (int)syscall(__NR_io_uring_setup, 2, &p);
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

/* Queue a FUSE command on the thread's entry (sent at the next ring_wait). */
static void ring_queue_cmd(struct ring_thread *t, uint32_t cmd, uint64_t commit_id,
			   const struct iovec *iov)
{
	struct fuse_uring *u = t->queue->u;
	/* set by ring_setup; clang-analyzer takes its failed syscall for one that left errno 0 */
	unsigned tail = *t->sq_tail, index = tail & t->sq_mask; // NOLINT(clang-analyzer-core.NullDereference)
	struct io_uring_sqe *sqe = (void *)((char *)t->sqes + (size_t)index * SQE_SIZE);
	memset(sqe, 0, SQE_SIZE);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->dev_fd;
	sqe->cmd_op = cmd;
	if (iov) {
		sqe->addr = (uintptr_t)iov;
		sqe->len = 2;
	}
	struct uring_cmd_req req = {.commit_id = commit_id, .qid = (uint16_t)t->queue->qid};
	memcpy(sqe->cmd, &req, sizeof req);
	t->sq_array[index] = index;
	__atomic_store_n(t->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Send what was queued and wait for the command's completion: 0 when a request has arrived
 * in the entry, negative errno when the kernel ended it (ENOTCONN: unmounted) or the
 * thread is told to stop (ESHUTDOWN). */
static int ring_wait(struct ring_thread *t, const sigset_t *while_waiting)
{
	for (;;) {
		unsigned head = *t->cq_head;
		if (head != __atomic_load_n(t->cq_tail, __ATOMIC_ACQUIRE)) {
			int res = t->cqes[head & t->cq_mask].res;
			__atomic_store_n(t->cq_head, head + 1, __ATOMIC_RELEASE);
			return res;
		}
		if (__atomic_load_n(&t->queue->u->stopping, __ATOMIC_ACQUIRE))
			return -ESHUTDOWN;
		unsigned unsent = *t->sq_tail - __atomic_load_n(t->sq_head, __ATOMIC_ACQUIRE);
		if (syscall(__NR_io_uring_enter, t->ring_fd, unsent, 1, IORING_ENTER_GETEVENTS,
			    while_waiting, _NSIG / 8) < 0 &&
		    errno != EINTR && errno != EAGAIN && errno != EBUSY)
			return failure();
	}
}

/* --- threads ------------------------------------------------------------------------- */

static void thread_free(struct ring_thread *t)
{
	ring_unmap(t);
	free(t->header);
	free(t->region);
	free(t);
}

static int thread_new(struct ring_queue *q, struct ring_thread **out)
{
	struct fuse_uring *u = q->u;
	struct ring_thread *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->queue = q;
	t->ring_fd = -1;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* the ring now: its thread cannot fail once the kernel waits for it */
	int rc = ring_setup(t);
	if (!rc && (posix_memalign((void **)&t->header, 64, sizeof *t->header) ||
		    posix_memalign(&t->region, page, page + u->payload_size)))
		rc = -ENOMEM;
	if (rc) {
		thread_free(t);
		return rc;
	}
	t->payload = (char *)t->region + page;
	*out = t;
	return 0;
}

/* One more thread on queue q (u->lock held). */
static int queue_grow(struct ring_queue *q)
{
	struct ring_thread *t;
	int rc = thread_new(q, &t);
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

/* A thread starts answering a request or is done with it; as in workers.c, the queue grows
 * when a request finds none of its threads idle. */
static void set_busy(struct ring_queue *q, bool busy)
{
	struct fuse_uring *u = q->u;
	pthread_mutex_lock(&u->lock);
	if (!busy)
		q->idle++;
	else if (!--q->idle && q->started < THREADS_PER_QUEUE && !u->stopping)
		queue_grow(q); /* on failure the others go on */
	pthread_mutex_unlock(&u->lock);
}

/* The request in t's entry as /dev/fuse delivers it: header, first argument, rest. */
static void answer(struct ring_thread *t)
{
	struct fuse_uring *u = t->queue->u;
	struct fuse_in_header in;
	memcpy(&in, t->header->in_out, sizeof in);
	size_t rest = t->header->ent.payload_sz, first = in.len - sizeof in - rest;
	if (in.len < sizeof in + rest || first > URING_HEADER_OP_IN || rest > u->payload_size) {
		fprintf(stderr, "cfsd: io_uring request %llu (opcode %u) of %u bytes does not fit "
				"its entry: answered EIO\n",
			(unsigned long long)in.unique, in.opcode, in.len);
		struct fuse_out_header out = {.len = sizeof out, .error = -EIO, .unique = in.unique};
		memcpy(t->header->in_out, &out, sizeof out);
		t->header->ent.payload_sz = 0;
		return;
	}
	char *start = t->payload - sizeof in - first;
	memcpy(start, &in, sizeof in);
	memcpy(start + sizeof in, t->header->op_in, first);
	dev_io_as_libfuse_knows((struct fuse_in_header *)start, in.len);
	__atomic_store_n(&t->unique, in.unique, __ATOMIC_RELEASE);
	t->replied = false;
	answering = t;
	fuse_session_process_buf(u->se, &(struct fuse_buf){.mem = start, .size = in.len});
	answering = NULL;
	if (!__atomic_load_n(&t->replied, __ATOMIC_ACQUIRE)) { /* answered by another thread */
		pthread_mutex_lock(&u->lock);
		while (!t->replied)
			pthread_cond_wait(&u->reply_came, &u->lock);
		pthread_mutex_unlock(&u->lock);
	}
	__atomic_store_n(&t->unique, 0, __ATOMIC_RELEASE);
	__atomic_add_fetch(&u->answered, 1, __ATOMIC_RELAXED);
}

/* Tell the kernel the connection goes without io_uring: a REGISTER it refuses turns it off
 * (fuse_uring_cmd), and the requests it held for the rings to be complete go to /dev/fuse. */
static void refuse_rings(struct fuse_uring *u)
{
	struct ring_queue q = {.u = u};
	struct ring_thread t = {.queue = &q, .ring_fd = -1};
	int rc = ring_setup(&t);
	if (!rc && !(rc = ring_enable(&t))) {
		ring_queue_cmd(&t, URING_CMD_REGISTER, 0, NULL); /* no buffers: EINVAL */
		rc = ring_wait(&t, NULL);
	}
	ring_unmap(&t);
	if (rc != -EINVAL)
		fprintf(stderr, "cfsd: cannot turn io_uring off (%s): requests may wait for good\n",
			strerror(-rc));
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
	pthread_sigmask(SIG_BLOCK, &stop, &while_waiting); /* STOP_SIGNAL only wakes ring_wait */
	sigdelset(&while_waiting, STOP_SIGNAL);
	struct iovec buffers[2] = {{t->header, sizeof *t->header}, {t->payload, u->payload_size}};
	if (!rc)
		ring_queue_cmd(t, URING_CMD_REGISTER, 0, buffers);
	while (!rc && !(rc = ring_wait(t, &while_waiting))) {
		set_busy(q, true);
		answer(t);
		set_busy(q, false);
		ring_queue_cmd(t, URING_CMD_COMMIT_AND_FETCH, t->header->ent.commit_id, NULL);
	}
	pthread_mutex_lock(&u->lock);
	if (rc != -ENOTCONN && rc != -ESHUTDOWN && !u->stopping && !u->failed) {
		u->failed = true; /* the kernel turns io_uring off when a REGISTER fails */
		fprintf(stderr, "cfsd: io_uring thread of core %u ended: %s\n", q->qid,
			strerror(-rc));
	}
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

int fuse_uring_start(struct fuse_session *se, size_t payload_size, struct fuse_uring **out)
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
	u->nqueues = possible_cores();
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->reply_came, NULL);
	u->queues = calloc(u->nqueues, sizeof *u->queues);
	int rc = u->queues ? 0 : -ENOMEM;
	pthread_mutex_lock(&u->lock);
	for (unsigned i = 0; !rc && i < u->nqueues; i++) {
		u->queues[i] = (struct ring_queue){.u = u, .qid = i};
		rc = queue_grow(&u->queues[i]);
	}
	pthread_mutex_unlock(&u->lock);
	if (rc)
		refuse_rings(u);
	*out = u;
	return rc;
}

bool fuse_uring_possible(void)
{
	struct ring_thread t = {.ring_fd = -1};
	int rc = ring_setup(&t);
	ring_unmap(&t);
	return !rc;
}

ssize_t fuse_uring_take_reply(struct fuse_uring *u, const struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct ring_thread *t = answering;
	bool own = t && iov[0].iov_len >= sizeof *out && out->unique == t->unique;
	if (!own) {
		if (!u || iov[0].iov_len < sizeof *out || !out->unique)
			return -1;
		pthread_mutex_lock(&u->lock);
		for (unsigned i = 0; !t && i < u->nqueues; i++)
			for (unsigned j = 0; j < u->queues[i].started; j++) {
				struct ring_thread *c = u->queues[i].threads[j];
				if (__atomic_load_n(&c->unique, __ATOMIC_ACQUIRE) == out->unique &&
				    !__atomic_load_n(&c->replied, __ATOMIC_ACQUIRE))
					t = c;
			}
		if (!t) {
			pthread_mutex_unlock(&u->lock);
			return -1; /* a request read from /dev/fuse */
		}
	}
	size_t n = 0;
	for (int i = 1; i < count; i++) {
		if (n + iov[i].iov_len > t->queue->u->payload_size) {
			n = SIZE_MAX;
			break;
		}
		if (iov[i].iov_base != t->payload + n) /* not read into place */
			memcpy(t->payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	struct fuse_out_header h = *out;
	if (n == SIZE_MAX) {
		h = (struct fuse_out_header){.len = sizeof h, .error = -EIO, .unique = out->unique};
		n = 0;
	}
	memcpy(t->header->in_out, &h, sizeof h);
	t->header->ent.payload_sz = (uint32_t)n;
	__atomic_store_n(&t->replied, true, __ATOMIC_RELEASE);
	if (!own) {
		pthread_cond_broadcast(&u->reply_came);
		pthread_mutex_unlock(&u->lock);
	}
	return (ssize_t)(sizeof h + n);
}

void *fuse_uring_reply_space(size_t size)
{
	struct ring_thread *t = answering;
	return t && size <= t->queue->u->payload_size ? t->payload : NULL;
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
	pthread_mutex_unlock(&u->lock);
	for (unsigned i = 0; i < u->nqueues; i++)
		for (unsigned j = 0; j < u->queues[i].started; j++) {
			struct ring_thread *t = u->queues[i].threads[j];
			pthread_kill(t->thread, STOP_SIGNAL);
			pthread_join(t->thread, NULL);
			thread_free(t);
		}
	pthread_cond_destroy(&u->reply_came);
	pthread_mutex_destroy(&u->lock);
	free(u->queues);
	free(u);
}
