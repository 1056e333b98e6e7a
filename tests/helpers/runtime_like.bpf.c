// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in for a runtime's device program, loaded the libbpf way (with
 * expected_attach_type BPF_CGROUP_DEVICE, unlike runc): denies every NVIDIA
 * device and /dev/mem, allows the rest. Tests attach it next to devgate's.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("cgroup/dev")
int runtime_like(struct bpf_cgroup_dev_ctx *ctx)
{
	if (ctx->major == 195 || (ctx->major == 1 && ctx->minor == 1))
		return 0;
	return 1;
}
