/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm restripe of a volume mounted on this node: the volume is in use, so the mount's daemon
 * runs the restripe (cfsd/restripe.c), keeping its own I/O and its ODM clients' out of the
 * batch in motion.  This asks it to start, shows the progress its status reports, and asks it
 * to pause on Ctrl-C; killing this command leaves the daemon's restripe running. */
#include "restripe_mounted.h"

#include "../cfs/control.h"
#include "ask.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define POLL_MS 200

/* The daemon's restripe state, with its progress into *p. */
static int poll_state(const char *dir, struct cvm_restripe_progress *p, char *state,
		      size_t len)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__STATUS;
	ControlReply *r;
	int rc = tool_ask("cvm restripe", dir, &req, &r);
	if (rc)
		return rc;
	const RestripeStatus *rs = r->status ? r->status->restripe : NULL;
	if (!rs) {
		fprintf(stderr, "cvm restripe: the daemon of %s says nothing of a restripe: is it "
				"an older release? Unmount and run cvm restripe then\n", dir);
		control_reply__free_unpacked(r, NULL);
		return -EPROTO;
	}
	*p = (struct cvm_restripe_progress){.moves_done = rs->moves_done,
					    .moves_total = rs->moves_total,
					    .chunk_bytes = rs->chunk_bytes,
					    .moved_bytes = rs->moved_bytes, .seconds = rs->seconds,
					    .io_waits = rs->io_waits,
					    .io_wait_max_ns = rs->io_wait_max_us * 1000,
					    .io_held = rs->io_held};
	snprintf(state, len, "%s", rs->state);
	if (!strcmp(rs->state, "failed"))
		fprintf(stderr, "cvm restripe: %s\n", rs->error ? rs->error : "failed");
	control_reply__free_unpacked(r, NULL);
	return 0;
}

int restripe_mounted(const char *dir, const struct cvm_restripe_opts *opts)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__RESTRIPE;
	req.has_size = req.has_rate = true;
	req.size = opts->stripe_width;
	req.rate = opts->rate_bytes;
	ProtobufCBinaryData luns[CVM_MAX_LUNS];
	for (uint32_t i = 0; i < opts->nluns && i < CVM_MAX_LUNS; i++)
		luns[i] = (ProtobufCBinaryData){sizeof opts->luns[i].b, (uint8_t *)opts->luns[i].b};
	req.n_luns = opts->nluns;
	req.luns = luns;
	ControlReply *r;
	int rc = tool_ask("cvm restripe", dir, &req, &r);
	if (rc)
		return rc;
	control_reply__free_unpacked(r, NULL);
	fprintf(stderr, "cvm restripe: the volume is mounted at %s: its daemon restripes it while "
			"it is in use (Ctrl-C pauses it)\n", dir);
	bool stop_asked = false;
	for (;;) {
		nanosleep(&(struct timespec){0, POLL_MS * 1000000L}, NULL);
		struct cvm_restripe_progress p;
		char state[16];
		if ((rc = poll_state(dir, &p, state, sizeof state)))
			return rc;
		if (opts->progress && p.moves_total)
			opts->progress(opts->arg, &p);
		if (!strcmp(state, "done"))
			return 0;
		if (!strcmp(state, "paused"))
			return -EINTR;
		if (!strcmp(state, "failed"))
			return -EIO;
		if (opts->stop && *opts->stop && !stop_asked) {
			req.op = CONTROL_REQUEST__OP__RESTRIPE_STOP;
			if (tool_ask("cvm restripe", dir, &req, &r) == 0)
				control_reply__free_unpacked(r, NULL);
			stop_asked = true;
		}
	}
}
