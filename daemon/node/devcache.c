// SPDX-License-Identifier: Apache-2.0
/*
 * The /dev devgated keeps per container: which directory on which mount
 * (mount id, device, inode) the O_PATH descriptor was that a node helper
 * opened inside the container (no symlink, not the host's /dev), sent with
 * its probe, and devgated approved (no file system its own mount namespace
 * has). Later grants and revokes open that /dev again through the
 * container's root (one name, openat2 in root, no symlink), go on only if
 * it is that same directory on that same mount and devgated's mount table
 * does not have it now (checked again only after its mount table changed:
 * poll on its mountinfo), and then are
 * single-name mknodat/unlinkat on it, with no fork and no setns. Anything
 * else forgets the entry and the job goes to a helper. It never walks a
 * path in a container, and holds no descriptor of one between requests (a
 * container's /dev stays free to unmount, and goes with the container).
 * Only a tmpfs /dev is kept (nodes.c), so no container's file system
 * daemon is ever asked by devgated itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "devcache.h"
#include "log.h"
#include "util.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000U /* Linux 6.8: a mount id never reused */
#endif

/* Which directory on which mount: what the container's /dev must still be. */
struct dev_id {
	uint64_t mnt_id;
	uint32_t mnt_kind; /* STATX_MNT_ID_UNIQUE or STATX_MNT_ID: ids of one kind compare */
	dev_t dev;
	uint64_t ino;
};

/*
 * No pidfd is kept (leases hold no descriptors): a PID taken by another
 * process finds another /dev, never one with the same unique mount id.
 */
struct dev_entry {
	pid_t pid; /* 0: free */
	struct dev_id id;
	uint64_t gen;
	uint64_t used; /* for eviction: the least recently used goes */
};

/* Containers whose /dev is kept; beyond that, the least recently used is forgotten. */
#define DEVCACHE_MAX 256

static struct dev_entry cache[DEVCACHE_MAX];
static uint64_t clock_uses;

/* devgated's /proc/self/mountinfo: poll says when its mount table changed. */
static int mounts_fd = -1;
static uint64_t mounts_gen;

/* Set by DEVGATE_TEST_NO_DEVCACHE=1: every node job goes to a helper (bench A/B). */
static bool disabled;

void devcache_init(void)
{
	const char *test = getenv("DEVGATE_TEST_NO_DEVCACHE");

	disabled = test && strcmp(test, "1") == 0;
	mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
}

uint64_t devcache_gen(void)
{
	struct pollfd p = { .fd = mounts_fd, .events = POLLPRI };

	/* Unknown when it cannot be watched: every use is then a new number. */
	if (mounts_fd < 0 || poll(&p, 1, 0) != 0)
		mounts_gen++;
	return mounts_gen;
}

/* The identity of directory fd into *ret. 0, or -errno. */
static int dev_identify(int fd, struct dev_id *ret)
{
	struct statx sx;

	/* DONT_SYNC: these never change, and no file system is asked (FUSE's getattr). */
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		  STATX_INO | STATX_TYPE | STATX_MNT_ID_UNIQUE, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE)) || !S_ISDIR(sx.stx_mode))
		return -EINVAL;
	*ret = (struct dev_id){
		.mnt_id = sx.stx_mnt_id,
		.mnt_kind = sx.stx_mask & STATX_MNT_ID_UNIQUE ? STATX_MNT_ID_UNIQUE : STATX_MNT_ID,
		.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor),
		.ino = sx.stx_ino,
	};
	return 0;
}

/*
 * Opens root's "dev" as a helper opens it (one name, in root, no symlink,
 * no magic link) and returns it when it is the directory id names; else -1.
 * RESOLVE_CACHED: only from the dentry cache, so a root on FUSE (rootless
 * podman's fuse-overlayfs, whose daemon a user can stop) is never asked;
 * EAGAIN sends the job to a helper, whose wait is bounded.
 */
static int dev_reopen(int root, const struct dev_id *id)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_CACHED,
	};
	auto_close int fd = (int)syscall(SYS_openat2, root, "dev", &how, sizeof(how));
	struct dev_id now = { 0 };

	if (fd < 0 || dev_identify(fd, &now) < 0 || now.mnt_id != id->mnt_id ||
	    now.mnt_kind != id->mnt_kind || now.dev != id->dev || now.ino != id->ino)
		return -1;
	return TAKE_FD(fd);
}

static void entry_drop(struct dev_entry *e)
{
	e->pid = 0;
}

static struct dev_entry *entry_find(pid_t pid)
{
	for (size_t i = 0; i < ARRAY_SIZE(cache); i++) {
		if (cache[i].pid == pid)
			return &cache[i];
	}
	return NULL;
}

int devcache_open(const struct target *t, devcache_unshared_fn unshared)
{
	struct dev_entry *e = entry_find(t->pid);
	uint64_t gen = devcache_gen();
	int fd = -1;

	if (!e)
		return -1;
	/*
	 * t's root (t->rootfd, opened for this request) shows the /dev it
	 * sees now; only the very mount approved passes.
	 * After a change of devgated's mount table (read after the poll that
	 * saw it, so a later one is seen next time) the approval is made again.
	 */
	if ((e->gen != gen && !unshared(e->id.dev)) || (fd = dev_reopen(t->rootfd, &e->id)) < 0) {
		entry_drop(e);
		return -1;
	}
	e->gen = gen;
	e->used = ++clock_uses;
	return fd;
}

void devcache_put(const struct target *t, int devfd, uint64_t gen)
{
	struct dev_entry *e = entry_find(t->pid);
	struct dev_id id = { 0 };

	/* Mount ids of older kernels are reused: nothing is kept there. */
	if (dev_identify(devfd, &id) < 0 || id.mnt_kind != STATX_MNT_ID_UNIQUE)
		return;
	for (size_t i = 0; !e && i < ARRAY_SIZE(cache); i++) {
		if (!cache[i].pid)
			e = &cache[i];
	}
	for (size_t i = 0; !e || (e->pid && i < ARRAY_SIZE(cache)); i++) {
		if (!e || cache[i].used < e->used)
			e = &cache[i];
	}
	*e = (struct dev_entry){
		.pid = t->pid,
		.id = id,
		.gen = gen,
		.used = ++clock_uses,
	};
}

void devcache_fini(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cache); i++)
		entry_drop(&cache[i]);
	mounts_fd = safe_close(mounts_fd);
}

bool devcache_serves(const struct helper_job *job)
{
	if (disabled || !job->enter || job->bind || job->root_path[0] || job->no_openat2)
		return false;
	if (job->op != OP_CREATE && job->op != OP_REMOVE)
		return false;
	for (size_t i = 0; i < job->n; i++) {
		if (strchr(job->nodes[i].name, '/'))
			return false;
	}
	return true;
}

bool devcache_apply(const struct target *t, const struct helper_job *job, struct node_result *res,
		    devcache_unshared_fn unshared)
{
	auto_close int devfd = devcache_serves(job) ? devcache_open(t, unshared) : -1;
	mode_t mask;

	if (devfd < 0)
		return false;
	memset(res, 0, job->n * sizeof(*res)); /* as a helper's zeroed reply */
	mask = umask(0); /* devgated is single-threaded: no other file is made meanwhile */
	helper_nodes(devfd, job, NULL, res);
	umask(mask);
	log_debug("nodes for PID %d: worked on in the /dev devgated keeps for it, no helper",
		  (int)t->pid);
	return true;
}
