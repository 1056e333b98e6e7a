/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reports, as they happen, device programs attached to or detached from a
 * cgroup by any process but devgated (bpf/attach_watch.bpf.c, fexit on the
 * kernel's attach and detach). Needs BTF and fexit (5.5+, CAP_BPF and
 * CAP_PERFMON); where the kernel lacks them the periodic re-check is all.
 */
#ifndef DEVGATE_ATTACH_WATCH_H
#define DEVGATE_ATTACH_WATCH_H

#include <stdint.h>

struct attach_watch;

/* Called once per cgroup changed, after the ring is drained. */
typedef void (*attach_watch_fn)(void *ctx, uint64_t cgroup_id, uint32_t pid, uint64_t ts_ns);

/*
 * Called at once, in order, for each attach that asked to replace old_id by
 * new_id (BPF_F_REPLACE), whether or not it succeeded: before fn for the burst.
 */
typedef void (*attach_watch_replace_fn)(void *ctx, uint64_t cgroup_id, uint32_t old_id,
					uint32_t new_id);

/* Loads and attaches the tracing programs; -errno. replaced may be NULL. */
int attach_watch_open(attach_watch_fn fn, attach_watch_replace_fn replaced, void *ctx,
		      struct attach_watch **ret);
void attach_watch_free(struct attach_watch *w);
/* Readable when events wait (for epoll). */
int attach_watch_fd(const struct attach_watch *w);
/* Drains the ring and calls fn per distinct cgroup; how many events were read. */
int attach_watch_consume(struct attach_watch *w);

#endif
