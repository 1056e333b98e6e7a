/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which attached programs are devgate's, proven from the kernel, and the
 * repair of what lost pins broke. Private to gate/.
 */
#ifndef DEVGATE_OWN_H
#define DEVGATE_OWN_H

#include <stddef.h>
#include <stdint.h>

#include "cgprog.h"
#include "gate_int.h"
#include "pinned.h"

/*
 * Takes care of the programs attached to cgroup cgid (now) that pins does
 * not list but that are provably devgate's: re-pins its copies under dir
 * and refills their emptied slots; puts back the runtime program of an
 * orphan (a copy of maps no longer ours) or of a shared gate of an earlier
 * run. Returns how many programs it changed (the caller reads the pins
 * again), or -errno.
 */
int own_recover(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		const struct pinned *pins, size_t n_pins, const struct attached *now);
/*
 * Refills the emptied slot of every gate in pins with its runtime program,
 * which the keeper holds.
 */
void own_refill(const struct bpfgate *bg, uint64_t cgid, const char *dir, const struct pinned *pins,
		size_t n_pins);

#endif
