// SPDX-License-Identifier: Apache-2.0
/*
 * The driver's files in a container (grant --driver): plans which host
 * files go where, asks the node helper to bind-mount them, and records the
 * container paths in the lease so they can be unmounted later. It must not
 * decide when files come or go (the grant and revoke transactions do) nor
 * write the lease record.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "gpu.h"
#include "driverfs.h"
#include "helper/helper.h"
#include "log.h"
#include "util.h"

/* The files to mount: each host file and the container path it goes to. */
struct plan {
	struct node_file f[HELPER_MAX_FILES];
	char paths[HELPER_MAX_FILES][HELPER_PATH_MAX];
	size_t n;
};

/* Adds host -> path to p; a path too long for the helper, or a full plan, is skipped. */
static void plan_add(struct plan *p, const char *host, const char *path)
{
	int w;

	if (p->n == HELPER_MAX_FILES)
		return;
	w = snprintf(p->paths[p->n], HELPER_PATH_MAX, "%s", path);
	if (w < 0 || w >= HELPER_PATH_MAX)
		return;
	p->f[p->n] = (struct node_file){ .host = host, .path = p->paths[p->n] };
	p->n++;
}

/* Returns the first ld.so directory that exists in t's root, or NULL when none does. */
static const char *container_ld_dir(const struct target *t)
{
	for (size_t i = 0; t->rootfd >= 0 && driver_ld_dirs[i]; i++) {
		auto_close int fd =
			open_in_root(t->rootfd, driver_ld_dirs[i], O_PATH | O_DIRECTORY, 0);

		if (fd >= 0)
			return driver_ld_dirs[i];
	}
	return NULL;
}

/*
 * Fills p with every file of drv that belongs to capabilities caps, at each
 * path driver_targets() gives for it in t's container.
 */
static void plan_make(const struct dg_driver *drv, unsigned int caps, const struct target *t,
		      struct plan *p)
{
	const char *ld_dir = container_ld_dir(t);

	p->n = 0;
	for (size_t i = 0; i < drv->n; i++) {
		char to[DG_DRIVER_TARGETS][DG_DRIVER_TARGET_MAX];
		size_t n = drv->files[i].caps & caps ? driver_targets(&drv->files[i], ld_dir, to)
						     : 0;

		for (size_t k = 0; k < n; k++)
			plan_add(p, drv->files[i].path, to[k]);
	}
}

_Static_assert(LEASE_FILE_PATH_MAX == HELPER_PATH_MAX, "a lease records any path a job takes");

/*
 * Appends to l->driver_files the container paths of p that the helper
 * mounted (status NODE_CREATED). Returns -ENOMEM when the list cannot grow.
 */
static int record(struct lease *l, const struct plan *p, const int *status)
{
	size_t add = 0;
	struct lease_file *v;

	for (size_t i = 0; i < p->n; i++)
		add += status[i] == NODE_CREATED;
	v = realloc(l->driver_files, (l->n_driver_files + add + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->driver_files = v;
	for (size_t i = 0; i < p->n; i++) {
		if (status[i] == NODE_CREATED)
			memcpy(v[l->n_driver_files++].path, p->paths[i], HELPER_PATH_MAX);
	}
	return 0;
}

int driverfs_add(const char *host_root, const struct target *t, const struct node_opts *o,
		 struct lease *l, unsigned int caps, struct dg_error *err)
{
	auto_close int root = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct dg_driver drv;
	struct plan p;
	int status[HELPER_MAX_FILES];
	char names[64];
	int r;

	driver_caps_text(caps, names, sizeof(names));
	if (root < 0)
		return dg_error_set(err, DG_E_INTERNAL, errno, "cannot open the host root %s: %m",
				    host_root);
	r = driver_discover(root, &drv);
	if (r < 0)
		return dg_error_set(err, DG_E_UNAVAILABLE, -r,
				    "cannot read the NVIDIA driver's version under %s: %s",
				    host_root, strerror(-r));
	if (!drv.version[0]) {
		dg_error_set(
			err, DG_E_UNAVAILABLE, ENOENT,
			"no NVIDIA driver user space: %s/proc/driver/nvidia/version is missing",
			host_root);
		dg_error_hint(err, "grant without --driver, or load the driver");
		return -ENOENT;
	}
	plan_make(&drv, caps, t, &p);
	if (p.n == 0) {
		dg_error_set(err, DG_E_UNAVAILABLE, ENOENT,
			     "driver %s has no %s files on this host", drv.version, names);
		dg_error_hint(err, "'devgatectl doctor' lists the driver files it finds");
		return -ENOENT;
	}
	r = nodes_mount_files(t, o, root, p.f, p.n, status, err);
	if (r < 0)
		return r;
	if (record(l, &p, status) < 0)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	l->driver_caps |= caps;
	log_info("mounted driver %s (%s) into %s", drv.version, names, lease_label(l));
	return 0;
}

void driverfs_remove(const struct target *t, const struct lease *l, size_t from)
{
	struct node_opts o = { .mode = 0 };
	struct dg_error err = { 0 };
	struct node_file f[HELPER_MAX_FILES];
	int status[HELPER_MAX_FILES];
	size_t n = 0;

	for (size_t i = from; i < l->n_driver_files && n < HELPER_MAX_FILES; i++) {
		const char *path = l->driver_files[i].path;

		f[n++] = (struct node_file){ .host = path, .path = path };
	}
	if (n && nodes_unmount_files(t, &o, f, n, status, &err) < 0)
		log_warning("cannot take the driver's files out of %s: %s", lease_label(l),
			    err.message);
}
