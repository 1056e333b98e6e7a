/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device programs in effect on a cgroup that are not devgate's: who else
 * may deny a device there (grant/proof.c names them), and one number for
 * the set of programs in effect, to tell when it changed. Implemented in
 * own.c, which proves whose a program is.
 */
#ifndef DEVGATE_FOREIGN_H
#define DEVGATE_FOREIGN_H

#include <stddef.h>
#include <stdint.h>

struct bpfgate;
struct cgroot;

struct foreign_prog {
	uint32_t id;
	char name[16];	  /* the name the program was loaded with; may be empty */
	char cgroup[256]; /* v2 path of the cgroup it is attached to */
};

/*
 * Writes to ret (up to max, *ret_n of them) the device programs attached to
 * the cgroup at path (v2, from root) and to each of its ancestors that are
 * not provably devgate's, nearest first.
 */
int foreign_progs(struct bpfgate *bg, const struct cgroot *root, const char *path,
		  struct foreign_prog *ret, size_t max, size_t *ret_n);

/*
 * The device programs in effect on cgfd (its own and its ancestors', in
 * order) in one number, never 0.
 */
int foreign_effective_digest(int cgfd, uint64_t *ret);

#endif
