// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "hostdev.h"

static int bad_path(const char *path, const char *why, struct dg_error *err)
{
	dg_error_set(err, DG_E_INVALID, EINVAL, "container path '%s' %s", path, why);
	dg_error_hint(err, "give a node directly under /dev: --device HOST:/dev/NAME");
	return -EINVAL;
}

/* /dev/NAME, one component: mknodat on "a/b" would follow a directory the container owns. */
static int container_name(const char *path, char *name, size_t len, struct dg_error *err)
{
	const char *n = path + 5;

	if (strncmp(path, "/dev/", 5) != 0)
		return bad_path(path, "is not under /dev", err);
	if (!*n || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return bad_path(path, "is not /dev/NAME with a single name", err);
	if (strlen(n) >= len)
		return bad_path(path, "has a name that is too long", err);
	if (strncmp(n, "nvidia", 6) == 0 || strcmp(n, "kfd") == 0)
		return bad_path(path, "is a GPU node's name", err);
	snprintf(name, len, "%s", n);
	return 0;
}

int hostdev_parse(const char *spec, const struct dg_inventory *inv, struct lease_device *ret,
		  struct dg_error *err)
{
	struct lease_device dev = { 0 };
	const char *sep = NULL, *path;
	size_t host_len;
	struct stat st;
	uint32_t maj;
	int r;

	for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':')) {
		if (p[1] == '/')
			sep = p;
	}
	host_len = sep ? (size_t)(sep - spec) : strlen(spec);
	path = sep ? sep + 1 : spec;
	if (host_len == 0 || spec[0] != '/')
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "device '%s': the host path must be absolute", spec);
	if (host_len >= sizeof(dev.host))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG,
				    "device '%s': the host path is too long", spec);
	memcpy(dev.host, spec, host_len);
	r = container_name(path, dev.name, sizeof(dev.name), err);
	if (r < 0)
		return r;
	/* A host path, named by an admin: devgated's own view of the host. */
	if (stat(dev.host, &st) < 0) {
		r = -errno;
		dg_error_set(err, DG_E_INVALID, -r, "device '%s': %s", dev.host, strerror(-r));
		dg_error_hint(err, "name a character device node on the host, e.g. /dev/full");
		return r;
	}
	if (S_ISBLK(st.st_mode)) {
		dg_error_set(err, DG_E_INVALID, ENOTSUP, "device '%s' is a block device", dev.host);
		dg_error_hint(err, "devgate grants character devices only");
		return -ENOTSUP;
	}
	if (!S_ISCHR(st.st_mode)) {
		dg_error_set(err, DG_E_INVALID, ENODEV, "'%s' is not a character device", dev.host);
		dg_error_hint(err, "name a character device node on the host, e.g. /dev/full");
		return -ENODEV;
	}
	maj = major(st.st_rdev);
	if (inventory_guards(inv, maj, minor(st.st_rdev))) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "device '%s' (%u:%u) is a GPU-class device devgate manages", dev.host,
			     maj, minor(st.st_rdev));
		dg_error_hint(err, "grant GPUs with --gpu");
		return -EINVAL;
	}
	dev.major = maj;
	dev.minor = minor(st.st_rdev);
	*ret = dev;
	return 0;
}
