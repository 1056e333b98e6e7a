/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin's GPU policy from devgate.conf: which GPUs may be granted at all
 * (gpu-allow), names for vendor:product ids (alias) and named requests
 * (profile). Parsed with the configuration, applied to every inventory
 * (at start and at each rescan) and to every grant request.
 */
#ifndef DEVGATE_POLICY_H
#define DEVGATE_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "errors.h"
#include "gpu.h"

#define POLICY_NAME_MAX 64
#define POLICY_MAX_ALLOW 64
#define POLICY_MAX_NAMES 64

struct policy_alias {
	char name[POLICY_NAME_MAX];
	uint16_t vendor, device;
	char product[16]; /* "10de:2330" */
};

/* What a profile asks; empty strings and count 0 are "not given". */
struct policy_profile {
	char name[POLICY_NAME_MAX];
	unsigned int count;
	char arch[32];
	char model[128];
	char product[16];
	char alias[POLICY_NAME_MAX];
	char min_memory[32];
	char min_cc[16];
	bool shared;
};

struct dg_policy {
	uint32_t allow[POLICY_MAX_ALLOW]; /* vendor << 16 | device */
	size_t n_allow;			  /* 0: every GPU may be granted */
	struct policy_alias *aliases;
	size_t n_aliases, cap_aliases;
	struct policy_profile *profiles;
	size_t n_profiles, cap_profiles;
};

/* Frees p's aliases and profiles; p is then empty, which allows every GPU. */
void policy_free(struct dg_policy *p);

/*
 * Replaces the gpu-allow list with value, "10de:2330, 10de:20b0" (empty: no
 * list, every GPU may be granted). Returns 0, or a negative errno with err
 * set (DG_E_INVALID).
 */
int policy_set_allow(struct dg_policy *p, const char *value, struct dg_error *err);
/*
 * Adds alias name for value, VENDOR:PRODUCT (from "alias NAME = VALUE").
 * Returns 0, or a negative errno with err set; a name defined twice is refused.
 */
int policy_add_alias(struct dg_policy *p, const char *name, const char *value,
		     struct dg_error *err);
/*
 * Adds profile name with value's KEY=VALUE words (from "profile NAME = gpus=2
 * arch=ampere ..."); an alias it names must be defined before it. Returns 0,
 * or a negative errno with err set.
 */
int policy_add_profile(struct dg_policy *p, const char *name, const char *value,
		       struct dg_error *err);

/* Marks each GPU of inv excluded when gpu-allow leaves it out, and not excluded otherwise. */
void policy_apply(const struct dg_policy *p, struct dg_inventory *inv);

/*
 * The request a grant means once its profile and alias are expanded:
 * fields it sets itself win over the profile's. Strings point into g or p.
 */
struct policy_request {
	const char *selectors;
	unsigned int count;
	bool has_count;
	const char *model, *arch, *product, *min_memory, *min_cc;
	bool shared;
};

/* Returns whether devgate.conf defines profile name (otherwise a grant tries a MIG profile). */
bool policy_has_profile(const struct dg_policy *p, const char *name);

/*
 * Expands profile and alias (either may be NULL) into req: what req sets
 * itself wins over the profile, and a name alone asks for one GPU. Returns
 * 0, or a negative errno with err set for an unknown name or a product that
 * contradicts the alias.
 */
int policy_resolve(const struct dg_policy *p, const char *profile, const char *alias,
		   struct policy_request *req, struct dg_error *err);

/* Writes the gpu-allow list as the file has it, "10de:2330, 10de:20b0"; "" when none. */
void policy_allow_text(const struct dg_policy *p, char *buf, size_t len);
/* Writes every alias and profile to f, one devgate.conf line each ("alias NAME = ..."). */
void policy_print(const struct dg_policy *p, FILE *f);

#endif
