// SPDX-License-Identifier: Apache-2.0
/*
 * The replace form's gates taken off a cgroup: each runtime program goes
 * back in its gate's place in one BPF_F_REPLACE, so the cgroup is never
 * left without it. Used by the revoke (guard.c) and by the conversion to
 * the beside form, which calls it only once the beside gate is last: a
 * granted device then stays open through every swap.
 *
 * It must not attach or detach anything else, nor know leases.
 */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "sys/fault.h"
#include "gate_int.h"
#include "keeper.h"
#include "log.h"
#include "onegate.h"
#include "unwrap.h"

int unwrap_restore(int cgfd, const struct pinned *p, uint32_t cg_flags)
{
	auto_close int orig_fd = -1, gate_fd = -1;
	bool multi = cg_flags & BPF_F_ALLOW_MULTI;

	gate_fd = bpf_prog_get_fd_by_id(p->id);
	if (gate_fd < 0)
		return -errno;
	/* The slot still holds orig, so it cannot have been freed. */
	orig_fd = bpf_prog_get_fd_by_id(p->orig_id);
	if (orig_fd < 0)
		return -errno;
	return cgprog_attach(orig_fd, cgfd, multi ? BPF_F_ALLOW_MULTI : cg_flags,
			     multi ? gate_fd : -1);
}

bool unwrap_any(const struct pinned *pins, size_t n_pins, const struct attached *now)
{
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_GATE && cgprog_has(now, pins[i].id))
			return true;
	}
	return false;
}

int unwrap_gates(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		 const struct pinned *pins, size_t n_pins, struct dg_error *err)
{
	struct attached now = { 0 };
	int r = cgprog_query(cgfd, false, &now);

	for (size_t i = 0; i < n_pins && r == 0; i++) {
		if (pins[i].kind != PIN_GATE || !cgprog_has(&now, pins[i].id))
			continue;
		fault_point("guard.convert");
		r = unwrap_restore(cgfd, &pins[i], now.flags);
		if (r < 0)
			break;
		pinned_unpin(dir, &pins[i]);
		onegate_release(bg, cgid, &pins[i]);
		keeper_release(&bg->keeper, pins[i].orig_id);
		log_notice("cgroup %llu: device program %u back in its gate's place (beside form)",
			   (unsigned long long)cgid, pins[i].orig_id);
	}
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot put a device program back on cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	return 0;
}
