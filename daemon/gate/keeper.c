// SPDX-License-Identifier: Apache-2.0
/*
 * The keeper: every runtime program devgate wraps is also attached to an
 * empty cgroup of its own, <cgroup root>/devgate.keep/<pin root>/kN. An
 * attachment is a reference the kernel holds by itself, so the program
 * outlives its pins, devgated's fds and devgated, and an emptied slot can
 * always be refilled (own.c). The cgroups hold no process, so the programs
 * decide nothing there.
 *
 * It only holds and lets go: it never attaches to a container's cgroup, and
 * which program to hold is guard.c's decision.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "keeper.h"
#include "log.h"

#define KEEP_PER_CGROUP 60 /* below the kernel's 64 programs per cgroup */
#define INDEX_SIZE 32768u  /* a power of two, twice KEEP_CGROUPS * KEEP_PER_CGROUP */
#define KEEP_GONE UINT32_MAX

int keeper_init(struct keeper *k, int cgroot_fd, const char *pin_root)
{
	char name[200];
	size_t i;

	memset(k, 0, sizeof(*k));
	snprintf(name, sizeof(name), "%s", pin_root);
	for (i = 0; name[i]; i++) {
		if (name[i] == '/')
			name[i] = '_';
	}
	k->cgroot_fd = cgroot_fd;
	snprintf(k->dir, sizeof(k->dir), "devgate.keep/%s", name);
	for (i = 0; i < KEEP_CGROUPS; i++)
		k->fds[i] = -1;
	return 0;
}

void keeper_fini(struct keeper *k)
{
	if (!k->dir[0])
		return; /* never initialised */
	for (size_t i = 0; i < KEEP_CGROUPS; i++)
		k->fds[i] = safe_close(k->fds[i]);
	free(k->index);
	k->index = NULL;
	k->loaded = false;
}

/* The index entry of prog_id (open addressing), or NULL. */
static struct keeper_entry *find(const struct keeper *k, uint32_t prog_id)
{
	for (unsigned int i = 0; i < INDEX_SIZE; i++) {
		struct keeper_entry *e = &k->index[(prog_id * 2654435761u + i) & (INDEX_SIZE - 1)];

		if (e->prog_id == prog_id)
			return e;
		if (e->prog_id == 0)
			return NULL;
	}
	return NULL;
}

static void rehash(struct keeper *k);

/* Records that keeper cgroup cg holds prog_id. */
static void add(struct keeper *k, uint32_t prog_id, unsigned int cg)
{
	if (k->index_used >= INDEX_SIZE / 2)
		rehash(k);
	for (unsigned int i = 0; i < INDEX_SIZE; i++) {
		struct keeper_entry *e = &k->index[(prog_id * 2654435761u + i) & (INDEX_SIZE - 1)];

		if (e->prog_id == 0) {
			*e = (struct keeper_entry){ .prog_id = prog_id, .cg = (uint16_t)cg };
			k->index_used++;
			k->count[cg]++;
			k->total++;
			return;
		}
	}
}

/* Builds the index again from its live entries: deleted ones fill it over time. */
static void rehash(struct keeper *k)
{
	struct keeper_entry *old = k->index;

	k->index = calloc(INDEX_SIZE, sizeof(*k->index));
	if (!k->index) {
		k->index = old;
		return;
	}
	k->index_used = 0;
	k->total = 0;
	memset(k->count, 0, sizeof(k->count));
	for (unsigned int i = 0; i < INDEX_SIZE; i++) {
		if (old[i].prog_id && old[i].prog_id != KEEP_GONE)
			add(k, old[i].prog_id, old[i].cg);
	}
	free(old);
}

/* Opens keeper cgroup kN; -1 with errno when it does not exist. */
static int open_cg(const struct keeper *k, unsigned int n)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
	return openat(k->cgroot_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/*
 * Reads which programs the keeper cgroups hold, once: they outlive
 * devgated, so a restarted one finds what the last one held.
 */
static int load(struct keeper *k)
{
	if (k->loaded)
		return 0;
	k->index = calloc(INDEX_SIZE, sizeof(*k->index));
	if (!k->index)
		return -ENOMEM;
	for (unsigned int n = 0; n < KEEP_CGROUPS; n++) {
		uint32_t ids[64];
		LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = 64);

		k->fds[n] = open_cg(k, n);
		if (k->fds[n] < 0)
			continue;
		if (bpf_prog_query_opts(k->fds[n], BPF_CGROUP_DEVICE, &q) < 0)
			continue;
		for (uint32_t i = 0; i < q.prog_cnt; i++)
			add(k, ids[i], n);
	}
	k->loaded = true;
	return 0;
}

/* Makes keeper cgroup kN when first needed, so a devgated that wraps nothing leaves nothing. */
static int make_cg(struct keeper *k, unsigned int n)
{
	char path[300];

	if (mkdirat(k->cgroot_fd, "devgate.keep", 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdirat(k->cgroot_fd, k->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
	if (mkdirat(k->cgroot_fd, path, 0755) < 0 && errno != EEXIST)
		return -errno;
	k->fds[n] = open_cg(k, n);
	return k->fds[n] < 0 ? -errno : 0;
}

int keeper_hold(struct keeper *k, int prog_fd, uint32_t prog_id)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = BPF_F_ALLOW_MULTI);
	int r = load(k);

	if (r < 0)
		return r;
	if (find(k, prog_id))
		return 0;
	for (unsigned int n = 0; n < KEEP_CGROUPS; n++) {
		if (k->count[n] >= KEEP_PER_CGROUP)
			continue;
		if (k->fds[n] < 0) {
			r = make_cg(k, n);
			if (r < 0)
				return r;
		}
		if (bpf_prog_attach_opts(prog_fd, k->fds[n], BPF_CGROUP_DEVICE, &opts) < 0)
			return -errno;
		add(k, prog_id, n);
		return 0;
	}
	return -ENOSPC;
}

void keeper_release(struct keeper *k, uint32_t prog_id)
{
	struct keeper_entry *e;
	auto_close int prog_fd = -1;

	if (load(k) < 0 || !(e = find(k, prog_id)))
		return;
	prog_fd = bpf_prog_get_fd_by_id(prog_id);
	if (prog_fd < 0 || bpf_prog_detach2(prog_fd, k->fds[e->cg], BPF_CGROUP_DEVICE) < 0)
		log_warning_errno(errno, "keeper: cannot let go of program %u: %m", prog_id);
	k->count[e->cg]--;
	k->total--;
	e->prog_id = KEEP_GONE;
}

void keeper_tidy(struct keeper *k)
{
	char path[300];

	if (!k->loaded || k->total)
		return;
	for (unsigned int n = 0; n < KEEP_CGROUPS; n++) {
		if (k->fds[n] < 0)
			continue;
		k->fds[n] = safe_close(k->fds[n]);
		snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
		(void)unlinkat(k->cgroot_fd, path, AT_REMOVEDIR);
	}
	/* Gone once empty; a cgroup with children refuses, which is fine. */
	(void)unlinkat(k->cgroot_fd, k->dir, AT_REMOVEDIR);
}
