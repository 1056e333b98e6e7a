// SPDX-License-Identifier: Apache-2.0
/*
 * preattach: what a host admin's policy on an ancestor cgroup may do on
 * Linux 6.15 and later: attach a device program with BPF_F_PREORDER, so
 * that it runs before the programs of every cgroup below, or detach it.
 * bpftool 7.1 has no flag for it.
 *
 *   preattach CGROUP PROG_PIN      attach (BPF_F_ALLOW_MULTI | BPF_F_PREORDER)
 *   preattach -d CGROUP PROG_PIN   detach
 *
 * Exit 0, or 1 with the kernel's error on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#ifndef BPF_F_PREORDER
#define BPF_F_PREORDER (1U << 6)
#endif

int main(int argc, char **argv)
{
	int detach = argc == 4 && strcmp(argv[1], "-d") == 0;
	int cg, prog, r;

	if (argc != 3 + detach) {
		fprintf(stderr, "usage: preattach [-d] CGROUP PROG_PIN\n");
		return 2;
	}
	cg = open(argv[1 + detach], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	prog = bpf_obj_get(argv[2 + detach]);
	if (cg < 0 || prog < 0) {
		fprintf(stderr, "preattach: %s: %s\n", cg < 0 ? argv[1 + detach] : argv[2 + detach],
			strerror(errno));
		return 1;
	}
	if (detach)
		r = bpf_prog_detach2(prog, cg, BPF_CGROUP_DEVICE);
	else
		r = bpf_prog_attach(prog, cg, BPF_CGROUP_DEVICE,
				    BPF_F_ALLOW_MULTI | BPF_F_PREORDER);
	if (r < 0) {
		fprintf(stderr, "preattach: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
