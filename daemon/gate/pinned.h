/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate's programs on one cgroup, as guard.c sees them, and the pins of
 * per-cgroup copies under PIN_ROOT/cg/CGID (see bpfgate.h's pin layout).
 * Private to gate/.
 */
#ifndef DEVGATE_PINNED_H
#define DEVGATE_PINNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pin_kind {
	PIN_GATE,    /* a gate standing in for a runtime program */
	PIN_DEFAULT, /* a gate on a cgroup that had no program: the default policy */
	PIN_TALLY,
	PIN_BESIDE, /* the shared beside gate, after the runtime's programs */
	PIN_MARK,   /* its lookout, pre-order */
};

/*
 * One of devgate's programs on a cgroup: a copy found by its pin, or a
 * shared program found attached (shared; its slot read from the storage).
 */
struct pinned {
	enum pin_kind kind;
	uint32_t id;	  /* the program's id */
	uint32_t orig_id; /* PIN_GATE: the runtime program it stands in for */
	bool shared;
	uint32_t set, slot; /* shared PIN_GATE: where orig is */
};

/* PIN_ROOT/cg/CGID, the directory of cgid's copies' pins. */
int pinned_dir(const char *pin_root, uint64_t cgid, char *buf, size_t len);
/* DIR/NAME; -ENAMETOOLONG when it does not fit. */
int pinned_path(char *buf, size_t len, const char *dir, const char *name);
/* The copies pinned in dir (none when it does not exist). */
int pinned_read_dir(const char *dir, struct pinned *out, size_t max, size_t *ret_n);
/* The entry of program id, or NULL. */
const struct pinned *pinned_find(const struct pinned *pins, size_t n, uint32_t id);
/* The gate that stands in for runtime program orig_id, or NULL. */
const struct pinned *pinned_gate_for(const struct pinned *pins, size_t n, uint32_t orig_id);
/* Pins fd as DIR/NAME, in place of a stale pin of that name. */
int pinned_pin(int fd, const char *dir, const char *name);
/* Removes DIR/NAME; a pin already gone is fine. */
void pinned_unpin_name(const char *dir, const char *name);
/* Removes a copy's pins (a gate's slot too); a shared program has none. */
void pinned_unpin(const char *dir, const struct pinned *p);

#endif
