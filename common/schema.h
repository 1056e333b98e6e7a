/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One table per message shape, read by one encoder and one decoder.
 *
 * A schema lists the JSON fields of a C struct: name, type, where the
 * value lives (offsetof) and, for optional scalars, where its "present"
 * flag lives. dg_decode() refuses unknown fields, wrong types, missing
 * required fields and integers out of range; dg_encode() writes exactly the
 * fields the table names. The wire protocol (wire.c) defines every request,
 * reply and event this way, so daemon, CLI, hook and tests share one
 * definition.
 */
#ifndef DEVGATE_SCHEMA_H
#define DEVGATE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "errors.h"

/* Bump allocator: everything a decoded message points to, freed at once. */
struct dg_arena {
	struct dg_arena_chunk *head;
};

void *dg_arena_alloc(struct dg_arena *a, size_t size);
char *dg_arena_strdup(struct dg_arena *a, const char *s);
void dg_arena_free(struct dg_arena *a);

enum dg_ftype {
	DG_F_BOOL,  /* bool */
	DG_F_INT,   /* int64_t, within [min, max] when min < max */
	DG_F_STR,   /* const char *, NULL when absent */
	DG_F_ID,    /* uint64_t, as a decimal string (JSON numbers lose bits above 2^53) */
	DG_F_STRS,  /* const char **, count at n_off (size_t) */
	DG_F_OBJ,   /* struct described by sub, stored inline */
	DG_F_OBJS,  /* array of sub structs: pointer at off, count at n_off */
	DG_F_EMBED, /* sub's fields flattened into this object (no key) */
	DG_F_NUM,   /* double; written with 3 decimals (milliseconds of a second) */
};

#define DG_NO_FLAG SIZE_MAX

struct dg_schema;

struct dg_field {
	const char *name;
	enum dg_ftype type;
	bool required;
	size_t off;
	size_t has_off; /* BOOL/INT/OBJ/EMBED: bool set when present; DG_NO_FLAG: always */
	size_t n_off;	/* STRS/OBJS: element count */
	const struct dg_schema *sub;
	int64_t min, max;
};

struct dg_schema {
	const char *name; /* for error messages: "grant request" */
	size_t size;
	const struct dg_field *fields;
	size_t n_fields;
};

#define DG_SCHEMA(sname, type, table)                                     \
	{                                                                 \
		.name = (sname), .size = sizeof(type), .fields = (table), \
		.n_fields = sizeof(table) / sizeof((table)[0])            \
	}

/* Field constructors; st is the struct type, m the member. */
#define DG_BOOL(key, st, m)                                                         \
	{                                                                           \
		(key), DG_F_BOOL, false, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, 0 \
	}
#define DG_BOOL_OPT(key, st, m, has)                                                       \
	{                                                                                  \
		(key), DG_F_BOOL, false, offsetof(st, m), offsetof(st, has), 0, NULL, 0, 0 \
	}
#define DG_INT(key, st, m)                                                        \
	{                                                                         \
		(key), DG_F_INT, true, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, 0 \
	}
#define DG_INT_OPT(key, st, m, has, lo, hi)                                                     \
	{                                                                                       \
		(key), DG_F_INT, false, offsetof(st, m), offsetof(st, has), 0, NULL, (lo), (hi) \
	}
#define DG_NUM_OPT(key, st, m, has)                                                       \
	{                                                                                 \
		(key), DG_F_NUM, false, offsetof(st, m), offsetof(st, has), 0, NULL, 0, 0 \
	}
#define DG_STR(key, st, m)                                                        \
	{                                                                         \
		(key), DG_F_STR, true, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, 0 \
	}
#define DG_STR_OPT(key, st, m)                                                     \
	{                                                                          \
		(key), DG_F_STR, false, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, 0 \
	}
#define DG_ID(key, st, m)                                                        \
	{                                                                        \
		(key), DG_F_ID, true, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, 0 \
	}
#define DG_STRS(key, st, m, n)                                                                   \
	{                                                                                        \
		(key), DG_F_STRS, true, offsetof(st, m), DG_NO_FLAG, offsetof(st, n), NULL, 0, 0 \
	}
/* Optional arrays: left out of the JSON when empty (older peers never see them). */
#define DG_STRS_OPT(key, st, m, n)                                                                \
	{                                                                                         \
		(key), DG_F_STRS, false, offsetof(st, m), DG_NO_FLAG, offsetof(st, n), NULL, 0, 0 \
	}
#define DG_OBJS_OPT(key, st, m, n, s)                                                            \
	{                                                                                        \
		(key), DG_F_OBJS, false, offsetof(st, m), DG_NO_FLAG, offsetof(st, n), (s), 0, 0 \
	}
#define DG_OBJ(key, st, m, s)                                                    \
	{                                                                        \
		(key), DG_F_OBJ, true, offsetof(st, m), DG_NO_FLAG, 0, (s), 0, 0 \
	}
#define DG_OBJ_OPT(key, st, m, has, s)                                                   \
	{                                                                                \
		(key), DG_F_OBJ, false, offsetof(st, m), offsetof(st, has), 0, (s), 0, 0 \
	}
#define DG_OBJS(key, st, m, n, s)                                                               \
	{                                                                                       \
		(key), DG_F_OBJS, true, offsetof(st, m), DG_NO_FLAG, offsetof(st, n), (s), 0, 0 \
	}
#define DG_EMBED(st, m, s)                                                         \
	{                                                                          \
		NULL, DG_F_EMBED, false, offsetof(st, m), DG_NO_FLAG, 0, (s), 0, 0 \
	}
/* Embedded fields that may all be absent; has is set when any is present. */
#define DG_EMBED_OPT(st, m, has, s)                                                       \
	{                                                                                 \
		NULL, DG_F_EMBED, false, offsetof(st, m), offsetof(st, has), 0, (s), 0, 0 \
	}

/*
 * Fills out (schema->size bytes, zeroed first) from o. Strings and arrays
 * are copied into a, so out stays valid after o is freed. On error err
 * names the field ("args.count: must be a number").
 */
int dg_decode(const struct dg_schema *s, json_object *o, void *out, struct dg_arena *a,
	      struct dg_error *err);
/* A new object with the fields of in that s names. */
json_object *dg_encode(const struct dg_schema *s, const void *in);

#endif
