/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keeper: every runtime program devgate wraps is also attached to an
 * empty cgroup under <cgroup root>/devgate.keep/<pin root>/kN. An
 * attachment is a reference the kernel holds by itself, so the program
 * outlives its pins, devgated's fds and devgated, and a gate whose slot
 * emptied (its pin removed, bpffs remounted) can always be refilled with
 * it. The cgroups hold no process: the programs decide nothing there.
 */
#ifndef DEVGATE_KEEPER_H
#define DEVGATE_KEEPER_H

#include <stdint.h>

struct keeper {
	int cgroot_fd;
	char dir[256]; /* devgate.keep/<pin root, '/' as '_'>, relative to cgroot_fd */
};

int keeper_init(struct keeper *k, int cgroot_fd, const char *pin_root);
/* Attaches prog_fd to a keeper cgroup with room (idempotent). */
int keeper_hold(const struct keeper *k, int prog_fd, uint32_t prog_id);
/* Detaches prog_id wherever the keeper holds it; removes emptied cgroups. */
void keeper_release(const struct keeper *k, uint32_t prog_id);

#endif
