// SPDX-License-Identifier: Apache-2.0
/*
 * The runtimes devgated reads from their state files: runc (ROOT/ID/
 * state.json: the init's PID, its start time and its cgroup), podman
 * (containers-storage's DRIVER-containers/containers.json maps names to
 * IDs; the running container's state is runc's, under the same root) and
 * CRI containers (runc's state under the CRI runtime's root, whose labels
 * carry the pod's annotations). It only reads files root owns; it never
 * runs a runtime's binary and never writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <glob.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "rt.h"
#include "util.h"

#define STATE_MAX ((size_t)4 << 20)

json_object *rt_json_file(const char *path)
{
	auto_free char *text = NULL;
	size_t len = 0;

	if (read_file_at(AT_FDCWD, path, STATE_MAX, &text, &len) < 0)
		return NULL;
	return json_tokener_parse(text);
}

/*
 * A copy of path from its component off on ("/" when none is left): the
 * cgroup a runc state's path names below a hierarchy mounted at its first
 * off components.
 */
static int below(const char *path, size_t off, char *buf, size_t n)
{
	return rt_copy(buf, n, path[off] ? path + off : "/");
}

/* 1 when path is prefix or below it. */
static bool under(const char *path, const char *prefix)
{
	size_t len = strlen(prefix);

	return strncmp(path, prefix, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

/*
 * The whole cgroup a runc state's path names: runc keeps it absolute in its
 * own mount namespace, with v2 at /sys/fs/cgroup (or at .../unified beside
 * v1's hierarchies, key "") and each v1 hierarchy at /sys/fs/cgroup/NAME.
 * A v2 path below .../unified is read both ways (want, alt).
 */
static int runc_cgroup(const char *key, const char *path, struct rt_found *ret)
{
	static const char v2[] = "/sys/fs/cgroup", hy[] = "/sys/fs/cgroup/unified";
	const char *v1;

	if (!under(path, v2))
		return -EPROTO;
	if (key[0] == '\0') {
		if (under(path, hy) &&
		    below(path, sizeof(hy) - 1, ret->cgroup_alt, sizeof(ret->cgroup_alt)) < 0)
			return -ENAMETOOLONG;
		return below(path, sizeof(v2) - 1, ret->cgroup_want, sizeof(ret->cgroup_want));
	}
	if (strlen(path) < sizeof(v2) + 1)
		return -EPROTO; /* a v1 key names a hierarchy below /sys/fs/cgroup */
	v1 = strchr(path + sizeof(v2), '/');
	return below(path, v1 ? (size_t)(v1 - path) : strlen(path), ret->cgroup_want,
		     sizeof(ret->cgroup_want));
}

/* runc's state for id: 1 (pid 0 when its file is gone), or negative errno. */
static int runc_state(const char *root, const char *id, struct rt_found *ret, char *why, size_t n)
{
	auto_free char *path = NULL;
	auto_json json_object *o = NULL;
	json_object *paths, *v2;
	int64_t pid = 0, start = 0;
	int r = -ENOENT;

	ret->pid = 0;
	ret->start = 0;
	ret->cgroup_want[0] = '\0';
	if (asprintf(&path, "%s/%s/state.json", root, id) < 0)
		return -ENOMEM;
	o = rt_json_file(path);
	if (!o)
		return 1;
	json_get_int(o, "init_process_pid", &pid);
	json_get_int(o, "init_process_start", &start);
	if (!json_object_object_get_ex(o, "cgroup_paths", &paths) ||
	    !json_object_is_type(paths, json_type_object)) {
		snprintf(why, n, "runc state %s names no cgroup", path);
		return -EPROTO;
	}
	/* runc puts a container at one path in every hierarchy: v2's ("") is read first. */
	ret->cg_match = RT_CG_PATH;
	ret->cgroup_alt[0] = '\0';
	if (json_object_object_get_ex(paths, "", &v2) && json_object_is_type(v2, json_type_string))
		r = runc_cgroup("", json_object_get_string(v2), ret);
	json_object_object_foreach (paths, k, v) {
		if (r == 0 || !json_object_is_type(v, json_type_string))
			continue;
		r = runc_cgroup(k, json_object_get_string(v), ret);
	}
	if (r < 0) {
		snprintf(why, n, "runc state %s names no cgroup below /sys/fs/cgroup", path);
		return -EPROTO;
	}
	ret->pid = pid;
	ret->start = (unsigned long long)start;
	return 1;
}

int rt_runc(const char *root, const char *name, struct rt_found *ret, char *why, size_t n)
{
	auto_free char *dir = NULL;
	int r;

	if (asprintf(&dir, "%s/%s/state.json", root, name) < 0)
		return -ENOMEM;
	if (access(dir, F_OK) < 0)
		return 0;
	r = runc_state(root, name, ret, why, n);
	if (r < 0)
		return r;
	if (rt_copy(ret->id, sizeof(ret->id), name) < 0 ||
	    rt_copy(ret->name, sizeof(ret->name), name) < 0)
		return -ENAMETOOLONG;
	return 1;
}

/*
 * containers.json's entry c when it is called name (one of its names, or
 * its ID): 1 and its ID and first name in ret.
 */
static int storage_match(json_object *c, const char *name, struct rt_found *ret)
{
	const char *id = json_get_str(c, "id"), *first = NULL;
	json_object *names;
	bool hit = id && strcmp(id, name) == 0;

	if (json_object_object_get_ex(c, "names", &names) &&
	    json_object_is_type(names, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(names); i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(names, i));

			if (!first)
				first = s;
			hit = hit || (s && strcmp(s, name) == 0);
		}
	}
	if (!hit || !id)
		return 0;
	if (rt_copy(ret->id, sizeof(ret->id), id) < 0 ||
	    rt_copy(ret->name, sizeof(ret->name), first ? first : id) < 0)
		return -ENAMETOOLONG;
	return 1;
}

int rt_podman(const char *storage, const char *runc_root, const char *name, struct rt_found *ret,
	      char *why, size_t n)
{
	auto_free char *pattern = NULL;
	glob_t g;
	int r = 0;

	if (asprintf(&pattern, "%s/*-containers/containers.json", storage) < 0)
		return -ENOMEM;
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc && r == 0; i++) {
		auto_json json_object *list = rt_json_file(g.gl_pathv[i]);
		size_t len = list && json_object_is_type(list, json_type_array)
				     ? json_object_array_length(list)
				     : 0;

		for (size_t j = 0; j < len && r == 0; j++)
			r = storage_match(json_object_array_get_idx(list, j), name, ret);
	}
	globfree(&g);
	if (r <= 0)
		return r;
	r = runc_state(runc_root, ret->id, ret, why, n);
	return r < 0 ? r : 1;
}

/* The value of key in runc's labels (the bundle's annotations as "KEY=VALUE"). */
static const char *label_of(json_object *labels, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < json_object_array_length(labels); i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(labels, i));

		if (s && strncmp(s, key, n) == 0 && s[n] == '=')
			return s + n + 1;
	}
	return NULL;
}

/*
 * A CRI container's NAMESPACE/POD/CONTAINER from runc's labels: CRI-O's
 * annotations (io.kubernetes.pod.*, the infra container named POD) or
 * containerd's (io.kubernetes.cri.*, its sandboxes typed "sandbox"). 1 and
 * the name in buf; 0 when the state is no pod's container.
 */
static int cri_name(json_object *state, char *buf, size_t n)
{
	json_object *cfg, *labels;
	const char *ns, *pod, *ctr, *type;

	if (!json_object_object_get_ex(state, "config", &cfg) ||
	    !json_object_object_get_ex(cfg, "labels", &labels) ||
	    !json_object_is_type(labels, json_type_array))
		return 0;
	ns = label_of(labels, "io.kubernetes.pod.namespace");
	pod = label_of(labels, "io.kubernetes.pod.name");
	ctr = label_of(labels, "io.kubernetes.container.name");
	if (!ns || !pod || !ctr) {
		type = label_of(labels, "io.kubernetes.cri.container-type");
		ns = label_of(labels, "io.kubernetes.cri.sandbox-namespace");
		pod = label_of(labels, "io.kubernetes.cri.sandbox-name");
		ctr = label_of(labels, "io.kubernetes.cri.container-name");
		if (type && strcmp(type, "container") != 0)
			return 0;
	}
	if (!ns || !pod || !ctr || strcmp(ctr, "POD") == 0)
		return 0;
	return snprintf(buf, n, "%s/%s/%s", ns, pod, ctr) < (int)n;
}

/* Whether pid is a process now (a CRI container's earlier run may linger). */
static bool runs(long long pid)
{
	return pid > 0 && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/*
 * name is NAMESPACE/POD/CONTAINER, or a container's ID under the CRI root.
 * Of several runs of one container, the one whose init runs.
 */
int rt_cri(const char *root, const char *name, struct rt_found *ret, char *why, size_t n)
{
	auto_closedir DIR *dir = opendir(root);
	bool by_id = strchr(name, '/') == NULL;
	struct dirent *e;
	int found = 0;

	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(dir)) && !(found && runs(ret->pid))) {
		auto_free char *path = NULL;
		auto_json json_object *o = NULL;
		char full[sizeof(ret->name)];
		int r;

		if (e->d_name[0] == '.' || (by_id && strcmp(e->d_name, name) != 0))
			continue;
		if (asprintf(&path, "%s/%s/state.json", root, e->d_name) < 0)
			return -ENOMEM;
		o = rt_json_file(path);
		if (!o || cri_name(o, full, sizeof(full)) <= 0 ||
		    (!by_id && strcmp(full, name) != 0))
			continue;
		r = runc_state(root, e->d_name, ret, why, n);
		if (r < 0)
			return r;
		if (rt_copy(ret->id, sizeof(ret->id), e->d_name) < 0 ||
		    rt_copy(ret->name, sizeof(ret->name), full) < 0)
			return -ENAMETOOLONG;
		found = 1;
	}
	return found;
}

int rt_podman_list(const char *storage, rt_each_fn each, void *ctx)
{
	auto_free char *pattern = NULL;
	glob_t g;

	if (asprintf(&pattern, "%s/*-containers/containers.json", storage) < 0)
		return -ENOMEM;
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		auto_json json_object *list = rt_json_file(g.gl_pathv[i]);
		size_t len = list && json_object_is_type(list, json_type_array)
				     ? json_object_array_length(list)
				     : 0;

		for (size_t j = 0; j < len; j++) {
			const char *id = json_get_str(json_object_array_get_idx(list, j), "id");

			if (id)
				each(ctx, id);
		}
	}
	globfree(&g);
	return 0;
}

/* Each directory under dir that holds file (runc's state.json, LXC's config). */
int rt_dir_list(const char *dir, const char *file, rt_each_fn each, void *ctx)
{
	auto_closedir DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[4096];

		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, file) >=
			    (int)sizeof(path) ||
		    access(path, F_OK) < 0)
			continue;
		each(ctx, e->d_name);
	}
	return 0;
}
