/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v1 devices lists: what a list allows, and rules written to a
 * devices cgroup. A rule is the kernel's text, "c 195:0 rw". The callers
 * (grant/, watch/) decide which rules a container holds.
 */
#ifndef DEVGATE_DEVLIST_H
#define DEVGATE_DEVLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "sys/cgroup1.h"

#define DEVLIST_RULE_MAX 32

/* Reads the devices.list of the v1 cgroup at path (below root). */
int devlist_read(const struct cg1root *root, const char *path, char **ret);

/*
 * The rule that adds to list what it lacks for the node (block or char,
 * major:minor, DG_ACC_* bits acc): 1 with the rule in out, 0 when the list
 * allows it all already, -EINVAL for a rule or list that does not parse.
 */
int devlist_missing(const char *list, bool block, uint32_t major, uint32_t minor, uint32_t acc,
		    char out[DEVLIST_RULE_MAX]);
/* 1 when list allows all of rule, 0 when not, -EINVAL for a bad rule. */
int devlist_allows(const char *list, const char *rule);

/*
 * Allows rule in the cgroup at path and in each descendant that lacks it
 * (an allow does not reach down in v1). On failure, what this call wrote is
 * denied again, and err names the cgroup that refused.
 */
int devlist_allow(const struct cg1root *root, const char *path, const char *rule,
		  struct dg_error *err);
/* Denies rule in the cgroup at path; the kernel takes it from descendants too. */
int devlist_deny(const struct cg1root *root, const char *path, const char *rule);

#endif
