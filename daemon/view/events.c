// SPDX-License-Identifier: Apache-2.0
/*
 * Denial events: reads "this cgroup was denied that device" records from
 * the BPF ring buffer, names the container (lease table) and the node and
 * GPU (inventory), keeps the last EVENTS_RECENT of them, and reports each
 * one through d->hooks.denied (main.c sends it to clients streaming
 * 'events'). It only reads devgated's state; it must not act on a denial.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "gate/bpfgate.h"
#include "events.h"
#include "log.h"
#include "util.h"
#include "view.h"

/* One kept event and the arena its strings live in. */
struct recent {
	struct dg_denied_event ev;
	struct dg_arena arena; /* the event's strings */
};

struct events {
	struct daemon *d;
	struct ring_buffer *rb;
	struct recent recent[EVENTS_RECENT]; /* a ring; head is the next slot */
	size_t head;
	size_t n;
	uint64_t received;
};

/* A copy of s in the arena; NULL for NULL (or without memory). */
static const char *dup(struct dg_arena *a, const char *s)
{
	return s ? dg_arena_strdup(a, s) : NULL;
}

/*
 * Fills out with the denial ev as clients see it, its strings in the arena:
 * container and cgroup when a lease holds the cgroup, node and GPU when
 * the inventory knows the device. 0, or -ENOMEM.
 */
int events_describe(const struct dg_inventory *inv, const struct lease_table *t,
		    const struct dg_event *ev, int64_t wall_ms, struct dg_denied_event *out,
		    struct dg_arena *a)
{
	const struct lease *l = lease_table_find(t, ev->cgroup_id);
	const struct dg_gpu *gpu = NULL;
	char when[48], dev[32], node[64], access[8];
	bool known = ev->type == DG_DEV_CHAR &&
		     inventory_find_node(inv, ev->major, ev->minor, node, sizeof(node), &gpu);

	format_time_utc_ms(wall_ms, when, sizeof(when));
	snprintf(dev, sizeof(dev), "%c %u:%u", ev->type == DG_DEV_BLOCK ? 'b' : 'c', ev->major,
		 ev->minor);
	view_access_str(ev->access, access, sizeof(access));
	*out = (struct dg_denied_event){
		.time = dup(a, when),
		.type = "denied",
		.container = l ? dup(a, lease_label(l)) : NULL,
		.cgroup = l ? dup(a, l->cgroup) : NULL,
		.cgroup_id = ev->cgroup_id,
		.device = dup(a, dev),
		.node = known ? dup(a, node) : NULL,
		.gpu = gpu ? dup(a, gpu->uuid) : NULL,
		.access = dup(a, access),
	};
	return out->time && out->device && out->access ? 0 : -ENOMEM;
}

/*
 * The wall-clock time, in ms, of an event stamped on the monotonic clock
 * (BPF has only that one): now, less the event's age.
 */
static int64_t wall_ms_of(uint64_t mono_ns)
{
	uint64_t now_mono = now_mono_ns(), now_real = now_real_ns();
	uint64_t age = now_mono > mono_ns ? now_mono - mono_ns : 0;

	return (int64_t)((now_real - age) / 1000000);
}

/*
 * libbpf's callback for one ring buffer record: describes it into the next
 * slot of the ring of recent events and reports it. Always 0, so libbpf
 * reads on; a record it cannot describe is logged and dropped.
 */
static int on_sample(void *ctx, void *data, size_t size)
{
	struct events *e = ctx;
	struct recent *slot = &e->recent[e->head];
	struct dg_event ev;

	if (size < sizeof(ev))
		return 0; /* not ours to interpret; keep reading */
	memcpy(&ev, data, sizeof(ev));
	e->received++;
	dg_arena_free(&slot->arena);
	if (events_describe(e->d->inv, &e->d->leases, &ev, wall_ms_of(ev.ts_ns), &slot->ev,
			    &slot->arena) < 0) {
		log_warning("out of memory describing a denial event");
		return 0;
	}
	e->head = (e->head + 1) % EVENTS_RECENT;
	if (e->n < EVENTS_RECENT)
		e->n++;
	log_debug("denied: %s %s in %s", slot->ev.access, slot->ev.device,
		  slot->ev.cgroup ? slot->ev.cgroup : "an unleased cgroup");
	if (e->d->hooks.denied)
		e->d->hooks.denied(e->d, &slot->ev);
	return 0;
}

int events_open(struct daemon *d, struct dg_error *err)
{
	struct events *e = calloc(1, sizeof(*e));

	if (!e)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	e->d = d;
	e->rb = ring_buffer__new(bpfgate_events_fd(d->bg), on_sample, e, NULL);
	if (!e->rb) {
		int r = -errno;

		free(e);
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot read devgate's BPF ring buffer: %s", strerror(-r));
	}
	d->events = e;
	return 0;
}

void events_free(struct events *e)
{
	if (!e)
		return;
	ring_buffer__free(e->rb);
	for (size_t i = 0; i < EVENTS_RECENT; i++)
		dg_arena_free(&e->recent[i].arena);
	free(e);
}

int events_fd(const struct events *e)
{
	return ring_buffer__epoll_fd(e->rb);
}

void events_consume(struct daemon *d)
{
	int r = ring_buffer__consume(d->events->rb);

	if (r < 0)
		log_warning_errno(r, "cannot read denial events: %m");
}

int events_recent(const struct events *e, struct dg_events_reply *out, struct dg_arena *a)
{
	size_t first = (e->head + EVENTS_RECENT - e->n) % EVENTS_RECENT;

	out->events = e->n ? dg_arena_alloc(a, e->n * sizeof(*out->events)) : NULL;
	if (e->n && !out->events)
		return -ENOMEM;
	for (size_t i = 0; i < e->n; i++)
		out->events[i] = e->recent[(first + i) % EVENTS_RECENT].ev;
	out->n_events = e->n;
	return 0;
}

uint64_t events_received(const struct events *e)
{
	return e->received;
}
