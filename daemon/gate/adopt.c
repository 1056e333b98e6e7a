// SPDX-License-Identifier: Apache-2.0
/*
 * Finding devgate's shared maps when their pins are lost (an admin removed
 * them, bpffs was mounted again) while containers keep their gates. The
 * kernel keeps a map alive as long as a program uses it, so a gate on a
 * leased cgroup still leads to the maps devgated had: found by name, they
 * are adopted rather than made again, so one grants map stays, never two
 * that disagree.
 *
 * It only finds maps: it loads, pins and attaches nothing, and decides
 * nothing about the programs it looks at.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "adopt.h"
#include "cgprog.h"
#include "cleanup.h"
#include "util.h"

/* The shared map whose kernel name is kname; -1: none. */
static int shared_map_of(const char *kname)
{
	for (int k = 0; k < SHARED_MAPS; k++) {
		if (strcmp(kname, gateobj_names[k].name) == 0)
			return k;
	}
	return -1;
}

/*
 * Takes the shared maps that program id uses into fds, where fds has none
 * yet, if it is devgate's gate. Returns true when it uses a grants map.
 */
static bool take_maps(uint32_t id, int *fds)
{
	uint32_t map_ids[16];
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	bool grants = false;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0 ||
	    strcmp(info.name, "devgate_gate") != 0)
		return false;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
		struct bpf_map_info mi = { 0 };
		uint32_t mlen = sizeof(mi);
		auto_close int mfd = bpf_map_get_fd_by_id(map_ids[i]);
		int k = -1;

		if (mfd >= 0 && bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0)
			k = shared_map_of(mi.name);
		if (k < 0 || fds[k] >= 0)
			continue;
		fds[k] = TAKE_FD(mfd);
		grants |= k == MAP_GRANTS;
	}
	return grants;
}

bool adopt_live_maps(const char *pin_root, const int *cgfds, size_t n, int fds[SHARED_MAPS])
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", pin_root, gateobj_names[MAP_GRANTS].name);
	if (access(path, F_OK) == 0)
		return false; /* pinned: libbpf reuses the pins */
	for (size_t i = 0; i < n; i++) {
		struct attached now = { 0 };

		if (cgfds[i] < 0 || cgprog_query(cgfds[i], false, &now) < 0)
			continue;
		for (uint32_t k = 0; k < now.n; k++) {
			if (take_maps(now.ids[k], fds))
				return true;
		}
	}
	return false;
}
