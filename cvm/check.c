/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cvm check: compare every LUN of a volume with its winning config, and with repair rewrite
 * damaged labels and stale or damaged config copies from it. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct checker {
	const struct cvm_config *cfg;
	bool repair;
	cvm_check_print_fn print;
	void *arg;
	struct cvm_check_report *report;
};

static void say(struct checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct checker *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (c->print)
		c->print(c->arg, line);
}

static int open_for_repair(struct checker *c, const char *path)
{
	uint64_t size;
	struct cvm_lun_id id;
	int fd = cvm_lun_open(path, O_RDWR, &size, &id);
	if (fd >= 0 && cvm_lun_lock(fd, path, CVM_LOCK_CHANGE)) {
		say(c, "%s; not repaired", cvm_last_error());
		close(fd);
		return -EBUSY;
	}
	return fd;
}

static void repair_lun(struct checker *c, uint32_t i, const struct cvm_found_lun *f,
		       bool label_bad, bool config_bad)
{
	int fd = open_for_repair(c, f->path);
	if (fd < 0)
		return;
	int rc = 0;
	if (label_bad) {
		struct cvm_label l = {.lun_uuid = c->cfg->luns[i].uuid, .vol_uuid = c->cfg->vol_uuid,
				      .lun_bytes = c->cfg->luns[i].size_bytes,
				      .data_offset = CVM_META_BYTES,
				      .generation = c->cfg->generation, .ctime = c->cfg->mtime};
		memcpy(l.vol_name, c->cfg->name, sizeof l.vol_name);
		rc = cvm_lun_write_label(fd, &l);
	}
	if (rc == 0 && config_bad)
		rc = cvm_lun_write_config(fd, c->cfg, &c->cfg->luns[i].uuid,
					  (int)(c->cfg->generation % 2), true);
	close(fd);
	if (rc)
		say(c, "LUN %s: repair failed: %s", f->path, strerror(-rc));
	else
		c->report->repaired++;
}

static void check_member(struct checker *c, const struct cvm_scan *scan, uint32_t i)
{
	const struct cvm_config *cfg = c->cfg;
	char u[CVM_UUID_STR];
	cvm_uuid_format(&cfg->luns[i].uuid, u);
	const struct cvm_found_lun *f = cvm_scan_lun(scan, &cfg->luns[i].uuid);
	if (!f) {
		say(c, "LUN %s (last seen at %s): missing; present it and include its path in "
		       "the scan", u, cfg->luns[i].path);
		c->report->problems++;
		return;
	}
	bool label_bad = f->state == CVM_LUN_LABEL_DAMAGED;
	uint64_t want = cfg->generation;
	bool config_bad = f->slot_generation[want % 2] != want;
	if (label_bad)
		say(c, "LUN %s (%s): label damaged%s", f->path, u,
		    c->repair ? "; rewriting it from the config" : "");
	if (config_bad)
		say(c, "LUN %s (%s): config copy %s (generation %" PRIu64 " expected)%s", f->path,
		    u, f->config ? "stale" : "damaged", want,
		    c->repair ? "; rewriting it" : "");
	if (!label_bad && !config_bad) {
		say(c, "LUN %s (%s): ok", f->path, u);
		return;
	}
	c->report->problems++;
	if (c->repair)
		repair_lun(c, i, f, label_bad, config_bad);
}

int cvm_volume_check(const struct cvm_scan *scan, const char *name_or_uuid, bool repair,
		     cvm_check_print_fn print, void *arg, struct cvm_check_report *report)
{
	struct cvm_config *cfg = malloc(sizeof *cfg);
	if (!cfg)
		return -ENOMEM;
	int rc = cvm_scan_find_volume(scan, name_or_uuid, cfg);
	if (rc) {
		free(cfg);
		return rc;
	}
	*report = (struct cvm_check_report){0};
	struct checker c = {.cfg = cfg, .repair = repair, .print = print, .arg = arg,
			    .report = report};
	char vu[CVM_UUID_STR];
	cvm_uuid_format(&cfg->vol_uuid, vu);
	say(&c, "volume %s (%s): config generation %" PRIu64 ", %u LUNs in %u stripe sets",
	    cfg->name, vu, cfg->generation, cfg->nluns, cfg->nsets);
	for (uint32_t i = 0; i < cfg->nluns; i++)
		check_member(&c, scan, i);
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_found_lun *f = &scan->luns[i];
		if (f->state == CVM_LUN_PREPARED && cvm_uuid_equal(&f->vol_uuid, &cfg->vol_uuid))
			say(&c, "LUN %s: labelled by an interrupted create or grow of this volume "
				"but not part of it; 'cvm grow' may use it again", f->path);
	}
	free(cfg);
	return 0;
}
