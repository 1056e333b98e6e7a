// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		return json_type_int;
	case DG_F_NUM:
		return json_type_double;
	case DG_F_STR:
	case DG_F_ID:
		return json_type_string;
	case DG_F_STRS:
	case DG_F_OBJS:
		return json_type_array;
	default:
		return json_type_object;
	}
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

static int decode_int(struct decoder *dc, const struct dg_field *f, json_object *v, void *p)
{
	int64_t x = json_object_get_int64(v);

	/* json-c clamps what does not fit; such numbers are never meant. */
	if (x == INT64_MAX || x == INT64_MIN)
		return bad(dc, "'%s' is out of range", f->name);
	if (f->min < f->max && (x < f->min || x > f->max)) {
		char range[64];

		snprintf(range, sizeof(range), " (%lld to %lld)", (long long)f->min,
			 (long long)f->max);
		return bad(dc, "'%s' is out of range%s", f->name, range);
	}
	*(int64_t *)p = x;
	return 0;
}

static int decode_str(struct decoder *dc, const struct dg_field *f, json_object *v, const char **p)
{
	const char *s = json_object_get_string(v);

	/* An embedded NUL would silently cut the string short. */
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return bad(dc, "'%s' contains a NUL character", f->name);
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
	return 0;
}

static int decode_array(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	size_t n = json_object_array_length(v);
	size_t elem = f->type == DG_F_STRS ? sizeof(char *) : f->sub->size;
	char *items = n ? dg_arena_alloc(dc->a, n * elem) : NULL;
	int r = 0;

	if (n && !items)
		return dg_error_set(dc->err, DG_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && r == 0; i++) {
		json_object *e = json_object_array_get_idx(v, i);
		size_t len = path_push(dc, f->name, (long)i);

		if (f->type == DG_F_STRS && !json_object_is_type(e, json_type_string))
			r = bad(dc, "must be a string");
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

static int decode_field(struct decoder *dc, const struct dg_field *f, json_object *v, void *base)
{
	size_t len;
	int r;

	if (!json_object_is_type(v, json_type_of(f->type)) &&
	    !(f->type == DG_F_NUM && json_object_is_type(v, json_type_int)))
		return bad(dc, "'%s' must be %s", f->name, type_word(f->type));
	if (f->has_off != DG_NO_FLAG)
		*AT(base, f->has_off, bool) = true;
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
		} else if (f->required && !json_object_object_get_ex(o, f->name, NULL))
			r = bad(dc, "'%s' is missing", f->name);
		if (r < 0)
			return r;
	}
	return 0;
}

static int decode_obj(struct decoder *dc, const struct dg_schema *s, json_object *o, void *out)
{
	memset(out, 0, s->size);
	json_object_object_foreach (o, key, val) {
		size_t base = 0, flag = DG_NO_FLAG;
		const struct dg_field *f = find_field(s, key, &base, &flag);
		int r;

		if (!f)
			return bad(dc, "unknown field '%s'", key);
		/* JSON null reads as absent, as for optional fields left out. */
		if (json_object_is_type(val, json_type_null))
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
	const char *items = *CAT(in, f->off, char *);

	for (size_t i = 0; i < n; i++) {
		if (f->type == DG_F_STRS) {
			const char *s = ((const char *const *)(const void *)items)[i];

			json_object_array_add(a, json_object_new_string(s ? s : ""));
		} else {
			json_object_array_add(a, dg_encode(f->sub, items + i * f->sub->size));
		}
	}
	return a;
}

static json_object *encode_field(const struct dg_field *f, const void *in)
{
	char id[24];
	const char *s;

	switch (f->type) {
	case DG_F_BOOL:
		return json_object_new_boolean(*CAT(in, f->off, bool));
	case DG_F_INT:
		return json_object_new_int64(*CAT(in, f->off, int64_t));
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

static void encode_fields(const struct dg_schema *s, const void *in, json_object *o)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct dg_field *f = &s->fields[i];
		json_object *v;

		if (f->has_off != DG_NO_FLAG && f->type == DG_F_EMBED &&
		    !*CAT(in, f->has_off, bool))
			continue;
		if (f->type == DG_F_EMBED) {
			encode_fields(f->sub, CAT(in, f->off, void), o);
			continue;
		}
		if (f->has_off != DG_NO_FLAG && !*CAT(in, f->has_off, bool))
			continue;
		if ((f->type == DG_F_STRS || f->type == DG_F_OBJS) && !f->required &&
		    *CAT(in, f->n_off, size_t) == 0)
			continue;
		v = encode_field(f, in);
		if (v)
			json_object_object_add(o, f->name, v);
	}
}

json_object *dg_encode(const struct dg_schema *s, const void *in)
{
	json_object *o = json_object_new_object();

	encode_fields(s, in, o);
	return o;
}
