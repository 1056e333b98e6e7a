// SPDX-License-Identifier: Apache-2.0
/*
 * Loads bpf/attach_watch.bpf.c (fexit on the kernel's cgroup attach and
 * detach) and reads its ring: which cgroups someone other than devgated
 * changed, and which attaches asked to replace a program. The callbacks
 * (main.c wires them to watch/ and guard_note_replace()) decide what to do.
 *
 * It only reports: it looks at no cgroup and changes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "attach_watch.h"
#include "attach_watch.skel.h"
#include "devgate.h"
#include "util.h"

/* Distinct cgroups remembered per drain; more in one burst are rare and the
 * periodic check still covers them. */
#define BATCH 64

struct attach_watch {
	struct attach_watch_bpf *skel;
	struct ring_buffer *rb;
	attach_watch_fn fn;
	attach_watch_replace_fn replaced;
	void *ctx;
	size_t n;
	struct {
		uint64_t cgroup_id;
		uint64_t ts_ns;
		uint32_t pid;
	} batch[BATCH];
};

/*
 * One event from the ring: a replace ask is passed on at once; a changed
 * cgroup is added to the batch unless it is there already.
 */
static int on_sample(void *ctx, void *data, size_t size)
{
	struct attach_watch *w = ctx;
	struct dg_attach_event ev;

	if (size < sizeof(ev))
		return 0;
	memcpy(&ev, data, sizeof(ev));
	if (ev.what == DG_ATTACH_ATTACHED && ev.replace_id && w->replaced)
		w->replaced(w->ctx, ev.cgroup_id, ev.replace_id, ev.prog_id);
	for (size_t i = 0; i < w->n; i++) {
		if (w->batch[i].cgroup_id == ev.cgroup_id)
			return 0; /* the first of a burst dates it */
	}
	if (w->n < BATCH) {
		w->batch[w->n].cgroup_id = ev.cgroup_id;
		w->batch[w->n].ts_ns = ev.ts_ns;
		w->batch[w->n].pid = ev.pid;
		w->n++;
	}
	return 0;
}

int attach_watch_open(attach_watch_fn fn, attach_watch_replace_fn replaced, void *ctx,
		      struct attach_watch **ret)
{
	struct attach_watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->replaced = replaced;
	w->ctx = ctx;
	w->skel = attach_watch_bpf__open();
	if (!w->skel) {
		r = -errno;
		goto fail;
	}
	w->skel->rodata->self_tgid = (uint32_t)getpid();
	r = attach_watch_bpf__load(w->skel);
	if (r == 0)
		r = attach_watch_bpf__attach(w->skel);
	if (r < 0)
		goto fail;
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.attach_events), on_sample, w, NULL);
	if (!w->rb) {
		r = -errno;
		goto fail;
	}
	*ret = w;
	return 0;
fail:
	attach_watch_free(w);
	return r < 0 ? r : -EINVAL;
}

void attach_watch_free(struct attach_watch *w)
{
	if (!w)
		return;
	ring_buffer__free(w->rb);
	attach_watch_bpf__destroy(w->skel);
	free(w);
}

int attach_watch_fd(const struct attach_watch *w)
{
	return ring_buffer__epoll_fd(w->rb);
}

int attach_watch_consume(struct attach_watch *w)
{
	int n;

	w->n = 0;
	n = ring_buffer__consume(w->rb);
	/* Looked at after the whole burst, so each cgroup is checked once, as it ends up. */
	for (size_t i = 0; i < w->n; i++)
		w->fn(w->ctx, w->batch[i].cgroup_id, w->batch[i].pid, w->batch[i].ts_ns);
	return n;
}
