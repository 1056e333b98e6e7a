// SPDX-License-Identifier: Apache-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "log.h"
#include "state.h"
#include "util.h"

#define LEASE_FILE_MAX ((size_t)256 * 1024)

struct state {
	char *dir;
	int lock_fd;
	int leases_fd;
};

void state_close(struct state *s)
{
	if (!s)
		return;
	safe_close(s->lock_fd);
	safe_close(s->leases_fd);
	free(s->dir);
	free(s);
}

int state_open(const char *dir, struct state **ret, struct dg_error *err)
{
	struct state *s;
	char path[4096];
	int r;

	r = mkdir_p(dir, 0700);
	if (r < 0)
		return dg_error_set(err, DG_E_STATE, r, "cannot create state directory %s: %s", dir,
				    strerror(-r));
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = s->leases_fd = -1;
	s->dir = strdup(dir);
	snprintf(path, sizeof(path), "%s/lock", dir);
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot open %s: %m", path);
		goto fail;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "state directory %s is in use by another "
				 "devgated", dir);
		dg_error_hint(err, "stop the other daemon, or give this one its own --state-dir");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/leases", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot create %s: %m", path);
		goto fail;
	}
	s->leases_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (s->leases_fd < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot open %s: %m", path);
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	state_close(s);
	return r;
}

static int load_one(struct state *s, const char *name, struct lease **ret, struct dg_error *err)
{
	auto_free char *text = NULL;
	auto_json json_object *o = NULL;
	char why[256] = "";
	struct lease *l = NULL;
	char expect[64];
	int r;

	r = read_file_at(s->leases_fd, name, LEASE_FILE_MAX, &text, NULL);
	if (r < 0)
		return dg_error_set(err, DG_E_STATE, r, "cannot read lease file %s/leases/%s: %s",
				    s->dir, name, strerror(-r));
	o = json_parse_object(text);
	if (!o)
		snprintf(why, sizeof(why), "not valid JSON (truncated or damaged)");
	else if (lease_from_json(o, &l, why, sizeof(why)) == 0) {
		snprintf(expect, sizeof(expect), "%llu.json", (unsigned long long)l->cgid);
		if (strcmp(expect, name) == 0) {
			*ret = l;
			return 0;
		}
		snprintf(why, sizeof(why), "it describes cgroup %llu", (unsigned long long)l->cgid);
		lease_free(l);
	}
	dg_error_set(err, DG_E_STATE, EINVAL, "lease file %s/leases/%s is corrupt: %s", s->dir,
		     name, why);
	dg_error_hint(err, "devgated will not start and forget a lease; restore the file from "
			   "backup, or move it away once the container it names is gone");
	return -EINVAL;
}

int state_load(struct state *s, struct lease_table *out, struct dg_error *err)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int fd, r;

	fd = dup(s->leases_fd);
	if (fd < 0)
		return dg_error_set(err, DG_E_STATE, errno, "dup: %m");
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return dg_error_set(err, DG_E_STATE, errno, "cannot list %s/leases: %m", s->dir);
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct lease *l = NULL;
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.') {
			/* A temporary file left by a crash mid-write: never renamed, so void. */
			if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0) {
				log_info("removing unfinished state write %s/leases/%s", s->dir,
					 de->d_name);
				(void)unlinkat(s->leases_fd, de->d_name, 0);
			}
			continue;
		}
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		r = load_one(s, de->d_name, &l, err);
		if (r < 0)
			return r;
		r = lease_table_add(out, l);
		if (r < 0) {
			lease_free(l);
			return dg_error_set(err, DG_E_INTERNAL, r, "out of memory");
		}
	}
	return 0;
}

int state_save(struct state *s, const struct lease *l)
{
	auto_json json_object *o = lease_to_json(l);
	const char *text;
	char name[64];

	if (!o)
		return -ENOMEM;
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
	snprintf(name, sizeof(name), "%llu.json", (unsigned long long)l->cgid);
	return write_file_atomic_at(s->leases_fd, name, text, strlen(text), 0600);
}

int state_remove(struct state *s, uint64_t cgid)
{
	char name[64];

	snprintf(name, sizeof(name), "%llu.json", (unsigned long long)cgid);
	if (unlinkat(s->leases_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return fsync(s->leases_fd) < 0 ? -errno : 0;
}
