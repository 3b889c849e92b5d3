/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ODM on several nodes at once, driven by tests/cluster/test_cfs_odm.sh (each command runs on
 * one node; the files are on the cluster mount).
 *
 *   odm_race writer FILE          identifies FILE and writes 'W' blocks all over it, 16 at a
 *                                 time, until killed; says "writing" after its first batch;
 *                                 a write past a shrunk end (-ERANGE) is fine, any other
 *                                 error ends it (exit 4)
 *   odm_race shrink FILE DIR N    N times: shrinks FILE by 4 MiB, creates DIR/nI.dbf of 4 MiB
 *                                 (the freed space), fills it with 'Z', reads it back a moment
 *                                 later: a 'W' there means another node's write reached space
 *                                 freed under it (exit 5)
 *   odm_race delete FILE          odm_delete: exit 0, or 3 and the message for -EBUSY
 *   odm_race create FILE MIB      creates and commits FILE
 *   odm_race uncommitted FILE     creates FILE without committing it, says "created", then
 *                                 waits to be killed
 *   odm_race stamp FILE STOP      writes blocks stamped with their number and a generation,
 *                                 16 at a time, and reads 16 back, until STOP exists; every
 *                                 read and at the end every block must be as last written
 *                                 (exit 6 naming the first that is not); says "writing"
 *   odm_race unreaped FILE OTHER STOP
 *                                 one asynchronous write to FILE, not reaped, while it
 *                                 identifies OTHER (a request to cfsd each time) until STOP
 *                                 exists; says "unreaped" once the write is out; then reaps
 *                                 it (exit 0, else 3 to 5)
 *
 * Blocks are BS bytes; FILE is made by the caller with "create". */
#include "odm/odm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 8192u
#define MIB (1024u * 1024u)
#define DEPTH 16

static int fail(const char *what, int rc, int code)
{
	fprintf(stderr, "odm_race: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	return code;
}

static char *buf_of(size_t size, char c)
{
	char *b;
	if (posix_memalign((void **)&b, 4096, size))
		exit(fail("buffer", ENOMEM, 2));
	memset(b, c, size);
	return b;
}

static int init(const char *role)
{
	char inst[32];
	snprintf(inst, sizeof inst, "%s%d", role, (int)getpid() % 100000);
	const char *db = getenv("ODM_TEST_DB");
	return odm_init(db ? db : "RACE", inst);
}

static int writer(const char *path)
{
	odm_fid f;
	int rc = init("W");
	if (rc || (rc = odm_identify(path, &f, NULL)))
		return fail(path, rc, 3);
	struct odm_fileinfo info;
	if ((rc = odm_getfileinfo(f, &info)))
		return fail("getfileinfo", rc, 3);
	uint64_t blocks = info.size / BS;
	struct odm_ioc ioc[DEPTH], *p[DEPTH];
	char *b = buf_of((size_t)DEPTH * BS, 'W');
	unsigned seed = (unsigned)getpid();
	bool said_writing = false;
	for (;;) {
		for (int i = 0; i < DEPTH; i++) {
			ioc[i] = (struct odm_ioc){.op = ODM_WRITE, .fid = f,
						  .block = (uint64_t)rand_r(&seed) % blocks,
						  .buf = b + (size_t)i * BS, .size = BS};
			p[i] = &ioc[i];
		}
		if ((rc = odm_io(p, DEPTH, p, DEPTH, NULL, 0, NULL, -1)) < 0)
			return fail("odm_io", rc, 4);
		for (int i = 0; i < DEPTH; i++)
			if (ioc[i].status && ioc[i].status != -ERANGE)
				return fail("write", ioc[i].status, 4);
		if (!said_writing) { /* what the tests wait for before they act on the file */
			printf("writing\n");
			fflush(stdout);
			said_writing = true;
		}
	}
}

static int io_all(int op, odm_fid f, char *b, uint64_t size)
{
	struct odm_ioc ioc = {.op = op, .fid = f, .block = 0, .buf = b, .size = (uint32_t)size};
	struct odm_ioc *p = &ioc;
	int rc = odm_io(&p, 1, &p, 1, NULL, 0, NULL, -1);
	return rc < 0 ? rc : ioc.status;
}

static int shrink(const char *path, const char *dir, int rounds)
{
	odm_fid victim;
	struct odm_fileinfo info;
	int rc = init("S");
	if (rc || (rc = odm_identify(path, &victim, NULL)) || (rc = odm_getfileinfo(victim, &info)))
		return fail(path, rc, 3);
	char *z = buf_of(4 * MIB, 'Z'), *back = buf_of(4 * MIB, 0);
	for (int i = 0; i < rounds; i++) {
		char name[512];
		odm_fid nf;
		snprintf(name, sizeof name, "%s/n%d.dbf", dir, i);
		if (info.size < 8 * MIB)
			return fail("the file is too small for that many rounds", EINVAL, 2);
		info.size -= 4 * MIB;
		if ((rc = odm_resize(victim, info.size)))
			return fail("resize", rc, 3);
		if ((rc = odm_create(name, 4 * MIB, BS, ODM_FT_DATA, &nf)) || (rc = odm_commit(nf)) ||
		    (rc = io_all(ODM_WRITE, nf, z, 4 * MIB)))
			return fail(name, rc, 3);
		usleep(200000); /* the writers keep going meanwhile */
		if ((rc = io_all(ODM_READ, nf, back, 4 * MIB)))
			return fail(name, rc, 3);
		if (memcmp(back, z, 4 * MIB)) {
			fprintf(stderr, "odm_race: %s: another node's write landed in it\n", name);
			return 5; /* (the buffers go with the process) */
		}
	}
	free(z);
	free(back);
	printf("%d rounds: the freed space kept only its new files' data\n", rounds);
	return 0;
}

/* A block stamped with its number and generation, as stamp() writes and checks it. */
static void stamp_fill(char *b, uint64_t block, uint64_t gen)
{
	for (size_t i = 0; i < BS; i += 16) {
		memcpy(b + i, &block, 8);
		memcpy(b + i + 8, &gen, 8);
	}
}

static int stamp_check(const char *path, const char *b, uint64_t block, uint64_t gen)
{
	char want[BS];
	stamp_fill(want, block, gen);
	if (!memcmp(b, want, BS))
		return 0;
	uint64_t got[2];
	memcpy(got, b, sizeof got);
	fprintf(stderr, "odm_race: %s: block %llu reads block %llu generation %llu, written as "
		"generation %llu\n", path, (unsigned long long)block, (unsigned long long)got[0],
		(unsigned long long)got[1], (unsigned long long)gen);
	return 6;
}

/* DEPTH distinct blocks of `blocks`, in p's iocs. */
static void pick(struct odm_ioc *ioc, uint64_t blocks, unsigned *seed)
{
	uint64_t start = (uint64_t)rand_r(seed) % blocks, step = blocks / DEPTH;
	for (int i = 0; i < DEPTH; i++)
		ioc[i].block = (start + (uint64_t)i * step + (uint64_t)rand_r(seed) % step) % blocks;
}

static int stamp_batch(odm_fid f, int op, struct odm_ioc *ioc, char *b, uint64_t *gens)
{
	struct odm_ioc *p[DEPTH];
	for (int i = 0; i < DEPTH; i++) {
		ioc[i].op = op;
		ioc[i].fid = f;
		ioc[i].buf = b + (size_t)i * BS;
		ioc[i].size = BS;
		if (op == ODM_WRITE)
			stamp_fill(ioc[i].buf, ioc[i].block, ++gens[ioc[i].block]);
		p[i] = &ioc[i];
	}
	int rc = odm_io(p, DEPTH, p, DEPTH, NULL, 0, NULL, -1);
	for (int i = 0; i < DEPTH && rc >= 0; i++)
		rc = ioc[i].status;
	return rc < 0 ? rc : 0;
}

/* Every block of f read back, each as last written. */
static int stamp_check_all(const char *path, odm_fid f, uint64_t blocks, struct odm_ioc *ioc,
			   char *b, uint64_t *gens)
{
	int rc = 0;
	for (uint64_t i = 0; i < blocks && !rc; i += DEPTH) {
		for (int k = 0; k < DEPTH; k++)
			ioc[k].block = (i + (uint64_t)k) % blocks;
		if ((rc = stamp_batch(f, ODM_READ, ioc, b, gens)))
			return fail("read", rc, 4);
		for (int k = 0; k < DEPTH && !rc; k++)
			rc = stamp_check(path, ioc[k].buf, ioc[k].block, gens[ioc[k].block]);
	}
	return rc;
}

static int stamp_run(const char *path, odm_fid f, uint64_t blocks, const char *stop,
		     char *b, uint64_t *gens)
{
	struct odm_ioc ioc[DEPTH];
	unsigned seed = (unsigned)getpid();
	uint64_t batches = 0;
	int rc;
	for (uint64_t i = 0; i < blocks; i += DEPTH) { /* every block written once first */
		for (int k = 0; k < DEPTH; k++)
			ioc[k].block = (i + (uint64_t)k) % blocks;
		if ((rc = stamp_batch(f, ODM_WRITE, ioc, b, gens)))
			return fail("write", rc, 4);
	}
	printf("writing\n");
	fflush(stdout);
	while (access(stop, F_OK) != 0) {
		pick(ioc, blocks, &seed);
		if ((rc = stamp_batch(f, ODM_WRITE, ioc, b, gens)))
			return fail("write", rc, 4);
		pick(ioc, blocks, &seed);
		if ((rc = stamp_batch(f, ODM_READ, ioc, b, gens)))
			return fail("read", rc, 4);
		for (int i = 0; i < DEPTH; i++)
			if ((rc = stamp_check(path, ioc[i].buf, ioc[i].block, gens[ioc[i].block])))
				return rc;
		batches++;
	}
	if ((rc = stamp_check_all(path, f, blocks, ioc, b, gens)))
		return rc;
	printf("%llu batches: every read as written\n", (unsigned long long)batches);
	return 0;
}

static int stamp(const char *path, const char *stop)
{
	odm_fid f;
	struct odm_fileinfo info;
	int rc = init("V");
	if (rc || (rc = odm_identify(path, &f, NULL)) || (rc = odm_getfileinfo(f, &info)))
		return fail(path, rc, 3);
	uint64_t blocks = info.size / BS;
	if (blocks < DEPTH)
		return fail(path, EINVAL, 2);
	uint64_t *gens = calloc(blocks, sizeof *gens);
	char *b = buf_of((size_t)DEPTH * BS, 0);
	rc = gens ? stamp_run(path, f, blocks, stop, b, gens) : fail(path, ENOMEM, 2);
	free(gens);
	free(b);
	return rc;
}

static int unreaped(const char *path, const char *other, const char *stop)
{
	odm_fid f, g;
	int rc = init("N");
	if (rc || (rc = odm_identify(path, &f, NULL)))
		return fail(path, rc, 3);
	char *b = buf_of(BS, 'N');
	struct odm_ioc ioc = {.op = ODM_WRITE, .fid = f, .block = 0, .buf = b, .size = BS};
	struct odm_ioc *p = &ioc;
	if ((rc = odm_io(&p, 1, NULL, 0, NULL, 0, NULL, 0)) < 0) {
		free(b);
		return fail("odm_io", rc, 4);
	}
	printf("unreaped\n");
	fflush(stdout);
	unsigned asked = 0;
	for (rc = 0; !rc && access(stop, F_OK); asked++)
		rc = odm_identify(other, &g, NULL);
	if (rc) /* the write is reaped all the same: its buffer must stay until then */
		fprintf(stderr, "odm_race: %s: %s\n", other, strerror(-rc));
	int identified = rc;
	if ((rc = odm_io(NULL, 0, &p, 1, NULL, 0, NULL, -1)) >= 0)
		rc = ioc.status;
	free(b);
	if (identified)
		return 5;
	if (rc)
		return fail("write", rc, 4);
	printf("identified %s %u times, then reaped the write\n", other, asked);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "";
	int rc;
	odm_fid f;
	if (!strcmp(cmd, "writer") && argc == 3)
		return writer(argv[2]);
	if (!strcmp(cmd, "stamp") && argc == 4)
		return stamp(argv[2], argv[3]);
	if (!strcmp(cmd, "unreaped") && argc == 5)
		return unreaped(argv[2], argv[3], argv[4]);
	if (!strcmp(cmd, "shrink") && argc == 5)
		return shrink(argv[2], argv[3], atoi(argv[4]));
	if (!strcmp(cmd, "delete") && argc == 3) {
		if ((rc = init("D")) || (rc = odm_delete(argv[2])))
			return fail(argv[2], rc, rc == -EBUSY ? 3 : 4);
		return 0;
	}
	if (!strcmp(cmd, "create") && argc == 4) {
		if ((rc = init("C")) ||
		    (rc = odm_create(argv[2], (uint64_t)atoi(argv[3]) * MIB, BS, ODM_FT_DATA, &f)) ||
		    (rc = odm_commit(f)))
			return fail(argv[2], rc, 3);
		return 0;
	}
	if (!strcmp(cmd, "uncommitted") && argc == 3) {
		if ((rc = init("U")) ||
		    (rc = odm_create(argv[2], 4 * MIB, BS, ODM_FT_TEMP, &f)))
			return fail(argv[2], rc, 3);
		printf("created\n");
		fflush(stdout);
		pause();
		return 0;
	}
	fprintf(stderr, "usage: odm_race writer FILE | shrink FILE DIR N | delete FILE | "
		"create FILE MIB | uncommitted FILE | stamp FILE STOP | unreaped FILE OTHER STOP\n");
	return 2;
}
