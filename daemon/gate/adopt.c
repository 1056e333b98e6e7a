// SPDX-License-Identifier: Apache-2.0
/*
 * Finding devgate's shared maps when their pins are lost (an admin removed
 * them, bpffs was mounted again) while containers keep their gates. The
 * kernel keeps a map alive as long as a program uses it, so the gates and
 * tallies on the leased cgroups still lead to every map devgated had:
 * found by the name the kernel gave them, they are adopted rather than
 * made again, so one grants map, one counter of dropped events and one
 * event ring stay, never two that disagree. Also finds maps pinned under
 * the name of an earlier release (gateobj_names[].was).
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

/* Whether kname, an object's name in the kernel, is name as the kernel keeps it (15 characters). */
static bool kernel_name_is(const char *kname, const char *name)
{
	char kept[BPF_OBJ_NAME_LEN];

	snprintf(kept, sizeof(kept), "%s", name);
	return strcmp(kname, kept) == 0;
}

/* The shared map whose kernel name is kname, now or in an earlier release; -1: none. */
static int shared_map_of(const char *kname)
{
	for (int k = 0; k < SHARED_MAPS; k++) {
		if (kernel_name_is(kname, gateobj_names[k].name) ||
		    (gateobj_names[k].was && kernel_name_is(kname, gateobj_names[k].was)))
			return k;
	}
	return -1;
}

/*
 * Takes the shared maps that program id uses into fds, where fds has none
 * yet. Only devgate's gates (and, with also_tally, its tally) are looked at;
 * with counters_id set, only a program that counts in that map. Returns
 * true when the program uses a grants map.
 */
static bool take_maps(uint32_t id, bool also_tally, uint32_t counters_id, int *fds)
{
	uint32_t map_ids[16];
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	bool grants = false, counts = !counters_id;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return false;
	/* A gate of either form: the beside gate reads the grants map too. */
	if (strcmp(info.name, "devgate_gate") != 0 && strcmp(info.name, "devgate_beside") != 0 &&
	    !(also_tally && strcmp(info.name, "devgate_tally") == 0))
		return false;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++)
		counts |= map_ids[i] == counters_id;
	for (uint32_t i = 0; counts && i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
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

/*
 * Runs take_maps on every program attached to the cgroups cgfds; stops at
 * the first that uses a grants map when first_only. Returns whether one did.
 */
static bool take_from_cgroups(const int *cgfds, size_t n, bool also_tally, uint32_t counters_id,
			      bool first_only, int *fds)
{
	bool found = false;

	for (size_t i = 0; i < n; i++) {
		struct attached now = { 0 };

		if (cgfds[i] < 0 || cgprog_query(cgfds[i], false, &now) < 0)
			continue;
		for (uint32_t k = 0; k < now.n; k++) {
			found |= take_maps(now.ids[k], also_tally, counters_id, fds);
			if (found && first_only)
				return true;
		}
	}
	return found;
}

bool adopt_live_maps(const char *pin_root, const int *cgfds, size_t n, int fds[SHARED_MAPS])
{
	char path[PATH_MAX];
	uint32_t counters_id;

	snprintf(path, sizeof(path), "%s/%s", pin_root, gateobj_names[MAP_GRANTS].name);
	if (access(path, F_OK) == 0)
		return false; /* pinned: libbpf reuses the pins */
	/* The first gate that reads a grants map gives the maps a gate uses... */
	if (!take_from_cgroups(cgfds, n, false, 0, true, fds))
		return false;
	/* ...and the tallies that count with it the rest: the event ring, its drops. */
	counters_id = gateobj_map_id(fds[MAP_COUNTERS]);
	if (counters_id)
		(void)take_from_cgroups(cgfds, n, true, counters_id, false, fds);
	return true;
}

int adopt_old_pins(const char *pin_root, int fds[SHARED_MAPS])
{
	char path[PATH_MAX];
	int n = 0;

	for (int k = 0; k < SHARED_MAPS; k++) {
		if (!gateobj_names[k].was || fds[k] >= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_root, gateobj_names[k].name);
		if (access(path, F_OK) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_root, gateobj_names[k].was);
		fds[k] = bpf_obj_get(path);
		if (fds[k] >= 0)
			n++;
	}
	return n;
}
