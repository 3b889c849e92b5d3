/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Discovery: by UUID, whatever the order of paths, with duplicate paths and links. */
#include "cvm/cvm.h"
#include "../helpers.h"

#include <errno.h>
#include <sys/stat.h>

static void setup(void) { test_dir_make(); }
static void teardown(void) { test_dir_remove(); }
TestSuite(scan, .init = setup, .fini = teardown);

static void make_volume(const char *name, int nluns, const char *prefix)
{
	const char *paths[8];
	char names[8][32];
	for (int i = 0; i < nluns; i++) {
		snprintf(names[i], sizeof names[i], "%s%d", prefix, i);
		paths[i] = strdup(make_lun(names[i], 20 << 20));
	}
	struct cvm_scan empty = {0};
	cr_assert_eq(cvm_volume_create(&empty, name, paths, (size_t)nluns, NULL, NULL), 0, "%s",
		     cvm_last_error());
	for (int i = 0; i < nluns; i++)
		free((void *)paths[i]);
}

/* A summary of a scan that does not depend on path order: each volume's LUN paths in config
 * order. */
static void summary(const struct cvm_scan *s, const char *vol, char *out, size_t len)
{
	struct cvm_config *c = malloc(sizeof *c);
	cr_assert_eq(cvm_scan_find_volume(s, vol, c), 0, "%s", cvm_last_error());
	out[0] = '\0';
	for (uint32_t i = 0; i < c->nluns; i++) {
		const struct cvm_found_lun *f = cvm_scan_lun(s, &c->luns[i].uuid);
		cr_assert_not_null(f, "LUN %u of %s not found", i, vol);
		strncat(out, strrchr(f->path, '/'), len - strlen(out) - 1);
	}
	free(c);
}

Test(scan, order_of_paths_does_not_matter)
{
	make_volume("alpha", 3, "a");
	make_volume("beta", 2, "b");
	const char *fwd[] = {test_path("a0"), test_path("a1"), test_path("a2"), test_path("b0"),
			     test_path("b1")};
	const char *rev[] = {test_path("b1"), test_path("a2"), test_path("b0"), test_path("a0"),
			     test_path("a1")};
	struct cvm_scan s1, s2;
	cr_assert_eq(cvm_scan_paths(fwd, 5, &s1), 0);
	cr_assert_eq(cvm_scan_paths(rev, 5, &s2), 0);
	char x[256], y[256];
	summary(&s1, "alpha", x, sizeof x);
	summary(&s2, "alpha", y, sizeof y);
	cr_assert_str_eq(x, "/a0/a1/a2");
	cr_assert_str_eq(x, y);
	summary(&s1, "beta", x, sizeof x);
	summary(&s2, "beta", y, sizeof y);
	cr_assert_str_eq(x, y);
	cvm_scan_free(&s1);
	cvm_scan_free(&s2);
}

Test(scan, duplicate_paths_and_links_count_once)
{
	make_volume("alpha", 2, "a");
	char sub[512];
	snprintf(sub, sizeof sub, "%s/links", test_dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	/* A second name for each LUN: a symlink (like /dev/disk/by-id) and a hard link. */
	char l0[600], l1[600];
	snprintf(l0, sizeof l0, "%s/mpath-a0", sub);
	snprintf(l1, sizeof l1, "%s/mpath-a1", sub);
	cr_assert_eq(symlink(test_path("a0"), l0), 0);
	cr_assert_eq(link(test_path("a1"), l1), 0);
	const char *paths[] = {sub, test_dir, test_path("a0"), test_path("a0"), test_dir};
	struct cvm_scan s;
	cr_assert_eq(cvm_scan_paths(paths, 5, &s), 0, "%s", cvm_last_error());
	cr_assert_eq(s.nluns, 2, "found %zu LUNs", s.nluns);
	for (size_t i = 0; i < s.nluns; i++)
		cr_assert_eq(s.luns[i].nalt, 1, "LUN %s has %zu other paths", s.luns[i].path,
			     s.luns[i].nalt);
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "alpha", CVM_OPEN_RDONLY, &v), 0, "%s", cvm_last_error());
	cvm_volume_close(v);
	cvm_scan_free(&s);
}

Test(scan, glob_finds_luns)
{
	make_volume("alpha", 2, "a");
	make_lun("unlabelled", 20 << 20);
	char pattern[512];
	snprintf(pattern, sizeof pattern, "%s/a*", test_dir);
	const char *paths[] = {pattern};
	struct cvm_scan s;
	cr_assert_eq(cvm_scan_paths(paths, 1, &s), 0);
	cr_assert_eq(s.nluns, 2);
	cvm_scan_free(&s);
}

Test(scan, missing_scan_path_is_named)
{
	const char *paths[] = {test_path("nowhere")};
	struct cvm_scan s;
	cr_assert_eq(cvm_scan_paths(paths, 1, &s), -ENOENT);
	cr_assert(strstr(cvm_last_error(), "nowhere"), "%s", cvm_last_error());
}

Test(scan, unknown_volume_says_where_to_look)
{
	make_volume("alpha", 1, "a");
	const char *paths[] = {test_dir};
	struct cvm_scan s;
	struct cvm_config *c = malloc(sizeof *c);
	cr_assert_eq(cvm_scan_paths(paths, 1, &s), 0);
	cr_assert_eq(cvm_scan_find_volume(&s, "gamma", c), -ENOENT);
	cr_assert(strstr(cvm_last_error(), "gamma"));
	cr_assert(strstr(cvm_last_error(), "--scan"));
	char u[CVM_UUID_STR];
	cr_assert_eq(cvm_scan_find_volume(&s, "alpha", c), 0);
	cvm_uuid_format(&c->vol_uuid, u);
	cr_assert_eq(cvm_scan_find_volume(&s, u, c), 0, "a volume is found by its uuid too");
	free(c);
	cvm_scan_free(&s);
}
