// SPDX-License-Identifier: Apache-2.0
#include <ctype.h>
#include <string.h>

#include "jsonutil.h"

json_object *json_parse_object(const char *text)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	size_t len = strlen(text), end;
	json_object *o;

	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (o && json_tokener_get_error(tok) == json_tokener_success) {
		while (end < len && isspace((unsigned char)text[end]))
			end++;
	}
	if (!o || json_tokener_get_error(tok) != json_tokener_success || end != len ||
	    !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
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
