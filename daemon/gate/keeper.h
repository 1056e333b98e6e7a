/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keeper: every runtime program devgate wraps is also attached to an
 * empty cgroup under <cgroup root>/devgate.keep/<pin root>/kN. An
 * attachment is a reference the kernel holds by itself, so the program
 * outlives its pins, devgated's fds and devgated, and a gate whose slot
 * emptied (its pin removed, bpffs remounted) can always be refilled with
 * it. The cgroups hold no process: the programs decide nothing there.
 *
 * Which cgroup holds which program is read from the kernel once, then kept
 * in memory, so holding and letting go cost one attach or detach.
 */
#ifndef DEVGATE_KEEPER_H
#define DEVGATE_KEEPER_H

#include <stdbool.h>
#include <stdint.h>

#define KEEP_CGROUPS 256 /* of 60 programs each: 15,360 */

struct keeper_entry {
	uint32_t prog_id; /* 0: free; KEEP_GONE: deleted */
	uint16_t cg;	  /* kN */
};

struct keeper {
	int cgroot_fd;
	char dir[256];	       /* devgate.keep/<pin root, '/' as '_'>, relative to cgroot_fd */
	bool loaded;	       /* the index below was read from the kernel */
	int fds[KEEP_CGROUPS]; /* kN, open; -1: not made */
	uint8_t count[KEEP_CGROUPS];
	unsigned int total;
	struct keeper_entry *index; /* open addressing by prog_id */
	unsigned int index_used;    /* live entries and deleted ones */
};

int keeper_init(struct keeper *k, int cgroot_fd, const char *pin_root);
void keeper_fini(struct keeper *k);
/* Attaches prog_fd to a keeper cgroup with room (idempotent). */
int keeper_hold(struct keeper *k, int prog_fd, uint32_t prog_id);
/* Detaches prog_id wherever the keeper holds it. */
void keeper_release(struct keeper *k, uint32_t prog_id);
/* Removes the keeper's cgroups if they hold nothing (at exit). */
void keeper_tidy(struct keeper *k);

#endif
