/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "local" backend: one node, in-process, no daemons.  Every client of the process that
 * opens a lockspace of the same name shares one lock table, so threads and libraries of one
 * process exclude each other as nodes of a cluster would. */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOCAL_NODE 1u
#define LOCAL_OWNER ((uint64_t)LOCAL_NODE << 32) /* owners are node id << 32 | incarnation */

struct local_space {
	char name[CFSLOCK_NAME_MAX + 1];
	struct lt_table *table;
	unsigned users;
	struct local_space *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct local_space *registry;

/* In this backend a lock id is the address of the lock handle. */
static uint64_t lkid_of(const struct cfslock *lk)
{
	return (uint64_t)(uintptr_t)lk;
}

static void emit(void *arg, const struct lt_event *ev)
{
	(void)arg;
	struct cfslock *lk = (struct cfslock *)(uintptr_t)ev->lkid;
	cfslock_deliver(lk->s->c, lk, ev);
}

static int local_open(struct cfslock_client *c)
{
	c->node = LOCAL_NODE;
	return 0;
}

static void local_close(struct cfslock_client *c)
{
	(void)c;
}

static int local_space_open(struct cfslock_space *s)
{
	pthread_mutex_lock(&registry_lock);
	struct local_space *ls = registry;
	while (ls && strcmp(ls->name, s->name) != 0)
		ls = ls->next;
	if (!ls && (ls = calloc(1, sizeof *ls))) {
		snprintf(ls->name, sizeof ls->name, "%s", s->name);
		ls->table = lt_create(emit, NULL);
		if (!ls->table) {
			free(ls);
			ls = NULL;
		} else {
			ls->next = registry;
			registry = ls;
		}
	}
	if (ls)
		ls->users++;
	pthread_mutex_unlock(&registry_lock);
	s->backend = ls;
	return ls ? 0 : -ENOMEM;
}

static void local_space_close(struct cfslock_space *s)
{
	struct local_space *ls = s->backend;
	pthread_mutex_lock(&registry_lock);
	if (--ls->users == 0) {
		struct local_space **pp = &registry;
		while (*pp != ls)
			pp = &(*pp)->next;
		*pp = ls->next;
		lt_destroy(ls->table);
		free(ls);
	}
	pthread_mutex_unlock(&registry_lock);
}

static struct lt_table *table_of(const struct cfslock *lk)
{
	return ((struct local_space *)lk->s->backend)->table;
}

static int local_request(struct cfslock *lk, int mode, unsigned flags)
{
	pthread_mutex_lock(&registry_lock);
	int rc = lt_request(table_of(lk), LOCAL_OWNER, lkid_of(lk), lk->name, lk->len, mode, flags);
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

static int local_convert(struct cfslock *lk, int mode, unsigned flags, const uint8_t *lvb)
{
	pthread_mutex_lock(&registry_lock);
	int rc = lt_convert(table_of(lk), LOCAL_OWNER, lkid_of(lk), mode, flags, lvb);
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

static int local_unlock(struct cfslock *lk, const uint8_t *lvb)
{
	pthread_mutex_lock(&registry_lock);
	int rc = lt_unlock(table_of(lk), LOCAL_OWNER, lkid_of(lk), lvb);
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

static int local_cancel(struct cfslock *lk)
{
	pthread_mutex_lock(&registry_lock);
	int rc = lt_cancel(table_of(lk), LOCAL_OWNER, lkid_of(lk));
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

static int local_recovery_done(struct cfslock_space *s, uint32_t node)
{
	(void)s;
	(void)node;
	return -ENOENT; /* one node: no other node ever fails */
}

static int local_dump(struct cfslock_space *s, lt_visit_fn visit, void *arg)
{
	pthread_mutex_lock(&registry_lock);
	lt_walk(((struct local_space *)s->backend)->table, visit, arg);
	pthread_mutex_unlock(&registry_lock);
	return 0;
}

const struct cfslock_backend_ops cfslock_local_ops = {
	.name = "local", .open = local_open, .close = local_close,
	.space_open = local_space_open, .space_close = local_space_close,
	.request = local_request, .convert = local_convert, .unlock = local_unlock,
	.cancel = local_cancel, .recovery_done = local_recovery_done, .dump = local_dump,
};
