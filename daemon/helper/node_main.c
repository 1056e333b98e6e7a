// SPDX-License-Identifier: Apache-2.0
/*
 * devgated-node: the zygote that devgated executes at start from a sealed
 * memfd (zygote.c), linked statically so that it maps a few pages, not
 * devgated's libraries: each helper it forks then costs a fraction of a
 * fork of devgated, and so does its exit. fd 3 is its socket to devgated;
 * it takes devgated's capabilities and the helpers' seccomp filter from the
 * first message, then forks one helper per request until devgated hangs up.
 */
#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "forkloop.h"
#include "helper.h"

static struct sock_filter insns[HELPER_FILTER_MAX];
static struct sock_fprog filter = { .filter = insns };

/* What each forked helper runs: its whole life, under the filter devgated sent. */
static void spare_main(int sock)
{
	helper_main(sock, &filter);
}

/* exec gave a root process every capability back; keep devgated's only. */
static int take_caps(uint64_t effective, uint64_t permitted)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	for (int i = 0; i < 2; i++) {
		d[i].effective = (uint32_t)(effective >> (32 * i));
		d[i].permitted = (uint32_t)(permitted >> (32 * i));
	}
	return (int)syscall(SYS_capset, &h, d);
}

int main(void)
{
	struct sigaction ign = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	static struct helper_setup s;

	/* It dies with devgated; its children are reaped by the kernel. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || sigaction(SIGCHLD, &ign, NULL) < 0)
		_exit(1);
	if (recv(FORKLOOP_FD, &s, sizeof(s), 0) != (ssize_t)sizeof(s) ||
	    s.job_size != sizeof(struct helper_job) || s.filter_len == 0 ||
	    s.filter_len > HELPER_FILTER_MAX || getppid() != s.parent ||
	    take_caps(s.effective, s.permitted) < 0)
		_exit(1);
	memcpy(insns, s.filter, s.filter_len * sizeof(*insns));
	filter.len = (unsigned short)s.filter_len;
	(void)prctl(PR_SET_NAME, "devgated-zygote", 0, 0, 0);
	if (send(FORKLOOP_FD, "r", 1, MSG_NOSIGNAL) != 1)
		_exit(1);
	forkloop_serve(spare_main);
}
