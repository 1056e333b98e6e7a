// SPDX-License-Identifier: Apache-2.0
/*
 * Strict JSON parsing for everything devgate reads from outside (see
 * jsonutil.h), and small typed getters. It parses only; what the fields
 * mean is the schemas' business (schema.c).
 */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "jsonutil.h"

/* Entries of every object in the tree. */
static size_t tree_keys(json_object *o)
{
	size_t n = 0;

	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach (o, key, val) {
			(void)key;
			n += 1 + tree_keys(val);
		}
	} else if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			n += tree_keys(json_object_array_get_idx(o, i));
	}
	return n;
}

/*
 * Keys in valid JSON text (strings followed by ':'), or SIZE_MAX when a
 * string holds \u0000, which C strings would silently cut.
 */
static size_t text_keys(const char *p, const char *end)
{
	size_t n = 0;

	while (p < end) {
		if (*p++ != '"')
			continue;
		while (p < end && *p != '"') {
			if (*p == '\\' && p + 1 < end) {
				if (p[1] == 'u' && end - p >= 6 && strncmp(p + 2, "0000", 4) == 0)
					return SIZE_MAX;
				p++;
			}
			p++;
		}
		p++;
		while (p < end && isspace((unsigned char)*p))
			p++;
		n += p < end && *p == ':';
	}
	return n;
}

json_object *json_parse_object_why(const char *text, const char **why)
{
	struct json_tokener *tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	size_t len = strlen(text), end = 0, keys;
	enum json_tokener_error e;
	json_object *o = NULL;
	const char *w = NULL;

	if (!tok)
		goto out;
	o = json_tokener_parse_ex(tok, text, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (o && e == json_tokener_success) {
		while (end < len && isspace((unsigned char)text[end]))
			end++;
	}
	if (e == json_tokener_error_depth)
		w = "nested too deep";
	else if (!o || e != json_tokener_success || end != len ||
		 !json_object_is_type(o, json_type_object))
		w = "";
	else if ((keys = text_keys(text, text + len)) == SIZE_MAX)
		w = "a string holds \\u0000";
	/*
	 * json-c keeps the last of duplicate keys, so {"op":"list","op":"grant"}
	 * would be a grant: more keys in the text than in the tree is refused.
	 */
	else if (keys != tree_keys(o))
		w = "a key appears twice in one object";
	if (w) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
out:
	if (why)
		*why = w && *w ? w : NULL;
	return o;
}

json_object *json_parse_object(const char *text)
{
	return json_parse_object_why(text, NULL);
}

const char *json_get_str(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int json_get_int(json_object *o, const char *key, int64_t *ret)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return 0;
	*ret = json_object_get_int64(v);
	return 1;
}

bool json_get_bool(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean(v);
}

void json_add_str(json_object *o, const char *key, const char *s)
{
	json_object_object_add(o, key, s ? json_object_new_string(s) : NULL);
}
