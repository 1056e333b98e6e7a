// SPDX-License-Identifier: Apache-2.0
/*
 * The driver's files in a container (grant --driver): plans which host
 * files go where, journals them, asks the node helper to bind-mount them,
 * and records in the lease the container paths it mounted and the
 * directories it made, so that exactly those come out again. At start it
 * finds devgate's mounts that no record holds (a crash, a record rebuilt
 * without them) in the kernel's mount table of the container and takes
 * them off. It must not decide when files come or go (the grant, revoke
 * and recovery transactions do) nor write the lease record, only the
 * grant's journal.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "gpu.h"
#include "driverfs.h"
#include "helper/helper.h"
#include "lease/state.h"
#include "log.h"
#include "sys/fault.h"
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
	p->f[p->n] = (struct node_file){ .host = host, .path = p->paths[p->n], .tree = -1 };
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
 * Runs unmount jobs for the n entries of f, HELPER_MAX_FILES at a time.
 * Returns how many came off (FILE_REMOVED); a job that fails is logged.
 */
static size_t unmount_all(const struct target *t, const struct node_file *f, size_t n,
			  const char *who)
{
	struct node_opts o = { .mode = 0 };
	struct node_files_result res;
	size_t removed = 0;

	for (size_t at = 0; at < n; at += HELPER_MAX_FILES) {
		size_t k = n - at < HELPER_MAX_FILES ? n - at : HELPER_MAX_FILES;
		struct dg_error err = { 0 };

		if (nodes_unmount_files(t, &o, f + at, k, &res, &err) < 0) {
			log_warning("cannot take the driver's files out of %s: %s", who,
				    err.message);
			continue;
		}
		for (size_t i = 0; i < k; i++) {
			removed += res.res[i].status == FILE_REMOVED;
			if (res.res[i].status == FILE_FAILED)
				log_warning("cannot take %s out of %s: %s", f[at + i].path, who,
					    strerror(res.res[i].err));
		}
	}
	return removed;
}

/*
 * Takes off the planned mounts that are devgate's (marked, of these very
 * host files) after a mount job whose outcome is unknown: its helper did
 * not answer.
 */
static void unmount_planned(const struct target *t, const struct plan *p, const char *who)
{
	struct node_file f[HELPER_MAX_FILES];

	for (size_t i = 0; i < p->n; i++)
		f[i] = (struct node_file){ .path = p->paths[i],
					   .dev = p->f[i].dev,
					   .ino = p->f[i].ino,
					   .marked = true,
					   .tree = -1 };
	(void)unmount_all(t, f, p->n, who);
}

/*
 * Adds to l what the mount job did: the files it mounted or found mounted
 * by devgate already, and the directories it made. Returns -ENOMEM when
 * the lists cannot grow.
 */
static int record(struct lease *l, const struct plan *p, const struct node_files_result *res)
{
	for (size_t i = 0; i < p->n; i++) {
		if (res->res[i].status == FILE_ADOPTED)
			log_notice("%s: %s was devgate's mount of the driver's %s already; it is "
				   "the lease's now",
				   lease_label(l), p->paths[i], p->f[i].host);
		if ((res->res[i].status == FILE_MOUNTED || res->res[i].status == FILE_ADOPTED) &&
		    lease_add_driver_file(l, p->paths[i]) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < res->n_dirs; i++) {
		char path[HELPER_PATH_MAX];

		snprintf(path, sizeof(path), "%.*s", (int)res->dirs[i].len,
			 p->paths[res->dirs[i].file]);
		if (lease_add_driver_dir(l, path, res->dirs[i].ino) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Writes l as the grant's journal: from here on a crash leaves nothing
 * the next start does not find and take off. 0, or -errno.
 */
static int journal(struct state *state, const struct lease *l, const char *point)
{
	int r = state_pending_save(state, l);

	if (r == 0)
		fault_point(point);
	return r;
}

/*
 * Mounts the plan's files (opened: their trees) into t and records them in
 * l, journaled before and after. On failure l is as it was.
 */
static int mount_plan(struct state *state, const struct target *t, const struct node_opts *o,
		      struct lease *l, unsigned int caps, struct plan *p, struct dg_error *err)
{
	size_t n_files = l->n_driver_files, n_dirs = l->n_driver_dirs;
	unsigned int had = l->driver_caps;
	struct node_files_result res = { 0 };
	int r = 0;

	/* The journal names every file it may mount (a record holds files only with caps). */
	l->driver_caps |= caps;
	for (size_t i = 0; r == 0 && i < p->n; i++)
		r = lease_add_driver_file(l, p->paths[i]);
	if (r == 0)
		r = journal(state, l, "grant.driver");
	l->n_driver_files = n_files;
	if (r < 0) {
		l->driver_caps = had;
		return dg_error_set(err, DG_E_STATE, r, "cannot journal the driver's files: %s",
				    strerror(-r));
	}
	r = nodes_mount_files(t, o, p->f, p->n, &res, err);
	if (r < 0 && !res.replied)
		unmount_planned(t, p, lease_label(l));
	if (r == 0 && record(l, p, &res) < 0) {
		r = dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
		unmount_planned(t, p, lease_label(l));
	}
	if (r < 0) {
		l->n_driver_files = n_files;
		l->n_driver_dirs = n_dirs;
		l->driver_caps = had;
		return r;
	}
	/* Again, with what was made: a crash before the record takes off exactly that. */
	r = journal(state, l, "grant.driver.mounted");
	if (r < 0)
		log_warning_errno(r,
				  "cannot journal the driver's files of %s (%m): a crash "
				  "before its record may leave their directories",
				  lease_label(l));
	return 0;
}

int driverfs_add(const char *host_root, struct state *state, const struct target *t,
		 const struct node_opts *o, struct lease *l, unsigned int caps,
		 struct dg_error *err)
{
	auto_close int root = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct dg_driver drv;
	struct plan p;
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
	r = nodes_open_files(root, p.f, p.n, err);
	if (r < 0)
		return r;
	r = mount_plan(state, t, o, l, caps, &p, err);
	nodes_close_files(p.f, p.n);
	if (r < 0)
		return r;
	log_info("mounted driver %s (%s) into %s", drv.version, names, lease_label(l));
	return 0;
}

/*
 * Adds l's directories that skip (may be NULL) does not have to f after n,
 * deepest first (the reverse of the order they were made), and returns the
 * new count; up to max.
 */
static size_t add_dirs(const struct lease *l, const struct lease *skip, struct node_file *f,
		       size_t n, size_t max)
{
	for (size_t i = l->n_driver_dirs; i-- > 0 && n < max;) {
		const struct lease_dir *d = &l->driver_dirs[i];
		bool kept = false;

		for (size_t k = 0; skip && k < skip->n_driver_dirs; k++)
			kept = kept || strcmp(skip->driver_dirs[k].path, d->path) == 0;
		if (!kept)
			f[n++] = (struct node_file){
				.path = d->path, .ino = d->ino, .dir = true, .tree = -1
			};
	}
	return n;
}

/* Whether l records a driver file at path. */
static bool has_file(const struct lease *l, const char *path)
{
	for (size_t i = 0; l && i < l->n_driver_files; i++) {
		if (strcmp(l->driver_files[i].path, path) == 0)
			return true;
	}
	return false;
}

/* A lease holds at most this many entries of files and directories. */
#define MAX_ENTRIES ((size_t)4 * HELPER_MAX_FILES)

void driverfs_remove(const struct target *t, const struct lease *l, size_t from)
{
	struct node_file f[MAX_ENTRIES];
	size_t n = 0, removed;

	/* The mounts it recorded: any mount found at such a path comes off. */
	for (size_t i = from; i < l->n_driver_files && n < MAX_ENTRIES; i++)
		f[n++] = (struct node_file){ .path = l->driver_files[i].path, .tree = -1 };
	/* Then its directories: those it made for older files are not empty, and stay. */
	n = add_dirs(l, NULL, f, n, MAX_ENTRIES);
	if (!n)
		return;
	removed = unmount_all(t, f, n, lease_label(l));
	log_debug("took %zu of %zu driver file(s) and directories out of %s", removed, n,
		  lease_label(l));
}

size_t driverfs_rollback(const struct target *t, const struct lease *pending,
			 const struct lease *committed)
{
	struct node_file f[MAX_ENTRIES];
	size_t n = 0;

	/*
	 * The journal names files that may never have been mounted, and the
	 * image may have its own there: only devgate's marked mounts come off.
	 */
	for (size_t i = 0; i < pending->n_driver_files && n < MAX_ENTRIES; i++) {
		if (!has_file(committed, pending->driver_files[i].path))
			f[n++] = (struct node_file){ .path = pending->driver_files[i].path,
						     .marked = true,
						     .tree = -1 };
	}
	n = add_dirs(pending, committed, f, n, MAX_ENTRIES);
	return n ? unmount_all(t, f, n, lease_label(pending)) : 0;
}

/* ---- devgate's mounts that no record holds, found at start ---- */

/* One line of /proc/PID/mountinfo: the fields devgate's mounts are known by. */
struct mount_line {
	char root[HELPER_PATH_MAX]; /* the bound file, in its filesystem */
	char point[HELPER_PATH_MAX];
};

/*
 * Reads line (one of mountinfo) into m when it may be devgate's mount of
 * a driver file: read-only and unbindable. A path with an escaped
 * character is never one of devgate's. Returns whether it may be.
 */
static bool parse_line(const char *line, struct mount_line *m)
{
	char opts[256];
	const char *sep = strstr(line, " - ");
	const char *marked = strstr(line, " unbindable");
	int end = 0;

	if (!sep || !marked || marked > sep ||
	    sscanf(line, "%*u %*u %*s %159s %159s %255s%n", m->root, m->point, opts, &end) != 3 ||
	    line + end > marked)
		return false;
	if (strncmp(opts, "ro", 2) != 0 || (opts[2] && opts[2] != ','))
		return false;
	return !strchr(m->root, '\\') && !strchr(m->point, '\\') && m->point[0] == '/';
}

/* Returns the name part of path ("libcuda.so.1" for "/usr/lib/libcuda.so.1"). */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * Fills f (up to max) with the mounts of mountinfo text that may be devgate's
 * and that l does not record, each with the identity of the driver file of
 * drv it binds (by name), read below root. Returns how many; points holds
 * their paths.
 */
static size_t candidates(const char *text, const struct lease *l, const struct dg_driver *drv,
			 int root, struct node_file *f, char (*points)[HELPER_PATH_MAX], size_t max)
{
	size_t n = 0;

	for (const char *line = text; line && *line && n < max; line = strchr(line, '\n')) {
		struct mount_line m;
		char one[1024];
		size_t len;

		line += *line == '\n';
		len = strcspn(line, "\n");
		if (len >= sizeof(one))
			continue;
		memcpy(one, line, len);
		one[len] = '\0';
		if (!parse_line(one, &m) || has_file(l, m.point))
			continue;
		for (size_t i = 0; drv && i < drv->n; i++) {
			struct stat st;

			if (strcmp(base_name(drv->files[i].path), base_name(m.root)) != 0 ||
			    fstatat(root, drv->files[i].path + (drv->files[i].path[0] == '/'), &st,
				    0) < 0)
				continue;
			snprintf(points[n], HELPER_PATH_MAX, "%s", m.point);
			f[n] = (struct node_file){ .path = points[n],
						   .dev = st.st_dev,
						   .ino = st.st_ino,
						   .marked = true,
						   .tree = -1 };
			n++;
			break;
		}
	}
	return n;
}

size_t driverfs_sweep(const char *host_root, const struct target *t, const struct lease *l)
{
	static char points[HELPER_MAX_FILES][HELPER_PATH_MAX];
	struct node_file f[HELPER_MAX_FILES];
	auto_free char *text = NULL;
	auto_close int root = -1;
	struct dg_driver drv;
	char path[64];
	size_t n;

	/* The kernel's table of the container's mounts, as its own process sees them. */
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)t->pid);
	if (read_file_at(AT_FDCWD, path, 4 << 20, &text, NULL) < 0 || pidfd_alive(t->pidfd) < 0 ||
	    !strstr(text, " unbindable"))
		return 0;
	root = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 || driver_discover(root, &drv) < 0)
		return 0;
	n = candidates(text, l, &drv, root, f, points, HELPER_MAX_FILES);
	return n ? unmount_all(t, f, n, lease_label(l)) : 0;
}
