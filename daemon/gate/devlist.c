// SPDX-License-Identifier: Apache-2.0
/*
 * cgroup v1 devices lists, the v1 side of a grant: parsing a devices.list,
 * the rule a node lacks, and writing devices.allow (down the subtree, where
 * v1 does not pass an allow on) and devices.deny. It knows nothing of
 * leases: it writes the rules it is given to the cgroup it is given, and
 * reads what the kernel kept. Paths stay below the v1 mount (openat2,
 * RESOLVE_BENEATH).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgv1.h"
#include "cleanup.h"
#include "devgate.h"
#include "devlist.h"
#include "util.h"

/* Deep enough for nested containers; a deeper tree is refused, not walked. */
#define DEVLIST_DEPTH 16

static void rule_format(const struct cgv1_rule *r, char out[DEVLIST_RULE_MAX])
{
	char acc[4];
	size_t n = 0;

	if (r->acc & DG_ACC_READ)
		acc[n++] = 'r';
	if (r->acc & DG_ACC_WRITE)
		acc[n++] = 'w';
	if (r->acc & DG_ACC_MKNOD)
		acc[n++] = 'm';
	acc[n] = '\0';
	snprintf(out, DEVLIST_RULE_MAX, "%c %u:%u %s", r->type, r->major, r->minor, acc);
}

int devlist_missing(const char *list, bool block, uint32_t major, uint32_t minor, uint32_t acc,
		    char out[DEVLIST_RULE_MAX])
{
	struct cgv1_rule r = { .type = block ? 'b' : 'c', .major = major, .minor = minor };
	int have = cgv1_list_access(list, r.type, major, minor);

	if (have < 0)
		return have;
	r.acc = (acc ? acc : DG_ACC_READ | DG_ACC_WRITE) & ~(uint32_t)have;
	if (!r.acc)
		return 0;
	rule_format(&r, out);
	return 1;
}

int devlist_allows(const char *list, const char *rule)
{
	struct cgv1_rule r;
	int have;

	if (cgv1_rule_parse(rule, strlen(rule), &r) < 0 || r.major == CGV1_ANY ||
	    r.minor == CGV1_ANY)
		return -EINVAL;
	have = cgv1_list_access(list, r.type, r.major, r.minor);
	if (have < 0)
		return have;
	return (r.acc & ~(uint32_t)have) == 0;
}

int devlist_read(const struct cg1root *root, const char *path, char **ret)
{
	auto_close int fd = cgroup1_open_in(root, path, "devices.list", O_RDONLY);

	if (fd < 0)
		return fd;
	return read_fd_full(fd, (size_t)1024 * 1024, ret, NULL);
}

static int write_rule(const struct cg1root *root, const char *path, const char *file,
		      const char *rule)
{
	auto_close int fd = cgroup1_open_in(root, path, file, O_WRONLY);
	size_t len = strlen(rule);

	if (fd < 0)
		return fd;
	if (write(fd, rule, len) != (ssize_t)len)
		return -errno;
	return 0;
}

int devlist_deny(const struct cg1root *root, const char *path, const char *rule)
{
	return write_rule(root, path, "devices.deny", rule);
}

/* Allows rule in each cgroup below path (depth levels at most) that lacks it. */
static int allow_below(const struct cg1root *root, const char *path, const char *rule, int depth,
		       struct dg_error *err)
{
	int fd = cgroup1_open_in(root, path, NULL, O_RDONLY | O_DIRECTORY);
	DIR *dir;
	struct dirent *e;
	int r = 0;

	if (fd == -ENOENT)
		return 0; /* a cgroup removed meanwhile */
	if (fd < 0)
		return dg_error_set(err, DG_E_KERNEL, -fd,
				    "cannot open the v1 devices cgroup %s: %s", path,
				    strerror(-fd));
	dir = depth > DEVLIST_DEPTH ? NULL : fdopendir(fd);
	if (!dir) {
		r = depth > DEVLIST_DEPTH ? -ELOOP : -errno;
		close(fd);
		if (r == -ELOOP)
			dg_error_set(err, DG_E_KERNEL, ELOOP,
				     "the v1 devices cgroup %s is nested more than %d deep", path,
				     DEVLIST_DEPTH);
		return r;
	}
	while (r == 0 && (e = readdir(dir))) {
		auto_free char *sub = NULL, *list = NULL;

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (asprintf(&sub, "%s/%s", strcmp(path, "/") ? path : "", e->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		if (devlist_read(root, sub, &list) < 0)
			continue; /* removed meanwhile */
		if (devlist_allows(list, rule) == 0 &&
		    (r = write_rule(root, sub, "devices.allow", rule)) < 0)
			dg_error_set(err, DG_E_KERNEL, -r,
				     "cannot allow '%s' in the v1 devices cgroup %s: %s", rule, sub,
				     strerror(-r));
		if (r == 0)
			r = allow_below(root, sub, rule, depth + 1, err);
	}
	closedir(dir);
	return r;
}

int devlist_allow(const struct cg1root *root, const char *path, const char *rule,
		  struct dg_error *err)
{
	auto_free char *list = NULL;
	bool wrote = false;
	int r = devlist_read(root, path, &list);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, -r,
				    "cannot read the v1 devices cgroup %s: %s", path, strerror(-r));
	if (devlist_allows(list, rule) == 0) {
		r = write_rule(root, path, "devices.allow", rule);
		if (r < 0) {
			dg_error_set(err, DG_E_KERNEL, -r,
				     "the v1 devices cgroup %s refused '%s': %s", path, rule,
				     strerror(-r));
			dg_error_hint(err,
				      "a parent of %s (under %s) does not allow the device; "
				      "allow it there, or run the container without v1 device "
				      "rules",
				      path, root->mount);
			return r;
		}
		wrote = true;
	}
	r = allow_below(root, path, rule, 1, err);
	if (r < 0 && wrote)
		(void)devlist_deny(root, path, rule); /* and so below it */
	return r;
}
