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

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "";
	int rc;
	odm_fid f;
	if (!strcmp(cmd, "writer") && argc == 3)
		return writer(argv[2]);
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
		"create FILE MIB | uncommitted FILE\n");
	return 2;
}
