/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cgroup's device programs as the kernel reports them, whoever's they
 * are: the list, attach and detach, and a digest of the list. Private to
 * gate/.
 */
#ifndef DEVGATE_CGPROG_H
#define DEVGATE_CGPROG_H

#include <stdbool.h>
#include <stdint.h>

#define MAX_PROGS 64 /* the kernel's limit per cgroup and attach type */
#ifndef BPF_F_PREORDER
#define BPF_F_PREORDER (1U << 6) /* Linux 6.15 */
#endif

/* The device programs on a cgroup, in order, and its attach flags. */
struct attached {
	uint32_t ids[MAX_PROGS];
	uint32_t n;
	uint32_t flags;
};

/* The device programs attached to cgfd (effective: inherited ones too). */
int cgprog_query(int cgfd, bool effective, struct attached *ret);
bool cgprog_has(const struct attached *a, uint32_t id);
/* Attaches prog_fd to cgfd; with replace_fd not -1, in that program's place (BPF_F_REPLACE). */
int cgprog_attach(int prog_fd, int cgfd, uint32_t flags, int replace_fd);
/* Detaches program prog_id from cgfd; 0 if it was not attached there. */
int cgprog_detach(uint32_t prog_id, int cgfd);
/* The ids in order and the flags in one number, never 0: cheap to compare often. */
uint64_t cgprog_digest(const struct attached *a);
/* cgprog_digest() of what cgprog_query() finds on cgfd. */
int cgprog_digest_of(int cgfd, bool effective, uint64_t *ret);

#endif
