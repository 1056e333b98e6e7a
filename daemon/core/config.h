/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgated's settings: built-in defaults, then the configuration file, then
 * the command line. A file key is named like the long option that sets the
 * same thing ("state-dir = /var/lib/devgate" is "--state-dir /var/lib/devgate"),
 * so both go through config_set() and are checked the same way.
 *
 * File format, one setting a line:  key = value
 * Blank lines and lines starting with '#' are ignored; a '#' after white
 * space starts a comment. A key may appear only once.
 */
#ifndef DEVGATE_CONFIG_H
#define DEVGATE_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "errors.h"

#define DG_DEFAULT_CONFIG "/etc/devgate/devgate.conf"

struct dg_config;

/* Fills c with the built-in defaults; -ENOMEM. */
int config_init(struct dg_config *c);
void config_free(struct dg_config *c);

/*
 * Sets key from its text form. Unknown key or bad value: DG_E_INVALID, with
 * a message that names neither the key's origin nor the key itself, so the
 * caller can prefix "FILE:LINE: key" or "--key".
 */
int config_set(struct dg_config *c, const char *key, const char *value, struct dg_error *err);
bool config_key_known(const char *key);

/* Applies config text; errors are DG_E_CONFIG "NAME:LINE: ...". */
int config_parse(struct dg_config *c, const char *name, const char *text, struct dg_error *err);
/* Reads and applies a file; a missing one is fine unless required. */
int config_load(struct dg_config *c, const char *path, bool required, struct dg_error *err);

/*
 * A reload: moves from's policy (gpu-allow, aliases, profiles,
 * device-allow) into c. The other keys stay as they are (they take effect
 * at the next start); those that differ are named in restart, ", " apart.
 */
void config_take_policy(struct dg_config *c, struct dg_config *from, char *restart, size_t len);

/* The effective settings, in the file format (every key, one a line). */
void config_print(const struct dg_config *c, FILE *f);

#endif
