/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Durability of ODM writes across kill -9, driven by tests/odm/test_odm_crash.sh.
 *
 *   odm_crash write DIR LOG ROUND   identifies DIR/data.dbf (creating it the first time), makes
 *                                   an uncommitted DIR/scratch.dbf, then writes random blocks of
 *                                   both in async batches until killed; every data.dbf block it
 *                                   saw complete is appended to LOG as "block generation"
 *   odm_crash write DIR LOG ROUND PART NPARTS
 *                                   the same, in part PART of NPARTS of data.dbf's blocks (one
 *                                   writer per part, on several nodes; one check of all logs)
 *   odm_crash check DIR LOG         reads data.dbf through the mount: a logged block holds its
 *                                   generation or a later one, every block is zero or a whole
 *                                   block of ours (not torn, not written elsewhere)
 *
 * Generations are ROUND << 32 | a counter, so a later round's writes are later.  The LOG lives
 * on another filesystem and only the processes die, not the host: write(2) is enough there. */
#include "odm/odm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 8192u
#define NBLOCKS 4096u /* 32 MiB */
#define BATCH 16u
#define MAGIC 0x4f444d4352415348ull /* "ODMCRASH" */

struct block_head {
	uint64_t magic, block, gen;
};

/* A block's bytes follow from its head, so a torn or misdirected block does not pass. */
static void fill(uint8_t *b, uint64_t block, uint64_t gen)
{
	struct block_head h = {MAGIC, block, gen};
	memcpy(b, &h, sizeof h);
	uint64_t x = block * 0x9E3779B97F4A7C15ull ^ gen;
	for (size_t o = sizeof h; o < BS; o += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(b + o, &x, 8);
	}
}

static int die(const char *what, int rc)
{
	fprintf(stderr, "odm_crash: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	return 2;
}

static int open_data(const char *dir, odm_fid *fid)
{
	char path[512];
	snprintf(path, sizeof path, "%s/data.dbf", dir);
	int rc = odm_identify(path, fid, &(uint64_t){0});
	if (rc != -ENOENT)
		return rc;
	if ((rc = odm_create(path, (uint64_t)NBLOCKS * BS, BS, ODM_FT_DATA, fid)))
		return rc;
	return odm_commit(*fid);
}

/* One batch: BATCH distinct random blocks, every other one in scratch.dbf; the data.dbf ones
 * that completed are logged. */
static int batch(odm_fid data, odm_fid scratch, uint8_t *bufs, uint64_t *gen, int log,
		 unsigned part, unsigned nparts)
{
	struct odm_ioc ioc[BATCH], *v[BATCH];
	for (unsigned i = 0; i < BATCH; i++) { /* distinct, in groups of BATCH of this part */
		unsigned group = (unsigned)rand() % (NBLOCKS / BATCH / nparts) * nparts + part;
		uint64_t blk = (uint64_t)group * BATCH + i;
		fill(bufs + (size_t)i * BS, blk, ++*gen);
		ioc[i] = (struct odm_ioc){.op = ODM_WRITE, .fid = i % 2 ? scratch : data,
					  .block = blk, .buf = bufs + (size_t)i * BS, .size = BS};
		v[i] = &ioc[i];
	}
	int rc = odm_io(v, BATCH, v, BATCH, NULL, 0, NULL, -1);
	if (rc != ODM_IO_WAITED)
		return rc < 0 ? rc : -EIO;
	char line[64 * BATCH];
	size_t n = 0;
	for (unsigned i = 0; i < BATCH; i++) {
		if (ioc[i].status)
			return ioc[i].status;
		if (ioc[i].fid == data)
			n += (size_t)snprintf(line + n, sizeof line - n, "%" PRIu64 " %" PRIu64 "\n",
					      ioc[i].block, ((struct block_head *)ioc[i].buf)->gen);
	}
	return write(log, line, n) == (ssize_t)n ? 0 : -errno;
}

static int writer(const char *dir, const char *logpath, unsigned round, unsigned part,
		  unsigned nparts)
{
	char inst[32], path[512];
	snprintf(inst, sizeof inst, "CR%u", round);
	int rc = odm_init(getenv("ODM_TEST_DB") ? getenv("ODM_TEST_DB") : "CRASH", inst);
	odm_fid data, scratch;
	if (rc || (rc = open_data(dir, &data)))
		return die("data.dbf", rc);
	snprintf(path, sizeof path, "%s/scratch.dbf", dir);
	if ((rc = odm_create(path, (uint64_t)NBLOCKS * BS, BS, ODM_FT_TEMP, &scratch)))
		return die("scratch.dbf", rc);
	int log = open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
	uint8_t *bufs;
	if (log < 0 || posix_memalign((void **)&bufs, 4096, (size_t)BS * BATCH))
		return die(logpath, -errno);
	srand(round);
	uint64_t gen = (uint64_t)round << 32;
	for (;;) /* until the kill */
		if ((rc = batch(data, scratch, bufs, &gen, log, part, nparts)))
			return die("write batch", rc);
}

static int checker(const char *dir, const char *logpath)
{
	static uint64_t want[NBLOCKS];
	FILE *log = fopen(logpath, "r");
	uint64_t blk, gen, logged = 0;
	for (; log && fscanf(log, "%" SCNu64 " %" SCNu64, &blk, &gen) == 2; logged++)
		if (blk < NBLOCKS && gen > want[blk])
			want[blk] = gen;
	if (log)
		fclose(log);
	char path[512];
	snprintf(path, sizeof path, "%s/data.dbf", dir);
	int fd = open(path, O_RDONLY | O_DIRECT);
	uint8_t *b, *expect;
	if (fd < 0 || posix_memalign((void **)&b, 4096, BS) || !(expect = malloc(BS)))
		return die(path, -errno);
	unsigned bad = 0;
	for (blk = 0; blk < NBLOCKS; blk++) {
		if (pread(fd, b, BS, (off_t)(blk * BS)) != BS) {
			printf("data.dbf block %" PRIu64 ": %s\n", blk, strerror(errno));
			bad++;
			break;
		}
		struct block_head h;
		memcpy(&h, b, sizeof h);
		bool zero = !h.magic && !memcmp(b, b + 1, BS - 1);
		if (!zero)
			fill(expect, h.block, h.gen);
		const char *why = zero ? (want[blk] ? "zero, but a write of it completed" : NULL)
			: h.magic != MAGIC || h.block != blk || memcmp(b, expect, BS)
				? "torn, or another block's data"
			: h.gen < want[blk] ? "older than a write of it that completed" : NULL;
		if (why && bad++ < 10)
			printf("data.dbf block %" PRIu64 ": %s (logged generation %#" PRIx64 ")\n", blk,
			       why, want[blk]);
	}
	close(fd);
	free(b);
	free(expect);
	printf("%" PRIu64 " completed writes over %u blocks checked, %u bad\n", logged, NBLOCKS,
	       bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 7) && !strcmp(argv[1], "write")) {
		unsigned part = argc == 7 ? (unsigned)atoi(argv[5]) : 0;
		unsigned nparts = argc == 7 ? (unsigned)atoi(argv[6]) : 1;
		if (nparts < 1 || nparts > NBLOCKS / BATCH || part >= nparts)
			return die("PART NPARTS: give 0 <= PART < NPARTS", -EINVAL);
		return writer(argv[2], argv[3], (unsigned)atoi(argv[4]), part, nparts);
	}
	if (argc == 4 && !strcmp(argv[1], "check"))
		return checker(argv[2], argv[3]);
	fprintf(stderr, "usage: odm_crash write DIR LOG ROUND [PART NPARTS] | "
		"odm_crash check DIR LOG\n");
	return 2;
}
