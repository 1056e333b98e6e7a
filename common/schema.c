// SPDX-License-Identifier: Apache-2.0
/*
 * The one JSON encoder and decoder of devgate (see schema.h): a table of
 * fields per C struct, walked to fill the struct from JSON or JSON from the
 * struct, for wire messages (wire.c) and lease records (daemon/lease/
 * record.c) alike, and the arena a decoded message lives in. It knows no
 * message: what a field means is its table's business, and no other code
 * may read or write their keys by hand.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "schema.h"

struct dg_arena_chunk {
	struct dg_arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

#define ARENA_CHUNK 4096

void *dg_arena_alloc(struct dg_arena *a, size_t size)
{
	struct dg_arena_chunk *c = a->head;
	size_t need = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t);

	if (!c || c->cap - c->used < need) {
		size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap * sizeof(max_align_t));
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	c->used += need;
	return memset(&c->data[c->used - need], 0, size);
}

char *dg_arena_strdup(struct dg_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = dg_arena_alloc(a, n);

	return d ? memcpy(d, s, n) : NULL;
}

void dg_arena_free(struct dg_arena *a)
{
	while (a->head) {
		struct dg_arena_chunk *next = a->head->next;

		free(a->head);
		a->head = next;
	}
}

#define AT(base, off, type) ((type *)((char *)(base) + (off)))
#define CAT(base, off, type) ((const type *)((const char *)(base) + (off)))

static const char *type_word(enum dg_ftype t)
{
	switch (t) {
	case DG_F_BOOL:
		return "a boolean";
	case DG_F_INT:
		return "an integer";
	case DG_F_NUM:
		return "a number";
	case DG_F_STR:
		return "a string";
	case DG_F_ID:
		return "a decimal string";
	case DG_F_STRS:
		return "an array of strings";
	case DG_F_OBJS:
		return "an array of objects";
	case DG_F_CHARS:
	case DG_F_ENUM:
		return "a string";
	case DG_F_INTS:
		return "an array of integers";
	case DG_F_CONST:
		return "an integer";
	default:
		return "an object";
	}
}

static json_type json_type_of(enum dg_ftype t)
{
	switch (t) {
	case DG_F_BOOL:
		return json_type_boolean;
	case DG_F_INT:
	case DG_F_CONST:
		return json_type_int;
	case DG_F_NUM:
		return json_type_double;
	case DG_F_STR:
	case DG_F_ID:
	case DG_F_CHARS:
	case DG_F_ENUM:
		return json_type_string;
	case DG_F_STRS:
	case DG_F_OBJS:
	case DG_F_INTS:
		return json_type_array;
	default:
		return json_type_object;
	}
}

/*
 * An integer member of f->width bytes (a record's uint32_t, int, bool-sized
 * enum); the wire's are int64_t (width 0). A 4-byte member is signed when
 * its range starts below 0. memcpy, so any member type reads the same.
 */
static int64_t load_int(const struct dg_field *f, const void *p)
{
	uint8_t u8;
	uint32_t u32;
	int32_t i32;
	int64_t i64;

	switch (f->width) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 4:
		if (f->min < 0) {
			memcpy(&i32, p, 4);
			return i32;
		}
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&i64, p, 8);
		return i64;
	}
}

static void store_int(const struct dg_field *f, void *p, int64_t x)
{
	uint8_t u8 = (uint8_t)x;
	uint32_t u32 = (uint32_t)x;

	if (f->width == 1)
		memcpy(p, &u8, 1);
	else if (f->width == 4)
		memcpy(p, &u32, 4);
	else
		memcpy(p, &x, 8);
}

/* The field of s itself (not of an embedded struct) called name. */
static const struct dg_field *own_field(const struct dg_schema *s, const char *name)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		if (s->fields[i].name && strcmp(s->fields[i].name, name) == 0)
			return &s->fields[i];
	}
	return NULL;
}

/*
 * The field called name, looking through embedded structs: *base is the
 * offset of the struct that holds it, *flag the "present" flag of an
 * optional embedded struct on the way (DG_NO_FLAG if none).
 */
static const struct dg_field *find_field(const struct dg_schema *s, const char *name, size_t *base,
					 size_t *flag)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i], *e;
		size_t inner = 0, inner_flag = DG_NO_FLAG;

		if (f->type != DG_F_EMBED) {
			if (strcmp(f->name, name) != 0)
				continue;
			*base = 0;
			*flag = DG_NO_FLAG;
			return f;
		}
		e = find_field(f->sub, name, &inner, &inner_flag);
		if (!e)
			continue;
		*base = f->off + inner;
		*flag = f->has_off != DG_NO_FLAG   ? f->has_off
			: inner_flag != DG_NO_FLAG ? f->off + inner_flag
						   : DG_NO_FLAG;
		return e;
	}
	return NULL;
}

/* Whether o has any field of s (an optional embedded struct is there). */
static bool any_field(const struct dg_schema *s, json_object *o)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i];

		if (f->type == DG_F_EMBED ? any_field(f->sub, o)
					  : json_object_object_get_ex(o, f->name, NULL))
			return true;
	}
	return false;
}

struct decoder {
	const char *top; /* the schema's name, first in every message */
	struct dg_arena *a;
	struct dg_error *err;
	char path[256];
};

static int decode_obj(struct decoder *dc, const struct dg_schema *s, json_object *o, void *out);

__attribute__((format(printf, 2, 3))) static int bad(struct decoder *dc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_error_set(dc->err, DG_E_PROTOCOL, EPROTO, "%s: %s%s%s", dc->top, dc->path,
			    dc->path[0] ? ": " : "", msg);
}

/* Extends the error path while decoding below a field; restored by caller. */
static size_t path_push(struct decoder *dc, const char *name, long idx)
{
	size_t len = strlen(dc->path);

	if (idx >= 0)
		snprintf(dc->path + len, sizeof(dc->path) - len, "%s[%ld]", name, idx);
	else
		snprintf(dc->path + len, sizeof(dc->path) - len, "%s%s", len ? "." : "", name);
	return len;
}

/*
 * The integer v, within f's range and fitting a member of width bytes (0:
 * int64_t). With DG_MASK the range's max is a mask: bits outside it are
 * dropped, so a newer writer's bits do not make the value unreadable.
 */
static int read_int(struct decoder *dc, const struct dg_field *f, json_object *v, size_t width,
		    int64_t *ret)
{
	int64_t x = json_object_get_int64(v);
	bool fits = width != 4 || (f->min < 0 ? x >= INT32_MIN && x <= INT32_MAX
					      : x >= 0 && x <= (int64_t)UINT32_MAX);

	/* json-c clamps what does not fit; such numbers are never meant. */
	if (x == INT64_MAX || x == INT64_MIN || !fits || ((f->flags & DG_MASK) && x < 0))
		return bad(dc, "'%s' is out of range", f->name);
	if (f->flags & DG_MASK) {
		x &= f->max;
	} else if (f->min < f->max && (x < f->min || x > f->max)) {
		char range[64];

		if (f->max == INT64_MAX)
			snprintf(range, sizeof(range), " (%lld or more)", (long long)f->min);
		else
			snprintf(range, sizeof(range), " (%lld to %lld)", (long long)f->min,
				 (long long)f->max);
		return bad(dc, "'%s' is out of range%s", f->name, range);
	}
	*ret = x;
	return 0;
}

static int decode_int(struct decoder *dc, const struct dg_field *f, json_object *v, void *p)
{
	int64_t x = 0;
	int r = read_int(dc, f, v, f->width, &x);

	if (r == 0)
		store_int(f, p, x);
	return r;
}

/* A string into a char[cap], after f's prefix (which must be there). */
static int decode_chars(struct decoder *dc, const struct dg_field *f, json_object *v, char *p,
			size_t cap)
{
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	size_t pre = f->prefix ? strlen(f->prefix) : 0;

	if (strlen(s) != len)
		return bad(dc, "'%s' contains a NUL character", f->name);
	if (pre && strncmp(s, f->prefix, pre) != 0)
		return bad(dc, "'%s' must start with %s", f->name, f->prefix);
	if (len - pre >= cap)
		return bad(dc, "'%s' is longer than %zu bytes", f->name, pre + cap - 1);
	memcpy(p, s + pre, len - pre + 1);
	return 0;
}

/* One of f->names, matched regardless of case, stored as its index. */
static int decode_enum(struct decoder *dc, const struct dg_field *f, json_object *v, void *p)
{
	const char *s = json_object_get_string(v);
	char list[128] = "";
	size_t len = 0;

	for (size_t i = 0; f->names[i]; i++) {
		if (strcasecmp(s, f->names[i]) == 0) {
			store_int(f, p, (int64_t)i);
			return 0;
		}
		len += (size_t)snprintf(list + len, len < sizeof(list) ? sizeof(list) - len : 0,
					"%s%s", i ? ", " : "", f->names[i]);
	}
	return bad(dc, "'%s' must be one of %s", f->name, list);
}

/* uint32_t integers into the array in place, at most as many as it holds. */
static int decode_ints(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	size_t n = json_object_array_length(v), cap = f->width / sizeof(uint32_t);
	int r = 0;

	if (n > cap)
		return bad(dc, "'%s' has more than %zu elements", f->name, cap);
	for (size_t i = 0; i < n && r == 0; i++) {
		json_object *e = json_object_array_get_idx(v, i);
		size_t len = strlen(dc->path);
		int64_t x = 0;

		snprintf(dc->path + len, sizeof(dc->path) - len, "%s%s[%zu]", len ? "." : "",
			 f->name, i);

		if (!json_object_is_type(e, json_type_int))
			r = bad(dc, "must be an integer");
		else
			r = read_int(dc, f, e, sizeof(uint32_t), &x);
		if (r == 0)
			AT(base, f->off, uint32_t)[i] = (uint32_t)x;
		dc->path[len] = '\0';
	}
	*AT(base, f->n_off, size_t) = n;
	return r;
}

static int decode_str(struct decoder *dc, const struct dg_field *f, json_object *v, const char **p)
{
	const char *s = json_object_get_string(v);

	/* An embedded NUL would silently cut the string short. */
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return bad(dc, "'%s' contains a NUL character", f->name);
	if (f->type == DG_F_STR && f->max > 0 && strlen(s) > (size_t)f->max)
		return bad(dc, "'%s' is longer than %lld bytes", f->name, (long long)f->max);
	*p = dg_arena_strdup(dc->a, s);
	return *p ? 0 : dg_error_set(dc->err, DG_E_INTERNAL, ENOMEM, "out of memory");
}

static int decode_id(struct decoder *dc, const struct dg_field *f, json_object *v, uint64_t *p)
{
	const char *s = json_object_get_string(v);
	char *end;

	errno = 0;
	*p = strtoull(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end || errno)
		return bad(dc, "'%s' must be %s", f->name, "a decimal string");
	if (f->min > 0 && *p < (uint64_t)f->min)
		return bad(dc, "'%s' must be at least %lld", f->name, (long long)f->min);
	return 0;
}

/* "a\nb\n" as ["a", "b"]: the older form of a list of paths; empty lines are skipped. */
static json_object *lines_array(const char *s)
{
	json_object *a = json_object_new_array();

	while (a && *s) {
		size_t n = strcspn(s, "\n");

		if (n)
			json_object_array_add(a, json_object_new_string_len(s, (int)n));
		s += n + (s[n] == '\n');
	}
	return a;
}

static int decode_array(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	size_t n = json_object_array_length(v);
	size_t elem = f->type != DG_F_STRS ? f->sub->size : f->elem ? f->elem : sizeof(char *);
	char *items;
	int r = 0;

	if (f->max > 0 && n > (size_t)f->max)
		return bad(dc, "'%s' has more than %lld elements", f->name, (long long)f->max);
	items = n ? dg_arena_alloc(dc->a, n * elem) : NULL;
	if (n && !items)
		return dg_error_set(dc->err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && r == 0; i++) {
		json_object *e = json_object_array_get_idx(v, i);
		size_t len = path_push(dc, f->name, (long)i);

		if (f->type == DG_F_STRS && !json_object_is_type(e, json_type_string))
			r = bad(dc, "must be a string");
		else if (f->type == DG_F_STRS && f->elem)
			r = decode_chars(dc, f, e, items + i * elem, f->elem);
		else if (f->type == DG_F_STRS)
			r = decode_str(dc, f, e, (const char **)(items + i * elem));
		else if (!json_object_is_type(e, json_type_object))
			r = bad(dc, "must be an object");
		else
			r = decode_obj(dc, f->sub, e, items + i * elem);
		dc->path[len] = '\0';
	}
	*AT(base, f->off, void *) = items;
	*AT(base, f->n_off, size_t) = n;
	return r;
}

/* A DG_LINES list in its older form, one string: read as the array of its lines. */
static int decode_lines(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	json_object *a;
	int r;

	if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
		return bad(dc, "'%s' contains a NUL character", f->name);
	a = lines_array(json_object_get_string(v));
	if (!a)
		return dg_error_set(dc->err, DG_E_INTERNAL, ENOMEM, "out of memory");
	r = decode_array(dc, f, a, base);
	json_object_put(a);
	return r;
}

static int decode_field(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	size_t len;
	int r;

	bool lines = (f->flags & DG_LINES) && json_object_is_type(v, json_type_string);

	if (!json_object_is_type(v, json_type_of(f->type)) && !lines &&
	    !(f->type == DG_F_NUM && json_object_is_type(v, json_type_int)))
		return bad(dc, "'%s' must be %s", f->name, type_word(f->type));
	if (f->has_off != DG_NO_FLAG)
		*AT(base, f->has_off, bool) = true;
	if (lines)
		return decode_lines(dc, f, v, base);
	switch (f->type) {
	case DG_F_BOOL:
		*AT(base, f->off, bool) = json_object_get_boolean(v);
		return 0;
	case DG_F_INT:
		return decode_int(dc, f, v, AT(base, f->off, int64_t));
	case DG_F_NUM: {
		/* memcpy, not a cast: a double's bytes, wherever the field is. */
		double x = json_object_get_double(v);

		memcpy((char *)base + f->off, &x, sizeof(x));
		return 0;
	}
	case DG_F_STR:
		return decode_str(dc, f, v, AT(base, f->off, const char *));
	case DG_F_ID:
		return decode_id(dc, f, v, AT(base, f->off, uint64_t));
	case DG_F_CHARS:
		return decode_chars(dc, f, v, AT(base, f->off, char), f->width);
	case DG_F_ENUM:
		return decode_enum(dc, f, v, AT(base, f->off, void));
	case DG_F_INTS:
		return decode_ints(dc, f, v, base);
	case DG_F_CONST:
		if (json_object_get_int64(v) != f->def)
			return bad(dc, "'%s' %lld is not supported (only %lld)", f->name,
				   (long long)json_object_get_int64(v), (long long)f->def);
		return 0;
	case DG_F_OBJ:
		len = path_push(dc, f->name, -1);
		r = decode_obj(dc, f->sub, v, AT(base, f->off, void));
		dc->path[len] = '\0';
		return r;
	default:
		return decode_array(dc, f, v, base);
	}
}

static int check_required(struct decoder *dc, const struct dg_schema *s, json_object *o)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i];
		int r = 0;

		if (f->type == DG_F_EMBED) {
			if (f->has_off == DG_NO_FLAG || any_field(f->sub, o))
				r = check_required(dc, f->sub, o);
		} else if (f->required && !json_object_object_get_ex(o, f->name, NULL) &&
			   (!f->with || json_object_object_get_ex(o, f->with, NULL))) {
			r = bad(dc, "'%s' is missing", f->name);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The value of every field absent from the JSON that has a default other than 0. */
static void set_defaults(const struct dg_schema *s, void *out)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i];

		if (f->type == DG_F_EMBED)
			set_defaults(f->sub, AT(out, f->off, void));
		else if (f->def && (f->type == DG_F_INT || f->type == DG_F_ENUM))
			store_int(f, AT(out, f->off, void), f->def);
	}
}

static int decode_obj(struct decoder *dc, const struct dg_schema *s, json_object *o, void *out)
{
	memset(out, 0, s->size);
	set_defaults(s, out);
	json_object_object_foreach (o, key, val) {
		size_t base = 0, flag = DG_NO_FLAG;
		const struct dg_field *f = find_field(s, key, &base, &flag);
		int r;

		if (!f && (s->flags & DG_S_OPEN))
			continue;
		if (!f)
			return bad(dc, "unknown field '%s'", key);
		/* JSON null reads as absent, as for optional fields left out. */
		if (json_object_is_type(val, json_type_null) && (s->flags & DG_S_NO_NULL) &&
		    !(f->flags & DG_NULL))
			return bad(dc, "'%s' must be %s", f->name, type_word(f->type));
		if (json_object_is_type(val, json_type_null))
			continue;
		/* Read only with the field it goes with, as it is written. */
		if (f->with && !json_object_object_get_ex(o, f->with, NULL))
			continue;
		if (flag != DG_NO_FLAG)
			*AT(out, flag, bool) = true;
		r = decode_field(dc, f, val, (char *)out + base);
		if (r < 0)
			return r;
	}
	return check_required(dc, s, o);
}

int dg_decode(const struct dg_schema *s, json_object *o, void *out, struct dg_arena *a,
	      struct dg_error *err)
{
	struct decoder dc = { .top = s->name, .a = a, .err = err };

	if (!json_object_is_type(o, json_type_object))
		return dg_error_set(err, DG_E_PROTOCOL, EPROTO, "%s must be an object", s->name);
	return decode_obj(&dc, s, o, out);
}

static void encode_fields(const struct dg_schema *s, const void *in, json_object *o);

static json_object *encode_array(const struct dg_field *f, const void *in)
{
	json_object *a = json_object_new_array();
	size_t n = *CAT(in, f->n_off, size_t);
	const char *items = f->type == DG_F_INTS ? NULL : *CAT(in, f->off, char *);

	for (size_t i = 0; i < n; i++) {
		if (f->type == DG_F_INTS) {
			json_object_array_add(a,
					      json_object_new_int64(CAT(in, f->off, uint32_t)[i]));
		} else if (f->type == DG_F_STRS && f->elem) {
			const char *s = items + i * f->elem;

			json_object_array_add(
				a, json_object_new_string_len(s, (int)strnlen(s, f->elem)));
		} else if (f->type == DG_F_STRS) {
			const char *s = ((const char *const *)(const void *)items)[i];

			json_object_array_add(a, json_object_new_string(s ? s : ""));
		} else {
			json_object_array_add(a, dg_encode(f->sub, items + i * f->sub->size));
		}
	}
	return a;
}

/* A char array, after f's prefix. */
static json_object *encode_chars(const struct dg_field *f, const char *p)
{
	int len = (int)strnlen(p, f->width);
	char *s = NULL;
	json_object *v;

	if (!f->prefix)
		return json_object_new_string_len(p, len);
	if (asprintf(&s, "%s%.*s", f->prefix, len, p) < 0)
		return NULL;
	v = json_object_new_string(s);
	free(s);
	return v;
}

static json_object *encode_enum(const struct dg_field *f, const void *p)
{
	int64_t x = load_int(f, p);

	for (int64_t i = 0; f->names[i]; i++) {
		if (i == x)
			return json_object_new_string(f->names[i]);
	}
	return NULL;
}

static json_object *encode_field(const struct dg_field *f, const void *in)
{
	char id[24];
	const char *s;

	switch (f->type) {
	case DG_F_BOOL:
		return json_object_new_boolean(*CAT(in, f->off, bool));
	case DG_F_INT:
		return json_object_new_int64(load_int(f, CAT(in, f->off, void)));
	case DG_F_CONST:
		return json_object_new_int64(f->def);
	case DG_F_CHARS:
		return encode_chars(f, CAT(in, f->off, char));
	case DG_F_ENUM:
		return encode_enum(f, CAT(in, f->off, void));
	case DG_F_NUM: {
		double x;

		memcpy(&x, (const char *)in + f->off, sizeof(x));
		snprintf(id, sizeof(id), "%.3f", x);
		return json_object_new_double_s(x, id);
	}
	case DG_F_STR:
		s = *CAT(in, f->off, char *);
		return s ? json_object_new_string(s) : NULL;
	case DG_F_ID:
		snprintf(id, sizeof(id), "%llu", (unsigned long long)*CAT(in, f->off, uint64_t));
		return json_object_new_string(id);
	case DG_F_OBJ:
		return dg_encode(f->sub, CAT(in, f->off, void));
	default:
		return encode_array(f, in);
	}
}

/*
 * Whether field f of in goes into the JSON: not when its "present" flag is
 * false, its value is the default it may leave out, it is an optional array
 * that is empty or a NULL string, nor when the field it goes with is left out.
 */
static bool written(const struct dg_schema *s, const struct dg_field *f, const void *in)
{
	const struct dg_field *with = f->with ? own_field(s, f->with) : NULL;
	bool array = f->type == DG_F_STRS || f->type == DG_F_OBJS || f->type == DG_F_INTS;

	if (with && !written(s, with, in))
		return false;
	if (f->has_off != DG_NO_FLAG && !*CAT(in, f->has_off, bool))
		return false;
	if ((f->flags & DG_OMIT_DEF) && load_int(f, CAT(in, f->off, void)) == f->def)
		return false;
	if (array && !f->required && *CAT(in, f->n_off, size_t) == 0)
		return false;
	return f->type != DG_F_STR || *CAT(in, f->off, char *) || (f->flags & DG_NULL);
}

static void encode_fields(const struct dg_schema *s, const void *in, json_object *o)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i];
		json_object *v;

		if (!written(s, f, in))
			continue;
		if (f->type == DG_F_EMBED) {
			encode_fields(f->sub, CAT(in, f->off, void), o);
			continue;
		}
		/* NULL only for a DG_NULL string: written as null. */
		v = encode_field(f, in);
		if (v || (f->flags & DG_NULL))
			json_object_object_add(o, f->name, v);
	}
}

json_object *dg_encode(const struct dg_schema *s, const void *in)
{
	json_object *o = json_object_new_object();

	encode_fields(s, in, o);
	return o;
}
