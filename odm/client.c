/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libodm's side of cfsd's control socket: finding the CFS mount of a path, one connection per
 * mount for the life of the process, and a reader thread that hands replies to the
 * requester and answers revoke notices (see proto/control.proto). */
#include "cfs/control.h"
#include "odm/internal.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static bool under(const char *path, const char *root)
{
	size_t n = strlen(root);
	if (n == 1)
		return path[0] == '/';
	return !strncmp(path, root, n) && (path[n] == '/' || path[n] == 0);
}

static int absolute(const char *path, bool may_not_exist, char *out)
{
	if (realpath(path, out))
		return 0;
	if (!may_not_exist || errno != ENOENT)
		return -errno;
	char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
	snprintf(a, sizeof a, "%s", path);
	snprintf(b, sizeof b, "%s", path);
	const char *base = basename(b);
	if (!realpath(dirname(a), dir))
		return -errno;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/"))
		return -EINVAL;
	if ((size_t)snprintf(out, PATH_MAX, "%s/%s", strcmp(dir, "/") ? dir : "", base) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* The deepest mount holding path, if it is a CFS one ("" if not). */
struct deepest {
	const char *path;
	char best[PATH_MAX];
};

static void keep_deepest(const struct cfs_mount_entry *m, void *arg)
{
	struct deepest *d = arg;
	if (under(d->path, m->dir) && strlen(m->dir) >= strlen(d->best))
		snprintf(d->best, sizeof d->best, "%s", strcmp(m->fstype, "fuse.cfs") ? "" : m->dir);
}

int odm_find_mount(const char *path, bool may_not_exist, char *root, size_t rootlen,
		   char *rel, size_t rellen)
{
	char abs[PATH_MAX];
	if (!path || !*path)
		return -EINVAL;
	int rc = absolute(path, may_not_exist, abs);
	if (rc)
		return rc;
	struct deepest d = {.path = abs};
	if ((rc = cfs_mountinfo_each(keep_deepest, &d)))
		return rc;
	const char *best = d.best;
	if (!best[0])
		return -EXDEV;
	snprintf(root, rootlen, "%s", best);
	const char *rest = abs + (strcmp(best, "/") ? strlen(best) : 0);
	while (*rest == '/')
		rest++;
	snprintf(rel, rellen, "%s", rest);
	return 0;
}

/* ---- the reader thread ---- */
static void revoke_map(struct odm_mount *m, uint64_t ino)
{
	bool ack = true;
	struct odm_file *f;
	for (unsigned i = 0; (f = odm_file_next(&i)); i++) {
		if (f->m != m || f->ino != ino)
			continue;
		pthread_mutex_lock(&f->lock);
		f->notices++;
		f->mapped = false;
		if (f->inflight) { /* the last completion acknowledges */
			f->ack_due = true;
			ack = false;
		}
		pthread_mutex_unlock(&f->lock);
	}
	if (ack)
		odm_send_revoked(m, ino);
}

static void note_notice(struct odm_mount *m, uint64_t ino)
{
	pthread_mutex_lock(&m->notice_lock);
	m->noticed[m->notice_seq++ % ODM_NOTICES_KEPT] = ino;
	pthread_mutex_unlock(&m->notice_lock);
}

uint64_t odm_notice_seq(struct odm_mount *m)
{
	pthread_mutex_lock(&m->notice_lock);
	uint64_t seq = m->notice_seq;
	pthread_mutex_unlock(&m->notice_lock);
	return seq;
}

bool odm_noticed_since(struct odm_mount *m, uint64_t seq, uint64_t ino)
{
	pthread_mutex_lock(&m->notice_lock);
	bool seen = m->notice_seq - seq > ODM_NOTICES_KEPT;
	for (uint64_t i = seq; !seen && i < m->notice_seq; i++)
		seen = m->noticed[i % ODM_NOTICES_KEPT] == ino;
	pthread_mutex_unlock(&m->notice_lock);
	return seen;
}

static void *reader(void *arg)
{
	struct odm_mount *m = arg;
	uint8_t *msg;
	uint32_t len;
	while (cfs_control_recv(m->sock, &msg, &len) == 0) {
		ControlReply *r = control_reply__unpack(NULL, len, msg);
		free(msg);
		if (!r)
			break;
		if (r->has_notice && r->notice) {
			for (size_t i = 0; i < r->n_revoke; i++) {
				note_notice(m, r->revoke[i]);
				revoke_map(m, r->revoke[i]);
			}
			control_reply__free_unpacked(r, NULL);
			continue;
		}
		pthread_mutex_lock(&m->reply_lock);
		if (m->reply) /* nobody asked: cfsd is confused; keep the newest */
			control_reply__free_unpacked(m->reply, NULL);
		m->reply = r;
		pthread_cond_broadcast(&m->reply_ready);
		pthread_mutex_unlock(&m->reply_lock);
	}
	pthread_mutex_lock(&m->reply_lock);
	m->closed = true; /* cfsd went away: every map of this mount is void */
	pthread_cond_broadcast(&m->reply_ready);
	pthread_mutex_unlock(&m->reply_lock);
	struct odm_file *f;
	for (unsigned i = 0; (f = odm_file_next(&i)); i++) {
		if (f->m == m) {
			pthread_mutex_lock(&f->lock);
			f->mapped = false;
			pthread_mutex_unlock(&f->lock);
		}
	}
	return NULL;
}

static int send_request(struct odm_mount *m, ControlRequest *req)
{
	return cfs_control_send_message(m->sock, &m->send_lock, &req->base);
}

void odm_send_revoked(struct odm_mount *m, uint64_t ino)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__ODM_REVOKED;
	req.has_ino = true;
	req.ino = ino;
	send_request(m, &req); /* a lost connection frees cfsd's side anyway */
}

void odm_tell_lun_errors(struct odm_mount *m)
{
	const struct cvm_volume *vol = m->vol;
	const struct cvm_config *cfg = vol ? cvm_volume_config(vol) : NULL;
	for (uint32_t i = 0; cfg && i < cfg->nluns; i++) {
		uint64_t now = cvm_volume_lun_errors(vol, i);
		uint64_t told = __atomic_load_n(&m->errors_told[i], __ATOMIC_RELAXED);
		while (now > told && !__atomic_compare_exchange_n(&m->errors_told[i], &told, now, false,
								  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		if (now <= told)
			continue; /* another thread told it */
		ControlRequest req = CONTROL_REQUEST__INIT;
		ProtobufCBinaryData uuid = {sizeof cfg->luns[i].uuid.b, (uint8_t *)cfg->luns[i].uuid.b};
		req.op = CONTROL_REQUEST__OP__ODM_LUN_ERRORS;
		req.n_luns = 1;
		req.luns = &uuid;
		req.has_size = true;
		req.size = now - told;
		send_request(m, &req); /* a lost connection loses the count, not the log lines */
	}
}

#define RPC_REAP_MS 5 /* an answer slower than this: reap this process's completions */

/* The caller holds odm_proc.lock (so may reap the process's I/O). */
int odm_rpc(struct odm_mount *m, ControlRequest *req, ControlReply **reply)
{
	pthread_mutex_lock(&m->rpc_lock);
	int rc = m->closed ? -ECONNRESET : send_request(m, req);
	pthread_mutex_lock(&m->reply_lock);
	while (!rc && !m->reply && !m->closed) {
		/* The answer may wait for a revoke (a barrier in cfsd) that waits for this
		 * process's I/O in flight: what completes meanwhile is reaped, and acknowledged. */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += RPC_REAP_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (pthread_cond_timedwait(&m->reply_ready, &m->reply_lock, &until) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&m->reply_lock);
		odm_io_reap();
		pthread_mutex_lock(&m->reply_lock);
	}
	if (!rc && !m->reply)
		rc = -ECONNRESET;
	*reply = rc ? NULL : m->reply;
	m->reply = NULL;
	pthread_mutex_unlock(&m->reply_lock);
	pthread_mutex_unlock(&m->rpc_lock);
	if (!rc && (*reply)->error) {
		rc = -(*reply)->error;
		if ((*reply)->message)
			fprintf(stderr, "libodm: %s: %s\n", m->root, (*reply)->message);
		control_reply__free_unpacked(*reply, NULL);
		*reply = NULL;
	}
	return rc;
}

static int connect_cfsd(const char *root, int *sock)
{
	char path[108];
	int rc = cfs_control_path(root, path, sizeof path);
	if (rc)
		return rc;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	*sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*sock < 0 || connect(*sock, (struct sockaddr *)&a, sizeof a)) {
		rc = -errno;
		fprintf(stderr, "libodm: cannot reach cfsd of %s at %s: %s\n", root, path,
			strerror(-rc));
	}
	return rc;
}

/* cfsd's membership lease page (ODM_LEASE), asked on a connection of its own so that the
 * descriptor that comes with the answer is not read by the reader thread, which drops
 * it.  None on a mount without a cluster. */
static int attach_lease(struct odm_mount *m)
{
	int sock = -1, fd = -1;
	int rc = connect_cfsd(m->root, &sock);
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__ODM_LEASE;
	if (!rc)
		rc = cfs_control_send_message(sock, NULL, &req.base);
	uint8_t *msg = NULL;
	uint32_t len;
	if (!rc)
		rc = cfs_control_recv_fd(sock, &msg, &len, &fd);
	ControlReply *r = rc ? NULL : control_reply__unpack(NULL, len, msg);
	free(msg);
	if (!rc && !r)
		rc = -EPROTO;
	if (r && r->error)
		rc = -(int)r->error;
	if (r)
		control_reply__free_unpacked(r, NULL);
	if (!rc && fd >= 0) {
		void *p = mmap(NULL, sizeof *m->lease, PROT_READ, MAP_SHARED, fd, 0);
		rc = p == MAP_FAILED ? -errno : 0;
		m->lease = rc ? NULL : p;
	}
	if (rc)
		fprintf(stderr, "libodm: the membership lease of %s: %s\n", m->root, strerror(-rc));
	if (fd >= 0)
		close(fd);
	if (sock >= 0)
		close(sock);
	return rc;
}

static bool lease_fresh(const struct cfs_lease_page *l)
{
	uint64_t until = __atomic_load_n(&l->until, __ATOMIC_ACQUIRE);
	if (until == UINT64_MAX)
		return true;
	struct timespec t;
	clock_gettime(CLOCK_BOOTTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec < until;
}

/* Before every write reaches the LUNs (cvm's write gate): cfsd's lease fresh, else wait
 * for it as cfsd's own writes do; fenced, or cfsd gone: the write fails. */
static int lease_gate(void *arg)
{
	struct odm_mount *m = arg;
	const struct timespec pause = {.tv_nsec = 1000000};
	bool told = false;
	for (unsigned waited = 0;; waited++) {
		if (__atomic_load_n(&m->lease->fenced, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&m->closed, __ATOMIC_ACQUIRE))
			return -EIO;
		if (lease_fresh(m->lease))
			return 0;
		if (waited == 5000 && !told) {
			fprintf(stderr, "libodm: writes to %s wait: cfsd's membership lease has not "
				"been renewed for 5 s\n", m->root);
			told = true;
		}
		nanosleep(&pause, NULL);
	}
}

int odm_mount_get(const char *root, struct odm_mount **out)
{
	for (struct odm_mount *m = odm_proc.mounts; m; m = m->next)
		if (!strcmp(m->root, root) && !m->closed) {
			*out = m;
			return 0;
		}
	struct odm_mount *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	snprintf(m->root, sizeof m->root, "%s", root);
	pthread_mutex_init(&m->rpc_lock, NULL);
	pthread_mutex_init(&m->send_lock, NULL);
	pthread_mutex_init(&m->reply_lock, NULL);
	pthread_mutex_init(&m->notice_lock, NULL);
	pthread_cond_init(&m->reply_ready, NULL);
	int rc = connect_cfsd(m->root, &m->sock);
	if (!rc)
		rc = -pthread_create(&m->reader, NULL, reader, m);
	if (rc) {
		if (m->sock >= 0)
			close(m->sock);
		free(m);
		return rc;
	}
	ControlRequest req = CONTROL_REQUEST__INIT;
	ControlReply *reply;
	req.op = CONTROL_REQUEST__OP__ODM_HELLO;
	req.owner = odm_proc.owner;
	if ((rc = odm_rpc(m, &req, &reply)) == 0)
		control_reply__free_unpacked(reply, NULL);
	if (!rc)
		rc = attach_lease(m);
	m->next = odm_proc.mounts;
	odm_proc.mounts = m;
	*out = m;
	return rc;
}

void odm_mount_close(struct odm_mount *m)
{
	shutdown(m->sock, SHUT_RDWR);
	pthread_join(m->reader, NULL);
	close(m->sock);
	if (m->reply)
		control_reply__free_unpacked(m->reply, NULL);
	cvm_aio_destroy(m->aio);
	cvm_volume_close(m->vol);
	if (m->lease)
		munmap((void *)m->lease, sizeof *m->lease);
	free(m);
}

/* The mount's AIO context, made at the first asynchronous request: a process that only does
 * synchronous I/O (most of a database's, its foregrounds) never takes one out of the
 * machine's fs.aio-max-nr. */
/* What libcvm said went wrong, else the error's name: a line never ends in a colon. */
static const char *cvm_why(int rc)
{
	const char *why = cvm_last_error();
	return why[0] ? why : strerror(-rc);
}

int odm_mount_aio(struct odm_mount *m)
{
	if (m->aio)
		return 0;
	int rc = cvm_aio_create(m->vol, ODM_AIO_DEPTH, &m->aio);
	if (rc && !m->aio_refused_said) {
		fprintf(stderr, "libodm: volume of %s: %s\n", m->root, cvm_why(rc));
		m->aio_refused_said = true;
	}
	return rc;
}

/* The volume of the layout, found on the LUNs cfsd named, or (also_scan) also where cfsd
 * looks for LUNs.  Each LUN's label must carry the volume's uuid; the volume opened is the
 * one the labels describe now, which a cvm grow may have made longer than cfsd's. */
static int open_layout_volume(const OdmLayout *layout, bool also_scan, struct cvm_volume **vol)
{
	size_t n = layout->n_lun_paths + (also_scan ? layout->n_scan_paths : 0);
	const char **paths = calloc(n ? n : 1, sizeof *paths);
	if (!paths)
		return -ENOMEM;
	for (size_t i = 0; i < layout->n_lun_paths; i++)
		paths[i] = layout->lun_paths[i];
	for (size_t i = 0; also_scan && i < layout->n_scan_paths; i++)
		paths[layout->n_lun_paths + i] = layout->scan_paths[i];
	struct cvm_scan scan;
	int rc = cvm_scan_paths(paths, n, &scan);
	free(paths);
	if (!rc) {
		rc = cvm_volume_open(&scan, layout->vol_uuid, CVM_OPEN_DATA, vol);
		cvm_scan_free(&scan);
	}
	return rc;
}

/* A failed I/O on a LUN, as libcvm words it (rate-limited there), in the database's log. */
static void lun_log(void *arg, const char *line)
{
	const struct odm_mount *m = arg;
	fprintf(stderr, "libodm: %s: %s\n", m->root, line);
}

/* The LUNs are found where cfsd found them; each one's label must carry the volume's uuid. */
int odm_mount_layout(struct odm_mount *m, const OdmLayout *layout)
{
	if (m->vol && m->layout_generation == layout->generation)
		return 0;
	/* A grow on this node revoked every map first; one on another node did not, and the
	 * maps out stay valid (growth only adds space): what is in flight completes on the
	 * handle it went to, then the new one takes over. */
	while (m->aio && cvm_aio_inflight(m->aio)) {
		int rc = odm_io_poll(m, true, -1);
		if (rc < 0)
			return rc;
	}
	struct cvm_volume *vol = NULL;
	int rc = open_layout_volume(layout, false, &vol);
	if (rc == -ENODEV) /* a cvm grow added LUNs that cfsd has not taken in yet */
		rc = open_layout_volume(layout, true, &vol);
	if (!rc && cvm_volume_size(vol) < layout->size)
		rc = -ESTALE;
	if (!rc && vol && m->lease)
		cvm_volume_set_write_gate(vol, lease_gate, m);
	if (!rc && vol)
		cvm_volume_set_log(vol, lun_log, m);
	if (rc) {
		fprintf(stderr, "libodm: volume %s of %s: %s\n", layout->vol_uuid, m->root,
			rc == -ESTALE ? "smaller than cfsd says" : cvm_why(rc));
		cvm_volume_close(vol);
		return rc;
	}
	cvm_aio_destroy(m->aio);
	if (m->vol)
		odm_tell_lun_errors(m);
	cvm_volume_close(m->vol);
	memset(m->errors_told, 0, sizeof m->errors_told); /* the new handle counts from 0 */
	m->vol = vol;
	m->aio = NULL; /* made on the new volume by the first asynchronous request */
	m->layout_generation = layout->generation;
	return 0;
}
