/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Config changes: create, grow, remove.  Each is ordered so that a crash after any single
 * metadata write leaves the old config or the new one in force, never a mix:
 *   1. label the new LUNs (they stay PREPARED: no config names them yet);
 *   2. write the new generation's config to every LUN.
 * The highest valid generation wins, and it only ever names LUNs that are already labelled. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A LUN given to create or grow, opened read-write and locked. */
struct new_lun {
	const char *path;
	int fd;
	uint64_t size;
	struct cvm_lun_id id;
};

static int refuse_labelled(const struct cvm_scan *scan, const char *path, const uint8_t *meta)
{
	struct cvm_label l;
	struct cvm_config *c = malloc(sizeof *c);
	cvm_uuid on;
	if (!c)
		return -ENOMEM;
	enum cvm_decode ld = cvm_label_decode(meta, &l);
	bool has_config = cvm_config_decode(meta + CVM_SLOT_OFFSET(0), c, &on) == CVM_DECODE_OK ||
			  cvm_config_decode(meta + CVM_SLOT_OFFSET(1), c, &on) == CVM_DECODE_OK;
	int rc = 0;
	if (has_config) {
		cvm_set_error("LUN %s already belongs to volume %s; use another LUN, or "
			      "'cvm remove %s' first", path, c->name, c->name);
		rc = -EEXIST;
	} else if (ld == CVM_DECODE_DAMAGED) {
		cvm_set_error("LUN %s carries a damaged CVM label; run 'cvm discover %s' to see "
			      "what it belonged to", path, path);
		rc = -EEXIST;
	} else if (ld == CVM_DECODE_OK) {
		/* Labelled but no config of its own: a member whose copies are damaged if some
		 * config on the scan names it, else left from an interrupted create or grow. */
		const struct cvm_found_lun *f = cvm_scan_lun(scan, &l.lun_uuid);
		if (f && f->state == CVM_LUN_NO_CONFIG) {
			cvm_set_error("LUN %s already belongs to volume %s; use another LUN, or "
				      "'cvm remove %s' first", path, l.vol_name, l.vol_name);
			rc = -EEXIST;
		}
	}
	free(c);
	return rc;
}

static void close_new_luns(struct new_lun *luns, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (luns[i].fd >= 0)
			close(luns[i].fd);
}

/* Open and lock the LUNs for create or grow; refuse duplicates, LUNs below the minimum size
 * and LUNs that belong to a volume.  A PREPARED LUN (labelled by an interrupted create or grow,
 * named by no config) is accepted. */
static int prepare_new_luns(const struct cvm_scan *scan, const char *const *paths, size_t n,
			 struct new_lun *out)
{
	uint8_t *meta = cvm_alloc_aligned(CVM_META_BYTES);
	if (!meta)
		return -ENOMEM;
	size_t opened = 0;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct new_lun *l = &out[i];
		l->path = paths[i];
		l->fd = cvm_lun_open(paths[i], O_RDWR, &l->size, &l->id);
		if (l->fd < 0) {
			rc = l->fd;
			break;
		}
		opened++;
		for (size_t j = 0; j < i && rc == 0; j++)
			if (cvm_lun_id_equal(&out[j].id, &l->id)) {
				cvm_set_error("LUN %s and LUN %s are the same device; give each LUN once",
					      out[j].path, l->path);
				rc = -EINVAL;
			}
		if (rc)
			break;
		if (l->size < CVM_MIN_LUN_BYTES) {
			char have[32], need[32];
			cvm_format_size(l->size, have, sizeof have);
			cvm_format_size(CVM_MIN_LUN_BYTES, need, sizeof need);
			cvm_set_error("LUN %s is %s, below the minimum LUN size of %s", l->path, have,
				      need);
			rc = -ENOSPC;
			break;
		}
		if ((rc = cvm_lun_read_meta(l->fd, meta))) {
			cvm_set_error("LUN %s: cannot read: %s", l->path, strerror(-rc));
			break;
		}
		if ((rc = refuse_labelled(scan, l->path, meta)))
			break;
		rc = cvm_lun_lock(l->fd, l->path, CVM_LOCK_ALONE);
	}
	free(meta);
	if (rc)
		close_new_luns(out, opened);
	return rc;
}


/* Append a stripe set of new LUNs to cfg (in memory). */
static int add_stripe_set(struct cvm_config *cfg, const struct new_lun *luns, size_t n,
			  uint64_t width)
{
	if (cfg->nsets == CVM_MAX_SETS || n > CVM_MAX_LUNS - cfg->nluns) {
		cvm_set_error("volume %s would exceed %d stripe sets or %d LUNs", cfg->name,
			      CVM_MAX_SETS, CVM_MAX_LUNS);
		return -E2BIG;
	}
	uint64_t smallest = UINT64_MAX;
	for (size_t i = 0; i < n; i++)
		if (luns[i].size - CVM_META_BYTES < smallest)
			smallest = luns[i].size - CVM_META_BYTES;
	uint64_t per_lun = smallest / width * width;
	if (per_lun == 0) {
		cvm_set_error("LUNs are smaller than one stripe of %" PRIu64 " bytes", width);
		return -ENOSPC;
	}
	struct cvm_stripe_set *s = &cfg->sets[cfg->nsets++];
	*s = (struct cvm_stripe_set){.stripe_width = width, .lun_bytes = per_lun,
				     .first_lun = cfg->nluns, .nluns = (uint32_t)n};
	for (size_t i = 0; i < n; i++) {
		struct cvm_lun_ref *r = &cfg->luns[cfg->nluns++];
		cvm_uuid_generate(&r->uuid);
		r->size_bytes = luns[i].size;
		snprintf(r->path, sizeof r->path, "%s", luns[i].path);
	}
	return 0;
}

/* Phase 1 of a change: label the LUNs from index `first` of cfg (opened as luns[]). */
static int label_new_luns(const struct cvm_config *cfg, uint32_t first,
			  const struct new_lun *luns)
{
	for (uint32_t i = first; i < cfg->nluns; i++) {
		struct cvm_label l = {.lun_uuid = cfg->luns[i].uuid, .vol_uuid = cfg->vol_uuid,
				      .lun_bytes = cfg->luns[i].size_bytes,
				      .data_offset = CVM_META_BYTES, .generation = cfg->generation,
				      .ctime = cfg->mtime};
		memcpy(l.vol_name, cfg->name, sizeof l.vol_name);
		int rc = cvm_lun_write_label(luns[i - first].fd, &l);
		if (rc) {
			cvm_set_error("LUN %s: cannot write the label: %s", luns[i - first].path,
				      strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Phase 2: any order is safe, as all LUNs the new config names are labelled by now.  vol:
 * the LUNs are its, written unsynced (its flush follows). */
static int write_copies(const struct cvm_config *cfg, const int *fds, struct cvm_volume *vol)
{
	int slot = (int)(cfg->generation % 2);
	for (uint32_t i = 0; i < cfg->nluns; i++) {
		int rc = cvm_lun_write_config(fds[i], cfg, &cfg->luns[i].uuid, slot, !vol);
		if (rc) {
			cvm_set_error("volume %s: LUN %s: cannot write config generation %" PRIu64 ": %s",
				      cfg->name, cfg->luns[i].path, cfg->generation, strerror(-rc));
			return rc;
		}
		if (vol)
			cvm_volume_written(vol, i);
	}
	return 0;
}

int cvm_config_commit(const struct cvm_config *cfg, const int *fds)
{
	return write_copies(cfg, fds, NULL);
}

int cvm_config_commit_on(const struct cvm_config *cfg, struct cvm_volume *vol)
{
	int fds[CVM_MAX_LUNS];
	for (uint32_t i = 0; i < cfg->nluns; i++)
		fds[i] = cvm_volume_lun_fd(vol, i);
	int rc = write_copies(cfg, fds, vol);
	if (!rc && (rc = cvm_volume_flush(vol)))
		cvm_set_error("volume %s: cannot flush config generation %" PRIu64 " to its LUNs: %s",
			      cfg->name, cfg->generation, strerror(-rc));
	return rc;
}

/* Both phases of a change: label the LUNs cfg adds from index `first_new` (opened as luns[]),
 * then write the config to every LUN, the old ones open in v (NULL for a create). */
static int label_and_commit(const struct cvm_config *cfg, uint32_t first_new,
			    const struct new_lun *luns, const struct cvm_volume *v)
{
	int rc = label_new_luns(cfg, first_new, luns);
	/* Labelled: from the config's first copy on, the volume's users (a daemon, libodm in a
	 * database) may open the new LUNs and take their shared byte.  Alone here until now,
	 * the change keeps only its own byte of them, as of the old ones (else a user that saw
	 * the new config before this process ended got EBUSY). */
	for (uint32_t i = first_new; !rc && i < cfg->nluns; i++)
		rc = cvm_lun_lock(luns[i - first_new].fd, luns[i - first_new].path, CVM_LOCK_USE);
	if (rc)
		return rc;
	int fds[CVM_MAX_LUNS] = {0};
	for (uint32_t i = 0; i < cfg->nluns; i++)
		fds[i] = i >= first_new ? luns[i - first_new].fd : v ? cvm_volume_lun_fd(v, i) : -EBADF;
	return cvm_config_commit(cfg, fds);
}

static bool name_in_use(const struct cvm_scan *scan, const char *name)
{
	for (size_t i = 0; i < scan->nluns; i++)
		if (scan->luns[i].config && strcmp(scan->luns[i].config->name, name) == 0)
			return true;
	return false;
}

int cvm_volume_create(const struct cvm_scan *scan, const char *name, const char *const *paths,
		      size_t npaths, const struct cvm_create_opts *opts, struct cvm_config *out)
{
	uint64_t width = opts && opts->stripe_width ? opts->stripe_width : CVM_DEFAULT_STRIPE_WIDTH;
	int rc;
	if ((rc = cvm_check_name(name)) || (rc = cvm_check_stripe_width(width)))
		return rc;
	if (npaths == 0 || npaths > CVM_MAX_LUNS) {
		cvm_set_error("a volume needs 1 to %d LUNs", CVM_MAX_LUNS);
		return -EINVAL;
	}
	if (name_in_use(scan, name)) {
		cvm_set_error("a volume called %s already exists; choose another name", name);
		return -EEXIST;
	}
	struct new_lun *luns = calloc(npaths, sizeof *luns);
	struct cvm_config *cfg = calloc(1, sizeof *cfg);
	if (!luns || !cfg) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = prepare_new_luns(scan, paths, npaths, luns)))
		goto out;
	cfg->generation = 1;
	cvm_uuid_generate(&cfg->vol_uuid);
	snprintf(cfg->name, sizeof cfg->name, "%s", name);
	cfg->ctime = cfg->mtime = (uint64_t)time(NULL);
	if ((rc = add_stripe_set(cfg, luns, npaths, width)) == 0)
		rc = label_and_commit(cfg, 0, luns, NULL);
	close_new_luns(luns, npaths);
	if (rc == 0 && out)
		*out = *cfg;
out:
	free(luns);
	free(cfg);
	return rc;
}

int cvm_volume_grow(const struct cvm_scan *scan, const char *name_or_uuid,
		    const char *const *paths, size_t npaths, const struct cvm_create_opts *opts,
		    struct cvm_config *out)
{
	if (npaths == 0) {
		cvm_set_error("grow needs at least one new LUN");
		return -EINVAL;
	}
	struct cvm_config *cfg = malloc(sizeof *cfg);
	if (!cfg)
		return -ENOMEM;
	struct cvm_volume *v = NULL;
	struct new_lun *luns = calloc(npaths, sizeof *luns);
	int rc = luns ? cvm_scan_find_volume(scan, name_or_uuid, cfg) : -ENOMEM;
	if (rc == 0 && cfg->restripe.target_width) {
		cvm_set_error("volume %s is being restriped; let 'cvm restripe %s' finish, then grow "
			      "it", cfg->name, cfg->name);
		rc = -EBUSY;
	}
	if (rc == 0)
		rc = cvm_volume_open_config(scan, cfg, CVM_OPEN_RDWR, CVM_LOCK_CHANGE, &v);
	if (rc)
		goto out;
	uint64_t width = opts && opts->stripe_width ? opts->stripe_width
						    : cfg->sets[cfg->nsets - 1].stripe_width;
	if ((rc = cvm_check_stripe_width(width)))
		goto out;
	if ((rc = prepare_new_luns(scan, paths, npaths, luns)))
		goto out;
	uint32_t first_new = cfg->nluns;
	cfg->generation++;
	cfg->mtime = (uint64_t)time(NULL);
	if ((rc = add_stripe_set(cfg, luns, npaths, width)) == 0)
		rc = label_and_commit(cfg, first_new, luns, v);
	close_new_luns(luns, npaths);
	if (rc == 0 && out)
		*out = *cfg;
out:
	cvm_volume_close(v);
	free(luns);
	free(cfg);
	return rc;
}

static int volume_holds_data(struct cvm_volume *v)
{
	uint8_t *buf = cvm_alloc_aligned(4096);
	if (!buf)
		return -ENOMEM;
	int rc = cvm_volume_read(v, buf, 4096, 0);
	if (rc == 0)
		for (int i = 0; i < 4096 && rc == 0; i++)
			rc = buf[i] != 0;
	free(buf);
	return rc;
}

int cvm_volume_remove(const struct cvm_scan *scan, const char *name_or_uuid, bool force)
{
	struct cvm_config *cfg = malloc(sizeof *cfg);
	if (!cfg)
		return -ENOMEM;
	int rc = cvm_scan_find_volume(scan, name_or_uuid, cfg);
	struct cvm_volume *v = NULL;
	if (rc == 0 && !force) {
		if ((rc = cvm_volume_open_config(scan, cfg, CVM_OPEN_RDWR, CVM_LOCK_ALONE, &v)) == 0 &&
		    (rc = volume_holds_data(v)) > 0) {
			cvm_set_error("volume %s holds data (its first block is not empty); "
				      "add --force to destroy it", cfg->name);
			rc = -ENOTEMPTY;
		}
		cvm_volume_close(v);
	}
	if (rc) {
		free(cfg);
		return rc;
	}
	/* Every LUN on the scan that carries this volume's uuid, present members and leftovers. */
	int fds[CVM_MAX_LUNS * 2];
	size_t nfds = 0;
	for (size_t i = 0; i < scan->nluns && nfds < CVM_MAX_LUNS * 2; i++) {
		const struct cvm_found_lun *f = &scan->luns[i];
		if (!cvm_uuid_equal(&f->vol_uuid, &cfg->vol_uuid))
			continue;
		uint64_t size;
		struct cvm_lun_id id;
		int fd = cvm_lun_open(f->path, O_RDWR, &size, &id);
		if (fd < 0 || (rc = cvm_lun_lock(fd, f->path, CVM_LOCK_ALONE))) {
			rc = fd < 0 ? fd : rc;
			if (fd >= 0)
				close(fd);
			break;
		}
		fds[nfds++] = fd;
	}
	if (rc == 0) {
		for (size_t i = 0; rc == 0 && i < nfds; i++)
			rc = cvm_lun_wipe_configs(fds[i]);
		for (size_t i = 0; rc == 0 && i < nfds; i++)
			rc = cvm_lun_wipe_label(fds[i]);
		if (rc)
			cvm_set_error("volume %s: wiping its metadata failed: %s; run 'cvm remove "
				      "--force %s' again", cfg->name, strerror(-rc), cfg->name);
	}
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	free(cfg);
	return rc;
}
