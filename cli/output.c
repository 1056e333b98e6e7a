// SPDX-License-Identifier: Apache-2.0
/*
 * One output path for every command (see output.h): a JSON result rendered
 * as text or printed as is with --json, errors on stderr or as {"error"}
 * on stdout, and cli_exit(), the one place an exit status is made.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cleanup.h"
#include "output.h"

void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
}

void cli_print_error(const struct cli *cli, const struct dg_error *err)
{
	if (cli->json) {
		auto_json json_object *o = json_object_new_object();

		json_object_object_add(o, "error", dg_error_to_json(err));
		print_json(o);
	} else {
		fprintf(stderr, "%s: %s\n", cli->prog ? cli->prog : "devgatectl", err->message);
		if (dg_error_hint_text(err))
			fprintf(stderr, "hint: %s\n", dg_error_hint_text(err));
	}
}

int cli_error(struct cli *cli, const struct dg_error *err)
{
	if (err != &cli->err)
		cli->err = *err;
	if (!cli->err.code)
		cli->err.code = DG_E_INTERNAL;
	return -(cli->err.errnum > 0 ? cli->err.errnum : EINVAL);
}

int cli_usage(struct cli *cli, const char *cmd, const char *fmt, ...)
{
	struct dg_error err = { 0 };
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dg_error_set(&err, DG_E_INVALID, EINVAL, "%s%s%s", cmd ? cmd : "", cmd ? ": " : "", msg);
	if (cmd)
		dg_error_hint(&err, "see 'devgatectl %s --help'", cmd);
	else
		dg_error_hint(&err, "see 'devgatectl --help'");
	return cli_error(cli, &err);
}

int cli_exit(struct cli *cli, int r)
{
	if (r >= 0)
		return 0;
	if (!dg_error_is_set(&cli->err))
		dg_error_set(&cli->err, DG_E_INTERNAL, -r, "%s", strerror(-r));
	if (!cli->reported)
		cli_print_error(cli, &cli->err);
	return dg_code_info(cli->err.code)->exit_code;
}

struct table {
	size_t ncols;
	size_t nrows;
	size_t cap;   /* cells allocated (rows * ncols) */
	char **cells; /* nrows * ncols */
};

struct table *table_new(size_t ncols, const char *const *header)
{
	struct table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->ncols = ncols;
	table_add(t, header);
	return t;
}

void table_add(struct table *t, const char *const *cells)
{
	if (!t)
		return;
	if (array_reserve((void **)&t->cells, &t->cap, (t->nrows + 1) * t->ncols,
			  sizeof(*t->cells)) < 0)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = strdup(cells[i] ? cells[i] : "-");
	t->nrows++;
}

void table_print(struct table *t, FILE *f)
{
	size_t width[16] = { 0 };

	if (!t || t->ncols > 16)
		return;
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t len = s ? strlen(s) : 0;

			if (len > width[c])
				width[c] = len;
		}
	}
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];

			if (c + 1 == t->ncols)
				fprintf(f, "%s\n", s ? s : "");
			else
				fprintf(f, "%-*s  ", (int)width[c], s ? s : "");
		}
	}
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}
