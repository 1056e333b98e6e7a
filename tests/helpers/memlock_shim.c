/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD shim for crun in the tests: crun raises RLIMIT_MEMLOCK before
 * loading its device program, unconditionally, and a host (or sandbox)
 * without CAP_SYS_RESOURCE refuses. The kernels devgate supports account BPF
 * memory to the cgroup, not to the limit, so pretending the call worked
 * changes nothing else. It must not touch any other resource.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/resource.h>

int setrlimit(__rlimit_resource_t resource, const struct rlimit *rlim)
{
	int (*real)(__rlimit_resource_t, const struct rlimit *);

	if (resource == RLIMIT_MEMLOCK)
		return 0;
	real = (int (*)(__rlimit_resource_t, const struct rlimit *))dlsym(RTLD_NEXT, "setrlimit");
	return real ? real(resource, rlim) : -1;
}
