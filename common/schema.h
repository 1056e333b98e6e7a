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
 * definition. Lease records (daemon/lease/record.c) use the same tables with
 * a few more kinds of field, for C structs laid out for the daemon rather
 * than for the wire: fixed-size char arrays, 32-bit integers, names for
 * enum values, and the rules that let older records load (a default for a
 * key they lack, an older form of a value).
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
	/* Used by lease records, never by the wire. */
	DG_F_CHARS, /* char[width]: a string that must fit, NUL included */
	DG_F_ENUM,  /* an integer member (width bytes) written as names[value], read in any case */
	DG_F_INTS,  /* uint32_t[width / 4] in the struct, each in [min, max]; size_t count */
	DG_F_CONST, /* no member: the integer def, always written, and required on read */
};

/* Field flags (dg_field.flags). */
#define DG_OMIT_DEF (1u << 0) /* INT, ENUM: left out of the JSON when the value is def */
#define DG_NULL (1u << 1)     /* STR: NULL is written as null, and null is read as NULL */
#define DG_LINES (1u << 2)    /* STRS: also read from one string holding a line each */
#define DG_MASK (1u << 3)     /* INT: bits outside max are dropped on read, not refused */

/* Schema flags (dg_schema.flags). */
#define DG_S_OPEN (1u << 0)    /* unknown fields are ignored rather than refused */
#define DG_S_NO_NULL (1u << 1) /* null is a wrong type, except in DG_NULL fields */

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
	int64_t min, max; /* INT, INTS: range when min < max; OBJS, STRS: at most max if > 0;
			     STR: at most max bytes if > 0 */
	/* The rest is zero in the wire's tables. */
	size_t width;	    /* INT, ENUM: the member's size (0: 8); CHARS, INTS: the array's */
	size_t elem;	    /* STRS: each element a char[elem] in place of a char * */
	unsigned int flags; /* DG_OMIT_DEF, DG_NULL, DG_LINES, DG_MASK */
	int64_t def;	    /* INT, ENUM: the value when absent; CONST: the value */
	const char *with;   /* another field of the table: this one only goes with it */
	const char *const *names; /* ENUM: the name of each value, then NULL */
	const char *prefix;	  /* CHARS: written before the value, and required before it */
};

struct dg_schema {
	const char *name; /* for error messages: "grant request" */
	size_t size;
	const struct dg_field *fields;
	size_t n_fields;
	unsigned int flags; /* DG_S_* */
};

#define DG_SCHEMA(sname, type, table)                                     \
	{                                                                 \
		.name = (sname), .size = sizeof(type), .fields = (table), \
		.n_fields = sizeof(table) / sizeof((table)[0])            \
	}
/*
 * A stored record's schema: a field it does not know (written by a newer
 * version) is skipped, so a downgrade still loads the record; null is
 * refused where the table does not allow it.
 */
#define DG_RECORD_SCHEMA(sname, type, table)                                                      \
	{                                                                                         \
		.name = (sname), .size = sizeof(type), .fields = (table),                         \
		.n_fields = sizeof(table) / sizeof((table)[0]), .flags = DG_S_OPEN | DG_S_NO_NULL \
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
/* An optional string of at most max bytes. */
#define DG_STR_MAX(key, st, m, max)                                                    \
	{                                                                              \
		(key), DG_F_STR, false, offsetof(st, m), DG_NO_FLAG, 0, NULL, 0, (max) \
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
 * Record fields: the key, its type, the struct and member, then what else
 * the field needs as designated initializers (.required = true, .max = 255,
 * .sub = &schema, .flags = DG_OMIT_DEF, ...). The member's size is taken
 * from the struct. _HAS: an optional field with its "present" flag; _N: an
 * array (through a pointer) with its count; _INTS: an array in the struct.
 */
#define DG_FIELD(key, t, st, m, ...)                                                       \
	{                                                                                  \
		.name = (key), .type = (t), .off = offsetof(st, m), .has_off = DG_NO_FLAG, \
		.width = sizeof(((st *)0)->m), __VA_ARGS__                                 \
	}
#define DG_FIELD_HAS(key, t, st, m, has, ...)                                                     \
	{                                                                                         \
		.name = (key), .type = (t), .off = offsetof(st, m), .has_off = offsetof(st, has), \
		.width = sizeof(((st *)0)->m), __VA_ARGS__                                        \
	}
#define DG_FIELD_N(key, t, st, m, n, ...)                                                  \
	{                                                                                  \
		.name = (key), .type = (t), .off = offsetof(st, m), .has_off = DG_NO_FLAG, \
		.n_off = offsetof(st, n), __VA_ARGS__                                      \
	}
/* uint32_t integers in the struct's own array m, n of them. */
#define DG_FIELD_INTS(key, st, m, n, ...)                                                        \
	{                                                                                        \
		.name = (key), .type = DG_F_INTS, .off = offsetof(st, m), .has_off = DG_NO_FLAG, \
		.n_off = offsetof(st, n), .width = sizeof(((st *)0)->m), __VA_ARGS__             \
	}
/* A key with one value, such as a format version: value is written, and required. */
#define DG_CONST(key, value)                                                                \
	{                                                                                   \
		.name = (key), .type = DG_F_CONST, .required = true, .has_off = DG_NO_FLAG, \
		.def = (value)                                                              \
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
