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
	unsigned int timeout_s; /* connect and reply; 0: CLIENT_TIMEOUT_S */
	bool json;
	const char *prog;    /* for messages; NULL: "devgatectl" */
	struct dg_error err; /* why the command failed */
	bool reported;	     /* the command printed its own outcome (doctor's report) */
};

/*
 * The CLI's return convention: every function returns 0 or a negative
 * errno and leaves the why in cli->err; cli_exit() alone, called from
 * main(), prints it and turns it into the exit status.
 */
int cli_error(struct cli *cli, const struct dg_error *err);
/* A usage error for command cmd (NULL: devgatectl itself); -EINVAL. */
int cli_usage(struct cli *cli, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int cli_exit(struct cli *cli, int r);
/* Prints err the way the user asked for (text on stderr, or JSON). */
void cli_print_error(const struct cli *cli, const struct dg_error *err);
void print_json(json_object *o);

/* A text table with aligned columns. */
struct table;
struct table *table_new(size_t ncols, const char *const *header);
void table_add(struct table *t, const char *const *cells);
void table_print(struct table *t, FILE *f);
void table_free(struct table *t);

#endif
