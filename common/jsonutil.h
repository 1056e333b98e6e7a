/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_JSONUTIL_H
#define DEVGATE_JSONUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

/*
 * Parses text that must hold exactly one JSON object, nested at most 16
 * deep, with nothing but white space after it, no key twice in one object
 * and no \u0000 in any string. NULL otherwise.
 */
json_object *json_parse_object(const char *text);
#define JSON_MAX_DEPTH 16
/*
 * The same; when the text is refused for a strictness rule (depth, a key
 * twice, \u0000), *why names the rule in a few words, else it is NULL.
 */
json_object *json_parse_object_why(const char *text, const char **why);

/* Typed field access; absent fields and JSON null read as absent. */
const char *json_get_str(json_object *o, const char *key);
/* 1 and *ret when present, 0 when absent. */
int json_get_int(json_object *o, const char *key, int64_t *ret);
bool json_get_bool(json_object *o, const char *key);

/* Adds key: string, or key: null when s is NULL. */
void json_add_str(json_object *o, const char *key, const char *s);

#endif
