/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime's own word that it replaced one of its programs by another
 * (LXC): the attaches that asked to replace, and the processes that keep a
 * wrapped program open. Private to gate/; guard.c acts on the verdicts.
 */
#ifndef DEVGATE_SUPERSEDE_H
#define DEVGATE_SUPERSEDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgprog.h"
#include "pinned.h"

struct supersede;

/* Every function below accepts a NULL record and then knows nothing. */
int supersede_new(struct supersede **ret);
void supersede_free(struct supersede *s);

/* An attach on cgid asked to replace runtime program old_id by new_id. */
void supersede_note_replace(struct supersede *s, uint64_t cgid, uint32_t old_id, uint32_t new_id);
/* Runtime program id on cgfd was just wrapped: who keeps it open is looked for later. */
void supersede_note_owner(struct supersede *s, uint64_t cgid, int cgfd, uint32_t id);
/* Looks for the owners noted since the last call, of cgid (0: of every cgroup). */
void supersede_look(struct supersede *s, uint64_t cgid);
/* Whether an attach on cgid asked to replace a program, and the ask still stands. */
bool supersede_pending(const struct supersede *s, uint64_t cgid);
/* Whether anything is on record for cgid: a replace asked, an owner kept or still to look for. */
bool supersede_tracks(const struct supersede *s, uint64_t cgid);
/*
 * The first attached gate in pins whose runtime program another attached
 * gate's program supersedes (*new_id: that program), or NULL.
 */
const struct pinned *supersede_find(const struct supersede *s, uint64_t cgid,
				    const struct pinned *pins, size_t n_pins,
				    const struct attached *now, uint32_t *new_id);
/* Drops the asks of cgid that can no longer be acted on. */
void supersede_prune(struct supersede *s, uint64_t cgid, const struct pinned *pins, size_t n_pins,
		     const struct attached *now);
/* Runtime program id of cgid was let go: its owner no longer matters. */
void supersede_gone(struct supersede *s, uint64_t cgid, uint32_t id);
/* Forgets everything about cgid (its guard is removed). */
void supersede_forget(struct supersede *s, uint64_t cgid);

#endif
