/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libodm's process state: odm_discover, odm_init/odm_fini, the process type. */
#include "odm/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct odm_proc odm_proc = {.lock = PTHREAD_MUTEX_INITIALIZER};

int odm_discover(const char *path)
{
	char root[PATH_MAX], rel[PATH_MAX];
	int rc = odm_find_mount(path, true, root, sizeof root, rel, sizeof rel);
	return rc == 0 ? 1 : rc == -EXDEV ? 0 : rc;
}

static enum odm_ptype ptype_of_self(void)
{
	char comm[32] = "";
	FILE *f = fopen("/proc/self/comm", "re");
	if (f) {
		if (!fgets(comm, sizeof comm, f))
			comm[0] = 0;
		fclose(f);
	}
	comm[strcspn(comm, "\n")] = 0;
	return odm_ptype_from_name(comm);
}

/* What a parent left in a forked child is not the child's: forget it without touching it
 * (the parent's connections and maps stay the parent's). */
static void forget_inherited(void)
{
	for (struct odm_mount *m = odm_proc.mounts, *next; m; m = next) {
		next = m->next;
		close(m->sock); /* our copy only: cfsd must still see the parent's end */
		cvm_volume_close(m->vol);
		free(m); /* the libaio context is the parent's: the kernel does not copy it */
	}
	odm_files_free();
	odm_segment_close(odm_proc.seg);
	memset(&odm_proc, 0, sizeof odm_proc);
	pthread_mutex_init(&odm_proc.lock, NULL);
}

static void teardown(void)
{
	odm_io_drain_all();
	odm_files_abort_uncommitted();
	while (odm_proc.mounts) { /* closing the connection drops cfsd's holds */
		struct odm_mount *m = odm_proc.mounts;
		odm_proc.mounts = m->next;
		odm_mount_close(m);
	}
	odm_files_free(); /* after the reader threads, which walk them */
	odm_slot_retire(odm_proc.seg, odm_proc.slot);
	odm_segment_close(odm_proc.seg);
	odm_proc.seg = NULL;
}

static void at_exit(void)
{
	if (odm_ready())
		odm_fini();
}

int odm_init(const char *database, const char *instance)
{
	static bool registered;
	if (!odm_name_ok(database) || !odm_name_ok(instance))
		return -EINVAL;
	if (odm_ready())
		return -EALREADY;
	if (!registered) { /* before anything a fork could copy */
		if (pthread_atfork(NULL, NULL, forget_inherited) || atexit(at_exit))
			return -ENOMEM;
		registered = true;
	}
	struct odm_segment *seg;
	int rc = odm_segment_open(database, instance, true, &seg);
	if (rc)
		return rc;
	struct odm_proc_slot *slot;
	if ((rc = odm_slot_take(seg, ptype_of_self(), &slot))) {
		odm_segment_close(seg);
		return rc;
	}
	pthread_mutex_lock(&odm_proc.lock);
	odm_proc.seg = seg;
	odm_proc.slot = slot;
	odm_proc.pid = getpid();
	snprintf(odm_proc.owner, sizeof odm_proc.owner, "%s/%s", database, instance);
	pthread_mutex_unlock(&odm_proc.lock);
	return 0;
}

int odm_set_ptype(enum odm_ptype ptype)
{
	if (!odm_ready())
		return -ENXIO;
	if ((unsigned)ptype >= ODM_PT_COUNT)
		return -EINVAL;
	__atomic_store_n(&odm_proc.slot->ptype, (uint32_t)ptype, __ATOMIC_RELAXED);
	return 0;
}

int odm_fini(void)
{
	if (!odm_ready())
		return -ENXIO;
	pthread_mutex_lock(&odm_proc.lock);
	teardown();
	pthread_mutex_unlock(&odm_proc.lock);
	forget_inherited();
	return 0;
}
