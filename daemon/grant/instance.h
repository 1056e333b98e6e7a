/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grants of NVIDIA MIG instances: grant --gpu GPU:GI. An instance is held by
 * one lease at a time; a lease holding an instance of a GPU and one holding
 * the whole GPU exclude each other.
 */
#ifndef DEVGATE_INSTANCE_H
#define DEVGATE_INSTANCE_H

#include <stdbool.h>

#include "core/daemon.h"
#include "wire.h"

/* Whether a --gpu list names MIG instances ("0:1"), not whole GPUs. */
bool instance_spec(const char *spec);

/*
 * Adds the instances spec names to next (a lease not in the table), each
 * checked against what the other leases hold; their GPUs' UUIDs go to
 * out->granted. DG_E_UNAVAILABLE (exit 8) names the holder of a busy one.
 */
int instance_add(struct daemon *d, struct lease *next, const char *spec, bool shared,
		 struct dg_grant_reply *out, struct dg_arena *a, struct dg_error *err);

/* grant --profile NAME where devgate.conf defines no NAME: a MIG profile may be meant. */
bool instance_profile_request(const struct daemon *d, const struct dg_grant_req *g);

/*
 * grant --profile NAME [--gpus N] where NAME is no devgate.conf profile but a
 * MIG profile ("1g.18gb", NVML's name): N free instances of it, one per GPU,
 * as a --gpu list in *spec. *spec NULL when NAME is not a MIG profile here.
 */
int instance_by_profile(struct daemon *d, const char *name, unsigned int count, char **spec,
			struct dg_arena *a, struct dg_error *err);

/*
 * grant --wait of instances or of a MIG profile: 1 when g asks for them and
 * could be served once their holders let go, 0 when g asks for no instance,
 * <0 (DG_E_NO_GPU) when it never could.
 */
int instance_wait_check(struct daemon *d, const struct dg_grant_req *g, struct dg_error *err);

/* Marks in drop[] the lease's instances spec names; DG_E_NOT_GRANTED for one it lacks. */
int instance_select(struct daemon *d, const struct lease *l, const char *spec, bool *drop,
		    struct dg_error *err);

#endif
