/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Files: the instance's file table (in the statistics segment, so a file identifier means
 * the same file in every process of the instance), this process's maps of them, and the
 * calls that make, resize and remove them through cfsd. */
#include "odm/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static odm_fid make_fid(unsigned index, uint32_t gen)
{
	return (uint64_t)gen << 32 | (index + 1);
}

struct odm_file *odm_file_at(unsigned i, bool make)
{
	struct odm_file **chunk = &odm_proc.file_chunk[i / ODM_FILE_CHUNK];
	struct odm_file *c = __atomic_load_n(chunk, __ATOMIC_ACQUIRE);
	if (!c && make && (c = calloc(ODM_FILE_CHUNK, sizeof *c))) {
		for (unsigned j = 0; j < ODM_FILE_CHUNK; j++)
			pthread_mutex_init(&c[j].lock, NULL);
		/* the reader thread walks the chunks (revokes) while this one adds them */
		__atomic_store_n(chunk, c, __ATOMIC_RELEASE);
	}
	return c ? &c[i % ODM_FILE_CHUNK] : NULL;
}

struct odm_file *odm_file_next(unsigned *i)
{
	for (; *i < ODM_MAX_FILES; *i = (*i / ODM_FILE_CHUNK + 1) * ODM_FILE_CHUNK) {
		struct odm_file *f = odm_file_at(*i, false);
		if (f)
			return f;
	}
	return NULL;
}

void odm_files_free(void)
{
	for (unsigned c = 0; c < ODM_MAX_FILES / ODM_FILE_CHUNK; c++) {
		struct odm_file *chunk = odm_proc.file_chunk[c];
		for (unsigned j = 0; chunk && j < ODM_FILE_CHUNK; j++) {
			free(chunk[j].ext);
			pthread_mutex_destroy(&chunk[j].lock);
		}
		free(chunk);
		odm_proc.file_chunk[c] = NULL;
	}
}

int odm_file_of(odm_fid fid, struct odm_file **out, unsigned *index)
{
	uint32_t i = (uint32_t)fid - 1, gen = (uint32_t)(fid >> 32);
	if ((uint32_t)fid == 0 || i >= ODM_MAX_FILES)
		return -EBADF;
	const struct odm_file_slot *t = &odm_proc.seg->files[i];
	uint32_t state = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
	if (t->gen != gen || state == ODM_FILE_FREE ||
	    (state == ODM_FILE_CREATING && t->creator != odm_proc.pid))
		return -EBADF;
	if (!(*out = odm_file_at(i, true)))
		return -ENOMEM;
	*index = i;
	return 0;
}

int odm_file_drain(struct odm_file *f)
{
	while (__atomic_load_n(&f->inflight, __ATOMIC_ACQUIRE)) {
		int rc = odm_io_poll(f->m, true, -1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void odm_file_drop(struct odm_file *f)
{
	pthread_mutex_lock(&f->lock);
	free(f->ext);
	f->ext = NULL;
	f->next = 0;
	f->mapped = false;
	f->gen = 0;
	f->m = NULL;
	pthread_mutex_unlock(&f->lock);
}

int odm_file_install(struct odm_file *f, const ControlReply *r)
{
	const OdmMap *map = r->map;
	if (!map || !r->layout)
		return -EPROTO;
	int rc = odm_mount_layout(f->m, r->layout);
	OdmExtent *ext = calloc(map->n_extents ? map->n_extents : 1, sizeof *ext);
	if (!rc && !ext)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < map->n_extents; i++) {
		ext[i] = *map->extents[i];
		if (ext[i].vol_off + ext[i].len > r->layout->size || ext[i].vol_off % ODM_ALIGN)
			rc = -EPROTO; /* never hand a map outside the volume to the kernel */
	}
	if (rc) {
		free(ext);
		return rc;
	}
	pthread_mutex_lock(&f->lock);
	free(f->ext);
	f->ext = ext;
	f->next = map->n_extents;
	f->ino = map->ino;
	f->key = map->key;
	f->size = map->size;
	f->block_size = map->has_block_size && map->block_size ? map->block_size : ODM_ALIGN;
	f->type = map->has_file_type ? map->file_type : ODM_FT_OTHER;
	f->mapped = true;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* For tests only (tests/odm/test_odm.sh): with ODM_TEST_PAUSE_INSTALL=PATH, before it
 * installs the Nth map cfsd gave it, the process makes PATH.N and waits until PATH exists,
 * so that a test can send a revoke between cfsd's answer and its use. */
static void test_pause_install(void)
{
	static unsigned maps;
	const char *path = getenv("ODM_TEST_PAUSE_INSTALL");
	if (!path)
		return;
	char mark[PATH_MAX];
	snprintf(mark, sizeof mark, "%s.%u", path, ++maps);
	int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	while (access(path, F_OK))
		nanosleep(&(struct timespec){0, 10000000}, NULL);
}

/* Ask cfsd for the map.  A revoke notice that came while asking voids what came back: one
 * for this file, or for the inode the map is of (the file may not have known its inode
 * when the notice came, and the reader acknowledged it at once). */
static int map_from(struct odm_file *f, ControlRequest *req)
{
	for (;;) {
		pthread_mutex_lock(&f->lock);
		unsigned notices = f->notices;
		pthread_mutex_unlock(&f->lock);
		uint64_t seq = odm_notice_seq(f->m);
		ControlReply *r;
		int rc = odm_rpc(f->m, req, &r);
		if (rc)
			return rc;
		test_pause_install();
		rc = odm_file_install(f, r);
		control_reply__free_unpacked(r, NULL);
		if (rc)
			return rc;
		bool noticed = odm_noticed_since(f->m, seq, f->ino);
		pthread_mutex_lock(&f->lock);
		bool raced = f->notices != notices || noticed;
		if (raced)
			f->mapped = false;
		pthread_mutex_unlock(&f->lock);
		if (!raced)
			return 0;
		odm_send_revoked(f->m, f->ino);
		if (req->op != CONTROL_REQUEST__OP__ODM_IDENTIFY)
			return 0; /* the next I/O identifies again */
	}
}

static int identify_path(struct odm_file *f, const char *path, uint64_t want_key)
{
	char root[PATH_MAX], rel[PATH_MAX];
	int rc = odm_find_mount(path, false, root, sizeof root, rel, sizeof rel);
	if (!rc && f->m && strcmp(f->m->root, root))
		rc = -ESTALE; /* another filesystem is mounted there now */
	if (!rc && !f->m)
		rc = odm_mount_get(root, &f->m);
	if (rc)
		return rc;
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__ODM_IDENTIFY;
	req.path = rel;
	rc = map_from(f, &req);
	if (!rc && want_key && f->key != want_key)
		rc = -ESTALE;
	return rc;
}

int odm_file_remap(struct odm_file *f, unsigned index)
{
	int rc = odm_file_drain(f); /* the old map's I/O completes first (and is acknowledged) */
	if (!rc && f->uncommitted)
		rc = -ESTALE; /* nobody else can name it; cfsd dropped it */
	if (!rc)
		rc = identify_path(f, odm_proc.seg->files[index].path, odm_proc.seg->files[index].key);
	return rc;
}

/* The table entry for path, or a new one made CREATING/USED for it. */
static int table_slot(const char *path, uint32_t state, unsigned *index)
{
	int rc = odm_segment_lock(odm_proc.seg);
	if (rc)
		return rc;
	rc = state == ODM_FILE_USED ? odm_table_find(odm_proc.seg, path, index) : -ENOENT;
	if (rc == -ENOENT)
		rc = odm_table_add(odm_proc.seg, path, state, odm_proc.pid, index);
	odm_segment_unlock(odm_proc.seg);
	return rc;
}

static void table_free(unsigned index)
{
	if (odm_segment_lock(odm_proc.seg))
		return;
	odm_table_free(odm_proc.seg, index);
	odm_segment_unlock(odm_proc.seg);
}

/* Under the lock: the count of entries being created (which each new process looks through
 * for dead creators') must drop with it. */
static void table_commit(unsigned index)
{
	if (odm_segment_lock(odm_proc.seg))
		return;
	odm_table_commit(odm_proc.seg, index);
	odm_segment_unlock(odm_proc.seg);
}

static void table_record(unsigned index, const struct odm_file *f)
{
	struct odm_file_slot *t = &odm_proc.seg->files[index];
	t->ino = f->ino;
	t->key = f->key;
	t->block_size = f->block_size;
	t->type = f->type;
}

static int begin(void)
{
	if (!odm_ready())
		return -ENXIO;
	pthread_mutex_lock(&odm_proc.lock);
	return 0;
}

static int end(int rc)
{
	pthread_mutex_unlock(&odm_proc.lock);
	return rc;
}

int odm_identify(const char *path, odm_fid *fid, uint64_t *key)
{
	char abs[PATH_MAX];
	if (!path || !fid)
		return -EINVAL;
	int rc = begin();
	if (rc)
		return rc;
	if (!realpath(path, abs))
		return end(-errno);
	unsigned i;
	if ((rc = table_slot(abs, ODM_FILE_USED, &i)))
		return end(rc);
	struct odm_file *f = odm_file_at(i, true);
	if (!f) {
		if (!odm_proc.seg->files[i].ino)
			table_free(i);
		return end(-ENOMEM);
	}
	uint32_t gen = odm_proc.seg->files[i].gen;
	if (f->gen != gen) {
		odm_file_drop(f);
		f->gen = gen;
	}
	rc = identify_path(f, abs, 0);
	if (!rc && odm_proc.seg->files[i].key && odm_proc.seg->files[i].key != f->key) {
		/* the path names another file than the one the instance knew: a new identity */
		if (odm_segment_lock(odm_proc.seg) == 0) {
			odm_proc.seg->files[i].gen++;
			odm_segment_unlock(odm_proc.seg);
		}
		f->gen = odm_proc.seg->files[i].gen;
	}
	if (!rc) {
		table_record(i, f);
		*fid = make_fid(i, f->gen);
		if (key)
			*key = f->key;
	} else if (!odm_proc.seg->files[i].ino) {
		table_free(i); /* never identified: nobody has its fid */
		odm_file_drop(f);
	}
	return end(rc);
}

/* This process's file for fid, mapped (identifying it here if another process gave it). */
static int local_file(odm_fid fid, struct odm_file **out, unsigned *index)
{
	int rc = odm_file_of(fid, out, index);
	if (rc)
		return rc;
	struct odm_file *f = *out;
	uint32_t gen = (uint32_t)(fid >> 32);
	if (f->gen != gen) {
		odm_file_drop(f);
		f->gen = gen;
		rc = identify_path(f, odm_proc.seg->files[*index].path, odm_proc.seg->files[*index].key);
		if (rc)
			odm_file_drop(f);
	}
	return rc;
}

/* begin(), then the file of fid (identified in this process too if here): 0 with the process
 * lock held, or an error without it. */
static int begin_file(odm_fid fid, bool here, struct odm_file **f, unsigned *index)
{
	int rc = begin();
	if (!rc && (rc = here ? local_file(fid, f, index) : odm_file_of(fid, f, index)))
		end(rc);
	return rc;
}

static int simple_request(struct odm_file *f, ControlRequest__Op op)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	ControlReply *r;
	req.op = op;
	req.has_ino = true;
	req.ino = f->ino;
	int rc = odm_rpc(f->m, &req, &r);
	if (!rc)
		control_reply__free_unpacked(r, NULL);
	return rc;
}

int odm_unidentify(odm_fid fid)
{
	struct odm_file *f;
	unsigned i;
	int rc = begin_file(fid, false, &f, &i);
	if (rc)
		return rc;
	if (f->gen != (uint32_t)(fid >> 32) || f->uncommitted)
		return end(f->uncommitted ? -EINVAL : 0); /* not identified here: nothing to drop */
	rc = odm_file_drain(f);
	if (!rc)
		rc = simple_request(f, CONTROL_REQUEST__OP__ODM_UNIDENTIFY);
	odm_file_drop(f);
	return end(rc);
}

static bool power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

static int join_path(const char *root, const char *rel, char *out)
{
	size_t n = strlen(root), r = strlen(rel);
	if (n + r + 2 > PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(out, root, n);
	if (strcmp(root, "/"))
		out[n++] = '/';
	memcpy(out + n, rel, r);
	out[n + r] = 0;
	return 0;
}

int odm_create(const char *path, uint64_t size, uint32_t block_size, enum odm_ftype type,
	       odm_fid *fid)
{
	char root[PATH_MAX], rel[PATH_MAX], abs[PATH_MAX];
	if (!path || !fid || (unsigned)type >= ODM_FT_COUNT || !power_of_two(block_size) ||
	    block_size < ODM_ALIGN || block_size > (1u << 20) || size % block_size)
		return -EINVAL;
	int rc = begin();
	if (rc)
		return rc;
	rc = odm_find_mount(path, true, root, sizeof root, rel, sizeof rel);
	if (!rc)
		rc = join_path(root, rel, abs);
	unsigned i = 0;
	if (rc || (rc = table_slot(abs, ODM_FILE_CREATING, &i)))
		return end(rc);
	struct odm_file *f = odm_file_at(i, true);
	if (!f) {
		table_free(i);
		return end(-ENOMEM);
	}
	odm_file_drop(f);
	f->gen = odm_proc.seg->files[i].gen;
	f->uncommitted = true;
	if (!(rc = odm_mount_get(root, &f->m))) {
		ControlRequest req = CONTROL_REQUEST__INIT;
		req.op = CONTROL_REQUEST__OP__ODM_CREATE;
		req.path = rel;
		req.has_size = req.has_block_size = req.has_file_type = true;
		req.size = size;
		req.block_size = block_size;
		req.file_type = (uint32_t)type;
		rc = map_from(f, &req);
	}
	if (rc) {
		f->uncommitted = false;
		odm_file_drop(f);
		table_free(i);
		return end(rc);
	}
	table_record(i, f);
	*fid = make_fid(i, f->gen);
	return end(0);
}

static int finish_create(odm_fid fid, bool keep)
{
	struct odm_file *f;
	unsigned i;
	int rc = begin_file(fid, false, &f, &i);
	if (rc)
		return rc;
	if (!f->uncommitted || f->gen != (uint32_t)(fid >> 32))
		return end(-EINVAL); /* not a file this process created */
	rc = odm_file_drain(f);
	if (!rc)
		rc = simple_request(f, keep ? CONTROL_REQUEST__OP__ODM_COMMIT
					    : CONTROL_REQUEST__OP__ODM_ABORT);
	if (keep && !rc) {
		f->uncommitted = false;
		table_commit(i);
	} else if (!keep) {
		f->uncommitted = false;
		odm_file_drop(f);
		table_free(i);
	}
	return end(rc);
}

int odm_commit(odm_fid fid) { return finish_create(fid, true); }
int odm_abort(odm_fid fid) { return finish_create(fid, false); }

int odm_resize(odm_fid fid, uint64_t size)
{
	struct odm_file *f;
	unsigned i;
	int rc = begin_file(fid, true, &f, &i);
	if (rc)
		return rc;
	if (size % f->block_size)
		return end(-EINVAL);
	if (!(rc = odm_file_drain(f))) {
		ControlRequest req = CONTROL_REQUEST__INIT;
		req.op = CONTROL_REQUEST__OP__ODM_RESIZE;
		req.has_ino = req.has_size = true;
		req.ino = f->ino;
		req.size = size;
		rc = map_from(f, &req);
	}
	return end(rc);
}

int odm_delete(const char *path)
{
	char root[PATH_MAX], rel[PATH_MAX], abs[PATH_MAX];
	int rc = begin();
	if (rc)
		return rc;
	struct odm_mount *m;
	rc = odm_find_mount(path, false, root, sizeof root, rel, sizeof rel);
	if (!rc)
		rc = odm_mount_get(root, &m);
	if (rc || (rc = join_path(root, rel, abs)))
		return end(rc);
	struct odm_file *f;
	for (unsigned i = 0; (f = odm_file_next(&i)); i++) /* our own I/O on it ends first */
		if (f->gen && f->m == m && !strcmp(odm_proc.seg->files[i].path, abs) &&
		    (rc = odm_file_drain(f)))
			return end(rc);
	ControlRequest req = CONTROL_REQUEST__INIT;
	ControlReply *r;
	req.op = CONTROL_REQUEST__OP__ODM_DELETE;
	req.path = rel;
	if ((rc = odm_rpc(m, &req, &r)))
		return end(rc);
	control_reply__free_unpacked(r, NULL);
	unsigned i;
	while (odm_segment_lock(odm_proc.seg) == 0) {
		rc = odm_table_find(odm_proc.seg, abs, &i);
		if (!rc)
			odm_table_free(odm_proc.seg, i);
		odm_segment_unlock(odm_proc.seg);
		if (rc)
			break;
		if ((f = odm_file_at(i, false)))
			odm_file_drop(f);
	}
	return end(0);
}

int odm_getfileinfo(odm_fid fid, struct odm_fileinfo *info)
{
	struct odm_file *f;
	unsigned i;
	if (!info)
		return -EINVAL;
	int rc = begin_file(fid, true, &f, &i);
	if (rc)
		return rc;
	if (!f->mapped && (rc = odm_file_remap(f, i)))
		return end(rc);
	*info = (struct odm_fileinfo){.size = f->size, .key = f->key, .ino = f->ino,
				      .block_size = f->block_size, .type = f->type,
				      .committed = !f->uncommitted};
	snprintf(info->path, sizeof info->path, "%s", odm_proc.seg->files[i].path);
	return end(0);
}

void odm_files_abort_uncommitted(void)
{
	struct odm_file *f;
	for (unsigned i = 0; (f = odm_file_next(&i)); i++) {
		if (!f->gen || !f->uncommitted || !f->m)
			continue;
		simple_request(f, CONTROL_REQUEST__OP__ODM_ABORT);
		f->uncommitted = false;
		odm_file_drop(f);
		table_free(i);
	}
}
