// SPDX-License-Identifier: Apache-2.0
/*
 * doctor --containers: for each running container devgated finds through
 * its configured runtimes (docker, podman, LXD, LXC, CRI, runc), which
 * mechanism a grant would use and whether it can work there, from what the
 * kernel shows: the process's v1 devices cgroup (a v1 grant writes
 * devices.allow there, which the kernel refuses unless each parent allows
 * the device) and the v2 mount. It only reads: it grants nothing and
 * writes no cgroup file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgv1.h"
#include "cleanup.h"
#include "client.h"
#include "devgate.h"
#include "doctor_ct.h"
#include "mountinfo.h"
#include "util.h"

bool doctor_v1_usable(const char *path)
{
	char list[PATH_MAX];

	return snprintf(list, sizeof(list), "%s/devices.list", path) < (int)sizeof(list) &&
	       access(list, F_OK) == 0;
}

/*
 * The first GPU node a parent of path (in the v1 devices hierarchy at mnt)
 * does not allow read and write: 1 and why; 0 when every parent allows
 * every GPU's node.
 */
static int parent_refuses(const char *mnt, const char *path, const struct dg_inventory *inv,
			  char *why, size_t n)
{
	char parent[PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	while ((slash = strrchr(parent, '/')) != NULL) {
		auto_free char *list = NULL;
		char file[PATH_MAX];

		*(slash == parent ? slash + 1 : slash) = '\0';
		if (snprintf(file, sizeof(file), "%s%s/devices.list", mnt,
			     strcmp(parent, "/") == 0 ? "" : parent) >= (int)sizeof(file) ||
		    read_file_at(AT_FDCWD, file, (size_t)1024 * 1024, &list, NULL) < 0) {
			snprintf(why, n, "cannot read %s", file);
			return 1;
		}
		for (size_t i = 0; inv && i < inv->n_gpus; i++) {
			struct dg_node node;
			int acc;

			gpu_node(inv, &inv->gpus[i], &node);
			acc = cgv1_list_access(list, 'c', node.major, node.minor);
			if (acc < 0 ||
			    (acc & (DG_ACC_READ | DG_ACC_WRITE)) != (DG_ACC_READ | DG_ACC_WRITE)) {
				snprintf(
					why, n,
					"its v1 devices parent %s does not allow /dev/%s (c %u:%u), "
					"so the kernel refuses devices.allow below it",
					parent, node.name, node.major, node.minor);
				return 1;
			}
		}
		if (strcmp(parent, "/") == 0)
			break;
	}
	return 0;
}

/* One container's mechanism; false when devgate cannot gate it. */
static bool mechanism_of(const struct dg_found_info *f, const char *cg_mount, const char *v1mnt,
			 const struct dg_inventory *inv, json_object *o)
{
	auto_free char *text = NULL, *path = NULL;
	char file[PATH_MAX], why[PATH_MAX + 256], mech[sizeof(why) + 16];
	bool v1;

	snprintf(file, sizeof(file), "%s%s", cg_mount ? cg_mount : "", f->cgroup);
	if (!cg_mount && !v1mnt) {
		snprintf(why, sizeof(why),
			 "cannot: no cgroup v2 mount and no v1 devices controller (devgate gates "
			 "through one of them)");
		json_object_object_add(o, "mechanism", json_object_new_string(why));
		return false;
	}
	if (cg_mount && access(file, F_OK) < 0) {
		snprintf(why, sizeof(why), "cannot: its v2 cgroup %s is not under %s", f->cgroup,
			 cg_mount);
		json_object_object_add(o, "mechanism", json_object_new_string(why));
		return false;
	}
	snprintf(file, sizeof(file), "/proc/%lld/cgroup", (long long)f->pid);
	v1 = v1mnt && read_file_at(AT_FDCWD, file, 65536, &text, NULL) == 0 &&
	     cgv1_devices_parse(text, &path) == 0 && strcmp(path, "/") != 0;
	if (!v1 && !cg_mount) {
		json_object_object_add(o, "mechanism",
				       json_object_new_string("cannot: no cgroup v2, and the "
							      "process has no v1 devices cgroup"));
		return false;
	}
	if (!v1) {
		json_object_object_add(o, "mechanism", json_object_new_string("v2 BPF gate"));
		return true;
	}
	json_object_object_add(o, "v1_devices", json_object_new_string(path));
	if (parent_refuses(v1mnt, path, inv, why, sizeof(why))) {
		snprintf(mech, sizeof(mech), "cannot: %s", why);
		json_object_object_add(o, "mechanism", json_object_new_string(mech));
		return false;
	}
	/* cgroup v1 alone: its devices list is the whole gate, and it works. */
	snprintf(mech, sizeof(mech),
		 cg_mount ? "v2 gate + v1 devices %s" : "v1 devices %s (no cgroup v2)", path);
	json_object_object_add(o, "mechanism", json_object_new_string(mech));
	return true;
}

json_object *doctor_containers(const char *socket, unsigned int timeout_s, const char *cg_mount,
			       const struct dg_inventory *inv, bool *failed, char *message,
			       size_t n, char *hint, size_t hn)
{
	struct dg_request req = { .op = DG_OP_CONTAINERS };
	struct dg_arena arena = { 0 };
	struct dg_error err = { 0 };
	auto_free char *mi = NULL, *v1mnt = NULL;
	union dg_reply reply;
	json_object *list;
	size_t cannot = 0;

	*failed = false;
	if (client_request(socket, timeout_s, &req, &reply, &arena, &err) < 0) {
		snprintf(message, n, "%s", err.message);
		snprintf(hint, hn, "%s", err.hint);
		return NULL;
	}
	if (read_file_at(AT_FDCWD, "/proc/self/mountinfo", (size_t)4 * 1024 * 1024, &mi, NULL) == 0)
		(void)mountinfo_find_cgroup1(mi, "devices", doctor_v1_usable, &v1mnt);
	list = json_object_new_array();
	for (size_t i = 0; list && i < reply.containers.n_found; i++) {
		const struct dg_found_info *f = &reply.containers.found[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "runtime", json_object_new_string(f->runtime));
		json_object_object_add(o, "name", json_object_new_string(f->name));
		json_object_object_add(o, "id", json_object_new_string(f->id));
		json_object_object_add(o, "pid", json_object_new_int64(f->pid));
		json_object_object_add(o, "cgroup", json_object_new_string(f->cgroup));
		if (!mechanism_of(f, cg_mount, v1mnt, inv, o))
			cannot++;
		json_object_array_add(list, o);
	}
	snprintf(message, n, "%zu running container%s found (searched %s)",
		 reply.containers.n_found, reply.containers.n_found == 1 ? "" : "s",
		 reply.containers.searched);
	if (cannot) {
		*failed = true;
		snprintf(hint, hn, "%zu cannot be gated: see each one's reason", cannot);
	}
	dg_arena_free(&arena);
	return list;
}
