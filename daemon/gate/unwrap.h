/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replace form's gates taken off a cgroup: each runtime program put
 * back in its gate's place (BPF_F_REPLACE). Private to gate/.
 */
#ifndef DEVGATE_UNWRAP_H
#define DEVGATE_UNWRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgprog.h"
#include "errors.h"
#include "pinned.h"

struct bpfgate;

/* Puts gate p's runtime program back in the gate's place on cgfd (cg_flags: its attach flags). */
int unwrap_restore(int cgfd, const struct pinned *p, uint32_t cg_flags);
/* Whether a gate of pins (PIN_GATE) is attached (now). */
bool unwrap_any(const struct pinned *pins, size_t n_pins, const struct attached *now);
/*
 * Every gate of pins attached to cgfd put back to its runtime program, and
 * its pin, slot and keeper's hold let go: the conversion to the beside
 * form, once the beside gate is last. dir: cgid's pin directory.
 */
int unwrap_gates(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		 const struct pinned *pins, size_t n_pins, struct dg_error *err);

#endif
