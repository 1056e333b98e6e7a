// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Tells devgated at once when anyone else attaches or detaches a device
 * program on a cgroup, so a gate displaced by a runtime (runc update,
 * systemd daemon-reload) is put back in microseconds instead of at the
 * next periodic check. fexit, so the change is in place when devgated
 * looks. Arguments are read by position (cgroup first, attach type fifth
 * for attach, fourth for detach), which has held since 5.x while later
 * arguments were added; the cgroup id and program ids come through CO-RE.
 * An attach also names the program it was to replace: a runtime that tried
 * to replace the program a gate stands in for (LXC) says what supersedes it.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "devgate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* devgated's own changes need no report. */
const volatile __u32 self_tgid = 0;

struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct bpf_prog_aux {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog {
	struct bpf_prog_aux *aux;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DG_ATTACH_EVENTS_BYTES);
} attach_events SEC(".maps");

static __always_inline __u32 prog_id(struct bpf_prog *prog)
{
	return prog ? BPF_CORE_READ(prog, aux, id) : 0;
}

static __always_inline void report(struct cgroup *cgrp, __u64 type, __u32 what,
				   struct bpf_prog *prog, struct bpf_prog *replace)
{
	struct dg_attach_event *ev;

	if (type != BPF_CGROUP_DEVICE || bpf_get_current_pid_tgid() >> 32 == self_tgid)
		return;
	ev = bpf_ringbuf_reserve(&attach_events, sizeof(*ev), 0);
	if (!ev)
		return; /* full: the periodic check still finds it */
	ev->cgroup_id = BPF_CORE_READ(cgrp, kn, id);
	ev->ts_ns = bpf_ktime_get_ns();
	ev->what = what;
	ev->pid = bpf_get_current_pid_tgid() >> 32;
	ev->prog_id = prog_id(prog);
	ev->replace_id = prog_id(replace);
	bpf_ringbuf_submit(ev, 0);
}

SEC("fexit/__cgroup_bpf_attach")
int on_attach(__u64 *ctx)
{
	report((struct cgroup *)ctx[0], ctx[4], DG_ATTACH_ATTACHED, (struct bpf_prog *)ctx[1],
	       (struct bpf_prog *)ctx[2]);
	return 0;
}

SEC("fexit/__cgroup_bpf_detach")
int on_detach(__u64 *ctx)
{
	report((struct cgroup *)ctx[0], ctx[3], DG_ATTACH_DETACHED, (struct bpf_prog *)ctx[1], 0);
	return 0;
}
