/* SPDX-License-Identifier: GPL-2.0-or-later */
/* fsck.cfs -n of the mounted filesystem, run by the daemon (see check_server.h).  One check
 * at a time per mount; its problem lines are kept (the first LINES_KEPT) until the next
 * check starts, so that fsck.cfs, or a second one started later, can fetch them all. */
#include "cfsd/check_server.h"

#include "cfs/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINES_KEPT 10000u
#define LINES_PER_REPLY 200u

enum check_state { CHECK_NONE, CHECK_RUNNING, CHECK_DONE, CHECK_STOPPED, CHECK_FAILED };

static struct {
	pthread_mutex_t lock;
	pthread_t thread;
	bool joinable;
	enum check_state state;
	volatile int stop;
	uint64_t rate;
	struct cfsd *d;
	struct cfs_check_progress p;
	char **lines;
	size_t nlines;
	struct timespec started, ended;
	char error[256];
} job = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool check_is_request(const ControlRequest *req)
{
	return req->op == CONTROL_REQUEST__OP__CHECK || req->op == CONTROL_REQUEST__OP__CHECK_STOP ||
	       req->op == CONTROL_REQUEST__OP__CHECK_STATUS;
}

static void on_problem(void *arg, const char *line)
{
	(void)arg;
	pthread_mutex_lock(&job.lock);
	char *copy = job.nlines < LINES_KEPT ? strdup(line) : NULL;
	if (copy)
		job.lines[job.nlines++] = copy;
	pthread_mutex_unlock(&job.lock);
}

static void on_progress(void *arg, const struct cfs_check_progress *p)
{
	(void)arg;
	pthread_mutex_lock(&job.lock);
	job.p = *p;
	pthread_mutex_unlock(&job.lock);
}

static void *run(void *arg)
{
	struct cfsd *d = arg;
	struct cfs_check_opts o = {.rate = job.rate, .stop = &job.stop, .problem = on_problem,
				   .progress = on_progress};
	struct cfs_check_progress p;
	int rc = cfs_check_mounted(d->fs, &o, &p);
	pthread_mutex_lock(&job.lock);
	job.p = p;
	job.state = !rc ? CHECK_DONE : rc == -ECANCELED ? CHECK_STOPPED : CHECK_FAILED;
	if (job.state == CHECK_FAILED)
		snprintf(job.error, sizeof job.error, "the check stopped: %s", strerror(-rc));
	clock_gettime(CLOCK_MONOTONIC, &job.ended);
	pthread_mutex_unlock(&job.lock);
	cfs_log(d->fs, "check: %s after %llu inodes and %llu directories: %llu problems",
		job.state == CHECK_DONE ? "done" : job.state == CHECK_STOPPED ? "stopped" : "failed",
		(unsigned long long)p.inodes, (unsigned long long)p.directories,
		(unsigned long long)p.problems);
	return NULL;
}

static void forget_lines(void)
{
	for (size_t i = 0; i < job.nlines; i++)
		free(job.lines[i]);
	job.nlines = 0;
}

static int start(struct cfsd *d, uint64_t rate, const char **msg)
{
	pthread_mutex_lock(&job.lock);
	if (job.state == CHECK_RUNNING) {
		pthread_mutex_unlock(&job.lock);
		*msg = "a check of this filesystem runs already on this node: wait for it, or stop "
		       "it (fsck.cfs --stop)";
		return -EBUSY;
	}
	bool join = job.joinable;
	job.joinable = false;
	pthread_mutex_unlock(&job.lock);
	if (join) /* the last one's thread has ended, or is ending */
		pthread_join(job.thread, NULL);
	pthread_mutex_lock(&job.lock);
	forget_lines();
	if (!job.lines && !(job.lines = calloc(LINES_KEPT, sizeof *job.lines))) {
		pthread_mutex_unlock(&job.lock);
		return -ENOMEM;
	}
	job.state = CHECK_RUNNING;
	job.stop = 0;
	job.rate = rate;
	job.d = d;
	job.error[0] = '\0';
	memset(&job.p, 0, sizeof job.p);
	clock_gettime(CLOCK_MONOTONIC, &job.started);
	int rc = -pthread_create(&job.thread, NULL, run, d);
	job.joinable = !rc;
	if (rc)
		job.state = CHECK_NONE;
	pthread_mutex_unlock(&job.lock);
	if (!rc)
		cfs_log(d->fs, "check: started (%llu inodes a second at most; 0: no limit)",
			(unsigned long long)rate);
	return rc;
}

/* The state into mem->status, with the lines from index from on (job.lock held). */
static int fill(struct check_reply_mem *mem, uint64_t from)
{
	static const char *const names[] = {"none", "running", "done", "stopped", "failed"};
	CheckStatus *cs = &mem->status;
	check_status__init(cs);
	snprintf(mem->state, sizeof mem->state, "%s",
		 job.state == CHECK_RUNNING && job.stop ? "stopping" : names[job.state]);
	cs->state = mem->state;
	cs->inodes = job.p.inodes;
	cs->directories = job.p.directories;
	cs->groups = job.p.groups;
	cs->groups_total = job.p.groups_total;
	cs->problems = job.p.problems;
	cs->unconfirmed = job.p.unconfirmed;
	struct timespec to = job.ended;
	if (job.state == CHECK_RUNNING)
		clock_gettime(CLOCK_MONOTONIC, &to);
	cs->seconds = (double)(to.tv_sec - job.started.tv_sec) +
		      (double)(to.tv_nsec - job.started.tv_nsec) / 1e9;
	if (job.error[0]) {
		snprintf(mem->error, sizeof mem->error, "%s", job.error);
		cs->error = mem->error;
	}
	cs->lines_kept = job.nlines;
	size_t n = from < job.nlines ? job.nlines - from : 0;
	n = n < LINES_PER_REPLY ? n : LINES_PER_REPLY;
	if (n && !(mem->lines = calloc(n, sizeof *mem->lines)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!(mem->lines[i] = strdup(job.lines[from + i])))
			return -ENOMEM;
		mem->nlines++;
	}
	cs->n_lines = mem->nlines;
	cs->lines = mem->lines;
	return 0;
}

void check_handle(struct cfsd *d, const ControlRequest *req, ControlReply *reply,
		  struct check_reply_mem *mem)
{
	const char *msg = NULL;
	int rc = 0;
	if (req->op == CONTROL_REQUEST__OP__CHECK) {
		rc = start(d, req->has_rate ? req->rate : 0, &msg);
	} else if (req->op == CONTROL_REQUEST__OP__CHECK_STOP) {
		pthread_mutex_lock(&job.lock);
		if (job.state == CHECK_RUNNING)
			job.stop = 1;
		else
			rc = -ENOENT, msg = "no check runs on this node";
		pthread_mutex_unlock(&job.lock);
	}
	pthread_mutex_lock(&job.lock);
	if (!rc && job.state == CHECK_NONE)
		rc = -ENOENT, msg = "no check has run on this node since the mount";
	if (!rc)
		rc = fill(mem, req->has_size ? req->size : 0);
	pthread_mutex_unlock(&job.lock);
	reply->error = -rc;
	if (rc)
		reply->message = (char *)(msg ? msg : strerror(-rc));
	else
		reply->check = &mem->status;
}

void check_reply_mem_free(struct check_reply_mem *mem)
{
	for (size_t i = 0; i < mem->nlines; i++)
		free(mem->lines[i]);
	free(mem->lines);
}

void check_server_end(struct cfsd *d)
{
	(void)d;
	pthread_mutex_lock(&job.lock);
	job.stop = 1;
	bool join = job.joinable;
	job.joinable = false;
	pthread_mutex_unlock(&job.lock);
	if (join)
		pthread_join(job.thread, NULL);
	pthread_mutex_lock(&job.lock);
	forget_lines();
	free(job.lines);
	job.lines = NULL;
	pthread_mutex_unlock(&job.lock);
}
