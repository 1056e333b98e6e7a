/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output: every command builds one JSON result and renders it either as
 * text for people or, with --json, as the document itself. Errors too:
 * text on stderr, or {"error": {...}} on stdout with --json.
 */
#ifndef DEVGATE_OUTPUT_H
#define DEVGATE_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include <json-c/json.h>

#include "errors.h"

struct cli {
	const char *socket;
	bool json;
	const char *prog; /* for messages; NULL: "devgatectl" */
};

/* Prints err the way the user asked for; returns its exit code. */
int cli_fail(const struct cli *cli, const struct dg_error *err);
/* A usage error for command cmd; returns the usage exit code. */
int cli_usage(const struct cli *cli, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void print_json(json_object *o);

/* A text table with aligned columns. */
struct table;
struct table *table_new(size_t ncols, const char *const *header);
void table_add(struct table *t, const char *const *cells);
void table_print(struct table *t, FILE *f);
void table_free(struct table *t);

#endif
