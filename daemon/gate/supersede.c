// SPDX-License-Identifier: Apache-2.0
/*
 * A runtime that replaces its device program (BPF_F_REPLACE) finds a gate
 * in its place and is refused; LXC then attaches the new program beside
 * the old one. This file keeps the evidence that the runtime moved on from
 * old to new, and judges it:
 *
 * - the asks: attaches that asked to replace old by new (attach events),
 *   a small ring whose oldest entry is overwritten;
 * - the owners: the process that kept a wrapped program open (LXC's
 *   monitor), looked up in /proc when devgated is idle, because the look
 *   costs more than the rest of a first grant.
 *
 * It only records and judges: it attaches, detaches and unpins nothing
 * (guard.c drops the superseded gate).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "progfd.h"
#include "supersede.h"

#define MAX_REPLACES 16
#define MAX_OWNERS 64
#define MAX_PENDING 32

/* The process that kept a runtime program open when devgate wrapped it. */
struct prog_owner {
	uint64_t cgid; /* 0: a free entry */
	uint32_t prog_id;
	struct progfd_proc proc;
};

/* A wrap whose runtime program's owner is yet to be looked for. */
struct pending_owner {
	uint64_t cgid;
	uint32_t prog_id;
	int cgfd;
};

/* An attach that asked to replace old_id by new_id. */
struct replace_ask {
	uint64_t cgid; /* 0: a free entry */
	uint32_t old_id;
	uint32_t new_id;
};

struct supersede {
	struct replace_ask replaces[MAX_REPLACES]; /* a ring: the oldest is overwritten */
	unsigned int replaces_next;
	struct prog_owner owners[MAX_OWNERS]; /* a ring, like replaces */
	unsigned int owners_next;
	struct pending_owner pending[MAX_PENDING];
	unsigned int n_pending;
};

int supersede_new(struct supersede **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void supersede_free(struct supersede *s)
{
	if (!s)
		return;
	for (unsigned int i = 0; i < s->n_pending; i++)
		safe_close(s->pending[i].cgfd);
	free(s);
}

void supersede_note_replace(struct supersede *s, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	if (!s)
		return;
	s->replaces[s->replaces_next++ % MAX_REPLACES] = (struct replace_ask){
		.cgid = cgid,
		.old_id = old_id,
		.new_id = new_id,
	};
}

bool supersede_pending(const struct supersede *s, uint64_t cgid)
{
	for (size_t i = 0; s && i < MAX_REPLACES; i++) {
		if (s->replaces[i].cgid == cgid)
			return true;
	}
	return false;
}

bool supersede_tracks(const struct supersede *s, uint64_t cgid)
{
	if (!s)
		return false;
	if (supersede_pending(s, cgid))
		return true;
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		if (s->owners[i].cgid == cgid)
			return true;
	}
	for (unsigned int i = 0; i < s->n_pending; i++) {
		if (s->pending[i].cgid == cgid)
			return true;
	}
	return false;
}

/* Remembers who keeps runtime program id open, if anyone (runc keeps nothing). */
static void find_owner(struct supersede *s, uint64_t cgid, int cgfd, uint32_t id)
{
	struct prog_owner o = { .cgid = cgid, .prog_id = id };
	size_t slot = s->owners_next++ % MAX_OWNERS; /* the oldest, if none is free */

	if (progfd_owner(cgfd, id, &o.proc) != 1)
		return;
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		if (!s->owners[i].cgid) {
			slot = i;
			break;
		}
	}
	s->owners[slot] = o;
}

/* Settles the pending lookups of cgid (0: all): looks for their owners, or, with drop, not. */
static void settle_pending(struct supersede *s, uint64_t cgid, bool drop)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < s->n_pending; i++) {
		struct pending_owner *p = &s->pending[i];

		if (cgid && p->cgid != cgid) {
			s->pending[k++] = *p;
			continue;
		}
		if (!drop)
			find_owner(s, p->cgid, p->cgfd, p->prog_id);
		safe_close(p->cgfd);
	}
	s->n_pending = k;
}

void supersede_look(struct supersede *s, uint64_t cgid)
{
	if (s)
		settle_pending(s, cgid, false);
}

/*
 * Only a runtime that moves to a new program (LXC) needs the answer, so
 * the look is put off until devgated is idle, or until a guard of the same
 * cgroup judges such a move. Without a spare fd it is done at once.
 */
void supersede_note_owner(struct supersede *s, uint64_t cgid, int cgfd, uint32_t id)
{
	int fd;

	if (!s)
		return;
	if (s->n_pending == MAX_PENDING)
		settle_pending(s, 0, false);
	fd = fcntl(cgfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		find_owner(s, cgid, cgfd, id);
		return;
	}
	s->pending[s->n_pending++] =
		(struct pending_owner){ .cgid = cgid, .prog_id = id, .cgfd = fd };
}

static bool prog_gone(uint32_t id)
{
	auto_close int fd = bpf_prog_get_fd_by_id(id);

	return fd < 0 && errno == ENOENT;
}

static bool asked_replace(const struct supersede *s, uint64_t cgid, uint32_t old_id,
			  uint32_t new_id)
{
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		const struct replace_ask *a = &s->replaces[i];

		if (a->cgid == cgid && a->old_id == old_id && a->new_id == new_id)
			return true;
	}
	return false;
}

void supersede_gone(struct supersede *s, uint64_t cgid, uint32_t id)
{
	for (size_t i = 0; s && i < MAX_OWNERS; i++) {
		if (s->owners[i].cgid == cgid && (!id || s->owners[i].prog_id == id))
			s->owners[i] = (struct prog_owner){ 0 };
	}
}

/* Whether the process that kept old open when it was wrapped now keeps new, not old. */
static bool owner_moved_on(const struct supersede *s, uint64_t cgid, uint32_t old_id,
			   uint32_t new_id)
{
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		const struct prog_owner *o = &s->owners[i];

		if (o->cgid == cgid && o->prog_id == old_id)
			return progfd_holds(&o->proc, old_id) == 0 &&
			       progfd_holds(&o->proc, new_id) == 1;
	}
	return false;
}

/* Whether new is of old's type and creator, and loaded no earlier than old. */
static bool same_runtime_newer(uint32_t old_id, uint32_t new_id)
{
	struct bpf_prog_info a = { 0 }, b = { 0 };
	uint32_t la = sizeof(a), lb = sizeof(b);
	auto_close int old_fd = bpf_prog_get_fd_by_id(old_id);
	auto_close int new_fd = bpf_prog_get_fd_by_id(new_id);

	if (old_fd < 0 || new_fd < 0 || bpf_obj_get_info_by_fd(old_fd, &a, &la) < 0 ||
	    bpf_obj_get_info_by_fd(new_fd, &b, &lb) < 0)
		return false;
	return a.type == b.type && a.created_by_uid == b.created_by_uid &&
	       b.load_time >= a.load_time;
}

/*
 * Whether the runtime moved from old to new. Its own word is needed: an
 * attach that asked to replace old by new (attach events), or the process
 * that kept old open now keeping new instead (LXC's monitor). A program
 * merely attached later proves nothing: it may be meant to add to old.
 */
static bool superseded(const struct supersede *s, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	if (!asked_replace(s, cgid, old_id, new_id) && !owner_moved_on(s, cgid, old_id, new_id))
		return false;
	return same_runtime_newer(old_id, new_id);
}

const struct pinned *supersede_find(const struct supersede *s, uint64_t cgid,
				    const struct pinned *pins, size_t n_pins,
				    const struct attached *now, uint32_t *new_id)
{
	for (size_t i = 0; s && i < n_pins; i++) {
		if (pins[i].kind != PIN_GATE || !cgprog_has(now, pins[i].id))
			continue;
		for (size_t j = 0; j < n_pins; j++) {
			if (j == i || pins[j].kind != PIN_GATE || !cgprog_has(now, pins[j].id) ||
			    !superseded(s, cgid, pins[i].orig_id, pins[j].orig_id))
				continue;
			*new_id = pins[j].orig_id;
			return &pins[i];
		}
	}
	return NULL;
}

/* An ask is kept while old's gate stands and new may still be attached. */
void supersede_prune(struct supersede *s, uint64_t cgid, const struct pinned *pins, size_t n_pins,
		     const struct attached *now)
{
	for (size_t i = 0; s && i < MAX_REPLACES; i++) {
		struct replace_ask *a = &s->replaces[i];
		const struct pinned *old_gate = pinned_gate_for(pins, n_pins, a->old_id);
		const struct pinned *new_gate = pinned_gate_for(pins, n_pins, a->new_id);

		if (a->cgid != cgid)
			continue;
		if (old_gate && cgprog_has(now, old_gate->id) &&
		    !(new_gate && cgprog_has(now, new_gate->id)) && !prog_gone(a->new_id))
			continue;
		*a = (struct replace_ask){ 0 };
	}
}

void supersede_forget(struct supersede *s, uint64_t cgid)
{
	if (!s)
		return;
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		if (s->replaces[i].cgid == cgid)
			s->replaces[i] = (struct replace_ask){ 0 };
	}
	settle_pending(s, cgid, true);
	supersede_gone(s, cgid, 0);
}
